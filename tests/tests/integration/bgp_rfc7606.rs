//! RFC 7606 against the real `fare agent` binary: a raw-TCP test peer (bytes written by
//! hand here, not by fare's codec) sends malformed UPDATEs of every error class and checks
//! the agent's reaction through `fare show routes|neighbors --json`:
//! - treat-as-withdraw (bad ORIGIN value, wrong MED flags, attribute overrunning its
//!   section): the UPDATE's prefixes are withdrawn, the session stays up;
//! - attribute discard (bad ATOMIC_AGGREGATE length, duplicate ORIGIN): the route is kept;
//! - session reset (bad NLRI length, bad header length, MP_REACH_NLRI twice, unknown
//!   well-known attribute): the exact NOTIFICATION code/subcode arrives, the peer's routes go;
//!
//! In every case the agent keeps running and keeps a second, well-behaved peer's route.
//!
//! Run: `cargo test -p fare-integration --test integration bgp_rfc7606:: -- --nocapture` (root).

use anyhow::{bail, ensure, Context, Result};
use fare_integration::bgp::{read_message, wait_for, Daemon, TempFile};
use fare_integration::{fare_bin, have_root, veth, Netns};
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

const AGENT_AS: u32 = 65001;

// --- BGP messages written by hand (RFC 4271 §4) -------------------------------------

fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![0xff; 16];
    m.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
    m.push(kind);
    m.extend_from_slice(body);
    m
}

fn open(asn: u16, id: [u8; 4]) -> Vec<u8> {
    // Capabilities: MP IPv4 unicast, 4-octet AS.
    let caps: Vec<u8> = [
        vec![1, 4, 0, 1, 0, 1],
        vec![65, 4, 0, 0, (asn >> 8) as u8, asn as u8],
    ]
    .concat();
    let mut param = vec![2, caps.len() as u8];
    param.extend_from_slice(&caps);
    let mut b = vec![4];
    b.extend_from_slice(&asn.to_be_bytes());
    b.extend_from_slice(&9u16.to_be_bytes());
    b.extend_from_slice(&id);
    b.push(param.len() as u8);
    b.extend_from_slice(&param);
    message(1, &b)
}

const KEEPALIVE: u8 = 4;

fn keepalive() -> Vec<u8> {
    message(KEEPALIVE, &[])
}

fn attr(flags: u8, kind: u8, value: &[u8]) -> Vec<u8> {
    let mut a = vec![flags, kind, value.len() as u8];
    a.extend_from_slice(value);
    a
}

fn origin(v: u8) -> Vec<u8> {
    attr(0x40, 1, &[v])
}

/// AS_PATH of one AS_SEQUENCE (4-octet ASNs: both sides sent the capability).
fn as_path(asns: &[u32]) -> Vec<u8> {
    let mut v = vec![2, asns.len() as u8];
    for a in asns {
        v.extend_from_slice(&a.to_be_bytes());
    }
    attr(0x40, 2, &v)
}

fn next_hop(a: [u8; 4]) -> Vec<u8> {
    attr(0x40, 3, &a)
}

fn nlri(prefix: [u8; 3]) -> Vec<u8> {
    vec![24, prefix[0], prefix[1], prefix[2]]
}

fn update(withdrawn: &[u8], attrs: &[Vec<u8>], nlri: &[u8]) -> Vec<u8> {
    let attrs = attrs.concat();
    let mut b = (withdrawn.len() as u16).to_be_bytes().to_vec();
    b.extend_from_slice(withdrawn);
    b.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
    b.extend_from_slice(&attrs);
    b.extend_from_slice(nlri);
    message(2, &b)
}

// --- the test peer ---------------------------------------------------------------------

/// One message as read from the agent: (type, body).
type Msg = (u8, Vec<u8>);

/// A raw BGP peer: a TCP connection opened from inside a namespace, a reader thread that
/// hands every message to a channel, and a keepalive thread.
struct RawPeer {
    stream: TcpStream,
    rx: mpsc::Receiver<Msg>,
    stop: Arc<AtomicBool>,
    asn: u32,
    next_hop: [u8; 4],
}

