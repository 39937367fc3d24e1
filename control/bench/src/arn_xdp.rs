//! `fare bench arn-xdp`: how long an ARN takes from the sender's `send` to the member being
//! out at the receiver, inside the XDP program against the agent's user-space receiver,
//! both for the same ARN in the same trial (root).
//!
//! Lab: topologies/arn-spine-leaf.yaml, static groups, XDP data plane on every node. Each
//! trial a thread inside spine1's namespace reads CLOCK_MONOTONIC and sends one Type 1
//! (TTL 255, from its address on the link) to leaf1; the bench then polls leaf1's pinned
//! maps: ARN_REMOVED[member] holds the program's bpf_ktime (the same clock) of the
//! removal; the member's `MEMBER_ADMIN_DOWN` bit appears when the agent has applied it
//! (polled, so the agent's time is an upper bound by the poll period, ~10 µs). A Type 2
//! then restores both before the next trial.

use super::lab_bench::{load_average, quantile, BenchLab, XdpMaps};
use anyhow::Context;
use fare_common as fc;
use fare_dp_xdp::queues::monotonic_ns;
use fare_lab::arn::LabArn;
use fare_lab::plan::{self, DataplaneKind, Routing, SplitMode};
use std::fmt::Write;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trials (one Type 1 and one Type 2 each).
    #[arg(long, default_value_t = 50)]
    trials: usize,
}

const SENDER: &str = "spine1";
const INGRESS: &str = "leaf1";

pub fn run_bench(args: Args) -> anyhow::Result<String> {
    let options = plan::Options {
        dataplane: DataplaneKind::Xdp,
        routing: Routing::Static,
        split: SplitMode::Spray,
        arn: Some(LabArn {
            hold_ms: 5000,
            congestion: fare_arn::shift::CongestionMode::Remove,
            ..LabArn::default()
        }),
        ..plan::Options::default()
    };
    let lab = BenchLab::up(
        "topologies/arn-spine-leaf.yaml",
        format!("arnx{}", std::process::id() % 10_000),
        options,
    )?;
    let st = lab.dir.load()?;
    let sender = st.plan.node(SENDER).context("no spine1")?;
    let ingress = st.plan.node(INGRESS).context("no leaf1")?;
    let port = sender
        .ports
        .iter()
        .find(|p| p.peer == INGRESS)
        .context("no spine1-leaf1 link")?
        .clone();
    let maps = XdpMaps::open(&ingress.ns)?;
    // The agent fills the table after its first install: wait for it.
    let member = maps
        .wait_targets(port.addr.into(), 0, Duration::from_secs(30))
        .and_then(|ids| ids.first().copied())
        .context("leaf1's program never listed a member toward spine1")?;
    let (removed, members) = (&maps.arn_removed, &maps.members);

    // The sending thread lives in spine1's namespace.
    let (tx, rx) = std::sync::mpsc::channel::<u8>();
    let (sent_tx, sent_rx) = std::sync::mpsc::channel::<u64>();
    let ns = sender.ns.clone();
    let from = SocketAddr::new(port.addr.into(), 0);
    let to = SocketAddr::new(port.peer_addr.into(), fare_arn::transport::DEFAULT_PORT);
    let thread = std::thread::spawn(move || -> anyhow::Result<()> {
        super::xdp_forward::enter(&ns)?;
        let socket = UdpSocket::bind(from)?;
        socket.set_ttl(255)?;
        for kind in rx {
            let msg = fare_arn::codec::ArnMessage {
                kind: fare_arn::codec::ArnType::from_u8(kind).context("type")?,
                metric: 0,
                flow: None,
                path_id: Some(0),
            }
            .encode()?;
            let t = monotonic_ns();
            socket.send_to(&msg, to)?;
            let _ = sent_tx.send(t);
        }
        Ok(())
    });

    let (mut program, mut agent) = (Vec::new(), Vec::new());
    let mut missed = 0;
    for i in 0..args.trials {
        tx.send(1)?;
        let sent = sent_rx.recv_timeout(Duration::from_secs(5))?;
        let (mut t_prog, mut t_agent) = (None, None);
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && (t_prog.is_none() || t_agent.is_none()) {
            if t_prog.is_none() {
                if let Ok(t) = removed.get(&member, 0) {
                    if t != 0 {
                        t_prog = Some(t);
                    }
                }
            }
            if t_agent.is_none() {
                if let Ok(m) = members.get(&member, 0) {
                    if m.state & fc::MEMBER_ADMIN_DOWN != 0 {
                        t_agent = Some(monotonic_ns());
                    }
                }
            }
        }
        match (t_prog, t_agent) {
            (Some(p), Some(a)) => {
                program.push(p.saturating_sub(sent) as f64 / 1e6);
                agent.push(a.saturating_sub(sent) as f64 / 1e6);
            }
            _ => {
                eprintln!(
                    "bench arn-xdp: trial {}: program {t_prog:?}, agent {t_agent:?}",
                    i + 1
                );
                missed += 1;
            }
        }
        // Restore (Type 2) and wait until both have let go.
        tx.send(2)?;
        let _ = sent_rx.recv_timeout(Duration::from_secs(5));
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let p = removed.get(&member, 0).unwrap_or(0);
            let a = members.get(&member, 0).map(|m| m.state).unwrap_or(0);
            if p == 0 && a == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(50));
        eprintln!("bench arn-xdp: trial {}/{}", i + 1, args.trials);
    }
    drop(tx);
    let _ = thread.join();

    let mut s = String::new();
    let _ = writeln!(
        s,
        "Command (root, repository root): `{}`  ",
        super::command_line()
    );
    let _ = writeln!(
        s,
        "Lab: topologies/arn-spine-leaf.yaml, static groups, XDP data plane; one Type 1 from \
         spine1 to leaf1 per trial (then Type 2). Time from spine1's send call \
         (CLOCK_MONOTONIC) to the member out at leaf1: in the program = its own removal \
         timestamp (bpf_ktime, same clock); agent = the user-space receiver's map write, \
         polled. Load average at the end {}.\n",
        load_average()
    );
    let _ = writeln!(s, "| receiver | trials | median ms | p90 ms | p99 ms |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|");
    for (name, v) in [
        ("XDP program (no user space)", &program),
        ("agent (user-space receiver, map write)", &agent),
    ] {
        let _ = writeln!(
            s,
            "| {name} | {} | {:.3} | {:.3} | {:.3} |",
            v.len(),
            quantile(v, 0.5),
            quantile(v, 0.9),
            quantile(v, 0.99)
        );
    }
    let _ = writeln!(
        s,
        "\nRatio of medians (agent / program): {:.0}x. Missed trials: {missed}.",
        quantile(&agent, 0.5) / quantile(&program, 0.5)
    );
    Ok(s)
}
