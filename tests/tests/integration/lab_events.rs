//! The lab checks events, not words: `fare lab congest` reports an ARN only when an agent
//! sent or applied one (a typed event of its JSON log). A Figure 1 lab, a congestion that
//! congests nothing (the shaper stays at 100 %, no traffic), and meanwhile WARN lines that
//! speak of ARN — as JSON and as text — written into S2's log: no ARN, exit code 1.

use anyhow::{ensure, Result};
use fare_integration::lab::{fare, Lab};
use fare_integration::{have_root, have_tool};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn congest_without_congestion_reports_no_arn_whatever_the_log_says() -> Result<()> {
    let test = "congest_without_congestion_reports_no_arn_whatever_the_log_says";
    if !have_root(test) || !have_tool(test, "tc") {
        return Ok(());
    }
    let extra = ["--routing", "static", "--dataplane", "kernel"];
    let (lab, _) = Lab::start("topologies/draft-fig1.yaml", "lev", &extra)?;
    let log = format!("/run/fare/lab/{}/logs/S2.log", lab.name);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, log) = (stop.clone(), log.clone());
        std::thread::spawn(move || -> Result<u32> {
            let mut f = std::fs::OpenOptions::new().append(true).open(&log)?;
            let mut n = 0;
            // Bounded: at most 100 rounds of 50 ms, whatever the congest does.
            while !stop.load(Ordering::Relaxed) && n < 100 {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)?
                    .as_secs();
                writeln!(
                    f,
                    r#"{{"timestamp":"{}","level":"WARN","fields":{{"message":"ARN sent type 1: learned a warning"}},"target":"fare_arn::monitor"}}"#,
                    jiff::Timestamp::from_second(now as i64)?
                )?;
                writeln!(
                    f,
                    "2026-01-01T00:00:00Z WARN fare_arn: ARN sent, ARN applied"
                )?;
                n += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(n)
        })
    };
    let out = fare(&[
        "lab",
        "congest",
        "S2-L6",
        "--name",
        &lab.name,
        "--percent",
        "100",
        "--duration",
        "2",
        "--json",
    ])?;
    stop.store(true, Ordering::Relaxed);
    let written = writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer panicked"))??;
    ensure!(written > 0, "no WARN line was written into {log}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    ensure!(report["arn_enabled"] == true, "{report}");
    let arn = report["arn"].as_array().cloned().unwrap_or_default();
    ensure!(
        arn.is_empty(),
        "an ARN was reported without congestion: {arn:#?}"
    );
    ensure!(
        out.status.code() == Some(1),
        "congest without an ARN exited {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    lab.down()
}
