//! Routing: destination -> LPM route -> group -> member; then rewrite and redirect.

use aya_ebpf::{bindings::xdp_action, maps::lpm_trie::Key, programs::XdpContext};
use aya_log_ebpf::{debug, warn};
use fare_common::{
    member_id, GroupRow, Member, Stat, COLOR_ACTIVE, MAX_COLORS_PER_ROUTE, MAX_MEMBERS_PER_GROUP,
    MAX_SLOTS, MEMBER_REMOVED_BY_ARN, MODE_FLOWLET, MODE_SPRAY, ROUTE_COLORS, ROUTE_QUEUES,
    ROUTE_STEERED,
};

use crate::choice::{Choice, NextHop, Start};
use crate::classify::{self, Classify, Fields};
use crate::ipv4::{self, Ipv4, V4};
use crate::ipv6::{self, Ipv6, V6};
use crate::maps::{COLOR_SETS, EGRESS, GROUP_ROWS, MEMBERS, ROUTES_V4, ROUTES_V6};
use crate::packet::{self, ptr_at, Malformed};
use crate::stats;

#[inline(always)]
pub fn ipv4(ctx: &XdpContext, ip: &Ipv4) -> Result<u32, Malformed> {
    let Some(route) = ROUTES_V4.get(Key::new(32, ip.dst)) else {
        stats::count_unrouted_v4(ip.dst);
        return Ok(xdp_action::XDP_PASS);
    };
    let (group, flags) = (route.group, route.flags);
    if ip.ttl <= 1 {
        // The kernel answers with ICMP time exceeded.
        stats::count(Stat::TtlExceeded);
        debug!(ctx, "ttl exceeded, to the kernel");
        return Ok(xdp_action::XDP_PASS);
    }
    let Some(next) = choose(ctx, group, flags, &V4(ctx)) else {
        stats::count(Stat::NoMember);
        return Ok(xdp_action::XDP_PASS);
    };
    ipv4::decrement_ttl(ctx, crate::eth::l3_offset(ctx)?)?;
    send(ctx, &next, flags & ROUTE_QUEUES != 0)
}

#[inline(always)]
pub fn ipv6(ctx: &XdpContext, ip: &Ipv6) -> Result<u32, Malformed> {
    let Some(route) = ROUTES_V6.get(Key::new(128, ip.dst)) else {
        stats::count_unrouted_v6(ip.dst);
        return Ok(xdp_action::XDP_PASS);
    };
    let (group, flags) = (route.group, route.flags);
    if ip.hop_limit <= 1 {
        stats::count(Stat::TtlExceeded);
        debug!(ctx, "hop limit exceeded, to the kernel");
        return Ok(xdp_action::XDP_PASS);
    }
    let Some(next) = choose(ctx, group, flags, &V6(ctx)) else {
        stats::count(Stat::NoMember);
        return Ok(xdp_action::XDP_PASS);
    };
    ipv6::decrement_hop_limit(ctx, crate::eth::l3_offset(ctx)?)?;
    send(ctx, &next, flags & ROUTE_QUEUES != 0)
}

/// The member for a packet of a route whose group is `group` (see `route_group`).
#[inline(always)]
fn choose<C: Classify>(ctx: &XdpContext, group: u32, flags: u32, packet: &C) -> Option<NextHop> {
    let (gid, colored) = route_group(ctx, group, flags, packet);
    let next = select::<true, C>(gid, packet);
    if next.is_some() && colored {
        stats::count(Stat::DpfColored);
    }
    next
}

/// The group a packet of a route whose group is `group` takes, and whether it is a DPF
/// color's. A route with per-color groups (DPF) sends a packet whose flow rules give it
/// one of the route's active colors through that color's group; a route with steered
/// copies sends a flow an ARN steered away from a port through the copy; everything else
/// uses the route's group. The route's `flags` say whether it has either, so a packet of
/// a route without them pays for neither lookup, nor for reading the packet's
/// classification fields (source, ports, protocol; a flow-mode group reads them for its
/// hash in `select`). Both paths (`fast`, `choose`) take the group from here.
#[inline(always)]
pub fn route_group<C: Classify>(
    ctx: &XdpContext,
    group: u32,
    flags: u32,
    packet: &C,
) -> (u32, bool) {
    if flags & (ROUTE_COLORS | ROUTE_STEERED) == 0 {
        return (group, false);
    }
    let fields = packet.fields();
    let colored = if flags & ROUTE_COLORS != 0 {
        colored_group(ctx, group, &fields)
    } else {
        None
    };
    let base = colored.unwrap_or(group);
    let gid = if flags & ROUTE_STEERED != 0 {
        crate::steer::steered_group(base, &fields)
    } else {
        base
    };
    (gid, colored.is_some())
}

