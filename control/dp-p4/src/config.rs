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
    /// How weights reach the switch: `weighted` (one member per next hop with its
    /// P4Runtime weight; the default) or `replicated` (weight w as w members of weight 1,
    /// for targets that reject weights).
    #[serde(default)]
    pub group_form: P4GroupForm,
    /// Source MAC the switch writes into routed packets (default 02:fa:4e:00:00:01).
    #[serde(default)]
    pub router_mac: Option<fare_dataplane::MacAddr>,
    /// Fast failover in the switch: every member but those on the group's anchor port
    /// carries its egress port as P4Runtime `watch_port`, so the switch takes it out of
    /// service while the port is down, before the agent hears of it (default true).
    #[serde(default = "yes")]
    pub watch_ports: bool,
    /// The P4 program the switch runs: `fare` (p4/fare.p4, the default) or `sai` (the
    /// SAI-P4 program of PINS/SONiC switches: `wcmp_group_table`, nexthop, neighbor and
    /// router-interface tables; see docs/p4.md, "SAI-P4 (PINS) profile").
    #[serde(default)]
    pub profile: P4Profile,
}

/// `dataplane.profile` of a P4Runtime switch: which program's tables fare writes.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum P4Profile {
    /// fare.p4 (BMv2, or its TNA port): every feature.
    #[default]
    Fare,
    /// SAI-P4 (PINS/SONiC): flow-hashed WCMP groups only.
    Sai,
}

fn yes() -> bool {
    true
}

/// `dataplane.group_form` of a P4Runtime switch.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum P4GroupForm {
    #[default]
    Weighted,
    Replicated,
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
