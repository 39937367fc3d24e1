//! ARN reception in the program (no user-space round trip): a UDP datagram to the ARN
//! port from an accepted neighbor (its address, its interface, TTL / hop limit 255),
//! within the sender's rate limit, with a valid Path-ID-only message, switches the member
//! slots ARN_PATHS lists for (sender, Path ID) off (Type 1/3: the member's
//! MEMBER_REMOVED_BY_ARN bit, ARN_REMOVED = now) or on again (Type 2/4). The forwarding
//! path skips them like any inactive member; `expire` ends a removal after the hold time. Every datagram to the ARN port still goes to the kernel (XDP_PASS) so the agent
//! sees, logs and counts it; messages with a flow identifier are left to the agent.

use aya_ebpf::{bindings::xdp_action, helpers::bpf_ktime_get_ns, programs::XdpContext};
use fare_common::{
    ArnConfigRow, ArnPathKey, ArnSender, ArnStat, Member, Stat, MAX_MEMBERS_PER_GROUP,
    MEMBER_REMOVED_BY_ARN,
};

use crate::classify::{Classify, Fields};
use crate::consts::IPPROTO_UDP;
use crate::maps::{
    ARN_CONFIG, ARN_LOCAL, ARN_NEIGHBORS, ARN_PATHS, ARN_REMOVED, ARN_STATS, GROUP_ACTIVE, MEMBERS,
};
use crate::packet::{ptr_at, read_be16};

use fare_common::arn_wire::{
    PARA_FLOW, PARA_PATH_ID, TTL, TYPE_CONGESTION_DETECTED, TYPE_CONGESTION_ELIMINATED,
    TYPE_FAILURE_DETECTED, TYPE_FAILURE_ELIMINATED, VERSION,
};

const UDP_HLEN: usize = 8;

/// 1 when the loader configured ARN reception for this node, 0 otherwise. Set at load
/// time (`.rodata`, frozen): with 0 the verifier knows the receiver is unreachable and
/// drops it, so no packet pays for the ARN check (not even the ARN_CONFIG read of every
/// UDP datagram).
#[unsafe(no_mangle)]
static FARE_ARN_RECEIVER: u8 = 0;
// (The loader names it fare_common::ARN_RECEIVER_GLOBAL.)

/// Whether the loader configured ARN reception (see `FARE_ARN_RECEIVER`).
#[inline(always)]
fn receiver_on() -> bool {
    // SAFETY: a plain read of a global the loader may have rewritten (volatile, so that
    // the compiler does not fold the default).
    unsafe { core::ptr::read_volatile(&FARE_ARN_RECEIVER) != 0 }
}

/// The ARN settings when `f` is a whole UDP datagram to the ARN port (reception enabled).
#[inline(always)]
fn to_arn_port(f: &Fields) -> Option<&'static ArnConfigRow> {
    if f.protocol != IPPROTO_UDP || f.l4_offset == 0 {
        return None;
    }
    let cfg = ARN_CONFIG.get(0)?;
    if cfg.enabled == 0 || f.ports & 0xffff != cfg.udp_port {
        return None;
    }
    Some(cfg)
}

/// Whether `receive` might take the packet (the fast path leaves those to the full
/// program): never without the receiver; with it, a UDP datagram to the ARN port. Only
/// UDP packets on a node with the receiver read their fields here.
#[inline(always)]
pub fn may_receive<C: Classify>(packet: &C, protocol: u8) -> bool {
    receiver_on() && protocol == IPPROTO_UDP && to_arn_port(&packet.fields()).is_some()
}

/// `Some(action)` when the packet is a datagram to the ARN port (handled here).
#[inline(always)]
pub fn receive<C: Classify>(ctx: &XdpContext, packet: &C, ttl: u8) -> Option<u32> {
    if !receiver_on() {
        return None;
    }
    // Only with the receiver on are the packet's fields read here.
    let fields = packet.fields();
    let f = &fields;
    let cfg = to_arn_port(f)?;
    // Only ARNs for this node: to one of its addresses, or to a multicast group. An ARN
    // to another node crosses this one like any packet.
    if !is_multicast(f) {
        let dst = ArnSender {
            family: f.family as u32,
            addr: f.dst,
        };
        // SAFETY: read-only lookup of a hash map value.
        unsafe { ARN_LOCAL.get(&dst) }?;
    }
    let stat = handle(ctx, f, ttl, cfg);
    count(stat);
    Some(xdp_action::XDP_PASS)
}

/// 224.0.0.0/4 or ff00::/8 (addresses are in packet byte order).
#[inline(always)]
fn is_multicast(f: &Fields) -> bool {
    let first = f.dst[0].to_ne_bytes()[0];
    if f.family == 4 {
        first & 0xf0 == 0xe0
    } else {
        first == 0xff
    }
}

