//! `fare bench arn-shift`: what the congestion shift delivers against whole-member removal
//! and no ARN, same fabric, same load, same run (root).
//!
//! topologies/arn-four-paths.yaml: four equal paths leaf1 -> spine1..4 -> leaf2 (static
//! groups, kernel data plane: 64 flows hashed onto the members). spine1's link to leaf2 is shaped to `--percent` of
//! its rate, then UDP from leaf1's host to leaf2's host at `--load` percent of the
//! fabric's capacity (four links) runs for `--warmup` + `--seconds`; the window after the
//! warm-up is measured. Modes, each on a lab of its own (the ARN mode is agent
//! configuration): no ARN (`--no-arn`), `remove` (a Type 1 takes the member out) and
//! `shift` (a Type 1 lowers its share, `arn::shift`).
//!
//! Measured: delivered throughput (packets leaf2 passed to its host x payload), loss (1 -
//! delivered / packets leaf1 took from its host in the window), queueing delay (every 100
//! ms, each tbf backlog on the path / its rate, leaf1's egress + the spine's egress toward
//! leaf2, averaged over the samples and weighted by each path's packets). The congestion
//! signal is the qdisc backlog (veth has no BQL; the log line "ARN monitor: congestion
//! signal" says so).

use super::command_line;
use super::lab_bench::{load_average, BenchLab};
use anyhow::{bail, Context};
use fare_arn::shift::CongestionMode;
use fare_lab::arn::LabArn;
use fare_lab::plan::{self, DataplaneKind, Routing, SplitMode};
use fare_lab::{faults, sys};
use std::fmt::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rate of each of the four paths, Mbit/s (the topology's 100 Gbps links scaled).
    #[arg(long, default_value_t = 10.0)]
    link_mbit: f64,
    /// Percent of its rate the congested link (spine1 -> leaf2) keeps.
    #[arg(long, default_value_t = 30.0)]
    percent: f64,
    /// Offered load, percent of the fabric's capacity (the four paths).
    #[arg(long, default_value_t = 90.0)]
    load: f64,
    /// Seconds measured per mode.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Seconds of traffic before the measured window (ARN reacts, shares settle).
    #[arg(long, default_value_t = 3.0)]
    warmup: f64,
}

const PAYLOAD: u64 = 1000;
const SPINES: [&str; 4] = ["spine1", "spine2", "spine3", "spine4"];

/// One mode's numbers.
struct Outcome {
    mode: &'static str,
    offered_pkts: u64,
    delivered_pkts: u64,
    seconds: f64,
    /// Mean queueing delay (ms) on the congested path, and over all paths weighted by
    /// their packets.
    delay_congested_ms: f64,
    delay_all_ms: f64,
    /// Share of the window's packets that took spine1.
    spine1_share: f64,
    /// Share changes / member removals the ingress leaf made in the window.
    arn_changes: u64,
}

/// Every counter of an interface the bench reads: (tx packets, rx packets).
fn link_packets(ns: &str, ifname: &str) -> anyhow::Result<(u64, u64)> {
    let out = sys::run("ip", &["-n", ns, "-j", "-s", "link", "show", ifname])?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    let s = &v[0]["stats64"];
    Ok((
        s["tx"]["packets"].as_u64().context("tx packets")?,
        s["rx"]["packets"].as_u64().context("rx packets")?,
    ))
}

/// Root qdisc backlog (bytes) of `ifname`.
fn backlog(ns: &str, ifname: &str) -> anyhow::Result<u64> {
    let out = sys::run(
        "tc",
        &["-n", ns, "-s", "-j", "qdisc", "show", "dev", ifname],
    )?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    Ok(v.as_array()
        .and_then(|a| a.iter().find(|q| q["root"] == true || q["kind"] == "tbf"))
        .and_then(|q| q["backlog"].as_u64())
        .unwrap_or(0))
}

