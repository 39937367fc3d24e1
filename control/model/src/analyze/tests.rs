use super::*;
use crate::bandwidth::Mode;
use crate::sim::incremental::Stubs;
use crate::sim::Change;
use crate::topology::{gen, parse, NodeId};
use rustc_hash::FxHashMap;

fn options(mode: Mode, max_group_size: Option<u32>) -> sim::Options {
    sim::Options {
        mode,
        max_group_size,
        ..Default::default()
    }
}

/// The single failure (a link, a node or a plane) named `name`.
fn single(t: &Topology, name: &str) -> failures::Failure {
    let f = failures::singles(t).into_iter().find(|f| f.name == name);
    f.unwrap_or_else(|| panic!("no failure {name}"))
}

/// S1 has 100G to L1 and 400G to L2, S2 100G to both. Draft, worked by hand: L2 reaches
/// L1's prefix via S1 at min(400, 100) = 100 (300 stranded) and via S2 at 100. With
/// S1-L1 down, S1 has no route to L1 (valley-free: not back up through L2), L2 keeps
/// S2 alone: demand 200 over capacity 100 = 2.0, and the 300 stranded on L2-S1 for that
/// destination are gone. L1 toward L2's prefix keeps S2 alone too: 200 / 100.
#[test]
fn worked_example() {
    let t = parse(
        "t.yaml".as_ref(),
        "nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.0.0/24]}
  - {name: L2, role: leaf, asn: 65002, prefixes: [10.0.1.0/24]}
links:
  - {a: S1, b: L1, gbps: 100}
  - {a: S2, b: L1, gbps: 100}
  - {a: S1, b: L2, gbps: 400}
  - {a: S2, b: L2, gbps: 100}
",
    )
    .unwrap();
    let base = Base::new(&t, &options(Mode::Draft, None));
    let f = single(&t, "S1-L1");
    let r = base.one(&f, false);
    assert_eq!(r.changed_groups, 3);
    assert_eq!(r.unreachable, 1);
    assert_eq!(r.single_path, 2);
    assert_eq!(r.worst_oversubscription, 2.0);
    assert_eq!(r.stranded_gbps, -300.0);
    assert_eq!(r.recomputed, 2);
    let first = &r.destinations[0];
    assert_eq!(first.prefixes, ["10.0.0.0/24".parse::<IpNet>().unwrap()]);
    assert_eq!((first.unreachable_nodes, first.node.as_str()), (1, "L2"));
    assert_eq!(r.destinations[1].node, "L1");
    assert_eq!(r, base.one(&f, true));
}

/// clos3 4 leaves x 2 spines: a leaf down leaves its prefix unreachable for the other 5
/// nodes and ranks first; a spine down halves every leaf's group (12 groups, ratio 2).
#[test]
fn ranking_puts_lost_destinations_first() {
    let t = gen::clos3(4, 2, 100.0, 1);
    let base = Base::new(&t, &options(Mode::Draft, None));
    let reports = analyze(&base, &failures::singles(&t), false);
    assert_eq!(reports[0].failure, "L1");
    assert_eq!(reports[0].unreachable, 5);
    let s1 = reports.iter().find(|r| r.failure == "S1").unwrap();
    assert_eq!(
        (s1.changed_groups, s1.single_path, s1.unreachable),
        (12, 12, 0)
    );
    assert_eq!(s1.worst_oversubscription, 2.0);
    // A link: the spine loses the leaf (1), 3 leaves lose the spine toward it, the leaf
    // loses it toward the 3 others.
    let l = reports.iter().find(|r| r.failure == "S1-L1").unwrap();
    assert_eq!((l.changed_groups, l.unreachable, l.single_path), (7, 1, 6));
}

/// A limit of 3 entries: L2 reaches L1 via S1 at min(400, 300) = 300 and via S2 at 100,
/// 3:1, which fits 3 entries only as 2:1 (reduced). Failing S2-L2 leaves S1 alone: no
/// longer reduced, and demand 400 over 300.
#[test]
fn limit_reductions_are_counted() {
    let t = parse(
        "t.yaml".as_ref(),
        "nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.0.0/24]}
  - {name: L2, role: leaf, asn: 65002}
links:
  - {a: S1, b: L1, gbps: 300}
  - {a: S2, b: L1, gbps: 100}
  - {a: S1, b: L2, gbps: 400}
  - {a: S2, b: L2, gbps: 100}
",
    )
    .unwrap();
    let base = Base::new(&t, &options(Mode::Draft, Some(3)));
    assert_eq!(base.reduced_groups, 1);
    let f = single(&t, "S2-L2");
    let r = base.one(&f, false);
    assert_eq!((r.reduced_groups, r.reduced_change), (0, -1));
    // Demand 400 (300 + 100) over 300.
    assert!((r.worst_oversubscription - 4.0 / 3.0).abs() < 1e-12);
}

