//! One failure re-propagated from where it starts (`fare analyze`), instead of solving
//! every destination of the failed fabric again.
//!
//! The unfailed propagation keeps, per origin set, every switch's state (distance, flags,
//! advertised values, AS-path bits): [`Snapshot`]. A failure then starts at the switch
//! ends of its links. Levels are processed in distance order, as the full propagation
//! does: at level k a pending switch takes as members its neighbors at distance k-1 over
//! live links (final by then) and is decided, or waits for a later level. Only a switch
//! whose state differs from the snapshot puts its neighbors farther out (and the stub
//! classes behind it) back on the list, so the work follows what changes and stops where
//! values come out as before. A switch still pending after the last level has no route.
//!
//! Why it is exact: a switch's state depends only on its neighbors one level closer
//! (members), its own links and static facts, as in the full propagation; a switch not on
//! the list at its level has members whose states are unchanged, so its snapshot state is
//! its state. Removing links only removes paths, but a switch whose flags change may
//! advertise where it did not; it then lists its neighbors, which are decided again at
//! whatever level they land. Property tests in `analyze` check every failure against the
//! full propagation.

use super::*;
use rustc_hash::FxHashSet;
use std::sync::Arc;

/// One switch's state for one origin set.
#[derive(Clone, Copy, Debug)]
pub(super) struct State {
    dist: u32,
    flags: u8,
    path: f64,
    link_value: f64,
    lb: f64,
}

const UNREACHED: State = State {
    dist: u32::MAX,
    flags: 0,
    path: f64::NAN,
    link_value: f64::NAN,
    lb: f64::NAN,
};

/// What the full propagation's workers keep, per origin set in order.
#[derive(Default)]
pub(super) struct Kept {
    pub(super) switches: Vec<NodeId>,
    /// unit -> representative stub, or usize::MAX for a switch unit.
    pub(super) stub_classes: Vec<NodeId>,
    states: Vec<State>,
    bits: Vec<u64>,
    max_dist: Vec<u32>,
}

impl Kept {
    pub(super) fn new(switches: Vec<NodeId>, stub_classes: Vec<NodeId>) -> Kept {
        Kept {
            switches,
            stub_classes,
            ..Default::default()
        }
    }

    pub(super) fn append(&mut self, other: Kept) {
        self.states.extend(other.states);
        self.bits.extend(other.bits);
        self.max_dist.extend(other.max_dist);
    }
}

impl Worker<'_> {
    /// Appends the state of every switch after `propagate` to `kept`.
    pub(super) fn keep(&self, switches: &[NodeId], kept: &mut Kept) {
        let mut max = 0;
        for &n in switches {
            let state = if self.dist[n] == u32::MAX {
                UNREACHED
            } else {
                max = max.max(self.dist[n]);
                State {
                    dist: self.dist[n],
                    flags: self.flags[n],
                    path: self.path[n],
                    link_value: self.link_value[n],
                    lb: self.lb[n],
                }
            };
            kept.states.push(state);
            kept.bits.extend_from_slice(self.as_bits.row(n));
        }
        kept.max_dist.push(max);
    }
}

/// The unfailed fabric's per-switch states, and the stub classes around them.
pub struct Snapshot {
    /// node -> index among the switches, or NONE for stubs.
    index: Vec<u32>,
    kept: Kept,
    words: usize,
    /// Per unit, the stubs of that class in node order (empty for switch units).
    class_members: Vec<Arc<[NodeId]>>,
    /// Per switch index, the stub classes it has links to.
    stub_units: Vec<Vec<u32>>,
}

