//! Data plane backends behind one trait.
//!
//! The control plane (static config, BGP, the simulator) produces [`Group`]s; a backend
//! turns them into forwarding state: `xdp` (aya, Linux hosts), `kernel` (Linux weighted
//! nexthop groups via rtnetlink, the baseline), `p4rt` (P4Runtime over gRPC).
//!
//! Contract every backend keeps:
//! - `install` of a prefix that already has a group is a make-before-break replacement:
//!   no packet ever sees a half-written group.
//! - A group never reaches the data plane with zero active members (see `remove`).
//! - `limits` states what one group may hold; the agent reduces every group to it
//!   before `install` (see [`limits`]), so a backend may refuse what exceeds it.

pub mod dpf;
pub mod host_routes;
pub mod kernel;
pub mod limits;
pub mod mac;
pub mod p4rt;
pub mod xdp;

pub use dpf::{ColorGroup, FlowRule};
pub use limits::{GroupFit, GroupLimits};
pub use mac::MacAddr;

use async_trait::async_trait;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// How a group spreads traffic over its members.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupMode {
    /// Per packet: each window of sum(weights) packets follows the weights exactly.
    #[default]
    Spray,
    /// Per flow: 5-tuple hash onto the replicated members; a flow stays on one member.
    Flow,
}

/// One member of a WCMP group: an egress interface toward one neighbor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// What the member points at, for display: the neighbor address, or its MAC for
    /// static members.
    pub via: String,
    /// Egress interface name (for `p4rt`: a key of the `ports` map).
    pub interface: String,
    /// Next-hop address (BGP neighbor); the kernel backend needs it.
    pub next_hop: Option<IpAddr>,
    /// Neighbor MAC; the XDP and P4 backends rewrite the destination MAC to it.
    /// When absent, the backend resolves `next_hop` through the neighbor table.
    pub neighbor_mac: Option<MacAddr>,
    pub weight: u32,
    /// Path bandwidth the weight came from (informational).
    pub bandwidth_gbps: f64,
}

/// A WCMP group for one destination prefix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub prefix: IpNet,
    pub mode: GroupMode,
    pub members: Vec<Member>,
}

/// Counters and state of one member as the data plane reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    pub packets: u64,
    pub bytes: u64,
    /// False while the member is removed (by an ARN, or a watched port is down).
    pub active: bool,
}

/// A group as installed, with one status per member (same order as `group.members`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupStatus {
    pub group: Group,
    pub members: Vec<MemberStatus>,
    /// DPF: the route's per-color groups with their own counters (backends that forward
    /// by color; empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub colors: Vec<ColorStatus>,
    /// Installed size, limit and reduction (filled in by the agent's data plane task;
    /// None from a backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<GroupFit>,
}

/// One per-color group of a route as installed: its members and their counters (same
/// order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColorStatus {
    pub color: u32,
    pub members: Vec<Member>,
    pub status: Vec<MemberStatus>,
    /// As `GroupStatus::fit`, for this color's group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<GroupFit>,
}

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
    /// The one member still forwarding for a prefix is never taken out (an ARN or an
    /// admin change would leave the prefix without a path): see [`keep_last_active`].
    #[error("{prefix}: refusing to deactivate the last active member ({index})")]
    LastActiveMember { prefix: IpNet, index: usize },
    /// The member asked for (by what it points at) is no longer in the group: it was
    /// re-installed since the caller read it.
    #[error("{prefix}: no member via {via} (the group changed)")]
    NoSuchMember { prefix: IpNet, via: String },
}

/// Which member a caller means: the one whose `via` is `via` in the group as installed
/// now (`members`: their `via`s), wherever it moved since the caller read the group;
/// `index` itself without a `via` or an installed group (the backend then judges it).
pub fn member_now<'a>(
    prefix: IpNet,
    index: usize,
    via: Option<&str>,
    members: Option<impl IntoIterator<Item = &'a str>>,
) -> Result<usize, DataplaneError> {
    match (via, members) {
        (Some(v), Some(members)) => {
            members
                .into_iter()
                .position(|m| m == v)
                .ok_or_else(|| DataplaneError::NoSuchMember {
                    prefix,
                    via: v.to_string(),
                })
        }
        _ => Ok(index),
    }
}

