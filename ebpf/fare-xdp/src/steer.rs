//! ARN per-flow mode (see `fare_common::FlowSteerKey`): the egress port a packet's flow
//! must avoid because an ARN with a matching flow identifier said so. Only packets of a
//! route flagged `ROUTE_STEERED` (its group has steered copies) look here. Steering ends
//! when the agent removes the entry (Type 2/4 or its hold time).

use fare_common::{
    FlowSteerKey, SteerGroupKey, STEER_DST, STEER_DST_PORT, STEER_PROTOCOL, STEER_SRC,
    STEER_SRC_PORT,
};

use aya_ebpf::programs::XdpContext;

use crate::classify::Fields;
use crate::maps::{FLOW_STEER, STEER_FILTER, STEER_GROUPS, STEER_MASKS};

/// The group to forward by: `group`'s steered copy when the packet's flow must avoid a
/// port and the copy exists, else `group`.
///
/// Swapping the group id keeps the forwarding loop after it as the verifier already
/// walks it (one more unknown group id); one Mask, one lookup, because a loop over
/// several Masks before the forwarding loop exceeded the verifier's budget.
#[inline(always)]
pub fn steered_group(group: u32, f: &Fields) -> u32 {
    let port = avoided_port(f);
    if port == 0 {
        return group;
    }
    let key = SteerGroupKey {
        group,
        ifindex: port,
    };
    // SAFETY: a plain value, copied at once.
    match unsafe { STEER_GROUPS.get(&key) } {
        Some(copy) => *copy,
        None => group,
    }
}

/// Whether the packet's flow must avoid a port (its route is `ROUTE_STEERED`; `V6`: the
/// header at `offset` is IPv6): the fast path's question, which sends such a packet to the
/// full program. A call of its own, so that the fast path's frame and the verifier's
/// states after it are those of a route without steering (inlined, the kernel's verifier
/// ran out of its 1M instructions).
#[inline(never)]
pub fn flow_is_steered<const V6: bool>(ctx: XdpContext, offset: usize) -> bool {
    // A volatile read of the context keeps the context the argument: otherwise LLVM passes
    // the packet's bounds instead (argument promotion), loaded as 32-bit numbers and
    // widened by shifts, which the verifier refuses on packet pointers.
    // SAFETY: the program's context, valid for the whole run.
    let _ = unsafe { core::ptr::read_volatile(&(*ctx.ctx).data) };
    let fields = if V6 {
        crate::ipv6::fields_at(&ctx, offset)
    } else {
        crate::ipv4::fields_at(&ctx, offset)
    };
    avoided_port(&fields) != 0
}

/// The ifindex this packet's flow must not leave through; 0 = none.
#[inline(always)]
fn avoided_port(f: &Fields) -> u32 {
    let Some(&mask) = STEER_MASKS.get(0) else {
        return 0;
    };
    if mask == 0 {
        return 0;
    }
    let key = FlowSteerKey {
        mask,
        family: f.family as u32,
        protocol: if mask & STEER_PROTOCOL != 0 {
            f.protocol as u32
        } else {
            0
        },
        ports: (if mask & STEER_SRC_PORT != 0 {
            f.ports & 0xffff_0000
        } else {
            0
        }) | (if mask & STEER_DST_PORT != 0 {
            f.ports & 0xffff
        } else {
            0
        }),
        src: if mask & STEER_SRC != 0 { f.src } else { [0; 4] },
        dst: if mask & STEER_DST != 0 { f.dst } else { [0; 4] },
    };
    // The filter first: most flows of a route with steered copies are not steered, and
    // their key's bit is clear (an array read instead of the hash map's lookup).
    let bit = fare_common::steer_filter_bit(&key);
    match STEER_FILTER.get(bit >> 5) {
        Some(word) if word & (1 << (bit & 31)) != 0 => {}
        _ => return 0,
    }
    // SAFETY: the value is read at once (a concurrent delete only makes it stale).
    match unsafe { FLOW_STEER.get(&key) } {
        Some(v) => v.ifindex,
        None => 0,
    }
}
