//! Map keys and values shared by the XDP program (`fare-xdp`) and the control plane.
//! One definition of every map type, `#[repr(C)]`, used by both sides; the map names
//! and sizes live here too so that the loader and the program cannot disagree.
//!
//! Layout of the forwarding state (all maps pinned by name, see [`map_names`]):
//! ```text
//! ROUTES_V4 / ROUTES_V6  LPM trie   prefix -> RouteValue { group, flags }
//! GROUP_ROWS             per-CPU    group id -> GroupRow { Group { mode, slots[] of member
//!                                   index }, spray cursor, MemberCounters of each member }
//! MEMBERS                array      group id * MAX_MEMBERS_PER_GROUP + index -> Member
//! STATS                  per-CPU    Stat -> packets
//! EGRESS                 devmap     ifindex -> ifindex (XDP_REDIRECT targets)
//! COLOR_SETS             array      route group id -> ColorSet (DPF per-color groups)
//! FLOW_RULES             array      rule index -> FlowRule (DPF flow -> color)
//! FLOWLETS               LRU hash   flow hash -> Flowlet { member, last packet's time }
//! DIR4_TOP / DIR4_BLOCKS arrays     IPv4 destination bytes 16 + 8 + 8 -> route entry
//!                                   (the fast path's copy of ROUTES_V4, see [`dir4`])
//! ```
#![no_std]

/// What every eBPF object of the project (`fare-xdp`, `fare-bench-xdp`) needs once, at
/// the crate root: the panic handler of a `no_std` program (no path to it may remain,
/// the verifier sees to that) and the license the kernel reads, which must be
/// GPL-compatible for the GPL-only helpers.
#[macro_export]
macro_rules! ebpf_object {
    () => {
        #[cfg(not(test))]
        #[panic_handler]
        fn panic(_info: &core::panic::PanicInfo) -> ! {
            loop {}
        }

        #[unsafe(link_section = "license")]
        #[unsafe(no_mangle)]
        static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
    };
}

/// Group ids (slots of GROUPS). Replacement needs a free one besides every live group.
pub const MAX_GROUPS: u32 = 1024;
/// Members (distinct next hops) of one group.
pub const MAX_MEMBERS_PER_GROUP: u32 = 64;
/// Entries of MEMBERS.
pub const MAX_MEMBERS: u32 = MAX_GROUPS * MAX_MEMBERS_PER_GROUP;
/// Replicated-member slots of one group: the sum of the weights may not exceed it.
pub const MAX_SLOTS: usize = 256;
/// Prefixes per address family.
pub const MAX_ROUTES: u32 = 16384;
/// Egress interfaces (entries of the EGRESS devmap).
pub const MAX_EGRESS: u32 = 256;

/// Map names as they appear in the object and under the pin directory.
pub mod map_names {
    pub const ROUTES_V4: &str = "ROUTES_V4";
    pub const ROUTES_V6: &str = "ROUTES_V6";
    pub const GROUP_ROWS: &str = "GROUP_ROWS";
    pub const MEMBERS: &str = "MEMBERS";
    pub const STATS: &str = "STATS";
    pub const EGRESS: &str = "EGRESS";
    pub const COLOR_SETS: &str = "COLOR_SETS";
    pub const FLOW_RULES: &str = "FLOW_RULES";
    pub const FLOWLETS: &str = "FLOWLETS";
}

/// Name of the XDP program in the object: the entry, attached to the interfaces.
pub const PROGRAM_NAME: &str = "fare_xdp";

/// The XDP program's later stages (docs/xdp.md, "A pipeline of stages"): programs of the
/// same object that the entry program continues in by a tail call through the program
/// array `STAGES`, each verified on its own. `STAGE_PROGRAMS[i]` is the program the
/// loader puts at index `i`, before the entry program is attached.
pub const STAGES: &str = "STAGES";
/// Everything the entry does not: the whole program, from the frame again (IPv4, and
/// frames of neither family).
pub const STAGE_FULL: u32 = 0;
/// The whole program for IPv6 packets.
pub const STAGE_FULL_V6: u32 = 1;
/// ARN reception: a UDP datagram to the ARN port (with reception configured), taken by
/// the program's receiver or else forwarded by the full program.
pub const STAGE_ARN: u32 = 2;
/// Program names by stage index.
pub const STAGE_PROGRAMS: [&str; 3] = ["fare_xdp_full", "fare_xdp_full_v6", "fare_xdp_arn"];
/// TC egress program: per-packet spraying of the host's own traffic over its members.
pub const TC_SPRAY_NAME: &str = "fare_tc_spray";
/// skb mark bit the TC spray program sets on a packet it placed (so that the egress hook
/// of the interface it was redirected to lets it pass); docs/CODEPOINTS.md.
pub const SPRAYED_MARK: u32 = 0x0400_0000;

