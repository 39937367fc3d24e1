//! `fare lab up` / `fare lab down` on every topology under topologies/ that fits this
//! machine: the namespaces, links, addresses and shaping appear, and afterwards nothing is
//! left (no namespace, no state directory, no process). `down` is idempotent and also
//! cleans up a lab whose state directory is gone (as after a crash).

use anyhow::{ensure, Context, Result};
use fare_integration::lab::{fare, have_mininet, namespaces};
use fare_integration::{have_root, have_tool, repo_root, run};
use std::path::Path;
use std::process::Command;

/// Namespaces (nodes + hosts) above this are skipped: 2 cores, and tests run serially.
const MAX_NAMESPACES: usize = 120;

fn lab_name(tag: &str) -> String {
    format!("{tag}{}", std::process::id() % 100_000)
}

/// `fare lab up TOPO --name LAB EXTRA...`.
fn lab_up(topo: &Path, lab: &str, extra: &[&str]) -> Result<std::process::Output> {
    let topo = topo.to_string_lossy();
    let mut args = vec!["lab", "up", &topo, "--name", lab];
    args.extend_from_slice(extra);
    fare(&args)
}

fn up_down(topo: &Path, lab: &str) -> Result<()> {
    let prefix = format!("farelab-{lab}-");
    let out = lab_up(topo, lab, &["--no-agents", "--json"])?;
    let result = (|| -> Result<()> {
        ensure!(
            out.status.success(),
            "lab up {}: {}",
            topo.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).context("up --json")?;
        let nodes = report["nodes"].as_u64().unwrap_or(0) as usize;
        let hosts = report["hosts"].as_u64().unwrap_or(0) as usize;
        let ns = namespaces(&prefix);
        ensure!(
            ns.len() == nodes + hosts,
            "{} namespaces, expected {}",
            ns.len(),
            nodes + hosts
        );
        // Every fabric link is a shaped veth end in both of its nodes.
        let mut veths = 0;
        let mut shaped = 0;
        for n in ns.iter().filter(|n| !n.contains("-h")) {
            let links = run("ip", &["-n", n, "-o", "link", "show", "type", "veth"])?;
            veths += String::from_utf8_lossy(&links.stdout)
                .lines()
                .filter(|l| l.contains(": eth") && !l.contains(": eth0"))
                .count();
            let q = run("tc", &["-n", n, "qdisc", "show"])?;
            shaped += String::from_utf8_lossy(&q.stdout)
                .matches("qdisc tbf")
                .count();
        }
        let links = report["links"].as_u64().unwrap_or(0) as usize;
        ensure!(
            veths == 2 * links,
            "{veths} fabric veth ends, expected {}",
            2 * links
        );
        ensure!(
            shaped == 2 * links,
            "{shaped} tbf qdiscs, expected {}",
            2 * links
        );
        ensure!(Path::new(&format!("/run/fare/lab/{lab}/state.json")).exists());
        // A second `up` of the same lab is refused.
        let again = lab_up(topo, lab, &["--no-agents"])?;
        ensure!(!again.status.success(), "second lab up succeeded");
        Ok(())
    })();
    let down = fare(&["lab", "down", lab])?;
    ensure!(
        down.status.success(),
        "lab down: {}",
        String::from_utf8_lossy(&down.stderr)
    );
    result?;
    ensure!(
        namespaces(&prefix).is_empty(),
        "namespaces left: {:?}",
        namespaces(&prefix)
    );
    ensure!(
        !Path::new(&format!("/run/fare/lab/{lab}")).exists(),
        "state dir left"
    );
    let again = fare(&["lab", "down", lab])?;
    ensure!(again.status.success(), "second lab down failed");
    Ok(())
}

#[test]
fn lab_up_down_every_topology() -> Result<()> {
    if !have_root("lab_up_down_every_topology") || !have_tool("lab_up_down_every_topology", "tc") {
        return Ok(());
    }
    for (i, (topo, total, links)) in topologies("lab_up_down_every_topology")?
        .into_iter()
        .enumerate()
    {
        if total > MAX_NAMESPACES {
            fare_integration::skip(
                &format!("lab up {}", topo.display()),
                &format!("{total} namespaces is more than this test's {MAX_NAMESPACES}"),
            );
            continue;
        }
        eprintln!(
            "lab up/down {} ({total} namespaces, {links} links)",
            topo.display()
        );
        up_down(&topo, &lab_name(&format!("u{i}")))?;
    }
    Ok(())
}

/// Namespaces above this are only brought up without agents: every agent is a process
/// with BGP sessions and an XDP program on 2 shared cores.
const MAX_NAMESPACES_WITH_AGENTS: usize = 24;

