//! What `fare show` and the metrics say after a change is what the agent does, between two
//! fare agents in namespaces (a leaf learning a spine's prefix over one link):
//! - a bandwidth set with `fare set bandwidth`, and one changed in the file and reloaded
//!   with SIGHUP, reach `fare show groups` and `fare_group_member_path_bandwidth_bytes_per_second`
//!   (not only the routes), and `fare show config` shows the reloaded file's value with
//!   no stale change line;
//! - a neighbor the peer shut down keeps the peer's RFC 8203 shutdown communication as its
//!   last error while the peer refuses the next connection attempts;
//! - `fare show neighbors` counts the prefixes accepted now and marks a drained neighbor;
//! - a SIGHUP that changes the originated prefixes advertises and withdraws them without
//!   resetting the session; one that adds a neighbor starts its session and one that
//!   removes it ends only that session (Cease / Peer De-configured) and withdraws its
//!   routes, the other session seeing nothing;
//! - a SIGHUP that changes a neighbor's policy, the session timers and the group mode
//!   resets no session and sends no UPDATE; one that changes a session parameter of one
//!   neighbor resets that session only (Cease / Other Configuration Change).

use anyhow::{bail, ensure, Context, Result};
use fare_integration::agent::{show, Agent, TempDir};
use fare_integration::{have_root, link, wait_until, Netns};
use serde_json::Value;
use std::time::Duration;

const LEARNED: &str = "198.51.100.0/24";
const METRICS_PORT: u16 = 9187;

fn leaf_config(socket: &std::path::Path, gbps: u32) -> String {
    format!(
        "name: leaf
router_id: 10.255.0.1
asn: 65001
management: {{socket: {}, metrics: \"10.0.1.1:{METRICS_PORT}\"}}
dataplane: {{kind: none}}
bgp: {{hold_time: 9, connect_retry_ms: 200, connect_retry_max_ms: 1000}}
neighbors:
  - {{address: 10.0.1.2, remote_as: 65100, interface: e1, bandwidth_gbps: {gbps}}}
",
        socket.display()
    )
}

fn spine_config(socket: &std::path::Path) -> String {
    spine_with(socket, &format!("{LEARNED}, 203.0.113.0/24"))
}

fn spine_with(socket: &std::path::Path, prefixes: &str) -> String {
    format!(
        "name: spine
router_id: 10.255.0.2
asn: 65100
management: {{socket: {}}}
dataplane: {{kind: none}}
bgp: {{hold_time: 9, connect_retry_ms: 200, connect_retry_max_ms: 1000}}
neighbors:
  - {{address: 10.0.1.1, remote_as: 65001, interface: s1, bandwidth_gbps: 400}}
prefixes: [{prefixes}]
",
        socket.display()
    )
}

/// Two namespaces linked, an agent in each, the leaf's session up and its group for
/// the spine's prefix installed.
struct Pair {
    leaf: Agent,
    /// Runs until the pair is dropped.
    _spine: Agent,
    dir: TempDir,
    ns: (Netns, Netns),
}

fn pair(tag: &str) -> Result<Pair> {
    let a = Netns::new(&format!("{tag}a"))?;
    let b = Netns::new(&format!("{tag}b"))?;
    link(&a, "e1", "10.0.1.1/30", &b, "s1", "10.0.1.2/30")?;
    let dir = TempDir::new(tag)?;
    let leaf = dir.start_agent(&a, "leaf", &leaf_config(&dir.0.join("leaf.sock"), 100))?;
    let spine = dir.start_agent(&b, "spine", &spine_config(&dir.0.join("spine.sock")))?;
    let up = wait_until(Duration::from_secs(30), || {
        member_bandwidths(&leaf).is_ok_and(|b| !b.is_empty())
    });
    if !up {
        bail!(
            "no group for {LEARNED}: {:?}\n{}",
            leaf.show("neighbors"),
            leaf.log_text()
        );
    }
    Ok(Pair {
        leaf,
        _spine: spine,
        dir,
        ns: (a, b),
    })
}

/// The bandwidths of the members of the leaf's group for LEARNED (`fare show groups`).
fn member_bandwidths(agent: &Agent) -> Result<Vec<f64>> {
    let groups = agent.show("groups")?;
    let g = groups
        .as_array()
        .and_then(|a| a.iter().find(|g| g["prefix"] == LEARNED))
        .context("no group")?;
    Ok(g["members"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|m| m["bandwidth_gbps"].as_f64())
                .collect()
        })
        .unwrap_or_default())
}

