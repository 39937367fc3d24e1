//! `fare lab restart NODE --kill` on an XDP lab: the ingress leaf's agent is killed with
//! SIGKILL and started again while its hosts send traffic; the leaf's XDP program and maps
//! stay pinned (under the node's namespace name) in between, so not one packet of that
//! traffic is lost, and the new agent adopts the pinned groups.

use anyhow::{ensure, Result};
use fare_integration::lab::Lab;
use fare_integration::{have_root, have_tool};
use std::path::Path;
use std::time::Duration;

#[test]
fn lab_agent_kill_and_restart_keeps_xdp_forwarding() -> Result<()> {
    let test = "lab_agent_kill_and_restart_keeps_xdp_forwarding";
    if !have_root(test) || !have_tool(test, "tc") || !have_tool(test, "nsenter") {
        return Ok(());
    }
    let (lab, _) = Lab::start(
        "topologies/arn-spine-leaf.yaml",
        "rs",
        &["--dataplane", "xdp", "--no-arn"],
    )?;
    let name = lab.name.clone();
    let pins = format!("/sys/fs/bpf/fare/farelab-{name}-leaf1");
    ensure!(
        Path::new(&pins).exists(),
        "no pins at {pins}: the agent is not sharing the host's bpffs"
    );
    // leaf1's hosts -> leaf2's, through leaf1's XDP program, while its agent restarts.
    let lab = std::sync::Arc::new(lab);
    let traffic = {
        let lab = lab.clone();
        std::thread::spawn(move || lab.traffic("leaf1", "leaf2", 40, 6, &[]))
    };
    std::thread::sleep(Duration::from_secs(2));
    let restart = lab.json("restart", &["leaf1", "--kill"]);
    let r = traffic
        .join()
        .map_err(|_| anyhow::anyhow!("traffic thread panicked"))??;
    restart?;
    let sent = r["totals"]["sent_packets"].as_u64().unwrap_or(0);
    let received = r["totals"]["received_packets"].as_u64().unwrap_or(0);
    eprintln!("{test}: sent {sent}, received {received} across the kill and restart");
    ensure!(sent > 0, "no traffic sent");
    // A few packets may still be in flight when the sink stops.
    ensure!(
        received as f64 >= 0.995 * sent as f64,
        "lost {} of {sent} packets across the agent restart",
        sent - received
    );
    let lab = std::sync::Arc::try_unwrap(lab).map_err(|_| anyhow::anyhow!("lab still shared"))?;
    lab.down()?;
    ensure!(!Path::new(&pins).exists(), "pins left after lab down");
    Ok(())
}
