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

use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use aya::maps::MapData;
use aya::Ebpf;

use super::group_ids::GroupIds;
use fare_dataplane::DataplaneError;

use super::err;

/// What a route change does to the maps: the entries to store, in this order, and the
/// blocks to free once they are stored (`Dir4::release`).
#[derive(Debug, Default)]
pub struct Change {
    pub writes: Vec<Write>,
    pub released: Vec<u32>,
}

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
    /// Entries left to the trie because no block was free (since the last report).
    pub short_of_blocks: u64,
    /// Some entry is left to the trie for want of a block (`refill` retries).
    incomplete: bool,
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
            incomplete: false,
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
    ) -> (Dir4, Change) {
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
        let change = d.refresh(None);
        (d, change)
    }

    /// Adds or replaces a route.
    pub fn set(&mut self, net: Ipv4Net, route: RouteValue) -> Change {
        let k = key(net);
        self.routes.insert(k, dir4::route_entry(route));
        self.refresh(Some(k))
    }

    /// Removes a route (nothing to write when there was none).
    pub fn remove(&mut self, net: Ipv4Net) -> Change {
        let k = key(net);
        if self.routes.remove(&k).is_none() {
            return Change::default();
        }
        self.refresh(Some(k))
    }

    /// The program's walk over this copy: the route of `addr`, or None (ask the trie).
    #[cfg(test)]
    pub fn lookup(&self, addr: u32) -> Option<RouteValue> {
        walk(
            addr,
            |i| self.top[i as usize],
            |i| self.blocks[(i / BLOCK_ENTRIES) as usize][(i % BLOCK_ENTRIES) as usize],
        )
    }

    /// When entries were left to the trie for want of a block and a block is free now:
    /// the whole table recomputed (the entries left at 0 take blocks, the others stay).
    pub fn refill(&mut self) -> Option<Change> {
        if !self.incomplete || !self.free.has_ready() {
            return None;
        }
        self.incomplete = false;
        Some(self.refresh(None))
    }

    /// Frees blocks (the entries that pointed to them are stored): reused only after
    /// the grace period, when no packet can still be reading them.
    pub fn release(&mut self, blocks: Vec<u32>) {
        for b in blocks {
            self.free.release(b);
        }
    }

    /// Recomputes the top entries that meet `focus` (all without one).
    fn refresh(&mut self, focus: Option<(u32, u8)>) -> Change {
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
        // Freed by the caller once the writes are stored (`release`).
        Change { writes, released }
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
                    self.incomplete = true;
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

/// The program's walk (`ebpf/fare-xdp/src/dir4.rs`) over entries that `top` and `block`
/// read by index: the route of `addr`, or None (the program asks the trie).
fn walk(addr: u32, top: impl Fn(u32) -> u32, block: impl Fn(u32) -> u32) -> Option<RouteValue> {
    let mut entry = top(addr >> 16);
    for shift in [8, 0] {
        let Some(b) = block_of(entry) else { break };
        entry = block(b * BLOCK_ENTRIES + ((addr >> shift) & 0xff));
    }
    (entry & dir4::ROUTE != 0).then(|| dir4::route_of(entry))
}

fn block_of(entry: u32) -> Option<u32> {
    (entry & BLOCK != 0).then_some(entry & (MAX_BLOCKS - 1))
}

/// One of the table's arrays mapped into this process (`BPF_F_MMAPABLE`): entries are
/// read and written with atomic 32-bit loads and stores, so a packet reading an entry
/// while it changes sees the old value or the new one (a map update syscall copies the
/// value with memcpy, which the kernel does not promise to do in one store), and a write
/// cannot fail. An array map lays its values out `round_up(value size, 8)` apart.
struct Mapped {
    /// Keeps the map (and its fd) alive as long as the mapping.
    _map: MapData,
    base: NonNull<u8>,
    len: usize,
    entries: u32,
}

// SAFETY: the mapping is owned by this value and only accessed through atomics.
unsafe impl Send for Mapped {}
// SAFETY: as above; concurrent access goes through atomic loads and stores.
unsafe impl Sync for Mapped {}

const STRIDE: usize = 8;
/// The map flag of a mappable array (linux/bpf.h).
const BPF_F_MMAPABLE: u32 = 1 << 10;

impl Mapped {
    fn new(map: aya::maps::Map, name: &str, entries: u32) -> Result<Mapped, DataplaneError> {
        let aya::maps::Map::Array(map) = map else {
            return Err(err(format!("map {name}: not an array")));
        };
        let info = map.info().map_err(|e| err(format!("map {name}: {e}")))?;
        if info.map_flags() & BPF_F_MMAPABLE == 0 {
            return Err(err(format!(
                "map {name} is not mappable (pinned by an earlier build): remove the node's \
                 pin directory and start again"
            )));
        }
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = (entries as usize * STRIDE).next_multiple_of(page.max(1));
        // SAFETY: a shared mapping of the map's fd, of the size the kernel gives it; the
        // result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(err(format!("mapping {name}: {e}")));
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| err(format!("mapping {name}")))?;
        Ok(Mapped {
            _map: map,
            base,
            len,
            entries,
        })
    }

    fn entry(&self, i: u32) -> &AtomicU32 {
        assert!(i < self.entries, "entry {i} beyond {}", self.entries);
        // SAFETY: inside the mapping (checked above), 8-byte aligned (page-aligned base,
        // stride 8), and the kernel's array memory lives as long as the mapping.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(i as usize * STRIDE)
                .cast::<AtomicU32>()
        }
    }

    fn get(&self, i: u32) -> u32 {
        self.entry(i).load(Ordering::Acquire)
    }

    fn set(&self, i: u32, value: u32) {
        self.entry(i).store(value, Ordering::Release);
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, not used after this.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// The table's maps and the copy that mirrors them. Absent when the object has no table
/// (an older object measured by `fare bench xdp --previous`): the trie alone then.
pub struct Dir4Maps {
    top: Mapped,
    blocks: Mapped,
    table: Dir4,
}

impl Dir4Maps {
    pub fn take(ebpf: &mut Ebpf) -> Result<Option<Dir4Maps>, DataplaneError> {
        let (Some(top), Some(blocks)) = (ebpf.take_map(dir4::TOP), ebpf.take_map(dir4::BLOCKS))
        else {
            return Ok(None);
        };
        Ok(Some(Dir4Maps {
            top: Mapped::new(top, dir4::TOP, TOP_ENTRIES)?,
            blocks: Mapped::new(blocks, dir4::BLOCKS, MAX_BLOCKS * BLOCK_ENTRIES)?,
            table: Dir4::default(),
        }))
    }

    /// Takes over the table in the maps (an earlier agent's, or zeros) for `routes`.
    pub fn adopt(&mut self, routes: impl IntoIterator<Item = (Ipv4Net, RouteValue)>) {
        let started = std::time::Instant::now();
        let top = (0..TOP_ENTRIES).map(|i| self.top.get(i)).collect();
        let blocks = &self.blocks;
        let block = |b: u32| {
            let mut out = [0; BLOCK_LEN];
            for (j, e) in out.iter_mut().enumerate() {
                *e = blocks.get(b * BLOCK_ENTRIES + j as u32);
            }
            out
        };
        let (table, change) = Dir4::adopt(top, block, routes);
        self.table = table;
        let writes = change.writes.len();
        self.apply(change);
        tracing::debug!(
            blocks = self.table.blocks_in_use(),
            writes,
            us = started.elapsed().as_micros() as u64,
            "xdp: IPv4 route table read back and brought to the routes"
        );
    }

    pub fn set(&mut self, net: Ipv4Net, route: RouteValue) {
        let change = self.table.set(net, route);
        self.apply(change);
    }

    pub fn remove(&mut self, net: Ipv4Net) {
        let change = self.table.remove(net);
        self.apply(change);
    }

    /// Upkeep: entries left to the trie for want of a block get one once blocks are
    /// free again (`Dir4::refill`).
    pub fn maintain(&mut self) {
        if let Some(change) = self.table.refill() {
            let writes = change.writes.len();
            self.apply(change);
            tracing::info!(
                writes,
                "xdp: IPv4 route table refilled where blocks had run out"
            );
        }
    }

    /// The route the table holds for exactly `net`.
    pub fn lookup_exact(&self, net: Ipv4Net) -> Option<RouteValue> {
        self.table.routes.get(&key(net)).map(|&e| dir4::route_of(e))
    }

    /// The route of `addr` as the program's fast path reads it from the maps (None: it
    /// asks the trie).
    pub fn lookup(&self, addr: std::net::Ipv4Addr) -> Option<RouteValue> {
        walk(u32::from(addr), |i| self.top.get(i), |i| self.blocks.get(i))
    }

    /// Stores the writes in order, then frees the blocks no entry points to any more.
    fn apply(&mut self, change: Change) {
        for w in &change.writes {
            match *w {
                Write::Top(i, v) => self.top.set(i, v),
                Write::Block(i, v) => self.blocks.set(i, v),
            }
        }
        self.table.release(change.released);
        let short = std::mem::take(&mut self.table.short_of_blocks);
        if short > 0 {
            tracing::warn!(
                entries = short,
                max_blocks = MAX_BLOCKS,
                "xdp: IPv4 route table out of blocks, the fast path asks the trie there"
            );
        }
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
            for w in writes.iter() {
                match *w {
                    Write::Top(i, v) => self.top.insert(i, v),
                    Write::Block(i, v) => self.blocks.insert(i, v),
                };
            }
        }

        fn lookup(&self, addr: u32) -> Option<RouteValue> {
            let read = |m: &BTreeMap<u32, u32>, i| m.get(&i).copied().unwrap_or(0);
            walk(addr, |i| read(&self.top, i), |i| read(&self.blocks, i))
        }
    }

    /// Stores a change's writes in `maps`, then frees its blocks (as `Dir4Maps::apply`).
    fn run(d: &mut Dir4, maps: &mut Maps, change: impl FnOnce(&mut Dir4) -> Change) {
        let c = change(d);
        maps.apply(&c.writes);
        d.release(c.released);
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
            run(&mut d, &mut maps, |d| d.set(net(p), route(g)));
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
        run(&mut d, &mut maps, |d| d.remove(net("10.1.2.0/24")));
        assert_eq!(maps.lookup(addr("10.1.2.4")), Some(route(3)));
        assert_eq!(maps.lookup(addr("10.1.2.3")), Some(route(6)));
        run(&mut d, &mut maps, |d| d.remove(net("10.1.2.3/32")));
        run(&mut d, &mut maps, |d| d.remove(net("10.1.2.128/25")));
        assert_eq!(maps.lookup(addr("10.1.2.200")), Some(route(3)));
        assert_eq!(d.blocks_in_use(), 0);
        run(&mut d, &mut maps, |d| d.remove(net("0.0.0.0/0")));
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
        let writes = d.set(net("10.1.2.0/24"), route(2)).writes;
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
    fn a_freed_block_waits_out_its_grace_period() {
        let mut d = Dir4::default();
        let mut maps = Maps::default();
        for _ in 1..MAX_BLOCKS {
            d.free.take_ready();
        }
        run(&mut d, &mut maps, |d| d.set(net("10.1.2.0/24"), route(1)));
        assert_eq!(d.short_of_blocks, 0);
        run(&mut d, &mut maps, |d| d.remove(net("10.1.2.0/24")));
        // The only block was just freed: a packet may still be reading it.
        run(&mut d, &mut maps, |d| d.set(net("10.1.3.0/24"), route(2)));
        assert_eq!(maps.lookup(addr("10.1.3.1")), None, "the trie answers");
        assert!(d.short_of_blocks > 0);
    }

    #[test]
    fn entries_left_to_the_trie_are_refilled_once_blocks_are_free() {
        let mut d = Dir4::default();
        let mut maps = Maps::default();
        let mut taken = Vec::new();
        while let Some(b) = d.free.take_ready() {
            taken.push(b);
        }
        run(&mut d, &mut maps, |d| d.set(net("10.1.2.0/24"), route(1)));
        assert_eq!(maps.lookup(addr("10.1.2.1")), None, "the trie answers");
        assert!(d.refill().is_none(), "no block is free");
        d.release(taken);
        assert!(
            d.refill().is_none(),
            "freed blocks wait out their grace period"
        );
        std::thread::sleep(super::super::group_ids::GRACE);
        run(&mut d, &mut maps, |d| d.refill().unwrap_or_default());
        assert_eq!(maps.lookup(addr("10.1.2.1")), Some(route(1)));
        assert!(d.refill().is_none(), "complete again");
    }

    #[test]
    fn adopt_keeps_what_is_right_and_mends_the_rest() {
        let mut d = Dir4::default();
        let mut maps = Maps::default();
        run(&mut d, &mut maps, |d| d.set(net("10.0.0.0/8"), route(1)));
        run(&mut d, &mut maps, |d| d.set(net("10.1.2.0/24"), route(2)));
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
        let (again, change) = Dir4::adopt(top.clone(), block, routes);
        assert!(change.writes.is_empty(), "{change:?}");
        assert_eq!(again.blocks_in_use(), 1);
        // The trie lost the /24 while the table kept it (a crash in between).
        let (_, change) = Dir4::adopt(top, block, [(net("10.0.0.0/8"), route(1))]);
        maps.apply(&change.writes);
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
                    run(&mut d, &mut maps, |d| d.remove(n));
                    list.retain(|(x, l, _)| (*x, *l) != (a, len));
                } else {
                    run(&mut d, &mut maps, |d| d.set(n, route(g)));
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
                run(&mut d, &mut maps, |d| d.remove(Ipv4Net::new(a.into(), len).unwrap()));
            }
            prop_assert_eq!(d.blocks_in_use(), 0);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The order of a change's writes: stored one at a time, every state between
        /// answers each address with its route before the change, after it, or "ask the
        /// trie" (which holds one of the two), never with a third route.
        #[test]
        fn every_state_between_two_tables_is_old_or_new(
            before in prop::collection::vec(arb_route(), 0..12),
            change in (arb_route(), any::<bool>()),
            probes in prop::collection::vec(any::<u32>(), 16),
        ) {
            let mut d = Dir4::default();
            let mut maps = Maps::default();
            let mut list: Vec<(u32, u8, u32)> = Vec::new();
            for (a, len, g) in before {
                run(&mut d, &mut maps, |d| d.set(Ipv4Net::new(a.into(), len).unwrap(), route(g)));
                list.retain(|(x, l, _)| (*x, *l) != (a, len));
                list.push((a, len, g));
            }
            let ((a, len, g), remove) = change;
            let n = Ipv4Net::new(a.into(), len).unwrap();
            let mut after = list.clone();
            after.retain(|(x, l, _)| (*x, *l) != (a, len));
            let c = if remove {
                d.remove(n)
            } else {
                after.push((a, len, g));
                d.set(n, route(g))
            };
            let mut at = probes;
            for (x, l, _) in list.iter().chain(&after) {
                at.extend([*x, x | !mask(*l)]);
            }
            for w in &c.writes {
                maps.apply(std::slice::from_ref(w));
                for &p in &at {
                    let got = maps.lookup(p).map(|r| r.group);
                    prop_assert!(
                        got.is_none() || got == naive(&list, p) || got == naive(&after, p),
                        "{:#x}: {:?} after {:?}", p, got, w
                    );
                }
            }
        }
    }
}
