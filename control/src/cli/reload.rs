//! `fare reload [--json]`: the running agent reads its configuration file again and
//! applies it, as `systemctl reload` (SIGHUP) does, and says what it did: changed or
//! not, and the keys that wait for a restart. A file that does not load changes nothing
//! and exits 2 with its FILE:LINE: problem.

use super::conn::{print_json, status_error, Conn};
use fare_agent::mgmt::pb;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// `{"changed": bool, "pending": [keys]}`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, conn: &Conn) -> anyhow::Result<()> {
    let r = conn.run(async |mut c| {
        Ok(c.reload(pb::ReloadRequest {})
            .await
            .map_err(status_error)?
            .into_inner())
    })?;
    if args.json {
        return print_json(&serde_json::json!({"changed": r.changed, "pending": r.pending}));
    }
    crate::outln!(
        "{}",
        if r.changed {
            "reloaded: the changes are applied"
        } else {
            "reloaded: the file is unchanged"
        }
    )?;
    for key in &r.pending {
        crate::outln!("waits for a restart: {key}")?;
    }
    Ok(())
}
