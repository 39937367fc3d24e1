//! Link changes on a running lab — `fail`, `degrade`, `congest`, `restore` — and the
//! convergence they cause, measured from the agents' groups.
//!
//! With `--routing bgp` the agents converge by themselves: a failed link drops its
//! session; a degraded link's new bandwidth reaches the two agents at its ends through
//! their management API (`fare set bandwidth`, no restart), as a lane failure changes a
//! port's speed. With `--routing static` the lab plays the controller: it recomputes every
//! group like `fare weights --fail/--degrade` and restarts the agents whose groups changed
//! (an agent re-attaches make-before-break).
//!
//! Convergence = every session up (except those over failed links) and every agent's
//! groups equal to the model's (`sim`, as `fare weights --mode M --fail/--degrade` with the
//! lab's changes), compared as member -> weight ratios per (node, prefix) through the
//! management sockets. Convergence time = from the change until then. What still differs
//! when the timeout ends is returned as [`Mismatch`]es; the CLI prints them and exits 1.

use super::agents;
use super::events;
use super::model_check::{self, current_gbps, expected_groups, Mismatch};
use super::plan::{LinkPlan, Plan, Routing};
use super::state::{self, LabState, LinkChange, StateDir};
use super::sys;
use super::up;
use super::LabError;
use serde_json::json;
use std::time::{Duration, Instant};

/// What `fail`, `degrade` and `restore` share: which lab, and how the change is checked
/// against the model.
#[derive(clap::Args, Debug)]
pub struct ConvergeArgs {
    /// Lab name; without it, the only lab that is up.
    #[arg(long)]
    pub name: Option<String>,
    /// Seconds to wait for convergence.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Report, but exit 0 even when the fabric has not converged to the model in time.
    #[arg(long)]
    pub no_check: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct FailArgs {
    /// `A-B` (every link between nodes A and B) or a link name (`S1-L1#2`).
    pub link: String,
    #[command(flatten)]
    pub converge: ConvergeArgs,
}

#[derive(clap::Args, Debug)]
pub struct DegradeArgs {
    /// `A-B=GBPS`: every link between A and B (or the named link) runs at GBPS.
    pub spec: String,
    #[command(flatten)]
    pub converge: ConvergeArgs,
}

#[derive(clap::Args, Debug)]
pub struct CongestArgs {
    /// `A-B`: the direction from A to B is congested (A's queue toward B fills).
    pub link: String,
    /// Lab name; without it, the only lab that is up.
    #[arg(long)]
    pub name: Option<String>,
    /// The shaper drops to this percentage of the link's capacity.
    #[arg(long, default_value_t = 10.0)]
    pub percent: f64,
    /// Restore after this many seconds (0 = stay congested until `fare lab restore`).
    #[arg(long, default_value_t = 0.0)]
    pub duration: f64,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit 0 even when the agents (with ARN on) logged no ARN.
    #[arg(long)]
    pub no_check: bool,
}

#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// `A-B` or a link name; `all` restores every change.
    pub link: String,
    #[command(flatten)]
    pub converge: ConvergeArgs,
}

/// The links a user's `A-B` (or link name) means, with the two node names.
pub fn resolve<'p>(
    plan: &'p Plan,
    spec: &str,
) -> Result<(String, String, Vec<&'p LinkPlan>), LabError> {
    if let Some(l) = plan.links.iter().find(|l| l.name == spec) {
        return Ok((l.a.clone(), l.b.clone(), vec![l]));
    }
    // Node names may contain '-': try every split point.
    for (i, _) in spec.match_indices('-') {
        let (a, b) = (&spec[..i], &spec[i + 1..]);
        if plan.node(a).is_some() && plan.node(b).is_some() {
            let links = plan.links_between(a, b);
            if links.is_empty() {
                return Err(LabError::Input(format!("no link between {a} and {b}")));
            }
            return Ok((a.to_string(), b.to_string(), links));
        }
    }
    Err(LabError::Input(format!(
        "`{spec}` is neither A-B (two nodes of lab {}) nor a link name",
        plan.lab
    )))
}

