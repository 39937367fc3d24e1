//! `fare lab report`: one self-contained HTML file (inline SVG and CSS, nothing fetched)
//! that tells a reader the state and the story of a lab at a glance — the fabric
//! (`fabric_svg`), the worst links first, the load over time and the timeline of changes,
//! sessions, groups and ARN (`history_svg`), and tables of the changes with their
//! convergence times and of the ARNs.

use super::events::Event;
use super::fabric_svg::{self, esc};
use super::history_svg;
use super::report_data::{Direction, ReportData};
use super::state::LinkChange;
use super::LabError;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The lab (default: the only one up).
    #[arg(long)]
    pub name: Option<String>,
    /// Draw this topology file's plan instead of a lab (ideal load of a uniform demand).
    #[arg(long, conflicts_with = "name")]
    pub topology: Option<PathBuf>,
    /// With --topology: draw the plan with every link between A and B failed (repeatable).
    #[arg(long, requires = "topology")]
    pub fail: Vec<String>,
    /// With --topology: every link between A and B at GBPS (`A-B=GBPS`, repeatable).
    #[arg(long, requires = "topology")]
    pub degrade: Vec<String>,
    /// Where to write the HTML (default: report.html in the lab's state directory, or
    /// <topology name>-report.html here).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

/// Writes the report asked for; returns its path.
pub fn run(a: &ReportArgs) -> Result<PathBuf, LabError> {
    let (data, default) = match &a.topology {
        Some(t) => {
            let d = ReportData::of_topology(t, &plan_changes(&a.fail, &a.degrade)?)?;
            let p = PathBuf::from(format!("{}-report.html", d.plan.lab));
            (d, p)
        }
        None => {
            let dir = super::state::StateDir::find(a.name.as_deref())?;
            (ReportData::of_lab(&dir)?, dir.path.join("report.html"))
        }
    };
    let path = a.output.clone().unwrap_or(default);
    write(&data, &path)?;
    Ok(path)
}

/// `--fail A-B` and `--degrade A-B=GBPS` as link changes.
fn plan_changes(fail: &[String], degrade: &[String]) -> Result<Vec<LinkChange>, LabError> {
    let pair = |s: &str| -> Result<(String, String), LabError> {
        s.split_once('-')
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .ok_or_else(|| LabError::Input(format!("`{s}`: expected A-B")))
    };
    let mut out = Vec::new();
    for f in fail {
        let (a, b) = pair(f)?;
        out.push(LinkChange::Fail { a, b });
    }
    for d in degrade {
        let (p, g) = d
            .rsplit_once('=')
            .ok_or_else(|| LabError::Input(format!("`{d}`: expected A-B=GBPS")))?;
        let gbps: f64 = g
            .parse()
            .ok()
            .filter(|g: &f64| g.is_finite() && *g > 0.0)
            .ok_or_else(|| LabError::Input(format!("`{d}`: GBPS must be a positive number")))?;
        let (a, b) = pair(p)?;
        out.push(LinkChange::Degrade { a, b, gbps });
    }
    Ok(out)
}

/// Writes the report of `d` to `path`.
pub fn write(d: &ReportData, path: &Path) -> Result<(), LabError> {
    std::fs::write(path, page(d))?;
    Ok(())
}

const STYLE: &str = "body{font-family:sans-serif;margin:16px 24px;color:#222;max-width:1400px}\
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px;border-bottom:1px solid #ccd}\
p{margin:4px 0}.scroll{overflow-x:auto;border:1px solid #eee}\
table{border-collapse:collapse;font-size:12px}td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right}\
td:first-child,th:first-child{text-align:left}.bad{color:#b2182b;font-weight:bold}.ok{color:#1a7f37}\
.legend span.sw{display:inline-block;width:28px;height:10px;margin:0 4px 0 12px;vertical-align:middle}";

