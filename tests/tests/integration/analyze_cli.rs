//! `fare analyze` through the binary: each link failure's changed and unreachable group
//! counts equal the difference of `fare weights --json` without and with `--fail` (the
//! one-failure answer the sweep must agree with), the ranking is worst first, the HTML
//! page is self-contained and a browser (headless Chromium) finds one row per failure
//! shown, and bad input exits 2 naming the file.

use anyhow::{ensure, Context, Result};
use fare_integration::lab::fare;
use fare_integration::{have_tool, repo_root};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;

fn json_of(args: &[&str]) -> Result<Value> {
    let r = fare(args)?;
    ensure!(
        r.status.success(),
        "fare {args:?}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    Ok(serde_json::from_slice(&r.stdout)?)
}

/// (node, prefix) -> members as (via, link, bandwidth, weight).
type Groups = BTreeMap<(String, String), Vec<(String, String, String, u64)>>;

/// The groups of `fare weights --json` output.
fn groups(v: &Value) -> Groups {
    let mut out = BTreeMap::new();
    for g in v.as_array().into_iter().flatten() {
        let members = g["members"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                (
                    m["via"].as_str().unwrap_or_default().to_string(),
                    m["link"].as_str().unwrap_or_default().to_string(),
                    m["bandwidth_gbps"].to_string(),
                    m["weight"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        let key = (
            g["node"].as_str().unwrap_or_default().to_string(),
            g["prefix"].as_str().unwrap_or_default().to_string(),
        );
        out.insert(key, members);
    }
    out
}

#[test]
fn analyze_agrees_with_weights_fail_and_renders() -> Result<()> {
    let topo = repo_root().join("topologies/draft-fig1.yaml");
    let topo_s = topo.display().to_string();
    for mode in ["draft", "averaged"] {
        let a = json_of(&["analyze", &topo_s, "--mode", mode, "--json", "--top", "0"])?;
        let reports = a["failures"].as_array().context("no failures")?;
        // Figure 1: 32 links, 12 nodes, no planes.
        ensure!(reports.len() == 44, "{} failures", reports.len());
        let before = groups(&json_of(&["weights", &topo_s, "--mode", mode, "--json"])?);
        let mut checked = 0;
        for r in reports.iter().filter(|r| r["kind"] == "link") {
            let name = r["failure"].as_str().context("name")?;
            let after = groups(&json_of(&[
                "weights", &topo_s, "--mode", mode, "--json", "--fail", name,
            ])?);
            let changed = before
                .keys()
                .chain(after.keys().filter(|k| !before.contains_key(*k)))
                .filter(|k| before.get(*k) != after.get(*k))
                .count() as u64;
            let lost = before.keys().filter(|k| !after.contains_key(*k)).count() as u64;
            ensure!(
                r["changed_groups"].as_u64() == Some(changed)
                    && r["unreachable"].as_u64() == Some(lost),
                "{mode} {name}: analyze says {} changed / {} unreachable, weights --fail {changed} / {lost}",
                r["changed_groups"],
                r["unreachable"]
            );
            checked += 1;
        }
        ensure!(checked == 32, "{checked} links checked");
        // Worst first: unreachable counts never increase down the list.
        let lost: Vec<u64> = reports
            .iter()
            .map(|r| r["unreachable"].as_u64().unwrap_or(0))
            .collect();
        ensure!(
            lost.windows(2).all(|w| w[0] >= w[1]),
            "not ranked: {lost:?}"
        );
    }
    html_renders(&topo_s)?;
    let bad = fare(&["analyze", "/nonexistent/t.yaml"])?;
    ensure!(bad.status.code() == Some(2), "exit {:?}", bad.status.code());
    ensure!(String::from_utf8_lossy(&bad.stderr).contains("/nonexistent/t.yaml"));
    Ok(())
}

/// The page refers to nothing outside itself, and Chromium's DOM has the table with one
/// row per failure shown (5) plus the header.
fn html_renders(topo: &str) -> Result<()> {
    let test = "analyze_agrees_with_weights_fail_and_renders";
    if !have_tool(test, "chromium") {
        return Ok(());
    }
    let work = std::env::temp_dir().join(format!("fare-analyze-test-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let page = work.join("analyze.html");
    let page_s = page.display().to_string();
    let r = fare(&["analyze", topo, "--top", "5", "--html", &page_s])?;
    ensure!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let html = std::fs::read_to_string(&page)?;
    ensure!(!html.contains("://"), "the page refers outside itself");
    let out = Command::new("timeout")
        .arg("120")
        .arg("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            work.join("profile").display()
        ))
        .arg("--dump-dom")
        .arg(format!("file://{page_s}"))
        .output()?;
    let dom = String::from_utf8_lossy(&out.stdout);
    let table = dom
        .find("<table id=\"failures\">")
        .context("chromium shows no table")?;
    let rows = dom[table..].matches("<tr>").count();
    std::fs::remove_dir_all(&work)?;
    ensure!(rows == 6, "{rows} rows in the rendered table");
    Ok(())
}
