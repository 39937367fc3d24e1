//! One destination's groups before and after a failure, node by node: what changed, the
//! oversubscription at the ideal split, stranded capacity, limit reductions and nodes
//! left with one path.

use super::symmetry::{self, Swaps};
use crate::sim::incremental::{Down, Engine, Repropagator, SetChange, Stubs};
use crate::sim::{SharedGroup, Solution};
use crate::topology::NodeId;
use crate::wcmp;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// What a failure did to one node's group for one destination.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    pub changed: bool,
    /// Had a group, has none.
    pub lost: bool,
    /// Demand over capacity: the group's bandwidth before over its bandwidth after (at
    /// the ideal split every member carries the same share of its bandwidth). 1.0 when
    /// unchanged or lost.
    pub ratio: f64,
    /// Link capacity the members' path bandwidth leaves unused, before and after (Gbps).
    pub stranded_before: f64,
    pub stranded_after: f64,
    pub reduced_before: bool,
    pub reduced_after: bool,
    /// One member now, more before.
    pub single: bool,
}

/// Per distinct group of a solution: whether the data plane limit reduced it (its
/// weights differ from the unlimited ones).
pub fn reduced_flags(sol: &Solution, options: &crate::sim::Options) -> Vec<bool> {
    sol.groups.iter().map(|g| is_reduced(g, options)).collect()
}

/// Whether the limit reduced group `g`.
pub fn is_reduced(g: &SharedGroup, options: &crate::sim::Options) -> bool {
    if options.max_group_size.is_none() {
        return false;
    }
    let bandwidths: Vec<f64> = if g.ecmp {
        vec![1.0; g.members.len()]
    } else {
        g.members.iter().map(|m| m.2).collect()
    };
    let tolerance = options.encoding.ratio_tolerance();
    wcmp::weights_within(&bandwidths, None, tolerance).weights != g.weights.weights
}

/// One side (before or after) of the comparison.
pub struct Side<'a, 't> {
    pub sol: &'a Solution<'t>,
    pub reduced: &'a [bool],
}

impl Side<'_, '_> {
    fn group(&self, set: usize, node: NodeId) -> Option<(&SharedGroup, bool)> {
        self.sol
            .group_id(set, node)
            .map(|g| (&self.sol.groups[g as usize], self.reduced[g as usize]))
    }
}

/// Link capacity `g`'s members leave unused at `node` (links as in `sol`'s fabric).
fn stranded(sol: &Solution, node: NodeId, g: &SharedGroup) -> f64 {
    let topo = sol.topology();
    // Sums in sorted order: the same whatever the members' order (twins swapped).
    crate::bandwidth::sum(g.members.iter().map(|&(via, nth, bw)| {
        let cap = sol
            .link_to(node, via, nth)
            .map_or(bw, |l| topo.links[l].gbps);
        (cap - bw).max(0.0)
    }))
}

fn same(a: &SharedGroup, b: &SharedGroup) -> bool {
    a.ecmp == b.ecmp
        && a.weights.weights == b.weights.weights
        && a.members.len() == b.members.len()
        && a.members
            .iter()
            .zip(&b.members)
            .all(|(x, y)| x.0 == y.0 && x.1 == y.1 && x.2.to_bits() == y.2.to_bits())
}

