//! `fare bench reload`: one change to a running lab node's configuration applied by a
//! reload (SIGHUP) against the same change applied by restarting its agent (the baseline:
//! what every change cost before reloads applied it, and what a key that needs a restart
//! still costs). Root.
//!
//! Each trial adds one originated prefix to the node's file, then either sends SIGHUP or
//! restarts the agent as `fare lab restart NODE` does (SIGTERM, same file). Trials
//! alternate on one lab (reload, restart, reload, ...), each from a settled fabric (every
//! session Established). Measured per trial, over the other agents of the fabric:
//! - until every other agent has a group for the new prefix (polled every 20 ms through
//!   the management sockets);
//! - sessions that went down: their neighbors' `flaps`, summed, before and after;
//! - UPDATEs they received (`updates_received` summed): the new prefix alone, or a
//!   restart's withdrawals and announcements of everything the node sent.

use super::command_line;
use super::lab_bench::{load_average, quantile, BenchLab};
use anyhow::{bail, Context};
use fare_agent::config::AgentConfig;
use fare_lab::agents;
use fare_lab::plan::{self, DataplaneKind, Routing};
use fare_lab::state::StateDir;
use std::fmt::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trials of each kind (reload and restart, alternating).
    #[arg(long, default_value_t = 5)]
    trials: usize,
    /// The node whose file changes.
    #[arg(long, default_value = "L1")]
    node: String,
    /// Topology of the lab.
    #[arg(long, default_value = "topologies/draft-fig1.yaml")]
    topology: PathBuf,
    /// The agents' data plane.
    #[arg(long, value_enum, default_value_t = DataplaneKind::Kernel)]
    dataplane: DataplaneKind,
    /// Seconds a trial may take before it counts as failed.
    #[arg(long, default_value_t = 60.0)]
    timeout: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum How {
    Reload,
    Restart,
}

/// What one trial measured.
struct Trial {
    how: How,
    /// Until every other agent had a group for the new prefix (None: not within the timeout).
    seconds: Option<f64>,
    flaps: u64,
    updates: u64,
}

/// (flaps, UPDATEs received) summed over the neighbors of `nodes`; None while one of them
/// does not answer or has a session not Established.
fn counters(dir: &StateDir, nodes: &[&str]) -> Option<(u64, u64)> {
    let mut sum = (0, 0);
    for list in agents::neighbors_all(dir, nodes) {
        for n in list? {
            if n.state != "Established" {
                return None;
            }
            sum.0 += n.flaps;
            sum.1 += n.updates_received;
        }
    }
    Some(sum)
}

