//! BGP benchmarks in network namespaces, written to the `bgp` section of bench/RESULTS.md:
//!
//! 1. Ingest: a generator session (fare's codec over a plain TCP socket) sends PREFIXES
//!    IPv4 /24s carrying the FARE Path Bandwidth community (a different value every UPDATE,
//!    so no two UPDATEs share attributes) to fare's speaker and, in the same run, to FRR
//!    bgpd. Time from the first UPDATE byte to: fare — the last prefix's WCMP group
//!    computed; FRR — `pfxRcd` reaching PREFIXES (polled every 100 ms). Memory: growth of
//!    the receiver's peak RSS (VmHWM) over its RSS before the feed.
//! 2. Convergence: a 2-spine / 3-leaf fabric of fare speakers (real eBGP sessions over
//!    veths); one leaf-spine link is taken down (ioctl, timestamped just before) TRIALS
//!    times; the time to the last group update on any node, median and p99.
//!
//! Root; FRR is skipped (with the reason) when bgpd is absent.
//!
//!   cargo run --release -p fare-integration --bin bgp-bench -- [PREFIXES] [TRIALS] [--no-write]

use anyhow::{bail, ensure, Context, Result};
use fare::bench::results;
use fare::bgp::packet::{update, Capability, Message, Open, Origin, PathAttributes, PathBandwidth};
use fare::bgp::packet::{AsPath, Context as Ctx};
use fare::bgp::speaker::{self, SpeakerEvent};
use fare_integration::bgp::{
    config, pair, read_message, spawn_in_netns, wait_for, FareSpeaker, Frr, SpeakerFabric,
};
use fare_integration::{have_tool, repo_root, Netns};
use ipnet::{IpNet, Ipv4Net};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Ipv4Addr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const GEN_AS: u32 = 65100;
const RECV_AS: u32 = 65001;

/// The whole feed, encoded once: UPDATEs of up to 4096 octets, each with its own
/// Path Bandwidth value.
fn feed(prefixes: usize) -> Vec<u8> {
    let nets: Vec<IpNet> = (0..prefixes as u32)
        .map(|i| {
            // /24s from 16.0.0.0 upward (16 /8s hold 1,048,576 of them).
            let a = Ipv4Addr::from((16u32 << 24) + (i << 8));
            IpNet::V4(Ipv4Net::new(a, 24).expect("valid /24"))
        })
        .collect();
    let ctx = Ctx::default();
    let mut out = Vec::with_capacity(prefixes * 4 + prefixes / 100 * 64);
    for (i, chunk) in nets.chunks(900).enumerate() {
        let bw = PathBandwidth::new(true, Ipv4Addr::new(10, 255, 0, 100), 100.0 + i as f64);
        let attrs = PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence(vec![GEN_AS])),
            next_hop: Some(Ipv4Addr::new(10, 0, 0, 1)),
            ext_communities: vec![bw.to_community(
                fare::bgp::packet::community::DEFAULT_PATH_BANDWIDTH_SUBTYPE,
                Default::default(),
            )],
            ..Default::default()
        };
        for u in update::pack(&attrs, chunk, ctx) {
            out.extend_from_slice(&Message::Update(u).encode(ctx));
        }
    }
    out
}

