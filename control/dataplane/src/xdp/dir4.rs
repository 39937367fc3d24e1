//! The fast path's IPv4 route table (`fare_common::dir4`), kept beside ROUTES_V4: the
//! routes expanded into DIR4_TOP (one entry per /16) and blocks of 256 entries for the
//! next byte, at most two deep (/24, then /32). `Dir4` holds the routes and a copy of
//! both arrays; a route change recomputes only the entries whose range meets the
//! changed prefix and returns the writes that bring the maps to the new table, in an
//! order that is safe for packets reading them meanwhile: a new block is filled before
//! the entry that points to it, and a block no entry points to any more is reused only
//! after a grace period. Without a free block an entry is left 0, which sends the fast
//! path to the trie: the table may be incomplete, never wrong.

use std::collections::BTreeMap;

use fare_common::dir4::{self, BLOCK, BLOCK_ENTRIES, MAX_BLOCKS, TOP_ENTRIES};
use fare_common::RouteValue;
use ipnet::Ipv4Net;

use aya::maps::{Array, MapData};
use aya::Ebpf;

use super::group_ids::GroupIds;
use crate::DataplaneError;

use super::err;

/// One entry to store: DIR4_TOP[index] or DIR4_BLOCKS[index].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    Top(u32, u32),
    Block(u32, u32),
}

const BLOCK_LEN: usize = BLOCK_ENTRIES as usize;

pub struct Dir4 {
    /// (network address, prefix length) -> route entry.
    routes: BTreeMap<(u32, u8), u32>,
    top: Vec<u32>,
    blocks: Vec<[u32; BLOCK_LEN]>,
    free: GroupIds,
    /// Entries left to the trie because no block was free.
    pub short_of_blocks: u64,
}

/// The addresses a prefix of `len` bits at `base` covers, as a mask of the fixed bits.
fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// Whether the range of `bits` bits at `base` meets the changed prefix (one contains the
/// other); always without a focus.
fn meets(focus: Option<(u32, u8)>, base: u32, bits: u8) -> bool {
    focus.is_none_or(|(addr, len)| (addr ^ base) & mask(len.min(bits)) == 0)
}

impl Default for Dir4 {
    fn default() -> Self {
        Dir4 {
            routes: BTreeMap::new(),
            top: vec![0; TOP_ENTRIES as usize],
            blocks: vec![[0; BLOCK_LEN]; MAX_BLOCKS as usize],
            free: GroupIds::new(MAX_BLOCKS, |_| false),
            short_of_blocks: 0,
        }
    }
}

impl Dir4 {
    /// The table an earlier agent left in the maps (`top`, and `block(i)` for the blocks
    /// it points to), brought to `routes` (ROUTES_V4's): the writes that make it so.
    pub fn adopt(
        top: Vec<u32>,
        mut block: impl FnMut(u32) -> [u32; BLOCK_LEN],
        routes: impl IntoIterator<Item = (Ipv4Net, RouteValue)>,
    ) -> (Dir4, Vec<Write>) {
        let mut d = Dir4 {
            top,
            ..Dir4::default()
        };
        d.top.resize(TOP_ENTRIES as usize, 0);
        // The blocks the top points to, and the blocks those point to (two levels, as
        // the program reads them: a block entry below that is not looked at).
        let mut used = vec![false; MAX_BLOCKS as usize];
        let mut pending: Vec<(u32, bool)> = d
            .top
            .iter()
            .filter_map(|&e| block_of(e))
            .map(|b| (b, true))
            .collect();
        while let Some((b, first_level)) = pending.pop() {
            if std::mem::replace(&mut used[b as usize], true) {
                continue;
            }
            d.blocks[b as usize] = block(b);
            if first_level {
                let below = d.blocks[b as usize].iter().filter_map(|&e| block_of(e));
                pending.extend(below.map(|c| (c, false)));
            }
        }
        d.free = GroupIds::new(MAX_BLOCKS, |b| used[b as usize]);
        for (net, route) in routes {
            d.routes.insert(key(net), dir4::route_entry(route));
        }
        let writes = d.refresh(None);
        (d, writes)
    }

    /// Adds or replaces a route.
    pub fn set(&mut self, net: Ipv4Net, route: RouteValue) -> Vec<Write> {
        let k = key(net);
        self.routes.insert(k, dir4::route_entry(route));
        self.refresh(Some(k))
    }