/// Names and types of the benchmark-only object (ebpf/fare-bench-xdp): the minimal
/// forwarder fare is measured against, the traffic generator and the counting sink.
/// Nothing here is loaded by the agent.
pub mod bench {
    /// The minimal forwarder: Ethernet + IPv4, one LPM lookup, MAC rewrite, redirect.
    pub const MIN_FWD_NAME: &str = "bench_min_fwd";
    /// Its route table: LPM trie, IPv4 destination -> `MinNextHop`.
    pub const MIN_FWD_ROUTES: &str = "MIN_ROUTES";
    /// Its redirect targets: devmap (hash) ifindex -> ifindex.
    pub const MIN_FWD_EGRESS: &str = "MIN_EGRESS";
    /// Entries of MIN_ROUTES.
    pub const MIN_FWD_MAX_ROUTES: u32 = 1024;
    /// The traffic generator (redirects to `GEN_TX[0]`).
    pub const GENERATOR_NAME: &str = "fare_gen";
    pub const GENERATOR_MAP: &str = "GEN_TX";
    pub const GENERATOR_TEMPLATE: &str = "GEN_TEMPLATE";
    /// The sink program (counts in `SINK_RX[0]` and drops).
    pub const SINK_NAME: &str = "fare_sink";
    pub const SINK_MAP: &str = "SINK_RX";
    /// Length of the generator's frames (its template is copied over each one).
    pub const GEN_FRAME_LEN: usize = 64;
    /// Templates the generator takes in turn (frame `i` of a CPU is template `i % 4`):
    /// four destinations, so that a forwarder with a route per egress spreads the frames
    /// over four ports as a spray group does.
    pub const GEN_TEMPLATES: u32 = 4;

    /// MIN_ROUTES value: where the minimal forwarder sends a packet.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct MinNextHop {
        pub ifindex: u32,
        pub src_mac: [u8; 6],
        pub dst_mac: [u8; 6],
    }
}

/// Value of ROUTES_V4/ROUTES_V6 (keys are `{prefix_len: u32, addr: [u8; 4|16]}` in
/// network byte order, the LPM trie key layout).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteValue {
    pub group: u32,
    /// `ROUTE_*` bits: the optional features the route's groups use. A packet pays for
    /// a feature's lookups only when its route has the bit (the route is read anyway).
    pub flags: u32,
}

/// The IPv4 route table of the fast path (`dir4`): the routes of ROUTES_V4 expanded into
/// arrays indexed by the destination's bytes, 16 + 8 + 8 bits (the DIR-24-8 idea with a
/// 64 Ki first level). DIR4_TOP[first two bytes] is an entry; a `BLOCK` entry names
/// a block of 256 entries in DIR4_BLOCKS (index `block * 256 + next byte`), at most two
/// deep. Each entry is one u32, written by user space in one atomic store through a
/// mapping of the array (`BPF_F_MMAPABLE`): a packet reads the old entry or the new one. The trie stays the authority (the full program
/// reads it); an entry 0 sends the fast path to the trie (no route in the table's range,
/// blocks exhausted, or a table not yet filled after an upgrade).
pub mod dir4 {
    use super::{RouteValue, MAX_GROUPS};

    pub const TOP: &str = "DIR4_TOP";
    pub const BLOCKS: &str = "DIR4_BLOCKS";
    /// Entries of DIR4_TOP: one per /16.
    pub const TOP_ENTRIES: u32 = 1 << 16;
    /// Entries of one block: one per value of the next byte.
    pub const BLOCK_ENTRIES: u32 = 256;
    /// Blocks of DIR4_BLOCKS (each /16 with longer routes takes one, each /24 with
    /// routes longer than /24 one more).
    pub const MAX_BLOCKS: u32 = 1024;
    /// Entry bit: the rest is a route, `group | flags << 16`.
    pub const ROUTE: u32 = 1 << 31;
    /// Entry bit: the rest is a block index (the next byte decides).
    pub const BLOCK: u32 = 1 << 30;
    const _: () = assert!(MAX_GROUPS <= 1 << 16 && MAX_BLOCKS <= 1 << 16);
    // Route flags live in bits 16..24 of an entry.
    const _: () = assert!(
        super::ROUTE_COLORS < 1 << 8
            && super::ROUTE_STEERED < 1 << 8
            && super::ROUTE_QUEUES < 1 << 8
    );

    /// The entry of a route: its group and its `ROUTE_*` flags (all below bit 8).
    pub const fn route_entry(route: RouteValue) -> u32 {
        ROUTE | (route.flags & 0xff) << 16 | (route.group & 0xffff)
    }

