//! `fare lab down`: kill every process in the lab's namespaces (agents, traffic), delete
//! the namespaces (which deletes their veths) and the state directory. It works from the
//! namespace names alone, so a lab whose `up` crashed or whose state is gone is still
//! found; running it twice is harmless.

use super::plan;
use super::state::{self, StateDir};
use super::sys;
use super::LabError;
use nix::sys::signal::Signal;
use std::fmt::Write;
use std::time::{Duration, Instant};

#[derive(Debug, Default, serde::Serialize)]
pub struct DownReport {
    pub labs: Vec<String>,
    pub namespaces: usize,
    pub processes: usize,
}

/// Removes lab `lab`; `verbose` prints what was removed.
pub fn down_lab(lab: &str, verbose: bool) -> Result<DownReport, LabError> {
    let dir = StateDir::new(lab);
    let prefix = plan::ns_prefix(lab);
    let namespaces: Vec<String> = sys::list_netns()?
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    let mut pids: Vec<i32> = Vec::new();
    if let Ok(state) = dir.load() {
        pids.extend(state.agents.iter().map(|(_, p)| *p as i32));
        pids.extend(state.mininet_pid.map(|p| p as i32));
        pids.extend(state.switches.iter().map(|(_, p)| *p as i32));
    }
    for ns in &namespaces {
        pids.extend(sys::netns_pids(ns));
    }
    pids.sort_unstable();
    pids.dedup();
    let killed = stop(&pids);
    if !namespaces.is_empty() {
        let mut batch = String::new();
        for ns in &namespaces {
            let _ = writeln!(batch, "netns del {ns}");
        }
        // -force: go on past a namespace that vanished meanwhile.
        sys::run_stdin("ip", &["-force", "-batch", "-"], &batch)?;
    }
    remove_pins(&prefix);
    let existed = dir.path.exists();
    dir.remove()?;
    if verbose && (existed || !namespaces.is_empty()) {
        eprintln!(
            "lab down: {lab}: {} namespaces, {killed} processes removed",
            namespaces.len()
        );
    }
    Ok(DownReport {
        labs: if existed || !namespaces.is_empty() {
            vec![lab.to_string()]
        } else {
            Vec::new()
        },
        namespaces: namespaces.len(),
        processes: killed,
    })
}

/// Every lab: those with a state directory and those found only by namespace name.
pub fn all_labs() -> Result<Vec<String>, LabError> {
    let mut labs = state::list();
    let head = format!("{}-", plan::NS_PREFIX);
    for ns in sys::list_netns()? {
        if let Some(rest) = ns.strip_prefix(&head) {
            if let Some((lab, _)) = rest.split_once('-') {
                labs.push(lab.to_string());
            }
        }
    }
    labs.sort();
    labs.dedup();
    Ok(labs)
}

pub fn down_all(verbose: bool) -> Result<DownReport, LabError> {
    let mut total = DownReport::default();
    for lab in all_labs()? {
        let r = down_lab(&lab, verbose)?;
        total.labs.extend(r.labs);
        total.namespaces += r.namespaces;
        total.processes += r.processes;
    }
    Ok(total)
}

/// SIGTERM, up to 3 s grace, then SIGKILL. Returns how many processes there were.
fn stop(pids: &[i32]) -> usize {
    let own = std::process::id() as i32;
    let pids: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|&p| p != own && p > 1)
        .collect();
    let mut n = 0;
    for &p in &pids {
        if sys::kill(p, Signal::SIGTERM) {
            n += 1;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && pids.iter().any(|&p| sys::alive(p)) {
        reap();
        std::thread::sleep(Duration::from_millis(50));
    }
    for &p in &pids {
        if sys::alive(p) {
            sys::kill(p, Signal::SIGKILL);
        }
    }
    reap();
    n
}

/// Reaps children of this process (agents started by this same process, e.g. in tests).
fn reap() {
    use nix::sys::wait::{waitpid, WaitPidFlag};
    while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if status == nix::sys::wait::WaitStatus::StillAlive {
            break;
        }
    }
}

/// XDP agents of the lab pin their maps under /sys/fs/bpf/fare/<namespace>: remove them
/// once the agents are gone (the programs went with the namespaces' interfaces).
fn remove_pins(prefix: &str) {
    let root = std::path::Path::new(fare_dp_xdp::pins::DEFAULT_ROOT);
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(prefix) {
            if let Err(err) = std::fs::remove_dir_all(e.path()) {
                tracing::warn!("removing {}: {err}", e.path().display());
            }
        }
    }
}
