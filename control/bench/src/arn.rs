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
//!   bandwidth: `fare lab degrade` to the same 10% (the two agents at the link's ends get
//!   the new bandwidth through their management sockets, `fare set bandwidth`, no
//!   restart), measured from the change until leaf1 logs its re-weighted group (once the
//!   lab saw every agent converge to the model).
//! - failure: spine1's link to leaf2 goes down. ARN: Type 3 -> leaf1 has the member out.
//!   BGP: the session drops, spine1 withdraws, leaf1 installs the group without spine1
//!   ("group installed" without that member). Both from the same event.
//!
//! Times come from the agents' log timestamps (same clock as the onset), so polling
//! adds nothing to them.

use super::command_line;
use super::lab_bench::{load_average, quantile, BenchLab, XdpMaps};
use anyhow::{bail, Context};
use fare_dp_xdp::queues::{monotonic_ns, Queues};
use fare_lab::arn::LabArn;
use fare_lab::events::{self, Event};
use fare_lab::plan::{self, DataplaneKind, Routing, SplitMode};
use fare_lab::state::{self, StateDir};
use fare_lab::{agents, faults, sys, up};
use std::fmt::Write;
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
    /// Bandwidth re-advertisement trials (BGP alone; a run-time bandwidth change).
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
    /// Seconds of congestion per phase of the loss measurement (without ARN, with ARN).
    #[arg(long, default_value_t = 3.0)]
    loss_seconds: f64,
}

impl Args {
    /// The RESULTS.md section: one per data plane.
    pub fn section(&self) -> &'static str {
        match self.dataplane {
            DataplaneKind::Xdp => "arn-xdp-dataplane",
            _ => "arn",
        }
    }
}

/// What the congested port did: frames sent and dropped, summed queueing delay (XDP's
/// virtual queue only; the tbf does not report it).
#[derive(Clone, Copy, Debug, Default)]
struct LinkCounters {
    packets: u64,
    drops: u64,
    delay_ns: Option<u64>,
}

impl LinkCounters {
    fn minus(&self, o: &LinkCounters) -> LinkCounters {
        LinkCounters {
            packets: self.packets.saturating_sub(o.packets),
            drops: self.drops.saturating_sub(o.drops),
            delay_ns: self
                .delay_ns
                .zip(o.delay_ns)
                .map(|(a, b)| a.saturating_sub(b)),
        }
    }
}

/// What the XDP programs tell the bench with their own clocks: spine1's virtual queue
/// toward leaf2 (its crossing stamp, its counters) and leaf1's removal stamps of the
/// members spine1's ARNs take out.
struct XdpProbe {
    ifindex: u32,
    queues: Queues,
    maps: XdpMaps,
    targets: Vec<u32>,
}

impl XdpProbe {
    /// Waits (up to 5 s) for leaf1's program to take a member out; then (onset ->
    /// crossing, crossing -> removal) in seconds when the crossing came after `t0_ns`.
    fn crossing_to_removal(&self, t0_ns: u64) -> Option<(f64, f64)> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Some(removed) = self.maps.removed_at(&self.targets) {
                let crossed = self.queues.get(self.ifindex).map_or(0, |q| q.crossed_ns);
                return (crossed >= t0_ns && removed >= crossed).then(|| {
                    (
                        (crossed - t0_ns) as f64 / 1e9,
                        (removed - crossed) as f64 / 1e9,
                    )
                });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        None
    }

    fn counters(&self) -> anyhow::Result<LinkCounters> {
        let q = self
            .queues
            .get(self.ifindex)
            .context("no virtual queue on the congested port")?;
        Ok(LinkCounters {
            packets: q.packets,
            drops: q.drops,
            delay_ns: Some(q.delay_ns),
        })
    }
}

/// The congested port's counters: the XDP program's virtual queue when there is one,
/// else the tbf's.
fn link_counters(
    ns: &str,
    ifname: &str,
    program: Option<&XdpProbe>,
) -> anyhow::Result<LinkCounters> {
    if let Some(p) = program {
        return p.counters();
    }
    let out = sys::run(
        "tc",
        &["-n", ns, "-s", "-j", "qdisc", "show", "dev", ifname],
    )?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    let root = v
        .as_array()
        .and_then(|a| a.iter().find(|q| q["root"] == true || q["kind"] == "tbf"))
        .context("no root qdisc")?;
    Ok(LinkCounters {
        packets: root["packets"].as_u64().unwrap_or(0),
        drops: root["drops"].as_u64().unwrap_or(0),
        delay_ns: None,
    })
}

const CONGESTED: &str = "spine1";
const FAR: &str = "leaf2";
const INGRESS: &str = "leaf1";
const PERCENT: f64 = 10.0;

/// The lab (taken down when dropped, also on error) and its traffic processes.
struct Bench {
    dir: StateDir,
    traffic: Vec<Child>,
    _lab: BenchLab,
}

