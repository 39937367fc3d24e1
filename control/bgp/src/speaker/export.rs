//! What each neighbor is sent: the dirty prefixes decided, then per neighbor the
//! attributes of each route (next-hop-self, AS_PATH, Path Bandwidth re-advertised per the
//! policy, DPF colors) packed into UPDATEs.

use super::{RibTask, SpeakerEvent};
use crate::community::PathBandwidth;
use crate::dpf;
use crate::dpf::Transit;
use crate::fare::Decision;
use crate::neighbor::Command;
use crate::packet::attribute::flag;
use crate::packet::link_bandwidth::{self, LinkBandwidth};
use crate::packet::upa::Upa;
use crate::packet::{
    color, nlri, update, Aigp, AsPath, ColorCommunity, Context, Family, MpReach, Origin,
    PathAttributes,
};
use crate::rib::{LocRoute, Path};
use fare_model::bandwidth::Received;
use fare_model::topology::Role;
use ipnet::IpNet;
use rustc_hash::{FxHashMap, FxHashSet};
use std::net::IpAddr;
use std::sync::Arc;
use tracing::info;

impl RibTask {
    /// Decides every dirty prefix, sends group changes and UPDATEs, then refreshes the
    /// neighbors' prefix counts.
    pub(super) async fn flush(&mut self) {
        self.decide_and_send().await;
        self.batch.relabel = false;
        self.count_prefixes();
    }

    /// Copies each neighbor's Adj-RIB-In and Adj-RIB-Out sizes into its status (one lock
    /// per neighbor per flush: the counts are kept by the RIB as paths come and go).
    fn count_prefixes(&self) {
        for (addr, p) in &self.peers {
            if let Ok(mut s) = p.status.lock() {
                s.prefixes_accepted = self.rib.adj_in_len(*addr);
                s.prefixes_advertised = self.rib.adj_out_len(*addr);
            }
        }
    }

    /// [`SpeakerCommand::Advertised`](super::SpeakerCommand::Advertised).
    pub(super) fn advertised(&self, limit: usize) -> Vec<super::Advertised> {
        let policy = &self.config.policy;
        let mut all: Vec<super::Advertised> = self
            .rib
            .adj_out
            .iter()
            .flat_map(|(neighbor, table)| {
                table.iter().map(|(prefix, attrs)| super::Advertised {
                    prefix: *prefix,
                    neighbor: *neighbor,
                    path_bandwidth_gbps: attrs
                        .ext_communities
                        .iter()
                        .find_map(|c| c.path_bandwidth(policy.subtype, policy.encoding))
                        .map(|b| b.gbps),
                })
            })
            .take(limit)
            .collect();
        all.sort_by_key(|a| (a.prefix, a.neighbor));
        all
    }

