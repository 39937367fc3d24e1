//! The lab's life as SVG for `fare lab report`: a heatmap of every link direction's load
//! per second of traffic (rows directions, columns seconds, colour utilisation), and a
//! timeline of link changes (with their convergence times), traffic runs, session
//! changes, group installs and ARN events. Values on hover (`title`); labels in their
//! own row or on an axis spaced apart, so none overlaps another.

use super::events::{AgentEvent, Event};
use super::fabric_svg::{esc, text_width};
use super::report_data::ReportData;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Heatmap rows beyond this many (the busiest first) are left out, and said so.
pub const HEATMAP_ROWS: usize = 80;

/// Utilisation 0..1 on a white -> orange -> dark red scale.
fn heat(u: f64) -> String {
    let u = u.clamp(0.0, 1.0);
    let (r, g, b) = if u < 0.5 {
        let t = u / 0.5;
        (255.0, 255.0 - 90.0 * t, 255.0 - 200.0 * t)
    } else {
        let t = (u - 0.5) / 0.5;
        (255.0 - 100.0 * t, 165.0 - 165.0 * t, 55.0 - 55.0 * t)
    };
    format!("#{:02x}{:02x}{:02x}", r as u8, g as u8, b as u8)
}

/// The heatmap of the per-second series, or None without one.
pub fn heatmap(d: &ReportData) -> Option<String> {
    if d.series.is_empty() {
        return None;
    }
    let cap: BTreeMap<(String, String), (f64, String)> = d
        .directions
        .iter()
        .map(|x| {
            (
                (x.link.clone(), x.from.clone()),
                (x.capacity_mbit, x.to.clone()),
            )
        })
        .collect();
    // Rows: directions that carried anything, busiest (by peak) first.
    let mut peak: BTreeMap<(String, String), f64> = BTreeMap::new();
    for s in &d.series {
        for (l, f, m) in &s.loads {
            let p = peak.entry((l.clone(), f.clone())).or_insert(0.0);
            *p = p.max(*m);
        }
    }
    let mut rows: Vec<((String, String), f64)> =
        peak.into_iter().filter(|(_, p)| *p > 0.01).collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let hidden = rows.len().saturating_sub(HEATMAP_ROWS);
    rows.truncate(HEATMAP_ROWS);
    let label = |(l, f): &(String, String)| {
        let to = cap
            .get(&(l.clone(), f.clone()))
            .map_or("?", |c| c.1.as_str());
        format!("{f}→{to} ({l})")
    };
    let label_w = rows
        .iter()
        .map(|(k, _)| text_width(&label(k), 9.0))
        .fold(40.0, f64::max)
        + 8.0;
    let (cw, rh) = ((900.0 / d.series.len() as f64).clamp(3.0, 14.0), 11.0);
    // Colours run up to the busiest second of any direction (said in the page).
    let peak_util = peak_utilisation(d).max(1e-9);
    let width = label_w + cw * d.series.len() as f64 + 20.0;
    let height = rows.len() as f64 * rh + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg class="heatmap" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="9">"#
    );
    for (i, (key, _)) in rows.iter().enumerate() {
        let y = i as f64 * rh;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            label_w - 4.0,
            y + rh - 2.0,
            esc(&label(key))
        );
        let c = cap.get(key).map_or(0.0, |c| c.0);
        for (j, sample) in d.series.iter().enumerate() {
            let m = sample
                .loads
                .iter()
                .find(|(l, f, _)| *l == key.0 && *f == key.1)
                .map_or(0.0, |x| x.2);
            let u = if c > 0.0 { m / c } else { 0.0 };
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{y:.1}" width="{cw:.1}" height="{:.1}" fill="{}"><title>{} at +{:.0} s: {m:.2} Mbit/s ({:.0}%)</title></rect>"#,
                label_w + j as f64 * cw,
                rh - 1.0,
                heat(u / peak_util),
                esc(&label(key)),
                sample.at - d.start,
                100.0 * u
            );
        }
    }
    axis(
        &mut s,
        label_w,
        rows.len() as f64 * rh + 12.0,
        d.series.iter().map(|x| x.at - d.start).collect(),
        cw,
    );
    if hidden > 0 {
        let _ = writeln!(
            s,
            r#"<text x="4" y="{:.1}">… and {hidden} quieter directions</text>"#,
            height - 4.0
        );
    }
    s.push_str("</svg>\n");
    Some(s)
}

/// The largest utilisation any direction had in any second of the series.
pub fn peak_utilisation(d: &ReportData) -> f64 {
    let cap: BTreeMap<(&str, &str), f64> = d
        .directions
        .iter()
        .map(|x| ((x.link.as_str(), x.from.as_str()), x.capacity_mbit))
        .collect();
    d.series
        .iter()
        .flat_map(|s| &s.loads)
        .filter_map(|(l, f, m)| {
            let c = *cap.get(&(l.as_str(), f.as_str()))?;
            (c > 0.0).then(|| m / c)
        })
        .fold(0.0, f64::max)
}

