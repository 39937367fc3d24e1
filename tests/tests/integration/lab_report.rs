//! `fare lab report` judged by a browser: headless Chromium (Debian's `chromium`) loads
//! the page with a measuring script (report_layout.js) and writes into the page what it
//! measured; no two rendered text boxes may intersect, no text may cover a node's box
//! other than its own, and every link of the topology must be drawn (an element with
//! its `data-link`). Figure 1 (graph), with a failed and a degraded link, and the
//! 40- and 200-node fabrics of `fare topo gen clos3` (matrices), from their plans.

use anyhow::{ensure, Context, Result};
use fare_integration::lab::fare;
use fare_integration::{have_tool, repo_root};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const MEASURE: &str = include_str!("report_layout.js");

/// What the page measured (see report_layout.js).
#[derive(Debug)]
struct Layout {
    texts: u64,
    text_overlap_count: u64,
    node_overlap_count: u64,
    links: BTreeSet<String>,
    raw: serde_json::Value,
}

/// Loads `html` in headless Chromium with the measuring script, returns what it found.
fn measure(html: &Path, work: &Path) -> Result<Layout> {
    let page = std::fs::read_to_string(html)?;
    ensure!(
        !page.contains("://"),
        "the report refers to something outside itself"
    );
    let probe = work.join(format!(
        "probe-{}",
        html.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::write(
        &probe,
        page.replace("</body>", &format!("<script>{MEASURE}</script></body>")),
    )?;
    let profile = work.join(format!("profile-{}", std::process::id()));
    let out = Command::new("timeout")
        .arg("120")
        .arg("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", probe.display()))
        .output()?;
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom
        .find("<pre id=\"layout-result\">")
        .context("chromium printed no measurement")?;
    let body = &dom[start + "<pre id=\"layout-result\">".len()..];
    let json = body[..body.find("</pre>").context("unterminated result")?]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let raw: serde_json::Value = serde_json::from_str(&json)?;
    Ok(Layout {
        texts: raw["texts"].as_u64().unwrap_or(0),
        text_overlap_count: raw["text_overlap_count"].as_u64().unwrap_or(u64::MAX),
        node_overlap_count: raw["node_overlap_count"].as_u64().unwrap_or(u64::MAX),
        links: raw["links"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l.as_str().map(str::to_string))
            .collect(),
        raw,
    })
}

/// The link names of a topology as the lab names them (its plan).
fn topology_links(path: &Path) -> Result<BTreeSet<String>> {
    let topo = fare::topology::load(path)?;
    let plan = fare::lab::plan::plan(&topo, "t", &Default::default())?;
    Ok(plan.links.into_iter().map(|l| l.name).collect())
}

/// `fare lab report --topology TOPO EXTRA... -o OUT`, measured, checked.
fn check_report(topology: &Path, extra: &[&str], out: &Path, work: &Path) -> Result<Layout> {
    let mut args = vec!["lab".to_string(), "report".into(), "--topology".into()];
    args.push(topology.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["-o".into(), out.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = fare(&args)?;
    ensure!(
        r.status.success(),
        "lab report: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let layout = measure(out, work)?;
    let want = topology_links(topology)?;
    ensure!(
        layout.texts > 10,
        "hardly any text measured: {:?}",
        layout.raw
    );
    ensure!(
        layout.text_overlap_count == 0,
        "{}: {} pairs of text boxes intersect: {}",
        topology.display(),
        layout.text_overlap_count,
        layout.raw["text_overlaps"]
    );
    ensure!(
        layout.node_overlap_count == 0,
        "{}: text over nodes: {}",
        topology.display(),
        layout.raw["node_overlaps"]
    );
    let missing: Vec<&String> = want.difference(&layout.links).collect();
    ensure!(
        missing.is_empty() && layout.links.len() == want.len(),
        "{}: {} links drawn of {}; missing {:?}",
        topology.display(),
        layout.links.len(),
        want.len(),
        missing.iter().take(10).collect::<Vec<_>>()
    );
    Ok(layout)
}

fn work_dir() -> Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("fare-report-test-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

#[test]
fn report_of_figure_1_is_legible_and_draws_every_link() -> Result<()> {
    let test = "report_of_figure_1_is_legible_and_draws_every_link";
    if !have_tool(test, "chromium") {
        return Ok(());
    }
    let work = work_dir()?;
    let fig1 = repo_root().join("topologies/draft-fig1.yaml");
    check_report(&fig1, &[], &work.join("fig1.html"), &work)?;
    let changed = work.join("fig1-changed.html");
    check_report(
        &fig1,
        &["--fail", "S1-L5", "--degrade", "S4-L1=25"],
        &changed,
        &work,
    )?;
    // The failed link is marked failed, the degraded one degraded (on hover).
    let page = std::fs::read_to_string(&changed)?;
    ensure!(
        page.contains("S1-L5 (100 Gbps, FAILED)"),
        "failed link not marked"
    );
    ensure!(
        page.contains("S4-L1 (100 Gbps, degraded to 25 Gbps)"),
        "degraded link not marked"
    );
    std::fs::remove_dir_all(&work)?;
    Ok(())
}

#[test]
fn reports_of_40_and_200_node_fabrics_aggregate_legibly() -> Result<()> {
    let test = "reports_of_40_and_200_node_fabrics_aggregate_legibly";
    if !have_tool(test, "chromium") {
        return Ok(());
    }
    let work = work_dir()?;
    for (leaves, spines) in [("32", "8"), ("160", "40")] {
        let topo = work.join(format!("clos-{leaves}x{spines}.yaml"));
        let topo_s = topo.display().to_string();
        let g = fare(&[
            "topo", "gen", "clos3", "--leaves", leaves, "--spines", spines, "-o", &topo_s,
        ])?;
        ensure!(
            g.status.success(),
            "topo gen: {}",
            String::from_utf8_lossy(&g.stderr)
        );
        let out = work.join(format!("clos-{leaves}x{spines}.html"));
        let layout = check_report(&topo, &["--fail", "S1-L1"], &out, &work)?;
        eprintln!(
            "{leaves}x{spines}: {} texts, {} links drawn",
            layout.texts,
            layout.links.len()
        );
    }
    std::fs::remove_dir_all(&work)?;
    Ok(())
}