    /// Removes a route (nothing to write when there was none).
    pub fn remove(&mut self, net: Ipv4Net) -> Vec<Write> {
        let k = key(net);
        if self.routes.remove(&k).is_none() {
            return vec![];
        }
        self.refresh(Some(k))
    }

    /// The program's walk over this copy: the route of `addr`, or None (ask the trie).
    #[cfg(test)]
    pub fn lookup(&self, addr: u32) -> Option<RouteValue> {
        let mut entry = self.top[(addr >> 16) as usize];
        for shift in [8, 0] {
            let Some(b) = block_of(entry) else { break };
            entry = self.blocks[b as usize][((addr >> shift) & 0xff) as usize];
        }
        (entry & dir4::ROUTE != 0).then(|| dir4::route_of(entry))
    }

    /// Recomputes the top entries that meet `focus` (all without one).
    fn refresh(&mut self, focus: Option<(u32, u8)>) -> Vec<Write> {
        let (lo, hi) = match focus {
            Some((addr, len)) if len <= 16 => (addr >> 16, (addr >> 16) + (1 << (16 - len))),
            Some((addr, _)) => (addr >> 16, (addr >> 16) + 1),
            None => (0, TOP_ENTRIES),
        };
        let mut writes = Vec::new();
        let mut released = Vec::new();
        for i in lo..hi {
            let current = self.top[i as usize];
            let new = self.entry(i << 16, 16, current, focus, &mut writes, &mut released);
            if new != current {
                self.top[i as usize] = new;
                writes.push(Write::Top(i, new));
            }
        }
        // Released only now: the entries that pointed to them are among the writes.
        for b in released {
            self.free.release(b);
        }
        writes
    }

    /// The entry for the `bits`-bit range at `base` (its current entry `current`): the
    /// longest route covering the range, or a block when longer routes lie inside it.
    fn entry(
        &mut self,
        base: u32,
        bits: u8,
        current: u32,
        focus: Option<(u32, u8)>,
        writes: &mut Vec<Write>,
        released: &mut Vec<u32>,
    ) -> u32 {
        // A /32 entry never has a block (nor does the program look for one there).
        let had = if bits < 32 { block_of(current) } else { None };
        if bits == 32 || !self.has_longer(base, bits) {
            if let Some(b) = had {
                self.release_tree(b, bits == 16, released);
            }
            return self.longest(base, bits);
        }
        let (block, fresh) = match had {
            Some(b) => (b, false),
            None => match self.free.take_ready() {
                Some(b) => (b, true),
                None => {
                    self.short_of_blocks += 1;
                    return 0;
                }
            },
        };
        let child_bits = bits + 8;
        for j in 0..BLOCK_ENTRIES {
            let child = base | j << (32 - u32::from(child_bits));
            // A block in use keeps the entries the change does not reach; a fresh one
            // holds whatever its last use left, so every entry is written.
            if !fresh && !meets(focus, child, child_bits) {
                continue;
            }
            let old = if fresh {
                0
            } else {
                self.blocks[block as usize][j as usize]
            };
            let new = self.entry(child, child_bits, old, focus, writes, released);
            if fresh || new != old {
                self.blocks[block as usize][j as usize] = new;
                writes.push(Write::Block(block * BLOCK_ENTRIES + j, new));
            }
        }
        BLOCK | block
    }

    /// The entry of the longest route of at most `bits` bits that covers `base`; 0 when
    /// none does.
    fn longest(&self, base: u32, bits: u8) -> u32 {
        (0..=bits)
            .rev()
            .find_map(|len| self.routes.get(&(base & mask(len), len)).copied())
            .unwrap_or(0)
    }

    /// Whether a route longer than `bits` lies inside the `bits`-bit range at `base`.
    fn has_longer(&self, base: u32, bits: u8) -> bool {
        let last = base | !mask(bits);
        self.routes
            .range((base, 0)..=(last, 32))
            .any(|(&(_, len), _)| len > bits)
    }

