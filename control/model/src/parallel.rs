//! Parallel links: several BGP sessions between one pair of switches, one per physical
//! link. draft-xu-idr-fare-05 (and draft-ietf-idr-fare, which follows it) says the
//! path-bandwidth calculation "MUST operate at node granularity, not session
//! granularity": toward an advertising node,
//!
//! > Path bandwidth = min {Aggregate bandwidth of all parallel physical links toward the
//! > advertising node, Path-bandwidth value advertised in the route updates}
//!
//! and that node's path bandwidth is then allocated across the ECMP routes (the parallel
//! links) leading to it, evenly or in proportion to each link's bandwidth. One rule for
//! the simulator, the BGP speaker and `fare explain`: [`shares`].
//!
//! Only the routes in a node's multipath set count: a parallel link whose session is
//! down (or that failed) brings no route and so adds nothing to the aggregate; a
//! degraded link adds its current bandwidth.

use crate::bandwidth::{self, Mode, Received, Rule, Spread};
use serde::{Deserialize, Serialize};

/// How a node computes path bandwidth toward a neighbor it reaches over several links.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum ParallelLinks {
    /// Per node (draft-xu-idr-fare-05), the node's path bandwidth split evenly across the
    /// parallel links ("Distribute the total path bandwidth evenly across all ECMP paths
    /// leading to the advertising node").
    NodeEven,
    /// Per node (draft-xu-idr-fare-05), the node's path bandwidth split in proportion to
    /// each parallel link's bandwidth. The default: the draft lists both allocations and
    /// recommends neither; this one never gives a link more than it carries.
    #[default]
    NodeProportional,
    /// Per session (draft-xu-idr-fare-04 and earlier): each parallel link's route gets
    /// min(link, advertised) on its own, as for peers that follow the older text.
    Session,
}

impl ParallelLinks {
    /// The name used in configuration, on the command line and by `fare explain`.
    pub fn name(self) -> &'static str {
        match self {
            ParallelLinks::NodeEven => "node-even",
            ParallelLinks::NodeProportional => "node-proportional",
            ParallelLinks::Session => "session",
        }
    }

    /// Parses a configuration value (`node-even`, `node-proportional`, `session`).
    pub fn parse(s: &str) -> Option<ParallelLinks> {
        [
            ParallelLinks::NodeEven,
            ParallelLinks::NodeProportional,
            ParallelLinks::Session,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }
}

/// How one route got its bandwidth under the rule: what `fare explain` shows per member.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Share {
    /// Links (routes) toward the same neighbor node in the multipath set (1: no parallel
    /// links, or `session`).
    pub links: usize,
    /// Sum of the bandwidths of those links (this route's link under `session`).
    pub aggregate_gbps: f64,
    /// The value the node advertised toward us: draft mode, the value its routes carry
    /// (the largest if they differ); averaged mode, the sum over its sessions of
    /// min(link, value), since each session's value is already a per-interface share.
    pub advertised_gbps: f64,
    /// min(aggregate, advertised): the node's path bandwidth.
    pub node_gbps: f64,
    /// This route's part of `node_gbps`.
    pub gbps: f64,
}