/// A random 3-stage fabric with asymmetric capacities: every leaf-spine pair has 0-2
/// links of random capacity.
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
            let mut t = gen::clos3(leaves as u32, spines as u32, 100.0, 1);
            t.links.clear();
            for l in 0..leaves {
                for s in 0..spines {
                    for &c in &caps[l * spines + s] {
                        t.add_link(s, spines + l, c, None);
                    }
                }
            }
            t
        })
}

/// A small multi-plane or 5-stage fabric with a few links degraded at random.
fn random_planes() -> impl proptest::strategy::Strategy<Value = Topology> {
    use proptest::prelude::*;
    (
        any::<bool>(),
        prop::collection::vec((any::<u16>(), prop_oneof![Just(25.0), Just(50.0)]), 0..4),
    )
        .prop_map(|(five, degrades)| {
            let mut t = if five {
                gen::clos5(2, 2, 2, 2, 100.0)
            } else {
                gen::multiplane(&gen::MultiPlane {
                    gpus: 12,
                    planes: 2,
                    rnics_per_leaf: 4,
                    spines_per_plane: 2,
                    ..Default::default()
                })
            };
            let n = t.links.len();
            for (i, g) in degrades {
                t.links[i as usize % n].gbps = g;
            }
            t
        })
}

/// The incremental report equals the full recomputation's, and the groups behind it
/// are those of `fare weights --fail`, node by node.
fn check_all(t: &Topology, mode: Mode, limit: Option<u32>) -> Result<(), String> {
    let base = Base::new(t, &options(mode, limit));
    let mut all = failures::singles(t);
    all.extend(failures::sample_pairs(&all.clone(), 4, 1));
    for f in &all {
        let inc = base.one(f, false);
        let full = Report {
            recomputed: inc.recomputed,
            ..base.one(f, true)
        };
        if inc != full {
            return Err(format!("{}: {inc:?}\n!= {full:?}", f.name));
        }
        let mut failed = t.clone();
        for arg in f.fail_args(t) {
            let (a, b) = arg.split_once('-').ok_or("pair")?;
            Change::Fail(a.into(), b.into())
                .apply(&mut failed)
                .map_err(|e| e.to_string())?;
        }
        let after = sim::solve(&failed, &base.options);
        check_groups(&base, f, &after)?;
    }
    Ok(())
}

/// A group as comparable data: members (neighbor, parallel index, bandwidth bits), weights.
type Content = (Vec<(NodeId, u32, u64)>, Vec<u32>);

fn content(sol: &Solution, s: usize, n: NodeId) -> Option<Content> {
    sol.group_id(s, n)
        .map(|g| as_content(&sol.groups[g as usize]))
}

fn as_content(g: &crate::sim::SharedGroup) -> Content {
    let members = g
        .members
        .iter()
        .map(|m| (m.0, m.1, m.2.to_bits()))
        .collect();
    (members, g.weights.weights.clone())
}

/// The re-propagation's groups are the failed fabric's, node by node and set by set: the
/// switches and stub classes it decided again, and the snapshot's for every other node.
fn check_groups(base: &Base, f: &Failure, after: &Solution) -> Result<(), String> {
    let engine = base.engine();
    let mut rep = engine.repropagator();
    let down = engine.prepare(&f.pairs);
    rep.begin(&down);
    for s in 0..base.solution.origin_sets.len() {
        let change = rep.set(&down, s);
        let mut decided: FxHashMap<NodeId, Option<Content>> = FxHashMap::default();
        for &(n, g) in &change.switches {
            decided.insert(n, g.map(|id| as_content(rep.group(id))));
        }
        for &(which, g) in &change.stubs {
            let got = g.map(|id| as_content(rep.group(id)));
            let nodes: Vec<NodeId> = match which {
                Stubs::Unit(u) => {
                    let skip = engine.affected(&down, u);
                    let all = engine.class_members(u).iter().copied();
                    all.filter(|n| skip.binary_search(n).is_err()).collect()
                }
                Stubs::Group(i) => down.stub_groups[i].members.clone(),
            };
            for n in nodes {
                decided.insert(n, got.clone());
            }
        }
        let origins = &base.solution.origin_sets[s].origins;
        for n in (0..base.topo.nodes.len()).filter(|n| !origins.contains(n)) {
            let got = decided
                .get(&n)
                .cloned()
                .unwrap_or_else(|| content(&base.solution, s, n));
            if got != content(after, s, n) {
                let node = &base.topo.nodes[n].name;
                let expected = content(after, s, n);
                return Err(format!(
                    "{}: set {s} node {node}: {got:?} != {expected:?}",
                    f.name
                ));
            }
        }
    }
    rep.end(&down);
    Ok(())
}

