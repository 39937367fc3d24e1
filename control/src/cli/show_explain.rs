//! `fare show explain PREFIX`: why a running agent's group for PREFIX has its weights
//! (its ExplainRoute answer), beside the model's explanation (`fare explain`) when given
//! the topology and the node, with the first hop where live and model differ.
//!
//! With `--lab NAME` the lab gives the node's socket, the topology, the mode and which
//! neighbor address is which node and link; the agents of the hops upstream are asked
//! too, nearest the origin first, so the hop named is where the difference starts.

use super::conn::status_error;
use super::explain::{gbps, model_explanation};
use super::model_args::ModelArgs;
use super::InputError;
use fare_agent::mgmt::{client, pb};
use fare_model::bandwidth::{Encoding, Mode};
use fare_model::sim::explain::{Explanation, Hop, HopRule};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// A prefix (10.0.1.0/24) or an address (10.0.1.7).
    pub prefix: String,
    /// Compare with the model of this topology file (needs --node).
    #[arg(long, requires = "node")]
    pub topology: Option<PathBuf>,
    /// Which node of the topology this agent is.
    #[arg(long)]
    pub node: Option<String>,
    /// A lab of `fare lab up`: the agent of --node in it, the lab's topology and mode,
    /// and the agents upstream, to name the hop where the difference starts.
    #[arg(long, value_name = "NAME", requires = "node")]
    pub lab: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Neighbor address -> (node, link) at one node, from the lab's plan.
type Peers = HashMap<String, (String, String)>;

struct Lab {
    dir: fare_lab::state::StateDir,
    state: fare_lab::state::LabState,
}

