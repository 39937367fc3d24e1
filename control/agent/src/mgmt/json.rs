//! The JSON contracts of `fare show ... --json` (docs/configuration.md), one source for
//! the command and for the lab, which reads its agents' state in process.

use super::pb;
use serde_json::{json, Value};

pub fn non_empty(s: &str) -> Value {
    if s.is_empty() {
        Value::Null
    } else {
        Value::String(s.to_string())
    }
}

pub fn neighbor_json(n: &pb::Neighbor) -> Value {
    json!({
        "address": n.address,
        "remote_as": n.remote_as,
        "state": n.state,
        "interface": non_empty(&n.interface),
        "bandwidth_gbps": n.bandwidth_gbps,
        "color": n.color,
        "uptime_seconds": n.uptime_seconds,
        "prefixes_received": n.prefixes_received,
        "updates_received": n.updates_received,
        "updates_sent": n.updates_sent,
        "malformed_updates": n.malformed_updates,
        "notifications_sent": n.notifications_sent,
        "notifications_received": n.notifications_received,
        "last_error": non_empty(&n.last_error),
    })
}

pub fn route_json(r: &pb::Route) -> Value {
    json!({
        "prefix": r.prefix,
        "source": r.source,
        "paths": r.paths.iter().map(|p| json!({
            "next_hop": non_empty(&p.next_hop),
            "neighbor": non_empty(&p.neighbor),
            "as_path": p.as_path,
            "path_bandwidth_gbps": p.path_bandwidth_gbps,
            "selected": p.selected,
        })).collect::<Vec<_>>(),
    })
}

/// `size`, `limit`, `reduced_from`, `delta` of a group (see the module documentation);
/// an agent that does not report them gives the size of its weights and nulls.
fn fit_json(fit: Option<&pb::GroupFit>, members: &[pb::Member]) -> [(&'static str, Value); 4] {
    let size = fit.map_or_else(
        || members.iter().map(|m| u64::from(m.weight)).sum(),
        |f| f.size,
    );
    [
        ("size", json!(size)),
        ("limit", json!(fit.and_then(|f| f.limit))),
        ("reduced_from", json!(fit.and_then(|f| f.reduced_from))),
        ("delta", json!(fit.and_then(|f| f.delta))),
    ]
}

/// Exactly the keys of the contract in docs/configuration.md, plus the fit keys, plus `colors` on DPF
/// routes.
pub fn group_json(g: &pb::Group) -> Value {
    let members = |list: &[pb::Member]| {
        list.iter()
            .map(|m| {
                let mut v = json!({
                    "via": m.via,
                    "interface": m.interface,
                    "weight": m.weight,
                    "bandwidth_gbps": m.bandwidth_gbps,
                    "packets": m.packets,
                });
                if !m.active {
                    v["active"] = json!(false);
                }
                v
            })
            .collect::<Vec<_>>()
    };
    let mut v = json!({
        "prefix": g.prefix,
        "mode": g.mode,
        "members": members(&g.members),
    });
    for (k, x) in fit_json(g.fit.as_ref(), &g.members) {
        v[k] = x;
    }
    if !g.colors.is_empty() {
        v["colors"] = g
            .colors
            .iter()
            .map(|c| {
                let mut cv = json!({"color": c.color, "members": members(&c.members)});
                for (k, x) in fit_json(c.fit.as_ref(), &c.members) {
                    cv[k] = x;
                }
                cv
            })
            .collect();
    }
    v
}

/// `{"enabled", "udp_port", "counters": {...}, "sent": {"1": n, ...}, "monitored": [...],
/// "removed": [{"prefix", "index", "sender", "kinds", "path_ids", "metric", "for_ms",
/// "expires_in_ms", "reason"}]}`
pub fn arn_json(a: &pb::ArnState) -> Value {
    let counters: serde_json::Map<String, Value> = a
        .counters
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let sent: serde_json::Map<String, Value> = a
        .sent
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "enabled": a.enabled,
        "udp_port": a.udp_port,
        "counters": counters,
        "sent": sent,
        "monitored": a.monitored,
        "removed": a.removed.iter().map(|r| json!({
            "prefix": r.prefix,
            "index": r.index,
            "sender": r.sender,
            "kinds": r.kinds,
            "path_ids": r.path_ids,
            "metric": r.metric,
            "for_ms": r.for_ms,
            "expires_in_ms": r.expires_in_ms,
            "reason": r.reason,
        })).collect::<Vec<_>>(),
    })
}
