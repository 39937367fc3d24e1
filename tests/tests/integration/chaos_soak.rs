//! `fare bench chaos --minutes 1`: draft Figure 1 on XDP under steady UDP traffic and a
//! seeded schedule of link flaps, degradations and agent `kill -9`s for a minute. The
//! checks come back as values in the soak's JSON: faults were done and each recovered,
//! every session is Established on both ends and every group equals the model at the
//! end, every lost packet was sent inside a fault window (fault start .. recovery + the
//! grace), none after the last window, and no agent's RSS or fds grew past the rule.
//! The benchmark takes its lab down itself; the guard here does it if the run died.

use anyhow::{ensure, Context, Result};
use fare_integration::lab::{fare, namespaces};
use fare_integration::{fare_bin, have_root, have_tool, repo_root};
use std::process::Command;

/// Takes the soak's lab down if its namespaces are still there (a run that died).
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !namespaces(&format!("farelab-{}-", self.0)).is_empty() {
            let _ = fare(&["lab", "down", "--name", &self.0]);
        }
    }
}

#[test]
fn chaos_soak_one_minute_loses_nothing_outside_fault_windows() -> Result<()> {
    let test = "chaos_soak_one_minute_loses_nothing_outside_fault_windows";
    if !have_root(test) || !have_tool(test, "tc") || !have_tool(test, "nsenter") {
        return Ok(());
    }
    let name = format!("chaosA{}", std::process::id() % 100_000);
    let _cleanup = Cleanup(name.clone());
    let json = std::env::temp_dir().join(format!("{name}.json"));
    let out = Command::new(fare_bin()?)
        .current_dir(repo_root())
        .args([
            "bench",
            "chaos",
            "--minutes",
            "1",
            "--baseline",
            "10",
            "--seed",
            "33",
        ])
        .args(["--name", &name, "--no-write", "--json"])
        .arg(&json)
        .output()?;
    let text = std::fs::read_to_string(&json).with_context(|| {
        format!(
            "no soak result; the benchmark said: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let _ = std::fs::remove_file(&json);
    let r: serde_json::Value = serde_json::from_str(&text)?;
    let checks = r["checks"].as_array().context("no checks")?;
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| c["ok"] != true)
        .map(|c| format!("{}: {}", c["name"], c["detail"]))
        .collect();
    ensure!(failed.is_empty(), "failed checks: {failed:#?}");
    ensure!(
        out.status.success(),
        "exit {:?} with every check passing",
        out.status
    );
    // The checks' own values, restated: what the soak promises.
    let names: Vec<&str> = checks.iter().filter_map(|c| c["name"].as_str()).collect();
    for want in [
        "sessions",
        "model",
        "loss outside windows",
        "after the last window",
    ] {
        ensure!(names.contains(&want), "no `{want}` check among {names:?}");
    }
    let faults = r["faults"].as_array().context("no faults")?;
    ensure!(
        faults.len() >= 2,
        "only {} faults in a minute",
        faults.len()
    );
    ensure!(
        faults.iter().all(|f| f["recovery_s"].is_number()),
        "a fault did not recover: {faults:?}"
    );
    let soak = &r["soak"];
    ensure!(soak["sent"].as_u64().unwrap_or(0) > 0, "no traffic");
    ensure!(soak["outside"].as_array().is_some_and(|v| v.is_empty()));
    ensure!(soak["after_last"] == 0);
    ensure!(
        soak["lost"] == soak["inside"],
        "lost {} inside {}",
        soak["lost"],
        soak["inside"]
    );
    ensure!(
        r["baseline"]["sent"].as_u64().unwrap_or(0) > 0,
        "no baseline traffic"
    );
    let agents = r["agents"].as_array().context("no agent samples")?;
    ensure!(
        agents.len() >= 12,
        "{} agent series for 12 nodes",
        agents.len()
    );
    eprintln!(
        "{test}: {} faults, {} packets sent, {} lost (all inside windows); baseline lost {}",
        faults.len(),
        soak["sent"],
        soak["lost"],
        r["baseline"]["lost"]
    );
    Ok(())
}