impl Lab {
    fn peers(&self, node: &str) -> Peers {
        self.state
            .plan
            .node(node)
            .map(|n| {
                n.ports
                    .iter()
                    .map(|p| (p.peer_addr.to_string(), (p.peer.clone(), p.link.clone())))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// With --lab: the lab gives the socket, so no connection through the global options.
pub fn run_in_lab(args: &Args, json_out: bool) -> anyhow::Result<String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(fetch(args, json_out, None))
}

pub async fn fetch(
    args: &Args,
    json_out: bool,
    c: Option<client::Client>,
) -> anyhow::Result<String> {
    let lab = match &args.lab {
        Some(name) => {
            let dir = fare_lab::state::StateDir::find(Some(name))
                .map_err(|e| InputError(format!("--lab {name}: {e}")))?;
            let state = dir
                .load()
                .map_err(|e| InputError(format!("--lab {name}: {e}")))?;
            Some(Lab { dir, state })
        }
        None => None,
    };
    let node = args.node.clone().unwrap_or_default();
    let mut c = match (&lab, c) {
        (Some(l), _) => client::connect(&l.dir.socket(&node)).await?,
        (None, Some(c)) => c,
        (None, None) => anyhow::bail!("no connection to an agent"),
    };
    let live = ask(&mut c, &args.prefix).await?;
    let topology = match (&args.topology, &lab) {
        (Some(t), _) => t.clone(),
        (None, Some(l)) => l.state.topology.clone(),
        (None, None) => {
            return Ok(if json_out {
                pretty(&json!({ "live": live_json(&live) }))
            } else {
                live_text(&live, &Peers::new())
            });
        }
    };
    let mut model_args = args.model.clone();
    model_args.mode = model_args
        .mode
        .or(lab.as_ref().map(|l| l.state.mode))
        .or_else(|| parse_enum::<Mode>(&live.mode));
    model_args.encoding = model_args
        .encoding
        .or_else(|| parse_enum::<Encoding>(&live.encoding));
    model_args.max_group_size = model_args.max_group_size.or(live.max_group_size);
    model_args.parallel_links = model_args
        .parallel_links
        .or(lab.as_ref().map(|l| l.state.plan.options.parallel_links))
        .or_else(|| fare_model::parallel::ParallelLinks::parse(&live.parallel_links));
    let prefix = live
        .prefix
        .parse()
        .map_err(|_| InputError(format!("agent answered a bad prefix `{}`", live.prefix)))?;
    let model = model_explanation(&topology, &model_args, &node, prefix)?;
    let peers = lab.as_ref().map(|l| l.peers(&node)).unwrap_or_default();
    let first = match &lab {
        Some(l) => first_difference_upstream(l, &model, &live.prefix).await?,
        None => first_difference_here(&model, &live, &peers),
    };
    if json_out {
        return Ok(pretty(&json!({
            "live": live_json(&live),
            "model": model,
            "first_difference": first.as_ref().map(|(n, what)| json!({"node": n, "what": what})),
        })));
    }
    let mut s = String::from("model:\n");
    s += &super::explain::text(&model);
    s += "live:\n";
    s += &live_text(&live, &peers);
    s += &match &first {
        Some((n, what)) => {
            let what: Vec<String> = what.iter().map(Difference::to_string).collect();
            format!("first difference at {n}: {}\n", what.join("; "))
        }
        None => "live and model agree\n".to_string(),
    };
    Ok(s)
}

async fn ask(c: &mut client::Client, prefix: &str) -> anyhow::Result<pb::RouteExplanation> {
    Ok(c.explain_route(pb::ExplainRouteRequest {
        prefix: prefix.to_string(),
    })
    .await
    .map_err(status_error)?
    .into_inner())
}

fn parse_enum<T: serde::de::DeserializeOwned>(s: &str) -> Option<T> {
    serde_json::from_value(Value::String(s.to_string())).ok()
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// The agent's answer as JSON (the contract of `fare show explain --json`'s `live`).
pub fn live_json(e: &pb::RouteExplanation) -> Value {
    let paths: Vec<Value> = e
        .paths
        .iter()
        .map(|p| {
            json!({
                "neighbor": p.neighbor, "interface": p.interface, "as_path": p.as_path,
                "wire_bits": p.wire_bits, "path_bandwidth_gbps": finite(p.path_bandwidth_gbps),
                "link_value_bits": p.link_value_bits, "link_value_gbps": p.link_value_gbps,
                "link_bandwidth_gbps": p.link_bandwidth_gbps,
                "bandwidth_gbps": p.bandwidth_gbps, "weight": p.weight,
            })
        })
        .collect();
    let fit = e.group.as_ref().and_then(|g| g.fit.as_ref());
    json!({
        "prefix": e.prefix, "node": e.node, "mode": e.mode, "encoding": e.encoding,
        "rule": e.rule, "weighted": e.weighted, "paths": paths, "tolerance": e.tolerance,
        "ratio": e.ratio, "ratio_delta": e.ratio_delta, "max_group_size": e.max_group_size,
        "advertised_gbps": e.advertised_gbps,
        "installed": e.group.as_ref().map(|g| g.members.iter().map(|m| json!({
            "via": m.via, "interface": m.interface, "weight": m.weight,
        })).collect::<Vec<_>>()),
        "size": fit.map(|f| f.size), "limit": fit.and_then(|f| f.limit),
        "reduced_from": fit.and_then(|f| f.reduced_from), "delta": fit.and_then(|f| f.delta),
    })
}

/// JSON has no infinity: the originator's maximum value is null there.
fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

fn live_text(e: &pb::RouteExplanation, peers: &Peers) -> String {
    let mut s = format!(
        "  {} {}: {} mode, {} encoding, rule {}{}\n",
        e.node,
        e.prefix,
        e.mode,
        e.encoding,
        e.rule,
        if e.weighted { "" } else { " (plain ECMP)" }
    );
    for p in &e.paths {
        let name = peers
            .get(&p.neighbor)
            .map(|(n, l)| format!("{n} over {l}"))
            .unwrap_or_else(|| format!("{} ({})", p.neighbor, p.interface));
        let link = p.link_bandwidth_gbps.map_or("unknown".into(), gbps);
        let wire = match (p.wire_bits, p.path_bandwidth_gbps) {
            (Some(b), Some(v)) => format!("wire 0x{b:04x} = {}", gbps(v)),
            _ => "no Path Bandwidth community".into(),
        };
        let _ = write!(s, "      from {name} (link {link} Gbps): {wire}");
        if let (Some(b), Some(v)) = (p.link_value_bits, p.link_value_gbps) {
            let _ = write!(s, "; link value 0x{b:04x} = {}", gbps(v));
        }
        let _ = writeln!(
            s,
            "; bandwidth {}, weight {}",
            gbps(p.bandwidth_gbps),
            p.weight
        );
    }
    let ratio: Vec<String> = e.ratio.iter().map(u32::to_string).collect();
    let _ = writeln!(
        s,
        "      ratio within {:.3} %: {}, delta {:.4}",
        e.tolerance * 100.0,
        ratio.join(":"),
        e.ratio_delta
    );
    if let Some(f) = e.group.as_ref().and_then(|g| g.fit.as_ref()) {
        let limit = f.limit.map_or("no limit".into(), |l| format!("limit {l}"));
        let _ = write!(s, "      installed: size {}, {limit}", f.size);
        if let (Some(from), Some(d)) = (f.reduced_from, f.delta) {
            let _ = write!(s, ", reduced from {from}, delta {d:.4}");
        }
        s.push('\n');
    }
    s
}

/// One value that differs between the agent and the model.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Difference {
    /// The route (`S4-L1`: the link it came over), or empty for the whole group.
    pub link: String,
    /// `routes`, `link_gbps`, `wire_bits`, `link_value_bits`, `bandwidth_gbps`, `ratio`.
    pub field: &'static str,
    pub live: Value,
    pub model: Value,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.link.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.link)
        };
        write!(
            f,
            "{at}{} {} live, {} in the model",
            self.field, self.live, self.model
        )
    }
}

