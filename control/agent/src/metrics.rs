//! Prometheus metrics on an opt-in HTTP listener (`management.metrics: ADDR`).
//!
//! The text exposition format is written by hand: a handful of gauges and counters
//! read from the shared state and the data plane at scrape time, so nothing has to be
//! kept in sync. Every path answers with the metrics (`/metrics` by convention).

use super::state::{AgentState, RouteSource, SessionState};
use super::AgentContext;
use fare_dataplane::GroupStatus;
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use tokio::net::TcpListener;
use tracing::debug;

/// Binds `addr` and serves until `ctx.shutdown` is cancelled.
pub async fn serve(
    addr: SocketAddr,
    ctx: AgentContext,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    Ok(tokio::spawn(async move {
        loop {
            let (stream, peer) = tokio::select! {
                _ = ctx.shutdown.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => { debug!("metrics accept: {e}"); continue; }
                },
            };
            let ctx = ctx.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |_req: Request<hyper::body::Incoming>| {
                        let ctx = ctx.clone();
                        async move {
                            let body = scrape(&ctx).await;
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .header(
                                        "content-type",
                                        "text/plain; version=0.0.4; charset=utf-8",
                                    )
                                    .body(http_body_util::Full::new(Bytes::from(body)))
                                    .unwrap_or_default(),
                            )
                        }
                    });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    debug!(%peer, "metrics connection: {e}");
                }
            });
        }
    }))
}

/// One scrape: state snapshot + data plane groups.
pub async fn scrape(ctx: &AgentContext) -> String {
    let groups = ctx.dataplane.groups().await.unwrap_or_default();
    let stats = ctx.dataplane.stats();
    let ops = [
        ("install", stats.installs.load(Ordering::Relaxed)),
        ("remove", stats.removes.load(Ordering::Relaxed)),
        ("member_state", stats.member_changes.load(Ordering::Relaxed)),
        ("error", stats.errors.load(Ordering::Relaxed)),
    ];
    let state = ctx.state.read();
    render(&state, &groups, &ops)
}

/// The exposition text (separate from I/O so it is unit-tested).
pub fn render(state: &AgentState, groups: &[GroupStatus], ops: &[(&str, u64)]) -> String {
    let mut out = String::new();
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };

    family(&mut out, "fare_info", "gauge", "Agent identity (value 1).");
    let _ = writeln!(
        out,
        "fare_info{{name=\"{}\",router_id=\"{}\",asn=\"{}\",dataplane=\"{}\"}} 1",
        esc(&state.name),
        state.router_id,
        state.asn,
        state.dataplane
    );
    family(
        &mut out,
        "fare_uptime_seconds",
        "gauge",
        "Seconds since the agent started.",
    );
    let _ = writeln!(
        out,
        "fare_uptime_seconds {}",
        state.started.elapsed().as_secs()
    );

    family(
        &mut out,
        "fare_bgp_sessions",
        "gauge",
        "BGP sessions per state.",
    );
    for s in SessionState::ALL {
        let count = state.neighbors.values().filter(|n| n.state == s).count();
        let _ = writeln!(out, "fare_bgp_sessions{{state=\"{s}\"}} {count}");
    }
    type NeighborValue = fn(&super::state::NeighborStatus) -> u64;
    let neighbor_families: [(&str, &str, &str, NeighborValue); 4] = [
        (
            "fare_bgp_neighbor_up",
            "gauge",
            "1 when the session is Established.",
            |nb| u64::from(nb.state == SessionState::Established),
        ),
        (
            "fare_bgp_updates_received_total",
            "counter",
            "UPDATE messages received.",
            |nb| nb.updates_received,
        ),
        (
            "fare_bgp_updates_sent_total",
            "counter",
            "UPDATE messages sent.",
            |nb| nb.updates_sent,
        ),
        (
            "fare_bgp_malformed_updates_total",
            "counter",
            "UPDATEs with a malformed attribute handled per RFC 7606 (discard, treat-as-withdraw).",
            |nb| nb.malformed_updates,
        ),
    ];
    for (name, kind, help, value) in neighbor_families {
        family(&mut out, name, kind, help);
        for nb in state.neighbors.values() {
            let _ = writeln!(out, "{name}{{neighbor=\"{}\"}} {}", nb.address, value(nb));
        }
    }

    family(
        &mut out,
        "fare_routes",
        "gauge",
        "Routes known, per source.",
    );
    let mut per_source: BTreeMap<RouteSource, usize> = BTreeMap::new();
    for (_, source) in state.routes.keys() {
        *per_source.entry(*source).or_default() += 1;
    }
    for source in [RouteSource::Bgp, RouteSource::Static, RouteSource::Local] {
        let count = per_source.get(&source).copied().unwrap_or(0);
        let _ = writeln!(out, "fare_routes{{source=\"{source}\"}} {count}");
    }

    family(
        &mut out,
        "fare_groups",
        "gauge",
        "Groups installed in the data plane.",
    );
    let _ = writeln!(out, "fare_groups {}", groups.len());
    family(
        &mut out,
        "fare_group_members",
        "gauge",
        "Members per group.",
    );
    for g in groups {
        let _ = writeln!(
            out,
            "fare_group_members{{prefix=\"{}\"}} {}",
            g.group.prefix,
            g.group.members.len()
        );
    }
    let member_families = [
        (
            "fare_member_packets_total",
            "counter",
            "Packets sent through the member.",
        ),
        (
            "fare_member_bytes_total",
            "counter",
            "Bytes sent through the member.",
        ),
        (
            "fare_member_weight",
            "gauge",
            "Weight of the member in its group.",
        ),
        (
            "fare_member_active",
            "gauge",
            "1 unless the member is removed (ARN, port down).",
        ),
    ];
    for (i, (name, kind, help)) in member_families.iter().enumerate() {
        family(&mut out, name, kind, help);
        for g in groups {
            for (m, s) in g.group.members.iter().zip(&g.members) {
                let value = match i {
                    0 => s.packets,
                    1 => s.bytes,
                    2 => u64::from(m.weight),
                    _ => u64::from(s.active),
                };
                let _ = writeln!(
                    out,
                    "{name}{{prefix=\"{}\",via=\"{}\",interface=\"{}\"}} {value}",
                    g.group.prefix,
                    esc(&m.via),
                    esc(&m.interface)
                );
            }
        }
    }
    family(
        &mut out,
        "fare_dataplane_operations_total",
        "counter",
        "Data plane operations by kind (error = failed operations).",
    );
    for (op, count) in ops {
        let _ = writeln!(
            out,
            "fare_dataplane_operations_total{{op=\"{op}\"}} {count}"
        );
    }
    out
}

