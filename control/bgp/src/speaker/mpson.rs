//! Multi-plane (draft-xu-idr-fare-in-mpson) parts of the RIB task: UPA (unreachable
//! hosts announced and avoided), FIB-Suppress, summary-only neighbors and the Outbound
//! Route Filters an RNIC asks for its host routes with (RFC 5291/5292).

use super::RibTask;
use crate::neighbor::SessionInfo;
use crate::packet::{nlri, orf, Capability};
use crate::rib::{LocRoute, Path};
use crate::upa;
use fare_model::topology::Role;
use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr};
use tracing::{info, warn};

impl RibTask {
    /// True when every path carries a FIB-Suppress community another router attached
    /// (§4.2.1): the route stays in the RIB and is advertised, but not installed. The
    /// router that tagged it (the RNIC's own leaf) installs it, and so does an RNIC: it
    /// asked for exactly these host routes by Prefix-ORF to install them (§4.2);
    /// suppression is for switches.
    pub(super) fn fib_suppressed(&self, paths: &[Path]) -> bool {
        let policy = &self.config.policy;
        !policy.role.is_stub()
            && suppressed_by_others(paths, policy.fib_suppress_subtype, self.config.router_id)
    }

    /// True when every path announces the prefix unreachable (UPA).
    pub(super) fn all_unreachable(&self, paths: &[Path]) -> bool {
        upa::all_unreachable(paths, self.config.policy.upa_subtype)
    }

    /// Recomputes which configured RNIC host routes this node announces unreachable: a
    /// host is reachable while some neighbor it is configured on (`upa_hosts`) gave us a
    /// route covering it. Changes make the prefix dirty (UPA advertised or withdrawn).
    pub(super) fn update_unreachable(&mut self) {
        let configured = self
            .peers
            .iter()
            .map(|(a, p)| (*a, p.spec.upa_hosts.as_slice()));
        let now = upa::unreachable_hosts(configured, &self.rib, self.config.policy.upa_subtype);
        if now == self.rib.unreachable {
            return;
        }
        for host in now.difference(&self.rib.unreachable) {
            info!(prefix = %host, "host unreachable through its neighbor: UPA advertised");
        }
        for host in self.rib.unreachable.difference(&now) {
            info!(prefix = %host, "host reachable again: UPA withdrawn");
        }
        self.dirty
            .extend(now.symmetric_difference(&self.rib.unreachable).copied());
        self.rib.unreachable = now;
    }

    /// A UPA-derived host route of an RNIC is over (the UPA was withdrawn or a path
    /// reaches the prefix again).
    pub(super) fn upa_gone(&mut self, prefix: IpNet) {
        if !self.unreachable_learned.is_empty() && self.unreachable_learned.remove(&prefix) {
            info!(%prefix, "UPA withdrawn: host route follows the aggregate again");
        }
    }

    /// What a node does with a prefix announced unreachable through `paths` (mpson
    /// §4.1). Switches install nothing. An RNIC installs a host route whose members are
    /// those of its longest-matching aggregate minus the neighbors that announced the
    /// prefix unreachable, so its traffic to the prefix no longer enters their planes;
    /// the aggregate stays installed (make-before-break: the more specific route takes
    /// over in one step).
    pub(super) async fn program_avoiding(&mut self, prefix: IpNet, paths: &[Path]) {
        if self.config.policy.role != Role::Rnic {
            self.program_none(prefix).await;
            return;
        }
        let avoid: Vec<IpAddr> = paths.iter().map(|p| p.peer).collect();
        let covering = self.rib.covering(prefix);
        let remaining = upa::avoiding(
            covering.iter().map(|(q, r)| (q, r)),
            prefix,
            &avoid,
            self.config.policy.upa_subtype,
        );
        if remaining.is_empty() {
            // Nowhere else to go: the aggregate (if any) is as good as nothing.
            self.program_none(prefix).await;
            return;
        }
        let (_, d) = self.decide(&remaining);
        let new = self.rib.fib(&prefix).is_none();
        self.program(prefix, &remaining, &d).await;
        if new {
            info!(%prefix, ?avoid, members = remaining.len(), "host route avoids the unreachable plane");
        }
    }

