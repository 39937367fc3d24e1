//! The check of a running fabric against the model: the groups every agent should hold
//! once routing has converged (`sim`, the `fare weights` computation, with the lab's
//! link changes) compared with what the agents hold (their management API, typed), and
//! every BGP session Established except over failed links. `fail`, `degrade`, `restore`
//! and `up` wait on it; what still differs is returned as [`Mismatch`]es.

use super::agents;
use super::plan::{NodePlan, Plan};
use super::state::{LabState, LinkChange, StateDir};
use super::LabError;
use fare_agent::mgmt::pb;
use fare_model::sim;
use fare_model::topology::{self, Topology};
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// One difference between the live fabric and the model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Mismatch {
    pub node: String,
    /// The prefix of a group, or `session NEIGHBOR` (the far node) for a session down, or
    /// `agent` when the agent did not answer.
    pub what: String,
    /// Members and weights (`S1:3 S2:4`, reduced by their gcd) or a session state.
    pub live: String,
    pub model: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: live {} | model {}",
            self.node, self.what, self.live, self.model
        )
    }
}

/// A group's split: member interface -> weight, reduced by the weights' gcd, so that
/// two groups compare equal when their ratios are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split(BTreeMap<String, u64>);

impl Split {
    pub fn new(weights: BTreeMap<String, u64>) -> Split {
        let g = weights.values().fold(0u64, |a, &b| gcd(a, b)).max(1);
        Split(weights.into_iter().map(|(k, v)| (k, v / g)).collect())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `S1:3 S2:4`: members named by the far node (or link, for parallel links).
    fn text(&self, node: &NodePlan) -> String {
        if self.0.is_empty() {
            return "no group".into();
        }
        let mut parts: Vec<String> = self
            .0
            .iter()
            .map(|(i, w)| format!("{}:{w}", member_label(node, i)))
            .collect();
        parts.sort();
        parts.join(" ")
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Per node, per prefix: the split a node holds (or should).
pub type Splits = BTreeMap<String, BTreeMap<IpNet, Split>>;

/// The groups of every node once routing has converged (the `fare weights`
/// computation), after the given link changes.
pub fn ideal_groups(
    topo: &Topology,
    mode: fare_model::bandwidth::Mode,
    parallel: fare_model::parallel::ParallelLinks,
    max_group_size: Option<u32>,
    changes: &[sim::Change],
) -> Vec<sim::RouteGroup> {
    let mut topo = topo.clone();
    for c in changes {
        // A change that no longer applies (link already gone) leaves the topology as is.
        let _ = c.apply(&mut topo);
    }
    let options = sim::Options {
        mode,
        parallel,
        max_group_size,
        threads: 1,
        ..Default::default()
    };
    sim::solve(&topo, &options).route_groups()
}

fn sim_changes(changes: &[LinkChange]) -> Vec<sim::Change> {
    changes
        .iter()
        .filter_map(|c| match c {
            LinkChange::Fail { a, b } => Some(sim::Change::Fail(a.clone(), b.clone())),
            LinkChange::Degrade { a, b, gbps } => {
                Some(sim::Change::Degrade(a.clone(), b.clone(), *gbps))
            }
            // Congestion is invisible to BGP: ARN handles it.
            LinkChange::Congest { .. } => None,
        })
        .collect()
}

/// Current capacity (Gbps) of every link after the recorded changes (0 = failed).
pub fn current_gbps(state: &LabState) -> HashMap<String, f64> {
    let mut m: HashMap<String, f64> = state
        .plan
        .links
        .iter()
        .map(|l| (l.name.clone(), l.gbps))
        .collect();
    for c in &state.changes {
        let (a, b, g) = match c {
            LinkChange::Fail { a, b } => (a, b, 0.0),
            LinkChange::Degrade { a, b, gbps } => (a, b, *gbps),
            LinkChange::Congest { .. } => continue,
        };
        for l in state.plan.links_between(a, b) {
            m.insert(l.name.clone(), g);
        }
    }
    m
}

/// The groups the fabric should converge to, given the recorded changes.
pub fn expected_groups(state: &LabState) -> Result<Vec<sim::RouteGroup>, LabError> {
    let topo = topology::load(&state.topology)
        .map_err(|e| LabError::Input(format!("topology of the lab: {e}")))?;
    Ok(ideal_groups(
        &topo,
        state.mode,
        state.plan.options.parallel_links,
        None,
        &sim_changes(&state.changes),
    ))
}

/// The model's groups as splits over each node's interfaces.
pub fn expected_splits(plan: &Plan, groups: &[sim::RouteGroup]) -> Splits {
    let mut raw: BTreeMap<String, BTreeMap<IpNet, BTreeMap<String, u64>>> = BTreeMap::new();
    for g in groups {
        let Some(node) = plan.node(&g.node) else {
            continue;
        };
        let entry = raw
            .entry(g.node.clone())
            .or_default()
            .entry(g.prefix)
            .or_default();
        for m in &g.members {
            if let Some(p) = node.ports.iter().find(|p| p.link == m.link) {
                *entry.entry(p.interface.clone()).or_insert(0) += u64::from(m.weight);
            }
        }
    }
    raw.into_iter()
        .map(|(n, g)| (n, g.into_iter().map(|(p, w)| (p, Split::new(w))).collect()))
        .collect()
}

/// What an agent holds, as splits: the members that forward (active). A group whose
/// prefix does not parse is the agent's bug, shown under 0.0.0.0/0 so it differs.
pub fn live_splits(groups: &[pb::Group]) -> BTreeMap<IpNet, Split> {
    let mut out: BTreeMap<IpNet, BTreeMap<String, u64>> = BTreeMap::new();
    for g in groups {
        let prefix = g.prefix.parse().unwrap_or_default();
        let entry = out.entry(prefix).or_default();
        // A member the data plane holds out (ARN, port down) forwards nothing.
        for m in g.members.iter().filter(|m| m.active) {
            *entry.entry(m.interface.clone()).or_insert(0) += u64::from(m.weight);
        }
    }
    out.into_iter().map(|(p, w)| (p, Split::new(w))).collect()
}

/// Names members in a diff: the far node, or the link's name when the node has several
/// links to it.
fn member_label(node: &NodePlan, interface: &str) -> String {
    let Some(port) = node.ports.iter().find(|p| p.interface == interface) else {
        return interface.to_string();
    };
    if node.ports.iter().filter(|p| p.peer == port.peer).count() > 1 {
        port.link.clone()
    } else {
        port.peer.clone()
    }
}

/// Links failed by the recorded changes (their sessions are expected down).
fn failed_links(state: &LabState) -> BTreeSet<String> {
    current_gbps(state)
        .into_iter()
        .filter(|(_, g)| *g <= 0.0)
        .map(|(l, _)| l)
        .collect()
}

/// Differences between one node's groups and the model's, prefix by prefix.
fn compare_groups(
    node: &NodePlan,
    want: &BTreeMap<IpNet, Split>,
    have: &[pb::Group],
) -> Vec<Mismatch> {
    let have = live_splits(have);
    let empty = Split::default();
    let prefixes: BTreeSet<&IpNet> = want.keys().chain(have.keys()).collect();
    prefixes
        .into_iter()
        .filter_map(|p| {
            let (h, w) = (have.get(p).unwrap_or(&empty), want.get(p).unwrap_or(&empty));
            (h != w).then(|| Mismatch {
                node: node.name.clone(),
                what: p.to_string(),
                live: h.text(node),
                model: w.text(node),
            })
        })
        .collect()
}

/// Sessions of one node not Established over a link that is not failed.
fn compare_sessions(
    node: &NodePlan,
    failed: &BTreeSet<String>,
    have: &[pb::Neighbor],
) -> Vec<Mismatch> {
    have.iter()
        .filter(|n| n.state != "Established")
        .filter_map(|n| {
            let port = node
                .ports
                .iter()
                .find(|p| p.peer_addr.to_string() == n.address);
            if port.is_some_and(|p| failed.contains(&p.link)) {
                return None;
            }
            Some(Mismatch {
                node: node.name.clone(),
                what: format!(
                    "session {}",
                    port.map(|p| member_label(node, &p.interface))
                        .unwrap_or_else(|| n.address.clone())
                ),
                live: n.state.clone(),
                model: "Established".into(),
            })
        })
        .collect()
}

/// Differences between what the agents report (`groups`, and `neighbors` when given:
/// one entry per plan node) and the model.
pub fn compare(
    state: &LabState,
    expected: &Splits,
    groups: &[Option<Vec<pb::Group>>],
    neighbors: Option<&[Option<Vec<pb::Neighbor>>]>,
) -> Vec<Mismatch> {
    let failed = failed_links(state);
    let none = BTreeMap::new();
    let mut out = Vec::new();
    for (k, (node, have)) in state.plan.nodes.iter().zip(groups).enumerate() {
        let Some(have) = have else {
            out.push(Mismatch {
                node: node.name.clone(),
                what: "agent".into(),
                live: "no answer on its management socket".into(),
                model: "running".into(),
            });
            continue;
        };
        out.extend(compare_groups(
            node,
            expected.get(&node.name).unwrap_or(&none),
            have,
        ));
        if let Some(Some(n)) = neighbors.and_then(|n| n.get(k)) {
            out.extend(compare_sessions(node, &failed, n));
        }
    }
    out
}

/// Every node's groups: an agent's from its management API, an FRR node's from its
/// kernel ([`super::frr::kernel_groups`]).
pub fn live_groups(
    dir: &StateDir,
    state: &LabState,
    names: &[&str],
) -> Vec<Option<Vec<pb::Group>>> {
    let mut groups = agents::groups_all(dir, names);
    for (k, node) in state.plan.nodes.iter().enumerate() {
        if node.frr {
            groups[k] = super::frr::kernel_groups(&node.ns);
        }
    }
    groups
}

/// Waits until the agents agree with the model (see [`compare`]: groups first, then
/// sessions). Each round reads the groups once, and the sessions only when the groups
/// agree or time is up. Returns the seconds since `since`, or what still differs when
/// `timeout` has passed.
pub fn wait_converged(
    dir: &StateDir,
    state: &LabState,
    since: Instant,
    timeout: Duration,
) -> Result<Result<f64, Vec<Mismatch>>, LabError> {
    if state.agents.is_empty() {
        return Ok(Err(Vec::new()));
    }
    let expected = expected_splits(&state.plan, &expected_groups(state)?);
    let names: Vec<&str> = state.plan.nodes.iter().map(|n| n.name.as_str()).collect();
    loop {
        let groups = live_groups(dir, state, &names);
        // Converged when the groups were right (the sessions behind them are checked
        // next and only decide whether this counts).
        let at = since.elapsed().as_secs_f64();
        let groups_agree = compare(state, &expected, &groups, None).is_empty();
        let timed_out = since.elapsed() > timeout;
        if groups_agree || timed_out {
            let mut neighbors = agents::neighbors_all(dir, &names);
            for (k, node) in state.plan.nodes.iter().enumerate() {
                if node.frr {
                    // FRR's sessions are checked from the fare side of each.
                    neighbors[k] = Some(Vec::new());
                }
            }
            let left = compare(state, &expected, &groups, Some(&neighbors));
            if left.is_empty() {
                return Ok(Ok(at));
            }
            if timed_out {
                tracing::debug!(
                    "not converged to the model after {timeout:?}: {} differences",
                    left.len()
                );
                return Ok(Err(left));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_compare_ratios() {
        let a = BTreeMap::from([("eth1".to_string(), 6), ("eth2".to_string(), 8)]);
        let b = BTreeMap::from([("eth1".to_string(), 3), ("eth2".to_string(), 4)]);
        assert_eq!(Split::new(a), Split::new(b));
        let c = BTreeMap::from([("eth1".to_string(), 1), ("eth2".to_string(), 1)]);
        assert_ne!(
            Split::new(c.clone()),
            Split::new(BTreeMap::from([("eth1".to_string(), 1)]))
        );
    }

    #[test]
    fn live_splits_count_active_members_only() {
        let member = |i: &str, w: u32, active: bool| pb::Member {
            interface: i.into(),
            weight: w,
            active,
            ..Default::default()
        };
        let g = pb::Group {
            prefix: "10.0.1.0/24".into(),
            members: vec![
                member("eth1", 2, true),
                member("eth2", 2, false),
                member("eth3", 4, true),
            ],
            ..Default::default()
        };
        let s = live_splits(&[g]);
        let want = Split::new(BTreeMap::from([
            ("eth1".to_string(), 1),
            ("eth3".to_string(), 2),
        ]));
        assert_eq!(s[&"10.0.1.0/24".parse::<IpNet>().unwrap()], want);
    }
}
