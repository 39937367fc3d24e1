//! Session-level fuzzing of the real `fare agent`: a raw peer (messages written byte by
//! byte, see `rawbgp`) opens sessions and sends well-framed hostile sequences, while FRR
//! keeps a second session with its own routes. Phases, each with its expected answer
//! computed from the RFCs:
//! - messages in the wrong state: UPDATE / KEEPALIVE / ROUTE-REFRESH before OPEN ->
//!   NOTIFICATION 5/1, UPDATE in OpenConfirm -> 5/2, OPEN while Established -> 5/3
//!   (RFC 4271 §8.2.2, RFC 6608 subcodes);
//! - zero-length ORIGIN, NEXT_HOP and MED and an UPDATE without any attribute:
//!   treat-as-withdraw, the session stays up (RFC 7606 §7.1, 7.3, 7.4, §3(d)); an unknown
//!   optional transitive attribute filling the 4096-octet message is accepted with its
//!   route (RFC 4271 §5); a message of 4097 octets -> 1/2 with the length as data (§6.1;
//!   no Extended Messages negotiated);
//! - rapid OPEN / NOTIFICATION cycles and abrupt closes;
//! - a route storm (thousands of prefixes in packed UPDATEs, then withdrawn) and the
//!   withdrawal of routes never announced (no error, nothing changes);
//! - seeded random sequences (`FARE_FUZZ_SEED`, printed; `FARE_SESSION_FUZZ_SECS`, default
//!   15): random UPDATE attributes (any flags, type, zero or huge length), ROUTE-REFRESH
//!   with junk ORF blocks, stray KEEPALIVEs and OPENs; any NOTIFICATION back must be one a
//!   receiver may send, and the connection must then close.
//!
//! Throughout: the agent never exits, `fare show neighbors --json` keeps answering, FRR's
//! session stays Established with its routes, and at the end the agent's RSS and open file
//! descriptors are within bounds of what they were before (read from /proc/PID/status).
//!
//! Run: `cargo test -p fare-integration --test integration bgp_session_fuzz:: -- --nocapture`.

use anyhow::{bail, ensure, Context, Result};
use fare_integration::agent::{Agent, TempDir};
use fare_integration::bgp::{have_frr, wait_for, Frr};
use fare_integration::rawbgp::{
    as_path, attr, keepalive, message, next_hop, open, origin, prefixes, update, RawPeer,
    KEEPALIVE, NOTIFICATION, OPEN, ROUTE_REFRESH, UPDATE,
};
use fare_integration::{link, Netns};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const AGENT: &str = "10.0.1.1";
const HOSTILE: &str = "10.0.1.2";
const HOSTILE_AS: u32 = 65100;
const HOSTILE_ID: [u8; 4] = [10, 255, 0, 3];
const NH: [u8; 4] = [10, 0, 1, 2];
const FRR_ADDR: &str = "10.0.2.2";
const FRR_ROUTES: [&str; 2] = ["203.0.113.0/24", "203.0.114.0/24"];

const FRR_CONF: &str = "frr defaults datacenter
hostname s1
router bgp 65200
 bgp router-id 10.255.0.100
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.0.2.1 remote-as 65001
 address-family ipv4 unicast
  network 203.0.113.0/24
  network 203.0.114.0/24
 exit-address-family
";

/// splitmix64: the test's own generator, so a seed names one run on any build.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// The NOTIFICATIONs a receiver may send (RFC 4271 §6, RFC 6608, RFC 7313, RFC 4486).
fn receiver_may_send(code: u8, subcode: u8) -> bool {
    match code {
        1 => (1..=3).contains(&subcode),
        2 => matches!(subcode, 0..=4 | 6 | 7),
        3 => matches!(subcode, 1..=6 | 8..=11),
        4 => subcode == 0,
        5 => subcode <= 3,
        6 => subcode <= 10,
        7 => subcode == 1,
        _ => false,
    }
}

/// /proc/PID/status VmRSS in KiB and the number of open file descriptors.
fn usage(pid: u32) -> Result<(u64, usize)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("VmRSS")?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
    Ok((rss, fds))
}

