//! `fare lab up` / `fare lab down` on every topology under topologies/ that fits this
//! machine: the namespaces, links, addresses and shaping appear, and afterwards nothing is
//! left (no namespace, no state directory, no process). `down` is idempotent and also
//! cleans up a lab whose state directory is gone (as after a crash).

use anyhow::{ensure, Context, Result};
use fare_integration::lab::{fare, namespaces};
use fare_integration::{have_root, have_tool, repo_root, run};
use std::path::Path;
use std::process::Command;

/// Namespaces (nodes + hosts) above this are skipped: 2 cores, and tests run serially.
const MAX_NAMESPACES: usize = 120;

fn lab_name(tag: &str) -> String {
    format!("{tag}{}", std::process::id() % 100_000)
}

fn up_down(topo: &Path, lab: &str) -> Result<()> {
    let prefix = format!("farelab-{lab}-");
    let out = fare(&[
        "lab",
        "up",
        &topo.to_string_lossy(),
        "--name",
        lab,
        "--no-agents",
        "--json",
    ])?;
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
        let again = fare(&[
            "lab",
            "up",
            &topo.to_string_lossy(),
            "--name",
            lab,
            "--no-agents",
        ])?;
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
    let mut dir: Vec<_> = std::fs::read_dir(repo_root().join("topologies"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    dir.sort();
    ensure!(!dir.is_empty(), "no topologies");
    for (i, topo) in dir.iter().enumerate() {
        let t = fare::topology::load(topo).map_err(|e| anyhow::anyhow!("{e}"))?;
        let hosts: usize = t
            .nodes
            .iter()
            .filter(|n| !n.role.is_stub())
            .map(|n| n.prefixes.len())
            .sum();
        let total = t.nodes.len() + hosts;
        let bmv2 = t
            .nodes
            .iter()
            .any(|n| n.target == fare::topology::Target::Bmv2);
        if bmv2 && !have_tool(&format!("lab up {}", topo.display()), "simple_switch_grpc") {
            continue;
        }
        if total > MAX_NAMESPACES {
            eprintln!(
                "SKIPPED lab up {}: {total} namespaces is more than this test's {MAX_NAMESPACES}",
                topo.display()
            );
            continue;
        }
        eprintln!(
            "lab up/down {} ({total} namespaces, {} links)",
            topo.display(),
            t.links.len()
        );
        up_down(topo, &lab_name(&format!("u{i}")))?;
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
    let out = fare(&[
        "lab",
        "up",
        &topo.to_string_lossy(),
        "--name",
        &lab,
        "--no-agents",
    ])?;
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

/// Whether Debian's Mininet can be imported by the system Python.
fn have_mininet(test: &str) -> bool {
    let ok = Command::new(fare::lab::mininet::PYTHON)
        .args(["-c", "import mininet.net"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED {test}: Debian's mininet is not installed");
    }
    ok
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
    let up = fare(&[
        "lab",
        "up",
        &topo.to_string_lossy(),
        "--name",
        &lab,
        "--backend",
        "mininet",
        "--routing",
        "bgp",
    ])?;
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
