//! The agent side of the management API.

use super::{pb, views, MgmtError};
use crate::AgentContext;
use fare_dataplane::{GroupFit, GroupMode, GroupStatus, Member, MemberStatus};
use pb::management_server::{Management, ManagementServer};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};
use tracing::warn;

/// Binds the socket and serves until `ctx.shutdown` is cancelled.
pub async fn serve(
    listener: UnixListener,
    ctx: AgentContext,
) -> Result<tokio::task::JoinHandle<()>, MgmtError> {
    let shutdown = ctx.shutdown.clone();
    let service = ManagementServer::new(Service { ctx });
    Ok(tokio::spawn(async move {
        if let Err(e) = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown.cancelled())
            .await
        {
            warn!("management API stopped: {e}");
        }
    }))
}

/// Serves the API on `addr` with TLS and client certificates until `ctx.shutdown`.
pub async fn serve_tcp(
    addr: std::net::SocketAddr,
    tls: &crate::config::ManagementTls,
    ctx: AgentContext,
) -> Result<tokio::task::JoinHandle<()>, MgmtError> {
    let shutdown = ctx.shutdown.clone();
    let incoming = super::tls::incoming(addr, tls, shutdown.clone()).await?;
    let service = ManagementServer::new(Service { ctx });
    Ok(tokio::spawn(async move {
        if let Err(e) = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::ReceiverStream::new(incoming),
                shutdown.cancelled(),
            )
            .await
        {
            warn!("management API on TCP stopped: {e}");
        }
    }))
}

/// Err when another agent answers on `path`: the agent checks this before it opens a
/// data plane, so that a second agent of the same socket touches none of the first
/// one's objects.
pub async fn refuse_if_served(path: &Path) -> Result<(), MgmtError> {
    if path.exists() && UnixStream::connect(path).await.is_ok() {
        return Err(MgmtError::InUse(path.to_path_buf()));
    }
    Ok(())
}

/// Creates the parent directory, replaces a stale socket (refusing if another agent
/// answers on it), binds, and restricts the socket to its owner.
pub async fn bind(path: &Path) -> Result<UnixListener, MgmtError> {
    let io = |what: &'static str| {
        move |source| MgmtError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io("creating the directory of"))?;
    }
    refuse_if_served(path).await?;
    if path.exists() {
        std::fs::remove_file(path).map_err(io("removing stale socket"))?;
    }
    let listener = UnixListener::bind(path).map_err(io("binding"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io("setting permissions of"))?;
    Ok(listener)
}

struct Service {
    ctx: AgentContext,
}

impl Service {
    /// Every installed group with its counters and why ARN holds members out.
    async fn groups(&self) -> Result<Vec<pb::Group>, Status> {
        let groups = self
            .ctx
            .dataplane
            .groups()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let removed = self
            .ctx
            .state
            .read()
            .arn
            .as_ref()
            .map(|a| a.removed())
            .unwrap_or_default();
        let mut groups: Vec<pb::Group> = groups.iter().map(group_to_pb).collect();
        for r in &removed {
            let prefix = r.prefix.to_string();
            if let Some(m) = groups
                .iter_mut()
                .find(|g| g.prefix == prefix)
                .and_then(|g| g.members.get_mut(r.index))
            {
                m.removed_reason = r.reason();
            }
        }
        Ok(groups)
    }

    fn action_done(&self, address: &str) -> Result<Response<pb::NeighborActionResponse>, Status> {
        Ok(Response::new(pb::NeighborActionResponse {
            neighbor: Some(self.neighbor(address)?),
        }))
    }

    fn neighbor(&self, address: &str) -> Result<pb::Neighbor, Status> {
        let addr = parse_addr(address)?;
        let state = self.ctx.state.read();
        let n = state
            .neighbors
            .get(&addr)
            .ok_or_else(|| Status::not_found(format!("no configured neighbor {addr}")))?;
        Ok(views::neighbor(n))
    }
}

/// Exactly one of a neighbor address and an interface.
fn target_of(neighbor: &str, interface: String) -> Result<crate::BandwidthTarget, Status> {
    match (neighbor.is_empty(), interface.is_empty()) {
        (false, true) => Ok(crate::BandwidthTarget::Neighbor(parse_addr(neighbor)?)),
        (true, false) => Ok(crate::BandwidthTarget::Interface(interface)),
        _ => Err(Status::invalid_argument(
            "give exactly one of neighbor and interface",
        )),
    }
}

