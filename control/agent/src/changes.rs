//! What changed in the agent's state, as the protocol tasks and actions report it for the
//! management API's `Watch` stream. Typed and free of protobuf: `mgmt::watch` translates
//! each change into the API's event (through `mgmt::views`), keeps the latest of each for
//! a new subscriber's snapshot and drops those that change nothing.

use crate::state::{NeighborStatus, RouteSource, RouteStatus};
use fare_dataplane::{ColorGroup, Group};
use ipnet::IpNet;
use std::net::IpAddr;

#[derive(Clone, Debug)]
pub enum Change {
    /// A neighbor's session (state, last error, administrative state).
    Session(NeighborStatus),
    /// A route as the RIB or the configuration holds it now.
    Route(RouteStatus),
    RouteWithdrawn(IpNet, RouteSource),
    /// A group as installed, with its per-color groups (DPF).
    Group {
        group: Group,
        colors: Vec<ColorGroup>,
    },
    GroupRemoved(IpNet),
    /// A neighbor's link bandwidth set at run time (None: back to the interface's).
    Bandwidth {
        neighbor: IpAddr,
        gbps: Option<f64>,
    },
    /// An ARN receiver's member change: removed, or its share of a flow's traffic.
    Arn {
        prefix: IpNet,
        via: String,
        removed: bool,
        share: Option<f64>,
    },
}

/// Reports the session of every neighbor (the hub drops those that did not change).
/// Under the state lock, as every publisher of state: two publishers cannot then send
/// what they read in the opposite order.
pub fn publish_sessions(ctx: &crate::AgentContext) {
    let state = ctx.state.read();
    for n in state.neighbors.values() {
        ctx.events.publish(Change::Session(n.clone()));
    }
}
