//! `fare agent` with `dataplane: {kind: xdp}` and static groups, on the XDP bench of
//! `fare_integration::xdp_lab` (router with ingress r0 and egress e1..e4 to four sinks):
//! spray 3:3:4:4 follows the weights exactly, `fare show groups --json` reports the
//! per-member counters, and forwarding continues while the agent is stopped and after it
//! restarts (pinned program and maps); a second agent of the same socket refuses before
//! it touches the running agent's program (its id on the ingress port unchanged).

use anyhow::{ensure, Result};
use fare_integration::agent::{member_packets, Agent, TempDir};
use fare_integration::xdp_lab::XdpLab;

const WEIGHTS: [u64; 4] = [3, 3, 4, 4];

fn packets(agent: &Agent) -> Result<Vec<u64>> {
    Ok(member_packets(&agent.show("groups")?[0]))
}

#[test]
fn agent_xdp_static_groups_spray_and_survive_restart() -> Result<()> {
    let Some(lab) = XdpLab::for_test("agent_xdp_static_groups_spray_and_survive_restart", "agx")?
    else {
        return Ok(());
    };
    let dir = TempDir::new("agent-xdp")?;
    let socket = dir.0.join("agent.sock");
    let members = WEIGHTS.map(|w| (w, None));
    let config = lab.agent_config(&dir, &socket, &members)?;
    let mut agent = Agent::start(Some(&lab.router), &config, &socket)?;

    // 1,000 cycles of sum(w) = 14: every member gets exactly its share.
    let n = 14_000;
    let at_sinks = lab.send_stream(n)?;
    let counted = packets(&agent)?;
    println!("agent_xdp: sinks {at_sinks:?}, member counters {counted:?}");
    for (i, w) in WEIGHTS.iter().enumerate() {
        let exact = n * w / 14;
        ensure!(counted[i].abs_diff(exact) <= 14, "member {i}: {counted:?}");
        ensure!(at_sinks[i].abs_diff(exact) <= 14, "sink {i}: {at_sinks:?}");
    }

    // Stopped agent: the pinned program keeps forwarding.
    ensure!(agent.stop()? == Some(0), "{}", agent.log_text());
    let while_down = lab.send_stream(1_400)?;
    ensure!(
        while_down.iter().sum::<u64>() == 1_400,
        "lost frames while down: {while_down:?}"
    );

    // Restarted agent: re-attaches, counters carried on in the pinned maps.
    let agent = Agent::start(Some(&lab.router), &config, &socket)?;
    let again = lab.send_stream(1_400)?;
    ensure!(
        again.iter().sum::<u64>() == 1_400,
        "lost frames after restart: {again:?}"
    );
    let counted = packets(&agent)?;
    ensure!(counted.iter().sum::<u64>() >= n + 2_800, "{counted:?}");

    // A second agent of the same configuration: refused (exit 1), the program attached to
    // the ingress port the same, forwarding on.
    let before = xdp_prog_id(&lab)?;
    let mut second = Agent::start(Some(&lab.router), &config, &socket)?;
    let ended = fare_integration::wait_until(std::time::Duration::from_secs(30), || {
        matches!(second.child.try_wait(), Ok(Some(_)))
    });
    ensure!(ended, "the second agent runs: {}", second.log_text());
    let code = second.child.wait()?.code();
    ensure!(code == Some(1), "exit {code:?}: {}", second.log_text());
    ensure!(xdp_prog_id(&lab)? == before, "the program was replaced");
    let last = lab.send_stream(1_400)?;
    ensure!(last.iter().sum::<u64>() == 1_400, "lost frames: {last:?}");
    Ok(())
}

/// The id of the XDP program attached to the router's ingress port (`ip -j link`).
fn xdp_prog_id(lab: &fare_integration::xdp_lab::XdpLab) -> Result<u64> {
    let out = lab.router.exec("ip", &["-j", "-d", "link", "show", "r0"])?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let xdp = &v[0]["xdp"];
    let id = xdp["prog"]["id"]
        .as_u64()
        .or_else(|| xdp["attached"][0]["prog"]["id"].as_u64());
    id.ok_or_else(|| anyhow::anyhow!("no XDP program on r0: {xdp}"))
}
