//! The data plane trait every backend implements, and what the backends share.
//!
//! The control plane (static config, BGP, the simulator) produces [`Group`]s; a backend
//! turns them into forwarding state. The backends are crates of their own, each depending
//! on this one: `fare-dp-xdp` (aya, Linux hosts), `fare-dp-kernel` (Linux weighted
//! nexthop groups via rtnetlink, the baseline), `fare-dp-p4` (fare.p4 and SAI-P4 over
//! P4Runtime). Here: the trait, its error, the checks every backend makes ([`validate`]),
//! next-hop MACs from the neighbor table ([`neighbors`]), the `none` backend, the ARN
//! receiver's view of any data plane ([`member_control`]) and [`chain`], backends one
//! after another.
//!
//! Contract every backend keeps:
//! - `install` of a prefix that already has a group is a make-before-break replacement:
//!   no packet ever sees a half-written group.
//! - A group never reaches the data plane with zero active members (see `remove`).
//! - `limits` states what one group may hold; the agent reduces every group to it
//!   before `install` (see [`limits`]), so a backend may refuse what exceeds it.

pub mod chain;
pub mod member_control;
pub mod neighbors;

// The data the backends are given, and the rules they share, come from the model.
pub use fare_model::forwarding::{
    dpf, keep_last_active, limits, mac, member_now, BucketStatus, ColorGroup, ColorStatus,
    FlowRule, Group, GroupFit, GroupLimits, GroupMode, GroupStatus, GroupTable, MacAddr, Member,
    MemberError, MemberStatus, TableError, DEFAULT_FLOWLET_GAP_US,
};

use async_trait::async_trait;
use ipnet::IpNet;

#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    #[error("{backend}: {what}")]
    Backend { backend: &'static str, what: String },
    #[error("{backend}: {what}: {source}")]
    Io {
        backend: &'static str,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("group for {prefix} is invalid: {why}")]
    InvalidGroup { prefix: IpNet, why: String },
    #[error("no group for {0}")]
    NoSuchGroup(IpNet),
    /// A member switch the shared rule refuses (the last active member, a member gone).
    #[error(transparent)]
    Member(#[from] MemberError),
}

impl DataplaneError {
    pub fn backend(backend: &'static str, what: impl Into<String>) -> Self {
        DataplaneError::Backend {
            backend,
            what: what.into(),
        }
    }
}

/// Checks what every backend requires of a group before touching the data plane.
pub fn validate(group: &Group) -> Result<(), DataplaneError> {
    let invalid = |why: &str| DataplaneError::InvalidGroup {
        prefix: group.prefix,
        why: why.to_string(),
    };
    if group.members.is_empty() {
        return Err(invalid("no members (remove the group instead)"));
    }
    if group.members.iter().any(|m| m.weight == 0) {
        return Err(invalid("a member has weight 0"));
    }
    Ok(())
}

/// `groups` cut into runs without a repeated prefix, in order: a backend that writes a
/// run in shared batches installs a prefix's second group only after its first, as
/// separate calls would.
pub fn distinct_prefix_runs(groups: &[Group]) -> Vec<&[Group]> {
    let mut runs = Vec::new();
    let mut start = 0;
    while start < groups.len() {
        let mut seen = std::collections::BTreeSet::new();
        let end = groups[start..]
            .iter()
            .position(|g| !seen.insert(g.prefix))
            .map_or(groups.len(), |i| start + i);
        runs.push(&groups[start..end]);
        start = end;
    }
    runs
}

#[async_trait]
pub trait Dataplane: Send {
    /// Short backend name for logs (`xdp`, `kernel`, `p4runtime`, `none`).
    fn name(&self) -> &'static str;

    /// What one group (and each per-color group) may hold here. Default: no limit.
    fn limits(&self) -> GroupLimits {
        GroupLimits::NONE
    }

    /// Installs the group for `group.prefix`, replacing any previous one make-before-break.
    async fn install(&mut self, group: &Group) -> Result<(), DataplaneError>;

    /// Installs several groups of distinct prefixes, one result per group in order. A
    /// backend that can write many groups per request (P4Runtime) overrides it; the
    /// default installs them one by one.
    async fn install_batch(&mut self, groups: &[Group]) -> Vec<Result<(), DataplaneError>> {
        let mut out = Vec::with_capacity(groups.len());
        for g in groups {
            out.push(self.install(g).await);
        }
        out
    }

    /// Removes the group and route for `prefix` (traffic falls back to the kernel stack).
    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError>;

    /// Periodic upkeep, called by the agent's data plane task about once a second: a
    /// backend with a session to a device notices a lost session or mastership and
    /// restores it here. Default: nothing.
    async fn maintain(&mut self) -> Result<(), DataplaneError> {
        Ok(())
    }

    /// Every installed group with its per-member counters and state.
    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError>;

    /// Packets the forwarding program handled, by outcome (`forwarded`, `no_route`, ...),
    /// for backends that count them (XDP). Default: none.
    async fn packet_counters(
        &mut self,
    ) -> Result<std::collections::BTreeMap<&'static str, u64>, DataplaneError> {
        Ok(std::collections::BTreeMap::new())
    }

    /// Marks member `index` of the group for `prefix` removed (`active = false`) or active,
    /// without rewriting the group. A backend refuses to deactivate the last active member.
    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError>;

    /// DPF's per-color groups and flow classification, when this data plane has them
    /// (XDP, fare.p4). None: the agent refuses `dpf.flows` for it at configuration time
    /// and installs a colored route's group alone (every flow then uses every path).
    fn dpf(&mut self) -> Option<&mut dyn Dpf> {
        None
    }

    /// ARN per-flow mode, when this data plane can steer single flows (XDP). None: a
    /// flow-identifier ARN takes out the member instead.
    fn flow_steering(&mut self) -> Option<&mut dyn FlowSteering> {
        None
    }
}

/// What a kind of data plane offers beside installing groups, known before one is
/// opened: the configuration's checks refuse what the configured kind lacks (e.g.
/// `dpf.flows` without DPF). An opened backend's [`Dataplane::dpf`] and
/// [`Dataplane::flow_steering`] answer the same (each backend's tests check it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offers {
    pub dpf: bool,
    pub flow_steering: bool,
}

