//! Benchmark-only XDP programs, in their own object so that the production object
//! (ebpf/fare-xdp) holds nothing but the forwarder:
//!
//! - `bench_min_fwd`: the minimal forwarder fare is measured against. Ethernet + IPv4
//!   parse, one LPM lookup (destination -> egress ifindex and MACs), MAC rewrite,
//!   redirect through a devmap. No VLAN, no TTL, no counters, no groups: the floor of
//!   this data path.
//! - `fare_gen`: a traffic generator run with `BPF_PROG_TEST_RUN` +
//!   `BPF_F_TEST_XDP_LIVE_FRAMES`; it writes the next of the four template frames of
//!   `GEN_TEMPLATE` (in turn) over each frame and redirects it to the interface in
//!   `GEN_TX[0]`, so frames enter the next hop as `xdp_frame`s (no skb). The template is rewritten every time because the
//!   kernel recycles the pages with whatever the router left in them.
//! - `fare_sink`: counts (per CPU, `SINK_RX[0]`) and drops.
//!
//! No map is pinned: each benchmark run loads its own copy.
#![no_std]
#![no_main]

use aya_ebpf::{
    bindings::xdp_action,
    macros::{map, xdp},
    maps::{
        lpm_trie::{Key, LpmTrie},
        Array, DevMap, DevMapHash, PerCpuArray,
    },
    programs::XdpContext,
};
use fare_common::bench::{MinNextHop, GEN_FRAME_LEN, GEN_TEMPLATES, MIN_FWD_MAX_ROUTES};

const ETH_HLEN: usize = 14;
const ETH_P_IP: u16 = 0x0800;
const IPV4_MIN_HLEN: usize = 20;

#[inline(always)]
fn ptr_at<T>(ctx: &XdpContext, offset: usize) -> Option<*mut T> {
    let start = ctx.data();
    if start + offset + core::mem::size_of::<T>() > ctx.data_end() {
        return None;
    }
    Some((start + offset) as *mut T)
}

#[map]
static MIN_ROUTES: LpmTrie<[u8; 4], MinNextHop> = LpmTrie::with_max_entries(MIN_FWD_MAX_ROUTES, 0);

#[map]
static MIN_EGRESS: DevMapHash = DevMapHash::with_max_entries(64, 0);

#[xdp]
pub fn bench_min_fwd(ctx: XdpContext) -> u32 {
    min_fwd(&ctx).unwrap_or(xdp_action::XDP_PASS)
}

#[inline(always)]
fn min_fwd(ctx: &XdpContext) -> Option<u32> {
    let eth: *mut [u8; ETH_HLEN] = ptr_at(ctx, 0)?;
    let ip: *const [u8; IPV4_MIN_HLEN] = ptr_at(ctx, ETH_HLEN)?;
    // SAFETY: ptr_at checked both headers.
    let (eth, ip) = unsafe { (&mut *eth, &*ip) };
    if u16::from_be_bytes([eth[12], eth[13]]) != ETH_P_IP || ip[0] >> 4 != 4 {
        return None;
    }
    let dst = [ip[16], ip[17], ip[18], ip[19]];
    let next = MIN_ROUTES.get(Key::new(32, dst))?;
    eth[..6].copy_from_slice(&next.dst_mac);
    eth[6..12].copy_from_slice(&next.src_mac);
    MIN_EGRESS.redirect(next.ifindex, 0).ok()
}

/// Not pinned: each benchmark run loads its own.
#[map]
static GEN_TX: DevMap = DevMap::with_max_entries(1, 0);

#[map]
static GEN_TEMPLATE: Array<[u8; GEN_FRAME_LEN]> = Array::with_max_entries(GEN_TEMPLATES, 0);

/// Per CPU: frames generated so far (which template is next).
#[map]
static GEN_NEXT: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);

#[xdp]
pub fn fare_gen(ctx: XdpContext) -> u32 {
    let Some(next) = GEN_NEXT.get_ptr_mut(0) else {
        return xdp_action::XDP_ABORTED;
    };
    // SAFETY: per-CPU slot, only this CPU's program touches it.
    let i = unsafe {
        let i = *next;
        *next = i.wrapping_add(1);
        i % GEN_TEMPLATES
    };
    let (Some(template), Some(frame)) =
        (GEN_TEMPLATE.get(i), ptr_at::<[u8; GEN_FRAME_LEN]>(&ctx, 0))
    else {
        return xdp_action::XDP_ABORTED;
    };
    // SAFETY: ptr_at checked that the frame holds GEN_FRAME_LEN bytes.
    unsafe { *frame = *template };
    GEN_TX.redirect(0, 0).unwrap_or(xdp_action::XDP_ABORTED)
}

/// Frames the sink program has seen (index 0), per CPU.
#[map]
static SINK_RX: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

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

fare_common::ebpf_object!();
