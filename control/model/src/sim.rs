//! Offline fabric-wide propagation (no root, no daemons): what every node's WCMP group for
//! every prefix is once BGP has converged, in draft or averaged mode.
//!
//! ```no_run
//! # use fare_model::{sim, topology};
//! let topo = topology::load("topologies/whitepaper-asymmetric.yaml".as_ref()).unwrap();
//! let solution = sim::solve(&topo, &sim::Options::default());
//! for g in solution.route_groups() {
//!     println!("{} {} {:?}", g.node, g.prefix, g.members);
//! }
//! ```
//!
//! Model: eBGP along the links, each leaf its own AS and the spines of a stage sharing
//! one, which makes every best path valley-free (up the stages, then down) and the
//! equal-cost routes of a node those from neighbors one hop closer on such a path.
//! Stubs (RNICs, hosts) originate and receive but never re-advertise. A route whose AS
//! path would hold the receiver's AS is not taken (`aspath`): nodes sharing an AS never
//! reach each other through the fabric.
//!
//! Cost: prefixes with the same set of originating nodes share one propagation (next-hop
//! group sharing, as switch ASICs do); stubs with identical links share one computation;
//! identical groups are stored once. Work grows with origin sets x switches and with
//! distinct groups, not with nodes x prefixes.

mod aspath;
pub mod explain;
#[cfg(test)]
mod frr_tests;
pub mod incremental;
#[cfg(test)]
mod incremental_tests;
#[cfg(test)]
mod parallel_tests;
#[cfg(test)]
mod propagation_tests;

use crate::bandwidth::{self, DraftOptions, Encoding, Mode, Received, Rule, Spread};
use crate::parallel::{self, ParallelLinks};
use crate::topology::{LinkId, NodeId, Role, Topology};
use crate::{link_bandwidth, wcmp};
use ipnet::IpNet;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// What to compute.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub mode: Mode,
    /// Sum of weights per group at most this (ASIC table limit).
    pub max_group_size: Option<u32>,
    pub draft: DraftOptions,
    /// Per node or per session where a node reaches a neighbor over parallel links
    /// ([`crate::parallel`]).
    pub parallel: ParallelLinks,
    /// The wire encoding of the Path Bandwidth value: every advertised value is rounded
    /// through it, hop by hop, as the speakers do, and ratios are reduced with its
    /// tolerance.
    pub encoding: Encoding,
    /// Worker threads; 0 = one per core.
    pub threads: usize,
    /// Compute every stub on its own instead of once per class of identical stubs: the
    /// baseline `fare bench sim` compares against. Same results, more work.
    pub no_stub_sharing: bool,
}

/// A failure or degradation applied before computing, as BGP would see it converged.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Every link between the two nodes is down.
    Fail(String, String),
    /// Every link between the two nodes runs at this many Gbps.
    Degrade(String, String, f64),
}

impl Change {
    pub fn apply(&self, topo: &mut Topology) -> Result<usize, crate::topology::ChangeError> {
        match self {
            Change::Fail(a, b) => topo.fail(a, b),
            Change::Degrade(a, b, g) => topo.degrade(a, b, *g),
        }
    }
}

/// One member of a (node, prefix) group: the `fare weights --json` contract.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Member {
    /// The neighbor the route came from.
    pub via: String,
    /// The link it came over (parallel links are separate members).
    pub link: String,
    pub bandwidth_gbps: f64,
    pub weight: u32,
}

/// The group of one node for one prefix.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteGroup {
    pub node: String,
    pub prefix: IpNet,
    pub members: Vec<Member>,
    /// Oversubscription of the integer weights against the bandwidths (1.0 = exact).
    #[serde(skip)]
    pub delta: f64,
    /// Plain ECMP because some route lacked the Path Bandwidth community.
    #[serde(skip)]
    pub ecmp: bool,
    /// An FRR node's group: weights from the Link Bandwidth community, FRR's way
    /// ([`crate::link_bandwidth`]); bandwidths are the values as FRR keeps them.
    #[serde(skip)]
    pub frr: bool,
}

/// A distinct group, stored once however many (node, origin set) pairs share it.
/// Members name the neighbor and which of the parallel links to it (0-based), so stubs
/// with identical links can share a group although their links have different names.
#[derive(Clone, Debug)]
pub struct SharedGroup {
    pub members: Vec<(NodeId, u32, f64)>,
    pub ecmp: bool,
    pub frr: bool,
    pub weights: wcmp::Weights,
}

/// Prefixes originated by exactly the same nodes.
#[derive(Clone, Debug)]
pub struct OriginSet {
    pub origins: Vec<NodeId>,
    pub prefixes: Vec<IpNet>,
}

const NONE: u32 = u32::MAX;

/// Every group of the fabric, compressed: per origin set and computation unit (a switch,
/// or a class of identical stubs) the id of a shared group.
pub struct Solution<'t> {
    topo: &'t Topology,
    adjacency: Vec<Vec<(NodeId, LinkId)>>,
    pub origin_sets: Vec<OriginSet>,
    /// node -> computation unit.
    unit_of: Vec<u32>,
    units: usize,
    /// origin set * units + unit -> group id or NONE.
    table: Vec<u32>,
    pub groups: Vec<SharedGroup>,
}

/// Computes every node's group for every prefix of `topo`.
pub fn solve<'t>(topo: &'t Topology, options: &Options) -> Solution<'t> {
    solve_only(topo, options, &|_| true)
}

/// Like [`solve`], but propagates only the origin sets `wanted` accepts (by index in
/// `Solution::origin_sets`); the others have no groups. `fare analyze` recomputes only
/// the destinations a failure touches.
pub fn solve_only<'t>(
    topo: &'t Topology,
    options: &Options,
    wanted: &(dyn Fn(usize) -> bool + Sync),
) -> Solution<'t> {
    solve_inner(topo, options, wanted, false).0
}

/// [`solve`], keeping every switch's state per origin set: what
/// [`incremental::Engine`] re-propagates a failure from.
pub fn solve_kept<'t>(
    topo: &'t Topology,
    options: &Options,
) -> (Solution<'t>, incremental::Snapshot) {
    let (solution, kept) = solve_inner(topo, options, &|_| true, true);
    let snapshot = incremental::Snapshot::new(&solution, kept);
    (solution, snapshot)
}

