//! One agent configuration per node (docs/configuration.md), and starting/stopping the
//! agents inside their namespaces.
//!
//! - `--routing bgp`: one neighbor per link (address of the far end, its ASN, the local
//!   interface and the link's capacity as `bandwidth_gbps`); the agents compute the groups.
//! - `--routing static`: no neighbors; every group the offline simulation (`sim`, the same
//!   code as `fare weights`) gives the node becomes a `static:` group whose members are the
//!   node's ports of the member links (interface, neighbor MAC, next hop, weight).

use super::plan::{DataplaneKind, NodePlan, Plan, Routing, SplitMode};
use super::state::StateDir;
use super::sys;
use fare_model::sim::RouteGroup;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    #[error("group of {node} for {prefix}: member link `{link}` is not a port of {node}")]
    UnknownLink {
        node: String,
        prefix: String,
        link: String,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("serializing the configuration of {node}: {problem}")]
    Serialize { node: String, problem: String },
    #[error("starting the agent of {node}: {source}")]
    Spawn {
        node: String,
        #[source]
        source: std::io::Error,
    },
}

/// The configuration of one node's agent, as a YAML document.
pub fn config_yaml(
    plan: &Plan,
    node: &NodePlan,
    socket: &Path,
    groups: &[RouteGroup],
    mode: fare_model::bandwidth::Mode,
) -> Result<String, AgentsError> {
    let o = &plan.options;
    let mut interfaces: Vec<String> = node.ports.iter().map(|p| p.interface.clone()).collect();
    interfaces.extend(node.hosts.iter().map(|h| h.node_interface.clone()));
    let dataplane = match o.dataplane {
        _ if node.bmv2 => super::bmv2::dataplane_config(
            node,
            o.p4_build.as_deref().unwrap_or(Path::new("p4/build")),
        ),
        // Pins named after the namespace: unique on this machine, so a restarted agent
        // takes over its own node's program (agents share the host's bpffs).
        // Frames XDP redirects skip the links' tbf: the program keeps the same rate and
        // queue limit per fabric port (its virtual queue also feeds the ARN monitor).
        DataplaneKind::Xdp => {
            let queues: Vec<Value> = node
                .ports
                .iter()
                .map(|p| {
                    let kbit = o.rate_kbit(p.gbps);
                    json!({"interface": p.interface, "rate_mbps": kbit as f64 / 1000.0,
                           "limit_bytes": super::up::tbf_limit_bytes(kbit)})
                })
                .collect();
            let mut dp = json!({"kind": "xdp", "interfaces": interfaces, "pin_name": node.ns, "queues": queues});
            // An RNIC's own traffic: per packet over its planes in spray mode (TC egress).
            if node.role == "rnic" && o.split == SplitMode::Spray {
                dp["egress_spray"] = json!(node
                    .ports
                    .iter()
                    .map(|p| p.interface.clone())
                    .collect::<Vec<_>>());
            }
            dp
        }
        DataplaneKind::Kernel => json!({"kind": "kernel", "interfaces": interfaces}),
        DataplaneKind::None => json!({"kind": "none"}),
    };
    let node_of: HashMap<&str, &NodePlan> =
        plan.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let neighbors: Vec<Value> = match o.routing {
        Routing::Bgp => node
            .ports
            .iter()
            .map(|p| {
                json!({
                    "address": p.peer_addr.to_string(),
                    "remote_as": node_of.get(p.peer.as_str()).map_or(0, |n| n.asn),
                    "interface": p.interface,
                    "bandwidth_gbps": p.gbps,
                    // The neighbor's place in the Clos: a spine whose routes come from
                    // super-spines applies draft §4.2's remote-spine rule.
                    "role": node_of.get(p.peer.as_str()).map_or("leaf", |n| n.role.as_str()),
                })
            })
            .collect(),
        Routing::Static => Vec::new(),
    };
    let split = match o.split {
        SplitMode::Spray => "spray",
        SplitMode::Flow => "flow",
    };
    let mut statics = Vec::new();
    if o.routing == Routing::Static {
        for g in groups.iter().filter(|g| g.node == node.name) {
            let mut members = Vec::with_capacity(g.members.len());
            for m in &g.members {
                let port = node
                    .ports
                    .iter()
                    .find(|p| p.link == m.link)
                    .ok_or_else(|| AgentsError::UnknownLink {
                        node: node.name.clone(),
                        prefix: g.prefix.to_string(),
                        link: m.link.clone(),
                    })?;
                members.push(json!({
                    "interface": port.interface,
                    "neighbor_mac": port.peer_mac,
                    "next_hop": port.peer_addr.to_string(),
                    "weight": m.weight,
                    "bandwidth_gbps": m.bandwidth_gbps,
                }));
            }
            statics
                .push(json!({"prefix": g.prefix.to_string(), "mode": split, "members": members}));
        }
    }
    let mode = match mode {
        fare_model::bandwidth::Mode::Draft => "draft",
        fare_model::bandwidth::Mode::Averaged => "averaged",
    };
    let mut doc = json!({
        "name": node.name,
        "router_id": node.router_id.to_string(),
        "asn": node.asn,
        "management": {"socket": socket.to_string_lossy()},
        "fare": fare_block(node, mode),
        "dataplane": dataplane,
        "neighbors": neighbors,
        "prefixes": node.prefixes.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        "static": statics,
    });
    if let Some(arn) = &o.arn {
        doc["arn"] = super::arn::block(plan, node, arn, &super::arn::paths(plan, groups));
    }
    let header = format!(
        "# Generated by `fare lab up` for node {} of lab {} ({} routing).\n",
        node.name,
        plan.lab,
        match o.routing {
            Routing::Bgp => "bgp",
            Routing::Static => "static",
        }
    );
    serde_norway::to_string(&doc)
        .map(|body| header + &body)
        .map_err(|e| AgentsError::Serialize {
            node: node.name.clone(),
            problem: e.to_string(),
        })
}

