//! Parallel links (several sessions between one pair of switches) under the three
//! settings of [`crate::parallel::ParallelLinks`]. Every expectation is worked out by
//! hand from draft-xu-idr-fare-05's text: toward an advertising node, path bandwidth =
//! min(aggregate bandwidth of the parallel links, the value it advertised), allocated
//! evenly or in proportion to each link's bandwidth; `session` is the older per-session
//! min(link, advertised).

use super::*;
use crate::topology::parse;
use std::path::Path;

const WHITE_PAPER: &str = include_str!("../../../../topologies/whitepaper-asymmetric.yaml");

const ALL: [ParallelLinks; 3] = [
    ParallelLinks::NodeEven,
    ParallelLinks::NodeProportional,
    ParallelLinks::Session,
];

fn solve_with(text: &str, mode: Mode, parallel: ParallelLinks) -> Vec<RouteGroup> {
    let t = parse(Path::new("t.yaml"), text).unwrap();
    let options = Options {
        mode,
        parallel,
        ..Default::default()
    };
    solve(&t, &options).route_groups()
}

/// (link, bandwidth, weight) per member of `node`'s group for `prefix`.
fn members(gs: &[RouteGroup], node: &str, prefix: &str) -> Vec<(String, f64, u32)> {
    let p: IpNet = prefix.parse().unwrap();
    gs.iter()
        .find(|g| g.node == node && g.prefix == p)
        .unwrap_or_else(|| panic!("no group {node} {prefix}"))
        .members
        .iter()
        .map(|m| (m.link.clone(), m.bandwidth_gbps, m.weight))
        .collect()
}

fn weights(gs: &[RouteGroup], node: &str, prefix: &str) -> Vec<u32> {
    members(gs, node, prefix).into_iter().map(|m| m.2).collect()
}

fn bandwidths(gs: &[RouteGroup], node: &str, prefix: &str) -> Vec<f64> {
    members(gs, node, prefix).into_iter().map(|m| m.1).collect()
}

/// White paper topology, draft mode. Spine 1 reaches Leaf 1 over L1 (50G) and L3
/// (100G): min(150, max) = 150, even 75 + 75, proportional 50 + 100; it advertises 150.
/// Spine 2: 200. Leaf 2 per node: Spine 1 min(200, 150) = 150 -> 75 + 75, Spine 2
/// min(200, 200) -> 100 + 100: 3:3:4:4. Per session: min(100, 150), min(100, 200): 1:1:1:1.
#[test]
fn white_paper_draft_leaf2_is_3_3_4_4_per_node() {
    let p = "192.0.2.0/24";
    for setting in [ParallelLinks::NodeEven, ParallelLinks::NodeProportional] {
        let gs = solve_with(WHITE_PAPER, Mode::Draft, setting);
        assert_eq!(bandwidths(&gs, "Leaf2", p), [75.0, 75.0, 100.0, 100.0]);
        assert_eq!(weights(&gs, "Leaf2", p), [3, 3, 4, 4], "{setting:?}");
    }
    let gs = solve_with(WHITE_PAPER, Mode::Draft, ParallelLinks::Session);
    assert_eq!(bandwidths(&gs, "Leaf2", p), [100.0; 4]);
    assert_eq!(weights(&gs, "Leaf2", p), [1, 1, 1, 1]);
    // Spine 1's own group over its parallel links to Leaf 1.
    let even = solve_with(WHITE_PAPER, Mode::Draft, ParallelLinks::NodeEven);
    assert_eq!(bandwidths(&even, "Spine1", p), [75.0, 75.0]);
    let prop = solve_with(WHITE_PAPER, Mode::Draft, ParallelLinks::NodeProportional);
    assert_eq!(bandwidths(&prop, "Spine1", p), [50.0, 100.0]);
    assert_eq!(weights(&prop, "Spine1", p), [1, 2]);
    // The default is node-proportional.
    let default = solve(
        &parse(Path::new("t.yaml"), WHITE_PAPER).unwrap(),
        &Options::default(),
    )
    .route_groups();
    assert_eq!(default, prop);
}

/// Averaged mode on the same fabric: each session already carries Spine 1's 150 / 2 =
/// 75, so per node the value is 75 + 75 = 150 over 200: 75 + 75 again; 3:3:4:4 in all
/// three settings.
#[test]
fn white_paper_averaged_is_3_3_4_4_in_every_setting() {
    for setting in ALL {
        let gs = solve_with(WHITE_PAPER, Mode::Averaged, setting);
        assert_eq!(weights(&gs, "Leaf2", "192.0.2.0/24"), [3, 3, 4, 4]);
    }
}

