//! What `fare lab report` draws, gathered in one place: the fabric (plan, current link
//! capacities), the load of every link direction (measured by the last `lab traffic`
//! against the ideal split, or the ideal alone), and the lab's history — the per-second
//! load series of every traffic run, the link changes with their convergence times, and
//! the agents' typed events (sessions, groups, ARN).
//!
//! Without a lab (`--topology`), the plan alone: every node with prefixes sends the same
//! demand to every other node's prefixes, scaled so the busiest link is half full.

use super::events::{self, AgentEvent};
use super::model_check;
use super::plan::{self, Plan};
use super::state::{LabState, LinkChange, StateDir};
use super::traffic_load::{self, Demand};
use super::LabError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One direction of a link: what it can carry, what it should, what it did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Direction {
    pub link: String,
    pub from: String,
    pub to: String,
    pub capacity_mbit: f64,
    pub ideal_mbit: f64,
    /// None: no traffic was measured (a plan, or a lab before `lab traffic`).
    pub measured_mbit: Option<f64>,
}

/// The per-direction load of one second of a traffic run (`series.jsonl`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    pub at: f64,
    /// (link, sending node, Mbit/s).
    pub loads: Vec<(String, String, f64)>,
}

/// A link change and the convergence it caused (`events.jsonl`).
#[derive(Clone, Debug, Serialize)]
pub struct ChangeRecord {
    pub at: f64,
    pub change: String,
    pub convergence_s: Option<f64>,
    pub mismatches: u64,
}

impl ChangeRecord {
    /// A change whose convergence was waited for (not a congestion, not `--timeout 0`).
    pub fn measured(&self) -> bool {
        self.convergence_s.is_some() || self.mismatches > 0
    }
}

/// A traffic run: when, and how far its split was from the ideal one.
#[derive(Clone, Debug, Serialize)]
pub struct TrafficRun {
    pub start: f64,
    pub end: f64,
    pub split_error: f64,
}

#[derive(Clone, Debug)]
pub struct ReportData {
    pub plan: Plan,
    /// Link -> current capacity (Gbps; 0 = failed).
    pub gbps: HashMap<String, f64>,
    pub directions: Vec<Direction>,
    pub series: Vec<Sample>,
    pub changes: Vec<ChangeRecord>,
    pub traffic: Vec<TrafficRun>,
    pub agent_events: Vec<AgentEvent>,
    /// Unix seconds: the lab's life (both 0 for a plan).
    pub start: f64,
    pub end: f64,
    /// What the data is: "lab" or "plan".
    pub source: &'static str,
}

impl ReportData {
    /// The data of a running lab, from its state directory.
    pub fn of_lab(dir: &StateDir) -> Result<ReportData, LabError> {
        let state = dir.load()?;
        let gbps = model_check::current_gbps(&state);
        let directions = match last_traffic(dir) {
            Some(d) => d,
            None => ideal_directions(&state.plan, &gbps, &state)?,
        };
        let nodes = state.plan.nodes.iter().map(|n| n.name.as_str());
        let agent_events = events::of_nodes(dir, nodes, state.up_at);
        let (changes, traffic) = lab_history(dir);
        Ok(ReportData {
            gbps,
            directions,
            series: read_series(dir),
            changes,
            traffic,
            agent_events,
            start: state.up_at,
            end: super::state::now(),
            plan: state.plan,
            source: "lab",
        })
    }

    /// The data of a topology file without a lab, after `changes`: the ideal load of a
    /// uniform demand.
    pub fn of_topology(
        path: &std::path::Path,
        changes: &[LinkChange],
    ) -> Result<ReportData, LabError> {
        let topo = fare_model::topology::load(path)
            .map_err(|e| LabError::Input(format!("{}: {e}", path.display())))?;
        let name = plan::default_lab_name(&topo.name);
        let plan = plan::plan(&topo, &name, &plan::Options::default())
            .map_err(|e| LabError::Input(format!("{}: {e}", path.display())))?;
        for c in changes {
            let (LinkChange::Fail { a, b }
            | LinkChange::Degrade { a, b, .. }
            | LinkChange::Congest { a, b, .. }) = c;
            if plan.links_between(a, b).is_empty() {
                return Err(LabError::Input(format!(
                    "{}: no link between `{a}` and `{b}`",
                    path.display()
                )));
            }
        }
        let state = LabState {
            plan: plan.clone(),
            topology: path.to_path_buf(),
            mode: fare_model::bandwidth::Mode::Draft,
            agents: Vec::new(),
            changes: changes.to_vec(),
            up_at: 0.0,
            mininet_pid: None,
            switches: Vec::new(),
        };
        let gbps = model_check::current_gbps(&state);
        let directions = ideal_directions(&plan, &gbps, &state)?;
        Ok(ReportData {
            plan,
            gbps,
            directions,
            series: Vec::new(),
            changes: Vec::new(),
            traffic: Vec::new(),
            agent_events: Vec::new(),
            start: 0.0,
            end: 0.0,
            source: "plan",
        })
    }

    /// Whether the loads were measured (else they are the ideal alone).
    pub fn measured(&self) -> bool {
        self.directions.iter().any(|d| d.measured_mbit.is_some())
    }

