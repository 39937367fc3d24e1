//! Link bandwidth changes reach running agents without a restart, on the white paper's
//! asymmetric fabric in averaged mode (topologies/whitepaper-asymmetric.yaml):
//!
//! - `fare lab degrade Leaf1-Spine2=50` gives the two ends the new bandwidth through their
//!   management sockets: Leaf2's group toward Leaf1 goes from 3:3:4:4 to 3:3:2:2 with the
//!   same agent processes;
//! - SIGHUP after editing the configuration files of Leaf1 and Spine1 (link L3 at 50G)
//!   takes Leaf2 to 1:1:2:2, again with the same processes;
//! - `fare set bandwidth --interface` puts L3 back (3:3:4:4); an unknown neighbor is
//!   refused with exit code 2;
//! - with L7 set to 50G on Leaf2 behind the lab's back, `fare lab restore all` exits 1 and
//!   names Leaf2's group, live 3:3:2:4 against the model's 3:3:4:4 (`--no-check`: exit 0).
//!
//! Expected groups by hand (white paper §2.2.1, averaged mode): a spine advertises to
//! Leaf2 the sum of its links to Leaf1 divided by its 2 links to Leaf2, and Leaf2 weighs
//! each link by min(that, 100). Healthy: Spine1 (50+100)/2 = 75, Spine2 200/2 = 100 ->
//! 75:75:100:100 = 3:3:4:4. L2, L4 at 50: Spine2 100/2 = 50 -> 3:3:2:2. L3 at 50 instead:
//! Spine1 100/2 = 50 -> 50:50:100:100 = 1:1:2:2.

use anyhow::{bail, ensure, Context, Result};
use fare_integration::lab::{fare, Lab};
use fare_integration::{have_root, have_tool};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const PREFIX: &str = "192.0.2.0/24";

fn state(lab: &str) -> Result<Value> {
    let path = format!("/run/fare/lab/{lab}/state.json");
    Ok(serde_json::from_str(
        &std::fs::read_to_string(&path).context(path)?,
    )?)
}

