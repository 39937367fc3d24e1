//! What the terminal shows: per-link load against the ideal weighted split (table, JSON),
//! and `fare lab show` (utilization, groups, events). The drawing is `fare lab report`'s
//! (`report_html`).

use super::agents;
use super::faults;
use super::frr;
use super::model_check;
use super::plan::Plan;
use super::state::{LinkChange, StateDir};
use super::stats::{self, DirectionLoad};
use super::traffic_load::LinkLoads;
use super::LabError;
use serde::Serialize;
use std::fmt::Write;
use std::time::Duration;

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Totals {
    pub sent_packets: u64,
    pub received_packets: u64,
    pub unroutable_mbit: f64,
    pub duration_s: f64,
    pub flows_per_source: usize,
    pub rate_mbit_per_source: f64,
    pub split: String,
    pub changes: Vec<LinkChange>,
}

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct LinkRow {
    pub link: String,
    pub from: String,
    pub to: String,
    pub capacity_mbit: f64,
    pub ideal_mbit: f64,
    pub measured_mbit: f64,
    pub utilization: f64,
}

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Comparison {
    pub lab: String,
    pub links: Vec<LinkRow>,
    /// Total variation distance between the measured and the ideal distribution of load
    /// over link directions: 0 = the measured split is the ideal one, 1 = disjoint.
    pub split_error: f64,
    /// Largest |measured - ideal| / ideal over directions carrying at least 5% of the
    /// largest ideal load.
    pub max_relative_error: f64,
    pub totals: Totals,
}

pub fn compare(
    plan: &Plan,
    measured: &[DirectionLoad],
    ideal: &LinkLoads,
    totals: Totals,
) -> Comparison {
    let links: Vec<LinkRow> = measured
        .iter()
        .map(|m| LinkRow {
            link: m.link.clone(),
            from: m.from.clone(),
            to: m.to.clone(),
            capacity_mbit: m.capacity_mbit,
            ideal_mbit: ideal
                .get(&(m.link.clone(), m.from.clone()))
                .copied()
                .unwrap_or(0.0),
            measured_mbit: m.mbit,
            utilization: m.utilization,
        })
        .collect();
    let (mt, it): (f64, f64) = links.iter().fold((0.0, 0.0), |(a, b), l| {
        (a + l.measured_mbit, b + l.ideal_mbit)
    });
    let split_error = if mt > 0.0 && it > 0.0 {
        0.5 * links
            .iter()
            .map(|l| (l.measured_mbit / mt - l.ideal_mbit / it).abs())
            .sum::<f64>()
    } else {
        1.0
    };
    let max_ideal = links.iter().map(|l| l.ideal_mbit).fold(0.0, f64::max);
    let max_relative_error = links
        .iter()
        .filter(|l| l.ideal_mbit >= 0.05 * max_ideal && l.ideal_mbit > 0.0)
        .map(|l| (l.measured_mbit - l.ideal_mbit).abs() / l.ideal_mbit)
        .fold(0.0, f64::max);
    Comparison {
        lab: plan.lab.clone(),
        links,
        split_error,
        max_relative_error,
        totals,
    }
}

