//! Flowlet mode: a flow keeps its member while its packets come closer together than
//! the group's gap; the first packet after a longer pause starts a new flowlet, which
//! picks a member by weight. FLOWLETS (direct-mapped by the flow hash) remembers the
//! member and the time of the flow's last packet.

use aya_ebpf::helpers::{bpf_get_prandom_u32, bpf_ktime_get_ns};
use fare_common::{member_id, Flowlet, GroupRow, MAX_FLOWLETS, MAX_MEMBERS_PER_GROUP, MAX_SLOTS};

use crate::choice::{Choice, NextHop, Start};
use crate::classify::Classify;
use crate::maps::{FLOWLETS, MEMBERS};

/// New flowlet: how many random slots it tries for a member in service before it
/// leaves the choice to `select_out_of_service` (which does not remember it).
const TRIES: u32 = 4;

/// The member of a packet of a flowlet-mode group: the flow's member while its flowlet
/// lasts, else a random slot's (a uniform slot of the bucket table is a pick by weight).
/// Random rather than the flow hash: with the hash a flow would pick the same bucket at
/// every gap and flowlets would move only when the weights change; a random pick lets
/// consecutive flowlets of one flow take different paths, in proportion to the weights
/// (LetFlow's argument: flowlet sizes then adapt to the paths' congestion).
#[inline(always)]
pub fn choose<C: Classify>(row: *mut GroupRow, group: u32, n: u32, flow: &C) -> Choice {
    let hash = crate::flow::hash(&flow.fields());
    // SAFETY: the helpers take no arguments and touch no memory of ours.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: this CPU's row (see `forward::first_choice`).
    let gap_ns = unsafe { (*row).flowlet_gap_us } as u64 * 1000;
    if let Some(f) = FLOWLETS.get_ptr_mut(hash & (MAX_FLOWLETS - 1)) {
        // SAFETY: a value of the map; another CPU may write it at the same time (the
        // same flow on two queues, or two flows of one entry): whatever mix of writes
        // it reads, the member check below takes only a member of this group in
        // service at that index.
        let f = unsafe { &mut *f };
        if f.hash == hash && now.wrapping_sub(f.last_ns) < gap_ns {
            let index = f.index as u32 & (MAX_MEMBERS_PER_GROUP - 1);
            // The same next hop at the same index: a replaced group (new id, new
            // weights) keeps the flowlet's member; a member gone or moved ends it.
            if let Some(m) = MEMBERS.get(member_id(group, index)) {
                if m.active() && m.ifindex == f.ifindex && m.dst_mac == f.dst_mac {
                    f.last_ns = now;
                    return Choice::Member(NextHop {
                        row,
                        index,
                        member: m,
                    });
                }
            }
        }
    }
    // SAFETY: as `row` above.
    let g = unsafe { &(*row).group };
    let mut slot = 0;
    let mut index = 0;
    for _ in 0..TRIES {
        // SAFETY: as above.
        let r = unsafe { bpf_get_prandom_u32() };
        slot = crate::bound::mask!((r as u64 * n as u64) >> 32, MAX_SLOTS as u64 - 1) as u32;
        index = g.slots[slot as usize & (MAX_SLOTS - 1)] as u32 & (MAX_MEMBERS_PER_GROUP - 1);
        let Some(m) = MEMBERS.get(member_id(group, index)) else {
            return Choice::Nothing;
        };
        if m.active() {
            // The flow takes the entry (another flow there starts a new flowlet with
            // its next packet). Looked up again rather than kept across the loop: the
            // verifier then walks the loop without the pointer (fewer states).
            if let Some(f) = FLOWLETS.get_ptr_mut(hash & (MAX_FLOWLETS - 1)) {
                // SAFETY: as above.
                unsafe {
                    *f = Flowlet {
                        last_ns: now,
                        ifindex: m.ifindex,
                        hash,
                        dst_mac: m.dst_mac,
                        index: index as u16,
                    }
                };
            }
            return Choice::Member(NextHop {
                row,
                index,
                member: m,
            });
        }
    }
    Choice::OutOfService(Start::flow(row, n, slot, index))
}