    /// The route of an entry with the `ROUTE` bit.
    #[inline(always)]
    pub const fn route_of(entry: u32) -> RouteValue {
        RouteValue {
            group: entry & 0xffff,
            flags: (entry >> 16) & 0xff,
        }
    }
}

/// `RouteValue::flags`: the route has per-color groups (COLOR_SETS row with entries):
/// its packets are classified by FLOW_RULES.
pub const ROUTE_COLORS: u32 = 1;
/// `RouteValue::flags`: steered copies of the route's group exist (STEER_GROUPS): its
/// packets look up STEER_MASKS / FLOW_STEER for a port their flow must avoid.
pub const ROUTE_STEERED: u32 = 2;
/// `RouteValue::flags`: a member of the route's groups leaves through a port with a
/// virtual queue (QUEUES): its frames are accounted there (the QUEUES lookup, bpf_ktime).
pub const ROUTE_QUEUES: u32 = 4;

/// Name of the XDP program's load-time flag (`.rodata`, u8): 1 when ARN reception is
/// configured; with 0 the receiver is dead code the verifier drops.
pub const ARN_RECEIVER_GLOBAL: &str = "FARE_ARN_RECEIVER";

/// `Group::mode`: per packet, a per-CPU cursor walks the slots.
pub const MODE_SPRAY: u8 = 0;
/// `Group::mode`: per flow, a 5-tuple hash picks the slot.
pub const MODE_FLOW: u8 = 1;
/// `Group::mode`: per flowlet: a flow keeps its member (FLOWLETS) while its packets are
/// less than `GroupRow::flowlet_gap_us` apart; after a longer pause a random slot of the
/// bucket table (a pick by weight) starts a new flowlet.
pub const MODE_FLOWLET: u8 = 2;

/// Entries of FLOWLETS (an array indexed by the flow hash's low 16 bits -> `Flowlet`,
/// tagged with the whole hash): a direct-mapped table of 64 Ki flows, where a flow
/// whose hash shares its entry with another's replaces it (that flow's next packet
/// starts a new flowlet). Memory: 64 Ki x 24 bytes = 1.5 MiB, preallocated at load. An
/// array read is a few instructions the verifier inlines; the LRU hash it replaced cost
/// a hash of the key, a bucket walk and the LRU's bookkeeping per packet.
pub const MAX_FLOWLETS: u32 = 65536;

/// Value of FLOWLETS: the member of a flow's current flowlet and when the flow's last
/// packet was seen. The member is named by its index and its next hop (egress ifindex,
/// neighbor MAC): a group replaced make-before-break (new id, new weights) keeps the
/// flowlet when the same next hop has the same index, anything else ends it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flowlet {
    /// bpf_ktime_get_ns of the flow's last packet.
    pub last_ns: u64,
    pub ifindex: u32,
    /// The flow's whole 32-bit hash (the entry's index is its low bits).
    pub hash: u32,
    pub dst_mac: [u8; 6],
    /// Member index within the group.
    pub index: u16,
}

/// A WCMP group: replicated members in spray order. Slot `i` holds the index (within the
/// group, < `n_members`) of the member that slot `i` sends to; a member of weight `w`
/// fills `w` slots.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    /// Number of used slots (the sum of the weights), 1..=MAX_SLOTS; 0 = unused.
    pub n_slots: u16,
    pub mode: u8,
    pub n_members: u8,
    /// Bumped by the loader at every write, for debugging and reconciliation.
    pub generation: u32,
    pub slots: [u8; MAX_SLOTS],
}

impl Default for Group {
    fn default() -> Self {
        Group {
            n_slots: 0,
            mode: MODE_SPRAY,
            n_members: 0,
            generation: 0,
            slots: [0; MAX_SLOTS],
        }
    }
}

/// Value of GROUP_ROWS, a per-CPU array indexed by group id: what a packet of the group
/// reads besides its member, in one lookup. Every CPU has its own copy of `group` (user
/// space writes the same one to all CPUs, once, before the group id is used: group ids
/// are written only while free, see make-before-break) and its own cursor and counters,
/// which only the program on that CPU changes. One per-CPU lookup thus gives the slots,
/// the spray cursor and the member counters (they were three maps: three lookups).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupRow {
    pub group: Group,
    /// Spray mode: the slot the next packet of this group on this CPU takes.
    pub cursor: u32,
    /// Flowlet mode: the idle gap after which a flow's next packet starts a new
    /// flowlet, in microseconds (0 in other modes; in flowlet mode every packet then
    /// starts one).
    pub flowlet_gap_us: u32,
    /// Per member index (< `group.n_members`): packets and bytes forwarded on this CPU.
    pub counters: [MemberCounters; MAX_MEMBERS_PER_GROUP as usize],
}

