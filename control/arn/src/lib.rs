//! fare-arn: Adaptive Routing Notifications (draft-wh-rtgwg-adaptive-routing-arn): codec,
//! monitor, sender/receiver. It uses `fare-model` (groups, members) and `fare-bgp` (link
//! carrier); the receiver acts on members through its `MemberControl` trait, which every
//! data plane implements (`fare-dataplane`), and the agent runs it (`fare-agent`'s `arn_task`).
//!
//! - `codec`: message types and the wire format (shared bit for bit with the XDP and P4
//!   data planes; the layout is documented there and in docs/CODEPOINTS.md).
//! - `transport`: UDP socket with TTL 255 / DSCP CS6 out, TTL and interface reporting in.
//! - `config`: the `arn:` block of the agent configuration.
//! - `monitor`: qdisc backlog + link state -> Types 1-4, and the sender to upstream neighbors.
//! - `shift`: congestion shifts a member's share (the rule every data plane applies).
//! - `bql`: BQL `inflight` of a device's transmit rings (the monitor's real signal).
//! - `receiver`: admission, (sender, Path ID) -> members, removal/restore, timeout, reconcile.

pub mod bql;
pub mod codec;
pub mod config;
pub mod monitor;
pub mod receiver;
pub mod shift;
pub mod transport;

pub use codec::{ArnMessage, ArnType, DecodeError, Family, FlowId};
pub use config::ArnConfig;
