//! `fare neighbor shutdown|enable|reset ADDR` and `fare drain LINK [--undo]`: operational
//! actions on a running agent's BGP sessions and links.

use super::conn::{print_json, status_error, Conn};
use fare_agent::mgmt::json::neighbor_json;
use fare_agent::mgmt::pb;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Close the session with Cease / Administrative Shutdown (RFC 4486) carrying
    /// --message as the shutdown communication (RFC 8203), and keep it down (no
    /// connection either way) until `enable`. Its routes are withdrawn at once.
    Shutdown {
        /// The neighbor's address.
        #[arg(value_name = "ADDR")]
        peer: String,
        /// Shutdown communication shown to the peer's operator (at most 255 octets; a
        /// longer one is refused).
        #[arg(long, default_value = "")]
        message: String,
        /// Print the neighbor afterwards as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Start a neighbor shut down with `shutdown` again.
    Enable {
        /// The neighbor's address.
        #[arg(value_name = "ADDR")]
        peer: String,
        /// Print the neighbor afterwards as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Soft reset: ask the peer to send its routes again (ROUTE-REFRESH, RFC 2918) and
    /// send it every route again; the session stays up.
    Reset {
        /// The neighbor's address.
        #[arg(value_name = "ADDR")]
        peer: String,
        /// Print the neighbor afterwards as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: Command, conn: &Conn) -> anyhow::Result<()> {
    let (n, json) = conn.run(async |mut c| {
        let (r, json) = match command {
            Command::Shutdown {
                peer,
                message,
                json,
            } => {
                let req = pb::ShutdownNeighborRequest {
                    address: peer,
                    message,
                };
                (c.shutdown_neighbor(req).await, json)
            }
            Command::Enable { peer, json } => (
                c.enable_neighbor(pb::NeighborRequest { address: peer })
                    .await,
                json,
            ),
            Command::Reset { peer, json } => (
                c.reset_neighbor(pb::NeighborRequest { address: peer })
                    .await,
                json,
            ),
        };
        let n = r.map_err(status_error)?.into_inner().neighbor;
        Ok((n.unwrap_or_default(), json))
    })?;
    if json {
        print_json(&neighbor_json(&n))
    } else {
        let mut line = format!("{}: {}", n.address, n.state);
        if n.admin_down {
            line.push_str(" (shut down)");
        }
        crate::outln!("{line}")?;
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct DrainArgs {
    /// A neighbor address, or an interface (every neighbor over it).
    pub link: String,
    /// Undrain: no GRACEFUL_SHUTDOWN, the link's paths used again.
    #[arg(long)]
    pub undo: bool,
    /// Print the neighbors drained as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Drains a link before maintenance: what this node advertises over it carries
/// GRACEFUL_SHUTDOWN (RFC 8326) and its paths through it are used only as the last ones,
/// so traffic moves to the other links both ways (docs/agent.md).
pub fn drain(a: DrainArgs, conn: &Conn) -> anyhow::Result<()> {
    let is_addr = a.link.parse::<std::net::IpAddr>().is_ok();
    let req = pb::DrainRequest {
        neighbor: if is_addr {
            a.link.clone()
        } else {
            String::new()
        },
        interface: if is_addr {
            String::new()
        } else {
            a.link.clone()
        },
        undo: a.undo,
    };
    let r = conn.run(async |mut c| Ok(c.drain(req).await.map_err(status_error)?.into_inner()))?;
    if a.json {
        print_json(&serde_json::json!({"neighbors": r.neighbors, "drained": !a.undo}))
    } else {
        let what = if a.undo { "undrained" } else { "drained" };
        crate::outln!("{what}: {}", r.neighbors.join(", "))?;
        Ok(())
    }
}