/// The bandwidth of each equal-cost route, per `setting`: `node[i]` identifies the
/// neighbor node route `i` came from (routes with equal keys are parallel links). `None`
/// when some route lacks the value the rule needs (ECMP, [`Spread::Equal`]).
pub fn shares(
    setting: ParallelLinks,
    mode: Mode,
    rule: Rule,
    routes: &[Received],
    node: &[u64],
) -> Option<Vec<Share>> {
    let Spread::Weighted(session) = bandwidth::route_bandwidths(mode, rule, routes) else {
        return None;
    };
    let value = |r: &Received| match (mode, rule) {
        (Mode::Draft, Rule::RemoteSpine) => r.link_value_gbps,
        _ => r.path_gbps,
    };
    let zero = Share {
        links: 0,
        aggregate_gbps: 0.0,
        advertised_gbps: 0.0,
        node_gbps: 0.0,
        gbps: 0.0,
    };
    let mut out = vec![zero; routes.len()];
    // Routes by neighbor node, so each node's parallel links form one run. The model
    // lists routes by neighbor already: then no sort.
    let mut order: Vec<usize> = (0..routes.len()).collect();
    let grouped = node.windows(2).all(|w| w[0] <= w[1]);
    if setting != ParallelLinks::Session && !grouped {
        order.sort_by_key(|&i| (node[i], i));
    }
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while setting != ParallelLinks::Session
            && end < order.len()
            && node[order[end]] == node[order[start]]
        {
            end += 1;
        }
        let same = &order[start..end];
        let (aggregate, advertised) = match (same, mode) {
            // One link to the node (no allocation of a sum): the session's own values.
            (&[i], Mode::Draft) => (routes[i].link_gbps, value(&routes[i]).unwrap_or(f64::NAN)),
            (&[i], Mode::Averaged) => (routes[i].link_gbps, session[i]),
            (_, Mode::Draft) => (
                bandwidth::sum(same.iter().map(|&j| routes[j].link_gbps)),
                same.iter()
                    .filter_map(|&j| value(&routes[j]))
                    .fold(f64::NEG_INFINITY, f64::max),
            ),
            (_, Mode::Averaged) => (
                bandwidth::sum(same.iter().map(|&j| routes[j].link_gbps)),
                bandwidth::sum(same.iter().map(|&j| session[j])),
            ),
        };
        let node_gbps = aggregate.min(advertised);
        for &i in same {
            let gbps = match setting {
                ParallelLinks::Session => session[i],
                ParallelLinks::NodeProportional if aggregate.is_finite() => {
                    node_gbps * (routes[i].link_gbps / aggregate)
                }
                // Even, or a link of unknown speed (+inf): nothing to be proportional to.
                _ => node_gbps / same.len() as f64,
            };
            out[i] = Share {
                links: same.len(),
                aggregate_gbps: aggregate,
                advertised_gbps: advertised,
                node_gbps,
                gbps,
            };
        }
        start = end;
    }
    Some(out)
}

