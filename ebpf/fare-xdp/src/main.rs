//! fare XDP program: Ethernet (+ one 802.1Q tag) -> IPv4/IPv6 -> LPM route -> WCMP group
//! -> member (spray: per-CPU cursor over the slots; flow: 5-tuple hash onto the slots)
//! -> MAC rewrite, TTL/hop-limit decrement -> XDP_REDIRECT through the EGRESS devmap.
//!
//! Anything we do not route goes to the kernel (XDP_PASS): non-IP, no route, TTL <= 1.
//! Malformed or truncated headers are counted and dropped.
//!
//! A pipeline of programs, each verified on its own: the entry `fare_xdp` (`fast`)
//! forwards the common packet (a flow no ARN steered, the member its group or its DPF
//! color's group gives in service) in one short run and hands every other one on by a
//! tail call (`stage`): `fare_xdp_arn` (datagrams for the ARN receiver), or
//! `fare_xdp_full` / `fare_xdp_full_v6` (the whole program below, from the frame again).
//!
//! Layout: `maps` (all maps), `consts` (protocol numbers), `packet` (bounds-checked
//! access), one parser per protocol (`eth`, `ipv4`, `ipv6`), `flow` (5-tuple hash),
//! `classify` (DPF flow -> color), `arn` (ARN reception), `queue` (egress virtual queues), `steer` (ARN per-flow mode), `tc_spray` (TC egress: per-packet spraying of the host's own traffic), `forward` (group -> member -> rewrite -> redirect; a
//! route's per-color groups), `stats` (counters).
#![no_std]
#![no_main]
// Inline assembly for the BPF target (`bound`): stable elsewhere, built with RUSTC_BOOTSTRAP.
#![feature(asm_experimental_arch)]

mod arn;
mod bound;
mod choice;
mod classify;
mod consts;
mod dir4;
mod eth;
mod fast;
mod flow;
mod flowlet;
mod forward;
mod ipv4;
mod ipv6;
mod maps;
mod packet;
mod queue;
mod stage;
mod stats;
mod steer;
mod tc_spray;

use aya_ebpf::{bindings::xdp_action, macros::xdp, programs::XdpContext};
use aya_log_ebpf::debug;
use fare_common::{Stat, STAGE_FULL, STAGE_FULL_V6};

use crate::eth::L3;
use crate::packet::Malformed;

/// The entry program, attached to the interfaces: the fast path (`fast`). A packet it
/// does not finish goes on by a tail call in a stage (`stage`): ARN reception or the
/// full program.
// `inline(always)` goes to the body the macro wraps (here and in every stage): without
// it LLVM may keep the whole program as one BPF-to-BPF call from the entry (it did once
// the body grew), a call per packet and a slower program.
#[xdp]
#[inline(always)]
pub fn fare_xdp(ctx: XdpContext) -> u32 {
    match fast::forward(&ctx) {
        Some(outcome) => action(&ctx, outcome),
        None => full(&ctx),
    }
}

/// The full program: every feature, every counter of what happened to the packet, from
/// the frame again (stage `STAGE_FULL`: IPv4 and every frame that is not IPv6; IPv6
/// goes on in `fare_xdp_full_v6`, so that each is verified with one family's paths).
#[xdp]
#[inline(always)]
pub fn fare_xdp_full(ctx: XdpContext) -> u32 {
    action(&ctx, try_full::<false>(&ctx))
}

/// The full program of IPv6 packets (stage `STAGE_FULL_V6`).
#[xdp]
#[inline(always)]
pub fn fare_xdp_full_v6(ctx: XdpContext) -> u32 {
    action(&ctx, try_full::<true>(&ctx))
}

/// ARN reception (stage `STAGE_ARN`): the entry sends here the UDP datagrams to the ARN
/// port when the node receives ARNs; one for this node is handled and passed to the
/// kernel, any other goes on in the full program (forwarded like any packet).
#[xdp]
#[inline(always)]
pub fn fare_xdp_arn(ctx: XdpContext) -> u32 {
    match try_arn(&ctx) {
        Some(action) => {
            stats::count(Stat::ArnPassed);
            action
        }
        None => full(&ctx),
    }
}

#[inline(always)]
fn try_arn(ctx: &XdpContext) -> Option<u32> {
    let frame = eth::parse(ctx).ok()?;
    match frame.l3 {
        L3::Ipv4 => {
            let ip = ipv4::parse(ctx, frame.l3_offset).ok()?;
            arn::receive(ctx, &ipv4::V4(ctx), ip.ttl)
        }
        L3::Ipv6 => {
            let ip = ipv6::parse(ctx, frame.l3_offset).ok()?;
            arn::receive(ctx, &ipv6::V6(ctx), ip.hop_limit)
        }
        L3::Other => None,
    }
}

/// Continues the packet in the full program. Nothing of it was changed yet. Without
/// the stage (a loader that did not fill `STAGES`) the packet goes to the kernel,
/// counted as one without a member.
#[inline(always)]
fn full(ctx: &XdpContext) -> u32 {
    stage::tail::<STAGE_FULL>(ctx);
    stats::count(Stat::NoMember);
    xdp_action::XDP_PASS
}

/// The XDP action of an outcome; a malformed packet is counted and dropped.
#[inline(always)]
fn action(ctx: &XdpContext, outcome: Result<u32, Malformed>) -> u32 {
    // Each path counts its outcome once; user space sums them into `received`.
    match outcome {
        Ok(action) => action,
        Err(Malformed) => {
            stats::count(Stat::Malformed);
            debug!(ctx, "malformed packet dropped");
            xdp_action::XDP_DROP
        }
    }
}

/// The full program of one family (`V6`: IPv6; else IPv4, and every frame that is
/// neither). A frame of the other family goes on in that family's full program.
#[inline(always)]
fn try_full<const V6: bool>(ctx: &XdpContext) -> Result<u32, Malformed> {
    let frame = eth::parse(ctx)?;
    match frame.l3 {
        L3::Ipv4 | L3::Ipv6 if V6 != matches!(frame.l3, L3::Ipv6) => {
            if V6 {
                stage::tail::<STAGE_FULL>(ctx);
            } else {
                stage::tail::<STAGE_FULL_V6>(ctx);
            }
            stats::count(Stat::NoMember);
            Ok(xdp_action::XDP_PASS)
        }
        L3::Ipv4 => forward::ipv4(ctx, &ipv4::parse(ctx, frame.l3_offset)?),
        L3::Ipv6 => forward::ipv6(ctx, &ipv6::parse(ctx, frame.l3_offset)?),
        L3::Other => {
            stats::count(Stat::NotIp);
            Ok(xdp_action::XDP_PASS)
        }
    }
}

fare_common::ebpf_object!();