/// Label values escape backslash, quote and newline.
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AgentConfig;
    use fare_dataplane::{Group, GroupMode, Member, MemberStatus};

    #[test]
    fn renders_sessions_routes_and_members() {
        let config: AgentConfig = fare_model::yamlfile::parse(
            std::path::Path::new("a.yaml"),
            "name: l1\nrouter_id: 10.0.0.1\nasn: 65001\nprefixes: [192.0.2.0/24]\nneighbors:\n  - {address: 10.1.0.2, remote_as: 65100}\n",
        )
        .unwrap();
        let mut state = AgentState::from_config(&config, "none");
        state.set_neighbor_state("10.1.0.2".parse().unwrap(), SessionState::Established, None);
        let groups = vec![GroupStatus {
            group: Group {
                prefix: "198.18.0.0/16".parse().unwrap(),
                mode: GroupMode::Spray,
                members: vec![Member {
                    via: "02:00:00:00:00:01".into(),
                    interface: "eth1".into(),
                    next_hop: None,
                    neighbor_mac: None,
                    weight: 3,
                    bandwidth_gbps: 100.0,
                }],
            },
            members: vec![MemberStatus {
                packets: 42,
                bytes: 4200,
                active: true,
            }],
            colors: Vec::new(),
            fit: None,
        }];
        let text = render(&state, &groups, &[("install", 1)]);
        for line in [
            "fare_bgp_sessions{state=\"Established\"} 1",
            "fare_bgp_neighbor_up{neighbor=\"10.1.0.2\"} 1",
            "fare_routes{source=\"local\"} 1",
            "fare_groups 1",
            "fare_member_packets_total{prefix=\"198.18.0.0/16\",via=\"02:00:00:00:00:01\",interface=\"eth1\"} 42",
            "fare_member_weight{prefix=\"198.18.0.0/16\",via=\"02:00:00:00:00:01\",interface=\"eth1\"} 3",
            "fare_dataplane_operations_total{op=\"install\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        // Every sample line belongs to a declared family.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let name = l.split(['{', ' ']).next().unwrap();
            assert!(text.contains(&format!("# TYPE {name} ")), "{l}");
        }
    }
}
