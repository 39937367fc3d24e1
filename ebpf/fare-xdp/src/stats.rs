//! Per-CPU counters: what happened to each packet, and per member.

use fare_common::{MemberCounters, Stat};

use crate::maps::{MEMBER_STATS, STATS};

#[inline(always)]
pub fn count(stat: Stat) {
    if let Some(c) = STATS.get_ptr_mut(stat as u32) {
        // SAFETY: per-CPU slot, no other writer on this CPU while we run.
        unsafe { *c += 1 };
    }
}

#[inline(always)]
pub fn count_member(member_id: u32, bytes: u64) {
    if let Some(c) = MEMBER_STATS.get_ptr_mut(member_id) {
        // SAFETY: per-CPU slot.
        unsafe {
            let c: &mut MemberCounters = &mut *c;
            c.packets += 1;
            c.bytes += bytes;
        }
    }
}
