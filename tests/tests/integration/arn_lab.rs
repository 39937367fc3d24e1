//! ARN end to end between real `fare agent`s: the draft's spine-leaf example built by
//! `fare lab up` (topologies/arn-spine-leaf.yaml, static groups), UDP traffic from
//! leaf1's host to leaf2's host sprayed over spine1 and spine2; once with the kernel data
//! plane (spine1's tbf queue builds) and once with XDP (the program's virtual queue at
//! the link rate builds: redirected frames skip the tbf).
//!
//! 1. `fare lab congest spine1-leaf2`: spine1's tbf queue toward leaf2 crosses the
//!    threshold, spine1 sends Type 1 to leaf1, leaf1 takes its member via spine1 out
//!    (`fare show arn`), and leaf1's packet counters show the traffic leaving spine1.
//! 2. `fare lab restore`: the queue stays drained, Type 2 follows, the member comes back
//!    and traffic returns to spine1.
//! 3. spine1's link to leaf2 goes down: Type 3 takes the member out; up again: Type 4
//!    puts it back.

use anyhow::{bail, ensure, Result};
use fare_integration::arn_fabric::ArnFabric;
use fare_integration::{have_root, have_tool, run};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Address of spine1 on its link to leaf1 (the plan's first /31: spine1-leaf1 is link 0).
const SPINE1_ON_LEAF1_LINK: &str = "172.16.0.0";
const LEAF2_PREFIX: &str = "198.51.100.0/24";

/// What this test reads from the agents besides the shared fabric's counters.
trait AgentArn {
    fn removed(&self) -> Result<Vec<Value>>;
    fn wait_removed(&self, timeout: Duration, kind: &str) -> Result<()>;
    fn wait_restored(&self, timeout: Duration) -> Result<()>;
}

impl AgentArn for ArnFabric {
    /// Members leaf1 holds out by ARN.
    fn removed(&self) -> Result<Vec<Value>> {
        Ok(self.show("leaf1", "arn")?["removed"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// Waits (bounded) until leaf1 holds the member via spine1 out for an ARN of `kind`.
    fn wait_removed(&self, timeout: Duration, kind: &str) -> Result<()> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(r) = self
                .removed()?
                .into_iter()
                .find(|r| r["sender"] == SPINE1_ON_LEAF1_LINK && r["prefix"] == LEAF2_PREFIX)
            {
                ensure!(
                    r["kinds"]
                        .as_array()
                        .is_some_and(|k| k.iter().any(|k| k == kind)),
                    "{r}"
                );
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("leaf1 never took its member via spine1 out");
    }

    /// Waits (bounded) until leaf1 holds nothing out for a whole second.
    fn wait_restored(&self, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        let mut clear_since: Option<Instant> = None;
        while start.elapsed() < timeout {
            if self.removed()?.is_empty() {
                let since = *clear_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= Duration::from_secs(1) {
                    return Ok(());
                }
            } else {
                clear_since = None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("leaf1 still holds members out: {:?}", self.removed()?);
    }
}

fn counter(v: &Value, name: &str) -> u64 {
    v["counters"][name].as_u64().unwrap_or(0)
}

#[test]
fn arn_moves_traffic_off_a_congested_or_failed_spine_and_back() -> Result<()> {
    arn_end_to_end(
        "arn_moves_traffic_off_a_congested_or_failed_spine_and_back",
        "kernel",
    )
}

#[test]
fn arn_with_xdp_detects_congestion_in_the_program_and_moves_traffic() -> Result<()> {
    arn_end_to_end(
        "arn_with_xdp_detects_congestion_in_the_program_and_moves_traffic",
        "xdp",
    )
}

/// The whole sequence with `dataplane`; skipped (the reason printed) without root or tc.
fn arn_end_to_end(test: &str, dataplane: &str) -> Result<()> {
    if !have_root(test) || !have_tool(test, "tc") {
        return Ok(());
    }
    let mut lab = ArnFabric::up_static(
        &format!("arn{}", &dataplane[..1]),
        dataplane,
        &[
            "--arn-clear-ms",
            "200",
            // This test checks that Type 1 moves the whole member (the shift has its own).
            "--arn-congestion",
            "remove",
        ],
    )?;
    // 40 Mbit/s over two 100 Mbit/s spines: ~20 Mbit/s each, twice what a congested
    // (10%) spine1-leaf2 link carries.
    let healthy = lab.start_traffic_share(40_000, 60)?;
    ensure!(
        healthy > 0.3,
        "before congestion only {healthy:.2} of the traffic went via spine1"
    );

    // 1. Congestion: Type 1 from spine1, leaf1 moves the traffic to spine2.
    let report: Value = serde_json::from_str(&lab.fare(&[
        "lab",
        "congest",
        "spine1-leaf2",
        "--name",
        lab.name(),
        "--json",
    ])?)?;
    // The agents' typed events: spine1 sent a Type 1, leaf1 applied spine1's Type 1.
    let seen = report["arn"].as_array().cloned().unwrap_or_default();
    let has = |node: &str, event: &str| {
        seen.iter().any(|a| {
            a["node"] == node && a["event"] == event && a["arn_type"] == 1 && a["from"] == "spine1"
        })
    };
    ensure!(
        has("spine1", "arn_sent") && has("leaf1", "arn_applied"),
        "congest reported no ARN from spine1 to leaf1: {seen:#?}"
    );
    lab.wait_removed(Duration::from_secs(10), "congestion")?;
    let congested = lab.spine1_share(Duration::from_secs(2))?;
    ensure!(
        congested < 0.25 && congested < healthy / 2.0,
        "while spine1-leaf2 was congested {congested:.2} of the traffic still went via spine1 \
         (before: {healthy:.2})"
    );
    let spine1 = lab.show("spine1", "arn")?;
    ensure!(spine1["sent"]["1"].as_u64().unwrap_or(0) >= 1, "{spine1}");

    // 2. Congestion over: Type 2, the member and the traffic come back.
    lab.fare(&["lab", "restore", "spine1-leaf2", "--name", lab.name()])?;
    lab.wait_restored(Duration::from_secs(10))?;
    let leaf1 = lab.show("leaf1", "arn")?;
    ensure!(counter(&leaf1, "type2") >= 1, "{leaf1}");
    ensure!(counter(&leaf1, "members_restored") >= 1, "{leaf1}");
    let recovered = lab.spine1_share(Duration::from_secs(1))?;
    ensure!(
        recovered > 0.3,
        "after the congestion only {recovered:.2} went via spine1 again"
    );

    // 3. Link failure with no parallel link at spine1: Type 3, then Type 4.
    let spine1_ns = lab.ns("spine1");
    run("ip", &["-n", &spine1_ns, "link", "set", "eth2", "down"])?;
    lab.wait_removed(Duration::from_secs(10), "failure")?;
    let failed = lab.spine1_share(Duration::from_secs(1))?;
    ensure!(
        failed < 0.05,
        "with spine1-leaf2 down {failed:.2} still went via spine1"
    );
    run("ip", &["-n", &spine1_ns, "link", "set", "eth2", "up"])?;
    lab.wait_restored(Duration::from_secs(10))?;
    let leaf1 = lab.show("leaf1", "arn")?;
    ensure!(
        counter(&leaf1, "type3") >= 1 && counter(&leaf1, "type4") >= 1,
        "{leaf1}"
    );
    // Nothing was dropped at admission: every ARN came from the neighbor, TTL 255.
    for c in [
        "dropped_not_neighbor",
        "dropped_wrong_interface",
        "dropped_ttl",
        "malformed",
    ] {
        ensure!(counter(&leaf1, c) == 0, "{c}: {leaf1}");
    }
    Ok(())
}
