//! `fare show neighbors|neighbor ADDR|routes|route PREFIX|groups|color N|info|arn|config
//! [--json]`: the state of a running agent, read through its management API.
//!
//! JSON contracts (docs/configuration.md):
//! - neighbors: `[{"address", "remote_as", "state": "Established", ...}]`
//! - groups: `[{"prefix", "mode": "spray"|"flow", "size", "limit", "reduced_from",
//!   "delta", "members": [{"via", "interface", "weight", "bandwidth_gbps", "packets"}]}]`
//!   (`via` = neighbor address, or the neighbor MAC for static members; `"active": false`
//!   is added while ARN holds the member out or its port is down; `size` = sum of
//!   the installed weights, `limit` = the data plane's limit on it or null, `reduced_from`
//!   and `delta` = requested sum and oversubscription against the ideal when the agent
//!   reduced the group to fit, else null); DPF routes add `"colors": [{"color", "size",
//!   "limit", "reduced_from", "delta", "members": [...same keys...]}]`, the per-color
//!   groups with their own counters
//! - routes: `[{"prefix", "source", "paths": [{"next_hop", "neighbor", "as_path",
//!   "path_bandwidth_gbps", "received_gbps", "received_max", "selected"}]}]`

use super::conn::{status_error, Conn};
use fare_agent::mgmt::json::{
    arn_json, color_json, group_json, neighbor_json, route_detail_json, route_json,
};
use fare_agent::mgmt::{client::Client, pb};
use serde_json::{json, Value};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum What {
    /// BGP neighbors and their session state.
    Neighbors,
    /// One neighbor: state, counts received/accepted/advertised, flaps, last error, uptime.
    Neighbor {
        /// The neighbor's address (as in `neighbors:`).
        #[arg(value_name = "ADDR")]
        peer: String,
    },
    /// Routes known to the agent (BGP, static, originated).
    Routes,
    /// One prefix (or the longest prefix containing an address): its paths with their
    /// path bandwidth, and its installed group.
    Route {
        /// A prefix (10.0.1.0/24) or an address (10.0.1.7).
        prefix: String,
    },
    /// Groups installed in the data plane, with per-member packet counters.
    Groups,
    /// One DPF color: the neighbors of that session color and the per-color groups.
    Color {
        /// RFC 9012 Color value.
        color: u32,
    },
    /// Agent name, router ID, ASN, data plane backend.
    Info,
    /// Adaptive Routing Notifications: receiver counters, ARNs sent, members held out
    /// (prefix, member, sender, congestion/failure, Path ID, how long, expiry).
    Arn,
    /// The running configuration (YAML) and the run-time changes not in the file.
    Config,
    /// Why a prefix has its group: the paths with their Path Bandwidth as received (wire
    /// bits and value), the link bandwidths, the rule, the ratio reduction and the fit;
    /// with --topology/--lab and --node, beside the model's explanation (`fare explain`),
    /// naming the first hop where they differ.
    Explain(super::show_explain::Args),
}

