//! `fare bench modes`: what each group mode (`fare lab up --split`) does to long TCP
//! flows, on the draft's Figure 1 fabric with the XDP data plane, in one run (root).
//!
//! Per mode, a lab of its own: `lab up --split MODE`, one link degraded (`lab degrade`,
//! the agents re-weight), iperf3 TCP from the hosts of several leaves to one receiver
//! leaf's host, and an ARN congestion event (`lab congest`) on a spine's link toward the
//! receiver in the middle third of the traffic. Measured at the ends, not in the fabric:
//! goodput (iperf3's received bytes), the senders' retransmissions (iperf3) and
//! reordering detections (TcpExtTCPSACKReorder + TcpExtTCPTSReorder), and the segments the
//! receiver queued out of order (TcpExtTCPOFOQueue) per 1000 it received (Tcp InSegs),
//! all read from the namespaces' own /proc/net counters. The first mode is the baseline.

use super::command_line;
use super::lab_bench::{load_average, BenchLab};
use anyhow::{bail, Context};
use fare_lab::events::Event;
use fare_lab::plan::{self, DataplaneKind, Plan, Routing, SplitMode};
use fare_lab::{faults, sys};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOPOLOGY: &str = "topologies/draft-fig1.yaml";
/// iperf3 servers listen from this port up, one per sender.
const BASE_PORT: u16 = 5301;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Group modes to compare, each on a lab of its own; the first is the baseline.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [SplitMode::Spray, SplitMode::Flow])]
    modes: Vec<SplitMode>,
    /// Seconds of TCP traffic per mode (the congestion lasts the middle third).
    #[arg(long, default_value_t = 24)]
    seconds: u64,
    /// Parallel TCP streams per sender host (`iperf3 -P`).
    #[arg(long, default_value_t = 4)]
    streams: u32,
    /// Sender leaves (their hosts); the receiver is --to's host.
    #[arg(long, value_delimiter = ',', default_values_t = ["L5".to_string(), "L6".to_string(), "L7".to_string(), "L8".to_string()])]
    from: Vec<String>,
    /// Receiver leaf.
    #[arg(long, default_value = "L1")]
    to: String,
    /// Link degraded before the traffic starts (`A-B=GBPS`, as `fare lab degrade`).
    #[arg(long, default_value = "S4-L1=25")]
    degrade: String,
    /// Link congested in the middle third (`A-B`, A's end shaped, as `fare lab congest`).
    #[arg(long, default_value = "S1-L1")]
    congest: String,
    /// Rate of the congested link during the event, % of its capacity.
    #[arg(long, default_value_t = 20.0)]
    congest_percent: f64,
    /// Mbit/s of tc rate per Gbps of topology capacity (`lab up --scale`).
    #[arg(long, default_value_t = 0.5)]
    scale: f64,
}

/// What one mode's run measured at the ends.
#[derive(Debug, Clone, Default)]
struct ModeRun {
    mode: String,
    goodput_mbps: f64,
    retransmits: u64,
    /// Receiver: segments queued out of order, segments received.
    ofo: u64,
    in_segs: u64,
    /// Senders: reordering the TCP stacks detected (SACK and timestamps).
    reorder_seen: u64,
    /// ARNs the agents sent and applied during the congestion.
    arn_sent: usize,
    arn_applied: usize,
    streams: u32,
}

pub fn run_bench(args: Args) -> anyhow::Result<String> {
    if !sys::have("iperf3") || !sys::have("tc") {
        bail!("fare bench modes needs iperf3 and tc (and root: it builds namespace labs)");
    }
    if args.modes.is_empty() || args.seconds < 3 || !(args.scale.is_finite() && args.scale > 0.0) {
        bail!("--modes must name a mode, --seconds be at least 3 and --scale positive");
    }
    if !(args.congest_percent > 0.0 && args.congest_percent <= 100.0) {
        bail!("--congest-percent must be in (0, 100]");
    }
    let started = Instant::now();
    let load_start = load_average();
    let mut runs = Vec::new();
    for (i, &mode) in args.modes.iter().enumerate() {
        eprintln!("modes: {} ({} of {})", mode.name(), i + 1, args.modes.len());
        runs.push(run_mode(&args, mode)?);
    }
    Ok(report(
        &args,
        &runs,
        &load_start,
        started.elapsed().as_secs_f64(),
    ))
}