/// [`resolve`] for `fail` and `degrade`: those are recorded, and modelled (`fare weights
/// --fail/--degrade`), per node pair, so one of several parallel links alone is refused
/// (it would leave the model behind).
fn resolve_pair<'p>(
    plan: &'p Plan,
    spec: &str,
) -> Result<(String, String, Vec<&'p LinkPlan>), LabError> {
    let (a, b, links) = resolve(plan, spec)?;
    let all = plan.links_between(&a, &b);
    // `A-B` is also the name of the first of parallel links: as a pair it means them all.
    if spec == format!("{a}-{b}") || spec == format!("{b}-{a}") {
        return Ok((a, b, all));
    }
    let all = all.len();
    if links.len() < all {
        return Err(LabError::Input(format!(
            "`{spec}` is one of {all} links between {a} and {b}: fail and degrade apply to \
             every link of a node pair, name it {a}-{b}"
        )));
    }
    Ok((a, b, links))
}

/// The result of a change: when it was made and how long the fabric took to converge.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ChangeReport {
    pub change: String,
    pub links: Vec<String>,
    /// Seconds from the change until every agent showed the expected groups; None when
    /// the agents did not get there within the timeout (or there are no agents).
    pub convergence_s: Option<f64>,
    /// Agents restarted by the lab (static routing).
    pub restarted: Vec<String>,
    /// Agents given the new link bandwidth through their management socket (BGP).
    pub bandwidth_set: Vec<String>,
    /// What still differed from the model when the timeout ended (empty: converged).
    pub mismatches: Vec<Mismatch>,
}

impl ChangeReport {
    /// The report of `change` over `links` before anything was measured.
    fn new(change: String, links: Vec<String>) -> ChangeReport {
        ChangeReport {
            change,
            links,
            convergence_s: None,
            restarted: Vec::new(),
            bandwidth_set: Vec::new(),
            mismatches: Vec::new(),
        }
    }
}

fn set_links(state: &LabState, links: &[&LinkPlan], up_: bool) -> Result<(), LabError> {
    for l in links {
        for (node, ifname) in [(&l.a, &l.a_interface), (&l.b, &l.b_interface)] {
            let ns = state
                .plan
                .node(node)
                .map(|n| n.ns.clone())
                .unwrap_or_default();
            sys::run(
                "ip",
                &[
                    "-n",
                    &ns,
                    "link",
                    "set",
                    ifname,
                    if up_ { "up" } else { "down" },
                ],
            )?;
        }
    }
    Ok(())
}

fn shape(state: &LabState, node: &str, ifname: &str, gbps: f64) -> Result<(), LabError> {
    let ns = state
        .plan
        .node(node)
        .map(|n| n.ns.clone())
        .unwrap_or_default();
    let kbit = state.plan.options.rate_kbit(gbps);
    sys::tc_batch(&ns, &super::shaping::tbf("change", ifname, kbit))?;
    let xdp = state.plan.options.dataplane == super::plan::DataplaneKind::Xdp
        && !state.plan.node(node).is_some_and(|n| n.bmv2)
        && !state.agents.is_empty();
    if xdp {
        // XDP-redirected frames skip the tbf: change the program's virtual queue too.
        set_virtual_queue_rate(&ns, ifname, kbit)?;
    }
    Ok(())
}

/// A new rate for the XDP program's virtual queue on `ifname` in `ns`.
pub fn set_virtual_queue_rate(ns: &str, ifname: &str, kbit: u64) -> Result<(), LabError> {
    let ifindex = sys::ifindex(ns, ifname)?;
    let root = std::path::Path::new(fare_dp_xdp::pins::DEFAULT_ROOT);
    fare_dp_xdp::queues::Queues::open(root, ns)
        .and_then(|mut q| q.set_rate(ifindex, kbit * 1000 / 8))
        .map_err(|e| LabError::Input(format!("virtual queue of {ifname} in {ns}: {e:#}")))
}

