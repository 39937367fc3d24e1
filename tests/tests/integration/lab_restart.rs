//! `fare lab restart NODE --kill` on an XDP lab: the ingress leaf's agent is killed with
//! SIGKILL and started again while its hosts send traffic; the leaf's XDP program and maps
//! stay pinned (under the node's namespace name) in between, so not one packet of that
//! traffic is lost, and the new agent adopts the pinned groups.

use anyhow::{ensure, Result};
use fare_integration::lab::Lab;
use fare_integration::{have_root, have_tool};
use std::path::Path;
use std::time::Duration;

#[test]
fn lab_agent_kill_and_restart_keeps_xdp_forwarding() -> Result<()> {
    let test = "lab_agent_kill_and_restart_keeps_xdp_forwarding";
    if !have_root(test) || !have_tool(test, "tc") || !have_tool(test, "nsenter") {
        return Ok(());
    }
    let (lab, _) = Lab::start(
        "topologies/arn-spine-leaf.yaml",
        "rs",
        &["--dataplane", "xdp", "--no-arn"],
    )?;
    let name = lab.name.clone();
    let pins = format!("/sys/fs/bpf/fare/farelab-{name}-leaf1");
    ensure!(
        Path::new(&pins).exists(),
        "no pins at {pins}: the agent is not sharing the host's bpffs"
    );
    // leaf1's hosts -> leaf2's, through leaf1's XDP program, while its agent restarts.
    let lab = std::sync::Arc::new(lab);
    let traffic = {
        let lab = lab.clone();
        std::thread::spawn(move || lab.traffic("leaf1", "leaf2", 40, 6, &[]))
    };
    std::thread::sleep(Duration::from_secs(2));
    let restart = lab.json("restart", &["leaf1", "--kill"]);
    let r = traffic
        .join()
        .map_err(|_| anyhow::anyhow!("traffic thread panicked"))??;
    restart?;
    let sent = r["totals"]["sent_packets"].as_u64().unwrap_or(0);
    let received = r["totals"]["received_packets"].as_u64().unwrap_or(0);
    eprintln!("{test}: sent {sent}, received {received} across the kill and restart");
    ensure!(sent > 0, "no traffic sent");
    // A few packets may still be in flight when the sink stops.
    ensure!(
        received as f64 >= 0.995 * sent as f64,
        "lost {} of {sent} packets across the agent restart",
        sent - received
    );
    let lab = std::sync::Arc::try_unwrap(lab).map_err(|_| anyhow::anyhow!("lab still shared"))?;
    lab.down()?;
    ensure!(!Path::new(&pins).exists(), "pins left after lab down");
    Ok(())
}

/// Every session of `nodes` Established (each as its agent reports it).
fn all_established(lab: &Lab, nodes: &[&str]) -> bool {
    nodes.iter().all(|n| {
        lab.show(n, "neighbors").is_ok_and(|v| {
            v.as_array()
                .is_some_and(|a| !a.is_empty() && a.iter().all(|s| s["state"] == "Established"))
        })
    })
}

/// The id of the program in a pinned XDP link and of a pinned program, as bpftool
/// reads them.
fn bpftool_id(kind: &str, path: &str) -> Result<u64> {
    let out = std::process::Command::new("bpftool")
        .args(["--json", kind, "show", "pinned", path])
        .output()?;
    ensure!(
        out.status.success(),
        "bpftool {kind} show pinned {path} failed"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let key = if kind == "link" { "prog_id" } else { "id" };
    v[key]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("bpftool {kind} {path}: no {key}"))
}

/// A leaf's agent killed with SIGKILL and started again: its sessions are Established on
/// both ends again within a bound, because the new agent keeps the verified program of
/// the pinned links (same object, same load-time globals) instead of loading it again
/// (a verifier pass of 5-30 s on a loaded machine, with no BGP until it is done).
#[test]
fn lab_agent_kill_sessions_back_quickly() -> Result<()> {
    let test = "lab_agent_kill_sessions_back_quickly";
    if !have_root(test)
        || !have_tool(test, "tc")
        || !have_tool(test, "nsenter")
        || !have_tool(test, "bpftool")
    {
        return Ok(());
    }
    let (lab, _) = Lab::start(
        "topologies/arn-spine-leaf.yaml",
        "rk",
        &["--dataplane", "xdp", "--no-arn"],
    )?;
    let pins = format!("/sys/fs/bpf/fare/farelab-{}-leaf1", lab.name);
    let link = format!("{pins}/links/eth1");
    let programs: Vec<_> = std::fs::read_dir(&pins)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("program-"))
        })
        .collect();
    ensure!(
        programs.len() == 1,
        "pinned programs of leaf1: {programs:?}"
    );
    let pinned = bpftool_id("prog", &programs[0].to_string_lossy())?;
    let before = bpftool_id("link", &link)?;
    ensure!(
        before == pinned,
        "link runs program {before}, pinned is {pinned}"
    );
    let nodes = ["leaf1", "spine1", "spine2"];
    ensure!(
        all_established(&lab, &nodes),
        "sessions not up before the kill"
    );

    let since = std::time::Instant::now();
    lab.json("restart", &["leaf1", "--kill"])?;
    // The bound is a correctness check (sessions come back by themselves), not a
    // benchmark: before the change a restart alone took 5-30 s here.
    let bound = Duration::from_secs(10);
    while !all_established(&lab, &nodes) {
        ensure!(
            since.elapsed() < bound,
            "sessions of leaf1 not Established on both ends {bound:?} after kill -9"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = since.elapsed();
    let flaps: Vec<u64> = ["spine1", "spine2"]
        .iter()
        .map(|s| {
            let v = lab.show(s, "neighbors")?;
            let row = v
                .as_array()
                .and_then(|a| a.iter().find(|n| n["remote_as"] == 65001))
                .ok_or_else(|| anyhow::anyhow!("{s} has no neighbor leaf1"))?;
            Ok(row["flaps"].as_u64().unwrap_or(0))
        })
        .collect::<Result<_>>()?;
    eprintln!(
        "{test}: sessions back {:.2} s after kill -9; spines' flaps {flaps:?}",
        took.as_secs_f64()
    );
    ensure!(
        flaps.iter().all(|&f| f >= 1),
        "the spines never saw the session drop: {flaps:?}"
    );
    let after = bpftool_id("link", &link)?;
    ensure!(
        after == before,
        "program replaced ({before} -> {after}) though unchanged"
    );
    lab.down()?;
    Ok(())
}
