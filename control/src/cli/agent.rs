//! `fare agent --config FILE`: runs the per-node agent until SIGTERM/SIGINT.

use anyhow::Context;
use fare_agent::{self, config::AgentConfig};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(
    long_about = "Runs the per-node agent: programs the data plane backend \
(`dataplane.kind`: xdp, kernel, p4runtime or none) with the `static:` groups and the groups \
computed from BGP, and serves the management API on `management.socket` (see `fare show`). \
SIGTERM or SIGINT stops the agent and leaves the data plane forwarding. SIGHUP re-reads \
the configuration file and applies changed neighbor `bandwidth_gbps` at once (other changed \
keys are logged: they need a restart). A bad configuration \
exits with code 2 and one line naming the file, line and problem."
)]
pub struct Args {
    /// Agent configuration file (YAML; every key: docs/configuration.md).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Only load and check the configuration, then exit.
    #[arg(long)]
    pub check: bool,
    /// With --check: print `{"file", "ok", "neighbors", "static_groups", "dataplane"}`.
    #[arg(long, requires = "check")]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = AgentConfig::load(&args.config)?;
    if args.check && args.json {
        let v = serde_json::json!({"file": args.config.display().to_string(), "ok": true,
            "neighbors": config.neighbors.len(), "static_groups": config.static_groups.len(),
            "dataplane": config.dataplane.kind()});
        println!("{v}");
        return Ok(());
    }
    if args.check {
        println!(
            "{}: ok ({} neighbors, {} static groups, data plane {})",
            args.config.display(),
            config.neighbors.len(),
            config.static_groups.len(),
            config.dataplane.kind()
        );
        return Ok(());
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(fare_agent::run(config, Some(args.config.clone())))?;
    Ok(())
}
