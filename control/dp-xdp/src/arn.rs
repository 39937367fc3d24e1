//! The XDP program's own ARN receiver (ebpf/fare-xdp/src/arn.rs): this side writes what it
//! needs from the agent's `arn:` block (port, hold time, rate limit, accepted senders) and,
//! after every group change, the (sender, Path ID) -> member slots table, computed with the
//! same rules as the user-space receiver (docs/CODEPOINTS.md "ARN: Path ID semantics").
//!
//! Both receivers act on every ARN: the program at once (its own removal map, which the
//! forwarding path checks), the agent a moment later (the member's state bit, with its
//! logs, counters and `fare show arn`). Both end a removal on Type 2/4 or after the same
//! hold time, so they never pull in opposite directions. A fresh group install clears the
//! program's removals of that group; the agent's reconcile then keeps the ones whose path
//! still exists.

use super::{err, take_map};
use aya::maps::{Array, HashMap, MapData, PerCpuArray};
use aya::Ebpf;
use fare_arn::receiver::member_toward_address;
use fare_common::{
    self as fc, member_id, ArnConfigRow, ArnNeighborRow, ArnPathKey, ArnSender, ArnStat,
    ArnTargets, MAX_ARN_TARGETS, MAX_MEMBERS_PER_GROUP,
};
use fare_dataplane::{DataplaneError, Group};
use ipnet::IpNet;
use std::collections::{BTreeMap, HashMap as StdHashMap};
use std::net::IpAddr;
use std::time::Duration;

/// What the program needs from the agent's ARN configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ArnFastPath {
    pub udp_port: u16,
    pub hold: Duration,
    pub per_second: u32,
    pub burst: u32,
    /// Accepted senders and the interface each must arrive on.
    pub neighbors: Vec<(IpAddr, String)>,
    /// Path ID -> the prefixes behind it (`arn.paths`).
    pub paths: BTreeMap<u32, Vec<IpNet>>,
    /// `arn.congestion.mode: shift`: Types 1/2 are the agent's (the program passes them on
    /// and acts on Types 3/4 only).
    pub congestion_shift: bool,
}

impl ArnFastPath {
    /// From the agent's `arn:` block plus the BGP neighbors that name an interface.
    pub fn from_config(
        config: &fare_arn::ArnConfig,
        extra: &[fare_arn::config::ArnNeighbor],
    ) -> ArnFastPath {
        let neighbors: Vec<(IpAddr, String)> = config
            .accepted_neighbors(extra)
            .into_iter()
            .map(|n| (n.address, n.interface))
            .collect();
        let paths = config.path_table();
        ArnFastPath {
            udp_port: config.udp_port,
            hold: config.hold(),
            per_second: config.rate_limit.per_second,
            burst: config.rate_limit.burst,
            neighbors,
            paths,
            congestion_shift: config.congestion.mode == fare_arn::shift::CongestionMode::Shift,
        }
    }
}

/// Every address of this network namespace's interfaces (at most ARN_LOCAL's size).
fn local_addresses() -> Vec<IpAddr> {
    let mut out = fare_netdev::links::addresses(None);
    out.truncate(fc::MAX_ARN_LOCAL as usize);
    out
}

/// The sender key as the program reads it from the packet.
pub fn sender_key(a: IpAddr) -> ArnSender {
    match a {
        IpAddr::V4(v4) => ArnSender {
            family: 4,
            addr: [u32::from_ne_bytes(v4.octets()), 0, 0, 0],
        },
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return sender_key(IpAddr::V4(v4));
            }
            let o = v6.octets();
            let mut addr = [0u32; 4];
            for (i, w) in addr.iter_mut().enumerate() {
                *w = u32::from_ne_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]]);
            }
            ArnSender { family: 6, addr }
        }
    }
}

