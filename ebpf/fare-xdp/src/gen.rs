//! A traffic generator for benchmarks, not part of forwarding: run with
//! `BPF_PROG_TEST_RUN` + `BPF_F_TEST_XDP_LIVE_FRAMES`, it writes the template frame from
//! `GEN_TEMPLATE` over each frame and redirects it to the interface in `GEN_TX[0]`, so
//! frames enter the next hop as `xdp_frame`s (no skb). The template is rewritten every
//! time because the kernel recycles the pages with whatever the router left in them
//! (rewritten MACs, decremented TTL).

use aya_ebpf::{
    bindings::xdp_action,
    macros::{map, xdp},
    maps::{Array, DevMap},
    programs::XdpContext,
};
use fare_common::GEN_FRAME_LEN;

use crate::packet::ptr_at;

/// Not pinned: each benchmark run loads its own.
#[map]
static GEN_TX: DevMap = DevMap::with_max_entries(1, 0);

#[map]
static GEN_TEMPLATE: Array<[u8; GEN_FRAME_LEN]> = Array::with_max_entries(1, 0);

#[xdp]
pub fn fare_gen(ctx: XdpContext) -> u32 {
    let (Some(template), Ok(frame)) = (
        GEN_TEMPLATE.get(0),
        ptr_at::<[u8; GEN_FRAME_LEN]>(&ctx, 0),
    ) else {
        return xdp_action::XDP_ABORTED;
    };
    // SAFETY: ptr_at checked that the frame holds GEN_FRAME_LEN bytes.
    unsafe { *frame = *template };
    GEN_TX.redirect(0, 0).unwrap_or(xdp_action::XDP_ABORTED)
}

/// Frames the sink program has seen (index 0), per CPU.
#[map]
static SINK_RX: aya_ebpf::maps::PerCpuArray<u64> = aya_ebpf::maps::PerCpuArray::with_max_entries(1, 0);

/// Benchmark sink: counts and drops, so that receiving costs the router's core as little
/// as possible (the sink's NAPI runs where the frames were redirected).
#[xdp]
pub fn fare_sink(_ctx: XdpContext) -> u32 {
    if let Some(c) = SINK_RX.get_ptr_mut(0) {
        // SAFETY: per-CPU slot.
        unsafe { *c += 1 };
    }
    xdp_action::XDP_DROP
}
