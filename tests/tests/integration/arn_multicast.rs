//! ARN over multicast into a real `fare agent` (`arn.multicast`): the agent joins its group
//! on the link to its neighbor; a failure ARN (Type 3) the neighbor sends to that group out
//! of the link takes the member toward it out, one sent to another group moves nothing and
//! never reaches the receiver, and Type 4 to the group brings the member back. Second
//! test: the sending side, an agent's monitor sending to its group only.
//!
//! ```text
//!   A (a1 10.0.5.1/30) ---- (s1 10.0.5.2/30) S        A: group X via S and via a2 (a veth to itself)
//! ```

use anyhow::{ensure, Result};
use fare_integration::agent::{Agent, TempDir};
use fare_integration::{have_root, veth, wait_until, Netns};
use std::time::Duration;

const X: &str = "198.51.100.0/24";
const GROUP: &str = "239.255.0.61";

/// A (a1 10.0.5.1/30, and a2 10.0.6.1/30 on a veth to itself) linked to S (s1, whose
/// addresses `s_addresses` sets: 10.0.5.2/30 and what the test needs); then A's agent,
/// configuration in `dir`: group X via S and via a2, ARNs from S (10.0.5.2 on a1) over
/// multicast group GROUP. Data plane `none`.
fn a_with_agent(a: &Netns, s: &Netns, s_addresses: &str, dir: &TempDir) -> Result<Agent> {
    veth(a, "a1", s, "s1")?;
    a.sh("ip addr add 10.0.5.1/30 dev a1; ip link add a2 type veth peer name a3; ip link set a2 up; ip link set a3 up; ip addr add 10.0.6.1/30 dev a2")?;
    s.sh(s_addresses)?;
    let cfg = format!(
        "name: A\nrouter_id: 10.0.0.1\nasn: 65001\nmanagement: {{socket: {}/a.sock}}\n\
         dataplane: {{kind: none}}\n\
         static:\n  - prefix: {X}\n    members:\n\
         \x20     - {{interface: a1, neighbor_mac: 02:00:00:00:00:01, next_hop: 10.0.5.2, weight: 1}}\n\
         \x20     - {{interface: a2, neighbor_mac: 02:00:00:00:00:02, next_hop: 10.0.6.2, weight: 1}}\n\
         arn:\n  multicast: {{group: {GROUP}}}\n  neighbors: [{{address: 10.0.5.2, interface: a1}}]\n",
        dir.0.display()
    );
    dir.start_agent(a, "a", &cfg)
}

#[test]
fn agent_takes_arns_from_its_multicast_group_only() -> Result<()> {
    let test = "agent_takes_arns_from_its_multicast_group_only";
    if !have_root(test) {
        return Ok(());
    }
    let (a, s) = (Netns::new("amA")?, Netns::new("amS")?);
    let dir = TempDir::new("arnmc")?;
    let agent = a_with_agent(&a, &s, "ip addr add 10.0.5.2/30 dev s1", &dir)?;
    let send = |to: &str, kind: &str| -> Result<()> {
        s.fare(&[
            "arn",
            "send",
            "--to",
            to,
            "--device",
            "s1",
            "--type",
            kind,
            "--path-id",
            "0",
        ])
        .map(|_| ())
    };
    ensure!(
        wait_until(Duration::from_secs(5), || agent.show("arn").is_ok()),
        "the agent's ARN state never appeared: {}",
        agent.log_text()
    );
    // Another group: never for this agent.
    send("239.255.0.62", "3")?;
    std::thread::sleep(Duration::from_millis(500));
    let v = agent.show("arn")?;
    ensure!(
        agent.arn_removed().is_empty(),
        "moved on another group: {v}"
    );
    ensure!(v["counters"]["accepted"].as_u64().unwrap_or(0) == 0, "{v}");
    // Its group: the member toward S goes out.
    send(GROUP, "3")?;
    let r = agent.wait_arn_removed(Duration::from_secs(5));
    ensure!(
        !r.is_empty(),
        "the ARN to the group was not applied: {}",
        agent.log_text()
    );
    ensure!(
        r.len() == 1 && r[0]["prefix"] == X && r[0]["sender"] == "10.0.5.2",
        "{r:?}"
    );
    send(GROUP, "4")?;
    ensure!(
        wait_until(Duration::from_secs(5), || agent.arn_removed().is_empty()),
        "Type 4 to the group did not restore: {:?}",
        agent.arn_removed()
    );
    let v = agent.show("arn")?;
    ensure!(v["counters"]["accepted"].as_u64() == Some(2), "{v}");
    Ok(())
}

/// The sending side: an agent S whose monitor watches its link s2 (to T) and sends to its
/// multicast group out of s1 (`arn.multicast.interfaces`, no unicast notify list). s2
/// goes down: S's Type 3 reaches A through the group and A takes its member toward S
/// out; s2 up again: Type 4 restores it.
#[test]
fn agent_monitor_sends_to_its_multicast_group() -> Result<()> {
    let test = "agent_monitor_sends_to_its_multicast_group";
    if !have_root(test) {
        return Ok(());
    }
    let (a, s, t) = (Netns::new("amA")?, Netns::new("amS")?, Netns::new("amT")?);
    let dir = TempDir::new("arnmcs")?;
    veth(&s, "s2", &t, "t1")?;
    let agent_a = a_with_agent(
        &a,
        &s,
        "ip addr add 10.0.5.2/30 dev s1; ip addr add 10.0.7.1/30 dev s2",
        &dir,
    )?;
    t.sh("ip addr add 10.0.7.2/30 dev t1")?;
    let s_cfg = format!(
        "name: S\nrouter_id: 10.0.0.2\nasn: 65002\nmanagement: {{socket: {}/s.sock}}\n\
         dataplane: {{kind: none}}\n\
         arn:\n  multicast: {{group: {GROUP}, interfaces: [s1]}}\n\
         \x20 neighbors: [{{address: 10.0.5.1, interface: s1}}]\n\
         \x20 monitor:\n    realtime_priority: 0\n    interfaces:\n\
         \x20     - {{interface: s2, path_id: 10.0.0.9, high_bytes: 30000, low_bytes: 10000}}\n",
        dir.0.display()
    );
    let agent_s = dir.start_agent(&s, "s", &s_cfg)?;
    ensure!(
        wait_until(Duration::from_secs(5), || agent_a.show("arn").is_ok()
            && agent_s.show("arn").is_ok()),
        "ARN never started: {}",
        agent_s.log_text()
    );
    std::thread::sleep(Duration::from_millis(300)); // the monitor's first link sample
    s.sh("ip link set s2 down")?;
    let r = agent_a.wait_arn_removed(Duration::from_secs(5));
    ensure!(
        !r.is_empty(),
        "A never received S's Type 3 through the group; S: {}",
        agent_s.log_text()
    );
    ensure!(
        r.len() == 1 && r[0]["sender"] == "10.0.5.2" && r[0]["kinds"][0] == "failure",
        "{r:?}"
    );
    s.sh("ip link set s2 up")?;
    ensure!(
        wait_until(Duration::from_secs(5), || agent_a.arn_removed().is_empty()),
        "Type 4 through the group did not restore: {:?}",
        agent_a.arn_removed()
    );
    Ok(())
}