/// Sharing between twins changes nothing: every report, renamed from its class's
/// computed failure, equals the failure's own computation, in the same ranking.
fn check_twins(t: &Topology, mode: Mode, limit: Option<u32>) -> Result<(), String> {
    let base = Base::new(t, &options(mode, limit));
    let mut all = failures::singles(t);
    all.extend(failures::sample_pairs(&all.clone(), 4, 1));
    let shared = analyze(&base, &all, false);
    let each = analyze_each(&base, &all, false);
    for (a, b) in shared.iter().zip(&each) {
        if a != b {
            return Err(format!("{a:?}\n!= {b:?}"));
        }
    }
    Ok(())
}

/// 2 planes, 3 blocks of 4 RNICs (the last block 2), 3 spines per plane: the spines of
/// a plane are twins, and so are the RNICs of a block; leaves are not (their RNICs
/// differ). Failing S2@Plane1-L1@Plane1 is computed as S1@Plane1-L1@Plane1's image.
#[test]
fn twins_of_a_multiplane_fabric() {
    let t = gen::multiplane(&gen::MultiPlane {
        gpus: 10,
        planes: 2,
        rnics_per_leaf: 4,
        spines_per_plane: 3,
        ..Default::default()
    });
    let twins = symmetry::Twins::new(&t);
    let id = |n: &str| t.node_id(n).unwrap();
    assert_eq!(twins.rep(id("S3@Plane2")), id("S1@Plane2"));
    assert_eq!(twins.rep(id("R4")), id("R1"));
    assert_eq!(twins.rep(id("R10")), id("R9"));
    assert_eq!(twins.rep(id("L2@Plane1")), id("L2@Plane1"));
    let all = failures::singles(&t);
    let classes: std::collections::HashSet<_> = all
        .iter()
        .filter_map(|f| twins.canonical(f).map(|c| c.0))
        .collect();
    // Links: 2 planes x 3 leaves (spine links) + 2 x 3 (RNIC links, one class per
    // block); nodes: 2 spine classes, 6 leaves, 3 RNIC classes.
    assert_eq!(classes.len(), 6 + 6 + 2 + 6 + 3);
    check_twins(&t, Mode::Draft, None).unwrap();
    check_twins(&t, Mode::Averaged, Some(4)).unwrap();
}

/// One degraded link breaks the twins it touches: L1 then reaches S1 over 50G, its
/// twin S2 over 100G, and a failure of either is computed on its own.
#[test]
fn asymmetry_breaks_twins() {
    let mut t = gen::clos3(3, 2, 100.0, 1);
    t.links[0].gbps = 50.0;
    let twins = symmetry::Twins::new(&t);
    let (a, b) = (t.links[0].a, t.links[0].b);
    assert_eq!((twins.rep(a), twins.rep(b)), (a, b));
    check_twins(&t, Mode::Draft, None).unwrap();
}

