//! BGP benchmarks in network namespaces, written to the `bgp` section of bench/RESULTS.md:
//!
//! 1. Ingest: the same generator (fare's codec over plain TCP sockets) feeds IPv4 /24s
//!    carrying the FARE Path Bandwidth community to fare's speaker, BIRD 2, GoBGP and FRR
//!    bgpd, one after the other in the same run: one session of PREFIXES, then PEERS
//!    sessions of PREFIXES/PEERS distinct prefixes each, sent at once. Time from the first
//!    UPDATE byte to the last prefix in the receiver's RIB (fare: its WCMP group computed;
//!    the daemons: their CLI count, polled); memory: growth of the receiver's peak RSS
//!    (VmHWM) over its RSS before the feed.
//! 2. Churn: after the one-session ingest, WAVES waves of 100k withdrawals and the same
//!    prefixes announced again; time until the receiver's count reflects each.
//! 3. Convergence: a 2-spine / 3-leaf fabric of fare speakers (real eBGP sessions over
//!    veths); one leaf-spine link is taken down (ioctl, timestamped just before) TRIALS
//!    times; the time to the last group update on any node, median and p99.
//!
//! Root; a daemon whose tools are absent is skipped, and the section says so.
//!
//!   cargo run --release -p fare-integration --bin bgp-bench -- [--prefixes N] [--peers P]
//!       [--waves W] [--trials T] [--receivers fare,bird,gobgp,frr] [--no-write]

use anyhow::{bail, ensure, Context, Result};
use fare::bench::results;
use fare::bgp::packet::{update, Capability, Message, Open, Origin, PathAttributes, PathBandwidth};
use fare::bgp::packet::{AsPath, Context as Ctx};
use fare::bgp::speaker::{self, GroupRun, SpeakerEvent};
use fare_integration::bgp::{
    config, pair, read_message, spawn_in_netns, wait_for, Daemon, FareSpeaker, Frr, SpeakerFabric,
};
use fare_integration::{have_tool, repo_root, Netns};
use ipnet::{IpNet, Ipv4Net};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Ipv4Addr, TcpStream};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every generator session comes from AS 65100, from 10.0.1.(i+1), to the receiver's
/// 10.0.1.254. fare sends no route to a neighbor whose AS is on the route's path, so it
/// exports nothing; the other receivers are configured to export nothing.
const GEN_AS: u32 = 65100;
const RECV_AS: u32 = 65001;
const RECV_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 254);
/// Prefixes per churn wave.
const WAVE: u32 = 100_000;
/// How often GoBGP's and FRR's CLIs are asked for their count (each ask starts a
/// client process; their ingests take seconds).
const POLL: Duration = Duration::from_millis(100);
/// How often BIRD is asked, over its control socket without a client process (its
/// ingest takes a fraction of a second: asked every 100 ms it would look up to 100 ms
/// slower than it is).
const POLL_BIRD: Duration = Duration::from_millis(10);
/// Longest wait for one ingest or churn step.
const STEP_LIMIT: Duration = Duration::from_secs(900);

fn gen_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 1, i as u8 + 1)
}

/// /24 number `i`, from 16.0.0.0 upward (16 /8s hold 1,048,576 of them).
fn net(i: u32) -> IpNet {
    IpNet::V4(Ipv4Net::new(Ipv4Addr::from((16u32 << 24) + (i << 8)), 24).expect("valid /24"))
}