impl Offers {
    /// What `dp` offers, asked of the backend itself.
    pub fn of(dp: &mut dyn Dataplane) -> Offers {
        Offers {
            dpf: dp.dpf().is_some(),
            flow_steering: dp.flow_steering().is_some(),
        }
    }
}

/// DPF (see [`dpf`]) in a data plane: per-color groups and flow rules.
#[async_trait]
pub trait Dpf: Send {
    /// Installs `group` together with the per-color groups of its prefix,
    /// make-before-break like `Dataplane::install`.
    async fn install_colored(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError>;

    /// Replaces the flow rules (first match gives a packet its color).
    async fn set_flow_rules(&mut self, rules: &[FlowRule]) -> Result<(), DataplaneError>;
}

/// ARN per-flow mode in a data plane.
#[async_trait]
pub trait FlowSteering: Send {
    /// Flows matching `flow` avoid (`avoid`) the members that leave through `interface`,
    /// or may use them again. Ok(false): not this flow (its table is full); the caller
    /// takes out the member instead.
    async fn steer_flow(
        &mut self,
        flow: &fare_arn::codec::FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, DataplaneError>;
}

/// The `none` backend: keeps groups in memory only (control-plane-only nodes, tests).
#[derive(Default)]
pub struct NullDataplane {
    groups: GroupTable,
    limits: GroupLimits,
}

impl NullDataplane {
    pub const OFFERS: Offers = Offers {
        dpf: false,
        flow_steering: false,
    };

    /// A `none` backend that states `limits` and refuses groups beyond them, like a real
    /// data plane (tests of the reduction).
    pub fn with_limits(limits: GroupLimits) -> NullDataplane {
        NullDataplane {
            groups: Default::default(),
            limits,
        }
    }
}

impl From<TableError> for DataplaneError {
    fn from(e: TableError) -> Self {
        match e {
            TableError::NoSuchGroup(prefix) => DataplaneError::NoSuchGroup(prefix),
            TableError::Member(m) => DataplaneError::Member(m),
        }
    }
}

#[async_trait]
impl Dataplane for NullDataplane {
    fn name(&self) -> &'static str {
        "none"
    }

    fn limits(&self) -> GroupLimits {
        self.limits
    }

    async fn install(&mut self, group: &Group) -> Result<(), DataplaneError> {
        validate(group)?;
        if let Some(why) = self.limits.violation(&group.members) {
            return Err(DataplaneError::InvalidGroup {
                prefix: group.prefix,
                why,
            });
        }
        self.groups.install(group);
        Ok(())
    }

    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        Ok(self.groups.remove(prefix)?)
    }

    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
        Ok(self.groups.groups())
    }

    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError> {
        Ok(self.groups.set_member_active(prefix, index, None, active)?)
    }
}