fn parse_addr(text: &str) -> Result<std::net::IpAddr, Status> {
    text.parse()
        .map_err(|_| Status::invalid_argument(format!("`{text}`: not an IP address")))
}

fn action_status(e: crate::actions::ActionError) -> Status {
    use crate::actions::ActionError as E;
    match e {
        E::NoNeighbor(_) | E::NoMatch(_) => Status::not_found(e.to_string()),
        E::NoSpeaker | E::Stopped => Status::failed_precondition(e.to_string()),
        E::MessageTooLong(_) => Status::invalid_argument(e.to_string()),
    }
}

#[tonic::async_trait]
impl Management for Service {
    type WatchStream = tokio_stream::wrappers::ReceiverStream<Result<pb::WatchEvent, Status>>;

    async fn watch(
        &self,
        _: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        tokio::spawn(super::watch::serve(
            self.ctx.events.clone(),
            tx,
            self.ctx.shutdown.clone(),
        ));
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(
            rx,
        )))
    }

    async fn get_neighbor(
        &self,
        request: Request<pb::GetNeighborRequest>,
    ) -> Result<Response<pb::Neighbor>, Status> {
        Ok(Response::new(self.neighbor(&request.into_inner().address)?))
    }

    async fn get_route(
        &self,
        request: Request<pb::GetRouteRequest>,
    ) -> Result<Response<pb::RouteDetail>, Status> {
        let text = request.into_inner().prefix;
        let prefix = super::queries::route_prefix(&self.ctx.state.read(), &text)?;
        let routes = super::queries::routes_of(&self.ctx.state.read(), prefix);
        let group = self
            .groups()
            .await?
            .into_iter()
            .find(|g| g.prefix == prefix.to_string());
        if routes.is_empty() && group.is_none() {
            return Err(Status::not_found(format!("no route for {prefix}")));
        }
        Ok(Response::new(pb::RouteDetail {
            prefix: prefix.to_string(),
            routes,
            group,
        }))
    }

    async fn explain_route(
        &self,
        request: Request<pb::ExplainRouteRequest>,
    ) -> Result<Response<pb::RouteExplanation>, Status> {
        let text = request.into_inner().prefix;
        let prefix = super::queries::route_prefix(&self.ctx.state.read(), &text)?;
        let e = crate::actions::explain(&self.ctx, prefix)
            .await
            .map_err(action_status)?
            .ok_or_else(|| Status::not_found(format!("no learned route for {prefix}")))?;
        let group = self
            .groups()
            .await?
            .into_iter()
            .find(|g| g.prefix == prefix.to_string());
        let state = self.ctx.state.read();
        Ok(Response::new(super::views::explanation(
            &e,
            &state.name,
            |a| state.neighbors.get(a).and_then(|n| n.interface.clone()),
            group,
        )))
    }

    async fn get_color(
        &self,
        request: Request<pb::GetColorRequest>,
    ) -> Result<Response<pb::ColorView>, Status> {
        let color = request.into_inner().color;
        let neighbors = {
            let state = self.ctx.state.read();
            state
                .neighbors
                .values()
                .filter(|n| n.color == Some(color))
                .map(views::neighbor)
                .collect()
        };
        let routes = self
            .groups()
            .await?
            .into_iter()
            .flat_map(|g| {
                let prefix = g.prefix;
                g.colors
                    .into_iter()
                    .filter(|c| c.color == color)
                    .map(move |c| pb::ColorRoute {
                        prefix: prefix.clone(),
                        members: c.members,
                        fit: c.fit,
                    })
            })
            .collect();
        Ok(Response::new(pb::ColorView {
            color,
            neighbors,
            routes,
        }))
    }

    async fn reload(
        &self,
        _: Request<pb::ReloadRequest>,
    ) -> Result<Response<pb::ReloadResponse>, Status> {
        use crate::reload::ReloadError;
        match self.ctx.reload.reload().await {
            Ok(o) => Ok(Response::new(pb::ReloadResponse {
                changed: o.changed,
                pending: o.pending,
            })),
            Err(e @ ReloadError::NoFile) => Err(Status::failed_precondition(e.to_string())),
            Err(e @ ReloadError::Invalid(_)) => Err(Status::invalid_argument(e.to_string())),
        }
    }

    async fn get_config(
        &self,
        _: Request<pb::GetConfigRequest>,
    ) -> Result<Response<pb::RunningConfig>, Status> {
        let yaml = serde_norway::to_string(&self.ctx.running.config().redacted())
            .map_err(|e| Status::internal(format!("configuration as YAML: {e}")))?;
        let changes = super::queries::run_time_changes(&self.ctx);
        Ok(Response::new(pb::RunningConfig { yaml, changes }))
    }

    async fn shutdown_neighbor(
        &self,
        request: Request<pb::ShutdownNeighborRequest>,
    ) -> Result<Response<pb::NeighborActionResponse>, Status> {
        let r = request.into_inner();
        let addr = parse_addr(&r.address)?;
        crate::actions::set_admin_state(&self.ctx, addr, Some(r.message))
            .await
            .map_err(action_status)?;
        self.action_done(&r.address)
    }

    async fn enable_neighbor(
        &self,
        request: Request<pb::NeighborRequest>,
    ) -> Result<Response<pb::NeighborActionResponse>, Status> {
        let r = request.into_inner();
        let addr = parse_addr(&r.address)?;
        crate::actions::set_admin_state(&self.ctx, addr, None)
            .await
            .map_err(action_status)?;
        self.action_done(&r.address)
    }

    async fn reset_neighbor(
        &self,
        request: Request<pb::NeighborRequest>,
    ) -> Result<Response<pb::NeighborActionResponse>, Status> {
        let r = request.into_inner();
        let addr = parse_addr(&r.address)?;
        crate::actions::soft_reset(&self.ctx, addr)
            .await
            .map_err(action_status)?;
        self.action_done(&r.address)
    }

    async fn drain(
        &self,
        request: Request<pb::DrainRequest>,
    ) -> Result<Response<pb::DrainResponse>, Status> {
        let r = request.into_inner();
        let target = target_of(&r.neighbor, r.interface)?;
        let matched = crate::actions::drain(&self.ctx, &target, !r.undo)
            .await
            .map_err(action_status)?;
        Ok(Response::new(pb::DrainResponse {
            neighbors: matched.iter().map(|a| a.to_string()).collect(),
        }))
    }

    async fn list_neighbors(
        &self,
        _: Request<pb::ListNeighborsRequest>,
    ) -> Result<Response<pb::ListNeighborsResponse>, Status> {
        let state = self.ctx.state.read();
        let neighbors = state.neighbors.values().map(views::neighbor).collect();
        Ok(Response::new(pb::ListNeighborsResponse { neighbors }))
    }

    async fn list_routes(
        &self,
        _: Request<pb::ListRoutesRequest>,
    ) -> Result<Response<pb::ListRoutesResponse>, Status> {
        let state = self.ctx.state.read();
        let routes = state.routes.values().map(views::route).collect();
        Ok(Response::new(pb::ListRoutesResponse { routes }))
    }

    async fn list_groups(
        &self,
        _: Request<pb::ListGroupsRequest>,
    ) -> Result<Response<pb::ListGroupsResponse>, Status> {
        Ok(Response::new(pb::ListGroupsResponse {
            groups: self.groups().await?,
        }))
    }

    async fn get_arn(
        &self,
        _: Request<pb::GetArnRequest>,
    ) -> Result<Response<pb::ArnState>, Status> {
        let Some(arn) = self.ctx.state.read().arn.clone() else {
            return Ok(Response::new(pb::ArnState::default()));
        };
        Ok(Response::new(arn_to_pb(&arn)))
    }

    async fn set_bandwidth(
        &self,
        request: Request<pb::SetBandwidthRequest>,
    ) -> Result<Response<pb::SetBandwidthResponse>, Status> {
        let r = request.into_inner();
        let target = target_of(&r.neighbor, r.interface)?;
        let set = crate::set_bandwidth(&self.ctx, &target, r.gbps)
            .await
            .map_err(|e| match e {
                crate::SetBandwidthError::Invalid(_) | crate::SetBandwidthError::NoMatch(_) => {
                    Status::invalid_argument(e.to_string())
                }
                _ => Status::failed_precondition(e.to_string()),
            })?;
        Ok(Response::new(pb::SetBandwidthResponse {
            neighbors: set
                .into_iter()
                .map(|(a, g)| pb::NeighborBandwidth {
                    address: a.to_string(),
                    bandwidth_gbps: g,
                })
                .collect(),
        }))
    }

    async fn get_info(
        &self,
        _: Request<pb::GetInfoRequest>,
    ) -> Result<Response<pb::AgentInfo>, Status> {
        let state = self.ctx.state.read();
        Ok(Response::new(pb::AgentInfo {
            name: state.name.clone(),
            router_id: state.router_id.to_string(),
            asn: state.asn,
            dataplane: state.dataplane.to_string(),
            uptime_seconds: state.started.elapsed().as_secs(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }))
    }
}