impl RawPeer {
    /// Connects from `ns` to the agent at `agent` and completes OPEN / KEEPALIVE.
    fn connect(ns: &Netns, agent: &str, asn: u32, id: [u8; 4], nh: [u8; 4]) -> Result<RawPeer> {
        let path = format!("/var/run/netns/{}", ns.name);
        let addr = format!("{agent}:179");
        let stream = std::thread::spawn(move || -> Result<TcpStream> {
            let f = std::fs::File::open(&path)?;
            // SAFETY: plain syscall on a valid fd; only this thread's namespace changes.
            let rc =
                unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
            ensure!(rc == 0, "setns: {}", std::io::Error::last_os_error());
            let sa = addr.parse()?;
            Ok(TcpStream::connect_timeout(&sa, Duration::from_secs(3))?)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("connect thread panicked"))??;
        stream.set_nodelay(true)?;
        let (tx, rx) = mpsc::channel();
        let mut reader = stream.try_clone()?;
        std::thread::spawn(move || {
            while let Some(m) = read_message(&mut reader) {
                if tx.send(m).is_err() {
                    break;
                }
            }
        });
        let stop = Arc::new(AtomicBool::new(false));
        let mut peer = RawPeer {
            stream,
            rx,
            stop: stop.clone(),
            asn,
            next_hop: nh,
        };
        peer.send(&open(asn as u16, id))?;
        let mut got_open = false;
        loop {
            match peer.rx.recv_timeout(Duration::from_secs(10)) {
                Ok((1, _)) => got_open = true,
                Ok((KEEPALIVE, _)) if got_open => break,
                Ok((3, n)) => bail!("agent sent NOTIFICATION {n:?} during the handshake"),
                Ok(_) => {}
                Err(_) => bail!("no OPEN + KEEPALIVE from the agent"),
            }
        }
        peer.send(&keepalive())?;
        let mut ka = peer.stream.try_clone()?;
        std::thread::spawn(move || {
            for _ in 0..600 {
                if stop.load(Ordering::Relaxed) || ka.write_all(&keepalive()).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Ok(peer)
    }

    fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).context("write to agent")
    }

    /// The mandatory attributes of a valid UPDATE from this peer.
    fn good_attrs(&self) -> Vec<Vec<u8>> {
        vec![origin(0), as_path(&[self.asn]), next_hop(self.next_hop)]
    }

    fn announce(&mut self, prefix: [u8; 3]) -> Result<()> {
        let u = update(&[], &self.good_attrs(), &nlri(prefix));
        self.send(&u)
    }

    /// Waits for a NOTIFICATION (code, subcode) and then for the connection to close.
    fn notification(&self) -> Option<(u8, u8)> {
        loop {
            match self.rx.recv_timeout(Duration::from_secs(10)) {
                Ok((3, n)) if n.len() >= 2 => return Some((n[0], n[1])),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

impl Drop for RawPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

// --- the agent under test ------------------------------------------------------------

struct Agent {
    ns_name: String,
    socket: std::path::PathBuf,
    _config: TempFile,
    process: Daemon,
}

impl Agent {
    fn show(&self, ns: &Netns, what: &str) -> serde_json::Value {
        let Ok(bin) = fare_bin() else {
            return serde_json::Value::Null;
        };
        ns.command(bin.to_str().unwrap_or_default())
            .args(["show", "--socket"])
            .arg(&self.socket)
            .args([what, "--json"])
            .output()
            .ok()
            .and_then(|o| serde_json::from_slice(&o.stdout).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    fn prefixes(&self, ns: &Netns) -> Vec<String> {
        self.show(ns, "routes")
            .as_array()
            .map(|rs| {
                rs.iter()
                    .filter(|r| r["local"] != true)
                    .filter_map(|r| r["prefix"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn neighbor(&self, ns: &Netns, addr: &str) -> serde_json::Value {
        self.show(ns, "neighbors")
            .as_array()
            .and_then(|n| n.iter().find(|x| x["address"] == addr).cloned())
            .unwrap_or(serde_json::Value::Null)
    }

    fn alive(&mut self) -> bool {
        matches!(self.process.0.try_wait(), Ok(None))
    }
}

/// Waits until the agent's learned prefixes satisfy `ok`; returns the last set seen.
fn routes_until(agent: &Agent, ns: &Netns, ok: impl Fn(&[String]) -> bool) -> Result<Vec<String>> {
    let mut last = vec![];
    let found = wait_for(Duration::from_secs(10), || {
        last = agent.prefixes(ns);
        ok(&last).then_some(())
    });
    match found {
        Some(()) => Ok(last),
        None => bail!(
            "routes never matched; last seen {last:?} (agent {})",
            agent.ns_name
        ),
    }
}

fn has(routes: &[String], p: &str) -> bool {
    routes.iter().any(|r| r == p)
}

fn malformed(agent: &Agent, ns: &Netns, addr: &str) -> u64 {
    agent.neighbor(ns, addr)["malformed_updates"]
        .as_u64()
        .unwrap_or(0)
}

/// Waits (bounded) for the neighbor's malformed-UPDATE counter to read `n`.
fn malformed_is(agent: &Agent, ns: &Netns, addr: &str, n: u64) -> Result<()> {
    let ok = wait_for(Duration::from_secs(5), || {
        (malformed(agent, ns, addr) == n).then_some(())
    });
    ensure!(
        ok.is_some(),
        "malformed_updates of {addr}: want {n}, neighbor {}",
        agent.neighbor(ns, addr)
    );
    Ok(())
}

#[test]
fn bgp_rfc7606_malformed_updates_from_a_raw_peer() -> Result<()> {
    let test = "bgp_rfc7606_malformed_updates_from_a_raw_peer";
    if !have_root(test) {
        return Ok(());
    }
    let a = Netns::new("r76a")?;
    let b = Netns::new("r76b")?;
    veth(&a, "e1", &b, "s1")?;
    veth(&a, "e2", &b, "s2")?;
    a.sh("ip addr add 10.0.1.1/30 dev e1 && ip addr add 10.0.2.1/30 dev e2")?;
    b.sh("ip addr add 10.0.1.2/30 dev s1 && ip addr add 10.0.2.2/30 dev s2")?;
    let socket = std::env::temp_dir().join(format!("fare-r76-{}.sock", std::process::id()));
    let config = TempFile::new(
        "r76.yaml",
        &format!(
            "name: r76\nrouter_id: 10.255.0.1\nasn: {AGENT_AS}\nmanagement: {{socket: {}}}\n\
             dataplane: {{kind: none}}\nbgp: {{hold_time: 9}}\nneighbors:\n  \
             - {{address: 10.0.1.2, remote_as: 65100, bandwidth_gbps: 100, passive: true}}\n  \
             - {{address: 10.0.2.2, remote_as: 65200, bandwidth_gbps: 100, passive: true}}\n",
            socket.display()
        ),
    )?;
    let bin = fare_bin()?;
    let log = std::env::temp_dir().join(format!("fare-r76-{}.log", std::process::id()));
    let process = Daemon(
        a.command(bin.to_str().context("binary path")?)
            .args(["agent", "--config", config.path()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?,
    );
    let mut agent = Agent {
        ns_name: a.name.clone(),
        socket: socket.clone(),
        _config: config,
        process,
    };
    ensure!(
        wait_for(Duration::from_secs(20), || agent
            .show(&a, "neighbors")
            .as_array()
            .map(|_| ()))
        .is_some(),
        "agent never answered"
    );
    let result = run_cases(&mut agent, &a, &b);
    if result.is_err() {
        eprintln!(
            "--- agent log\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&socket);
    result
}

fn run_cases(agent: &mut Agent, a: &Netns, b: &Netns) -> Result<()> {
    const A1: &str = "198.51.100.0/24";
    const A2: &str = "198.51.101.0/24";
    const A3: &str = "198.51.102.0/24";
    const B1: &str = "203.0.113.0/24";
    let nh_a = [10, 0, 1, 2];
    // The well-behaved peer: its route must survive everything below.
    let mut good = RawPeer::connect(b, "10.0.2.1", 65200, [10, 255, 0, 2], [10, 0, 2, 2])?;
    good.announce([203, 0, 113])?;
    let mut bad = RawPeer::connect(b, "10.0.1.1", 65100, [10, 255, 0, 3], nh_a)?;
    bad.announce([198, 51, 100])?;
    routes_until(agent, a, |r| has(r, A1) && has(r, B1))?;

    // Treat-as-withdraw (RFC 7606 §7.1): ORIGIN value 7.
    let mut attrs = bad.good_attrs();
    attrs[0] = origin(7);
    bad.send(&update(&[], &attrs, &nlri([198, 51, 100])))?;
    routes_until(agent, a, |r| !has(r, A1) && has(r, B1))?;
    malformed_is(agent, a, "10.0.1.2", 1)?;
    eprintln!("treat-as-withdraw (ORIGIN 7): route withdrawn, session up, counter 1");

    // The session is still usable: the route comes back.
    bad.announce([198, 51, 100])?;
    routes_until(agent, a, |r| has(r, A1))?;

    // Attribute discard (§7.6): ATOMIC_AGGREGATE of length 1; the route is kept.
    let mut attrs = bad.good_attrs();
    attrs.push(attr(0x40, 6, &[0]));
    bad.send(&update(&[], &attrs, &nlri([198, 51, 101])))?;
    routes_until(agent, a, |r| has(r, A1) && has(r, A2))?;
    // Duplicate ORIGIN (§3(g)): all but the first discarded; the route is kept.
    let mut attrs = bad.good_attrs();
    attrs.push(origin(1));
    bad.send(&update(&[], &attrs, &nlri([198, 51, 102])))?;
    routes_until(agent, a, |r| has(r, A1) && has(r, A2) && has(r, A3))?;
    malformed_is(agent, a, "10.0.1.2", 3)?;
    eprintln!("attribute discard (ATOMIC_AGGREGATE len 1, ORIGIN twice): routes kept");

    // Treat-as-withdraw (§3(c)): MED with the transitive flag (optional non-transitive).
    let mut attrs = bad.good_attrs();
    attrs.push(attr(0xc0, 4, &[0, 0, 0, 5]));
    bad.send(&update(&[], &attrs, &nlri([198, 51, 100])))?;
    routes_until(agent, a, |r| !has(r, A1) && has(r, A2))?;
    // Treat-as-withdraw (§4): the last attribute's length overruns the section.
    let mut attrs = bad.good_attrs();
    attrs.push(vec![0xc0, 8, 200, 0, 0]);
    bad.send(&update(&[], &attrs, &nlri([198, 51, 101])))?;
    routes_until(agent, a, |r| !has(r, A2) && has(r, A3))?;
    malformed_is(agent, a, "10.0.1.2", 5)?;
    ensure!(
        agent.neighbor(a, "10.0.1.2")["state"] == "Established",
        "session must stay up through treat-as-withdraw and discard"
    );
    eprintln!("treat-as-withdraw (MED flags, overrun): withdrawn, session still Established");

    // Session resets, each on a fresh connection: the NOTIFICATION the RFCs require.
    type Case = (&'static str, fn(&RawPeer) -> Vec<u8>, (u8, u8));
    let resets: [Case; 4] = [
        (
            "NLRI prefix length 33 (§5.3)",
            |p| update(&[], &p.good_attrs(), &[33, 198, 51, 103, 0, 0]),
            (3, 10),
        ),
        (
            "header length 18 (RFC 4271 §6.1)",
            |_| {
                let mut m = keepalive();
                m[17] = 18;
                m
            },
            (1, 2),
        ),
        (
            "MP_REACH_NLRI twice (§3(g))",
            |p| {
                let mp = attr(0x80, 14, &[0, 1, 1, 4, 10, 0, 1, 2, 0, 24, 198, 51, 104]);
                let mut attrs = p.good_attrs();
                attrs.push(mp.clone());
                attrs.push(mp);
                update(&[], &attrs, &[])
            },
            (3, 1),
        ),
        (
            "unrecognized well-known attribute (RFC 4271 §6.3)",
            |p| {
                let mut attrs = p.good_attrs();
                attrs.push(attr(0x40, 99, &[1, 2]));
                update(&[], &attrs, &nlri([198, 51, 105]))
            },
            (3, 2),
        ),
    ];
    for (i, (what, make, expected)) in resets.iter().enumerate() {
        if i > 0 {
            // Reconnect (the agent's neighbor is passive: it waits for us).
            let mut again = None;
            for _ in 0..20 {
                match RawPeer::connect(b, "10.0.1.1", 65100, [10, 255, 0, 3], nh_a) {
                    Ok(p) => {
                        again = Some(p);
                        break;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(250)),
                }
            }
            bad = again.context("reconnecting the raw peer")?;
            bad.announce([198, 51, 100])?;
            routes_until(agent, a, |r| has(r, A1))?;
        }
        let sent_before = agent.neighbor(a, "10.0.1.2")["notifications_sent"]
            .as_u64()
            .unwrap_or(0);
        let msg = make(&bad);
        bad.send(&msg)?;
        let got = bad.notification();
        ensure!(
            got == Some(*expected),
            "{what}: NOTIFICATION {got:?}, expected {expected:?}"
        );
        // The peer's routes go, the other peer's stay, the agent keeps running.
        let r = routes_until(agent, a, |r| !has(r, A1) && !has(r, A3) && has(r, B1))?;
        ensure!(agent.alive(), "agent exited after: {what}");
        let counted = wait_for(Duration::from_secs(5), || {
            let n = agent.neighbor(a, "10.0.1.2");
            (n["state"] != "Established"
                && n["notifications_sent"].as_u64().unwrap_or(0) == sent_before + 1)
                .then_some(())
        });
        ensure!(
            counted.is_some(),
            "{what}: want not Established and notifications_sent {}: {}",
            sent_before + 1,
            agent.neighbor(a, "10.0.1.2")
        );
        eprintln!("session reset on {what}: NOTIFICATION {expected:?}, routes now {r:?}");
    }
    ensure!(agent.alive(), "agent exited");
    ensure!(
        agent.neighbor(a, "10.0.2.2")["state"] == "Established",
        "the well-behaved peer's session must survive"
    );
    ensure!(
        malformed(agent, a, "10.0.2.2") == 0,
        "no malformed counts on the good peer"
    );
    drop(good);
    Ok(())
}