#[inline(always)]
fn handle(ctx: &XdpContext, f: &Fields, ttl: u8, cfg: &ArnConfigRow) -> ArnStat {
    let sender = ArnSender {
        family: f.family as u32,
        addr: f.src,
    };
    let Some(n) = ARN_NEIGHBORS.get_ptr_mut(&sender) else {
        return ArnStat::Spoofed;
    };
    // SAFETY: a hash map value; concurrent CPUs may race on the bucket, which only makes
    // the limit approximate.
    let n = unsafe { &mut *n };
    if ttl != TTL || n.ifindex as usize != ctx.ingress_ifindex() {
        return ArnStat::Spoofed;
    }
    // SAFETY: helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let cap = cfg.burst.wrapping_mul(cfg.refill_ns);
    let mut credit = n.credit_ns.saturating_add(now.saturating_sub(n.last_ns));
    if credit > cap {
        credit = cap;
    }
    n.last_ns = now;
    if credit < cfg.refill_ns {
        n.credit_ns = credit;
        return ArnStat::RateLimited;
    }
    n.credit_ns = credit - cfg.refill_ns;

    let udp = f.l4_offset;
    let Ok(udp_len) = read_be16(ctx, udp + 4) else {
        return ArnStat::Malformed;
    };
    let Ok(h) = ptr_at::<[u8; 4]>(ctx, udp + UDP_HLEN) else {
        return ArnStat::Malformed;
    };
    // SAFETY: ptr_at checked the four bytes.
    let h = unsafe { *h };
    let (kind, version, para) = (h[0], h[1] >> 4, h[3]);
    let known = (TYPE_CONGESTION_DETECTED..=TYPE_FAILURE_ELIMINATED).contains(&kind);
    if !known || version != VERSION || para & !(PARA_FLOW | PARA_PATH_ID) != 0 {
        return ArnStat::Malformed;
    }
    if para & PARA_FLOW != 0 {
        // Variable length; the agent decodes it and narrows by the flow's destination.
        return ArnStat::Deferred;
    }
    let has_path = para & PARA_PATH_ID != 0;
    let want = UDP_HLEN + 4 + if has_path { 4 } else { 0 };
    if udp_len as usize != want {
        return ArnStat::Malformed;
    }
    let path_id = if has_path {
        match ptr_at::<[u8; 4]>(ctx, udp + UDP_HLEN + 4) {
            // SAFETY: ptr_at checked the four bytes.
            Ok(p) => u32::from_be_bytes(unsafe { *p }),
            Err(_) => return ArnStat::Malformed,
        }
    } else {
        0
    };
    let key = ArnPathKey { sender, path_id };
    // SAFETY: read-only lookups of hash map values. A Path ID not listed (a path this
    // node no longer has) is the agent's to judge, never the sender's wildcard (path 0):
    // that would take out every member toward the sender.
    let targets = match unsafe { ARN_PATHS.get(&key) } {
        Some(t) => t,
        None => return ArnStat::Deferred,
    };
    // Congestion shift: the share is the agent's (a damped, re-weighted group); this
    // program acts on failures only.
    if cfg.enabled & fare_common::ARN_CONGESTION_SHIFT != 0 && kind <= TYPE_CONGESTION_ELIMINATED {
        return ArnStat::Deferred;
    }
    let removes = kind == TYPE_CONGESTION_DETECTED || kind == TYPE_FAILURE_DETECTED;
    for i in 0..fare_common::MAX_ARN_TARGETS {
        if i as u32 >= targets.n {
            break;
        }
        let id = targets.ids[i];
        let (Some(since), Some(m)) = (ARN_REMOVED.get_ptr_mut(id), MEMBERS.get_ptr_mut(id)) else {
            continue;
        };
        let active = GROUP_ACTIVE.get_ptr_mut(id / MAX_MEMBERS_PER_GROUP);
        // SAFETY: array values; plain stores (user space only rewrites whole rows).
        unsafe {
            if removes {
                if (*m).state & MEMBER_REMOVED_BY_ARN == 0 {
                    if (*m).state == 0 {
                        // In service now: never the group's last one.
                        if let Some(a) = active {
                            if *a <= 1 {
                                crate::stats::count(Stat::ArnKeptLast);
                                continue;
                            }
                            *a -= 1;
                        }
                    }
                    (*m).state |= MEMBER_REMOVED_BY_ARN;
                    count(ArnStat::Removed);
                }
                *since = now;
            } else {
                *since = 0;
                if end_removal(m, id) {
                    count(ArnStat::Restored);
                }
            }
        }
    }
    ArnStat::Accepted
}

/// Clears member `id`'s ARN removal bit (`m` is its MEMBERS row); true when it was set.
/// A member back in service counts again in its group's GROUP_ACTIVE.
///
/// # Safety
/// `m` must point at MEMBERS[id].
#[inline(always)]
unsafe fn end_removal(m: *mut Member, id: u32) -> bool {
    // SAFETY: the caller's pointer; plain stores as everywhere in this module.
    unsafe {
        if (*m).state & MEMBER_REMOVED_BY_ARN == 0 {
            return false;
        }
        (*m).state &= !MEMBER_REMOVED_BY_ARN;
        if (*m).state == 0 {
            if let Some(a) = GROUP_ACTIVE.get_ptr_mut(id / MAX_MEMBERS_PER_GROUP) {
                *a += 1;
            }
        }
    }
    true
}

/// Ends member `id`'s ARN removal when the hold time has passed since the last Type 1/3
/// (the forwarding path calls this for one member per packet, so no timer is needed).
#[inline(always)]
pub fn expire(id: u32) {
    let Some(since) = ARN_REMOVED.get_ptr_mut(id) else {
        return;
    };
    // SAFETY: array value.
    let t = unsafe { *since };
    if t == 0 {
        return;
    }
    let Some(cfg) = ARN_CONFIG.get(0) else {
        return;
    };
    // SAFETY: helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    if now.wrapping_sub(t) < cfg.hold_ns {
        return;
    }
    let Some(m) = MEMBERS.get_ptr_mut(id) else {
        return;
    };
    // SAFETY: array values; another CPU may do the same (counted twice at worst).
    unsafe {
        *since = 0;
        end_removal(m, id);
    }
    count(ArnStat::Expired);
}

#[inline(always)]
fn count(stat: ArnStat) {
    if let Some(c) = ARN_STATS.get_ptr_mut(stat as u32) {
        // SAFETY: per-CPU slot.
        unsafe { *c += 1 };
    }
}
