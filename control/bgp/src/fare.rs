//! The FARE policy of one node: a thin layer between the speaker's RIB and the
//! foundation's path-bandwidth algebra ([`fare_model::bandwidth`]) and WCMP weights
//! ([`fare_model::wcmp`]) — the same code `fare weights` and the simulator use, so a fabric of
//! agents computes the groups `fare weights` predicts.
//!
//! - Each path of a multipath set becomes a [`Received`] (link bandwidth toward its
//!   neighbor, transitive and non-transitive Path Bandwidth values).
//! - [`Rule`] by the node's role and where the set came from (draft §4.2: super-spine,
//!   spine that learned from super-spines, everything else).
//! - Weights only when every path carries the community the rule needs (draft §4.1),
//!   else ECMP.
//! - Re-advertised value: draft mode per [`bandwidth::draft_advertise`] (the sum; the
//!   super-spine keeps the transitive value and adds a non-transitive one), averaged mode
//!   per [`bandwidth::averaged_advertise`] (sum / N, min with the outgoing link).

use fare_model::bandwidth::{
    self, Advertised, DraftOptions, Encoding, Mode, Received, Rule, Spread,
};
use fare_model::parallel::{self, ParallelLinks, Share};
use fare_model::topology::Role;

#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub mode: Mode,
    /// This node's place in the Clos (leaf, spine, super-spine).
    pub role: Role,
    /// Path Bandwidth community subtype (docs/CODEPOINTS.md).
    pub subtype: u8,
    /// FIB-Suppress community subtype (docs/CODEPOINTS.md).
    pub fib_suppress_subtype: u8,
    /// UPA extended community subtype (docs/CODEPOINTS.md).
    pub upa_subtype: u8,
    pub max_group_size: Option<u32>,
    pub draft: DraftOptions,
    /// Per node or per session toward a neighbor reached over parallel links
    /// ([`fare_model::parallel`]).
    pub parallel: ParallelLinks,
    /// How the Path Bandwidth value is written on the wire (and so how finely ratios
    /// can be told apart).
    pub encoding: Encoding,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            mode: Mode::Draft,
            role: Role::Leaf,
            subtype: super::community::DEFAULT_PATH_BANDWIDTH_SUBTYPE,
            fib_suppress_subtype: super::community::DEFAULT_FIB_SUPPRESS_SUBTYPE,
            upa_subtype: super::packet::upa::DEFAULT_UPA_SUBTYPE,
            max_group_size: None,
            draft: DraftOptions::default(),
            parallel: ParallelLinks::default(),
            encoding: Encoding::default(),
        }
    }
}

/// The outcome for one multipath set.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub rule: Rule,
    pub spread: Spread,
    /// Per path, how the parallel-links rule gave it its bandwidth (None: ECMP).
    pub shares: Option<Vec<Share>>,
    /// Per path, same order as the input (the link bandwidth under ECMP).
    pub bandwidths_gbps: Vec<f64>,
    pub weights: Vec<u32>,
}

impl Decision {
    pub fn weighted(&self) -> bool {
        matches!(self.spread, Spread::Weighted(_))
    }
}

impl Policy {
    /// `nodes[i]` identifies the neighbor node path `i` came from (its BGP Identifier;
    /// paths with equal keys are parallel links). `from_above`: the set was learned from
    /// super-spines (only matters for a spine).
    pub fn decide(&self, routes: &[Received], nodes: &[u64], from_above: bool) -> Decision {
        let rule = Rule::for_node(self.role, from_above);
        let shares = parallel::shares(self.parallel, self.mode, rule, routes, nodes);
        let spread = match &shares {
            Some(s) => Spread::Weighted(s.iter().map(|s| s.gbps).collect()),
            None => Spread::Equal,
        };
        let bandwidths_gbps: Vec<f64> = (0..routes.len())
            .map(|i| spread.bandwidth(i, routes))
            .collect();
        let weights = match &spread {
            Spread::Weighted(b) if b.iter().all(|v| v.is_finite() && *v > 0.0) => {
                fare_model::wcmp::weights_within(
                    b,
                    self.max_group_size,
                    self.encoding.ratio_tolerance(),
                )
                .weights
            }
            _ => vec![1; routes.len()],
        };
        Decision {
            rule,
            spread,
            shares,
            bandwidths_gbps,
            weights,
        }
    }

