//! fare: Fully Adaptive Routing Ethernet.
//!
//! Data flows one way through these modules:
//! `topology`/`agent::config` -> `bgp` (or `sim`) -> `bandwidth` -> `wcmp` -> `dataplane`.
//! `arn` is the fast side loop between data planes.

pub mod agent;
pub mod arn;
pub mod bandwidth;
pub mod bgp;
pub mod cli;
pub mod dataplane;
pub mod lab;
pub mod mgmt;
pub mod mpson;
pub mod sim;
pub mod topology;
pub mod wcmp;
pub mod yamlfile;
