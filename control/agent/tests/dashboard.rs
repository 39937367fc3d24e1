//! The Grafana dashboard (docs/grafana/fare.json) queries only what the agent exports:
//! every PromQL expression of its panels and variables is parsed by a PromQL parser, and
//! every metric name it selects must be a family the metrics code registers
//! (`metrics::family_names`, from the code, not a list kept by hand).

use promql_parser::parser::{self, Expr};
use promql_parser::util::{walk_expr, ExprVisitor};
use serde_json::Value;
use std::collections::BTreeSet;

const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/grafana/fare.json");

/// Grafana's interval variables are not PromQL; any duration stands in for them.
fn substitute(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$__range", "1h")
}

struct Names(BTreeSet<String>);

impl ExprVisitor for Names {
    type Error = String;
    fn pre_visit(&mut self, e: &Expr) -> Result<bool, String> {
        let vs = match e {
            Expr::VectorSelector(vs) => vs,
            Expr::MatrixSelector(ms) => &ms.vs,
            _ => return Ok(true),
        };
        match &vs.name {
            Some(n) => {
                self.0.insert(n.clone());
            }
            None => return Err(format!("selector without a metric name: {e}")),
        }
        Ok(true)
    }
}

/// Metric names an expression selects; Err names the expression that does not parse.
fn names(expr: &str) -> Result<BTreeSet<String>, String> {
    let ast = parser::parse(&substitute(expr)).map_err(|e| format!("{expr}: {e}"))?;
    let mut v = Names(BTreeSet::new());
    walk_expr(&mut v, &ast)?;
    Ok(v.0)
}

/// Every `expr` of the panels (rows included), and every variable query: the metric of
/// `label_values(METRIC{...}, label)`, which is no PromQL function.
fn expressions(dashboard: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    while let Some(p) = panels.pop() {
        panels.extend(p["panels"].as_array().into_iter().flatten());
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(e) = t["expr"].as_str() {
                out.push(e.to_string());
            }
        }
    }
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let q = v["query"]["query"].as_str().or(v["query"].as_str());
        if let Some(inner) = q.and_then(|q| q.strip_prefix("label_values(")) {
            if let Some((selector, _label)) = inner.trim_end_matches(')').rsplit_once(',') {
                out.push(selector.trim().to_string());
            }
        }
    }
    out
}

#[test]
fn every_metric_the_dashboard_queries_is_exported() {
    let text = std::fs::read_to_string(DASHBOARD).expect("docs/grafana/fare.json");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let exported: BTreeSet<String> = fare_agent::metrics::family_names().into_iter().collect();
    let exprs = expressions(&dashboard);
    assert!(exprs.len() >= 20, "only {} expressions found", exprs.len());
    let mut queried = BTreeSet::new();
    for e in &exprs {
        let n = names(e).unwrap_or_else(|err| panic!("{err}"));
        assert!(!n.is_empty(), "{e} selects no metric");
        queried.extend(n);
    }
    let missing: Vec<&String> = queried.difference(&exported).collect();
    assert!(missing.is_empty(), "queried but not exported: {missing:?}");
    // The dashboard covers what the issue asks to watch.
    for family in [
        "fare_bgp_neighbor_state",
        "fare_bgp_neighbor_flaps_total",
        "fare_bgp_neighbor_established_timestamp_seconds",
        "fare_group_member_weight",
        "fare_group_member_path_bandwidth_bytes_per_second",
        "fare_arn_sent_total",
        "fare_xdp_packets_total",
    ] {
        assert!(
            queried.contains(family),
            "the dashboard never shows {family}"
        );
    }
}

/// The judge itself: a name that is not exported, or an expression that is no PromQL,
/// is caught.
#[test]
fn the_check_catches_unknown_names_and_bad_expressions() {
    let n = names("rate(fare_no_such_total{instance=~\"$instance\"}[$__rate_interval])").unwrap();
    assert!(!fare_agent::metrics::family_names().contains(&"fare_no_such_total".to_string()));
    assert_eq!(n.into_iter().collect::<Vec<_>>(), ["fare_no_such_total"]);
    assert!(names("sum by (instance (fare_groups)").is_err());
    assert!(
        names("{instance=\"x\"}").is_err(),
        "a selector without a name"
    );
}