// No padding the compiler would add (aya::Pod): 264 + 8 + 64 * 16 bytes.
const _: () = assert!(core::mem::size_of::<GroupRow>() == 264 + 8 + 1024);

impl Default for GroupRow {
    fn default() -> Self {
        GroupRow {
            group: Group::default(),
            cursor: 0,
            flowlet_gap_us: 0,
            counters: [MemberCounters::default(); MAX_MEMBERS_PER_GROUP as usize],
        }
    }
}

/// `Member::state` bit: taken out of service by the control plane (`set_member_active`).
pub const MEMBER_ADMIN_DOWN: u32 = 1;
/// `Member::state` bit: removed by an Adaptive Routing Notification (set by the XDP
/// program on ARN reception, or by user space); cleared by the control plane.
pub const MEMBER_REMOVED_BY_ARN: u32 = 2;

/// One next hop of a group: where to send and how to rewrite the Ethernet header.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Member {
    /// Egress interface (must be in EGRESS).
    pub ifindex: u32,
    /// 0 = in service; otherwise a set of `MEMBER_*` bits saying why it is not.
    pub state: u32,
    /// MAC of the egress interface (new source MAC).
    pub src_mac: [u8; 6],
    /// MAC of the neighbor (new destination MAC).
    pub dst_mac: [u8; 6],
}

impl Member {
    pub const fn active(&self) -> bool {
        self.state == 0
    }
}

/// Index of a member in MEMBERS (and ARN_REMOVED).
pub const fn member_id(group: u32, index: u32) -> u32 {
    group * MAX_MEMBERS_PER_GROUP + index
}

/// Per-CPU packet and byte counters of one member.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberCounters {
    pub packets: u64,
    pub bytes: u64,
}

/// Indices of the STATS per-CPU array: what happened to each packet. Every packet the
/// program sees ends in exactly one of the `Stat::OUTCOMES`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    /// Every packet the program saw: the sum of the outcomes, computed by user space (the
    /// program does not count it, so a packet updates one STATS counter, not two).
    Received = 0,
    /// Redirected to a member.
    Forwarded = 1,
    /// Not IPv4/IPv6, or not unicast to us: passed to the kernel.
    NotIp = 2,
    /// No route for the destination, and not one of this node's addresses: passed to
    /// the kernel.
    NoRoute = 3,
    /// TTL / hop limit 0 or 1: passed to the kernel (it answers ICMP time exceeded).
    TtlExceeded = 4,
    /// Truncated or malformed Ethernet/VLAN/IP header: dropped.
    Malformed = 5,
    /// The route's group has no active member (or is being torn down): passed.
    NoMember = 6,
    /// bpf_redirect_map refused (egress not in EGRESS): dropped.
    RedirectFailed = 7,
    /// An ARN datagram for this node, handled by the program's receiver and passed to
    /// the kernel (the agent sees it too).
    ArnPassed = 8,
    /// No route, and to one of this node's own addresses (ARN_LOCAL: its BGP sessions,
    /// management): passed to the kernel, where it is delivered.
    Local = 9,
    /// DPF: forwarded by the group of the color a flow rule gave the packet.
    DpfColored = 12,
    /// Dropped: the egress port's virtual queue was full (see `EgressQueue`).
    QueueDropped = 13,
    /// An ARN (Type 1/3) in the program would have taken out a group's last active
    /// member: kept (the agent refuses the same).
    ArnKeptLast = 14,
}

/// Entries of STATS (room for later counters, e.g. ARN reception).
pub const STAT_COUNT: u32 = 16;

impl Stat {
    /// The outcomes: each packet counts in exactly one; `Received` is their sum.
    pub const OUTCOMES: [Stat; 10] = [
        Stat::Forwarded,
        Stat::NotIp,
        Stat::NoRoute,
        Stat::Local,
        Stat::TtlExceeded,
        Stat::Malformed,
        Stat::NoMember,
        Stat::RedirectFailed,
        Stat::QueueDropped,
        Stat::ArnPassed,
    ];

    pub const ALL: [Stat; 13] = [
        Stat::Received,
        Stat::Forwarded,
        Stat::NotIp,
        Stat::NoRoute,
        Stat::Local,
        Stat::TtlExceeded,
        Stat::Malformed,
        Stat::NoMember,
        Stat::RedirectFailed,
        Stat::ArnPassed,
        Stat::DpfColored,
        Stat::QueueDropped,
        Stat::ArnKeptLast,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Stat::Received => "received",
            Stat::Forwarded => "forwarded",
            Stat::NotIp => "not_ip",
            Stat::NoRoute => "no_route",
            Stat::Local => "local",
            Stat::TtlExceeded => "ttl_exceeded",
            Stat::Malformed => "malformed",
            Stat::NoMember => "no_member",
            Stat::RedirectFailed => "redirect_failed",
            Stat::ArnPassed => "arn_passed",
            Stat::DpfColored => "dpf_colored",
            Stat::QueueDropped => "queue_dropped",
            Stat::ArnKeptLast => "arn_kept_last",
        }
    }
}