fn agent_counter(dir: &fare_lab::state::StateDir, node: &str, names: &[&str]) -> u64 {
    fare_lab::agents::show_json(dir, node, fare_lab::agents::Show::Arn)
        .map(|v| {
            names
                .iter()
                .map(|n| v["counters"][*n].as_u64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

fn run_mode(args: &Args, mode: Option<CongestionMode>, i: usize) -> anyhow::Result<Outcome> {
    let name = format!("ashb{}{i}", std::process::id() % 1000);
    let options = plan::Options {
        scale_mbit_per_gbps: args.link_mbit / 100.0,
        dataplane: DataplaneKind::Kernel,
        routing: Routing::Static,
        split: SplitMode::Spray,
        arn: mode.map(|m| LabArn {
            congestion: m,
            ..LabArn::default()
        }),
        ..plan::Options::default()
    };
    let lab = BenchLab::up("topologies/arn-four-paths.yaml", name.clone(), options)?;
    let state = lab.dir.load().context("lab state")?;
    let node = |n: &str| state.plan.node(n).context("node of the plan");
    let leaf1 = node("leaf1")?;
    let leaf2 = node("leaf2")?;
    let ingress = (leaf1.ns.clone(), leaf1.hosts[0].node_interface.clone());
    let egress = (leaf2.ns.clone(), leaf2.hosts[0].node_interface.clone());
    // Per path: (leaf1's port to the spine, the spine's port to leaf2).
    let mut paths = Vec::new();
    for s in SPINES {
        let spine = node(s)?;
        let up = leaf1
            .ports
            .iter()
            .find(|p| p.peer == s)
            .context("leaf1 port")?;
        let down = spine
            .ports
            .iter()
            .find(|p| p.peer == "leaf2")
            .context("spine port to leaf2")?;
        paths.push((
            (leaf1.ns.clone(), up.interface.clone()),
            (spine.ns.clone(), down.interface.clone()),
        ));
    }
    faults::congest(Some(&name), "spine1-leaf2", args.percent, 0.0)
        .map_err(|e| anyhow::anyhow!("congest: {e}"))?;
    let link_bps = args.link_mbit * 1e6;
    let rate_kbit = (4.0 * link_bps * args.load / 100.0 / 1000.0).round() as u64;
    let total = args.warmup + args.seconds + 1.0;
    let fare = fare_lab::up::fare_binary();
    let dst = leaf2.hosts[0].addr.to_string();
    let mut children: Vec<Child> = Vec::new();
    let spawn = |ns: &str, a: &[&str]| -> anyhow::Result<Child> {
        Ok(Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(&fare)
            .args(a)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?)
    };
    let secs = format!("{total}");
    children.push(spawn(
        &leaf2.hosts[0].ns,
        &[
            "lab",
            "gen",
            "--sink",
            "--duration",
            &format!("{}", total + 1.0),
        ],
    )?);
    children.push(spawn(
        &leaf1.hosts[0].ns,
        &[
            "lab",
            "gen",
            "--to",
            &dst,
            "--rate-kbit",
            &rate_kbit.to_string(),
            "--flows",
            "64",
            "--duration",
            &secs,
        ],
    )?);
    let result = (|| -> anyhow::Result<Outcome> {
        std::thread::sleep(Duration::from_secs_f64(args.warmup));
        let changes = [
            "shares_cut",
            "shares_restored",
            "members_removed",
            "members_restored",
        ];
        let c0 = agent_counter(&lab.dir, "leaf1", &changes);
        let in0 = link_packets(&ingress.0, &ingress.1)?.1;
        let out0 = link_packets(&egress.0, &egress.1)?.0;
        let mut path0 = Vec::new();
        for (_, (ns, i)) in &paths {
            path0.push(link_packets(ns, i)?.0);
        }
        let t0 = Instant::now();
        let mut delay_sum = [0.0f64; 4];
        let mut samples = 0u64;
        while t0.elapsed() < Duration::from_secs_f64(args.seconds) && samples < 100_000 {
            for (k, ((ns1, i1), (ns2, i2))) in paths.iter().enumerate() {
                let up_rate = link_bps;
                let down_rate = if k == 0 {
                    link_bps * args.percent / 100.0
                } else {
                    link_bps
                };
                let d = backlog(ns1, i1)? as f64 * 8.0 / up_rate
                    + backlog(ns2, i2)? as f64 * 8.0 / down_rate;
                delay_sum[k] += d;
            }
            samples += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        let seconds = t0.elapsed().as_secs_f64();
        let offered = link_packets(&ingress.0, &ingress.1)?.1 - in0;
        let delivered = link_packets(&egress.0, &egress.1)?.0 - out0;
        let mut per_path = Vec::new();
        for (k, (_, (ns, i))) in paths.iter().enumerate() {
            per_path.push(link_packets(ns, i)?.0 - path0[k]);
        }
        let arn_changes = agent_counter(&lab.dir, "leaf1", &changes) - c0;
        let n = samples.max(1) as f64;
        let all: u64 = per_path.iter().sum();
        let weighted: f64 = per_path
            .iter()
            .zip(&delay_sum)
            .map(|(&p, &d)| p as f64 * d / n)
            .sum::<f64>()
            / all.max(1) as f64;
        Ok(Outcome {
            mode: match mode {
                None => "no ARN",
                Some(CongestionMode::Remove) => "ARN, whole-member removal",
                Some(CongestionMode::Shift) => "ARN, congestion shift",
            },
            offered_pkts: offered,
            delivered_pkts: delivered,
            seconds,
            delay_congested_ms: 1000.0 * delay_sum[0] / n,
            delay_all_ms: 1000.0 * weighted,
            spine1_share: per_path[0] as f64 / all.max(1) as f64,
            arn_changes,
        })
    })();
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    drop(lab);
    result
}

pub fn run_bench(args: Args) -> anyhow::Result<String> {
    if !sys::have("tc") {
        bail!("fare bench arn-shift needs tc (and root: it builds namespace labs)");
    }
    if !(args.percent > 0.0 && args.percent <= 100.0 && args.load > 0.0 && args.seconds > 0.0) {
        bail!("--percent in (0, 100], --load and --seconds positive");
    }
    let mut out = Vec::new();
    for (i, mode) in [
        None,
        Some(CongestionMode::Remove),
        Some(CongestionMode::Shift),
    ]
    .into_iter()
    .enumerate()
    {
        eprintln!("arn-shift: mode {i} of 3");
        out.push(run_mode(&args, mode, i)?);
    }
    let mut s = String::new();
    let capacity = 4.0 * args.link_mbit;
    let carries = (3.0 + args.percent / 100.0) * args.link_mbit;
    let _ = writeln!(s, "## ARN: congestion shift against whole-member removal\n");
    let _ = writeln!(
        s,
        "`{}` (load average {}). topologies/arn-four-paths.yaml: four paths of {} Mbit/s \
         (fabric {capacity} Mbit/s), spine1 -> leaf2 shaped to {}% ({:.1} Mbit/s), UDP at \
         {}% of the fabric ({:.1} Mbit/s offered, 64 flows, {PAYLOAD}-byte payloads) from \
         leaf1's host to leaf2's host; static groups, kernel data plane (its nexthop groups \
         hash flows onto members, so each lab's flow placement shifts the shares a little); \
         {} s measured after {} s of warm-up, each mode on a lab of its own, one run. The \
         fabric can deliver at most {carries:.1} Mbit/s (three full paths and the congested \
         one); removal leaves {:.1}. Congestion signal: the tbf's qdisc backlog (veth has no \
         BQL; the monitor logs \"qdisc backlog (the driver has no BQL)\").\n",
        command_line(),
        load_average(),
        args.link_mbit,
        args.percent,
        args.link_mbit * args.percent / 100.0,
        args.load,
        capacity * args.load / 100.0,
        args.seconds,
        args.warmup,
        3.0 * args.link_mbit,
    );
    let _ = writeln!(
        s,
        "| mode | delivered Mbit/s | loss % | queueing delay, congested path ms | queueing delay, all paths ms | share via spine1 | leaf1 share changes / removals |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    let mbit = |o: &Outcome| o.delivered_pkts as f64 * PAYLOAD as f64 * 8.0 / o.seconds / 1e6;
    let loss = |o: &Outcome| {
        100.0 * (1.0 - o.delivered_pkts as f64 / o.offered_pkts.max(1) as f64).max(0.0)
    };
    for o in &out {
        let _ = writeln!(
            s,
            "| {} | {:.2} | {:.2} | {:.1} | {:.1} | {:.3} | {} |",
            o.mode,
            mbit(o),
            loss(o),
            o.delay_congested_ms,
            o.delay_all_ms,
            o.spine1_share,
            o.arn_changes
        );
    }
    let (none, remove, shift) = (&out[0], &out[1], &out[2]);
    let _ = writeln!(
        s,
        "\nShift / removal: delivered {:.3}x, loss {:.2} vs {:.2} percentage points; shift / \
         no ARN: delivered {:.3}x. Delay: tbf backlog / rate per hop, sampled every 100 ms.",
        mbit(shift) / mbit(remove).max(1e-9),
        loss(shift),
        loss(remove),
        mbit(shift) / mbit(none).max(1e-9),
    );
    Ok(s)
}
