//! Where the routing protocols plug into the agent.
//!
//! [`spawn`] starts every protocol the configuration asks for as a task of the agent's
//! `JoinSet`. A protocol gets an [`AgentContext`](super::AgentContext) and must return
//! when `ctx.shutdown` is cancelled. BGP and ARN add their one line each here.

use super::AgentContext;
use tokio::task::JoinSet;

/// What a protocol task returns: `Err` is logged and stops the agent (exit code 1).
pub type ProtocolResult = Result<(), ProtocolError>;

/// Why a protocol task stopped the agent.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("BGP listener on port {port}: {source}")]
    BgpListener {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("speaker stopped")]
    SpeakerStopped,
    #[error(transparent)]
    ArnSocket(#[from] fare_arn::transport::TransportError),
    #[error("ARN multicast: {0}")]
    ArnMulticast(#[source] std::io::Error),
    #[error("ARN monitor: the XDP program's queues: {0:#}")]
    ArnQueues(#[source] anyhow::Error),
    #[error("ARN monitor: {0}")]
    ArnMonitor(#[source] std::io::Error),
}

/// Starts the protocol tasks; true when one of them is the BGP speaker.
pub fn spawn(ctx: &AgentContext, tasks: &mut JoinSet<(&'static str, ProtocolResult)>) -> bool {
    let bgp = !ctx.config.neighbors.is_empty() || !ctx.config.prefixes.is_empty();
    if bgp {
        let c = ctx.clone();
        tasks.spawn(async move { ("bgp", crate::bgp_task::run(c).await) });
    }
    if ctx.config.arn.is_some() {
        let c = ctx.clone();
        tasks.spawn(async move { ("arn", crate::arn_task::run(c).await) });
    }
    bgp
}
