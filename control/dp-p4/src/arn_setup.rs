//! The agent's `arn:` block on a P4 switch: the pipeline receives and generates ARNs
//! itself (fare.p4's `arn_receive`, `arn_monitor`), so the agent programs its tables at
//! start instead of leaving them to the API:
//!
//! - `hold_ms` -> every ARN path entry's hold time (`set_arn_hold`);
//! - every accepted neighbor (`arn.neighbors` and BGP neighbors with an interface) on a
//!   switch port x every `arn.paths` entry -> `map_arn_path(interface, path_id, prefixes)`:
//!   an ARN arriving there with that Path ID removes (1/3) or restores (2/4) the members of
//!   those prefixes that leave through that port. The table matches Path IDs exactly, so
//!   Path ID 0 ("every path through the sender") is left to the agent's receiver;
//! - the addresses of every switch port's interface, and the ARN multicast group ->
//!   `set_local_addresses`: ARNs sent there are the switch's to act on; the pipeline
//!   forwards an ARN to any other address like any packet;
//! - every `arn.monitor` interface on a switch port -> `monitor_port`: the thresholds and
//!   the Metric's limit in packets (the switch measures its queue in packets: bytes /
//!   1500; high at least 1), `refresh_ms` as the refresh (and probe) interval, the far
//!   end's router ID as Path ID, and as targets the interface's `notify` neighbors (by
//!   default every other ARN/BGP neighbor) with their MAC (ARP/NDP in this namespace) and
//!   our address on their interface as the ARN's source.
//!
//! Failures are logged per entry and do not stop the agent (the user-space receiver and
//! monitor still run).

use crate::fare::P4RuntimeDataplane;
use crate::program::QueueThresholds;
use fare_arn::config::{ArnConfig, ArnNeighbor};
use fare_dataplane::MacAddr;
use ipnet::IpNet;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use tracing::{info, warn};

/// Bytes per packet when turning the monitor's byte thresholds into queue depths.
pub const BYTES_PER_PACKET: u32 = 1500;

/// What to write, computed from the configuration alone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ArnSetup {
    pub hold: Duration,
    /// (interface, Path ID, prefixes).
    pub paths: Vec<(String, Ipv4Addr, Vec<IpNet>)>,
    pub monitors: Vec<PortMonitor>,
    /// Interfaces of the switch ports, whose addresses are the switch's own.
    pub port_interfaces: Vec<String>,
    /// The ARN multicast group, also the switch's own when configured.
    pub multicast_group: Option<IpAddr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PortMonitor {
    pub interface: String,
    pub thresholds: QueueThresholds,
    pub path_id: Ipv4Addr,
    /// (interface, neighbor address) of every upstream neighbor to notify.
    pub targets: Vec<(String, Ipv4Addr)>,
}

/// The setup for switch `ports` from the `arn:` block and the BGP neighbors with an
/// interface.
pub fn plan(arn: &ArnConfig, bgp: &[ArnNeighbor], ports: &BTreeMap<String, u32>) -> ArnSetup {
    let neighbors = arn.accepted_neighbors(bgp);
    let on_switch: Vec<&ArnNeighbor> = neighbors
        .iter()
        .filter(|n| ports.contains_key(&n.interface))
        .collect();
    let mut paths = Vec::new();
    for n in &on_switch {
        for p in arn.paths.iter().filter(|p| !p.path_id.is_unspecified()) {
            if !paths
                .iter()
                .any(|(i, id, _): &(String, Ipv4Addr, Vec<IpNet>)| {
                    *i == n.interface && *id == p.path_id
                })
            {
                paths.push((n.interface.clone(), p.path_id, p.prefixes.clone()));
            }
        }
    }
    let mut resolved = arn.clone();
    resolved.resolve_notify(bgp);
    let monitors = resolved
        .monitor
        .iter()
        .flat_map(|m| m.interfaces.iter())
        .filter(|i| ports.contains_key(&i.interface))
        .map(|i| PortMonitor {
            interface: i.interface.clone(),
            thresholds: QueueThresholds {
                high: i.high_bytes.div_ceil(BYTES_PER_PACKET).max(1),
                low: i.low_bytes / BYTES_PER_PACKET,
                // At most MAX_LIMIT_PACKETS, at least 1: the monitor entry's builder bounds it.
                limit: i.limit() / BYTES_PER_PACKET,
                refresh: arn.refresh(),
            },
            path_id: i.path_id,
            targets: i
                .notify
                .iter()
                .filter_map(|a| match a {
                    IpAddr::V4(v4) => on_switch
                        .iter()
                        .find(|n| n.address == *a)
                        .map(|n| (n.interface.clone(), *v4)),
                    IpAddr::V6(_) => None, // the pipeline builds IPv4 ARNs only
                })
                .collect(),
        })
        .collect();
    ArnSetup {
        hold: arn.hold(),
        paths,
        monitors,
        port_interfaces: ports.keys().cloned().collect(),
        multicast_group: arn.multicast.as_ref().map(|m| m.group),
    }
}

