//! What the agent knows, shared between the protocols that write it (BGP, static
//! configuration) and the readers (management API, metrics).
//!
//! A plain `std::sync::RwLock`: writers hold it for a few assignments and never across
//! an `.await`, so there is no need for an async lock.

use super::config::AgentConfig;
use ipnet::IpNet;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

/// RFC 4271 §8.2.2 session states: the BGP state machine's own.
pub use fare_bgp::fsm::State as SessionState;

/// One configured neighbor and its session.
#[derive(Clone, Debug)]
pub struct NeighborStatus {
    pub address: IpAddr,
    pub remote_as: u32,
    pub interface: Option<String>,
    /// Link bandwidth in use (configured, or read from the interface speed).
    pub bandwidth_gbps: Option<f64>,
    pub color: Option<u32>,
    pub state: SessionState,
    /// When `state` was entered.
    pub since: Instant,
    /// UNIX seconds when the session last reached Established (kept after it ends).
    pub established_at: Option<u64>,
    /// Last error on the session (NOTIFICATION, socket error), kept after recovery.
    pub last_error: Option<String>,
    /// Prefixes announced in the UPDATEs received (a counter: re-announcements count).
    pub prefixes_received: u64,
    /// Prefixes from this neighbor in the Adj-RIB-In now (accepted by the import rules).
    pub prefixes_accepted: u64,
    /// Prefixes advertised to this neighbor now (its Adj-RIB-Out).
    pub prefixes_advertised: u64,
    /// Transitions out of Established.
    pub flaps: u64,
    pub updates_received: u64,
    pub updates_sent: u64,
    /// UPDATEs with a malformed attribute handled per RFC 7606 (not session resets).
    pub malformed_updates: u64,
    /// Link Bandwidth communities ignored for an unusable value (RFC 10005).
    pub link_bandwidth_ignored: u64,
    pub notifications_sent: u64,
    pub notifications_received: u64,
    /// Shut down by the operator (`fare neighbor shutdown`), with the message given.
    pub admin_down: Option<String>,
    /// Drained by the operator (`fare drain`).
    pub drained: bool,
}

/// Where a route came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RouteSource {
    /// Learned from BGP neighbors.
    Bgp,
    /// A `static:` group of the configuration.
    Static,
    /// Originated by this node (`prefixes:`).
    Local,
}

impl fmt::Display for RouteSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RouteSource::Bgp => "bgp",
            RouteSource::Static => "static",
            RouteSource::Local => "local",
        })
    }
}

/// One path of a route.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoutePath {
    pub next_hop: Option<IpAddr>,
    /// The neighbor the path was learned from.
    pub neighbor: Option<IpAddr>,
    pub as_path: Vec<u32>,
    /// The bandwidth the FARE decision used for the path (the received value capped by
    /// the link), Gbps.
    pub path_bandwidth_gbps: Option<f64>,
    /// The Path Bandwidth value as received (infinite: "max"), Gbps.
    pub received_gbps: Option<f64>,
    /// Part of the installed multipath group.
    pub selected: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RouteStatus {
    pub prefix: IpNet,
    pub source: RouteSource,
    pub paths: Vec<RoutePath>,
}

/// Everything the management API and the metrics show, except the data plane groups
/// (those are read from the backend itself, with their counters).
#[derive(Debug)]
pub struct AgentState {
    pub name: String,
    pub router_id: std::net::Ipv4Addr,
    pub asn: u32,
    pub dataplane: &'static str,
    pub started: Instant,
    pub neighbors: BTreeMap<IpAddr, NeighborStatus>,
    /// Keyed by (prefix, source): a static group and a BGP route may name the same prefix.
    pub routes: BTreeMap<(IpNet, RouteSource), RouteStatus>,
    /// Set by the ARN task when `arn:` is configured.
    pub arn: Option<crate::arn_status::ArnStatus>,
}

impl NeighborStatus {
    /// A neighbor as configured, before its session starts: Idle, no counters.
    pub fn configured(n: &crate::config::NeighborConfig, now: Instant) -> NeighborStatus {
        NeighborStatus {
            address: n.address,
            remote_as: n.remote_as,
            interface: n.interface.clone(),
            bandwidth_gbps: n.bandwidth_gbps,
            color: n.color,
            state: SessionState::Idle,
            since: now,
            established_at: None,
            last_error: None,
            prefixes_received: 0,
            prefixes_accepted: 0,
            prefixes_advertised: 0,
            flaps: 0,
            updates_received: 0,
            updates_sent: 0,
            malformed_updates: 0,
            link_bandwidth_ignored: 0,
            notifications_sent: 0,
            notifications_received: 0,
            admin_down: None,
            drained: false,
        }
    }
}

