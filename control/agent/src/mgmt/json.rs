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
        "link_bandwidth_ignored": n.link_bandwidth_ignored,
        "notifications_sent": n.notifications_sent,
        "notifications_received": n.notifications_received,
        "last_error": non_empty(&n.last_error),
        "flaps": n.flaps,
        "prefixes_accepted": n.prefixes_accepted,
        "prefixes_advertised": n.prefixes_advertised,
        "admin_down": n.admin_down,
        "shutdown_message": non_empty(&n.shutdown_message),
        "drained": n.drained,
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
            "received_gbps": p.received_gbps,
            "received_max": p.received_max,
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
    if let Some(b) = &g.buckets {
        v["buckets"] = json!({
            "size": b.size,
            "per_member": b.per_member,
            "moved": b.moved,
            "assigned_by": b.assigned_by,
        });
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

/// `{"prefix", "routes": [route...], "group": group|null}`
pub fn route_detail_json(d: &pb::RouteDetail) -> Value {
    json!({
        "prefix": d.prefix,
        "routes": d.routes.iter().map(route_json).collect::<Vec<_>>(),
        "group": d.group.as_ref().map(group_json),
    })
}

/// `{"color", "neighbors": [neighbor...], "routes": [{"prefix", "size", "limit",
/// "reduced_from", "delta", "members": [...]}]}`
pub fn color_json(c: &pb::ColorView) -> Value {
    json!({
        "color": c.color,
        "neighbors": c.neighbors.iter().map(neighbor_json).collect::<Vec<_>>(),
        "routes": c.routes.iter().map(|r| {
            let g = pb::Group {
                prefix: r.prefix.clone(),
                members: r.members.clone(),
                fit: r.fit,
                ..Default::default()
            };
            let mut v = group_json(&g);
            if let Some(o) = v.as_object_mut() {
                o.remove("mode");
            }
            v
        }).collect::<Vec<_>>(),
    })
}

fn session_change_json(s: &pb::SessionChange) -> Value {
    json!({
        "neighbor": s.neighbor,
        "state": s.state,
        "last_error": non_empty(&s.last_error),
        "admin_down": s.admin_down,
        "drained": s.drained,
    })
}

fn route_change_json(r: &pb::RouteChange) -> Value {
    let route = r.route.clone().unwrap_or_default();
    let mut v = route_json(&route);
    v["withdrawn"] = json!(r.withdrawn);
    v
}

fn group_change_json(g: &pb::GroupChange) -> Value {
    let group = g.group.clone().unwrap_or_default();
    if g.removed {
        return json!({"prefix": group.prefix, "removed": true});
    }
    let mut v = group_json(&group);
    for k in ["size", "limit", "reduced_from", "delta"] {
        if let Some(o) = v.as_object_mut() {
            o.remove(k);
        }
    }
    v["removed"] = json!(false);
    v
}

fn bandwidth_change_json(b: &pb::BandwidthChange) -> Value {
    json!({"neighbor": b.neighbor, "bandwidth_gbps": b.bandwidth_gbps})
}

fn arn_change_json(a: &pb::ArnChange) -> Value {
    json!({"prefix": a.prefix, "via": a.via, "removed": a.removed, "share": a.share})
}

/// One line of `fare watch --json`: `{"seq", "type", ...}` with `type` one of
/// `snapshot` (`resync`, `sessions`, `routes`, `groups`, `bandwidths`, `arn`), `session`,
/// `route`, `group`, `bandwidth`, `arn` and the fields of that change.
pub fn watch_event_json(e: &pb::WatchEvent) -> Value {
    use pb::watch_event::Event;
    let (kind, mut v) = match &e.event {
        Some(Event::Snapshot(s)) => (
            "snapshot",
            json!({
                "resync": s.resync,
                "sessions": s.sessions.iter().map(session_change_json).collect::<Vec<_>>(),
                "routes": s.routes.iter().map(route_change_json).collect::<Vec<_>>(),
                "groups": s.groups.iter().map(group_change_json).collect::<Vec<_>>(),
                "bandwidths": s.bandwidths.iter().map(bandwidth_change_json).collect::<Vec<_>>(),
                "arn": s.arn.iter().map(arn_change_json).collect::<Vec<_>>(),
            }),
        ),
        Some(Event::Session(s)) => ("session", session_change_json(s)),
        Some(Event::Route(r)) => ("route", route_change_json(r)),
        Some(Event::Group(g)) => ("group", group_change_json(g)),
        Some(Event::Bandwidth(b)) => ("bandwidth", bandwidth_change_json(b)),
        Some(Event::Arn(a)) => ("arn", arn_change_json(a)),
        None => ("unknown", json!({})),
    };
    v["seq"] = json!(e.seq);
    v["type"] = json!(kind);
    v
}