/// The group of the packet's color when the route has one for it (and it is active).
#[inline(always)]
fn colored_group(ctx: &XdpContext, group: u32, fields: &Fields) -> Option<u32> {
    let set = COLOR_SETS.get(group)?;
    if set.n == 0 {
        return None;
    }
    let color = classify::color(ctx, fields);
    if color == 0 {
        return None;
    }
    for i in 0..MAX_COLORS_PER_ROUTE {
        if i as u32 >= set.n {
            break;
        }
        let e = &set.entries[i];
        if e.color == color && e.flags & COLOR_ACTIVE != 0 {
            return Some(e.group);
        }
    }
    None
}

/// Flow mode: how many times a flow whose member is out of service hashes again.
const REHASH_TRIES: u32 = 4;

/// Picks the slot (spray: the per-CPU cursor; flow: the hash): `first_choice`, and when
/// its member is out of service `select_out_of_service`, which ends the member's ARN
/// removal when its hold ran out, hashes again (flow) and walks forward past members that
/// are out of service (spray: skipped slots take no packet, so the others keep their
/// exact ratio). None when the group is empty or all are out. `FLOW`: whether flow-mode
/// groups are handled (`flow`'s fields are read and hashed; only then).
#[inline(always)]
pub fn select<const FLOW: bool, C: Classify>(group: u32, flow: &C) -> Option<NextHop> {
    match first_choice::<FLOW, false, C>(group, flow) {
        Choice::Member(next) => Some(next),
        Choice::OutOfService(at) => select_out_of_service(group, at, flow),
        Choice::Nothing => None,
    }
}

/// The member of the start slot (spray: this CPU's cursor; flow: the hash) when it is in
/// service: two lookups, this CPU's GROUP_ROWS row (slots, cursor and member counters
/// together) and the MEMBERS row. The fast path stops here; `select` goes on.
///
/// `FLOWLET`: a flowlet-mode group takes its flowlet's member (`flowlet::choose`); false
/// (the full program, through `select`), it is taken as a flow-mode group: the entry
/// already tried the flowlet's member and new flowlets, and what reaches the full
/// program (all those members out of service, a steered flow) gets the flow mode's
/// member, not remembered. The full programs' verification then walks no flowlet code:
/// with it, Linux 6.1's verifier ran past its 1M instructions on `fare_xdp_full_v6`
/// (the member walk of `select_out_of_service` once per flowlet state).
#[inline(always)]
pub fn first_choice<const FLOW: bool, const FLOWLET: bool, C: Classify>(
    group: u32,
    flow: &C,
) -> Choice {
    let Some(row) = GROUP_ROWS.get_ptr_mut(group) else {
        return Choice::Nothing;
    };
    // SAFETY: this CPU's row; only this CPU's program writes its cursor and counters,
    // user space writes a row only while its group id is not in use.
    let g = unsafe { &(*row).group };
    let n = g.n_slots as u32;
    if n == 0 || n > MAX_SLOTS as u32 {
        return Choice::Nothing;
    }
    // `FLOW` false (the TC spray program: spray groups only) compiles the flow path out,
    // so the verifier does not walk it with the constant fields that caller passes; a
    // flow group then has no member for it.
    if !FLOW && g.mode != MODE_SPRAY {
        return Choice::Nothing;
    }
    // Flowlet groups take the flow path past their first choice (a flowlet whose
    // member is out of service hashes again, as a flow does).
    let flow_mode = FLOW && g.mode != MODE_SPRAY;
    // SAFETY: as `g`.
    let cursor = unsafe { &raw mut (*row).cursor };
    let start = if flow_mode {
        if FLOWLET && g.mode == MODE_FLOWLET {
            return crate::flowlet::choose(row, group, n, flow);
        }
        // Multiply-shift maps the hash uniformly onto 0..n without a division.
        let h = crate::flow::hash(&flow.fields()) as u64;
        crate::bound::mask!((h * n as u64) >> 32, MAX_SLOTS as u64 - 1) as u32
    } else {
        // SAFETY: per-CPU slot, only this CPU touches it while we run.
        let c = unsafe { *cursor };
        if c >= n {
            0
        } else {
            c
        }
    };
    let first = g.slots[start as usize & (MAX_SLOTS - 1)] as u32 & (MAX_MEMBERS_PER_GROUP - 1);
    let Some(m) = MEMBERS.get(member_id(group, first)) else {
        return Choice::Nothing;
    };
    if !m.active() {
        return Choice::OutOfService(Start {
            row,
            n,
            flow_mode,
            slot: start,
            index: first,
        });
    }
    if !flow_mode {
        let next = start + 1;
        // SAFETY: per-CPU slot.
        unsafe { *cursor = if next >= n { 0 } else { next } };
    }
    Choice::Member(NextHop {
        row,
        index: first,
        member: m,
    })
}

