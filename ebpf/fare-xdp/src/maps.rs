//! Every map of the program, pinned by name so that a restarted agent finds them again
//! (the loader passes the pin directory). Types and sizes come from `fare_common`.

use aya_ebpf::{
    bindings::BPF_F_MMAPABLE,
    macros::map,
    maps::{lpm_trie::LpmTrie, Array, DevMapHash, HashMap, PerCpuArray, RingBuf},
};
use fare_common::{
    dir4, ArnConfigRow, ArnNeighborRow, ArnPathKey, ArnSender, ArnTargets, ColorSet, EgressQueue,
    FlowRule, FlowSteerKey, FlowSteerValue, Flowlet, GroupRow, Member, RouteValue, SteerGroupKey,
    ARN_STAT_COUNT, MAX_ARN_LOCAL, MAX_ARN_NEIGHBORS, MAX_ARN_PATHS, MAX_EGRESS, MAX_FLOWLETS,
    MAX_FLOW_RULES, MAX_FLOW_STEER, MAX_GROUPS, MAX_MEMBERS, MAX_ROUTES, MAX_STEER_MASKS,
    QUEUE_EVENTS_BYTES, STAT_COUNT, STEER_FILTER_WORDS,
};

#[map]
pub static ROUTES_V4: LpmTrie<[u8; 4], RouteValue> = LpmTrie::pinned(MAX_ROUTES, 0);

#[map]
pub static ROUTES_V6: LpmTrie<[u8; 16], RouteValue> = LpmTrie::pinned(MAX_ROUTES, 0);

/// The fast path's IPv4 route table (`fare_common::dir4`): first two bytes, then blocks.
/// Mappable: user space writes each entry with one atomic store (a map update copies
/// the value with memcpy, which is not promised to be one store).
#[map]
pub static DIR4_TOP: Array<u32> = Array::pinned(dir4::TOP_ENTRIES, BPF_F_MMAPABLE);

#[map]
pub static DIR4_BLOCKS: Array<u32> =
    Array::pinned(dir4::MAX_BLOCKS * dir4::BLOCK_ENTRIES, BPF_F_MMAPABLE);

/// Per CPU: the group, this CPU's spray cursor and member counters (`GroupRow`).
#[map]
pub static GROUP_ROWS: PerCpuArray<GroupRow> = PerCpuArray::pinned(MAX_GROUPS, 0);

#[map]
pub static MEMBERS: Array<Member> = Array::pinned(MAX_MEMBERS, 0);

#[map]
pub static STATS: PerCpuArray<u64> = PerCpuArray::pinned(STAT_COUNT, 0);

#[map]
pub static EGRESS: DevMapHash = DevMapHash::pinned(MAX_EGRESS, 0);

/// DPF: per-color groups of a route, indexed by the route's group id.
#[map]
pub static COLOR_SETS: Array<ColorSet> = Array::pinned(MAX_GROUPS, 0);

/// DPF: flow -> color rules, first match wins.
#[map]
pub static FLOW_RULES: Array<FlowRule> = Array::pinned(MAX_FLOW_RULES, 0);

/// ARN reception (see `arn`): settings, accepted senders, (sender, Path ID) -> members,
/// removal time per member (0 = not removed), counters.
#[map]
pub static ARN_CONFIG: Array<ArnConfigRow> = Array::pinned(1, 0);

#[map]
pub static ARN_NEIGHBORS: HashMap<ArnSender, ArnNeighborRow> =
    HashMap::pinned(MAX_ARN_NEIGHBORS, 0);

#[map]
pub static ARN_PATHS: HashMap<ArnPathKey, ArnTargets> = HashMap::pinned(MAX_ARN_PATHS, 0);

#[map]
pub static ARN_LOCAL: HashMap<ArnSender, u32> = HashMap::pinned(MAX_ARN_LOCAL, 0);

#[map]
pub static ARN_REMOVED: Array<u64> = Array::pinned(MAX_MEMBERS, 0);

#[map]
pub static ARN_STATS: PerCpuArray<u64> = PerCpuArray::pinned(ARN_STAT_COUNT, 0);

/// Egress virtual queues by ifindex, and their threshold crossings (see `queue`).
#[map]
pub static QUEUES: HashMap<u32, EgressQueue> = HashMap::pinned(MAX_EGRESS, 0);

#[map]
pub static QUEUE_EVENTS: RingBuf = RingBuf::pinned(QUEUE_EVENTS_BYTES, 0);

/// ARN per-flow mode (see `steer`): masked flow -> port to avoid; the Masks in use.
#[map]
pub static FLOW_STEER: HashMap<FlowSteerKey, FlowSteerValue> = HashMap::pinned(MAX_FLOW_STEER, 0);

#[map]
pub static STEER_MASKS: Array<u32> = Array::pinned(MAX_STEER_MASKS, 0);

#[map]
pub static STEER_GROUPS: HashMap<SteerGroupKey, u32> = HashMap::pinned(MAX_FLOW_STEER, 0);

/// ARN per-flow mode: which FLOW_STEER keys may exist (`fare_common::STEER_FILTER_WORDS`).
#[map]
pub static STEER_FILTER: Array<u32> = Array::pinned(STEER_FILTER_WORDS, 0);

#[map]
pub static GROUP_ACTIVE: Array<u32> = Array::pinned(MAX_GROUPS, 0);

/// Flowlet mode (see `flowlet`): flow hash -> the flow's member and last packet's time,
/// direct-mapped (`fare_common::MAX_FLOWLETS`).
#[map]
pub static FLOWLETS: Array<Flowlet> = Array::pinned(MAX_FLOWLETS, 0);
