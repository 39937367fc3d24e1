//! The incremental engine on small written-out fabrics, each built for one branch of it:
//! what it decides again is checked against the failed fabric solved whole (`solve`),
//! and where the case is about how far the work goes, against the list of switches it
//! decided. No AS numbers unless a case says so: no AS is shared, so only the
//! valley-free rule limits where a route goes.

use super::incremental::{Engine, Repropagator, SetChange, Stubs};
use super::*;
use crate::topology::parse;
use std::path::Path;

fn topo(text: &str) -> Topology {
    parse(Path::new("t.yaml"), text).unwrap()
}

/// `t` with a link the loader refuses (two switches of one stage): the engine must
/// equal the full solve on any fabric, and such a link reaches branches the loader's
/// fabrics do not.
fn with_link(mut t: Topology, a: &str, b: &str, gbps: f64) -> Topology {
    let (a, b) = (t.node_id(a).unwrap(), t.node_id(b).unwrap());
    t.add_link(a, b, gbps, None);
    t
}

fn options(mode: Mode) -> Options {
    Options {
        mode,
        threads: 1,
        ..Default::default()
    }
}

/// A group as comparable data: ECMP and FRR flags, members (neighbor, parallel index,
/// bandwidth bits), weights.
type Content = (bool, bool, Vec<(NodeId, u32, u64)>, Vec<u32>);

fn content(g: &SharedGroup) -> Content {
    let members = g
        .members
        .iter()
        .map(|m| (m.0, m.1, m.2.to_bits()))
        .collect();
    (g.ecmp, g.frr, members, g.weights.weights.clone())
}

/// Per origin set, every node's group (None: no route; origins left out as None).
type Groups = Vec<Vec<Option<Content>>>;

fn ids(t: &Topology, pairs: &[(&str, &str)]) -> Vec<(NodeId, NodeId)> {
    let id = |n: &str| t.node_id(n).unwrap();
    pairs.iter().map(|&(a, b)| (id(a), id(b))).collect()
}

/// The failed fabric solved whole.
fn full(t: &Topology, options: &Options, pairs: &[(&str, &str)]) -> Groups {
    let mut failed = t.clone();
    for &(a, b) in pairs {
        Change::Fail(a.into(), b.into()).apply(&mut failed).unwrap();
    }
    let sol = solve(&failed, options);
    let sets = sol.origin_sets.len();
    (0..sets)
        .map(|s| {
            let origins = &sol.origin_sets[s].origins;
            (0..t.nodes.len())
                .map(|n| match origins.contains(&n) {
                    true => None,
                    false => sol.group_id(s, n).map(|g| content(&sol.groups[g as usize])),
                })
                .collect()
        })
        .collect()
}

/// `pairs` failed through `rep`: per origin set its change, and every node's group (the
/// snapshot's where the change does not name the node).
fn repropagate(
    (sol, engine, rep): (&Solution, &Engine, &mut Repropagator),
    pairs: &[(NodeId, NodeId)],
) -> (Vec<SetChange>, Groups) {
    let down = engine.prepare(pairs);
    rep.begin(&down);
    let (mut changes, mut groups) = (Vec::new(), Vec::new());
    for s in 0..sol.origin_sets.len() {
        let change = rep.set(&down, s);
        let origins = &sol.origin_sets[s].origins;
        let mut got: Vec<Option<Content>> = (0..sol.topo.nodes.len())
            .map(|n| match origins.contains(&n) {
                true => None,
                false => sol.group_id(s, n).map(|g| content(&sol.groups[g as usize])),
            })
            .collect();
        for &(n, g) in &change.switches {
            got[n] = g.map(|id| content(rep.group(id)));
        }
        for &(which, g) in &change.stubs {
            let g = g.map(|id| content(rep.group(id)));
            let nodes: Vec<NodeId> = match which {
                Stubs::Unit(u) => {
                    let skip = engine.affected(&down, u);
                    let all = engine.class_members(u).iter().copied();
                    all.filter(|n| skip.binary_search(n).is_err()).collect()
                }
                Stubs::Group(i) => down.stub_groups[i].members.clone(),
            };
            for n in nodes.into_iter().filter(|n| !origins.contains(n)) {
                got[n] = g.clone();
            }
        }
        changes.push(change);
        groups.push(got);
    }
    rep.end(&down);
    (changes, groups)
}

/// `pairs` failed incrementally on `t`, checked node by node against the failed fabric
/// solved whole. Returns the changes and the groups.
fn fail(t: &Topology, options: &Options, pairs: &[(&str, &str)]) -> (Vec<SetChange>, Groups) {
    let (sol, snap) = solve_kept(t, options);
    let engine = Engine::new(&sol, &snap, options);
    let mut rep = engine.repropagator();
    let (changes, groups) = repropagate((&sol, &engine, &mut rep), &ids(t, pairs));
    assert_equal(t, &groups, &full(t, options, pairs));
    (changes, groups)
}

