//! `fare lab up`: namespaces, veth links shaped with tc, addresses, host namespaces,
//! agent configurations and agents. On any failure everything made so far is removed.

use super::agents;
use super::bmv2;
use super::down;
use super::plan::{self, Plan, HOST_IF};
use super::state::{self, LabState, StateDir};
use super::sys::{self, SysError};
use super::LabError;
use fare_model::topology::Topology;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct UpRequest {
    pub topology_path: PathBuf,
    pub topology: Topology,
    pub lab: String,
    pub options: plan::Options,
    pub mode: fare_model::bandwidth::Mode,
    pub max_group_size: Option<u32>,
    /// Start `fare agent` in every node namespace.
    pub agents: bool,
    /// How long to wait for every agent's management socket.
    pub agent_timeout: Duration,
    /// BGP routing: how long to wait for the initial convergence (zero: do not wait).
    pub converge_timeout: Duration,
    pub fare: PathBuf,
    /// Print progress lines.
    pub progress: bool,
}

/// Timings of the phases of `lab up`, for the benchmark.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct UpReport {
    pub lab: String,
    pub nodes: usize,
    pub hosts: usize,
    pub links: usize,
    pub sessions: usize,
    pub namespaces_s: f64,
    pub links_s: f64,
    pub addresses_s: f64,
    pub agents_s: f64,
    /// BGP routing: seconds from the agents' start until every agent's groups were the
    /// ideal ones (None: static routing, not waited for, or not converged in time).
    pub converged_s: Option<f64>,
    /// BGP routing: what still differed from the model when the wait ended (sessions
    /// down, groups), empty when converged or not waited for.
    pub mismatches: Vec<super::model_check::Mismatch>,
    pub total_s: f64,
}

pub fn up(req: &UpRequest) -> Result<UpReport, LabError> {
    let mut plan = plan::plan(&req.topology, &req.lab, &req.options)?;
    frr_preflight(&plan)?;
    let p4_build = bmv2::build_dir(req.options.p4_build.as_deref(), &req.fare);
    if let Some(abs) = bmv2::preflight(&plan, &p4_build)? {
        plan.options.p4_build = Some(abs);
    }
    let dir = StateDir::new(&req.lab);
    let existing: Vec<String> = sys::list_netns()?
        .into_iter()
        .filter(|n| n.starts_with(&plan::ns_prefix(&req.lab)))
        .collect();
    if dir.state_file().exists() || !existing.is_empty() {
        return Err(LabError::AlreadyUp(req.lab.clone()));
    }
    let parallel = req.options.parallel_links;
    let groups = super::model_check::ideal_groups(
        &req.topology,
        req.mode,
        parallel,
        req.max_group_size,
        &[],
    );
    let configs = agents::render_configs(&plan, &dir, &groups, req.mode).map_err(|e| match e {
        agents::AgentsError::Refused { .. } => {
            LabError::Input(format!("--split {}: {e}", plan.options.split.name()))
        }
        other => other.into(),
    })?;
    dir.create()?;
    let mut state = LabState {
        plan: plan.clone(),
        topology: std::fs::canonicalize(&req.topology_path)
            .unwrap_or_else(|_| req.topology_path.clone()),
        mode: req.mode,
        agents: Vec::new(),
        changes: Vec::new(),
        up_at: 0.0,
        mininet_pid: None,
        switches: Vec::new(),
    };
    dir.save(&state)?;
    match build(req, &plan, &dir, &configs, &mut state) {
        Ok(report) => Ok(report),
        Err(e) => {
            // Keep the logs of a failed start for the error message, then clean up.
            let hint = failed_agent_hint(&dir, &state);
            let _ = down::down_lab(&req.lab, false);
            match (hint, &e) {
                (Some(h), LabError::Sys(_) | LabError::State(_) | LabError::Io(_)) => {
                    Err(LabError::AgentFailed(format!("{e}; {h}")))
                }
                _ => Err(e),
            }
        }
    }
}

