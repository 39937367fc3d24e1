//! Every group fits its data plane (issue 15): `fare agent` with the XDP backend gets a
//! static group whose weights sum to 858 (171:229:229:229, the exact ratio of 10.6875 and
//! 14.3125 Gbps after a lane degradation), far beyond the program's 256 slots. The agent
//! reduces it before installing instead of having it refused: the group in the data plane
//! is the new one (not the previous agent's, left stale), within 256 slots, `fare show
//! groups --json` reports size, limit, requested size and delta, the spray follows the
//! installed weights exactly, and the replacement of the previous group loses no packet
//! (make-before-break, traffic running through the restart).
//!
//! Bench of `fare_integration::xdp_lab` (router r0 -> e1..e4 -> four sinks).

use anyhow::{ensure, Context, Result};
use fare_integration::agent::{Agent, TempDir};
use fare_integration::xdp_lab::{stream_frame, XdpLab};

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The agent's configuration: the static group with `weights` and bandwidths `gbps`.
fn config(
    dir: &TempDir,
    lab: &XdpLab,
    socket: &Path,
    weights: &[u64],
    gbps: &[f64],
) -> Result<std::path::PathBuf> {
    let members: Vec<(u64, Option<f64>)> = weights
        .iter()
        .zip(gbps)
        .map(|(w, b)| (*w, Some(*b)))
        .collect();
    lab.agent_config(dir, socket, &members)
}

#[test]
fn agent_xdp_reduces_oversize_groups_make_before_break() -> Result<()> {
    let Some(lab) = XdpLab::for_test("agent_xdp_reduces_oversize_groups_make_before_break", "agl")?
    else {
        return Ok(());
    };
    let dir = TempDir::new("agent-xdp-limits")?;
    let socket = dir.0.join("agent.sock");

    // Before the degradation: four equal members.
    let cfg = config(&dir, &lab, &socket, &[1, 1, 1, 1], &[14.3125; 4])?;
    let mut agent = Agent::start(Some(&lab.router), &cfg, &socket)?;
    let even = lab.send_stream(400)?;
    ensure!(even == [100, 100, 100, 100], "1:1:1:1 -> {even:?}");
    ensure!(agent.stop()? == Some(0), "{}", agent.log_text());

    // After: 858 entries requested. Traffic runs while the new agent replaces the group.
    let bw = [10.6875, 14.3125, 14.3125, 14.3125];
    let cfg = config(&dir, &lab, &socket, &[171, 229, 229, 229], &bw)?;
    let before = lab.sink_rx()?;
    let stop = Arc::new(AtomicBool::new(false));
    let sender = lab.spawn_sender(
        0,
        2_000_000,
        stop.clone(),
        Duration::from_secs(20),
        stream_frame,
    );
    let started = Agent::start(Some(&lab.router), &cfg, &socket);
    // Keep sending a moment after the install (the socket exists once groups are in).
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let sent = sender
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))??;
    let agent = started?;
    let during = lab.arrived(&before, sent);
    let got: u64 = during.iter().sum();
    println!("agent_xdp_limits: {sent} frames sent across the replacement, {got} arrived");
    ensure!(sent > 0, "nothing sent");
    ensure!(
        got == sent,
        "lost {} of {sent} frames across the replacement: {during:?}",
        sent - got
    );

    let log = agent.log_text();
    ensure!(
        log.contains("group reduced to fit the data plane"),
        "no reduction logged: {log}"
    );
    ensure!(!log.contains("install failed"), "an install failed: {log}");

    let groups = agent.show("groups")?;
    println!("agent_xdp_limits: {}", serde_json::to_string(&groups)?);
    let g = &groups[0];
    let weights: Vec<u64> = g["members"]
        .as_array()
        .context("members")?
        .iter()
        .map(|m| m["weight"].as_u64().unwrap_or(0))
        .collect();
    let size: u64 = weights.iter().sum();
    ensure!(weights.len() == 4, "a member was dropped: {weights:?}");
    ensure!(
        g["size"].as_u64() == Some(size),
        "size {} vs {size}",
        g["size"]
    );
    ensure!(size <= 256, "size {size} exceeds the 256 slots");
    ensure!(g["limit"].as_u64() == Some(256), "limit {}", g["limit"]);
    ensure!(
        g["reduced_from"].as_u64() == Some(858),
        "{}",
        g["reduced_from"]
    );
    // 3:4:4:4 (delta 858/855 by hand) is within 256, so the optimum is at least as good;
    // and the members 2..4 (equal bandwidths) differ by at most one entry.
    let delta = g["delta"].as_f64().context("delta")?;
    ensure!(
        (1.0..=858.0 / 855.0 + 1e-12).contains(&delta),
        "delta {delta}"
    );
    ensure!(
        weights[1..]
            .iter()
            .max()
            .zip(weights[1..].iter().min())
            .is_some_and(|(a, b)| a - b <= 1),
        "{weights:?}"
    );
    // Recompute the delta from the installed weights and the ideal 171:229:229:229.
    let ideal = [171.0, 229.0, 229.0, 229.0];
    let own = weights
        .iter()
        .zip(ideal)
        .map(|(&w, x)| (w as f64 / size as f64) / (x / 858.0))
        .fold(0.0, f64::max);
    ensure!(
        (own - delta).abs() < 1e-9,
        "delta {delta} vs {own} from {weights:?}"
    );

    // The spray follows the installed weights: 100 cycles of `size` frames, each member
    // within its share of one cycle (as agent_xdp: a cycle may straddle two CPUs).
    let n = 100 * size;
    let split = lab.send_stream(n)?;
    println!("agent_xdp_limits: weights {weights:?}, {n} frames -> {split:?}");
    ensure!(split.iter().sum::<u64>() == n, "lost frames: {split:?}");
    for (i, w) in weights.iter().enumerate() {
        ensure!(
            split[i].abs_diff(100 * w) <= *w,
            "member {i}: {split:?} for weights {weights:?}"
        );
    }
    Ok(())
}
