//! `fare set bandwidth (--neighbor ADDR | --interface IF) GBPS|auto`: run-time
//! changes to a running agent through its management API.

use super::conn::{status_error, Conn};
use super::InputError;
use fare_agent::mgmt::pb;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Set the bandwidth of the links to a neighbor (or of every neighbor over an
    /// interface), as a lane failure changes a port's speed. The agent decides every
    /// prefix again and re-advertises at once; no restart, no session reset. The value
    /// overrides `bandwidth_gbps` and the interface speed until the agent restarts (or
    /// `auto` goes back to them: the interface speed).
    Bandwidth(BandwidthArgs),
}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["neighbor", "interface"])))]
pub struct BandwidthArgs {
    /// The neighbor's address (as in `neighbors:`).
    #[arg(long)]
    pub neighbor: Option<String>,
    /// Every neighbor whose `interface` is this one.
    #[arg(long)]
    pub interface: Option<String>,
    /// Gbps (positive), or `auto`: the interface speed again.
    pub gbps: String,
    /// Print the neighbors changed as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: Command, conn: &Conn) -> anyhow::Result<()> {
    let Command::Bandwidth(a) = command;
    let gbps = parse_gbps(&a.gbps).map_err(InputError)?;
    if let Some(n) = &a.neighbor {
        n.parse::<std::net::IpAddr>()
            .map_err(|_| InputError(format!("--neighbor `{n}`: not an IP address")))?;
    }
    let set = conn.run(async |mut c| {
        let r = c
            .set_bandwidth(pb::SetBandwidthRequest {
                neighbor: a.neighbor.clone().unwrap_or_default(),
                interface: a.interface.clone().unwrap_or_default(),
                gbps,
            })
            .await;
        match r {
            Ok(r) => Ok(r.into_inner().neighbors),
            // The agent's refusal of the request is the user's input.
            Err(s) => Err(status_error(s)),
        }
    })?;
    if a.json {
        let list: Vec<serde_json::Value> = set
            .iter()
            .map(|n| serde_json::json!({"address": n.address, "bandwidth_gbps": n.bandwidth_gbps}))
            .collect();
        crate::outln!("{}", serde_json::to_string_pretty(&list)?)?;
    } else {
        for n in &set {
            match n.bandwidth_gbps {
                Some(g) => crate::outln!("{}: {g} Gbps", n.address)?,
                None => crate::outln!(
                    "{}: no bandwidth (the interface reports no speed)",
                    n.address
                )?,
            }
        }
    }
    Ok(())
}

/// `GBPS` (finite, positive) -> Some, `auto` -> None.
pub fn parse_gbps(text: &str) -> Result<Option<f64>, String> {
    if text.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    match text.parse::<f64>() {
        Ok(g) if g.is_finite() && g > 0.0 => Ok(Some(g)),
        _ => Err(format!(
            "`{text}`: bandwidth must be a positive number of Gbps or `auto`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gbps_values() {
        assert_eq!(parse_gbps("75"), Ok(Some(75.0)));
        assert_eq!(parse_gbps("12.5"), Ok(Some(12.5)));
        assert_eq!(parse_gbps("AUTO"), Ok(None));
        for bad in ["0", "-1", "nan", "inf", "fast", ""] {
            assert!(parse_gbps(bad).is_err(), "{bad}");
        }
    }
}
