//! `fare lab restart NODE`: stop a node's agent (SIGTERM, or SIGKILL with `--kill` to play
//! a crash) and start it again with the same configuration. With the XDP data plane the
//! program and its maps stay pinned meanwhile (`pin_name` = the node's namespace), so the
//! node keeps forwarding while its agent is away, and the new agent reconciles with what
//! it finds.

use super::agents;
use super::state::StateDir;
use super::sys;
use super::up;
use super::LabError;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct RestartArgs {
    /// The node whose agent restarts.
    pub node: String,
    /// Lab name; without it, the only lab that is up.
    #[arg(long)]
    pub name: Option<String>,
    /// SIGKILL instead of SIGTERM: the agent dies without any cleanup, as in a crash.
    #[arg(long)]
    pub kill: bool,
    /// Seconds to wait for the new agent's management socket.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, serde::Serialize)]
pub struct RestartReport {
    pub node: String,
    pub old_pid: u32,
    pub new_pid: u32,
    /// From the signal until the new agent answers on its management socket.
    pub restart_s: f64,
}

pub fn restart(args: &RestartArgs) -> Result<RestartReport, LabError> {
    let dir = StateDir::find(args.name.as_deref())?;
    let mut state = dir.load()?;
    let node = state
        .plan
        .node(&args.node)
        .cloned()
        .ok_or_else(|| LabError::Input(format!("no node `{}` in this lab", args.node)))?;
    let entry = state
        .agents
        .iter()
        .position(|(n, _)| *n == args.node)
        .ok_or_else(|| LabError::Input(format!("node `{}` runs no agent", args.node)))?;
    let old = state.agents[entry].1;
    let since = Instant::now();
    stop(old as i32, args.kill);
    let _ = std::fs::remove_file(dir.socket(&args.node));
    let new = agents::spawn(&up::fare_binary(), &node, &dir)?;
    state.agents[entry].1 = new;
    dir.save(&state)?;
    let deadline = since + Duration::from_secs_f64(args.timeout.max(0.0));
    while !agents::socket_ready(&dir, &args.node) {
        if !sys::alive(new as i32) || Instant::now() > deadline {
            return Err(LabError::AgentFailed(format!(
                "agent of {} did not come back; its log ends with: {}",
                args.node,
                agents::log_tail(&dir, &args.node, 3).replace('\n', " | ")
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    dir.event(
        &serde_json::json!({"at": super::state::now(), "event": "restart",
        "node": args.node, "kill": args.kill}),
    );
    Ok(RestartReport {
        node: args.node.clone(),
        old_pid: old,
        new_pid: new,
        restart_s: since.elapsed().as_secs_f64(),
    })
}

/// Stops `pid` and waits (bounded) until it is gone.
fn stop(pid: i32, kill: bool) {
    let signal = if kill {
        Signal::SIGKILL
    } else {
        Signal::SIGTERM
    };
    sys::kill(pid, signal);
    let deadline = Instant::now() + Duration::from_secs(5);
    while sys::alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if sys::alive(pid) {
        sys::kill(pid, Signal::SIGKILL);
    }
}
