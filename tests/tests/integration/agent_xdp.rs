//! `fare agent` with `dataplane: {kind: xdp}` and static groups, on the XDP bench of
//! `fare_integration::xdp_lab` (router with ingress r0 and egress e1..e4 to four sinks):
//! spray 3:3:4:4 follows the weights exactly, `fare show groups --json` reports the
//! per-member counters, and forwarding continues while the agent is stopped and after it
//! restarts (pinned program and maps).

use anyhow::{ensure, Result};
use fare_integration::agent::{Agent, TempDir};
use fare_integration::packets::udp4_frame;
use fare_integration::xdp_lab::{have_xdp, sink_mac, XdpLab, GEN_MAC, ROUTER_MAC};
use fare_integration::{have_root, have_tool, wait_until};
use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

const WEIGHTS: [u64; 4] = [3, 3, 4, 4];

fn frame(i: u64) -> Vec<u8> {
    udp4_frame(
        ROUTER_MAC,
        GEN_MAC,
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(198, 18, (i >> 8) as u8, i as u8),
        1024 + (i % 60_000) as u16,
        4791,
        64,
    )
}

/// Sends `count` frames from CPU 0 and returns what the sinks received meanwhile.
fn send(lab: &XdpLab, count: u64) -> Result<Vec<u64>> {
    let before = lab.sink_rx()?;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = lab
        .spawn_sender(0, count, stop, Duration::from_secs(60), frame)
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))??;
    ensure!(sent == count, "sent {sent} of {count}");
    let mut now = before.clone();
    wait_until(Duration::from_secs(5), || {
        now = lab.sink_rx().unwrap_or_default();
        now.iter().zip(&before).map(|(a, b)| a - b).sum::<u64>() >= count
    });
    Ok(now.iter().zip(&before).map(|(a, b)| a - b).collect())
}

fn packets(agent: &Agent) -> Result<Vec<u64>> {
    let groups = agent.show("groups")?;
    Ok(groups[0]["members"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| m["packets"].as_u64().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default())
}

#[test]
fn agent_xdp_static_groups_spray_and_survive_restart() -> Result<()> {
    let test = "agent_xdp_static_groups_spray_and_survive_restart";
    if !(have_root(test) && have_tool(test, "ethtool") && have_xdp(test)) {
        return Ok(());
    }
    let lab = XdpLab::new("agx")?;
    let dir = TempDir::new("agent-xdp")?;
    let socket = dir.0.join("agent.sock");
    let members: String = (1..=4)
        .map(|i| {
            format!(
                "      - {{interface: e{i}, neighbor_mac: \"{}\", weight: {}}}\n",
                fare::dataplane::MacAddr(sink_mac(i)),
                WEIGHTS[i - 1]
            )
        })
        .collect();
    let config = dir.write(
        "agent.yaml",
        &format!(
            "name: {}\nrouter_id: 10.0.0.254\nasn: 65001\nmanagement: {{socket: {}}}\n\
             dataplane: {{kind: xdp, interfaces: [r0]}}\nstatic:\n  - prefix: 198.18.0.0/16\n    \
             mode: spray\n    members:\n{members}",
            lab.node,
            socket.display()
        ),
    )?;
    let mut agent = Agent::start(Some(&lab.router), &config, &socket)?;

    // 1,000 cycles of sum(w) = 14: every member gets exactly its share.
    let n = 14_000;
    let at_sinks = send(&lab, n)?;
    let counted = packets(&agent)?;
    println!("agent_xdp: sinks {at_sinks:?}, member counters {counted:?}");
    for (i, w) in WEIGHTS.iter().enumerate() {
        let exact = n * w / 14;
        ensure!(counted[i].abs_diff(exact) <= 14, "member {i}: {counted:?}");
        ensure!(at_sinks[i].abs_diff(exact) <= 14, "sink {i}: {at_sinks:?}");
    }

    // Stopped agent: the pinned program keeps forwarding.
    ensure!(agent.stop()? == Some(0), "{}", agent.log_text());
    let while_down = send(&lab, 1_400)?;
    ensure!(
        while_down.iter().sum::<u64>() == 1_400,
        "lost frames while down: {while_down:?}"
    );

    // Restarted agent: re-attaches, counters carried on in the pinned maps.
    let agent = Agent::start(Some(&lab.router), &config, &socket)?;
    let again = send(&lab, 1_400)?;
    ensure!(
        again.iter().sum::<u64>() == 1_400,
        "lost frames after restart: {again:?}"
    );
    let counted = packets(&agent)?;
    ensure!(counted.iter().sum::<u64>() >= n + 2_800, "{counted:?}");
    Ok(())
}