/// `target: frr` nodes need FRR installed, BGP routing and namespaces of our own.
fn frr_preflight(plan: &Plan) -> Result<(), LabError> {
    let Some(node) = plan.nodes.iter().find(|n| n.frr) else {
        return Ok(());
    };
    let problem = if plan.options.routing != plan::Routing::Bgp {
        "needs --routing bgp"
    } else if plan.options.backend != plan::Backend::Netns {
        "needs the netns backend"
    } else if !super::frr::available() {
        "needs FRR (Debian's `frr`: bgpd and zebra in /usr/lib/frr)"
    } else {
        return Ok(());
    };
    Err(LabError::Input(format!(
        "node `{}` has target: frr, which {problem}",
        node.name
    )))
}

fn failed_agent_hint(dir: &StateDir, state: &LabState) -> Option<String> {
    state
        .agents
        .iter()
        .find(|(_, pid)| !sys::alive(*pid as i32))
        .map(|(node, _)| {
            format!(
                "agent of {node} exited; its log ends with: {}",
                agents::log_tail(dir, node, 3).replace('\n', " | ")
            )
        })
}

fn progress(req: &UpRequest, msg: &str) {
    if req.progress {
        eprintln!("lab up: {msg}");
    }
}

fn build(
    req: &UpRequest,
    plan: &Plan,
    dir: &StateDir,
    configs: &[(PathBuf, String)],
    state: &mut LabState,
) -> Result<UpReport, LabError> {
    let t0 = Instant::now();
    let mut report = UpReport {
        lab: plan.lab.clone(),
        nodes: plan.nodes.len(),
        hosts: plan.nodes.iter().map(|n| n.hosts.len()).sum(),
        links: plan.links.len(),
        sessions: match plan.options.routing {
            plan::Routing::Bgp => plan.sessions(),
            plan::Routing::Static => 0,
        },
        ..Default::default()
    };
    create_nodes(req, plan, dir, state, &mut report)?;
    let t = Instant::now();
    progress(req, "addresses, routes to hosts, shaping");
    setup_nodes(plan)?;
    start_switches(req, plan, dir, state)?;
    report.addresses_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    start_agents(req, plan, dir, configs, state)?;
    report.agents_s = t.elapsed().as_secs_f64();
    state.up_at = state::now();
    dir.save(state)?;
    if req.agents && plan.options.routing == plan::Routing::Bgp && !req.converge_timeout.is_zero() {
        progress(
            req,
            &format!(
                "waiting for BGP to converge on {} sessions",
                report.sessions
            ),
        );
        match super::model_check::wait_converged(dir, state, t, req.converge_timeout)? {
            Ok(s) => {
                report.converged_s = Some(s);
                progress(req, &format!("converged {s:.2} s after the agents started"));
            }
            Err(left) => report.mismatches = left,
        }
    }
    report.total_s = t0.elapsed().as_secs_f64();
    progress(
        req,
        &format!(
            "lab {} is up: {} nodes, {} hosts, {} links in {:.1} s (state in {})",
            plan.lab,
            report.nodes,
            report.hosts,
            report.links,
            report.total_s,
            dir.path.display()
        ),
    );
    Ok(report)
}

/// The namespaces and links, by `ip` batches or by Mininet.
fn create_nodes(
    req: &UpRequest,
    plan: &Plan,
    dir: &StateDir,
    state: &mut LabState,
    report: &mut UpReport,
) -> Result<(), LabError> {
    let t0 = Instant::now();
    let namespaces = plan.namespaces();
    match plan.options.backend {
        plan::Backend::Netns => {
            progress(req, &format!("{} namespaces", namespaces.len()));
            let mut batch = String::new();
            for ns in &namespaces {
                let _ = writeln!(batch, "netns add {ns}");
            }
            sys::ip_batch(None, &batch)?;
            report.namespaces_s = t0.elapsed().as_secs_f64();
            let t = Instant::now();
            progress(req, &format!("{} links", plan.links.len()));
            sys::ip_batch(None, &veth_batch(plan))?;
            report.links_s = t.elapsed().as_secs_f64();
        }
        plan::Backend::Mininet => {
            progress(
                req,
                &format!(
                    "mininet: {} hosts, {} links",
                    namespaces.len(),
                    plan.links.len()
                ),
            );
            let timeout = Duration::from_secs(60 + namespaces.len() as u64);
            state.mininet_pid = Some(super::mininet::build(plan, dir, timeout)?);
            dir.save(state)?;
            report.namespaces_s = t0.elapsed().as_secs_f64();
        }
    }
    Ok(())
}

