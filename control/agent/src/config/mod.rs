//! Agent configuration file (`fare agent --config FILE`); every key is in docs/configuration.md.
//! Unknown keys are errors, so a typo never silently changes behaviour.

use fare_dataplane::GroupMode;
use fare_model::bandwidth::Mode;
use fare_model::yamlfile::{self, FileError};
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

// The `static` and `static_from` keys' types live with the code that turns them into groups.
pub use super::statics::{LinkMapping, StaticFrom, StaticGroup, StaticMember};

// The P4Runtime block is the data plane's own type (its backend reads it).
pub use fare_dp_p4::config::{P4RuntimeConfig, Pipeline};

mod bgp;
mod dataplane;
mod dpf;
mod fare;
mod management;

pub use bgp::*;
pub use dataplane::*;
pub use fare::*;
pub use management::*;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub name: String,
    pub router_id: Ipv4Addr,
    pub asn: u32,
    #[serde(default)]
    pub management: Management,
    #[serde(default)]
    pub fare: FareConfig,
    #[serde(default)]
    pub dataplane: DataplaneConfig,
    #[serde(default)]
    pub neighbors: Vec<NeighborConfig>,
    /// Prefixes this node originates into BGP.
    #[serde(default)]
    pub prefixes: Vec<IpNet>,
    /// Groups installed without BGP, through the same data path.
    #[serde(default, rename = "static")]
    pub static_groups: Vec<StaticGroup>,
    /// More static groups, taken from `fare weights --json` output (see `statics`).
    #[serde(default)]
    pub static_from: Option<StaticFrom>,
    /// BGP session parameters.
    #[serde(default)]
    pub bgp: BgpConfig,
    /// Deterministic Path Forwarding (draft-wang-idr-dpf): session coloring mode,
    /// codepoints and per-prefix route coloring. Absent = loose mode, no route colors.
    #[serde(default)]
    pub dpf: Option<fare_bgp::dpf::DpfConfig>,
    /// Adaptive Routing Notifications: receiver and queue/link monitor. Off when absent.
    #[serde(default)]
    pub arn: Option<fare_arn::ArnConfig>,
    /// The log filter (tracing env-filter syntax: `info`, `warn,fare_bgp=debug`). `--log`
    /// or FARE_LOG on the agent's command line take precedence; SIGHUP applies a change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NeighborConfig {
    pub address: IpAddr,
    pub remote_as: u32,
    /// Interface the session runs over; its speed is the link bandwidth when
    /// `bandwidth_gbps` is not given.
    #[serde(default)]
    pub interface: Option<String>,
    #[serde(default)]
    pub bandwidth_gbps: Option<f64>,
    /// DPF session color (32-bit).
    #[serde(default)]
    pub color: Option<u32>,
    /// Advertise Outbound Route Filtering (RFC 5291, Address Prefix ORF of RFC 5292,
    /// receive) so that this neighbor may send prefix filters, and send it only the routes
    /// they permit (draft-xu-idr-fare-in-mpson §4.2: a leaf toward its RNICs). A neighbor
    /// that announced it sends ORFs gets nothing before its first one, or before
    /// `bgp.orf_wait_ms` passed.
    #[serde(default)]
    pub orf_receive: bool,
    /// Ask this neighbor, with an Address Prefix ORF sent once the session is up, for
    /// routes to exactly these prefixes and no others (an RNIC toward its leaf, §4.2).
    /// Needs the neighbor to advertise ORF receive; otherwise everything is received.
    /// The OPEN then says this node sends ORFs: a neighbor may wait for it before its first
    /// UPDATE (RFC 5291 §5).
    #[serde(default)]
    pub orf_send: Vec<ipnet::IpNet>,
    /// Tag routes received from this neighbor with the FIB-Suppress community
    /// (draft-xu-idr-fare-in-mpson §4.2.1: a leaf's sessions to its RNICs). This node still
    /// installs them; nodes further away that receive them tagged do not.
    #[serde(default)]
    pub fib_suppress: bool,
    /// Host routes (the RNIC's /32s) this node answers for on this session: while none of
    /// them is reachable through it (no route covering it learned from this neighbor:
    /// session down, link down), each is advertised as unreachable (UPA,
    /// draft-xu-idr-fare-in-mpson §4.1) next to the aggregate in `prefixes:`.
    #[serde(default)]
    pub upa_hosts: Vec<ipnet::IpNet>,
    /// Send this neighbor only the aggregates: no route covered by one of this node's
    /// `prefixes:` (UPAs still go). A leaf toward its RNICs.
    #[serde(default)]
    pub summary_only: bool,
    /// Only accept the session, never connect.
    #[serde(default)]
    pub passive: bool,
    /// GTSM (RFC 5082) for this single-hop session.
    #[serde(default)]
    pub gtsm: bool,
    /// TCP MD5 signature key (RFC 2385), at most 80 octets.
    #[serde(default)]
    pub md5_password: Option<String>,
    /// Source address for the session (default: chosen by the kernel).
    #[serde(default)]
    pub local_address: Option<IpAddr>,
    /// The neighbor's place in the Clos (for the 5-stage rules), when known.
    #[serde(default)]
    pub role: Option<fare_model::topology::Role>,
    /// The RFC 10005 Link Bandwidth community toward a neighbor that does not speak FARE:
    /// `off` (default), `accept` (its lowest value is the path's bandwidth where no Path
    /// Bandwidth community is present), `send` (attach the value fare computed), `both`.
    #[serde(default)]
    pub link_bandwidth: fare_bgp::speaker::LinkBandwidthMode,
    /// Send the Link Bandwidth community transitive (type 0x00, default: what FRR 8
    /// reads for UCMP) or non-transitive (0x40).
    #[serde(default = "yes")]
    pub link_bandwidth_transitive: bool,
}