/// UPDATEs (up to 4096 octets) announcing /24s `first..first + count` with next hop
/// `next_hop`, 900 prefixes per attribute set, each set with its own Path Bandwidth value.
fn announce(first: u32, count: u32, next_hop: Ipv4Addr) -> Vec<u8> {
    let nets: Vec<IpNet> = (first..first + count).map(net).collect();
    let ctx = Ctx::default();
    let mut out = Vec::with_capacity(count as usize * 4 + count as usize / 100 * 64);
    for (i, chunk) in nets.chunks(900).enumerate() {
        let set = first as usize / 900 + i;
        let bw = PathBandwidth::new(true, Ipv4Addr::new(10, 255, 0, 100), 100.0 + set as f64);
        let attrs = PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence(vec![GEN_AS])),
            next_hop: Some(next_hop),
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

/// UPDATEs withdrawing /24s `first..first + count`.
fn withdraw(first: u32, count: u32) -> Vec<u8> {
    let nets: Vec<IpNet> = (first..first + count).map(net).collect();
    update::pack_withdraw(&nets)
        .into_iter()
        .flat_map(|u| Message::Update(u).encode(Ctx::default()))
        .collect()
}

/// Opens generator session `i` from namespace `ns` (source 10.0.1.(i+1), hold time 0: no
/// keepalives needed) to the receiver and completes the handshake; a thread drains what
/// the receiver sends.
fn session(ns: &Netns, i: usize) -> Result<TcpStream> {
    let path = format!("/var/run/netns/{}", ns.name);
    let src = gen_addr(i);
    let mut s = std::thread::spawn(move || -> Result<TcpStream> {
        let f = std::fs::File::open(&path)?;
        // SAFETY: plain syscall on a valid fd; only this thread's namespace changes.
        let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
        ensure!(rc == 0, "setns: {}", std::io::Error::last_os_error());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut last = None;
        for _ in 0..100 {
            let attempt = rt.block_on(async {
                let sock = tokio::net::TcpSocket::new_v4()?;
                sock.bind((src, 0).into())?;
                tokio::time::timeout(
                    Duration::from_secs(2),
                    sock.connect((RECV_ADDR, 179).into()),
                )
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
            });
            match attempt {
                Ok(s) => {
                    let s = s.into_std()?;
                    s.set_nonblocking(false)?;
                    return Ok(s);
                }
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("connect {src} -> {RECV_ADDR}:179: {last:?}")
    })
    .join()
    .map_err(|_| anyhow::anyhow!("connect thread panicked"))??;
    let caps = vec![
        Capability::Multiprotocol { afi: 1, safi: 1 },
        Capability::FourOctetAs(GEN_AS),
    ];
    let rid = Ipv4Addr::new(10, 255, 0, 100 + i as u8);
    let open = Open::new(GEN_AS, 0, rid, caps);
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

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Fare,
    Bird,
    Gobgp,
    Frr,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Fare => "fare",
            Kind::Bird => "BIRD",
            Kind::Gobgp => "GoBGP",
            Kind::Frr => "FRR",
        }
    }
    fn what(self) -> &'static str {
        match self {
            Kind::Fare => "fare speaker, in-process (WCMP groups computed)",
            Kind::Bird => {
                "BIRD 2 `bird` (routes imported, `show protocols all` on its control socket)"
            }
            Kind::Gobgp => "GoBGP `gobgpd` (destinations, `gobgp global rib summary`)",
            Kind::Frr => "FRR `bgpd`, no zebra (`pfxRcd`, vtysh)",
        }
    }
    /// Why it cannot run here, if it cannot.
    fn missing(self) -> Option<String> {
        let tools: &[&str] = match self {
            Kind::Fare => &[],
            Kind::Bird => &["bird", "birdc"],
            Kind::Gobgp => &["gobgpd", "gobgp"],
            Kind::Frr => &["/usr/lib/frr/bgpd", "vtysh"],
        };
        tools
            .iter()
            .find(|t| !have_tool(&format!("bgp-bench ({})", self.name()), t))
            .map(|t| format!("{t} not found"))
    }
}

/// A receiver under test, running in its namespace.
struct Receiver {
    /// /proc entry of the process whose memory is measured ("self" for fare, in-process).
    pid: String,
    /// /proc entry whose CPU time is counted (fare: the speaker's thread).
    cpu: String,
    /// Prefixes in the receiver's RIB now (fare: groups installed).
    count: Box<dyn Fn() -> u64>,
    /// The receiver's own time of its last change, when it reports one (fare's group
    /// events); otherwise the poll that saw the count is the time.
    last_change: Box<dyn Fn() -> Option<Instant>>,
    /// How often `count` is asked.
    poll: Duration,
    _keep: Vec<Box<dyn std::any::Any>>,
}

