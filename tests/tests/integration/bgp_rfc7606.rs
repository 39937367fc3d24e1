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
use fare_integration::bgp::{wait_for, Daemon, TempFile};
use fare_integration::rawbgp::{attr, keepalive, origin, update, RawPeer};
use fare_integration::{fare_bin, have_root, veth, Netns};
use std::process::Stdio;
use std::time::Duration;

const AGENT_AS: u32 = 65001;

fn nlri(prefix: [u8; 3]) -> Vec<u8> {
    vec![24, prefix[0], prefix[1], prefix[2]]
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