/// The `fare:` block: the node's role from the topology. A super-spine passes the
/// transitive value and attaches its link value (draft §4.2); an RNIC is a stub speaker
/// (mpson §3: it advertises only its own prefixes, never one plane's routes into another).
fn fare_block(node: &NodePlan, mode: &str) -> Value {
    json!({"mode": mode, "role": node.role})
}

/// Writes every node's configuration into the state directory.
pub fn write_configs(
    plan: &Plan,
    dir: &StateDir,
    groups: &[RouteGroup],
    mode: fare_model::bandwidth::Mode,
) -> Result<(), AgentsError> {
    for node in &plan.nodes {
        let text = config_yaml(plan, node, &dir.socket(&node.name), groups, mode)?;
        let path = dir.config(&node.name);
        std::fs::write(&path, text).map_err(|source| AgentsError::Write { path, source })?;
    }
    Ok(())
}

/// Starts `fare agent` in the node's namespace, in its own session (it outlives
/// `fare lab up`), logging into the state directory. Returns its pid.
pub fn spawn(fare: &Path, node: &NodePlan, dir: &StateDir) -> Result<u32, AgentsError> {
    let err = |source| AgentsError::Spawn {
        node: node.name.clone(),
        source,
    };
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.log(&node.name))
        .map_err(err)?;
    let log2 = log.try_clone().map_err(err)?;
    let config = dir.config(&node.name);
    // `setsid` execs in place (the child is no group leader), so the pid stays the agent's.
    // `nsenter --net`, not `ip netns exec`: the latter remounts /sys privately, which
    // hides the host's bpffs, so XDP pins would die with the agent.
    let child = Command::new("setsid")
        .arg("nsenter")
        .arg(format!("--net=/run/netns/{}", node.ns))
        .arg(fare)
        .arg("agent")
        .arg("--config")
        .arg(&config)
        .env("NO_COLOR", "1")
        .env(
            "FARE_LOG",
            std::env::var("FARE_LAB_AGENT_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .map_err(err)?;
    Ok(child.id())
}

/// The last `n` lines of an agent's log, for error messages.
pub fn log_tail(dir: &StateDir, node: &str, n: usize) -> String {
    let text = std::fs::read_to_string(dir.log(node)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// True when the agent answers on its management socket.
pub fn socket_ready(dir: &StateDir, node: &str) -> bool {
    dir.socket(node).exists()
}

/// `fare show --socket S WHAT --json` for one node, parsed.
pub fn show_json(fare: &Path, dir: &StateDir, node: &str, what: &str) -> Option<Value> {
    let socket = dir.socket(node);
    let out = sys::run(
        &fare.to_string_lossy(),
        &[
            "show",
            "--socket",
            &socket.to_string_lossy(),
            what,
            "--json",
        ],
    )
    .ok()?;
    serde_json::from_str(&out).ok()
}