/// The comparison as a text table (directions with any load, ideal or measured).
pub fn table(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<14} {:>8} {:>8} {:>9} {:>9} {:>9} {:>6}",
        "link", "from", "to", "cap Mb/s", "ideal", "measured", "util"
    );
    for l in c
        .links
        .iter()
        .filter(|l| l.ideal_mbit > 0.01 || l.measured_mbit > 0.01)
    {
        let _ = writeln!(
            s,
            "{:<14} {:>8} {:>8} {:>9.1} {:>9.2} {:>9.2} {:>5.0}%",
            l.link,
            l.from,
            l.to,
            l.capacity_mbit,
            l.ideal_mbit,
            l.measured_mbit,
            100.0 * l.utilization
        );
    }
    let t = &c.totals;
    let loss = if t.sent_packets > 0 {
        100.0 * (1.0 - t.received_packets as f64 / t.sent_packets as f64)
    } else {
        0.0
    };
    let _ = writeln!(
        s,
        "packets: sent {} received {} (loss {loss:.2}%); {} flows/source at {:.1} Mbit/s, {} s, {} mode",
        t.sent_packets, t.received_packets, t.flows_per_source, t.rate_mbit_per_source, t.duration_s, t.split
    );
    let _ = writeln!(
        s,
        "split vs ideal: distance {:.3} (0 = ideal), largest per-link deviation {:.1}%",
        c.split_error,
        100.0 * c.max_relative_error
    );
    s
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// Lab name; without it, the only lab that is up.
    #[arg(long)]
    pub name: Option<String>,
    /// Seconds between the two counter samples utilization is computed from.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run_show(a: ShowArgs) -> Result<(), LabError> {
    let dir = StateDir::find(a.name.as_deref())?;
    let state = dir.load()?;
    let plan = &state.plan;
    let first = stats::snapshot(plan);
    std::thread::sleep(Duration::from_secs_f64(a.interval.clamp(0.1, 60.0)));
    let second = stats::snapshot(plan);
    let gbps = model_check::current_gbps(&state);
    let scale = plan.options.scale_mbit_per_gbps;
    let loads = stats::loads(plan, &first, &second, |l| {
        gbps.get(l).copied().unwrap_or(0.0) * scale
    });
    let mut groups = serde_json::Map::new();
    let mut neighbors = serde_json::Map::new();
    if !state.agents.is_empty() {
        let names: Vec<&str> = plan.nodes.iter().map(|n| n.name.as_str()).collect();
        let all_groups = agents::show_all(&dir, &names, agents::Show::Groups);
        let all_neighbors = agents::show_all(&dir, &names, agents::Show::Neighbors);
        let all = names.iter().zip(all_groups).zip(all_neighbors);
        for (((name, g), v), node) in all.zip(&plan.nodes) {
            // An FRR node has no agent: its kernel's groups and bgpd's sessions.
            let (g, v) = if node.frr {
                (frr::groups_json(node), frr::neighbors_json(&dir, name))
            } else {
                (g, v)
            };
            if let Some(g) = g {
                groups.insert(name.to_string(), g);
            }
            if let Some(v) = v {
                neighbors.insert(name.to_string(), v);
            }
        }
    }
    let events = dir.events_list();
    let arn = faults::arn_seen(&dir, &state, state.up_at);
    if a.json {
        let v = serde_json::json!({
            "lab": plan.lab,
            "routing": plan.options.routing,
            "dataplane": plan.options.dataplane,
            "links": loads,
            "groups": groups,
            "neighbors": neighbors,
            "changes": state.changes,
            "events": events,
            "arn": arn,
        });
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default())?;
        return Ok(());
    }
    outln!(
        "lab {} ({:?} routing, {:?} data plane, {} nodes, {} links)",
        plan.lab,
        plan.options.routing,
        plan.options.dataplane,
        plan.nodes.len(),
        plan.links.len()
    )?;
    outln!(
        "{:<14} {:>8} {:>8} {:>9} {:>9} {:>6}",
        "link",
        "from",
        "to",
        "cap Mb/s",
        "Mbit/s",
        "util"
    )?;
    for l in &loads {
        outln!(
            "{:<14} {:>8} {:>8} {:>9.1} {:>9.2} {:>5.0}%",
            l.link,
            l.from,
            l.to,
            l.capacity_mbit,
            l.mbit,
            100.0 * l.utilization
        )?;
    }
    for (node, g) in &groups {
        for grp in g.as_array().into_iter().flatten() {
            let members: Vec<String> = grp["members"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| format!("{}:{}", m["interface"].as_str().unwrap_or("?"), m["weight"]))
                .collect();
            outln!(
                "group {node:<6} {:<18} {:<5} {}",
                grp["prefix"].as_str().unwrap_or("?"),
                grp["mode"].as_str().unwrap_or(""),
                members.join(" ")
            )?;
        }
    }
    for (node, v) in &neighbors {
        let up_ = v
            .as_array()
            .map(|l| l.iter().filter(|n| n["state"] == "Established").count())
            .unwrap_or(0);
        let total = v.as_array().map(Vec::len).unwrap_or(0);
        let by = if v[0]["target"] == "frr" {
            " (FRR bgpd)"
        } else {
            ""
        };
        if total > 0 {
            outln!("bgp   {node:<6} {up_}/{total} sessions established{by}")?;
        }
    }
    for c in &state.changes {
        outln!("change {}", serde_json::to_string(c).unwrap_or_default())?;
    }
    for a in arn.iter().take(20) {
        outln!("arn   {}", a.summary())?;
    }
    Ok(())
}