/// What became of `node`'s group `b` (and whether the limit reduced it): `a`. Links are
/// looked up in `before` and `after` (the fabric before and after the failure).
fn outcome(
    (before, b): (&Solution, Option<(&SharedGroup, bool)>),
    (after, a): (&Solution, Option<(&SharedGroup, bool)>),
    node: NodeId,
) -> Outcome {
    let mut o = Outcome {
        ratio: 1.0,
        reduced_before: b.is_some_and(|(_, r)| r),
        reduced_after: a.is_some_and(|(_, r)| r),
        ..Default::default()
    };
    if let (Some((gb, _)), Some((ga, _))) = (b, a) {
        if same(gb, ga) {
            return o;
        }
    }
    if let Some((g, _)) = b {
        o.stranded_before = stranded(before, node, g);
    }
    if let Some((g, _)) = a {
        o.stranded_after = stranded(after, node, g);
    }
    match (b, a) {
        (Some((gb, _)), Some((ga, _))) => {
            o.changed = !same(gb, ga);
            if o.changed {
                let demand = crate::bandwidth::sum(gb.members.iter().map(|m| m.2));
                let capacity = crate::bandwidth::sum(ga.members.iter().map(|m| m.2));
                o.ratio = demand / capacity;
                o.single = ga.members.len() == 1 && gb.members.len() > 1;
            }
        }
        (Some(_), None) => {
            o.changed = true;
            o.lost = true;
        }
        (None, Some(_)) => o.changed = true,
        (None, None) => {}
    }
    o
}

/// Where a destination's worst ratio is: single nodes and whole classes of stubs, each
/// list sorted.
#[derive(Clone, Debug, Default)]
pub struct Ties {
    pub nodes: Vec<NodeId>,
    pub lists: Vec<Arc<[NodeId]>>,
}

impl Ties {
    /// The smallest node.
    pub fn first(&self) -> Option<NodeId> {
        let lists = self.lists.iter().filter_map(|l| l.first().copied());
        self.nodes.iter().copied().chain(lists).min()
    }

    /// The smallest image of the nodes under `swaps`.
    pub fn min_image(&self, swaps: &Swaps) -> Option<NodeId> {
        let lists = self
            .lists
            .iter()
            .filter_map(|l| symmetry::min_image(swaps, l));
        symmetry::min_image(swaps, &self.nodes)
            .into_iter()
            .chain(lists)
            .min()
    }
}

/// Outcomes by (node, group before, group after) within one failure.
pub type Memo = FxHashMap<(NodeId, u32, u32), Outcome>;

/// The sums over one destination's nodes.
#[derive(Clone, Debug, Default)]
pub struct SetTotals {
    /// Counted per node (multiply by the destination's prefixes for (node, prefix) pairs).
    pub changed: u64,
    pub lost: u64,
    pub single: u64,
    pub reduced_before: u64,
    pub reduced_after: u64,
    /// Change of the stranded capacity over the changed nodes (see [`counted_sum`]).
    pub stranded_change: f64,
    /// Worst ratio and every node where it is (None: no group changed).
    pub worst: Option<(f64, Ties)>,
    /// Per changed node, its stranded change (value, nodes).
    stranded: Vec<(f64, u64)>,
}

/// Where a tie is: one node, or a list of stubs.
enum At {
    Node(NodeId),
    List(Arc<[NodeId]>),
}

impl SetTotals {
    /// Adds `count` nodes with outcome `o`.
    fn add(&mut self, o: &Outcome, count: u64, at: At) {
        self.changed += u64::from(o.changed) * count;
        self.lost += u64::from(o.lost) * count;
        self.single += u64::from(o.single) * count;
        self.reduced_before += u64::from(o.reduced_before) * count;
        self.reduced_after += u64::from(o.reduced_after) * count;
        if o.changed {
            self.stranded
                .push((o.stranded_after - o.stranded_before, count));
        }
        if !o.changed || o.lost {
            return;
        }
        // A greater ratio starts the list; an equal one joins it (NaN never does).
        let greater = self.worst.as_ref().is_none_or(|(w, _)| o.ratio > *w);
        if greater {
            self.worst = Some((o.ratio, Ties::default()));
        }
        if let Some((w, ties)) = &mut self.worst {
            if o.ratio == *w {
                match at {
                    At::Node(n) => ties.nodes.push(n),
                    At::List(l) => ties.lists.push(l),
                }
            }
        }
    }

    fn finish(&mut self) {
        self.stranded_change = counted_sum(&mut self.stranded);
        if let Some((_, ties)) = &mut self.worst {
            ties.nodes.sort_unstable();
        }
    }
}

