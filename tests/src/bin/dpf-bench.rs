//! DPF failover benchmark, written to the `dpf` section of bench/RESULTS.md.
//!
//! Figure 1 of draft-wang-idr-dpf with XDP data planes (`fare_integration::dpf_lab`):
//! h1 sends UDP with a sequence number every millisecond to h2 through Leaf1. TRIALS
//! times, the red fabric fails (Spine1's link to Leaf2 goes down) and comes back.
//!
//! - DPF: Leaf2 advertises 198.18.0.0/24 with primary red, backup blue; traffic runs on
//!   red until the failure, then Leaf1 moves it onto the backup (blue) group.
//! - Baseline, same run and fabric: the route uncolored, so Leaf1 sprays over both
//!   spines and only has to drop Spine1's member (plain eBGP multipath failover).
//!
//! Outage = time between the first and the last lost packet by send schedule (0 when
//! nothing was lost); median and p99 over the trials.
//!
//! Root.   cargo run -p fare-integration --bin dpf-bench -- [TRIALS] [--no-write]

use anyhow::{bail, Context, Result};
use fare::bench::results;
use fare_integration::dpf_lab::{group_vias, DpfFabric};
use fare_integration::{bgp::wait_for, repo_root, Netns};
use std::process::{Command, Stdio};
use std::time::Duration;

const PREFIX: &str = "198.18.0.0/24";
/// Send interval (ms) and how long each trial sends before and after the failure (s).
const INTERVAL_MS: f64 = 1.0;
const BEFORE_S: f64 = 1.0;
const AFTER_S: f64 = 3.0;

const RECEIVER: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("198.18.0.10", 9000))
s.settimeout(0.2)
end = time.monotonic() + float(sys.argv[1])
seen = []
while time.monotonic() < end:
    try:
        d, _ = s.recvfrom(2048)
    except socket.timeout:
        continue
    seen.append(int.from_bytes(d[:4], "big"))
print(" ".join(map(str, seen)))
"#;

const SENDER: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
interval = float(sys.argv[1]) / 1000.0
n = int(float(sys.argv[2]) / interval)
start = time.monotonic()
for i in range(n):
    nxt = start + i * interval
    d = nxt - time.monotonic()
    if d > 0:
        time.sleep(d)
    s.sendto(i.to_bytes(4, "big") + bytes(60), ("198.18.0.10", 9000))
print(n)
"#;

struct Trial {
    outage_ms: f64,
    lost: u64,
}