    /// What to attach when re-advertising the set to one neighbor. `path_gbps: None`
    /// means no transitive community (ECMP set), except for the rules that pass the
    /// received one unchanged (see [`Policy::passes_transitive`]).
    pub fn readvertise(
        &self,
        routes: &[Received],
        decision: &Decision,
        out_link_gbps: Option<f64>,
        outgoing_neighbors: usize,
    ) -> Advertised {
        match self.mode {
            Mode::Draft => {
                bandwidth::draft_advertise(decision.rule, routes, &decision.spread, &self.draft)
            }
            Mode::Averaged => Advertised {
                path_gbps: match &decision.spread {
                    Spread::Weighted(b) => Some(bandwidth::averaged_advertise(
                        bandwidth::sum(b.iter().copied()),
                        outgoing_neighbors,
                        out_link_gbps.unwrap_or(f64::INFINITY),
                    )),
                    Spread::Equal => None,
                },
                link_value_gbps: None,
            },
        }
    }

    /// True when the transitive community crosses this node unchanged (super-spine, and
    /// a spine that learned the route from super-spines without the optional update).
    pub fn passes_transitive(&self, decision: &Decision) -> bool {
        self.mode == Mode::Draft
            && match decision.rule {
                Rule::SuperSpine => true,
                Rule::RemoteSpine => !self.draft.remote_spine_update,
                Rule::Normal => false,
            }
    }