    /// Links failed (capacity 0) or degraded (below the topology's) now.
    pub fn link_state(&self, link: &plan::LinkPlan) -> LinkState {
        match self.gbps.get(&link.name).copied().unwrap_or(link.gbps) {
            g if g <= 0.0 => LinkState::Failed,
            g if g < link.gbps => LinkState::Degraded(g),
            _ => LinkState::Healthy,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LinkState {
    Healthy,
    Degraded(f64),
    Failed,
}

/// The last `lab traffic` comparison (`last-traffic.json`) as directions.
fn last_traffic(dir: &StateDir) -> Option<Vec<Direction>> {
    let text = std::fs::read_to_string(dir.path.join("last-traffic.json")).ok()?;
    let c: super::report::Comparison = serde_json::from_str(&text).ok()?;
    Some(
        c.links
            .into_iter()
            .map(|l| Direction {
                link: l.link,
                from: l.from,
                to: l.to,
                capacity_mbit: l.capacity_mbit,
                ideal_mbit: l.ideal_mbit,
                measured_mbit: Some(l.measured_mbit),
            })
            .collect(),
    )
}

/// Every direction of the plan with its ideal load under a uniform demand between the
/// nodes with prefixes, scaled so that the busiest direction is half full.
fn ideal_directions(
    plan: &Plan,
    gbps: &HashMap<String, f64>,
    state: &LabState,
) -> Result<Vec<Direction>, LabError> {
    let groups = model_check::expected_groups(state)?;
    let mut origins: HashMap<ipnet::IpNet, Vec<String>> = HashMap::new();
    for n in &plan.nodes {
        for p in &n.prefixes {
            origins.entry(*p).or_default().push(n.name.clone());
        }
    }
    let mut demands = Vec::new();
    for n in plan.nodes.iter().filter(|n| !n.prefixes.is_empty()) {
        for (p, o) in &origins {
            if !o.contains(&n.name) {
                demands.push(Demand {
                    from: n.name.clone(),
                    prefix: *p,
                    mbit: 1.0,
                });
            }
        }
    }
    let (loads, _) = traffic_load::split(&groups, &origins, &demands);
    let scale = plan.options.scale_mbit_per_gbps;
    let mut dirs = Vec::new();
    for l in &plan.links {
        let cap = gbps.get(&l.name).copied().unwrap_or(l.gbps) * scale;
        for (from, to) in [(&l.a, &l.b), (&l.b, &l.a)] {
            let ideal = loads
                .get(&(l.name.clone(), from.clone()))
                .copied()
                .unwrap_or(0.0);
            dirs.push(Direction {
                link: l.name.clone(),
                from: from.clone(),
                to: to.clone(),
                capacity_mbit: cap,
                ideal_mbit: ideal,
                measured_mbit: None,
            });
        }
    }
    // Half full at the busiest direction: relative loads are what a plan can tell.
    let peak = dirs
        .iter()
        .filter(|d| d.capacity_mbit > 0.0)
        .map(|d| d.ideal_mbit / d.capacity_mbit)
        .fold(0.0, f64::max);
    if peak > 0.0 {
        for d in &mut dirs {
            d.ideal_mbit *= 0.5 / peak;
        }
    }
    Ok(dirs)
}

/// The per-second samples every `lab traffic` appended.
fn read_series(dir: &StateDir) -> Vec<Sample> {
    std::fs::read_to_string(dir.path.join(SERIES_FILE))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The file of the lab's per-second load samples.
pub const SERIES_FILE: &str = "series.jsonl";

/// Appends one sample to the lab's series.
pub fn append_sample(dir: &StateDir, sample: &Sample) {
    use std::io::Write;
    let Ok(line) = serde_json::to_string(sample) else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path.join(SERIES_FILE))
    {
        let _ = writeln!(f, "{line}");
    }
}

/// The lab's own events (`events.jsonl`, typed): changes with their convergence, runs.
#[derive(Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
enum LabEvent {
    Converged {
        at: f64,
        change: String,
        convergence_s: Option<f64>,
        #[serde(default)]
        mismatches: u64,
    },
    Traffic {
        at: f64,
        split_error: f64,
        #[serde(default)]
        duration_s: f64,
    },
    Congest {
        at: f64,
        a: String,
        b: String,
        percent: f64,
    },
}

fn lab_history(dir: &StateDir) -> (Vec<ChangeRecord>, Vec<TrafficRun>) {
    let (mut changes, mut runs) = (Vec::new(), Vec::new());
    let text = std::fs::read_to_string(dir.events()).unwrap_or_default();
    for e in text.lines().filter_map(|l| serde_json::from_str(l).ok()) {
        match e {
            LabEvent::Converged {
                at,
                change,
                convergence_s,
                mismatches,
            } => changes.push(ChangeRecord {
                // Logged once converged: the change was made convergence_s earlier.
                at: at - convergence_s.unwrap_or(0.0),
                change,
                convergence_s,
                mismatches,
            }),
            LabEvent::Traffic {
                at,
                split_error,
                duration_s,
            } => runs.push(TrafficRun {
                start: at - duration_s,
                end: at,
                split_error,
            }),
            LabEvent::Congest { at, a, b, percent } => changes.push(ChangeRecord {
                at,
                change: format!("congest {a}-{b} to {percent}%"),
                convergence_s: None,
                mismatches: 0,
            }),
        }
    }
    changes.sort_by(|x, y| x.at.total_cmp(&y.at));
    (changes, runs)
}