/// Opens a session from namespace `ns` to 10.0.0.2 (hold time 0: no keepalives needed),
/// then returns the socket and the instant the feed starts; a thread drains the receiver.
fn session(ns: &Netns) -> Result<TcpStream> {
    let path = format!("/var/run/netns/{}", ns.name);
    let mut s = std::thread::spawn(move || -> Result<TcpStream> {
        let f = std::fs::File::open(&path)?;
        // SAFETY: plain syscall on a valid fd; only this thread's namespace changes.
        let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
        ensure!(rc == 0, "setns: {}", std::io::Error::last_os_error());
        let mut last = None;
        for _ in 0..100 {
            match TcpStream::connect_timeout(&"10.0.0.2:179".parse()?, Duration::from_secs(2)) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("connect to 10.0.0.2:179: {last:?}")
    })
    .join()
    .map_err(|_| anyhow::anyhow!("connect thread panicked"))??;
    let caps = vec![
        Capability::Multiprotocol { afi: 1, safi: 1 },
        Capability::FourOctetAs(GEN_AS),
    ];
    let open = Open::new(GEN_AS, 0, Ipv4Addr::new(10, 255, 0, 100), caps);
    s.write_all(&Message::Open(open).encode(Ctx::default()))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut got_open = false;
    loop {
        match read_message(&mut s).context("receiver closed during the handshake")? {
            (1, _) => got_open = true,
            (4, _) if got_open => break,
            (3, n) => bail!("receiver sent NOTIFICATION {n:?}"),
            _ => {}
        }
    }
    s.write_all(&Message::Keepalive.encode(Ctx::default()))?;
    s.set_read_timeout(None)?;
    let mut drain = s.try_clone()?;
    std::thread::spawn(move || while read_message(&mut drain).is_some() {});
    Ok(s)
}

struct Ingest {
    seconds: f64,
    peak_growth: u64,
    rss_before: u64,
}

fn ingest_fare(bytes: &[u8], prefixes: usize) -> Result<Ingest> {
    let (g, r) = pair("bbf")?;
    let mut cfg = config("10.255.0.1", RECV_AS, &[("10.0.0.1", GEN_AS, 100.0)], &[]);
    cfg.neighbors[0].passive = true;
    let groups = Arc::new(AtomicU64::new(0));
    let last = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let (cmd_tx, cmd_rx) = std::sync::mpsc::channel();
    let (gc, lc) = (groups.clone(), last.clone());
    let _thread = spawn_in_netns(&r, move || async move {
        let (ev_tx, mut ev_rx) = tokio::sync::mpsc::channel(4096);
        let handle = speaker::start(cfg, ev_tx).await?;
        let _ = cmd_tx.send(handle.commands.clone());
        while let Some(ev) = ev_rx.recv().await {
            if let SpeakerEvent::Group { group: Some(_), .. } = ev {
                gc.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut l) = lc.lock() {
                    *l = Some(Instant::now());
                }
            }
        }
        Ok(())
    });
    let commands = cmd_rx
        .recv_timeout(Duration::from_secs(10))
        .context("fare speaker did not start")?;
    let mut s = session(&g)?;
    std::thread::sleep(Duration::from_millis(200));
    let rss_before = results_rss_kb()? * 1024;
    fare::bench::reset_peak_rss();
    let start = Instant::now();
    s.write_all(bytes)?;
    let done = wait_for(Duration::from_secs(600), || {
        (groups.load(Ordering::Relaxed) >= prefixes as u64).then_some(())
    });
    ensure!(
        done.is_some(),
        "fare computed {} of {prefixes} groups in 600 s",
        groups.load(Ordering::Relaxed)
    );
    let end = last
        .lock()
        .ok()
        .and_then(|l| *l)
        .context("no group event")?;
    let peak = fare::bench::peak_rss_bytes().context("VmHWM")?;
    let _ = commands.blocking_send(speaker::SpeakerCommand::Shutdown);
    Ok(Ingest {
        seconds: (end - start).as_secs_f64(),
        peak_growth: peak.saturating_sub(rss_before),
        rss_before,
    })
}

fn results_rss_kb() -> Result<u64> {
    fare::bench::proc_status_kb("self", "VmRSS:").context("VmRSS")
}

const FRR_CONF: &str = "frr defaults datacenter
hostname bench
log file /dev/null
router bgp 65001
 bgp router-id 10.255.0.2
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.0.0.1 remote-as 65100
 neighbor 10.0.0.1 passive
 address-family ipv4 unicast
 exit-address-family
";