pub use dpf::*;

/// Deterministic Path Forwarding (draft-wang-idr-dpf §2.2.3): flows map to colors by
/// rules, and a route's per-color groups carry the flows of each color.
mod dpf {
    /// Entries of FLOW_RULES (first match wins; the list ends at the first unused rule).
    pub const MAX_FLOW_RULES: u32 = 16;
    /// Per-color groups of one route.
    pub const MAX_COLORS_PER_ROUTE: usize = 8;
    /// UDP destination port of RoCEv2; its Base Transport Header follows the UDP header.
    pub const ROCEV2_UDP_PORT: u16 = 4791;

    /// `FlowRule::matches` bits: which fields the rule tests (all set ones must match).
    pub const MATCH_DSCP: u32 = 1;
    pub const MATCH_PROTOCOL: u32 = 2;
    pub const MATCH_SRC: u32 = 4;
    pub const MATCH_DST: u32 = 8;
    pub const MATCH_SRC_PORT: u32 = 16;
    pub const MATCH_DST_PORT: u32 = 32;
    /// RoCEv2 destination QP (BTH): only UDP to port 4791 can match.
    pub const MATCH_QP: u32 = 64;
    /// Every bit above.
    pub const MATCH_DPF_ALL: u32 = 127;

    /// One classification rule. Addresses are four 32-bit words as they lie in the
    /// packet (an IPv4 address is word 0, the rest 0); `src`/`dst` are pre-masked.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct FlowRule {
        /// The color the packet gets; 0 = unused rule (end of the list).
        pub color: u32,
        pub matches: u32,
        /// Bit d set: DSCP value d matches.
        pub dscp: u64,
        pub src: [u32; 4],
        pub src_mask: [u32; 4],
        pub dst: [u32; 4],
        pub dst_mask: [u32; 4],
        pub src_port_lo: u16,
        pub src_port_hi: u16,
        pub dst_port_lo: u16,
        pub dst_port_hi: u16,
        pub qp_lo: u32,
        pub qp_hi: u32,
        pub protocol: u8,
        /// 4 or 6 when the rule has addresses (the packet's family must match), else 0.
        pub family: u8,
        pub _pad: [u8; 6],
    }

    /// `ColorEntry::flags`: the color's paths are in the route's active (best) set;
    /// clear = a backup color (kept for display; the program skips it: BGP moves the
    /// route's own group onto the backups when the primary fails).
    pub const COLOR_ACTIVE: u32 = 1;

    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ColorEntry {
        pub color: u32,
        /// Group id (GROUPS) holding this color's members.
        pub group: u32,
        pub flags: u32,
    }

    /// COLOR_SETS[route group id]: the per-color groups of that route (`n` = 0: none).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ColorSet {
        pub n: u32,
        pub entries: [ColorEntry; MAX_COLORS_PER_ROUTE],
    }
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain #[repr(C)] structs of integers and byte arrays, no padding holes
    // that could leak uninitialised memory into the kernel (all fields are written).
    unsafe impl aya::Pod for super::RouteValue {}
    unsafe impl aya::Pod for super::Group {}
    unsafe impl aya::Pod for super::GroupRow {}
    unsafe impl aya::Pod for super::Member {}
    unsafe impl aya::Pod for super::Flowlet {}
    unsafe impl aya::Pod for super::MemberCounters {}
    unsafe impl aya::Pod for super::FlowRule {}
    unsafe impl aya::Pod for super::ColorEntry {}
    unsafe impl aya::Pod for super::ColorSet {}
    unsafe impl aya::Pod for super::ArnConfigRow {}
    unsafe impl aya::Pod for super::ArnSender {}
    unsafe impl aya::Pod for super::ArnNeighborRow {}
    unsafe impl aya::Pod for super::EgressQueue {}
    unsafe impl aya::Pod for super::QueueEvent {}
    unsafe impl aya::Pod for super::FlowSteerKey {}
    unsafe impl aya::Pod for super::FlowSteerValue {}
    unsafe impl aya::Pod for super::SteerGroupKey {}
    unsafe impl aya::Pod for super::ArnPathKey {}
    unsafe impl aya::Pod for super::ArnTargets {}
    unsafe impl aya::Pod for super::bench::MinNextHop {}
}