/// One mode: its lab, the degraded link, the traffic with the congestion in the middle.
fn run_mode(args: &Args, mode: SplitMode) -> anyhow::Result<ModeRun> {
    let name = format!("mE{}{}", std::process::id() % 100_000, &mode.name()[..1]);
    let options = plan::Options {
        scale_mbit_per_gbps: args.scale,
        dataplane: DataplaneKind::Xdp,
        routing: Routing::Bgp,
        split: mode,
        ..Default::default()
    };
    let lab = BenchLab::up(TOPOLOGY, name.clone(), options)?;
    let plan = fare_lab::state::StateDir::new(&lab.name).load()?.plan;
    let degraded = faults::degrade(Some(&name), &args.degrade, 60.0)?;
    if !degraded.mismatches.is_empty() {
        bail!(
            "{}: not converged after the degrade ({} differences)",
            name,
            degraded.mismatches.len()
        );
    }
    let receiver = host(&plan, &args.to)?;
    let senders: Vec<(String, String)> = args
        .from
        .iter()
        .map(|n| host(&plan, n).map(|h| (n.clone(), h.0)))
        .collect::<anyhow::Result<_>>()?;
    let mut servers = Servers(Vec::new());
    for i in 0..senders.len() {
        servers
            .0
            .push(iperf3(&receiver.0, &["-s", "-1", "-p", &port(i)])?);
    }
    std::thread::sleep(Duration::from_millis(500));
    let rx_before = counters(&receiver.0)?;
    let tx_before: Vec<_> = senders
        .iter()
        .map(|s| counters(&s.1))
        .collect::<anyhow::Result<_>>()?;
    let secs = args.seconds.to_string();
    let streams = args.streams.to_string();
    let mut clients = Servers(Vec::new());
    for (i, (_, ns)) in senders.iter().enumerate() {
        let a = [
            "-c",
            &receiver.1,
            "-p",
            &port(i),
            "-t",
            &secs,
            "-P",
            &streams,
            "-J",
        ];
        clients.0.push(iperf3(ns, &a)?);
    }
    // The congestion in the middle third; `congest` restores the link after it.
    let third = Duration::from_secs_f64(args.seconds as f64 / 3.0);
    std::thread::sleep(third);
    let congested = faults::congest(
        Some(&name),
        &args.congest,
        args.congest_percent,
        third.as_secs_f64(),
    )?;
    let mut run = ModeRun {
        mode: mode.name().to_string(),
        streams: args.streams * senders.len() as u32,
        arn_sent: congested
            .arn
            .iter()
            .filter(|a| matches!(a.event, Event::ArnSent { .. }))
            .count(),
        arn_applied: congested
            .arn
            .iter()
            .filter(|a| matches!(a.event, Event::ArnApplied { .. }))
            .count(),
        ..Default::default()
    };
    let deadline = Duration::from_secs(args.seconds + 30);
    for (c, (node, _)) in clients.0.iter_mut().zip(&senders) {
        let out = wait_output(c, deadline).with_context(|| format!("iperf3 from {node}"))?;
        let (bps, retr) = iperf3_totals(&out).with_context(|| format!("iperf3 from {node}"))?;
        run.goodput_mbps += bps / 1e6;
        run.retransmits += retr;
    }
    let rx = delta(&counters(&receiver.0)?, &rx_before);
    run.ofo = rx.get("TcpExt:TCPOFOQueue").copied().unwrap_or(0);
    run.in_segs = rx.get("Tcp:InSegs").copied().unwrap_or(0);
    for (s, before) in senders.iter().zip(&tx_before) {
        let d = delta(&counters(&s.1)?, before);
        run.reorder_seen += ["TcpExt:TCPSACKReorder", "TcpExt:TCPTSReorder"]
            .iter()
            .filter_map(|k| d.get(*k))
            .sum::<u64>();
    }
    eprintln!("modes: {run:?}");
    drop(lab);
    Ok(run)
}

/// The first host of `node`: (namespace, address).
fn host(plan: &Plan, node: &str) -> anyhow::Result<(String, String)> {
    plan.nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.hosts.first())
        .map(|h| (h.ns.clone(), h.addr.to_string()))
        .with_context(|| format!("{node} has no host in {TOPOLOGY}"))
}

fn port(i: usize) -> String {
    (BASE_PORT + i as u16).to_string()
}

