//! `fare lab traffic`: UDP flows between the lab's hosts (generator and sink from
//! `gen`, one process per host, inside the host namespaces only), per-second progress,
//! then the measured per-link load against the ideal weighted split. Every second's load
//! of every link goes into the lab's series (`fare lab report` draws it).

use super::model_check;
use super::plan::Plan;
use super::report::{self, Comparison};
use super::report_data;
use super::state::{self, StateDir};
use super::stats;
use super::traffic_load::{self, Demand};
use super::up;
use super::LabError;
use ipnet::IpNet;
use std::collections::HashMap;
use std::net::IpAddr;
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

/// Each source sends to every sink behind another node, skipping prefixes its own node
/// also originates (anycast: those stay local).
fn pairs(plan: &Plan, a: &Args) -> Result<Vec<(Endpoint, Vec<Endpoint>)>, LabError> {
    let sources = endpoints(plan, &a.from)?;
    let sinks = endpoints(plan, &a.to)?;
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
    Ok(pairs)
}

/// Generators or sinks, each with the node or namespace it runs for.
type Processes = Vec<(String, Child)>;

/// What every generator sends: flows, rate per source (Mbit/s), payload bytes, seconds.
struct Load {
    flows: usize,
    rate: f64,
    size: usize,
    duration: f64,
    /// Stamped packets counted per slice of this many ms (`fare lab gen --buckets-ms`).
    buckets_ms: Option<u64>,
}

impl Load {
    fn bucket_args(&self) -> Vec<String> {
        self.buckets_ms
            .map(|b| vec!["--buckets-ms".to_string(), b.to_string()])
            .unwrap_or_default()
    }
}

/// Starts one sink per destination namespace (they outlive the generators by a margin).
fn start_sinks(pairs: &[(Endpoint, Vec<Endpoint>)], load: &Load) -> Result<Processes, LabError> {
    let mut sink_ns: Vec<&Endpoint> = Vec::new();
    for d in pairs.iter().flat_map(|(_, dsts)| dsts) {
        if !sink_ns.iter().any(|x| x.ns == d.ns) {
            sink_ns.push(d);
        }
    }
    let mut children = Vec::new();
    for d in &sink_ns {
        let args = vec![
            "--sink".into(),
            "--port".into(),
            PORT.to_string(),
            "--duration".into(),
            format!("{}", load.duration + 2.0),
        ];
        let args = [args, load.bucket_args()].concat();
        children.push((d.ns.clone(), gen_cmd(&d.ns, &args).spawn()?));
    }
    Ok(children)
}

/// Starts one generator per source; returns them with the demands they make (Mbit/s on
/// the wire, per destination prefix).
fn start_generators(
    pairs: &[(Endpoint, Vec<Endpoint>)],
    load: &Load,
) -> Result<(Processes, Vec<Demand>), LabError> {
    let (mut children, mut demands) = (Vec::new(), Vec::new());
    for (s, dsts) in pairs {
        let mut args = vec![
            "--port".to_string(),
            PORT.to_string(),
            "--flows".into(),
            load.flows.to_string(),
            "--rate-kbit".into(),
            format!("{}", (load.rate * 1000.0).round() as u64),
            "--size".into(),
            load.size.to_string(),
            "--duration".into(),
            format!("{}", load.duration),
        ];
        args.extend(load.bucket_args());
        for d in dsts {
            args.push("--to".into());
            args.push(d.addr.to_string());
        }
        children.push((s.node.clone(), gen_cmd(&s.ns, &args).spawn()?));
        // Flow i goes to destination i % n: the share of each destination.
        for (k, d) in dsts.iter().enumerate() {
            let n_flows = (load.flows + dsts.len() - 1 - k) / dsts.len();
            let wire = load.rate * (load.size as f64 + WIRE_OVERHEAD) / load.size as f64;
            demands.push(Demand {
                from: s.node.clone(),
                prefix: d.prefix,
                mbit: wire * n_flows as f64 / load.flows as f64,
            });
        }
    }
    Ok((children, demands))
}

/// Samples every link's load each second while the generators run, into the lab's
/// series (`report_data`); prints a progress line per second unless `quiet`.
fn sample_while_running(dir: &StateDir, plan: &Plan, duration: f64, quiet: bool) {
    let start = Instant::now();
    let mut last = stats::snapshot(plan);
    while start.elapsed().as_secs_f64() < duration {
        std::thread::sleep(Duration::from_secs(1).min(Duration::from_secs_f64(
            (duration - start.elapsed().as_secs_f64()).max(0.05),
        )));
        let now = stats::snapshot(plan);
        let loads = stats::loads(plan, &last, &now, |_| 0.0);
        let total: f64 = loads.iter().map(|l| l.mbit).sum();
        report_data::append_sample(
            dir,
            &report_data::Sample {
                at: state::now(),
                loads: loads
                    .into_iter()
                    .filter(|l| l.mbit > 0.0)
                    .map(|l| (l.link, l.from, l.mbit))
                    .collect(),
            },
        );
        if !quiet {
            eprintln!(
                "traffic: {:>4.0} s  fabric links carry {total:.1} Mbit/s",
                start.elapsed().as_secs_f64()
            );
        }
        last = now;
    }
}

