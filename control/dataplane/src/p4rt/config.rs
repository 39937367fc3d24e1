//! The `dataplane: {kind: p4runtime, ...}` block of the agent configuration (reference:
//! docs/configuration.md).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct P4RuntimeConfig {
    /// `simple_switch_grpc --grpc-server-addr`, e.g. `127.0.0.1:9559`.
    pub address: String,
    #[serde(default = "one")]
    pub device_id: u64,
    #[serde(default = "one")]
    pub election_id: u64,
    pub pipeline: Option<Pipeline>,
    /// Interface name used in members -> P4 port number.
    #[serde(default)]
    pub ports: BTreeMap<String, u32>,
    /// The target's limit on the sum of weights of one group, when below what the P4Info
    /// states (the agent reduces every group to the smaller of the two).
    #[serde(default)]
    pub max_group_size: Option<u32>,
}

fn one() -> u64 {
    1
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    pub p4info: PathBuf,
    pub config: PathBuf,
}
