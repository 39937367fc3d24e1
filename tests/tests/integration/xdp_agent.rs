//! `fare agent` with `dataplane: {kind: xdp}` and static groups: forwards without any BGP
//! neighbor, reports per-member counters through `fare show groups --json`, and survives
//! `kill -9` plus a restart under traffic without losing a packet (the program stays
//! attached through its pinned link; the new agent re-attaches and reconciles).
//!
//! Run: `cargo test -p fare-integration --test integration xdp_agent:: -- --test-threads=1` (root).

use anyhow::{ensure, Context, Result};
use fare_integration::agent::member_packets;
use fare_integration::packets::udp4_frame;
use fare_integration::xdp_lab::{have_xdp, sink_mac, XdpLab, GEN_MAC, ROUTER_MAC};
use fare_integration::{fare_bin, have_root, have_tool, wait_until};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn config(name: &str, socket: &Path) -> String {
    let members: String = [3, 3, 4, 4]
        .iter()
        .enumerate()
        .map(|(i, w)| {
            format!(
                "      - {{interface: e{}, neighbor_mac: \"{}\", weight: {w}}}\n",
                i + 1,
                fare::dataplane::MacAddr(sink_mac(i + 1))
            )
        })
        .collect();
    format!(
        "name: {name}\nrouter_id: 10.0.0.254\nasn: 65001\nmanagement: {{socket: {}}}\n\
         dataplane: {{kind: xdp, interfaces: [r0]}}\nstatic:\n  - prefix: 198.18.0.0/16\n    \
         mode: spray\n    members:\n{members}",
        socket.display()
    )
}

struct Agent {
    child: Child,
}

impl Agent {
    fn start(lab: &XdpLab, config: &Path, log: &Path) -> Result<Agent> {
        let log = std::fs::File::create(log)?;
        // `nsenter --net`, not `ip netns exec`: the latter remounts /sys in a private
        // mount namespace, which hides the host's bpffs, so the pins would die with the
        // agent and a restart could not find them.
        let child = Command::new("nsenter")
            .arg(format!("--net=/var/run/netns/{}", lab.router.name))
            .arg(fare_bin()?.to_str().context("binary path")?)
            .args(["agent", "--config"])
            .arg(config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        Ok(Agent { child })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `fare show groups --json`, or None while the agent is not answering.
fn show_groups(socket: &Path) -> Option<serde_json::Value> {
    let out = Command::new(fare_bin().ok()?)
        .args(["show", "--socket"])
        .arg(socket)
        .args(["groups", "--json"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

#[test]
fn xdp_agent_kill_9_and_restart_under_traffic_loses_nothing() -> Result<()> {
    let test = "xdp_agent_kill_9_and_restart_under_traffic_loses_nothing";
    if !(have_root(test)
        && have_tool(test, "ethtool")
        && have_tool(test, "nsenter")
        && have_xdp(test))
    {
        return Ok(());
    }
    let lab = XdpLab::new("xa")?;
    let dir = PathBuf::from(format!("/tmp/{}", lab.node));
    std::fs::create_dir_all(&dir)?;
    let socket = dir.join("agent.sock");
    let config_path = dir.join("agent.yaml");
    std::fs::write(&config_path, config(&lab.node, &socket))?;
    let result = (|| -> Result<()> {
        let mut agent = Agent::start(&lab, &config_path, &dir.join("agent1.log"))?;
        ensure!(
            wait_until(Duration::from_secs(20), || show_groups(&socket)
                .is_some_and(|g| g.as_array().is_some_and(|a| a.len() == 1))),
            "the first agent never reported its static group"
        );
        let stop = Arc::new(AtomicBool::new(false));
        let before = lab.sink_rx()?;
        let sender = lab.spawn_sender(0, 10_000_000, stop.clone(), Duration::from_secs(60), |i| {
            udp4_frame(
                ROUTER_MAC,
                GEN_MAC,
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(198, 18, (i >> 8) as u8, i as u8),
                1000,
                4791,
                64,
            )
        });
        std::thread::sleep(Duration::from_millis(300));
        // kill -9: no cleanup runs; the pinned link keeps the program attached.
        agent.child.kill()?;
        agent.child.wait()?;
        std::thread::sleep(Duration::from_millis(300));
        let _ = std::fs::remove_file(&socket);
        let second = Agent::start(&lab, &config_path, &dir.join("agent2.log"))?;
        let up = wait_until(Duration::from_secs(20), || show_groups(&socket).is_some());
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        let sent = sender
            .join()
            .map_err(|_| anyhow::anyhow!("sender panicked"))??;
        ensure!(up, "the restarted agent never answered");
        let mut delivered = 0;
        wait_until(Duration::from_secs(5), || {
            delivered = lab
                .sink_rx()
                .map(|now| now.iter().zip(&before).map(|(a, b)| a - b).sum())
                .unwrap_or(0);
            delivered >= sent
        });
        let groups = show_groups(&socket).context("show groups")?;
        let counted = member_packets(&groups[0]);
        eprintln!(
            "kill -9 + restart under traffic: sent {sent}, delivered {delivered}, member counters {counted:?}"
        );
        ensure!(sent > 1000, "too little traffic: {sent}");
        ensure!(delivered == sent, "delivered {delivered} of {sent}");
        ensure!(
            counted.iter().sum::<u64>() >= sent,
            "counters {counted:?} below {sent} (they live in the pinned maps)"
        );
        drop(second);
        Ok(())
    })();
    if result.is_err() {
        for log in ["agent1.log", "agent2.log"] {
            if let Ok(text) = std::fs::read_to_string(dir.join(log)) {
                eprintln!("--- {log}\n{text}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    result
}
