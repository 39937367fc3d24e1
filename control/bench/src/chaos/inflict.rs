//! Doing one fault of the schedule to a running lab and repairing it, through the lab's
//! own commands (`fail`, `degrade`, `restore`, `restart --kill`) or, for a BMv2 switch,
//! a SIGKILL and a new switch on the same ports. Each returns the fault's window.

use super::checks::Window;
use super::schedule::Fault;
use anyhow::Context;
use fare_lab::restart::{self, RestartArgs};
use fare_lab::state::{self, StateDir};
use fare_lab::{bmv2, faults, model_check, sys};
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

/// How long a repair may take to converge before it counts as not recovered.
pub const TIMEOUT_S: f64 = 60.0;

/// After a switch restart the agent finds it within its largest reconnect backoff (5 s)
/// and writes its pipeline and groups again: the window lasts at least this long.
const SWITCH_REPLAY: Duration = Duration::from_secs(6);

/// A fault done and repaired.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Done {
    pub fault: String,
    pub kind: &'static str,
    /// Unix s just before the fault.
    pub start: f64,
    /// Unix s when the repair began (restore, restart).
    pub repaired: f64,
    /// Unix s when the fabric was back (or gave up).
    pub end: f64,
    /// From the repair until every session is up and every group equals the model
    /// (None: not within [`TIMEOUT_S`]).
    pub recovery_s: Option<f64>,
    /// The fault or its repair failed (e.g. a restarted agent never answered): the soak
    /// does no further fault and its checks say so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Done {
    pub fn window(&self) -> Window {
        Window {
            start: self.start,
            end: self.end,
        }
    }
}

/// Does the fault and its repair; an error in either is recorded in the result.
pub fn inflict(lab: &str, fault: &Fault) -> Done {
    let start = state::now();
    let (repaired, recovery_s, error) = match inflict_repair(lab, fault) {
        Ok((at, r)) => (at, r, None),
        Err(e) => (state::now(), None, Some(format!("{e:#}"))),
    };
    Done {
        fault: fault.to_string(),
        kind: fault.kind(),
        start,
        repaired,
        end: state::now(),
        recovery_s,
        error,
    }
}

fn inflict_repair(lab: &str, fault: &Fault) -> anyhow::Result<(f64, Option<f64>)> {
    Ok(match fault {
        Fault::Flap { pair } => {
            faults::fail(Some(lab), pair, TIMEOUT_S)?;
            restore(lab, pair)?
        }
        Fault::Degrade { pair, gbps } => {
            faults::degrade(Some(lab), &format!("{pair}={gbps}"), TIMEOUT_S)?;
            restore(lab, pair)?
        }
        Fault::KillAgent { node } => kill_agent(lab, node)?,
        Fault::RestartSwitch { node } => restart_switch(lab, node)?,
    })
}

/// `fare lab restore PAIR`: its start and its convergence time.
fn restore(lab: &str, pair: &str) -> anyhow::Result<(f64, Option<f64>)> {
    let at = state::now();
    let r = faults::restore(Some(lab), pair, TIMEOUT_S)?;
    Ok((at, r.convergence_s))
}

fn kill_agent(lab: &str, node: &str) -> anyhow::Result<(f64, Option<f64>)> {
    let at = state::now();
    let since = Instant::now();
    restart::restart(&RestartArgs {
        node: node.to_string(),
        name: Some(lab.to_string()),
        kill: true,
        timeout: TIMEOUT_S,
        json: false,
    })?;
    Ok((at, converged(lab, since)?))
}

fn restart_switch(lab: &str, node: &str) -> anyhow::Result<(f64, Option<f64>)> {
    let dir = StateDir::new(lab);
    let mut st = dir.load()?;
    let entry = st
        .switches
        .iter()
        .position(|(n, _)| n == node)
        .with_context(|| format!("node {node} runs no switch"))?;
    let old = st.switches[entry].1 as i32;
    sys::kill(old, Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(5);
    while sys::alive(old) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let at = state::now();
    let since = Instant::now();
    let plan = st.plan.node(node).context("no such node")?.clone();
    st.switches[entry].1 = bmv2::start(&plan, &dir)?;
    dir.save(&st)?;
    std::thread::sleep(SWITCH_REPLAY);
    Ok((at, converged(lab, since)?))
}

/// Seconds from `since` until the lab agrees with the model (None: not within [`TIMEOUT_S`]).
fn converged(lab: &str, since: Instant) -> anyhow::Result<Option<f64>> {
    let dir = StateDir::new(lab);
    let st = dir.load()?;
    let r = model_check::wait_converged(&dir, &st, since, Duration::from_secs_f64(TIMEOUT_S))?;
    Ok(r.ok())
}