/// Rewrites the configurations of `nodes` for the current changes: the current link
/// bandwidths (BGP) or groups (static), so that a restarted agent starts from them.
fn write_configs(dir: &StateDir, state: &LabState, nodes: &[String]) -> Result<(), LabError> {
    let groups = expected_groups(state)?;
    let gbps = current_gbps(state);
    let mut plan = state.plan.clone();
    for n in &mut plan.nodes {
        for p in &mut n.ports {
            if let Some(&g) = gbps.get(&p.link) {
                if g > 0.0 {
                    p.gbps = g;
                }
            }
        }
    }
    for name in nodes {
        let Some(node) = plan.node(name) else {
            continue;
        };
        let text = agents::config_yaml(&plan, node, &dir.socket(name), &groups, state.mode)?;
        std::fs::write(dir.config(name), text)?;
    }
    Ok(())
}

/// Rewrites the configurations of `nodes` for the current changes and restarts their agents.
fn restart_agents(dir: &StateDir, state: &mut LabState, nodes: &[String]) -> Result<(), LabError> {
    if state.agents.is_empty() || nodes.is_empty() {
        return Ok(());
    }
    write_configs(dir, state, nodes)?;
    let fare = up::fare_binary();
    for name in nodes {
        let Some(node) = state.plan.node(name).cloned() else {
            continue;
        };
        if let Some(entry) = state.agents.iter_mut().find(|(n, _)| n == name) {
            let old = entry.1 as i32;
            sys::kill(old, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(3);
            while sys::alive(old) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if sys::alive(old) {
                sys::kill(old, nix::sys::signal::Signal::SIGKILL);
            }
            let _ = std::fs::remove_file(dir.socket(name));
            entry.1 = agents::spawn(&fare, &node, dir)?;
        }
    }
    dir.save(state)?;
    Ok(())
}

/// BGP routing: gives the agents at both ends of `links` (FRR nodes have none) the links'
/// new bandwidth through their management sockets (`fare set bandwidth --interface`), no restart, and records it
/// in their configurations. Returns the nodes told.
fn set_bandwidths(
    dir: &StateDir,
    state: &LabState,
    links: &[LinkPlan],
    gbps: impl Fn(&LinkPlan) -> f64,
) -> Result<Vec<String>, LabError> {
    if state.agents.is_empty() || state.plan.options.routing != Routing::Bgp {
        return Ok(Vec::new());
    }
    let fare = up::fare_binary();
    let frr: Vec<&String> = state
        .plan
        .nodes
        .iter()
        .filter(|n| n.frr)
        .map(|n| &n.name)
        .collect();
    let mut told = Vec::new();
    for l in links {
        let g = format!("{}", gbps(l));
        for (node, ifname) in [(&l.a, &l.a_interface), (&l.b, &l.b_interface)] {
            if frr.contains(&node) {
                // FRR takes no link capacity: its UCMP follows what its neighbors send.
                continue;
            }
            let socket = dir.socket(node);
            sys::run(
                &fare.to_string_lossy(),
                &[
                    "set",
                    "bandwidth",
                    "--socket",
                    &socket.to_string_lossy(),
                    "--interface",
                    ifname,
                    &g,
                ],
            )
            .map_err(|e| LabError::AgentFailed(format!("bandwidth of {ifname} on {node}: {e}")))?;
            told.push(node.clone());
        }
    }
    told.sort();
    told.dedup();
    write_configs(dir, state, &told)?;
    Ok(told)
}

/// Nodes whose expected groups differ between two sets of changes.
fn changed_nodes(state: &LabState, before: &[LinkChange]) -> Result<Vec<String>, LabError> {
    let mut old = state.clone();
    old.changes = before.to_vec();
    let a = model_check::expected_splits(&state.plan, &expected_groups(&old)?);
    let b = model_check::expected_splits(&state.plan, &expected_groups(state)?);
    Ok(state
        .plan
        .nodes
        .iter()
        .filter(|n| a.get(&n.name) != b.get(&n.name))
        .map(|n| n.name.clone())
        .collect())
}

fn load(name: Option<&str>) -> Result<(StateDir, LabState), LabError> {
    let dir = StateDir::find(name)?;
    let state = dir.load()?;
    Ok((dir, state))
}

fn finish(
    dir: &StateDir,
    state: &mut LabState,
    before: Vec<LinkChange>,
    report: &mut ChangeReport,
    since: Instant,
    timeout: f64,
) -> Result<(), LabError> {
    dir.save(state)?;
    let mut restart = Vec::new();
    if state.plan.options.routing == Routing::Static {
        restart.extend(changed_nodes(state, &before)?);
    }
    restart.sort();
    restart.dedup();
    restart_agents(dir, state, &restart)?;
    report.restarted = restart;
    // A timeout of 0 (congest's own restore) does not wait, so it measures nothing.
    if timeout > 0.0 {
        match model_check::wait_converged(
            dir,
            state,
            since,
            Duration::from_secs_f64(timeout.min(3600.0)),
        )? {
            Ok(s) => report.convergence_s = Some(s),
            Err(left) => report.mismatches = left,
        }
    }
    dir.event(
        &json!({"at": state::now(), "event": "converged", "change": report.change,
        "convergence_s": report.convergence_s, "restarted": report.restarted,
        "bandwidth_set": report.bandwidth_set, "mismatches": report.mismatches.len()}),
    );
    Ok(())
}

pub fn fail(name: Option<&str>, spec: &str, timeout: f64) -> Result<ChangeReport, LabError> {
    let (dir, mut state) = load(name)?;
    let (a, b, links) = resolve_pair(&state.plan, spec)?;
    let links: Vec<LinkPlan> = links.into_iter().cloned().collect();
    let before = state.changes.clone();
    let since = Instant::now();
    set_links(&state, &links.iter().collect::<Vec<_>>(), false)?;
    dir.event(&json!({"at": state::now(), "event": "fail", "a": a, "b": b}));
    state.changes.push(LinkChange::Fail {
        a: a.clone(),
        b: b.clone(),
    });
    let mut report = ChangeReport::new(
        format!("fail {a}-{b}"),
        links.iter().map(|l| l.name.clone()).collect(),
    );
    finish(&dir, &mut state, before, &mut report, since, timeout)?;
    Ok(report)
}

pub fn degrade(name: Option<&str>, spec: &str, timeout: f64) -> Result<ChangeReport, LabError> {
    let (dir, mut state) = load(name)?;
    let (pair, g) = spec
        .rsplit_once('=')
        .ok_or_else(|| LabError::Input(format!("`{spec}`: expected A-B=GBPS")))?;
    let gbps: f64 = g
        .parse()
        .ok()
        .filter(|g: &f64| g.is_finite() && *g > 0.0)
        .ok_or_else(|| LabError::Input(format!("`{spec}`: GBPS must be a positive number")))?;
    let (a, b, links) = resolve_pair(&state.plan, pair)?;
    let links: Vec<LinkPlan> = links.into_iter().cloned().collect();
    let before = state.changes.clone();
    let since = Instant::now();
    for l in &links {
        shape(&state, &l.a, &l.a_interface, gbps)?;
        shape(&state, &l.b, &l.b_interface, gbps)?;
    }
    dir.event(&json!({"at": state::now(), "event": "degrade", "a": a, "b": b, "gbps": gbps}));
    state.changes.push(LinkChange::Degrade {
        a: a.clone(),
        b: b.clone(),
        gbps,
    });
    let mut report = ChangeReport::new(
        format!("degrade {a}-{b}={gbps}"),
        links.iter().map(|l| l.name.clone()).collect(),
    );
    // BGP agents: the two ends learn the new bandwidth at run time.
    report.bandwidth_set = set_bandwidths(&dir, &state, &links, |_| gbps)?;
    finish(&dir, &mut state, before, &mut report, since, timeout)?;
    Ok(report)
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CongestReport {
    pub change: String,
    pub links: Vec<String>,
    pub percent: f64,
    /// The agents run ARN (the lab was not brought up with `--no-arn`).
    pub arn_enabled: bool,
    /// ARNs the agents sent or applied after the change (their typed events).
    pub arn: Vec<ArnSeen>,
}

pub fn congest(
    name: Option<&str>,
    spec: &str,
    percent: f64,
    duration: f64,
) -> Result<CongestReport, LabError> {
    if !(percent.is_finite() && percent > 0.0 && percent <= 100.0) {
        return Err(LabError::Input("--percent must be in (0, 100]".into()));
    }
    let (dir, mut state) = load(name)?;
    let (a, b, links) = resolve(&state.plan, spec)?;
    let links: Vec<LinkPlan> = links.into_iter().cloned().collect();
    let t0 = state::now();
    for l in &links {
        let ifname = if l.a == a {
            &l.a_interface
        } else {
            &l.b_interface
        };
        shape(&state, &a, ifname, l.gbps * percent / 100.0)?;
    }
    dir.event(&json!({"at": t0, "event": "congest", "a": a, "b": b, "percent": percent}));
    state.changes.push(LinkChange::Congest {
        a: a.clone(),
        b: b.clone(),
        percent,
    });
    dir.save(&state)?;
    let mut report = CongestReport {
        change: format!("congest {a}-{b} to {percent}%"),
        links: links.iter().map(|l| l.name.clone()).collect(),
        percent,
        arn_enabled: state.plan.options.arn.is_some() && !state.agents.is_empty(),
        arn: Vec::new(),
    };
    if duration > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(duration.min(3600.0)));
        report.arn = arn_seen(&dir, &state, t0);
        restore(name, &format!("{a}-{b}"), 0.0)?;
    } else {
        std::thread::sleep(Duration::from_secs(1));
        report.arn = arn_seen(&dir, &state, t0);
    }
    Ok(report)
}