/// A directory removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> Result<TempDir> {
        let p = std::env::temp_dir().join(format!("fare-bgp-bench-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Sends the speaker Shutdown on drop.
struct FareStop(tokio::sync::mpsc::Sender<speaker::SpeakerCommand>);

impl Drop for FareStop {
    fn drop(&mut self) {
        let _ = self.0.blocking_send(speaker::SpeakerCommand::Shutdown);
    }
}

fn start_fare(ns: &Netns, peers: usize) -> Result<Receiver> {
    let addrs: Vec<String> = (0..peers).map(|i| gen_addr(i).to_string()).collect();
    let list: Vec<(&str, u32, f64)> = addrs.iter().map(|a| (a.as_str(), GEN_AS, 100.0)).collect();
    let mut cfg = config("10.255.0.1", RECV_AS, &list, &[]);
    for n in &mut cfg.neighbors {
        n.passive = true;
    }
    let installed = Arc::new(AtomicU64::new(0));
    let removed = Arc::new(AtomicU64::new(0));
    let last = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let (tx, rx) = std::sync::mpsc::channel();
    let (i, r, l) = (installed.clone(), removed.clone(), last.clone());
    let thread = spawn_in_netns(ns, move || async move {
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        let (ev_tx, mut ev_rx) = tokio::sync::mpsc::channel(4096);
        let handle = speaker::start(cfg, ev_tx).await?;
        let _ = tx.send((handle.commands.clone(), tid));
        // Every prefix of a run counts: the speaker computed its group (the run's
        // members), or removed it.
        let count = |ev: SpeakerEvent| {
            match ev {
                SpeakerEvent::Groups(runs) => {
                    for run in &runs {
                        let counter = match run {
                            GroupRun::Install { .. } => &i,
                            GroupRun::Remove(_) => &r,
                        };
                        counter.fetch_add(run.prefixes().len() as u64, Ordering::Relaxed);
                    }
                }
                SpeakerEvent::ColoredGroup { .. } => {
                    i.fetch_add(1, Ordering::Relaxed);
                }
                _ => return false,
            }
            true
        };
        while let Some(ev) = ev_rx.recv().await {
            // What is queued behind it too, then one clock read for the batch (the
            // instant of its last event): a read per event (with its lock) was 4 % of
            // perf's samples of this bench, all charged to the speaker's thread.
            let mut counted = count(ev);
            while let Ok(ev) = ev_rx.try_recv() {
                counted |= count(ev);
            }
            if counted {
                if let Ok(mut l) = l.lock() {
                    *l = Some(Instant::now());
                }
            }
        }
        Ok(())
    });
    let (commands, tid) = rx
        .recv_timeout(Duration::from_secs(10))
        .context("fare speaker did not start")?;
    Ok(Receiver {
        pid: "self".into(),
        cpu: format!("self/task/{tid}"),
        count: Box::new(move || {
            installed
                .load(Ordering::Relaxed)
                .saturating_sub(removed.load(Ordering::Relaxed))
        }),
        last_change: Box::new(move || last.lock().ok().and_then(|l| *l)),
        poll: POLL,
        // The speaker's thread ends with the namespace; it is not joined.
        _keep: vec![Box::new(FareStop(commands)), Box::new(thread)],
    })
}

fn bird_conf(peers: usize) -> String {
    let mut c = String::from(
        "router id 10.255.0.1;\nlog stderr { warning, error, fatal };\nprotocol device { }\n",
    );
    for i in 0..peers {
        c.push_str(&format!(
            "protocol bgp g{i} {{\n  local {RECV_ADDR} as {RECV_AS};\n  neighbor {} as {GEN_AS};\n  \
             passive on;\n  ipv4 {{ import all; export none; }};\n}}\n",
            gen_addr(i)
        ));
    }
    c
}

/// Standard output of `cmd ARGS...` run in namespace `ns` (empty when it cannot run: the
/// pollers below read a count from it and try again). Owned name, so the receivers' count
/// closures can keep it after the `Netns` value is borrowed elsewhere.
fn stdout_in(ns: &str, cmd: &str, args: &[&str]) -> String {
    std::process::Command::new("ip")
        .args(["netns", "exec", ns, cmd])
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Sum of "N imported" over the BGP protocols of `birdc show protocols all`.
fn bird_imported(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Routes:"))
        .filter_map(|r| r.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// BIRD's reply to `cmd` on its control socket (what `birdc` does, without starting a
/// process): reply lines start with a 4-digit code and '-' (more follow) or ' ' (the
/// last), or with a space (continuation); the text after the code is returned.
fn bird_ask(sock: &std::path::Path, cmd: &str) -> Result<String> {
    use std::io::{BufRead, BufReader};
    let mut s = std::os::unix::net::UnixStream::connect(sock)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut r = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    // The greeting ("0001 BIRD ... ready.").
    r.read_line(&mut line)?;
    s.write_all(format!("{cmd}\n").as_bytes())?;
    let mut out = String::new();
    for _ in 0..100_000 {
        line.clear();
        ensure!(
            r.read_line(&mut line)? > 0,
            "BIRD closed the control socket"
        );
        let b = line.as_bytes();
        let coded = b.len() >= 5 && b[..4].iter().all(u8::is_ascii_digit);
        out.push_str(if coded { &line[5..] } else { &line });
        if coded && b[4] == b' ' {
            return Ok(out);
        }
    }
    bail!("BIRD: no end of the reply to {cmd}")
}

fn start_bird(ns: &Netns, peers: usize, dir: &TempDir) -> Result<Receiver> {
    let conf = dir.0.join("bird.conf");
    std::fs::write(&conf, bird_conf(peers))?;
    let sock = dir.0.join("bird.ctl").to_string_lossy().into_owned();
    let child = ns
        .command("bird")
        .args(["-f", "-c", &conf.to_string_lossy(), "-s", &sock])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting bird")?;
    let pid = child.id().to_string();
    let daemon = Daemon(child);
    let ns_name = ns.name.clone();
    let sock_path = std::path::PathBuf::from(&sock);
    let birdc = move |cmd: &str| stdout_in(&ns_name, "birdc", &["-s", &sock, cmd]);
    wait_for(Duration::from_secs(10), || {
        birdc("show status").contains("Daemon is up").then_some(())
    })
    .context("BIRD did not come up")?;
    Ok(Receiver {
        cpu: pid.clone(),
        pid,
        count: Box::new(move || {
            bird_imported(&bird_ask(&sock_path, "show protocols all").unwrap_or_default())
        }),
        last_change: Box::new(|| None),
        poll: POLL_BIRD,
        _keep: vec![Box::new(daemon)],
    })
}

fn gobgp_conf(peers: usize) -> String {
    let mut c = format!(
        "[global.config]\n  as = {RECV_AS}\n  router-id = \"10.255.0.1\"\n  \
         local-address-list = [\"{RECV_ADDR}\"]\n\
         [global.apply-policy.config]\n  default-export-policy = \"reject-route\"\n"
    );
    for i in 0..peers {
        c.push_str(&format!(
            "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = \"{}\"\n    \
             peer-as = {GEN_AS}\n  [neighbors.transport.config]\n    passive-mode = true\n  \
             [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      \
             afi-safi-name = \"ipv4-unicast\"\n",
            gen_addr(i)
        ));
    }
    c
}

/// "Destination: N" of `gobgp global rib summary`.
fn gobgp_destinations(text: &str) -> u64 {
    text.split("Destination:")
        .nth(1)
        .and_then(|r| {
            r.trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn start_gobgp(ns: &Netns, peers: usize, dir: &TempDir) -> Result<Receiver> {
    let conf = dir.0.join("gobgpd.toml");
    std::fs::write(&conf, gobgp_conf(peers))?;
    let child = ns
        .command("gobgpd")
        .args([
            "-f",
            &conf.to_string_lossy(),
            "--api-hosts",
            "127.0.0.1:50051",
            "--pprof-disable",
            "--log-level",
            "warn",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting gobgpd")?;
    let pid = child.id().to_string();
    let daemon = Daemon(child);
    let ns_name = ns.name.clone();
    let gobgp = move |args: &[&str]| {
        let mut all = vec!["-u", "127.0.0.1", "-p", "50051"];
        all.extend_from_slice(args);
        stdout_in(&ns_name, "gobgp", &all)
    };
    wait_for(Duration::from_secs(10), || {
        (!gobgp(&["global"]).is_empty()).then_some(())
    })
    .context("gobgpd API did not come up")?;
    Ok(Receiver {
        cpu: pid.clone(),
        pid,
        count: Box::new(move || {
            gobgp_destinations(&gobgp(&["global", "rib", "summary", "-a", "ipv4"]))
        }),
        last_change: Box::new(|| None),
        poll: POLL,
        _keep: vec![Box::new(daemon)],
    })
}

fn frr_conf(peers: usize) -> String {
    let mut c = String::from(
        "frr defaults datacenter\nhostname bench\nlog file /dev/null\n\
         route-map NONE deny 10\n\
         router bgp 65001\n bgp router-id 10.255.0.1\n no bgp ebgp-requires-policy\n \
         no bgp network import-check\n",
    );
    for i in 0..peers {
        let a = gen_addr(i);
        c.push_str(&format!(
            " neighbor {a} remote-as {GEN_AS}\n neighbor {a} passive\n"
        ));
    }
    c.push_str(" address-family ipv4 unicast\n");
    for i in 0..peers {
        c.push_str(&format!("  neighbor {} route-map NONE out\n", gen_addr(i)));
    }
    c.push_str(" exit-address-family\n");
    c
}

fn start_frr(ns: &Netns, peers: usize) -> Result<Receiver> {
    let frr = Frr::start(ns, &frr_conf(peers))?;
    let pid_file = frr.dir.0.join("bgpd.pid");
    let pid = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&pid_file)
            .ok()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
    })
    .context("bgpd wrote no pid file")?;
    let frr = Arc::new(frr);
    let f = frr.clone();
    Ok(Receiver {
        cpu: pid.clone(),
        pid,
        count: Box::new(move || {
            let j = f.json("show bgp ipv4 unicast summary json");
            j["peers"]
                .as_object()
                .map(|p| p.values().filter_map(|v| v["pfxRcd"].as_u64()).sum())
                .unwrap_or(0)
        }),
        last_change: Box::new(|| None),
        poll: POLL,
        _keep: vec![Box::new(frr)],
    })
}

/// Waits until `done(count)`; returns the seconds from `start` to the change (the
/// receiver's own time of it when it reports one, else the poll that saw it).
fn wait_count(r: &Receiver, start: Instant, done: impl Fn(u64) -> bool, what: &str) -> Result<f64> {
    loop {
        let n = (r.count)();
        let seen = Instant::now();
        if done(n) {
            let at = (r.last_change)().filter(|t| *t >= start).unwrap_or(seen);
            return Ok((at - start).as_secs_f64());
        }
        ensure!(
            start.elapsed() < STEP_LIMIT,
            "{what}: count {n} after {} s",
            STEP_LIMIT.as_secs()
        );
        std::thread::sleep(r.poll);
    }
}

struct Run {
    seconds: f64,
    peak_growth: u64,
    /// RSS once every prefix is in, minus RSS before the feed.
    held: u64,
    rss_before: u64,
    cpu_seconds: f64,
    /// Per churn wave: (withdrawal, re-announcement) seconds.
    churn: Vec<(f64, f64)>,
}

/// One receiver, `peers` sessions of `per_peer` distinct prefixes each sent at once, then
/// `waves` churn waves on the first session.
fn run(kind: Kind, peers: usize, per_peer: u32, waves: usize) -> Result<Run> {
    let tag = format!("b{}{peers}", &kind.name()[..2].to_lowercase());
    let (g, r) = pair(&tag)?;
    for i in 0..peers {
        g.sh(&format!("ip addr add {}/24 dev pa0", gen_addr(i)))?;
    }
    r.sh(&format!("ip addr add {RECV_ADDR}/24 dev pb0"))?;
    let feeds: Vec<Vec<u8>> = (0..peers)
        .map(|i| announce(i as u32 * per_peer, per_peer, gen_addr(i)))
        .collect();
    let dir = TempDir::new(&tag)?;
    let rx = match kind {
        Kind::Fare => start_fare(&r, peers)?,
        Kind::Bird => start_bird(&r, peers, &dir)?,
        Kind::Gobgp => start_gobgp(&r, peers, &dir)?,
        Kind::Frr => start_frr(&r, peers)?,
    };
    let mut sessions = (0..peers)
        .map(|i| session(&g, i))
        .collect::<Result<Vec<_>>>()?;
    std::thread::sleep(Duration::from_millis(500));
    let rss_before =
        fare::bench::proc_status_kb(&rx.pid, "VmRSS:").context("receiver VmRSS")? * 1024;
    // Reset the peak RSS so that the growth belongs to the feed.
    let _ = std::fs::write(format!("/proc/{}/clear_refs", rx.pid), "5");
    let cpu_before = fare::bench::cpu_seconds_of(&rx.cpu).unwrap_or(0.0);
    let total = peers as u64 * per_peer as u64;
    let start = Instant::now();
    let writers: Vec<_> = sessions
        .iter()
        .zip(feeds)
        .map(|(s, feed)| {
            let mut s = s.try_clone()?;
            Ok(std::thread::spawn(move || s.write_all(&feed)))
        })
        .collect::<Result<_>>()?;
    let seconds = wait_count(&rx, start, |n| n >= total, "ingest")?;
    for w in writers {
        w.join()
            .map_err(|_| anyhow::anyhow!("writer panicked"))?
            .context("sending the feed")?;
    }
    let peak = fare::bench::proc_status_kb(&rx.pid, "VmHWM:").context("receiver VmHWM")? * 1024;
    let rss_after =
        fare::bench::proc_status_kb(&rx.pid, "VmRSS:").context("receiver VmRSS")? * 1024;
    let cpu_seconds = fare::bench::cpu_seconds_of(&rx.cpu).unwrap_or(0.0) - cpu_before;
    let mut churn = Vec::new();
    for w in 0..waves as u32 {
        let first = w * WAVE;
        ensure!(first + WAVE <= per_peer, "churn wave {w} beyond the feed");
        let gone = withdraw(first, WAVE);
        let back = announce(first, WAVE, gen_addr(0));
        let t = Instant::now();
        sessions[0].write_all(&gone)?;
        let out = wait_count(&rx, t, |n| n + WAVE as u64 <= total, "withdrawal")?;
        let t = Instant::now();
        sessions[0].write_all(&back)?;
        let inn = wait_count(&rx, t, |n| n >= total, "re-announcement")?;
        eprintln!(
            "{} churn wave {w}: withdrawn {out:.2} s, back {inn:.2} s",
            kind.name()
        );
        churn.push((out, inn));
    }
    drop(sessions);
    drop(rx);
    Ok(Run {
        seconds,
        peak_growth: peak.saturating_sub(rss_before),
        held: rss_after.saturating_sub(rss_before),
        rss_before,
        cpu_seconds,
        churn,
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

const USAGE: &str = "usage: bgp-bench [--prefixes N] [--peers P] [--waves W] [--trials T] \
                     [--receivers fare,bird,gobgp,frr] [--no-write]";

struct Args {
    prefixes: u32,
    peers: usize,
    waves: usize,
    trials: usize,
    receivers: Vec<Kind>,
    write: bool,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        prefixes: 1_000_000,
        peers: 10,
        waves: 3,
        trials: 50,
        receivers: vec![Kind::Fare, Kind::Bird, Kind::Gobgp, Kind::Frr],
        write: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--no-write" {
            a.write = false;
            continue;
        }
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a value; {USAGE}"))?;
        let num = || -> Result<u64> {
            value
                .parse()
                .with_context(|| format!("{flag} {value}: not a number; {USAGE}"))
        };
        match flag.as_str() {
            "--prefixes" => a.prefixes = u32::try_from(num()?)?,
            "--peers" => a.peers = num()? as usize,
            "--waves" => a.waves = num()? as usize,
            "--trials" => a.trials = num()? as usize,
            "--receivers" => {
                a.receivers = value
                    .split(',')
                    .map(|r| match r {
                        "fare" => Ok(Kind::Fare),
                        "bird" => Ok(Kind::Bird),
                        "gobgp" => Ok(Kind::Gobgp),
                        "frr" => Ok(Kind::Frr),
                        _ => bail!("unknown receiver {r}; {USAGE}"),
                    })
                    .collect::<Result<_>>()?
            }
            _ => bail!("unknown argument {flag}; {USAGE}"),
        }
    }
    ensure!(
        a.prefixes <= 1 << 20,
        "--prefixes: at most 1048576 /24s fit in 16.0.0.0/4"
    );
    ensure!(
        (1..=100).contains(&a.peers),
        "--peers: 1 to 100 generator sessions"
    );
    ensure!(
        a.waves as u64 * WAVE as u64 <= a.prefixes as u64,
        "--waves: {} waves of {WAVE} need --prefixes of at least that",
        a.waves
    );
    Ok(a)
}

type Measured = Vec<(Kind, Result<Run, String>)>;

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// The ingest table of one scenario, and fare's ratios against each baseline.
fn ingest_table(md: &mut String, runs: &Measured, total: u64) {
    let fare = runs.iter().find_map(|(k, r)| match r {
        Ok(r) if *k == Kind::Fare => Some(r),
        _ => None,
    });
    md.push_str(
        "| receiver | time to last prefix | prefixes/s | time / fare's | peak RSS growth | \
         bytes/prefix | growth / fare's | RSS held after | CPU | RSS before |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (k, r) in runs {
        match r {
            Ok(r) => md.push_str(&format!(
                "| {} | {:.2} s | {:.0} | {} | {:.1} MiB | {:.0} | {} | {:.1} MiB | {:.2} s | {:.1} MiB |\n",
                k.name(),
                r.seconds,
                total as f64 / r.seconds,
                fare.map_or("-".into(), |f| format!("x{:.2}", r.seconds / f.seconds)),
                mib(r.peak_growth),
                r.peak_growth as f64 / total as f64,
                fare.map_or("-".into(), |f| format!(
                    "x{:.2}",
                    r.peak_growth as f64 / f.peak_growth.max(1) as f64
                )),
                mib(r.held),
                r.cpu_seconds,
                mib(r.rss_before),
            )),
            Err(e) => md.push_str(&format!(
                "| {} | failed: {} | | | | | | | | |\n",
                k.name(),
                e.replace('|', "/")
            )),
        }
    }
    if let Some(f) = fare {
        let ratios: Vec<String> = runs
            .iter()
            .filter_map(|(k, r)| match r {
                Ok(r) if *k != Kind::Fare => Some(format!(
                    "fare / {}: time **x{:.2}**, CPU x{:.2}, memory growth **x{:.2}**",
                    k.name(),
                    f.seconds / r.seconds,
                    f.cpu_seconds / r.cpu_seconds.max(0.01),
                    f.peak_growth as f64 / r.peak_growth.max(1) as f64
                )),
                _ => None,
            })
            .collect();
        if !ratios.is_empty() {
            md.push_str(&format!("\n{}.\n", ratios.join("; ")));
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 50.0)
}

fn churn_table(md: &mut String, runs: &Measured) {
    let med = |r: &Run, pick: fn(&(f64, f64)) -> f64| median(r.churn.iter().map(pick).collect());
    let fare = runs.iter().find_map(|(k, r)| match r {
        Ok(r) if *k == Kind::Fare && !r.churn.is_empty() => Some(r),
        _ => None,
    });
    md.push_str(
        "| receiver | 100k withdrawn (median) | 100k back (median) | each wave (withdrawn / back) | \
         median / fare's (withdrawn, back) |\n|---|---|---|---|---|\n",
    );
    for (k, r) in runs {
        let Ok(r) = r else { continue };
        if r.churn.is_empty() {
            continue;
        }
        let waves: Vec<String> = r
            .churn
            .iter()
            .map(|(o, i)| format!("{o:.2} / {i:.2}"))
            .collect();
        let (o, i) = (med(r, |x| x.0), med(r, |x| x.1));
        md.push_str(&format!(
            "| {} | {o:.2} s | {i:.2} s | {} | {} |\n",
            k.name(),
            waves.join(", "),
            fare.map_or("-".into(), |f| format!(
                "x{:.2}, x{:.2}",
                o / med(f, |x| x.0),
                i / med(f, |x| x.1)
            )),
        ));
    }
}

const CONVERGENCE_HISTORY: &str = "Before the link-poll fix (same measurement, an earlier \
session): median 418.82 ms, p99 1262.06 ms, min 0.52 ms. The cause was the kernel's \
link-watch: carrier changes of ordinary devices (NICs, and veths as here) are reported at \
most once a second, so the far end heard of the link loss 0-1 s late, and a down/up inside \
that second produced no event at all. The speaker now asks the driver for the carrier \
(ethtool `ETHTOOL_GLINK` ioctl) every `bgp.link_poll_ms` (default 5 ms) beside the netlink \
events. A slow reconnect path after link-up (recoveries over 30 s) was found and fixed since \
(see `soak`).";

/// fare's receiver runs in a process of its own (this binary, `--fare-child PEERS PER
/// WAVES`), so that each measurement starts from a fresh heap: memory a previous run freed
/// but the allocator kept would otherwise be reused without growing the RSS.
fn run_fare_child(peers: usize, per_peer: u32, waves: usize) -> Result<Run> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args([
            "--fare-child",
            &peers.to_string(),
            &per_peer.to_string(),
            &waves.to_string(),
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("starting the fare receiver process")?;
    ensure!(
        out.status.success(),
        "fare receiver process: {}",
        out.status
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.lines().last().unwrap_or_default())
        .context("fare receiver process: no result line")?;
    let f = |k: &str| {
        v[k].as_f64()
            .with_context(|| format!("fare receiver result: no {k}"))
    };
    Ok(Run {
        seconds: f("seconds")?,
        peak_growth: f("peak_growth")? as u64,
        held: f("held")? as u64,
        rss_before: f("rss_before")? as u64,
        cpu_seconds: f("cpu_seconds")?,
        churn: v["churn"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|w| Some((w[0].as_f64()?, w[1].as_f64()?)))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

fn fare_child(args: &[String]) -> Result<()> {
    let n = |i: usize| -> Result<u64> {
        args.get(i)
            .context("--fare-child PEERS PER WAVES")?
            .parse()
            .context("--fare-child: not a number")
    };
    let r = run(
        Kind::Fare,
        n(0)? as usize,
        u32::try_from(n(1)?)?,
        n(2)? as usize,
    )?;
    println!(
        "{}",
        serde_json::json!({
            "seconds": r.seconds,
            "peak_growth": r.peak_growth,
            "held": r.held,
            "rss_before": r.rss_before,
            "cpu_seconds": r.cpu_seconds,
            "churn": r.churn.iter().map(|(o, i)| [*o, *i]).collect::<Vec<_>>(),
        })
    );
    Ok(())
}

fn main() -> Result<()> {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if raw.first().map(String::as_str) == Some("--fare-child") {
        return fare_child(&raw[1..]);
    }
    let args = parse_args()?;
    if !fare_integration::have_root("bgp-bench") {
        return Ok(());
    }
    let load_start = load_average();
    let started_utc = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let receivers: Vec<(Kind, Option<String>)> =
        args.receivers.iter().map(|k| (*k, k.missing())).collect();
    let mut single: Measured = Vec::new();
    let mut multi: Measured = Vec::new();
    let per_peer = args.prefixes / args.peers as u32;
    for (scenario, peers, per, waves) in [
        (&mut single, 1, args.prefixes, args.waves),
        (&mut multi, args.peers, per_peer, 0),
    ] {
        for (k, missing) in &receivers {
            if missing.is_some() {
                continue;
            }
            eprintln!("{}: {peers} peer(s) x {per} prefixes", k.name());
            let r = match k {
                Kind::Fare => run_fare_child(peers, per, waves),
                _ => run(*k, peers, per, waves),
            }
            .map_err(|e| format!("{e:#}"));
            match &r {
                Ok(r) => eprintln!(
                    "{}: {:.2} s, peak +{:.1} MiB, held +{:.1} MiB, {:.2} s CPU",
                    k.name(),
                    r.seconds,
                    mib(r.peak_growth),
                    mib(r.held),
                    r.cpu_seconds
                ),
                Err(e) => eprintln!("{}: failed: {e}", k.name()),
            }
            scenario.push((*k, r));
        }
    }
    // A failure here must not lose the ingest numbers: it is reported in the section.
    let (mut times, slow_recoveries, conv_error) = if args.trials == 0 {
        (vec![], 0, Some("not run (--trials 0)".to_string()))
    } else {
        match convergence(args.trials) {
            Ok((t, s)) => (t, s, None),
            Err(e) => (vec![], 0, Some(format!("{e:#}"))),
        }
    };
    times.sort_by(f64::total_cmp);
    let load_end = load_average();
    let single_bytes = announce(0, args.prefixes, gen_addr(0)).len();
    let mut md = format!(
        "## BGP ingest, churn and convergence (`bgp`)\n\n\
         Command: `cargo run --release -p fare-integration --bin bgp-bench -- --prefixes {} \
         --peers {} --waves {} --trials {}` (root; {started_utc})\n\n\
         Load average (1/5/15 min) at start: {load_start}; at end: {load_end} (2 cores, shared \
         with other builds: times vary with the load, CPU seconds less so).\n\n\
         **Ingest.** The same generator for every receiver: fare's codec over plain TCP \
         sockets (hold time 0), sessions from AS {GEN_AS} in one namespace to the receiver \
         in another (a veth pair). IPv4 /24s with the FARE Path Bandwidth community, 900 \
         prefixes per attribute set (each set its own bandwidth value), UPDATEs of up to \
         4096 octets ({:.1} MB for {} prefixes); with several sessions each sends its own \
         distinct prefixes, all at once. The receivers export nothing (BIRD `export none`, \
         GoBGP default export policy reject, FRR an outbound route-map that denies; fare \
         sends no route to a neighbor whose AS is on its path) and run one after the other \
         in the same run: {}. fare runs in a fresh process of the bench for each scenario, \
         with the generator's sessions in the same process (their feed is encoded before \
         the RSS is read). Time from the first UPDATE byte to the last prefix in the RIB \
         (for fare: the last prefix's WCMP group computed, timed by its group event; the \
         others are asked for their count, BIRD every {} ms over its control socket, GoBGP \
         and FRR every {} ms with their CLI, so up to that much late). Memory: peak RSS (VmHWM, \
         reset before the feed) minus RSS before the feed; bytes/prefix is that growth per \
         prefix; RSS held after: the RSS once every prefix is in, minus the RSS before (the \
         peak also holds what was transient: queued UPDATEs, hash tables while they grow). \
         CPU: user + system time of the receiver (fare: its speaker's thread) \
         during the ingest. Ratios: this run only.\n\n",
        args.prefixes,
        args.peers,
        args.waves,
        args.trials,
        single_bytes as f64 / 1e6,
        args.prefixes,
        receivers
            .iter()
            .map(|(k, m)| match m {
                None => k.what().to_string(),
                Some(why) => format!("{} not measured ({why})", k.name()),
            })
            .collect::<Vec<_>>()
            .join("; "),
        POLL_BIRD.as_millis(),
        POLL.as_millis(),
    );
    md.push_str(&format!("1 peer x {} prefixes:\n\n", args.prefixes));
    ingest_table(&mut md, &single, args.prefixes as u64);
    md.push_str(&format!(
        "\n{} peers x {per_peer} prefixes:\n\n",
        args.peers
    ));
    ingest_table(&mut md, &multi, per_peer as u64 * args.peers as u64);
    if args.waves > 0 {
        md.push_str(&format!(
            "\n**Churn.** After the 1-peer ingest, {} waves on that session: {WAVE} prefixes \
             withdrawn (one burst of UPDATEs), time until the receiver's count dropped by \
             {WAVE} (fare: their groups removed); then the same prefixes announced again, \
             time until the count was back (fare: groups computed again).\n\n",
            args.waves
        ));
        churn_table(&mut md, &single);
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
        md.push_str(&format!("\n**Convergence run:** {e}\n"));
    }
    md.push_str(&format!("\n{CONVERGENCE_HISTORY}\n"));
    println!("{md}");
    if args.write {
        let path = repo_root().join("bench/RESULTS.md");
        results::write_section(&path, "bgp", &md)?;
        eprintln!("wrote section `bgp` of {}", path.display());
    }
    Ok(())
}