/// The value of `fare_group_member_path_bandwidth_bytes_per_second` for LEARNED's member,
/// read from the leaf's /metrics inside its namespace.
fn metric_bandwidth(ns: &Netns) -> Result<Option<f64>> {
    let url = format!("http://10.0.1.1:{METRICS_PORT}/metrics");
    let out = ns.exec("curl", &["-sf", "--max-time", "5", &url])?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let prefix =
        format!("fare_group_member_path_bandwidth_bytes_per_second{{prefix=\"{LEARNED}\",");
    Ok(text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok()))
}

/// Both views agree on `gbps` within `timeout`, else the error says what each showed.
fn views_show(p: &Pair, gbps: f64, timeout: Duration) -> Result<()> {
    let want_bytes = gbps * 1e9 / 8.0;
    let (mut shown, mut metric) = (vec![], None);
    let ok = wait_until(timeout, || {
        shown = member_bandwidths(&p.leaf).unwrap_or_default();
        metric = metric_bandwidth(&p.ns.0).ok().flatten();
        shown == [gbps] && metric == Some(want_bytes)
    });
    ensure!(
        ok,
        "want {gbps} Gbps: show groups {shown:?}, metric {metric:?} (bytes/s)"
    );
    Ok(())
}

fn sighup(agent: &Agent) {
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe {
        libc::kill(agent.child.id() as i32, libc::SIGHUP);
    }
}

#[test]
fn bandwidth_changes_reach_groups_metrics_and_config() -> Result<()> {
    if !have_root("bandwidth_changes_reach_groups_metrics_and_config") {
        return Ok(());
    }
    let p = pair("avbw")?;
    let sock = p.dir.0.join("leaf.sock");
    // One path: the link (100) caps what the spine sent (400).
    views_show(&p, 100.0, Duration::from_secs(10))?;
    let out = p.ns.0.fare(&[
        "set",
        "bandwidth",
        "--neighbor",
        "10.0.1.2",
        "25",
        "--socket",
        sock.to_str().unwrap_or_default(),
    ])?;
    ensure!(out.status.success(), "{out:?}");
    views_show(&p, 25.0, Duration::from_secs(5))?;
    let cfg = show(&sock, "config")?;
    ensure!(
        cfg["changes"]
            == serde_json::json!([
                "neighbor 10.0.1.2: bandwidth_gbps 25 set at run time (file: 100)"
            ]),
        "{cfg}"
    );
    // The file says 40 now; SIGHUP applies it.
    p.dir.write("leaf.yaml", &leaf_config(&sock, 40))?;
    sighup(&p.leaf);
    views_show(&p, 40.0, Duration::from_secs(5))?;
    let mut cfg = Value::Null;
    let reloaded = wait_until(Duration::from_secs(5), || {
        cfg = show(&sock, "config").unwrap_or_default();
        cfg["yaml"]
            .as_str()
            .is_some_and(|y| y.contains("bandwidth_gbps: 40.0"))
    });
    ensure!(reloaded, "{cfg}");
    ensure!(cfg["changes"] == serde_json::json!([]), "{cfg}");
    // A key that needs a restart is named, its old value still in force.
    p.dir.write(
        "leaf.yaml",
        &leaf_config(&sock, 40).replace("hold_time: 9", "hold_time: 9, link_poll_ms: 250"),
    )?;
    sighup(&p.leaf);
    let named = wait_until(Duration::from_secs(5), || {
        cfg = show(&sock, "config").unwrap_or_default();
        cfg["changes"]
            == serde_json::json!([
                "changed in the file, in force after a restart: bgp.link_poll_ms"
            ])
    });
    ensure!(named, "{cfg}");
    ensure!(
        cfg["yaml"]
            .as_str()
            .is_some_and(|y| !y.contains("link_poll_ms: 250")),
        "{cfg}"
    );
    views_show(&p, 40.0, Duration::from_secs(1))?;
    Ok(())
}

