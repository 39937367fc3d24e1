//! Flowlet mode in the XDP program, run with BPF_PROG_TEST_RUN: a flow keeps its member
//! while it sends within the gap, across a weight change (a new group id, new weights);
//! a packet after the gap, and every new flow, picks a member by weight (a random bucket
//! of the group's resilient table, so each member's share is its buckets / 256).
//! Counts come from the per-member packet counters; shares are checked against the
//! bucket table `fare_model::resilient` computes, within 5 standard deviations of the
//! binomial.
//!
//! Run: `cargo test -p fare-integration --test integration xdp_flowlet:: -- --test-threads=1` (root).

use anyhow::{ensure, Result};
use fare::dataplane::{Dataplane, GroupMode};
use fare::dp_xdp::{TestRunOptions, XdpDataplane};
use fare::resilient;
use fare_integration::delta;
use fare_integration::packets::*;
use fare_integration::xdp_lab::{group, XdpLab, GEN_MAC, ROUTER_MAC};
use std::net::Ipv4Addr;
use std::time::Duration;

const PREFIX: &str = "198.18.0.0/16";
const BUCKETS: usize = 256;
const XDP_REDIRECT: u32 = 4;

/// Flow `f` (UDP toward the group's prefix), TTL 255: a test run's repeats reuse the
/// rewritten frame, so at most 250 repeats per run keep it forwardable.
fn frame(f: u32) -> Vec<u8> {
    udp4_frame(
        ROUTER_MAC,
        GEN_MAC,
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(198, 18, (f >> 8) as u8, f as u8),
        1024 + (f % 60_000) as u16,
        4791,
        255,
    )
}

fn counters(rt: &tokio::runtime::Runtime, dp: &mut XdpDataplane) -> Result<Vec<u64>> {
    let groups = rt.block_on(dp.groups())?;
    let g = groups
        .iter()
        .find(|g| g.group.prefix.to_string() == PREFIX)
        .ok_or_else(|| anyhow::anyhow!("no group {PREFIX}"))?;
    Ok(g.members.iter().map(|m| m.packets).collect())
}

/// Sends `n` packets of flow `f` (runs of at most 250 repeats); the per-member counts.
fn send(rt: &tokio::runtime::Runtime, dp: &mut XdpDataplane, f: u32, n: u32) -> Result<Vec<u64>> {
    let before = counters(rt, dp)?;
    run(dp, f, n)?;
    Ok(delta(&counters(rt, dp)?, &before))
}

fn run(dp: &mut XdpDataplane, f: u32, n: u32) -> Result<()> {
    let mut left = n;
    while left > 0 {
        let repeat = left.min(250);
        let run = dp.test_run(
            &frame(f),
            TestRunOptions {
                repeat,
                ..Default::default()
            },
        )?;
        ensure!(run.action == XDP_REDIRECT, "action {}", run.action);
        left -= repeat;
    }
    Ok(())
}

/// Each member's packets within 5 binomial standard deviations of its bucket share.
fn by_buckets(counts: &[u64], table: &[usize], what: &str) -> Result<()> {
    let n: u64 = counts.iter().sum();
    for (i, &c) in counts.iter().enumerate() {
        let p = table.iter().filter(|&&m| m == i).count() as f64 / BUCKETS as f64;
        let mean = n as f64 * p;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        ensure!(
            (c as f64 - mean).abs() <= 5.0 * sd + 1.0,
            "{what}: member {i} got {c} of {n}, its {} buckets say {mean:.1} ± {:.1} ({counts:?})",
            (p * BUCKETS as f64).round(),
            5.0 * sd + 1.0
        );
    }
    Ok(())
}

fn the_one(counts: &[u64], n: u64, what: &str) -> Result<usize> {
    let busy: Vec<usize> = (0..counts.len()).filter(|&i| counts[i] > 0).collect();
    ensure!(
        busy.len() == 1 && counts[busy[0]] == n,
        "{what}: {n} packets spread over {counts:?}"
    );
    Ok(busy[0])
}

#[test]
fn xdp_flowlet_keeps_its_member_inside_the_gap_and_picks_by_weight_after() -> Result<()> {
    let test = "xdp_flowlet_keeps_its_member_inside_the_gap_and_picks_by_weight_after";
    let Some(lab) = XdpLab::for_test(test, "xl")? else {
        return Ok(());
    };
    lab.with_dataplane(
        |_| {},
        |rt, dp| {
            const F: u32 = 7;
            // A gap no test outlasts (71 minutes).
            dp.set_flowlet_gap_us(u32::MAX);
            let t1 = resilient::fresh(&[1, 1, 1, 1], BUCKETS);
            rt.block_on(dp.install(&group(PREFIX, &[1, 1, 1, 1], GroupMode::Flowlet)?))?;
            let m0 = the_one(&send(rt, dp, F, 1)?, 1, "first packet")?;
            // The flow's member drops to 1/151 of the weight: a new group (id, weights),
            // yet the flowlet goes on on its member, every packet.
            let mut w = [50u32; 4];
            w[m0] = 1;
            let t2 = resilient::reassign(Some(&t1), &w, BUCKETS).table;
            rt.block_on(dp.install(&group(PREFIX, &w, GroupMode::Flowlet)?))?;
            let kept = the_one(&send(rt, dp, F, 1000)?, 1000, "inside the gap")?;
            ensure!(kept == m0, "the flowlet moved from {m0} to {kept}");
            // New flows start flowlets: the new weights, by buckets.
            let before = counters(rt, dp)?;
            for f in 1000..4000 {
                run(dp, f, 1)?;
            }
            let fresh = delta(&counters(rt, dp)?, &before);
            by_buckets(&fresh, &t2, "new flows")?;
            eprintln!("flowlet: member {m0} kept 1000 of 1000 inside the gap; new flows {fresh:?}");
            // Gap 0: every packet of F starts a flowlet, so F spreads by buckets.
            dp.set_flowlet_gap_us(0);
            let w3 = [1u32, 2, 3, 4];
            let t3 = resilient::reassign(Some(&t2), &w3, BUCKETS).table;
            rt.block_on(dp.install(&group(PREFIX, &w3, GroupMode::Flowlet)?))?;
            let spread = send(rt, dp, F, 4000)?;
            by_buckets(&spread, &t3, "gap 0")?;
            eprintln!("flowlet gap 0, 1:2:3:4: one flow's 4000 packets {spread:?}");
            // A real gap, 5 ms: 50 back-to-back packets stay on one member; after 30 ms
            // idle the flow picks again (8 rounds on 4 equal members: all on one member
            // with probability 4^-7).
            dp.set_flowlet_gap_us(5000);
            let t4 = resilient::reassign(Some(&t3), &[1, 1, 1, 1], BUCKETS).table;
            ensure!(t4.iter().filter(|&&m| m == 0).count() == 64, "equal table");
            rt.block_on(dp.install(&group(PREFIX, &[1, 1, 1, 1], GroupMode::Flowlet)?))?;
            let mut members = Vec::new();
            for round in 0..8 {
                std::thread::sleep(Duration::from_millis(30));
                members.push(the_one(
                    &send(rt, dp, F, 50)?,
                    50,
                    &format!("round {round}"),
                )?);
            }
            members.sort_unstable();
            members.dedup();
            ensure!(members.len() >= 2, "8 flowlets all on member {members:?}");
            eprintln!("flowlet gap 5 ms: 8 flowlets of one flow took members {members:?}");
            Ok(())
        },
    )
}
