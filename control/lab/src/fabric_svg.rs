//! The fabric as SVG for `fare lab report`: every link drawn (an element with a
//! `data-link` attribute per link), its width by capacity, its colour by its load against
//! the ideal one, failed links crossed out, degraded ones dashed, hosts shown. Labels sit
//! only inside their own node's box or in their own row or column, so none overlaps
//! another label or a node. A small fabric is drawn as a graph in rows by Clos stage; a
//! big one as one matrix per pair of stages (rows the lower nodes, columns the upper).

use super::plan::{LinkPlan, NodePlan};
use super::report_data::{LinkState, ReportData};
use std::collections::HashMap;
use std::fmt::Write;

/// Fabrics with more nodes or links than these are drawn as matrices (more lines than
/// this cross into a blur).
pub const GRAPH_MAX_NODES: usize = 24;
pub const GRAPH_MAX_LINKS: usize = 64;

/// Whether the fabric is drawn as a graph (else as matrices).
pub fn as_graph(d: &ReportData) -> bool {
    d.plan.nodes.len() <= GRAPH_MAX_NODES && d.plan.links.len() <= GRAPH_MAX_LINKS
}

/// The SVG of the fabric (graph or matrices).
pub fn svg(d: &ReportData) -> String {
    if as_graph(d) {
        graph(d)
    } else {
        matrices(d)
    }
}

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn stage(role: &str) -> usize {
    match role {
        "super-spine" => 3,
        "spine" => 2,
        "leaf" => 1,
        _ => 0,
    }
}

/// What a link looks like: colour, the text on hover, and its state.
pub struct LinkLook {
    pub color: String,
    pub title: String,
    pub state: LinkState,
    /// 0..1 of the fabric's largest capacity (topology).
    pub width: f64,
    /// How far the worse direction is from the ideal (fraction of capacity), or its ideal
    /// utilisation when nothing was measured.
    pub score: f64,
}

/// Colour of a direction: with measurements, (measured - ideal) / capacity on a diverging
/// scale (blue below, grey at, red above the ideal, saturated at 25 %); without, the
/// ideal utilisation on a sequential blue scale.
pub fn color(measured: bool, value: f64) -> String {
    let mix = |a: (f64, f64, f64), b: (f64, f64, f64), t: f64| {
        let t = t.clamp(0.0, 1.0);
        format!(
            "#{:02x}{:02x}{:02x}",
            (a.0 + (b.0 - a.0) * t) as u8,
            (a.1 + (b.1 - a.1) * t) as u8,
            (a.2 + (b.2 - a.2) * t) as u8
        )
    };
    let grey = (190.0, 190.0, 190.0);
    if measured {
        if value >= 0.0 {
            mix(grey, (178.0, 24.0, 43.0), value / 0.25)
        } else {
            mix(grey, (33.0, 102.0, 172.0), -value / 0.25)
        }
    } else {
        mix((198.0, 219.0, 239.0), (8.0, 48.0, 107.0), value)
    }
}

/// The look of every link of the plan.
pub fn looks(d: &ReportData) -> HashMap<String, LinkLook> {
    let measured = d.measured();
    let max_gbps = d.plan.links.iter().map(|l| l.gbps).fold(0.0, f64::max);
    let mut out = HashMap::new();
    for l in &d.plan.links {
        let dirs: Vec<_> = d.directions.iter().filter(|x| x.link == l.name).collect();
        let mut score: f64 = 0.0;
        let mut title = format!("{} ({} Gbps", l.name, l.gbps);
        let state = d.link_state(l);
        match state {
            LinkState::Failed => title.push_str(", FAILED"),
            LinkState::Degraded(g) => {
                let _ = write!(title, ", degraded to {g} Gbps");
            }
            LinkState::Healthy => {}
        }
        title.push(')');
        for x in &dirs {
            let cap = x.capacity_mbit.max(1e-9);
            let v = match x.measured_mbit {
                Some(m) => (m - x.ideal_mbit) / cap,
                None => x.ideal_mbit / cap,
            };
            if v.abs() > score.abs() {
                score = v;
            }
            let _ = match x.measured_mbit {
                Some(m) => write!(
                    title,
                    "\n{}→{}: {m:.2} Mbit/s measured, {:.2} ideal, {:.0}% of {:.0}",
                    x.from,
                    x.to,
                    x.ideal_mbit,
                    100.0 * m / cap,
                    x.capacity_mbit
                ),
                None => write!(
                    title,
                    "\n{}→{}: ideal {:.0}% of capacity",
                    x.from,
                    x.to,
                    100.0 * x.ideal_mbit / cap
                ),
            };
        }
        let color = match state {
            LinkState::Failed => "#555555".to_string(),
            _ => color(measured, score),
        };
        let width = if max_gbps > 0.0 {
            l.gbps / max_gbps
        } else {
            1.0
        };
        out.insert(
            l.name.clone(),
            LinkLook {
                color,
                title,
                state,
                width,
                score,
            },
        );
    }
    out
}

