//! Adaptive Routing Notifications (draft-wh-rtgwg-adaptive-routing-arn): codec, monitor, sender/receiver.
//!
//! - `codec`: message types and the wire format (shared bit for bit with the XDP and P4
//!   data planes; the layout is documented there and in docs/CODEPOINTS.md).
//! - `transport`: UDP socket with TTL 255 / DSCP CS6 out, TTL and interface reporting in.
//! - `config`: the `arn:` block of the agent configuration.
//! - `monitor`: qdisc backlog + link state -> Types 1-4, and the sender to upstream neighbors.
//! - `agent`: the ARN task of `fare agent` (receiver on the data plane handle, monitor, status).
//! - `receiver`: admission, (sender, Path ID) -> members, removal/restore, timeout, reconcile.

pub mod agent;
pub mod bql;
pub mod codec;
pub mod config;
pub mod monitor;
pub mod receiver;
pub mod shift;
pub mod transport;

pub use agent::run;
pub use codec::{ArnMessage, ArnType, DecodeError, Family, FlowId};
pub use config::ArnConfig;
