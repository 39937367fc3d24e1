//! Routing information bases: the Adj-RIB-In of every neighbor and the Loc-RIB in one
//! table keyed by prefix, and the Adj-RIB-Out per neighbor (what was last sent, to send
//! only changes).
//!
//! One entry per prefix holds every neighbor's path for it, sorted best first; the
//! Loc-RIB route is the leading run of those paths (the multipath set), not a copy, and
//! the group last given to the data plane sits in the same entry. Deciding a prefix is
//! one lookup whatever the number of neighbors, and a prefix costs one small entry (see
//! [`Rib`]). Neighbors are named by index inside the RIB (4 bytes, not a 17-byte address);
//! [`Path`] and [`LocRoute`] are the views callers get, with addresses.
//!
//! Multipath is the "as-path multipath-relax" behaviour of Clos fabrics: every usable
//! path with the best (LOCAL_PREF, AS_PATH length, ORIGIN) joins the set, whatever the
//! neighbor AS. Attributes are shared (`Arc`) by every prefix of one UPDATE.

use super::packet::{upa, PathAttributes};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

/// One path of a prefix, as received from `peer`.
#[derive(Clone, Debug, PartialEq)]
pub struct Path {
    pub peer: IpAddr,
    pub attrs: Arc<PathAttributes>,
}

/// Preference of a path's attributes: lower is better. AIGP (RFC 7311 §4) right after
/// LOCAL_PREF: a path with AIGP beats one without (that is how DPF marks the primary
/// color, draft-wang-idr-dpf §2.2.3), lower metric first.
type Rank = (std::cmp::Reverse<u32>, u128, usize, u8);

fn rank(a: &PathAttributes) -> Rank {
    // RFC 8326 §4.1: a path carrying GRACEFUL_SHUTDOWN ranks as LOCAL_PREF 0, so it is
    // used only while no other path is left.
    let pref = if a.has_graceful_shutdown() {
        0
    } else {
        a.local_pref.unwrap_or(100)
    };
    (
        std::cmp::Reverse(pref),
        a.aigp.as_ref().map_or(u128::MAX, |x| x.metric as u128),
        a.as_path.as_ref().map_or(0, |p| p.path_len()),
        a.origin.map_or(2, |o| o as u8),
    )
}

impl Path {
    /// True when the path announces its prefix unreachable (UPA community of `subtype`).
    pub fn is_unreachable(&self, subtype: u8) -> bool {
        upa::unreachable(&self.attrs.ext_communities, subtype).is_some()
    }
}

/// A prefix in the Loc-RIB: originated here, announced unreachable here (UPA,
/// draft-xu-idr-fare-in-mpson §4.1), or the multipath set (best path first; shared by
/// the prefixes decided one after another with the same set, see [`Rib::decide_at`]).
#[derive(Clone, Debug, PartialEq)]
pub enum LocRoute {
    Local,
    Unreachable,
    Learned(Arc<[Path]>),
}

/// A map from prefix to `V` split into [`SHARDS`] hash tables per address family, and for
/// IPv4 per prefix length too. IPv4 keys are the network number alone (4 bytes: the length
/// is the table's), IPv6 keys the prefix (17 bytes), not the 18 of an `IpNet`: with a
/// 4-byte value an IPv4 bucket is 8 bytes. A hash table grows by moving into a new one
/// twice its size, so while it grows it holds both: one table of a million prefixes would
/// need half as much again at that moment; a shard needs 1/16 of that. Keys are hashed by
/// [`spread`].
#[derive(Clone, Debug)]
pub struct PrefixTable<V> {
    /// IPv4: `SHARDS` tables per prefix length (index = length).
    shards: Box<[Shards<Net4, V>]>,
    shards6: Shards<Key6, V>,
}

/// Shards of a [`PrefixTable`] per address family (and IPv4 prefix length).
pub const SHARDS: usize = 16;

type Shard<K, V> = HashMap<K, V, BuildHasherDefault<Spread>>;

/// The `SHARDS` tables of one family (or IPv4 prefix length).
type Shards<K, V> = Box<[Shard<K, V>]>;

/// An IPv4 prefix as a [`PrefixTable`] key: its network number (the address shifted
/// right by its host bits), in the tables of its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Net4(u32);

/// An IPv6 prefix as a [`PrefixTable`] key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key6(Ipv6Net);

impl Hash for Net4 {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(spread(self.0 as u128, 0, 32).0);
    }
}

impl Hash for Key6 {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(spread(u128::from(self.0.addr()), 128, self.0.prefix_len()).0);
    }
}

/// The hash of a prefix and its shard. Consecutive prefixes of one length (as a feed
/// sends them) stay close: the lowest 4 bits of the network number pick the bucket within
/// an aligned run of 16 (and the tag the table compares first), every other bit is mixed
/// (splitmix64's finalizer) into the rest. A lookup then mostly reads the cache lines
/// the previous ones did, where a plain hash sends each to a random place in a table of
/// tens of MiB; as long as runs differ, the spread is that of the mixer. `addr` is an
/// address of `width` bits with prefix length `len`; width 0: `addr` is already the
/// network number (IPv4, whose tables are per length).
fn spread(addr: u128, width: u32, len: u8) -> (u64, usize) {
    let host_bits = width.saturating_sub(len as u32);
    let low = (addr.checked_shr(host_bits).unwrap_or(0) & 15) as u64;
    let rest = addr ^ (low as u128).checked_shl(host_bits).unwrap_or(0);
    let mut x = (rest as u64) ^ ((rest >> 64) as u64).rotate_left(32) ^ ((len as u64) << 56);
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x ^ low ^ (low << 57), (x >> 32) as usize % SHARDS)
}