/// Addresses, sysctls, shapers and hosts of every node. Nodes are independent: their
/// `ip`/`tc`/`sysctl` processes run a few at a time (process start-up, not the kernel,
/// is most of this phase).
fn setup_nodes(plan: &Plan) -> Result<(), SysError> {
    let setup = |node: &plan::NodePlan| -> Result<(), SysError> {
        sys::ip_batch(Some(&node.ns), &node_batch(node))?;
        // A BMv2 node's kernel must not forward: transit packets are the switch's.
        sysctls(&node.ns, !node.bmv2)?;
        sys::tc_batch(&node.ns, &tc_batch(plan, node))?;
        for h in &node.hosts {
            sys::ip_batch(Some(&h.ns), &host_batch(h))?;
            sysctls(&h.ns, false)?;
        }
        Ok(())
    };
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get() * 2);
    let chunk = plan.nodes.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .nodes
            .chunks(chunk)
            .map(|nodes| scope.spawn(move || nodes.iter().try_for_each(setup)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(SysError::Failed {
                        cmd: "node set-up".into(),
                        stderr: "a set-up thread panicked".into(),
                    })
                })
            })
            .collect::<Result<Vec<()>, SysError>>()
    })?;
    Ok(())
}

/// Links ready for frames passed on as they are, and the BMv2 switches of `target: bmv2`.
fn start_switches(
    req: &UpRequest,
    plan: &Plan,
    dir: &StateDir,
    state: &mut LabState,
) -> Result<(), LabError> {
    let any_bmv2 = plan.nodes.iter().any(|n| n.bmv2);
    if any_bmv2 || plan.options.dataplane == plan::DataplaneKind::Xdp {
        // XDP redirects and BMv2 pass frames on as they are: a checksum left to the
        // sender's NIC (veth offload) would arrive unfinished and be dropped.
        bmv2::prepare_links(plan)?;
    }
    for node in plan.nodes.iter().filter(|n| n.bmv2) {
        progress(req, &format!("starting {} for {}", bmv2::SWITCH, node.name));
        let pid = bmv2::start(node, dir)?;
        state.switches.push((node.name.clone(), pid));
        dir.save(state)?;
    }
    Ok(())
}

/// Every node's configuration, and (unless `--no-agents`) its agent, waited for.
fn start_agents(
    req: &UpRequest,
    plan: &Plan,
    dir: &StateDir,
    configs: &[(PathBuf, String)],
    state: &mut LabState,
) -> Result<(), LabError> {
    agents::write_configs(configs)?;
    if req.agents {
        progress(req, &format!("starting {} agents", plan.nodes.len()));
        for node in &plan.nodes {
            let pid = if node.frr {
                let conf = std::fs::read_to_string(agents::frr_conf_path(dir, &node.name))?;
                super::frr::start(node, dir, &conf)?
            } else {
                agents::spawn(&req.fare, node, dir)?
            };
            state.agents.push((node.name.clone(), pid));
        }
        dir.save(state)?;
        wait_for_agents(req, plan, dir, state)?;
    }
    Ok(())
}

