//! Aggregation with unreachable host-route advertisement (draft-xu-idr-fare-in-mpson §4.1,
//! UPA of draft-krierhorn-idr-upa) between `fare agent`s with the kernel data plane.
//!
//! ```text
//!  plane p (p = 1, 2):            S<p>
//!                               /      \
//!                            A<p>      B<p>       leaves: prefixes [10.200.0.0/16],
//!                           /   \      /   \      summary_only + upa_hosts per RNIC
//!                          R1   R2    R3   R4     RNICs (role rnic): 10.200.0.k/32 on lo,
//!                                                 one stub session per plane
//! ```
//!
//! The RNICs learn only the aggregate (one member per plane). UDP from R1 to R3 (16
//! flows, so both planes carry some); B1's link to R3 goes down: B1 announces
//! 10.200.0.3/32 unreachable in plane 1, R1 installs a host route over plane 2 alone and
//! from then on every packet arrives; the switches install nothing for the UPA. The link
//! comes back: the UPA is withdrawn and R1's host route goes away.

use anyhow::{bail, ensure, Context, Result};
use fare_integration::agent::{Agent, TempDir};
use fare_integration::{have_root, veth, Netns};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DST: &str = "10.200.0.3/32";
const PORT: u16 = 9000;
const FLOWS: u16 = 16;
/// Packets per second of the test flow (all flows together).
const RATE: u64 = 2000;

/// Agents first: they stop before their namespaces go.
struct Fabric {
    agents: Vec<(String, Agent)>,
    ns: Vec<(String, Netns)>,
    _dir: TempDir,
}

/// The value named `name` in a (name, value) list (a test's own node names).
fn named<'a, T>(list: &'a [(String, T)], name: &str) -> &'a T {
    &list
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no node {name}"))
        .1
}

impl Fabric {
    fn ns(&self, name: &str) -> &Netns {
        named(&self.ns, name)
    }

    fn agent(&self, name: &str) -> &Agent {
        named(&self.agents, name)
    }

    /// The kernel route for `prefix` in `node`'s namespace (empty = none).
    fn route(&self, node: &str, prefix: &str) -> String {
        self.ns(node)
            .exec("ip", &["-4", "route", "show", "exact", prefix])
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    }
}

/// One link: (node a, interface at a, address of a, node b, interface at b, address of b).
type Link = (String, String, String, String, String, String);

fn links() -> Vec<Link> {
    let mut out = Vec::new();
    let l = |a: &str, ai: &str, aa: String, b: &str, bi: &str, ba: String| {
        (
            a.to_string(),
            ai.to_string(),
            aa,
            b.to_string(),
            bi.to_string(),
            ba,
        )
    };
    for p in 1..=2 {
        out.push(l(
            &format!("A{p}"),
            "sp",
            format!("10.{p}.1.1"),
            &format!("S{p}"),
            "la",
            format!("10.{p}.1.2"),
        ));
        out.push(l(
            &format!("B{p}"),
            "sp",
            format!("10.{p}.2.1"),
            &format!("S{p}"),
            "lb",
            format!("10.{p}.2.2"),
        ));
        for k in 1..=4 {
            let leaf = if k <= 2 { "A" } else { "B" };
            out.push(l(
                &format!("{leaf}{p}"),
                &format!("r{k}"),
                format!("10.{p}.1{k}.1"),
                &format!("R{k}"),
                &format!("p{p}"),
                format!("10.{p}.1{k}.2"),
            ));
        }
    }
    out
}

fn asn(node: &str) -> u32 {
    let (kind, n) = node.split_at(1);
    let n: u32 = n.parse().unwrap_or(0);
    match kind {
        "S" => 65100 + n * 10,
        "A" => 65000 + n * 100 + 11,
        "B" => 65000 + n * 100 + 12,
        _ => 4_200_000_000 + n,
    }
}

fn router_id(node: &str) -> String {
    let (kind, n) = node.split_at(1);
    match kind {
        "S" => format!("10.{n}.0.100"),
        "A" => format!("10.{n}.0.1"),
        "B" => format!("10.{n}.0.2"),
        _ => format!("10.9.0.{n}"),
    }
}

