//! `fare agent`: one per fabric node. Loads its configuration, programs the data plane
//! with static groups and (with BGP) computed groups, and serves the management API.

pub mod config;