#[test]
fn shutdown_message_stays_the_last_error_and_table_counts() -> Result<()> {
    if !have_root("shutdown_message_stays_the_last_error_and_table_counts") {
        return Ok(());
    }
    let p = pair("avsh")?;
    let leaf_sock = p.dir.0.join("leaf.sock");
    let spine_sock = p.dir.0.join("spine.sock");
    let n = &p.leaf.show("neighbors")?[0];
    // Two prefixes from the spine, accepted now.
    let accepted = wait_until(Duration::from_secs(5), || {
        p.leaf
            .show("neighbors")
            .is_ok_and(|v| v[0]["prefixes_accepted"] == 2)
    });
    ensure!(accepted, "{n}");
    // The text table: ACCEPTED is 2; a drained neighbor is marked.
    let out = p.ns.0.fare(&[
        "drain",
        "10.0.1.2",
        "--socket",
        leaf_sock.to_str().unwrap_or_default(),
    ])?;
    ensure!(out.status.success(), "{out:?}");
    let out = p.ns.0.fare(&[
        "show",
        "neighbors",
        "--socket",
        leaf_sock.to_str().unwrap_or_default(),
    ])?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    ensure!(rows.len() == 2, "{text}");
    ensure!(rows[0][6] == "ACCEPTED", "{text}");
    ensure!(
        rows[1][2] == "Established (drained)" && rows[1][6] == "2",
        "{text}"
    );

    // The spine shuts the session down with a message; the leaf keeps reading it while
    // its next attempts are refused.
    let message = "maintenance 42";
    let out = p.ns.1.fare(&[
        "neighbor",
        "shutdown",
        "10.0.1.1",
        "--message",
        message,
        "--socket",
        spine_sock.to_str().unwrap_or_default(),
    ])?;
    ensure!(out.status.success(), "{out:?}");
    let has_message = |v: &Value| {
        v["last_error"]
            .as_str()
            .is_some_and(|e| e.contains(message))
    };
    let got = wait_until(Duration::from_secs(10), || {
        show(&leaf_sock, "neighbors").is_ok_and(|v| has_message(&v[0]))
    });
    ensure!(got, "{:?}", show(&leaf_sock, "neighbors"));
    // connect_retry 200 ms doubling to 1 s: several refused attempts in 5 s.
    let mut seen = Vec::new();
    for _ in 0..25 {
        std::thread::sleep(Duration::from_millis(200));
        let v = show(&leaf_sock, "neighbors")?;
        seen.push(v[0]["last_error"].clone());
        ensure!(has_message(&v[0]), "overwritten: {seen:?}");
    }
    let v = &show(&leaf_sock, "neighbors")?[0];
    ensure!(
        v["prefixes_accepted"] == 0 && v["state"] != "Established",
        "{v}"
    );
    Ok(())
}

/// The prefixes of the leaf's BGP routes.
fn learned(sock: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = show(sock, "routes")
        .ok()
        .and_then(|r| r.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|r| r["source"] == "bgp")
        .filter_map(|r| r["prefix"].as_str().map(String::from))
        .collect();
    v.sort();
    v
}

