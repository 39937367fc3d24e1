//! The `arn:` block of the agent configuration. ARN is off in an agent without the block;
//! with it (even `arn: {}`) the agent accepts ARN from the listed neighbors and from its BGP
//! neighbors that name an interface, on the default port. Every key is optional.
//!
//! ```yaml
//! arn:
//!   udp_port: 9961
//!   hold_ms: 1000              # a removal ends by itself unless refreshed (timeout restore)
//!   rate_limit: {per_second: 2000, burst: 200}   # per sender; excess is counted and dropped
//!   neighbors:                 # accepted senders besides BGP neighbors with an interface
//!     - {address: 10.1.0.2, interface: eth1}
//!   paths:                     # path id (far-end router ID) -> destinations behind it
//!     - {path_id: 10.0.0.2, prefixes: [192.0.2.0/24]}
//!   notify: [10.1.0.1]         # upstream neighbors that receive this node's ARNs
//!   refresh_ms: 250            # repeat Types 1/3 while the condition lasts
//!   congestion: {mode: shift, max_cut: 0.5, min_share: 0.0625, damping_ms: 200,
//!                hysteresis: 0.1, memory_ms: 5000, recover_step: 0.125, recover_ms: 250}
//!   multicast: {group: 239.255.0.61, interfaces: [eth1]}
//!   monitor:
//!     interval_us: 100         # queue sampling period (>= 100)
//!     interfaces:
//!       - {interface: eth2, path_id: 10.0.0.2, high_bytes: 30000, low_bytes: 10000,
//!          limit_bytes: 60000, clear_ms: 0}
//! ```

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use super::shift::ShiftConfig;
use super::transport::DEFAULT_PORT;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ArnConfig {
    #[serde(default = "default_port")]
    pub udp_port: u16,
    #[serde(default = "default_hold_ms")]
    pub hold_ms: u64,
    #[serde(default)]
    pub rate_limit: RateLimit,
    #[serde(default)]
    pub neighbors: Vec<ArnNeighbor>,
    #[serde(default)]
    pub paths: Vec<PathPrefixes>,
    #[serde(default)]
    pub notify: Vec<IpAddr>,
    #[serde(default = "default_refresh_ms")]
    pub refresh_ms: u64,
    #[serde(default)]
    pub monitor: Option<MonitorConfig>,
    /// Pass an ARN on to the other ARN neighbors when this node cannot act on it (the
    /// member toward the sender is the last one of its group) and its Path ID is listed
    /// in `paths`: the nodes upstream can. Off by default: it needs Path IDs that mean
    /// the same at every tier (see docs/arn.md).
    #[serde(default)]
    pub propagate: bool,
    /// What a Type 1 does here: shift the member's share by the Metric (default) or take
    /// the whole member out (`mode: remove`); see `arn::shift` and docs/arn.md.
    #[serde(default)]
    pub congestion: ShiftConfig,
    /// Multicast transport (the draft's option): receive ARNs sent to `group` on
    /// `interfaces`, and send this node's ARNs there too.
    #[serde(default)]
    pub multicast: Option<MulticastConfig>,
}

impl MulticastConfig {
    /// `interfaces`, else the interfaces of `neighbors` (each once, in order).
    pub fn resolved_interfaces(&self, neighbors: &[ArnNeighbor]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let from = if self.interfaces.is_empty() {
            neighbors.iter().map(|n| n.interface.clone()).collect()
        } else {
            self.interfaces.clone()
        };
        for i in from {
            if !i.is_empty() && !out.contains(&i) {
                out.push(i);
            }
        }
        out
    }
}

/// `arn.multicast`: the group ARNs are sent to and received on.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MulticastConfig {
    /// IPv4 or IPv6 multicast group (no default: the draft assigns none).
    pub group: IpAddr,
    /// Interfaces to join the group on and send to it from (default: the interfaces of
    /// the accepted ARN neighbors).
    #[serde(default)]
    pub interfaces: Vec<String>,
}

impl Default for ArnConfig {
    fn default() -> Self {
        ArnConfig {
            udp_port: DEFAULT_PORT,
            hold_ms: default_hold_ms(),
            rate_limit: RateLimit::default(),
            neighbors: Vec::new(),
            paths: Vec::new(),
            notify: Vec::new(),
            refresh_ms: default_refresh_ms(),
            monitor: None,
            propagate: false,
            congestion: ShiftConfig::default(),
            multicast: None,
        }
    }
}