fn diff(link: &str, field: &'static str, live: Value, model: Value) -> Difference {
    Difference {
        link: link.to_string(),
        field,
        live,
        model,
    }
}

/// What differs between a model hop and the agent's answer for it, route by route
/// (paired by the lab's address map, else in order).
fn differences(hop: &Hop, live: &pb::RouteExplanation, peers: &Peers) -> Vec<Difference> {
    if hop.routes.len() != live.paths.len() {
        let (l, m) = (live.paths.len(), hop.routes.len());
        return vec![diff("", "routes", json!(l), json!(m))];
    }
    let mut out = Vec::new();
    for (i, p) in live.paths.iter().enumerate() {
        let r = match peers.get(&p.neighbor) {
            Some((_, link)) => hop.routes.iter().find(|r| &r.link == link),
            None => hop.routes.get(i),
        };
        let Some(r) = r else {
            out.push(diff(&p.neighbor, "routes", json!(1), json!(0)));
            continue;
        };
        let at = r.link.as_str();
        if p.link_bandwidth_gbps != Some(r.link_gbps) {
            let l = json!(p.link_bandwidth_gbps);
            out.push(diff(at, "link_gbps", l, json!(r.link_gbps)));
        }
        let model_bits = r.wire.map(|w| u32::from(w.bits));
        if p.wire_bits != model_bits {
            out.push(diff(at, "wire_bits", json!(p.wire_bits), json!(model_bits)));
        }
        let model_lv = r.link_value.map(|w| u32::from(w.bits));
        if p.link_value_bits != model_lv {
            let l = json!(p.link_value_bits);
            out.push(diff(at, "link_value_bits", l, json!(model_lv)));
        }
        if p.bandwidth_gbps != r.bandwidth_gbps && r.bandwidth_gbps.is_finite() {
            let l = json!(p.bandwidth_gbps);
            out.push(diff(at, "bandwidth_gbps", l, json!(r.bandwidth_gbps)));
        }
    }
    out
}

/// Without a lab: only this node is seen; a received value that differs points upstream.
fn first_difference_here(
    model: &Explanation,
    live: &pb::RouteExplanation,
    peers: &Peers,
) -> Option<(String, Vec<Difference>)> {
    let hop = model.hops.last()?;
    let mut what = differences(hop, live, peers);
    if live.ratio != model.reduction.ratio {
        let m = json!(model.reduction.ratio);
        what.push(diff("", "ratio", json!(live.ratio), m));
    }
    if what.is_empty() {
        return None;
    }
    let local = what
        .iter()
        .any(|w| matches!(w.field, "link_gbps" | "routes"));
    let at = if local {
        hop.node.clone()
    } else {
        format!("upstream of {}", hop.node)
    };
    Some((at, what))
}

/// With a lab: every hop's agent, nearest the origin first; the first that differs.
async fn first_difference_upstream(
    lab: &Lab,
    model: &Explanation,
    prefix: &str,
) -> anyhow::Result<Option<(String, Vec<Difference>)>> {
    for hop in model.hops.iter().filter(|h| h.rule != HopRule::Origin) {
        let mut c = client::connect(&lab.dir.socket(&hop.node)).await?;
        let live = match ask(&mut c, prefix).await {
            Ok(l) => l,
            Err(e) => {
                let d = diff("", "routes", json!(e.to_string()), json!(hop.routes.len()));
                return Ok(Some((hop.node.clone(), vec![d])));
            }
        };
        let what = differences(hop, &live, &lab.peers(&hop.node));
        if !what.is_empty() {
            return Ok(Some((hop.node.clone(), what)));
        }
    }
    Ok(None)
}
