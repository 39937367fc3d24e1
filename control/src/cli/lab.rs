//! `fare lab`: emulated fabrics on this machine (see `fare_lab`).

use super::InputError;
use fare_lab::plan::{self, Backend, DataplaneKind, Routing, SplitMode};
use fare_lab::{down, faults, gen, report, restart, state::StateDir, traffic, up};
use fare_model::bandwidth::Mode;
use fare_model::parallel::ParallelLinks;
use fare_model::topology;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Build the fabric of a topology file: one network namespace per node, veth links
    /// shaped to the (scaled) link capacity, host namespaces behind the nodes with
    /// prefixes, and a `fare agent` per node.
    #[command(
        long_about = "Build the fabric of a topology file on this machine.\n\n\
Namespaces are named farelab-<lab>-<node> (hosts: farelab-<lab>-<node>-h<k>); every link is \
a veth pair eth<k> <-> eth<j> with a /31 from --link-pool, shaped with tc tbf to \
gbps x --scale Mbit/s. State (plan, agent configs, logs, management sockets) is kept in \
/run/fare/lab/<lab>/ so that `fare lab down` finds everything, even after a crash.\n\n\
Example: fare lab up topologies/draft-fig1.yaml --routing bgp --dataplane kernel"
    )]
    Up(UpArgs),
    /// Remove a lab: kill its agents and traffic, delete its namespaces and state.
    /// Idempotent; finds labs by namespace name even without state.
    Down(DownArgs),
    /// Send UDP traffic between the lab's hosts and report the per-link split against the
    /// ideal weighted split (table, JSON, SVG).
    Traffic(traffic::Args),
    /// Take every link between A and B down (or one named link), then measure convergence.
    Fail(faults::FailArgs),
    /// Set every link between A and B to G Gbps (tc rate and the agents' view).
    Degrade(faults::DegradeArgs),
    /// Congest the links between A and B: shrink their tc rate so queues build (ARN).
    Congest(faults::CongestArgs),
    /// Undo fail/degrade/congest on the links between A and B.
    Restore(faults::RestoreArgs),
    /// Stop a node's agent (SIGTERM, or SIGKILL with --kill) and start it again; its XDP
    /// program keeps forwarding meanwhile (pinned maps).
    Restart(restart::RestartArgs),
    /// Per-link utilization (interface counters), groups (agents' management sockets),
    /// link changes and ARN events.
    Show(report::ShowArgs),
    /// Write one self-contained HTML page of a lab (or of a topology's plan): the fabric
    /// with every link's load against the ideal, the worst links, load over time, link
    /// changes with convergence times, sessions, groups and ARN events.
    Report(fare_lab::report_html::ReportArgs),
    /// Traffic generator and sink run inside host namespaces by `fare lab traffic`.
    #[command(hide = true)]
    Gen(gen::Args),
}

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Topology YAML file (its format: configuration.md in the documentation).
    pub topology: PathBuf,
    /// Lab name (letters, digits, `_`; at most 12): defaults to the topology name.
    #[arg(long)]
    pub name: Option<String>,
    /// How groups are computed: `bgp` sessions between the agents, or `static` groups
    /// computed offline like `fare weights` and given to each agent.
    #[arg(long, value_enum, default_value_t = Routing::Bgp)]
    pub routing: Routing,
    /// The agents' data plane.
    #[arg(long, value_enum, default_value_t = DataplaneKind::Kernel)]
    pub dataplane: DataplaneKind,
    /// What builds nodes and links: `netns` (ip netns + veth) or `mininet` (Debian's
    /// Mininet hosts and links; the same agents, shaping and commands afterwards).
    #[arg(long, value_enum, default_value_t = Backend::Netns)]
    pub backend: Backend,
    /// How every group (BGP-computed and static) splits over its weighted members:
    /// per packet (spray), per flow, or per flowlet (a flow moves only after an idle gap);
    /// refused where a node's data plane cannot do it (the kernel has no flowlets).
    #[arg(long, value_enum, default_value_t = SplitMode::Spray)]
    pub split: SplitMode,
    /// Path bandwidth rule: draft (min/sum) or averaged (white paper).
    #[arg(long, value_enum, default_value_t = Mode::Draft)]
    pub mode: Mode,
    /// Parallel links (several sessions between two switches): `node-proportional` (the
    /// default) or `node-even`, per node as draft-xu-idr-fare-05 requires, or `session`
    /// (the older per-session rule); the agents' `fare.parallel_links` and the model's.
    #[arg(long, value_enum, default_value_t = ParallelLinks::default())]
    pub parallel_links: ParallelLinks,
    /// Largest group (sum of weights) for the static groups.
    #[arg(long)]
    pub max_group_size: Option<u32>,
    /// Mbit/s of tc rate per Gbps of topology capacity (this machine cannot do line rate).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Pool the /31 of every link comes from.
    #[arg(long, default_value = "172.16.0.0/12")]
    pub link_pool: ipnet::Ipv4Net,
    /// No `arn:` block in the agents' configurations (congestion then goes unnoticed:
    /// the BGP-only baseline).
    #[arg(long)]
    pub no_arn: bool,
    /// ARN queue sampling period of every agent's monitor, µs (at least 100). Every sample
    /// is a netlink dump of the qdiscs and a carrier read per port: at 1000 µs an idle
    /// debug-build spine agent of Figure 1 keeps ~12% of a core busy, so raise it (or use
    /// --no-arn) for labs of many nodes.
    #[arg(long, default_value_t = 1000)]
    pub arn_interval_us: u64,
    /// How long an ARN removal lasts without a refresh, ms.
    #[arg(long, default_value_t = 1000)]
    pub arn_hold_ms: u64,
    /// A congested port's queue must stay drained this long before its Type 2, ms.
    #[arg(long, default_value_t = 200)]
    pub arn_clear_ms: u64,
    /// What a congestion ARN (Type 1) does at the receivers: shift part of the member's
    /// share to the other members by its Metric, or remove the whole member.
    #[arg(long, default_value = "shift", value_parser = |s: &str| s.parse::<fare_arn::shift::CongestionMode>())]
    pub arn_congestion: fare_arn::shift::CongestionMode,
    /// fare.p4's p4c outputs (fare.json, fare.p4info.txtpb) for nodes marked
    /// `target: bmv2`; default: p4/build of this directory or of the repository the
    /// binary was built in. Those nodes run `simple_switch_grpc` (BMv2) programmed by
    /// their agent over P4Runtime; without BMv2 on PATH `lab up` refuses them.
    #[arg(long)]
    pub p4_build: Option<PathBuf>,
    /// Build the namespaces and links only; start no agents.
    #[arg(long)]
    pub no_agents: bool,
    /// Seconds to wait for every agent's management socket.
    #[arg(long, default_value_t = 30)]
    pub agent_timeout: u64,
    /// With `--routing bgp`: seconds to wait, once every agent answers, until every session
    /// is up and every agent's groups equal the model's (`fare weights` with the same
    /// --mode; reported as `converged_s`); 0 returns at once. A fabric that has not
    /// converged by then is left up, the differences are printed (node, prefix, live vs
    /// model) and the exit code is 1.
    #[arg(long, default_value_t = 120)]
    pub converge_timeout: u64,
    /// Report, but exit 0 even when the fabric has not converged to the model in time.
    #[arg(long)]
    pub no_check: bool,
    /// Print the phase timings as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct DownArgs {
    /// Lab name; without it, the only lab that is up.
    #[arg(long)]
    pub name: Option<String>,
    /// The lab name as a positional argument (older spelling of --name).
    #[arg(hide = true, conflicts_with = "name")]
    pub lab: Option<String>,
    /// Every lab on this machine.
    #[arg(long)]
    pub all: bool,
    /// Print `{"labs": [...]}`, the labs removed, as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Up(a) => run_up(a),
        Command::Down(a) => run_down(a),
        Command::Traffic(a) => traffic::run(a).map_err(input),
        Command::Fail(a) => converge(&a.converge, |name, t| faults::fail(name, &a.link, t)),
        Command::Degrade(a) => converge(&a.converge, |name, t| faults::degrade(name, &a.spec, t)),
        Command::Congest(a) => {
            let r = faults::congest(a.name.as_deref(), &a.link, a.percent, a.duration)
                .map_err(input)?;
            if a.json {
                crate::outln!("{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                crate::outln!("{} ({})", r.change, r.links.join(", "))?;
                if r.arn.is_empty() {
                    crate::outln!("no ARN sent or applied by the agents")?;
                }
                for s in &r.arn {
                    crate::outln!("arn {}", s.summary())?;
                }
            }
            if r.arn_enabled && r.arn.is_empty() && !a.no_check {
                anyhow::bail!("{}: the agents run ARN but sent or applied none", r.change);
            }
            Ok(())
        }
        Command::Restore(a) => converge(&a.converge, |name, t| faults::restore(name, &a.link, t)),
        Command::Restart(a) => {
            let r = restart::restart(&a).map_err(input)?;
            if a.json {
                crate::outln!("{}", serde_json::to_string(&r)?)?;
            } else {
                eprintln!(
                    "lab restart: agent of {} back in {:.2} s (pid {} -> {})",
                    r.node, r.restart_s, r.old_pid, r.new_pid
                );
            }
            Ok(())
        }
        Command::Show(a) => report::run_show(a).map_err(input),
        Command::Report(a) => {
            let path = fare_lab::report_html::run(&a).map_err(input)?;
            crate::outln!("{}", path.display())?;
            Ok(())
        }
        Command::Gen(a) => gen::run(a).map_err(input),
    }
}