    /// The value a node attaches to the prefixes it originates, on a link of `link_gbps`:
    /// "a maximum bandwidth value" in draft mode, the line rate in averaged mode.
    pub fn originate(&self, link_gbps: Option<f64>) -> f64 {
        match (self.mode, link_gbps) {
            (Mode::Averaged, Some(l)) => l,
            _ => bandwidth::ORIGIN_MAX_GBPS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path from its own neighbor node.
    fn distinct(n: usize) -> Vec<u64> {
        (0..n as u64).collect()
    }

    fn r(link: f64, c: Option<f64>) -> Received {
        Received {
            link_gbps: link,
            path_gbps: c,
            link_value_gbps: None,
        }
    }

    /// Weights only when every path's bandwidth is finite and positive: a path whose
    /// value is 0 (draft mode: min(link, 0)) or whose link and value are both unknown
    /// (+infinity) leaves the set ECMP, 1 each, in either mode.
    #[test]
    fn zero_or_infinite_bandwidth_is_ecmp() {
        for mode in [Mode::Draft, Mode::Averaged] {
            let p = Policy {
                mode,
                ..Default::default()
            };
            let zero = [r(100.0, Some(0.0)), r(100.0, Some(50.0))];
            assert_eq!(
                p.decide(&zero, &distinct(2), false).weights,
                [1, 1],
                "{mode:?}"
            );
            let inf = [r(f64::INFINITY, Some(f64::INFINITY)), r(100.0, Some(50.0))];
            assert_eq!(
                p.decide(&inf, &distinct(2), false).weights,
                [1, 1],
                "{mode:?}"
            );
            let fine = [r(100.0, Some(25.0)), r(100.0, Some(50.0))];
            assert_eq!(
                p.decide(&fine, &distinct(2), false).weights,
                [1, 2],
                "{mode:?}"
            );
        }
    }

    /// draft §4.2: the transitive value crosses a super-spine unchanged, and a spine that
    /// learned the route from super-spines unless it takes the optional update; every
    /// other node (and averaged mode) sets its own.
    #[test]
    fn passes_transitive_by_rule() {
        let decision = |rule| Decision {
            rule,
            spread: Spread::Equal,
            shares: None,
            bandwidths_gbps: vec![],
            weights: vec![],
        };
        let policy = |mode, remote_spine_update| Policy {
            mode,
            draft: DraftOptions {
                remote_spine_update,
                ..DraftOptions::default()
            },
            ..Default::default()
        };
        let table = [
            (Mode::Draft, false, Rule::SuperSpine, true),
            (Mode::Draft, true, Rule::SuperSpine, true),
            (Mode::Draft, false, Rule::RemoteSpine, true),
            (Mode::Draft, true, Rule::RemoteSpine, false),
            (Mode::Draft, false, Rule::Normal, false),
            (Mode::Averaged, false, Rule::SuperSpine, false),
            (Mode::Averaged, false, Rule::RemoteSpine, false),
        ];
        for (mode, update, rule, passes) in table {
            assert_eq!(
                policy(mode, update).passes_transitive(&decision(rule)),
                passes,
                "{mode:?} update {update} {rule:?}"
            );
        }
    }

    /// What an originator attaches: draft mode "a maximum bandwidth value" (+infinity)
    /// whatever its link; averaged mode the link's line rate, the maximum without one.
    #[test]
    fn originate_by_mode() {
        let draft = Policy::default();
        let averaged = Policy {
            mode: Mode::Averaged,
            ..Default::default()
        };
        assert_eq!(draft.originate(Some(40.0)), f64::INFINITY);
        assert_eq!(draft.originate(None), f64::INFINITY);
        assert_eq!(averaged.originate(Some(40.0)), 40.0);
        assert_eq!(averaged.originate(None), f64::INFINITY);
    }

    /// White paper §2.2.2: Leaf 2 sees 75, 75, 100, 100 -> 3:3:4:4.
    #[test]
    fn white_paper_weights() {
        let p = Policy {
            mode: Mode::Averaged,
            ..Default::default()
        };
        let routes = [
            r(100.0, Some(75.0)),
            r(100.0, Some(75.0)),
            r(100.0, Some(100.0)),
            r(100.0, Some(100.0)),
        ];
        assert_eq!(
            p.decide(&routes, &distinct(routes.len()), false).weights,
            [3, 3, 4, 4]
        );
    }

    /// White paper topology in draft mode at Leaf 2 (draft-xu-idr-fare-05): Spine 1
    /// advertises 150 on both its 100G sessions, Spine 2 200. Per node: min(200, 150) =
    /// 150 -> 75 + 75, min(200, 200) -> 100 + 100: 3:3:4:4; per session 1:1:1:1.
    #[test]
    fn draft_parallel_sessions_count_per_node() {
        let routes = [
            r(100.0, Some(150.0)),
            r(100.0, Some(150.0)),
            r(100.0, Some(200.0)),
            r(100.0, Some(200.0)),
        ];
        let nodes = [1, 1, 2, 2];
        for parallel in [ParallelLinks::NodeEven, ParallelLinks::NodeProportional] {
            let p = Policy {
                parallel,
                ..Default::default()
            };
            let d = p.decide(&routes, &nodes, false);
            assert_eq!(d.bandwidths_gbps, [75.0, 75.0, 100.0, 100.0]);
            assert_eq!(d.weights, [3, 3, 4, 4]);
            // Leaf 2 re-advertises the sum of its per-node group: 350.
            let adv = p.readvertise(&routes, &d, Some(100.0), 1);
            assert_eq!(adv.path_gbps, Some(350.0));
        }
        let p = Policy {
            parallel: ParallelLinks::Session,
            ..Default::default()
        };
        assert_eq!(p.decide(&routes, &nodes, false).weights, [1, 1, 1, 1]);
    }

    /// White paper §2.2.1: Spine 1 sums 50 + 100 and averages over 2 outgoing links.
    #[test]
    fn averaged_and_draft_readvertisement() {
        let routes = [r(50.0, Some(f64::INFINITY)), r(100.0, Some(f64::INFINITY))];
        let p = Policy {
            mode: Mode::Averaged,
            role: Role::Spine,
            ..Default::default()
        };
        let d = p.decide(&routes, &distinct(routes.len()), false);
        assert_eq!(
            p.readvertise(&routes, &d, Some(100.0), 2).path_gbps,
            Some(75.0)
        );
        let p = Policy {
            role: Role::Spine,
            ..Default::default()
        };
        let d = p.decide(&routes, &distinct(routes.len()), false);
        assert_eq!(
            p.readvertise(&routes, &d, Some(100.0), 2).path_gbps,
            Some(150.0)
        );
    }

    #[test]
    fn ecmp_unless_every_path_carries_the_community() {
        let p = Policy::default();
        let routes = [r(100.0, Some(50.0)), r(100.0, None)];
        let d = p.decide(&routes, &distinct(routes.len()), false);
        assert!(!d.weighted());
        assert_eq!(d.weights, [1, 1]);
        assert_eq!(p.readvertise(&routes, &d, Some(100.0), 2).path_gbps, None);
    }

    #[test]
    fn super_spine_keeps_transitive_and_adds_link_value() {
        let p = Policy {
            role: Role::SuperSpine,
            ..Default::default()
        };
        let routes = [r(100.0, Some(400.0))];
        let d = p.decide(&routes, &distinct(routes.len()), false);
        assert!(p.passes_transitive(&d));
        let adv = p.readvertise(&routes, &d, None, 4);
        assert_eq!(adv.link_value_gbps, Some(100.0));
    }
}
