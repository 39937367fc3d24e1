//! fare XDP program: Ethernet (+ one 802.1Q tag) -> IPv4/IPv6 -> LPM route -> WCMP group
//! -> member (spray: per-CPU cursor over the slots; flow: 5-tuple hash onto the slots)
//! -> MAC rewrite, TTL/hop-limit decrement -> XDP_REDIRECT through the EGRESS devmap.
//!
//! Anything we do not route goes to the kernel (XDP_PASS): non-IP, no route, TTL <= 1.
//! Malformed or truncated headers are counted and dropped.
//!
//! Two paths: `fast` forwards the common packet (route without steering, member of its
//! start slot, or of its DPF color's, in service) in one short run; everything else runs
//! `full`, the whole program below, from the frame again.
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
mod stats;
mod steer;
mod tc_spray;

use aya_ebpf::{bindings::xdp_action, macros::xdp, programs::XdpContext};
use aya_log_ebpf::debug;
use fare_common::Stat;

use crate::eth::L3;
use crate::packet::Malformed;

// `inline(always)` goes to the body the macro wraps: without it LLVM may keep the whole
// program as one BPF-to-BPF call from the entry (it did once the body grew), a call per
// packet and a slower program.
#[xdp]
#[inline(always)]
pub fn fare_xdp(ctx: XdpContext) -> u32 {
    // Most packets end in the fast path (`fast`); the rest start again in the full
    // program, a call of its own so that none of its values live in the fast path.
    match fast::forward(&ctx) {
        Some(outcome) => action(&ctx, outcome),
        None => full(XdpContext::new(ctx.ctx)),
    }
}

/// The full program: every feature, every counter of what happened to the packet.
#[inline(never)]
fn full(ctx: XdpContext) -> u32 {
    action(&ctx, try_fare_xdp(&ctx))
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

#[inline(always)]
fn try_fare_xdp(ctx: &XdpContext) -> Result<u32, Malformed> {
    let frame = eth::parse(ctx)?;
    match frame.l3 {
        L3::Ipv4 => {
            let ip = ipv4::parse(ctx, frame.l3_offset)?;
            if let Some(action) = arn::receive(ctx, &ipv4::V4(ctx), ip.ttl) {
                stats::count(Stat::ArnPassed);
                return Ok(action);
            }
            forward::ipv4(ctx, &ip)
        }
        L3::Ipv6 => {
            let ip = ipv6::parse(ctx, frame.l3_offset)?;
            if let Some(action) = arn::receive(ctx, &ipv6::V6(ctx), ip.hop_limit) {
                stats::count(Stat::ArnPassed);
                return Ok(action);
            }
            forward::ipv6(ctx, &ip)
        }
        L3::Other => {
            stats::count(Stat::NotIp);
            Ok(xdp_action::XDP_PASS)
        }
    }
}

fare_common::ebpf_object!();
