//! What if this fails: every single link, node and plane failure (and sampled pairs) with
//! what it does to the fabric's groups, ranked worst first (`fare analyze`).
//!
//! Incremental: the unfailed fabric is solved once; a failure re-propagates only the
//! destinations (origin sets) whose propagation it touches and reuses the others. In
//! draft mode a destination is touched when a failed link carries one of its routes (is
//! a member of some node's group for it): no other link enters a group or an
//! advertisement. In averaged mode the divisor N of both ends changes too, so a
//! destination is touched when either end of a failed link has its route. Failures run
//! in parallel (rayon), each propagation on one thread.
//!
//! Demand: a node's traffic toward a destination is what its group carried before the
//! failure, the sum of its members' path bandwidths. At the ideal split (weights exactly
//! proportional to the path bandwidths) every member then runs at demand / capacity of
//! its bandwidth, capacity being the group's sum after the failure: that ratio is the
//! oversubscription, 1.0 = as before.

mod compare;
pub mod failures;
pub mod symmetry;

pub use failures::{Failure, Kind};

use crate::sim::incremental::{Engine, Repropagator, Snapshot};
use crate::sim::{self, Solution};
use crate::topology::NodeId;
use crate::topology::Topology;
use compare::{Side, Ties};
use ipnet::IpNet;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// One destination hurt by a failure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Destination {
    /// The prefixes originated by the same nodes (they share every path).
    pub prefixes: Vec<IpNet>,
    /// Worst demand / capacity over the nodes whose group changed, and the node.
    pub worst_oversubscription: f64,
    pub node: String,
    /// Nodes that had a route to it and have none.
    pub unreachable_nodes: u64,
}

/// What one failure does. Counts are (node, prefix) pairs, as `fare weights` lists
/// groups; the failed nodes' own groups are not counted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub failure: String,
    pub kind: Kind,
    /// The `fare weights --fail` arguments giving the same fabric.
    #[serde(skip)]
    pub fail_args: Vec<String>,
    pub changed_groups: u64,
    /// Groups that disappear: no route left.
    pub unreachable: u64,
    /// Worst over all destinations (1.0 when nothing is oversubscribed).
    pub worst_oversubscription: f64,
    /// Change of the capacity the groups' members leave unused (Gbps, summed over
    /// destinations and nodes).
    pub stranded_gbps: f64,
    /// Groups reduced by the data plane limit after the failure, and the change.
    pub reduced_groups: u64,
    pub reduced_change: i64,
    /// Groups left with one member (more than one before).
    pub single_path: u64,
    /// Destinations with an oversubscribed or lost group, worst first (the first
    /// [`Base::destinations`] of them).
    pub destinations: Vec<Destination>,
    /// How many destinations have an oversubscribed or lost group.
    pub destinations_hurt: u64,
    /// Origin sets propagated again for this failure.
    #[serde(skip)]
    pub recomputed: usize,
}

/// Where one failure's time goes (seconds): preparing the failure (naive: building the
/// failed fabric), propagating, comparing the groups.
#[derive(Clone, Copy, Debug, Default)]
pub struct Phases {
    pub select: f64,
    pub solve: f64,
    pub compare: f64,
}

/// The unfailed fabric, solved once.
pub struct Base<'t> {
    pub topo: &'t Topology,
    pub options: sim::Options,
    pub solution: Solution<'t>,
    snapshot: Snapshot,
    reduced: Vec<bool>,
    /// Groups reduced by the limit before any failure ((node, prefix) pairs).
    pub reduced_groups: u64,
    /// Destinations kept per report, worst first (0: all).
    pub destinations: usize,
}

impl<'t> Base<'t> {
    pub fn new(topo: &'t Topology, options: &sim::Options) -> Base<'t> {
        let (solution, snapshot) = sim::solve_kept(topo, options);
        let reduced = compare::reduced_flags(&solution, options);
        let mut base = Base {
            topo,
            options: sim::Options {
                threads: 1,
                ..options.clone()
            },
            solution,
            snapshot,
            reduced,
            reduced_groups: 0,
            destinations: 0,
        };
        if options.max_group_size.is_none() {
            return base;
        }
        let none = vec![false; topo.nodes.len()];
        let side = base.side();
        let mut count = 0;
        for (s, set) in base.solution.origin_sets.iter().enumerate() {
            let t = compare::compare_set(&side, &side, s, &none);
            count += t.reduced_before * set.prefixes.len() as u64;
        }
        base.reduced_groups = count;
        base
    }

    fn side(&self) -> Side<'_, 't> {
        Side {
            sol: &self.solution,
            reduced: &self.reduced,
        }
    }

    /// The unfailed fabric ready to re-propagate failures (one per sweep; each thread
    /// takes a [`Repropagator`] from it).
    pub fn engine(&self) -> Engine<'_> {
        Engine::new(&self.solution, &self.snapshot, &self.options)
    }