/// `select` when the start slot's member is out of service. It takes the group and the
/// cursor from the row again instead of as arguments: a matter of the verifier's state
/// pruning only (measured: 0.45M instructions for fare_xdp this way, 0.49M with both
/// passed; fare_tc_spray 73k against 66k, the lower total).
#[inline(always)]
fn select_out_of_service<C: Classify>(group: u32, at: Start, flow: &C) -> Option<NextHop> {
    let Start {
        row,
        n,
        flow_mode,
        slot: start,
        index: first,
    } = at;
    // SAFETY: this CPU's row (see `select`).
    let (g, cursor) = unsafe { (&(*row).group, &raw mut (*row).cursor) };
    // ARN removals end lazily: the member at the start slot, when its hold ran out (only
    // a member out of service can have one to end).
    crate::arn::expire(member_id(group, first));
    let mut start = start;
    if flow_mode {
        // A flow whose slot's member is out of service hashes again onto the slots (a
        // few tries) instead of taking the next slot: the removed member's flows then
        // spread over the others in proportion to their slots, and every other flow
        // keeps its member. The walk below is the last resort.
        let mut h = crate::flow::hash(&flow.fields());
        for _ in 0..REHASH_TRIES {
            let index =
                g.slots[start as usize & (MAX_SLOTS - 1)] as u32 & (MAX_MEMBERS_PER_GROUP - 1);
            let id = member_id(group, index);
            let m = MEMBERS.get(id)?;
            if m.active() {
                return Some(NextHop {
                    row,
                    index,
                    member: m,
                });
            }
            h = crate::flow::rehash(h);
            start = crate::bound::mask!((h as u64 * n as u64) >> 32, MAX_SLOTS as u64 - 1) as u32;
        }
    }
    for i in 0..MAX_SLOTS as u32 {
        if i >= n {
            break;
        }
        let mut slot = start + i;
        if slot >= n {
            slot -= n;
        }
        let index = g.slots[slot as usize & (MAX_SLOTS - 1)] as u32 & (MAX_MEMBERS_PER_GROUP - 1);
        let id = member_id(group, index);
        let m = MEMBERS.get(id)?;
        if m.active() {
            if !flow_mode {
                let next = slot + 1;
                // SAFETY: per-CPU slot.
                unsafe { *cursor = if next >= n { 0 } else { next } };
            }
            return Some(NextHop {
                row,
                index,
                member: m,
            });
        }
    }
    // Every member left is held out by ARNs only: an ARN never empties a group, so the
    // start slot's member carries on (no second loop: the verifier would walk it too).
    // (The agent's own ARN removal adds MEMBER_ADMIN_DOWN on top of the program's bit:
    // still a member out by ARN only.)
    let id = member_id(group, first);
    let m = MEMBERS.get(id)?;
    if m.state & MEMBER_REMOVED_BY_ARN == 0 {
        return None;
    }
    Some(NextHop {
        row,
        index: first,
        member: m,
    })
}

/// Rewrites the MACs and redirects to the member; `queued`: the route's groups have a
/// member behind a virtual queue (only then is a queue looked for).
#[inline(always)]
pub fn send(ctx: &XdpContext, next: &NextHop, queued: bool) -> Result<u32, Malformed> {
    Ok(send_to(ctx, ptr_at(ctx, 0)?, next, queued))
}

/// `send` with the frame's MACs at `macs` (bounds-checked by the caller: the fast path
/// keeps the pointer of its Ethernet parse).
#[inline(always)]
pub fn send_to(ctx: &XdpContext, macs: *mut [u16; 6], next: &NextHop, queued: bool) -> u32 {
    let m = next.member;
    // Both MACs as 16-bit words, read in place from the member's row: 6 loads and stores
    // (a [u8; 6] copy out of a map value becomes a call to a byte-wise memcpy). The frame
    // starts 2-byte aligned in every XDP mode, and so do the MAC fields of a `Member`.
    let dst = &m.dst_mac as *const [u8; 6] as *const [u16; 3];
    let src = &m.src_mac as *const [u8; 6] as *const [u16; 3];
    // SAFETY: the caller checked the 12 bytes; dst/src point into the MEMBERS value.
    unsafe {
        let (d, s) = (*dst, *src);
        (*macs)[0] = d[0];
        (*macs)[1] = d[1];
        (*macs)[2] = d[2];
        (*macs)[3] = s[0];
        (*macs)[4] = s[1];
        (*macs)[5] = s[2];
    }
    let len = packet::len(ctx);
    if queued && !crate::queue::admit(m.ifindex, len) {
        stats::count(Stat::QueueDropped);
        return xdp_action::XDP_DROP;
    }
    match EGRESS.redirect(m.ifindex, 0) {
        Ok(action) => {
            stats::count(Stat::Forwarded);
            stats::count_member(next.row, next.index, len);
            action
        }
        Err(_) => {
            stats::count(Stat::RedirectFailed);
            warn!(ctx, "redirect to ifindex {} refused", m.ifindex);
            xdp_action::XDP_DROP
        }
    }
}
