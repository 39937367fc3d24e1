//! `fare:`: how path bandwidth becomes weights, group modes and flowlets, role, subtypes.

use super::*;

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

pub(super) fn default_true() -> bool {
    true
}

pub use fare_dataplane::DEFAULT_FLOWLET_GAP_US;
/// Largest flowlet gap: beyond a second flowlets are flows.
pub const MAX_FLOWLET_GAP_US: u32 = 1_000_000;

pub(super) fn default_flowlet_gap_us() -> u32 {
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

pub(super) fn default_role() -> fare_model::topology::Role {
    fare_model::topology::Role::Leaf
}

pub(super) fn default_subtype() -> u8 {
    fare_bgp::community::DEFAULT_PATH_BANDWIDTH_SUBTYPE
}

pub(super) fn default_fib_suppress_subtype() -> u8 {
    fare_bgp::community::DEFAULT_FIB_SUPPRESS_SUBTYPE
}

pub(super) fn default_upa_subtype() -> u8 {
    fare_bgp::packet::upa::DEFAULT_UPA_SUBTYPE
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
    pub(super) fn validate_flowlets(&self, path: &Path, text: &str) -> Result<(), FileError> {
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
}