#[test]
fn reload_changes_prefixes_without_a_session_reset() -> Result<()> {
    if !have_root("reload_changes_prefixes_without_a_session_reset") {
        return Ok(());
    }
    let p = pair("avpx")?;
    let leaf_sock = p.dir.0.join("leaf.sock");
    let spine_sock = p.dir.0.join("spine.sock");
    let both = wait_until(Duration::from_secs(10), || {
        learned(&leaf_sock) == ["198.51.100.0/24", "203.0.113.0/24"]
    });
    ensure!(both, "{:?}", learned(&leaf_sock));
    let before = &show(&leaf_sock, "neighbors")?[0];
    let spine_before = &show(&spine_sock, "neighbors")?[0];
    p.dir.write(
        "spine.yaml",
        &spine_with(&spine_sock, &format!("{LEARNED}, 192.0.2.0/24")),
    )?;
    sighup(&p._spine);
    let moved = wait_until(Duration::from_secs(10), || {
        learned(&leaf_sock) == ["192.0.2.0/24", "198.51.100.0/24"]
    });
    ensure!(moved, "{:?}", learned(&leaf_sock));
    let after = &show(&leaf_sock, "neighbors")?[0];
    let spine_after = &show(&spine_sock, "neighbors")?[0];
    for (b, a) in [(before, after), (spine_before, spine_after)] {
        ensure!(
            a["state"] == "Established" && a["flaps"] == b["flaps"],
            "session reset: {b} -> {a}"
        );
        ensure!(
            a["uptime_seconds"].as_u64() >= b["uptime_seconds"].as_u64(),
            "{b} -> {a}"
        );
    }
    // The spine's own view: the new prefix local, the old one gone, nothing pending.
    let routes = show(&spine_sock, "routes")?;
    let local: Vec<&str> = routes
        .as_array()
        .map(|r| {
            r.iter()
                .filter(|r| r["source"] == "local")
                .filter_map(|r| r["prefix"].as_str())
                .collect()
        })
        .unwrap_or_default();
    ensure!(local == ["192.0.2.0/24", LEARNED], "{routes}");
    let cfg = show(&spine_sock, "config")?;
    ensure!(cfg["changes"] == serde_json::json!([]), "{cfg}");
    Ok(())
}

/// (flaps, UPDATEs received, NOTIFICATIONs received, state) of the first neighbor at
/// `sock`.
fn counts(sock: &std::path::Path) -> Result<Vec<Value>> {
    let n = &show(sock, "neighbors")?[0];
    Ok([
        "flaps",
        "updates_received",
        "notifications_received",
        "state",
    ]
    .iter()
    .map(|k| n[*k].clone())
    .collect())
}

/// Writes the leaf's file with `extra` neighbor lines (or without its spine), sends SIGHUP
/// and waits until `fare show neighbors` lists `n` neighbors.
fn reload_leaf(p: &Pair, text: &str, n: usize) -> Result<()> {
    p.dir.write("leaf.yaml", text)?;
    sighup(&p.leaf);
    let sock = p.dir.0.join("leaf.sock");
    let listed = wait_until(Duration::from_secs(5), || {
        show(&sock, "neighbors").is_ok_and(|v| v.as_array().is_some_and(|a| a.len() == n))
    });
    ensure!(listed, "{:?}", show(&sock, "neighbors"));
    Ok(())
}