fn pids(state: &Value) -> Vec<(String, u64)> {
    state["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| Some((a[0].as_str()?.to_string(), a[1].as_u64()?)))
        .collect()
}

/// (interface, far node, far address) of every port of `node`, link name -> that.
fn ports(state: &Value, node: &str) -> BTreeMap<String, (String, String, String)> {
    let mut out = BTreeMap::new();
    for n in state["plan"]["nodes"].as_array().into_iter().flatten() {
        if n["name"] != node {
            continue;
        }
        for p in n["ports"].as_array().into_iter().flatten() {
            out.insert(
                p["link"].as_str().unwrap_or("").to_string(),
                (
                    p["interface"].as_str().unwrap_or("").to_string(),
                    p["peer"].as_str().unwrap_or("").to_string(),
                    p["peer_addr"].as_str().unwrap_or("").to_string(),
                ),
            );
        }
    }
    out
}

/// Leaf2's group for PREFIX as sorted (far node, weight / gcd).
fn leaf2_group(lab: &str, state: &Value) -> Result<Vec<(String, u64)>> {
    let socket = format!("/run/fare/lab/{lab}/Leaf2.sock");
    let out = fare(&["show", "--socket", &socket, "groups", "--json"])?;
    ensure!(out.status.success(), "fare show groups on Leaf2 failed");
    let groups: Value = serde_json::from_slice(&out.stdout)?;
    let peer_of: BTreeMap<String, String> = ports(state, "Leaf2")
        .into_values()
        .map(|(i, peer, _)| (i, peer))
        .collect();
    let mut members = Vec::new();
    for g in groups.as_array().into_iter().flatten() {
        if g["prefix"] != PREFIX {
            continue;
        }
        for m in g["members"].as_array().into_iter().flatten() {
            let i = m["interface"].as_str().unwrap_or("");
            members.push((
                peer_of.get(i).cloned().unwrap_or_else(|| i.to_string()),
                m["weight"].as_u64().unwrap_or(0),
            ));
        }
    }
    let g = members.iter().fold(0, |a, m| gcd(a, m.1)).max(1);
    let mut members: Vec<(String, u64)> = members.into_iter().map(|(p, w)| (p, w / g)).collect();
    members.sort();
    Ok(members)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn expect(s1: u64, s2: u64) -> Vec<(String, u64)> {
    vec![
        ("Spine1".into(), s1),
        ("Spine1".into(), s1),
        ("Spine2".into(), s2),
        ("Spine2".into(), s2),
    ]
}

/// Polls Leaf2's group (at most 30 s) until it is `want`.
fn wait_group(lab: &str, state: &Value, want: &[(String, u64)], step: &str) -> Result<()> {
    let start = Instant::now();
    loop {
        let have = leaf2_group(lab, state)?;
        if have == want {
            eprintln!(
                "{step}: Leaf2 {PREFIX} = {have:?} after {:.2} s",
                start.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!("{step}: Leaf2 {PREFIX} is {have:?}, expected {want:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sets `bandwidth_gbps` of the neighbor at `addr` in an agent configuration written by
/// `fare lab up`, through the agent's own configuration type.
fn edit_bandwidth(path: &str, addr: &str, gbps: f64) -> Result<()> {
    let mut config = fare::agent::config::AgentConfig::load(std::path::Path::new(path))?;
    let neighbor = config
        .neighbors
        .iter_mut()
        .find(|n| n.address.to_string() == addr)
        .context("neighbor not in the configuration")?;
    neighbor.bandwidth_gbps = Some(gbps);
    std::fs::write(path, serde_norway::to_string(&config)?)?;
    Ok(())
}

#[test]
fn lab_bandwidth_changes_without_restart() -> Result<()> {
    let test = "lab_bandwidth_changes_without_restart";
    if !have_root(test) || !have_tool(test, "tc") || !have_tool(test, "nsenter") {
        return Ok(());
    }
    let (lab, _) = Lab::start(
        "topologies/whitepaper-asymmetric.yaml",
        "bw",
        &["--mode", "averaged", "--no-arn", "--converge-timeout", "60"],
    )?;
    let name = lab.name.clone();
    let st = state(&name)?;
    let before = pids(&st);
    ensure!(before.len() == 4, "agents: {before:?}");
    wait_group(&name, &st, &expect(3, 4), "healthy")?;

    // 1. fare lab degrade: the management API, no restart.
    let r = lab.json("degrade", &["Leaf1-Spine2=50", "--timeout", "30"])?;
    ensure!(
        r["restarted"].as_array().is_some_and(|a| a.is_empty()),
        "agents restarted: {r}"
    );
    ensure!(
        r["bandwidth_set"] == serde_json::json!(["Leaf1", "Spine2"]),
        "bandwidth given to {}",
        r["bandwidth_set"]
    );
    ensure!(r["convergence_s"].is_number(), "not converged: {r}");
    wait_group(&name, &st, &expect(3, 2), "degrade Leaf1-Spine2=50")?;
    ensure!(pids(&state(&name)?) == before, "agent pids changed");
    lab.json("restore", &["Leaf1-Spine2", "--timeout", "30"])?;
    wait_group(&name, &st, &expect(3, 4), "restore")?;

    // 2. SIGHUP: L3 at 50G in the files of both ends.
    let leaf1 = ports(&st, "Leaf1");
    let spine1 = ports(&st, "Spine1");
    let (leaf1_if, _, spine1_addr) = leaf1.get("L3").context("Leaf1 has no port on L3")?;
    let (spine1_if, _, leaf1_addr) = spine1.get("L3").context("Spine1 has no port on L3")?;
    let agents_dir = format!("/run/fare/lab/{name}/agents");
    edit_bandwidth(&format!("{agents_dir}/Leaf1.yaml"), spine1_addr, 50.0)?;
    edit_bandwidth(&format!("{agents_dir}/Spine1.yaml"), leaf1_addr, 50.0)?;
    for node in ["Leaf1", "Spine1"] {
        let pid = before
            .iter()
            .find(|p| p.0 == node)
            .map(|p| p.1)
            .context("no pid")?;
        // SAFETY: a plain kill(2) to the agent this test's lab started.
        let rc = unsafe { libc::kill(pid as i32, libc::SIGHUP) };
        ensure!(rc == 0, "kill -HUP {pid}");
    }
    wait_group(&name, &st, &expect(1, 2), "SIGHUP with L3 at 50G")?;
    ensure!(
        pids(&state(&name)?) == before,
        "agent pids changed on SIGHUP"
    );
    let log =
        std::fs::read_to_string(format!("/run/fare/lab/{name}/logs/Leaf1.log")).unwrap_or_default();
    ensure!(
        log.contains("SIGHUP"),
        "Leaf1's log does not mention the reload"
    );

    // 3. fare set bandwidth by interface, on both ends; a wrong neighbor is bad input.
    // `fare set bandwidth --socket NODE's ARGS...`.
    let set_bandwidth = |node: &str, args: &[&str]| {
        let socket = format!("/run/fare/lab/{name}/{node}.sock");
        let mut all = vec!["set", "bandwidth", "--socket", &socket];
        all.extend_from_slice(args);
        fare(&all)
    };
    for (node, ifname) in [("Leaf1", leaf1_if), ("Spine1", spine1_if)] {
        let out = set_bandwidth(node, &["--interface", ifname, "100"])?;
        ensure!(
            out.status.success(),
            "fare set bandwidth on {node}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    wait_group(&name, &st, &expect(3, 4), "fare set bandwidth 100")?;
    let out = set_bandwidth("Leaf1", &["--neighbor", "192.0.2.99", "10"])?;
    ensure!(
        out.status.code() == Some(2),
        "unknown neighbor: exit {:?}, {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(pids(&state(&name)?) == before, "agent pids changed");

    // 4. Fail loudly: L7 at 50G on Leaf2 behind the lab's back. Leaf2 now weighs L7 by
    // min(100, 50) = 50: 75:75:50:100 = 3:3:2:4, where the model (no change recorded) has
    // 3:3:4:4. The lab's check names that group and exits 1; --no-check exits 0.
    let leaf2 = ports(&st, "Leaf2");
    let (l7, _, _) = leaf2.get("L7").context("Leaf2 has no port on L7")?;
    let set = |gbps: &str| set_bandwidth("Leaf2", &["--interface", l7, gbps]);
    ensure!(set("50")?.status.success(), "fare set bandwidth on Leaf2");
    let check = |extra: &[&str]| {
        let mut args = vec!["lab", "restore", "all", "--name", &name, "--timeout", "3"];
        args.extend_from_slice(extra);
        fare(&args)
    };
    let out = check(&[])?;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(1),
        "restore with Leaf2 off the model: exit {:?}\n{err}",
        out.status.code()
    );
    let line = format!("Leaf2 {PREFIX}: live L5:3 L6:3 L7:2 L8:4 | model L5:3 L6:3 L7:4 L8:4");
    ensure!(err.contains(&line), "no `{line}` in:\n{err}");
    ensure!(err.contains("did not converge to the model"), "{err}");
    let out = check(&["--no-check"])?;
    ensure!(
        out.status.success(),
        "--no-check: exit {:?}",
        out.status.code()
    );
    ensure!(set("100")?.status.success(), "fare set bandwidth on Leaf2");
    let out = check(&[])?;
    ensure!(
        out.status.success(),
        "back on the model: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lab.down()
}
