//! One destination's groups before and after a failure, node by node: what changed, the
//! oversubscription at the ideal split, stranded capacity, limit reductions and nodes
//! left with one path.

use crate::sim::{SharedGroup, Solution};
use crate::topology::NodeId;
use crate::wcmp;
use rustc_hash::FxHashMap;

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
    if options.max_group_size.is_none() {
        return vec![false; sol.groups.len()];
    }
    let tolerance = options.encoding.ratio_tolerance();
    sol.groups
        .iter()
        .map(|g| {
            let bandwidths: Vec<f64> = if g.ecmp {
                vec![1.0; g.members.len()]
            } else {
                g.members.iter().map(|m| m.2).collect()
            };
            wcmp::weights_within(&bandwidths, None, tolerance).weights != g.weights.weights
        })
        .collect()
}

/// One side (before or after) of the comparison.
pub struct Side<'a, 't> {
    pub sol: &'a Solution<'t>,
    pub reduced: &'a [bool],
}

impl Side<'_, '_> {
    fn group(&self, set: usize, node: NodeId) -> Option<(u32, &SharedGroup)> {
        self.sol
            .group_id(set, node)
            .map(|g| (g, &self.sol.groups[g as usize]))
    }

    fn stranded(&self, node: NodeId, g: &SharedGroup) -> f64 {
        let topo = self.sol.topology();
        // Sums in sorted order: the same whatever the members' order (twins swapped).
        crate::bandwidth::sum(g.members.iter().map(|&(via, nth, bw)| {
            let cap = self
                .sol
                .link_to(node, via, nth)
                .map_or(bw, |l| topo.links[l].gbps);
            (cap - bw).max(0.0)
        }))
    }
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

fn outcome(before: &Side, after: &Side, set: usize, node: NodeId) -> Outcome {
    let b = before.group(set, node);
    let a = after.group(set, node);
    let mut o = Outcome {
        ratio: 1.0,
        ..Default::default()
    };
    if let Some((id, g)) = b {
        o.stranded_before = before.stranded(node, g);
        o.reduced_before = before.reduced[id as usize];
    }
    if let Some((id, g)) = a {
        o.stranded_after = after.stranded(node, g);
        o.reduced_after = after.reduced[id as usize];
    }
    match (b, a) {
        (Some((_, gb)), Some((_, ga))) => {
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

/// The sums over one destination's nodes.
#[derive(Clone, Debug, Default)]
pub struct SetTotals {
    /// Counted per node (multiply by the destination's prefixes for (node, prefix) pairs).
    pub changed: u64,
    pub lost: u64,
    pub single: u64,
    pub reduced_before: u64,
    pub reduced_after: u64,
    /// Change of the stranded capacity over the changed nodes, summed in sorted order.
    pub stranded_change: f64,
    /// Worst ratio and every node where it is, in node order (None: no group changed).
    pub worst: Option<(f64, Vec<NodeId>)>,
}

/// Compares every node's group for origin set `set`, skipping the set's origins and the
/// `failed` nodes. Nodes of the same unit on both sides are compared once.
pub fn compare_set(before: &Side, after: &Side, set: usize, failed: &[bool]) -> SetTotals {
    let origins = &before.sol.origin_sets[set].origins;
    let mut memo: FxHashMap<(u32, u32), Outcome> = FxHashMap::default();
    let mut t = SetTotals::default();
    let mut stranded = Vec::new();
    for (node, &down) in failed.iter().enumerate() {
        if down || origins.contains(&node) {
            continue;
        }
        let key = (before.sol.unit(node), after.sol.unit(node));
        let o = *memo
            .entry(key)
            .or_insert_with(|| outcome(before, after, set, node));
        t.changed += u64::from(o.changed);
        t.lost += u64::from(o.lost);
        t.single += u64::from(o.single);
        t.reduced_before += u64::from(o.reduced_before);
        t.reduced_after += u64::from(o.reduced_after);
        if o.changed {
            stranded.push(o.stranded_after - o.stranded_before);
        }
        if o.changed && !o.lost {
            // A greater ratio starts the list; an equal one joins it (NaN never does).
            let greater = t.worst.as_ref().is_none_or(|(w, _)| o.ratio > *w);
            if greater {
                t.worst = Some((o.ratio, vec![node]));
            } else if let Some((w, at)) = &mut t.worst {
                if o.ratio == *w {
                    at.push(node);
                }
            }
        }
    }
    t.stranded_change = crate::bandwidth::sum(stranded);
    t
}
