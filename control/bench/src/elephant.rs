//! `fare bench elephant`: four long flows over four equal, rate-limited paths — the case
//! where per-flow hashing loses throughput (two elephants on one path, another path idle)
//! and per-packet spraying does not. Same namespaces, same run, both data paths (root).
//!
//! ```text
//! gen:g0 ──> router:r0 ─e1..e4─> mid:d1..d4 ─(per-path table)─ m1..m4 ──> dest:f1..f4
//! ```
//! (dest: 198.18.0.1 on lo, four iperf3 servers). Path i is limited to RATE by a token
//! bucket on mid's m{i}, which both data paths' packets cross (XDP-redirected frames skip
//! the router's own egress qdiscs, so the limit cannot sit there). Four iperf3 UDP clients offer RATE each (ideal aggregate:
//! 4 x RATE). Kernel: a nexthop group of four equal next hops, L4 flow hash
//! (`fib_multipath_hash_policy=1`). XDP: fare's program on r0, the same group in spray mode.
//! A seed picks the four client ports, i.e. where the flows hash to.

use super::xdp_forward::{enter, run, Ns};
use super::{command_line, Rng};
use anyhow::{bail, Context};
use fare_dataplane::{Dataplane, Group, GroupMode, MacAddr, Member};
use fare_dp_xdp::{XdpDataplane, XdpOptions};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Seeds (placements of the four flows); each runs both data paths.
    #[arg(long, default_value_t = 20)]
    seeds: u64,
    /// Seconds each set of four flows runs.
    #[arg(long, default_value_t = 2)]
    seconds: u64,
    /// Capacity of each path and offered rate of each flow, Mbit/s.
    #[arg(long, default_value_t = 20)]
    rate_mbit: u64,
}

const PATHS: usize = 4;

fn dest_mac(i: usize) -> [u8; 6] {
    [2, 0, 0, 0, 0x30, i as u8]
}