/// Processes killed when dropped (an error mid-run leaves no iperf3 behind).
struct Servers(Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn iperf3(ns: &str, args: &[&str]) -> anyhow::Result<Child> {
    Command::new("ip")
        .args(["netns", "exec", ns, "iperf3"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting iperf3 in {ns}"))
}

/// The child's stdout once it exits (killed after `limit`).
fn wait_output(c: &mut Child, limit: Duration) -> anyhow::Result<String> {
    let start = Instant::now();
    while c.try_wait()?.is_none() {
        if start.elapsed() > limit {
            let _ = c.kill();
            bail!("did not finish in {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut out = String::new();
    if let Some(mut s) = c.stdout.take() {
        std::io::Read::read_to_string(&mut s, &mut out)?;
    }
    Ok(out)
}

/// iperf3 -J of a client: (received bits/s, retransmissions).
fn iperf3_totals(json: &str) -> anyhow::Result<(f64, u64)> {
    let v: Value = serde_json::from_str(json).context("iperf3 -J output")?;
    if let Some(e) = v["error"].as_str() {
        bail!("{e}");
    }
    let end = &v["end"];
    let bps = end["sum_received"]["bits_per_second"]
        .as_f64()
        .context("no end.sum_received.bits_per_second")?;
    Ok((bps, end["sum_sent"]["retransmits"].as_u64().unwrap_or(0)))
}

/// The namespace's SNMP and TcpExt counters (`/proc/net/snmp`, `/proc/net/netstat`), as
/// `Group:Name` -> value.
fn counters(ns: &str) -> anyhow::Result<HashMap<String, u64>> {
    let mut out = HashMap::new();
    for file in ["/proc/net/snmp", "/proc/net/netstat"] {
        let text = sys::netns_exec(ns, "cat", &[file])?;
        out.extend(parse_proc_counters(&text));
    }
    Ok(out)
}

/// `/proc/net/snmp` and `/proc/net/netstat` come as line pairs: `Group: names...` then
/// `Group: values...`.
fn parse_proc_counters(text: &str) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((g1, names)), Some((g2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if g1 != g2 {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse::<u64>() {
                out.insert(format!("{g1}:{n}"), v);
            }
        }
    }
    out
}

fn delta(after: &HashMap<String, u64>, before: &HashMap<String, u64>) -> HashMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v.saturating_sub(*before.get(k).unwrap_or(&0))))
        .collect()
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("x{:.2}", a / b)
    } else {
        "-".into()
    }
}

fn per_mille(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        1000.0 * part as f64 / whole as f64
    }
}

/// The RESULTS.md section.
fn report(args: &Args, runs: &[ModeRun], load_start: &str, total_s: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Group modes under TCP: spray, flow, flowlet (`modes`)\n"
    );
    let _ = writeln!(
        s,
        "`{}` (root; load average {load_start} at start, {} at end; {total_s:.0} s in all). \
         {TOPOLOGY}, XDP data plane, BGP routing, links at {} Mbit/s per Gbps; per mode a lab \
         of its own (`lab up --split MODE`), then `lab degrade {}`, then {} s of iperf3 TCP \
         ({} streams from each of {}'s hosts to {}'s host) with `lab congest {}` at {}% in the \
         middle third (ARN on). Goodput: iperf3's received rate, summed. Out of order: the \
         receiver's TcpExtTCPOFOQueue per 1000 segments received (Tcp InSegs). Reordering \
         seen: the senders' TcpExtTCPSACKReorder + TcpExtTCPTSReorder. Baseline: the first \
         mode ({}).\n",
        command_line(),
        load_average(),
        args.scale,
        args.degrade,
        args.seconds,
        args.streams,
        args.from.join(", "),
        args.to,
        args.congest,
        args.congest_percent,
        runs.first().map_or("-", |r| r.mode.as_str()),
    );
    let _ = writeln!(
        s,
        "| mode | TCP streams | goodput, Mbit/s | vs baseline | retransmits | out-of-order per 1000 segments | vs baseline | reordering seen by senders | ARNs sent / applied |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    let base = runs.first().cloned().unwrap_or_default();
    let base_ofo = per_mille(base.ofo, base.in_segs);
    for r in runs {
        let ofo = per_mille(r.ofo, r.in_segs);
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {} | {} | {ofo:.2} ({} of {}) | {} | {} | {} / {} |",
            r.mode,
            r.streams,
            r.goodput_mbps,
            ratio(r.goodput_mbps, base.goodput_mbps),
            r.retransmits,
            r.ofo,
            r.in_segs,
            ratio(ofo, base_ofo),
            r.reorder_seen,
            r.arn_sent,
            r.arn_applied,
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_counters_pair_names_with_values() {
        let text = "TcpExt: SyncookiesSent TCPOFOQueue\nTcpExt: 0 17\n\
                    IpExt: InNoRoutes\nIpExt: 3\n";
        let c = parse_proc_counters(text);
        assert_eq!(c.get("TcpExt:TCPOFOQueue"), Some(&17));
        assert_eq!(c.get("IpExt:InNoRoutes"), Some(&3));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn iperf3_totals_read_received_rate_and_retransmits() {
        let j =
            r#"{"end":{"sum_sent":{"retransmits":12},"sum_received":{"bits_per_second":8.5e7}}}"#;
        assert_eq!(iperf3_totals(j).unwrap(), (8.5e7, 12));
        assert!(iperf3_totals(r#"{"error":"unable to connect"}"#).is_err());
    }
}