fn wait_for_agents(
    req: &UpRequest,
    plan: &Plan,
    dir: &StateDir,
    state: &LabState,
) -> Result<(), LabError> {
    let deadline = Instant::now() + req.agent_timeout;
    loop {
        if let Some((node, _)) = state
            .agents
            .iter()
            .find(|(_, pid)| !sys::alive(*pid as i32))
        {
            return Err(LabError::AgentFailed(format!(
                "agent of {node} exited; its log ends with: {}",
                agents::log_tail(dir, node, 3).replace('\n', " | ")
            )));
        }
        let waiting: Vec<&str> = plan
            .nodes
            .iter()
            .filter(|n| !n.frr && !agents::socket_ready(dir, &n.name))
            .map(|n| n.name.as_str())
            .collect();
        if waiting.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(LabError::AgentFailed(format!(
                "no management socket after {:?} from: {}",
                req.agent_timeout,
                waiting.join(", ")
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// veth pairs created straight into their namespaces: nothing lives in the root namespace.
fn veth_batch(plan: &Plan) -> String {
    let mut b = String::new();
    for v in plan.veth_pairs() {
        let mac = |m: &Option<String>| {
            m.as_ref()
                .map(|m| format!(" address {m}"))
                .unwrap_or_default()
        };
        let _ = writeln!(
            b,
            "link add {} netns {}{} type veth peer name {} netns {}{}",
            v.if_a,
            v.ns_a,
            mac(&v.mac_a),
            v.if_b,
            v.ns_b,
            mac(&v.mac_b)
        );
    }
    b
}

fn node_batch(node: &plan::NodePlan) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "link set lo up");
    let _ = writeln!(b, "addr add {}/32 dev lo", node.router_id);
    for e in &node.local_endpoints {
        let len = if e.is_ipv4() { 32 } else { 128 };
        let _ = writeln!(b, "addr add {e}/{len} dev lo{}", nodad(e));
    }
    for p in &node.ports {
        let _ = writeln!(b, "addr add {}/31 dev {}", p.addr, p.interface);
        let _ = writeln!(b, "link set {} up", p.interface);
        // Permanent neighbors: no ARP on fabric links, so link counters carry only traffic.
        let _ = writeln!(
            b,
            "neigh replace {} lladdr {} dev {} nud permanent",
            p.peer_addr, p.peer_mac, p.interface
        );
    }
    for h in &node.hosts {
        let _ = writeln!(
            b,
            "addr add {}/{} dev {}{}",
            h.gateway,
            h.prefix.prefix_len(),
            h.node_interface,
            nodad(&h.gateway)
        );
        let _ = writeln!(b, "link set {} up", h.node_interface);
    }
    b
}

/// IPv6 addresses skip duplicate address detection (usable at once); IPv4 has none.
fn nodad(addr: &std::net::IpAddr) -> &'static str {
    if addr.is_ipv6() {
        " nodad"
    } else {
        ""
    }
}

fn host_batch(h: &plan::Host) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "link set lo up");
    let _ = writeln!(
        b,
        "addr add {}/{} dev {HOST_IF}{}",
        h.addr,
        h.prefix.prefix_len(),
        nodad(&h.addr)
    );
    let _ = writeln!(b, "link set {HOST_IF} up");
    let _ = writeln!(b, "route add default via {} dev {HOST_IF}", h.gateway);
    b
}

/// tc token bucket on both directions of every fabric link (each end shapes what it
/// sends), at the scaled link capacity.
fn tc_batch(plan: &Plan, node: &plan::NodePlan) -> String {
    let mut b = String::new();
    for p in &node.ports {
        let _ = writeln!(
            b,
            "{}",
            super::shaping::tbf("add", &p.interface, plan.options.rate_kbit(p.gbps))
        );
    }
    b
}

fn sysctls(ns: &str, router: bool) -> Result<(), SysError> {
    let mut args = vec![
        "-q",
        "-w",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        "net.ipv6.conf.all.accept_dad=0",
        "net.ipv6.conf.default.accept_dad=0",
    ];
    if router {
        args.extend([
            "net.ipv4.ip_forward=1",
            "net.ipv6.conf.all.forwarding=1",
            // Flow mode in the kernel: hash on the 5-tuple, not just addresses.
            "net.ipv4.fib_multipath_hash_policy=1",
            "net.ipv6.fib_multipath_hash_policy=1",
        ]);
    }
    sys::netns_exec(ns, "sysctl", &args).map(|_| ())
}

/// Where the `fare` binary is (the agents run the same one).
pub fn fare_binary() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| Path::new("fare").to_path_buf())
}
