//! Multi-plane scale-out (draft-xu-idr-fare-in-mpson) as a namespace lab: the draft's
//! Figure 1 (topologies/mpson-multiplane.yaml: 2 planes of 4 leaves and 2 spines, 8 RNIC
//! agents, each a stub eBGP speaker per plane). Traffic from RNIC1@Server1's own address to
//! RNIC1@Server2's splits over the two planes by path bandwidth (kernel data plane: weighted
//! nexthop groups, per-flow); degrading the destination's plane-2 link to half makes the
//! sender's weights 2:1 and the traffic follows; disconnecting the destination from plane 1
//! leaves the sender with plane 2 alone, and traffic keeps arriving.

use anyhow::{ensure, Context, Result};
use fare_integration::agent::members;
use fare_integration::lab::Lab;
use fare_integration::{have_root, have_tool};

const SRC: &str = "RNIC1@Server1";
const DST: &str = "RNIC1@Server2";
const DST_PREFIX: &str = "10.200.2.1/32";

/// The sender's members for the destination: (interface, weight).
fn sender_group(lab: &Lab) -> Result<Vec<(String, u64)>> {
    let groups = lab.show(SRC, "groups")?;
    let g = groups
        .as_array()
        .and_then(|g| g.iter().find(|g| g["prefix"] == DST_PREFIX))
        .context("sender has no group for the destination RNIC")?;
    let mut got: Vec<(String, u64)> = members(g, |m| {
        (
            m["interface"].as_str().unwrap_or("").to_string(),
            m["weight"].as_u64().unwrap_or(0),
        )
    });
    got.sort();
    Ok(got)
}

/// Runs traffic SRC -> DST over `flows` flows; returns (sent, received, Mbit/s over
/// plane 1, over plane 2) measured on the sender's two uplinks.
fn traffic_flows(lab: &Lab, flows: usize) -> Result<(f64, f64, f64, f64)> {
    let flows = flows.to_string();
    // Per-flow hashing: 256 flows keep the split within a few percent of the weights.
    let r = lab.traffic(SRC, DST, 40, 3, &["--flows", &flows])?;
    let uplink = |plane: &str| -> f64 {
        r["links"]
            .as_array()
            .and_then(|l| {
                l.iter()
                    .find(|l| l["from"] == SRC && l["to"] == format!("L1@{plane}"))
            })
            .and_then(|l| l["measured_mbit"].as_f64())
            .unwrap_or(0.0)
    };
    Ok((
        r["totals"]["sent_packets"].as_f64().unwrap_or(0.0),
        r["totals"]["received_packets"].as_f64().unwrap_or(0.0),
        uplink("Plane1"),
        uplink("Plane2"),
    ))
}

/// Traffic over `flows` flows, reported as `what`; none of it may be lost. The plane 1
/// and plane 2 rates (Mbit/s).
fn delivered(lab: &Lab, test: &str, what: &str, flows: usize) -> Result<(f64, f64)> {
    let (sent, received, p1, p2) = traffic_flows(lab, flows)?;
    eprintln!(
        "{test}: {what}: sent {sent}, received {received}, plane1 {p1:.2} Mbit/s, plane2 {p2:.2}"
    );
    ensure!(
        received >= 0.99 * sent,
        "lost {} of {sent}",
        sent - received
    );
    Ok((p1, p2))
}

/// Traffic over `flows` flows on equal planes, its plane 1 : plane 2 rate ratio within
/// `equal`; then a partial-lane failure on plane 2 at the destination (200 -> 100 Gbps):
/// the sender's weights become 2:1 and the ratio falls within `degraded`.
fn split_follows_degradation(
    lab: &Lab,
    test: &str,
    flows: usize,
    equal: std::ops::Range<f64>,
    degraded: std::ops::Range<f64>,
) -> Result<()> {
    let (p1, p2) = delivered(lab, test, &format!("{flows} flow(s), equal planes"), flows)?;
    ensure!(
        equal.contains(&(p1 / p2.max(0.01))),
        "{flows} flow(s): split {p1:.2}:{p2:.2} is not about 1:1"
    );
    lab.json("degrade", &[&format!("L1@Plane2-{DST}=100")])?;
    let g = sender_group(lab)?;
    ensure!(
        g.len() == 2 && g[0].1 == 2 * g[1].1,
        "after degrading plane 2, sender's weights are {g:?}, not 2:1 (eth1 = plane 1)"
    );
    let (p1, p2) = delivered(
        lab,
        test,
        &format!("{flows} flow(s), plane 2 degraded"),
        flows,
    )?;
    ensure!(
        degraded.contains(&(p1 / p2.max(0.01))),
        "{flows} flow(s): split {p1:.2}:{p2:.2} is not about 2:1"
    );
    Ok(())
}

#[test]
fn rnic_traffic_splits_over_planes_and_follows_plane_changes() -> Result<()> {
    let test = "rnic_traffic_splits_over_planes_and_follows_plane_changes";
    if !have_root(test) || !have_tool(test, "tc") {
        return Ok(());
    }
    let (lab, _) = Lab::start("topologies/mpson-multiplane.yaml", "mp", &["--no-arn"])?;
    // Equal planes: one member per plane, equal weights, traffic on both.
    let g = sender_group(&lab)?;
    ensure!(
        g.len() == 2 && g[0].1 == g[1].1,
        "sender's group for {DST}: {g:?}"
    );
    // Then a partial-lane failure on plane 2 at the destination: 200 -> 100 Gbps.
    split_follows_degradation(&lab, test, 256, 0.6..1.67, 1.3..3.2)?;

    // The destination loses plane 1: only plane 2 remains at the sender.
    lab.json("fail", &[&format!("L1@Plane1-{DST}")])?;
    let g = sender_group(&lab)?;
    ensure!(
        g.len() == 1 && g[0].0 == "eth2",
        "after the plane-1 failure the sender still has {g:?}"
    );
    let (p1, _) = delivered(&lab, test, "plane 1 failed", 256)?;
    ensure!(p1 < 0.5, "{p1:.1} Mbit/s still on plane 1");
    lab.down()
}

/// Per-packet mode (XDP data plane, `--split spray`): the RNIC's TC egress program sprays
/// ONE flow over both planes by weight; degrading plane 2 makes it 2:1.
#[test]
fn rnic_sprays_one_flow_over_planes_by_weight() -> Result<()> {
    let test = "rnic_sprays_one_flow_over_planes_by_weight";
    if !have_root(test) || !have_tool(test, "tc") {
        return Ok(());
    }
    let (lab, _) = Lab::start(
        "topologies/mpson-multiplane.yaml",
        "ms",
        &["--no-arn", "--dataplane", "xdp", "--split", "spray"],
    )?;
    split_follows_degradation(&lab, test, 1, 0.9..1.11, 1.8..2.22)?;
    lab.down()
}