/// A change to the fabric (`fail`, `degrade`, `restore`): made by `change` (given the lab
/// name and the timeout), reported, and checked against the model.
fn converge(
    a: &faults::ConvergeArgs,
    change: impl FnOnce(Option<&str>, f64) -> Result<faults::ChangeReport, fare_lab::LabError>,
) -> anyhow::Result<()> {
    let r = change(a.name.as_deref(), a.timeout).map_err(input)?;
    print_change(&r, a.json)?;
    enforce(&r.change, &r.mismatches, a.timeout, a.no_check)
}

/// Bad input from the command line exits with 2 (`InputError`), the rest with 1.
fn input(e: fare_lab::LabError) -> anyhow::Error {
    match e {
        fare_lab::LabError::Input(m) => InputError(m).into(),
        fare_lab::LabError::Plan(p) => InputError(p.to_string()).into(),
        fare_lab::LabError::Output(e) => super::OutputError(e).into(),
        other => other.into(),
    }
}

fn print_change(r: &faults::ChangeReport, json: bool) -> anyhow::Result<()> {
    if json {
        crate::outln!("{}", serde_json::to_string_pretty(r)?)?;
        return Ok(());
    }
    let conv = match r.convergence_s {
        Some(s) => format!("converged to the model in {:.3} s", s),
        None if r.mismatches.is_empty() => "convergence not measured (no agents)".to_string(),
        None => format!("NOT converged ({} differences)", r.mismatches.len()),
    };
    crate::outln!("{} ({}): {conv}", r.change, r.links.join(", "))?;
    if !r.bandwidth_set.is_empty() {
        crate::outln!(
            "new bandwidth given at run time to: {}",
            r.bandwidth_set.join(", ")
        )?;
    }
    if !r.restarted.is_empty() {
        crate::outln!(
            "agents restarted with new groups: {}",
            r.restarted.join(", ")
        )?;
    }
    Ok(())
}