fn solve_inner<'t>(
    topo: &'t Topology,
    options: &Options,
    wanted: &(dyn Fn(usize) -> bool + Sync),
    keep: bool,
) -> (Solution<'t>, incremental::Kept) {
    let adjacency = topo.adjacency();
    let origin_sets = origin_sets(topo);
    let shared = aspath::SharedAs::new(topo);
    let (unit_of, units, stub_classes) = units(topo, &adjacency, &shared, !options.no_stub_sharing);
    let ctx = Context::new(
        topo,
        &adjacency,
        options,
        &unit_of,
        &stub_classes,
        units,
        shared,
    );
    let stub_classes = if keep {
        stub_classes.clone()
    } else {
        Vec::new()
    };

    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, origin_sets.len().max(1));
    let chunk = origin_sets.len().div_ceil(threads).max(1);
    let switches: Vec<NodeId> = (0..topo.nodes.len()).filter(|&n| !ctx.stub[n]).collect();
    let parts: Vec<(Vec<u32>, Interner, incremental::Kept)> = std::thread::scope(|s| {
        let handles: Vec<_> = origin_sets
            .chunks(chunk)
            .enumerate()
            .map(|(c, sets)| {
                let (ctx, switches) = (&ctx, &switches);
                s.spawn(move || {
                    let mut worker = Worker::new(ctx);
                    let mut table = Vec::with_capacity(sets.len() * units);
                    let mut kept = incremental::Kept::default();
                    for (i, set) in sets.iter().enumerate() {
                        if wanted(c * chunk + i) {
                            worker.propagate(&set.origins, &mut table);
                        } else {
                            table.resize(table.len() + units, NONE);
                        }
                        if keep {
                            worker.keep(switches, &mut kept);
                        }
                    }
                    (table, worker.interner, kept)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(part) => part,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });

    // Merge the workers' interners into one list of distinct groups.
    let mut global = Interner::default();
    let mut table = Vec::with_capacity(origin_sets.len() * units);
    let mut kept = incremental::Kept::new(switches, stub_classes);
    for (part, interner, part_kept) in parts {
        kept.append(part_kept);
        let remap: Vec<u32> = interner
            .groups
            .into_iter()
            .map(|(key, flags)| global.intern(key, flags))
            .collect();
        table.extend(
            part.into_iter()
                .map(|g| if g == NONE { NONE } else { remap[g as usize] }),
        );
    }
    let groups = global
        .groups
        .into_iter()
        .map(|(members, flags)| shared_group(members, flags, options))
        .collect();
    let solution = Solution {
        topo,
        adjacency,
        origin_sets,
        unit_of,
        units,
        table,
        groups,
    };
    (solution, kept)
}

impl<'t> Solution<'t> {
    /// Number of distinct groups (shared across nodes and prefixes).
    pub fn distinct_groups(&self) -> usize {
        self.groups.len()
    }

    /// Number of (node, origin set) pairs that have a group.
    pub fn node_group_count(&self) -> usize {
        let mut n = 0;
        for (s, set) in self.origin_sets.iter().enumerate() {
            for node in 0..self.topo.nodes.len() {
                if self.shared(s, node).is_some() && !set.origins.contains(&node) {
                    n += 1;
                }
            }
        }
        n
    }

    /// The topology this solution was computed for.
    pub fn topology(&self) -> &'t Topology {
        self.topo
    }

    /// The computation unit of `node`: nodes of one unit have the same links and groups.
    pub fn unit(&self, node: NodeId) -> u32 {
        self.unit_of[node]
    }

    /// The id (index in `groups`) of `node`'s group for origin set `set`, if it has one.
    pub fn group_id(&self, set: usize, node: NodeId) -> Option<u32> {
        let g = self.table[set * self.units + self.unit_of[node] as usize];
        (g != NONE).then_some(g)
    }

    /// The group id of computation unit `unit` for origin set `set`, if it has one.
    pub fn unit_group(&self, set: usize, unit: u32) -> Option<u32> {
        let g = self.table[set * self.units + unit as usize];
        (g != NONE).then_some(g)
    }

    fn shared(&self, set: usize, node: NodeId) -> Option<&SharedGroup> {
        let g = self.table[set * self.units + self.unit_of[node] as usize];
        (g != NONE).then(|| &self.groups[g as usize])
    }

    fn view(&self, node: NodeId, prefix: IpNet, g: &SharedGroup) -> RouteGroup {
        let members = g
            .members
            .iter()
            .zip(&g.weights.weights)
            .map(|(&(via, nth, bw), &weight)| {
                let link = self.link_to(node, via, nth);
                Member {
                    via: self.topo.nodes[via].name.clone(),
                    link: link.map_or_else(String::new, |l| self.topo.links[l].name.clone()),
                    bandwidth_gbps: bw,
                    weight,
                }
            })
            .collect();
        RouteGroup {
            node: self.topo.nodes[node].name.clone(),
            prefix,
            members,
            delta: g.weights.delta,
            ecmp: g.ecmp,
            frr: g.frr,
        }
    }

    /// The `nth` link (0-based) from `node` to `via`.
    pub fn link_to(&self, node: NodeId, via: NodeId, nth: u32) -> Option<LinkId> {
        let adj = &self.adjacency[node];
        let start = adj.partition_point(|&(n, _)| n < via);
        adj.get(start + nth as usize)
            .filter(|(n, _)| *n == via)
            .map(|&(_, l)| l)
    }

    /// The group of `node` (by name) for `prefix`, if it has one.
    pub fn group(&self, node: &str, prefix: IpNet) -> Option<RouteGroup> {
        let id = self.topo.node_id(node)?;
        let s = self
            .origin_sets
            .iter()
            .position(|set| set.prefixes.contains(&prefix))?;
        if self.origin_sets[s].origins.contains(&id) {
            return None;
        }
        self.shared(s, id).map(|g| self.view(id, prefix, g))
    }

    /// Every (node, prefix) group: nodes in file order, prefixes in order of appearance.
    pub fn route_groups(&self) -> Vec<RouteGroup> {
        let mut out = Vec::new();
        let mut prefixes: Vec<(usize, IpNet)> = self
            .origin_sets
            .iter()
            .enumerate()
            .flat_map(|(s, set)| set.prefixes.iter().map(move |&p| (s, p)))
            .collect();
        prefixes.sort_by_key(|&(s, p)| (self.prefix_rank(s, p), s));
        for node in 0..self.topo.nodes.len() {
            for &(s, prefix) in &prefixes {
                if self.origin_sets[s].origins.contains(&node) {
                    continue;
                }
                if let Some(g) = self.shared(s, node) {
                    out.push(self.view(node, prefix, g));
                }
            }
        }
        out
    }

    /// Position of a prefix in the file: node order of its first origin, then list order.
    fn prefix_rank(&self, s: usize, p: IpNet) -> (usize, usize) {
        let set = &self.origin_sets[s];
        let first = set.origins[0];
        let pos = self.topo.nodes[first]
            .prefixes
            .iter()
            .position(|&x| x == p)
            .unwrap_or(0);
        (first, pos)
    }
}

/// An interned group (members, flags) with its weights.
fn shared_group(members: GroupKey, flags: u32, options: &Options) -> SharedGroup {
    let (ecmp, frr) = (flags & ECMP != 0, flags & FRR != 0);
    let bandwidths: Vec<f64> = if ecmp {
        vec![1.0; members.len()]
    } else {
        members.iter().map(|m| f64::from_bits(m.2)).collect()
    };
    let weights = if frr && !ecmp {
        frr_group_weights(&bandwidths)
    } else {
        group_weights(&bandwidths, options, options.max_group_size)
    };
    SharedGroup {
        weights,
        members: members
            .into_iter()
            .map(|(n, k, b)| (n as NodeId, k, f64::from_bits(b)))
            .collect(),
        ecmp,
        frr,
    }
}

/// A group's integer weights from its members' bandwidths (1 each under ECMP), reduced
/// within the encoding's tolerance and to `limit` (the data plane's group size).
fn group_weights(bandwidths: &[f64], options: &Options, limit: Option<u32>) -> wcmp::Weights {
    wcmp::weights_within(bandwidths, limit, options.encoding.ratio_tolerance())
}

/// An FRR group's weights from its members' Link Bandwidth values (Gbps as FRR keeps
/// them: whole bytes/s), and their oversubscription against those values.
fn frr_group_weights(bandwidths: &[f64]) -> wcmp::Weights {
    let bytes: Vec<Option<u32>> = bandwidths
        .iter()
        .map(|b| Some((b * link_bandwidth::BYTES_PER_GBPS).round() as u32))
        .collect();
    let weights = link_bandwidth::frr_weights(&bytes).unwrap_or_else(|| vec![1; bytes.len()]);
    let delta = wcmp::delta(bandwidths, &weights);
    wcmp::Weights { weights, delta }
}

/// Prefixes grouped by the set of nodes that originate them, in order of appearance.
fn origin_sets(topo: &Topology) -> Vec<OriginSet> {
    let mut origins: Vec<(IpNet, Vec<NodeId>)> = Vec::new();
    let mut index: FxHashMap<IpNet, usize> = FxHashMap::default();
    for (id, n) in topo.nodes.iter().enumerate() {
        for &p in &n.prefixes {
            let i = *index.entry(p).or_insert_with(|| {
                origins.push((p, Vec::new()));
                origins.len() - 1
            });
            if !origins[i].1.contains(&id) {
                origins[i].1.push(id);
            }
        }
    }
    let mut sets: Vec<OriginSet> = Vec::new();
    let mut by_origins: FxHashMap<Vec<NodeId>, usize> = FxHashMap::default();
    for (p, o) in origins {
        let i = *by_origins.entry(o.clone()).or_insert_with(|| {
            sets.push(OriginSet {
                origins: o,
                prefixes: Vec::new(),
            });
            sets.len() - 1
        });
        sets[i].prefixes.push(p);
    }
    sets
}

/// Computation units: one per non-stub node, one per class of stubs with identical links
/// (same neighbors, same capacities in the same order). Returns (node -> unit, unit
/// count, per stub class: a representative node).
fn units(
    topo: &Topology,
    adj: &[Vec<(NodeId, LinkId)>],
    shared: &aspath::SharedAs,
    share: bool,
) -> (Vec<u32>, usize, Vec<NodeId>) {
    let mut unit_of = vec![0u32; topo.nodes.len()];
    let mut units = 0u32;
    let mut classes: FxHashMap<Vec<(NodeId, u64)>, u32> = FxHashMap::default();
    let mut representatives = Vec::new();
    for (id, n) in topo.nodes.iter().enumerate() {
        if n.role.is_stub() {
            let mut signature: Vec<(NodeId, u64)> = adj[id]
                .iter()
                .map(|&(m, l)| (m, topo.links[l].gbps.to_bits()))
                .collect();
            if !share {
                // A signature no other stub has: its own class.
                signature.push((id, u64::MAX));
            }
            if let Some(a) = shared.of(id) {
                // Stubs of a shared AS refuse routes through that AS: a class of their own.
                signature.push((usize::MAX, u64::from(a)));
            }
            unit_of[id] = *classes.entry(signature).or_insert_with(|| {
                representatives.push(id);
                units += 1;
                units - 1
            });
        } else {
            unit_of[id] = units;
            units += 1;
        }
    }
    // Stub classes keep their unit; record which units are stub classes.
    let mut stub_units = vec![usize::MAX; units as usize];
    for &rep in &representatives {
        stub_units[unit_of[rep] as usize] = rep;
    }
    (unit_of, units as usize, stub_units)
}

struct Context<'a> {
    options: &'a Options,
    /// Full adjacency (neighbor, link), ordered by neighbor then link.
    adj: &'a [Vec<(NodeId, LinkId)>],
    /// Per non-stub node, its links to non-stub neighbors only, in the same order: the
    /// hot loops never walk the (many) stub links, and u32s keep them dense in cache.
    core: Vec<Vec<(u32, u32)>>,
    stage: Vec<u8>,
    stub: Vec<bool>,
    /// Nodes run by FRR (`target: frr`): Link Bandwidth UCMP, Path Bandwidth passed on.
    frr: Vec<bool>,
    /// BGP identifiers (as the lab configures them): FRR's best-path tie-break.
    router_id: Vec<u32>,
    roles: Vec<Role>,
    /// Link capacities by link id.
    gbps: Vec<f64>,
    /// Per non-stub node, the part of `core` toward lower stages: all a node walks when it
    /// learned the route from above (valley-free).
    down: Vec<Vec<(u32, u32)>>,
    /// Links per node, and links to lower stages (stubs included): averaged mode's N.
    total_links: Vec<u32>,
    down_links: Vec<u32>,
    unit_of: &'a [u32],
    /// unit -> representative stub, or usize::MAX for a switch unit.
    stub_classes: &'a [NodeId],
    units: usize,
    /// Nodes whose AS another node shares (AS-path loops).
    shared: aspath::SharedAs,
}

impl<'a> Context<'a> {
    fn new(
        topo: &Topology,
        adj: &'a [Vec<(NodeId, LinkId)>],
        options: &'a Options,
        unit_of: &'a [u32],
        stub_classes: &'a [NodeId],
        units: usize,
        shared: aspath::SharedAs,
    ) -> Self {
        let stub: Vec<bool> = topo.nodes.iter().map(|n| n.role.is_stub()).collect();
        let core: Vec<Vec<(u32, u32)>> = adj
            .iter()
            .enumerate()
            .map(|(n, list)| {
                if stub[n] {
                    return Vec::new();
                }
                list.iter()
                    .filter(|&&(m, _)| !stub[m])
                    .map(|&(m, l)| (m as u32, l as u32))
                    .collect()
            })
            .collect();
        let stage: Vec<u8> = topo.nodes.iter().map(|n| n.role.stage()).collect();
        let down: Vec<Vec<(u32, u32)>> = core
            .iter()
            .enumerate()
            .map(|(n, list): (usize, &Vec<(u32, u32)>)| {
                list.iter()
                    .filter(|&&(m, _)| stage[m as usize] < stage[n])
                    .copied()
                    .collect()
            })
            .collect();
        let down_links = adj
            .iter()
            .enumerate()
            .map(|(n, list)| list.iter().filter(|&&(m, _)| stage[m] < stage[n]).count() as u32)
            .collect();
        Context {
            options,
            adj,
            core,
            down,
            total_links: adj.iter().map(|l| l.len() as u32).collect(),
            down_links,
            stage,
            roles: topo.nodes.iter().map(|n| n.role).collect(),
            stub,
            frr: topo.nodes.iter().map(|n| !n.target.is_fare()).collect(),
            router_id: (topo.nodes.iter().enumerate())
                .map(|(i, n)| u32::from(crate::bgp_ids::router_id(n.router_id, i)))
                .collect(),
            gbps: topo.links.iter().map(|l| l.gbps).collect(),
            unit_of,
            stub_classes,
            units,
            shared,
        }
    }
}

/// A group as (neighbor, parallel index, bandwidth bits) per member.
type Entry = (u32, u32, u64);
type GroupKey = Vec<Entry>;

/// Distinct groups, each stored once. The flags (ECMP, FRR) ride as a trailing sentinel
/// entry so lookups can borrow a scratch slice without allocating.
#[derive(Default)]
struct Interner {
    ids: FxHashMap<Vec<Entry>, u32>,
    groups: Vec<(GroupKey, u32)>,
}

const ECMP_SENTINEL: u32 = u32::MAX;
/// Group flags: plain ECMP; an FRR node's group.
const ECMP: u32 = 1;
const FRR: u32 = 2;

impl Interner {
    /// `key` ends with the sentinel entry (ECMP_SENTINEL, flags, 0).
    fn intern_slice(&mut self, key: &[Entry]) -> u32 {
        if let Some(&id) = self.ids.get(key) {
            return id;
        }
        let id = self.groups.len() as u32;
        let (members, flag) = key.split_at(key.len() - 1);
        self.groups.push((members.to_vec(), flag[0].1));
        self.ids.insert(key.to_vec(), id);
        id
    }

    fn intern(&mut self, mut key: GroupKey, flags: u32) -> u32 {
        key.push((ECMP_SENTINEL, flags, 0));
        self.intern_slice(&key)
    }
}

const UP: u8 = 1;
const ORIGIN: u8 = 2;

/// `None` is stored as NaN in the per-node value arrays.
fn opt(x: f64) -> Option<f64> {
    (!x.is_nan()).then_some(x)
}

/// A member as (neighbor, link): 8 bytes, because a level's member lists are the
/// largest data the propagation touches.
type M = (u32, u32);

/// Adds the parallel-link index (0-based, among links to the same neighbor) to an
/// adjacency list ordered by neighbor.
fn with_nth(
    list: impl Iterator<Item = (NodeId, LinkId)>,
) -> impl Iterator<Item = (NodeId, LinkId, u32)> {
    let mut prev = usize::MAX;
    let mut nth = 0u32;
    list.map(move |(m, l)| {
        if m == prev {
            nth += 1;
        } else {
            prev = m;
            nth = 0;
        }
        (m, l, nth)
    })
}

/// One propagation at a time; its per-node state lives in flat arrays reused across
/// origin sets (only the touched entries are reset).
struct Worker<'a> {
    ctx: &'a Context<'a>,
    dist: Vec<u32>,
    /// UP: some best route came from a lower stage (or the node originates), so it may
    /// advertise upward; otherwise only downward (valley-free). ORIGIN: originates.
    flags: Vec<u8>,
    /// What the node advertises: draft, the transitive value; averaged, PathBWsum / N
    /// (each outgoing link then takes the min with itself).
    path: Vec<f64>,
    /// Draft: the non-transitive value a super-spine attaches.
    link_value: Vec<f64>,
    /// FRR nodes: the Link Bandwidth they send (`cumulative`), Gbps.
    lb: Vec<f64>,
    touched: Vec<NodeId>,
    /// Per switch, the members collected while its level is reached.
    members_of: Vec<Vec<M>>,
    /// Per switch, its group id and (averaged mode) its PathBWsum before dividing by N.
    group_of: Vec<u32>,
    path_sum: Vec<f64>,
    scratch: Vec<M>,
    interner: Interner,
    routes: Vec<Received>,
    /// Per route of `routes`, the neighbor it came from (parallel links share one).
    route_nodes: Vec<u64>,
    key: GroupKey,
    /// Per node, the shared ASes on its best paths.
    as_bits: aspath::Bits,
    /// Per node, how its group and advertisement came about (`explain` only; twins are
    /// then computed on their own so every node has its record).
    trace: Option<Vec<Option<explain::NodeTrace>>>,
    /// Links down (`incremental`: a failure applied without rebuilding the fabric; empty
    /// otherwise), and per node the links it lost: (all, to lower stages).
    down: Vec<bool>,
    lost: FxHashMap<NodeId, (u32, u32)>,
}