    /// What `f` does. `full`: solve the failed fabric whole (the naive baseline the
    /// incremental result must equal).
    pub fn one(&self, f: &Failure, full: bool) -> Report {
        self.one_profiled(f, full).0
    }

    /// [`Base::one`] with the time spent in each phase.
    pub fn one_profiled(&self, f: &Failure, full: bool) -> (Report, Phases) {
        let (r, _, p) = if full {
            self.naive(f)
        } else {
            let engine = self.engine();
            let mut rep = engine.repropagator();
            self.incremental((&engine, &mut rep), f)
        };
        (r, p)
    }

    /// [`Base::one_profiled`], incremental, with a given engine and repropagator (made
    /// once for many failures).
    pub fn one_with(
        &self,
        (engine, rep): (&Engine, &mut Repropagator),
        f: &Failure,
    ) -> (Report, Phases) {
        let (r, _, p) = self.incremental((engine, rep), f);
        (r, p)
    }

    /// The failed fabric solved whole and every node compared. Returns the report, per
    /// destination (in the report's order) the nodes where its worst ratio is (to rename
    /// it for a twin's failure), and the phases.
    fn naive(&self, f: &Failure) -> (Report, Vec<Ties>, Phases) {
        let mut lap = stopwatch();
        let topo = f.apply(self.topo);
        let select = lap();
        let after = sim::solve(&topo, &self.options);
        let solve = lap();
        let reduced = compare::reduced_flags(&after, &self.options);
        let after = Side {
            sol: &after,
            reduced: &reduced,
        };
        let failed = self.failed(f);
        let before = self.side();
        let sets = self.solution.origin_sets.len();
        let totals = (0..sets).map(|s| (s, compare::compare_set(&before, &after, s, &failed)));
        let (r, ties) = self.report(f, totals, sets);
        let compare = lap();
        (
            r,
            ties,
            Phases {
                select,
                solve,
                compare,
            },
        )
    }

    /// [`Base::naive`]'s result from re-propagating only what the failure changes.
    fn incremental(
        &self,
        (engine, rep): (&Engine, &mut Repropagator),
        f: &Failure,
    ) -> (Report, Vec<Ties>, Phases) {
        let mut lap = stopwatch();
        let down = engine.prepare(&f.pairs);
        rep.begin(&down);
        let select = lap();
        let changes: Vec<_> = (0..self.solution.origin_sets.len())
            .map(|s| (s, rep.set(&down, s)))
            .filter(|(_, c)| !c.is_empty())
            .collect();
        let solve = lap();
        let failed = self.failed(f);
        let before = self.side();
        let mut memo = compare::Memo::default();
        let totals: Vec<_> = changes
            .iter()
            .map(|(s, c)| {
                let at = (engine, &mut *rep, &down);
                (
                    *s,
                    compare::compare_change(&before, at, (c, *s), &failed, &mut memo),
                )
            })
            .collect();
        rep.end(&down);
        let (r, ties) = self.report(f, totals.into_iter(), changes.len());
        let compare = lap();
        (
            r,
            ties,
            Phases {
                select,
                solve,
                compare,
            },
        )
    }

    fn failed(&self, f: &Failure) -> Vec<bool> {
        let mut failed = vec![false; self.topo.nodes.len()];
        for &n in &f.nodes {
            failed[n] = true;
        }
        failed
    }

