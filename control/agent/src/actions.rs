//! Operational actions on the running BGP speaker (management API: `fare neighbor`,
//! `fare drain`): administrative shutdown and enable, soft reset, drain. Each is a
//! command to the speaker; the agent's own view (and the watch stream) follows.

use crate::changes::{self, Change};
use crate::{AgentContext, BandwidthTarget};
use fare_bgp::speaker::SpeakerCommand;
use std::net::IpAddr;
use tokio::sync::oneshot;
use tracing::info;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ActionError {
    #[error("no configured neighbor {0}")]
    NoNeighbor(IpAddr),
    #[error("no configured neighbor matches {0}")]
    NoMatch(BandwidthTarget),
    #[error("this agent runs no BGP speaker (no neighbors configured)")]
    NoSpeaker,
    #[error("the BGP speaker stopped")]
    Stopped,
    #[error(
        "the shutdown message is {0} octets; a Shutdown Communication carries at most \
         {max} (RFC 8203 as updated by RFC 9003)",
        max = MAX_SHUTDOWN_MESSAGE
    )]
    MessageTooLong(usize),
}

/// Longest Shutdown Communication, in octets of UTF-8 (its length is one octet).
pub const MAX_SHUTDOWN_MESSAGE: usize = 255;

/// Sends the command `make` builds and waits for the speaker's reply.
async fn ask<T>(
    ctx: &AgentContext,
    make: impl FnOnce(oneshot::Sender<T>) -> SpeakerCommand,
) -> Result<T, ActionError> {
    let (reply, answer) = oneshot::channel();
    tell(ctx, make(reply)).await?;
    answer.await.map_err(|_| ActionError::Stopped)
}

/// Cease / Administrative Shutdown with `message` (RFC 8203), then down until
/// [`enable_neighbor`] (`message` None).
pub async fn set_admin_state(
    ctx: &AgentContext,
    neighbor: IpAddr,
    message: Option<String>,
) -> Result<(), ActionError> {
    if let Some(len) = message.as_ref().map(String::len) {
        if len > MAX_SHUTDOWN_MESSAGE {
            return Err(ActionError::MessageTooLong(len));
        }
    }
    // The state first: the speaker reports the session down (and its routes go) as soon
    // as it has the command, and a watcher must see that report as the administrative one.
    let before = set_admin_down(ctx, neighbor, message.clone());
    let down = message.clone();
    let known = ask(ctx, |reply| SpeakerCommand::AdminState {
        neighbor,
        down,
        reply,
    })
    .await;
    if !matches!(known, Ok(true)) {
        set_admin_down(ctx, neighbor, before);
    }
    if !known? {
        return Err(ActionError::NoNeighbor(neighbor));
    }
    info!(%neighbor, shutdown = ?message, "neighbor administrative state changed");
    changes::publish_sessions(ctx);
    Ok(())
}

/// Sets `neighbor`'s administrative shutdown message in the state; returns the one before.
fn set_admin_down(ctx: &AgentContext, neighbor: IpAddr, message: Option<String>) -> Option<String> {
    let mut state = ctx.state.write();
    let n = state.neighbors.get_mut(&neighbor)?;
    std::mem::replace(&mut n.admin_down, message)
}

/// ROUTE-REFRESH in and every route advertised out again.
pub async fn soft_reset(ctx: &AgentContext, neighbor: IpAddr) -> Result<(), ActionError> {
    let known = ask(ctx, |reply| SpeakerCommand::SoftReset { neighbor, reply }).await?;
    if !known {
        return Err(ActionError::NoNeighbor(neighbor));
    }
    Ok(())
}

