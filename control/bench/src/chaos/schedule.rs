//! The chaos soak's fault schedule: a seeded random sequence of faults, one at a time,
//! drawn from the lab's plan alone (so the same seed and topology give the same faults).

use super::super::Rng;
use fare_lab::plan::Plan;
use std::fmt;

/// One fault and its repair.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// `fare lab fail A-B`, then `fare lab restore A-B`.
    Flap { pair: String },
    /// `fare lab degrade A-B=GBPS`, then `fare lab restore A-B`.
    Degrade { pair: String, gbps: f64 },
    /// `kill -9` of the node's agent, then its restart (`fare lab restart --kill`).
    KillAgent { node: String },
    /// `kill -9` of the node's BMv2 switch, then a new one on the same ports.
    RestartSwitch { node: String },
}

impl Fault {
    /// The kind, as the results table names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Flap { .. } => "link flap",
            Fault::Degrade { .. } => "degrade",
            Fault::KillAgent { .. } => "agent kill -9",
            Fault::RestartSwitch { .. } => "BMv2 restart",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Flap { pair } => write!(f, "flap {pair}"),
            Fault::Degrade { pair, gbps } => write!(f, "degrade {pair}={gbps}"),
            Fault::KillAgent { node } => write!(f, "kill -9 agent of {node}"),
            Fault::RestartSwitch { node } => write!(f, "restart BMv2 switch of {node}"),
        }
    }
}

/// Faults drawn one after the other from a seed.
pub struct Schedule {
    rng: Rng,
    pairs: Vec<(String, f64)>,
    nodes: Vec<String>,
    switches: Vec<String>,
}

impl Schedule {
    /// Every linked node pair (with its capacity) may flap or degrade, every node's agent
    /// may be killed, every BMv2 node's switch restarted.
    pub fn new(plan: &Plan, seed: u64) -> Schedule {
        let mut pairs: Vec<(String, f64)> = Vec::new();
        for l in &plan.links {
            let mut ends = [l.a.as_str(), l.b.as_str()];
            ends.sort();
            let pair = ends.join("-");
            if !pairs.iter().any(|(p, _)| *p == pair) {
                pairs.push((pair, l.gbps));
            }
        }
        Schedule {
            rng: Rng::new(seed),
            pairs,
            nodes: plan.nodes.iter().map(|n| n.name.clone()).collect(),
            switches: plan
                .nodes
                .iter()
                .filter(|n| n.bmv2)
                .map(|n| n.name.clone())
                .collect(),
        }
    }

    fn pick(&mut self, v: &[String]) -> String {
        v[self.rng.below(v.len() as u64) as usize].clone()
    }
}

impl Iterator for Schedule {
    type Item = Fault;

    /// Kinds equally likely (the BMv2 restart only where the fabric has a switch);
    /// a degradation takes the link to 20-80 % of its capacity, in whole Gbit/s.
    fn next(&mut self) -> Option<Fault> {
        if self.pairs.is_empty() || self.nodes.is_empty() {
            return None;
        }
        let kinds = if self.switches.is_empty() { 3 } else { 4 };
        let pair_index = self.rng.below(self.pairs.len() as u64) as usize;
        let (pair, gbps) = self.pairs[pair_index].clone();
        Some(match self.rng.below(kinds) {
            0 => Fault::Flap { pair },
            1 => Fault::Degrade {
                pair,
                gbps: (gbps * (0.2 + 0.6 * self.rng.unit())).round().max(1.0),
            },
            2 => Fault::KillAgent {
                node: self.pick(&self.nodes.clone()),
            },
            _ => Fault::RestartSwitch {
                node: self.pick(&self.switches.clone()),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(bmv2: bool) -> Plan {
        let target = if bmv2 { ", target: bmv2" } else { "" };
        let t = fare_model::topology::parse(
            std::path::Path::new("t.yaml"),
            &format!(
                "nodes:\n  - {{name: S1, role: spine{target}}}\n  \
                 - {{name: L1, role: leaf, prefixes: [10.0.1.0/24]}}\n  \
                 - {{name: L2, role: leaf, prefixes: [10.0.2.0/24]}}\n\
                 links:\n  - {{a: S1, b: L1, gbps: 100}}\n  - {{a: L2, b: S1, gbps: 100}}\n  \
                 - {{a: S1, b: L2, gbps: 100}}\n"
            ),
        )
        .unwrap();
        fare_lab::plan::plan(&t, "t", &Default::default()).unwrap()
    }

    #[test]
    fn same_seed_same_faults_and_every_kind_comes() {
        let p = plan(false);
        let a: Vec<Fault> = Schedule::new(&p, 7).take(60).collect();
        let b: Vec<Fault> = Schedule::new(&p, 7).take(60).collect();
        assert_eq!(a, b);
        for kind in ["link flap", "degrade", "agent kill -9"] {
            assert!(a.iter().any(|f| f.kind() == kind), "{kind} never drawn");
        }
        // No switch, no switch restart; parallel links are one pair, named A-B sorted.
        assert!(a.iter().all(|f| f.kind() != "BMv2 restart"));
        for f in &a {
            match f {
                Fault::Flap { pair } => assert!(pair == "L1-S1" || pair == "L2-S1"),
                Fault::Degrade { gbps, .. } => assert!((20.0..=80.0).contains(gbps), "{gbps}"),
                Fault::KillAgent { node } => assert!(["S1", "L1", "L2"].contains(&node.as_str())),
                Fault::RestartSwitch { .. } => unreachable!(),
            }
        }
    }

    #[test]
    fn switches_restart_only_where_there_are_some() {
        let faults: Vec<Fault> = Schedule::new(&plan(true), 3).take(80).collect();
        assert!(faults.contains(&Fault::RestartSwitch { node: "S1".into() }));
    }
}