/// An ARN an agent of the lab sent or applied after a change, from its typed events.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArnSeen {
    pub node: String,
    /// Seconds from the change.
    pub delay_s: f64,
    /// The node that sent it (the node itself for `arn_sent`).
    pub from: String,
    #[serde(flatten)]
    pub event: events::Event,
}

impl ArnSeen {
    /// One line: who, what (type, metric), from whom, when.
    pub fn summary(&self) -> String {
        match &self.event {
            events::Event::ArnSent {
                arn_type,
                metric,
                interface,
                ..
            } => format!(
                "{} sent type {arn_type} metric {metric} (port {interface}) at +{:.3} s",
                self.node, self.delay_s
            ),
            events::Event::ArnApplied {
                arn_type,
                metric,
                changes,
                ..
            } => format!(
                "{} applied type {arn_type} metric {metric} from {} ({changes} members) at +{:.3} s",
                self.node, self.from, self.delay_s
            ),
            other => format!("{} {other:?} at +{:.3} s", self.node, self.delay_s),
        }
    }
}

/// The ARNs the agents sent or applied at or after unix time `since`, by time.
pub fn arn_seen(dir: &StateDir, state: &LabState, since: f64) -> Vec<ArnSeen> {
    let nodes = state.agents.iter().map(|(n, _)| n.as_str());
    events::of_nodes(dir, nodes, since)
        .into_iter()
        .filter(|e| e.event.is_arn())
        .map(|e| ArnSeen {
            from: match &e.event {
                events::Event::ArnApplied { sender, .. } => node_of_address(&state.plan, *sender),
                _ => e.node.clone(),
            },
            delay_s: e.at - since,
            node: e.node,
            event: e.event,
        })
        .collect()
}