/// The whole page.
pub fn page(d: &ReportData) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>fare lab report: {}</title><style>{STYLE}</style></head><body>",
        esc(&d.plan.lab)
    );
    summary(&mut s, d);
    let _ = writeln!(s, "<h2>Fabric</h2>");
    legend(&mut s, d);
    let _ = writeln!(s, "<div class=\"scroll\">{}</div>", fabric_svg::svg(d));
    worst_links(&mut s, d);
    let _ = writeln!(s, "<h2>Load over time</h2>");
    match history_svg::heatmap(d) {
        Some(h) => {
            let _ = writeln!(
                s,
                "<p>Every second of every traffic run: utilisation of each link direction, from white (idle) to dark red (the busiest second: {:.0} % of capacity); hover for Mbit/s.</p><div class=\"scroll\">{h}</div>",
                100.0 * history_svg::peak_utilisation(d)
            );
        }
        None => s.push_str("<p>No traffic was run: nothing measured over time.</p>\n"),
    }
    if let Some(t) = history_svg::timeline(d) {
        let _ = writeln!(s, "<h2>Timeline</h2><p>Link changes (bar = time to converge), traffic runs, session changes, group installs and ARN events of the agents; hover for details.</p><div class=\"scroll\">{t}</div>");
    }
    changes_table(&mut s, d);
    arn_table(&mut s, d);
    agent_summary(&mut s, d);
    s.push_str("</body></html>\n");
    s
}

fn summary(s: &mut String, d: &ReportData) {
    let hosts: usize = d.plan.nodes.iter().map(|n| n.hosts.len()).sum();
    let _ = writeln!(
        s,
        "<h1>{} {}: {} nodes, {} links, {hosts} hosts</h1>",
        if d.source == "plan" { "Plan" } else { "Lab" },
        esc(&d.plan.lab),
        d.plan.nodes.len(),
        d.plan.links.len()
    );
    if let Some(r) = d.traffic.last() {
        let verdict = if r.split_error <= 0.1 { "ok" } else { "bad" };
        let _ = writeln!(
            s,
            "<p>Last traffic run: split distance from the ideal <span class=\"{verdict}\">{:.3}</span> (0 = ideal, 1 = disjoint).</p>",
            r.split_error
        );
    }
    let failed = d
        .plan
        .links
        .iter()
        .filter(|l| d.link_state(l) != super::report_data::LinkState::Healthy)
        .count();
    let _ = writeln!(
        s,
        "<p>{} link changes recorded, {} not converged; {failed} links failed or degraded now.</p>",
        d.changes.len(),
        d.changes
            .iter()
            .filter(|c| c.convergence_s.is_none() && c.measured())
            .count()
    );
}

fn legend(s: &mut String, d: &ReportData) {
    let sw = |c: String, t: &str| format!("<span class=\"sw\" style=\"background:{c}\"></span>{t}");
    let colours = if d.measured() {
        format!(
            "{}{}{}",
            sw(
                fabric_svg::color(true, -0.25),
                "25 % of capacity below ideal"
            ),
            sw(fabric_svg::color(true, 0.0), "as ideal"),
            sw(fabric_svg::color(true, 0.25), "25 % above ideal")
        )
    } else {
        format!(
            "{}{}",
            sw(
                fabric_svg::color(false, 0.0),
                "idle (ideal split, uniform demand)"
            ),
            sw(fabric_svg::color(false, 1.0), "full")
        )
    };
    let _ = writeln!(
        s,
        "<p class=\"legend\">Colour: worse direction of each link, {colours}. Width: capacity. Dashed: degraded; crossed and dotted: failed. Yellow: hosts.{}</p>",
        if !fabric_svg::as_graph(d) {
            " Big fabric: one matrix per pair of stages, a bar per link (its height by capacity)."
        } else {
            ""
        }
    );
}

/// |deviation| for ordering: (measured - ideal) / capacity, or ideal utilisation.
fn score(x: &Direction) -> f64 {
    let cap = x.capacity_mbit.max(1e-9);
    match x.measured_mbit {
        Some(m) => (m - x.ideal_mbit).abs() / cap,
        None => x.ideal_mbit / cap,
    }
}