impl Snapshot {
    pub(super) fn new(sol: &Solution, kept: Kept) -> Snapshot {
        let nodes = sol.topo.nodes.len();
        let mut index = vec![NONE; nodes];
        for (i, &n) in kept.switches.iter().enumerate() {
            index[n] = i as u32;
        }
        let mut members: Vec<Vec<NodeId>> = vec![Vec::new(); sol.units];
        for n in (0..nodes).filter(|&n| index[n] == NONE) {
            members[sol.unit_of[n] as usize].push(n);
        }
        let mut stub_units: Vec<Vec<u32>> = vec![Vec::new(); kept.switches.len()];
        for (u, &rep) in kept.stub_classes.iter().enumerate() {
            if rep == usize::MAX {
                continue;
            }
            for &(m, _) in &sol.adjacency[rep] {
                if let Some(list) = stub_units.get_mut(index[m] as usize) {
                    if list.last() != Some(&(u as u32)) {
                        list.push(u as u32);
                    }
                }
            }
        }
        let cells = kept.switches.len() * sol.origin_sets.len();
        Snapshot {
            words: kept.bits.len().checked_div(cells).unwrap_or(0),
            index,
            kept,
            class_members: members.into_iter().map(Arc::from).collect(),
            stub_units,
        }
    }

    fn state(&self, set: usize, i: usize) -> (State, &[u64]) {
        let cell = set * self.kept.switches.len() + i;
        let bits = &self.kept.bits[cell * self.words..(cell + 1) * self.words];
        (self.kept.states[cell], bits)
    }
}

/// Stubs that lost a link, by base class and live links: one computation each.
#[derive(Debug)]
pub struct StubGroup {
    /// Their unit in the unfailed fabric.
    pub unit: u32,
    pub members: Vec<NodeId>,
}

/// One failure, prepared: its links, the nodes it starts at, the stubs it touches.
pub struct Down {
    links: Vec<LinkId>,
    lost: FxHashMap<NodeId, (u32, u32)>,
    /// Switches at the failed links' ends, each with the nodes at their other ends.
    seeds: Vec<(NodeId, Vec<NodeId>)>,
    pub stub_groups: Vec<StubGroup>,
    /// Per base unit, its members that lost a link (sorted).
    affected: FxHashMap<u32, Vec<NodeId>>,
}

/// Stubs compared as one: a base class's members that lost no link, or a [`StubGroup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stubs {
    Unit(u32),
    Group(usize),
}

/// What one origin set's re-propagation decided: switches and stub classes whose group
/// may differ from the snapshot's (None: no route), groups as ids of the repropagator's.
#[derive(Debug, Default)]
pub struct SetChange {
    pub switches: Vec<(NodeId, Option<u32>)>,
    pub stubs: Vec<(Stubs, Option<u32>)>,
}

impl SetChange {
    pub fn is_empty(&self) -> bool {
        self.switches.is_empty() && self.stubs.is_empty()
    }
}

/// The unfailed solution and its snapshot, ready to re-propagate failures.
pub struct Engine<'a> {
    sol: &'a Solution<'a>,
    snap: &'a Snapshot,
    ctx: Context<'a>,
}

