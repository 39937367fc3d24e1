//! Routing information bases: Adj-RIB-In per neighbor, the Loc-RIB with the multipath set
//! of each prefix, Adj-RIB-Out per neighbor (what was last sent, to send only changes).
//!
//! Multipath is the "as-path multipath-relax" behaviour of Clos fabrics: every usable
//! path with the best (LOCAL_PREF, AS_PATH length, ORIGIN) joins the set, whatever the
//! neighbor AS. Attributes are shared (`Arc`) by every prefix of one UPDATE.

use super::packet::{upa, PathAttributes};
use ipnet::IpNet;
use rustc_hash::{FxHashMap, FxHashSet};
use std::net::IpAddr;
use std::sync::Arc;

/// One path of a prefix, as received from `peer`.
#[derive(Clone, Debug, PartialEq)]
pub struct Path {
    pub peer: IpAddr,
    pub attrs: Arc<PathAttributes>,
}

impl Path {
    /// True when the path announces its prefix unreachable (UPA community of `subtype`).
    pub fn is_unreachable(&self, subtype: u8) -> bool {
        upa::unreachable(&self.attrs.ext_communities, subtype).is_some()
    }

    /// Sort key for preference: lower is better. AIGP (RFC 7311 §4) right after
    /// LOCAL_PREF: a path with AIGP beats one without (that is how DPF marks the primary
    /// color, draft-wang-idr-dpf §2.2.3), lower metric first.
    fn rank(&self) -> (std::cmp::Reverse<u32>, u128, usize, u8) {
        let a = &self.attrs;
        (
            std::cmp::Reverse(a.local_pref.unwrap_or(100)),
            a.aigp.as_ref().map_or(u128::MAX, |x| x.metric as u128),
            a.as_path.as_ref().map_or(0, |p| p.path_len()),
            a.origin.map_or(2, |o| o as u8),
        )
    }
}

/// A prefix in the Loc-RIB: originated here, announced unreachable here (UPA,
/// draft-xu-idr-fare-in-mpson §4.1), or the multipath set (best path first).
#[derive(Clone, Debug, PartialEq)]
pub enum LocRoute {
    Local,
    Unreachable,
    Learned(Box<[Path]>),
}

/// A map from prefix to `V` split into [`SHARDS`] hash tables (FxHash: a multiply per
/// word, against SipHash's rounds that were a tenth of the ingest's CPU). A hash table grows by
/// moving into a new one twice its size, so while it grows it holds both: one table of a
/// million prefixes would need half as much again at that moment; a shard needs 1/16 of
/// that.
#[derive(Clone, Debug)]
pub struct PrefixTable<V> {
    shards: Box<[FxHashMap<IpNet, V>]>,
}

/// Shards of a [`PrefixTable`].
pub const SHARDS: usize = 16;

impl<V> Default for PrefixTable<V> {
    fn default() -> Self {
        PrefixTable {
            shards: (0..SHARDS).map(|_| FxHashMap::default()).collect(),
        }
    }
}

/// The shard of `prefix`: the top bits of its address and length multiplied by 2^64/phi
/// (every bit of the prefix moves them).
fn shard(prefix: &IpNet) -> usize {
    let (addr, len) = match prefix {
        IpNet::V4(n) => (u32::from(n.addr()) as u128, n.prefix_len()),
        IpNet::V6(n) => (u128::from(n.addr()), n.prefix_len()),
    };
    let x = (addr as u64) ^ ((addr >> 64) as u64).rotate_left(17) ^ ((len as u64) << 56);
    (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 60) as usize % SHARDS
}

impl<V> PrefixTable<V> {
    pub fn get(&self, prefix: &IpNet) -> Option<&V> {
        self.shards[shard(prefix)].get(prefix)
    }
    pub fn get_mut(&mut self, prefix: &IpNet) -> Option<&mut V> {
        self.shards[shard(prefix)].get_mut(prefix)
    }
    pub fn entry(&mut self, prefix: IpNet) -> std::collections::hash_map::Entry<'_, IpNet, V> {
        self.shards[shard(&prefix)].entry(prefix)
    }
    pub fn insert(&mut self, prefix: IpNet, value: V) -> Option<V> {
        self.shards[shard(&prefix)].insert(prefix, value)
    }
    pub fn remove(&mut self, prefix: &IpNet) -> Option<V> {
        self.shards[shard(prefix)].remove(prefix)
    }
    pub fn contains_key(&self, prefix: &IpNet) -> bool {
        self.shards[shard(prefix)].contains_key(prefix)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&IpNet, &V)> {
        self.shards.iter().flat_map(|s| s.iter())
    }
    pub fn keys(&self) -> impl Iterator<Item = &IpNet> {
        self.shards.iter().flat_map(|s| s.keys())
    }
    pub fn into_keys(self) -> impl Iterator<Item = IpNet> {
        self.shards
            .into_vec()
            .into_iter()
            .flat_map(|s| s.into_keys())
    }
    pub fn len(&self) -> usize {
        self.shards.iter().map(FxHashMap::len).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(FxHashMap::is_empty)
    }
}