impl<'a> Worker<'a> {
    fn new(ctx: &'a Context<'a>) -> Self {
        let n = ctx.stage.len();
        Worker {
            ctx,
            dist: vec![u32::MAX; n],
            flags: vec![0; n],
            path: vec![f64::NAN; n],
            link_value: vec![f64::NAN; n],
            lb: vec![f64::NAN; n],
            touched: Vec::new(),
            members_of: vec![Vec::new(); n],
            group_of: vec![NONE; n],
            path_sum: vec![f64::NAN; n],
            scratch: Vec::new(),
            interner: Interner::default(),
            routes: Vec::new(),
            route_nodes: Vec::new(),
            key: Vec::new(),
            as_bits: aspath::Bits::new(&ctx.shared, n),
            trace: None,
            down: Vec::new(),
            lost: FxHashMap::default(),
        }
    }

    /// Whether `m` advertises its route to a stub: stubs sit below everything, so any
    /// reached switch does, and an originating stub does.
    #[inline]
    fn advertises_to_stub(&self, m: NodeId, stub: NodeId) -> bool {
        self.dist[m] != u32::MAX
            && (self.flags[m] & ORIGIN != 0 || !self.ctx.stub[m])
            && !self.as_bits.holds(m, self.ctx.shared.of(stub))
    }