fn load_of(a: &Args, sources: usize) -> Result<Load, LabError> {
    if !(a.duration.is_finite() && a.duration >= 1.0 && a.duration <= 3600.0) {
        return Err(LabError::Input(
            "--duration must be between 1 and 3600 seconds".into(),
        ));
    }
    let rate = a.rate_mbit.unwrap_or(80.0 / sources as f64);
    if !(rate.is_finite() && rate > 0.0) {
        return Err(LabError::Input("--rate-mbit must be positive".into()));
    }
    Ok(Load {
        flows: if a.elephants {
            2
        } else {
            a.flows.clamp(1, 4096)
        },
        rate,
        size: a.size.clamp(18, 8972),
        duration: a.duration,
        buckets_ms: None,
    })
}

/// Steady stamped traffic between every pair of the lab's hosts behind different nodes
/// (as `fare lab traffic` with defaults), for a soak: each generator and sink counts
/// packets per `buckets_ms` slice of their send time. Killed when dropped unfinished.
pub struct Steady {
    sinks: Processes,
    generators: Processes,
    /// Host namespace or address -> node behind which it sits.
    nodes: HashMap<String, String>,
}

/// A run of packets one flow lost (from the sink's sequence numbers), with the nodes of
/// its source and destination hosts.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FlowGap {
    pub from: String,
    pub to: String,
    #[serde(flatten)]
    pub gap: crate::gaps::Gap,
}

/// A time a generator fell [`gen::STALL`](crate::gen::STALL) packets or more behind its
/// pace (and sent them in a burst).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Stall {
    pub node: String,
    pub at_ms: u64,
    pub packets: u64,
}

/// What a steady run sent and received: per slice (unix ms / `buckets_ms`), summed over
/// the sources and the sinks.
#[derive(Debug, Default, Clone)]
pub struct SteadyCounts {
    pub sources: usize,
    pub sinks: usize,
    pub sent: std::collections::BTreeMap<u64, u64>,
    pub received: std::collections::BTreeMap<u64, u64>,
    pub gaps: Vec<FlowGap>,
    pub stalls: Vec<Stall>,
}

impl Steady {
    /// Starts sinks then generators: `flows` per source host at `rate_mbit` each.
    pub fn start(
        plan: &Plan,
        flows: usize,
        rate_mbit: f64,
        duration: f64,
        buckets_ms: u64,
    ) -> Result<Steady, LabError> {
        let a = Args {
            name: None,
            from: Vec::new(),
            to: Vec::new(),
            flows,
            elephants: false,
            rate_mbit: Some(rate_mbit),
            size: 200,
            duration,
            json: false,
            quiet: true,
            max_split_error: None,
        };
        let pairs = pairs(plan, &a)?;
        let load = Load {
            buckets_ms: Some(buckets_ms.max(1)),
            ..load_of(&a, pairs.len())?
        };
        // Generators may start seconds late on a loaded machine: the sinks outlast them.
        let sink_load = Load {
            duration: duration + 10.0,
            buckets_ms: load.buckets_ms,
            ..load_of(&a, pairs.len())?
        };
        let sinks = start_sinks(&pairs, &sink_load)?;
        std::thread::sleep(Duration::from_millis(300));
        let mut nodes = HashMap::new();
        for e in pairs.iter().flat_map(|(s, d)| std::iter::once(s).chain(d)) {
            nodes.insert(e.ns.clone(), e.node.clone());
            nodes.insert(e.addr.to_string(), e.node.clone());
        }
        let mut s = Steady {
            sinks,
            generators: Vec::new(),
            nodes,
        };
        s.generators = start_generators(&pairs, &load)?.0;
        Ok(s)
    }

