//! `fare lab traffic`: UDP flows between the lab's hosts (generator and sink from
//! `gen`, one process per host, inside the host namespaces only), per-second progress,
//! then the measured per-link load against the ideal weighted split.

use super::faults;
use super::ideal::{self, Demand};
use super::plan::Plan;
use super::report::{self, Comparison};
use super::state::{self, StateDir};
use super::stats;
use super::up;
use super::LabError;
use ipnet::IpNet;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Lab name; without it, the only lab that is up.
    #[arg(long)]
    pub name: Option<String>,
    /// Source nodes (repeatable); default every node with hosts.
    #[arg(long)]
    pub from: Vec<String>,
    /// Destination nodes (repeatable); default every node with hosts.
    #[arg(long)]
    pub to: Vec<String>,
    /// Flows per source host (distinct UDP source ports).
    #[arg(long, default_value_t = 64)]
    pub flows: usize,
    /// A few elephant flows instead: 2 flows per source host (overrides --flows).
    #[arg(long)]
    pub elephants: bool,
    /// Offered rate per source host, Mbit/s; default: 80 Mbit/s shared by all sources.
    #[arg(long)]
    pub rate_mbit: Option<f64>,
    /// UDP payload bytes.
    #[arg(long, default_value_t = 1000)]
    pub size: usize,
    /// Seconds of traffic.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Print the report as JSON on stdout.
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the fabric drawing here (it is always written to the state dir too).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// No per-second progress lines.
    #[arg(long)]
    pub quiet: bool,
    /// Exit 1 when the split's distance from the ideal one (total variation, 0..1) is
    /// larger than this.
    #[arg(long)]
    pub max_split_error: Option<f64>,
}

const PORT: u16 = 5201;
/// Ethernet + IPv4 + UDP headers the counters see on top of the payload.
const WIRE_OVERHEAD: f64 = 42.0;

/// A traffic end point: a host namespace (or a stub node's own namespace).
#[derive(Clone, Debug)]
struct Endpoint {
    node: String,
    ns: String,
    addr: IpAddr,
    prefix: IpNet,
}

fn endpoints(plan: &Plan, nodes: &[String]) -> Result<Vec<Endpoint>, LabError> {
    for n in nodes {
        if plan.node(n).is_none() {
            return Err(LabError::Input(format!(
                "no node `{n}` in lab {}",
                plan.lab
            )));
        }
    }
    let mut v = Vec::new();
    for n in plan
        .nodes
        .iter()
        .filter(|n| nodes.is_empty() || nodes.contains(&n.name))
    {
        for h in &n.hosts {
            v.push(Endpoint {
                node: n.name.clone(),
                ns: h.ns.clone(),
                addr: h.addr,
                prefix: h.prefix,
            });
        }
        for (e, p) in n.local_endpoints.iter().zip(&n.prefixes) {
            v.push(Endpoint {
                node: n.name.clone(),
                ns: n.ns.clone(),
                addr: *e,
                prefix: *p,
            });
        }
    }
    Ok(v)
}