/// Hands [`spread`]'s value (a key's only `write_u64`) to the table as the hash.
#[derive(Default)]
struct Spread(u64);

impl Hasher for Spread {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ *b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl<V> Default for PrefixTable<V> {
    fn default() -> Self {
        PrefixTable {
            shards: (0..=32)
                .map(|_| (0..SHARDS).map(|_| Shard::default()).collect())
                .collect(),
            shards6: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

/// The length, shard and key of an IPv4 prefix (its host bits ignored).
fn key4(n: &Ipv4Net) -> (usize, usize, Net4) {
    let len = n.prefix_len();
    let net = u32::from(n.addr())
        .checked_shr(32 - len as u32)
        .unwrap_or(0);
    (len as usize, spread(net as u128, 0, 32).1, Net4(net))
}

/// The IPv4 prefix of network number `net` and length `len`.
fn prefix4(len: usize, net: Net4) -> IpNet {
    let addr = net.0.checked_shl(32 - len as u32).unwrap_or(0);
    IpNet::V4(Ipv4Net::new(addr.into(), len as u8).unwrap_or_default())
}

fn shard6(n: &Ipv6Net) -> usize {
    spread(u128::from(n.addr()), 128, n.prefix_len()).1
}

impl<V> PrefixTable<V> {
    fn v4(&self, n: &Ipv4Net) -> (&Shard<Net4, V>, Net4) {
        let (len, shard, key) = key4(n);
        (&self.shards[len][shard], key)
    }
    fn v4_mut(&mut self, n: &Ipv4Net) -> (&mut Shard<Net4, V>, Net4) {
        let (len, shard, key) = key4(n);
        (&mut self.shards[len][shard], key)
    }
    pub fn get(&self, prefix: &IpNet) -> Option<&V> {
        match prefix {
            IpNet::V4(n) => {
                let (t, k) = self.v4(n);
                t.get(&k)
            }
            IpNet::V6(n) => self.shards6[shard6(n)].get(&Key6(*n)),
        }
    }
    pub fn get_mut(&mut self, prefix: &IpNet) -> Option<&mut V> {
        match prefix {
            IpNet::V4(n) => {
                let (t, k) = self.v4_mut(n);
                t.get_mut(&k)
            }
            IpNet::V6(n) => self.shards6[shard6(n)].get_mut(&Key6(*n)),
        }
    }
    /// The value of `prefix`, inserted from `make` when there is none (one probe).
    pub fn get_or_insert_with(&mut self, prefix: IpNet, make: impl FnOnce() -> V) -> &mut V {
        match prefix {
            IpNet::V4(n) => {
                let (t, k) = self.v4_mut(&n);
                t.entry(k).or_insert_with(make)
            }
            IpNet::V6(n) => self.shards6[shard6(&n)].entry(Key6(n)).or_insert_with(make),
        }
    }
    pub fn insert(&mut self, prefix: IpNet, value: V) -> Option<V> {
        match prefix {
            IpNet::V4(n) => {
                let (t, k) = self.v4_mut(&n);
                t.insert(k, value)
            }
            IpNet::V6(n) => self.shards6[shard6(&n)].insert(Key6(n), value),
        }
    }
    pub fn remove(&mut self, prefix: &IpNet) -> Option<V> {
        match prefix {
            IpNet::V4(n) => {
                let (t, k) = self.v4_mut(n);
                t.remove(&k)
            }
            IpNet::V6(n) => self.shards6[shard6(n)].remove(&Key6(*n)),
        }
    }
    pub fn contains_key(&self, prefix: &IpNet) -> bool {
        self.get(prefix).is_some()
    }
    pub fn iter(&self) -> impl Iterator<Item = (IpNet, &V)> {
        let v4 = self.shards.iter().enumerate().flat_map(|(len, shards)| {
            shards
                .iter()
                .flatten()
                .map(move |(k, v)| (prefix4(len, *k), v))
        });
        let v6 = self
            .shards6
            .iter()
            .flatten()
            .map(|(k, v)| (IpNet::V6(k.0), v));
        v4.chain(v6)
    }
    pub fn keys(&self) -> impl Iterator<Item = IpNet> + '_ {
        self.iter().map(|(n, _)| n)
    }
    pub fn into_keys(self) -> impl Iterator<Item = IpNet> {
        let v4 = self.shards.into_vec().into_iter().enumerate();
        let v6 = self.shards6.into_vec().into_iter();
        v4.flat_map(|(len, shards)| {
            shards
                .into_vec()
                .into_iter()
                .flat_map(move |s| s.into_keys().map(move |k| prefix4(len, k)))
        })
        .chain(v6.flat_map(|s| s.into_keys().map(|k| IpNet::V6(k.0))))
    }
    pub fn len(&self) -> usize {
        let v4: usize = self.shards.iter().flatten().map(HashMap::len).sum();
        v4 + self.shards6.iter().map(HashMap::len).sum::<usize>()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

/// A neighbor by its index in the RIB's neighbor list.
type Nbr = u32;

/// A set of paths by (neighbor, attributes' address) of each.
type SetKey = Vec<(Nbr, usize)>;

/// A prefix's entry in the RIB, valid until the prefix is next decided.
pub type EntryId = u32;

/// One received path as the RIB stores it.
#[derive(Clone, Debug)]
struct Slot {
    attrs: Arc<PathAttributes>,
    peer: Nbr,
}

/// The received paths of a prefix, best first: one inline (the common case), more on the
/// heap.
#[derive(Debug, Default)]
enum Paths {
    #[default]
    None,
    One(Slot),
    Many(Box<[Slot]>),
}

impl Paths {
    fn as_slice(&self) -> &[Slot] {
        match self {
            Paths::None => &[],
            Paths::One(s) => std::slice::from_ref(s),
            Paths::Many(v) => v,
        }
    }

    /// Moves the paths into `out`.
    fn take_into(&mut self, out: &mut Vec<Slot>) {
        match std::mem::take(self) {
            Paths::None => {}
            Paths::One(s) => out.push(s),
            Paths::Many(v) => out.extend(v.into_vec()),
        }
    }

    /// Takes the paths of `v` (left empty), an allocation of the exact size for two or more.
    fn from_vec(v: &mut Vec<Slot>) -> Paths {
        match v.len() {
            0 => Paths::None,
            1 => v.pop().map_or(Paths::None, Paths::One),
            _ => Paths::Many(v.drain(..).collect()),
        }
    }
}

/// The members of the group given to the data plane ([`FibKey`] by neighbor index).
#[derive(Debug, Default, PartialEq)]
// Several members behind a thin pointer: 16 bytes in every entry instead of 24.
#[allow(clippy::box_collection)]
enum Fib {
    #[default]
    None,
    One(Nbr, u32),
    Many(Box<Vec<(Nbr, u32)>>),
}

/// What the Loc-RIB last decided for a prefix (for `Learned`, the route is the leading
/// `selected` paths of its entry).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Kind {
    #[default]
    None,
    Local,
    Unreachable,
    Learned,
}

/// Everything the RIB holds for one prefix.
#[derive(Debug, Default)]
struct Entry {
    /// Every neighbor's path (the Adj-RIBs-In), best first.
    paths: Paths,
    /// The group last given to the data plane, kept until its removal is sent (after the
    /// route is gone).
    fib: Fib,
    /// How many of `paths`, from the first, are the multipath set.
    selected: u32,
    route: Kind,
    /// The multipath set changed since the last [`Rib::decide`].
    changed: bool,
    /// Listed for a decision ([`Rib::queue`]) since the last one.
    queued: bool,
}

impl Entry {
    fn is_empty(&self) -> bool {
        matches!(self.paths, Paths::None) && self.route == Kind::None && self.fib == Fib::None
    }
}

/// The RIBs of one speaker. Entries sit densely in one vector (grown in place, freed ones
/// reused) behind a [`PrefixTable`] of 4-byte indices: a hash table wastes up to half its
/// buckets, and those buckets are small.
#[derive(Default)]
pub struct Rib {
    index: PrefixTable<u32>,
    entries: Vec<Entry>,
    free: Vec<u32>,
    /// Addresses by neighbor index, and back.
    neighbors: Vec<IpAddr>,
    neighbor_index: FxHashMap<IpAddr, Nbr>,
    /// Paths in the Adj-RIB-In by neighbor index (kept as paths come and go: counting
    /// them at each read would walk the whole table).
    adj_in_len: Vec<u64>,
    pub adj_out: FxHashMap<IpAddr, FxHashMap<IpNet, Arc<PathAttributes>>>,
    pub local: FxHashSet<IpNet>,
    /// Host routes this node announces unreachable (its RNIC is disconnected).
    pub unreachable: FxHashSet<IpNet>,
    /// UPA subtype: a path that reaches the prefix beats one that announces it
    /// unreachable. None = no UPA handling. Set before the first path is learned.
    pub upa_subtype: Option<u8>,
    /// The prefix decided last and its entry: the group stored right after its decision
    /// needs no lookup.
    last: Option<(IpNet, u32)>,
    /// Working buffers of [`Rib::repath`].
    scratch: Vec<Slot>,
    before: Vec<(Nbr, usize)>,
    /// The multipath set [`Rib::decide_at`] handed out last, by (neighbor, attributes'
    /// address) of each path: the next prefix with the same set (the prefixes of one
    /// UPDATE) gets the same one instead of a copy.
    built: Option<(SetKey, Arc<[Path]>)>,
    /// The neighbor looked up last (the paths of an UPDATE come from one).
    last_neighbor: Option<(IpAddr, Nbr)>,
}

impl Rib {
    /// Adds or replaces a path; returns true when the Adj-RIB-In changed.
    pub fn learn(&mut self, peer: IpAddr, prefix: IpNet, attrs: Arc<PathAttributes>) -> bool {
        self.learn_at(peer, prefix, attrs).is_some()
    }

    /// [`Rib::learn`], returning the prefix's entry when the Adj-RIB-In changed.
    pub fn learn_at(
        &mut self,
        peer: IpAddr,
        prefix: IpNet,
        attrs: Arc<PathAttributes>,
    ) -> Option<EntryId> {
        let n = self.neighbor(peer);
        let i = self.entry_of(prefix);
        let e = &mut self.entries[i];
        fn same(a: &Arc<PathAttributes>, b: &Arc<PathAttributes>) -> bool {
            Arc::ptr_eq(a, b) || **a == **b
        }
        // The common cases without the general re-sort.
        match &mut e.paths {
            Paths::None => {
                e.paths = Paths::One(Slot { attrs, peer: n });
                e.selected = 1;
                e.changed = true;
                self.adj_in_len[n as usize] += 1;
                return Some(i as EntryId);
            }
            Paths::One(s) if s.peer == n => {
                if same(&s.attrs, &attrs) {
                    return None;
                }
                s.attrs = attrs;
                e.changed = true;
                return Some(i as EntryId);
            }
            _ => {}
        }
        let mut added = false;
        let changed = self.repath(i, |v| match v.iter_mut().find(|s| s.peer == n) {
            Some(s) if same(&s.attrs, &attrs) => false,
            Some(s) => {
                s.attrs = attrs;
                true
            }
            None => {
                v.push(Slot { attrs, peer: n });
                added = true;
                true
            }
        });
        self.adj_in_len[n as usize] += u64::from(added);
        changed.then_some(i as EntryId)
    }

    /// How many prefixes `peer` has a path for in the Adj-RIB-In (routes it sent that
    /// the import rules accepted).
    pub fn adj_in_len(&self, peer: IpAddr) -> u64 {
        self.neighbor_index
            .get(&peer)
            .map_or(0, |&n| self.adj_in_len[n as usize])
    }

    /// How many prefixes are advertised to `peer` (its Adj-RIB-Out).
    pub fn adj_out_len(&self, peer: IpAddr) -> u64 {
        self.adj_out.get(&peer).map_or(0, |t| t.len() as u64)
    }

    /// Removes `peer`'s path; returns true when there was one.
    pub fn forget(&mut self, peer: IpAddr, prefix: IpNet) -> bool {
        self.forget_at(peer, prefix).is_some()
    }

    /// [`Rib::forget`], returning the prefix's entry when a path was removed. The entry
    /// stays, even empty, until the prefix is decided.
    pub fn forget_at(&mut self, peer: IpAddr, prefix: IpNet) -> Option<EntryId> {
        let &n = self.neighbor_index.get(&peer)?;
        let i = self.find(&prefix)?;
        self.remove_path(i, n).then_some(i as EntryId)
    }

    /// Drops everything learned from `peer`; returns the prefixes it had (their entries
    /// stay until they are decided).
    pub fn forget_peer(&mut self, peer: IpAddr) -> Vec<IpNet> {
        self.adj_out.remove(&peer);
        let Some(&n) = self.neighbor_index.get(&peer) else {
            return vec![];
        };
        let had: Vec<(IpNet, usize)> = self
            .index
            .iter()
            .map(|(p, &i)| (p, i as usize))
            .filter(|(_, i)| {
                self.entries[*i]
                    .paths
                    .as_slice()
                    .iter()
                    .any(|s| s.peer == n)
            })
            .collect();
        for &(_, i) in &had {
            self.remove_path(i, n);
        }
        had.into_iter().map(|(p, _)| p).collect()
    }

    /// Recomputes the Loc-RIB route of `prefix`; returns the new route if it changed
    /// (`Some(None)` = the prefix is gone).
    pub fn decide(&mut self, prefix: IpNet) -> Option<Option<LocRoute>> {
        self.decide_at(prefix, None)
    }

    /// [`Rib::decide`] with the prefix's entry if known (from [`Rib::learn_at`] or
    /// [`Rib::forget_at`] since the prefix was last decided): no lookup then. Only
    /// deciding a prefix (or taking its group) frees its entry, so the index holds.
    pub fn decide_at(&mut self, prefix: IpNet, entry: Option<EntryId>) -> Option<Option<LocRoute>> {
        let found = match entry {
            Some(i) => {
                debug_assert_eq!(self.find(&prefix), Some(i as usize), "{prefix}");
                Some(i as usize)
            }
            None => self.find(&prefix),
        };
        let (old, selected, changed) = found.map_or((Kind::None, 0, false), |i| {
            let e = &self.entries[i];
            (e.route, e.selected, e.changed)
        });
        // (The sets are small and mostly empty: not hashed then.)
        let new = if !self.local.is_empty() && self.local.contains(&prefix) {
            Kind::Local
        } else if !self.unreachable.is_empty() && self.unreachable.contains(&prefix) {
            // This node answers for the prefix: what others say about it does not count.
            Kind::Unreachable
        } else if selected > 0 {
            Kind::Learned
        } else {
            Kind::None
        };
        if let Some(i) = found {
            self.entries[i].changed = false;
            self.entries[i].queued = false;
            self.last = Some((prefix, i as u32));
        }
        if new == old && !(new == Kind::Learned && changed) {
            // Nothing left of a prefix learned and forgotten since it was last decided.
            if let Some(i) = found {
                self.release(prefix, i);
            }
            return None;
        }
        let i = match found {
            Some(i) => i,
            None => self.entry_of(prefix),
        };
        self.entries[i].route = new;
        let route = if new == Kind::Learned {
            self.learned_at(i)
        } else {
            self.route_at(i)
        };
        self.last = Some((prefix, i as u32));
        self.release(prefix, i);
        Some(route)
    }

    /// Marks `entry` listed for a decision; false when it already was (whoever lists
    /// prefixes to decide lists each once). Deciding its prefix clears the mark.
    pub fn queue(&mut self, entry: EntryId) -> bool {
        !std::mem::replace(&mut self.entries[entry as usize].queued, true)
    }

    /// True when the entry of `prefix` is marked by [`Rib::queue`].
    pub fn is_queued(&self, prefix: &IpNet) -> bool {
        self.find(prefix).is_some_and(|i| self.entries[i].queued)
    }

    /// The Loc-RIB route of `prefix`.
    pub fn route(&self, prefix: &IpNet) -> Option<LocRoute> {
        self.route_at(self.find(prefix)?)
    }

    /// Every Loc-RIB route.
    pub fn routes(&self) -> impl Iterator<Item = (IpNet, LocRoute)> + '_ {
        self.index
            .iter()
            .filter_map(|(p, &i)| Some((p, self.route_at(i as usize)?)))
    }

    /// The prefixes of the Loc-RIB: those with a route or an installed group.
    pub fn prefixes(&self) -> impl Iterator<Item = IpNet> + '_ {
        self.index.iter().filter_map(|(p, &i)| {
            let e = &self.entries[i as usize];
            (e.route != Kind::None || e.fib != Fib::None).then_some(p)
        })
    }

    /// The Loc-RIB routes of `prefix` and of every shorter prefix covering it.
    pub fn covering(&self, prefix: IpNet) -> Vec<(IpNet, LocRoute)> {
        std::iter::successors(Some(prefix.trunc()), IpNet::supernet)
            .filter_map(|q| Some((q, self.route(&q)?)))
            .collect()
    }

    /// Every path received for `prefix` (the Adj-RIBs-In), best first.
    pub fn paths(&self, prefix: &IpNet) -> Vec<Path> {
        self.find(prefix).map_or_else(Vec::new, |i| {
            let e = &self.entries[i];
            e.paths.as_slice().iter().map(|s| self.path(s)).collect()
        })
    }

    /// True when `peer` gave us a route covering `host` (the host itself or a shorter
    /// prefix) that does not announce it unreachable (UPA of `subtype`).
    pub fn reaches(&self, peer: IpAddr, host: IpNet, subtype: u8) -> bool {
        let Some(&n) = self.neighbor_index.get(&peer) else {
            return false;
        };
        std::iter::successors(Some(host.trunc()), IpNet::supernet).any(|q| {
            self.find(&q).is_some_and(|i| {
                self.entries[i].paths.as_slice().iter().any(|s| {
                    s.peer == n && upa::unreachable(&s.attrs.ext_communities, subtype).is_none()
                })
            })
        })
    }

    /// The group last given to the data plane for `prefix`.
    pub fn fib(&self, prefix: &IpNet) -> Option<FibKey> {
        let e = &self.entries[self.find(prefix)?];
        let addr = |n: &Nbr| self.neighbors[*n as usize];
        match &e.fib {
            Fib::None => None,
            Fib::One(n, w) => Some(FibKey::One(addr(n), *w)),
            Fib::Many(m) => Some(FibKey::Many(m.iter().map(|(n, w)| (addr(n), *w)).collect())),
        }
    }

    pub fn set_fib(&mut self, prefix: IpNet, key: FibKey) {
        match key {
            FibKey::One(a, w) => self.swap_fib(prefix, [(a, w)]),
            FibKey::Many(m) => self.swap_fib(prefix, m.iter().copied()),
        };
    }

    /// Makes `members` (neighbor, weight) the group given to the data plane for
    /// `prefix`; returns false when it already was. One lookup, and no allocation for a
    /// one-member group.
    pub fn swap_fib<I>(&mut self, prefix: IpNet, members: I) -> bool
    where
        I: IntoIterator<Item = (IpAddr, u32)>,
        I::IntoIter: ExactSizeIterator,
    {
        let mut members = members.into_iter();
        let fib = match (members.len(), members.next()) {
            (1, Some((a, w))) => Fib::One(self.neighbor(a), w),
            (_, first) => Fib::Many(Box::new(
                first
                    .into_iter()
                    .chain(members)
                    .map(|(a, w)| (self.neighbor(a), w))
                    .collect(),
            )),
        };
        let i = self.entry_of(prefix);
        let e = &mut self.entries[i];
        if e.fib == fib {
            return false;
        }
        e.fib = fib;
        true
    }

    /// Forgets the group of `prefix`; returns whether there was one.
    pub fn take_fib(&mut self, prefix: &IpNet) -> bool {
        let Some(i) = self.find(prefix) else {
            return false;
        };
        let had = std::mem::take(&mut self.entries[i].fib) != Fib::None;
        self.release(*prefix, i);
        had
    }

    /// True when the RIB holds nothing for any prefix.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn path(&self, s: &Slot) -> Path {
        Path {
            peer: self.neighbors[s.peer as usize],
            attrs: s.attrs.clone(),
        }
    }