/// The rule every data plane applies before deactivating a member: the group must keep
/// another active one. `active[i]` is member i's current state; setting member `index`
/// active is always allowed.
pub fn keep_last_active(
    prefix: IpNet,
    active: &[bool],
    index: usize,
    set_active: bool,
) -> Result<(), DataplaneError> {
    let others = active.iter().enumerate().any(|(i, a)| i != index && *a);
    if set_active || others {
        Ok(())
    } else {
        Err(DataplaneError::LastActiveMember { prefix, index })
    }
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

    /// Marks member `index` of the group for `prefix` removed (`active = false`) or active,
    /// without rewriting the group. A backend refuses to deactivate the last active member.
    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError>;

    /// ARN per-flow mode: flows matching `flow` avoid (`avoid`) the members that leave
    /// through `interface`, or may use them again. Ok(false): this data plane cannot
    /// steer single flows (the caller removes the member instead).
    async fn steer_flow(
        &mut self,
        flow: &crate::arn::codec::FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, DataplaneError> {
        let _ = (flow, interface, avoid);
        Ok(false)
    }

    /// DPF (see [`dpf`]): installs `group` together with the per-color groups of its
    /// prefix, make-before-break like `install`. Backends without per-color forwarding
    /// install `group` alone (every flow then uses every active path).
    async fn install_colored(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError> {
        let _ = colors;
        self.install(group).await
    }

    /// DPF flow rules (first match gives a packet its color). Backends without flow
    /// classification accept only an empty list.
    async fn set_flow_rules(&mut self, rules: &[FlowRule]) -> Result<(), DataplaneError> {
        if rules.is_empty() {
            Ok(())
        } else {
            Err(DataplaneError::backend(
                self.name(),
                "this data plane has no DPF flow classification (use kind: xdp or p4runtime)",
            ))
        }
    }
}

/// The `none` backend: keeps groups in memory only (control-plane-only nodes, tests).
#[derive(Default)]
pub struct NullDataplane {
    groups: std::collections::BTreeMap<IpNet, GroupStatus>,
    limits: GroupLimits,
}

impl NullDataplane {
    /// A `none` backend that states `limits` and refuses groups beyond them, like a real
    /// data plane (tests of the reduction).
    pub fn with_limits(limits: GroupLimits) -> NullDataplane {
        NullDataplane {
            groups: Default::default(),
            limits,
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
        let members = vec![
            MemberStatus {
                active: true,
                ..Default::default()
            };
            group.members.len()
        ];
        self.groups.insert(
            group.prefix,
            GroupStatus {
                group: group.clone(),
                members,
                colors: Vec::new(),
                fit: None,
            },
        );
        Ok(())
    }

    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        self.groups
            .remove(&prefix)
            .map(|_| ())
            .ok_or(DataplaneError::NoSuchGroup(prefix))
    }

    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
        Ok(self.groups.values().cloned().collect())
    }

    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError> {
        let status = self
            .groups
            .get_mut(&prefix)
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        let states: Vec<bool> = status.members.iter().map(|m| m.active).collect();
        let member = status
            .members
            .get_mut(index)
            .ok_or_else(|| DataplaneError::backend("none", format!("no member {index}")))?;
        keep_last_active(prefix, &states, index, active)?;
        member.active = active;
        Ok(())
    }
}

#[cfg(test)]
mod last_active_rule {
    use super::*;

    #[test]
    fn the_last_forwarding_member_stays() {
        let p: IpNet = "10.0.0.0/24".parse().expect("prefix");
        // (current states, member, set active, allowed)
        let table: &[(&[bool], usize, bool, bool)] = &[
            (&[true, true], 0, false, true),
            (&[true, false], 0, false, false),
            (&[false, true], 0, false, true),
            (&[true], 0, false, false),
            (&[false, false], 1, true, true),
            (&[true, false, false], 0, true, true),
            (&[false, false, true], 1, false, true),
        ];
        for &(states, index, set, allowed) in table {
            let r = keep_last_active(p, states, index, set);
            assert_eq!(r.is_ok(), allowed, "{states:?} {index} -> {set}");
            if let Err(e) = r {
                assert!(
                    matches!(e, DataplaneError::LastActiveMember { index: i, .. } if i == index)
                );
            }
        }
    }
}