pub fn run(args: Args, conn: &Conn) -> anyhow::Result<()> {
    let text = match &args.what {
        What::Explain(a) if a.lab.is_some() => super::show_explain::run_in_lab(a, args.json)?,
        _ => conn.run(async |c| fetch(&args, c).await)?,
    };
    crate::out!("{text}")?;
    Ok(())
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

async fn fetch(args: &Args, mut c: Client) -> anyhow::Result<String> {
    Ok(match &args.what {
        What::Neighbors => {
            let list = c
                .list_neighbors(pb::ListNeighborsRequest {})
                .await?
                .into_inner();
            list_text(args.json, &list.neighbors, neighbor_json, neighbors_table)
        }
        What::Neighbor { peer } => {
            let n = c
                .get_neighbor(pb::GetNeighborRequest {
                    address: peer.clone(),
                })
                .await
                .map_err(status_error)?
                .into_inner();
            if args.json {
                pretty(&neighbor_json(&n))
            } else {
                neighbor_text(&n)
            }
        }
        What::Routes => {
            let list = c.list_routes(pb::ListRoutesRequest {}).await?.into_inner();
            list_text(args.json, &list.routes, route_json, routes_table)
        }
        What::Route { prefix } => {
            let d = c
                .get_route(pb::GetRouteRequest {
                    prefix: prefix.clone(),
                })
                .await
                .map_err(status_error)?
                .into_inner();
            if args.json {
                pretty(&route_detail_json(&d))
            } else {
                let mut out = routes_table(&d.routes);
                out.push_str(&match &d.group {
                    Some(g) => groups_table(std::slice::from_ref(g)),
                    None => "no group installed\n".to_string(),
                });
                out
            }
        }
        What::Groups => {
            let list = c.list_groups(pb::ListGroupsRequest {}).await?.into_inner();
            list_text(args.json, &list.groups, group_json, groups_table)
        }
        What::Color { color } => {
            let v = c
                .get_color(pb::GetColorRequest { color: *color })
                .await
                .map_err(status_error)?
                .into_inner();
            if args.json {
                pretty(&color_json(&v))
            } else {
                color_text(&v)
            }
        }
        What::Arn => {
            let a = c.get_arn(pb::GetArnRequest {}).await?.into_inner();
            if args.json {
                pretty(&arn_json(&a))
            } else {
                arn_text(&a)
            }
        }
        What::Config => {
            let r = c.get_config(pb::GetConfigRequest {}).await?.into_inner();
            if args.json {
                pretty(&json!({"yaml": r.yaml, "changes": r.changes}))
            } else {
                let mut out = r.yaml;
                for change in &r.changes {
                    out.push_str(&format!("# {change}\n"));
                }
                out
            }
        }
        What::Explain(a) => super::show_explain::fetch(a, args.json, Some(c)).await?,
        What::Info => {
            let i = c.get_info(pb::GetInfoRequest {}).await?.into_inner();
            if args.json {
                pretty(&json!({
                    "name": i.name, "router_id": i.router_id, "asn": i.asn,
                    "dataplane": i.dataplane, "uptime_seconds": i.uptime_seconds,
                    "version": i.version,
                }))
            } else {
                format!(
                    "name {}\nrouter id {}\nAS {}\ndata plane {}\nuptime {} s\nversion {}\n",
                    i.name, i.router_id, i.asn, i.dataplane, i.uptime_seconds, i.version
                )
            }
        }
    })
}

/// `key value` lines of one neighbor.
fn neighbor_text(n: &pb::Neighbor) -> String {
    let mut rows = vec![
        ("neighbor", n.address.clone()),
        ("remote AS", n.remote_as.to_string()),
        ("state", n.state.clone()),
        ("for", format!("{} s", n.uptime_seconds)),
        ("interface", n.interface.clone()),
        ("bandwidth", format!("{} Gbps", n.bandwidth_gbps)),
        ("prefixes received", n.prefixes_received.to_string()),
        ("prefixes accepted", n.prefixes_accepted.to_string()),
        ("prefixes advertised", n.prefixes_advertised.to_string()),
        ("flaps", n.flaps.to_string()),
        (
            "updates in/out",
            format!("{}/{}", n.updates_received, n.updates_sent),
        ),
        (
            "notifications in/out",
            format!("{}/{}", n.notifications_received, n.notifications_sent),
        ),
        ("last error", n.last_error.clone()),
    ];
    if n.admin_down {
        rows.push(("shut down", format!("{:?}", n.shutdown_message)));
    }
    if n.drained {
        rows.push(("drained", "yes".into()));
    }
    rows.iter().map(|(k, v)| format!("{k:<22}{v}\n")).collect()
}

fn color_text(v: &pb::ColorView) -> String {
    let mut out = format!("color {}\n", v.color);
    out.push_str(&neighbors_table(&v.neighbors));
    let mut rows = Vec::new();
    for r in &v.routes {
        groups_table_rows(
            &mut rows,
            Some(&r.prefix),
            &format!("color {}", v.color),
            &r.members,
            r.fit.as_ref(),
        );
    }
    out.push_str(&groups_header_table(&rows));
    out
}

/// A list the agent returned, as JSON (one object per item) or as a table.
fn list_text<T>(
    json: bool,
    list: &[T],
    item: fn(&T) -> Value,
    table: fn(&[T]) -> String,
) -> String {
    if json {
        to_json(list.iter().map(item).collect())
    } else {
        table(list)
    }
}

fn to_json(items: Vec<Value>) -> String {
    let mut s = serde_json::to_string_pretty(&Value::Array(items)).unwrap_or_default();
    s.push('\n');
    s
}

fn arn_text(a: &pb::ArnState) -> String {
    if !a.enabled {
        return "ARN is off (no `arn:` block in the configuration)\n".to_string();
    }
    let mut out = format!("ARN on UDP port {}\n", a.udp_port);
    if !a.monitored.is_empty() {
        out.push_str(&format!("monitoring {}\n", a.monitored.join(", ")));
        let sent: Vec<String> = a.sent.iter().map(|(t, n)| format!("type{t} {n}")).collect();
        out.push_str(&format!("sent {}\n", sent.join("  ")));
    }
    let counters: Vec<String> = a
        .counters
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    out.push_str(&format!("received {}\n", counters.join("  ")));
    let rows: Vec<Vec<String>> = a
        .removed
        .iter()
        .map(|r| {
            vec![
                r.prefix.clone(),
                r.index.to_string(),
                r.sender.clone(),
                r.kinds.join("+"),
                r.path_ids.join(","),
                r.metric.to_string(),
                format!("{} ms", r.for_ms),
                format!("{} ms", r.expires_in_ms),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "PREFIX", "MEMBER", "SENDER", "WHY", "PATH ID", "METRIC", "FOR", "EXPIRES",
        ],
        &rows,
    ));
    out
}

/// Left-aligned columns separated by two spaces.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

fn neighbors_table(list: &[pb::Neighbor]) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|n| {
            let mut state = n.state.clone();
            if n.admin_down {
                state.push_str(" (shut down)");
            }
            if n.drained {
                state.push_str(" (drained)");
            }
            vec![
                n.address.clone(),
                n.remote_as.to_string(),
                state,
                format!("{}s", n.uptime_seconds),
                n.interface.clone(),
                format!("{}", n.bandwidth_gbps),
                n.prefixes_accepted.to_string(),
                n.prefixes_advertised.to_string(),
                n.last_error.clone(),
            ]
        })
        .collect();
    // ACCEPTED: prefixes in the Adj-RIB-In now (FRR's PfxRcd); ADVERTISED: in the
    // Adj-RIB-Out (PfxSnt). The cumulative count received is in --json.
    table(
        &[
            "NEIGHBOR",
            "AS",
            "STATE",
            "FOR",
            "INTERFACE",
            "GBPS",
            "ACCEPTED",
            "ADVERTISED",
            "LAST ERROR",
        ],
        &rows,
    )
}

