//! Which way a route came (from below or above), what a node counts as its N, and what
//! an originating super-spine attaches: small fabrics worked out by hand from
//! draft-xu-idr-fare §4 (draft mode), the white paper's PathBWsum / N (averaged mode) and
//! what the speakers send (`fare_bgp::fare`, `speaker/export.rs`: N is every neighbor
//! but those the route came from and those whose AS is on its path).

use super::*;
use crate::topology::parse;
use std::path::Path;

fn solved(text: &str, mode: Mode) -> Solution<'static> {
    // A few small fabrics per test run: leaked so the solution may borrow them.
    let t = Box::leak(Box::new(parse(Path::new("t.yaml"), text).unwrap()));
    solve(
        t,
        &Options {
            mode,
            ..Default::default()
        },
    )
}

/// (via, bandwidth, weight) per member of `node`'s group for `prefix`.
fn members(s: &Solution, node: &str, prefix: &str) -> Vec<(String, f64, u32)> {
    let g = s
        .group(node, prefix.parse().unwrap())
        .unwrap_or_else(|| panic!("no group at {node} for {prefix}"));
    g.members
        .iter()
        .map(|m| (m.via.clone(), m.bandwidth_gbps, m.weight))
        .collect()
}

fn m(via: &str, gbps: f64, weight: u32) -> (String, f64, u32) {
    (via.to_string(), gbps, weight)
}

/// A host's prefix: the leaves above it are not the originators, so the spines learn it
/// from a non-originating node below them and must still use the normal rule.
const HOST_PREFIX: &str = "
nodes:
  - {name: H1, role: host, asn: 65201, prefixes: [192.0.2.0/24]}
  - {name: L1, role: leaf, asn: 65001}
  - {name: L2, role: leaf, asn: 65002}
  - {name: L3, role: leaf, asn: 65003}
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
links:
  - {a: H1, b: L1, gbps: 100}
  - {a: H1, b: L3, gbps: 100}
  - {a: L1, b: S1, gbps: 100}
  - {a: L3, b: S1, gbps: 50}
  - {a: L1, b: S2, gbps: 100}
  - {a: L3, b: S2, gbps: 100}
  - {a: L2, b: S1, gbps: 100}
  - {a: L2, b: S2, gbps: 40}
";

/// Draft mode, §4.1's min-sum at every node. L1, L3: one route from H1, min(max, 100) =
/// 100. S1: min(100, 100) = 100 and min(100, 50) = 50, 2:1, advertises 150; S2: 100
/// and 100, 1:1, advertises 200. L2: min(150, 100) = 100, min(200, 40) = 40, 5:2. (Had S1
/// taken the routes for ones from above, §4.2's remote-spine rule would find no link
/// value on them and fall back to ECMP.)
#[test]
fn spines_learning_a_host_prefix_from_below_use_min_sum() {
    let s = solved(HOST_PREFIX, Mode::Draft);
    let p = "192.0.2.0/24";
    assert_eq!(members(&s, "S1", p), [m("L1", 100.0, 2), m("L3", 50.0, 1)]);
    assert_eq!(members(&s, "S2", p), [m("L1", 100.0, 1), m("L3", 100.0, 1)]);
    assert_eq!(members(&s, "L2", p), [m("S1", 100.0, 5), m("S2", 40.0, 2)]);
}

/// Averaged mode on the same fabric. H1 originates at its line rate: 100 to L1 and L3.
/// L1 advertises 100 / N, N = 2 (S1, S2; H1 is the incoming link): 50; L3 the same.
/// S1: min(50, 100) = 50 and min(50, 50) = 50, sum 100, N = 1 (L2; L1 and L3 incoming):
/// 100; S2 likewise 100. L2: min(100, 100) = 100, min(100, 40) = 40, 5:2.
#[test]
fn averaged_n_counts_the_links_but_the_incoming_ones() {
    let s = solved(HOST_PREFIX, Mode::Averaged);
    let p = "192.0.2.0/24";
    assert_eq!(members(&s, "S1", p), [m("L1", 50.0, 1), m("L3", 50.0, 1)]);
    assert_eq!(members(&s, "L2", p), [m("S1", 100.0, 5), m("S2", 40.0, 2)]);
}