    fn route_at(&self, i: usize) -> Option<LocRoute> {
        let e = &self.entries[i];
        match e.route {
            Kind::None => None,
            Kind::Local => Some(LocRoute::Local),
            Kind::Unreachable => Some(LocRoute::Unreachable),
            Kind::Learned => {
                let set = &e.paths.as_slice()[..e.selected as usize];
                (!set.is_empty())
                    .then(|| LocRoute::Learned(set.iter().map(|s| self.path(s)).collect()))
            }
        }
    }

    /// The multipath set of entry `i` (its route is `Learned`): the one handed out last
    /// when it has the same paths, else a new one (kept for the next).
    fn learned_at(&mut self, i: usize) -> Option<LocRoute> {
        let e = &self.entries[i];
        let set = &e.paths.as_slice()[..e.selected as usize];
        if set.is_empty() {
            return None;
        }
        let key = set.iter().map(|s| (s.peer, Arc::as_ptr(&s.attrs) as usize));
        if let Some((k, route)) = &self.built {
            if key.clone().eq(k.iter().copied()) {
                return Some(LocRoute::Learned(route.clone()));
            }
        }
        let route: Arc<[Path]> = set.iter().map(|s| self.path(s)).collect();
        let mut k = self.built.take().map(|b| b.0).unwrap_or_default();
        k.clear();
        k.extend(key);
        self.built = Some((k, route.clone()));
        Some(LocRoute::Learned(route))
    }