    /// Frees block `b` and, for a block of a top entry (`first_level`), the blocks its
    /// entries point to.
    fn release_tree(&mut self, b: u32, first_level: bool, released: &mut Vec<u32>) {
        if first_level {
            let below: Vec<u32> = self.blocks[b as usize]
                .iter()
                .filter_map(|&e| block_of(e))
                .collect();
            for c in below {
                self.release_tree(c, false, released);
            }
        }
        released.push(b);
    }

    fn blocks_in_use(&self) -> usize {
        MAX_BLOCKS as usize - self.free.available()
    }
}

fn key(net: Ipv4Net) -> (u32, u8) {
    let net = net.trunc();
    (u32::from(net.network()), net.prefix_len())
}

fn block_of(entry: u32) -> Option<u32> {
    (entry & BLOCK != 0).then_some(entry & (MAX_BLOCKS - 1))
}

/// The table's maps and the copy that mirrors them. Absent when the object has no table
/// (an older object measured by `fare bench xdp --previous`): the trie alone then.
pub struct Dir4Maps {
    top: Array<MapData, u32>,
    blocks: Array<MapData, u32>,
    table: Dir4,
}

impl Dir4Maps {
    pub fn take(ebpf: &mut Ebpf) -> Result<Option<Dir4Maps>, DataplaneError> {
        let (Some(top), Some(blocks)) = (ebpf.take_map(dir4::TOP), ebpf.take_map(dir4::BLOCKS))
        else {
            return Ok(None);
        };
        let map = |m, name| Array::try_from(m).map_err(|e| err(format!("map {name}: {e}")));
        Ok(Some(Dir4Maps {
            top: map(top, dir4::TOP)?,
            blocks: map(blocks, dir4::BLOCKS)?,
            table: Dir4::default(),
        }))
    }