/// The agent configuration of `node`.
fn config(node: &str, socket: &std::path::Path, links: &[Link]) -> String {
    let role = match &node[..1] {
        "S" => "spine",
        "R" => "rnic",
        _ => "leaf",
    };
    let mut neighbors = String::new();
    let mut interfaces = Vec::new();
    for (a, ai, _, b, bi, ba) in links {
        let (my_if, peer, peer_addr) = if a == node {
            (ai, b, ba)
        } else if b == node {
            (
                bi,
                a,
                &links
                    .iter()
                    .find(|l| l.0 == *a && l.4 == *bi)
                    .expect("link")
                    .2,
            )
        } else {
            continue;
        };
        interfaces.push(my_if.clone());
        let gbps = if peer.starts_with('R') || node.starts_with('R') {
            200
        } else {
            400
        };
        let mut extra = String::new();
        if role == "leaf" && peer.starts_with('R') {
            // This leaf aggregates its RNICs and answers for their host routes.
            extra = format!(
                ", summary_only: true, upa_hosts: [10.200.0.{}/32]",
                &peer[1..]
            );
        }
        neighbors.push_str(&format!(
            "  - {{address: {peer_addr}, remote_as: {}, interface: {my_if}, bandwidth_gbps: {gbps}{extra}}}\n",
            asn(peer)
        ));
    }
    let prefixes = match role {
        "leaf" => "[10.200.0.0/16]".to_string(),
        "rnic" => format!("[10.200.0.{}/32]", &node[1..]),
        _ => "[]".to_string(),
    };
    format!(
        "name: {node}\nrouter_id: {}\nasn: {}\nmanagement: {{socket: {}}}\n\
         fare: {{mode: draft, role: {role}, group_mode: flow}}\n\
         dataplane: {{kind: kernel, interfaces: [{}]}}\n\
         neighbors:\n{neighbors}prefixes: {prefixes}\n",
        router_id(node),
        asn(node),
        socket.display(),
        interfaces.join(", ")
    )
}