pub use arn::*;

/// ARN reception inside the XDP program: accepted senders, (sender, Path ID) -> member
/// slots, the time each member was removed, counters. User space fills the first two from
/// `arn.neighbors`/BGP neighbors and `arn.paths` (same semantics as its own receiver).
mod arn {
    /// Entries of ARN_NEIGHBORS.
    pub const MAX_ARN_NEIGHBORS: u32 = 256;
    /// Entries of ARN_PATHS.
    pub const MAX_ARN_PATHS: u32 = 4096;
    /// Entries of ARN_LOCAL: the node's own addresses.
    pub const MAX_ARN_LOCAL: u32 = 256;
    /// Member slots one (sender, Path ID) designates (more are left to user space).
    pub const MAX_ARN_TARGETS: usize = 32;

    pub const ARN_CONFIG: &str = "ARN_CONFIG";
    pub const ARN_NEIGHBORS: &str = "ARN_NEIGHBORS";
    pub const ARN_PATHS: &str = "ARN_PATHS";
    /// The node's own addresses (key: ArnSender layout, value unused): an ARN datagram
    /// to any other unicast address is transit traffic, forwarded like any packet; a
    /// packet without a route to one of them counts as `Stat::Local`, not `NoRoute`.
    pub const ARN_LOCAL: &str = "ARN_LOCAL";
    pub const ARN_REMOVED: &str = "ARN_REMOVED";
    pub const ARN_STATS: &str = "ARN_STATS";
    /// GROUP_ACTIVE[group id]: members in service (state 0). User space sets it when it
    /// writes a group or a member's state; the program's ARN receiver keeps it current
    /// and never takes out the last one.
    pub const GROUP_ACTIVE: &str = "GROUP_ACTIVE";

    /// ARN_CONFIG[0]. `enabled` 0 = the program ignores ARNs (passes them to the kernel);
    /// else bit 0 on, and bit 1 ([`ARN_CONGESTION_SHIFT`]) leaves Types 1/2 to the agent.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ArnConfigRow {
        pub enabled: u32,
        pub udp_port: u32,
        /// A removal ends by itself this long after the last Type 1/3 (arn.hold_ms).
        pub hold_ns: u64,
        /// Token bucket per sender: one token per `refill_ns`, at most `burst`.
        pub refill_ns: u64,
        pub burst: u64,
    }

    /// `ArnConfigRow::enabled` bit: congestion shifts the member's share (`arn.congestion`
    /// mode shift), which the agent computes and writes as a re-weighted group; the
    /// program acts on Types 3/4 (failure) only and passes Types 1/2 on untouched.
    pub const ARN_CONGESTION_SHIFT: u32 = 2;

    /// A sender address as the packet carries it: IPv4 in word 0 (family 4), IPv6 in all
    /// four words (family 6), words in packet byte order.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct ArnSender {
        pub family: u32,
        pub addr: [u32; 4],
    }

    /// ARN_NEIGHBORS value: the interface the sender must arrive on, its token bucket.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ArnNeighborRow {
        pub ifindex: u32,
        pub _pad: u32,
        /// Bucket state (written by the program): tokens scaled by `refill_ns`, last update.
        pub credit_ns: u64,
        pub last_ns: u64,
    }

    /// ARN_PATHS key. `path_id` 0 = the list used for Path ID 0, absent, or not listed.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct ArnPathKey {
        pub sender: ArnSender,
        pub path_id: u32,
    }

    /// ARN_PATHS value: the MEMBERS indexes to remove/restore.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ArnTargets {
        pub n: u32,
        pub ids: [u32; MAX_ARN_TARGETS],
    }

    impl Default for ArnTargets {
        fn default() -> Self {
            ArnTargets {
                n: 0,
                ids: [0; MAX_ARN_TARGETS],
            }
        }
    }

    /// ARN_STATS indexes (per-CPU counters of the in-program receiver).
    #[repr(u32)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum ArnStat {
        /// Valid ARN from an accepted neighbor, acted on.
        Accepted = 0,
        /// To the ARN port, from an accepted neighbor, but not a valid ARN.
        Malformed = 1,
        /// To the ARN port but not from an accepted neighbor on its interface with TTL 255.
        Spoofed = 2,
        RateLimited = 3,
        /// Members switched off / back on by the program.
        Removed = 4,
        Restored = 5,
        /// Valid but left to user space (flow identifier) or no member slots listed.
        Deferred = 6,
        /// Removals the hold time ended (no Type 2/4, no refresh).
        Expired = 7,
    }

    pub const ARN_STAT_COUNT: u32 = 8;

    impl ArnStat {
        pub const ALL: [ArnStat; 8] = [
            ArnStat::Accepted,
            ArnStat::Malformed,
            ArnStat::Spoofed,
            ArnStat::RateLimited,
            ArnStat::Removed,
            ArnStat::Restored,
            ArnStat::Deferred,
            ArnStat::Expired,
        ];

        pub const fn name(self) -> &'static str {
            match self {
                ArnStat::Accepted => "accepted",
                ArnStat::Malformed => "malformed",
                ArnStat::Spoofed => "spoofed",
                ArnStat::RateLimited => "rate_limited",
                ArnStat::Removed => "removed",
                ArnStat::Restored => "restored",
                ArnStat::Deferred => "deferred",
                ArnStat::Expired => "expired",
            }
        }
    }
}