impl AgentConfig {
    /// A configuration with every optional block at its default (what a file with only
    /// these three keys gives): the lab builds its agents' files from it.
    pub fn new(name: impl Into<String>, router_id: Ipv4Addr, asn: u32) -> AgentConfig {
        AgentConfig {
            name: name.into(),
            router_id,
            asn,
            management: Management::default(),
            fare: FareConfig::default(),
            dataplane: DataplaneConfig::default(),
            neighbors: Vec::new(),
            prefixes: Vec::new(),
            static_groups: Vec::new(),
            static_from: None,
            bgp: BgpConfig::default(),
            dpf: None,
            arn: None,
            log: None,
        }
    }
}

impl NeighborConfig {
    /// A neighbor with every optional key at its default.
    pub fn new(address: IpAddr, remote_as: u32) -> NeighborConfig {
        NeighborConfig {
            address,
            remote_as,
            interface: None,
            bandwidth_gbps: None,
            color: None,
            orf_receive: false,
            orf_send: Vec::new(),
            fib_suppress: false,
            upa_hosts: Vec::new(),
            summary_only: false,
            passive: false,
            gtsm: false,
            md5_password: None,
            local_address: None,
            role: None,
            link_bandwidth: fare_bgp::speaker::LinkBandwidthMode::Off,
            link_bandwidth_transitive: true,
        }
    }
}

/// What `fare show config` shows in place of a secret (an MD5 password).
pub const REDACTED: &str = "<redacted>";

impl AgentConfig {
    /// This configuration with its secrets (`md5_password`) replaced by [`REDACTED`]: the
    /// one shown by the management API, on the socket and on TCP alike.
    pub fn redacted(&self) -> AgentConfig {
        let mut c = self.clone();
        for n in &mut c.neighbors {
            if let Some(p) = &mut n.md5_password {
                *p = REDACTED.to_string();
            }
        }
        c
    }

    /// Loads and validates a configuration file; every error names file, line and field.
    pub fn load(path: &Path) -> Result<AgentConfig, FileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| FileError::new(path, None, format!("cannot read: {e}")))?;
        AgentConfig::parse(path, &text, |from| {
            super::statics::from_weights(from, path, &text)
        })
    }

    /// Parses and validates configuration `text` that came from `path`; `static_from`
    /// gives the groups of a `static_from:` block (the file it names is read by [`load`];
    /// the fuzz target hands its own input instead).
    pub fn parse(
        path: &Path,
        text: &str,
        static_from: impl FnOnce(&StaticFrom) -> Result<Vec<StaticGroup>, FileError>,
    ) -> Result<AgentConfig, FileError> {
        let mut config: AgentConfig = yamlfile::parse(path, text)?;
        // `static_from` groups join the `static:` ones, then both are validated together.
        if let Some(from) = &config.static_from {
            let groups = static_from(from)?;
            config.static_groups.extend(groups);
        }
        config.validate(path, text)?;
        config.validate_management(path, text)?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests;