pub fn arn_to_pb(arn: &crate::arn_status::ArnStatus) -> pb::ArnState {
    let now = std::time::Instant::now();
    let counters = serde_json::to_value(arn.counters.snapshot())
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| v.as_u64().map(|n| (k, n)))
        .collect();
    pb::ArnState {
        enabled: true,
        udp_port: u32::from(arn.udp_port),
        counters,
        sent: (1..=4u8).map(|t| (u32::from(t), arn.sent.get(t))).collect(),
        removed: arn
            .removed()
            .iter()
            .map(|r| pb::ArnRemoval {
                prefix: r.prefix.to_string(),
                index: r.index as u32,
                sender: r.sender.to_string(),
                kinds: r
                    .causes
                    .iter()
                    .map(|c| match (c.failure, r.share_permille) {
                        (true, _) => "failure",
                        (false, None) => "congestion",
                        (false, Some(_)) => "shift",
                    })
                    .map(str::to_string)
                    .collect(),
                path_ids: r
                    .causes
                    .iter()
                    .map(|c| std::net::Ipv4Addr::from(c.path_id).to_string())
                    .collect(),
                metric: u32::from(r.metric),
                for_ms: now.saturating_duration_since(r.since).as_millis() as u64,
                expires_in_ms: r
                    .causes
                    .iter()
                    .map(|c| c.expires.saturating_duration_since(now).as_millis() as u64)
                    .max()
                    .unwrap_or(0),
                reason: r.reason(),
            })
            .collect(),
        monitored: arn.monitored(),
    }
}