fn python(ns: &Netns, script: &str, args: &[String]) -> Command {
    let mut c = ns.command("/usr/bin/python3");
    c.arg("-c").arg(script).args(args);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// One failure of the red fabric under traffic; restores it afterwards.
fn trial(f: &DpfFabric, expected: &[&str]) -> Result<Trial> {
    let total = BEFORE_S + AFTER_S;
    let rx = python(&f.h2, RECEIVER, &[format!("{}", total + 1.5)]).spawn()?;
    std::thread::sleep(Duration::from_millis(300));
    let tx = python(
        &f.h1,
        SENDER,
        &[format!("{INTERVAL_MS}"), format!("{total}")],
    )
    .spawn()?;
    std::thread::sleep(Duration::from_secs_f64(BEFORE_S));
    f.s1.sh("ip link set l2 down")?;
    let sent = tx.wait_with_output()?;
    let got = rx.wait_with_output()?;
    f.s1.sh("ip link set l2 up")?;
    let n: u64 = String::from_utf8_lossy(&sent.stdout)
        .trim()
        .parse()
        .with_context(|| format!("sender: {}", String::from_utf8_lossy(&sent.stderr)))?;
    let mut seen = vec![false; n as usize];
    for s in String::from_utf8_lossy(&got.stdout).split_whitespace() {
        if let Ok(i) = s.parse::<usize>() {
            if let Some(x) = seen.get_mut(i) {
                *x = true;
            }
        }
    }
    let lost: Vec<usize> = (0..seen.len()).filter(|&i| !seen[i]).collect();
    if std::env::var_os("DPF_BENCH_DEBUG").is_some() {
        for (name, ns, cmd) in [
            ("l2", &f.l2, "nstat -az | grep -E 'IpForwDatagrams|IpInAddrErrors|IpInHdrErrors|IpOutNoRoutes|IpInDiscards|IpInReceives'; ip -s link show host"),
            ("h2", &f.h2, "nstat -az | grep -E 'IpInReceives|UdpInDatagrams|UdpNoPorts|UdpInErrors|IpInDiscards|IpInAddrErrors'"),
        ] {
            let out = ns.sh(cmd)?;
            eprintln!("{name}:\n{}", String::from_utf8_lossy(&out.stdout));
        }
        eprintln!("receiver stderr: {}", String::from_utf8_lossy(&got.stderr));
    }
    let outage_ms = match (lost.first(), lost.last()) {
        (Some(a), Some(b)) => (b - a + 1) as f64 * INTERVAL_MS,
        _ => 0.0,
    };
    // Back to the starting state before the next trial.
    let back = wait_for(Duration::from_secs(60), || {
        (group_vias(f.leaf1(), PREFIX).as_deref()
            == Some(&expected.iter().map(|s| s.to_string()).collect::<Vec<_>>()[..]))
        .then_some(())
    });
    if back.is_none() {
        bail!(
            "the red fabric did not come back: {:?}",
            group_vias(f.leaf1(), PREFIX)
        );
    }
    std::thread::sleep(Duration::from_secs(1));
    Ok(Trial {
        outage_ms,
        lost: lost.len() as u64,
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

struct Summary {
    name: &'static str,
    median: f64,
    p99: f64,
    min: f64,
    max: f64,
    lost_median: f64,
    n: usize,
}

fn run(
    name: &'static str,
    tag: &str,
    leaf2_dpf: &str,
    expected: &[&str],
    trials: usize,
) -> Result<Summary> {
    let f = DpfFabric::up(tag, "", leaf2_dpf)?;
    let want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    wait_for(Duration::from_secs(90), || {
        (group_vias(f.leaf1(), PREFIX).as_deref() == Some(&want[..])).then_some(())
    })
    .with_context(|| {
        format!(
            "{name}: Leaf1 never had {want:?}: {:?}",
            group_vias(f.leaf1(), PREFIX)
        )
    })?;
    // ARP along the path before the first trial.
    let _ = python(&f.h1, SENDER, &["1".into(), "0.2".into()]).output();
    let mut outages = Vec::new();
    let mut lost = Vec::new();
    for i in 0..trials {
        let t = trial(&f, expected)?;
        eprintln!(
            "{name}: trial {i}: outage {:.0} ms, {} lost",
            t.outage_ms, t.lost
        );
        outages.push(t.outage_ms);
        lost.push(t.lost as f64);
    }
    outages.sort_by(f64::total_cmp);
    lost.sort_by(f64::total_cmp);
    Ok(Summary {
        name,
        median: percentile(&outages, 0.5),
        p99: percentile(&outages, 0.99),
        min: outages.first().copied().unwrap_or(f64::NAN),
        max: outages.last().copied().unwrap_or(f64::NAN),
        lost_median: percentile(&lost, 0.5),
        n: outages.len(),
    })
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let write = !args.iter().any(|a| a == "--no-write");
    let trials: usize = match args.iter().find(|a| !a.starts_with("--")) {
        Some(t) => t.parse().context("TRIALS must be a number")?,
        None => 10,
    };
    let dpf = run(
        "DPF primary red -> backup blue",
        "dfb",
        "dpf:\n  routes:\n    - {prefix: 198.18.0.0/24, primary: 1, backup: 2}\n",
        &["10.1.1.2"],
        trials,
    )?;
    let base = run(
        "uncolored eBGP multipath (baseline)",
        "dfu",
        "",
        &["10.1.1.2", "10.2.1.2"],
        trials,
    )?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?").to_string();
    let mut md = String::from("## DPF failover: primary color -> backup color (`dpf`)\n\n");
    md += &format!(
        "`cargo run -p fare-integration --bin dpf-bench -- {trials}` (root, debug build, load {load} at the end).\n\
         Figure 1 with `fare agent`s on XDP data planes; h1 sends one UDP datagram per {INTERVAL_MS} ms to h2; \
         each trial takes Spine1's link to Leaf2 down (the red fabric fails) and up again. \
         Outage = first to last lost datagram by send schedule.\n\n\
         | case | trials | outage median | p99 | min | max | lost (median) |\n|---|---|---|---|---|---|---|\n"
    );
    for s in [&dpf, &base] {
        md += &format!(
            "| {} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} |\n",
            s.name, s.n, s.median, s.p99, s.min, s.max, s.lost_median
        );
    }
    md += &format!(
        "\nDPF / baseline median outage: x{:.2}. Both wait for the same BGP withdrawal from Spine1; \
         DPF then moves every flow to the pre-advertised backup color, the baseline drops one of two members \
         (so it loses about half the datagrams in its window).\n",
        dpf.median / base.median
    );
    print!("{md}");
    if write {
        let path = repo_root().join("bench/RESULTS.md");
        results::write_section(&path, "dpf", &md)?;
        eprintln!("wrote section `dpf` of {}", path.display());
    }
    Ok(())
}