/// Drains (or undrains) the target's links; returns the neighbors matched.
pub async fn drain(
    ctx: &AgentContext,
    target: &BandwidthTarget,
    drained: bool,
) -> Result<Vec<IpAddr>, ActionError> {
    let (neighbor, interface) = match target {
        BandwidthTarget::Neighbor(a) => (Some(*a), None),
        BandwidthTarget::Interface(i) => (None, Some(i.clone())),
    };
    let matched = ask(ctx, |reply| SpeakerCommand::Drain {
        neighbor,
        interface,
        drained,
        reply,
    })
    .await?;
    if matched.is_empty() {
        return Err(ActionError::NoMatch(target.clone()));
    }
    info!(%target, drained, "drain changed");
    {
        let mut state = ctx.state.write();
        for a in &matched {
            if let Some(n) = state.neighbors.get_mut(a) {
                n.drained = drained;
            }
        }
    }
    changes::publish_sessions(ctx);
    Ok(matched)
}

/// Why `prefix` has its group: the speaker's decision with its inputs (None: no learned
/// route).
pub async fn explain(
    ctx: &AgentContext,
    prefix: ipnet::IpNet,
) -> Result<Option<fare_bgp::speaker::RouteExplain>, ActionError> {
    ask(ctx, |reply| SpeakerCommand::Explain { prefix, reply }).await
}

/// Originates exactly `prefixes` from now on (SIGHUP): the running speaker advertises the
/// new ones and withdraws the others without touching a session, and the agent's routes
/// follow. Returns (added, removed); without a speaker only the routes change.
pub async fn set_prefixes(
    ctx: &AgentContext,
    old: &[ipnet::IpNet],
    prefixes: &[ipnet::IpNet],
) -> Result<(Vec<ipnet::IpNet>, Vec<ipnet::IpNet>), ActionError> {
    use crate::state::{RoutePath, RouteSource, RouteStatus};
    let (added, removed) = match ctx.speaker.get() {
        Some(_) => {
            let list = prefixes.to_vec();
            ask(ctx, |reply| SpeakerCommand::SetPrefixes {
                prefixes: list,
                reply,
            })
            .await?
        }
        None => (
            prefixes
                .iter()
                .filter(|p| !old.contains(p))
                .copied()
                .collect(),
            old.iter()
                .filter(|p| !prefixes.contains(p))
                .copied()
                .collect(),
        ),
    };
    let mut state = ctx.state.write();
    for p in &removed {
        state.remove_route(*p, RouteSource::Local);
        ctx.events
            .publish(Change::RouteWithdrawn(*p, RouteSource::Local));
    }
    for p in &added {
        let route = RouteStatus {
            prefix: *p,
            source: RouteSource::Local,
            paths: vec![RoutePath {
                selected: true,
                ..Default::default()
            }],
        };
        ctx.events.publish(Change::Route(route.clone()));
        state.set_route(route);
    }
    info!(?added, ?removed, "originated prefixes changed");
    Ok((added, removed))
}

/// Removes a neighbor from the running speaker (SIGHUP, the neighbor gone from the file):
/// Cease / Peer De-configured, its routes withdrawn, no other session touched; it leaves
/// the agent's views.
pub async fn remove_neighbor(ctx: &AgentContext, neighbor: IpAddr) -> Result<(), ActionError> {
    let known = ask(ctx, |reply| SpeakerCommand::RemoveNeighbor {
        neighbor,
        reply,
    })
    .await?;
    if !known {
        return Err(ActionError::NoNeighbor(neighbor));
    }
    info!(%neighbor, "neighbor removed");
    ctx.state.write().neighbors.remove(&neighbor);
    changes::publish_sessions(ctx);
    Ok(())
}

/// Adds a neighbor to the running speaker (SIGHUP, a neighbor new in the file): its
/// session starts, no other is touched, and it joins the agent's views. Err: why the
/// running agent cannot (it then needs a restart).
pub async fn add_neighbor(
    ctx: &AgentContext,
    n: &crate::config::NeighborConfig,
) -> Result<(), String> {
    if ctx.config.arn.is_some() {
        return Err("the ARN fast path is built from the neighbors at start".into());
    }
    if n.color.is_some() {
        return Err("DPF session colors are set up at start".into());
    }
    if let Some(why) = crate::backend::missing_link_local_zone(n) {
        return Err(why);
    }
    let spec = Box::new(crate::bgp_task::neighbor_spec(n));
    match ask(ctx, |reply| SpeakerCommand::AddNeighbor { spec, reply }).await {
        Ok(Ok(())) => {}
        Ok(Err(why)) => return Err(why),
        Err(e) => return Err(e.to_string()),
    }
    info!(neighbor = %n.address, "neighbor added");
    let status = crate::state::NeighborStatus::configured(n, std::time::Instant::now());
    ctx.state.write().neighbors.insert(n.address, status);
    changes::publish_sessions(ctx);
    Ok(())
}