impl ArnConfig {
    /// Every sender this node accepts: `neighbors` and then `extra` (the BGP neighbors
    /// that name an interface), the first entry for an address winning.
    pub fn accepted_neighbors(&self, extra: &[ArnNeighbor]) -> Vec<ArnNeighbor> {
        let mut out: Vec<ArnNeighbor> = Vec::new();
        for n in self.neighbors.iter().chain(extra) {
            if !out.iter().any(|m| m.address == n.address) {
                out.push(n.clone());
            }
        }
        out
    }

    pub fn hold(&self) -> Duration {
        Duration::from_millis(self.hold_ms)
    }

    pub fn refresh(&self) -> Duration {
        Duration::from_millis(self.refresh_ms.max(1))
    }

    /// Checks what serde cannot; the error is (text to find the line by, problem).
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.udp_port == 0 {
            return Err(("udp_port".into(), "udp_port must not be 0".into()));
        }
        if self.hold_ms == 0 {
            return Err(("hold_ms".into(), "hold_ms must be positive".into()));
        }
        if self.rate_limit.per_second == 0 || self.rate_limit.burst == 0 {
            return Err((
                "rate_limit".into(),
                "rate_limit per_second and burst must be positive".into(),
            ));
        }
        self.congestion.check()?;
        if let Some(m) = &self.multicast {
            if !m.group.is_multicast() {
                return Err((
                    "multicast".into(),
                    format!("multicast.group {} is not a multicast address", m.group),
                ));
            }
        }
        if let Some(m) = &self.monitor {
            for i in &m.interfaces {
                if i.low_bytes >= i.high_bytes {
                    return Err((
                        i.interface.clone(),
                        format!(
                            "monitor interface {}: low_bytes ({}) must be below high_bytes ({})",
                            i.interface, i.low_bytes, i.high_bytes
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn default_port() -> u16 {
    DEFAULT_PORT
}
fn default_hold_ms() -> u64 {
    1000
}
fn default_refresh_ms() -> u64 {
    250
}

/// A sender this node accepts ARN from: its address on the shared link and the local
/// interface of that link (the ARN must arrive there, with TTL 255).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ArnNeighbor {
    pub address: IpAddr,
    pub interface: String,
}

/// Destinations reached through the node whose router ID is `path_id`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PathPrefixes {
    pub path_id: Ipv4Addr,
    pub prefixes: Vec<IpNet>,
}

/// Token bucket per sender.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub per_second: u32,
    pub burst: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            per_second: 2000,
            burst: 200,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MonitorConfig {
    #[serde(default = "default_interval_us")]
    pub interval_us: u64,
    /// Run the monitor thread under SCHED_FIFO (priority `realtime_priority`, 0 = normal
    /// scheduling): on a busy host a normal thread waits for a CPU before it can send the
    /// ARN. It sleeps between samples, so it never holds a CPU for long.
    #[serde(default = "default_realtime_priority")]
    pub realtime_priority: u8,
    pub interfaces: Vec<MonitoredInterface>,
}

impl MonitorConfig {
    /// Watches `interfaces` every `interval_us`, at the default scheduling priority.
    pub fn new(interval_us: u64, interfaces: Vec<MonitoredInterface>) -> MonitorConfig {
        MonitorConfig {
            interval_us,
            realtime_priority: default_realtime_priority(),
            interfaces,
        }
    }
}

fn default_interval_us() -> u64 {
    1000
}

fn default_realtime_priority() -> u8 {
    10
}

impl MonitorConfig {
    /// The sampling period, never below 100 µs.
    pub fn interval(&self) -> Duration {
        Duration::from_micros(self.interval_us.max(100))
    }
}

/// One egress interface whose root qdisc backlog is watched.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MonitoredInterface {
    pub interface: String,
    /// Router ID of the node at the far end of this interface's link.
    pub path_id: Ipv4Addr,
    /// Backlog (bytes) at or above which the queue is congested (Type 1).
    pub high_bytes: u32,
    /// Backlog (bytes) at or below which congestion has ended (Type 2). Must be < high.
    pub low_bytes: u32,
    /// Type 2 only once the backlog stayed at or below `low_bytes` this long (default 0:
    /// at once). Damps the flapping of a link whose traffic left on Type 1 and returns on
    /// Type 2: the path is offered again at most every `clear_ms`.
    #[serde(default)]
    pub clear_ms: u64,
    /// Backlog that maps to Metric 255 (default: 2 x high_bytes).
    #[serde(default)]
    pub limit_bytes: Option<u32>,
    /// Upstream neighbors to notify (default: `arn.notify`).
    #[serde(default)]
    pub notify: Vec<IpAddr>,
}

impl MonitoredInterface {
    pub fn limit(&self) -> u32 {
        self.limit_bytes
            .unwrap_or(self.high_bytes.saturating_mul(2))
            .max(1)
    }
}

impl ArnConfig {
    /// Path ID -> the prefixes behind it (`paths:`, entries of one ID merged): what both
    /// receivers (the agent's and the XDP program's) look a Path ID up in.
    pub fn path_table(&self) -> BTreeMap<u32, Vec<IpNet>> {
        let mut table: BTreeMap<u32, Vec<IpNet>> = BTreeMap::new();
        for p in &self.paths {
            table
                .entry(u32::from(p.path_id))
                .or_default()
                .extend(p.prefixes.iter().copied());
        }
        table
    }
}

/// Whether a group for `prefix` lies behind a Path ID whose prefixes are `behind`: the
/// prefix is inside one of them, or contains one (an aggregate over several paths). The
/// one rule of Path ID coverage, for every receiver.
pub fn path_covers(behind: &[IpNet], prefix: &IpNet) -> bool {
    behind
        .iter()
        .any(|p| p.contains(prefix) || prefix.contains(&p.network()))
}

impl ArnConfig {
    /// Fills each monitored interface's empty `notify` with the default (see module docs).
    pub fn resolve_notify(&mut self, neighbors: &[ArnNeighbor]) {
        let global = self.notify.clone();
        let multicast = self.multicast.is_some();
        let all: Vec<ArnNeighbor> = self.neighbors.iter().chain(neighbors).cloned().collect();
        if let Some(m) = self.monitor.as_mut() {
            for i in &mut m.interfaces {
                if !i.notify.is_empty() {
                    continue;
                }
                i.notify = if global.is_empty() && multicast {
                    Vec::new() // the group reaches the neighbors (see `arn.multicast`)
                } else if global.is_empty() {
                    let mut list: Vec<IpAddr> = all
                        .iter()
                        .filter(|n| n.interface != i.interface)
                        .map(|n| n.address)
                        .collect();
                    list.dedup();
                    list
                } else {
                    global.clone()
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example_parses() {
        let text = r#"
udp_port: 9961
hold_ms: 1000
rate_limit: {per_second: 2000, burst: 200}
neighbors:
  - {address: 10.1.0.2, interface: eth1}
paths:
  - {path_id: 10.0.0.2, prefixes: [192.0.2.0/24]}
notify: [10.1.0.1]
refresh_ms: 250
monitor:
  interval_us: 100
  interfaces:
    - {interface: eth2, path_id: 10.0.0.2, high_bytes: 30000, low_bytes: 10000, limit_bytes: 60000}
"#;
        let c: ArnConfig = serde_norway::from_str(text).unwrap();
        assert_eq!(c.paths[0].path_id, Ipv4Addr::new(10, 0, 0, 2));
        let m = c.monitor.unwrap();
        assert_eq!(m.interval(), Duration::from_micros(100));
        assert_eq!(m.interfaces[0].limit(), 60000);
        let empty: ArnConfig = serde_norway::from_str("{}").unwrap();
        assert_eq!(empty, ArnConfig::default());
        assert_eq!(
            empty.congestion.mode,
            super::super::shift::CongestionMode::Shift
        );
        let c: ArnConfig = serde_norway::from_str(
            "{congestion: {mode: remove}, multicast: {group: 239.255.0.61, interfaces: [eth1]}}",
        )
        .unwrap();
        assert_eq!(
            c.congestion.mode,
            super::super::shift::CongestionMode::Remove
        );
        assert!(c.check().is_ok());
        let c: ArnConfig = serde_norway::from_str("{multicast: {group: 10.0.0.1}}").unwrap();
        assert!(c.check().unwrap_err().1.contains("not a multicast address"));
    }
}