/// A small fabric with what the incremental engine handles apart: identical hosts
/// sharing a unit, a multi-homed host, parallel links, an asymmetric capacity and an
/// island nothing else reaches. Every single failure and sampled pairs, both modes.
#[test]
fn incremental_equals_full_on_hosts_parallel_links_and_an_island() {
    let t = parse(
        std::path::Path::new("t.yaml"),
        "
nodes:
  - {name: L1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: L2, role: leaf, asn: 65002, prefixes: [198.51.100.0/24]}
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: H1, role: host, asn: 65201, prefixes: [10.0.1.0/24]}
  - {name: H2, role: host, asn: 65202, prefixes: [10.0.2.0/24]}
  - {name: H3, role: host, asn: 65203, prefixes: [10.0.3.0/24]}
  - {name: L9, role: leaf, asn: 65009, prefixes: [10.9.0.0/16]}
  - {name: S9, role: spine, asn: 65109}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: L1, b: S1, gbps: 50}
  - {a: L1, b: S2, gbps: 100}
  - {a: L2, b: S1, gbps: 100}
  - {a: L2, b: S2, gbps: 40}
  - {a: L2, b: H1, gbps: 25}
  - {a: L2, b: H2, gbps: 25}
  - {a: L1, b: H3, gbps: 25}
  - {a: L2, b: H3, gbps: 25}
  - {a: L9, b: S9, gbps: 100}
",
    )
    .unwrap();
    for (mode, limit) in [(Mode::Draft, None), (Mode::Averaged, Some(4))] {
        if let Err(e) = check_all(&t, mode, limit) {
            panic!("{mode:?}: {e}");
        }
    }
}

/// Every topology shipped in topologies/ (FRR spines, hosts, 5-stage, DPF colors, shared
/// ASes): every single failure and sampled pairs, both modes, equal to the full solve.
#[test]
fn incremental_equals_full_on_shipped_topologies() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for path in files {
        let t = crate::topology::load(&path).unwrap();
        for (mode, limit) in [(Mode::Draft, None), (Mode::Averaged, Some(8))] {
            if let Err(e) = check_all(&t, mode, limit) {
                panic!("{}: {mode:?}: {e}", path.display());
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(48))]

    #[test]
    fn twins_equal_each_clos3(t in random_clos3(), averaged: bool, limit in proptest::option::of(2u32..8)) {
        let mode = if averaged { Mode::Averaged } else { Mode::Draft };
        check_twins(&t, mode, limit).map_err(proptest::test_runner::TestCaseError::fail)?;
    }

    #[test]
    fn twins_equal_each_planes(t in random_planes(), averaged: bool, limit in proptest::option::of(2u32..8)) {
        let mode = if averaged { Mode::Averaged } else { Mode::Draft };
        check_twins(&t, mode, limit).map_err(proptest::test_runner::TestCaseError::fail)?;
    }

    #[test]
    fn incremental_equals_full_clos3(t in random_clos3(), averaged: bool, limit in proptest::option::of(2u32..8)) {
        let mode = if averaged { Mode::Averaged } else { Mode::Draft };
        check_all(&t, mode, limit).map_err(proptest::test_runner::TestCaseError::fail)?;
    }

    #[test]
    fn incremental_equals_full_planes(t in random_planes(), averaged: bool) {
        let mode = if averaged { Mode::Averaged } else { Mode::Draft };
        check_all(&t, mode, None).map_err(proptest::test_runner::TestCaseError::fail)?;
    }
}

/// The worked example with L1 originating two prefixes: one destination (origin set)
/// stands for both, and the report counts (node, prefix) pairs. L1's destination: S1
/// lost and L2 down to S2 alone, twice; L2's: L1 down to S2 alone, once. Changed
/// 2 x 2 + 1 = 5, unreachable 2 x 1 = 2, single path 2 x 1 + 1 = 3, stranded
/// 2 x -300 = -600.
/// Kept to one destination per report: L1's (a lost node ranks first).
#[test]
fn a_destination_counts_once_per_prefix() {
    let t = parse(
        "t.yaml".as_ref(),
        "nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.0.0/24, 10.0.9.0/24]}
  - {name: L2, role: leaf, asn: 65002, prefixes: [10.0.1.0/24]}
links:
  - {a: S1, b: L1, gbps: 100}
  - {a: S2, b: L1, gbps: 100}
  - {a: S1, b: L2, gbps: 400}
  - {a: S2, b: L2, gbps: 100}
",
    )
    .unwrap();
    let mut base = Base::new(&t, &options(Mode::Draft, None));
    let f = single(&t, "S1-L1");
    let r = base.one(&f, false);
    assert_eq!((r.changed_groups, r.unreachable, r.single_path), (5, 2, 3));
    assert_eq!(r.stranded_gbps, -600.0);
    assert_eq!((r.destinations.len(), r.destinations_hurt), (2, 2));
    base.destinations = 1;
    let r = base.one(&f, false);
    assert_eq!(r.destinations_hurt, 2);
    let d: Vec<(usize, u64)> = r
        .destinations
        .iter()
        .map(|d| (d.prefixes.len(), d.unreachable_nodes))
        .collect();
    assert_eq!(d, [(2, 1)]);
}