/// The members (neighbor, weight) of the group the data plane was given for a prefix,
/// kept to send only changes: one member (the common case) inline, more on the heap.
#[derive(Clone, Debug, PartialEq)]
pub enum FibKey {
    One(IpAddr, u32),
    Many(Box<[(IpAddr, u32)]>),
}

impl FibKey {
    pub fn new(members: Vec<(IpAddr, u32)>) -> FibKey {
        match members[..] {
            [(peer, weight)] => FibKey::One(peer, weight),
            _ => FibKey::Many(members.into_boxed_slice()),
        }
    }
}

/// What the Loc-RIB holds for one prefix: its route, and the group last given to the
/// data plane for it (kept until the removal is sent, after the route is gone). One
/// table for both: a million prefixes are one hash table, not two.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocEntry {
    pub route: Option<LocRoute>,
    pub fib: Option<FibKey>,
}

#[derive(Default)]
pub struct Rib {
    pub adj_in: FxHashMap<IpAddr, PrefixTable<Arc<PathAttributes>>>,
    /// Prefixes with a route or an installed group (see [`LocEntry`]).
    pub loc: PrefixTable<LocEntry>,
    pub adj_out: FxHashMap<IpAddr, FxHashMap<IpNet, Arc<PathAttributes>>>,
    pub local: FxHashSet<IpNet>,
    /// Host routes this node announces unreachable (its RNIC is disconnected).
    pub unreachable: FxHashSet<IpNet>,
    /// UPA subtype: a path that reaches the prefix beats one that announces it
    /// unreachable. None = no UPA handling.
    pub upa_subtype: Option<u8>,
    /// [`Rib::decide`]'s working buffer.
    scratch: Vec<Path>,
}

impl Rib {
    /// Adds or replaces a path; returns true when the Adj-RIB-In changed.
    pub fn learn(&mut self, peer: IpAddr, prefix: IpNet, attrs: Arc<PathAttributes>) -> bool {
        let table = self.adj_in.entry(peer).or_default();
        match table.insert(prefix, attrs.clone()) {
            Some(old) => old != attrs,
            None => true,
        }
    }

    pub fn forget(&mut self, peer: IpAddr, prefix: IpNet) -> bool {
        self.adj_in
            .get_mut(&peer)
            .is_some_and(|t| t.remove(&prefix).is_some())
    }

    /// Drops everything learned from `peer`; returns the prefixes it had.
    pub fn forget_peer(&mut self, peer: IpAddr) -> Vec<IpNet> {
        self.adj_out.remove(&peer);
        self.adj_in
            .remove(&peer)
            .map(|t| t.into_keys().collect())
            .unwrap_or_default()
    }

    /// Recomputes the Loc-RIB entry of `prefix`; returns the new entry if it changed
    /// (`Some(None)` = the prefix is gone).
    pub fn decide(&mut self, prefix: IpNet) -> Option<Option<LocRoute>> {
        let new = if self.local.contains(&prefix) {
            Some(LocRoute::Local)
        } else if self.unreachable.contains(&prefix) {
            // This node answers for the prefix: what others say about it does not count.
            Some(LocRoute::Unreachable)
        } else {
            // Collected in a reused buffer, then copied to an allocation of the exact
            // size: no short-lived larger allocation per prefix between the long-lived
            // small ones (heap fragmentation).
            let mut paths = std::mem::take(&mut self.scratch);
            paths.clear();
            paths.extend(self.adj_in.iter().filter_map(|(peer, t)| {
                t.get(&prefix).map(|a| Path {
                    peer: *peer,
                    attrs: a.clone(),
                })
            }));
            if let Some(subtype) = self.upa_subtype {
                if paths.iter().any(|p| !p.is_unreachable(subtype)) {
                    paths.retain(|p| !p.is_unreachable(subtype));
                }
            }
            select(&mut paths);
            let route = (!paths.is_empty()).then(|| LocRoute::Learned(paths.as_slice().into()));
            paths.clear();
            self.scratch = paths;
            route
        };
        if self.route(&prefix) == new.as_ref() {
            return None;
        }
        match &new {
            Some(r) => {
                let entry = self.loc.entry(prefix).or_default();
                entry.route = Some(r.clone());
            }
            None => {
                if let Some(e) = self.loc.get_mut(&prefix) {
                    e.route = None;
                    if e.fib.is_none() {
                        self.loc.remove(&prefix);
                    }
                }
            }
        }
        Some(new)
    }