impl<'a> Engine<'a> {
    pub fn new(sol: &'a Solution<'a>, snap: &'a Snapshot, options: &'a Options) -> Engine<'a> {
        let shared = aspath::SharedAs::new(sol.topo);
        let ctx = Context::new(
            sol.topo,
            &sol.adjacency,
            options,
            &sol.unit_of,
            &snap.kept.stub_classes,
            sol.units,
            shared,
        );
        Engine { sol, snap, ctx }
    }

    /// The links between each pair, the switches at their ends, and the stubs that lose
    /// a link grouped by base class and remaining links.
    pub fn prepare(&self, pairs: &[(NodeId, NodeId)]) -> Down {
        let (adj, ctx) = (&self.sol.adjacency, &self.ctx);
        let mut links = Vec::new();
        let mut lost: FxHashMap<NodeId, (u32, u32)> = FxHashMap::default();
        for &(a, b) in pairs {
            for (x, y) in [(a, b), (b, a)] {
                let start = adj[x].partition_point(|&(n, _)| n < y);
                for &(_, l) in adj[x][start..].iter().take_while(|&&(n, _)| n == y) {
                    if x == a {
                        links.push(l);
                    }
                    let e = lost.entry(x).or_insert((0, 0));
                    e.0 += 1;
                    e.1 += u32::from(ctx.stage[y] < ctx.stage[x]);
                }
            }
        }
        links.sort_unstable();
        links.dedup();
        let mut ends: FxHashMap<NodeId, Vec<NodeId>> = FxHashMap::default();
        for &(a, b) in pairs {
            for (x, y) in [(a, b), (b, a)] {
                if !ctx.stub[x] {
                    ends.entry(x).or_default().push(y);
                }
            }
        }
        let mut seeds: Vec<(NodeId, Vec<NodeId>)> = ends.into_iter().collect();
        for (_, ys) in &mut seeds {
            ys.sort_unstable();
        }
        seeds.sort_unstable();
        let mut stubs: Vec<NodeId> = lost.keys().copied().filter(|&n| ctx.stub[n]).collect();
        stubs.sort_unstable();
        let down: FxHashSet<LinkId> = links.iter().copied().collect();
        let mut by_links: FxHashMap<(u32, Vec<LinkIdx>), usize> = FxHashMap::default();
        let mut stub_groups: Vec<StubGroup> = Vec::new();
        let mut affected: FxHashMap<u32, Vec<NodeId>> = FxHashMap::default();
        for n in stubs {
            let unit = self.sol.unit_of[n];
            affected.entry(unit).or_default().push(n);
            // Within a class every member has the same neighbors in the same order: the
            // positions of the live links identify what is left.
            let live: Vec<LinkIdx> = adj[n]
                .iter()
                .enumerate()
                .filter(|(_, &(_, l))| !down.contains(&l))
                .map(|(i, _)| i as LinkIdx)
                .collect();
            let g = *by_links.entry((unit, live)).or_insert_with(|| {
                stub_groups.push(StubGroup {
                    unit,
                    members: Vec::new(),
                });
                stub_groups.len() - 1
            });
            stub_groups[g].members.push(n);
        }
        Down {
            links,
            lost,
            seeds,
            stub_groups,
            affected,
        }
    }

    pub fn repropagator(&self) -> Repropagator<'_> {
        let nodes = self.sol.topo.nodes.len();
        let mut w = Worker::new(&self.ctx);
        w.down = vec![false; self.sol.topo.links.len()];
        Repropagator {
            engine: self,
            w,
            stamp: vec![0; nodes],
            epoch: 0,
            status: vec![UNTOUCHED; nodes],
            pending: Vec::new(),
            unit_stamp: vec![0; self.sol.units],
            dirty_units: Vec::new(),
            same: FxHashMap::default(),
            set: 0,
            groups: Vec::new(),
        }
    }

    pub fn options(&self) -> &Options {
        self.ctx.options
    }

    /// The stubs of base class `unit` in node order.
    pub fn class_members(&self, unit: u32) -> &Arc<[NodeId]> {
        &self.snap.class_members[unit as usize]
    }

    /// Members of base class `unit` that lose a link in `down` (sorted).
    pub fn affected<'d>(&self, down: &'d Down, unit: u32) -> &'d [NodeId] {
        down.affected.get(&unit).map_or(&[], |v| v.as_slice())
    }
}

type LinkIdx = u32;

const UNTOUCHED: u8 = 0;
const PENDING: u8 = 1;
const FINAL: u8 = 2;

/// One thread's re-propagations (one failure at a time, its origin sets in turn).
pub struct Repropagator<'a> {
    engine: &'a Engine<'a>,
    w: Worker<'a>,
    /// Nodes whose state is loaded for the current (failure, set).
    stamp: Vec<u32>,
    epoch: u32,
    status: Vec<u8>,
    pending: Vec<NodeId>,
    unit_stamp: Vec<u32>,
    dirty_units: Vec<u32>,
    /// Per level, the first switch decided for each signature (see `group_once`).
    same: FxHashMap<u64, NodeId>,
    set: usize,
    /// The interner's groups with their weights, built when asked for.
    groups: Vec<Option<SharedGroup>>,
}