    /// Waits for the generators, then the sinks, and sums their slices.
    pub fn finish(mut self) -> SteadyCounts {
        let sum = |v: Vec<(String, serde_json::Value)>| {
            let mut m = std::collections::BTreeMap::new();
            for (_, j) in &v {
                for (k, n) in j["buckets"].as_object().into_iter().flatten() {
                    if let (Ok(k), Some(n)) = (k.parse::<u64>(), n.as_u64()) {
                        *m.entry(k).or_insert(0) += n;
                    }
                }
            }
            (v.len(), m)
        };
        let generators = wait_json(std::mem::take(&mut self.generators));
        let sinks = wait_json(std::mem::take(&mut self.sinks));
        let stalls = generators
            .iter()
            .flat_map(|(node, j)| {
                let v: Vec<(u64, u64)> =
                    serde_json::from_value(j["stalls"].clone()).unwrap_or_default();
                v.into_iter().map(|(at_ms, packets)| Stall {
                    node: node.clone(),
                    at_ms,
                    packets,
                })
            })
            .collect();
        let gaps = sinks
            .iter()
            .flat_map(|(ns, j)| {
                let v: Vec<crate::gaps::Gap> =
                    serde_json::from_value(j["gaps"].clone()).unwrap_or_default();
                v.into_iter().map(|gap| self.flow_gap(ns, gap))
            })
            .collect();
        let (sources, sent) = sum(generators);
        let (sinks, received) = sum(sinks);
        SteadyCounts {
            sources,
            sinks,
            sent,
            received,
            gaps,
            stalls,
        }
    }

    /// A sink's gap with the nodes of both ends (the source by the flow's address).
    fn flow_gap(&self, sink_ns: &str, gap: crate::gaps::Gap) -> FlowGap {
        let node = |k: &str| self.nodes.get(k).cloned().unwrap_or_else(|| k.to_string());
        let ip = gap
            .flow
            .parse::<std::net::SocketAddr>()
            .map_or(gap.flow.clone(), |a| a.ip().to_string());
        FlowGap {
            from: node(&ip),
            to: node(sink_ns),
            gap,
        }
    }
}

impl Drop for Steady {
    fn drop(&mut self) {
        for (_, c) in self.generators.iter_mut().chain(self.sinks.iter_mut()) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn traffic(a: &Args) -> Result<Comparison, LabError> {
    let dir = StateDir::find(a.name.as_deref())?;
    let state = dir.load()?;
    let plan = &state.plan;
    let pairs = pairs(plan, a)?;
    let load = load_of(a, pairs.len())?;
    let sinks = start_sinks(&pairs, &load)?;
    std::thread::sleep(Duration::from_millis(300));
    let before = stats::snapshot(plan);
    let (generators, demands) = start_generators(&pairs, &load)?;
    if !a.quiet {
        eprintln!(
            "traffic: {} sources -> {} sinks, {} flows each, {:.1} Mbit/s each, {} s",
            pairs.len(),
            sinks.len(),
            load.flows,
            load.rate,
            load.duration
        );
    }
    sample_while_running(&dir, plan, load.duration, a.quiet);
    let sent = wait_json(generators);
    let after = stats::snapshot(plan);
    let received = wait_json(sinks);

    let gbps = model_check::current_gbps(&state);
    let scale = plan.options.scale_mbit_per_gbps;
    let measured = stats::loads(plan, &before, &after, |link| {
        gbps.get(link).copied().unwrap_or(0.0) * scale
    });
    let groups = model_check::expected_groups(&state)?;
    let mut origins: HashMap<IpNet, Vec<String>> = HashMap::new();
    for n in &plan.nodes {
        for p in &n.prefixes {
            origins.entry(*p).or_default().push(n.name.clone());
        }
    }
    // Demands in Mbit/s over the measured interval (generators ran `duration`).
    let (ideal, unroutable) = traffic_load::split(&groups, &origins, &demands);
    let sum = |v: &[(String, serde_json::Value)], k: &str| -> u64 {
        v.iter().map(|(_, j)| j[k].as_u64().unwrap_or(0)).sum()
    };
    let totals = report::Totals {
        sent_packets: sum(&sent, "packets"),
        received_packets: sum(&received, "packets"),
        unroutable_mbit: unroutable,
        duration_s: load.duration,
        flows_per_source: load.flows,
        rate_mbit_per_source: load.rate,
        split: format!("{:?}", plan.options.split).to_lowercase(),
        changes: state.changes.clone(),
    };
    let cmp = report::compare(plan, &measured, &ideal, totals);
    if let Ok(text) = serde_json::to_string_pretty(&cmp) {
        std::fs::write(dir.path.join("last-traffic.json"), text)?;
    }
    dir.event(
        &serde_json::json!({"at": state::now(), "event": "traffic", "split_error": cmp.split_error,
        "delivered": cmp.totals.received_packets, "sent": cmp.totals.sent_packets,
        "duration_s": load.duration}),
    );
    Ok(cmp)
}

pub fn run(a: Args) -> Result<(), LabError> {
    let cmp = traffic(&a)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&cmp).unwrap_or_default())?;
    } else {
        crate::write_out(&report::table(&cmp))?;
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
