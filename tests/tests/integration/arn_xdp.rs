//! ARN received inside the XDP program, with no agent involved: the spine-leaf lab of
//! topologies/arn-spine-leaf.yaml with the XDP data plane, UDP traffic from leaf1's host to
//! leaf2's host sprayed over spine1 and spine2, and leaf1's agent stopped (SIGSTOP) while
//! the ARNs arrive.
//!
//! 1. A Type 1 from spine1 (its address on the link, TTL 255) moves leaf1's traffic off
//!    spine1 at once: the program marked the member itself.
//! 2. The hold time (2 s) passes with no refresh: the program puts the member back.
//! 3. Spoofed (TTL 64; from leaf1's host, no ARN neighbor) and malformed ARNs
//!    do not move traffic and are counted in the program's ARN_STATS.
//! 4. A Type 1 then a Type 2: removed, then restored before the hold time.

use anyhow::{ensure, Result};
use fare_integration::arn_fabric::ArnFabric;
use fare_integration::{fare_bin, have_root, have_tool, run, wait_until};
use serde_json::Value;
use std::time::Duration;

/// leaf1's address on its link to spine1 (the plan's first /31: spine1-leaf1 is link 0).
const LEAF1_ON_SPINE1_LINK: &str = "172.16.0.1";

/// What this test does with the shared fabric besides the traffic: send ARNs by hand,
/// read leaf1's program counters.
trait ArnByHand {
    fn send_from(&self, node: &str, args: &[&str]) -> Result<()>;
    fn send_from_spine1(&self, args: &[&str]) -> Result<()>;
    fn arn_stats(&self) -> Result<Vec<u64>>;
}

impl ArnByHand for ArnFabric {
    /// `fare arn send` from `node`'s namespace to leaf1's address on the spine1 link.
    fn send_from(&self, node: &str, args: &[&str]) -> Result<()> {
        let fare = fare_bin()?.to_string_lossy().to_string();
        let ns = self.ns(node);
        let mut all = vec!["netns", "exec", &ns, &fare, "arn", "send"];
        all.extend(["--to", LEAF1_ON_SPINE1_LINK]);
        all.extend(args);
        run("ip", &all)?;
        Ok(())
    }

    fn send_from_spine1(&self, args: &[&str]) -> Result<()> {
        self.send_from("spine1", args)
    }

    /// leaf1's in-program ARN counters (ARN_STATS, summed over CPUs), by index.
    fn arn_stats(&self) -> Result<Vec<u64>> {
        let pin = format!("/sys/fs/bpf/fare/{}/maps/ARN_STATS", self.ns("leaf1"));
        let out = run("bpftool", &["-j", "map", "dump", "pinned", &pin])?;
        let entries: Vec<Value> = serde_json::from_slice(&out.stdout)?;
        let mut stats = vec![0u64; 8];
        for e in entries {
            let key = hex_le(&e["key"]);
            let sum: u64 = e["values"]
                .as_array()
                .map(|v| v.iter().map(|c| hex_le(&c["value"])).sum())
                .unwrap_or(0);
            if let Some(s) = stats.get_mut(key as usize) {
                *s = sum;
            }
        }
        Ok(stats)
    }
}

/// A little-endian number from bpftool's ["0x01", "0x00", ...].
fn hex_le(v: &Value) -> u64 {
    v.as_array()
        .map(|bytes| {
            bytes.iter().rev().fold(0u64, |acc, b| {
                let byte = b
                    .as_str()
                    .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
                    .unwrap_or(0);
                (acc << 8) | byte
            })
        })
        .unwrap_or(0)
}

// ARN_STATS indexes (fare_common::ArnStat).
const ACCEPTED: usize = 0;
const MALFORMED: usize = 1;
const SPOOFED: usize = 2;
const REMOVED: usize = 4;
const RESTORED: usize = 5;
const EXPIRED: usize = 7;