    /// One origin set: BFS by levels over the switches, then the stub classes; appends
    /// one group id per unit to `table`.
    ///
    /// Each level's members are collected while the level is reached: a frontier node
    /// walks its links once (only the downward ones when it may not advertise up), and
    /// frontiers are kept in node order so every member list comes out in adjacency order.
    fn propagate(&mut self, origins: &[NodeId], table: &mut Vec<u32>) {
        let ctx = self.ctx;
        for n in self.touched.drain(..) {
            self.dist[n] = u32::MAX;
            self.flags[n] = 0;
            self.path[n] = f64::NAN;
            self.link_value[n] = f64::NAN;
            self.lb[n] = f64::NAN;
            self.members_of[n].clear();
            self.as_bits.clear(n);
        }
        let base = table.len();
        table.resize(base + ctx.units, NONE);
        let mode = ctx.options.mode;
        let mut frontier: Vec<NodeId> = origins.to_vec();
        frontier.sort_unstable();
        for &o in &frontier {
            self.dist[o] = 0;
            self.flags[o] = UP | ORIGIN;
            self.path[o] = bandwidth::ORIGIN_MAX_GBPS;
            self.as_bits.join(o, ctx.shared.of(o), std::iter::empty());
            self.touched.push(o);
        }
        let mut next: Vec<NodeId> = Vec::new();
        let mut dist = 0;
        while !frontier.is_empty() {
            for &m in &frontier {
                let fm = self.flags[m];
                if ctx.stub[m] {
                    // An originating stub: every switch neighbor hears it.
                    for &(n, l) in &ctx.adj[m] {
                        if !ctx.stub[n] {
                            self.offer(m, n, l, dist + 1, &mut next);
                        }
                    }
                } else {
                    let list = if fm & UP != 0 {
                        &ctx.core[m]
                    } else {
                        &ctx.down[m]
                    };
                    for &(n, l) in list {
                        self.offer(m, n as NodeId, l as LinkId, dist + 1, &mut next);
                    }
                }
            }
            next.sort_unstable();
            // Nodes of one level with the same role and the same members over links of
            // the same capacities get the same group and advertisement (all leaves of a
            // plane, say): compute it once per level and copy.
            let mut same: FxHashMap<u64, NodeId> = FxHashMap::default();
            for &n in &next {
                let members = std::mem::take(&mut self.members_of[n]);
                self.as_bits.join(
                    n,
                    ctx.shared.of(n),
                    members.iter().map(|&(m, _)| m as NodeId),
                );
                let signature = self.signature(n, &members);
                let twin = same
                    .get(&signature)
                    .copied()
                    .filter(|&t| self.trace.is_none() && self.same_inputs(t, n, &members));
                let group = match twin {
                    Some(t) => self.copy_twin(n, t),
                    None => {
                        same.entry(signature).or_insert(n);
                        let g = self.group(n, &members);
                        self.path_sum[n] = self.path[n];
                        g
                    }
                };
                self.group_of[n] = group;
                if mode == Mode::Averaged && !ctx.frr[n] {
                    self.path[n] = self.averaged_value(n, &members);
                    self.trace_averaged(n, &members);
                }
                self.members_of[n] = members;
                table[base + ctx.unit_of[n] as usize] = group;
            }
            dist += 1;
            std::mem::swap(&mut frontier, &mut next);
            next.clear();
        }
        // Stub classes: a representative's group stands for the whole class.
        for (unit, &rep) in ctx.stub_classes.iter().enumerate() {
            if rep == usize::MAX {
                continue;
            }
            let best = ctx.adj[rep]
                .iter()
                .filter(|&&(m, _)| self.advertises_to_stub(m, rep))
                .map(|&(m, _)| self.dist[m])
                .min();
            if let Some(d) = best {
                let mut members = std::mem::take(&mut self.scratch);
                members.clear();
                members.extend(
                    ctx.adj[rep]
                        .iter()
                        .filter(|&&(m, _)| self.dist[m] == d && self.advertises_to_stub(m, rep))
                        .map(|&(m, l)| (m as u32, l as u32)),
                );
                table[base + unit] = self.group(rep, &members);
                self.scratch = members;
            }
        }
    }

    /// A hash of what `n`'s group depends on: its stage and, per member, the neighbor,
    /// the parallel index and the link capacity.
    /// (Parallel indexes follow from the neighbor sequence: all links to a member are.)
    fn signature(&self, n: NodeId, members: &[M]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        self.ctx.roles[n].hash(&mut h);
        self.ctx.frr[n].hash(&mut h);
        for &(m, l) in members {
            (m, self.ctx.gbps[l as usize].to_bits()).hash(&mut h);
        }
        h.finish()
    }

    /// Node `n` takes twin `t`'s group and advertisement (same role, same members at the
    /// same level): its up flag, values (before averaged mode's division) and group.
    fn copy_twin(&mut self, n: NodeId, t: NodeId) -> u32 {
        self.flags[n] |= self.flags[t] & UP;
        self.path[n] = self.path_sum[t];
        self.path_sum[n] = self.path_sum[t];
        self.link_value[n] = self.link_value[t];
        self.lb[n] = self.lb[t];
        self.group_of[t]
    }

    /// Whether twin `t` (already computed) had exactly `n`'s inputs.
    fn same_inputs(&self, t: NodeId, n: NodeId, members: &[M]) -> bool {
        let ctx = self.ctx;
        let theirs = &self.members_of[t];
        ctx.roles[t] == ctx.roles[n]
            && ctx.frr[t] == ctx.frr[n]
            && theirs.len() == members.len()
            && theirs.iter().zip(members).all(|(&(m1, l1), &(m2, l2))| {
                m1 == m2 && ctx.gbps[l1 as usize].to_bits() == ctx.gbps[l2 as usize].to_bits()
            })
    }

    /// Frontier node `m` advertises to switch `n` over link `l`: `n` joins the next level
    /// (at distance `d`) unless it is already closer, and `m` becomes one of its members.
    #[inline]
    fn offer(&mut self, m: NodeId, n: NodeId, l: LinkId, d: u32, next: &mut Vec<NodeId>) {
        if self.ctx.shared.any() && self.as_bits.holds(m, self.ctx.shared.of(n)) {
            // An AS-path loop: `n` does not take the route (RFC 4271 §9.1.2).
            return;
        }
        let dn = self.dist[n];
        if dn == u32::MAX {
            if self.flags[n] & ORIGIN != 0 {
                return;
            }
            self.dist[n] = d;
            self.touched.push(n);
            next.push(n);
        } else if dn != d {
            return;
        }
        self.members_of[n].push((m as u32, l as u32));
    }