fn routes_table(list: &[pb::Route]) -> String {
    let mut rows = Vec::new();
    for r in list {
        for (i, p) in r.paths.iter().enumerate() {
            let first = i == 0;
            rows.push(vec![
                if first {
                    r.prefix.clone()
                } else {
                    String::new()
                },
                if first {
                    r.source.clone()
                } else {
                    String::new()
                },
                if p.selected { "*" } else { "" }.to_string(),
                p.next_hop.clone(),
                p.neighbor.clone(),
                p.as_path
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
                received(p),
                p.path_bandwidth_gbps
                    .map(|b| format!("{b}"))
                    .unwrap_or_default(),
            ]);
        }
    }
    table(
        &[
            "PREFIX",
            "SOURCE",
            "SEL",
            "NEXT HOP",
            "NEIGHBOR",
            "AS PATH",
            "RECEIVED",
            "PATH GBPS",
        ],
        &rows,
    )
}

/// The Path Bandwidth as the route carried it: `max`, Gbps, or nothing.
fn received(p: &pb::RoutePath) -> String {
    match (p.received_max, p.received_gbps) {
        (true, _) => "max".into(),
        (false, Some(g)) => format!("{g}"),
        (false, None) => String::new(),
    }
}

fn groups_table(list: &[pb::Group]) -> String {
    let mut rows = Vec::new();
    for g in list {
        // The route's group, then each DPF color's group (`color N` in the MODE column).
        let colors = g
            .colors
            .iter()
            .map(|c| (format!("color {}", c.color), &c.members, c.fit.as_ref()));
        let first = rows.len();
        groups_table_rows(
            &mut rows,
            Some(&g.prefix),
            &g.mode,
            &g.members,
            g.fit.as_ref(),
        );
        bucket_cells(&mut rows[first..], g.buckets.as_ref());
        for (label, members, fit) in colors {
            let first = rows.len();
            groups_table_rows(&mut rows, None, &label, members, fit);
            bucket_cells(&mut rows[first..], None);
        }
    }
    groups_header_table(&rows)
}

fn groups_header_table(rows: &[Vec<String>]) -> String {
    table(
        &[
            "PREFIX",
            "MODE",
            "SIZE",
            "LIMIT",
            "DELTA",
            "VIA",
            "INTERFACE",
            "NEXT HOP",
            "WEIGHT",
            "GBPS",
            "STATE",
            "PACKETS",
            "BYTES",
            "BUCKETS",
            "MOVED",
        ],
        rows,
    )
}

