//! `fare agent --config FILE`: runs the per-node agent until SIGTERM/SIGINT.

use super::conn::Conn;
use super::InputError;
use anyhow::Context;
use std::path::PathBuf;

/// The long description of `fare agent --help` and of its manual page (set on the
/// subcommand: a doc comment there would replace one set here).
pub const LONG_ABOUT: &str = "Runs the per-node agent: programs the data plane backend \
(`dataplane.kind`: xdp, kernel, p4runtime or none) with the `static:` groups and the groups \
computed from BGP, and serves the management API on `management.socket` (see `fare show`). \
SIGTERM or SIGINT stops the agent and leaves the data plane forwarding. SIGHUP (or `fare reload`) re-reads \
the configuration file and applies at once the neighbors added, removed or changed (a \
changed session parameter resets that session only), their `bandwidth_gbps`, the \
`prefixes`, the `static` groups, the session timers, `fare.group_mode`, `log` (unless \
--log or FARE_LOG set the filter) and the ARN monitor's thresholds, without resetting \
another session \
(other changed keys are logged and listed by `fare show config`: they need a restart). A \
bad configuration exits with code 2 and one line naming the file, line and problem; \
`--check` does not look at the host, the start does (a missing interface of a link-local \
neighbor, or of the kernel data plane, exits with code 1 and one line). `--socket PATH` on \
this command line serves the management API on PATH instead of `management.socket`.";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Agent configuration file (YAML; its keys: fare.yaml(5)).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Only load and check the configuration, then exit.
    #[arg(long)]
    pub check: bool,
    /// With --check: print `{"file", "ok", "neighbors", "static_groups", "dataplane"}`.
    #[arg(long, requires = "check")]
    pub json: bool,
}

/// What the global options mean to `fare agent`: `--socket` on its command line serves
/// the management API there instead of `management.socket`; the client-only options
/// (`--address`, `--tls-*`) are refused rather than ignored. Environment variables
/// (`FARE_SOCKET`, `FARE_ADDRESS`) are for clients and not read by the agent.
#[derive(Debug, Default)]
pub struct Flags {
    pub socket: Option<PathBuf>,
    /// The log filter `--log` or FARE_LOG gave (then the file's `log` key is not used).
    pub log: Option<String>,
}

pub fn flags(matches: &clap::ArgMatches, conn: &Conn) -> anyhow::Result<Flags> {
    let given = |id: &str| {
        matches!(
            matches.value_source(id),
            Some(clap::parser::ValueSource::CommandLine)
        )
    };
    for (id, flag) in [
        ("address", "--address"),
        ("tls_cert", "--tls-cert"),
        ("tls_key", "--tls-key"),
        ("tls_ca", "--tls-ca"),
    ] {
        if given(id) {
            return Err(InputError(format!(
                "fare agent: {flag} is an option of the management API's clients; the agent's \
                 TCP listener is management.address and management.tls in its configuration"
            ))
            .into());
        }
    }
    let log = matches!(
        matches.value_source("log"),
        Some(clap::parser::ValueSource::CommandLine | clap::parser::ValueSource::EnvVariable)
    );
    Ok(Flags {
        socket: given("socket").then(|| conn.socket.clone()),
        log: log
            .then(|| matches.get_one::<String>("log").cloned())
            .flatten(),
    })
}

/// The filter without `--log`, FARE_LOG or the file's `log` key.
pub const DEFAULT_LOG: &str = "info";

pub fn run(args: Args, flags: Flags) -> anyhow::Result<()> {
    let source = fare_agent::reload::Source {
        path: args.config.clone(),
        socket: flags.socket,
        log: Some(fare_agent::reload::LogControl {
            command_line: flags.log,
            default: DEFAULT_LOG.into(),
            set: std::sync::Arc::new(super::set_log_filter),
        }),
    };
    let config = source.load()?;
    if args.check && args.json {
        let v = serde_json::json!({"file": args.config.display().to_string(), "ok": true,
            "neighbors": config.neighbors.len(), "static_groups": config.static_groups.len(),
            "dataplane": config.dataplane.kind()});
        crate::outln!("{v}")?;
        return Ok(());
    }
    if args.check {
        crate::outln!(
            "{}: ok ({} neighbors, {} static groups, data plane {})",
            args.config.display(),
            config.neighbors.len(),
            config.static_groups.len(),
            config.dataplane.kind()
        )?;
        return Ok(());
    }
    // The file's filter, unless the command line chose one (the default is in force).
    if let (Some(log), Some(filter)) = (&source.log, config.log.as_deref()) {
        log.apply(Some(filter));
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(fare_agent::run(config, Some(source)))?;
    Ok(())
}
