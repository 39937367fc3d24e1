//! `fare bench arn`: how fast the ingress node moves traffic off a path, with ARN against
//! BGP alone, on one `fare lab` fabric in one run (root).
//!
//! The lab is the ARN draft's spine-leaf example (topologies/arn-spine-leaf.yaml) with
//! real BGP sessions between the agents and the lab's `arn:` blocks; UDP traffic flows
//! from the ingress leaf's host to the far leaf's host over both spines. Trials:
//!
//! - congestion: spine1's shaper toward leaf2 drops to 10% (queue builds). ARN: onset ->
//!   spine1 crosses its threshold (its "ARN sent" log line) -> leaf1 has the member out
//!   ("ARN applied"). BGP alone carries no queue state; its only lever is a new link
//!   bandwidth: `fare lab degrade` to the same 10% (the two agents restart with the new
//!   `bandwidth_gbps`: the agent has no runtime bandwidth change), measured until every
//!   agent shows the re-weighted groups.
//! - failure: spine1's link to leaf2 goes down. ARN: Type 3 -> leaf1 has the member out.
//!   BGP: the session drops, spine1 withdraws, leaf1 installs the group without spine1
//!   ("group installed" without that member). Both from the same event.
//!
//! Times come from the agents' log timestamps (same clock as the onset), so polling
//! adds nothing to them.

use super::command_line;
use crate::lab::arn::LabArn;
use crate::lab::plan::{self, DataplaneKind, Routing, SplitMode};
use crate::lab::state::{self, StateDir};
use crate::lab::{agents, down, faults, sys, up};
use anyhow::{bail, Context};
use std::fmt::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Congestion trials (ARN).
    #[arg(long, default_value_t = 50)]
    trials: usize,
    /// Link failure trials (ARN and BGP from the same event; each waits for the session
    /// to come back).
    #[arg(long, default_value_t = 5)]
    failure_trials: usize,
    /// Bandwidth re-advertisement trials (BGP alone; each restarts two agents).
    #[arg(long, default_value_t = 3)]
    bgp_trials: usize,
    /// The agents' data plane.
    #[arg(long, value_enum, default_value_t = DataplaneKind::Kernel)]
    dataplane: DataplaneKind,
    /// Queue sampling period of the ARN monitors, µs.
    #[arg(long, default_value_t = 1000)]
    interval_us: u64,
    /// Offered load from leaf1's host to leaf2's host, kbit/s (links are 100 Mbit/s).
    #[arg(long, default_value_t = 40_000)]
    rate_kbit: u64,
}

const CONGESTED: &str = "spine1";
const FAR: &str = "leaf2";
const INGRESS: &str = "leaf1";
const PERCENT: f64 = 10.0;

/// The lab, taken down when dropped (also on error).
struct Bench {
    lab: String,
    dir: StateDir,
    traffic: Vec<Child>,
}

impl Drop for Bench {
    fn drop(&mut self) {
        for c in &mut self.traffic {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = down::down_lab(&self.lab, false);
    }
}

impl Bench {
    /// Unix time of the first line of `node`'s log at or after `since` containing every
    /// one of `words` (and, if given, none of `without`).
    fn logged(&self, node: &str, since: f64, words: &[&str], without: Option<&str>) -> Option<f64> {
        let text = std::fs::read_to_string(self.dir.log(node)).ok()?;
        text.lines()
            .filter(|l| words.iter().all(|w| l.contains(w)))
            .filter(|l| without.is_none_or(|x| !l.contains(x)))
            .filter_map(|l| l.split_whitespace().next().and_then(faults::parse_rfc3339))
            .find(|t| *t >= since)
    }