pub use queue::*;

/// Egress virtual queues: frames the program redirects skip the egress qdisc, so no
/// backlog builds where a shaper (tbf) or a slower link would queue them. For each egress
/// port with a configured rate the program keeps the backlog such a queue would have
/// (bytes in, drained at the rate), drops a frame that would overflow `limit_bytes` (tail
/// drop, like the shaper it stands for) and, when the backlog crosses `high_bytes` upward,
/// stamps the time and writes a `QueueEvent` to QUEUE_EVENTS (the ARN monitor wakes on
/// it). The crossing re-arms once the backlog is back at or below `low_bytes`.
mod queue {
    /// QUEUES key: the egress ifindex.
    pub const QUEUES: &str = "QUEUES";
    /// Ring buffer of `QueueEvent`s.
    pub const QUEUE_EVENTS: &str = "QUEUE_EVENTS";
    /// QUEUE_EVENTS size in bytes (a power of two multiple of the page size).
    pub const QUEUE_EVENTS_BYTES: u32 = 64 * 1024;

    /// `EgressQueue::flags`: the backlog crossed `high_bytes` and has not been back at or
    /// below `low_bytes` since.
    pub const QUEUE_ABOVE_HIGH: u32 = 1;

    /// One egress port's virtual queue. User space writes the first four fields (and zero
    /// state); the program updates the rest for every frame it sends there. CPUs update it
    /// without locks: a race loses one frame's bytes at most (an estimate, not a meter).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct EgressQueue {
        /// Drain rate; 0 = no queue kept for this port.
        pub rate_bytes_per_s: u64,
        /// Tail-drop limit (0 = never drop).
        pub limit_bytes: u32,
        /// Upward crossing -> event (0 = no events).
        pub high_bytes: u32,
        pub low_bytes: u32,
        pub flags: u32,
        /// Backlog after the last frame, and when (bpf_ktime, CLOCK_MONOTONIC ns).
        pub backlog: u64,
        pub last_ns: u64,
        /// Time of the last upward crossing of `high_bytes`.
        pub crossed_ns: u64,
        pub crossings: u64,
        /// Frames and bytes admitted, frames dropped (over the limit).
        pub packets: u64,
        pub bytes: u64,
        pub drops: u64,
        /// Sum over admitted frames of the queueing delay they would have seen (ns).
        pub delay_ns: u64,
    }

    /// QUEUE_EVENTS record: `ifindex`'s backlog crossed its high mark at `t_ns`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct QueueEvent {
        pub ifindex: u32,
        pub _pad: u32,
        pub backlog: u64,
        pub t_ns: u64,
    }

    impl EgressQueue {
        /// The backlog `now_ns` if nothing arrived since the last frame.
        pub const fn backlog_at(&self, now_ns: u64) -> u64 {
            // In µs, bounded to 1 s (which drains any real queue), so that the product
            // cannot overflow below 18 TB/s.
            let us = now_ns.saturating_sub(self.last_ns) / 1000;
            let us = if us > 1_000_000 { 1_000_000 } else { us };
            let drained = us * self.rate_bytes_per_s / 1_000_000;
            self.backlog.saturating_sub(drained)
        }
    }
}

pub use steer::*;

/// ARN per-flow mode: an ARN with a flow identifier moves only the matching flows. User
/// space (the agent's receiver) writes one FLOW_STEER entry per flow identifier: the
/// identifier's fields under its Mask (unmasked fields zero) -> the egress port those
/// flows must avoid. The program builds each packet's key with the one Mask in use
/// (STEER_MASKS[0], 0 = none); on a hit it forwards by the
/// group's steered copy, STEER_GROUPS[(group, port)]: the same members, those through the
/// port marked removed (so the copy is never empty: like an ARN removal, the last one
/// carries on). Swapping the group id keeps the verifier's work as without steering.
mod steer {
    pub const FLOW_STEER: &str = "FLOW_STEER";
    pub const STEER_MASKS: &str = "STEER_MASKS";
    pub const STEER_GROUPS: &str = "STEER_GROUPS";
    pub const STEER_FILTER: &str = "STEER_FILTER";