fn gen_cmd(ns: &str, args: &[String]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns])
        .arg(up::fare_binary())
        .args(["lab", "gen"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    c
}

fn wait_json(children: Vec<(String, Child)>) -> Vec<(String, serde_json::Value)> {
    children
        .into_iter()
        .filter_map(|(who, c)| {
            let out = c.wait_with_output().ok()?;
            let v = serde_json::from_slice(&out.stdout).ok()?;
            Some((who, v))
        })
        .collect()
}

pub fn traffic(a: &Args) -> Result<Comparison, LabError> {
    if !(a.duration.is_finite() && a.duration >= 1.0 && a.duration <= 3600.0) {
        return Err(LabError::Input(
            "--duration must be between 1 and 3600 seconds".into(),
        ));
    }
    let dir = StateDir::find(a.name.as_deref())?;
    let state = dir.load()?;
    let plan = &state.plan;
    let sources = endpoints(plan, &a.from)?;
    let sinks = endpoints(plan, &a.to)?;
    // Each source sends to every sink behind another node, skipping prefixes its own node
    // also originates (anycast: those stay local).
    let mut pairs: Vec<(Endpoint, Vec<Endpoint>)> = Vec::new();
    for s in &sources {
        let own = &plan
            .node(&s.node)
            .map(|n| n.prefixes.clone())
            .unwrap_or_default();
        let dsts: Vec<Endpoint> = sinks
            .iter()
            .filter(|d| d.node != s.node && !own.contains(&d.prefix))
            .filter(|d| d.addr.is_ipv4() == s.addr.is_ipv4())
            .cloned()
            .collect();
        if !dsts.is_empty() {
            pairs.push((s.clone(), dsts));
        }
    }
    if pairs.is_empty() {
        return Err(LabError::Input(
            "no source/destination pair: need hosts behind two different nodes".into(),
        ));
    }
    let flows = if a.elephants {
        2
    } else {
        a.flows.clamp(1, 4096)
    };
    let rate = a.rate_mbit.unwrap_or(80.0 / pairs.len() as f64);
    if !(rate.is_finite() && rate > 0.0) {
        return Err(LabError::Input("--rate-mbit must be positive".into()));
    }
    let size = a.size.clamp(18, 8972);
    let duration = a.duration;

    // Sinks first (they outlive the generators by a margin), then the generators.
    let mut sink_children = Vec::new();
    let mut sink_ns: Vec<&Endpoint> = Vec::new();
    for (_, dsts) in &pairs {
        for d in dsts {
            if !sink_ns.iter().any(|x| x.ns == d.ns) {
                sink_ns.push(d);
            }
        }
    }
    for d in &sink_ns {
        let args = vec![
            "--sink".into(),
            "--port".into(),
            PORT.to_string(),
            "--duration".into(),
            format!("{}", duration + 2.0),
        ];
        sink_children.push((d.ns.clone(), gen_cmd(&d.ns, &args).spawn()?));
    }
    std::thread::sleep(Duration::from_millis(300));
    let before = stats::snapshot(plan);
    let mut gen_children = Vec::new();
    let mut demands = Vec::new();
    for (s, dsts) in &pairs {
        let mut args = vec![
            "--port".to_string(),
            PORT.to_string(),
            "--flows".into(),
            flows.to_string(),
            "--rate-kbit".into(),
            format!("{}", (rate * 1000.0).round() as u64),
            "--size".into(),
            size.to_string(),
            "--duration".into(),
            format!("{duration}"),
        ];
        for d in dsts {
            args.push("--to".into());
            args.push(d.addr.to_string());
        }
        gen_children.push((s.node.clone(), gen_cmd(&s.ns, &args).spawn()?));
        // Flow i goes to destination i % n: the share of each destination.
        for (k, d) in dsts.iter().enumerate() {
            let n_flows = (flows + dsts.len() - 1 - k) / dsts.len();
            let wire = rate * (size as f64 + WIRE_OVERHEAD) / size as f64;
            demands.push(Demand {
                from: s.node.clone(),
                prefix: d.prefix,
                mbit: wire * n_flows as f64 / flows as f64,
            });
        }
    }
    let start = Instant::now();
    let mut last = before.clone();
    if !a.quiet {
        eprintln!(
            "traffic: {} sources -> {} sinks, {flows} flows each, {rate:.1} Mbit/s each, {duration} s",
            pairs.len(),
            sink_ns.len()
        );
    }
    while start.elapsed().as_secs_f64() < duration {
        std::thread::sleep(Duration::from_secs(1).min(Duration::from_secs_f64(
            (duration - start.elapsed().as_secs_f64()).max(0.05),
        )));
        if !a.quiet {
            let now = stats::snapshot(plan);
            let total: f64 = stats::loads(plan, &last, &now, |_| 0.0)
                .iter()
                .map(|l| l.mbit)
                .sum();
            eprintln!(
                "traffic: {:>4.0} s  fabric links carry {total:.1} Mbit/s",
                start.elapsed().as_secs_f64()
            );
            last = now;
        }
    }
    let sent = wait_json(gen_children);
    let after = stats::snapshot(plan);
    let received = wait_json(sink_children);

    let gbps = faults::current_gbps(&state);
    let scale = plan.options.scale_mbit_per_gbps;
    let measured = stats::loads(plan, &before, &after, |link| {
        gbps.get(link).copied().unwrap_or(0.0) * scale
    });
    let groups = faults::expected_groups(&state)?;
    let mut origins: HashMap<IpNet, Vec<String>> = HashMap::new();
    for n in &plan.nodes {
        for p in &n.prefixes {
            origins.entry(*p).or_default().push(n.name.clone());
        }
    }
    // Demands in Mbit/s over the measured interval (generators ran `duration`).
    let (ideal, unroutable) = ideal::split(&groups, &origins, &demands);
    let sum = |v: &[(String, serde_json::Value)], k: &str| -> u64 {
        v.iter().map(|(_, j)| j[k].as_u64().unwrap_or(0)).sum()
    };
    let cmp = report::compare(
        plan,
        &measured,
        &ideal,
        report::Totals {
            sent_packets: sum(&sent, "packets"),
            received_packets: sum(&received, "packets"),
            unroutable_mbit: unroutable,
            duration_s: duration,
            flows_per_source: flows,
            rate_mbit_per_source: rate,
            split: format!("{:?}", plan.options.split).to_lowercase(),
            changes: state.changes.clone(),
        },
    );
    let svg = report::svg(plan, &cmp);
    let svg_path = dir.path.join("fabric.svg");
    std::fs::write(&svg_path, &svg)?;
    if let Some(p) = &a.svg {
        std::fs::write(p, &svg)?;
    }
    if let Ok(text) = serde_json::to_string_pretty(&cmp) {
        std::fs::write(dir.path.join("last-traffic.json"), text)?;
    }
    dir.event(
        &serde_json::json!({"at": state::now(), "event": "traffic", "split_error": cmp.split_error,
        "delivered": cmp.totals.received_packets, "sent": cmp.totals.sent_packets}),
    );
    Ok(cmp)
}

pub fn run(a: Args) -> Result<(), LabError> {
    let cmp = traffic(&a)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&cmp).unwrap_or_default());
    } else {
        print!("{}", report::table(&cmp));
    }
    match a.max_split_error {
        Some(max) if cmp.split_error.is_nan() || cmp.split_error > max => {
            Err(LabError::Check(format!(
                "the split is {:.3} from the ideal one, more than --max-split-error {max}",
                cmp.split_error
            )))
        }
        _ => Ok(()),
    }
}