/// A leaf down: its prefix is lost everywhere and no group that keeps a route is
/// oversubscribed, yet the destination is listed (5 nodes lost, ratio 1). Every failure
/// computed on its own gives the same reports as the shared computation.
#[test]
fn a_lost_destination_is_listed_without_oversubscription() {
    let t = gen::clos3(4, 2, 100.0, 1);
    let base = Base::new(&t, &options(Mode::Draft, None));
    let singles = failures::singles(&t);
    let reports = analyze(&base, &singles, false);
    let l1 = &reports[0];
    assert_eq!(l1.failure, "L1");
    assert_eq!(l1.destinations.len(), 1);
    let d = &l1.destinations[0];
    assert_eq!((d.unreachable_nodes, d.worst_oversubscription), (5, 1.0));
    let each = analyze_each(&base, &singles, false);
    assert_eq!(each.len(), singles.len());
    assert_eq!(each, reports);
}

/// A failure away from the reduced group keeps it reduced: the limit test's fabric with
/// S1-L1 at 300 and the limit 3 (L2's 3:1 toward L1 fits only as 2:1); failing S2-L2
/// un-reduces it (the limit test), failing S1-L1 leaves L2 with S2 alone (one entry),
/// and a third leaf's link failing changes nothing reduced: still 1.
#[test]
fn reduced_groups_add_the_change_to_the_base() {
    let t = parse(
        "t.yaml".as_ref(),
        "nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.0.0/24]}
  - {name: L2, role: leaf, asn: 65002}
  - {name: L3, role: leaf, asn: 65003}
links:
  - {a: S1, b: L1, gbps: 300}
  - {a: S2, b: L1, gbps: 100}
  - {a: S1, b: L2, gbps: 400}
  - {a: S2, b: L2, gbps: 100}
  - {a: S1, b: L3, gbps: 100}
  - {a: S2, b: L3, gbps: 100}
",
    )
    .unwrap();
    let base = Base::new(&t, &options(Mode::Draft, Some(3)));
    assert_eq!(base.reduced_groups, 1);
    let f = single(&t, "S1-L3");
    let r = base.one(&f, false);
    assert_eq!((r.reduced_groups, r.reduced_change), (1, 0));
}

/// An anycast prefix from L1 and L2: failing L2 halves what each spine advertises (200
/// -> 100), so L3 keeps both spines at 1:1 but with half the bandwidth: its group
/// changed although members and weights did not. L4, under S1 alone, keeps its one
/// member at 100 instead of 200: changed, but not a group that fell to a single path.
/// Changed: S1, S2 (one member left), L3 and L4: 4; single path: S1 and S2. Demand over
/// capacity: S1 and S2 200 over 100, L3 400 over 200, L4 200 over 100: 2, the report
/// naming the first of the tie, S1.
#[test]
fn a_group_whose_bandwidths_scale_has_changed() {
    let t = parse(
        "t.yaml".as_ref(),
        "nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.0.0/24]}
  - {name: L2, role: leaf, asn: 65002, prefixes: [10.0.0.0/24]}
  - {name: L3, role: leaf, asn: 65003}
  - {name: L4, role: leaf, asn: 65004}
links:
  - {a: S1, b: L1, gbps: 100}
  - {a: S2, b: L1, gbps: 100}
  - {a: S1, b: L2, gbps: 100}
  - {a: S2, b: L2, gbps: 100}
  - {a: S1, b: L3, gbps: 400}
  - {a: S2, b: L3, gbps: 400}
  - {a: S1, b: L4, gbps: 400}
",
    )
    .unwrap();
    let base = Base::new(&t, &options(Mode::Draft, None));
    let f = single(&t, "L2");
    for full in [false, true] {
        let r = base.one(&f, full);
        assert_eq!(r.changed_groups, 4, "full {full}");
        assert_eq!(r.single_path, 2, "full {full}");
        assert_eq!(r.worst_oversubscription, 2.0, "full {full}");
        assert_eq!(r.destinations[0].node, "S1", "full {full}");
    }
}