fn assert_equal(t: &Topology, got: &Groups, expected: &Groups) {
    for (s, (got, expected)) in got.iter().zip(expected).enumerate() {
        for (n, (g, e)) in got.iter().zip(expected).enumerate() {
            assert_eq!(g, e, "set {s}, node {}", t.nodes[n].name);
        }
    }
}

/// (neighbor, bandwidth) per member of `n`'s group for set `s`.
fn members(t: &Topology, groups: &Groups, s: usize, n: &str) -> Option<Vec<(String, f64)>> {
    let (_, _, list, _) = groups[s][t.node_id(n).unwrap()].as_ref()?;
    let name = |m: NodeId| t.nodes[m].name.clone();
    Some(
        list.iter()
            .map(|&(m, _, b)| (name(m), f64::from_bits(b)))
            .collect(),
    )
}

/// Names of the switches a change decided again.
fn decided(t: &Topology, change: &SetChange) -> Vec<String> {
    let names = change
        .switches
        .iter()
        .map(|&(n, _)| t.nodes[n].name.clone());
    names.collect()
}

fn named(list: &[(&str, f64)]) -> Vec<(String, f64)> {
    list.iter().map(|&(n, b)| (n.to_string(), b)).collect()
}

/// A 5-stage sliver: L1 in PoD 1 under S1; super-spines SS1 and SS2 above S1; PoD 2's
/// spines S3 and S4 under both super-spines, L2 under both. 100G everywhere. For L1's
/// prefix S1 is at distance 1, SS1 and SS2 at 2, S3 and S4 at 3 (remote spines, learned
/// from above), L2 at 4.
const FIVE_STAGE: &str = "
nodes:
  - {name: L1, role: leaf, prefixes: [10.0.1.0/24]}
  - {name: S1, role: spine}
  - {name: SS1, role: super-spine}
  - {name: SS2, role: super-spine}
  - {name: S3, role: spine}
  - {name: S4, role: spine}
  - {name: L2, role: leaf}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: S1, b: SS1, gbps: 100}
  - {a: S1, b: SS2, gbps: 100}
  - {a: SS1, b: S3, gbps: 100}
  - {a: SS2, b: S3, gbps: 100}
  - {a: SS1, b: S4, gbps: 100}
  - {a: SS2, b: S4, gbps: 100}
  - {a: S3, b: L2, gbps: 100}
  - {a: S4, b: L2, gbps: 100}
";

/// Draft mode, SS1-S3 down: S3 loses a member, so it is decided again, but what it
/// advertises stays: a remote spine passes on the transitive value it received, 100 from
/// SS1 and SS2 alike (S1's sum, min(100, origin's maximum)), the largest of those from
/// SS2 alone is still 100; distance 3, no up flag. Its state is as before, so nothing
/// past it (L2) is decided again, and SS1, which kept its member S1, not at all.
#[test]
fn a_failure_that_changes_nothing_stops_at_its_ends() {
    let t = topo(FIVE_STAGE);
    let (changes, groups) = fail(&t, &options(Mode::Draft), &[("SS1", "S3")]);
    assert_eq!(decided(&t, &changes[0]), ["S3"]);
    assert!(changes[0].stubs.is_empty());
    // SS2 attaches the 100G of its link toward S1 as the non-transitive value: S3's
    // only route weighs 100.
    assert_eq!(
        members(&t, &groups, 0, "S3"),
        Some(named(&[("SS2", 100.0)]))
    );
}

/// Draft mode, S4-L2 down: L2 is decided again from S3 alone. S3 learned the route from
/// above (no up flag) but advertises it downward all the same: L2 keeps the route,
/// min(100, S3's 100).
#[test]
fn a_remote_spine_advertises_down_without_the_up_flag() {
    let t = topo(FIVE_STAGE);
    let (_, groups) = fail(&t, &options(Mode::Draft), &[("S4", "L2")]);
    assert_eq!(members(&t, &groups, 0, "L2"), Some(named(&[("S3", 100.0)])));
}

/// The fabric of `analyze`'s worked example without AS numbers: S1 has 100G to L1 and
/// 400G to L2, S2 100G to both.
const SQUARE: &str = "
nodes:
  - {name: S1, role: spine}
  - {name: S2, role: spine}
  - {name: L1, role: leaf, prefixes: [10.0.1.0/24]}
  - {name: L2, role: leaf, prefixes: [10.0.2.0/24]}
links:
  - {a: S1, b: L1, gbps: 100}
  - {a: S2, b: L1, gbps: 100}
  - {a: S1, b: L2, gbps: 400}
  - {a: S2, b: L2, gbps: 100}