struct Lab {
    gen: Ns,
    router: Ns,
    mid: Ns,
    _dest: Ns,
    servers: Vec<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for s in &mut self.servers {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

const NO_RP_FILTER: &str =
    "sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0";

fn veth(a: &Ns, an: &str, b: &Ns, bn: &str, b_mac: Option<String>) -> anyhow::Result<()> {
    let mut args = vec![
        "link", "add", an, "netns", &a.0, "type", "veth", "peer", "name", bn, "netns", &b.0,
    ];
    if let Some(m) = b_mac.as_deref() {
        args.extend(["address", m]);
    }
    run("ip", &args).map(|_| ())
}

fn lab(rate_mbit: u64) -> anyhow::Result<Lab> {
    let tag = format!("fare-el{}", std::process::id());
    let gen = Ns::new(format!("{tag}-g"))?;
    let router = Ns::new(format!("{tag}-r"))?;
    let mid = Ns::new(format!("{tag}-m"))?;
    let dest = Ns::new(format!("{tag}-d"))?;
    // Before any link exists, so that every interface inherits it: packets of one flow
    // arrive on any of four interfaces while replies leave through the first.
    for ns in [&router, &mid, &dest] {
        ns.sh(NO_RP_FILTER)?;
    }
    veth(&gen, "g0", &router, "r0", None)?;
    // Full checksums from the sender: an XDP-redirected frame loses the skb's "checksum
    // to be filled in later" mark, so a partial checksum would arrive as a bad one.
    gen.sh("ip link set g0 up && ip addr add 10.0.0.1/24 dev g0 && \
         ip route add 198.18.0.0/16 via 10.0.0.254 && ethtool -K g0 tx off >/dev/null")?;
    router.sh(
        "ip link set r0 up && ip addr add 10.0.0.254/24 dev r0 && ethtool -K r0 gro on >/dev/null && \
         sysctl -qw net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=1",
    )?;
    mid.sh("sysctl -qw net.ipv4.ip_forward=1")?;
    dest.sh("ip addr add 198.18.0.1/32 dev lo")?;
    let mut group = Vec::new();
    for i in 1..=PATHS {
        let (e, d, m, f) = (
            format!("e{i}"),
            format!("d{i}"),
            format!("m{i}"),
            format!("f{i}"),
        );
        let mac = MacAddr(dest_mac(i)).to_string();
        veth(&router, &e, &mid, &d, Some(mac.clone()))?;
        veth(&mid, &m, &dest, &f, None)?;
        // GRO gives d{i} NAPI, so it accepts XDP-redirected frames. Path i continues through
        // the kernel of `mid` (its own routing table) and out of m{i}, whose token bucket
        // is the path's capacity for both data paths (XDP-redirected frames skip the
        // router's own egress qdiscs, and this kernel has no tc policer).
        mid.sh(&format!(
            "ip link set {d} up && ip addr add 10.1.{i}.1/24 dev {d} && \
             ethtool -K {d} gro on >/dev/null && \
             ip link set {m} up && ip addr add 10.2.{i}.254/24 dev {m} && \
             tc qdisc add dev {m} root tbf rate {rate_mbit}mbit burst 16k latency 20ms && \
             ip rule add iif {d} table {t} && \
             ip route add 198.18.0.0/16 via 10.2.{i}.1 dev {m} table {t}",
            t = 100 + i
        ))?;
        dest.sh(&format!(
            "ip link set {f} up && ip addr add 10.2.{i}.1/24 dev {f}"
        ))?;
        router.sh(&format!(
            "ip link set {e} up && ip addr add 10.1.{i}.254/24 dev {e} && \
             ip neigh replace 10.1.{i}.1 lladdr {mac} dev {e} nud permanent && \
             ip nexthop add id {i} via 10.1.{i}.1 dev {e}"
        ))?;
        group.push(i.to_string());
    }
    router.sh(&format!(
        "ip nexthop add id 100 group {} && ip route add 198.18.0.0/16 nhid 100",
        group.join("/")
    ))?;
    mid.sh("ip route add 10.0.0.0/24 via 10.1.1.254 dev d1")?;
    dest.sh("ip route add 10.0.0.0/24 via 10.2.1.254 dev f1")?;
    let mut servers = Vec::new();
    for p in 0..PATHS {
        servers.push(
            Command::new("ip")
                .args(["netns", "exec", &dest.0, "iperf3", "-s", "-B", "198.18.0.1"])
                .args(["-p", &(5201 + p).to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("starting iperf3 (scripts/setup installs it)")?,
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    Ok(Lab {
        gen,
        router,
        mid,
        _dest: dest,
        servers,
    })
}

/// Packets that entered each path (received by `mid` on d1..d4).
fn rx_packets(lab: &Lab) -> anyhow::Result<Vec<u64>> {
    (1..=PATHS)
        .map(|i| {
            let v = lab
                .mid
                .sh(&format!("cat /sys/class/net/d{i}/statistics/rx_packets"))?;
            Ok(v.trim().parse()?)
        })
        .collect()
}

/// One run of four flows: (delivered Mbit/s in total, packets offered per path).
fn flows(lab: &Lab, ports: &[u16], args: &Args) -> anyhow::Result<(f64, Vec<u64>)> {
    let before = rx_packets(lab)?;
    let clients: Vec<Child> = ports
        .iter()
        .enumerate()
        .map(|(p, cport)| {
            Command::new("ip")
                .args(["netns", "exec", &lab.gen.0, "iperf3", "-J", "-u"])
                .args(["-c", "198.18.0.1", "-p", &(5201 + p).to_string()])
                .args(["-b", &format!("{}M", args.rate_mbit), "-l", "1000"])
                .args(["-t", &args.seconds.to_string()])
                .args(["--cport", &cport.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .context("starting iperf3")
        })
        .collect::<anyhow::Result<_>>()?;
    let mut delivered = 0.0;
    for c in clients {
        let out = c.wait_with_output()?;
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("iperf3 JSON output")?;
        if let Some(e) = v["error"].as_str() {
            bail!("iperf3: {e}");
        }
        let sum = &v["end"]["sum"];
        let bps = sum["bits_per_second"].as_f64().context("iperf3: no rate")?;
        let lost = sum["lost_percent"].as_f64().unwrap_or(0.0);
        delivered += bps * (1.0 - lost / 100.0) / 1e6;
    }
    let after = rx_packets(lab)?;
    Ok((
        delivered,
        after.iter().zip(&before).map(|(a, b)| a - b).collect(),
    ))
}

fn spray_group() -> anyhow::Result<Group> {
    Ok(Group {
        prefix: "198.18.0.0/16".parse()?,
        mode: GroupMode::Spray,
        members: (1..=PATHS)
            .map(|i| Member {
                via: format!("10.1.{i}.1"),
                interface: format!("e{i}"),
                next_hop: None,
                neighbor_mac: Some(MacAddr(dest_mac(i))),
                weight: 1,
                bandwidth_gbps: 0.0,
            })
            .collect(),
    })
}

/// Runs `f` while fare's XDP program with the spray group is attached to r0.
fn with_xdp<T>(lab: &Lab, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let router = lab.router.0.clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<()>>();
    let holder = std::thread::spawn(move || -> anyhow::Result<()> {
        enter(&router)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let _guard = rt.enter();
        let opened = (|| -> anyhow::Result<XdpDataplane> {
            let mut dp = XdpDataplane::open(&XdpOptions::new(
                format!("bench-{router}"),
                vec!["r0".into()],
            ))?;
            rt.block_on(dp.install(&spray_group()?))?;
            Ok(dp)
        })();
        match opened {
            Ok(dp) => {
                let _ = ready_tx.send(Ok(()));
                let _ = done_rx.recv_timeout(Duration::from_secs(3600));
                tracing::debug!(stats = ?dp.stats(), "xdp program counters");
                dp.destroy()?;
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
            }
        }
        Ok(())
    });
    ready_rx.recv()??;
    let out = f();
    let _ = done_tx.send(());
    holder
        .join()
        .map_err(|_| anyhow::anyhow!("XDP holder panicked"))??;
    out
}

/// max / mean of the per-path offered packets (1.0 = perfectly even).
fn imbalance(per_path: &[u64]) -> f64 {
    let mean = per_path.iter().sum::<u64>() as f64 / per_path.len() as f64;
    let max = per_path.iter().copied().max().unwrap_or(0) as f64;
    if mean > 0.0 {
        max / mean
    } else {
        f64::NAN
    }
}

pub fn run_bench(args: Args) -> anyhow::Result<String> {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    let lab = lab(args.rate_mbit)?;
    let ideal = (PATHS as u64 * args.rate_mbit) as f64;
    let mut rng = Rng::new(0x00e1_e9a7);
    let mut rows = Vec::new();
    for seed in 0..args.seeds {
        let mut ports: Vec<u16> = Vec::new();
        while ports.len() < PATHS {
            let p = 20_000 + rng.below(40_000) as u16;
            if !ports.contains(&p) {
                ports.push(p);
            }
        }
        let (k, kpaths) = flows(&lab, &ports, &args)?;
        let (x, xpaths) = with_xdp(&lab, || flows(&lab, &ports, &args))?;
        eprintln!(
            "seed {seed}: kernel {:.1}/{ideal} Mbit/s paths {kpaths:?}; XDP spray {:.1} paths {xpaths:?}",
            k, x
        );
        rows.push((k / ideal, x / ideal, imbalance(&kpaths), imbalance(&xpaths)));
    }
    let n = rows.len().max(1) as f64;
    let mean = |f: fn(&(f64, f64, f64, f64)) -> f64| rows.iter().map(f).sum::<f64>() / n;
    let min =
        |f: fn(&(f64, f64, f64, f64)) -> f64| rows.iter().map(f).fold(f64::INFINITY, f64::min);
    let (k_mean, x_mean) = (mean(|r| r.0), mean(|r| r.1));
    let mut md = format!(
        "## Elephant flows: kernel flow-hash ECMP vs XDP spray (`elephant`)\n\n\
         Command: `{}` (as root)\n\n\
         Four iperf3 UDP flows of {rate} Mbit/s each (1000-byte datagrams, {secs} s) over four \
         equal paths, each limited to {rate} Mbit/s by a token bucket (tbf) behind the router (ideal \
         aggregate {ideal} Mbit/s). Kernel: nexthop group of 4 equal next hops, L4 hash \
         (`fib_multipath_hash_policy=1`). XDP: fare's program, the same group in spray mode. \
         Same namespaces, same run; {seeds} seeds (each seed = four client ports). Throughput \
         = what the iperf3 servers received; imbalance = max / mean of the packets offered \
         per path (1.00 = even). Load average at start: {}.\n\n\
         | data path | throughput / ideal, mean | min over seeds | path imbalance, mean |\n\
         |---|---|---|---|\n",
        command_line(),
        load.join(" "),
        rate = args.rate_mbit,
        secs = args.seconds,
        seeds = args.seeds,
    );
    md.push_str(&format!(
        "| Linux kernel, flow-hash ECMP | {:.3} | {:.3} | {:.2} |\n",
        k_mean,
        min(|r| r.0),
        mean(|r| r.2)
    ));
    md.push_str(&format!(
        "| fare XDP, spray | {:.3} | {:.3} | {:.2} |\n",
        x_mean,
        min(|r| r.1),
        mean(|r| r.3)
    ));
    md.push_str(&format!(
        "\nXDP spray / kernel ECMP aggregate throughput: x{:.2}. For reference, uniform random \
         placement of 4 flows on 4 paths uses 2.73 paths on average (expected fraction 0.68).\n",
        x_mean / k_mean.max(f64::MIN_POSITIVE)
    ));
    Ok(md)
}