/// Leaf 2 reaches Spine 1 over 100G (A) and 40G (B), Spine 2 over 100G (C); each spine
/// has one 100G link to Leaf 1, so each advertises 100.
/// Per node, Spine 1: min(140, 100) = 100; even 50 + 50 beside 100: 1:1:2;
/// proportional 100 x 100/140 = 71.43 + 100 x 40/140 = 28.57 beside 100: 5:2:7.
/// Per session: min(100, 100), min(40, 100), 100: 5:2:5.
const UNEQUAL: &str = "
nodes:
  - {name: Leaf1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: Leaf2, role: leaf, asn: 65002}
  - {name: Spine1, role: spine, asn: 65100}
  - {name: Spine2, role: spine, asn: 65100}
links:
  - {a: Leaf1, b: Spine1, gbps: 100, name: U1}
  - {a: Leaf1, b: Spine2, gbps: 100, name: U2}
  - {a: Spine1, b: Leaf2, gbps: 100, name: A}
  - {a: Spine1, b: Leaf2, gbps: 40, name: B}
  - {a: Spine2, b: Leaf2, gbps: 100, name: C}
";

#[test]
fn unequal_parallel_links_100g_40g() {
    let p = "192.0.2.0/24";
    let even = solve_with(UNEQUAL, Mode::Draft, ParallelLinks::NodeEven);
    assert_eq!(bandwidths(&even, "Leaf2", p), [50.0, 50.0, 100.0]);
    assert_eq!(weights(&even, "Leaf2", p), [1, 1, 2]);
    let prop = solve_with(UNEQUAL, Mode::Draft, ParallelLinks::NodeProportional);
    let b = bandwidths(&prop, "Leaf2", p);
    assert!((b[0] - 500.0 / 7.0).abs() < 1e-9 && (b[1] - 200.0 / 7.0).abs() < 1e-9);
    assert_eq!(b[2], 100.0);
    assert_eq!(weights(&prop, "Leaf2", p), [5, 2, 7]);
    let session = solve_with(UNEQUAL, Mode::Draft, ParallelLinks::Session);
    assert_eq!(bandwidths(&session, "Leaf2", p), [100.0, 40.0, 100.0]);
    assert_eq!(weights(&session, "Leaf2", p), [5, 2, 5]);
}

/// One of the two parallel links changes: the aggregate follows. 40G link B degraded to
/// 10G: Spine 1 per node min(110, 100) = 100; even 50 + 50 (1:1:2 unchanged: the node
/// still carries 100); proportional 90.91 + 9.09 beside 100: 10:1:11. Link B down (its
/// session with it): Spine 1 is one link, min(100, 100): 1:1 in every setting.
#[test]
fn one_parallel_link_degraded_or_down() {
    let p = "192.0.2.0/24";
    let degraded = UNEQUAL.replace("gbps: 40, name: B", "gbps: 10, name: B");
    let even = solve_with(&degraded, Mode::Draft, ParallelLinks::NodeEven);
    assert_eq!(bandwidths(&even, "Leaf2", p), [50.0, 50.0, 100.0]);
    let prop = solve_with(&degraded, Mode::Draft, ParallelLinks::NodeProportional);
    assert_eq!(weights(&prop, "Leaf2", p), [10, 1, 11]);
    let down = UNEQUAL.replace("  - {a: Spine1, b: Leaf2, gbps: 40, name: B}\n", "");
    for setting in ALL {
        let gs = solve_with(&down, Mode::Draft, setting);
        assert_eq!(members(&gs, "Leaf2", p).len(), 2);
        assert_eq!(weights(&gs, "Leaf2", p), [1, 1], "{setting:?}");
    }
}

/// 5-stage fabric with parallel links at two stages: L1-S1 (100G + 40G, PoD 1) and
/// SS1-S2 (2 x 100G, toward PoD 2). Draft mode, the super-spines' link community on.
/// S1: min(140, max) = 140; even 70 + 70 (1:1), proportional and session 100 + 40
/// (5:2); it advertises 140. SS1, SS2: one 100G link each to S1, so their non-transitive
/// value is 100. S2 (remote spine) weighs by min(links, link value): per node SS1
/// min(200, 100) = 100 -> 50 + 50 beside SS2's 100: 1:1:2; per session 100 each: 1:1:1.
/// L2 takes the transitive 140 S2 passes on, min'ed with its 100G link.
const FIVE_STAGE: &str = "
nodes:
  - {name: L1, role: leaf, asn: 65001, pod: 1, prefixes: [10.1.0.0/24]}
  - {name: L2, role: leaf, asn: 65002, pod: 2}
  - {name: S1, role: spine, asn: 65301, pod: 1, plane: 1}
  - {name: S2, role: spine, asn: 65302, pod: 2, plane: 1}
  - {name: SS1, role: super-spine, asn: 65501, plane: 1}
  - {name: SS2, role: super-spine, asn: 65501, plane: 1}
links:
  - {a: L1, b: S1, gbps: 100, name: A1}
  - {a: L1, b: S1, gbps: 40, name: A2}
  - {a: S1, b: SS1, gbps: 100, name: B1}
  - {a: S1, b: SS2, gbps: 100, name: B2}
  - {a: SS1, b: S2, gbps: 100, name: C1}
  - {a: SS1, b: S2, gbps: 100, name: C2}
  - {a: SS2, b: S2, gbps: 100, name: C3}
  - {a: S2, b: L2, gbps: 100, name: D1}
