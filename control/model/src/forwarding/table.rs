//! Groups held in memory under the rules every data plane keeps: what the `none` data
//! plane forwards with (`fare-dataplane`'s `NullDataplane`) and what tests of the
//! protocols that switch members (the ARN receiver) switch.

use super::{keep_last_active, member_now, Group, GroupStatus, MemberError, MemberStatus};
use ipnet::IpNet;
use std::collections::BTreeMap;

/// Why [`GroupTable`] refused a change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("no group for {0}")]
    NoSuchGroup(IpNet),
    /// The shared member rules ([`keep_last_active`], [`member_now`]).
    #[error(transparent)]
    Member(#[from] MemberError),
}

/// Installed groups by prefix, each with one status per member.
#[derive(Clone, Debug, Default)]
pub struct GroupTable {
    groups: BTreeMap<IpNet, GroupStatus>,
}

impl GroupTable {
    /// Installs `group` (replacing any group of its prefix) with every member active and
    /// its counters at zero.
    pub fn install(&mut self, group: &Group) {
        let members = vec![
            MemberStatus {
                active: true,
                ..Default::default()
            };
            group.members.len()
        ];
        let status = GroupStatus {
            group: group.clone(),
            members,
            colors: Vec::new(),
            fit: None,
            buckets: None,
        };
        self.groups.insert(group.prefix, status);
    }

    /// Removes the group of `prefix`.
    pub fn remove(&mut self, prefix: IpNet) -> Result<(), TableError> {
        self.groups
            .remove(&prefix)
            .map(|_| ())
            .ok_or(TableError::NoSuchGroup(prefix))
    }

    /// Every group, by prefix.
    pub fn groups(&self) -> Vec<GroupStatus> {
        self.groups.values().cloned().collect()
    }

    /// Switches member `index` of `prefix` on or off; with `via`, the member whose `via`
    /// it is now ([`member_now`]). Deactivating the last active member is refused
    /// ([`keep_last_active`]).
    pub fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        via: Option<&str>,
        active: bool,
    ) -> Result<(), TableError> {
        let status = self
            .groups
            .get_mut(&prefix)
            .ok_or(TableError::NoSuchGroup(prefix))?;
        let vias = status.group.members.iter().map(|m| m.via.as_str());
        let index = member_now(prefix, index, via, Some(vias))?;
        let states: Vec<bool> = status.members.iter().map(|m| m.active).collect();
        keep_last_active(prefix, &states, index, active)?;
        status.members[index].active = active;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forwarding::{GroupMode, Member};

    fn group(vias: &[&str]) -> Group {
        Group {
            prefix: "10.0.0.0/24".parse().expect("prefix"),
            mode: GroupMode::Spray,
            members: vias
                .iter()
                .map(|v| Member {
                    via: v.to_string(),
                    interface: "lo".into(),
                    next_hop: None,
                    neighbor_mac: None,
                    weight: 1,
                    bandwidth_gbps: 0.0,
                })
                .collect(),
        }
    }

    fn active(t: &GroupTable) -> Vec<bool> {
        t.groups()[0].members.iter().map(|m| m.active).collect()
    }

    #[test]
    fn members_switch_under_the_shared_rules() {
        let g = group(&["a", "b"]);
        let p = g.prefix;
        let mut t = GroupTable::default();
        t.install(&g);
        assert_eq!(active(&t), [true, true]);
        // By via: "b" is member 1 whatever index the caller read.
        t.set_member_active(p, 0, Some("b"), false).expect("b off");
        assert_eq!(active(&t), [true, false]);
        assert_eq!(
            t.set_member_active(p, 0, None, false),
            Err(TableError::Member(MemberError::LastActiveMember {
                prefix: p,
                index: 0
            }))
        );
        assert_eq!(
            t.set_member_active(p, 0, Some("c"), false),
            Err(TableError::Member(MemberError::NoSuchMember {
                prefix: p,
                via: "c".into()
            }))
        );
        assert_eq!(
            t.set_member_active(p, 2, None, true),
            Err(TableError::Member(MemberError::NoSuchIndex {
                prefix: p,
                index: 2
            }))
        );
        // Re-installing resets the members to active.
        t.install(&g);
        assert_eq!(active(&t), [true, true]);
        t.remove(p).expect("installed");
        assert_eq!(t.remove(p), Err(TableError::NoSuchGroup(p)));
        assert_eq!(
            t.set_member_active(p, 0, None, true),
            Err(TableError::NoSuchGroup(p))
        );
    }
}