    /// True when `prefix` stays behind one of this node's aggregates toward `peer`
    /// (`summary_only`); UPAs always go.
    pub(super) fn summarized(
        &self,
        prefix: &IpNet,
        route: Option<&LocRoute>,
        peer: IpAddr,
    ) -> bool {
        let Some(LocRoute::Learned(paths)) = route else {
            return false;
        };
        self.peers.get(&peer).is_some_and(|p| p.spec.summary_only)
            && !self.all_unreachable(paths)
            && upa::covered(&self.rib.local, prefix)
    }

    /// Peers whose wait for a first ORF is over: they get the full table now.
    pub(super) fn orf_wait_expired(&mut self) {
        let now = tokio::time::Instant::now();
        let mut expired = false;
        for (addr, p) in self.peers.iter_mut() {
            if p.orf_wait_until.is_some_and(|t| t <= now) {
                p.orf_wait_until = None;
                warn!(peer = %addr, "no ORF within the wait: sending the full table");
                expired = true;
            }
        }
        if expired {
            self.dirty.extend(self.rib.prefixes());
        }
    }

    /// False when the neighbor's ORF for the prefix's family does not permit it.
    pub(super) fn orf_permits(&self, prefix: &IpNet, peer: IpAddr) -> bool {
        let Some(list) = self
            .peers
            .get(&peer)
            .and_then(|p| p.orf.get(&nlri::family_of(prefix)))
            .filter(|l| !l.is_empty())
        else {
            return true;
        };
        let (entries, deny): (Vec<orf::PrefixEntry>, Vec<bool>) = list.iter().copied().unzip();
        orf::permits(&entries, &deny, prefix)
    }
}