/// Changes a neighbor of the running speaker (SIGHUP, the neighbor changed in the file):
/// a changed session parameter resets that session only (Cease / Other Configuration
/// Change); a policy change keeps it. Err: why the running agent cannot (it then needs a
/// restart).
pub async fn replace_neighbor(
    ctx: &AgentContext,
    old: &crate::config::NeighborConfig,
    n: &crate::config::NeighborConfig,
) -> Result<fare_bgp::speaker::Replaced, String> {
    if ctx.config.arn.is_some() && old.interface != n.interface {
        return Err("the ARN fast path is built from the neighbors' interfaces at start".into());
    }
    if old.color != n.color {
        return Err("DPF session colors are set up at start".into());
    }
    if let Some(why) = crate::backend::missing_link_local_zone(n) {
        return Err(why);
    }
    let spec = Box::new(crate::bgp_task::neighbor_spec(n));
    let replaced = match ask(ctx, |reply| SpeakerCommand::ReplaceNeighbor { spec, reply }).await {
        Ok(Ok(r)) => r,
        Ok(Err(why)) => return Err(why),
        Err(e) => return Err(e.to_string()),
    };
    info!(neighbor = %n.address, ?replaced, "neighbor changed");
    {
        let mut state = ctx.state.write();
        let now = std::time::Instant::now();
        let fresh = crate::state::NeighborStatus::configured(n, now);
        match state.neighbors.get_mut(&n.address) {
            Some(s) if replaced == fare_bgp::speaker::Replaced::Policy => {
                s.interface = fresh.interface;
                s.bandwidth_gbps = fresh.bandwidth_gbps;
            }
            _ => {
                state.neighbors.insert(n.address, fresh);
            }
        }
    }
    changes::publish_sessions(ctx);
    Ok(replaced)
}

/// Sends a command that has no answer.
async fn tell(ctx: &AgentContext, command: SpeakerCommand) -> Result<(), ActionError> {
    let commands = ctx.speaker.get().ok_or(ActionError::NoSpeaker)?;
    commands
        .send(command)
        .await
        .map_err(|_| ActionError::Stopped)
}

/// New session timers (SIGHUP): every neighbor proposes the new hold time in its next
/// OPEN and retries with the new delays; no running session is reset.
pub async fn set_timers(
    ctx: &AgentContext,
    bgp: &crate::config::BgpConfig,
) -> Result<(), ActionError> {
    tell(
        ctx,
        SpeakerCommand::SetTimers {
            hold_time: bgp.hold_time,
            connect_retry: std::time::Duration::from_millis(bgp.connect_retry_ms),
            connect_retry_max: std::time::Duration::from_millis(bgp.connect_retry_max_ms),
        },
    )
    .await?;
    info!(
        hold_time = bgp.hold_time,
        connect_retry_ms = bgp.connect_retry_ms,
        "session timers changed"
    );
    Ok(())
}

/// A new group mode (SIGHUP): every group is installed again with it.
pub async fn set_group_mode(
    ctx: &AgentContext,
    mode: fare_dataplane::GroupMode,
) -> Result<(), ActionError> {
    tell(ctx, SpeakerCommand::SetGroupMode(mode)).await
}

