//! Mixed Figure 1 (topologies/draft-fig1-mixed.yaml): S1, S2 run FRR, S3, S4 and the
//! leaves fare; 25G links, S4-L1 and S1-L2 at 10G. Every expectation is worked out by
//! hand from RFC 10005, FRR 8.4's rules (docs/bgp.md) and draft-xu-idr-fare §4.1.

use super::*;
use crate::topology::parse;
use std::path::Path;

const MIXED: &str = include_str!("../../../../topologies/draft-fig1-mixed.yaml");

fn groups(mode: Mode) -> Vec<RouteGroup> {
    let t = parse(Path::new("draft-fig1-mixed.yaml"), MIXED).unwrap();
    let s = solve(
        &t,
        &Options {
            mode,
            ..Default::default()
        },
    );
    s.route_groups()
}

fn find<'g>(gs: &'g [RouteGroup], node: &str, prefix: &str) -> &'g RouteGroup {
    let p: IpNet = prefix.parse().unwrap();
    gs.iter()
        .find(|g| g.node == node && g.prefix == p)
        .unwrap_or_else(|| panic!("no group {node} {prefix}"))
}

/// (via, bandwidth, weight) per member.
fn members(g: &RouteGroup) -> Vec<(&str, f64, u32)> {
    g.members
        .iter()
        .map(|m| (m.via.as_str(), m.bandwidth_gbps, m.weight))
        .collect()
}

/// FRR S1, 10.100.0.0/24 from L1 and L2. Each fare leaf originates with the "maximum"
/// Path Bandwidth and, toward FRR, a Link Bandwidth of min(max, link): 25 and 10 Gbps,
/// 3.125e9 B/s (binary32 3,124,999,936) and 1.25e9 B/s. FRR: floor(100 x b / total),
/// total 4,374,999,936: 71.43 -> 71 and 28.57 -> 28.
#[test]
fn frr_spine_weighs_by_link_bandwidth_floor_percent() {
    for mode in [Mode::Draft, Mode::Averaged] {
        let gs = groups(mode);
        let g = find(&gs, "S1", "10.100.0.0/24");
        assert!(g.frr && !g.ecmp, "{mode:?}");
        assert_eq!(
            members(g),
            [("L1", 3_124_999_936.0 / 1.25e8, 71), ("L2", 10.0, 28)],
            "{mode:?}"
        );
        // One path: installed without a weight.
        let g = find(&gs, "S2", "10.0.1.0/24");
        assert!(g.frr);
        assert_eq!(members(g), [("L1", 3_124_999_936.0 / 1.25e8, 1)]);
        // A fare spine beside it: min(link, max) per route, 10:25 = 2:5.
        let g = find(&gs, "S4", "10.100.0.0/24");
        assert!(!g.frr);
        assert_eq!(members(g), [("L1", 10.0, 2), ("L2", 25.0, 5)]);
    }
}

/// L8 for L1's 10.0.1.0/24. FRR spines keep L1's Path Bandwidth community (unknown and
/// transitive to them) and pass it on: L8 takes min(25, max) = 25 over S1 and S2, as it
/// would from a FARE spine; their cumulative Link Bandwidth stands in only where no Path
/// Bandwidth came. S3 sends min(25, max) = 25; S4 min(10, max) = 10. 25:25:25:10 = 5:5:5:2.
#[test]
fn fare_leaf_weighs_frr_spines_by_the_passed_on_path_bandwidth() {
    let gs = groups(Mode::Draft);
    let g = find(&gs, "L8", "10.0.1.0/24");
    assert!(!g.frr && !g.ecmp);
    assert_eq!(
        members(g),
        [
            ("S1", 25.0, 5),
            ("S2", 25.0, 5),
            ("S3", 25.0, 5),
            ("S4", 10.0, 2)
        ]
    );
    // L2's prefix: S1's 10G link to L2 is not in what S1 passes on (L2's maximum), so
    // L8 weighs S1 by its own 25G link: 1:1:1:1. A FARE S1 would have sent 10 (2:5:5:5).
    let g = find(&gs, "L8", "10.0.2.0/24");
    assert_eq!(
        members(g),
        [
            ("S1", 25.0, 1),
            ("S2", 25.0, 1),
            ("S3", 25.0, 1),
            ("S4", 25.0, 1)
        ]
    );
}

/// L1 for L2's 10.0.2.0/24: S1 and S2 pass on L2's maximum, min(25, max) = 25 each; S3
/// sends 25; S4 sends 25 but L1's link to S4 is 10G: 25:25:25:10 = 5:5:5:2.
#[test]
fn fare_leaf_on_the_degraded_link_side() {
    let gs = groups(Mode::Draft);
    let g = find(&gs, "L1", "10.0.2.0/24");
    assert_eq!(
        members(g),
        [
            ("S1", 25.0, 5),
            ("S2", 25.0, 5),
            ("S3", 25.0, 5),
            ("S4", 10.0, 2)
        ]
    );
}

/// FRR's best path, whose Path Bandwidth it passes on, is the one from the lowest
/// neighbor router id (`bgp bestpath compare-routerid`, RFC 4271 §9.1.2.2 (f)). Averaged
/// mode, 10.100.0.0/24: L1 sends S1 min(25, link 25) = 25, L2 min(25, link 10) = 10.
/// With L1 at 10.0.0.1 S1 passes on 25; with L1 moved to 10.0.0.9, L2 (10.0.0.2) is
/// best and S1 passes on 10 (the larger value no longer wins). S2's links are both 25G:
/// 25 either way. L8 weighs S1 by min(passed, its 25G link).
#[test]
fn frr_passes_on_the_path_of_the_lowest_router_id() {
    let via = |yaml: &str| -> Vec<(String, f64)> {
        let t = parse(Path::new("mixed.yaml"), yaml).unwrap();
        let opts = Options {
            mode: Mode::Averaged,
            ..Default::default()
        };
        let gs = solve(&t, &opts).route_groups();
        let g = find(&gs, "L8", "10.100.0.0/24");
        let m = g.members.iter().take(2);
        m.map(|m| (m.via.clone(), m.bandwidth_gbps)).collect()
    };
    let s = |a: &str, b: f64| (a.to_string(), b);
    assert_eq!(via(MIXED), [s("S1", 25.0), s("S2", 25.0)]);
    let swapped = MIXED.replace(
        "router_id: 10.0.0.1, prefixes",
        "router_id: 10.0.0.9, prefixes",
    );
    assert_ne!(swapped, MIXED);
    assert_eq!(via(&swapped), [s("S1", 10.0), s("S2", 25.0)]);
}
