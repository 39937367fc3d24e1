//! The FARE policy of one node (draft-xu-idr-fare §4, white paper §2.2): which bandwidth
//! each path of a multipath set gets, the WCMP weights (computed by [`crate::wcmp`]), and
//! the Path Bandwidth value to re-advertise.
//!
//! - Path bandwidth of path i = min(link bandwidth toward its neighbor, the community's
//!   value). Weights follow path bandwidths only when *every* path of the set carries the
//!   community (draft §4.1); otherwise the group is plain ECMP.
//! - 5-stage: when every path carries the non-transitive community (set by super-spines),
//!   it is used instead of the transitive one and the transitive value passes unchanged
//!   (draft §4.2). A node with role `super-spine` never updates the transitive value and
//!   attaches a non-transitive one with the bandwidth of its links toward the advertiser.
//! - Re-advertised value: draft mode = the sum of the path bandwidths; averaged mode
//!   (white paper §2.2.1) = min(sum / N, outgoing link), N = outgoing neighbors.
//! - Originated prefixes carry the bandwidth of the link they are advertised on.

use crate::bandwidth::Mode;
use serde::{Deserialize, Serialize};

/// What a node does with the Path Bandwidth community.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Leaf or spine: update the transitive community when re-advertising.
    #[default]
    Default,
    /// Super-spine of a 5-stage Clos: keep the transitive value, add a non-transitive one.
    SuperSpine,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub mode: Mode,
    pub role: Role,
    /// Path Bandwidth community subtype (docs/CODEPOINTS.md).
    pub subtype: u8,
    pub max_group_size: Option<u32>,
}

/// One path of a multipath set as the policy sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PathInput {
    /// Bandwidth of the link toward the neighbor the path came from (None = unknown).
    pub link_gbps: Option<f64>,
    pub transitive_gbps: Option<f64>,
    pub non_transitive_gbps: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightSource {
    Transitive,
    NonTransitive,
    /// Some path lacks the community (or a link bandwidth): equal weights.
    Ecmp,
}

/// The outcome for one multipath set.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub source: WeightSource,
    /// Per path, same order as the input.
    pub bandwidths_gbps: Vec<f64>,
    pub weights: Vec<u32>,
    /// Sum of the path bandwidths (what draft mode re-advertises).
    pub total_gbps: f64,
}

impl Policy {
    pub fn decide(&self, paths: &[PathInput]) -> Decision {
        let pick = |f: fn(&PathInput) -> Option<f64>| -> Option<Vec<f64>> {
            paths
                .iter()
                .map(|p| {
                    let c = f(p)?;
                    Some(match p.link_gbps {
                        Some(l) => l.min(c),
                        None => c,
                    })
                })
                .collect()
        };
        let chosen = pick(|p| p.non_transitive_gbps)
            .map(|b| (WeightSource::NonTransitive, b))
            .or_else(|| pick(|p| p.transitive_gbps).map(|b| (WeightSource::Transitive, b)))
            .filter(|(_, b)| !b.is_empty() && b.iter().all(|v| *v > 0.0));
        match chosen {
            Some((source, bandwidths_gbps)) => {
                let w = crate::wcmp::weights(&bandwidths_gbps, self.max_group_size);
                Decision {
                    source,
                    total_gbps: bandwidths_gbps.iter().sum(),
                    bandwidths_gbps,
                    weights: w.weights,
                }
            }
            None => Decision {
                source: WeightSource::Ecmp,
                bandwidths_gbps: paths.iter().map(|p| p.link_gbps.unwrap_or(0.0)).collect(),
                weights: vec![1; paths.len()],
                total_gbps: 0.0,
            },
        }
    }

    /// The transitive value to advertise to one neighbor. `None` = pass the received
    /// community unchanged (or none at all when the set is ECMP).
    pub fn readvertise(
        &self,
        decision: &Decision,
        out_link_gbps: Option<f64>,
        outgoing_neighbors: usize,
    ) -> Option<f64> {
        if self.role == Role::SuperSpine || decision.source != WeightSource::Transitive {
            return None;
        }
        Some(match self.mode {
            Mode::Draft => decision.total_gbps,
            Mode::Averaged => {
                let avg = decision.total_gbps / outgoing_neighbors.max(1) as f64;
                out_link_gbps.map_or(avg, |l| avg.min(l))
            }
        })
    }

    /// The non-transitive value a super-spine attaches: the bandwidth of its links toward
    /// the advertiser of the set.
    pub fn non_transitive(&self, paths: &[PathInput]) -> Option<f64> {
        if self.role != Role::SuperSpine {
            return None;
        }
        paths.iter().map(|p| p.link_gbps).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: Mode) -> Policy {
        Policy {
            mode,
            role: Role::Default,
            subtype: 0xa0,
            max_group_size: None,
        }
    }

    fn t(link: f64, c: f64) -> PathInput {
        PathInput {
            link_gbps: Some(link),
            transitive_gbps: Some(c),
            non_transitive_gbps: None,
        }
    }

    /// White paper §2.2.2: Leaf 2 sees 75, 75, 100, 100 -> 3:3:4:4.
    #[test]
    fn white_paper_weights() {
        let d = policy(Mode::Averaged).decide(&[
            t(100.0, 75.0),
            t(100.0, 75.0),
            t(100.0, 100.0),
            t(100.0, 100.0),
        ]);
        assert_eq!(d.weights, [3, 3, 4, 4]);
        assert_eq!(d.source, WeightSource::Transitive);
    }

    /// White paper §2.2.1: Spine 1 sums 50 + 100 and averages over 2 outgoing links.
    #[test]
    fn averaged_readvertisement() {
        let p = policy(Mode::Averaged);
        let d = p.decide(&[t(50.0, 400.0), t(100.0, 400.0)]);
        assert_eq!(d.total_gbps, 150.0);
        assert_eq!(p.readvertise(&d, Some(100.0), 2), Some(75.0));
        let d = policy(Mode::Draft).decide(&[t(50.0, 400.0), t(100.0, 400.0)]);
        assert_eq!(
            policy(Mode::Draft).readvertise(&d, Some(100.0), 2),
            Some(150.0)
        );
    }

    #[test]
    fn ecmp_unless_every_path_carries_the_community() {
        let mut missing = t(100.0, 100.0);
        missing.transitive_gbps = None;
        let d = policy(Mode::Draft).decide(&[t(100.0, 50.0), missing]);
        assert_eq!(d.source, WeightSource::Ecmp);
        assert_eq!(d.weights, [1, 1]);
        assert_eq!(policy(Mode::Draft).readvertise(&d, Some(100.0), 2), None);
    }

    #[test]
    fn non_transitive_wins_and_transitive_passes_unchanged() {
        let p = PathInput {
            link_gbps: Some(100.0),
            transitive_gbps: Some(400.0),
            non_transitive_gbps: Some(40.0),
        };
        let q = PathInput {
            non_transitive_gbps: Some(80.0),
            ..p
        };
        let d = policy(Mode::Draft).decide(&[p, q]);
        assert_eq!(d.source, WeightSource::NonTransitive);
        assert_eq!(d.weights, [1, 2]);
        assert_eq!(policy(Mode::Draft).readvertise(&d, None, 1), None);
        let ss = Policy {
            role: Role::SuperSpine,
            ..policy(Mode::Draft)
        };
        assert_eq!(
            ss.non_transitive(&[t(100.0, 1.0), t(50.0, 1.0)]),
            Some(150.0)
        );
        assert_eq!(ss.readvertise(&ss.decide(&[t(100.0, 1.0)]), None, 1), None);
    }
}
