//! `fare lab up --split`: the lab's split reaches the BGP-computed groups, not only the
//! static ones. With `--split flow` on an XDP lab every agent's groups report flow mode
//! through the management API, they are the model's groups (`fare weights`), and one UDP
//! flow from leaf1's host leaves through exactly one member of leaf1's group (read from
//! the per-member packet counters); a sprayed group would use both spines.

use anyhow::{ensure, Context, Result};
use fare_integration::agent::member_packets;
use fare_integration::lab::{fare, Lab};
use fare_integration::{delta, have_root, have_tool, repo_root};
use std::collections::{BTreeMap, BTreeSet};

const TOPOLOGY: &str = "topologies/arn-spine-leaf.yaml";

/// The model's prefixes per node: `fare weights TOPOLOGY --json`.
fn model_prefixes() -> Result<BTreeMap<String, BTreeSet<String>>> {
    let topo = repo_root().join(TOPOLOGY);
    let out = fare(&["weights", &topo.to_string_lossy(), "--json"])?;
    ensure!(out.status.success(), "fare weights failed");
    let groups: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut model: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for g in groups.as_array().context("weights --json: not a list")? {
        let node = g["node"].as_str().context("group without node")?;
        let prefix = g["prefix"].as_str().context("group without prefix")?;
        model
            .entry(node.to_string())
            .or_default()
            .insert(prefix.to_string());
    }
    Ok(model)
}

#[test]
fn lab_split_flow_reaches_the_bgp_groups() -> Result<()> {
    let test = "lab_split_flow_reaches_the_bgp_groups";
    if !have_root(test) || !have_tool(test, "tc") {
        return Ok(());
    }
    let model = model_prefixes()?;
    let (lab, _) = Lab::start(
        TOPOLOGY,
        "sf",
        &["--dataplane", "xdp", "--no-arn", "--split", "flow"],
    )?;
    for (node, prefixes) in &model {
        let groups = lab.show(node, "groups")?;
        let mut live = BTreeSet::new();
        for g in groups.as_array().context("show groups: not a list")? {
            let prefix = g["prefix"].as_str().unwrap_or("?").to_string();
            ensure!(
                g["mode"] == "flow",
                "{node} {prefix}: mode {} with --split flow",
                g["mode"]
            );
            live.insert(prefix);
        }
        ensure!(
            &live == prefixes,
            "{node}: groups {live:?}, the model's {prefixes:?}"
        );
    }
    // One flow, per flow hashed: one member of leaf1's two carries all of it.
    let group = |lab: &Lab| -> Result<Vec<u64>> {
        let groups = lab.show("leaf1", "groups")?;
        let g = groups
            .as_array()
            .and_then(|a| a.iter().find(|g| g["prefix"] == "198.51.100.0/24"))
            .context("leaf1 has no group for 198.51.100.0/24")?;
        Ok(member_packets(g))
    };
    let before = group(&lab)?;
    ensure!(
        before.len() == 2,
        "leaf1's group has {} members",
        before.len()
    );
    let r = lab.traffic("leaf1", "leaf2", 2, 2, &["--flows", "1"])?;
    let received = r["totals"]["received_packets"].as_u64().unwrap_or(0);
    let moved = delta(&group(&lab)?, &before);
    eprintln!("{test}: {received} packets received, per member of leaf1's group {moved:?}");
    ensure!(received > 0, "no packet of the flow arrived");
    let used = moved.iter().filter(|&&p| p > 0).count();
    ensure!(
        used == 1 && moved.iter().sum::<u64>() >= received,
        "one flow in flow mode went over {used} members: {moved:?}"
    );
    lab.down()
}

/// `--split flowlet` on a data plane without per-flow state (the kernel's) is refused
/// before anything is built: exit 2, one line naming the node, no namespace of the lab.
#[test]
fn lab_split_flowlet_refused_on_the_kernel_data_plane() -> Result<()> {
    let test = "lab_split_flowlet_refused_on_the_kernel_data_plane";
    if !have_root(test) {
        return Ok(());
    }
    let name = format!("fk{}", std::process::id());
    let topo = repo_root().join(TOPOLOGY);
    let out = fare(&[
        "lab",
        "up",
        &topo.to_string_lossy(),
        "--name",
        &name,
        "--dataplane",
        "kernel",
        "--split",
        "flowlet",
    ])?;
    // Whatever happens, nothing of this lab may stay.
    let _ = fare(&["lab", "down", "--name", &name]);
    ensure!(
        out.status.code() == Some(2),
        "lab up --split flowlet on the kernel: exit {:?}",
        out.status.code()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    ensure!(lines.len() == 1, "not one line: {err}");
    ensure!(
        ["leaf1", "spine1"].iter().any(|n| lines[0].contains(n)),
        "the refusal names no node: {}",
        lines[0]
    );
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()?;
    ensure!(
        !String::from_utf8_lossy(&netns.stdout).contains(&name),
        "a namespace of the refused lab exists"
    );
    Ok(())
}