fn learned(agent: &Agent) -> Vec<String> {
    agent
        .show("routes")
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|r| r["local"] != true)
        .filter_map(|r| r["prefix"].as_str().map(str::to_string))
        .collect()
}

fn neighbor(agent: &Agent, addr: &str) -> serde_json::Value {
    agent
        .show("neighbors")
        .ok()
        .and_then(|v| v.as_array().cloned())
        .and_then(|n| n.into_iter().find(|x| x["address"] == addr))
        .unwrap_or(serde_json::Value::Null)
}

/// Waits (up to 20 s) until the learned prefixes satisfy `ok`.
fn routes_until(agent: &Agent, what: &str, ok: impl Fn(&[String]) -> bool) -> Result<Vec<String>> {
    let mut last = vec![];
    let found = wait_for(Duration::from_secs(20), || {
        last = learned(agent);
        ok(&last).then_some(())
    });
    match found {
        Some(()) => Ok(last),
        None => bail!("{what}: routes never matched; {} seen", last.len()),
    }
}

fn frr_routes_kept(r: &[String]) -> bool {
    FRR_ROUTES.iter().all(|p| r.iter().any(|x| x == p))
}

/// The management API and FRR's session, watched every 300 ms from another thread.
struct Watch {
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    frr_down: Arc<AtomicU64>,
    slowest_ms: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    fn start(socket: std::path::PathBuf) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let [calls, failures, frr_down, slowest_ms] =
            std::array::from_fn(|_| Arc::new(AtomicU64::new(0)));
        let (s, c, f, d, m) = (
            stop.clone(),
            calls.clone(),
            failures.clone(),
            frr_down.clone(),
            slowest_ms.clone(),
        );
        let thread = std::thread::spawn(move || {
            // Bounded: 10 minutes at most.
            for _ in 0..2000 {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let t = Instant::now();
                let answer = fare_integration::agent::show(&socket, "neighbors");
                m.fetch_max(t.elapsed().as_millis() as u64, Ordering::Relaxed);
                c.fetch_add(1, Ordering::Relaxed);
                match answer.ok().and_then(|v| v.as_array().cloned()) {
                    Some(n) => {
                        let up = n
                            .iter()
                            .any(|x| x["address"] == FRR_ADDR && x["state"] == "Established");
                        if !up {
                            d.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    None => {
                        f.fetch_add(1, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        Watch {
            stop,
            calls,
            failures,
            frr_down,
            slowest_ms,
            thread: Some(thread),
        }
    }

    /// (calls, failures, polls with FRR not Established, slowest answer in ms).
    fn finish(mut self) -> (u64, u64, u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        (
            self.calls.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
            self.frr_down.load(Ordering::Relaxed),
            self.slowest_ms.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn bgp_session_fuzz_hostile_peer_beside_frr() -> Result<()> {
    let test = "bgp_session_fuzz_hostile_peer_beside_frr";
    if !have_frr(test) {
        return Ok(());
    }
    let a = Netns::new("sfza")?;
    let b = Netns::new("sfzb")?;
    let c = Netns::new("sfzc")?;
    link(&a, "e1", "10.0.1.1/30", &b, "s1", "10.0.1.2/30")?;
    link(&a, "e2", "10.0.2.1/30", &c, "s2", "10.0.2.2/30")?;
    c.sh("ip route add blackhole 203.0.113.0/24 && ip route add blackhole 203.0.114.0/24")?;
    let _frr = Frr::start(&c, FRR_CONF)?;
    let dir = TempDir::new("sfz")?;
    let socket = dir.0.join("sfz.sock");
    let config = format!(
        "name: sfz\nrouter_id: 10.255.0.1\nasn: 65001\nmanagement: {{socket: {}}}\n\
         dataplane: {{kind: none}}\nbgp: {{hold_time: 9}}\nneighbors:\n  \
         - {{address: {HOSTILE}, remote_as: {HOSTILE_AS}, bandwidth_gbps: 100, passive: true}}\n  \
         - {{address: {FRR_ADDR}, remote_as: 65200, bandwidth_gbps: 100}}\n",
        socket.display()
    );
    let mut agent = dir.start_agent(&a, "sfz", &config)?;
    let result = run(&mut agent, &b, socket);
    if result.is_err() {
        eprintln!("--- agent log (tail)");
        let log = agent.log_text();
        let lines: Vec<&str> = log.lines().collect();
        for l in &lines[lines.len().saturating_sub(40)..] {
            eprintln!("{l}");
        }
    }
    result
}

fn run(agent: &mut Agent, b: &Netns, socket: std::path::PathBuf) -> Result<()> {
    routes_until(agent, "FRR's routes", frr_routes_kept)?;
    let pid = agent.child.id();
    let seed: u64 = std::env::var("FARE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let secs: u64 = std::env::var("FARE_SESSION_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15)
        .min(600);
    eprintln!("session fuzz: FARE_FUZZ_SEED={seed} FARE_SESSION_FUZZ_SECS={secs}");
    // A first session so that the baseline includes one peer's worth of state.
    let mut peer = RawPeer::reconnect(b, AGENT, HOSTILE_AS, HOSTILE_ID, NH)?;
    peer.announce([198, 51, 100])?;
    routes_until(agent, "baseline", |r| {
        r.iter().any(|p| p == "198.51.100.0/24")
    })?;
    drop(peer);
    let (rss0, fds0) = usage(pid)?;
    let watch = Watch::start(socket);
    let started = Instant::now();

    wrong_state(b)?;
    attribute_extremes(agent, b)?;
    cycles(b)?;
    storm(agent, b)?;
    let episodes = random_sequences(agent, b, seed, Duration::from_secs(secs))?;

    ensure!(
        matches!(agent.child.try_wait(), Ok(None)),
        "the agent exited"
    );
    routes_until(agent, "FRR's routes at the end", frr_routes_kept)?;
    let (calls, failures, frr_down, slowest) = watch.finish();
    // Let the last torn-down session's buffers go before measuring.
    std::thread::sleep(Duration::from_secs(1));
    let (rss1, fds1) = usage(pid)?;
    eprintln!(
        "session fuzz: {:.0} s, {episodes} random episodes; management API {calls} calls, \
         {failures} failed, slowest {slowest} ms; FRR not Established in {frr_down} polls; \
         RSS {rss0} -> {rss1} KiB, fds {fds0} -> {fds1}",
        started.elapsed().as_secs_f64()
    );
    ensure!(
        calls > 0 && failures == 0,
        "management API failed {failures} of {calls} calls"
    );
    ensure!(
        frr_down == 0,
        "FRR's session was not Established in {frr_down} polls"
    );
    // Bounded memory: a storm of a few thousand routes is gone again; what is left may be
    // allocator slack, not growth per message (32 MiB or half again, whichever is larger).
    ensure!(
        rss1 <= rss0 + (rss0 / 2).max(32 * 1024),
        "agent RSS grew from {rss0} to {rss1} KiB"
    );
    ensure!(
        fds1 <= fds0 + 4,
        "agent file descriptors grew from {fds0} to {fds1}"
    );
    Ok(())
}

/// Sends `msg` on a new connection after `handshake` steps and expects `want`.
fn expect_notification(
    b: &Netns,
    what: &str,
    handshake: u8,
    msg: &[u8],
    want: (u8, u8),
) -> Result<()> {
    let mut p = if handshake == 2 {
        let mut p = RawPeer::reconnect(b, AGENT, HOSTILE_AS, HOSTILE_ID, NH)?;
        p.announce([198, 51, 100])?;
        p
    } else {
        let mut p = accepted(b)?;
        if handshake == 1 {
            // OPEN sent and answered with a KEEPALIVE: the agent is in OpenConfirm.
            p.send(&open(HOSTILE_AS, HOSTILE_ID))?;
            let got = wait_for(Duration::from_secs(10), || {
                p.rx.recv_timeout(Duration::from_millis(50))
                    .ok()
                    .filter(|(t, _)| *t == KEEPALIVE)
            });
            ensure!(got.is_some(), "{what}: no KEEPALIVE after our OPEN");
        }
        p
    };
    p.send(msg)?;
    let got = p.notification_within(Duration::from_secs(10));
    ensure!(
        got.as_ref().map(|(c, s, _)| (*c, *s)) == Some(want),
        "{what}: NOTIFICATION {got:?}, expected {want:?}"
    );
    ensure!(
        p.closed_within(Duration::from_secs(5)),
        "{what}: connection not closed after the NOTIFICATION"
    );
    eprintln!("wrong state: {what} -> NOTIFICATION {}/{}", want.0, want.1);
    Ok(())
}

/// A connection the agent accepted: its OPEN arrived (it is in OpenSent). A connection
/// it refuses (its previous session still winding down) is retried, bounded.
fn accepted(b: &Netns) -> Result<RawPeer> {
    for _ in 0..40 {
        if let Ok(p) = RawPeer::connect_tcp(b, AGENT, HOSTILE_AS, NH) {
            if let Ok((OPEN, _)) = p.rx.recv_timeout(Duration::from_secs(3)) {
                return Ok(p);
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    bail!("the agent accepted no connection from the raw peer")
}

fn wrong_state(b: &Netns) -> Result<()> {
    let upd = update(&[], &[origin(0), as_path(&[HOSTILE_AS]), next_hop(NH)], &[]);
    expect_notification(b, "UPDATE before OPEN", 0, &upd, (5, 1))?;
    expect_notification(b, "KEEPALIVE before OPEN", 0, &keepalive(), (5, 1))?;
    let rr = message(ROUTE_REFRESH, &[0, 1, 0, 1]);
    expect_notification(b, "ROUTE-REFRESH before OPEN", 0, &rr, (5, 1))?;
    expect_notification(b, "UPDATE in OpenConfirm", 1, &upd, (5, 2))?;
    expect_notification(
        b,
        "OPEN while Established",
        2,
        &open(HOSTILE_AS, HOSTILE_ID),
        (5, 3),
    )
}

fn attribute_extremes(agent: &Agent, b: &Netns) -> Result<()> {
    const P: &str = "198.51.100.0/24";
    let mut p = RawPeer::reconnect(b, AGENT, HOSTILE_AS, HOSTILE_ID, NH)?;
    let nlri = prefixes(&[([198, 51, 100, 0], 24)]);
    let good = p.good_attrs();
    let cases: [(&str, Vec<Vec<u8>>); 4] = [
        (
            "zero-length ORIGIN",
            vec![attr(0x40, 1, &[]), good[1].clone(), good[2].clone()],
        ),
        (
            "zero-length NEXT_HOP",
            vec![good[0].clone(), good[1].clone(), attr(0x40, 3, &[])],
        ),
        (
            "zero-length MED",
            [good.clone(), vec![attr(0x80, 4, &[])]].concat(),
        ),
        ("no attributes at all", vec![]),
    ];
    for (what, attrs) in cases {
        p.announce([198, 51, 100])?;
        routes_until(agent, what, |r| r.iter().any(|x| x == P))?;
        let before = neighbor(agent, HOSTILE)["malformed_updates"]
            .as_u64()
            .unwrap_or(0);
        p.send(&update(&[], &attrs, &nlri))?;
        // Treat-as-withdraw: the prefix goes, the session stays, the counter moves.
        routes_until(agent, what, |r| {
            !r.iter().any(|x| x == P) && frr_routes_kept(r)
        })?;
        // The neighbor view's counters follow the speaker's with a short delay.
        let counted = wait_for(Duration::from_secs(5), || {
            let n = neighbor(agent, HOSTILE);
            (n["state"] == "Established" && n["malformed_updates"].as_u64() == Some(before + 1))
                .then_some(())
        });
        ensure!(
            counted.is_some(),
            "{what}: want Established and malformed_updates {}: {}",
            before + 1,
            neighbor(agent, HOSTILE)
        );
        eprintln!("attribute: {what} -> treat-as-withdraw, session up");
    }
    // An unknown optional transitive attribute filling the message to exactly 4096.
    let mut attrs = p.good_attrs();
    let used = 19 + 4 + attrs.concat().len() + nlri.len() + 4;
    attrs.push(attr(0xd0, 250, &vec![0x5a; 4096 - used]));
    let big = update(&[], &attrs, &nlri);
    ensure!(big.len() == 4096, "built {} octets", big.len());
    p.send(&big)?;
    routes_until(agent, "4096-octet UPDATE", |r| r.iter().any(|x| x == P))?;
    eprintln!("attribute: 4000-octet unknown optional transitive -> route accepted");
    // One octet more is refused: 1/2 with the length field as data.
    let mut attrs = p.good_attrs();
    attrs.push(attr(0xd0, 250, &vec![0x5a; 4097 - used]));
    let too_big = update(&[], &attrs, &nlri);
    p.send(&too_big)?;
    let got = p.notification_within(Duration::from_secs(10));
    ensure!(
        got == Some((1, 2, 4097u16.to_be_bytes().to_vec())),
        "4097-octet UPDATE: NOTIFICATION {got:?}, expected 1/2 with data [16, 1]"
    );
    routes_until(agent, "after the reset", |r| {
        !r.iter().any(|x| x == P) && frr_routes_kept(r)
    })?;
    eprintln!("attribute: 4097-octet message -> NOTIFICATION 1/2, routes gone");
    Ok(())
}

/// Rapid OPEN / NOTIFICATION cycles and abrupt closes; the agent then still peers.
fn cycles(b: &Netns) -> Result<()> {
    let mut done = 0;
    for i in 0..20 {
        let Ok(mut p) = RawPeer::connect_tcp(b, AGENT, HOSTILE_AS, NH) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let _ = p.send(&open(HOSTILE_AS, HOSTILE_ID));
        if i % 2 == 0 {
            let _ = wait_for(Duration::from_secs(2), || {
                p.rx.recv_timeout(Duration::from_millis(20))
                    .ok()
                    .filter(|(t, _)| *t == OPEN)
            });
            // Cease / administrative shutdown.
            let _ = p.send(&message(NOTIFICATION, &[6, 2]));
        }
        drop(p);
        done += 1;
    }
    let p = RawPeer::reconnect(b, AGENT, HOSTILE_AS, HOSTILE_ID, NH)?;
    drop(p);
    eprintln!("cycles: {done} OPEN/NOTIFICATION or OPEN/close cycles, then a clean session");
    Ok(())
}

/// 4000 /24s announced in packed UPDATEs, withdrawn; then 4000 never announced withdrawn.
fn storm(agent: &Agent, b: &Netns) -> Result<()> {
    const N: u32 = 4000;
    let mut p = RawPeer::reconnect(b, AGENT, HOSTILE_AS, HOSTILE_ID, NH)?;
    let storm: Vec<([u8; 4], u8)> = (0..N)
        .map(|i| ([100, 64 + (i >> 8) as u8, i as u8, 0], 24))
        .collect();
    let t = Instant::now();
    for chunk in storm.chunks(900) {
        p.send(&update(&[], &p.good_attrs(), &prefixes(chunk)))?;
    }
    let n = N as usize;
    routes_until(agent, "storm", |r| r.len() == n + FRR_ROUTES.len())?;
    let learned_in = t.elapsed();
    for chunk in storm.chunks(900) {
        p.send(&update(&prefixes(chunk), &[], &[]))?;
    }
    routes_until(agent, "storm withdrawn", |r| r.len() == FRR_ROUTES.len())?;
    let before = neighbor(agent, HOSTILE)["malformed_updates"].as_u64();
    let never: Vec<([u8; 4], u8)> = (0..N)
        .map(|i| ([100, 96 + (i >> 8) as u8, i as u8, 0], 24))
        .collect();
    for chunk in never.chunks(900) {
        p.send(&update(&prefixes(chunk), &[], &[]))?;
    }
    p.announce([198, 51, 100])?;
    let r = routes_until(agent, "after withdrawing the never-announced", |r| {
        r.iter().any(|x| x == "198.51.100.0/24")
    })?;
    // Give the counters time to show a malformed count, if there were one.
    std::thread::sleep(Duration::from_secs(2));
    let n = neighbor(agent, HOSTILE);
    ensure!(
        r.len() == FRR_ROUTES.len() + 1
            && n["state"] == "Established"
            && n["malformed_updates"].as_u64() == before,
        "withdrawals of routes never announced changed something: {} routes, {n}",
        r.len()
    );
    eprintln!(
        "storm: {N} prefixes learned in {:.1} s, withdrawn; {N} never announced withdrawn: no effect",
        learned_in.as_secs_f64()
    );
    Ok(())
}

/// One random attribute: any flags and type, zero, small or huge length.
fn random_attr(rng: &mut Rng) -> Vec<u8> {
    let flags = (rng.next() as u8) & 0xe0;
    let kind = match rng.below(4) {
        0 => rng.below(40) as u8,
        1 => [1, 2, 3, 4, 5, 8, 14, 15, 16, 32][rng.below(10) as usize],
        _ => rng.next() as u8,
    };
    let len = match rng.below(4) {
        0 => 0usize,
        1 => rng.below(8) as usize,
        2 => rng.below(64) as usize,
        _ => rng.below(1500) as usize,
    };
    attr(flags, kind, &rng.bytes(len))
}

/// One random well-framed message (never longer than 4096 octets).
fn random_message(rng: &mut Rng, peer: &RawPeer) -> Vec<u8> {
    match rng.below(10) {
        0..=5 => {
            let mut attrs = if rng.below(2) == 0 {
                peer.good_attrs()
            } else {
                vec![]
            };
            for _ in 0..rng.below(4) {
                attrs.push(random_attr(rng));
            }
            let n = rng.below(20) as u32;
            let nlri: Vec<([u8; 4], u8)> = (0..n)
                .map(|i| ([100, 128 + rng.below(4) as u8, i as u8, 0], 24))
                .collect();
            let withdrawn = if rng.below(3) == 0 {
                prefixes(&nlri)
            } else {
                vec![]
            };
            let m = update(&withdrawn, &attrs, &prefixes(&nlri));
            if m.len() <= 4096 {
                m
            } else {
                keepalive()
            }
        }
        6 => {
            let mut body = vec![0, 1, rng.below(3) as u8, 1];
            let extra = rng.below(3) as usize * 8;
            body.extend(rng.bytes(extra));
            message(ROUTE_REFRESH, &body)
        }
        7 => {
            let n = rng.below(40) as usize;
            message(UPDATE, &rng.bytes(n))
        }
        8 => open(HOSTILE_AS, HOSTILE_ID),
        _ => keepalive(),
    }
}

/// Random sequences for `budget`: each episode establishes a session and sends up to 50
/// random messages; a NOTIFICATION back must be one a receiver may send, then the
/// connection closes. Returns the number of episodes.
fn random_sequences(agent: &Agent, b: &Netns, seed: u64, budget: Duration) -> Result<u64> {
    let mut rng = Rng(seed);
    let start = Instant::now();
    let mut episodes = 0;
    let mut resets = std::collections::BTreeMap::new();
    while start.elapsed() < budget && episodes < 1000 {
        let mut p = RawPeer::reconnect(b, AGENT, HOSTILE_AS, HOSTILE_ID, NH)?;
        episodes += 1;
        for _ in 0..rng.below(50) + 1 {
            let m = random_message(&mut rng, &p);
            if p.send(&m).is_err() {
                break;
            }
        }
        if let Some((code, subcode, _)) = p.notification_within(Duration::from_millis(300)) {
            ensure!(
                receiver_may_send(code, subcode),
                "seed {seed} episode {episodes}: NOTIFICATION {code}/{subcode} is not one a receiver sends"
            );
            ensure!(
                p.closed_within(Duration::from_secs(5)),
                "seed {seed} episode {episodes}: connection open after NOTIFICATION {code}/{subcode}"
            );
            *resets.entry((code, subcode)).or_insert(0u32) += 1;
        }
        ensure!(
            matches!(
                neighbor(agent, FRR_ADDR)["state"].as_str(),
                Some("Established")
            ),
            "seed {seed} episode {episodes}: FRR's session is down"
        );
    }
    eprintln!(
        "random: {episodes} episodes, NOTIFICATIONs received (code/subcode: count) {resets:?}"
    );
    Ok(episodes)
}
