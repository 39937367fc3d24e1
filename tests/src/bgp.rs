//! Helpers for the BGP tests: run fare's speaker inside a namespace, start FRR bgpd,
//! GoBGP or BIRD as real peers in namespaces and query them.

use crate::Netns;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Runs `f` on a new thread whose network namespace is `ns`, with a single-threaded tokio
/// runtime, so every socket the future opens lives in that namespace.
pub fn spawn_in_netns<T, F, Fut>(ns: &Netns, f: F) -> std::thread::JoinHandle<Result<T>>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T>>,
{
    crate::inns::spawn_async(&ns.name, f)
}

/// FRR bgpd as a spine (AS 65100) with two links to one fare leaf (AS 65001, at 10.0.1.1
/// and 10.0.2.1), originating 198.51.100.0/24 (a blackhole route in its namespace) with
/// no Path Bandwidth: what several tests peer with.
pub const FRR_SPINE_TWO_LINKS: &str = "frr defaults datacenter
hostname s1
router bgp 65100
 bgp router-id 10.255.0.100
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.0.1.1 remote-as 65001
 neighbor 10.0.2.1 remote-as 65001
 address-family ipv4 unicast
  network 198.51.100.0/24
 exit-address-family
";

/// A directory owned by the `frr` user for one bgpd instance (removed on drop).
pub struct FrrDir(pub PathBuf);

impl Drop for FrrDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// FRR bgpd running inside `ns`, standalone (no zebra) or with zebra installing its
/// routes in the namespace's kernel table, started the lab's way
/// ([`fare::lab::frr::Daemons`]); stopped on drop.
pub struct Frr {
    daemons: fare::lab::frr::Daemons,
    pub dir: FrrDir,
}

impl Frr {
    pub fn start(ns: &Netns, config: &str) -> Result<Frr> {
        Frr::start_daemons(ns, config, None)
    }

    /// bgpd and zebra: the routes bgpd selects (with their UCMP weights) reach the
    /// namespace's kernel table and `show ip route`.
    pub fn start_with_zebra(ns: &Netns, config: &str) -> Result<Frr> {
        Frr::start_daemons(ns, config, Some("hostname zebra\n"))
    }

    /// bgpd and zebra with `zebra_conf` as zebra's configuration.
    pub fn start_with_zebra_conf(ns: &Netns, config: &str, zebra_conf: &str) -> Result<Frr> {
        Frr::start_daemons(ns, config, Some(zebra_conf))
    }

    fn start_daemons(ns: &Netns, config: &str, zebra: Option<&str>) -> Result<Frr> {
        let dir = std::env::temp_dir().join(format!("fare-frr-{}", ns.name));
        let _ = std::fs::remove_dir_all(&dir);
        let dir = FrrDir(dir);
        let daemons = fare::lab::frr::Daemons::start(&fare::lab::frr::Setup {
            ns: &ns.name,
            run: &dir.0,
            bgpd: config,
            zebra,
            log: None,
        })
        .with_context(|| format!("starting FRR in {}", ns.name))?;
        Ok(Frr { daemons, dir })
    }

    /// Runs a vtysh command against this bgpd (its output, or the error as text).
    pub fn vtysh(&self, cmd: &str) -> String {
        self.daemons
            .vtysh(cmd)
            .unwrap_or_else(|e| format!("vtysh: {e}"))
    }

    /// vtysh output parsed as JSON (`Null` when it is not JSON yet).
    pub fn json(&self, cmd: &str) -> serde_json::Value {
        serde_json::from_str(&self.vtysh(cmd)).unwrap_or(serde_json::Value::Null)
    }

    /// Enters `lines` in vtysh's configuration mode (after `configure terminal`), in
    /// order: whether FRR took every one. vtysh exits non-zero on the first line FRR
    /// refuses (an unknown command or a value out of its range); that exit code is the
    /// verdict.
    pub fn configure(&self, lines: &[&str]) -> Result<bool> {
        let mut cmd = std::process::Command::new("vtysh");
        cmd.arg("--vty_socket")
            .arg(&self.dir.0)
            .args(["-c", "configure terminal"]);
        for l in lines {
            cmd.args(["-c", l]);
        }
        let out = cmd.output().context("running vtysh")?;
        Ok(out.status.success())
    }
}

impl Drop for Frr {
    fn drop(&mut self) {
        self.daemons.stop();
    }
}

/// A child process killed on drop (gobgpd, bird, tshark...).
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for `check` to return Some, polling every 50 ms, at most `timeout`.
pub fn wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Some(v) = check() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