    /// Words (u32) of STEER_FILTER: 64 Ki bits, 8 KiB. A bit per value of
    /// [`steer_filter_bit`]: set when some FLOW_STEER key has that value. A packet of a
    /// route with steered copies looks its flow up in FLOW_STEER (a 48-byte key hashed
    /// and compared) only when its key's bit is set; with a few steered flows almost
    /// every other flow's bit is clear (a false positive costs the lookup, never a
    /// wrong answer: the map decides).
    pub const STEER_FILTER_WORDS: u32 = 2048;

    /// The STEER_FILTER bit of a FLOW_STEER key (< 32 x STEER_FILTER_WORDS): a
    /// multiplicative hash of its six 64-bit words, computed alike by the program and
    /// the agent.
    #[inline(always)]
    pub fn steer_filter_bit(k: &FlowSteerKey) -> u32 {
        const K1: u64 = 0x9e37_79b9_7f4a_7c15;
        const K2: u64 = 0xbf58_476d_1ce4_e5b9;
        let w = |a: u32, b: u32| (a as u64) << 32 | b as u64;
        let mut h = w(k.mask, k.family).wrapping_mul(K1);
        h = (h ^ w(k.protocol, k.ports)).wrapping_mul(K2);
        h = (h ^ w(k.src[0], k.src[1])).wrapping_mul(K1);
        h = (h ^ w(k.src[2], k.src[3])).wrapping_mul(K2);
        h = (h ^ w(k.dst[0], k.dst[1])).wrapping_mul(K1);
        h = (h ^ w(k.dst[2], k.dst[3])).wrapping_mul(K2);
        (h >> 48) as u32
    }

    /// STEER_GROUPS key: a group and the port its steered copy avoids.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct SteerGroupKey {
        pub group: u32,
        pub ifindex: u32,
    }
    /// Entries of FLOW_STEER.
    pub const MAX_FLOW_STEER: u32 = 4096;
    /// Masks in use at once: one (a second lookup per packet exceeded the verifier's
    /// budget); the agent refuses a flow identifier with another Mask meanwhile.
    pub const MAX_STEER_MASKS: u32 = 1;

    /// ARN Mask bits (draft-wh-rtgwg-adaptive-routing-arn flow identifier).
    pub const STEER_PROTOCOL: u32 = 0x10;
    pub const STEER_SRC: u32 = 0x08;
    pub const STEER_DST: u32 = 0x04;
    pub const STEER_SRC_PORT: u32 = 0x02;
    pub const STEER_DST_PORT: u32 = 0x01;

    /// FLOW_STEER key: fields not in `mask` are zero. Addresses as four words in packet
    /// order (IPv4: word 0); ports = source << 16 | destination.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct FlowSteerKey {
        pub mask: u32,
        pub family: u32,
        pub protocol: u32,
        pub ports: u32,
        pub src: [u32; 4],
        pub dst: [u32; 4],
    }

    /// FLOW_STEER value: the port to avoid, and since when (CLOCK_MONOTONIC ns, for
    /// whoever dumps the map). The agent's receiver removes the entry on Type 2/4 or
    /// after its hold time; the program does not expire it.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct FlowSteerValue {
        pub ifindex: u32,
        pub _pad: u32,
        pub since_ns: u64,
    }
}

/// ARN wire constants (draft-wh-rtgwg-adaptive-routing-arn §3; docs/CODEPOINTS.md): the
/// one source for the agent's codec and the XDP program. `p4/include/constants.p4`
/// repeats them for the P4 compiler; a test in the control crate checks it agrees.
pub mod arn_wire {
    /// Default UDP port of ARN datagrams (the draft leaves it open).
    pub const DEFAULT_UDP_PORT: u16 = 9961;
    /// Version octet of the ARN header.
    pub const VERSION: u8 = 0;
    /// Type octet: congestion detected / eliminated, failure detected / eliminated.
    pub const TYPE_CONGESTION_DETECTED: u8 = 1;
    pub const TYPE_CONGESTION_ELIMINATED: u8 = 2;
    pub const TYPE_FAILURE_DETECTED: u8 = 3;
    pub const TYPE_FAILURE_ELIMINATED: u8 = 4;
    /// Para-Type bit 0: flow identifier present.
    pub const PARA_FLOW: u8 = 0x80;
    /// Para-Type bit 1: Path ID present.
    pub const PARA_PATH_ID: u8 = 0x40;
    /// TTL / hop limit ARN datagrams are sent with and must arrive with (GTSM-like).
    pub const TTL: u8 = 255;
}