/// Installs the `static:` group `config` (make-before-break over one already there) and
/// records it as a route.
pub async fn install_static(
    ctx: &AgentContext,
    config: &crate::config::StaticGroup,
) -> Result<(), crate::dataplane_task::HandleError> {
    let group = crate::statics::group_of(config);
    ctx.dataplane.install(group.clone()).await?;
    ctx.events.publish(Change::Group {
        group: group.clone(),
        colors: vec![],
    });
    let route = crate::state::RouteStatus {
        prefix: group.prefix,
        source: crate::state::RouteSource::Static,
        paths: group
            .members
            .iter()
            .map(|m| crate::state::RoutePath {
                next_hop: m.next_hop,
                selected: true,
                ..Default::default()
            })
            .collect(),
    };
    ctx.events.publish(Change::Route(route.clone()));
    ctx.state.write().set_route(route);
    Ok(())
}

/// Removes the `static:` group of `prefix` and its route.
pub async fn remove_static(
    ctx: &AgentContext,
    prefix: ipnet::IpNet,
) -> Result<(), crate::dataplane_task::HandleError> {
    ctx.dataplane.remove(prefix).await?;
    ctx.events.publish(Change::GroupRemoved(prefix));
    let source = crate::state::RouteSource::Static;
    ctx.state.write().remove_route(prefix, source);
    ctx.events.publish(Change::RouteWithdrawn(prefix, source));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{AgentState, SharedState};
    use std::sync::Arc;

    /// A context with one configured neighbor and a speaker that answers `AdminState` with
    /// `known`, after noting the state's administrative message at the time it was asked.
    async fn context(known: bool) -> (AgentContext, tokio::task::JoinHandle<Vec<Option<String>>>) {
        let config: crate::config::AgentConfig = fare_model::yamlfile::parse(
            std::path::Path::new("a.yaml"),
            "name: l1\nrouter_id: 10.0.0.1\nasn: 65001\nneighbors:\n  - {address: 10.1.0.2, remote_as: 65100}\n",
        )
        .unwrap();
        let config = Arc::new(config);
        let backend = Box::new(fare_dataplane::NullDataplane::default());
        let (dataplane, _task) = crate::dataplane_task::spawn(backend);
        let state = SharedState::new(AgentState::from_config(&config, "none"));
        let (commands, mut asked) = tokio::sync::mpsc::channel(4);
        let ctx = AgentContext {
            config: config.clone(),
            state,
            dataplane,
            shutdown: Default::default(),
            speaker: Default::default(),
            events: Default::default(),
            running: crate::reload::Running::new(config),
            reload: crate::reload::Trigger::new().0,
        };
        ctx.speaker.set(commands);
        let seen = ctx.state.clone();
        let speaker = tokio::spawn(async move {
            let mut at_ask = vec![];
            while let Some(cmd) = asked.recv().await {
                if let SpeakerCommand::AdminState {
                    neighbor, reply, ..
                } = cmd
                {
                    at_ask.push(seen.read().neighbors[&neighbor].admin_down.clone());
                    let _ = reply.send(known);
                }
            }
            at_ask
        });
        (ctx, speaker)
    }

    /// The speaker reports the session down as soon as it has the command, so the state
    /// must already say why: a watcher's Idle event then carries `admin_down`.
    #[tokio::test]
    async fn admin_state_is_in_the_state_before_the_speaker_is_asked() {
        let (ctx, speaker) = context(true).await;
        let peer: IpAddr = "10.1.0.2".parse().unwrap();
        set_admin_state(&ctx, peer, Some("maintenance".into()))
            .await
            .unwrap();
        set_admin_state(&ctx, peer, None).await.unwrap();
        drop(ctx);
        let at_ask = speaker.await.unwrap();
        assert_eq!(at_ask, vec![Some("maintenance".to_string()), None]);
    }

    #[tokio::test]
    async fn a_refused_admin_state_leaves_the_state_as_it_was() {
        let (ctx, speaker) = context(false).await;
        let peer: IpAddr = "10.1.0.2".parse().unwrap();
        let err = set_admin_state(&ctx, peer, Some("maintenance".into())).await;
        assert!(
            matches!(err, Err(ActionError::NoNeighbor(p)) if p == peer),
            "{err:?}"
        );
        assert_eq!(ctx.state.read().neighbors[&peer].admin_down, None);
        drop(ctx);
        speaker.await.unwrap();
    }
}