/// Waits until every session of `nodes` is Established, then 1 s more for what is still
/// in flight; the counters then.
fn settled(dir: &StateDir, nodes: &[&str], timeout: Duration) -> anyhow::Result<(u64, u64)> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if counters(dir, nodes).is_some() {
            std::thread::sleep(Duration::from_secs(1));
            if let Some(c) = counters(dir, nodes) {
                return Ok(c);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("the fabric did not settle (a session not Established) within {timeout:?}")
}

/// Adds `prefix` to the originated prefixes in `node`'s file.
fn add_prefix(dir: &StateDir, node: &str, prefix: ipnet::IpNet) -> anyhow::Result<()> {
    let path = dir.config(node);
    let mut config = AgentConfig::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    config.prefixes.push(prefix);
    // JSON is YAML: the agent reads it as its file.
    let text = serde_json::to_string_pretty(&config)?;
    std::fs::write(&path, text).with_context(|| path.display().to_string())
}

fn pid_of(dir: &StateDir, node: &str) -> anyhow::Result<i32> {
    let state = dir.load()?;
    let pid = state
        .agents
        .iter()
        .find(|(n, _)| n == node)
        .map(|(_, p)| *p)
        .with_context(|| format!("node {node} runs no agent"))?;
    Ok(pid as i32)
}

/// Until every node of `others` has a group for `prefix`, at most `timeout`.
fn until_installed(
    dir: &StateDir,
    others: &[&str],
    prefix: ipnet::IpNet,
    timeout: Duration,
) -> Option<f64> {
    let start = Instant::now();
    let want = prefix.to_string();
    while start.elapsed() < timeout {
        let all = agents::groups_all(dir, others)
            .into_iter()
            .all(|g| g.is_some_and(|g| g.iter().any(|g| g.prefix == want)));
        if all {
            return Some(start.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn trial(
    lab: &BenchLab,
    args: &Args,
    others: &[&str],
    how: How,
    prefix: ipnet::IpNet,
) -> anyhow::Result<Trial> {
    let timeout = Duration::from_secs_f64(args.timeout);
    let before = settled(&lab.dir, others, timeout)?;
    add_prefix(&lab.dir, &args.node, prefix)?;
    let start = Instant::now();
    match how {
        How::Reload => {
            let pid = nix::unistd::Pid::from_raw(pid_of(&lab.dir, &args.node)?);
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP)?;
        }
        How::Restart => {
            fare_lab::restart::restart(&fare_lab::restart::RestartArgs {
                node: args.node.clone(),
                name: Some(lab.name.clone()),
                kill: false,
                timeout: args.timeout,
                json: false,
            })?;
        }
    }
    // From the signal (a restart's own wait for the new agent included).
    let seconds =
        until_installed(&lab.dir, others, prefix, timeout).map(|_| start.elapsed().as_secs_f64());
    let after = settled(&lab.dir, others, timeout)?;
    Ok(Trial {
        how,
        seconds,
        flaps: after.0.saturating_sub(before.0),
        updates: after.1.saturating_sub(before.1),
    })
}

pub fn run_bench(args: Args) -> anyhow::Result<String> {
    if args.trials == 0 {
        bail!("--trials must be at least 1");
    }
    let name = format!("rld{}", std::process::id() % 10_000);
    let load_start = load_average();
    let options = plan::Options {
        dataplane: args.dataplane,
        routing: Routing::Bgp,
        ..plan::Options::default()
    };
    let topology = args.topology.to_string_lossy().into_owned();
    let lab = BenchLab::up(&topology, name, options)?;
    let plan = lab.dir.load()?.plan;
    if plan.node(&args.node).is_none() {
        bail!("no node `{}` in {topology}", args.node);
    }
    let others: Vec<&str> = plan
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .filter(|n| *n != args.node)
        .collect();
    let mut trials = Vec::new();
    for i in 0..args.trials * 2 {
        let how = if i % 2 == 0 {
            How::Reload
        } else {
            How::Restart
        };
        let prefix: ipnet::IpNet = format!("10.250.{i}.0/24").parse()?;
        let t = trial(&lab, &args, &others, how, prefix)?;
        eprintln!(
            "reload bench: {how:?} {prefix}: {} s, {} flaps, {} UPDATEs",
            t.seconds.map_or("-".into(), |s| format!("{s:.2}")),
            t.flaps,
            t.updates
        );
        trials.push(t);
    }
    Ok(report(&args, &topology, others.len(), &trials, &load_start))
}

fn report(args: &Args, topology: &str, others: usize, trials: &[Trial], load: &str) -> String {
    let of = |how: How| -> Vec<&Trial> { trials.iter().filter(|t| t.how == how).collect() };
    let stats = |list: &[&Trial]| {
        let secs: Vec<f64> = list.iter().filter_map(|t| t.seconds).collect();
        let failed = list.len() - secs.len();
        let flaps: u64 = list.iter().map(|t| t.flaps).sum();
        let updates: Vec<f64> = list.iter().map(|t| t.updates as f64).collect();
        (
            quantile(&secs, 0.5),
            secs.iter().cloned().fold(0.0, f64::max),
            failed,
            flaps,
            quantile(&updates, 0.5),
        )
    };
    let (reload, restart) = (stats(&of(How::Reload)), stats(&of(How::Restart)));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## A change applied by reload vs by restart (`reload`)\n"
    );
    let _ = writeln!(
        s,
        "`{}` ({topology}, data plane {:?}, node {}, {} other agents; load average {load} at \
         the start). Each trial adds one originated prefix to {}'s file; {} trials of each \
         kind, alternating on one lab. Time: until every other agent has a group for the \
         new prefix. Flaps and UPDATEs: received by the other agents, per kind of trial.\n",
        command_line(),
        args.dataplane,
        args.node,
        others,
        args.node,
        args.trials
    );
    let _ = writeln!(s, "| applied by | median time | max time | not in time | sessions down (all trials) | UPDATEs received (median) |");
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for (label, (med, max, failed, flaps, updates)) in
        [("reload (SIGHUP)", reload), ("restart (baseline)", restart)]
    {
        let _ = writeln!(
            s,
            "| {label} | {med:.2} s | {max:.2} s | {failed} | {flaps} | {updates:.0} |"
        );
    }
    let _ = writeln!(
        s,
        "\nRatio (restart / reload, median time): {:.1}x.",
        restart.0 / reload.0
    );
    s
}