#[test]
fn xdp_program_applies_arn_without_the_agent() -> Result<()> {
    let test = "xdp_program_applies_arn_without_the_agent";
    if !have_root(test) || !have_tool(test, "tc") || !have_tool(test, "bpftool") {
        return Ok(());
    }
    let mut lab = ArnFabric::up_static(
        "ax",
        "xdp",
        &[
            "--arn-hold-ms",
            "2000",
            // The program acts on Type 1 itself only with whole-member removal.
            "--arn-congestion",
            "remove",
        ],
    )?;
    let leaf1_pid = lab.agent_pid("leaf1")?;
    let healthy = lab.start_traffic_share(20_000, 90)?;
    ensure!(healthy > 0.3, "before any ARN only {healthy:.2} via spine1");

    // The agent cannot react from here on: only the program can. spine1's agent is
    // stopped too: its queue monitor would send real ARNs when the busy machine lets the
    // shaped link's queue grow, and every ARN leaf1 counts from here on must be one this
    // test sent (spine1's XDP program keeps forwarding; routing is static).
    let spine1_pid = lab.agent_pid("spine1")?;
    for pid in [leaf1_pid, spine1_pid] {
        run("kill", &["-STOP", &pid.to_string()])?;
        lab.stopped.push(pid);
    }

    // 3. Spoofed and malformed ARNs first: nothing moves.
    let before = lab.arn_stats()?;
    lab.send_from_spine1(&["--type", "1", "--ttl", "64"])?;
    // From a namespace that is no ARN neighbor (leaf1's host), TTL 255.
    lab.send_from("leaf1-h0", &["--type", "1"])?;
    lab.send_from_spine1(&["--raw", "0100"])?;
    lab.send_from_spine1(&["--raw", "0500004000000000"])?;
    let spoofed = lab.spine1_share(Duration::from_millis(800))?;
    ensure!(
        spoofed > 0.3,
        "spoofed/malformed ARNs moved traffic: {spoofed:.2} via spine1"
    );
    let after = lab.arn_stats()?;
    ensure!(
        after[SPOOFED] >= before[SPOOFED] + 2,
        "spoofed not counted: {after:?}"
    );
    ensure!(
        after[MALFORMED] >= before[MALFORMED] + 2,
        "malformed not counted: {after:?}"
    );
    ensure!(
        after[ACCEPTED] == before[ACCEPTED],
        "a bad ARN was accepted: {after:?}"
    );

    // 1. A real Type 1: the traffic leaves spine1 with the agent stopped.
    lab.send_from_spine1(&["--type", "1", "--path-id", "0"])?;
    let removed = lab.spine1_share(Duration::from_millis(500))?;
    ensure!(
        removed < 0.05,
        "after Type 1 {removed:.2} still went via spine1 (agent stopped)"
    );
    let s = lab.arn_stats()?;
    ensure!(
        s[ACCEPTED] > after[ACCEPTED] && s[REMOVED] > after[REMOVED],
        "{s:?}"
    );

    // 2. No refresh: the hold time ends the removal inside the program.
    ensure!(
        wait_until(Duration::from_secs(10), || lab
            .spine1_share(Duration::from_millis(500))
            .is_ok_and(|x| x > 0.3)),
        "the removal did not time out"
    );
    ensure!(lab.arn_stats()?[EXPIRED] > s[EXPIRED], "expiry not counted");

    // 4. Type 1 then Type 2 well within the hold time.
    lab.send_from_spine1(&["--type", "1"])?;
    let removed = lab.spine1_share(Duration::from_millis(300))?;
    ensure!(removed < 0.05, "second Type 1: {removed:.2} via spine1");
    let s = lab.arn_stats()?;
    lab.send_from_spine1(&["--type", "2"])?;
    let back = lab.spine1_share(Duration::from_millis(500))?;
    ensure!(back > 0.3, "after Type 2 only {back:.2} via spine1");
    ensure!(
        lab.arn_stats()?[RESTORED] > s[RESTORED],
        "restore not counted"
    );

    for pid in std::mem::take(&mut lab.stopped) {
        run("kill", &["-CONT", &pid.to_string()])?;
    }
    Ok(())
}