    /// The index of `peer`, given one on first sight (indices are never reused).
    fn neighbor(&mut self, peer: IpAddr) -> Nbr {
        if let Some((a, n)) = self.last_neighbor {
            if a == peer {
                return n;
            }
        }
        let n = match self.neighbor_index.get(&peer) {
            Some(&n) => n,
            None => {
                let n = self.neighbors.len() as Nbr;
                self.neighbors.push(peer);
                self.adj_in_len.push(0);
                self.neighbor_index.insert(peer, n);
                n
            }
        };
        self.last_neighbor = Some((peer, n));
        n
    }

    fn find(&self, prefix: &IpNet) -> Option<usize> {
        match self.last {
            Some((p, i)) if p == *prefix => Some(i as usize),
            _ => self.index.get(prefix).map(|&i| i as usize),
        }
    }

    /// The entry of `prefix`, made when there is none.
    fn entry_of(&mut self, prefix: IpNet) -> usize {
        if let Some(i) = self.last.filter(|l| l.0 == prefix) {
            return i.1 as usize;
        }
        let Rib {
            index,
            entries,
            free,
            ..
        } = self;
        *index.get_or_insert_with(prefix, || {
            free.pop().unwrap_or_else(|| {
                entries.push(Entry::default());
                (entries.len() - 1) as u32
            })
        }) as usize
    }

