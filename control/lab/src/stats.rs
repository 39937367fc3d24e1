//! Per-link load from interface counters: each end's transmit counters are one
//! direction of the link (`ip -s -j link show` in every node namespace).

use super::plan::Plan;
use super::sys;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Instant;

/// Counters of one interface.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IfCounters {
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

/// All counters of a lab at one instant: (node, interface) -> counters.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub at: Instant,
    pub counters: HashMap<(String, String), IfCounters>,
}

/// Parses `ip -s -j link show` output.
pub fn parse_ip_stats(json: &str) -> HashMap<String, IfCounters> {
    let mut out = HashMap::new();
    let Ok(Value::Array(list)) = serde_json::from_str::<Value>(json) else {
        return out;
    };
    for l in list {
        let Some(name) = l.get("ifname").and_then(Value::as_str) else {
            continue;
        };
        let tx = &l["stats64"]["tx"];
        out.insert(
            name.to_string(),
            IfCounters {
                tx_bytes: tx["bytes"].as_u64().unwrap_or(0),
                tx_packets: tx["packets"].as_u64().unwrap_or(0),
                tx_dropped: tx["dropped"].as_u64().unwrap_or(0),
            },
        );
    }
    out
}

pub fn snapshot(plan: &Plan) -> Snapshot {
    let mut counters = HashMap::new();
    for n in &plan.nodes {
        if let Ok(out) = sys::run("ip", &["-s", "-j", "-n", &n.ns, "link", "show"]) {
            for (ifname, c) in parse_ip_stats(&out) {
                counters.insert((n.name.clone(), ifname), c);
            }
        }
    }
    Snapshot {
        at: Instant::now(),
        counters,
    }
}

/// Load of one direction of one link between two snapshots.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DirectionLoad {
    pub link: String,
    pub from: String,
    pub to: String,
    /// Capacity of the direction after scaling (Mbit/s of the tc shaper).
    pub capacity_mbit: f64,
    pub mbit: f64,
    pub packets: u64,
    pub utilization: f64,
}

/// Per-direction loads of every fabric link between `a` and `b` (b later).
pub fn loads(
    plan: &Plan,
    a: &Snapshot,
    b: &Snapshot,
    capacity: impl Fn(&str) -> f64,
) -> Vec<DirectionLoad> {
    let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
    let mut out = Vec::new();
    for l in &plan.links {
        for (from, ifname, to) in [(&l.a, &l.a_interface, &l.b), (&l.b, &l.b_interface, &l.a)] {
            let key = (from.clone(), ifname.clone());
            let (x, y) = (
                a.counters.get(&key).copied().unwrap_or_default(),
                b.counters.get(&key).copied().unwrap_or_default(),
            );
            let mbit = y.tx_bytes.saturating_sub(x.tx_bytes) as f64 * 8.0 / secs / 1e6;
            let cap = capacity(&l.name);
            out.push(DirectionLoad {
                link: l.name.clone(),
                from: from.clone(),
                to: to.clone(),
                capacity_mbit: cap,
                mbit,
                packets: y.tx_packets.saturating_sub(x.tx_packets),
                utilization: if cap > 0.0 { mbit / cap } else { 0.0 },
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ip_json_and_ignores_garbage() {
        let j = r#"[{"ifindex":1,"ifname":"lo","stats64":{"rx":{"bytes":1},"tx":{"bytes":5,"packets":1,"dropped":0}}},
                   {"ifname":"eth1","stats64":{"tx":{"bytes":1000,"packets":10,"dropped":2}}}, {"x":1}]"#;
        let m = parse_ip_stats(j);
        assert_eq!(m["eth1"].tx_bytes, 1000);
        assert_eq!(m["eth1"].tx_dropped, 2);
        assert_eq!(m.len(), 2);
        assert!(parse_ip_stats("not json").is_empty());
    }
}