    async fn decide_and_send(&mut self) {
        self.update_unreachable();
        if self.dirty.is_empty() {
            return;
        }
        // An RNIC's host routes derived from an aggregate follow the aggregate.
        if self.config.policy.role == Role::Rnic {
            let derived: Vec<IpNet> = self
                .unreachable_learned
                .iter()
                .filter(|u| self.dirty.iter().any(|d| d != *u && d.contains(*u)))
                .copied()
                .collect();
            self.dirty.extend(derived);
        }
        let mut dirty = self.dirty.drain(&self.rib);
        // Aggregates first: host routes derived from them read their new paths. Stable:
        // a feed's prefixes (mostly of one length) stay in arrival order.
        dirty.sort_by_key(|(p, _)| p.prefix_len());
        // The Established neighbors, looked up once for the batch instead of once per
        // prefix: (address, AS, waiting for its ORF). The loop below changes none of it.
        let established: Vec<(IpAddr, u32, bool)> = self
            .peers
            .iter()
            .filter(|(_, p)| p.session.is_some())
            .map(|(a, p)| (*a, p.spec.remote_as, p.orf_wait_until.is_some()))
            .collect();
        let stub = self.config.policy.role.is_stub();
        // Per neighbor: attributes -> prefixes to announce, and prefixes to withdraw.
        let mut announce: FxHashMap<IpAddr, FxHashMap<Arc<PathAttributes>, Vec<IpNet>>> =
            FxHashMap::default();
        let mut withdraw: FxHashMap<IpAddr, Vec<IpNet>> = FxHashMap::default();
        let mut interned: FxHashSet<Arc<PathAttributes>> = FxHashSet::default();
        let mut last = LastDecision::default();
        let drained: Vec<IpAddr> = self
            .peers
            .iter()
            .filter(|(_, p)| p.drained)
            .map(|(a, _)| *a)
            .collect();
        for (prefix, entry) in dirty {
            // The new route when it changed (the common case while routes come in): the
            // RIB keeps one copy and this is the other; else a copy of the unchanged one.
            let route = match self.rib.decide_at(prefix, entry) {
                Some(new) => new,
                None => self.rib.route(&prefix),
            };
            let decision = match &route {
                Some(LocRoute::Learned(all)) => {
                    let kept = in_service(all, &drained);
                    let paths = &kept;
                    let decided = last.get(paths, |paths| self.decide(paths));
                    let d = &decided.1;
                    if self.all_unreachable(paths) {
                        if self.unreachable_learned.insert(prefix) {
                            let from: Vec<IpAddr> = paths.iter().map(|p| p.peer).collect();
                            info!(%prefix, ?from, "UPA received");
                        }
                        self.program_avoiding(prefix, paths).await;
                    } else {
                        self.upa_gone(prefix);
                        if self.fib_suppressed(paths) {
                            self.program_none(prefix).await;
                        } else {
                            self.program(prefix, paths, d).await;
                        }
                    }
                    Some(decided)
                }
                _ => {
                    self.upa_gone(prefix);
                    self.program_none(prefix).await;
                    None
                }
            };
            if self.config.route_events {
                // Sent after the group changes batched with it, as a prefix's group
                // came before its route when each had its own event.
                let route = self.view(prefix);
                self.batch_route(SpeakerEvent::Route { prefix, route });
            }
            self.send_full_batch().await;
            // Which neighbors get the route at all (averaged mode divides by their count):
            // not those it came from, not those already on its AS path.
            let incoming: &[Path] = match &route {
                Some(LocRoute::Learned(paths)) => paths,
                _ => &[],
            };
            let targets: Vec<IpAddr> = established
                .iter()
                .filter(|(a, remote_as, _)| {
                    !incoming.iter().any(|p| p.peer == *a)
                        && advertised_to(route.as_ref(), *remote_as, stub)
                })
                .map(|e| e.0)
                .collect();
            for &(peer, _, orf_waiting) in &established {
                if orf_waiting {
                    continue;
                }
                // A neighbor's ORF filters what it is sent, not the averaged split.
                let out = if targets.contains(&peer)
                    && self.orf_permits(&prefix, peer)
                    && !self.summarized(&prefix, route.as_ref(), peer)
                {
                    self.outgoing(prefix, route.as_ref(), decision, peer, targets.len())
                } else {
                    None
                };
                let out = out.map(|a| match interned.get(&a) {
                    Some(x) => x.clone(),
                    None => {
                        let x = Arc::new(a);
                        interned.insert(x.clone());
                        x
                    }
                });
                match out {
                    Some(a) => {
                        let table = self.rib.adj_out.entry(peer).or_default();
                        if table.get(&prefix) != Some(&a) {
                            table.insert(prefix, a.clone());
                            announce
                                .entry(peer)
                                .or_default()
                                .entry(a)
                                .or_default()
                                .push(prefix);
                        }
                    }
                    None => {
                        let sent = self.rib.adj_out.get_mut(&peer);
                        if sent.is_some_and(|t| t.remove(&prefix).is_some()) {
                            withdraw.entry(peer).or_default().push(prefix);
                        }
                    }
                }
            }
        }
        self.send_groups().await;
        let ctx = Context::default();
        for (peer, ..) in established {
            let mut updates = Vec::new();
            if let Some(w) = withdraw.remove(&peer) {
                updates.extend(update::pack_withdraw(&w));
            }
            if let Some(groups) = announce.remove(&peer) {
                for (attrs, mut prefixes) in groups {
                    prefixes.sort();
                    let packed = update::pack(&attrs, &prefixes, ctx);
                    if packed.is_empty() {
                        // Attributes too large for 4096 octets (a peer's huge unknown
                        // transitive attribute): not sent, and any earlier version of
                        // these routes is withdrawn (RFC 8654 §4).
                        if let Some(t) = self.rib.adj_out.get_mut(&peer) {
                            for p in &prefixes {
                                t.remove(p);
                            }
                        }
                        updates.extend(update::pack_withdraw(&prefixes));
                    }
                    updates.extend(packed);
                }
            }
            if !updates.is_empty() {
                if let Some(p) = self.peers.get(&peer) {
                    let _ = p.commands.send(Command::Send(updates));
                }
            }
        }
    }