/// [`shares`] as a [`Spread`]: the bandwidths the group is weighted by and the
/// advertisement is summed from. Without parallel links (`node` strictly increasing, as
/// the model lists routes) or per session, every route is its own node and the spread is
/// [`bandwidth::route_bandwidths`]'s, the same bits [`shares`] gives, without its work.
pub fn spread(
    setting: ParallelLinks,
    mode: Mode,
    rule: Rule,
    routes: &[Received],
    node: &[u64],
) -> Spread {
    if setting == ParallelLinks::Session || node.windows(2).all(|w| w[0] < w[1]) {
        return bandwidth::route_bandwidths(mode, rule, routes);
    }
    match shares(setting, mode, rule, routes, node) {
        Some(s) => Spread::Weighted(s.iter().map(|s| s.gbps).collect()),
        None => Spread::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bandwidth::{draft_advertise, DraftOptions, ORIGIN_MAX_GBPS};

    fn r(link: f64, path: f64) -> Received {
        Received {
            link_gbps: link,
            path_gbps: Some(path),
            link_value_gbps: None,
        }
    }

    fn gbps(setting: ParallelLinks, mode: Mode, routes: &[Received], node: &[u64]) -> Vec<f64> {
        match spread(setting, mode, Rule::Normal, routes, node) {
            Spread::Weighted(b) => b,
            Spread::Equal => panic!("ECMP"),
        }
    }

    const ALL: [ParallelLinks; 3] = [
        ParallelLinks::NodeEven,
        ParallelLinks::NodeProportional,
        ParallelLinks::Session,
    ];

    /// White paper topology, Leaf 2 in draft mode: Spine 1 advertises 150 on its two
    /// 100G links, Spine 2 200 on its two. Per node: min(200, 150) = 150 -> 75 + 75,
    /// min(200, 200) = 200 -> 100 + 100 (3:3:4:4); per session 100 each (1:1:1:1).
    #[test]
    fn white_paper_leaf2_per_node_and_per_session() {
        let routes = [
            r(100.0, 150.0),
            r(100.0, 150.0),
            r(100.0, 200.0),
            r(100.0, 200.0),
        ];
        let node = [1, 1, 2, 2];
        for p in [ParallelLinks::NodeEven, ParallelLinks::NodeProportional] {
            assert_eq!(
                gbps(p, Mode::Draft, &routes, &node),
                [75.0, 75.0, 100.0, 100.0]
            );
        }
        assert_eq!(
            gbps(ParallelLinks::Session, Mode::Draft, &routes, &node),
            [100.0; 4]
        );
    }

    /// The white paper's Leaf 2 with its routes listed out of node order (Spine 1, Spine
    /// 2, Spine 1, Spine 2): the same per-node values, each route keeping its own.
    #[test]
    fn parallel_links_listed_out_of_node_order() {
        let routes = [
            r(100.0, 150.0),
            r(100.0, 200.0),
            r(100.0, 150.0),
            r(100.0, 200.0),
        ];
        let node = [1, 2, 1, 2];
        for p in [ParallelLinks::NodeEven, ParallelLinks::NodeProportional] {
            assert_eq!(
                gbps(p, Mode::Draft, &routes, &node),
                [75.0, 100.0, 75.0, 100.0]
            );
            let s = shares(p, Mode::Draft, Rule::Normal, &routes, &node).unwrap();
            assert_eq!(s.iter().map(|s| s.links).collect::<Vec<_>>(), [2; 4]);
        }
    }

    /// Spine 1 of the white paper toward Leaf 1 (origin, maximum value): 50G + 100G.
    /// Per node the aggregate is 150 either way; even 75 + 75, proportional 50 + 100.
    /// What it advertises onward is the same 150 (the sum of its per-node group).
    #[test]
    fn origin_behind_unequal_parallel_links() {
        let routes = [r(50.0, ORIGIN_MAX_GBPS), r(100.0, ORIGIN_MAX_GBPS)];
        let node = [7, 7];
        let even = gbps(ParallelLinks::NodeEven, Mode::Draft, &routes, &node);
        let prop = gbps(ParallelLinks::NodeProportional, Mode::Draft, &routes, &node);
        assert_eq!(even, [75.0, 75.0]);
        assert_eq!(prop, [50.0, 100.0]);
        for b in [even, prop] {
            let adv = draft_advertise(
                Rule::Normal,
                &routes,
                &Spread::Weighted(b),
                &DraftOptions::default(),
            );
            assert_eq!(adv.path_gbps, Some(150.0));
        }
    }

    /// 100G + 40G toward one node that advertises 120, beside a single 100G link to a
    /// node advertising 100. Per node: min(140, 120) = 120; even 60 + 60, proportional
    /// 120 x 100/140 = 85.714 + 120 x 40/140 = 34.286; per session 100 + 40.
    #[test]
    fn unequal_parallel_links_under_each_setting() {
        let routes = [r(100.0, 120.0), r(40.0, 120.0), r(100.0, 100.0)];
        let node = [1, 1, 2];
        let even = gbps(ParallelLinks::NodeEven, Mode::Draft, &routes, &node);
        assert_eq!(even, [60.0, 60.0, 100.0]);
        let prop = gbps(ParallelLinks::NodeProportional, Mode::Draft, &routes, &node);
        assert!((prop[0] - 600.0 / 7.0).abs() < 1e-12, "{prop:?}");
        assert!((prop[1] - 240.0 / 7.0).abs() < 1e-12, "{prop:?}");
        assert_eq!(prop[2], 100.0);
        let session = gbps(ParallelLinks::Session, Mode::Draft, &routes, &node);
        assert_eq!(session, [100.0, 40.0, 100.0]);
        let s = shares(
            ParallelLinks::NodeEven,
            Mode::Draft,
            Rule::Normal,
            &routes,
            &node,
        );
        let s = s.expect("weighted");
        assert_eq!(
            (
                s[1].links,
                s[1].aggregate_gbps,
                s[1].advertised_gbps,
                s[1].node_gbps
            ),
            (2, 140.0, 120.0, 120.0)
        );
    }

    /// One link per neighbor: every setting is the old rule, min(link, received).
    #[test]
    fn no_parallel_links_no_difference() {
        let routes = [r(100.0, 80.0), r(40.0, 120.0), r(100.0, 300.0)];
        for p in ALL {
            assert_eq!(
                gbps(p, Mode::Draft, &routes, &[1, 2, 3]),
                [80.0, 40.0, 100.0]
            );
        }
    }

    /// Averaged mode: each session already carries a per-interface share (the sender's N
    /// counts every parallel link), so the node's value is the sum of min(link, value)
    /// over its sessions and only the allocation changes: 75 on a 100G link and 40
    /// (min'ed) on a 40G link is 115 per node; even 57.5 + 57.5, proportional
    /// 115 x 100/140 + 115 x 40/140.
    #[test]
    fn averaged_mode_reallocates_the_sum_of_shares() {
        let routes = [r(100.0, 75.0), r(40.0, 40.0)];
        let node = [1, 1];
        assert_eq!(
            gbps(ParallelLinks::Session, Mode::Averaged, &routes, &node),
            [75.0, 40.0]
        );
        assert_eq!(
            gbps(ParallelLinks::NodeEven, Mode::Averaged, &routes, &node),
            [57.5, 57.5]
        );
        let prop = gbps(
            ParallelLinks::NodeProportional,
            Mode::Averaged,
            &routes,
            &node,
        );
        assert!((prop[0] - 11500.0 / 140.0).abs() < 1e-12);
        assert!((prop[1] - 4600.0 / 140.0).abs() < 1e-12);
    }

    /// A route without the community makes the whole set ECMP, per node as per session.
    #[test]
    fn ecmp_stays_ecmp() {
        let routes = [
            r(100.0, 80.0),
            Received {
                link_gbps: 100.0,
                path_gbps: None,
                link_value_gbps: None,
            },
        ];
        for p in ALL {
            assert_eq!(
                spread(p, Mode::Draft, Rule::Normal, &routes, &[1, 1]),
                Spread::Equal
            );
        }
    }

    /// A spine of another PoD weighs super-spines by the non-transitive link value; per
    /// node that value stands for the node: min(400 + 400, 600) = 600 -> 300 + 300.
    #[test]
    fn remote_spine_per_node_uses_the_link_value() {
        let lv = |link: f64, v: f64| Received {
            link_gbps: link,
            path_gbps: Some(1600.0),
            link_value_gbps: Some(v),
        };
        let routes = [lv(400.0, 600.0), lv(400.0, 600.0), lv(400.0, 800.0)];
        let s = spread(
            ParallelLinks::NodeEven,
            Mode::Draft,
            Rule::RemoteSpine,
            &routes,
            &[1, 1, 2],
        );
        assert_eq!(s, Spread::Weighted(vec![300.0, 300.0, 400.0]));
    }

    /// The shortcut of `spread` gives the bits `shares` gives.
    #[test]
    fn spread_shortcut_is_shares() {
        let routes = [r(100.0, 80.0), r(40.0, 120.0), r(f64::INFINITY, 300.0)];
        for p in ALL {
            for mode in [Mode::Draft, Mode::Averaged] {
                let s = shares(p, mode, Rule::Normal, &routes, &[1, 2, 3]).expect("weighted");
                let want = Spread::Weighted(s.iter().map(|s| s.gbps).collect());
                assert_eq!(spread(p, mode, Rule::Normal, &routes, &[1, 2, 3]), want);
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for p in ALL {
            assert_eq!(ParallelLinks::parse(p.name()), Some(p));
        }
        assert_eq!(ParallelLinks::parse("node"), None);
        assert_eq!(ParallelLinks::default(), ParallelLinks::NodeProportional);
    }
}
