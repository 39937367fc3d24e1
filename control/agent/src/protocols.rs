//! Where the routing protocols plug into the agent.
//!
//! [`spawn`] starts every protocol the configuration asks for as a task of the agent's
//! `JoinSet`. A protocol gets an [`AgentContext`](super::AgentContext) and must return
//! when `ctx.shutdown` is cancelled. BGP and ARN add their one line each here.

use super::AgentContext;
use tokio::task::JoinSet;

pub use super::protocol_error::{ProtocolError, ProtocolResult};

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
