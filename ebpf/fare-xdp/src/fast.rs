//! The fast path, the entry program's work: most packets are forwarded here, in one
//! short run of code. A packet qualifies when its TTL / hop limit allows forwarding, its
//! route has no steered copies and its group (the route's, or its DPF color's) is in
//! spray or flow mode with the start slot's member in service; then it takes exactly
//! the member, rewrite and counters the full program would give it (the same
//! `route_group`, `first_choice`, `send_to` and parsers). The fast path writes the TTL /
//! hop limit and the MACs through the header pointers its parse checked (the full
//! program checks the bounds again before each write). A route with steered copies goes
//! on in the steering stage (below, its
//! own program, and both forward the same way when they can); everything else
//! (malformed frames, datagrams for the ARN receiver, no route, TTL expiry, a steered
//! flow, a member out of service, an empty group) leaves before anything is changed, and
//! the full program (`fare_xdp_full`) starts again from the frame.
//!
//! Why stages rather than one program: in one body the verifier walked every rare
//! branch with every state of the common one (0.85M of its 1M instructions on Linux
//! 6.18 before the split), and the compiler keeps values of rare branches alive across
//! the common one. Here the only value carried on is the context (and, to the
//! steering stage, the route's group and flags: `stage::Args`).

use aya_ebpf::{bindings::xdp_action, maps::lpm_trie::Key, programs::XdpContext};
use fare_common::{
    RouteValue, Stat, ROUTE_COLORS, ROUTE_QUEUES, ROUTE_STEERED, STAGE_ARN, STAGE_STEER,
};

use crate::classify::Classify;
use crate::eth::{self, L3};
use crate::forward::{first_choice, route_group, send_to, Choice, NextHop};
use crate::ipv4::{self, V4At};
use crate::ipv6::{self, V6At};
use crate::maps::{ROUTES_V4, ROUTES_V6};
use crate::packet::Malformed;
use crate::stage::{self, Args, COLORED};
use crate::{arn, stats, steer};

/// `Some(outcome)` when the packet was handled here; `None`: take the full program.
#[inline(always)]
pub fn forward(ctx: &XdpContext) -> Option<Result<u32, Malformed>> {
    let frame = eth::parse(ctx).ok()?;
    // The MACs: the first six words of the header the parse checked.
    let macs = frame.hdr as *mut [u16; 6];
    match frame.l3 {
        L3::Ipv4 => v4(ctx, macs, frame.l3_offset),
        L3::Ipv6 => v6(ctx, macs, frame.l3_offset),
        L3::Other => {
            stats::count(Stat::NotIp);
            Some(Ok(xdp_action::XDP_PASS))
        }
    }
}

#[inline(always)]
fn v4(ctx: &XdpContext, macs: *mut [u16; 6], offset: usize) -> Option<Result<u32, Malformed>> {
    let ip = ipv4::parse(ctx, offset).ok()?;
    let packet = V4At { ctx, offset };
    if arn::may_receive(&packet, ip.protocol) {
        stage::tail::<STAGE_ARN>(ctx);
        return None;
    }
    // The table first (array reads); the trie where it has no entry.
    let route =
        crate::dir4::lookup(ip.dst).or_else(|| ROUTES_V4.get(Key::new(32, ip.dst)).copied());
    routed(ctx, macs, &packet, route, ip.ttl, || {
        ipv4::decrement_ttl_at(ip.hdr)
    })
}

#[inline(always)]
fn v6(ctx: &XdpContext, macs: *mut [u16; 6], offset: usize) -> Option<Result<u32, Malformed>> {
    let ip = ipv6::parse(ctx, offset).ok()?;
    let packet = V6At { ctx, offset };
    if arn::may_receive(&packet, ip.next_header) {
        stage::tail::<STAGE_ARN>(ctx);
        return None;
    }
    let route = ROUTES_V6.get(Key::new(128, ip.dst)).copied();
    routed(ctx, macs, &packet, route, ip.hop_limit, || {
        ipv6::decrement_hop_limit_at(ip.hdr)
    })
}

