//! Lookups behind the filtered views: which prefix a route query means, and what the
//! running configuration has changed since it was loaded.

use super::{pb, views};
use crate::state::AgentState;
use crate::AgentContext;
use ipnet::IpNet;
use tonic::Status;

/// The prefix `text` names: a prefix as written (host bits cleared), or for an address
/// the longest prefix with a route that contains it.
pub fn route_prefix(state: &AgentState, text: &str) -> Result<IpNet, Status> {
    if let Ok(p) = text.parse::<IpNet>() {
        return Ok(p.trunc());
    }
    let addr: std::net::IpAddr = text.parse().map_err(|_| {
        Status::invalid_argument(format!("`{text}`: not a prefix or an IP address"))
    })?;
    state
        .routes
        .keys()
        .map(|(p, _)| *p)
        .filter(|p| p.contains(&addr))
        .max_by_key(|p| p.prefix_len())
        .ok_or_else(|| Status::not_found(format!("no route contains {addr}")))
}

/// The routes of `prefix`, one per source.
pub fn routes_of(state: &AgentState, prefix: IpNet) -> Vec<pb::Route> {
    state
        .routes
        .range((prefix, crate::state::RouteSource::Bgp)..)
        .take_while(|((p, _), _)| *p == prefix)
        .map(|(_, r)| views::route(r))
        .collect()
}

/// What differs from the configuration in force: bandwidths set at run time, neighbors
/// shut down or drained; then the keys the file changed that wait for a restart.
pub fn run_time_changes(ctx: &AgentContext) -> Vec<String> {
    let config = ctx.running.config();
    let pending = ctx.running.pending();
    let state = ctx.state.read();
    let mut out = Vec::new();
    for c in &config.neighbors {
        let Some(n) = state.neighbors.get(&c.address) else {
            continue;
        };
        if n.bandwidth_gbps != c.bandwidth_gbps {
            let gbps = |g: Option<f64>| g.map_or("the interface speed".into(), |g| format!("{g}"));
            out.push(format!(
                "neighbor {}: bandwidth_gbps {} set at run time (file: {})",
                c.address,
                gbps(n.bandwidth_gbps),
                gbps(c.bandwidth_gbps)
            ));
        }
        if let Some(m) = &n.admin_down {
            out.push(format!(
                "neighbor {}: shut down at run time ({m:?})",
                c.address
            ));
        }
        if n.drained {
            out.push(format!("neighbor {}: drained at run time", c.address));
        }
    }
    if !pending.is_empty() {
        out.push(format!(
            "changed in the file, in force after a restart: {}",
            pending.join(", ")
        ));
    }
    out
}
