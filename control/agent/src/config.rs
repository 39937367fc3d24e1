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
pub struct Management {
    /// Unix socket of the gRPC management API (`fare show --socket PATH`).
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    /// Opt-in Prometheus metrics listener, e.g. `127.0.0.1:9100`.
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
    /// Also serve the management API on this TCP address (requires `tls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
    /// TLS of the TCP listener: clients must present a certificate signed by `client_ca`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ManagementTls>,
}

/// PEM files of the management API's TLS listener.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ManagementTls {
    /// The server's certificate chain.
    pub cert: PathBuf,
    /// The server's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates that sign the clients' certificates (a client certificate is required).
    pub client_ca: PathBuf,
}

fn default_socket() -> PathBuf {
    PathBuf::from("/run/fare/fare.sock")
}

impl Default for Management {
    fn default() -> Self {
        Management {
            socket: default_socket(),
            metrics: None,
            address: None,
            tls: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FareConfig {
    #[serde(default)]
    pub mode: Mode,
    /// This node's place in the Clos; `super-spine` applies draft §4.2's rule.
    #[serde(default = "default_role")]
    pub role: fare_model::topology::Role,
    /// Path Bandwidth community subtype (docs/CODEPOINTS.md).
    #[serde(default = "default_subtype")]
    pub community_subtype: u8,
    /// FIB-Suppress community subtype (docs/CODEPOINTS.md).
    #[serde(default = "default_fib_suppress_subtype")]
    pub fib_suppress_subtype: u8,
    /// UPA extended community subtype (draft-krierhorn-idr-upa, docs/CODEPOINTS.md).
    #[serde(default = "default_upa_subtype")]
    pub upa_subtype: u8,
    /// How BGP-computed groups spread traffic: `spray` (default), `flow` or `flowlet`.
    #[serde(default)]
    pub group_mode: GroupMode,
    /// Flowlet mode (BGP and static groups): the idle time after which a flow's next
    /// packet picks a member again, in microseconds (default 500, 1..=1000000).
    #[serde(default = "default_flowlet_gap_us")]
    pub flowlet_gap_us: u32,
    /// Largest sum of weights a group may have (data plane limit).
    #[serde(default)]
    pub max_group_size: Option<u32>,
    /// How the Path Bandwidth value is written in the community's 2-octet local
    /// administrator: `binary16` (IEEE 754 half precision, default) or `float32-upper16`
    /// (the upper half of a binary32, for speakers that send that). Every node of a
    /// fabric must use the same one.
    #[serde(default)]
    pub bandwidth_encoding: fare_model::bandwidth::Encoding,
    /// Draft §4.2, super-spines: attach the optional non-transitive Path Bandwidth
    /// community with the bandwidth of the link(s) toward the advertising spine
    /// (default true; without it spines of other PoDs use plain ECMP).
    #[serde(default = "default_true")]
    pub link_community: bool,
    /// Draft §4.2, spines of other PoDs: lower the transitive value to the total
    /// bandwidth toward the next-next hop when that is smaller (default false).
    #[serde(default)]
    pub remote_spine_update: bool,
    /// Several sessions with one neighbor, one per parallel link: `node-proportional`
    /// (default) or `node-even` compute path bandwidth per node as draft-xu-idr-fare-05
    /// requires (min of the links' aggregate and the advertised value, split in
    /// proportion to the links or evenly); `session` keeps the older per-session rule.
    #[serde(default)]
    pub parallel_links: fare_model::parallel::ParallelLinks,
}

fn default_true() -> bool {
    true
}

pub use fare_dataplane::DEFAULT_FLOWLET_GAP_US;
/// Largest flowlet gap: beyond a second flowlets are flows.
pub const MAX_FLOWLET_GAP_US: u32 = 1_000_000;

fn default_flowlet_gap_us() -> u32 {
    DEFAULT_FLOWLET_GAP_US
}

impl FareConfig {
    /// The draft's optional 5-stage behaviours as the policy takes them.
    pub fn draft_options(&self) -> fare_model::bandwidth::DraftOptions {
        fare_model::bandwidth::DraftOptions {
            link_community: self.link_community,
            remote_spine_update: self.remote_spine_update,
        }
    }
}

impl Default for FareConfig {
    fn default() -> Self {
        FareConfig {
            mode: Mode::default(),
            role: default_role(),
            community_subtype: default_subtype(),
            fib_suppress_subtype: default_fib_suppress_subtype(),
            upa_subtype: default_upa_subtype(),
            group_mode: GroupMode::default(),
            flowlet_gap_us: DEFAULT_FLOWLET_GAP_US,
            max_group_size: None,
            bandwidth_encoding: Default::default(),
            link_community: true,
            remote_spine_update: false,
            parallel_links: Default::default(),
        }
    }
}

fn default_role() -> fare_model::topology::Role {
    fare_model::topology::Role::Leaf
}

fn default_subtype() -> u8 {
    fare_bgp::community::DEFAULT_PATH_BANDWIDTH_SUBTYPE
}

fn default_fib_suppress_subtype() -> u8 {
    fare_bgp::community::DEFAULT_FIB_SUPPRESS_SUBTYPE
}

fn default_upa_subtype() -> u8 {
    fare_bgp::packet::upa::DEFAULT_UPA_SUBTYPE
}

/// BGP session parameters shared by every neighbor.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BgpConfig {
    #[serde(default = "default_bgp_port")]
    pub port: u16,
    /// Accept incoming sessions.
    #[serde(default = "yes")]
    pub listen: bool,
    /// Proposed hold time in seconds (keepalives every third of it); 0 = none.
    #[serde(default = "default_hold")]
    pub hold_time: u16,
    /// First connect-retry delay; doubles per failure up to `connect_retry_max_ms`.
    #[serde(default = "default_retry")]
    pub connect_retry_ms: u64,
    #[serde(default = "default_retry_max")]
    pub connect_retry_max_ms: u64,
    /// How often neighbor interfaces' carrier is read, in ms (0 = netlink events only,
    /// which the kernel may deliver up to a second late).
    #[serde(default = "default_link_poll")]
    pub link_poll_ms: u64,
    /// How long a neighbor with `orf_receive` that can send ORFs gets to send its first
    /// ORF before this node sends it the full table anyway (RFC 5291 §5), in ms.
    #[serde(default = "default_orf_wait")]
    pub orf_wait_ms: u64,
}

/// Default wait for a neighbor's first ORF (RFC 5291 leaves the time to the implementation).
pub const DEFAULT_ORF_WAIT_MS: u64 = 3000;

fn default_orf_wait() -> u64 {
    DEFAULT_ORF_WAIT_MS
}

/// Carrier poll interval: fast enough for the 20 ms convergence target.
pub const DEFAULT_LINK_POLL_MS: u64 = 5;

fn default_link_poll() -> u64 {
    DEFAULT_LINK_POLL_MS
}

impl Default for BgpConfig {
    fn default() -> Self {
        BgpConfig {
            port: default_bgp_port(),
            listen: true,
            hold_time: default_hold(),
            connect_retry_ms: default_retry(),
            connect_retry_max_ms: default_retry_max(),
            link_poll_ms: default_link_poll(),
            orf_wait_ms: default_orf_wait(),
        }
    }
}

fn default_bgp_port() -> u16 {
    179
}
fn yes() -> bool {
    true
}
fn default_hold() -> u16 {
    9
}
fn default_retry() -> u64 {
    500
}
fn default_retry_max() -> u64 {
    30_000
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum DataplaneConfig {
    /// XDP program attached to `interfaces` (ingress); members may egress any of them.
    Xdp {
        interfaces: Vec<String>,
        /// Directory name of the pinned maps and links under /sys/fs/bpf/fare/ (default:
        /// the agent's `name`). A restarted agent with the same pin name takes over the
        /// running program without a forwarding gap; agents sharing one bpffs (several
        /// namespaces on one host) need distinct ones.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pin_name: Option<String>,
        /// Egress virtual queues: frames XDP redirects skip the qdisc, so a port's rate
        /// limit and queue (for ARN congestion detection) are kept in the program.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        queues: Vec<fare_dp_xdp::queues::QueueSpec>,
        /// Interfaces whose egress sprays this host's own packets per packet over the
        /// members of their destination's spray-mode group (TC program; RNIC planes).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        egress_spray: Vec<String>,
    },
    /// Linux weighted nexthop groups (flow hashing only): the baseline.
    Kernel {
        #[serde(default)]
        interfaces: Vec<String>,
    },
    P4runtime(P4RuntimeConfig),
    /// No forwarding state: control plane only.
    #[default]
    None,
}

impl DataplaneConfig {
    /// The `kind:` value.
    /// What the configured kind of data plane offers (DPF, flow steering), from the
    /// backend crates themselves.
    pub fn offers(&self) -> fare_dataplane::Offers {
        match self {
            DataplaneConfig::Xdp { .. } => fare_dp_xdp::XdpDataplane::OFFERS,
            DataplaneConfig::Kernel { .. } => fare_dp_kernel::KernelDataplane::OFFERS,
            DataplaneConfig::P4runtime(p) if p.profile == fare_dp_p4::config::P4Profile::Sai => {
                fare_dp_p4::sai::SaiDataplane::OFFERS
            }
            DataplaneConfig::P4runtime(_) => fare_dp_p4::P4RuntimeDataplane::OFFERS,
            DataplaneConfig::None => fare_dataplane::NullDataplane::OFFERS,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            DataplaneConfig::Xdp { .. } => "xdp",
            DataplaneConfig::Kernel { .. } => "kernel",
            DataplaneConfig::P4runtime(_) => "p4runtime",
            DataplaneConfig::None => "none",
        }
    }
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

    /// TCP only with TLS and client certificates; the PEM files must be readable.
    fn validate_management(&self, path: &Path, text: &str) -> Result<(), FileError> {
        let m = &self.management;
        let at = |needle: &str, problem: String| {
            FileError::new(path, yamlfile::find_line(text, needle, 1), problem)
        };
        match (&m.address, &m.tls) {
            (Some(_), None) => Err(at(
                "address",
                "management.address needs management.tls (the API is served on TCP only with \
                 TLS and client certificates)"
                    .into(),
            )),
            (None, Some(_)) => Err(at("tls", "management.tls needs management.address".into())),
            (Some(_), Some(tls)) => {
                for (key, file) in [
                    ("cert", &tls.cert),
                    ("key", &tls.key),
                    ("client_ca", &tls.client_ca),
                ] {
                    if let Err(e) = std::fs::metadata(file) {
                        return Err(at(
                            key,
                            format!("management.tls.{key}: {}: {e}", file.display()),
                        ));
                    }
                }
                Ok(())
            }
            (None, None) => Ok(()),
        }
    }

    pub(crate) fn validate(&self, path: &Path, text: &str) -> Result<(), FileError> {
        let at = |needle: &str, problem: String| {
            FileError::new(path, yamlfile::find_line(text, needle, 1), problem)
        };
        self.check_speaker_rules(path, text)?;
        if let Some(filter) = &self.log {
            if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(filter) {
                return Err(at(
                    "log:",
                    format!("log: `{filter}` is not a log filter: {e}"),
                ));
            }
        }
        if let DataplaneConfig::Xdp { queues, .. } = &self.dataplane {
            for q in queues {
                if !(q.rate_mbps.is_finite() && q.rate_mbps > 0.0) {
                    return Err(at(
                        &q.interface,
                        format!(
                            "dataplane.queues: {}: rate_mbps must be a positive number of Mbit/s",
                            q.interface
                        ),
                    ));
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for group in &self.static_groups {
            let p = group.prefix.to_string();
            if !seen.insert(group.prefix) {
                return Err(at(&p, format!("static group {p} is given twice")));
            }
            if group.members.is_empty() {
                return Err(at(&p, format!("static group {p}: no members")));
            }
            if let Some(m) = group.members.iter().find(|m| m.interface.is_empty()) {
                return Err(at(
                    &p,
                    format!(
                        "static group {p}: member {} has no interface",
                        m.neighbor_mac
                    ),
                ));
            }
            if let Some(m) = group.members.iter().find(|m| m.weight == 0) {
                // Point at the member's own line when it can be found after the prefix.
                let start = yamlfile::find_line(text, &p, 1).unwrap_or(1);
                let line = yamlfile::find_line(text, &m.neighbor_mac.to_string(), start)
                    .or_else(|| yamlfile::find_line(text, &p, 1));
                return Err(FileError::new(
                    path,
                    line,
                    format!("static group {p}: member on {} has weight 0", m.interface),
                ));
            }
        }
        self.validate_dpf(path, text)?;
        self.validate_sai(path, text)?;
        self.validate_flowlets(path, text)?;
        if let Some(arn) = &self.arn {
            if let Err((needle, problem)) = arn.check() {
                return Err(at(&needle, format!("arn: {problem}")));
            }
        }
        Ok(())
    }
}

/// Why a data plane cannot run flowlet groups (None: it can).
fn no_flowlets(dataplane: &DataplaneConfig) -> Option<&'static str> {
    match dataplane {
        DataplaneConfig::None | DataplaneConfig::Xdp { .. } => None,
        DataplaneConfig::Kernel { .. } => {
            Some("dataplane.kind kernel: Linux nexthop groups keep no per-flow state")
        }
        DataplaneConfig::P4runtime(p) if p.profile == fare_dp_p4::config::P4Profile::Sai => Some(
            "dataplane.profile sai: SAI-P4 keeps no per-flow state (its WCMP selector is \
             the switch's hash)",
        ),
        DataplaneConfig::P4runtime(_) => None,
    }
}

impl AgentConfig {
    /// Flowlet mode: the gap in range, and a data plane that keeps per-flow state.
    fn validate_flowlets(&self, path: &Path, text: &str) -> Result<(), FileError> {
        let at = |needle: &str, problem: String| {
            FileError::new(path, yamlfile::find_line(text, needle, 1), problem)
        };
        let gap = self.fare.flowlet_gap_us;
        if !(1..=MAX_FLOWLET_GAP_US).contains(&gap) {
            return Err(at(
                "flowlet_gap_us",
                format!("fare.flowlet_gap_us {gap}: must be 1..={MAX_FLOWLET_GAP_US} microseconds"),
            ));
        }
        let Some(why) = no_flowlets(&self.dataplane) else {
            return Ok(());
        };
        if !self.neighbors.is_empty() && self.fare.group_mode == GroupMode::Flowlet {
            return Err(at(
                "group_mode",
                format!("fare.group_mode flowlet is not available ({why}); use flow"),
            ));
        }
        if let Some(g) = self
            .static_groups
            .iter()
            .find(|g| g.mode == GroupMode::Flowlet)
        {
            let p = g.prefix.to_string();
            return Err(at(
                &p,
                format!("static group {p}: mode flowlet is not available ({why}); use flow"),
            ));
        }
        Ok(())
    }

    /// `dataplane.profile: sai` (SAI-P4 switches hash flows and have no per-color groups):
    /// spray mode and DPF are refused here rather than at every install.
    fn validate_sai(&self, path: &Path, text: &str) -> Result<(), FileError> {
        use fare_dp_p4::config::P4Profile;
        let DataplaneConfig::P4runtime(p4) = &self.dataplane else {
            return Ok(());
        };
        if p4.profile != P4Profile::Sai {
            return Ok(());
        }
        let at = |needle: &str, problem: String| {
            FileError::new(path, yamlfile::find_line(text, needle, 1), problem)
        };
        let why = "SAI-P4's WCMP selector hashes flows";
        if !self.neighbors.is_empty() && self.fare.group_mode == GroupMode::Spray {
            return Err(at(
                "profile",
                format!(
                    "dataplane.profile sai: fare.group_mode spray is not available ({why}); \
                     set fare.group_mode: flow"
                ),
            ));
        }
        if let Some(g) = self
            .static_groups
            .iter()
            .find(|g| g.mode == GroupMode::Spray)
        {
            let p = g.prefix.to_string();
            return Err(at(
                &p,
                format!(
                    "static group {p}: mode spray is not available with dataplane.profile sai \
                     ({why}); set mode: flow"
                ),
            ));
        }
        if self.dpf.is_some() {
            return Err(at(
                "dpf:",
                "dpf: not available with dataplane.profile sai (SAI-P4 has no per-color \
                 groups or flow classification)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// DPF: route colorings well formed and on originated prefixes; primary/backup
    /// coloring only in a strictly staged fabric (draft-wang-idr-dpf §4).
    fn validate_dpf(&self, path: &Path, text: &str) -> Result<(), FileError> {
        use fare_bgp::dpf::{self, Dpf, StageNeighbor};
        let Some(d) = &self.dpf else {
            return Ok(());
        };
        let at = |needle: &str, problem: String| {
            let line = yamlfile::find_line(text, "dpf:", 1).unwrap_or(1);
            FileError::new(
                path,
                yamlfile::find_line(text, needle, line).or(Some(line)),
                problem,
            )
        };
        let resolved = Dpf::from_config(d).map_err(|e| {
            let p = e.prefix().map_or("dpf".to_string(), |p| p.to_string());
            at(&p, e.to_string())
        })?;
        // Line of the i-th `- ` item after `flows:` (the block is nested under dpf:).
        let flows_at = yamlfile::find_line(text, "flows:", 1);
        let flow_line = |i: usize| {
            let start = flows_at?;
            text.lines()
                .enumerate()
                .skip(start)
                .filter(|(_, l)| l.trim_start().starts_with("- "))
                .nth(i)
                .map(|(n, _)| n + 1)
                .or(Some(start))
        };
        for (i, rule) in d.flows.iter().enumerate() {
            let line = flow_line(i);
            if let Err(e) = rule.check() {
                return Err(FileError::new(path, line, format!("dpf.flows: {e}")));
            }
            if !self.dataplane.offers().dpf {
                return Err(FileError::new(
                    path,
                    line,
                    format!(
                        "dpf.flows needs dataplane kind xdp or p4runtime (the {} data plane does not classify flows)",
                        self.dataplane.kind()
                    ),
                ));
            }
        }
        if d.flows.len() > fare_common::MAX_FLOW_RULES as usize {
            return Err(at(
                "flows:",
                format!(
                    "dpf.flows: {} rules, at most {}",
                    d.flows.len(),
                    fare_common::MAX_FLOW_RULES
                ),
            ));
        }
        for r in &d.routes {
            if !self.prefixes.iter().any(|p| p.trunc() == r.prefix.trunc()) {
                let p = r.prefix.to_string();
                return Err(at(
                    &p,
                    format!("dpf route {p} is not among this node's prefixes"),
                ));
            }
        }
        if resolved.routes.values().any(|c| c.has_backup()) {
            let neighbors: Vec<StageNeighbor> = self
                .neighbors
                .iter()
                .map(|n| StageNeighbor {
                    remote_as: n.remote_as,
                    role: n.role,
                })
                .collect();
            dpf::check_staged(self.fare.role, self.asn, &neighbors).map_err(|e| {
                FileError::new(
                    path,
                    yamlfile::find_line(text, "neighbors:", 1),
                    e.to_string(),
                )
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fare_dataplane::MacAddr;
    use std::collections::BTreeMap;

    /// Every key of the agent configuration (but the `arn:` and `dpf:` blocks, which
    /// arn.md and dpf.md describe) is in the reference, docs/configuration.md: a key added
    /// without its documentation fails here.
    #[test]
    fn every_key_is_in_the_configuration_reference() {
        let reference = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/configuration.md"
        ))
        .expect("docs/configuration.md");
        let mac: MacAddr = "02:00:00:00:00:01".parse().expect("mac");
        let mut c = AgentConfig::new("n", Ipv4Addr::new(10, 0, 0, 1), 65001);
        c.neighbors
            .push(NeighborConfig::new(IpAddr::from([10, 0, 0, 2]), 65002));
        c.static_groups.push(StaticGroup {
            prefix: "10.9.0.0/16".parse().expect("prefix"),
            mode: GroupMode::Spray,
            members: vec![StaticMember {
                interface: "eth1".into(),
                neighbor_mac: mac,
                weight: 1,
                next_hop: None,
                bandwidth_gbps: None,
            }],
        });
        c.static_from = Some(StaticFrom {
            weights: "w.json".into(),
            node: "n".into(),
            mode: GroupMode::Spray,
            links: BTreeMap::from([(
                "l".to_string(),
                LinkMapping {
                    interface: "eth1".into(),
                    neighbor_mac: mac,
                    next_hop: None,
                },
            )]),
        });
        let mut values = vec![serde_json::to_value(&c).expect("serializes")];
        for dataplane in [
            DataplaneConfig::Xdp {
                interfaces: vec![],
                pin_name: Some("n".into()),
                queues: vec![fare_dp_xdp::queues::QueueSpec {
                    interface: "eth1".into(),
                    rate_mbps: 1.0,
                    limit_bytes: 0,
                }],
                egress_spray: vec!["eth1".into()],
            },
            DataplaneConfig::Kernel { interfaces: vec![] },
            DataplaneConfig::P4runtime(P4RuntimeConfig {
                address: "127.0.0.1:9559".into(),
                device_id: 1,
                election_id: 1,
                pipeline: Some(Pipeline {
                    p4info: "a".into(),
                    config: "b".into(),
                }),
                ports: BTreeMap::new(),
                max_group_size: Some(1),
                group_form: Default::default(),
                router_mac: None,
                watch_ports: true,
                profile: Default::default(),
            }),
        ] {
            values.push(serde_json::to_value(&dataplane).expect("serializes"));
        }
        fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, v) in m {
                        if k == "arn" || k == "dpf" || k == "ports" || k == "links" {
                            out.push(k.clone());
                            continue;
                        }
                        out.push(k.clone());
                        keys(v, out);
                    }
                }
                serde_json::Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        values.iter().for_each(|v| keys(v, &mut all));
        let missing: Vec<&String> = all
            .iter()
            .filter(|k| !reference.contains(&format!("`{k}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "not in docs/configuration.md: {missing:?}"
        );
    }

    const EXAMPLE: &str = r#"
name: leaf1
router_id: 10.0.0.1
asn: 65001
management: {socket: /run/fare/leaf1.sock}
fare: {mode: draft}
dataplane: {kind: xdp, interfaces: [eth1, eth2]}
neighbors:
  - {address: 10.1.0.2, remote_as: 65100, interface: eth1, bandwidth_gbps: 100}
prefixes: [192.0.2.0/24]
static:
  - prefix: 198.18.0.0/16
    mode: spray
    members:
      - {interface: eth1, neighbor_mac: "02:00:00:00:00:01", weight: 3}
      - {interface: eth2, neighbor_mac: "02:00:00:00:00:02", weight: 4}
"#;

    #[test]
    fn design_example_parses() {
        let c: AgentConfig = yamlfile::parse(Path::new("a.yaml"), EXAMPLE).unwrap();
        c.validate(Path::new("a.yaml"), EXAMPLE).unwrap();
        assert_eq!(c.static_groups[0].members[1].weight, 4);
        assert_eq!(
            c.dataplane,
            DataplaneConfig::Xdp {
                interfaces: vec!["eth1".into(), "eth2".into()],
                pin_name: None,
                queues: vec![],
                egress_spray: vec![],
            }
        );
    }

    #[test]
    fn p4runtime_block_parses() {
        let text = r#"
name: s1
router_id: 10.0.0.9
asn: 65100
dataplane:
  kind: p4runtime
  address: 127.0.0.1:9559
  device_id: 1
  election_id: 1
  pipeline: {p4info: p4/build/fare.p4info.txtpb, config: p4/build/fare.json}
  ports: {e1: 1, e2: 2}
"#;
        let c: AgentConfig = yamlfile::parse(Path::new("s.yaml"), text).unwrap();
        match c.dataplane {
            DataplaneConfig::P4runtime(p) => {
                assert_eq!(p.ports["e2"], 2);
                assert_eq!(
                    p.group_form,
                    fare_dp_p4::config::P4GroupForm::Weighted,
                    "default form"
                );
                assert_eq!(p.router_mac, None);
            }
            other => panic!("{other:?}"),
        }
        let replicated = text.replace(
            "  ports: {e1: 1, e2: 2}\n",
            "  ports: {e1: 1, e2: 2}\n  group_form: replicated\n  router_mac: 02:aa:00:00:00:07\n",
        );
        let c: AgentConfig = yamlfile::parse(Path::new("s.yaml"), &replicated).unwrap();
        match c.dataplane {
            DataplaneConfig::P4runtime(p) => {
                assert_eq!(p.group_form, fare_dp_p4::config::P4GroupForm::Replicated);
                assert_eq!(
                    p.router_mac,
                    Some(fare_dataplane::MacAddr([2, 0xaa, 0, 0, 0, 7]))
                );
                let o = fare_dp_p4::P4RuntimeOptions::from_config(&p);
                assert_eq!(o.form, fare_dp_p4::GroupForm::Replicated);
                assert_eq!(o.router_mac, fare_dataplane::MacAddr([2, 0xaa, 0, 0, 0, 7]));
            }
            other => panic!("{other:?}"),
        }
        let bad = text.replace(
            "  ports: {e1: 1, e2: 2}\n",
            "  ports: {e1: 1, e2: 2}\n  group_form: copies\n",
        );
        let e = yamlfile::parse::<AgentConfig>(Path::new("s.yaml"), &bad).unwrap_err();
        // The `dataplane` block is tagged by `kind`, so the error points at the document.
        assert!(e.to_string().contains("unknown variant `copies`"), "{e}");
    }

    #[test]
    fn parallel_links_setting() {
        let text = r#"
name: l1
router_id: 10.0.0.1
asn: 65001
fare:
  parallel_links: node-even
dataplane: {kind: xdp, interfaces: [e1]}
neighbors:
  - {address: 10.1.0.2, remote_as: 65100}
"#;
        let c = load_text(text).unwrap();
        assert_eq!(
            c.fare.parallel_links,
            fare_model::parallel::ParallelLinks::NodeEven
        );
        let c = load_text(&text.replace("node-even", "session")).unwrap();
        assert_eq!(
            c.fare.parallel_links,
            fare_model::parallel::ParallelLinks::Session
        );
        let c = load_text(&text.replace("  parallel_links: node-even\n", "  mode: draft\n"));
        assert_eq!(
            c.unwrap().fare.parallel_links,
            fare_model::parallel::ParallelLinks::NodeProportional
        );
        let e = load_text(&text.replace("node-even", "node")).unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.to_string().contains("unknown variant `node`"), "{e}");
    }

    #[test]
    fn flowlet_mode_and_gap_are_checked() {
        let text = r#"
name: l1
router_id: 10.0.0.1
asn: 65001
fare:
  group_mode: flowlet
dataplane: {kind: xdp, interfaces: [e1]}
neighbors:
  - {address: 10.1.0.2, remote_as: 65100}
static:
  - prefix: 198.18.0.0/16
    mode: flowlet
    members:
      - {interface: e1, neighbor_mac: "02:00:00:00:00:01", weight: 3}
"#;
        let c = load_text(text).unwrap();
        assert_eq!(c.fare.group_mode, GroupMode::Flowlet);
        assert_eq!(c.fare.flowlet_gap_us, 500);
        assert_eq!(c.static_groups[0].mode, GroupMode::Flowlet);
        let gap = text.replace(
            "group_mode: flowlet\n",
            "group_mode: flowlet\n  flowlet_gap_us: 150\n",
        );
        assert_eq!(load_text(&gap).unwrap().fare.flowlet_gap_us, 150);
        // Out of range: the gap's own line (line 1 is the empty one after r#").
        for bad in ["0", "1000001"] {
            let t = gap.replace("flowlet_gap_us: 150", &format!("flowlet_gap_us: {bad}"));
            let e = load_text(&t).unwrap_err();
            assert_eq!(e.line, Some(7), "{e}");
            assert!(
                e.problem.contains("must be 1..=1000000 microseconds"),
                "{e}"
            );
        }
        // The kernel keeps no per-flow state: the BGP groups' mode is refused at its
        // line, then (BGP groups in flow mode) the static group at its prefix.
        let kernel = text.replace("kind: xdp, interfaces: [e1]", "kind: kernel");
        let e = load_text(&kernel).unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(
            e.problem
                .contains("fare.group_mode flowlet is not available"),
            "{e}"
        );
        let e = load_text(&kernel.replace("group_mode: flowlet", "group_mode: flow")).unwrap_err();
        assert_eq!(e.line, Some(11), "{e}");
        assert!(e.problem.contains("mode flowlet is not available"), "{e}");
        let p4 = text.replace(
            "kind: xdp, interfaces: [e1]",
            "kind: p4runtime, address: '127.0.0.1:9559', ports: {e1: 1}",
        );
        // fare.p4 keeps flowlets in registers; SAI-P4 has no per-flow state.
        assert_eq!(load_text(&p4).unwrap().fare.group_mode, GroupMode::Flowlet);
        let sai = p4.replace("ports: {e1: 1}", "ports: {e1: 1}, profile: sai");
        let e = load_text(&sai).unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.problem.contains("dataplane.profile sai"), "{e}");
        let e = yamlfile::parse::<AgentConfig>(
            Path::new("d.yaml"),
            &text.replace("group_mode: flowlet", "group_mode: flowlets"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown variant `flowlets`"), "{e}");
    }

    #[test]
    fn sai_profile_parses_and_refuses_spray() {
        let text = r#"
name: s1
router_id: 10.0.0.9
asn: 65100
dataplane:
  kind: p4runtime
  address: 127.0.0.1:9559
  ports: {e1: 1, e2: 2}
  profile: sai
static:
  - prefix: 198.18.0.0/16
    mode: flow
    members:
      - {interface: e1, neighbor_mac: "02:00:00:00:00:01", weight: 3}
"#;
        use fare_dp_p4::config::P4Profile;
        let c: AgentConfig = yamlfile::parse(Path::new("s.yaml"), text).unwrap();
        c.validate(Path::new("s.yaml"), text).unwrap();
        match &c.dataplane {
            DataplaneConfig::P4runtime(p) => assert_eq!(p.profile, P4Profile::Sai),
            other => panic!("{other:?}"),
        }
        // Default: fare.p4.
        let fare = text.replace("  profile: sai\n", "");
        let c: AgentConfig = yamlfile::parse(Path::new("s.yaml"), &fare).unwrap();
        match &c.dataplane {
            DataplaneConfig::P4runtime(p) => assert_eq!(p.profile, P4Profile::Fare),
            other => panic!("{other:?}"),
        }
        // A spray static group: one line naming the group (line 11: its prefix; line 1
        // is the empty one after r#").
        let spray = text.replace("mode: flow", "mode: spray");
        let c: AgentConfig = yamlfile::parse(Path::new("s.yaml"), &spray).unwrap();
        let e = c.validate(Path::new("s.yaml"), &spray).unwrap_err();
        assert_eq!(e.line, Some(11), "{e}");
        assert!(e.to_string().contains("mode spray is not available"), "{e}");
        // An unknown profile.
        let bad = text.replace("profile: sai", "profile: tofino");
        let e = yamlfile::parse::<AgentConfig>(Path::new("s.yaml"), &bad).unwrap_err();
        assert!(e.to_string().contains("unknown variant `tofino`"), "{e}");
    }

    #[test]
    fn zero_weight_names_the_line() {
        let text = EXAMPLE.replace("weight: 4", "weight: 0");
        let c: AgentConfig = yamlfile::parse(Path::new("a.yaml"), &text).unwrap();
        let e = c.validate(Path::new("a.yaml"), &text).unwrap_err();
        assert_eq!(e.line, Some(16), "{e}");
    }

    #[test]
    fn bad_mac_is_an_error_with_line() {
        let text = EXAMPLE.replace("02:00:00:00:00:02", "02:00:00:00:00");
        let e = yamlfile::parse::<AgentConfig>(Path::new("a.yaml"), &text).unwrap_err();
        assert_eq!(e.line, Some(16), "{e}");
    }

    const DPF: &str = r#"
name: leaf1
router_id: 10.0.0.1
asn: 65001
neighbors:
  - {address: 10.1.0.2, remote_as: 65100, color: 1}
  - {address: 10.1.0.6, remote_as: 65100, color: 2}
prefixes: [192.0.2.0/24, 198.51.100.0/24]
dpf:
  session_coloring: strict
  mismatch_subcode: 12
  routes:
    - {prefix: 192.0.2.0/24, primary: 1, backup: 2}
    - {prefix: 198.51.100.0/24, color: all}
"#;

    fn load_text(text: &str) -> Result<AgentConfig, FileError> {
        let c: AgentConfig = yamlfile::parse(Path::new("d.yaml"), text)?;
        c.validate(Path::new("d.yaml"), text)?;
        Ok(c)
    }

    #[test]
    fn dpf_flow_rules_parse_and_bad_ones_name_their_line() {
        let base =
            "name: l1\nrouter_id: 10.0.0.1\nasn: 65001\ndataplane: {kind: xdp, interfaces: [e1]}\n";
        let good = format!("{base}dpf:\n  flows:\n    - {{color: 1, dscp: [26]}}\n    - {{color: 2, protocol: udp, dst_port: 4791, qp: 0x100-0x1ff}}\n");
        let c = load_text(&good).unwrap();
        assert_eq!(c.dpf.unwrap().flows.len(), 2);
        let bad = format!("{base}dpf:\n  flows:\n    - {{color: 1, dscp: [26]}}\n    - {{color: 2, dscp: [99]}}\n");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with("d.yaml:8:") && e.contains("DSCP 99"), "{e}");
        let bad_queue = good.replace(
            "kind: xdp, interfaces: [e1]",
            "kind: xdp, interfaces: [e1], queues: [{interface: e1, rate_mbps: 0}]",
        );
        let e = load_text(&bad_queue).expect_err("rate 0").to_string();
        assert!(e.contains("rate_mbps must be a positive"), "{e}");
        let kernel = good.replace("kind: xdp, interfaces: [e1]", "kind: none");
        let e = load_text(&kernel).unwrap_err().to_string();
        assert!(e.contains("needs dataplane kind xdp"), "{e}");
        let p4 = good.replace(
            "kind: xdp, interfaces: [e1]",
            "kind: p4runtime, address: '127.0.0.1:9559', ports: {e1: 1}",
        );
        assert_eq!(load_text(&p4).unwrap().dpf.unwrap().flows.len(), 2);
    }

    #[test]
    fn dpf_block_parses() {
        let c = load_text(DPF).unwrap();
        let d = c.dpf.unwrap();
        assert_eq!(d.session_coloring, fare_bgp::dpf::SessionColoring::Strict);
        assert_eq!(d.routes.len(), 2);
        assert_eq!(d.capability_code, 240);
    }

    #[test]
    fn dpf_non_staged_as_numbering_is_refused() {
        let text = DPF.replace("10.1.0.6, remote_as: 65100", "10.1.0.6, remote_as: 65101");
        let e = load_text(&text).unwrap_err();
        assert!(e.problem.contains("strictly staged"), "{e}");
        assert_eq!(e.line, Some(5), "{e}");
        // Without a backup color the numbering does not matter.
        let text = text.replace("primary: 1, backup: 2", "color: 1");
        load_text(&text).unwrap();
    }

    #[test]
    fn dpf_bad_route_coloring_names_the_line() {
        let e = load_text(&DPF.replace("backup: 2", "backup: 1")).unwrap_err();
        assert_eq!(e.line, Some(13), "{e}");
        let e =
            load_text(&DPF.replace("198.51.100.0/24, color", "203.0.113.0/24, color")).unwrap_err();
        assert!(e.problem.contains("not among"), "{e}");
        assert_eq!(e.line, Some(14), "{e}");
    }
}