/// A destination's worst ratio is its largest: the worked example with L3 under S1
/// (100G) and S2 (50G), and L4 wired as L2. S1-L1 down: L2 and L4 keep S2, 200 over 100
/// = 2; L3 had min(100, 100) + min(50, 100) = 150 and keeps S2's 50: 3, the worst, at
/// L3. Stranded: L2 and L4 each lose the 300 left on their 400G links to S1 (two equal
/// values, summed as one value counted twice): -600.
#[test]
fn the_worst_ratio_is_the_largest() {
    let t = parse(
        "t.yaml".as_ref(),
        "nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.0.0/24]}
  - {name: L2, role: leaf, asn: 65002}
  - {name: L3, role: leaf, asn: 65003}
  - {name: L4, role: leaf, asn: 65004}
links:
  - {a: S1, b: L1, gbps: 100}
  - {a: S2, b: L1, gbps: 100}
  - {a: S1, b: L2, gbps: 400}
  - {a: S2, b: L2, gbps: 100}
  - {a: S1, b: L3, gbps: 100}
  - {a: S2, b: L3, gbps: 50}
  - {a: S1, b: L4, gbps: 400}
  - {a: S2, b: L4, gbps: 100}
",
    )
    .unwrap();
    let base = Base::new(&t, &options(Mode::Draft, None));
    let f = single(&t, "S1-L1");
    for full in [false, true] {
        let r = base.one(&f, full);
        assert_eq!(r.worst_oversubscription, 3.0, "full {full}");
        assert_eq!(r.destinations[0].node, "L3", "full {full}");
        assert_eq!(r.stranded_gbps, -600.0, "full {full}");
    }
}

/// Two identical hosts (one class) reduced by the limit before and after a failure. L2
/// and L3 each advertise min(400, 400) x 2 = 800 to the hosts, whose links are 300 (L2)
/// and 100 (L3): 3:1, which 3 entries hold only as 2:1. With S1-L3 down L3 advertises
/// 400, still above the 100G link: the hosts stay 3:1, reduced. Base: 2 reduced groups
/// (the hosts); the failure changes none of that.
#[test]
fn a_class_of_hosts_counts_its_reductions_per_host() {
    let t = parse(
        "t.yaml".as_ref(),
        "nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.0.0/24]}
  - {name: L2, role: leaf, asn: 65002}
  - {name: L3, role: leaf, asn: 65003}
  - {name: H1, role: host, asn: 65201}
  - {name: H2, role: host, asn: 65202}
links:
  - {a: S1, b: L1, gbps: 400}
  - {a: S2, b: L1, gbps: 400}
  - {a: S1, b: L2, gbps: 400}
  - {a: S2, b: L2, gbps: 400}
  - {a: S1, b: L3, gbps: 400}
  - {a: S2, b: L3, gbps: 400}
  - {a: H1, b: L2, gbps: 300}
  - {a: H1, b: L3, gbps: 100}
  - {a: H2, b: L2, gbps: 300}
  - {a: H2, b: L3, gbps: 100}
",
    )
    .unwrap();
    let base = Base::new(&t, &options(Mode::Draft, Some(3)));
    assert_eq!(base.reduced_groups, 2);
    let f = single(&t, "S1-L3");
    for full in [false, true] {
        let r = base.one(&f, full);
        assert_eq!((r.reduced_groups, r.reduced_change), (2, 0), "full {full}");
    }
}

/// A failure that takes a route from one node and gives one to another, in one
/// destination. SS1 and H1 (under L1) both originate the prefix; L2 shares H1's AS (not
/// adjacent: allowed). Before: S1 hears SS1 at distance 1 (from above: it advertises
/// down only, so SS2 has no route) and L2 takes it through S1. SS1-S1 down: S1 hears H1
/// through L1 (from below), so it now advertises up, and SS2 gains a route; the path
/// holds H1's AS, so L2 refuses it and loses its route. S1: 100 (SS1's link value)
/// before, min(400, 400) = 400 after: 0.25. A gained route counts as ratio 1, the
/// destination's worst, at SS2; L2 is the one node lost.
#[test]
fn a_gained_route_counts_as_ratio_one() {
    let t = parse(
        "t.yaml".as_ref(),
        "nodes:
  - {name: SS1, role: super-spine, asn: 65501, prefixes: [10.0.0.0/24]}
  - {name: SS2, role: super-spine, asn: 65502}
  - {name: S1, role: spine, asn: 65101}
  - {name: L1, role: leaf, asn: 65001}
  - {name: L2, role: leaf, asn: 65201}
  - {name: H1, role: host, asn: 65201, prefixes: [10.0.0.0/24]}
links:
  - {a: SS1, b: S1, gbps: 100}
  - {a: SS2, b: S1, gbps: 100}
  - {a: S1, b: L1, gbps: 400}
  - {a: S1, b: L2, gbps: 100}
  - {a: L1, b: H1, gbps: 400}
",
    )
    .unwrap();
    let base = Base::new(&t, &options(Mode::Draft, None));
    let p = "10.0.0.0/24".parse().unwrap();
    assert!(base.solution.group("SS2", p).is_none());
    assert!(base.solution.group("L2", p).is_some());
    let f = single(&t, "SS1-S1");
    for full in [false, true] {
        let r = base.one(&f, full);
        let d = &r.destinations[0];
        let got = (
            d.unreachable_nodes,
            d.worst_oversubscription,
            d.node.as_str(),
        );
        assert_eq!(got, (1, 1.0, "SS2"), "full {full}");
        assert_eq!(r.changed_groups, 3, "full {full}");
    }
}