/// A prefix originated both by a super-spine and by a leaf (anycast): S1 hears it from
/// SS1 above and L1 below at once. The speakers apply §4.2's remote-spine rule only when
/// every route came from super-spines, so S1 uses min-sum: min(max, 100) = 100 and
/// min(max, 40) = 40, 5:2 (the remote-spine rule would find no link value on L1's
/// route and fall back to ECMP).
#[test]
fn a_spine_hearing_from_above_and_below_uses_min_sum() {
    let s = solved(
        "
nodes:
  - {name: SS1, role: super-spine, asn: 65500, prefixes: [192.0.2.0/24]}
  - {name: L1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: S1, role: spine, asn: 65100}
links:
  - {a: SS1, b: S1, gbps: 100}
  - {a: L1, b: S1, gbps: 40}
",
        Mode::Draft,
    );
    assert_eq!(
        members(&s, "S1", "192.0.2.0/24"),
        [m("SS1", 100.0, 5), m("L1", 40.0, 2)]
    );
}

/// Two super-spines of different planes originate one prefix. A super-spine attaches
/// its link's capacity as the non-transitive value to what it originates (the link
/// community is on by default), so S1, learning only from above, weighs them 100:40 =
/// 5:2 by §4.2's remote-spine rule, and passes the transitive value on unchanged: the
/// originators' maximum, so L1 takes min(max, 400) = 400 (min-sum would have sent 140).
#[test]
fn remote_spine_weighs_originating_super_spines_by_link_value() {
    let s = solved(
        "
nodes:
  - {name: SS1, role: super-spine, asn: 65501, prefixes: [192.0.2.0/24]}
  - {name: SS2, role: super-spine, asn: 65502, prefixes: [192.0.2.0/24]}
  - {name: S1, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001}
links:
  - {a: SS1, b: S1, gbps: 100}
  - {a: SS2, b: S1, gbps: 40}
  - {a: S1, b: L1, gbps: 400}
",
        Mode::Draft,
    );
    let p = "192.0.2.0/24";
    assert!(!s.group("S1", p.parse().unwrap()).unwrap().ecmp);
    assert_eq!(
        members(&s, "S1", p),
        [m("SS1", 100.0, 5), m("SS2", 40.0, 2)]
    );
    assert_eq!(members(&s, "L1", p), [m("S1", 400.0, 1)]);
}

/// A 5-stage path through an FRR spine: S1 (FRR) learns L1's prefix from below, so it
/// advertises it up to SS1 as any BGP speaker does, and L2 in the other pod hears it
/// through SS1 and S2.
#[test]
fn an_frr_spine_advertises_up_what_it_learned_from_below() {
    let s = solved(
        "
nodes:
  - {name: L1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: S1, role: spine, asn: 65101, target: frr}
  - {name: SS1, role: super-spine, asn: 65500}
  - {name: S2, role: spine, asn: 65102}
  - {name: L2, role: leaf, asn: 65002}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: S1, b: SS1, gbps: 100}
  - {a: SS1, b: S2, gbps: 100}
  - {a: S2, b: L2, gbps: 100}
",
        Mode::Draft,
    );
    let p = "192.0.2.0/24";
    assert_eq!(members(&s, "SS1", p).len(), 1);
    assert_eq!(members(&s, "L2", p).len(), 1);
}

/// Averaged mode, a leaf that learned the route from above. L2 hears L1's prefix from
/// S1 only; S2 shares S1's AS, so L2 does not send it there (the sender-side loop
/// check), and as a route from above it goes down only anyway: N = 2 (H3, H4).
/// S1: min(max, 100) = 100, N = 1 (L2): 100. L2: 100 / 2 = 50 to each host.
#[test]
fn averaged_n_from_above_counts_only_the_links_down() {
    let s = solved(
        "
nodes:
  - {name: L1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: L2, role: leaf, asn: 65002}
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: H3, role: host, asn: 65203}
  - {name: H4, role: host, asn: 65204}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: L2, b: S1, gbps: 100}
  - {a: L2, b: S2, gbps: 100}
  - {a: L2, b: H3, gbps: 100}
  - {a: L2, b: H4, gbps: 100}
",
        Mode::Averaged,
    );
    let p = "192.0.2.0/24";
    assert_eq!(members(&s, "L2", p), [m("S1", 100.0, 1)]);
    assert_eq!(members(&s, "H3", p), [m("L2", 50.0, 1)]);
}

/// Averaged mode, a loop below: R1 is in L1's AS, so L2 (which learned L1's prefix from
/// S1, above) does not send it to R1: N = 1 (R2 only). S1: 100, N = 1 (L2): 100; L2:
/// 100 / 1 = 100 to R2.
#[test]
fn averaged_n_leaves_out_a_stub_in_an_as_on_the_path() {
    let s = solved(
        "
nodes:
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
        Mode::Averaged,
    );
    let p = "192.0.2.0/24";
    assert!(s.group("R1", p.parse().unwrap()).is_none());
    assert_eq!(members(&s, "R2", p), [m("L2", 100.0, 1)]);
}