    fn wait_logged(
        &self,
        node: &str,
        since: f64,
        words: &[&str],
        without: Option<&str>,
        timeout: Duration,
    ) -> Option<f64> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(t) = self.logged(node, since, words, without) {
                return Some(t);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Members (interfaces) of the ingress group toward the far leaf's prefix.
    fn ingress_members(&self, prefix: &str) -> Vec<String> {
        let Some(groups) = agents::show_json(&up::fare_binary(), &self.dir, INGRESS, "groups")
        else {
            return Vec::new();
        };
        groups
            .as_array()
            .into_iter()
            .flatten()
            .filter(|g| g["prefix"] == prefix)
            .flat_map(|g| g["members"].as_array().cloned().unwrap_or_default())
            .filter_map(|m| m["interface"].as_str().map(str::to_string))
            .collect()
    }

    fn wait_members(&self, prefix: &str, n: usize, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.ingress_members(prefix).len() >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((s.len() - 1) as f64 * q).round() as usize;
    s[i.min(s.len() - 1)]
}

fn ms(v: &[f64], q: f64) -> String {
    format!("{:.1}", 1000.0 * quantile(v, q))
}

pub fn run_bench(args: Args) -> anyhow::Result<String> {
    if !sys::have("tc") {
        bail!("fare bench arn needs tc (and root: it builds a namespace lab)");
    }
    let topo_path = PathBuf::from("topologies/arn-spine-leaf.yaml");
    let topology = crate::topology::load(&topo_path)
        .map_err(|e| anyhow::anyhow!("{e} (run from the repository root)"))?;
    let lab = format!("arnb{}", std::process::id() % 10_000);
    let options = plan::Options {
        dataplane: args.dataplane,
        routing: Routing::Bgp,
        split: SplitMode::Spray,
        arn: Some(LabArn {
            interval_us: args.interval_us,
            ..LabArn::default()
        }),
        ..plan::Options::default()
    };
    let req = up::UpRequest {
        topology_path: topo_path.clone(),
        topology,
        lab: lab.clone(),
        options,
        mode: crate::bandwidth::Mode::Draft,
        max_group_size: None,
        agents: true,
        agent_timeout: Duration::from_secs(60),
        converge_timeout: Duration::from_secs(60),
        fare: up::fare_binary(),
        progress: true,
    };
    up::up(&req).map_err(|e| anyhow::anyhow!("lab up: {e}"))?;
    let mut b = Bench {
        dir: StateDir::new(&lab),
        lab: lab.clone(),
        traffic: Vec::new(),
    };
    let st = b.dir.load()?;
    let p = &st.plan;
    let congested = p.node(CONGESTED).context("no spine1")?;
    let far = p.node(FAR).context("no leaf2")?;
    let ingress = p.node(INGRESS).context("no leaf1")?;
    let port = congested
        .ports
        .iter()
        .find(|x| x.peer == FAR)
        .context("no spine1-leaf2 link")?
        .clone();
    let ingress_if = ingress
        .ports
        .iter()
        .find(|x| x.peer == CONGESTED)
        .context("no leaf1-spine1 link")?
        .interface
        .clone();
    let far_host = far.hosts.first().context("leaf2 has no host")?.clone();
    let src_host = ingress.hosts.first().context("leaf1 has no host")?.clone();
    let prefix = far_host.prefix.to_string();
    if !b.wait_members(&prefix, 2, Duration::from_secs(60)) {
        bail!("leaf1 never had two members toward {prefix}");
    }
    let fare = up::fare_binary();
    let fare_s = fare.to_string_lossy().to_string();
    let rate = args.rate_kbit.to_string();
    let dst = far_host.addr.to_string();
    for (ns, a) in [
        (
            &far_host.ns,
            vec!["lab", "gen", "--sink", "--duration", "3600"],
        ),
        (
            &src_host.ns,
            vec![
                "lab",
                "gen",
                "--to",
                &dst,
                "--rate-kbit",
                &rate,
                "--flows",
                "64",
                "--duration",
                "3600",
            ],
        ),
    ] {
        b.traffic.push(
            Command::new("ip")
                .args(["netns", "exec", ns, &fare_s])
                .args(&a)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?,
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    let full = p.options.rate_kbit(port.gbps);
    let low = p.options.rate_kbit(port.gbps * PERCENT / 100.0);
    let shape = |kbit: u64| sys::tc_batch(&congested.ns, &up::tbf("change", &port.interface, kbit));

    // Congestion, ARN.
    let (mut onset_cross, mut cross_removed, mut onset_removed) = (vec![], vec![], vec![]);
    let mut missed = 0;
    for i in 0..args.trials {
        let t0 = state::now();
        shape(low)?;
        let removed = b.wait_logged(
            INGRESS,
            t0,
            &["ARN applied", "type 1"],
            None,
            Duration::from_secs(5),
        );
        let cross = b.logged(CONGESTED, t0, &["ARN sent", "type 1"], None);
        let t1 = state::now();
        shape(full)?;
        match (cross, removed) {
            (Some(c), Some(r)) => {
                onset_cross.push(c - t0);
                cross_removed.push(r - c);
                onset_removed.push(r - t0);
            }
            _ => {
                eprintln!(
                    "bench arn: congestion trial {}: crossing {cross:?}, removal {removed:?}",
                    i + 1
                );
                missed += 1
            }
        }
        // Back to healthy: Type 2 restores the member (or the hold timer does).
        b.wait_logged(
            INGRESS,
            t1,
            &["ARN applied", "type 2"],
            None,
            Duration::from_secs(5),
        );
        std::thread::sleep(Duration::from_millis(300));
        eprintln!("bench arn: congestion trial {}/{}", i + 1, args.trials);
    }

    // Failure: ARN Type 3 and the BGP withdrawal from the same event.
    let (mut fail_arn, mut fail_bgp) = (vec![], vec![]);
    let mut fail_missed = 0;
    let member = format!("{ingress_if}:");
    for i in 0..args.failure_trials {
        let t0 = state::now();
        sys::run(
            "ip",
            &["-n", &congested.ns, "link", "set", &port.interface, "down"],
        )?;
        let arn = b.wait_logged(
            INGRESS,
            t0,
            &["ARN applied", "type 3"],
            None,
            Duration::from_secs(5),
        );
        let bgp = b.wait_logged(
            INGRESS,
            t0,
            &["group installed", &format!("prefix={prefix}")],
            Some(&member),
            Duration::from_secs(60),
        );
        sys::run(
            "ip",
            &["-n", &congested.ns, "link", "set", &port.interface, "up"],
        )?;
        let sent = b.logged(CONGESTED, t0, &["ARN sent", "type 3"], None);
        eprintln!(
            "bench arn: failure trial {}: after {:?} s Type 3 sent, {:?} s member out, {:?} s BGP group",
            i + 1,
            sent.map(|t| t - t0),
            arn.map(|t| t - t0),
            bgp.map(|t| t - t0)
        );
        match (arn, bgp) {
            (Some(a), Some(g)) => {
                fail_arn.push(a - t0);
                fail_bgp.push(g - t0);
            }
            _ => {
                eprintln!(
                    "bench arn: failure trial {}: ARN {arn:?}, BGP {bgp:?}",
                    i + 1
                );
                fail_missed += 1
            }
        }
        if !b.wait_members(&prefix, 2, Duration::from_secs(120)) {
            bail!("leaf1's group did not get spine1 back after the link came up");
        }
        std::thread::sleep(Duration::from_secs(1));
        eprintln!("bench arn: failure trial {}/{}", i + 1, args.failure_trials);
    }

    // Congestion signalled to BGP as a new link bandwidth.
    let mut degrade = vec![];
    let spec = format!("{CONGESTED}-{FAR}");
    let gbps = port.gbps * PERCENT / 100.0;
    for i in 0..args.bgp_trials {
        let r = faults::degrade(Some(&lab), &format!("{spec}={gbps}"), 120.0)
            .map_err(|e| anyhow::anyhow!("degrade: {e}"))?;
        if let Some(s) = r.convergence_s {
            degrade.push(s);
        }
        faults::restore(Some(&lab), &spec, 120.0).map_err(|e| anyhow::anyhow!("restore: {e}"))?;
        if !b.wait_members(&prefix, 2, Duration::from_secs(120)) {
            bail!("leaf1's group did not recover after restore");
        }
        eprintln!("bench arn: bandwidth trial {}/{}", i + 1, args.bgp_trials);
    }
    drop(b);

    let mut s = String::new();
    let _ = writeln!(s, "## ARN reaction time vs BGP alone (`fare bench arn`)\n");
    let _ = writeln!(s, "Command (root, repository root): `{}`  ", command_line());
    let _ = writeln!(
        s,
        "Lab: topologies/arn-spine-leaf.yaml, BGP between the agents, {:?} data plane, ARN \
         monitor every {} µs, {} kbit/s of UDP from leaf1's host to leaf2's host over both \
         spines (links 100 Mbit/s); spine1-leaf2 congested to {PERCENT}% or failed. Times \
         from the agents' log timestamps; load average at the end {}.\n",
        args.dataplane,
        args.interval_us,
        args.rate_kbit,
        std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| l.split_whitespace().next().map(str::to_string))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "| event | mechanism | trials | median ms | p90 ms | p99 ms |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|");
    let mut row = |e: &str, m: &str, v: &[f64]| {
        let _ = writeln!(
            s,
            "| {e} | {m} | {} | {} | {} | {} |",
            v.len(),
            ms(v, 0.5),
            ms(v, 0.9),
            ms(v, 0.99)
        );
    };
    row(
        "congestion",
        "onset -> threshold crossed at spine1 (queue fill)",
        &onset_cross,
    );
    row(
        "congestion",
        "ARN: threshold crossed -> member out at leaf1",
        &cross_removed,
    );
    row(
        "congestion",
        "ARN: onset -> member out at leaf1",
        &onset_removed,
    );
    row(
        "congestion",
        "BGP alone: new bandwidth -> groups re-weighted (agents restarted)",
        &degrade,
    );
    row(
        "link failure",
        "ARN Type 3: onset -> member out at leaf1",
        &fail_arn,
    );
    row(
        "link failure",
        "BGP withdrawal: onset -> group without spine1 at leaf1",
        &fail_bgp,
    );
    let ratio = |a: &[f64], b: &[f64]| quantile(b, 0.5) / quantile(a, 0.5);
    let _ = writeln!(
        s,
        "\nRatios of medians (BGP / ARN): congestion {:.0}x (onset -> traffic moved), link \
         failure {:.1}x. Missed trials: congestion {missed}, failure {fail_missed}.",
        ratio(&onset_removed, &degrade),
        ratio(&fail_arn, &fail_bgp)
    );
    Ok(s)
}