";

/// S1-L1 down, draft mode, no AS shared: L2 learned L1's prefix from above (S2), so it
/// does not advertise it up to S1, and S1 has no route (nothing but valley-freedom stops
/// it: no AS-path loop here). L2 keeps S2 alone, min(100, 100) = 100.
#[test]
fn a_spine_cut_from_the_origin_gets_no_route_back_up_through_a_leaf() {
    let t = topo(SQUARE);
    let (_, groups) = fail(&t, &options(Mode::Draft), &[("S1", "L1")]);
    assert_eq!(members(&t, &groups, 0, "S1"), None);
    assert_eq!(members(&t, &groups, 0, "L2"), Some(named(&[("S2", 100.0)])));
}

/// One repropagator for two failures in turn, as `analyze` runs them: the second
/// (S2-L2) sees only its own link down, not S1-L1 of the first: S1 keeps its route to
/// L1 (100), and L2 reaches L1 through S1, min(400, S1's 100) = 100.
#[test]
fn a_repropagator_forgets_the_previous_failure() {
    let t = topo(SQUARE);
    let options = options(Mode::Draft);
    let (sol, snap) = solve_kept(&t, &options);
    let engine = Engine::new(&sol, &snap, &options);
    let mut rep = engine.repropagator();
    let first = [("S1", "L1")];
    let (_, groups) = repropagate((&sol, &engine, &mut rep), &ids(&t, &first));
    assert_equal(&t, &groups, &full(&t, &options, &first));
    let second = [("S2", "L2")];
    let (_, groups) = repropagate((&sol, &engine, &mut rep), &ids(&t, &second));
    assert_equal(&t, &groups, &full(&t, &options, &second));
    assert_eq!(members(&t, &groups, 0, "S1"), Some(named(&[("L1", 100.0)])));
    assert_eq!(members(&t, &groups, 0, "L2"), Some(named(&[("S1", 100.0)])));
}

/// The square plus an island, L9-S9, with its own prefix. Failing L9-S9 touches no route
/// toward L1 or L2 (neither island switch had one): those destinations come out with no
/// change at all, and only L9's is propagated again (S9 loses its route).
#[test]
fn a_failure_that_touches_no_route_of_a_destination_leaves_it_out() {
    let t = topo(
        "
nodes:
  - {name: S1, role: spine}
  - {name: S2, role: spine}
  - {name: L1, role: leaf, prefixes: [10.0.1.0/24]}
  - {name: L2, role: leaf, prefixes: [10.0.2.0/24]}
  - {name: L9, role: leaf, prefixes: [10.0.9.0/24]}
  - {name: S9, role: spine}
links:
  - {a: S1, b: L1, gbps: 100}
  - {a: S2, b: L1, gbps: 100}
  - {a: S1, b: L2, gbps: 100}
  - {a: S2, b: L2, gbps: 100}
  - {a: L9, b: S9, gbps: 100}
",
    );
    let (changes, groups) = fail(&t, &options(Mode::Draft), &[("L9", "S9")]);
    assert!(changes[0].is_empty() && changes[1].is_empty());
    assert!(!changes[2].is_empty());
    assert_eq!(members(&t, &groups, 2, "S9"), None);
}

/// L2 hangs off S1 and also off super-spine SS1 directly; SS1 is above S1. For L1's
/// prefix S1 is at 1, SS1 and L2 at 2: 2 is the farthest distance. With S1-L2 down, L2's
/// only route is SS1's, one hop past that farthest level (3), reached after a level at
/// which nothing was decided. Draft: SS1 passes on S1's 100 (and attaches its 100G link
/// toward S1), L2 weighs it min(100, 100).
#[test]
fn a_switch_can_land_past_the_old_farthest_level() {
    let t = topo(
        "
nodes:
  - {name: L1, role: leaf, prefixes: [10.0.1.0/24]}
  - {name: S1, role: spine}
  - {name: SS1, role: super-spine}
  - {name: L2, role: leaf}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: S1, b: SS1, gbps: 100}
  - {a: S1, b: L2, gbps: 100}
  - {a: SS1, b: L2, gbps: 100}
",
    );
    let (_, groups) = fail(&t, &options(Mode::Draft), &[("S1", "L2")]);
    assert_eq!(
        members(&t, &groups, 0, "L2"),
        Some(named(&[("SS1", 100.0)]))
    );
}