    /// Frees the entry of `prefix` (at `i`) when nothing is left in it.
    fn release(&mut self, prefix: IpNet, i: usize) {
        if self.entries[i].is_empty() {
            if self.last.is_some_and(|l| l.0 == prefix) {
                self.last = None;
            }
            self.index.remove(&prefix);
            self.entries[i] = Entry::default();
            self.free.push(i as u32);
        }
    }

    /// Removes neighbor `n`'s path from entry `i`; returns whether it had one.
    fn remove_path(&mut self, i: usize, n: Nbr) -> bool {
        let e = &mut self.entries[i];
        let removed = match &e.paths {
            Paths::None => false,
            Paths::One(s) if s.peer != n => false,
            Paths::One(_) => {
                e.paths = Paths::None;
                e.selected = 0;
                e.changed = true;
                true
            }
            Paths::Many(_) => self.repath(i, |v| {
                let had = v.len();
                v.retain(|s| s.peer != n);
                v.len() != had
            }),
        };
        if removed {
            self.adj_in_len[n as usize] -= 1;
        }
        removed
    }

    /// Applies `change` to the paths of entry `i` (it returns whether it changed them),
    /// then sorts them best first and takes the multipath set as their leading run:
    /// paths that reach the prefix before UPAs (when UPA is handled), then by [`Rank`],
    /// ties by neighbor address. Marks the entry changed when that set did.
    fn repath(&mut self, i: usize, change: impl FnOnce(&mut Vec<Slot>) -> bool) -> bool {
        let e = &mut self.entries[i];
        let mut v = std::mem::take(&mut self.scratch);
        e.paths.take_into(&mut v);
        self.before.clear();
        self.before.extend(
            v[..e.selected as usize]
                .iter()
                .map(|s| (s.peer, Arc::as_ptr(&s.attrs) as usize)),
        );
        let changed = change(&mut v);
        if changed {
            let upa = self.upa_subtype;
            let neighbors = &self.neighbors;
            let key = |s: &Slot| {
                let unreachable =
                    upa.is_some_and(|t| upa::unreachable(&s.attrs.ext_communities, t).is_some());
                (unreachable, rank(&s.attrs))
            };
            v.sort_by(|a, b| {
                key(a)
                    .cmp(&key(b))
                    .then(neighbors[a.peer as usize].cmp(&neighbors[b.peer as usize]))
            });
            let best = v.first().map(key);
            e.selected = v.iter().take_while(|s| Some(key(s)) == best).count() as u32;
            let set = v[..e.selected as usize]
                .iter()
                .map(|s| (s.peer, Arc::as_ptr(&s.attrs) as usize));
            if !set.eq(self.before.iter().copied()) {
                e.changed = true;
            }
        }
        e.paths = Paths::from_vec(&mut v);
        self.scratch = v;
        changed
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

    /// The per-neighbor Adj-RIB-In count follows learn (new path only), replace,
    /// forget and forget_peer, with one and with several paths per prefix.
    #[test]
    fn adj_in_len_counts_each_neighbors_prefixes() {
        let mut rib = Rib::default();
        let p: IpNet = "192.0.2.0/24".parse().unwrap();
        let q: IpNet = "198.51.100.0/24".parse().unwrap();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let counts = |rib: &Rib| (rib.adj_in_len(a), rib.adj_in_len(b));
        assert_eq!(counts(&rib), (0, 0));
        rib.learn(a, p, attrs(&[65100]));
        rib.learn(a, p, attrs(&[65100, 65200]));
        assert_eq!(counts(&rib), (1, 0), "a replaced path is not a new one");
        rib.learn(b, p, attrs(&[65200]));
        rib.learn(b, q, attrs(&[65200]));
        rib.learn(b, q, attrs(&[65200, 65300]));
        assert_eq!(counts(&rib), (1, 2));
        assert!(!rib.forget(a, q), "a has no path for q");
        assert!(rib.forget(a, p));
        assert_eq!(counts(&rib), (0, 2));
        rib.learn(a, q, attrs(&[65100]));
        assert_eq!(rib.forget_peer(b).len(), 2);
        assert_eq!(counts(&rib), (1, 0));
        assert_eq!(rib.adj_out_len(a), 0);
    }

    #[test]
    fn one_entry_holds_every_neighbors_path() {
        use crate::packet::upa::DEFAULT_UPA_SUBTYPE;
        let mut rib = Rib::default();
        let p: IpNet = "192.0.2.0/24".parse().unwrap();
        let q: IpNet = "198.51.100.0/24".parse().unwrap();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        rib.learn(a, p, attrs(&[65100, 65001]));
        // A longer AS path: a backup.
        rib.learn(b, p, attrs(&[65200, 65300, 65001]));
        rib.learn(b, q, attrs(&[65200]));
        let Some(Some(LocRoute::Learned(paths))) = rib.decide(p) else {
            panic!()
        };
        assert_eq!(paths.iter().map(|p| p.peer).collect::<Vec<_>>(), [a]);
        assert!(rib.decide(q).is_some());
        // The backup changes, the route does not.
        assert!(rib.learn(b, p, attrs(&[65200, 65400, 65001])));
        assert_eq!(rib.decide(p), None);
        let all: Vec<IpAddr> = rib.paths(&p).iter().map(|p| p.peer).collect();
        assert_eq!(all, [a, b], "best first");
        // b goes: both its prefixes are named, a's path stays.
        let mut gone = rib.forget_peer(b);
        gone.sort();
        assert_eq!(gone, [p, q]);
        assert_eq!(rib.decide(p), None);
        assert_eq!(rib.decide(q), Some(None));
        assert_eq!(rib.prefixes().collect::<Vec<_>>(), [p]);
        // A host inside p is reached through a, not through b.
        let host: IpNet = "192.0.2.7/32".parse().unwrap();
        assert!(rib.reaches(a, host, DEFAULT_UPA_SUBTYPE));
        assert!(!rib.reaches(b, host, DEFAULT_UPA_SUBTYPE));
        assert_eq!(rib.covering(host).len(), 1);
    }

    #[test]
    fn consecutive_prefixes_hash_into_one_run_of_buckets() {
        // 10.0.32.0/24 .. 10.0.47.0/24: network numbers 16k .. 16k+15.
        let h = |i: u32| spread(((10u32 << 24) | ((32 + i) << 8)) as u128, 32, 24);
        let (first, shard) = h(0);
        for i in 1..16u64 {
            let (hash, s) = h(i as u32);
            assert_eq!(s, shard, "one shard");
            // Only the lowest 4 bits (the bucket in the run) and the tag's differ.
            assert_eq!(hash ^ first, i ^ (i << 57));
        }
        let (next, _) = h(16);
        assert_ne!(next >> 4, first >> 4, "the next run is elsewhere");
    }

    /// The mixer is splitmix64's finalizer: its published first outputs from seed 0 are
    /// the finalizer of the state after one and two steps of the golden gamma
    /// (0x9e3779b97f4a7c15 -> 0xe220a8397b1dcdaf, 0x3c6ef372fe94f82a -> 0x6e789e6aa1b965f4).
    /// An IPv6 /128 whose lowest 4 bits are 0 reaches the finalizer as its low half XOR its
    /// high half rotated by 32 XOR the length (128) shifted to the top byte.
    #[test]
    fn spread_mixes_with_splitmix64s_finalizer() {
        let top = 128u64 << 56;
        let address = |low: u64, mixed: u64| -> u128 {
            let high = (mixed ^ low ^ top).rotate_right(32);
            ((high as u128) << 64) | low as u128
        };
        // All in the high half, then shared between halves with overlapping bits.
        let a = address(0, 0x9e37_79b9_7f4a_7c15);
        let b = address(0xffff_0000_0000_0000, 0x3c6e_f372_fe94_f82a);
        assert_eq!(
            spread(a, 128, 128),
            (0xe220_a839_7b1d_cdaf, 0xe220_a839 % 16)
        );
        assert_eq!(
            spread(b, 128, 128),
            (0x6e78_9e6a_a1b9_65f4, 0x6e78_9e6a % 16)
        );
        // An IPv6 prefix's shard is that of its spread.
        let a6 = Ipv6Net::new(a.into(), 128).unwrap();
        assert_eq!(shard6(&a6), 0xe220_a839 % 16);
        // The table hashes a key by that value alone.
        let hasher = BuildHasherDefault::<Spread>::default();
        use std::hash::BuildHasher;
        assert_eq!(
            hasher.hash_one(Net4(0x0a00_2000)),
            spread(0x0a00_2000, 0, 32).0
        );
        let v6: Ipv6Net = "2001:db8::/48".parse().unwrap();
        let want = spread(u128::from(v6.addr()), 128, 48).0;
        assert_eq!(hasher.hash_one(Key6(v6)), want);
    }

    /// Both families in one table: a value found, changed in place, counted and removed.
    #[test]
    fn prefix_table_of_both_families_counts_and_changes_in_place() {
        let mut t: PrefixTable<u32> = PrefixTable::default();
        assert!(t.is_empty());
        assert_eq!(t.len(), 0);
        let v4: IpNet = "198.51.100.0/24".parse().unwrap();
        let v6: IpNet = "2001:db8:1::/48".parse().unwrap();
        t.insert(v4, 4);
        t.insert(v6, 6);
        assert_eq!((t.len(), t.is_empty()), (2, false));
        assert!(t.contains_key(&v4) && t.contains_key(&v6));
        *t.get_mut(&v4).unwrap() += 40;
        *t.get_mut(&v6).unwrap() += 60;
        assert_eq!((t.get(&v4), t.get(&v6)), (Some(&44), Some(&66)));
        assert_eq!(*t.get_or_insert_with(v6, || 0), 66);
        assert_eq!(t.remove(&v6), Some(66));
        assert_eq!((t.len(), t.contains_key(&v6)), (1, false));
    }

    /// The same attributes again (another copy or the same one) change nothing; a path
    /// left alone after another's withdrawal is held inline again.
    #[test]
    fn relearning_equal_attributes_changes_nothing_and_one_path_is_inline() {
        let mut rib = Rib::default();
        let p: IpNet = "192.0.2.0/24".parse().unwrap();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = attrs(&[65100]);
        assert!(rib.learn(a, p, first.clone()));
        assert!(!rib.learn(a, p, first.clone()), "the same Arc");
        assert!(!rib.learn(a, p, attrs(&[65100])), "an equal copy");
        assert!(rib.learn(b, p, attrs(&[65200])));
        assert!(
            !rib.learn(b, p, attrs(&[65200])),
            "an equal copy among two paths"
        );
        assert!(
            rib.learn(b, p, attrs(&[65200, 65201])),
            "different attributes"
        );
        assert!(rib.forget(b, p));
        let i = rib.find(&p).unwrap();
        assert!(matches!(rib.entries[i].paths, Paths::One(_)));
    }

    /// An originated prefix and one announced unreachable here are decided so; another
    /// prefix beside them is still the learned one.
    #[test]
    fn local_and_unreachable_prefixes_leave_the_others_learned() {
        let mut rib = Rib::default();
        let [own, gone, other]: [IpNet; 3] =
            ["192.0.2.0/24", "192.0.2.7/32", "198.51.100.0/24"].map(|p| p.parse().unwrap());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        rib.local.insert(own);
        rib.unreachable.insert(gone);
        for p in [own, gone, other] {
            rib.learn(a, p, attrs(&[65100]));
        }
        assert_eq!(rib.decide(own), Some(Some(LocRoute::Local)));
        assert_eq!(rib.decide(gone), Some(Some(LocRoute::Unreachable)));
        let Some(Some(LocRoute::Learned(paths))) = rib.decide(other) else {
            panic!("{:?}", rib.route(&other))
        };
        assert_eq!(paths.iter().map(|p| p.peer).collect::<Vec<_>>(), [a]);
    }

    /// Only decided prefixes are in the Loc-RIB's routes and prefixes.
    #[test]
    fn routes_and_prefixes_are_the_decided_ones() {
        let mut rib = Rib::default();
        let [decided, pending]: [IpNet; 2] =
            ["192.0.2.0/24", "198.51.100.0/24"].map(|p| p.parse().unwrap());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        rib.learn(a, decided, attrs(&[65100]));
        rib.learn(a, pending, attrs(&[65100]));
        let Some(Some(route)) = rib.decide(decided) else {
            panic!("no route")
        };
        assert!(!rib.is_empty());
        assert_eq!(rib.routes().collect::<Vec<_>>(), vec![(decided, route)]);
        assert_eq!(rib.prefixes().collect::<Vec<_>>(), vec![decided]);
    }

    /// A freed entry is reused by the next prefix; the freed prefix then has nothing,
    /// even right after its own decision.
    #[test]
    fn a_freed_entry_reused_by_another_prefix_is_not_the_old_ones() {
        let mut rib = Rib::default();
        let [gone, next]: [IpNet; 2] =
            ["192.0.2.0/24", "198.51.100.0/24"].map(|p| p.parse().unwrap());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let first = rib.learn_at(a, gone, attrs(&[65100]));
        assert!(rib.decide(gone).is_some());
        rib.forget(a, gone);
        assert_eq!(rib.decide(gone), Some(None));
        let reused = rib.learn_at(a, next, attrs(&[65200]));
        assert_eq!(reused, first, "the freed entry");
        assert!(rib.paths(&gone).is_empty());
        assert_eq!(rib.route(&gone), None);
        assert_eq!(rib.paths(&next).len(), 1);
    }

    #[test]
    fn a_prefix_learned_and_forgotten_before_its_decision_leaves_nothing() {
        let mut rib = Rib::default();
        let p: IpNet = "192.0.2.0/24".parse().unwrap();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let entry = rib.learn_at(a, p, attrs(&[65100]));
        assert!(entry.is_some());
        assert_eq!(rib.forget_at(a, p), entry);
        let entry = entry.unwrap_or_default();
        assert!(rib.queue(entry) && !rib.queue(entry), "queued once");
        assert!(rib.is_queued(&p));
        assert_eq!(
            rib.decide_at(p, Some(entry)),
            None,
            "no route before, none after"
        );
        assert!(rib.is_empty());
    }

    #[test]
    fn an_entry_is_small() {
        // What a prefix costs besides its index bucket (see `Rib`).
        assert_eq!(std::mem::size_of::<Entry>(), 48);
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
        // 256 per shard of the /24 tables on average; each between half and twice that.
        for s in t.shards[24].iter() {
            assert!((128..=512).contains(&s.len()), "shard of {}", s.len());
        }
        // Another length is another key; the host bits of a prefix are not.
        let wider: IpNet = "16.0.0.0/23".parse().unwrap();
        assert!(!t.contains_key(&wider));
        let host: IpNet = "16.0.77.1/24".parse().unwrap();
        assert_eq!(t.get(&host), Some(&77));
        let mut keys: Vec<IpNet> = t.keys().collect();
        keys.sort();
        assert_eq!(keys[..2], [net(0), net(1)]);
        let all: IpNet = "0.0.0.0/0".parse().unwrap();
        let host32: IpNet = "255.255.255.255/32".parse().unwrap();
        assert_eq!(t.insert(all, 1_000_000), None);
        assert_eq!(t.insert(host32, 1_000_001), None);
        assert_eq!(t.get(&all), Some(&1_000_000));
        assert!(t.keys().any(|k| k == all) && t.keys().any(|k| k == host32));
        assert_eq!(t.remove(&all), Some(1_000_000));
        assert_eq!(t.remove(&host32), Some(1_000_001));
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
        assert_eq!(rib.fib(&p), Some(FibKey::One(a, 1)));
        rib.forget(a, p);
        assert_eq!(rib.decide(p), Some(None));
        assert_eq!(rib.route(&p), None);
        assert_eq!(rib.routes().count(), 0);
        // The data plane still has the group: its removal is still to be sent.
        assert_eq!(rib.fib(&p), Some(FibKey::One(a, 1)));
        assert!(rib.take_fib(&p));
        assert!(!rib.take_fib(&p));
        assert!(rib.is_empty(), "nothing left of the prefix");
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