/// Time labels under the heatmap columns, at least 60 px apart.
fn axis(s: &mut String, x0: f64, y: f64, times: Vec<f64>, cw: f64) {
    let mut last = f64::NEG_INFINITY;
    for (j, t) in times.iter().enumerate() {
        let x = x0 + j as f64 * cw;
        if x - last >= 60.0 {
            let _ = writeln!(s, r#"<text x="{x:.1}" y="{y:.1}">+{t:.0} s</text>"#);
            last = x;
        }
    }
}

/// Lanes of the timeline, top to bottom.
const LANES: [&str; 6] = [
    "link changes",
    "traffic",
    "sessions",
    "groups",
    "ARN sent",
    "ARN applied",
];

/// The timeline's geometry: x of a time, and one coloured mark in a lane.
struct Timeline {
    start: f64,
    span: f64,
}

const X0: f64 = 100.0;
const LANE_H: f64 = 26.0;
const PLOT_W: f64 = 900.0;

impl Timeline {
    fn x(&self, t: f64) -> f64 {
        X0 + PLOT_W * ((t - self.start) / self.span).clamp(0.0, 1.0)
    }

    /// A bar from `t0` to `t1` (at least 2 px) in `lane`, its `title` on hover.
    fn mark(&self, s: &mut String, lane: usize, (t0, t1): (f64, f64), color: &str, title: &str) {
        let y = lane as f64 * LANE_H + 5.0;
        let w = (self.x(t1) - self.x(t0)).max(2.0);
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{color}" fill-opacity="0.8"><title>{}</title></rect>"#,
            self.x(t0),
            LANE_H - 10.0,
            esc(title)
        );
    }
}

/// The timeline of the lab's life, or None for a plan.
pub fn timeline(d: &ReportData) -> Option<String> {
    if d.end <= d.start {
        return None;
    }
    let tl = Timeline {
        start: d.start,
        span: (d.end - d.start).max(1.0),
    };
    let height = LANES.len() as f64 * LANE_H + 30.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg class="timeline" width="{:.0}" height="{height:.0}" font-family="sans-serif" font-size="10">"#,
        X0 + PLOT_W + 20.0
    );
    for (i, name) in LANES.iter().enumerate() {
        let y = i as f64 * LANE_H;
        let _ = writeln!(
            s,
            r##"<rect x="{X0}" y="{:.1}" width="{PLOT_W}" height="{:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{name}</text>"##,
            y + 2.0,
            LANE_H - 4.0,
            if i % 2 == 0 { "#f4f6f9" } else { "#fafbfc" },
            X0 - 6.0,
            y + LANE_H / 2.0 + 4.0
        );
    }
    change_marks(&mut s, &tl, d);
    for e in &d.agent_events {
        let (lane, color, what) = event_mark(e);
        let title = format!("+{:.3} s {what}", e.at - d.start);
        tl.mark(&mut s, lane, (e.at, e.at), color, &title);
    }
    let y = LANES.len() as f64 * LANE_H + 14.0;
    let step = nice_step(tl.span);
    let mut t = 0.0;
    while t <= tl.span + 1e-9 {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{y:.1}" text-anchor="middle">+{t:.0} s</text>"#,
            tl.x(d.start + t)
        );
        t += step;
    }
    s.push_str("</svg>\n");
    Some(s)
}

/// Link changes (as long as their convergence) and traffic runs.
fn change_marks(s: &mut String, tl: &Timeline, d: &ReportData) {
    for c in &d.changes {
        let at = c.at - d.start;
        let title = match c.convergence_s {
            Some(v) => format!("+{at:.1} s {}: converged in {:.0} ms", c.change, v * 1e3),
            None if !c.measured() => format!("+{at:.1} s {}", c.change),
            None => format!(
                "+{at:.1} s {}: NOT converged ({} differences)",
                c.change, c.mismatches
            ),
        };
        let end = c.at + c.convergence_s.unwrap_or(0.0);
        tl.mark(s, 0, (c.at, end), "#6a3d9a", &title);
    }
    for r in &d.traffic {
        let title = format!(
            "traffic +{:.0}..+{:.0} s: split distance {:.3}",
            r.start - d.start,
            r.end - d.start,
            r.split_error
        );
        tl.mark(s, 1, (r.start, r.end), "#33a02c", &title);
    }
}

/// Lane, colour and words of an agent's event.
fn event_mark(e: &AgentEvent) -> (usize, &'static str, String) {
    let n = &e.node;
    match &e.event {
        Event::SessionUp { peer } => (2, "#1f78b4", format!("{n} session to {peer} up")),
        Event::SessionDown { peer, reason } => (
            2,
            "#e31a1c",
            format!("{n} session to {peer} down: {reason}"),
        ),
        Event::GroupInstalled { prefix, members } => {
            (3, "#ff7f00", format!("{n} group {prefix}: {members}"))
        }
        Event::GroupRemoved { prefix } => (3, "#b15928", format!("{n} group {prefix} removed")),
        Event::ArnSent {
            arn_type,
            metric,
            interface,
            ..
        } => (
            4,
            "#e31a1c",
            format!("{n} sent ARN type {arn_type} metric {metric} on {interface}"),
        ),
        Event::ArnApplied {
            arn_type,
            metric,
            sender,
            ..
        } => (
            5,
            "#fb9a99",
            format!("{n} applied ARN type {arn_type} metric {metric} from {sender}"),
        ),
    }
}

/// An axis step (1, 2, 5 x 10^k seconds) giving at most ~10 labels over `span`.
fn nice_step(span: f64) -> f64 {
    let raw = span / 10.0;
    let p = 10f64.powf(raw.max(1e-3).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
        .max(1.0)
}
