//! Per-CPU counters: what happened to each packet, and per member.

use fare_common::{GroupRow, Stat, MAX_MEMBERS_PER_GROUP};

use crate::maps::STATS;

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
