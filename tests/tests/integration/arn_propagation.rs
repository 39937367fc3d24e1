//! ARN propagation upstream (`arn.propagate`) between real `fare agent`s: a chain where
//! the middle node has no alternative and its upstream has one.
//!
//! ```text
//!   A ==(two links: a1-b1, a2-b3)== B --(b2-c1)-- C        prefix X = 198.51.100.0/24
//!   A: group X over both links to B (an alternative to each)
//!   B: group X via C only (no alternative), arn.propagate: true
//! ```
//!
//! C sends Type 1 with Path ID D (the far end of C's congested link; every tier lists
//! D -> X): B cannot act on it and passes it on to its other ARN neighbor, A (from its
//! address on link 1), and A takes its member via link 1 out; Type 2 follows and A
//! restores it. An unlisted Path ID moves nothing and is not passed on. Data planes
//! `none`: this is the control plane's behaviour. B runs the default congestion shift
//! (shifting its only member would move nothing, so it passes the ARN on); A runs
//! `congestion: {mode: remove}` so its reaction is one member out and back.

use anyhow::{ensure, Result};
use fare_integration::agent::TempDir;
use fare_integration::{have_root, link, wait_until, Netns};
use serde_json::Value;
use std::time::Duration;

const X: &str = "198.51.100.0/24";

fn counter(v: &Value, name: &str) -> u64 {
    v["counters"][name].as_u64().unwrap_or(0)
}

#[test]
fn arn_without_alternative_is_passed_upstream() -> Result<()> {
    let test = "arn_without_alternative_is_passed_upstream";
    if !have_root(test) {
        return Ok(());
    }
    let (a, b, c) = (Netns::new("apa")?, Netns::new("apb")?, Netns::new("apc")?);
    link(&a, "a1", "10.0.1.1/30", &b, "b1", "10.0.1.2/30")?;
    link(&a, "a2", "10.0.3.1/30", &b, "b3", "10.0.3.2/30")?;
    link(&b, "b2", "10.0.2.1/30", &c, "c1", "10.0.2.2/30")?;
    let dir = TempDir::new("arnprop")?;
    let paths = format!("paths: [{{path_id: 10.0.0.9, prefixes: [{X}]}}]");
    let a_cfg = format!(
        "name: A\nrouter_id: 10.0.0.1\nasn: 65001\nmanagement: {{socket: {}/a.sock}}\n\
         dataplane: {{kind: none}}\n\
         static:\n  - prefix: {X}\n    members:\n\
         \x20     - {{interface: a1, neighbor_mac: 02:00:00:00:00:01, next_hop: 10.0.1.2, weight: 1}}\n\
         \x20     - {{interface: a2, neighbor_mac: 02:00:00:00:00:02, next_hop: 10.0.3.2, weight: 1}}\n\
         arn:\n  congestion: {{mode: remove}}\n  neighbors: [{{address: 10.0.1.2, interface: a1}}, {{address: 10.0.3.2, interface: a2}}]\n  {paths}\n",
        dir.0.display()
    );
    let b_cfg = format!(
        "name: B\nrouter_id: 10.0.0.2\nasn: 65002\nmanagement: {{socket: {}/b.sock}}\n\
         dataplane: {{kind: none}}\n\
         static:\n  - prefix: {X}\n    members:\n\
         \x20     - {{interface: b2, neighbor_mac: 02:00:00:00:00:03, next_hop: 10.0.2.2, weight: 1}}\n\
         arn:\n  propagate: true\n  neighbors: [{{address: 10.0.2.2, interface: b2}}, {{address: 10.0.1.1, interface: b1}}]\n  {paths}\n",
        dir.0.display()
    );
    let agent_a = dir.start_agent(&a, "a", &a_cfg)?;
    let agent_b = dir.start_agent(&b, "b", &b_cfg)?;
    let send = |kind: &str, path: &str| -> Result<()> {
        c.fare(&[
            "arn",
            "send",
            "--to",
            "10.0.2.1",
            "--type",
            kind,
            "--path-id",
            path,
        ])
        .map(|_| ())
    };

    // An unlisted Path ID designates nothing at B (a path B does not have): no member
    // moves, nothing is passed on.
    send("congestion", "10.0.0.77")?;
    ensure!(
        wait_until(Duration::from_secs(5), || agent_b
            .show("arn")
            .is_ok_and(|v| counter(&v, "unmatched") >= 1)),
        "B never counted the unlisted Path ID as unmatched: {}",
        agent_b.log_text()
    );
    ensure!(counter(&agent_b.show("arn")?, "refused_last_member") == 0);
    std::thread::sleep(Duration::from_millis(300));
    ensure!(
        agent_a.arn_removed().is_empty(),
        "A moved on an unlisted Path ID"
    );
    ensure!(counter(&agent_b.show("arn")?, "propagated") == 0);

    // Listed: B passes it on, A takes its member via link 1 (toward B's 10.0.1.2) out.
    send("congestion", "10.0.0.9")?;
    let r = agent_a.wait_arn_removed(Duration::from_secs(5));
    ensure!(
        !r.is_empty(),
        "A never removed a member; B: {}",
        agent_b.log_text()
    );
    ensure!(
        r.len() == 1 && r[0]["prefix"] == X && r[0]["index"] == 0 && r[0]["sender"] == "10.0.1.2",
        "A removed {r:?}"
    );
    ensure!(counter(&agent_b.show("arn")?, "propagated") >= 1);
    // Type 2 follows: A restores.
    send("2", "10.0.0.9")?;
    ensure!(
        wait_until(Duration::from_secs(5), || agent_a.arn_removed().is_empty()),
        "A still holds {:?}",
        agent_a.arn_removed()
    );
    Ok(())
}
