//! `dataplane:`: which data plane, its keys, and what it offers.

use super::*;

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

impl AgentConfig {
    /// `dataplane.profile: sai` (SAI-P4 switches hash flows and have no per-color groups):
    /// spray mode and DPF are refused here rather than at every install.
    pub(super) fn validate_sai(&self, path: &Path, text: &str) -> Result<(), FileError> {
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
}