    /// The attributes `prefix` is advertised with to `peer`.
    pub(super) fn outgoing(
        &self,
        prefix: IpNet,
        route: Option<&LocRoute>,
        decision: Option<&(Vec<Received>, Decision)>,
        peer: IpAddr,
        outgoing_neighbors: usize,
    ) -> Option<PathAttributes> {
        let p = self.peers.get(&peer)?;
        let session = p.session.as_ref()?;
        let policy = &self.config.policy;
        let subtype = policy.subtype;
        let encoding = policy.encoding;
        let mut a = PathAttributes::default();
        match route? {
            LocRoute::Unreachable => {
                a.origin = Some(Origin::Igp);
                a.as_path = Some(AsPath::sequence(vec![self.config.asn]));
                a.ext_communities
                    .push(Upa::new(self.config.router_id).to_community(policy.upa_subtype));
            }
            LocRoute::Local => {
                // DPF §2.2.1: which sessions get the prefix, with which color and AIGP.
                let orig = dpf::originate(self.config.dpf.coloring(&prefix), p.spec.color)?;
                if let Some(c) = orig.color {
                    a.ext_communities
                        .push(ColorCommunity::new(c).to_community());
                }
                if orig.aigp_zero {
                    a.aigp = Some(Aigp::new(0));
                }
                a.origin = Some(Origin::Igp);
                a.as_path = Some(AsPath::sequence(vec![self.config.asn]));
                let value = policy.originate(p.link_gbps);
                a.ext_communities.push(
                    PathBandwidth::new(true, self.config.router_id, value)
                        .to_community(subtype, encoding),
                );
                // A super-spine attaches its link value to what it originates too.
                let link_value =
                    (p.link_gbps).and_then(|l| policy.draft.originated_link_value(policy.role, l));
                if let Some(l) = link_value {
                    a.ext_communities.push(
                        PathBandwidth::new(false, self.config.router_id, l)
                            .to_community(subtype, encoding),
                    );
                }
            }
            LocRoute::Learned(paths) => {
                // DPF §2.2.2: match the session color against the active paths, then
                // against the inactive ones (re-advertise recolored, AIGP stripped).
                let active: Vec<Vec<u32>> = paths
                    .iter()
                    .map(|x| color::route_colors(&x.attrs.ext_communities))
                    .collect();
                let inactive = self.inactive_colors(prefix, paths);
                let (template, recolor) = match dpf::transit(p.spec.color, &active, &inactive) {
                    Transit::AsIs(i) => (i, None),
                    Transit::Recolor(c) => (0, Some(c)),
                    Transit::Skip => return None,
                };
                let best = &paths.get(template).unwrap_or(&paths[0]).attrs;
                if recolor.is_none() && p.spec.color.is_some() {
                    a.aigp = best.aigp.clone();
                }
                let (inputs, d) = decision?;
                a.origin = best.origin;
                a.as_path = Some(
                    best.as_path
                        .clone()
                        .unwrap_or_default()
                        .prepend(self.config.asn),
                );
                let keep = policy.passes_transitive(d);
                let adv = policy.readvertise(inputs, d, p.link_gbps, outgoing_neighbors);
                for c in &best.ext_communities {
                    // Non-transitive communities stop at the AS boundary (RFC 4360 §6).
                    if !c.is_transitive() {
                        continue;
                    }
                    if c.is_path_bandwidth(subtype) && !keep {
                        continue;
                    }
                    // A received Link Bandwidth describes the link to the old next hop
                    // (RFC 10005): not passed on; fare attaches its own where configured.
                    if link_bandwidth::is_link_bandwidth(c) {
                        continue;
                    }
                    a.ext_communities.push(*c);
                }
                if let Some(c) = recolor {
                    color::strip_colors(&mut a.ext_communities);
                    a.ext_communities
                        .push(ColorCommunity::new(c).to_community());
                }
                if !keep {
                    if let Some(v) = adv.path_gbps {
                        a.ext_communities.push(
                            PathBandwidth::new(true, self.config.router_id, v)
                                .to_community(subtype, encoding),
                        );
                    }
                }
                if let Some(v) = adv.link_value_gbps {
                    a.ext_communities.push(
                        PathBandwidth::new(false, self.config.router_id, v)
                            .to_community(subtype, encoding),
                    );
                }
                for raw in &best.other {
                    if raw.is_optional() && !raw.is_transitive() {
                        continue;
                    }
                    if matches!(raw.type_code, 14 | 15 | 17 | 18) {
                        continue;
                    }
                    let mut raw = raw.clone();
                    if raw.is_optional() && !is_known(raw.type_code) {
                        raw.flags |= flag::PARTIAL;
                    }
                    a.other.push(raw);
                }
            }
        }
        if p.spec.link_bandwidth.sends() {
            self.attach_link_bandwidth(&mut a, p.link_gbps, p.spec.link_bandwidth_transitive);
        }
        if p.drained {
            a.add_graceful_shutdown();
        }
        a.ext_communities.sort();
        a.ext_communities.dedup();
        // NEXT_HOP = our address on this session (eBGP next-hop-self).
        let local = session.local_address;
        match (nlri::family_of(&prefix), local) {
            (Family::Ipv4Unicast, IpAddr::V4(v4)) => a.next_hop = Some(v4),
            (Family::Ipv4Unicast, IpAddr::V6(_)) => return None,
            (Family::Ipv6Unicast, local) => {
                let nh = match local {
                    IpAddr::V6(v6) => v6,
                    IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                };
                a.mp_reach = Some(MpReach {
                    family: Family::Ipv6Unicast,
                    next_hops: vec![IpAddr::V6(nh)],
                    nlri: vec![],
                });
            }
        }
        session
            .families
            .contains(&nlri::family_of(&prefix))
            .then_some(a)
    }
}

