//! Operational actions on the running BGP speaker (management API: `fare neighbor`,
//! `fare drain`): administrative shutdown and enable, soft reset, drain. Each is a
//! command to the speaker; the agent's own view (and the watch stream) follows.

use crate::mgmt::views;
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
}

/// Sends the command `make` builds and waits for the speaker's reply.
async fn ask<T>(
    ctx: &AgentContext,
    make: impl FnOnce(oneshot::Sender<T>) -> SpeakerCommand,
) -> Result<T, ActionError> {
    let commands = ctx.speaker.get().ok_or(ActionError::NoSpeaker)?;
    let (reply, answer) = oneshot::channel();
    commands
        .send(make(reply))
        .await
        .map_err(|_| ActionError::Stopped)?;
    answer.await.map_err(|_| ActionError::Stopped)
}

/// Cease / Administrative Shutdown with `message` (RFC 8203), then down until
/// [`enable_neighbor`] (`message` None).
pub async fn set_admin_state(
    ctx: &AgentContext,
    neighbor: IpAddr,
    message: Option<String>,
) -> Result<(), ActionError> {
    let down = message.clone();
    let known = ask(ctx, |reply| SpeakerCommand::AdminState {
        neighbor,
        down,
        reply,
    })
    .await?;
    if !known {
        return Err(ActionError::NoNeighbor(neighbor));
    }
    info!(%neighbor, shutdown = ?message, "neighbor administrative state changed");
    if let Some(n) = ctx.state.write().neighbors.get_mut(&neighbor) {
        n.admin_down = message;
    }
    views::publish_sessions(ctx);
    Ok(())
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
    views::publish_sessions(ctx);
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