    /// Node `n`'s group over `members` (neighbor, link), in adjacency order: applies the
    /// bandwidth rules, records the node's own advertisement and `up` flag (switches),
    /// and interns the group.
    fn group(&mut self, n: NodeId, members: &[M]) -> u32 {
        let ctx = self.ctx;
        if ctx.frr[n] {
            return self.frr_group(n, members);
        }
        let mode = ctx.options.mode;
        let wire = ctx.options.encoding;
        self.routes.clear();
        self.route_nodes.clear();
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        let mut from_below = false;
        let mut from_above = false;
        let members = with_nth(members.iter().map(|&(m, l)| (m as NodeId, l as LinkId)));
        for (m, l, nth) in members {
            let link = ctx.gbps[l];
            if ctx.stage[m] < ctx.stage[n] {
                from_below = true;
            } else {
                from_above = true;
            }
            // What the route carries: in averaged mode the sender's PathBWsum / N, min'ed
            // with this link, through the wire encoding (draft mode stores values already
            // rounded, see below).
            let path = match mode {
                Mode::Averaged => opt(self.path[m]).map(|v| wire.quantize(v.min(link)).min(link)),
                Mode::Draft => opt(self.path[m]),
            };
            // From an FRR neighbor (lab: `link_bandwidth: both`), the Link Bandwidth it
            // sends stands in where it passed on no Path Bandwidth.
            let path = link_bandwidth::path_value(path, opt(self.lb[m]), ctx.frr[m]);
            if let Some(trace) = &mut self.trace {
                explain::record_route(trace, n, (m, l), opt(self.path[m]), mode, link);
            }
            self.routes.push(Received {
                link_gbps: link,
                path_gbps: path,
                link_value_gbps: self.link_value_from(m, link),
            });
            self.route_nodes.push(m as u64);
            key.push((m as u32, nth, 0));
        }
        if self.routes.is_empty() {
            self.key = key;
            return NONE;
        }
        let rule = Rule::for_node(ctx.roles[n], from_above && !from_below);
        let setting = ctx.options.parallel;
        let nodes = &self.route_nodes;
        // The per-member record only for `explain`; the spread is the same either way.
        let shares = self
            .trace
            .as_ref()
            .and_then(|_| parallel::shares(setting, mode, rule, &self.routes, nodes));
        let spread = match &shares {
            Some(s) => Spread::Weighted(s.iter().map(|s| s.gbps).collect()),
            None => parallel::spread(setting, mode, rule, &self.routes, nodes),
        };
        let mut advertised = bandwidth::Advertised::default();
        for (i, k) in key.iter_mut().enumerate() {
            k.2 = spread.bandwidth(i, &self.routes).to_bits();
        }
        if !ctx.stub[n] {
            if from_below {
                self.flags[n] |= UP;
            }
            match mode {
                Mode::Draft => {
                    let adv =
                        bandwidth::draft_advertise(rule, &self.routes, &spread, &ctx.options.draft);
                    let sent = |v: Option<f64>| v.map_or(f64::NAN, |v| wire.quantize(v));
                    self.path[n] = sent(adv.path_gbps);
                    self.link_value[n] = sent(adv.link_value_gbps);
                    advertised = adv;
                }
                // PathBWsum for now; averaged_value divides by N once all of this level
                // know their `up` flag.
                Mode::Averaged => {
                    self.path[n] = match &spread {
                        Spread::Weighted(b) => bandwidth::sum(b.iter().copied()),
                        Spread::Equal => f64::NAN,
                    };
                }
            }
        }
        if let Some(trace) = &mut self.trace {
            let shares = shares.as_deref();
            explain::record_group(trace, n, rule, &self.routes, &spread, shares, advertised);
        }
        let ecmp = spread == Spread::Equal;
        key.push((ECMP_SENTINEL, if ecmp { ECMP } else { 0 }, 0));
        let id = self.interner.intern_slice(&key);
        self.key = key;
        id
    }

    /// The non-transitive value on a route from `m` over a link of `link` Gbps: what a
    /// super-spine computed, or, when `m` originates the route, what the speakers attach
    /// to what they originate, through the wire encoding.
    fn link_value_from(&self, m: NodeId, link: f64) -> Option<f64> {
        let ctx = self.ctx;
        if self.flags[m] & ORIGIN != 0 {
            let value = ctx.options.draft.originated_link_value(ctx.roles[m], link);
            value.map(|v| ctx.options.encoding.quantize(v))
        } else {
            opt(self.link_value[m])
        }
    }

    /// FRR node `n`'s group (`link_bandwidth`): per member the Link Bandwidth its
    /// neighbor sends as FRR keeps it, UCMP when all have one, else ECMP. It passes on the
    /// Path Bandwidth value of its best path as received and sends the cumulative Link
    /// Bandwidth. Best path: with `bgp bestpath compare-routerid` (the lab sets it) FRR
    /// breaks the tie between equal eBGP paths by the lowest neighbor router id, then the
    /// lowest neighbor address (the lab numbers a neighbor's links in link order).
    fn frr_group(&mut self, n: NodeId, members: &[M]) -> u32 {
        let ctx = self.ctx;
        let wire = ctx.options.encoding;
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        self.routes.clear();
        let mut bytes = Vec::with_capacity(members.len());
        let mut passed = f64::NAN;
        let mut best = (u32::MAX, u32::MAX);
        let members = with_nth(members.iter().map(|&(m, l)| (m as NodeId, l as LinkId)));
        for (m, l, nth) in members {
            let link = ctx.gbps[l];
            if ctx.stage[m] < ctx.stage[n] {
                self.flags[n] |= UP;
            }
            let path = match ctx.options.mode {
                Mode::Averaged => opt(self.path[m]).map(|v| wire.quantize(v.min(link)).min(link)),
                Mode::Draft => opt(self.path[m]),
            };
            if (ctx.router_id[m], l as u32) < best {
                best = (ctx.router_id[m], l as u32);
                passed = path.unwrap_or(f64::NAN);
            }
            // What the neighbor attaches: FRR its cumulative value; fare the Path
            // Bandwidth it sends capped by the link, when finite.
            let sent = if ctx.frr[m] {
                opt(self.lb[m])
            } else {
                path.map(|v| v.min(link)).filter(|v| v.is_finite())
            };
            bytes.push(sent.map(link_bandwidth::frr_read));
            if let Some(trace) = &mut self.trace {
                let mode = ctx.options.mode;
                explain::record_route(trace, n, (m, l), opt(self.path[m]), mode, link);
            }
            self.routes.push(Received {
                link_gbps: link,
                path_gbps: sent.map(|_| 0.0),
                link_value_gbps: None,
            });
            key.push((m as u32, nth, 0));
        }
        if key.is_empty() {
            self.key = key;
            return NONE;
        }
        let ucmp = link_bandwidth::frr_weights(&bytes).is_some();
        for (i, k) in key.iter_mut().enumerate() {
            let kept = bytes[i].map_or(0.0, f64::from) / link_bandwidth::BYTES_PER_GBPS;
            self.routes[i].path_gbps = bytes[i].map(|_| kept);
            k.2 = if ucmp { kept } else { self.routes[i].link_gbps }.to_bits();
        }
        self.path[n] = passed;
        self.lb[n] = link_bandwidth::frr_cumulative(&bytes).unwrap_or(f64::NAN);
        if let Some(trace) = &mut self.trace {
            let spread = if ucmp {
                Spread::Weighted(self.routes.iter().filter_map(|r| r.path_gbps).collect())
            } else {
                Spread::Equal
            };
            let advertised = bandwidth::Advertised {
                path_gbps: opt(passed),
                link_value_gbps: None,
            };
            let (rule, routes) = (Rule::Normal, &self.routes);
            explain::record_group(trace, n, rule, routes, &spread, None, advertised);
        }
        let flags = FRR | if ucmp { 0 } else { ECMP };
        key.push((ECMP_SENTINEL, flags, 0));
        let id = self.interner.intern_slice(&key);
        self.key = key;
        id
    }

    /// Links `n` would advertise on but does not: to a neighbor whose AS is on `n`'s path
    /// (the speaker's sender-side loop check), not counting links already left out
    /// (incoming ones, those to originators, upward ones once learned from above).
    fn loop_links(&self, n: NodeId, members: &[M]) -> u32 {
        let ctx = self.ctx;
        if !ctx.shared.any() {
            return 0;
        }
        let up = self.flags[n] & UP != 0;
        ctx.adj[n]
            .iter()
            .filter(|&&(w, l)| {
                self.live(l)
                    && (up || ctx.stage[w] < ctx.stage[n])
                    && self.flags[w] & ORIGIN == 0
                    && !members.iter().any(|&(_, ml)| ml as LinkId == l)
                    && self.as_bits.holds(n, ctx.shared.of(w))
            })
            .count() as u32
    }

    /// Whether link `l` is up (always, outside `incremental`).
    #[inline]
    fn live(&self, l: LinkId) -> bool {
        self.down.is_empty() || !self.down[l]
    }

    /// Averaged mode: PathBWsum / N, N = links the node advertises the route on: all but
    /// the incoming ones and those to originators; only the downward ones when it learned
    /// the route from above.
    fn averaged_value(&self, n: NodeId, members: &[M]) -> f64 {
        let sum = self.path[n];
        if sum.is_nan() {
            return sum;
        }
        // min with the outgoing link happens per link at the receiver (`group`).
        bandwidth::averaged_advertise(sum, self.outgoing(n, members), f64::INFINITY)
    }

    /// Averaged mode's N for node `n` (at least 1). Every live link to an originator
    /// is incoming: the two ends are in different ASes (the loader refuses a link inside
    /// one), so nothing keeps an originator's route from its neighbors.
    fn outgoing(&self, n: NodeId, members: &[M]) -> usize {
        let ctx = self.ctx;
        let (lost, lost_down) = self.lost.get(&n).copied().unwrap_or((0, 0));
        let outgoing = if self.flags[n] & UP != 0 {
            ctx.total_links[n] - lost - members.len() as u32
        } else {
            // Learned from above: every member is above, so no downward link is incoming
            // (an originator below would have been a member).
            ctx.down_links[n] - lost_down
        };
        let outgoing = outgoing.saturating_sub(self.loop_links(n, members));
        outgoing.max(1) as usize
    }