fn fabric() -> Result<Fabric> {
    let dir = TempDir::new("upa")?;
    let names: Vec<String> = ["S1", "A1", "B1", "S2", "A2", "B2", "R1", "R2", "R3", "R4"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut f = Fabric {
        agents: Vec::new(),
        ns: Vec::new(),
        _dir: dir,
    };
    for n in &names {
        f.ns.push((n.clone(), Netns::new(&format!("u{n}"))?));
    }
    let links = links();
    for (a, ai, aa, b, bi, ba) in &links {
        veth(f.ns(a), ai, f.ns(b), bi)?;
        f.ns(a).sh(&format!("ip addr add {aa}/30 dev {ai}"))?;
        f.ns(b).sh(&format!("ip addr add {ba}/30 dev {bi}"))?;
    }
    for n in &names {
        let ns = f.ns(n);
        if let Some(k) = n.strip_prefix('R') {
            // The RNIC's address, its traffic end point; L4 hashing spreads the flows.
            ns.sh(&format!(
                "ip addr add 10.200.0.{k}/32 dev lo && \
                 sysctl -qw net.ipv4.fib_multipath_hash_policy=1"
            ))?;
        } else {
            ns.sh("sysctl -qw net.ipv4.ip_forward=1 && sysctl -qw net.ipv4.fib_multipath_hash_policy=1")?;
        }
    }
    for n in &names {
        let socket = f._dir.0.join(format!("{n}.sock"));
        let path = f
            ._dir
            .write(&format!("{n}.yaml"), &config(n, &socket, &links))?;
        let agent = Agent::start(Some(f.ns(n)), &path, &socket)?;
        f.agents.push((n.clone(), agent));
    }
    Ok(f)
}

/// Sequence numbers received, shared with the receiver thread.
struct Receiver {
    got: Arc<Mutex<Vec<bool>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Runs `f` on a thread inside `ns`.
fn in_netns<F: FnOnce() + Send + 'static>(ns: &Netns, f: F) -> Result<std::thread::JoinHandle<()>> {
    let file = std::fs::File::open(format!("/var/run/netns/{}", ns.name))?;
    Ok(std::thread::spawn(move || {
        // SAFETY: setns(2) on a valid fd; it changes this thread's namespace only.
        let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
        if rc == 0 {
            f();
        }
    }))
}

fn receiver(ns: &Netns, capacity: usize) -> Result<Receiver> {
    let got = Arc::new(Mutex::new(vec![false; capacity]));
    let stop = Arc::new(AtomicBool::new(false));
    let (g, s) = (got.clone(), stop.clone());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let thread = in_netns(ns, move || {
        let sock = match UdpSocket::bind(("10.200.0.3", PORT)) {
            Ok(x) => x,
            Err(e) => {
                let _ = ready_tx.send(Err(e.to_string()));
                return;
            }
        };
        let _ = sock.set_read_timeout(Some(Duration::from_millis(50)));
        let _ = ready_tx.send(Ok(()));
        let mut buf = [0u8; 64];
        while !s.load(Ordering::Relaxed) {
            if let Ok(n) = sock.recv(&mut buf) {
                if n >= 8 {
                    let seq = u64::from_be_bytes(buf[..8].try_into().unwrap_or_default());
                    if let Ok(mut v) = g.lock() {
                        if let Some(x) = v.get_mut(seq as usize) {
                            *x = true;
                        }
                    }
                }
            }
        }
    })?;
    match ready_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => bail!("receiver: {e}"),
        Err(_) => bail!("receiver did not start"),
    }
    Ok(Receiver {
        got,
        stop,
        thread: Some(thread),
    })
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sends `count` numbered datagrams at RATE from R1 to R3 over FLOWS source ports; `sent`
/// is the number handed to the kernel so far.
fn sender(ns: &Netns, count: u64, sent: Arc<AtomicU64>) -> Result<std::thread::JoinHandle<()>> {
    in_netns(ns, move || {
        let socks: Vec<UdpSocket> = (0..FLOWS)
            .filter_map(|i| UdpSocket::bind(("10.200.0.1", 20000 + i)).ok())
            .collect();
        if socks.len() != FLOWS as usize {
            return;
        }
        let to: SocketAddr = SocketAddr::from(([10, 200, 0, 3], PORT));
        let start = Instant::now();
        for seq in 0..count {
            let due = start + Duration::from_micros(seq * 1_000_000 / RATE);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let mut msg = [0u8; 32];
            msg[..8].copy_from_slice(&seq.to_be_bytes());
            // A send error (no route for a moment) is a lost packet like any other.
            let _ = socks[(seq % FLOWS as u64) as usize].send_to(&msg, to);
            sent.store(seq + 1, Ordering::SeqCst);
        }
    })
}

/// One traffic run R1 -> R3: the receiver at R3 and the sender at R1.
struct Traffic {
    rx: Receiver,
    sent: Arc<AtomicU64>,
    tx: std::thread::JoinHandle<()>,
}

impl Traffic {
    /// Starts `count` datagrams from R1 to R3.
    fn start(f: &Fabric, count: u64) -> Result<Traffic> {
        let rx = receiver(f.ns("R3"), count as usize)?;
        let sent = Arc::new(AtomicU64::new(0));
        let tx = sender(f.ns("R1"), count, sent.clone())?;
        Ok(Traffic { rx, sent, tx })
    }

    /// Datagrams handed to the kernel so far.
    fn sent(&self) -> usize {
        self.sent.load(Ordering::SeqCst) as usize
    }

    /// Waits for the sender and the stragglers; (which sequence numbers arrived, how many
    /// were sent).
    fn finish(self) -> Result<(Vec<bool>, usize)> {
        let _ = self.tx.join();
        std::thread::sleep(Duration::from_millis(300));
        let got = self
            .rx
            .got
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .clone();
        Ok((got, self.sent.load(Ordering::SeqCst) as usize))
    }
}

/// Polls `check` every 5 ms for at most `timeout`; returns the time it took.
fn wait(timeout: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    for _ in 0..(timeout.as_millis() / 5 + 1) {
        if check() {
            return Some(start.elapsed());
        }
        if start.elapsed() > timeout {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// Interfaces of the members of `node`'s group for `prefix` (as installed).
fn members(agent: &Agent, prefix: &str) -> Vec<String> {
    let groups = agent.show("groups").unwrap_or_default();
    let mut out: Vec<String> = groups
        .as_array()
        .and_then(|g| g.iter().find(|g| g["prefix"] == prefix))
        .and_then(|g| g["members"].as_array())
        .map(|m| {
            m.iter()
                .map(|m| m["interface"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn lost(got: &[bool], range: std::ops::Range<usize>) -> usize {
    got[range].iter().filter(|x| !**x).count()
}

#[test]
fn upa_steers_an_rnic_away_from_the_plane_its_peer_left() -> Result<()> {
    let test = "upa_steers_an_rnic_away_from_the_plane_its_peer_left";
    if !have_root(test) {
        return Ok(());
    }
    let f = fabric()?;
    // Converged: R1 has the aggregate over both planes and no host route of R3.
    let up = wait(Duration::from_secs(60), || {
        !f.route("R1", "10.200.0.0/16").is_empty()
            && members(f.agent("R1"), "10.200.0.0/16").len() == 2
    });
    ensure!(
        up.is_some(),
        "{test}: R1 never had the aggregate over both planes: {:?}\n{}",
        f.agent("R1").show("groups"),
        f.agent("R1").log_text()
    );
    // Start-up UPAs (RNICs not yet connected) must be gone too.
    let settled = wait(Duration::from_secs(30), || f.route("R1", DST).is_empty());
    ensure!(settled.is_some(), "{test}: R1 keeps {}", f.route("R1", DST));
    ensure!(
        f.route("A1", DST).contains("10.200.0.3"),
        "A1 has R3's host route before the failure"
    );
    ensure!(
        members(f.agent("R1"), DST).is_empty(),
        "R1 has a group for R3's host route although its leaves send aggregates only"
    );

    // Traffic R1 -> R3: 2 s before the failure, then the failure, then 4 s more.
    let traffic = Traffic::start(&f, 8 * RATE)?;
    std::thread::sleep(Duration::from_secs(2));
    let at_fail = traffic.sent();
    f.ns("B1").sh("ip link set dev r3 down")?;
    let installed = wait(Duration::from_secs(10), || !f.route("R1", DST).is_empty());
    let at_install = traffic.sent();
    let Some(reaction) = installed else {
        bail!(
            "{test}: R1 never installed a host route for {DST}\n{}",
            f.agent("R1").log_text()
        );
    };
    let host_members = members(f.agent("R1"), DST);
    // Switches keep the UPA but install nothing for it; R1's host route avoids plane 1.
    let a1 = f.route("A1", DST);
    let s1 = f.route("S1", DST);
    let (got, total) = traffic.finish()?;
    let before = lost(&got, 0..at_fail);
    let during = lost(&got, at_fail..at_install);
    let after = lost(&got, at_install..total);
    eprintln!(
        "{test}: R1's host route in the kernel {:.1} ms after the link went down; sent \
         {total}: lost {before} before the failure, {during} of {} while reacting, {after} \
         of {} after the host route was installed",
        reaction.as_secs_f64() * 1000.0,
        at_install - at_fail,
        total - at_install
    );
    let log = f.agent("R1").log_text();
    ensure!(
        log.contains("UPA received") && log.contains("host route avoids") && log.contains(DST),
        "{test}: R1's log has no UPA for {DST}:\n{log}"
    );
    ensure!(
        host_members == ["p2"],
        "{test}: R1's host route has members {host_members:?}, not plane 2 (p2) alone"
    );
    ensure!(a1.is_empty(), "A1 installed the UPA: {a1}");
    ensure!(s1.is_empty(), "S1 installed the UPA: {s1}");
    for switch in ["A1", "S1"] {
        ensure!(
            f.agent(switch).log_text().contains("UPA received"),
            "{switch} did not keep the UPA"
        );
    }
    ensure!(before == 0, "{before} packets lost before the failure");
    ensure!(
        after == 0,
        "{after} packets lost after the host route was installed"
    );
    let b1 = f.agent("B1").log_text();
    ensure!(
        b1.contains("UPA advertised"),
        "B1 did not advertise the UPA:\n{b1}"
    );

    // The link comes back: UPA withdrawn, host route removed, traffic on the aggregate.
    let traffic = Traffic::start(&f, 6 * RATE)?;
    std::thread::sleep(Duration::from_secs(1));
    let at_up = traffic.sent();
    f.ns("B1").sh("ip link set dev r3 up")?;
    let removed = wait(Duration::from_secs(30), || f.route("R1", DST).is_empty());
    let at_removed = traffic.sent();
    let (got, total) = traffic.finish()?;
    ensure!(
        removed.is_some(),
        "{test}: R1 keeps {} after R3 came back\n{}",
        f.route("R1", DST),
        f.agent("R1").log_text()
    );
    // Half a second after the host route went, the aggregate carries everything.
    let settled = (at_removed + RATE as usize / 2).min(total);
    eprintln!(
        "{test}: link up -> host route removed in {:.0} ms; sent {total}: lost {} before, \
         {} between link up and the removal, {} in the 0.5 s after it, {} later",
        removed.unwrap_or_default().as_secs_f64() * 1000.0,
        lost(&got, 0..at_up),
        lost(&got, at_up..at_removed),
        lost(&got, at_removed..settled),
        lost(&got, settled..total)
    );
    // Where the losses were, in ms of send time relative to the removal being seen.
    let offsets: Vec<i64> = (0..total)
        .filter(|i| !got[*i])
        .map(|i| (i as i64 - at_removed as i64) * 1000 / RATE as i64)
        .collect();
    eprintln!("{test}: lost packets sent at {offsets:?} ms from the removal");
    ensure!(
        lost(&got, settled..total) == 0,
        "{test}: packets lost on the aggregate after the UPA was withdrawn"
    );
    ensure!(
        f.agent("B1").log_text().contains("UPA withdrawn"),
        "B1 did not withdraw the UPA"
    );
    ensure!(
        f.agent("R1").log_text().contains("UPA withdrawn"),
        "R1 did not see the UPA withdrawn"
    );
    ensure!(
        f.route("A1", DST).contains("10.200.0.3"),
        "A1 did not get R3's host route back: {}",
        f.route("A1", DST)
    );
    let _ = f
        .agent("R1")
        .show("neighbors")
        .context("R1 still answers")?;
    Ok(())
}