/// The (sender, Path ID) -> MEMBERS indexes table for the installed groups `(gid, group)`.
/// Path ID 0 lists every member toward the sender (used for 0, absent, or unlisted IDs).
pub fn targets<'a>(
    settings: &ArnFastPath,
    groups: impl Iterator<Item = (u32, &'a Group)> + Clone,
) -> StdHashMap<ArnPathKey, Vec<u32>> {
    let mut out: StdHashMap<ArnPathKey, Vec<u32>> = StdHashMap::new();
    for (address, interface) in &settings.neighbors {
        let sender = sender_key(*address);
        for (gid, g) in groups.clone() {
            let Some(index) = member_toward_address(&g.members, *address, interface) else {
                continue;
            };
            let id = member_id(gid, index as u32);
            out.entry(ArnPathKey { sender, path_id: 0 })
                .or_default()
                .push(id);
            for (path_id, behind) in &settings.paths {
                if *path_id != 0 && fare_arn::config::path_covers(behind, &g.prefix) {
                    out.entry(ArnPathKey {
                        sender,
                        path_id: *path_id,
                    })
                    .or_default()
                    .push(id);
                }
            }
        }
    }
    out
}

/// The program's ARN maps.
pub struct ArnMaps {
    config: Array<MapData, ArnConfigRow>,
    neighbors: HashMap<MapData, ArnSender, ArnNeighborRow>,
    paths: HashMap<MapData, ArnPathKey, ArnTargets>,
    local: HashMap<MapData, ArnSender, u32>,
    removed: Array<MapData, u64>,
    stats: PerCpuArray<MapData, u64>,
    settings: Option<ArnFastPath>,
}

impl ArnMaps {
    pub fn take(ebpf: &mut Ebpf) -> Result<ArnMaps, DataplaneError> {
        Ok(ArnMaps {
            config: take_map(ebpf, fc::ARN_CONFIG)?,
            neighbors: take_map(ebpf, fc::ARN_NEIGHBORS)?,
            paths: take_map(ebpf, fc::ARN_PATHS)?,
            local: take_map(ebpf, fc::ARN_LOCAL)?,
            removed: take_map(ebpf, fc::ARN_REMOVED)?,
            stats: take_map(ebpf, fc::ARN_STATS)?,
            settings: None,
        })
    }

    /// Turns the program's receiver on with `settings` (None: off, ARNs go to the kernel
    /// untouched). Call `sync` afterwards.
    pub fn configure(&mut self, settings: Option<ArnFastPath>) -> Result<(), DataplaneError> {
        let row = match &settings {
            None => ArnConfigRow::default(),
            Some(s) => {
                let per_second = u64::from(s.per_second.max(1));
                ArnConfigRow {
                    enabled: if s.congestion_shift {
                        1 | fc::ARN_CONGESTION_SHIFT
                    } else {
                        1
                    },
                    udp_port: u32::from(s.udp_port),
                    hold_ns: u64::try_from(s.hold.as_nanos()).unwrap_or(u64::MAX),
                    refill_ns: 1_000_000_000 / per_second,
                    burst: u64::from(s.burst.max(1)),
                }
            }
        };
        let old: Vec<ArnSender> = self.neighbors.keys().filter_map(Result::ok).collect();
        for k in old {
            let _ = self.neighbors.remove(&k);
        }
        if let Some(s) = &settings {
            for (address, interface) in &s.neighbors {
                let ifindex = fare_arn::transport::ifindex(interface);
                let value = ArnNeighborRow {
                    ifindex,
                    ..ArnNeighborRow::default()
                };
                self.neighbors
                    .insert(sender_key(*address), value, 0)
                    .map_err(|e| err(format!("ARN_NEIGHBORS: {e}")))?;
            }
        }
        // The node's own addresses, with or without ARN: the program acts only on ARNs
        // sent to one of them (or to a multicast group) and forwards any other like
        // transit traffic; a packet without a route to one of them counts as `local`.
        let old: Vec<ArnSender> = self.local.keys().filter_map(Result::ok).collect();
        for k in old {
            let _ = self.local.remove(&k);
        }
        for address in local_addresses() {
            self.local
                .insert(sender_key(address), 1, 0)
                .map_err(|e| err(format!("ARN_LOCAL: {e}")))?;
        }
        self.config
            .set(0, row, 0)
            .map_err(|e| err(format!("ARN_CONFIG: {e}")))?;
        self.settings = settings;
        Ok(())
    }