use fare::bgp::speaker::{self, NeighborSpec, SpeakerCommand, SpeakerConfig, SpeakerEvent};
use fare::dataplane::Group;
use ipnet::IpNet;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

/// What a fare speaker under test has produced so far.
#[derive(Default, Debug)]
pub struct Observed {
    pub groups: BTreeMap<IpNet, Group>,
    pub established: std::collections::BTreeSet<IpAddr>,
    /// (time since start, prefix) of every group change.
    pub group_changes: Vec<(Duration, IpNet)>,
}

/// fare's speaker running in a namespace (in-process, on its own thread).
pub struct FareSpeaker {
    pub observed: Arc<Mutex<Observed>>,
    pub commands: tokio::sync::mpsc::Sender<SpeakerCommand>,
    /// Each neighbor's live status and counters.
    pub neighbors: Vec<fare::bgp::neighbor::SharedStatus>,
    pub started: Instant,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

/// A speaker configuration with test defaults (short timers, draft mode).
pub fn config(
    router_id: &str,
    asn: u32,
    neighbors: &[(&str, u32, f64)],
    prefixes: &[&str],
) -> SpeakerConfig {
    SpeakerConfig {
        router_id: router_id.parse::<Ipv4Addr>().expect("router id"),
        asn,
        port: 179,
        listen: true,
        listen_addresses: vec![],
        hold_time: 9,
        connect_retry: Duration::from_millis(500),
        connect_retry_max: Duration::from_secs(4),
        link_poll: Duration::from_millis(fare::agent::config::DEFAULT_LINK_POLL_MS),
        policy: fare::bgp::fare::Policy::default(),
        group_mode: fare::dataplane::GroupMode::Spray,
        neighbors: neighbors
            .iter()
            .map(|(a, asn, bw)| NeighborSpec {
                bandwidth_gbps: Some(*bw),
                ..NeighborSpec::new(a.parse().expect("neighbor address"), *asn)
            })
            .collect(),
        prefixes: prefixes
            .iter()
            .map(|p| p.parse().expect("prefix"))
            .collect(),
        orf_wait: Duration::from_millis(fare::agent::config::DEFAULT_ORF_WAIT_MS),
        route_events: false,
        dpf: Default::default(),
    }
}

impl FareSpeaker {
    pub fn start(ns: &Netns, config: SpeakerConfig) -> Result<FareSpeaker> {
        let observed = Arc::new(Mutex::new(Observed::default()));
        let obs = observed.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let started = Instant::now();
        let thread = spawn_in_netns(ns, move || async move {
            let (ev_tx, mut ev_rx) = tokio::sync::mpsc::channel(1024);
            let handle = speaker::start(config, ev_tx).await?;
            let _ = tx.send((
                handle.commands.clone(),
                handle
                    .neighbors
                    .lock()
                    .map(|l| l.clone())
                    .unwrap_or_default(),
            ));
            while let Some(ev) = ev_rx.recv().await {
                let mut o = obs.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                match ev {
                    SpeakerEvent::Groups(runs) => {
                        for (prefix, group) in runs.iter().flat_map(|r| r.groups()) {
                            o.group_changes.push((started.elapsed(), prefix));
                            match group {
                                Some(g) => o.groups.insert(prefix, g),
                                None => o.groups.remove(&prefix),
                            };
                        }
                    }
                    SpeakerEvent::ColoredGroup { group, .. } => {
                        o.group_changes.push((started.elapsed(), group.prefix));
                        o.groups.insert(group.prefix, group);
                    }
                    SpeakerEvent::Neighbor(n) => {
                        if n.state == fare::bgp::neighbor::State::Established {
                            o.established.insert(n.address);
                        } else {
                            o.established.remove(&n.address);
                        }
                    }
                    SpeakerEvent::Route { .. } => {}
                }
            }
            Ok(())
        });
        let (commands, neighbors) = rx
            .recv_timeout(Duration::from_secs(5))
            .context("speaker did not start")?;
        Ok(FareSpeaker {
            observed,
            commands,
            neighbors,
            started,
            thread: Some(thread),
        })
    }

    pub fn group(&self, prefix: &str) -> Option<Group> {
        let p: IpNet = prefix.parse().ok()?;
        self.observed.lock().ok()?.groups.get(&p).cloned()
    }

    /// Waits (at most `timeout`) until the sessions with all of `peers` are established.
    pub fn established_within(&self, timeout: Duration, peers: &[&str]) -> bool {
        wait_for(timeout, || {
            peers.iter().all(|p| self.is_established(p)).then_some(())
        })
        .is_some()
    }

    pub fn is_established(&self, peer: &str) -> bool {
        let Ok(p) = peer.parse::<IpAddr>() else {
            return false;
        };
        self.observed
            .lock()
            .map(|o| o.established.contains(&p))
            .unwrap_or(false)
    }