/// Rough width of `text` in px at `size` px (sans-serif averages ~0.6 em a character).
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.62
}

const NODE_H: f64 = 24.0;
const ROW_GAP: f64 = 150.0;
const HOST_H: f64 = 16.0;

/// Node positions of the graph: rows by stage (top = highest), evenly spread.
fn layout(nodes: &[NodePlan]) -> (Vec<(f64, f64, f64)>, f64, f64) {
    let top = nodes.iter().map(|n| stage(&n.role)).max().unwrap_or(0);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); top + 1];
    for (i, n) in nodes.iter().enumerate() {
        rows[stage(&n.role)].push(i);
    }
    let box_w = |n: &NodePlan| {
        let frr = if n.frr { text_width(" FRR", 12.0) } else { 0.0 };
        (text_width(&n.name, 12.0) + frr).max(36.0) + 14.0
    };
    let host_w = |n: &NodePlan| {
        n.hosts
            .iter()
            .map(|h| text_width(&h.addr.to_string(), 9.0) + 8.0)
            .fold(0.0, f64::max)
    };
    let pitch = nodes
        .iter()
        .map(|n| box_w(n).max(host_w(n)) + 18.0)
        .fold(60.0, f64::max);
    let used: Vec<usize> = (0..=top).rev().filter(|&r| !rows[r].is_empty()).collect();
    let widest = used.iter().map(|&r| rows[r].len()).max().unwrap_or(1);
    let width = (widest as f64 * pitch + 40.0).max(640.0);
    let mut pos = vec![(0.0, 0.0, 0.0); nodes.len()];
    for (k, &r) in used.iter().enumerate() {
        let n = rows[r].len() as f64;
        for (j, &i) in rows[r].iter().enumerate() {
            let x = 20.0 + (width - 40.0) * (j as f64 + 0.5) / n;
            pos[i] = (x, 30.0 + k as f64 * ROW_GAP, box_w(&nodes[i]));
        }
    }
    let most_hosts = nodes.iter().map(|n| n.hosts.len()).max().unwrap_or(0);
    let last_row = 30.0 + used.len().saturating_sub(1) as f64 * ROW_GAP;
    let height = last_row + NODE_H / 2.0 + 16.0 + most_hosts as f64 * (HOST_H + 6.0);
    (pos, width, height)
}

/// The graph drawing: links first (under the nodes), then nodes, then hosts.
fn graph(d: &ReportData) -> String {
    let (pos, width, height) = layout(&d.plan.nodes);
    let index: HashMap<&str, usize> = d
        .plan
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let looks = looks(d);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg class="fabric" width="{width:.0}" height="{height:.0}" font-family="sans-serif">"#
    );
    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
    for l in &d.plan.links {
        let (Some(&a), Some(&b)) = (index.get(l.a.as_str()), index.get(l.b.as_str())) else {
            continue;
        };
        let (a, b) = if pos[a].1 <= pos[b].1 { (a, b) } else { (b, a) };
        let nth = seen.entry((a, b)).or_insert(0);
        let parallel = d.plan.links_between(&l.a, &l.b).len() as f64;
        let off = (*nth as f64 - (parallel - 1.0) / 2.0) * 7.0;
        *nth += 1;
        let ((ax, ay, _), (bx, by, _)) = (pos[a], pos[b]);
        let (y1, y2) = if ay < by {
            (ay + NODE_H / 2.0, by - NODE_H / 2.0)
        } else {
            (ay, by)
        };
        graph_link(&mut s, l, &looks[&l.name], (ax + off, y1), (bx + off, y2));
    }
    for (i, n) in d.plan.nodes.iter().enumerate() {
        graph_node(&mut s, n, pos[i]);
    }
    s.push_str("</svg>\n");
    s
}