/// One member with its counters as the management API shows it.
fn member_to_pb(m: &Member, status: MemberStatus) -> pb::Member {
    pb::Member {
        via: m.via.clone(),
        interface: m.interface.clone(),
        weight: m.weight,
        bandwidth_gbps: m.bandwidth_gbps,
        packets: status.packets,
        bytes: status.bytes,
        active: status.active,
        next_hop: m.next_hop.map(|a| a.to_string()).unwrap_or_default(),
        neighbor_mac: m.neighbor_mac.map(|a| a.to_string()).unwrap_or_default(),
        removed_reason: String::new(),
    }
}

fn fit_to_pb(fit: &Option<GroupFit>) -> Option<pb::GroupFit> {
    fit.as_ref().map(|f| pb::GroupFit {
        size: f.size,
        limit: f.limit,
        reduced_from: f.reduced.as_ref().map(|r| r.from_size),
        delta: f.reduced.as_ref().map(|r| r.delta),
    })
}

pub fn group_to_pb(g: &GroupStatus) -> pb::Group {
    pb::Group {
        prefix: g.group.prefix.to_string(),
        mode: match g.group.mode {
            GroupMode::Spray => "spray",
            GroupMode::Flow => "flow",
            GroupMode::Flowlet => "flowlet",
        }
        .to_string(),
        members: g
            .group
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| member_to_pb(m, g.members.get(i).cloned().unwrap_or_default()))
            .collect(),
        colors: g
            .colors
            .iter()
            .map(|c| pb::ColorGroup {
                color: c.color,
                members: c
                    .members
                    .iter()
                    .enumerate()
                    .map(|(i, m)| member_to_pb(m, c.status.get(i).cloned().unwrap_or_default()))
                    .collect(),
                fit: fit_to_pb(&c.fit),
            })
            .collect(),
        fit: fit_to_pb(&g.fit),
        buckets: g.buckets.as_ref().map(|b| pb::BucketTable {
            size: b.size,
            per_member: b.per_member.clone(),
            moved: b.moved,
            assigned_by: b.assigned_by.clone(),
        }),
    }
}