    /// Averaged mode, `explain` only: records N and the value before the wire.
    fn trace_averaged(&mut self, n: NodeId, members: &[M]) {
        // Called for switches only (stubs are never on a level), whose PathBWsum in
        // averaged mode is always a number: origins send their line rate, links are
        // finite and positive, so no route lacks the value.
        if self.trace.is_none() {
            return;
        }
        let outgoing = self.outgoing(n, members);
        let (sum, value) = (self.path_sum[n], self.path[n]);
        if let Some(Some(t)) = self.trace.as_mut().map(|t| &mut t[n]) {
            t.averaged = Some((sum, outgoing, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{gen, parse};
    use std::path::Path;

    fn topo(text: &str) -> Topology {
        parse(Path::new("t.yaml"), text).unwrap()
    }

    /// The white paper's asymmetric example (§2.2.1): Leaf 1 reaches Spine 1 over L1 (50G)
    /// and L3 (100G), Spine 2 over L2 and L4 (100G); Leaf 2 hangs off Spine 1 by L5, L6
    /// and off Spine 2 by L7, L8 (100G each).
    const ASYMMETRIC: &str = "
nodes:
  - {name: Leaf1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: Leaf2, role: leaf, asn: 65002}
  - {name: Spine1, role: spine, asn: 65100}
  - {name: Spine2, role: spine, asn: 65100}
links:
  - {a: Leaf1, b: Spine1, gbps: 50, name: L1}
  - {a: Leaf1, b: Spine2, gbps: 100, name: L2}
  - {a: Leaf1, b: Spine1, gbps: 100, name: L3}
  - {a: Leaf1, b: Spine2, gbps: 100, name: L4}
  - {a: Spine1, b: Leaf2, gbps: 100, name: L5}
  - {a: Spine1, b: Leaf2, gbps: 100, name: L6}
  - {a: Spine2, b: Leaf2, gbps: 100, name: L7}
  - {a: Spine2, b: Leaf2, gbps: 100, name: L8}
";

    fn summary(g: &RouteGroup) -> Vec<(String, f64, u32)> {
        g.members
            .iter()
            .map(|m| (m.link.clone(), m.bandwidth_gbps, m.weight))
            .collect()
    }

    /// Three leaves under two spines (Leaf2's link to Spine2 at 40G), two identical hosts
    /// under Leaf3, and an island (a leaf and a spine of their own) nothing else reaches.
    const ISLANDS: &str = "
nodes:
  - {name: Leaf1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: Leaf2, role: leaf, asn: 65002, prefixes: [198.51.100.0/24]}
  - {name: Leaf3, role: leaf, asn: 65003, prefixes: [203.0.113.0/24]}
  - {name: Spine1, role: spine, asn: 65100}
  - {name: Spine2, role: spine, asn: 65100}
  - {name: H1, role: host, asn: 65201}
  - {name: H2, role: host, asn: 65202}
  - {name: Leaf9, role: leaf, asn: 65009, prefixes: [10.9.0.0/16]}
  - {name: Spine9, role: spine, asn: 65109}
links:
  - {a: Leaf1, b: Spine1, gbps: 100}
  - {a: Leaf1, b: Spine2, gbps: 100}
  - {a: Leaf2, b: Spine1, gbps: 100}
  - {a: Leaf2, b: Spine2, gbps: 40}
  - {a: Leaf3, b: Spine1, gbps: 100}
  - {a: Leaf3, b: Spine2, gbps: 100}
  - {a: Leaf3, b: H1, gbps: 25}
  - {a: Leaf3, b: H2, gbps: 25}
  - {a: Leaf9, b: Spine9, gbps: 100}
";

    /// The solution's accessors, by hand on ISLANDS.
    #[test]
    fn solution_groups_units_and_counts_by_hand() {
        let t = topo(ISLANDS);
        let s = solve(&t, &Options::default());
        assert!(std::ptr::eq(s.topology(), &t));
        let id = |name: &str| t.nodes.iter().position(|n| n.name == name).unwrap();
        let set = |prefix: &str| {
            let p: IpNet = prefix.parse().unwrap();
            s.origin_sets
                .iter()
                .position(|o| o.prefixes.contains(&p))
                .unwrap()
        };
        let (p1, p2, p9) = (
            set("192.0.2.0/24"),
            set("198.51.100.0/24"),
            set("10.9.0.0/16"),
        );
        // Four origin sets (one prefix each). Who has a group: for Leaf1's and Leaf2's and
        // Leaf3's prefixes the 6 other nodes of the main part (the island none); for
        // Leaf9's only Spine9. 3 x 6 + 1 = 19.
        assert_eq!(s.origin_sets.len(), 4);
        assert_eq!(s.node_group_count(), 19);
        for (node, has) in [
            ("Leaf2", true),
            ("H1", true),
            ("Leaf1", false),
            ("Leaf9", false),
        ] {
            assert_eq!(s.group_id(p1, id(node)).is_some(), has, "{node}");
        }
        assert!(s.group_id(p9, id("Spine9")).is_some());
        assert_eq!(s.group_id(p9, id("Spine1")), None);
        // Each accessor reads the same table.
        for set in 0..4 {
            for node in 0..t.nodes.len() {
                assert_eq!(s.unit_group(set, s.unit(node)), s.group_id(set, node));
            }
        }
        // The two hosts are one unit (identical links), the spines two (different
        // groups for Leaf2's prefix: a 100G link at Spine1, a 40G one at Spine2).
        assert_eq!(s.unit(id("H1")), s.unit(id("H2")));
        assert_ne!(s.unit(id("Spine1")), s.unit(id("Spine2")));
        let spine_groups = [s.group_id(p2, id("Spine1")), s.group_id(p2, id("Spine2"))];
        assert_ne!(spine_groups[0], spine_groups[1]);
        // Distinct groups, by (neighbor, bandwidth) members: the spines' toward Leaf1
        // (100), Leaf2 (100 at Spine1, 40 at Spine2) and Leaf3 (100): 4; the leaves'
        // {Spine1 100, Spine2 40} (Leaf1 and Leaf3 toward Leaf2's prefix, Leaf2 toward
        // the others) and {Spine1 100, Spine2 100}: 2; the hosts' {Leaf3 25}; Spine9's.
        assert_eq!(s.distinct_groups(), 8);
        // Computing stubs one by one gives them units of their own and the same groups.
        let apart = solve(
            &t,
            &Options {
                no_stub_sharing: true,
                ..Default::default()
            },
        );
        assert_ne!(apart.unit(id("H1")), apart.unit(id("H2")));
        assert_eq!(apart.route_groups(), s.route_groups());
    }

    /// Route groups list a node's prefixes in the order of the file, even where a
    /// multi-homed prefix between two others of one node makes an origin set of its own.
    #[test]
    fn route_groups_in_the_order_of_the_file() {
        let t = topo(
            "
nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: A, role: leaf, asn: 65001, prefixes: [192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24]}
  - {name: C, role: leaf, asn: 65003, prefixes: [198.51.100.0/24, 10.3.0.0/16]}
links:
  - {a: A, b: S1, gbps: 100}
  - {a: C, b: S1, gbps: 100}
",
        );
        let s = solve(&t, &Options::default());
        let at_s1: Vec<String> = s
            .route_groups()
            .into_iter()
            .filter(|g| g.node == "S1")
            .map(|g| g.prefix.to_string())
            .collect();
        let want = [
            "192.0.2.0/24",
            "198.51.100.0/24",
            "203.0.113.0/24",
            "10.3.0.0/16",
        ];
        assert_eq!(at_s1, want);
    }

    /// Stubs never pass routes on: a host behind another host (a direct link) hears only
    /// what that host originates itself, not the fabric's routes it learned.
    #[test]
    fn a_host_behind_a_host_hears_only_its_own_prefixes() {
        let t = topo(
            "
nodes:
  - {name: L1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: H1, role: host, asn: 65201, prefixes: [10.0.1.0/24]}
  - {name: H2, role: host, asn: 65202}
links:
  - {a: L1, b: H1, gbps: 100}
  - {a: H1, b: H2, gbps: 100}
",
        );
        let s = solve(&t, &Options::default());
        let at = |node: &str| -> Vec<String> {
            s.route_groups()
                .into_iter()
                .filter(|g| g.node == node)
                .map(|g| g.prefix.to_string())
                .collect()
        };
        assert_eq!(at("H2"), ["10.0.1.0/24"]);
        assert_eq!(at("H1"), ["192.0.2.0/24"]);
        assert_eq!(at("L1"), ["10.0.1.0/24"]);
    }

    /// Only the wanted origin sets are computed, whichever worker's chunk they fall in,
    /// and each the same as in a full solve.
    #[test]
    fn solve_only_computes_the_wanted_sets_in_every_chunk() {
        let t = topo(ISLANDS);
        let options = Options {
            threads: 2,
            ..Default::default()
        };
        let full = solve(&t, &options);
        assert_eq!(full.origin_sets.len(), 4, "two chunks of two");
        for wanted in [vec![1], vec![3], vec![0, 3], vec![2]] {
            let only = solve_only(&t, &options, &|set| wanted.contains(&set));
            for (set, o) in full.origin_sets.iter().enumerate() {
                for node in &t.nodes {
                    let got = only.group(&node.name, o.prefixes[0]);
                    let want = full.group(&node.name, o.prefixes[0]);
                    if wanted.contains(&set) {
                        assert_eq!(got, want, "set {set} at {}", node.name);
                    } else {
                        assert_eq!(got, None, "set {set} at {}", node.name);
                    }
                }
            }
        }
    }

    #[test]
    fn white_paper_asymmetric_averaged_is_3_3_4_4() {
        let t = topo(ASYMMETRIC);
        let opts = Options {
            mode: Mode::Averaged,
            ..Default::default()
        };
        let s = solve(&t, &opts);
        let g = s.group("Leaf2", "192.0.2.0/24".parse().unwrap()).unwrap();
        assert_eq!(
            summary(&g),
            [
                ("L5".into(), 75.0, 3),
                ("L6".into(), 75.0, 3),
                ("L7".into(), 100.0, 4),
                ("L8".into(), 100.0, 4)
            ]
        );
        // Spine 1's own group: the parallel links to Leaf 1 as separate members, 1:2.
        let g = s.group("Spine1", "192.0.2.0/24".parse().unwrap()).unwrap();
        assert_eq!(
            summary(&g),
            [("L1".into(), 50.0, 1), ("L3".into(), 100.0, 2)]
        );
        assert!(s.group("Leaf1", "192.0.2.0/24".parse().unwrap()).is_none());
    }

    #[test]
    fn white_paper_asymmetric_draft_per_node_and_per_session() {
        // Draft, per session (the draft before -05): every spine advertises its full sum
        // (150, 200), each min'ed with a 100G link at Leaf 2: 1:1:1:1. Per node (-05, the
        // default): Spine 1 counts once, min(200, 150) = 150 over its two links, 3:3:4:4.
        let t = topo(ASYMMETRIC);
        let p = "192.0.2.0/24".parse().unwrap();
        let session = Options {
            parallel: ParallelLinks::Session,
            ..Default::default()
        };
        for (opts, want) in [(session, [1, 1, 1, 1]), (Options::default(), [3, 3, 4, 4])] {
            let s = solve(&t, &opts);
            let g = s.group("Leaf2", p).unwrap();
            let w: Vec<u32> = g.members.iter().map(|m| m.weight).collect();
            assert_eq!(w, want);
        }
    }

    #[test]
    fn heterogeneous_spines_one_third_two_thirds() {
        let mut text = String::from("nodes:\n  - {name: Leaf1, role: leaf}\n  - {name: Leaf2, role: leaf, prefixes: [198.51.100.0/24]}\n");
        for s in 1..=8 {
            text += &format!("  - {{name: Spine{s}, role: spine, asn: 65100}}\n");
        }
        text += "links:\n";
        for s in 1..=8 {
            let g = if s <= 4 { 100 } else { 200 };
            text += &format!("  - {{a: Spine{s}, b: Leaf1, gbps: {g}}}\n  - {{a: Spine{s}, b: Leaf2, gbps: {g}}}\n");
        }
        let t = topo(&text);
        for mode in [Mode::Draft, Mode::Averaged] {
            let s = solve(
                &t,
                &Options {
                    mode,
                    ..Default::default()
                },
            );
            let g = s
                .group("Leaf1", "198.51.100.0/24".parse().unwrap())
                .unwrap();
            let w: Vec<u32> = g.members.iter().map(|m| m.weight).collect();
            assert_eq!(w, [1, 1, 1, 1, 2, 2, 2, 2], "{mode:?}");
            let total: u32 = w.iter().sum();
            let low: u32 = w[..4].iter().sum();
            assert_eq!((low * 3, total), (total, 12));
        }
    }

    #[test]
    fn figure1_failure_moves_weight_away() {
        let mut t = gen::clos3(8, 4, 100.0, 1);
        let p = gen::block_prefix(0);
        let s = solve(&t, &Options::default());
        let g = s.group("L8", p).unwrap();
        assert!(g.members.iter().all(|m| m.weight == 1));
        // S4 loses its link to L1: L8 no longer uses S4 for L1's prefix.
        Change::Fail("S4".into(), "L1".into())
            .apply(&mut t)
            .unwrap();
        let s = solve(&t, &Options::default());
        let g = s.group("L8", p).unwrap();
        let via: Vec<&str> = g.members.iter().map(|m| m.via.as_str()).collect();
        assert_eq!(via, ["S1", "S2", "S3"]);
        // A degraded link instead: S4 carries a quarter of the others' share.
        let mut t = gen::clos3(8, 4, 100.0, 1);
        Change::Degrade("L1".into(), "S4".into(), 25.0)
            .apply(&mut t)
            .unwrap();
        let s = solve(&t, &Options::default());
        let w: Vec<u32> = s
            .group("L8", p)
            .unwrap()
            .members
            .iter()
            .map(|m| m.weight)
            .collect();
        assert_eq!(w, [4, 4, 4, 1]);
    }

    #[test]
    fn five_stage_rules() {
        // Figure 2 scaled down: 2 PoDs, 2 leaves, 2 planes, 2 super-spines per plane.
        let mut t = gen::clos5(2, 2, 2, 2, 100.0);
        let p = gen::block_prefix(0); // L1@PoD1
                                      // Degrade one super-spine's link toward S1@PoD1.
        Change::Degrade("SS1@Plane1".into(), "S1@PoD1".into(), 50.0)
            .apply(&mut t)
            .unwrap();
        let s = solve(&t, &Options::default());
        // S1@PoD2 weighs the super-spines by their non-transitive link value: 50 vs 100.
        let g = s.group("S1@PoD2", p).unwrap();
        assert_eq!(
            g.members
                .iter()
                .map(|m| (m.via.as_str(), m.weight))
                .collect::<Vec<_>>(),
            [("SS1@Plane1", 1), ("SS2@Plane1", 2)]
        );
        // The transitive value is what S1@PoD1 set (sum of its leaf link: 100), so a
        // leaf of PoD2 splits 1:1 over the planes.
        let g = s.group("L1@PoD2", p).unwrap();
        assert!(g
            .members
            .iter()
            .all(|m| m.weight == 1 && m.bandwidth_gbps == 100.0));
        // Without the optional link community: plain ECMP at the remote spine.
        let opts = Options {
            draft: DraftOptions {
                link_community: false,
                ..Default::default()
            },
            ..Default::default()
        };
        let s = solve(&t, &opts);
        let g = s.group("S1@PoD2", p).unwrap();
        assert!(g.ecmp);
        assert!(g.members.iter().all(|m| m.weight == 1));
    }

    #[test]
    fn multiplane_rnics_share_groups() {
        let t = gen::multiplane(&gen::MultiPlane {
            gpus: 32,
            planes: 4,
            rnics_per_leaf: 8,
            spines_per_plane: 2,
            ..Default::default()
        });
        let s = solve(&t, &Options::default());
        let p = gen::block_prefix(1);
        let g = s.group("R1", p).unwrap();
        assert_eq!(g.members.len(), 4, "one member per plane");
        assert_eq!(g.members[0].link, "L1@Plane1-R1");
        let g2 = s.group("R2", p).unwrap();
        assert_eq!(g2.members[0].link, "L1@Plane1-R2");
        // RNICs behind a leaf are one unit: far fewer distinct groups than pairs.
        assert!(s.distinct_groups() * 4 < s.node_group_count());
    }

    #[test]
    fn stub_sharing_is_transparent() {
        let mut t = gen::multiplane(&gen::MultiPlane {
            gpus: 24,
            planes: 3,
            rnics_per_leaf: 4,
            spines_per_plane: 2,
            ..Default::default()
        });
        for (a, b, g) in [("L1@Plane2", "R3", 25.0), ("S1@Plane3", "L2@Plane3", 40.0)] {
            Change::Degrade(a.into(), b.into(), g)
                .apply(&mut t)
                .unwrap();
        }
        Change::Fail("L6@Plane1".into(), "R22".into())
            .apply(&mut t)
            .unwrap();
        for mode in [Mode::Draft, Mode::Averaged] {
            let shared = solve(
                &t,
                &Options {
                    mode,
                    ..Default::default()
                },
            );
            let alone = solve(
                &t,
                &Options {
                    mode,
                    no_stub_sharing: true,
                    threads: 1,
                    ..Default::default()
                },
            );
            assert_eq!(shared.route_groups(), alone.route_groups());
        }
    }

    /// L1 and L2 share AS 65001: eBGP drops their routes to each other as AS-path loops
    /// (RFC 4271 §9.1.2), and the spines do not count the sessions to L2 among those they
    /// advertise L1's prefix on. Averaged mode, worked by hand: S1 advertises 192.0.2.0/24
    /// on L3 only (N = 1): 100; S2 on L3 and L4 (N = 2): 50. L3's group is 100 : 50 = 2:1
    /// (without the loop rule, N = 2 and 3: 50 : 33.3 = 3:2).
    #[test]
    fn same_as_leaves_get_no_routes_to_each_other() {
        let t = topo(
            "nodes:
  - {name: L1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: L2, role: leaf, asn: 65001, prefixes: [198.51.100.0/24]}
  - {name: L3, role: leaf, asn: 65003, prefixes: [203.0.113.0/24]}
  - {name: L4, role: leaf, asn: 65004}
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: L1, b: S2, gbps: 100}
  - {a: L2, b: S1, gbps: 100}
  - {a: L2, b: S2, gbps: 100}
  - {a: L3, b: S1, gbps: 100}
  - {a: L3, b: S2, gbps: 100}
  - {a: L4, b: S2, gbps: 100}
",
        );
        let p1: IpNet = "192.0.2.0/24".parse().unwrap();
        let p2: IpNet = "198.51.100.0/24".parse().unwrap();
        let p3: IpNet = "203.0.113.0/24".parse().unwrap();
        for mode in [Mode::Draft, Mode::Averaged] {
            let s = solve(
                &t,
                &Options {
                    mode,
                    ..Default::default()
                },
            );
            assert!(s.group("L2", p1).is_none(), "{mode:?}");
            assert!(s.group("L1", p2).is_none(), "{mode:?}");
            for (node, p) in [("L3", p1), ("L3", p2), ("L1", p3), ("L2", p3), ("L4", p1)] {
                assert!(s.group(node, p).is_some(), "{mode:?} {node} {p}");
            }
            assert_eq!(s.group("S1", p2).map(|g| g.members.len()), Some(1));
        }
        let s = solve(
            &t,
            &Options {
                mode: Mode::Averaged,
                ..Default::default()
            },
        );
        let g = s.group("L3", p1).unwrap();
        assert_eq!(
            summary(&g),
            [
                ("L3-S1".to_string(), 100.0, 2),
                ("L3-S2".to_string(), 50.0, 1)
            ]
        );
        let s = solve(&t, &Options::default());
        let g = s.group("L3", p1).unwrap();
        assert_eq!(
            summary(&g),
            [
                ("L3-S1".to_string(), 100.0, 1),
                ("L3-S2".to_string(), 100.0, 1)
            ]
        );
    }

    /// Stubs share a computation only within one AS when their AS is shared: an RNIC in
    /// the originating leaf's AS refuses the route, its twin in another AS takes it.
    #[test]
    fn stubs_in_a_shared_as_refuse_the_loop() {
        let t = topo(
            "nodes:
  - {name: L1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: L2, role: leaf, asn: 65002}
  - {name: S1, role: spine, asn: 65100}
  - {name: R1, role: rnic, asn: 65001}
  - {name: R2, role: rnic, asn: 65009}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: L2, b: S1, gbps: 100}
  - {a: R1, b: L2, gbps: 100}
  - {a: R2, b: L2, gbps: 100}
",
        );
        let p: IpNet = "192.0.2.0/24".parse().unwrap();
        let s = solve(&t, &Options::default());
        assert!(s.group("R1", p).is_none());
        assert!(s.group("R2", p).is_some());
        assert!(s.group("L2", p).is_some());
    }

    #[test]
    fn unreachable_and_isolated_nodes_have_no_group() {
        let mut t = gen::clos3(2, 1, 100.0, 1);
        Change::Fail("S1".into(), "L2".into())
            .apply(&mut t)
            .unwrap();
        let s = solve(&t, &Options::default());
        assert!(s.group("L2", gen::block_prefix(0)).is_none());
        assert!(s.group("S1", gen::block_prefix(0)).is_some());
    }

    /// A random 3-stage fabric: every leaf-spine pair has 0-2 links of random capacity.
    fn random_clos3() -> impl proptest::strategy::Strategy<Value = Topology> {
        use proptest::prelude::*;
        (2usize..6, 1usize..5)
            .prop_flat_map(|(leaves, spines)| {
                (
                    Just((leaves, spines)),
                    prop::collection::vec(
                        prop::collection::vec(
                            prop_oneof![Just(25.0), Just(50.0), Just(100.0), Just(400.0)],
                            0..3,
                        ),
                        leaves * spines,
                    ),
                )
            })
            .prop_map(|((leaves, spines), caps)| {
                let mut t = Topology::new("random");
                let node = |name: String, role| crate::topology::Node::new(name, role);
                let s: Vec<NodeId> = (0..spines)
                    .map(|i| t.add_node(node(format!("S{i}"), crate::topology::Role::Spine)))
                    .collect();
                for l in 0..leaves {
                    let mut n = node(format!("L{l}"), crate::topology::Role::Leaf);
                    n.prefixes.push(gen::block_prefix(l as u32));
                    let id = t.add_node(n);
                    for (j, &sp) in s.iter().enumerate() {
                        for &c in &caps[l * spines + j] {
                            t.add_link(sp, id, c, None);
                        }
                    }
                }
                t
            })
    }

    proptest::proptest! {
        /// Draft mode on a 3-stage fabric with parallel links of unequal capacities,
        /// checked against the rule written out directly, in each parallel-links setting:
        /// spine S advertises A = the sum of its links to the origin leaf; a leaf's member
        /// via S over link k has, per session, min(link k, A); per node, with P = the sum
        /// of S's links to the leaf, min(P, A) / (number of those links) (even) or
        /// min(P, A) x link k / P (proportional). Groups respect the size limit.
        #[test]
        fn draft_clos3_matches_the_rule(
            t in random_clos3(),
            limit in proptest::option::of(1u32..20),
            setting in proptest::sample::select(vec![
                ParallelLinks::NodeEven,
                ParallelLinks::NodeProportional,
                ParallelLinks::Session,
            ]),
        ) {
            let s = solve(&t, &Options { max_group_size: limit, parallel: setting, ..Default::default() });
            let sum_to = |sp: NodeId, leaf: NodeId| -> f64 {
                t.links_between(sp, leaf).map(|l| t.links[l].gbps).sum()
            };
            for g in s.route_groups() {
                let total: u32 = g.members.iter().map(|m| m.weight).sum();
                if let Some(limit) = limit {
                    proptest::prop_assert!(total <= limit);
                }
                proptest::prop_assert!(total >= 1);
                let node = t.node_id(&g.node).unwrap();
                let origin = s.origin_sets.iter().find(|o| o.prefixes.contains(&g.prefix)).unwrap().origins[0];
                if t.nodes[node].role == crate::topology::Role::Leaf {
                    for m in &g.members {
                        let via = t.node_id(&m.via).unwrap();
                        let link = t.links.iter().find(|l| l.name == m.link).unwrap();
                        let advertised = sum_to(via, origin);
                        let parallel = sum_to(via, node);
                        let count = t.links_between(via, node).count() as f64;
                        let expect = match setting {
                            ParallelLinks::Session => link.gbps.min(advertised),
                            ParallelLinks::NodeEven => parallel.min(advertised) / count,
                            ParallelLinks::NodeProportional => {
                                parallel.min(advertised) * link.gbps / parallel
                            }
                        };
                        let close = (m.bandwidth_gbps - expect).abs() <= 1e-9 * expect;
                        proptest::prop_assert!(close, "{} vs {}", m.bandwidth_gbps, expect);
                    }
                    // Every spine linked to both leaves appears, once per parallel link.
                    let expect_members: usize = (0..t.nodes.len())
                        .filter(|&sp| t.nodes[sp].role == crate::topology::Role::Spine && sum_to(sp, origin) > 0.0)
                        .map(|sp| t.links_between(sp, node).count())
                        .sum();
                    proptest::prop_assert_eq!(g.members.len(), expect_members);
                }
            }
        }

        /// Averaged mode never gives a member more than its link, and shared computation
        /// equals per-node computation.
        #[test]
        fn averaged_bounded_and_sharing_is_transparent(t in random_clos3()) {
            let opts = Options { mode: Mode::Averaged, ..Default::default() };
            let a = solve(&t, &opts).route_groups();
            let b = solve(&t, &Options { no_stub_sharing: true, threads: 1, ..opts }).route_groups();
            proptest::prop_assert_eq!(&a, &b);
            for g in &a {
                for m in &g.members {
                    let link = t.links.iter().find(|l| l.name == m.link).unwrap();
                    proptest::prop_assert!(m.bandwidth_gbps <= link.gbps);
                }
            }
        }
    }
}