/// How many differences are printed before "... and N more".
const DIFF_LINES: usize = 40;

/// Prints what differs from the model (stderr) and fails unless `no_check`.
fn enforce(
    what: &str,
    mismatches: &[fare_lab::model_check::Mismatch],
    timeout: f64,
    no_check: bool,
) -> anyhow::Result<()> {
    if mismatches.is_empty() {
        return Ok(());
    }
    eprintln!("differences from the model (node what: live | model):");
    for m in mismatches.iter().take(DIFF_LINES) {
        eprintln!("  {m}");
    }
    if mismatches.len() > DIFF_LINES {
        eprintln!("  ... and {} more", mismatches.len() - DIFF_LINES);
    }
    if no_check {
        return Ok(());
    }
    anyhow::bail!(
        "{what}: the fabric did not converge to the model within {timeout} s ({} differences; \
         --no-check accepts that)",
        mismatches.len()
    )
}

fn run_up(a: UpArgs) -> anyhow::Result<()> {
    let topo = topology::load(&a.topology)?;
    let lab = a
        .name
        .clone()
        .unwrap_or_else(|| plan::default_lab_name(&topo.name));
    plan::check_lab_name(&lab).map_err(|e| InputError(e.to_string()))?;
    if !(a.scale.is_finite() && a.scale > 0.0) {
        return Err(InputError(format!("--scale must be positive, not {}", a.scale)).into());
    }
    let options = plan::Options {
        scale_mbit_per_gbps: a.scale,
        link_pool: a.link_pool,
        dataplane: a.dataplane,
        routing: a.routing,
        split: a.split,
        backend: a.backend,
        arn: (!a.no_arn).then_some(fare_lab::arn::LabArn {
            interval_us: a.arn_interval_us,
            hold_ms: a.arn_hold_ms,
            clear_ms: a.arn_clear_ms,
            congestion: a.arn_congestion,
        }),
        p4_build: a.p4_build.clone(),
        parallel_links: a.parallel_links,
    };
    // Plan errors (names, pool size) are the user's input.
    plan::plan(&topo, &lab, &options)
        .map_err(|e| InputError(format!("{}: {e}", a.topology.display())))?;
    let req = up::UpRequest {
        topology_path: a.topology.clone(),
        topology: topo,
        lab,
        options,
        mode: a.mode,
        max_group_size: a.max_group_size,
        agents: !a.no_agents,
        agent_timeout: Duration::from_secs(a.agent_timeout),
        converge_timeout: Duration::from_secs(a.converge_timeout),
        fare: up::fare_binary(),
        progress: true,
    };
    let report = up::up(&req).map_err(input)?;
    if a.json {
        crate::outln!("{}", serde_json::to_string(&report)?)?;
    }
    enforce(
        &format!("lab up {}", report.lab),
        &report.mismatches,
        a.converge_timeout as f64,
        a.no_check,
    )
}

fn run_down(a: DownArgs) -> anyhow::Result<()> {
    let r = if a.all {
        down::down_all(true).map_err(input)?
    } else {
        let lab = match a.name.or(a.lab) {
            Some(n) => n,
            None => match StateDir::find(None) {
                Ok(d) => d
                    .path
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                // No state: maybe namespaces of exactly one crashed lab.
                Err(_) => {
                    let labs = down::all_labs().map_err(input)?;
                    match labs.len() {
                        0 => {
                            eprintln!("lab down: no lab is up");
                            if a.json {
                                crate::outln!("{}", serde_json::json!({"labs": []}))?;
                            }
                            return Ok(());
                        }
                        1 => labs[0].clone(),
                        _ => {
                            return Err(InputError(format!(
                                "several labs are up ({}): name one or use --all",
                                labs.join(", ")
                            ))
                            .into())
                        }
                    }
                }
            },
        };
        down::down_lab(&lab, true).map_err(input)?
    };
    if r.labs.is_empty() {
        eprintln!("lab down: nothing to remove");
    }
    if a.json {
        crate::outln!("{}", serde_json::json!({"labs": r.labs}))?;
    }
    Ok(())
}