/// The BUCKETS and MOVED cells of one group's rows: each member's buckets, and on the
/// first row the buckets moved at the last change out of the table (`17/256`, `?/256`
/// when not known). Empty for a group without a bucket table.
fn bucket_cells(rows: &mut [Vec<String>], buckets: Option<&pb::BucketTable>) {
    for (i, row) in rows.iter_mut().enumerate() {
        let (count, moved) = match buckets {
            Some(b) => (
                b.per_member.get(i).map_or(String::new(), |c| c.to_string()),
                if i == 0 {
                    let m = b.moved.map_or("?".to_string(), |m| m.to_string());
                    format!("{m}/{}", b.size)
                } else {
                    String::new()
                },
            ),
            None => (String::new(), String::new()),
        };
        row.push(count);
        row.push(moved);
    }
}

/// Rows of one group: `prefix` on its first row only when given, `label` (the mode, or
/// `color N`), size, limit and delta likewise. DELTA is empty unless the agent reduced
/// the group to fit, then `1.0035 (from 858)`: oversubscription and requested size.
fn groups_table_rows(
    rows: &mut Vec<Vec<String>>,
    prefix: Option<&str>,
    label: &str,
    members: &[pb::Member],
    fit: Option<&pb::GroupFit>,
) {
    let size = fit.map_or_else(
        || members.iter().map(|m| u64::from(m.weight)).sum(),
        |f| f.size,
    );
    let limit = fit
        .and_then(|f| f.limit)
        .map_or_else(|| "-".to_string(), |l| l.to_string());
    let delta = match (fit.and_then(|f| f.delta), fit.and_then(|f| f.reduced_from)) {
        (Some(d), Some(from)) => format!("{d:.4} (from {from})"),
        (Some(d), None) => format!("{d:.4}"),
        _ => String::new(),
    };
    for (i, m) in members.iter().enumerate() {
        let first = i == 0;
        let once = |s: &str| if first { s.to_string() } else { String::new() };
        rows.push(vec![
            prefix.filter(|_| first).unwrap_or_default().to_string(),
            once(label),
            once(&size.to_string()),
            once(&limit),
            once(&delta),
            m.via.clone(),
            m.interface.clone(),
            m.next_hop.clone(),
            m.weight.to_string(),
            format!("{}", m.bandwidth_gbps),
            match (m.active, m.removed_reason.is_empty()) {
                (true, _) => "up".to_string(),
                (false, true) => "removed".to_string(),
                (false, false) => format!("removed: {}", m.removed_reason),
            },
            m.packets.to_string(),
            m.bytes.to_string(),
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table counts the prefixes accepted now (not the cumulative received) and
    /// marks a neighbor shut down or drained.
    #[test]
    fn neighbors_table_counts_accepted_and_marks_drained() {
        let n = pb::Neighbor {
            address: "10.0.1.2".into(),
            remote_as: 65100,
            state: "Established".into(),
            uptime_seconds: 5,
            interface: "e1".into(),
            bandwidth_gbps: 100.0,
            prefixes_received: 16,
            prefixes_accepted: 2,
            prefixes_advertised: 3,
            drained: true,
            ..Default::default()
        };
        let shut = pb::Neighbor {
            address: "10.0.2.2".into(),
            state: "Idle".into(),
            admin_down: true,
            last_error: "x".into(),
            ..n.clone()
        };
        let shut = pb::Neighbor {
            drained: false,
            ..shut
        };
        let out = neighbors_table(&[n, shut]);
        let lines: Vec<Vec<&str>> = out
            .lines()
            .map(|l| {
                l.split("  ")
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .collect();
        assert_eq!(
            lines,
            [
                vec![
                    "NEIGHBOR",
                    "AS",
                    "STATE",
                    "FOR",
                    "INTERFACE",
                    "GBPS",
                    "ACCEPTED",
                    "ADVERTISED",
                    "LAST ERROR"
                ],
                vec![
                    "10.0.1.2",
                    "65100",
                    "Established (drained)",
                    "5s",
                    "e1",
                    "100",
                    "2",
                    "3"
                ],
                vec![
                    "10.0.2.2",
                    "65100",
                    "Idle (shut down)",
                    "5s",
                    "e1",
                    "100",
                    "2",
                    "3",
                    "x"
                ],
            ]
        );
    }

    #[test]
    fn group_json_has_exactly_the_contract_keys() {
        let g = pb::Group {
            prefix: "198.18.0.0/16".into(),
            mode: "spray".into(),
            members: vec![pb::Member {
                via: "02:00:00:00:00:01".into(),
                interface: "eth1".into(),
                weight: 3,
                bandwidth_gbps: 100.0,
                packets: 7,
                bytes: 700,
                active: true,
                next_hop: String::new(),
                neighbor_mac: "02:00:00:00:00:01".into(),
                removed_reason: String::new(),
            }],
            colors: vec![],
            fit: Some(pb::GroupFit {
                size: 3,
                limit: Some(256),
                reduced_from: None,
                delta: None,
            }),
            buckets: None,
        };
        assert_eq!(
            group_json(&g),
            json!({"prefix": "198.18.0.0/16", "mode": "spray", "size": 3, "limit": 256,
                "reduced_from": null, "delta": null, "members": [
                {"via": "02:00:00:00:00:01", "interface": "eth1", "weight": 3,
                 "bandwidth_gbps": 100.0, "packets": 7}]})
        );
        let t = groups_table(std::slice::from_ref(&g));
        assert!(t.starts_with("PREFIX"), "{t}");
        assert!(t.contains("198.18.0.0/16  spray  3     256"), "{t}");

        // A DPF route: its color groups follow, with their own counters.
        let mut red = g.members[0].clone();
        red.packets = 5;
        let colored = pb::Group {
            colors: vec![pb::ColorGroup {
                color: 100,
                members: vec![red],
                fit: None,
            }],
            ..g
        };
        let v = group_json(&colored);
        assert_eq!(v["colors"][0]["color"], 100);
        assert_eq!(v["members"][0].get("active"), None);
        let mut out = colored.clone();
        out.members[0].active = false;
        assert_eq!(group_json(&out)["members"][0]["active"], false);
        assert_eq!(v["colors"][0]["members"][0]["packets"], 5);
        assert_eq!(
            v["colors"][0]["size"], 3,
            "no fit reported: the weights' sum"
        );
        assert_eq!(v["colors"][0]["limit"], Value::Null);
        let t = groups_table(&[colored]);
        assert!(t.contains("color 100"), "{t}");
    }

    /// A group the agent reduced: 858 requested (171:229:229:229), 3:4:4:4 installed
    /// under a limit of 16, delta 286/285.
    #[test]
    fn reduced_group_shows_size_limit_and_delta() {
        let member = |w: u32, bw: f64| pb::Member {
            via: format!("10.0.0.{w}"),
            interface: "eth1".into(),
            weight: w,
            bandwidth_gbps: bw,
            active: true,
            ..Default::default()
        };
        let g = pb::Group {
            prefix: "10.0.1.0/24".into(),
            mode: "spray".into(),
            members: vec![
                member(3, 10.6875),
                member(4, 14.3125),
                member(4, 14.3125),
                member(4, 14.3125),
            ],
            colors: vec![],
            fit: Some(pb::GroupFit {
                size: 15,
                limit: Some(16),
                reduced_from: Some(858),
                delta: Some(286.0 / 285.0),
            }),
            buckets: None,
        };
        let v = group_json(&g);
        assert_eq!(v["size"], 15);
        assert_eq!(v["limit"], 16);
        assert_eq!(v["reduced_from"], 858);
        assert!((v["delta"].as_f64().unwrap() - 1.003_508_771_9).abs() < 1e-9);
        let t = groups_table(&[g]);
        assert!(t.contains("15    16     1.0035 (from 858)"), "{t}");
    }

    /// A flow group's bucket table: buckets per member, moved at the last change.
    #[test]
    fn bucket_table_shows_per_member_and_moved() {
        let member = |via: &str| pb::Member {
            via: via.into(),
            interface: "eth1".into(),
            weight: 1,
            active: true,
            ..Default::default()
        };
        let g = pb::Group {
            prefix: "10.0.1.0/24".into(),
            mode: "flow".into(),
            members: vec![member("10.0.0.1"), member("10.0.0.2")],
            buckets: Some(pb::BucketTable {
                size: 256,
                per_member: vec![171, 85],
                moved: Some(43),
                assigned_by: "kernel".into(),
            }),
            ..Default::default()
        };
        let v = group_json(&g);
        assert_eq!(
            v["buckets"],
            json!({"size": 256, "per_member": [171, 85], "moved": 43, "assigned_by": "kernel"})
        );
        let t = groups_table(std::slice::from_ref(&g));
        let rows: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0][rows[0].len() - 2..], ["BUCKETS", "MOVED"]);
        assert_eq!(rows[1][rows[1].len() - 2..], ["171", "43/256"]);
        assert_eq!(rows[2].last(), Some(&"85"));
        let unknown = pb::Group {
            buckets: Some(pb::BucketTable {
                moved: None,
                ..g.buckets.clone().unwrap()
            }),
            ..g
        };
        assert!(groups_table(&[unknown]).contains("?/256"));
    }
}