    /// Takes over the table in the maps (an earlier agent's, or zeros) for `routes`.
    pub fn adopt(
        &mut self,
        routes: impl IntoIterator<Item = (Ipv4Net, RouteValue)>,
    ) -> Result<(), DataplaneError> {
        let started = std::time::Instant::now();
        let top = (0..TOP_ENTRIES)
            .map(|i| self.top.get(&i, 0))
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|e| err(format!("reading {}: {e}", dir4::TOP)))?;
        let blocks = &self.blocks;
        let mut unreadable = None;
        let block = |b: u32| {
            let mut out = [0; BLOCK_LEN];
            for (j, e) in out.iter_mut().enumerate() {
                match blocks.get(&(b * BLOCK_ENTRIES + j as u32), 0) {
                    Ok(v) => *e = v,
                    Err(e) => unreadable = Some(e),
                }
            }
            out
        };
        let (table, writes) = Dir4::adopt(top, block, routes);
        if let Some(e) = unreadable {
            return Err(err(format!("reading {}: {e}", dir4::BLOCKS)));
        }
        self.table = table;
        self.apply(&writes)?;
        tracing::debug!(
            blocks = self.table.blocks_in_use(),
            writes = writes.len(),
            ms = started.elapsed().as_millis() as u64,
            "xdp: IPv4 route table read back and brought to the routes"
        );
        Ok(())
    }

    pub fn set(&mut self, net: Ipv4Net, route: RouteValue) -> Result<(), DataplaneError> {
        let writes = self.table.set(net, route);
        self.apply(&writes)
    }

    pub fn remove(&mut self, net: Ipv4Net) -> Result<(), DataplaneError> {
        let writes = self.table.remove(net);
        self.apply(&writes)
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), DataplaneError> {
        let short = self.table.short_of_blocks;
        for w in writes {
            let (map, name, i, v) = match *w {
                Write::Top(i, v) => (&mut self.top, dir4::TOP, i, v),
                Write::Block(i, v) => (&mut self.blocks, dir4::BLOCKS, i, v),
            };
            map.set(i, v, 0)
                .map_err(|e| err(format!("{name}[{i}]: {e}")))?;
        }
        if short > 0 {
            self.table.short_of_blocks = 0;
            tracing::warn!(
                entries = short,
                max_blocks = MAX_BLOCKS,
                "xdp: IPv4 route table out of blocks, the fast path asks the trie there"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    fn route(group: u32) -> RouteValue {
        RouteValue { group, flags: 0 }
    }

    fn addr(s: &str) -> u32 {
        u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
    }

    /// The maps as the writes leave them, starting from zeros: what the program reads.
    #[derive(Default)]
    struct Maps {
        top: BTreeMap<u32, u32>,
        blocks: BTreeMap<u32, u32>,
    }

    impl Maps {
        fn apply(&mut self, writes: &[Write]) {
            for w in writes {
                match *w {
                    Write::Top(i, v) => self.top.insert(i, v),
                    Write::Block(i, v) => self.blocks.insert(i, v),
                };
            }
        }

        fn lookup(&self, addr: u32) -> Option<RouteValue> {
            let mut e = self.top.get(&(addr >> 16)).copied().unwrap_or(0);
            for shift in [8, 0] {
                let Some(b) = block_of(e) else { break };
                let i = b * BLOCK_ENTRIES + ((addr >> shift) & 0xff);
                e = self.blocks.get(&i).copied().unwrap_or(0);
            }
            (e & dir4::ROUTE != 0).then(|| dir4::route_of(e))
        }
    }

    /// The oracle: longest prefix match over a list, nothing shared with `Dir4`.
    fn naive(routes: &[(u32, u8, u32)], a: u32) -> Option<u32> {
        routes
            .iter()
            .filter(|(n, len, _)| {
                *len == 0 || (a >> (32 - u32::from(*len))) == (n >> (32 - u32::from(*len)))
            })
            .max_by_key(|(_, len, _)| *len)
            .map(|(_, _, g)| *g)
    }

    #[test]
    fn nested_prefixes_hand_computed() {
        let mut d = Dir4::default();
        let mut maps = Maps::default();
        for (p, g) in [
            ("0.0.0.0/0", 1),
            ("10.0.0.0/8", 2),
            ("10.1.0.0/16", 3),
            ("10.1.2.0/24", 4),
            ("10.1.2.128/25", 5),
            ("10.1.2.3/32", 6),
        ] {
            maps.apply(&d.set(net(p), route(g)));
        }
        for (a, g) in [
            ("192.0.2.1", 1),
            ("10.200.0.1", 2),
            ("10.1.9.9", 3),
            ("10.1.2.4", 4),
            ("10.1.2.200", 5),
            ("10.1.2.3", 6),
            ("10.1.3.3", 3),
            ("10.2.0.0", 2),
        ] {
            assert_eq!(d.lookup(addr(a)), Some(route(g)), "{a}");
            assert_eq!(maps.lookup(addr(a)), Some(route(g)), "{a} (maps)");
        }
        // 10.1/16 has a block, 10.1.2/24 one more.
        assert_eq!(d.blocks_in_use(), 2);
        maps.apply(&d.remove(net("10.1.2.0/24")));
        assert_eq!(maps.lookup(addr("10.1.2.4")), Some(route(3)));
        assert_eq!(maps.lookup(addr("10.1.2.3")), Some(route(6)));
        maps.apply(&d.remove(net("10.1.2.3/32")));
        maps.apply(&d.remove(net("10.1.2.128/25")));
        assert_eq!(maps.lookup(addr("10.1.2.200")), Some(route(3)));
        assert_eq!(d.blocks_in_use(), 0);
        maps.apply(&d.remove(net("0.0.0.0/0")));
        assert_eq!(maps.lookup(addr("192.0.2.1")), None);
    }

    #[test]
    fn flags_survive_the_entry() {
        let mut d = Dir4::default();
        let r = RouteValue {
            group: 1023,
            flags: fare_common::ROUTE_COLORS | fare_common::ROUTE_QUEUES,
        };
        d.set(net("198.18.0.0/16"), r);
        assert_eq!(d.lookup(addr("198.18.7.7")), Some(r));
    }

    #[test]
    fn a_new_block_is_filled_before_it_is_pointed_to() {
        let mut d = Dir4::default();
        d.set(net("10.0.0.0/8"), route(1));
        let writes = d.set(net("10.1.2.0/24"), route(2));
        let top = writes
            .iter()
            .position(|w| matches!(w, Write::Top(..)))
            .unwrap();
        assert_eq!(top, writes.len() - 1, "{writes:?}");
        assert_eq!(writes.len(), 1 + BLOCK_LEN);
    }

    #[test]
    fn without_free_blocks_entries_go_to_the_trie() {
        let mut d = Dir4::default();
        // Freed blocks wait for their grace period: take them all away.
        while d.free.take_ready().is_some() {}
        d.set(net("10.0.0.0/8"), route(1));
        d.set(net("10.1.2.0/24"), route(2));
        assert_eq!(d.lookup(addr("10.1.2.1")), None);
        assert_eq!(d.lookup(addr("10.2.0.1")), Some(route(1)));
        assert!(d.short_of_blocks > 0);
    }

    #[test]
    fn adopt_keeps_what_is_right_and_mends_the_rest() {
        let mut d = Dir4::default();
        let mut maps = Maps::default();
        maps.apply(&d.set(net("10.0.0.0/8"), route(1)));
        maps.apply(&d.set(net("10.1.2.0/24"), route(2)));
        let top: Vec<u32> = (0..TOP_ENTRIES)
            .map(|i| maps.top.get(&i).copied().unwrap_or(0))
            .collect();
        let block = |b: u32| {
            let mut out = [0; BLOCK_LEN];
            for (j, e) in out.iter_mut().enumerate() {
                *e = maps.blocks[&(b * BLOCK_ENTRIES + j as u32)];
            }
            out
        };
        // The same routes: nothing to write.
        let routes = [
            (net("10.0.0.0/8"), route(1)),
            (net("10.1.2.0/24"), route(2)),
        ];
        let (again, writes) = Dir4::adopt(top.clone(), block, routes);
        assert!(writes.is_empty(), "{writes:?}");
        assert_eq!(again.blocks_in_use(), 1);
        // The trie lost the /24 while the table kept it (a crash in between).
        let (_, writes) = Dir4::adopt(top, block, [(net("10.0.0.0/8"), route(1))]);
        maps.apply(&writes);
        assert_eq!(maps.lookup(addr("10.1.2.1")), Some(route(1)));
    }

    fn arb_route() -> impl Strategy<Value = (u32, u8, u32)> {
        // Addresses from a few /8s and /16s so that prefixes nest and collide.
        (
            prop::sample::select(vec![0x0a00_0000u32, 0x0a01_0000, 0xc612_0000, 0]),
            any::<u32>(),
            prop::sample::select(vec![0u8, 1, 8, 12, 15, 16, 17, 20, 23, 24, 25, 28, 31, 32]),
            0u32..1024,
        )
            .prop_map(|(hi, lo, len, g)| {
                let a = (hi | (lo & 0x0001_ffff)) & mask(len);
                (a, len, g)
            })
    }

    proptest! {
        // A /0 or /1 among the changes rewrites half the table or all of it: fewer
        // cases than the default keep the debug-build run short.
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random route sets, random removals: after every change the maps as the writes
        /// left them and the copy both answer as a longest prefix match would, at
        /// prefix boundaries and at random addresses.
        #[test]
        fn matches_longest_prefix_match(
            ops in prop::collection::vec((arb_route(), any::<bool>()), 1..40),
            probes in prop::collection::vec(any::<u32>(), 16),
        ) {
            let mut d = Dir4::default();
            let mut maps = Maps::default();
            let mut list: Vec<(u32, u8, u32)> = Vec::new();
            for ((a, len, g), remove) in ops {
                let n = Ipv4Net::new(a.into(), len).unwrap();
                if remove {
                    maps.apply(&d.remove(n));
                    list.retain(|(x, l, _)| (*x, *l) != (a, len));
                } else {
                    maps.apply(&d.set(n, route(g)));
                    list.retain(|(x, l, _)| (*x, *l) != (a, len));
                    list.push((a, len, g));
                }
                let mut at: Vec<u32> = probes.clone();
                for (x, l, _) in &list {
                    at.extend([*x, x | !mask(*l), x.wrapping_sub(1), (x | !mask(*l)).wrapping_add(1)]);
                }
                for a in at {
                    let want = naive(&list, a);
                    prop_assert_eq!(maps.lookup(a).map(|r| r.group), want, "maps at {:#x}", a);
                    prop_assert_eq!(d.lookup(a).map(|r| r.group), want, "copy at {:#x}", a);
                }
            }
            // Everything removed: no block stays taken.
            for (a, len, _) in list.clone() {
                maps.apply(&d.remove(Ipv4Net::new(a.into(), len).unwrap()));
            }
            prop_assert_eq!(d.blocks_in_use(), 0);
        }
    }
}