/// The sum of values each counted some times, in ascending order of the values: the same
/// bits whether equal nodes were added one by one or as one class.
fn counted_sum(values: &mut [(f64, u64)]) -> f64 {
    values.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut sum = 0.0;
    let mut i = 0;
    while i < values.len() {
        let v = values[i].0;
        let mut count = 0;
        while i < values.len() && values[i].0.to_bits() == v.to_bits() {
            count += values[i].1;
            i += 1;
        }
        sum += v * count as f64;
    }
    sum
}

/// Compares every node's group for origin set `set`, skipping the set's origins and the
/// `failed` nodes. Nodes of the same unit on both sides are compared once.
pub fn compare_set(before: &Side, after: &Side, set: usize, failed: &[bool]) -> SetTotals {
    let origins = &before.sol.origin_sets[set].origins;
    let mut memo: FxHashMap<(u32, u32), Outcome> = FxHashMap::default();
    let mut t = SetTotals::default();
    for (node, &down) in failed.iter().enumerate() {
        if down || origins.contains(&node) {
            continue;
        }
        let key = (before.sol.unit(node), after.sol.unit(node));
        let o = *memo.entry(key).or_insert_with(|| {
            let b = (before.sol, before.group(set, node));
            let a = (after.sol, after.group(set, node));
            outcome(b, a, node)
        });
        t.add(&o, 1, At::Node(node));
    }
    t.finish();
    t
}

/// [`compare_set`] for a re-propagated set: only the switches and stub classes it
/// decided again can differ from the unfailed fabric (`before`).
///
/// `memo` carries outcomes across the sets of one failure: a node's (group before, group
/// after) pair recurs for many destinations (a leaf that lost a spine, for every one).
pub fn compare_change(
    before: &Side,
    (engine, rep, down): (&Engine, &mut Repropagator, &Down),
    (change, set): (&SetChange, usize),
    failed: &[bool],
    memo: &mut Memo,
) -> SetTotals {
    let sol = before.sol;
    let options = engine.options();
    let origins = &sol.origin_sets[set].origins;
    let counted = |n: &NodeId| !failed[*n] && !origins.contains(n);
    let mut t = SetTotals::default();
    let none = u32::MAX;
    let mut outcome_of = |n: NodeId, b: Option<u32>, a: Option<u32>, rep: &mut Repropagator| {
        *memo
            .entry((n, b.unwrap_or(none), a.unwrap_or(none)))
            .or_insert_with(|| {
                let b = b.map(|g| (&sol.groups[g as usize], before.reduced[g as usize]));
                let a = a.map(|id| rep.group(id));
                let a = a.map(|g| (g, is_reduced(g, options)));
                outcome((sol, b), (sol, a), n)
            })
    };
    for &(n, after) in &change.switches {
        if !counted(&n) {
            continue;
        }
        let o = outcome_of(n, sol.group_id(set, n), after, rep);
        t.add(&o, 1, At::Node(n));
    }
    for &(which, after) in &change.stubs {
        let (unit, all, skip): (u32, &[NodeId], &[NodeId]) = match which {
            Stubs::Unit(u) => (u, engine.class_members(u), engine.affected(down, u)),
            Stubs::Group(i) => (down.stub_groups[i].unit, &down.stub_groups[i].members, &[]),
        };
        let list: Arc<[NodeId]> = match which {
            Stubs::Unit(u) if skip.is_empty() && all.iter().all(counted) => {
                engine.class_members(u).clone()
            }
            _ => all
                .iter()
                .copied()
                .filter(|n| counted(n) && skip.binary_search(n).is_err())
                .collect(),
        };
        let Some(&first) = list.first() else {
            continue;
        };
        let o = outcome_of(first, sol.unit_group(set, unit), after, rep);
        t.add(&o, list.len() as u64, At::List(list));
    }
    t.finish();
    t
}