impl<'a> Repropagator<'a> {
    /// Applies `down` (until [`Repropagator::end`]); forgets the previous failure's groups.
    pub fn begin(&mut self, down: &Down) {
        for &l in &down.links {
            self.w.down[l] = true;
        }
        self.w.lost.clone_from(&down.lost);
        self.w.interner = Interner::default();
        self.groups.clear();
    }

    pub fn end(&mut self, down: &Down) {
        for &l in &down.links {
            self.w.down[l] = false;
        }
        self.w.lost.clear();
    }

    /// A group id of [`SetChange`], with its weights.
    pub fn group(&mut self, id: u32) -> &SharedGroup {
        let i = id as usize;
        if self.groups.len() <= i {
            self.groups.resize(i + 1, None);
        }
        let (key, flags) = &self.w.interner.groups[i];
        let options = self.w.ctx.options;
        self.groups[i].get_or_insert_with(|| shared_group(key.clone(), *flags, options))
    }

    /// Origin set `s` under the failure of [`Repropagator::begin`].
    pub fn set(&mut self, down: &Down, s: usize) -> SetChange {
        let engine = self.engine;
        self.next_epoch();
        self.set = s;
        for &o in &engine.sol.origin_sets[s].origins {
            self.load_origin(o);
        }
        for (n, ends) in &down.seeds {
            self.load(*n);
            if self.status[*n] == UNTOUCHED && self.hit(s, *n, ends) {
                self.status[*n] = PENDING;
                self.pending.push(*n);
            }
        }
        let mut out = SetChange::default();
        self.levels(&mut out);
        for n in std::mem::take(&mut self.pending) {
            self.unreached(n);
            out.switches.push((n, None));
        }
        self.stubs(down, &mut out);
        out
    }

    /// Whether switch `n` losing its links to `ends` changes its own state for set `s`:
    /// in draft mode only a lost member does (nothing else enters the group or the
    /// advertisement); in averaged mode also a lost outgoing link (the divisor N).
    fn hit(&self, s: usize, n: NodeId, ends: &[NodeId]) -> bool {
        let sol = self.engine.sol;
        if self.engine.ctx.options.mode == Mode::Averaged {
            return self.w.dist[n] != u32::MAX;
        }
        sol.group_id(s, n).is_some_and(|g| {
            let members = &sol.groups[g as usize].members;
            members.iter().any(|m| ends.binary_search(&m.0).is_ok())
        })
    }

    /// Decides pending switches level by level (see the module doc).
    fn levels(&mut self, out: &mut SetChange) {
        let max_old = self.engine.snap.kept.max_dist[self.set];
        let limit = self.engine.snap.kept.switches.len() as u32 + 2;
        let mut previous = true;
        let mut k = 1;
        while !self.pending.is_empty() && k <= limit && (previous || k - 1 <= max_old) {
            let list = std::mem::take(&mut self.pending);
            self.same.clear();
            let mut waiting = Vec::new();
            previous = false;
            for n in list {
                match self.decide(n, k) {
                    Some((group, changed)) => {
                        previous = true;
                        out.switches.push((n, group));
                        if changed {
                            self.mark(n, k);
                        }
                    }
                    None => {
                        // Not at its old distance any more: its state changed.
                        if self.w.dist[n] == k {
                            self.mark(n, k);
                        }
                        waiting.push(n);
                    }
                }
            }
            self.pending.extend(waiting);
            k += 1;
        }
    }

