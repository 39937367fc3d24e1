//! The README's first command as a test: scripts/demo (with this build's binary, so no
//! setup or release build) runs to the end within five minutes and leaves no namespace,
//! state directory or process behind, started as on a new machine (no bpffs).

use anyhow::{ensure, Result};
use fare_integration::{fare_bin, have_root, have_tool, new_machine, repo_root};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn lab_demo_runs_and_leaves_nothing_behind() -> Result<()> {
    if !have_root("lab_demo_runs_and_leaves_nothing_behind")
        || !have_tool("lab_demo_runs_and_leaves_nothing_behind", "tc")
    {
        return Ok(());
    }
    let before = farelab_namespaces();
    let out_path = std::env::temp_dir().join(format!("fare-demo-{}.log", std::process::id()));
    let log = std::fs::File::create(&out_path)?;
    let report = std::env::temp_dir().join(format!("fare-demo-{}.html", std::process::id()));
    // As on a new machine: nothing mounted on /sys/fs/bpf (the agents mount it), and the
    // XDP data plane asked for by name, so that the demo fails instead of falling back.
    let mut child = new_machine::command(&repo_root().join("scripts/demo"))
        .env("FARE_BIN", fare_bin()?)
        .env("FARE_DEMO_DATAPLANE", "xdp")
        .env("FARE_DEMO_REPORT", &report)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if start.elapsed() > Duration::from_secs(300) {
            // SIGTERM: the demo's trap takes the lab down.
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            std::thread::sleep(Duration::from_secs(10));
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    eprintln!("{output}");
    let after = farelab_namespaces();
    ensure!(
        after.iter().all(|n| before.contains(n)),
        "the demo left namespaces: {after:?}"
    );
    let status = status.ok_or_else(|| anyhow::anyhow!("demo did not finish in 5 minutes"))?;
    ensure!(status.success(), "demo failed: {status}");
    // One line per step with its verdict, and the report's path at the end.
    for step in [
        "✓ lab up",
        "✓ traffic, every leaf",
        "✓ S1-L5 fails",
        "✓ S2->L6 congested",
    ] {
        ensure!(output.contains(step), "no `{step}` line in the demo output");
    }
    let lab_lines = output
        .lines()
        .skip_while(|l| !l.contains("draft Figure 1 as a lab"))
        .count();
    ensure!(
        lab_lines <= 20,
        "the lab part of the demo takes {lab_lines} lines"
    );
    let report = output
        .lines()
        .last()
        .and_then(|l| l.rsplit(' ').next())
        .map(std::path::PathBuf::from)
        .filter(|p| p.extension().is_some_and(|e| e == "html"))
        .ok_or_else(|| anyhow::anyhow!("the demo does not end with the report's path"))?;
    let page = std::fs::read_to_string(&report)?;
    ensure!(
        page.contains("data-link=\"S1-L5\"") && page.contains("Link changes and convergence"),
        "the report lacks the fabric or the changes"
    );
    let _ = std::fs::remove_file(&report);
    Ok(())
}

fn farelab_namespaces() -> Vec<String> {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| n.starts_with("farelab-demo"))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
