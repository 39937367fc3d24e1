//! Per-CPU counters: what happened to each packet, and per member.

use fare_common::{ArnSender, GroupRow, Stat, MAX_MEMBERS_PER_GROUP};

use crate::maps::{ARN_LOCAL, STATS};

#[inline(always)]
pub fn count(stat: Stat) {
    if let Some(c) = STATS.get_ptr_mut(stat as u32) {
        // SAFETY: per-CPU slot, no other writer on this CPU while we run.
        unsafe { *c += 1 };
    }
}

/// Counts a packet of `bytes` for member `index` of the group whose (this CPU's) row is
/// `row`: the counters live in the row `select` already looked up.
#[inline(always)]
pub fn count_member(row: *mut GroupRow, index: u32, bytes: u64) {
    // SAFETY: per-CPU row, no other writer on this CPU while we run; the index is masked
    // to the array's length.
    unsafe {
        let c = &mut (*row).counters[(index & (MAX_MEMBERS_PER_GROUP - 1)) as usize];
        c.packets += 1;
        c.bytes += bytes;
    }
}

/// Counts a packet without a route: `Local` when it is to one of the node's own
/// addresses (its BGP sessions), else `NoRoute`. `addr` in ARN_LOCAL's key layout.
#[inline(always)]
pub fn count_unrouted(family: u32, addr: [u32; 4]) {
    let key = ArnSender { family, addr };
    // SAFETY: read-only lookup of a hash map value.
    let local = unsafe { ARN_LOCAL.get(&key) }.is_some();
    count(if local { Stat::Local } else { Stat::NoRoute });
}

/// `count_unrouted` for an IPv4 destination (bytes as in the packet).
#[inline(always)]
pub fn count_unrouted_v4(dst: [u8; 4]) {
    count_unrouted(4, [u32::from_ne_bytes(dst), 0, 0, 0]);
}

/// `count_unrouted` for an IPv6 destination (bytes as in the packet).
#[inline(always)]
pub fn count_unrouted_v6(d: [u8; 16]) {
    let w = |i: usize| u32::from_ne_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
    count_unrouted(6, [w(0), w(4), w(8), w(12)]);
}