#[test]
fn reload_adds_and_removes_neighbors_touching_no_other_session() -> Result<()> {
    if !have_root("reload_adds_and_removes_neighbors_touching_no_other_session") {
        return Ok(());
    }
    let p = pair("avnb")?;
    let leaf_sock = p.dir.0.join("leaf.sock");
    let spine_sock = p.dir.0.join("spine.sock");
    let base = leaf_config(&leaf_sock, 100);
    let spine_before = counts(&spine_sock)?;
    // Add a second, passive neighbor that never comes up, then remove it: the spine's
    // session sees nothing (no flap, no UPDATE, no NOTIFICATION).
    let ghost = "  - {address: 10.0.2.2, remote_as: 65200, passive: true}\n";
    reload_leaf(&p, &format!("{base}{ghost}"), 2)?;
    let cfg = show(&leaf_sock, "config")?;
    ensure!(cfg["changes"] == serde_json::json!([]), "{cfg}");
    ensure!(
        cfg["yaml"].as_str().is_some_and(|y| y.contains("10.0.2.2")),
        "{cfg}"
    );
    reload_leaf(&p, &base, 1)?;
    std::thread::sleep(Duration::from_millis(500));
    ensure!(
        counts(&spine_sock)? == spine_before,
        "{spine_before:?} -> {:?}",
        counts(&spine_sock)?
    );
    // An IPv6 neighbor needs a listener this agent did not open: named, not applied.
    let v6 = "  - {address: 2001:db8::2, remote_as: 65300}\n";
    p.dir.write("leaf.yaml", &format!("{base}{v6}"))?;
    sighup(&p.leaf);
    let mut cfg = Value::Null;
    let named = wait_until(Duration::from_secs(5), || {
        cfg = show(&leaf_sock, "config").unwrap_or_default();
        cfg["changes"]
            == serde_json::json!([
                "changed in the file, in force after a restart: neighbors[2001:db8::2] \
                 (added: no IPv6 listener was opened at start (no such neighbor then))"
            ])
    });
    ensure!(named, "{cfg}");
    // A link-local neighbor whose interface is not here: named with what is missing.
    let ll = "  - {address: 'fe80::2', remote_as: 65300, interface: nosuch0}\n";
    p.dir.write("leaf.yaml", &format!("{base}{ll}"))?;
    sighup(&p.leaf);
    let named = wait_until(Duration::from_secs(5), || {
        cfg = show(&leaf_sock, "config").unwrap_or_default();
        cfg["changes"]
            == serde_json::json!([
                "changed in the file, in force after a restart: neighbors[fe80::2] (added: \
                 neighbor fe80::2: interface nosuch0 does not exist in this network namespace; \
                 it is the link of the link-local address)"
            ])
    });
    ensure!(named, "{cfg}");

    // Remove the spine: Cease / Peer De-configured there, its routes gone here.
    let cut = base
        .find("neighbors:")
        .context("neighbors in the leaf's file")?;
    reload_leaf(&p, &base[..cut], 0)?;
    let withdrawn = wait_until(Duration::from_secs(10), || learned(&leaf_sock).is_empty());
    ensure!(withdrawn, "{:?}", learned(&leaf_sock));
    let mut n = Value::Null;
    let told = wait_until(Duration::from_secs(10), || {
        n = show(&spine_sock, "neighbors")
            .map(|v| v[0].clone())
            .unwrap_or_default();
        n["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("received NOTIFICATION") && e.contains("6/3"))
    });
    ensure!(told, "{n}");
    ensure!(n["state"] != "Established", "{n}");

    // Add it back: the session comes up again and its routes are learned.
    reload_leaf(&p, &base, 1)?;
    let back = wait_until(Duration::from_secs(20), || {
        learned(&leaf_sock) == ["198.51.100.0/24", "203.0.113.0/24"]
    });
    ensure!(
        back,
        "{:?} {:?}",
        show(&leaf_sock, "neighbors"),
        learned(&leaf_sock)
    );
    let cfg = show(&leaf_sock, "config")?;
    ensure!(cfg["changes"] == serde_json::json!([]), "{cfg}");
    Ok(())
}

/// The leaf's file with a second spine (`spine2`, in its own namespace) beside the first.
fn leaf_with_two(sock: &std::path::Path, first_extra: &str, bgp_extra: &str, fare: &str) -> String {
    leaf_config(sock, 100)
        .replace(
            "bandwidth_gbps: 100}",
            &format!("bandwidth_gbps: 100{first_extra}}}\n  - {{address: 10.0.2.2, remote_as: 65200, interface: e2}}"),
        )
        .replace("connect_retry_max_ms: 1000}", &format!("connect_retry_max_ms: 1000{bgp_extra}}}\n{fare}"))
}

/// (flaps, UPDATEs received, NOTIFICATIONs received, state) of every neighbor at `sock`,
/// by address.
fn all_counts(sock: &std::path::Path) -> Result<Vec<(String, Vec<Value>)>> {
    let list = show(sock, "neighbors")?;
    let mut out: Vec<(String, Vec<Value>)> = list
        .as_array()
        .context("neighbors")?
        .iter()
        .map(|n| {
            let keys = [
                "flaps",
                "updates_received",
                "notifications_received",
                "state",
            ];
            let v = keys.iter().map(|k| n[*k].clone()).collect();
            (n["address"].as_str().unwrap_or_default().to_string(), v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

#[test]
fn reload_changes_one_neighbor_and_timers_touching_nothing_else() -> Result<()> {
    if !have_root("reload_changes_one_neighbor_and_timers_touching_nothing_else") {
        return Ok(());
    }
    let p = pair("avch")?;
    let c = Netns::new("avchc")?;
    link(&p.ns.0, "e2", "10.0.2.1/30", &c, "s2", "10.0.2.2/30")?;
    let spine2 = format!(
        "name: spine2\nrouter_id: 10.255.0.3\nasn: 65200\nmanagement: {{socket: {}}}\n\
         dataplane: {{kind: none}}\n\
         bgp: {{hold_time: 9, connect_retry_ms: 200, connect_retry_max_ms: 1000}}\n\
         neighbors:\n  - {{address: 10.0.2.1, remote_as: 65001, interface: s2}}\n\
         prefixes: [192.0.2.0/24]\n",
        p.dir.0.join("spine2.sock").display()
    );
    let _spine2 = p.dir.start_agent(&c, "spine2", &spine2)?;
    let leaf_sock = p.dir.0.join("leaf.sock");
    let (spine_sock, spine2_sock) = (p.dir.0.join("spine.sock"), p.dir.0.join("spine2.sock"));
    reload_leaf(&p, &leaf_with_two(&leaf_sock, "", "", ""), 2)?;
    let both = wait_until(Duration::from_secs(20), || {
        learned(&leaf_sock) == ["192.0.2.0/24", LEARNED, "203.0.113.0/24"]
    });
    ensure!(
        both,
        "{:?} {:?}",
        learned(&leaf_sock),
        show(&leaf_sock, "neighbors")
    );
    std::thread::sleep(Duration::from_millis(500));
    let before = [
        all_counts(&leaf_sock)?,
        all_counts(&spine_sock)?,
        all_counts(&spine2_sock)?,
    ];

    // Policy of the first spine, the timers and the group mode: nothing is reset, no
    // UPDATE goes anywhere, nothing waits for a restart, and the groups spread by flow.
    let changed = leaf_with_two(
        &leaf_sock,
        ", summary_only: true",
        ", hold_time: 30",
        "fare: {group_mode: flow}\n",
    )
    .replacen("hold_time: 9, ", "", 1);
    reload_leaf(&p, &changed, 2)?;
    let mut cfg = Value::Null;
    let applied = wait_until(Duration::from_secs(5), || {
        cfg = show(&leaf_sock, "config").unwrap_or_default();
        cfg["yaml"]
            .as_str()
            .is_some_and(|y| y.contains("hold_time: 30"))
            && cfg["changes"] == serde_json::json!([])
    });
    ensure!(applied, "{cfg}");
    let mut groups = Value::Null;
    let flow = wait_until(Duration::from_secs(5), || {
        groups = show(&leaf_sock, "groups").unwrap_or_default();
        groups
            .as_array()
            .is_some_and(|g| !g.is_empty() && g.iter().all(|g| g["mode"] == "flow"))
    });
    ensure!(flow, "{groups}");
    std::thread::sleep(Duration::from_millis(500));
    let after = [
        all_counts(&leaf_sock)?,
        all_counts(&spine_sock)?,
        all_counts(&spine2_sock)?,
    ];
    ensure!(after == before, "{before:?} -> {after:?}");

    // A session parameter of the first spine: its session alone is reset, the spine told
    // why (Cease 6/6), and it comes back.
    reload_leaf(
        &p,
        &changed.replace(
            ", summary_only: true",
            ", summary_only: true, passive: true",
        ),
        2,
    )?;
    let mut n = Value::Null;
    let told = wait_until(Duration::from_secs(10), || {
        n = show(&spine_sock, "neighbors")
            .map(|v| v[0].clone())
            .unwrap_or_default();
        n["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("received NOTIFICATION") && e.contains("6/6"))
    });
    ensure!(told, "{n}");
    let back = wait_until(Duration::from_secs(20), || {
        learned(&leaf_sock) == ["192.0.2.0/24", LEARNED, "203.0.113.0/24"]
            && show(&spine_sock, "neighbors").is_ok_and(|v| v[0]["state"] == "Established")
    });
    ensure!(
        back,
        "{:?} {:?}",
        learned(&leaf_sock),
        show(&leaf_sock, "neighbors")
    );
    // The other session: no flap, no NOTIFICATION, on either end.
    let other = |c: &[(String, Vec<Value>)], addr: &str| {
        c.iter()
            .find(|x| x.0 == addr)
            .map(|x| (x.1[0].clone(), x.1[2].clone(), x.1[3].clone()))
    };
    let (leaf_now, spine2_now) = (all_counts(&leaf_sock)?, all_counts(&spine2_sock)?);
    ensure!(
        other(&leaf_now, "10.0.2.2") == other(&before[0], "10.0.2.2")
            && other(&spine2_now, "10.0.2.1") == other(&before[2], "10.0.2.1"),
        "{before:?} -> {leaf_now:?} {spine2_now:?}"
    );
    Ok(())
}

/// `fare reload`: what it did as values (changed, the keys waiting for a restart), and a
/// file that does not load refused with exit 2, the configuration in force unchanged.
#[test]
fn reload_command_reports_what_it_did_and_refuses_a_bad_file() -> Result<()> {
    if !have_root("reload_command_reports_what_it_did_and_refuses_a_bad_file") {
        return Ok(());
    }
    let p = pair("avrl")?;
    let sock = p.dir.0.join("leaf.sock");
    // The management socket is a file: no namespace needed, and the exit code is kept.
    let reload = || -> Result<(std::process::Output, Value)> {
        let out = std::process::Command::new(fare_integration::fare_bin()?)
            .args(["reload", "--json", "--socket"])
            .arg(&sock)
            .output()?;
        let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        Ok((out, v))
    };
    let (out, v) = reload()?;
    ensure!(out.status.success(), "{out:?}");
    ensure!(
        v == serde_json::json!({"changed": false, "pending": []}),
        "{v}"
    );
    let before = show(&sock, "config")?;
    p.dir.write(
        "leaf.yaml",
        &leaf_config(&sock, 100).replace("hold_time: 9", "hold_time: 1"),
    )?;
    let (out, _) = reload()?;
    ensure!(out.status.code() == Some(2), "{out:?}");
    ensure!(
        show(&sock, "config")? == before,
        "the configuration in force changed"
    );
    p.dir.write(
        "leaf.yaml",
        &leaf_config(&sock, 100).replace("hold_time: 9", "hold_time: 9, port: 1790"),
    )?;
    let (out, v) = reload()?;
    ensure!(out.status.success(), "{out:?}");
    ensure!(
        v == serde_json::json!({"changed": true, "pending": ["bgp.port"]}),
        "{v}"
    );
    Ok(())
}