/// The node a link address of the plan belongs to (the address itself when none does).
fn node_of_address(plan: &Plan, addr: std::net::IpAddr) -> String {
    plan.nodes
        .iter()
        .find(|n| {
            n.ports
                .iter()
                .any(|p| std::net::IpAddr::from(p.addr) == addr)
        })
        .map_or_else(|| addr.to_string(), |n| n.name.clone())
}

pub fn restore(name: Option<&str>, spec: &str, timeout: f64) -> Result<ChangeReport, LabError> {
    let (dir, mut state) = load(name)?;
    let pairs: Vec<(String, String)> = if spec == "all" {
        state
            .changes
            .iter()
            .map(|c| match c {
                LinkChange::Fail { a, b }
                | LinkChange::Degrade { a, b, .. }
                | LinkChange::Congest { a, b, .. } => (a.clone(), b.clone()),
            })
            .collect()
    } else {
        let (a, b, _) = resolve(&state.plan, spec)?;
        vec![(a, b)]
    };
    let before = state.changes.clone();
    let since = Instant::now();
    let mut names = Vec::new();
    let mut undegraded: Vec<LinkPlan> = Vec::new();
    for (a, b) in &pairs {
        let links: Vec<LinkPlan> = state
            .plan
            .links_between(a, b)
            .into_iter()
            .cloned()
            .collect();
        set_links(&state, &links.iter().collect::<Vec<_>>(), true)?;
        for l in &links {
            shape(&state, &l.a, &l.a_interface, l.gbps)?;
            shape(&state, &l.b, &l.b_interface, l.gbps)?;
            names.push(l.name.clone());
        }
        if state.changes.iter().any(|c| matches!(c, LinkChange::Degrade { a: x, b: y, .. } if (x == a && y == b) || (x == b && y == a)))
        {
            undegraded.extend(links.iter().cloned());
        }
        state.changes.retain(|c| {
            let (x, y) = match c {
                LinkChange::Fail { a, b }
                | LinkChange::Degrade { a, b, .. }
                | LinkChange::Congest { a, b, .. } => (a, b),
            };
            !((x == a && y == b) || (x == b && y == a))
        });
        dir.event(&json!({"at": state::now(), "event": "restore", "a": a, "b": b}));
    }
    let mut report = ChangeReport::new(format!("restore {spec}"), names);
    // BGP agents: the links' own capacity again, at run time.
    report.bandwidth_set = set_bandwidths(&dir, &state, &undegraded, |l| l.gbps)?;
    finish(&dir, &mut state, before, &mut report, since, timeout)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_and_degrade_take_node_pairs() {
        let t = fare_model::topology::parse(
            std::path::Path::new("t.yaml"),
            "name: t\nnodes:\n  - {name: A, role: leaf, asn: 1, prefixes: [10.0.0.0/24]}\n  \
             - {name: B, role: spine, asn: 2}\n  - {name: C, role: leaf, asn: 3}\n\
             links:\n  - {a: A, b: B, gbps: 100}\n  - {a: A, b: B, gbps: 100}\n  \
             - {a: B, b: C, gbps: 100, name: up}\n",
        )
        .unwrap();
        let plan = crate::plan::plan(&t, "t", &Default::default()).unwrap();
        // The pair means both parallel links, also though `A-B` names the first one.
        let names = |r: (String, String, Vec<&LinkPlan>)| -> Vec<String> {
            r.2.iter().map(|l| l.name.clone()).collect()
        };
        assert_eq!(names(resolve_pair(&plan, "A-B").unwrap()), ["A-B", "A-B#2"]);
        assert_eq!(names(resolve_pair(&plan, "B-A").unwrap()), ["A-B", "A-B#2"]);
        // One of them alone would leave the model (per pair) behind.
        assert!(matches!(
            resolve_pair(&plan, "A-B#2"),
            Err(LabError::Input(_))
        ));
        // A named single link is its pair; congestion may take one parallel link.
        assert_eq!(names(resolve_pair(&plan, "up").unwrap()), ["up"]);
        assert_eq!(names(resolve(&plan, "A-B#2").unwrap()), ["A-B#2"]);
    }
}