    /// NLRI the neighbor at `peer` has announced to this speaker so far (every prefix of
    /// every UPDATE, withdrawals not counted).
    pub fn prefixes_received(&self, peer: &str) -> Option<u64> {
        let p: IpAddr = peer.parse().ok()?;
        self.neighbors.iter().find_map(|n| {
            let s = n.lock().ok()?;
            (s.address == p).then_some(s.prefixes_received)
        })
    }

    pub fn routes(&self) -> Vec<speaker::RouteView> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self
            .commands
            .blocking_send(SpeakerCommand::Routes(tx))
            .is_err()
        {
            return vec![];
        }
        rx.blocking_recv().unwrap_or_default()
    }
}

impl Drop for FareSpeaker {
    fn drop(&mut self) {
        let _ = self.commands.blocking_send(SpeakerCommand::Shutdown);
        // The thread ends with its namespace's processes; do not wait on it.
        drop(self.thread.take());
    }
}

/// The leaf-spine fabric of fare speakers of the fabric test and the convergence
/// benchmark: leaves L1..L3 (AS 65001..65003, router IDs 10.255.0.N, each originating
/// 10.1.N.0/24) and spines S1, S2 (AS 65100, 10.255.1.N, role spine). Link i of
/// `FABRIC_LINKS` is 10.0.i.0/30: .1 on its first node's interface `<a><b>` (`l1s1`), .2
/// on the other's (`s1l1`).
pub struct SpeakerFabric {
    pub speakers: BTreeMap<&'static str, FareSpeaker>,
    /// The link (`L1-S1`) each interface address is on.
    pub link_of: BTreeMap<String, String>,
    pub ns: BTreeMap<&'static str, Netns>,
}

/// (name, AS, router ID, originated prefix) of the fabric's nodes.
pub const FABRIC_NODES: [(&str, u32, &str, Option<&str>); 5] = [
    ("L1", 65001, "10.255.0.1", Some("10.1.1.0/24")),
    ("L2", 65002, "10.255.0.2", Some("10.1.2.0/24")),
    ("L3", 65003, "10.255.0.3", Some("10.1.3.0/24")),
    ("S1", 65100, "10.255.1.1", None),
    ("S2", 65100, "10.255.1.2", None),
];

/// (node, node, Gbps) of the fabric's links.
pub const FABRIC_LINKS: [(&str, &str, f64); 6] = [
    ("L1", "S1", 100.0),
    ("L1", "S2", 100.0),
    ("L2", "S1", 100.0),
    ("L2", "S2", 50.0),
    ("L3", "S1", 100.0),
    ("L3", "S2", 40.0),
];

impl SpeakerFabric {
    /// Builds the namespaces (`<tag><node>`) and links and starts the five speakers.
    pub fn start(tag: &str) -> Result<SpeakerFabric> {
        let mut ns = BTreeMap::new();
        for (name, ..) in FABRIC_NODES {
            ns.insert(name, Netns::new(&format!("{tag}{}", name.to_lowercase()))?);
        }
        let asn = |n: &str| {
            FABRIC_NODES
                .iter()
                .find(|x| x.0 == n)
                .map(|x| x.1)
                .unwrap_or(0)
        };
        // Per node: (neighbor address, remote AS, bandwidth, interface).
        let mut neighbors: BTreeMap<&str, Vec<(String, u32, f64, String)>> = BTreeMap::new();
        let mut link_of = BTreeMap::new();
        for (i, (a, b, bw)) in FABRIC_LINKS.iter().enumerate() {
            let ia = format!("{}{}", a.to_lowercase(), b.to_lowercase());
            let ib = format!("{}{}", b.to_lowercase(), a.to_lowercase());
            crate::veth(&ns[a], &ia, &ns[b], &ib)?;
            let (aa, ba) = (format!("10.0.{i}.1"), format!("10.0.{i}.2"));
            ns[a].sh(&format!("ip addr add {aa}/30 dev {ia}"))?;
            ns[b].sh(&format!("ip addr add {ba}/30 dev {ib}"))?;
            neighbors
                .entry(a)
                .or_default()
                .push((ba.clone(), asn(b), *bw, ia));
            neighbors
                .entry(b)
                .or_default()
                .push((aa.clone(), asn(a), *bw, ib));
            link_of.insert(ba, format!("{a}-{b}"));
            link_of.insert(aa, format!("{a}-{b}"));
        }
        let mut speakers = BTreeMap::new();
        for (name, asn, rid, prefix) in FABRIC_NODES {
            let list: Vec<(&str, u32, f64)> = neighbors[name]
                .iter()
                .map(|(a, asn, bw, _)| (a.as_str(), *asn, *bw))
                .collect();
            let prefixes: Vec<&str> = prefix.into_iter().collect();
            let mut c = config(rid, asn, &list, &prefixes);
            for (spec, (.., ifname)) in c.neighbors.iter_mut().zip(&neighbors[name]) {
                spec.interface = Some(ifname.clone());
            }
            if name.starts_with('S') {
                c.policy.role = fare::topology::Role::Spine;
            }
            speakers.insert(name, FareSpeaker::start(&ns[name], c)?);
        }
        Ok(SpeakerFabric {
            speakers,
            link_of,
            ns,
        })
    }
}

