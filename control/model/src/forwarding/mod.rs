//! What the control plane hands to a data plane, and the rules every data plane keeps:
//! groups and their members, member state, DPF colors and flow rules, group-size limits
//! and their reduction. Pure data and functions; the backends live in `fare-dataplane`,
//! the protocols (BGP, ARN) produce and change these.

pub mod dpf;
pub mod limits;
pub mod mac;
pub mod table;

pub use dpf::{ColorGroup, FlowRule};
pub use limits::{GroupFit, GroupLimits};
pub use mac::MacAddr;
pub use table::{GroupTable, TableError};

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
    /// Per flowlet: a flow keeps its member while its packets come closer together than
    /// the flowlet gap; the first packet after a longer pause picks a member by weight
    /// again, so weight changes apply to new flowlets only (data planes with per-flow
    /// state: XDP, BMv2).
    Flowlet,
}

/// Flowlet mode's default idle gap, in microseconds: CONGA's (Alizadeh et al., SIGCOMM
/// 2014). Longer than the delay skew of a fabric's paths (a few tens of us unloaded,
/// more under queueing), so that a flowlet moved to another path does not overtake its
/// predecessor, yet short enough that a TCP or RoCE flow pauses that long often (ACK
/// clocking, window and rate limits).
pub const DEFAULT_FLOWLET_GAP_US: u32 = 500;

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
    /// Flow mode's resilient bucket table, when the data plane keeps one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<BucketStatus>,
}

/// A resilient group's bucket table as the data plane holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketStatus {
    /// Buckets in the table.
    pub size: u32,
    /// Buckets per member (same order as the group's members).
    pub per_member: Vec<u32>,
    /// Buckets whose member changed at the group's last change (None: not known, e.g. a
    /// group adopted from a previous agent).
    pub moved: Option<u32>,
    /// Who picks the buckets: `fare` (`fare_model::resilient`) or `kernel` (Linux's own
    /// resilient-group algorithm).
    pub assigned_by: String,
}

impl BucketStatus {
    /// Counts per member of a bucket -> member table (indices past `members` count nowhere).
    pub fn count(table: &[usize], members: usize) -> Vec<u32> {
        let mut counts = vec![0u32; members];
        for &m in table {
            if let Some(c) = counts.get_mut(m) {
                *c += 1;
            }
        }
        counts
    }
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

/// Why a member cannot be switched as asked: the one rule every data plane and the ARN
/// receiver share.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemberError {
    /// The one member still forwarding for a prefix is never taken out (an ARN or an
    /// admin change would leave the prefix without a path): see [`keep_last_active`].
    #[error("{prefix}: refusing to deactivate the last active member ({index})")]
    LastActiveMember { prefix: IpNet, index: usize },
    /// The member asked for (by what it points at) is no longer in the group: it was
    /// re-installed since the caller read it.
    #[error("{prefix}: no member via {via} (the group changed)")]
    NoSuchMember { prefix: IpNet, via: String },
    /// The group has no member at the index asked for.
    #[error("{prefix} has no member {index}")]
    NoSuchIndex { prefix: IpNet, index: usize },
}

/// A member as a protocol names it: member `index` of the group for `prefix` as the
/// caller read it, the one whose `via` is `via` (which [`member_now`] finds again in the
/// group installed now).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberRef<'a> {
    pub prefix: IpNet,
    pub index: usize,
    pub via: &'a str,
}

/// Which member a caller means: the one whose `via` is `via` in the group as installed
/// now (`members`: their `via`s), wherever it moved since the caller read the group;
/// `index` itself without a `via` or an installed group (the backend then judges it).
pub fn member_now<'a>(
    prefix: IpNet,
    index: usize,
    via: Option<&str>,
    members: Option<impl IntoIterator<Item = &'a str>>,
) -> Result<usize, MemberError> {
    match (via, members) {
        (Some(v), Some(members)) => {
            members
                .into_iter()
                .position(|m| m == v)
                .ok_or_else(|| MemberError::NoSuchMember {
                    prefix,
                    via: v.to_string(),
                })
        }
        _ => Ok(index),
    }
}

/// The rule every data plane applies before switching a member: the member must exist,
/// and before deactivating it the group must keep another active one. `active[i]` is
/// member i's current state; setting an existing member `index` active is always allowed.
pub fn keep_last_active(
    prefix: IpNet,
    active: &[bool],
    index: usize,
    set_active: bool,
) -> Result<(), MemberError> {
    if index >= active.len() {
        return Err(MemberError::NoSuchIndex { prefix, index });
    }
    let others = active.iter().enumerate().any(|(i, a)| i != index && *a);
    if set_active || others {
        Ok(())
    } else {
        Err(MemberError::LastActiveMember { prefix, index })
    }
}

#[cfg(test)]
mod bucket_counts {
    use super::BucketStatus;

    /// Buckets per member of a table by hand; an index past the members counts nowhere.
    #[test]
    fn counts_per_member_by_hand() {
        assert_eq!(BucketStatus::count(&[0, 1, 1, 2, 1, 0, 7], 3), [2, 3, 1]);
        assert_eq!(BucketStatus::count(&[], 2), [0, 0]);
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
            (&[true, true], 2, true, false),
            (&[true, true], 2, false, false),
            (&[], 0, true, false),
        ];
        for &(states, index, set, allowed) in table {
            let r = keep_last_active(p, states, index, set);
            assert_eq!(r.is_ok(), allowed, "{states:?} {index} -> {set}");
            if let Err(e) = r {
                if index < states.len() {
                    assert!(
                        matches!(e, MemberError::LastActiveMember { index: i, .. } if i == index)
                    );
                } else {
                    assert_eq!(e, MemberError::NoSuchIndex { prefix: p, index });
                }
            }
        }
    }
}
