//! The live fabric against the model, through the management sockets: `fare lab up` on
//! every topology in topologies/ that fits this machine, in both modes (draft, averaged),
//! then the file's first link degraded to 75%,
//! 50% and 25% of its capacity and failed, and its last link degraded to 50% and failed,
//! each change restored before the next.
//!
//! Every step is judged twice: by the lab's own check (`lab up`, `degrade`, `fail`,
//! `restore` exit 1 when a session is down or a group differs from the model), and by
//! this test's comparison, written apart from the lab's: every agent's groups
//! (`fare show groups --json`, members that forward) mapped to topology links through the
//! lab's plan, against `fare weights --json` with the same mode and changes, as link ->
//! weight ratios per (node, prefix); and every session Established except over a failed
//! link. A step passes when both say so.
//!
//! Bounded: topologies above MAX_NODES nodes (draft-fig2: 80) and those needing a tool
//! that is missing (BMv2) are skipped with the reason printed; cases left when BUDGET has
//! passed are skipped the same way. Each lab is taken down even when a step fails.
//! FARE_DIFF_ONLY=LABEL,... (file stems) runs those topologies only, the others skipped.
//! At the end every failing step is listed with its differences (node, prefix, live vs
//! model) and the test fails.

use anyhow::{Context, Result};
use fare_integration::lab::{fare, Lab};
use fare_integration::{have_root, have_tool, repo_root};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Labs above this many nodes get one step only (lab up in draft mode, compared with the
/// model): every node runs an agent on 2 shared cores, and each step of a large fabric
/// costs a full reconvergence. Above MAX_BIG_NODES they are skipped.
const MAX_NODES: usize = 24;
const MAX_BIG_NODES: usize = 100;
/// `lab up`'s convergence timeout for those large fabrics.
const BIG_UP_TIMEOUT: &str = "240";
/// Total time for the cases; the rest is skipped (with its name printed).
const BUDGET: Duration = Duration::from_secs(540);
/// Seconds each change gets to converge (the lab's --timeout), and `lab up`.
const STEP_TIMEOUT: &str = "10";
const UP_TIMEOUT: &str = "40";

/// node -> prefix -> topology link -> weight (reduced by the gcd of the group).
type Groups = BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>;

#[derive(Clone, Debug)]
enum Change {
    Fail(String, String),
    Degrade(String, String, f64),
}

impl Change {
    fn pair(&self) -> String {
        match self {
            Change::Fail(a, b) | Change::Degrade(a, b, _) => format!("{a}-{b}"),
        }
    }
}

struct Case {
    label: String,
    topology: PathBuf,
    /// (a, b, gbps) of the file's first and last links, and the fractions of its
    /// capacity each is degraded to (then it fails).
    links: Vec<(String, String, f64, &'static [f64])>,
}

fn reduce(m: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = m.values().fold(0, |a, &b| gcd(a, b)).max(1);
    m.iter().map(|(k, v)| (k.clone(), v / g)).collect()
}

fn text(m: Option<&BTreeMap<String, u64>>) -> String {
    match m {
        None => "no group".into(),
        Some(m) => m
            .iter()
            .map(|(l, w)| format!("{l}:{w}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// `fare weights TOPO --mode M --json` with the changes: the model.
fn model(topology: &Path, mode: &str, changes: &[Change]) -> Result<Groups> {
    let topo = topology.to_string_lossy().into_owned();
    let mut args: Vec<String> = vec![
        "weights".into(),
        topo,
        "--mode".into(),
        mode.into(),
        "--json".into(),
    ];
    for c in changes {
        match c {
            Change::Fail(..) => args.extend(["--fail".into(), c.pair()]),
            Change::Degrade(_, _, g) => {
                args.extend(["--degrade".into(), format!("{}={g}", c.pair())])
            }
        }
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fare(&refs)?;
    anyhow::ensure!(
        out.status.success(),
        "fare weights: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout)?;
    let mut groups = Groups::new();
    for g in list.as_array().into_iter().flatten() {
        let (Some(node), Some(prefix)) = (g["node"].as_str(), g["prefix"].as_str()) else {
            continue;
        };
        let mut members = BTreeMap::new();
        for m in g["members"].as_array().into_iter().flatten() {
            if let Some(link) = m["link"].as_str() {
                *members.entry(link.to_string()).or_insert(0) += m["weight"].as_u64().unwrap_or(0);
            }
        }
        if !members.is_empty() {
            groups
                .entry(node.to_string())
                .or_default()
                .insert(prefix.to_string(), reduce(&members));
        }
    }
    Ok(groups)
}

/// What the agents have: groups (members that forward, by topology link) and the
/// sessions not Established over links that are not failed, as difference lines.
fn live(lab: &str, failed: &BTreeSet<String>) -> Result<(Groups, Vec<String>)> {
    let dir = format!("/run/fare/lab/{lab}");
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{dir}/state.json")).context("lab state")?,
    )?;
    let mut groups = Groups::new();
    let mut sessions = Vec::new();
    for node in state["plan"]["nodes"].as_array().into_iter().flatten() {
        let name = node["name"].as_str().unwrap_or("").to_string();
        let ports: Vec<(String, String, String)> = node["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let s = |k: &str| p[k].as_str().unwrap_or("").to_string();
                (s("interface"), s("link"), s("peer_addr"))
            })
            .collect();
        if node["frr"] == Value::Bool(true) {
            // No agent: FRR's groups are its kernel routes; its sessions are judged from
            // the fare neighbors' side.
            let ns = node["ns"].as_str().unwrap_or("");
            for (prefix, members) in kernel_groups(ns, &ports)? {
                groups
                    .entry(name.clone())
                    .or_default()
                    .insert(prefix, reduce(&members));
            }
            continue;
        }
        let socket = format!("{dir}/{name}.sock");
        let show = |what: &str| -> Option<Value> {
            let out = fare(&["show", "--socket", &socket, what, "--json"]).ok()?;
            serde_json::from_slice(&out.stdout).ok()
        };
        let Some(list) = show("groups") else {
            sessions.push(format!("{name}: no answer on {socket}"));
            continue;
        };
        for g in list.as_array().into_iter().flatten() {
            let Some(prefix) = g["prefix"].as_str() else {
                continue;
            };
            let mut members = BTreeMap::new();
            for m in g["members"].as_array().into_iter().flatten() {
                if m["active"] == Value::Bool(false) {
                    continue;
                }
                let i = m["interface"].as_str().unwrap_or("");
                let link = ports
                    .iter()
                    .find(|p| p.0 == i)
                    .map(|p| p.1.clone())
                    .unwrap_or_else(|| format!("?{i}"));
                *members.entry(link).or_insert(0) += m["weight"].as_u64().unwrap_or(0);
            }
            if !members.is_empty() {
                groups
                    .entry(name.clone())
                    .or_default()
                    .insert(prefix.to_string(), reduce(&members));
            }
        }
        for n in show("neighbors")
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let st = n["state"].as_str().unwrap_or("?");
            let addr = n["address"].as_str().unwrap_or("?");
            let link = ports
                .iter()
                .find(|p| p.2 == addr)
                .map(|p| p.1.clone())
                .unwrap_or_default();
            if st != "Established" && !failed.contains(&link) {
                sessions.push(format!("{name} session over {link} ({addr}): {st}"));
            }
        }
    }
    Ok((groups, sessions))
}

/// An FRR node's BGP routes in its kernel: prefix -> topology link -> weight.
fn kernel_groups(
    ns: &str,
    ports: &[(String, String, String)],
) -> Result<Vec<(String, BTreeMap<String, u64>)>> {
    let routes = fare_integration::lab::kernel_routes(ns, &["proto", "bgp"])?;
    Ok(routes
        .into_iter()
        .map(|(dst, hops)| {
            let mut members = BTreeMap::new();
            for (dev, weight) in hops {
                let link = ports
                    .iter()
                    .find(|p| p.0 == dev)
                    .map(|p| p.1.clone())
                    .unwrap_or_else(|| format!("?{dev}"));
                *members.entry(link).or_insert(0) += weight;
            }
            (dst, members)
        })
        .collect())
}

fn diff(live: &Groups, model: &Groups) -> Vec<String> {
    let mut out = Vec::new();
    let nodes: BTreeSet<&String> = live.keys().chain(model.keys()).collect();
    for node in nodes {
        let (l, m) = (live.get(node), model.get(node));
        let prefixes: BTreeSet<&String> = l
            .into_iter()
            .flat_map(|x| x.keys())
            .chain(m.into_iter().flat_map(|x| x.keys()))
            .collect();
        for p in prefixes {
            let (a, b) = (l.and_then(|x| x.get(p)), m.and_then(|x| x.get(p)));
            if a != b {
                out.push(format!("{node} {p}: live {} | model {}", text(a), text(b)));
            }
        }
    }
    out
}

/// Links of the topology a failure takes down (their sessions may be down).
fn failed_links(case: &Case, changes: &[Change]) -> Result<BTreeSet<String>> {
    let topo = fare::topology::load(&case.topology)?;
    let mut out = BTreeSet::new();
    for c in changes {
        if let Change::Fail(a, b) = c {
            for l in &topo.links {
                let (x, y) = (&topo.nodes[l.a].name, &topo.nodes[l.b].name);
                if (x == a && y == b) || (x == b && y == a) {
                    out.insert(l.name.clone());
                }
            }
        }
    }
    Ok(out)
}

struct Outcome {
    step: String,
    lab_ok: bool,
    lab_said: String,
    own: Vec<String>,
}

fn run_case(
    case: &Case,
    mode: &str,
    lab_name: &str,
    deadline: Instant,
    report: &mut Vec<Outcome>,
) -> Result<()> {
    let topo = case.topology.to_string_lossy().into_owned();
    let (lab, up) = Lab::up(
        &topo,
        lab_name,
        &[
            "--mode",
            mode,
            "--no-arn",
            "--dataplane",
            "kernel",
            "--converge-timeout",
            if case.links.is_empty() {
                BIG_UP_TIMEOUT
            } else {
                UP_TIMEOUT
            },
        ],
    )?;
    let mut changes: Vec<Change> = Vec::new();
    let mut judge = |step: String, out: &std::process::Output, changes: &[Change]| -> Result<()> {
        let (groups, mut own) = live(lab_name, &failed_links(case, changes)?)?;
        own.extend(diff(&groups, &model(&case.topology, mode, changes)?));
        let said = String::from_utf8_lossy(&out.stderr);
        let lab_said: String = said
            .lines()
            .filter(|l| l.starts_with("  ") || l.starts_with("fare:"))
            .take(12)
            .collect::<Vec<_>>()
            .join("\n");
        eprintln!(
            "  {step}: lab check {}, own comparison {} differences",
            if out.status.success() { "ok" } else { "FAILED" },
            own.len()
        );
        for l in own.iter().take(4) {
            eprintln!("      {l}");
        }
        report.push(Outcome {
            step,
            lab_ok: out.status.success(),
            lab_said,
            own,
        });
        Ok(())
    };
    judge(format!("{} {mode} lab up", case.label), &up, &changes)?;
    if !up.status.success() {
        // Every later step would differ the same way: the fabric never converged.
        eprintln!("  (changes skipped: lab up did not converge)");
        return lab.down();
    }
    let steps: Vec<Change> = case
        .links
        .iter()
        .flat_map(|(a, b, gbps, fractions)| {
            fractions
                .iter()
                .map(move |f| Change::Degrade(a.clone(), b.clone(), gbps * f))
                .chain([Change::Fail(a.clone(), b.clone())])
        })
        .collect();
    for step in steps {
        if Instant::now() > deadline {
            eprintln!("  (remaining changes skipped: the budget is spent)");
            break;
        }
        let pair = step.pair();
        let (verb, arg) = match &step {
            Change::Fail(..) => ("fail", pair.clone()),
            Change::Degrade(_, _, g) => ("degrade", format!("{pair}={g}")),
        };
        let out = fare(&[
            "lab",
            verb,
            &arg,
            "--name",
            lab_name,
            "--timeout",
            STEP_TIMEOUT,
        ])?;
        changes.push(step);
        judge(
            format!("{} {mode} {verb} {arg}", case.label),
            &out,
            &changes,
        )?;
        let out = fare(&[
            "lab",
            "restore",
            &pair,
            "--name",
            lab_name,
            "--timeout",
            STEP_TIMEOUT,
        ])?;
        changes.clear();
        judge(
            format!("{} {mode} restore {pair}", case.label),
            &out,
            &changes,
        )?;
    }
    lab.down()
}

fn cases() -> Result<(Vec<Case>, Vec<String>)> {
    let mut skipped = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("topologies"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    // The cases first: Figure 1 (multi-homed prefix)...
    // Then the small 5-stage fabric (remote-spine rules).
    files.sort_by_key(|p| !(p.ends_with("draft-fig1.yaml") || p.ends_with("clos5-small.yaml")));
    let bmv2 = which("simple_switch_grpc");
    let mut list = Vec::new();
    for path in files {
        let topo = fare::topology::load(&path)?;
        let label = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(only) = std::env::var("FARE_DIFF_ONLY")
            .ok()
            .filter(|o| !o.is_empty())
        {
            if !only.split(',').any(|o| o == label) {
                skipped.push(format!("{label}: not in FARE_DIFF_ONLY={only}"));
                continue;
            }
        }
        if topo.nodes.len() > MAX_BIG_NODES {
            skipped.push(format!(
                "{label}: {} nodes, more than {MAX_BIG_NODES} (an agent each on this machine)",
                topo.nodes.len()
            ));
            continue;
        }
        if !bmv2
            && topo
                .nodes
                .iter()
                .any(|n| n.target == fare::topology::Target::Bmv2)
        {
            skipped.push(format!("{label}: BMv2 nodes, no simple_switch_grpc here"));
            continue;
        }
        let (Some(first), Some(last)) = (topo.links.first(), topo.links.last()) else {
            skipped.push(format!("{label}: no links"));
            continue;
        };
        let end = |l: &fare::topology::Link, f: &'static [f64]| {
            (
                topo.nodes[l.a].name.clone(),
                topo.nodes[l.b].name.clone(),
                l.gbps,
                f,
            )
        };
        let mut links = vec![end(first, &[0.75, 0.5, 0.25])];
        if (last.a, last.b) != (first.a, first.b) {
            links.push(end(last, &[0.5]));
        }
        if topo.nodes.len() > MAX_NODES {
            // Large: lab up only (no link changes), see MAX_NODES.
            links.clear();
        }
        list.push(Case {
            label,
            links,
            topology: path,
        });
    }
    // Large fabrics last: they run whatever the budget, the others share it.
    list.sort_by_key(|c| c.links.is_empty());
    Ok((list, skipped))
}

fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

#[test]
fn lab_differential_every_topology_both_modes() -> Result<()> {
    let test = "lab_differential_every_topology_both_modes";
    if !have_root(test) || !have_tool(test, "tc") || !have_tool(test, "nsenter") {
        return Ok(());
    }
    let result = (|| -> Result<String> {
        let (cases, mut skipped) = cases()?;
        let start = Instant::now();
        let mut report = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            // A large fabric (no link changes) runs once, in draft mode, whatever the
            // budget: it is the only case of its size.
            let modes: &[&str] = if case.links.is_empty() {
                &["draft"]
            } else {
                &["draft", "averaged"]
            };
            for &mode in modes {
                if !case.links.is_empty() && start.elapsed() > BUDGET {
                    skipped.push(format!(
                        "{} {mode}: the {}-s budget was spent",
                        case.label,
                        BUDGET.as_secs()
                    ));
                    continue;
                }
                let lab = format!("df{}{i}{}", std::process::id() % 10_000, &mode[..1]);
                let on: Vec<String> = case
                    .links
                    .iter()
                    .map(|l| format!("{}-{}", l.0, l.1))
                    .collect();
                eprintln!("{} {mode} (lab {lab}, links {})", case.label, on.join(", "));
                if let Err(e) = run_case(case, mode, &lab, start + BUDGET, &mut report) {
                    report.push(Outcome {
                        step: format!("{} {mode}", case.label),
                        lab_ok: false,
                        lab_said: format!("{e:#}"),
                        own: vec![],
                    });
                }
            }
        }
        let mut s = String::new();
        for k in &skipped {
            fare_integration::skip(test, k);
        }
        let failed: Vec<&Outcome> = report
            .iter()
            .filter(|o| !o.lab_ok || !o.own.is_empty())
            .collect();
        let _ = writeln!(
            s,
            "{} steps, {} passed, {} failed ({:.0} s)",
            report.len(),
            report.len() - failed.len(),
            failed.len(),
            start.elapsed().as_secs_f64()
        );
        for o in &failed {
            let _ = writeln!(
                s,
                "FAILED {}: lab check {}{}",
                o.step,
                if o.lab_ok {
                    "passed (but this test's comparison differs)"
                } else {
                    "failed"
                },
                if o.own.is_empty() {
                    String::new()
                } else {
                    format!(", {} differences", o.own.len())
                }
            );
            for l in o.own.iter().take(12) {
                let _ = writeln!(s, "    {l}");
            }
            if o.own.len() > 12 {
                let _ = writeln!(s, "    ... and {} more", o.own.len() - 12);
            }
            if o.own.is_empty() && !o.lab_said.is_empty() {
                for l in o.lab_said.lines() {
                    let _ = writeln!(s, "    lab: {l}");
                }
            }
        }
        eprintln!("{s}");
        anyhow::ensure!(
            failed.is_empty(),
            "{} steps differ from the model",
            failed.len()
        );
        Ok(s)
    })();
    result.map(|_| ())
}