    /// Rewrites ARN_PATHS for the installed groups `(gid, group)`.
    pub fn sync<'a>(
        &mut self,
        groups: impl Iterator<Item = (u32, &'a Group)> + Clone,
    ) -> Result<(), DataplaneError> {
        let want = match &self.settings {
            Some(s) => targets(s, groups),
            None => StdHashMap::new(),
        };
        let old: Vec<ArnPathKey> = self.paths.keys().filter_map(Result::ok).collect();
        for k in old.iter().filter(|k| !want.contains_key(k)) {
            let _ = self.paths.remove(k);
        }
        for (key, ids) in want {
            if ids.len() > MAX_ARN_TARGETS {
                tracing::debug!(
                    slots = ids.len(),
                    "ARN path lists more member slots than the program holds; the agent handles the rest"
                );
            }
            let mut row = ArnTargets::default();
            for (slot, id) in row.ids.iter_mut().zip(&ids) {
                *slot = *id;
            }
            row.n = ids.len().min(MAX_ARN_TARGETS) as u32;
            self.paths
                .insert(key, row, 0)
                .map_err(|e| err(format!("ARN_PATHS: {e}")))?;
        }
        Ok(())
    }

    /// Forgets the program's removals of group `gid` (a fresh install starts in service).
    pub fn clear_group(&mut self, gid: u32) {
        for i in 0..MAX_MEMBERS_PER_GROUP {
            let _ = self.removed.set(member_id(gid, i), 0, 0);
        }
    }

    /// The program's ARN counters, summed over CPUs.
    pub fn stats(&self) -> Result<BTreeMap<&'static str, u64>, DataplaneError> {
        let mut out = BTreeMap::new();
        for stat in ArnStat::ALL {
            let values = self
                .stats
                .get(&(stat as u32), 0)
                .map_err(|e| err(format!("reading ARN_STATS: {e}")))?;
            out.insert(stat.name(), values.iter().sum());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fare_dataplane::{GroupMode, Member};

    fn member(via: &str, interface: &str) -> Member {
        Member {
            via: via.into(),
            interface: interface.into(),
            next_hop: via.parse().ok(),
            neighbor_mac: None,
            weight: 1,
            bandwidth_gbps: 100.0,
        }
    }

    fn group(prefix: &str) -> Group {
        Group {
            prefix: prefix.parse().unwrap(),
            mode: GroupMode::Spray,
            members: vec![member("10.0.1.2", "e1"), member("10.0.2.2", "e2")],
        }
    }

    #[test]
    fn table_lists_members_toward_sender_by_path() {
        let settings = ArnFastPath {
            udp_port: 9961,
            hold: Duration::from_secs(1),
            per_second: 100,
            burst: 10,
            neighbors: vec![("10.0.2.2".parse().unwrap(), "e2".into())],
            paths: BTreeMap::from([(7, vec!["10.9.0.0/16".parse().unwrap()])]),
            congestion_shift: false,
        };
        let a = group("10.9.1.0/24");
        let b = group("10.8.1.0/24");
        let t = targets(&settings, [(3u32, &a), (5u32, &b)].into_iter());
        let sender = sender_key("10.0.2.2".parse().unwrap());
        let all = &t[&ArnPathKey { sender, path_id: 0 }];
        assert_eq!(all, &vec![member_id(3, 1), member_id(5, 1)]);
        let behind = &t[&ArnPathKey { sender, path_id: 7 }];
        assert_eq!(behind, &vec![member_id(3, 1)]);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn sender_keys_match_packet_words() {
        let k = sender_key("10.0.0.2".parse().unwrap());
        assert_eq!(k.family, 4);
        assert_eq!(k.addr[0].to_ne_bytes(), [10, 0, 0, 2]);
        let m = sender_key("::ffff:10.0.0.2".parse().unwrap());
        assert_eq!(m, k);
        let v6 = sender_key("fd00::1".parse().unwrap());
        assert_eq!(v6.family, 6);
        assert_eq!(v6.addr[3].to_ne_bytes(), [0, 0, 0, 1]);
    }
}
