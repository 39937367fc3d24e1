//! The fast path, the entry program's work: most packets are forwarded here, in one
//! short run of code. A packet qualifies when its TTL / hop limit allows forwarding, its
//! flow is not one an ARN steered (asked only when its route has steered copies) and
//! the member its group gives (the route's group, or its DPF color's; spray: the
//! cursor's slot, flow: the hash's, flowlet: the flowlet's) is in service; then it takes
//! exactly the member, rewrite and counters the full program would give it (the same
//! `route_group`, `first_choice`, `send_to` and parsers). The fast path writes the TTL /
//! hop limit and the MACs through the header pointers its parse checked (the full
//! program checks the bounds again before each write). Non-IP frames are counted and
//! passed here. A datagram the ARN receiver may take goes on in the ARN stage
//! (`fare_xdp_arn`); everything else (malformed frames, no route, TTL expiry, a steered
//! flow, a member out of service, an empty group) leaves before anything is changed,
//! and the full program (`fare_xdp_full`, `fare_xdp_full_v6`) starts again from the
//! frame (`stage`).
//!
//! Why stages rather than one program: in one body the verifier walked every rare
//! branch with every state of the common one (0.85M of its 1M instructions on Linux
//! 6.18 before the split), and the compiler keeps values of rare branches alive across
//! the common one. Here the only value carried on is the context.

use aya_ebpf::{bindings::xdp_action, maps::lpm_trie::Key, programs::XdpContext};
use fare_common::{RouteValue, Stat, ROUTE_COLORS, ROUTE_QUEUES, ROUTE_STEERED, STAGE_ARN};

use crate::choice::Choice;
use crate::classify::Classify;
use crate::eth::{self, L3};
use crate::forward::{first_choice, route_group, send_to};
use crate::ipv4::{self, V4At};
use crate::ipv6::{self, V6At};
use crate::maps::{ROUTES_V4, ROUTES_V6};
use crate::packet::Malformed;
use crate::stage;
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
    let steered = || steer::flow_is_steered::<false>(XdpContext::new(ctx.ctx), offset);
    routed(ctx, macs, &packet, route, ip.ttl, steered, || {
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
    let steered = || steer::flow_is_steered::<true>(XdpContext::new(ctx.ctx), offset);
    routed(ctx, macs, &packet, route, ip.hop_limit, steered, || {
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
    steered: impl FnOnce() -> bool,
    decrement: impl FnOnce(),
) -> Option<Result<u32, Malformed>> {
    // No route: the full program tells the node's own addresses (counted `local`) from
    // the rest (`no_route`); both go to the kernel, off the forwarding path.
    let route = route?;
    let (group, flags) = (route.group, route.flags);
    if ttl <= 1 {
        return None;
    }
    // A route with steered copies: most of its flows are not steered and go on here; a
    // steered one takes the full program (its copy, found by `route_group` there). The
    // question is a call of its own (`steer::flow_is_steered`): inlined, the verifier's
    // walk of the one-program fast path ran past its 1M instructions.
    if flags & ROUTE_STEERED != 0 && steered() {
        return None;
    }
    // DPF: the packet's color's group, as in the full program (in a fabric whose routes
    // all have colors that is every packet: bench/RESULTS.md, `xdp`, the DPF case).
    // Without `ROUTE_STEERED`: this flow is not steered (asked above), so its route's
    // group stands.
    let (gid, colored) = route_group(ctx, group, flags & ROUTE_COLORS, packet);
    // The member of the group's start slot (spray: the cursor; flow: the hash;
    // flowlet: the flow's flowlet), in service; anything else (a member out of service,
    // an empty group) goes on in the full program. Nothing is changed before that.
    let Choice::Member(next) = first_choice::<true, true, _>(gid, packet) else {
        return None;
    };
    // From here on the packet is ours (the spray cursor has moved past its slot).
    if colored {
        stats::count(Stat::DpfColored);
    }
    decrement();
    Some(Ok(send_to(ctx, macs, &next, flags & ROUTE_QUEUES != 0)))
}