";

#[test]
fn five_stage_parallel_links_at_two_stages() {
    let p = "10.1.0.0/24";
    let even = solve_with(FIVE_STAGE, Mode::Draft, ParallelLinks::NodeEven);
    assert_eq!(bandwidths(&even, "S1", p), [70.0, 70.0]);
    assert_eq!(bandwidths(&even, "S2", p), [50.0, 50.0, 100.0]);
    assert_eq!(weights(&even, "S2", p), [1, 1, 2]);
    let prop = solve_with(FIVE_STAGE, Mode::Draft, ParallelLinks::NodeProportional);
    assert_eq!(bandwidths(&prop, "S1", p), [100.0, 40.0]);
    assert_eq!(weights(&prop, "S1", p), [5, 2]);
    assert_eq!(weights(&prop, "S2", p), [1, 1, 2]);
    let session = solve_with(FIVE_STAGE, Mode::Draft, ParallelLinks::Session);
    assert_eq!(bandwidths(&session, "S1", p), [100.0, 40.0]);
    assert_eq!(bandwidths(&session, "S2", p), [100.0, 100.0, 100.0]);
    for gs in [&even, &prop, &session] {
        assert_eq!(members(gs, "SS1", p), [("B1".to_string(), 100.0, 1)]);
        assert_eq!(members(gs, "L2", p), [("D1".to_string(), 100.0, 1)]);
    }
}

/// `explain` shows, per parallel member, the aggregate, the value the neighbor
/// advertised, the node's path bandwidth and the link's allocation.
#[test]
fn explain_shows_the_per_node_rule() {
    let t = parse(Path::new("t.yaml"), UNEQUAL).unwrap();
    let options = Options {
        parallel: ParallelLinks::NodeEven,
        ..Default::default()
    };
    let e = explain::explain(&t, &options, "Leaf2", "192.0.2.0/24".parse().unwrap()).unwrap();
    assert_eq!(e.parallel_links, ParallelLinks::NodeEven);
    let hop = e.hops.iter().find(|h| h.node == "Leaf2").unwrap();
    let a = hop.routes[0].parallel.expect("A is a parallel link");
    assert_eq!(
        (
            a.links,
            a.aggregate_gbps,
            a.advertised_gbps,
            a.node_gbps,
            a.gbps
        ),
        (2, 140.0, 100.0, 100.0, 50.0)
    );
    assert_eq!(hop.routes[2].parallel, None, "C is Spine 2's only link");
}

/// Across an FRR boundary (RFC 10005 on FRR's side, per session): L1 reaches FRR spine
/// S1 over 10G (a) and 5G (b), fare spine S2 over 10G (c); L2 reaches S1 over 10G (d)
/// and 5G (e), S2 over 10G (f). FRR weighs its sessions by the Link Bandwidth L1 attaches
/// to each (an originator: the link, 10 and 5 Gbps): floor(100 x 10/15) = 66,
/// floor(100 x 5/15) = 33, whatever fare's setting. It passes L1's Path Bandwidth (the
/// maximum) on unchanged, so L2 sees S1 as min(10 + 5, max) = 15 per node: proportional
/// 10 + 5, even 7.5 + 7.5; per session min(10, max), min(5, max). S2 advertises min(10,
/// max) = 10. L2: proportional 2:1:2, even 3:3:4, per session 2:1:2.
#[test]
fn frr_boundary_per_session_there_per_node_here() {
    let text = "
nodes:
  - {name: L1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: L2, role: leaf, asn: 65002}
  - {name: S1, role: spine, asn: 65100, target: frr}
  - {name: S2, role: spine, asn: 65100}
links:
  - {a: L1, b: S1, gbps: 10, name: a}
  - {a: L1, b: S1, gbps: 5, name: b}
  - {a: L1, b: S2, gbps: 10, name: c}
  - {a: S1, b: L2, gbps: 10, name: d}
  - {a: S1, b: L2, gbps: 5, name: e}
  - {a: S2, b: L2, gbps: 10, name: f}
";
    let p = "192.0.2.0/24";
    for (setting, l2) in [
        (ParallelLinks::NodeProportional, [2, 1, 2]),
        (ParallelLinks::NodeEven, [3, 3, 4]),
        (ParallelLinks::Session, [2, 1, 2]),
    ] {
        let gs = solve_with(text, Mode::Draft, setting);
        let frr = gs.iter().find(|g| g.node == "S1").expect("S1's group");
        assert!(frr.frr);
        assert_eq!(bandwidths(&gs, "S1", p), [10.0, 5.0], "{setting:?}");
        assert_eq!(weights(&gs, "S1", p), [66, 33], "{setting:?}");
        assert_eq!(weights(&gs, "L2", p), l2, "{setting:?}");
    }
}