/// The topologies under topologies/ (every `.yaml`, sorted), with their node + host
/// namespace count; those with a BMv2 node are left out (SKIPPED) without the switch.
fn topologies(test: &str) -> Result<Vec<(std::path::PathBuf, usize, usize)>> {
    let mut dir: Vec<_> = std::fs::read_dir(repo_root().join("topologies"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    dir.sort();
    ensure!(!dir.is_empty(), "no topologies");
    let mut out = Vec::new();
    for topo in dir {
        let t = fare::topology::load(&topo).map_err(|e| anyhow::anyhow!("{e}"))?;
        let hosts: usize = t
            .nodes
            .iter()
            .filter(|n| !n.role.is_stub())
            .map(|n| n.prefixes.len())
            .sum();
        let bmv2 = t
            .nodes
            .iter()
            .any(|n| n.target == fare::topology::Target::Bmv2);
        if bmv2 && !have_tool(&format!("{test} {}", topo.display()), "simple_switch_grpc") {
            continue;
        }
        out.push((topo, t.nodes.len() + hosts, t.links.len()));
    }
    Ok(out)
}

/// What a running lab consists of beyond its namespaces: its processes (agents,
/// switches, Mininet, anything in its namespaces), its XDP pin directories and the names
/// of its interfaces (which must not turn up in the root namespace after `down`).
struct Traces {
    pids: Vec<i32>,
    pins: Vec<std::path::PathBuf>,
    interfaces: Vec<String>,
}

fn traces(lab: &str) -> Traces {
    let prefix = format!("farelab-{lab}-");
    let mut pids = Vec::new();
    let state = std::fs::read_to_string(format!("/run/fare/lab/{lab}/state.json"))
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok());
    if let Some(state) = &state {
        for key in ["agents", "switches"] {
            for entry in state[key].as_array().into_iter().flatten() {
                pids.extend(entry[1].as_i64().map(|p| p as i32));
            }
        }
        pids.extend(state["mininet_pid"].as_i64().map(|p| p as i32));
    }
    let mut interfaces = Vec::new();
    for ns in namespaces(&prefix) {
        if let Ok(out) = run("ip", &["netns", "pids", &ns]) {
            pids.extend(
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter_map(|l| l.trim().parse::<i32>().ok()),
            );
        }
        if let Ok(out) = run("ip", &["-n", &ns, "-o", "link", "show"]) {
            for l in String::from_utf8_lossy(&out.stdout).lines() {
                if let Some(name) = l.split(':').nth(1) {
                    let name = name.trim().split('@').next().unwrap_or("").to_string();
                    if name != "lo" && !name.is_empty() {
                        interfaces.push(name);
                    }
                }
            }
        }
    }
    pids.sort_unstable();
    pids.dedup();
    let pins = std::fs::read_dir("/sys/fs/bpf/fare")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    Traces {
        pids,
        pins,
        interfaces,
    }
}

/// A process that still runs (not a zombie waiting for its parent).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z'))
}

