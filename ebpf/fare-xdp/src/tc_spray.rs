//! Per-packet spraying of this host's own traffic (an RNIC's planes, multi-plane
//! scale-out): a TC egress program on the plane interfaces. Locally sent packets never
//! pass XDP (it sees received frames only), and the kernel's route picks one plane per
//! flow; here every packet whose destination has a spray-mode group in ROUTES (the same
//! maps the XDP program uses, written by the agent) takes the next member by weight:
//! MAC rewrite, then out of that member's interface (bpf_redirect to its egress) or on
//! through this one. No TTL change: the packet is ours, not forwarded. Flow-mode groups,
//! other traffic and anything unreadable go on as the kernel routed them.

use aya_ebpf::{
    bindings::{TC_ACT_OK, TC_ACT_REDIRECT},
    helpers::bpf_redirect,
    macros::classifier,
    maps::lpm_trie::Key,
    programs::TcContext,
};
use fare_common::SPRAYED_MARK;

use crate::classify::{Classify, Fields};
use crate::consts::{ETH_HLEN, ETH_P_IP, ETH_P_IPV6};
use crate::maps::{ROUTES_V4, ROUTES_V6};

#[classifier]
pub fn fare_tc_spray(ctx: TcContext) -> i32 {
    spray(&ctx).unwrap_or(TC_ACT_OK as i32)
}

#[inline(always)]
fn spray(ctx: &TcContext) -> Option<i32> {
    // SAFETY: the context's own sk_buff.
    let mark = unsafe { (*ctx.skb.skb).mark };
    if mark & SPRAYED_MARK != 0 {
        // Redirected here by this program: the egress hook of the new interface runs
        // again, and must not choose again (that would loop).
        return None;
    }
    let ethertype = u16::from_be(ctx.load::<u16>(12).ok()?);
    let group = if ethertype == ETH_P_IP {
        let dst: [u8; 4] = ctx.load(ETH_HLEN + 16).ok()?;
        ROUTES_V4.get(Key::new(32, dst))?.group
    } else if ethertype == ETH_P_IPV6 {
        let dst: [u8; 16] = ctx.load(ETH_HLEN + 24).ok()?;
        ROUTES_V6.get(Key::new(128, dst))?.group
    } else {
        return None;
    };
    // Spray groups only: `select::<false>` has no member for a flow group and never
    // reads the fields.
    let next = crate::forward::select::<false, NoFields>(group, &NoFields)?;
    ctx.store(0, &next.member.dst_mac, 0).ok()?;
    ctx.store(6, &next.member.src_mac, 0).ok()?;
    crate::stats::count_member(next.row, next.index, ctx.len() as u64);
    ctx.set_mark(mark | SPRAYED_MARK);
    // SAFETY: the context's own sk_buff.
    let here = unsafe { (*ctx.skb.skb).ifindex };
    if next.member.ifindex == here {
        return Some(TC_ACT_OK as i32);
    }
    // SAFETY: helper with plain arguments; egress of the member's interface.
    let r = unsafe { bpf_redirect(next.member.ifindex, 0) };
    Some(if r == TC_ACT_REDIRECT as i64 {
        TC_ACT_REDIRECT as i32
    } else {
        TC_ACT_OK as i32
    })
}

/// The TC program's packets have no fields to read (`select::<false, _>` never asks).
struct NoFields;

impl Classify for NoFields {
    #[inline(always)]
    fn fields(&self) -> Fields {
        Fields::NONE
    }
}