fn ingest_frr(bytes: &[u8], prefixes: usize) -> Result<Ingest> {
    let (g, r) = pair("bbr")?;
    let frr = Frr::start(&r, FRR_CONF)?;
    let pid_file = frr.dir.0.join("bgpd.pid");
    let pid = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&pid_file)
            .ok()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
    })
    .context("bgpd wrote no pid file")?;
    let mut s = session(&g)?;
    std::thread::sleep(Duration::from_millis(200));
    let rss_before = fare::bench::proc_status_kb(&pid, "VmRSS:").context("bgpd VmRSS")? * 1024;
    // Reset bgpd's peak RSS so the growth belongs to the feed.
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    let received = || -> u64 {
        frr.json("show bgp ipv4 unicast summary json")["peers"]["10.0.0.1"]["pfxRcd"]
            .as_u64()
            .unwrap_or(0)
    };
    let start = Instant::now();
    s.write_all(bytes)?;
    let mut n = 0;
    let mut end = start;
    while start.elapsed() < Duration::from_secs(600) {
        n = received();
        end = Instant::now();
        if n >= prefixes as u64 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    ensure!(
        n >= prefixes as u64,
        "FRR received {n} of {prefixes} in 600 s"
    );
    let peak = fare::bench::proc_status_kb(&pid, "VmHWM:").context("bgpd VmHWM")? * 1024;
    drop(s);
    Ok(Ingest {
        seconds: (end - start).as_secs_f64(),
        peak_growth: peak.saturating_sub(rss_before),
        rss_before,
    })
}

/// Sets `ifname` in namespace `ns` down or up with one ioctl; returns the instant just
/// before the call.
fn set_link(ns: &Netns, ifname: &str, up: bool) -> Result<Instant> {
    let path = format!("/var/run/netns/{}", ns.name);
    let name = std::ffi::CString::new(ifname)?;
    std::thread::spawn(move || -> Result<Instant> {
        let f = std::fs::File::open(&path)?;
        // SAFETY: setns, socket and the SIOC[GS]IFFLAGS ioctls on a zeroed ifreq whose name
        // is NUL-terminated and shorter than IFNAMSIZ; the socket is closed below.
        unsafe {
            ensure!(
                libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) == 0,
                "setns"
            );
            let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
            ensure!(sock >= 0, "socket");
            let mut req: libc::ifreq = std::mem::zeroed();
            for (d, s) in req.ifr_name.iter_mut().zip(name.as_bytes_with_nul()) {
                *d = *s as libc::c_char;
            }
            let rc = libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req);
            ensure!(rc == 0, "SIOCGIFFLAGS: {}", std::io::Error::last_os_error());
            let flags = req.ifr_ifru.ifru_flags;
            req.ifr_ifru.ifru_flags = if up {
                flags | libc::IFF_UP as libc::c_short
            } else {
                flags & !(libc::IFF_UP as libc::c_short)
            };
            let at = Instant::now();
            let rc = libc::ioctl(sock, libc::SIOCSIFFLAGS, &req);
            libc::close(sock);
            ensure!(rc == 0, "SIOCSIFFLAGS: {}", std::io::Error::last_os_error());
            Ok(at)
        }
    })
    .join()
    .map_err(|_| anyhow::anyhow!("link thread panicked"))?
}

/// (node, prefix) -> number of members.
fn shape(speakers: &BTreeMap<&str, FareSpeaker>) -> BTreeMap<(String, IpNet), usize> {
    let mut out = BTreeMap::new();
    for (name, s) in speakers {
        if let Ok(o) = s.observed.lock() {
            for (p, g) in &o.groups {
                out.insert((name.to_string(), *p), g.members.len());
            }
        }
    }
    out
}

/// Time of the last group change on any node (absolute).
fn last_change(speakers: &BTreeMap<&str, FareSpeaker>) -> Option<Instant> {
    speakers
        .values()
        .filter_map(|s| {
            let o = s.observed.lock().ok()?;
            o.group_changes.last().map(|(d, _)| s.started + *d)
        })
        .max()
}

