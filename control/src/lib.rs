//! fare: Fully Adaptive Routing Ethernet.
//!
//! Data flows one way through these modules:
//! `topology`/`agent::config` -> `bgp` (or `sim`) -> `bandwidth` -> `wcmp` -> `dataplane`.
//! `arn` is the fast side loop between data planes.

// The pure model, re-exported so `fare::topology` etc. keep their paths.
pub use fare_model::{bandwidth, sim, topology, wcmp, yamlfile};

pub mod agent;
pub mod arn;
pub mod bgp;
pub mod cli;
pub mod dataplane;
pub mod lab;
pub mod mgmt;
pub mod mpson;