impl AgentState {
    /// The state at start: every configured neighbor Idle, originated prefixes and
    /// static groups as routes.
    pub fn from_config(config: &AgentConfig, dataplane: &'static str) -> AgentState {
        let now = Instant::now();
        let neighbors = config
            .neighbors
            .iter()
            .map(|n| (n.address, NeighborStatus::configured(n, now)))
            .collect();
        let mut state = AgentState {
            name: config.name.clone(),
            router_id: config.router_id,
            asn: config.asn,
            dataplane,
            started: now,
            neighbors,
            routes: BTreeMap::new(),
            arn: None,
        };
        for prefix in &config.prefixes {
            state.set_route(RouteStatus {
                prefix: *prefix,
                source: RouteSource::Local,
                paths: vec![RoutePath {
                    selected: true,
                    ..Default::default()
                }],
            });
        }
        state
    }

    /// Records a session state change (logged by the caller's protocol code).
    pub fn set_neighbor_state(
        &mut self,
        address: IpAddr,
        state: SessionState,
        error: Option<String>,
    ) {
        if let Some(n) = self.neighbors.get_mut(&address) {
            if n.state != state {
                n.state = state;
                n.since = Instant::now();
            }
            if error.is_some() {
                n.last_error = error;
            }
        }
    }

    /// Takes a session's state and counters from the BGP speaker's view of it.
    pub fn update_neighbor(&mut self, s: &fare_bgp::neighbor::NeighborStatus) {
        self.set_neighbor_state(s.address, s.state, s.last_error.clone());
        if let Some(view) = self.neighbors.get_mut(&s.address) {
            view.updates_received = s.updates_received;
            view.updates_sent = s.updates_sent;
            view.prefixes_received = s.prefixes_received;
            view.prefixes_accepted = s.prefixes_accepted;
            view.prefixes_advertised = s.prefixes_advertised;
            view.flaps = s.flaps;
            view.established_at = s.established_at;
            view.malformed_updates = s.malformed_updates;
            view.link_bandwidth_ignored = s.link_bandwidth_ignored;
            view.notifications_sent = s.notifications_sent;
            view.notifications_received = s.notifications_received;
        }
    }

    pub fn set_route(&mut self, route: RouteStatus) {
        self.routes.insert((route.prefix, route.source), route);
    }

    pub fn remove_route(&mut self, prefix: IpNet, source: RouteSource) {
        self.routes.remove(&(prefix, source));
    }
}

/// The shared handle: cheap to clone.
#[derive(Clone, Debug)]
pub struct SharedState(Arc<RwLock<AgentState>>);

impl SharedState {
    pub fn new(state: AgentState) -> Self {
        SharedState(Arc::new(RwLock::new(state)))
    }

    /// Read access. A writer that panicked leaves the data readable (no poisoning
    /// cascade: the state is plain data).
    pub fn read(&self) -> RwLockReadGuard<'_, AgentState> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, AgentState> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The speaker's counters reach the agent's view of the neighbor, state included.
    #[test]
    fn update_neighbor_takes_state_and_counters() {
        let config: AgentConfig = fare_model::yamlfile::parse(
            std::path::Path::new("a.yaml"),
            "name: l1\nrouter_id: 10.0.0.1\nasn: 65001\nneighbors:\n  - {address: 10.1.0.2, remote_as: 65100}\n",
        )
        .unwrap();
        let mut state = AgentState::from_config(&config, "none");
        let address: IpAddr = "10.1.0.2".parse().unwrap();
        let mut s = fare_bgp::neighbor::NeighborStatus::new(address, 65100);
        s.state = SessionState::Established;
        s.prefixes_received = 7;
        s.prefixes_accepted = 5;
        s.prefixes_advertised = 3;
        s.flaps = 2;
        state.update_neighbor(&s);
        let n = &state.neighbors[&address];
        assert_eq!(n.state, SessionState::Established);
        assert_eq!(
            (
                n.prefixes_received,
                n.prefixes_accepted,
                n.prefixes_advertised,
                n.flaps
            ),
            (7, 5, 3, 2)
        );
    }
}