/// Link-down-to-last-group-update times (ms), and how often the fabric needed more than
/// 30 s (and a link bounce) to come back after the link came up.
fn convergence(trials: usize) -> Result<(Vec<f64>, usize)> {
    let fabric = SpeakerFabric::start("bc")?;
    let (ns, speakers) = (&fabric.ns, &fabric.speakers);
    // Full fabric: every leaf has 2-member groups to the other two leaves' prefixes,
    // every spine a 1-member group to each leaf prefix.
    let full = |s: &BTreeMap<(String, IpNet), usize>| {
        s.len() == 12
            && s.iter()
                .all(|((n, _), m)| *m == if n.starts_with('L') { 2 } else { 1 })
    };
    // L1-S1 down: L1 reaches L2/L3 through S2 only, L2/L3 reach L1 through S2 only, S1
    // has no route to L1.
    let failed = |s: &BTreeMap<(String, IpNet), usize>| {
        let l1: IpNet = "10.1.1.0/24".parse().expect("prefix");
        s.len() == 11
            && !s.contains_key(&("S1".to_string(), l1))
            && ["L1", "L2", "L3"].iter().all(|leaf| {
                s.iter()
                    .filter(|((n, p), _)| n == leaf && (*leaf == "L1" || *p == l1))
                    .all(|(_, m)| *m == 1)
            })
    };
    ensure!(
        wait_for(Duration::from_secs(60), || full(&shape(speakers))
            .then_some(()))
        .is_some(),
        "fabric never converged: {:?}",
        shape(speakers)
    );
    let mut times = Vec::new();
    let mut slow_recoveries = 0;
    for trial in 0..trials {
        std::thread::sleep(Duration::from_millis(300));
        let at = set_link(&ns["L1"], "l1s1", false)?;
        let ok = wait_for(Duration::from_secs(10), || {
            failed(&shape(speakers)).then_some(())
        });
        ensure!(
            ok.is_some(),
            "trial {trial}: no convergence after link down: {:?}",
            shape(speakers)
        );
        // Let stragglers land (a later update would count).
        std::thread::sleep(Duration::from_millis(200));
        let last = last_change(speakers).context("no group change")?;
        times.push(last.saturating_duration_since(at).as_secs_f64() * 1000.0);
        set_link(&ns["L1"], "l1s1", true)?;
        // Recovery is not what is measured, but it must happen before the next trial; a
        // session that does not come back within 30 s is counted and the link bounced.
        let mut back = false;
        for _ in 0..3 {
            if wait_for(Duration::from_secs(30), || {
                full(&shape(speakers)).then_some(())
            })
            .is_some()
            {
                back = true;
                break;
            }
            slow_recoveries += 1;
            eprintln!("trial {trial}: fabric not back after 30 s, bouncing the link");
            set_link(&ns["L1"], "l1s1", false)?;
            std::thread::sleep(Duration::from_millis(500));
            set_link(&ns["L1"], "l1s1", true)?;
        }
        eprintln!("trial {trial}: {:.2} ms", times[times.len() - 1]);
        if !back {
            eprintln!("stopping after trial {trial}: the fabric did not come back");
            break;
        }
    }
    drop(fabric);
    Ok((times, slow_recoveries))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let no_write = args.iter().any(|a| a == "--no-write");
    args.retain(|a| a != "--no-write");
    let prefixes: usize = args
        .first()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let trials: usize = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(50);
    if !fare_integration::have_root("bgp-bench") {
        return Ok(());
    }
    let load_start = load_average();
    let bytes = feed(prefixes);
    eprintln!("feed: {prefixes} prefixes, {} bytes", bytes.len());
    let fare = ingest_fare(&bytes, prefixes)?;
    eprintln!("fare: {:.2} s", fare.seconds);
    let frr = if have_tool("bgp-bench (FRR ingest)", "/usr/lib/frr/bgpd")
        && have_tool("bgp-bench (FRR ingest)", "vtysh")
    {
        let r = ingest_frr(&bytes, prefixes)?;
        eprintln!("FRR: {:.2} s", r.seconds);
        Some(r)
    } else {
        None
    };
    // A failure here must not lose the ingest numbers: it is reported in the section.
    let (mut times, slow_recoveries, conv_error) = match convergence(trials) {
        Ok((t, s)) => (t, s, None),
        Err(e) => (vec![], 0, Some(format!("{e:#}"))),
    };
    times.sort_by(f64::total_cmp);
    let load_end = load_average();
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let mut md = format!(
        "## BGP ingest and convergence (`bgp`)\n\n\
         Command: `cargo run --release -p fare-integration --bin bgp-bench -- {prefixes} {trials}` (root)\n\n\
         Load average (1/5/15 min) at start: {load_start}; at end: {load_end} (2 cores, shared).\n\n\
         **Ingest.** One generator session (fare's codec over a plain TCP socket, hold time 0) \
         sends {prefixes} IPv4 /24s with the FARE Path Bandwidth community, 900 prefixes per \
         attribute set (a different bandwidth each), {:.1} MB of UPDATEs, to each receiver in \
         its own namespace pair, one after the other in the same run. fare: in-process speaker, \
         time to the last prefix's WCMP group; FRR bgpd (standalone, no zebra): time until \
         `pfxRcd` reaches {prefixes} (vtysh polled every 100 ms, so +-0.1 s). Memory: peak RSS \
         (VmHWM, reset before the feed) minus RSS before the feed.\n\n\
         | receiver | time to ingest | prefixes/s | peak RSS growth | RSS before |\n|---|---|---|---|---|\n",
        bytes.len() as f64 / 1e6
    );
    let row = |name: &str, r: &Ingest| {
        format!(
            "| {name} | {:.2} s | {:.0} | {:.1} MiB | {:.1} MiB |\n",
            r.seconds,
            prefixes as f64 / r.seconds,
            mib(r.peak_growth),
            mib(r.rss_before)
        )
    };
    md.push_str(&row("fare (groups computed)", &fare));
    match &frr {
        Some(f) => {
            md.push_str(&row("FRR bgpd (pfxRcd)", f));
            md.push_str(&format!(
                "\nfare / FRR: time x{:.2}, memory growth x{:.2}.\n",
                fare.seconds / f.seconds,
                fare.peak_growth as f64 / f.peak_growth.max(1) as f64
            ));
        }
        None => md.push_str("\nFRR: not measured (bgpd or vtysh absent).\n"),
    }
    md.push_str(&format!(
        "\n**Convergence.** 2 spines + 3 leaves of fare speakers in namespaces (eBGP over \
         veths, links 100/100/100/50/100/40 G). Each trial sets L1-S1 down on L1 with one \
         ioctl and takes the time from just before it to the last group update on any node \
         (the failed state checked: L1 via S2 only, L2/L3 reach L1 via S2 only, S1 without \
         L1's prefix), then brings the link up and waits for the full fabric again. \
         {} trials: median **{:.2} ms**, p99 {:.2} ms, min {:.2} ms, max {:.2} ms. \
         Recoveries after link up that took over 30 s (link bounced to retry): \
         {slow_recoveries}. \
         No FRR baseline here: standalone bgpd (no zebra) sees no interface events and would \
         only notice at hold-timer expiry.\n",
        times.len(),
        percentile(&times, 50.0),
        percentile(&times, 99.0),
        times.first().copied().unwrap_or(f64::NAN),
        times.last().copied().unwrap_or(f64::NAN),
    ));
    if let Some(e) = conv_error {
        md.push_str(&format!("\n**Convergence run failed:** {e}\n"));
    }
    println!("{md}");
    if !no_write {
        let path = repo_root().join("bench/RESULTS.md");
        results::write_section(&path, "bgp", &md)?;
        eprintln!("wrote section `bgp` of {}", path.display());
    }
    Ok(())
}