fn worst_links(s: &mut String, d: &ReportData) {
    let mut dirs: Vec<&Direction> = d.directions.iter().collect();
    dirs.sort_by(|a, b| score(b).total_cmp(&score(a)));
    let _ = writeln!(
        s,
        "<h2>Worst links first</h2><table><tr><th>link</th><th>direction</th><th>capacity Mbit/s</th><th>ideal</th><th>measured</th><th>off ideal (% of capacity)</th><th>utilisation</th></tr>"
    );
    for x in dirs.iter().take(15) {
        let cap = x.capacity_mbit.max(1e-9);
        let (m, off, util) = match x.measured_mbit {
            Some(m) => (
                format!("{m:.2}"),
                format!("{:+.1}", 100.0 * (m - x.ideal_mbit) / cap),
                100.0 * m / cap,
            ),
            None => ("–".into(), "–".into(), 100.0 * x.ideal_mbit / cap),
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}→{}</td><td>{:.0}</td><td>{:.2}</td><td>{m}</td><td>{off}</td><td>{util:.0} %</td></tr>",
            esc(&x.link),
            esc(&x.from),
            esc(&x.to),
            x.capacity_mbit,
            x.ideal_mbit
        );
    }
    s.push_str("</table>\n");
}

fn changes_table(s: &mut String, d: &ReportData) {
    if d.changes.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "<h2>Link changes and convergence</h2><table><tr><th>change</th><th>at</th><th>converged to the model in</th></tr>"
    );
    for c in &d.changes {
        let conv = match c.convergence_s {
            Some(v) => format!("<span class=\"ok\">{:.0} ms</span>", v * 1e3),
            None if c.change.starts_with("congest") => "(congestion: ARN below)".into(),
            None if !c.measured() => "(not waited for)".into(),
            None => format!(
                "<span class=\"bad\">not converged: {} differences</span>",
                c.mismatches
            ),
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>+{:.1} s</td><td>{conv}</td></tr>",
            esc(&c.change),
            c.at - d.start
        );
    }
    s.push_str("</table>\n");
}

fn arn_table(s: &mut String, d: &ReportData) {
    let arn: Vec<_> = d.agent_events.iter().filter(|e| e.event.is_arn()).collect();
    if d.source == "plan" {
        return;
    }
    let _ = writeln!(s, "<h2>ARN events</h2>");
    if arn.is_empty() {
        s.push_str("<p>No ARN was sent or applied.</p>\n");
        return;
    }
    s.push_str("<table><tr><th>node</th><th>at</th><th>event</th><th>type</th><th>metric</th><th>port / sender</th></tr>\n");
    for e in arn.iter().take(200) {
        let (what, t, m, via) = match &e.event {
            Event::ArnSent {
                arn_type,
                metric,
                interface,
                ..
            } => ("sent", arn_type, metric, interface.clone()),
            Event::ArnApplied {
                arn_type,
                metric,
                sender,
                ..
            } => ("applied", arn_type, metric, sender.to_string()),
            _ => continue,
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>+{:.3} s</td><td>{what}</td><td>{t}</td><td>{m}</td><td>{}</td></tr>",
            esc(&e.node),
            e.at - d.start,
            esc(&via)
        );
    }
    s.push_str("</table>\n");
}

/// Per node: sessions up and down, group installs (the agents' events).
fn agent_summary(s: &mut String, d: &ReportData) {
    let mut per: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    for e in &d.agent_events {
        let k = match e.event {
            Event::SessionUp { .. } => 0,
            Event::SessionDown { .. } => 1,
            Event::GroupInstalled { .. } | Event::GroupRemoved { .. } => 2,
            _ => continue,
        };
        per.entry(e.node.as_str()).or_default()[k] += 1;
    }
    if per.is_empty() {
        return;
    }
    s.push_str("<h2>Sessions and groups per agent</h2><table><tr><th>node</th><th>sessions up</th><th>sessions down</th><th>group changes</th></tr>\n");
    for (node, c) in per {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(node),
            c[0],
            c[1],
            c[2]
        );
    }
    s.push_str("</table>\n");
}