impl RibTask {
    /// Toward a neighbor that does not speak FARE: the Link Bandwidth community (RFC
    /// 10005) with the bandwidth a FARE neighbor would give this path, the transitive Path
    /// Bandwidth value being sent (as the wire rounds it) capped by the link to that
    /// neighbor. None when no value is sent (an ECMP set) or it is unbounded (an
    /// origin's "maximum" over a link of unknown speed).
    fn attach_link_bandwidth(
        &self,
        a: &mut PathAttributes,
        link_gbps: Option<f64>,
        transitive: bool,
    ) {
        let policy = &self.config.policy;
        let path = a
            .ext_communities
            .iter()
            .filter_map(|c| c.path_bandwidth(policy.subtype, policy.encoding))
            .find(|pb| pb.transitive)
            .map(|pb| pb.gbps());
        let Some(path) = path else {
            return;
        };
        let value = path.min(link_gbps.unwrap_or(f64::INFINITY));
        if value.is_finite() {
            let lb = LinkBandwidth::from_gbps(transitive, self.config.asn, value);
            a.ext_communities.push(lb.to_community());
        }
    }
}

/// The paths not over a drained link, unless that leaves none (then all: a drained link
/// still carries what has no other way, as RFC 8326 keeps the only path).
fn in_service(paths: &Arc<[Path]>, drained: &[IpAddr]) -> Arc<[Path]> {
    if drained.is_empty() || paths.iter().all(|p| drained.contains(&p.peer)) {
        return paths.clone();
    }
    paths
        .iter()
        .filter(|p| !drained.contains(&p.peer))
        .cloned()
        .collect()
}

fn is_known(type_code: u8) -> bool {
    matches!(type_code, 1..=8 | 14..=16 | 32)
}
/// The FARE decision (inputs and weights) of the path set decided last in a flush, for
/// the next prefix with the same one: the prefixes of an UPDATE have the same paths
/// (neighbors and attributes), and are decided one after another. The neighbors' links
/// do not change during a flush.
#[derive(Default)]
struct LastDecision {
    /// (neighbor, attributes' address) of each path.
    key: Vec<(IpAddr, usize)>,
    /// The path set decided, when the RIB shares it between prefixes (then the next
    /// prefix with the same one is recognized without comparing its paths).
    shared: Option<Arc<[Path]>>,
    value: Option<(Vec<Received>, Decision)>,
}

