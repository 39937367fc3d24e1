//! ARN congestion shift between real `fare agent`s (topologies/arn-spine-leaf.yaml, static
//! groups, kernel data plane): 40 Mbit/s from leaf1's host to leaf2's host sprayed over
//! spine1 and spine2, then spine1's link to leaf2 is held at 10 % of its rate (10 Mbit/s
//! for the 20 Mbit/s spine1 carried) for 10 s.
//!
//! Asserted: leaf1 lowers its member via spine1 (`fare show arn` kind `shift`, never
//! taken out), its share settles — a bounded number of share changes over the 10 s
//! (counters `shares_cut` + `shares_restored`), few in the second half — and the
//! congested link stays busy (spine1 sends at least half of what its shaper lets
//! through toward leaf2) while part of the traffic moved to spine2.

use anyhow::{ensure, Result};
use fare_integration::arn_fabric::ArnFabric;
use fare_integration::{have_root, have_tool};
use serde_json::Value;
use std::time::{Duration, Instant};

const LEAF2_PREFIX: &str = "198.51.100.0/24";

fn changes(leaf1: &Value) -> u64 {
    ["shares_cut", "shares_restored"]
        .iter()
        .map(|c| leaf1["counters"][*c].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn arn_shift_settles_while_the_congested_link_stays_busy() -> Result<()> {
    let test = "arn_shift_settles_while_the_congested_link_stays_busy";
    if !have_root(test) || !have_tool(test, "tc") {
        return Ok(());
    }
    let mut lab = ArnFabric::up_static(
        "ash",
        "kernel",
        &["--arn-congestion", "shift", "--arn-clear-ms", "200"],
    )?;
    let healthy = lab.start_traffic_share(40_000, 60)?;
    ensure!(
        healthy > 0.3,
        "before congestion only {healthy:.2} via spine1"
    );

    let before = changes(&lab.show("leaf1", "arn")?);
    let busy_before = lab.tx("spine1", "eth2", "bytes")?;
    let t0 = Instant::now();
    lab.fare(&[
        "lab",
        "congest",
        "spine1-leaf2",
        "--percent",
        "10",
        "--name",
        lab.name(),
    ])?;
    // Ten one-second samples: the share of leaf1's traffic via spine1, leaf1's member
    // state and its share changes so far.
    let mut samples: Vec<(f64, u64, Vec<Value>)> = Vec::new();
    while t0.elapsed() < Duration::from_secs(10) && samples.len() < 12 {
        let share = lab.spine1_share(Duration::from_secs(1))?;
        let leaf1 = lab.show("leaf1", "arn")?;
        let removed: Vec<Value> = leaf1["removed"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["prefix"] == LEAF2_PREFIX)
            .collect();
        samples.push((share, changes(&leaf1) - before, removed));
    }
    let busy = lab.tx("spine1", "eth2", "bytes")? - busy_before;
    let held = t0.elapsed().as_secs_f64();
    lab.fare(&["lab", "restore", "spine1-leaf2", "--name", lab.name()])?;
    let report: Vec<String> = samples
        .iter()
        .map(|(s, c, r)| {
            format!(
                "share {s:.2} changes {c} {:?}",
                r.first().map(|r| &r["reason"])
            )
        })
        .collect();

    eprintln!("{test}: {held:.1} s congested, spine1 -> leaf2 {busy} bytes, before {healthy:.2} via spine1: {report:#?}");
    // It reacted, with the shift (the member stays in service, never taken out).
    ensure!(
        samples.iter().any(|(_, c, _)| *c >= 1),
        "leaf1 never shifted: {report:#?}"
    );
    for (_, _, removed) in &samples {
        for r in removed {
            let kinds = r["kinds"].as_array().cloned().unwrap_or_default();
            ensure!(
                kinds.iter().all(|k| k == "shift"),
                "a member was taken out instead of shifted: {r}"
            );
        }
    }
    // Settles: a bounded number of changes (the rule makes ~7 to settle and a probe of a
    // few after the 5 s memory), few in the second half.
    let total = samples.last().map_or(0, |s| s.1);
    let half = samples.get(samples.len() / 2).map_or(0, |s| s.1);
    ensure!(
        total <= 24,
        "{total} share changes in {held:.1} s: {report:#?}"
    );
    ensure!(
        total - half <= 10,
        "{} changes in the second half: {report:#?}",
        total - half
    );
    // Moved part of the traffic, not all of it, in the last seconds.
    let tail: Vec<f64> = samples.iter().rev().take(4).map(|s| s.0).collect();
    let mean = tail.iter().sum::<f64>() / tail.len().max(1) as f64;
    ensure!(
        mean < healthy * 0.9 && mean > 0.03,
        "share via spine1 at the end {mean:.2} (before {healthy:.2}): {report:#?}"
    );
    // The congested link stays busy: at least half of what 10 Mbit/s carries.
    let capacity = 10e6 / 8.0 * held;
    ensure!(
        busy as f64 >= capacity * 0.5,
        "spine1 sent {busy} bytes toward leaf2 in {held:.1} s, its shaper lets {capacity:.0} \
         through: {report:#?}"
    );
    Ok(())
}