/// Writes `setup` to the switch (see the module comment); returns how many entries made it.
pub async fn apply(dp: &mut P4RuntimeDataplane, setup: &ArnSetup) -> usize {
    let mut written = 0;
    if let Err(e) = dp.set_arn_hold(setup.hold).await {
        warn!("p4 ARN hold time not set: {e}");
    }
    let mut local = fare_netdev::links::addresses(Some(&setup.port_interfaces));
    local.extend(setup.multicast_group);
    match dp.set_local_addresses(&local).await {
        Ok(()) => {
            written += local.len();
            info!(
                addresses = local.len(),
                "p4: the switch's own addresses written (ARNs to them are received)"
            );
        }
        Err(e) => warn!(
            "p4: the switch's addresses not written; ARNs will be forwarded, not received: {e}"
        ),
    }
    for (interface, path_id, prefixes) in &setup.paths {
        match dp.map_arn_path(interface, *path_id, prefixes).await {
            Ok(slot) => {
                written += 1;
                info!(%interface, %path_id, prefixes = prefixes.len(), slot, "p4: ARN path mapped");
            }
            Err(e) => warn!(%interface, %path_id, "p4: ARN path not mapped: {e}"),
        }
    }
    for m in &setup.monitors {
        let mut targets = Vec::new();
        for (interface, neighbor) in &m.targets {
            match target(interface, *neighbor).await {
                Ok(t) => targets.push(t),
                Err(e) => warn!(%interface, %neighbor, "p4: ARN target skipped: {e}"),
            }
        }
        if targets.is_empty() {
            warn!(interface = %m.interface, "p4: no ARN target resolved; port not monitored by the switch");
            continue;
        }
        match dp
            .monitor_port(&m.interface, m.thresholds, m.path_id, &targets)
            .await
        {
            Ok(()) => {
                written += 1;
                let t = &m.thresholds;
                info!(interface = %m.interface, high = t.high, low = t.low, limit = t.limit, refresh = ?t.refresh, targets = targets.len(), "p4: ARN monitor on port");
            }
            Err(e) => warn!(interface = %m.interface, "p4: ARN monitor not set: {e}"),
        }
    }
    written
}

/// (interface, neighbor MAC, our IPv4 address there, neighbor address).
async fn target(
    interface: &str,
    neighbor: Ipv4Addr,
) -> Result<(String, MacAddr, Ipv4Addr, Ipv4Addr), String> {
    let ifindex = fare_netdev::links::ifindex(interface).map_err(|e| e.to_string())?;
    let mac = fare_netdev::neighbor::resolve(
        interface,
        ifindex,
        IpAddr::V4(neighbor),
        fare_netdev::neighbor::RESOLVE_TIMEOUT,
    )
    .await
    .map_err(|e| e.to_string())?;
    let ours = nix::ifaddrs::getifaddrs()
        .map_err(|e| e.to_string())?
        .filter(|a| a.interface_name == interface)
        .find_map(|a| a.address.and_then(|s| s.as_sockaddr_in().map(|v4| v4.ip())))
        .ok_or_else(|| format!("no IPv4 address on {interface}"))?;
    Ok((interface.to_string(), MacAddr(mac), ours, neighbor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_maps_neighbors_on_switch_ports_and_monitors_in_packets() {
        let arn: ArnConfig = serde_norway::from_str(
            "paths: [{path_id: 10.0.0.2, prefixes: [198.51.100.0/24]}, {path_id: 0.0.0.0, prefixes: [192.0.2.0/24]}]\n\
             neighbors: [{address: 172.16.0.1, interface: e1}, {address: 172.16.9.1, interface: lo}]\n\
             monitor: {interfaces: [{interface: e2, path_id: 10.0.0.2, high_bytes: 30000, low_bytes: 10000}]}\n",
        )
        .expect("arn");
        let bgp = vec![ArnNeighbor {
            address: "172.16.0.3".parse().expect("addr"),
            interface: "e2".into(),
        }];
        let ports = BTreeMap::from([("e1".to_string(), 1), ("e2".to_string(), 2)]);
        let s = plan(&arn, &bgp, &ports);
        assert_eq!(s.hold, arn.hold());
        // Path ID 0 is the agent's; the neighbor on `lo` is no switch port.
        let p: Vec<(&str, String)> = s
            .paths
            .iter()
            .map(|(i, id, _)| (i.as_str(), id.to_string()))
            .collect();
        assert_eq!(
            p,
            vec![("e1", "10.0.0.2".into()), ("e2", "10.0.0.2".into())]
        );
        assert_eq!(s.monitors.len(), 1);
        let m = &s.monitors[0];
        // 30000 / 1500 = 20, 10000 / 1500 = 6.67 -> 6, limit 2 x 30000 / 1500 = 40.
        assert_eq!(
            m.thresholds,
            QueueThresholds {
                high: 20,
                low: 6,
                limit: 40,
                refresh: std::time::Duration::from_millis(250),
            }
        );
        assert_eq!(s.port_interfaces, vec!["e1".to_string(), "e2".to_string()]);
        assert_eq!(s.multicast_group, None);
        // Default notify: every neighbor not on the watched link.
        assert_eq!(
            m.targets,
            vec![("e1".to_string(), "172.16.0.1".parse().expect("addr"))]
        );
    }
}