fn graph_link(s: &mut String, l: &LinkPlan, look: &LinkLook, a: (f64, f64), b: (f64, f64)) {
    let w = 1.0 + 4.0 * look.width;
    let dash = match look.state {
        LinkState::Failed => r#" stroke-dasharray="3 4""#,
        LinkState::Degraded(_) => r#" stroke-dasharray="9 4""#,
        LinkState::Healthy => "",
    };
    let _ = writeln!(
        s,
        r#"<g data-link="{}"><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="{w:.1}"{dash}/><title>{}</title>"#,
        esc(&l.name),
        a.0,
        a.1,
        b.0,
        b.1,
        look.color,
        esc(&look.title)
    );
    if look.state == LinkState::Failed {
        // A cross at the middle: failed at a glance, no text needed.
        let (mx, my) = ((a.0 + b.0) / 2.0, (a.1 + b.1) / 2.0);
        let _ = writeln!(
            s,
            r##"<path d="M{:.1} {:.1}l10 10m0 -10l-10 10" stroke="#d00" stroke-width="3"/>"##,
            mx - 5.0,
            my - 5.0
        );
    }
    s.push_str("</g>\n");
}

fn graph_node(s: &mut String, n: &NodePlan, (x, y, w): (f64, f64, f64)) {
    let name = esc(&n.name);
    // What runs the node: fare's agent, or (no agent) FRR or a BMv2 switch.
    let (target, fill) = match (n.frr, n.bmv2) {
        (true, _) => ("frr", "#f3eee0"),
        (_, true) => ("bmv2", "#eef2f8"),
        _ => ("fare", "#eef2f8"),
    };
    let label = if n.frr { " FRR" } else { "" };
    let _ = writeln!(
        s,
        r##"<g><rect data-node="{name}" data-target="{target}" x="{:.1}" y="{:.1}" width="{w:.1}" height="{NODE_H}" rx="4" fill="{fill}" stroke="#334"/><title>{name} ({}, {target}, AS {})</title><text data-label-for="{name}" x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="12">{name}{label}</text></g>"##,
        x - w / 2.0,
        y - NODE_H / 2.0,
        esc(&n.role),
        n.asn,
        y + 4.0
    );
    for (k, h) in n.hosts.iter().enumerate() {
        let label = h.addr.to_string();
        let hw = text_width(&label, 9.0) + 8.0;
        let hy = y + NODE_H / 2.0 + 10.0 + k as f64 * (HOST_H + 6.0);
        let id = format!("{}/{}", n.name, label);
        let _ = writeln!(
            s,
            r##"<g><line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{hy:.1}" stroke="#889" stroke-width="1"/><rect data-node="{id}" x="{:.1}" y="{hy:.1}" width="{hw:.1}" height="{HOST_H}" rx="3" fill="#fffbe6" stroke="#a90"/><title>host of {name}: {label} in {}</title><text data-label-for="{id}" x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="9">{label}</text></g>"##,
            y + NODE_H / 2.0,
            x - hw / 2.0,
            h.prefix,
            hy + 12.0
        );
    }
}

const CELL: f64 = 12.0;