    /// The report from each origin set's totals (sets without any change may be left out).
    fn report(
        &self,
        f: &Failure,
        totals: impl Iterator<Item = (usize, compare::SetTotals)>,
        recomputed: usize,
    ) -> (Report, Vec<Ties>) {
        let mut r = Report {
            failure: f.name.clone(),
            kind: f.kind,
            fail_args: f.fail_args(self.topo),
            changed_groups: 0,
            unreachable: 0,
            worst_oversubscription: 1.0,
            stranded_gbps: 0.0,
            reduced_groups: 0,
            reduced_change: 0,
            single_path: 0,
            destinations: Vec::new(),
            destinations_hurt: 0,
            recomputed,
        };
        let mut ties = Vec::new();
        for (s, t) in totals {
            let prefixes = &self.solution.origin_sets[s].prefixes;
            let k = prefixes.len() as u64;
            r.changed_groups += t.changed * k;
            r.unreachable += t.lost * k;
            r.single_path += t.single * k;
            r.reduced_change += (t.reduced_after as i64 - t.reduced_before as i64) * k as i64;
            r.stranded_gbps += t.stranded_change * k as f64;
            let (worst, at) = t.worst.unwrap_or((1.0, Ties::default()));
            if worst > 1.0 + 1e-9 || t.lost > 0 {
                r.worst_oversubscription = r.worst_oversubscription.max(worst);
                r.destinations.push(Destination {
                    prefixes: prefixes.clone(),
                    worst_oversubscription: worst,
                    node: self.name(at.first()),
                    unreachable_nodes: t.lost,
                });
                ties.push(at);
            }
        }
        r.reduced_groups = (self.reduced_groups as i64 + r.reduced_change).max(0) as u64;
        let mut order: Vec<usize> = (0..r.destinations.len()).collect();
        let d = &r.destinations;
        order.sort_by(|&a, &b| {
            (d[b].unreachable_nodes, d[b].worst_oversubscription)
                .partial_cmp(&(d[a].unreachable_nodes, d[a].worst_oversubscription))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        r.destinations_hurt = order.len() as u64;
        if self.destinations > 0 {
            order.truncate(self.destinations);
        }
        r.destinations = order.iter().map(|&i| d[i].clone()).collect();
        let ties = order
            .iter()
            .map(|&i| std::mem::take(&mut ties[i]))
            .collect();
        (r, ties)
    }
}

/// Seconds since the previous call (or since it was made).
fn stopwatch() -> impl FnMut() -> f64 {
    let mut clock = std::time::Instant::now();
    move || {
        let now = std::time::Instant::now();
        let d = now - clock;
        clock = now;
        d.as_secs_f64()
    }
}

impl Base<'_> {
    fn name(&self, n: Option<NodeId>) -> String {
        n.and_then(|n| self.topo.nodes.get(n))
            .map_or_else(String::new, |n| n.name.clone())
    }

    /// The report of `f`, the image of a computed failure under `swaps`: the same
    /// figures, renamed (the failure, and each destination's worst node: the smallest
    /// image of the nodes where the worst ratio is, as a direct computation picks it).
    fn rename(&self, r: &Report, ties: &[Ties], f: &Failure, swaps: &symmetry::Swaps) -> Report {
        let mut out = Report {
            failure: f.name.clone(),
            fail_args: f.fail_args(self.topo),
            ..r.clone()
        };
        if !swaps.is_empty() {
            for (d, at) in out.destinations.iter_mut().zip(ties) {
                d.node = self.name(at.min_image(swaps));
            }
        }
        out
    }
}

/// Every failure of `failures`, in parallel, ranked worst first: most groups left
/// without a route, then worst oversubscription, then most changed groups.
///
/// `full`: every failure recomputed on its own over every destination (the naive
/// baseline). Otherwise incremental, and link and node failures that are images of
/// each other under swaps of twins (see [`symmetry`]) are computed once.
pub fn analyze(base: &Base, failures: &[Failure], full: bool) -> Vec<Report> {
    if full {
        return analyze_each(base, failures, true);
    }
    let twins = symmetry::Twins::new(base.topo);
    // Per class, its members (index, swaps) in failure order.
    let mut classes: FxHashMap<symmetry::Key, usize> = FxHashMap::default();
    let mut members: Vec<Vec<(usize, symmetry::Swaps)>> = Vec::new();
    for (i, f) in failures.iter().enumerate() {
        let (key, swaps) = match twins.canonical(f) {
            Some(c) => c,
            None => ((f.kind, i, usize::MAX), Vec::new()),
        };
        let c = *classes.entry(key).or_insert_with(|| {
            members.push(Vec::new());
            members.len() - 1
        });
        members[c].push((i, swaps));
    }
    let engine = base.engine();
    let mut reports: Vec<(usize, Report)> = members
        .par_iter()
        .map_init(
            || engine.repropagator(),
            |rep, class| {
                let (i, swaps) = &class[0];
                let computed = symmetry::preimage(&failures[*i], swaps);
                let (r, ties, _) = base.incremental((&engine, rep), &computed);
                class
                    .iter()
                    .map(|(j, swaps)| (*j, base.rename(&r, &ties, &failures[*j], swaps)))
                    .collect::<Vec<_>>()
            },
        )
        .flatten_iter()
        .collect();
    reports.sort_by_key(|(i, _)| *i);
    let mut reports: Vec<Report> = reports.into_iter().map(|(_, r)| r).collect();
    rank(&mut reports);
    reports
}

/// [`analyze`] without sharing between twins: every failure computed on its own.
pub fn analyze_each(base: &Base, failures: &[Failure], full: bool) -> Vec<Report> {
    let engine = base.engine();
    let mut reports: Vec<Report> = failures
        .par_iter()
        .map_init(
            || engine.repropagator(),
            |rep, f| match full {
                true => base.naive(f).0,
                false => base.incremental((&engine, rep), f).0,
            },
        )
        .collect();
    rank(&mut reports);
    reports
}

/// Worst first (stable: equal failures keep their order).
pub fn rank(reports: &mut [Report]) {
    reports.sort_by(|a, b| {
        b.unreachable
            .cmp(&a.unreachable)
            .then(
                b.worst_oversubscription
                    .total_cmp(&a.worst_oversubscription),
            )
            .then(b.changed_groups.cmp(&a.changed_groups))
            .then(b.stranded_gbps.total_cmp(&a.stranded_gbps))
    });
}

#[cfg(test)]
mod tests;