    /// The Loc-RIB route of `prefix`.
    pub fn route(&self, prefix: &IpNet) -> Option<&LocRoute> {
        self.loc.get(prefix)?.route.as_ref()
    }

    /// Every Loc-RIB route.
    pub fn routes(&self) -> impl Iterator<Item = (&IpNet, &LocRoute)> {
        self.loc
            .iter()
            .filter_map(|(p, e)| Some((p, e.route.as_ref()?)))
    }

    /// The group last given to the data plane for `prefix`.
    pub fn fib(&self, prefix: &IpNet) -> Option<&FibKey> {
        self.loc.get(prefix)?.fib.as_ref()
    }

    pub fn set_fib(&mut self, prefix: IpNet, key: FibKey) {
        self.loc.entry(prefix).or_default().fib = Some(key);
    }

    /// Forgets the group of `prefix`; returns whether there was one.
    pub fn take_fib(&mut self, prefix: &IpNet) -> bool {
        let Some(e) = self.loc.get_mut(prefix) else {
            return false;
        };
        let had = e.fib.take().is_some();
        if e.route.is_none() {
            self.loc.remove(prefix);
        }
        had
    }
}

/// Keeps the multipath set of `paths`, sorted best first (ties by neighbor address).
pub fn select(paths: &mut Vec<Path>) {
    paths.sort_by(|a, b| a.rank().cmp(&b.rank()).then(a.peer.cmp(&b.peer)));
    if let Some(best) = paths.first().map(Path::rank) {
        paths.retain(|p| p.rank() == best);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{AsPath, Origin};

    fn attrs(path: &[u32]) -> Arc<PathAttributes> {
        Arc::new(PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence(path.to_vec())),
            ..Default::default()
        })
    }

    #[test]
    fn multipath_relax_groups_equal_length_paths_from_different_ases() {
        let mut rib = Rib::default();
        let p: IpNet = "192.0.2.0/24".parse().unwrap();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        rib.learn(a, p, attrs(&[65100, 65001]));
        rib.learn(b, p, attrs(&[65200, 65001]));
        rib.learn(c, p, attrs(&[65300, 65400, 65001]));
        let Some(Some(LocRoute::Learned(paths))) = rib.decide(p) else {
            panic!()
        };
        assert_eq!(paths.iter().map(|p| p.peer).collect::<Vec<_>>(), [a, b]);
        assert_eq!(rib.decide(p), None, "unchanged");
        rib.forget(a, p);
        rib.forget(b, p);
        let Some(Some(LocRoute::Learned(paths))) = rib.decide(p) else {
            panic!()
        };
        assert_eq!(paths[0].peer, c);
        rib.forget_peer(c);
        assert_eq!(rib.decide(p), Some(None));
    }

    #[test]
    fn prefix_table_spreads_consecutive_prefixes_and_keeps_families_apart() {
        let mut t = PrefixTable::default();
        let net = |i: u32| -> IpNet {
            format!("{}/24", std::net::Ipv4Addr::from((16u32 << 24) + (i << 8)))
                .parse()
                .unwrap()
        };
        for i in 0..4096 {
            assert_eq!(t.insert(net(i), i), None);
        }
        assert_eq!(t.len(), 4096);
        // 256 per shard on average; each between half and twice that.
        for s in t.shards.iter() {
            assert!((128..=512).contains(&s.len()), "shard of {}", s.len());
        }
        assert_eq!(t.get(&net(77)), Some(&77));
        let v6: IpNet = "::1000:0/120".parse().unwrap();
        assert!(
            !t.contains_key(&v6),
            "an IPv6 prefix with the same bits is another key"
        );
        assert_eq!(t.remove(&net(77)), Some(77));
        assert_eq!(t.get(&net(77)), None);
        assert_eq!(t.keys().count(), 4095);
        assert_eq!(t.into_keys().count(), 4095);
    }

    #[test]
    fn a_group_outlives_its_route_until_its_removal_is_taken() {
        let mut rib = Rib::default();
        let p: IpNet = "192.0.2.0/24".parse().unwrap();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        rib.learn(a, p, attrs(&[65100]));
        assert!(rib.decide(p).is_some());
        rib.set_fib(p, FibKey::new(vec![(a, 1)]));
        assert_eq!(rib.fib(&p), Some(&FibKey::One(a, 1)));
        rib.forget(a, p);
        assert_eq!(rib.decide(p), Some(None));
        assert_eq!(rib.route(&p), None);
        assert_eq!(rib.routes().count(), 0);
        // The data plane still has the group: its removal is still to be sent.
        assert_eq!(rib.fib(&p), Some(&FibKey::One(a, 1)));
        assert!(rib.take_fib(&p));
        assert!(!rib.take_fib(&p));
        assert!(rib.loc.is_empty(), "nothing left of the prefix");
        // Two members go to the heap, in order.
        assert_eq!(
            FibKey::new(vec![(a, 3), (b, 1)]),
            FibKey::Many(vec![(a, 3), (b, 1)].into_boxed_slice())
        );
    }

    #[test]
    fn aigp_path_beats_paths_without_it() {
        use crate::packet::Aigp;
        let mut rib = Rib::default();
        let p: IpNet = "192.0.2.0/24".parse().unwrap();
        let red: IpAddr = "10.0.0.1".parse().unwrap();
        let blue: IpAddr = "10.0.0.2".parse().unwrap();
        let mut primary = (*attrs(&[65100, 65001])).clone();
        primary.aigp = Some(Aigp::new(0));
        rib.learn(red, p, Arc::new(primary));
        rib.learn(blue, p, attrs(&[65100, 65001]));
        let Some(Some(LocRoute::Learned(paths))) = rib.decide(p) else {
            panic!()
        };
        assert_eq!(paths.iter().map(|p| p.peer).collect::<Vec<_>>(), [red]);
        // The primary goes away: the backup takes over.
        rib.forget_peer(red);
        let Some(Some(LocRoute::Learned(paths))) = rib.decide(p) else {
            panic!()
        };
        assert_eq!(paths.iter().map(|p| p.peer).collect::<Vec<_>>(), [blue]);
    }

    #[test]
    fn a_reaching_path_beats_an_unreachable_announcement() {
        use crate::packet::upa::{Upa, DEFAULT_UPA_SUBTYPE};
        let mut rib = Rib {
            upa_subtype: Some(DEFAULT_UPA_SUBTYPE),
            ..Rib::default()
        };
        let host: IpNet = "10.200.0.3/32".parse().unwrap();
        let plane1: IpAddr = "10.1.11.1".parse().unwrap();
        let plane2: IpAddr = "10.2.11.1".parse().unwrap();
        let mut upa = (*attrs(&[65111, 65100, 65112])).clone();
        upa.ext_communities
            .push(Upa::new("10.1.0.2".parse().unwrap()).to_community(DEFAULT_UPA_SUBTYPE));
        rib.learn(plane1, host, Arc::new(upa));
        // Longer AS path, but it reaches the host: it wins over the UPA.
        rib.learn(plane2, host, attrs(&[65211, 65200, 65212, 4200000003]));
        let Some(Some(LocRoute::Learned(paths))) = rib.decide(host) else {
            panic!()
        };
        assert_eq!(paths.iter().map(|p| p.peer).collect::<Vec<_>>(), [plane2]);
        // Only the UPA left: it is the route (what an RNIC derives its host route from).
        rib.forget(plane2, host);
        let Some(Some(LocRoute::Learned(paths))) = rib.decide(host) else {
            panic!()
        };
        assert!(paths[0].is_unreachable(DEFAULT_UPA_SUBTYPE));
        // The node that answers for the host announces it, whatever it learned.
        rib.unreachable.insert(host);
        assert_eq!(rib.decide(host), Some(Some(LocRoute::Unreachable)));
    }
}