/// One failure per plane, every switch of the plane down: three planes of a leaf and a
/// spine each, two RNICs on every leaf (their own `plane` names no switch's plane and
/// makes no failure). Each plane's failure takes down its two switches and their links.
#[test]
fn a_plane_failure_takes_its_switches_down() {
    let t = parse(
        "t.yaml".as_ref(),
        "nodes:
  - {name: S1, role: spine, asn: 65101, plane: 1}
  - {name: L1, role: leaf, asn: 65001, plane: 1}
  - {name: S2, role: spine, asn: 65102, plane: 2}
  - {name: L2, role: leaf, asn: 65002, plane: 2}
  - {name: S3, role: spine, asn: 65103, plane: 3}
  - {name: L3, role: leaf, asn: 65003, plane: 3}
  - {name: R1, role: rnic, asn: 65201, plane: 9, prefixes: [10.0.1.0/24]}
  - {name: R2, role: rnic, asn: 65202, plane: 9, prefixes: [10.0.2.0/24]}
links:
  - {a: S1, b: L1, gbps: 100}
  - {a: S2, b: L2, gbps: 100}
  - {a: S3, b: L3, gbps: 100}
  - {a: R1, b: L1, gbps: 100}
  - {a: R1, b: L2, gbps: 100}
  - {a: R1, b: L3, gbps: 100}
  - {a: R2, b: L1, gbps: 100}
  - {a: R2, b: L2, gbps: 100}
  - {a: R2, b: L3, gbps: 100}
",
    )
    .unwrap();
    let name = |n: NodeId| t.nodes[n].name.clone();
    let planes: Vec<(String, Vec<String>, usize)> = failures::singles(&t)
        .into_iter()
        .filter(|f| f.kind == failures::Kind::Plane)
        .map(|f| {
            (
                f.name.clone(),
                f.nodes.iter().map(|&n| name(n)).collect(),
                f.pairs.len(),
            )
        })
        .collect();
    let plane = |p: &str, s: &str, l: &str| (p.to_string(), vec![s.to_string(), l.to_string()], 3);
    // Per plane: spine-leaf and the leaf's two RNIC links, as node pairs.
    assert_eq!(
        planes,
        [
            plane("plane 1", "S1", "L1"),
            plane("plane 2", "S2", "L2"),
            plane("plane 3", "S3", "L3")
        ]
    );
}

/// The limit test's fabric with L1 originating two prefixes: L2's reduced group counts
/// once per prefix, 2 in the base; failing S2-L2 un-reduces both: 0, change -2.
#[test]
fn reductions_count_once_per_prefix() {
    let t = parse(
        "t.yaml".as_ref(),
        "nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.0.0/24, 10.0.9.0/24]}
  - {name: L2, role: leaf, asn: 65002}
links:
  - {a: S1, b: L1, gbps: 300}
  - {a: S2, b: L1, gbps: 100}
  - {a: S1, b: L2, gbps: 400}
  - {a: S2, b: L2, gbps: 100}
",
    )
    .unwrap();
    let base = Base::new(&t, &options(Mode::Draft, Some(3)));
    assert_eq!(base.reduced_groups, 2);
    let f = single(&t, "S2-L2");
    for full in [false, true] {
        let r = base.one(&f, full);
        assert_eq!((r.reduced_groups, r.reduced_change), (0, -2), "full {full}");
    }
}