/// L2 and L3 under S1, with a leaf-to-leaf link between them (added in code,
/// `with_link`); H1 and H2 on L2. For L1's prefix both leaves are at 2, learned from
/// above.
const LEAF_LINK: &str = "
nodes:
  - {name: L1, role: leaf, prefixes: [10.0.1.0/24]}
  - {name: S1, role: spine}
  - {name: L2, role: leaf}
  - {name: L3, role: leaf}
  - {name: H1, role: host}
  - {name: H2, role: host}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: S1, b: L2, gbps: 100}
  - {a: S1, b: L3, gbps: 100}
  - {a: L2, b: H1, gbps: 100}
  - {a: L2, b: H2, gbps: 100}
";

/// Averaged mode, L2-L3 down. L2 learned the route from above, so it divides by its
/// downward links only (H1, H2: N = 2); the lost link to L3, on its own stage, is not one
/// of them. S1: 100 over N = 3 links - 1 incoming = 2, 50; L2: 50 / 2 = 25, what H1 and
/// H2 weigh it, as before the failure.
#[test]
fn a_lost_link_on_the_same_stage_is_not_a_downward_one() {
    let t = with_link(topo(LEAF_LINK), "L2", "L3", 100.0);
    let (_, groups) = fail(&t, &options(Mode::Averaged), &[("L2", "L3")]);
    assert_eq!(members(&t, &groups, 0, "H1"), Some(named(&[("L2", 25.0)])));
}

/// Draft mode, S1-L3 down: L3's one other link goes to L2, which learned the route from
/// above and so advertises it only downward, not sideways: L3 has no route.
#[test]
fn a_leaf_that_learned_from_above_does_not_advertise_sideways() {
    let t = with_link(topo(LEAF_LINK), "L2", "L3", 100.0);
    let (_, groups) = fail(&t, &options(Mode::Draft), &[("S1", "L3")]);
    assert_eq!(members(&t, &groups, 0, "L3"), None);
}

/// Averaged mode. Spine S0 originates the prefix; L1 under it (and under S1, which L1
/// cannot advertise to: it learned from above) has H1 and H2. L1 divides what it got,
/// min(100, the origin's maximum) = 100, by its downward links: H1 and H2 (the link up
/// to the originating spine is not downward), 50. With L1-S1 down L1 is decided again
/// and comes out the same: H1 still weighs L1 50.
#[test]
fn a_leaf_under_an_originating_spine_divides_by_its_downward_links() {
    let t = topo(
        "
nodes:
  - {name: S0, role: spine, prefixes: [10.0.0.0/24]}
  - {name: S1, role: spine}
  - {name: L1, role: leaf}
  - {name: H1, role: host}
  - {name: H2, role: host}
links:
  - {a: S0, b: L1, gbps: 100}
  - {a: S1, b: L1, gbps: 100}
  - {a: L1, b: H1, gbps: 100}
  - {a: L1, b: H2, gbps: 100}
",
    );
    let (_, groups) = fail(&t, &options(Mode::Averaged), &[("L1", "S1")]);
    assert_eq!(members(&t, &groups, 0, "H1"), Some(named(&[("L1", 50.0)])));
}

/// FRR spine S1 has the prefix from L1 and L2 (both originate it); FRR spine S2 hears it
/// from S1 over a spine-to-spine link (added in code, `with_link`). L1's link is 2^32 B/s / 1.25e8 = 34.359738368G,
/// what L1 sends S1 in both modes (its maximum capped by the link): FRR reads 2^32
/// bytes/s modulo 2^32, 0. S1's cumulative Link Bandwidth is the sum of
/// its paths' values, 0 + L2's; with S1-L2 down it is 0, which FRR does not send. S1
/// keeps its distance, flags and passed-on value (from L1, the lowest router id) and
/// changes only by that: S2 then gets no Link Bandwidth from S1, and goes ECMP.
#[test]
fn a_link_bandwidth_that_goes_missing_is_a_change() {
    let t = topo(
        "
nodes:
  - {name: L1, role: leaf, prefixes: [10.0.0.0/24]}
  - {name: L2, role: leaf, prefixes: [10.0.0.0/24]}
  - {name: S1, role: spine, target: frr}
  - {name: S2, role: spine, target: frr}
links:
  - {a: L1, b: S1, gbps: 34.359738368}
  - {a: L2, b: S1, gbps: 100}
",
    );
    let t = with_link(t, "S1", "S2", 100.0);
    assert_eq!(link_bandwidth::frr_read(34.359738368), 0);
    for mode in [Mode::Draft, Mode::Averaged] {
        let (_, groups) = fail(&t, &options(mode), &[("S1", "L2")]);
        let s2 = groups[0][t.node_id("S2").unwrap()].as_ref().unwrap();
        // ECMP over the one link: its capacity.
        assert!(s2.0 && s2.1, "{mode:?}");
        assert_eq!(members(&t, &groups, 0, "S2"), Some(named(&[("S1", 100.0)])));
    }
}