/// The rest of the fast path for either family: `route` (None: no route, to the full
/// program), the packet's TTL / hop limit and how to decrement it.
#[inline(always)]
fn routed<C: Classify>(
    ctx: &XdpContext,
    macs: *mut [u16; 6],
    packet: &C,
    route: Option<RouteValue>,
    ttl: u8,
    decrement: impl FnOnce(),
) -> Option<Result<u32, Malformed>> {
    // No route: the full program tells the node's own addresses (counted `local`) from
    // the rest (`no_route`); both go to the kernel, off the forwarding path.
    let route = route?;
    let (group, flags) = (route.group, route.flags);
    if ttl <= 1 {
        return None;
    }
    // A route with steered copies: the packet's flow decides the group, in a stage of
    // its own (`steer`), so that the entry's verification does not walk the
    // steering tables.
    if flags & ROUTE_STEERED != 0 {
        stage::tail_with::<STAGE_STEER>(ctx, Args { group, flags });
        return None;
    }
    // DPF: the packet's color's group, here rather than in a stage because in a fabric
    // whose routes all have colors that is every packet (bench/RESULTS.md, `xdp`, the
    // DPF case).
    let (gid, colored) = route_group(ctx, group, flags & ROUTE_COLORS, packet);
    let flags = if colored { flags | COLORED } else { flags };
    member(ctx, macs, packet, Args { group: gid, flags }, decrement)
}

/// The member of `args.group` (its start slot's, in service) and the packet sent to it;
/// anything else (a member out of service, an empty group) goes on in the full
/// program. Nothing is changed before that.
#[inline(always)]
fn member<C: Classify>(
    ctx: &XdpContext,
    macs: *mut [u16; 6],
    packet: &C,
    args: Args,
    decrement: impl FnOnce(),
) -> Option<Result<u32, Malformed>> {
    match first_choice::<true, _>(args.group, packet) {
        Choice::Member(next) => Some(Ok(sent(ctx, macs, &next, args.flags, decrement))),
        Choice::OutOfService(_) | Choice::Nothing => None,
    }
}

/// From here on the packet is ours (the spray cursor has moved past its slot):
/// counted, decremented, rewritten and redirected.
#[inline(always)]
fn sent(
    ctx: &XdpContext,
    macs: *mut [u16; 6],
    next: &NextHop,
    flags: u32,
    decrement: impl FnOnce(),
) -> u32 {
    if flags & COLORED != 0 {
        stats::count(Stat::DpfColored);
    }
    decrement();
    send_to(ctx, macs, next, flags & ROUTE_QUEUES != 0)
}

/// A stage that continues a packet the entry routed (`stage::args`): it parses the
/// frame again and goes on with the same packet views as the entry.
trait Stage {
    fn run<C: Classify>(
        ctx: &XdpContext,
        macs: *mut [u16; 6],
        packet: &C,
        args: Args,
        steered: impl FnOnce() -> bool,
        decrement: impl FnOnce(),
    ) -> Option<Result<u32, Malformed>>;
}

/// Parses the frame again (the entry checked it: a failure here only sends the packet
/// to the full program) and runs stage `S` on it.
#[inline(always)]
fn again<S: Stage>(ctx: &XdpContext) -> Option<Result<u32, Malformed>> {
    let args = stage::args()?;
    let frame = eth::parse(ctx).ok()?;
    let macs = frame.hdr as *mut [u16; 6];
    let offset = frame.l3_offset;
    match frame.l3 {
        L3::Ipv4 => {
            let ip = ipv4::parse(ctx, offset).ok()?;
            let steered = || steer::flow_is_steered::<false>(XdpContext::new(ctx.ctx), offset);
            S::run(ctx, macs, &V4At { ctx, offset }, args, steered, || {
                ipv4::decrement_ttl_at(ip.hdr)
            })
        }
        L3::Ipv6 => {
            let ip = ipv6::parse(ctx, offset).ok()?;
            let steered = || steer::flow_is_steered::<true>(XdpContext::new(ctx.ctx), offset);
            S::run(ctx, macs, &V6At { ctx, offset }, args, steered, || {
                ipv6::decrement_hop_limit_at(ip.hdr)
            })
        }
        L3::Other => None,
    }
}

/// The steering stage (`fare_xdp_steer`): a route with steered copies sends a
/// steered flow to the full program (its copy is found there) and goes on with the
/// others: the member as in the entry.
pub struct Steered;

impl Stage for Steered {
    #[inline(always)]
    fn run<C: Classify>(
        ctx: &XdpContext,
        macs: *mut [u16; 6],
        packet: &C,
        args: Args,
        steered: impl FnOnce() -> bool,
        decrement: impl FnOnce(),
    ) -> Option<Result<u32, Malformed>> {
        // Most flows of a route with steered copies are not steered and go on here; a
        // steered one takes the full program (its copy is found there), and so does a
        // route that also has DPF colors (rare: the full program has both), so that
        // this stage's verification walks no flow rules. The question is a call of its
        // own (`steer::flow_is_steered`).
        if args.flags & ROUTE_COLORS != 0 || steered() {
            return None;
        }
        member(ctx, macs, packet, args, decrement)
    }
}

/// The steering stage on this packet (`Some`: handled; `None`: the full program).
#[inline(always)]
pub fn steer(ctx: &XdpContext) -> Option<Result<u32, Malformed>> {
    again::<Steered>(ctx)
}