/// Two namespaces joined by one veth, IPv4 only: `a` has 10.0.0.1/30 on pa0, `b`
/// 10.0.0.2/30 on pb0 (fare runs in `a`, the peer under test in `b`).
pub fn pair_v4(tag: &str) -> Result<(Netns, Netns)> {
    let a = Netns::new(&format!("{tag}a"))?;
    let b = Netns::new(&format!("{tag}b"))?;
    crate::veth(&a, "pa0", &b, "pb0")?;
    a.sh("ip addr add 10.0.0.1/30 dev pa0")?;
    b.sh("ip addr add 10.0.0.2/30 dev pb0")?;
    Ok((a, b))
}

/// `pair_v4` with IPv6 too: fd00::1 in `a`, fd00::2 in `b`.
pub fn pair(tag: &str) -> Result<(Netns, Netns)> {
    let (a, b) = pair_v4(tag)?;
    a.sh("ip addr add fd00::1/64 dev pa0 nodad")?;
    b.sh("ip addr add fd00::2/64 dev pb0 nodad")?;
    Ok((a, b))
}

/// The configuration of fare in `a` of a `pair`: AS 65001, router ID 10.0.0.1, sessions
/// over IPv4 and IPv6 to the peer in AS `peer_as` (100 Gbps), announcing 192.0.2.0/24
/// and 2001:db8:a::/48.
pub fn pair_config(peer_as: u32) -> SpeakerConfig {
    config(
        "10.0.0.1",
        65001,
        &[("10.0.0.2", peer_as, 100.0), ("fd00::2", peer_as, 100.0)],
        &["192.0.2.0/24", "2001:db8:a::/48"],
    )
}

/// True with root, FRR's bgpd and vtysh; prints the SKIPPED line otherwise.
pub fn have_frr(test: &str) -> bool {
    crate::have_root(test)
        && crate::have_tool(test, "/usr/lib/frr/bgpd")
        && crate::have_tool(test, "vtysh")
}

/// One BGP message read from a raw session: (type, body after the 19-byte header); None
/// when the stream ends or the length field is below the header size.
pub fn read_message(s: &mut impl std::io::Read) -> Option<(u8, Vec<u8>)> {
    let mut h = [0u8; 19];
    s.read_exact(&mut h).ok()?;
    let len = u16::from_be_bytes([h[16], h[17]]) as usize;
    let mut body = vec![0u8; len.checked_sub(19)?];
    s.read_exact(&mut body).ok()?;
    Some((h[18], body))
}

/// A temporary file removed on drop.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(name: &str, text: &str) -> Result<TempFile> {
        let path = std::env::temp_dir().join(format!("fare-{}-{name}", std::process::id()));
        std::fs::write(&path, text)?;
        Ok(TempFile(path))
    }
    pub fn path(&self) -> &str {
        self.0.to_str().unwrap_or_default()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs a command in `ns` and returns its stdout (empty on failure).
pub fn output(ns: &Netns, cmd: &str, args: &[&str]) -> String {
    ns.command(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// tshark capturing BGP (TCP port 179) on `iface` of `ns` into `pcap`, once it has
/// started writing; `stop_capture` ends it.
pub fn start_capture(ns: &Netns, iface: &str, pcap: &TempFile) -> Result<Daemon> {
    let d = Daemon(
        ns.command("tshark")
            .args(["-q", "-i", iface, "-f", "tcp port 179", "-w", pcap.path()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning tshark")?,
    );
    // Capturing once the pcap header is written.
    wait_for(Duration::from_secs(10), || {
        std::fs::metadata(&pcap.0)
            .is_ok_and(|m| m.len() > 0)
            .then_some(())
    });
    Ok(d)
}

/// Stops tshark with SIGINT so it writes out what it captured.
pub fn stop_capture(mut d: Daemon) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(d.0.id() as i32, libc::SIGINT);
    }
    for _ in 0..50 {
        if matches!(d.0.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