impl LastDecision {
    fn get(
        &mut self,
        paths: &Arc<[Path]>,
        decide: impl FnOnce(&[Path]) -> (Vec<Received>, Decision),
    ) -> &(Vec<Received>, Decision) {
        if !self.shared.as_ref().is_some_and(|s| Arc::ptr_eq(s, paths)) {
            let key = paths
                .iter()
                .map(|p| (p.peer, Arc::as_ptr(&p.attrs) as usize));
            if !key.clone().eq(self.key.iter().copied()) {
                self.key.clear();
                self.key.extend(key);
                self.value = None;
            }
            self.shared = Some(paths.clone());
        }
        self.value.get_or_insert_with(|| decide(paths))
    }
}

/// Whether `route` goes to a neighbor in AS `remote_as` at all.
pub(super) fn advertised_to(route: Option<&LocRoute>, remote_as: u32, stub: bool) -> bool {
    match route {
        None => false,
        Some(LocRoute::Local | LocRoute::Unreachable) => true,
        // An RNIC is a stub speaker in each plane (mpson §3): it advertises only what it
        // originates, never one plane's routes (or UPAs) into another.
        Some(LocRoute::Learned(_)) if stub => false,
        // Sender-side loop check: a neighbor already on the AS path would drop it.
        Some(LocRoute::Learned(paths)) => !paths.first().is_some_and(|p| {
            p.attrs
                .as_path
                .as_ref()
                .is_some_and(|a| a.contains(remote_as))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rib::Path;
    use std::net::Ipv4Addr;

    fn learned(path: Vec<u32>) -> LocRoute {
        LocRoute::Learned(Arc::new([Path {
            peer: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1)),
            attrs: Arc::new(PathAttributes {
                as_path: Some(AsPath::sequence(path)),
                ..Default::default()
            }),
        }]))
    }

    #[test]
    fn who_gets_a_route() {
        let r = learned(vec![65002, 65003]);
        // Not to an AS already on the path; to any other.
        assert!(!advertised_to(Some(&r), 65003, false));
        assert!(!advertised_to(Some(&r), 65002, false));
        assert!(advertised_to(Some(&r), 65004, false));
        // A stub (RNIC) passes nothing learned on, but its own prefixes and UPAs go.
        assert!(!advertised_to(Some(&r), 65004, true));
        assert!(advertised_to(Some(&LocRoute::Local), 65004, true));
        assert!(advertised_to(Some(&LocRoute::Unreachable), 65004, true));
        assert!(!advertised_to(None, 65004, false));
    }

    #[test]
    fn a_decision_is_reused_only_for_the_same_paths() {
        use crate::fare::Policy;
        let LocRoute::Learned(a) = learned(vec![65002]) else {
            panic!()
        };
        let LocRoute::Learned(b) = learned(vec![65002]) else {
            panic!()
        };
        let mut last = LastDecision::default();
        let decided = std::cell::Cell::new(0);
        let one = |_: &[Path]| {
            decided.set(decided.get() + 1);
            (vec![], Policy::default().decide(&[], &[], false))
        };
        last.get(&a, one);
        last.get(&a, one);
        assert_eq!(decided.get(), 1, "the same set: decided once");
        // The same paths in another set (not shared with the first): compared path by
        // path, still the same.
        let copy: Arc<[Path]> = a.iter().cloned().collect();
        last.get(&copy, one);
        assert_eq!(decided.get(), 1);
        // Equal attributes in another allocation (another UPDATE): decided again.
        last.get(&b, one);
        assert_eq!(decided.get(), 2);
        let none: Arc<[Path]> = Arc::new([]);
        last.get(&none, one);
        assert_eq!(decided.get(), 3);
        last.get(&a, one);
        assert_eq!(decided.get(), 4);
    }

    #[test]
    fn known_attribute_codes() {
        // ORIGIN..AGGREGATOR, MP_REACH/UNREACH, EXTENDED_COMMUNITIES, LARGE_COMMUNITY.
        for known in [1, 2, 3, 4, 5, 6, 7, 8, 14, 15, 16, 32] {
            assert!(is_known(known), "{known}");
        }
        for unknown in [0, 9, 13, 17, 26, 33, 255] {
            assert!(!is_known(unknown), "{unknown}");
        }
    }
}
