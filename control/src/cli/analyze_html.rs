//! `fare analyze --html`: the ranked failures as one self-contained page (no scripts, no
//! external resources).

use super::analyze_summary::{covered, kind, Summary};
use fare_model::analyze::Report;
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;margin:16px 24px;color:#222}\
h1{font-size:20px;margin:0 0 4px}p{margin:4px 0}\
table{border-collapse:collapse;font-size:12px;margin-top:10px}\
td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right}\
td.l,th.l{text-align:left}.bad{color:#b2182b;font-weight:bold}";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn page(s: &Summary, reports: &[Report]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>fare analyze: {}</title><style>{STYLE}</style></head><body>\
<h1>What if this fails: {}</h1><p>{}</p><p>{:?} mode: {} failures ({}), {} shown, worst first; \
{} of {} (failure, destination) pairs re-propagated; {:.2} s.</p>",
        esc(&s.topology),
        esc(&s.topology),
        esc(&s.fabric),
        s.mode,
        s.failures,
        covered(s),
        reports.len(),
        s.recomputed,
        s.destinations_total,
        s.seconds
    );
    h.push_str(
        "<table id=\"failures\"><tr><th>rank</th><th class=\"l\">failure</th><th class=\"l\">kind</th>\
<th>changed groups</th><th>unreachable</th><th>worst oversubscription</th>\
<th>stranded Gbps</th><th>reduced by limit</th><th>single path</th>\
<th class=\"l\">worst destination</th></tr>\n",
    );
    for (i, r) in reports.iter().enumerate() {
        let worst = r.destinations.first().map_or_else(String::new, |d| {
            let p: Vec<String> = d.prefixes.iter().map(|p| p.to_string()).collect();
            format!("{} at {}", p.join(" "), d.node)
        });
        let bad = |b: bool| if b { " class=\"bad\"" } else { "" };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td>\
<td{}>{}</td><td{}>{:.3}</td><td>{:+.1}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            i + 1,
            esc(&r.failure),
            kind(r.kind),
            r.changed_groups,
            bad(r.unreachable > 0),
            r.unreachable,
            bad(r.worst_oversubscription > 1.0),
            r.worst_oversubscription,
            r.stranded_gbps,
            r.reduced_groups,
            r.single_path,
            esc(&worst)
        );
    }
    h.push_str("</table></body></html>\n");
    h
}
