//! The BGP speaker inside `fare agent`: builds the speaker from the agent configuration
//! and forwards what it produces — groups to the data plane task, neighbors and routes to
//! the shared state behind `fare show` and the metrics.

use crate::changes::{self, Change};
use crate::config::AgentConfig;
use crate::protocol_error::{ProtocolError, ProtocolResult};
use crate::state::{RoutePath, RouteSource, RouteStatus};
use crate::AgentContext;
use fare_bgp::socket::Protection;
use fare_bgp::speaker::{self, NeighborSpec, SpeakerCommand, SpeakerConfig, SpeakerEvent};
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::warn;

/// The speaker configuration an agent configuration asks for.
pub fn speaker_config(c: &AgentConfig) -> SpeakerConfig {
    let b = &c.bgp;
    SpeakerConfig {
        router_id: c.router_id,
        asn: c.asn,
        port: b.port,
        listen: b.listen,
        listen_addresses: Vec::new(),
        hold_time: b.hold_time,
        connect_retry: Duration::from_millis(b.connect_retry_ms),
        connect_retry_max: Duration::from_millis(b.connect_retry_max_ms),
        link_poll: Duration::from_millis(b.link_poll_ms),
        policy: fare_bgp::fare::Policy {
            mode: c.fare.mode,
            role: c.fare.role,
            subtype: c.fare.community_subtype,
            fib_suppress_subtype: c.fare.fib_suppress_subtype,
            upa_subtype: c.fare.upa_subtype,
            max_group_size: c.fare.max_group_size,
            draft: c.fare.draft_options(),
            parallel: c.fare.parallel_links,
            encoding: c.fare.bandwidth_encoding,
        },
        group_mode: c.fare.group_mode,
        neighbors: c.neighbors.iter().map(neighbor_spec).collect(),
        prefixes: c.prefixes.clone(),
        orf_wait: Duration::from_millis(b.orf_wait_ms),
        route_events: true,
        // Validated when the configuration was loaded.
        dpf: c
            .dpf
            .as_ref()
            .and_then(|d| fare_bgp::dpf::Dpf::from_config(d).ok())
            .unwrap_or_default(),
    }
}

/// The speaker's view of one configured neighbor.
pub fn neighbor_spec(n: &crate::config::NeighborConfig) -> NeighborSpec {
    NeighborSpec {
        address: n.address,
        remote_as: n.remote_as,
        interface: n.interface.clone(),
        bandwidth_gbps: n.bandwidth_gbps,
        passive: n.passive,
        local_address: n.local_address,
        protection: Protection {
            gtsm: n.gtsm,
            md5_key: n.md5_password.clone(),
        },
        role: n.role,
        color: n.color,
        orf_receive: n.orf_receive,
        orf_send: n.orf_send.clone(),
        fib_suppress: n.fib_suppress,
        upa_hosts: n.upa_hosts.clone(),
        summary_only: n.summary_only,
        link_bandwidth: n.link_bandwidth,
        link_bandwidth_transitive: n.link_bandwidth_transitive,
    }
}

/// Runs the speaker until `ctx.shutdown`.
pub async fn run(ctx: AgentContext) -> ProtocolResult {
    let (tx, mut rx) = mpsc::channel(4096);
    let handle = speaker::start(speaker_config(&ctx.config), tx)
        .await
        .map_err(|source| ProtocolError::BgpListener {
            port: ctx.config.bgp.port,
            source,
        })?;
    ctx.speaker.set(handle.commands.clone());
    let mut sync = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            ev = rx.recv() => {
                let Some(ev) = ev else { return Err(ProtocolError::SpeakerStopped) };
                apply(&ctx, ev).await;
            }
            _ = sync.tick() => {
                // Session states and counters change inside the neighbor tasks.
                let list = handle.neighbors.lock().map(|l| l.clone()).unwrap_or_default();
                let mut state = ctx.state.write();
                for n in &list {
                    let Ok(s) = n.lock() else { continue };
                    state.update_neighbor(&s);
                }
                drop(state);
                changes::publish_sessions(&ctx);
            }
            _ = ctx.shutdown.cancelled() => {
                let _ = handle.commands.send(SpeakerCommand::Shutdown).await;
                return Ok(());
            }
        }
    }
}

async fn apply(ctx: &AgentContext, ev: SpeakerEvent) {
    match ev {
        SpeakerEvent::Groups(runs) => {
            for (prefix, group) in runs.iter().flat_map(|r| r.groups()) {
                let (result, event) = match group {
                    Some(g) => {
                        let event = Change::Group {
                            group: g.clone(),
                            colors: vec![],
                        };
                        (ctx.dataplane.install(g).await, event)
                    }
                    None => (
                        ctx.dataplane.remove(prefix).await,
                        Change::GroupRemoved(prefix),
                    ),
                };
                match result {
                    Ok(()) => {
                        ctx.events.publish(event);
                    }
                    Err(e) => warn!(%prefix, "data plane: {e}"),
                }
            }
        }
        SpeakerEvent::ColoredGroup { group, colors } => {
            let prefix = group.prefix;
            let event = Change::Group {
                group: group.clone(),
                colors: colors.clone(),
            };
            match ctx.dataplane.install_colored(group, colors).await {
                Ok(()) => {
                    ctx.events.publish(event);
                }
                Err(e) => warn!(%prefix, "data plane: {e}"),
            }
        }
        SpeakerEvent::Neighbor(s) => {
            ctx.state.write().update_neighbor(&s);
            changes::publish_sessions(ctx);
        }
        SpeakerEvent::Route { prefix, route } => {
            let mut state = ctx.state.write();
            match route {
                Some(r) if !r.local => {
                    let route = RouteStatus {
                        prefix,
                        source: RouteSource::Bgp,
                        paths: r
                            .paths
                            .into_iter()
                            .map(|p| RoutePath {
                                next_hop: p.next_hop,
                                neighbor: Some(p.neighbor),
                                as_path: p.as_path,
                                path_bandwidth_gbps: p.path_bandwidth_gbps,
                                received_gbps: p.received_gbps,
                                selected: true,
                            })
                            .collect(),
                    };
                    ctx.events.publish(Change::Route(route.clone()));
                    state.set_route(route);
                }
                Some(_) => {}
                None => {
                    state.remove_route(prefix, RouteSource::Bgp);
                    ctx.events
                        .publish(Change::RouteWithdrawn(prefix, RouteSource::Bgp));
                }
            }
        }
    }
}