fn root_links() -> Vec<String> {
    run("ip", &["-o", "link", "show"])
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split(':').nth(1))
                .map(|n| n.trim().split('@').next().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn lab_down_leaves_nothing_with_agents() -> Result<()> {
    let test = "lab_down_leaves_nothing_with_agents";
    if !have_root(test) || !have_tool(test, "tc") {
        return Ok(());
    }
    for (i, (topo, total, links)) in topologies(test)?.into_iter().enumerate() {
        if total > MAX_NAMESPACES_WITH_AGENTS {
            fare_integration::skip(
                &format!("{test} {}", topo.display()),
                &format!(
                    "{total} namespaces with agents is more than this test's \
                     {MAX_NAMESPACES_WITH_AGENTS} (lab_up_down_every_topology covers it without)"
                ),
            );
            continue;
        }
        let lab = lab_name(&format!("a{i}"));
        let before = root_links();
        let out = lab_up(&topo, &lab, &["--dataplane", "xdp"])?;
        let running_lab = traces(&lab);
        let down = fare(&["lab", "down", &lab])?;
        ensure!(
            out.status.success(),
            "lab up {} --dataplane xdp: {}",
            topo.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        ensure!(
            down.status.success(),
            "lab down: {}",
            String::from_utf8_lossy(&down.stderr)
        );
        eprintln!(
            "{test} {}: {total} namespaces, {links} links, {} processes, {} pin directories, \
             {} interfaces while up",
            topo.display(),
            running_lab.pids.len(),
            running_lab.pins.len(),
            running_lab.interfaces.len()
        );
        ensure!(!running_lab.pids.is_empty(), "no agent process while up");
        ensure!(!running_lab.pins.is_empty(), "no XDP pins while up");
        let left: Vec<i32> = running_lab
            .pids
            .iter()
            .copied()
            .filter(|&p| running(p))
            .collect();
        ensure!(left.is_empty(), "processes left after lab down: {left:?}");
        let ns = namespaces(&format!("farelab-{lab}-"));
        ensure!(ns.is_empty(), "namespaces left: {ns:?}");
        let pins: Vec<_> = running_lab.pins.iter().filter(|p| p.exists()).collect();
        ensure!(pins.is_empty(), "pins left: {pins:?}");
        let stray: Vec<String> = root_links()
            .into_iter()
            .filter(|l| !before.contains(l) && running_lab.interfaces.contains(l))
            .collect();
        ensure!(
            stray.is_empty(),
            "lab interfaces left in the root namespace: {stray:?}"
        );
        ensure!(
            !Path::new(&format!("/run/fare/lab/{lab}")).exists(),
            "state dir left"
        );
    }
    Ok(())
}

#[test]
fn lab_down_cleans_up_without_state() -> Result<()> {
    if !have_root("lab_down_cleans_up_without_state") {
        return Ok(());
    }
    let lab = lab_name("crash");
    let topo = repo_root().join("topologies/arn-spine-leaf.yaml");
    let out = lab_up(&topo, &lab, &["--no-agents"])?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A process left running inside a namespace, and the state directory lost.
    let ns = format!("farelab-{lab}-leaf1");
    let mut sleeper = Command::new("ip")
        .args(["netns", "exec", &ns, "sleep", "60"])
        .spawn()?;
    std::fs::remove_dir_all(format!("/run/fare/lab/{lab}"))?;
    let down = fare(&["lab", "down", &lab])?;
    let gone = fare_integration::wait_until(std::time::Duration::from_secs(5), || {
        matches!(sleeper.try_wait(), Ok(Some(_)))
    });
    if !gone {
        let _ = sleeper.kill();
    }
    let _ = sleeper.wait();
    ensure!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    ensure!(
        namespaces(&format!("farelab-{lab}-")).is_empty(),
        "namespaces left"
    );
    ensure!(gone, "process inside the lab survived lab down");
    Ok(())
}

#[test]
fn lab_up_rejects_bad_input_with_exit_code_2() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("fare-lab-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "name: x\nnodes:\n  - {name: A, role: leaf, asn: nope}\n",
    )?;
    let out = fare(&["lab", "up", &bad.to_string_lossy()])?;
    let _ = std::fs::remove_dir_all(&dir);
    ensure!(out.status.code() == Some(2), "exit {:?}", out.status.code());
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(err.contains("bad.yaml:3"), "{err}");
    Ok(())
}

#[test]
fn lab_mininet_backend_runs_agents_and_traffic() -> Result<()> {
    let test = "lab_mininet_backend_runs_agents_and_traffic";
    if !have_root(test) || !have_tool(test, "tc") || !have_mininet(test) {
        return Ok(());
    }
    let lab = lab_name("mn");
    let prefix = format!("farelab-{lab}-");
    let topo = repo_root().join("topologies/arn-spine-leaf.yaml");
    let up = lab_up(&topo, &lab, &["--backend", "mininet", "--routing", "bgp"])?;
    let state = Path::new("/run/fare/lab").join(&lab).join("state.json");
    let mininet_pid = std::fs::read_to_string(&state)
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| v["mininet_pid"].as_u64());
    let result = (|| -> Result<()> {
        ensure!(
            up.status.success(),
            "lab up --backend mininet: {}",
            String::from_utf8_lossy(&up.stderr)
        );
        ensure!(mininet_pid.is_some(), "no mininet pid in the lab state");
        // BGP between the agents; traffic only between the lab's own host namespaces.
        let mut delivered = 0.0;
        for _ in 0..10 {
            let out = fare(&[
                "lab",
                "traffic",
                "--name",
                &lab,
                "--duration",
                "2",
                "--json",
                "--quiet",
            ])?;
            ensure!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let r: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            let sent = r["totals"]["sent_packets"].as_f64().unwrap_or(0.0);
            delivered = r["totals"]["received_packets"].as_f64().unwrap_or(0.0) / sent.max(1.0);
            if delivered > 0.95 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        ensure!(delivered > 0.95, "only {:.1}% delivered", 100.0 * delivered);
        Ok(())
    })();
    let down = fare(&["lab", "down", &lab])?;
    ensure!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    result?;
    ensure!(namespaces(&prefix).is_empty(), "namespaces left");
    if let Some(pid) = mininet_pid {
        // Stopped by `down`; init reaps it a moment later.
        let gone = fare_integration::wait_until(std::time::Duration::from_secs(10), || {
            !Path::new(&format!("/proc/{pid}")).exists()
        });
        ensure!(gone, "mininet process {pid} left");
    }
    Ok(())
}