    fn next_epoch(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamp.fill(0);
            self.unit_stamp.fill(0);
            self.epoch = 1;
        }
        self.dirty_units.clear();
    }

    /// Puts node `n`'s snapshot state for the current set into the worker.
    fn load(&mut self, n: NodeId) {
        if self.stamp[n] == self.epoch {
            return;
        }
        self.stamp[n] = self.epoch;
        self.status[n] = UNTOUCHED;
        let snap = self.engine.snap;
        let i = snap.index[n];
        let (state, bits) = if i == NONE {
            (UNREACHED, None)
        } else {
            let (state, bits) = snap.state(self.set, i as usize);
            (state, Some(bits))
        };
        let w = &mut self.w;
        w.dist[n] = state.dist;
        w.flags[n] = state.flags;
        w.path[n] = state.path;
        w.link_value[n] = state.link_value;
        w.lb[n] = state.lb;
        match bits {
            Some(b) => w.as_bits.set_row(n, b),
            None => w.as_bits.clear(n),
        }
    }

    fn load_origin(&mut self, o: NodeId) {
        self.stamp[o] = self.epoch;
        self.status[o] = FINAL;
        let w = &mut self.w;
        w.dist[o] = 0;
        w.flags[o] = UP | ORIGIN;
        w.path[o] = bandwidth::ORIGIN_MAX_GBPS;
        w.link_value[o] = f64::NAN;
        w.lb[o] = f64::NAN;
        w.as_bits.join(o, w.ctx.shared.of(o), std::iter::empty());
    }

    fn unreached(&mut self, n: NodeId) {
        self.status[n] = FINAL;
        let w = &mut self.w;
        w.dist[n] = u32::MAX;
        w.flags[n] = 0;
        w.path[n] = f64::NAN;
        w.link_value[n] = f64::NAN;
        w.lb[n] = f64::NAN;
        w.as_bits.clear(n);
    }

    /// Switch `n`, whose state changed at level `k`: its neighbors not yet final go on
    /// the list, and the stub classes behind it are computed again.
    fn mark(&mut self, n: NodeId, k: u32) {
        let engine = self.engine;
        for &(x, _) in &engine.ctx.core[n] {
            let x = x as NodeId;
            self.load(x);
            if self.status[x] != UNTOUCHED || self.w.flags[x] & ORIGIN != 0 {
                continue;
            }
            // Unchanged and at most this level away: its members are closer than `n`.
            if self.w.dist[x] <= k {
                continue;
            }
            self.status[x] = PENDING;
            self.pending.push(x);
        }
        let i = engine.snap.index[n] as usize;
        for &u in &engine.snap.stub_units[i] {
            if self.unit_stamp[u as usize] != self.epoch {
                self.unit_stamp[u as usize] = self.epoch;
                self.dirty_units.push(u);
            }
        }
    }

    /// Switch `n` at level `k`: its group from its neighbors at k-1, or None (wait).
    /// Returns the group (None: no route at all) and whether its state changed.
    fn decide(&mut self, n: NodeId, k: u32) -> Option<(Option<u32>, bool)> {
        let ctx = self.engine.ctx_ref();
        let mut members = std::mem::take(&mut self.w.scratch);
        members.clear();
        for &(m, l) in &ctx.adj[n] {
            // A stub advertises only as an origin, and origins are loaded already.
            if !self.w.live(l) || (ctx.stub[m] && self.stamp[m] != self.epoch) {
                continue;
            }
            self.load(m);
            if self.status[m] == PENDING || self.w.dist[m] != k - 1 {
                continue;
            }
            let advertises = if ctx.stub[m] {
                self.w.flags[m] & ORIGIN != 0
            } else {
                self.w.flags[m] & UP != 0 || ctx.stage[n] < ctx.stage[m]
            };
            if advertises && !(ctx.shared.any() && self.w.as_bits.holds(m, ctx.shared.of(n))) {
                members.push((m as u32, l as u32));
            }
        }
        if members.is_empty() {
            self.w.scratch = members;
            return None;
        }
        let w = &mut self.w;
        let before = (w.dist[n], w.flags[n], w.path[n], w.link_value[n], w.lb[n]);
        let bits_before = w.as_bits.row(n).to_vec();
        w.dist[n] = k;
        w.flags[n] = 0;
        w.path[n] = f64::NAN;
        w.link_value[n] = f64::NAN;
        w.lb[n] = f64::NAN;
        w.as_bits.join(
            n,
            ctx.shared.of(n),
            members.iter().map(|&(m, _)| m as NodeId),
        );
        let averaged = ctx.options.mode == Mode::Averaged;
        let group = self.group_once(n, &members);
        let w = &mut self.w;
        if averaged && !ctx.frr[n] {
            w.path[n] = w.averaged_value(n, &members);
        }
        self.status[n] = FINAL;
        let after = (w.dist[n], w.flags[n], w.path[n], w.link_value[n], w.lb[n]);
        let same = before.0 == after.0
            && before.1 == after.1
            && same_value(before.2, after.2)
            && same_value(before.3, after.3)
            && same_value(before.4, after.4)
            && bits_before == w.as_bits.row(n);
        w.scratch = members;
        Some(((group != NONE).then_some(group), !same))
    }

    /// Switch `n`'s group and advertisement (before averaged mode's division) over
    /// `members`, computed once per level for switches with the same role and members
    /// over links of the same capacities (all leaves of a plane that lost a spine), as
    /// the full propagation does.
    fn group_once(&mut self, n: NodeId, members: &[M]) -> u32 {
        let w = &mut self.w;
        let signature = w.signature(n, members);
        let twin = self
            .same
            .get(&signature)
            .copied()
            .filter(|&t| w.same_inputs(t, n, members));
        match twin {
            Some(t) => w.copy_twin(n, t),
            None => {
                self.same.insert(signature, n);
                let g = w.group(n, members);
                w.path_sum[n] = w.path[n];
                w.group_of[n] = g;
                w.members_of[n].clear();
                w.members_of[n].extend_from_slice(members);
                g
            }
        }
    }

    /// The stub classes behind changed switches, and the stubs that lost a link.
    fn stubs(&mut self, down: &Down, out: &mut SetChange) {
        let engine = self.engine;
        for u in std::mem::take(&mut self.dirty_units) {
            let affected = engine.affected(down, u);
            let members = engine.class_members(u);
            let rep = members.iter().find(|n| affected.binary_search(n).is_err());
            if let Some(&rep) = rep {
                let g = self.stub_group(rep);
                out.stubs.push((Stubs::Unit(u), g));
            }
        }
        for (i, g) in down.stub_groups.iter().enumerate() {
            let group = self.stub_group(g.members[0]);
            out.stubs.push((Stubs::Group(i), group));
        }
    }

    /// Stub `rep`'s group over its live links, as the full propagation computes it.
    fn stub_group(&mut self, rep: NodeId) -> Option<u32> {
        let ctx = self.engine.ctx_ref();
        let mut best = u32::MAX;
        for &(m, l) in &ctx.adj[rep] {
            self.load(m);
            if self.w.live(l) && self.w.advertises_to_stub(m, rep) {
                best = best.min(self.w.dist[m]);
            }
        }
        if best == u32::MAX {
            return None;
        }
        let mut members = std::mem::take(&mut self.w.scratch);
        members.clear();
        for &(m, l) in &ctx.adj[rep] {
            if self.w.live(l) && self.w.dist[m] == best && self.w.advertises_to_stub(m, rep) {
                members.push((m as u32, l as u32));
            }
        }
        let g = self.w.group(rep, &members);
        self.w.scratch = members;
        (g != NONE).then_some(g)
    }
}

impl<'a> Engine<'a> {
    fn ctx_ref(&self) -> &Context<'a> {
        &self.ctx
    }
}

/// Equal values, NaN (no value) equal to itself.
fn same_value(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}