impl Drop for Bench {
    fn drop(&mut self) {
        for c in &mut self.traffic {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A group for `prefix` installed without a member whose `interface:weight` starts with
/// `member` (`eth1:`).
fn installed_without(e: &Event, prefix: &str, member: &str) -> bool {
    matches!(e, Event::GroupInstalled { prefix: p, members }
        if p.to_string() == prefix && !members.split(' ').any(|m| m.starts_with(member)))
}

impl Bench {
    /// Unix time of `node`'s first typed event at or after `since` that `want` takes.
    fn logged(&self, node: &str, since: f64, want: impl Fn(&Event) -> bool) -> Option<f64> {
        events::of_node(&self.dir, node, since)
            .into_iter()
            .find(|e| want(&e.event))
            .map(|e| e.at)
    }

    fn wait_logged(
        &self,
        node: &str,
        since: f64,
        want: impl Fn(&Event) -> bool,
        timeout: Duration,
    ) -> Option<f64> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(t) = self.logged(node, since, &want) {
                return Some(t);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Members (interfaces) of the ingress group toward the far leaf's prefix.
    fn ingress_members(&self, prefix: &str) -> Vec<String> {
        let Some(groups) = agents::show_json(&self.dir, INGRESS, agents::Show::Groups) else {
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

fn ms(v: &[f64], q: f64) -> String {
    let x = 1000.0 * quantile(v, q);
    if x < 10.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.1}")
    }
}

pub fn run_bench(args: Args) -> anyhow::Result<String> {
    if !sys::have("tc") {
        bail!("fare bench arn needs tc (and root: it builds a namespace lab)");
    }
    let lab = format!("arnb{}", std::process::id() % 10_000);
    let options = plan::Options {
        dataplane: args.dataplane,
        routing: Routing::Bgp,
        split: SplitMode::Spray,
        arn: Some(LabArn {
            interval_us: args.interval_us,
            // The reaction-time trials measure the member going out (whole-member removal).
            congestion: fare_arn::shift::CongestionMode::Remove,
            ..LabArn::default()
        }),
        ..plan::Options::default()
    };
    let bench_lab = BenchLab::up("topologies/arn-spine-leaf.yaml", lab.clone(), options)?;
    let mut b = Bench {
        dir: bench_lab.dir.clone(),
        traffic: Vec::new(),
        _lab: bench_lab,
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
    let xdp = args.dataplane == DataplaneKind::Xdp;
    // XDP-redirected frames skip the tbf: its virtual queue in spine1's program changes too.
    let shape = |kbit: u64| -> anyhow::Result<()> {
        sys::tc_batch(
            &congested.ns,
            &fare_lab::shaping::tbf("change", &port.interface, kbit),
        )?;
        if xdp {
            faults::set_virtual_queue_rate(&congested.ns, &port.interface, kbit)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        Ok(())
    };
    // XDP: the programs' own clocks — spine1's crossing stamp, leaf1's removal stamp.
    let program = if xdp {
        let ifindex = sys::ifindex(&congested.ns, &port.interface)?;
        let queues = Queues::open(
            std::path::Path::new(fare_dp_xdp::pins::DEFAULT_ROOT),
            &congested.ns,
        )?;
        let maps = XdpMaps::open(&ingress.ns)?;
        let spine1 = ingress
            .ports
            .iter()
            .find(|x| x.peer == CONGESTED)
            .context("no leaf1-spine1 link")?
            .peer_addr;
        let targets = maps
            .wait_targets(
                spine1.into(),
                u32::from(far.router_id),
                Duration::from_secs(30),
            )
            .or_else(|| maps.wait_targets(spine1.into(), 0, Duration::from_secs(1)))
            .context("leaf1's program lists no member for spine1's ARNs")?;
        Some(XdpProbe {
            ifindex,
            queues,
            maps,
            targets,
        })
    } else {
        None
    };

    // Congestion, ARN.
    let (mut onset_cross, mut cross_removed, mut onset_removed) = (vec![], vec![], vec![]);
    let (mut prog_onset_cross, mut prog_cross_removed) = (vec![], vec![]);
    let mut missed = 0;
    for i in 0..args.trials {
        let t0 = state::now();
        let t0_ns = monotonic_ns();
        shape(low)?;
        if let Some((onset, removal)) = program.as_ref().and_then(|p| p.crossing_to_removal(t0_ns))
        {
            prog_onset_cross.push(onset);
            prog_cross_removed.push(removal);
        }
        let removed = b.wait_logged(
            INGRESS,
            t0,
            |e| matches!(e, Event::ArnApplied { arn_type: 1, .. }),
            Duration::from_secs(5),
        );
        let cross = b.logged(CONGESTED, t0, |e| {
            matches!(e, Event::ArnSent { arn_type: 1, .. })
        });
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
            |e| matches!(e, Event::ArnApplied { arn_type: 2, .. }),
            Duration::from_secs(5),
        );
        std::thread::sleep(Duration::from_millis(300));
        eprintln!("bench arn: congestion trial {}/{}", i + 1, args.trials);
    }

    // Loss and delay on the congested link, same load, without ARN (spine1's agent
    // stopped: its data plane forwards on, no ARN leaves) and with ARN.
    let spine1_agent = st
        .agents
        .iter()
        .find(|(n, _)| n == CONGESTED)
        .map(|(_, pid)| *pid as i32)
        .context("no agent pid for spine1")?;
    let mut loss = Vec::new();
    for with_arn in [false, true] {
        if !with_arn {
            sys::kill(spine1_agent, nix::sys::signal::Signal::SIGSTOP);
        }
        let before = link_counters(&congested.ns, &port.interface, program.as_ref())?;
        shape(low)?;
        std::thread::sleep(Duration::from_secs_f64(args.loss_seconds));
        let after = link_counters(&congested.ns, &port.interface, program.as_ref())?;
        shape(full)?;
        if !with_arn {
            sys::kill(spine1_agent, nix::sys::signal::Signal::SIGCONT);
        }
        loss.push((with_arn, after.minus(&before)));
        // Let the queue drain and any ARN state end before the next phase.
        std::thread::sleep(Duration::from_secs(2));
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
            |e| matches!(e, Event::ArnApplied { arn_type: 3, .. }),
            Duration::from_secs(5),
        );
        let bgp = b.wait_logged(
            INGRESS,
            t0,
            |e| installed_without(e, &prefix, &member),
            Duration::from_secs(60),
        );
        sys::run(
            "ip",
            &["-n", &congested.ns, "link", "set", &port.interface, "up"],
        )?;
        let sent = b.logged(CONGESTED, t0, |e| {
            matches!(e, Event::ArnSent { arn_type: 3, .. })
        });
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
        let t0 = state::now();
        let r = faults::degrade(Some(&lab), &format!("{spec}={gbps}"), 120.0)
            .map_err(|e| anyhow::anyhow!("degrade: {e}"))?;
        // From the change to leaf1's re-weighted group, in its log (the lab's own
        // convergence time adds its polling of every agent).
        if r.convergence_s.is_some() {
            if let Some(t) = b.logged(INGRESS, t0, |e| installed_without(e, &prefix, "\u{0}")) {
                degrade.push(t - t0);
            }
        }
        let r = faults::restore(Some(&lab), &spec, 120.0)
            .map_err(|e| anyhow::anyhow!("restore: {e}"))?;
        // Converged before the next trial: its install cannot pass for the next one's.
        if r.convergence_s.is_none() || !b.wait_members(&prefix, 2, Duration::from_secs(120)) {
            bail!("leaf1's group did not recover after restore");
        }
        eprintln!("bench arn: bandwidth trial {}/{}", i + 1, args.bgp_trials);
    }
    drop(b);

    let mut s = String::new();
    if xdp {
        let _ = writeln!(
            s,
            "## ARN with the XDP data plane: congestion found in the program, reaction time and loss (`fare bench arn --dataplane xdp`)\n"
        );
    } else {
        let _ = writeln!(s, "## ARN reaction time vs BGP alone (`fare bench arn`)\n");
    }
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
        load_average()
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
        "BGP alone: new bandwidth (`fare set bandwidth`) -> groups re-weighted",
        &degrade,
    );
    if xdp {
        row(
            "congestion",
            "XDP: onset -> threshold crossed (spine1 program's stamp)",
            &prog_onset_cross,
        );
        row(
            "congestion",
            "XDP: threshold crossed (spine1 program) -> member out (leaf1 program)",
            &prog_cross_removed,
        );
    }
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
    if xdp {
        let _ = writeln!(
            s,
            "In-program reaction (XDP): threshold crossing -> member out at leaf1, median {} ms, \
             p99 {} ms; BGP alone / that: {:.0}x.",
            ms(&prog_cross_removed, 0.5),
            ms(&prog_cross_removed, 0.99),
            ratio(&prog_cross_removed, &degrade)
        );
    }
    let _ = writeln!(
        s,
        "\nLoss and delay on spine1 -> leaf2 while congested to {PERCENT}% for {} s, same \
         load; without ARN = spine1's agent stopped (its data plane forwards on, no ARN \
         leaves):\n",
        args.loss_seconds
    );
    let _ = writeln!(
        s,
        "| ARN | frames sent | frames dropped | dropped % | mean queueing delay ms |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|");
    for (with_arn, c) in &loss {
        let offered = c.packets + c.drops;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {} |",
            if *with_arn { "with" } else { "without" },
            c.packets,
            c.drops,
            100.0 * c.drops as f64 / offered.max(1) as f64,
            c.delay_ns
                .map(|d| format!("{:.3}", d as f64 / c.packets.max(1) as f64 / 1e6))
                .unwrap_or_else(|| "n/a (tbf)".into())
        );
    }
    Ok(s)
}