/// One matrix per pair of stages that links join: rows the lower nodes (with a column
/// of their hosts), columns the upper ones; a cell holds one bar per parallel link.
fn matrices(d: &ReportData) -> String {
    let looks = looks(d);
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    let st: HashMap<&str, usize> = d
        .plan
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), stage(&n.role)))
        .collect();
    for l in &d.plan.links {
        let (a, b) = (st[l.a.as_str()], st[l.b.as_str()]);
        let p = (a.min(b), a.max(b));
        if !pairs.contains(&p) {
            pairs.push(p);
        }
    }
    pairs.sort_by(|x, y| y.cmp(x));
    let mut s = String::new();
    for (lo, hi) in pairs {
        let rows: Vec<&NodePlan> = d
            .plan
            .nodes
            .iter()
            .filter(|n| stage(&n.role) == lo)
            .collect();
        let cols: Vec<&NodePlan> = d
            .plan
            .nodes
            .iter()
            .filter(|n| stage(&n.role) == hi)
            .collect();
        s.push_str(&matrix(d, &looks, &rows, &cols));
    }
    s
}

fn matrix(
    d: &ReportData,
    looks: &HashMap<String, LinkLook>,
    rows: &[&NodePlan],
    cols: &[&NodePlan],
) -> String {
    let label_w = rows
        .iter()
        .map(|n| text_width(&n.name, 10.0))
        .fold(30.0, f64::max)
        + 8.0;
    let head_h = cols
        .iter()
        .map(|n| text_width(&n.name, 10.0))
        .fold(30.0, f64::max)
        + 8.0;
    let (x0, y0) = (label_w, head_h);
    let width = x0 + (cols.len() as f64 + 2.0) * CELL + 10.0;
    let height = y0 + rows.len() as f64 * CELL + 10.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg class="fabric matrix" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="10">"#
    );
    for (j, c) in cols.iter().enumerate() {
        let x = x0 + j as f64 * CELL + CELL * 0.75;
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{:.1}" transform="rotate(-90 {x:.1} {:.1})">{}</text>"#,
            y0 - 4.0,
            y0 - 4.0,
            esc(&c.name)
        );
    }
    let hx = x0 + cols.len() as f64 * CELL + CELL * 1.75;
    let _ = writeln!(
        s,
        r#"<text x="{hx:.1}" y="{:.1}" transform="rotate(-90 {hx:.1} {:.1})">hosts</text>"#,
        y0 - 4.0,
        y0 - 4.0
    );
    for (i, r) in rows.iter().enumerate() {
        let y = y0 + i as f64 * CELL;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            x0 - 4.0,
            y + CELL - 2.5,
            esc(&r.name)
        );
        for (j, c) in cols.iter().enumerate() {
            let links = d.plan.links_between(&r.name, &c.name);
            matrix_cell(&mut s, looks, &links, x0 + j as f64 * CELL, y);
        }
        if !r.hosts.is_empty() {
            let hosts: Vec<String> = r.hosts.iter().map(|h| h.addr.to_string()).collect();
            let _ = writeln!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="{:.1}" fill="#fffbe6" stroke="#a90"><title>hosts of {}: {}</title></circle>"##,
                hx - 3.0,
                y + CELL / 2.0,
                (2.0 + r.hosts.len() as f64).min(CELL / 2.0 - 0.5),
                esc(&r.name),
                hosts.join(", ")
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

fn matrix_cell(
    s: &mut String,
    looks: &HashMap<String, LinkLook>,
    links: &[&LinkPlan],
    x: f64,
    y: f64,
) {
    if links.is_empty() {
        return;
    }
    let bar = (CELL - 2.0) / links.len() as f64;
    for (k, l) in links.iter().enumerate() {
        let look = &looks[&l.name];
        // Height by capacity: a thin bar is a small link.
        let h = (CELL - 2.0) * (0.35 + 0.65 * look.width);
        let (bx, by) = (x + 1.0 + k as f64 * bar, y + 1.0 + (CELL - 2.0 - h));
        let stroke = match look.state {
            LinkState::Failed => r##" stroke="#d00" stroke-width="1.5""##,
            LinkState::Degraded(_) => r##" stroke="#000" stroke-width="1" stroke-dasharray="2 1""##,
            LinkState::Healthy => "",
        };
        let _ = writeln!(
            s,
            r#"<rect data-link="{}" x="{bx:.1}" y="{by:.1}" width="{:.1}" height="{h:.1}" fill="{}"{stroke}><title>{}</title></rect>"#,
            esc(&l.name),
            (bar - 0.5).max(0.5),
            look.color,
            esc(&look.title)
        );
    }
}