/// True when the peer's OPEN says it will send Address Prefix ORFs (RFC 5291 §4).
pub(super) fn peer_sends_orf(info: &SessionInfo) -> bool {
    info.capabilities.iter().any(|c| match c {
        Capability::Orf(list) => list.iter().any(|f| {
            f.types.iter().any(|(t, sr)| {
                matches!(*t, orf::ADDRESS_PREFIX | orf::PREFIX_LIST_PRESTANDARD)
                    && sr & orf::SEND != 0
            })
        }),
        _ => false,
    })
}
/// Applies ORF entries to a neighbor's list (RFC 5291 §3): ADD replaces an entry of the
/// same sequence and prefix, REMOVE deletes it, REMOVE-ALL empties the list.
pub(super) fn apply_orf(list: &mut Vec<(orf::PrefixEntry, bool)>, entries: &[orf::OrfEntry]) {
    for e in entries {
        match (e.action, e.prefix) {
            (orf::Action::RemoveAll, _) => list.clear(),
            (orf::Action::Add, Some(p)) => {
                list.retain(|(q, _)| (q.sequence, q.prefix) != (p.sequence, p.prefix));
                list.push((p, e.deny));
            }
            (orf::Action::Remove, Some(p)) => {
                list.retain(|(q, _)| (q.sequence, q.prefix) != (p.sequence, p.prefix))
            }
            _ => {}
        }
    }
}
/// True when every path carries a FIB-Suppress community (this subtype) that a router
/// other than `router_id` attached.
pub(super) fn suppressed_by_others(paths: &[Path], subtype: u8, router_id: Ipv4Addr) -> bool {
    !paths.is_empty()
        && paths.iter().all(|p| {
            p.attrs.ext_communities.iter().any(|c| {
                c.fib_suppress(subtype)
                    .is_some_and(|f| f.router_id != router_id)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::community::FibSuppress;
    use crate::fare::Policy;
    use crate::packet::{Family, PathAttributes};
    use std::sync::Arc;

    const LEAF: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const ME: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn tagged(by: Option<Ipv4Addr>) -> Path {
        let subtype = Policy::default().fib_suppress_subtype;
        Path {
            peer: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1)),
            attrs: Arc::new(PathAttributes {
                ext_communities: by
                    .map(|id| FibSuppress::new(65001, id).to_community(subtype))
                    .into_iter()
                    .collect(),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn fib_suppress_needs_every_path_tagged_by_another_router() {
        let subtype = Policy::default().fib_suppress_subtype;
        let leaf = tagged(Some(LEAF));
        assert!(suppressed_by_others(
            &[leaf.clone(), leaf.clone()],
            subtype,
            ME
        ));
        // The router that tagged it installs it.
        assert!(!suppressed_by_others(
            std::slice::from_ref(&leaf),
            subtype,
            LEAF
        ));
        // One untagged path: installed.
        assert!(!suppressed_by_others(
            &[leaf.clone(), tagged(None)],
            subtype,
            ME
        ));
        assert!(!suppressed_by_others(&[], subtype, ME));
        // Another subtype is not FIB-Suppress.
        assert!(!suppressed_by_others(&[leaf], subtype.wrapping_add(1), ME));
    }

    fn entry(action: orf::Action, seq: u32, prefix: &str, deny: bool) -> orf::OrfEntry {
        orf::OrfEntry {
            action,
            deny,
            prefix: prefix.parse().ok().map(|p| orf::PrefixEntry {
                sequence: seq,
                min_len: 0,
                max_len: 0,
                prefix: p,
            }),
        }
    }

    /// RFC 5291 §3: ADD replaces the entry of the same sequence and prefix, REMOVE
    /// deletes it, REMOVE-ALL empties the list.
    #[test]
    fn orf_entries_apply_in_order() {
        use orf::Action::*;
        let mut list = Vec::new();
        apply_orf(
            &mut list,
            &[
                entry(Add, 10, "10.200.1.2/32", false),
                entry(Add, 20, "10.200.1.3/32", false),
                entry(Add, 10, "10.200.1.2/32", true),
            ],
        );
        let seen: Vec<(u32, bool)> = list.iter().map(|(e, d)| (e.sequence, *d)).collect();
        assert_eq!(seen, vec![(20, false), (10, true)]);
        apply_orf(&mut list, &[entry(Remove, 20, "10.200.1.3/32", false)]);
        assert_eq!(list.len(), 1);
        // REMOVE of an entry not there changes nothing.
        apply_orf(&mut list, &[entry(Remove, 30, "10.200.1.3/32", false)]);
        assert_eq!(list.len(), 1);
        apply_orf(
            &mut list,
            &[
                entry(RemoveAll, 0, "", false),
                entry(Add, 5, "10.200.0.0/16", false),
            ],
        );
        let seen: Vec<u32> = list.iter().map(|(e, _)| e.sequence).collect();
        assert_eq!(seen, vec![5]);
    }

    fn info(caps: Vec<Capability>) -> SessionInfo {
        SessionInfo {
            remote_id: LEAF,
            remote_as: 65001,
            local_address: IpAddr::V4(ME),
            hold_time: 9,
            families: vec![Family::Ipv4Unicast],
            four_octet_as: true,
            route_refresh: true,
            capabilities: caps,
        }
    }

    #[test]
    fn peer_sends_orf_when_its_capability_says_send() {
        let cap = |t: u8, sr: u8| {
            Capability::Orf(vec![orf::OrfFamily {
                afi: 1,
                safi: 1,
                types: vec![(t, sr)],
            }])
        };
        assert!(peer_sends_orf(&info(vec![cap(
            orf::ADDRESS_PREFIX,
            orf::SEND
        )])));
        assert!(peer_sends_orf(&info(vec![cap(
            orf::PREFIX_LIST_PRESTANDARD,
            orf::SEND | orf::RECEIVE
        )])));
        assert!(!peer_sends_orf(&info(vec![cap(
            orf::ADDRESS_PREFIX,
            orf::RECEIVE
        )])));
        assert!(!peer_sends_orf(&info(vec![Capability::RouteRefresh])));
    }
}
