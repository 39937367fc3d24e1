//! `Group` <-> map rows: slots and one `Member` row per next hop. Pure functions:
//! interface lookups are passed in.
//!
//! Spray mode: replicated members in spray order (from `wcmp`), one slot per unit of
//! weight (the cursor walks them). Flow mode: a resilient table of all `MAX_SLOTS` slots
//! (`fare_model::resilient`; the program picks `slots[hash * 256 >> 32]` as before), and
//! a replacement reassigns only the buckets the new weights require, starting from the
//! group's installed table. Flowlet mode: the same table; a new flowlet picks a random
//! slot of it (the program keeps each flow's member in FLOWLETS).

use fare_common as fc;
use fare_dataplane::{validate, BucketStatus, DataplaneError, Group, GroupMode, MacAddr, Member};
use fare_model::{resilient, wcmp};
use ipnet::IpNet;

/// What the data plane needs to know about an egress interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Egress {
    pub ifindex: u32,
    pub mac: [u8; 6],
}

/// A group as map rows: GROUPS[gid] and MEMBERS[gid * 64 + i].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    pub group: fc::Group,
    pub members: Vec<fc::Member>,
}

impl Encoded {
    /// True when both forward identically (state and generation aside).
    pub fn same_forwarding(&self, other: &Encoded) -> bool {
        let a = &self.group;
        let b = &other.group;
        a.n_slots == b.n_slots
            && a.mode == b.mode
            && a.n_members == b.n_members
            && a.slots == b.slots
            && self.members.len() == other.members.len()
            && self.members.iter().zip(&other.members).all(|(x, y)| {
                x.ifindex == y.ifindex && x.src_mac == y.src_mac && x.dst_mac == y.dst_mac
            })
    }
}

pub fn mode_code(mode: GroupMode) -> u8 {
    match mode {
        GroupMode::Spray => fc::MODE_SPRAY,
        GroupMode::Flow => fc::MODE_FLOW,
        GroupMode::Flowlet => fc::MODE_FLOWLET,
    }
}

/// Buckets of a flow-mode group's table: every slot of the row.
pub const FLOW_BUCKETS: usize = fc::MAX_SLOTS;

/// Encodes `group`; `previous` is the group installed for the same prefix and its row
/// (a flow-mode table moves only what it must from there); `egress` resolves an
/// interface name.
pub fn encode(
    group: &Group,
    previous: Option<(&Group, &fc::Group)>,
    egress: &mut dyn FnMut(&str) -> Result<Egress, DataplaneError>,
) -> Result<Encoded, DataplaneError> {
    validate(group)?;
    let invalid = |why: String| DataplaneError::InvalidGroup {
        prefix: group.prefix,
        why,
    };
    if group.members.len() > fc::MAX_MEMBERS_PER_GROUP as usize {
        return Err(invalid(format!(
            "{} members; the xdp data plane holds at most {}",
            group.members.len(),
            fc::MAX_MEMBERS_PER_GROUP
        )));
    }
    let weights: Vec<u32> = group.members.iter().map(|m| m.weight).collect();
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if total > fc::MAX_SLOTS as u64 && group.mode == GroupMode::Spray {
        return Err(invalid(format!(
            "sum of weights {total} exceeds the xdp group size limit {} (reduce the group, \
             e.g. `fare weights --max-group-size {}`)",
            fc::MAX_SLOTS,
            fc::MAX_SLOTS
        )));
    }
    let order = match group.mode {
        GroupMode::Spray => wcmp::spray_order(&weights),
        GroupMode::Flow | GroupMode::Flowlet => flow_table(group, &weights, previous),
    };
    // All weights 0: no slot, as before (the program finds no member).
    if order.len() > fc::MAX_SLOTS {
        return Err(invalid(format!(
            "{} slots for weights summing to {total}",
            order.len()
        )));
    }
    let mut row = fc::Group {
        n_slots: order.len() as u16,
        mode: mode_code(group.mode),
        n_members: group.members.len() as u8,
        ..Default::default()
    };
    for (slot, member) in row.slots.iter_mut().zip(&order) {
        *slot = *member as u8;
    }
    let mut members = Vec::with_capacity(group.members.len());
    for m in &group.members {
        let mac = m.neighbor_mac.ok_or_else(|| {
            invalid(format!(
                "member via {} on {} has no neighbor MAC (the xdp backend needs one)",
                m.via, m.interface
            ))
        })?;
        let out = egress(&m.interface)?;
        members.push(fc::Member {
            ifindex: out.ifindex,
            state: 0,
            src_mac: out.mac,
            dst_mac: mac.0,
        });
    }
    Ok(Encoded {
        group: row,
        members,
    })
}

/// A flow-mode group's bucket table, reassigned from `previous` when that is a flow
/// table of the same size (see [`previous_table`]).
fn flow_table(
    group: &Group,
    weights: &[u32],
    previous: Option<(&Group, &fc::Group)>,
) -> Vec<usize> {
    let before = previous.and_then(|(old, row)| previous_table(old, row, group));
    resilient::reassign(before.as_deref(), weights, FLOW_BUCKETS).table
}

/// The flow table of `row` (installed for `old`) in the member numbering of `group`:
/// members are matched by interface and next hop (or neighbor MAC: an adopted group
/// knows only that); the others are gone (`usize::MAX`). None unless `row` is a flow
/// table of `FLOW_BUCKETS`.
fn previous_table(old: &Group, row: &fc::Group, group: &Group) -> Option<Vec<usize>> {
    if row.mode == fc::MODE_SPRAY || usize::from(row.n_slots) != FLOW_BUCKETS {
        return None;
    }
    let index: Vec<usize> = old
        .members
        .iter()
        .map(|m| {
            group
                .members
                .iter()
                .position(|n| {
                    n.interface == m.interface
                        && (n.via == m.via
                            || (n.neighbor_mac.is_some() && n.neighbor_mac == m.neighbor_mac))
                })
                .unwrap_or(usize::MAX)
        })
        .collect();
    Some(
        row.slots[..FLOW_BUCKETS]
            .iter()
            .map(|&s| index.get(usize::from(s)).copied().unwrap_or(usize::MAX))
            .collect(),
    )
}

/// A flow-mode group's bucket table as `fare show groups` reports it: buckets per member
/// and, when the group replaced `previous` (a flow table too), how many changed member.
/// None for a spray group.
pub fn bucket_status(
    group: &Group,
    row: &fc::Group,
    previous: Option<(&Group, &fc::Group)>,
) -> Option<BucketStatus> {
    if row.mode == fc::MODE_SPRAY {
        return None;
    }
    let table: Vec<usize> = row.slots[..usize::from(row.n_slots).min(fc::MAX_SLOTS)]
        .iter()
        .map(|&s| usize::from(s))
        .collect();
    let moved = previous
        .and_then(|(old, old_row)| previous_table(old, old_row, group))
        .filter(|before| before.len() == table.len())
        .map(|before| before.iter().zip(&table).filter(|(a, b)| a != b).count() as u32);
    Some(BucketStatus {
        size: table.len() as u32,
        per_member: BucketStatus::count(&table, group.members.len()),
        moved,
        assigned_by: "fare".into(),
    })
}

/// Rebuilds a `Group` from its rows (after a restart): weights are slot counts; `via`
/// is the neighbor MAC; what the maps do not hold (next hop, bandwidth) is left empty.
pub fn decode(
    prefix: IpNet,
    row: &fc::Group,
    members: &[fc::Member],
    ifname: &mut dyn FnMut(u32) -> String,
) -> Option<Group> {
    let n_slots = usize::from(row.n_slots);
    if n_slots == 0 || n_slots > fc::MAX_SLOTS || members.len() != usize::from(row.n_members) {
        return None;
    }
    let mut weights = vec![0u32; members.len()];
    for &slot in &row.slots[..n_slots] {
        *weights.get_mut(usize::from(slot))? += 1;
    }
    let mode = match row.mode {
        fc::MODE_FLOW => GroupMode::Flow,
        fc::MODE_FLOWLET => GroupMode::Flowlet,
        _ => GroupMode::Spray,
    };
    let members = members
        .iter()
        .zip(weights)
        .map(|(m, weight)| Member {
            via: MacAddr(m.dst_mac).to_string(),
            interface: ifname(m.ifindex),
            next_hop: None,
            neighbor_mac: Some(MacAddr(m.dst_mac)),
            weight,
            bandwidth_gbps: 0.0,
        })
        .collect();
    Some(Group {
        prefix,
        mode,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(weights: &[u32], mode: GroupMode) -> Group {
        Group {
            prefix: "198.18.0.0/16".parse().unwrap(),
            mode,
            members: weights
                .iter()
                .enumerate()
                .map(|(i, &w)| Member {
                    via: format!("02:00:00:00:00:0{}", i + 1),
                    interface: format!("e{}", i + 1),
                    next_hop: None,
                    neighbor_mac: Some(MacAddr([2, 0, 0, 0, 0, i as u8 + 1])),
                    weight: w,
                    bandwidth_gbps: 0.0,
                })
                .collect(),
        }
    }

    fn egress(name: &str) -> Result<Egress, DataplaneError> {
        let n: u32 = name[1..].parse().unwrap();
        Ok(Egress {
            ifindex: 10 + n,
            mac: [2, 0xaa, 0, 0, 0, n as u8],
        })
    }

    #[test]
    fn slots_follow_weights_and_round_trip() {
        let g = group(&[3, 3, 4, 4], GroupMode::Spray);
        let e = encode(&g, None, &mut egress).unwrap();
        assert_eq!(e.group.n_slots, 14);
        assert_eq!(e.group.mode, fc::MODE_SPRAY);
        for (i, w) in [3, 3, 4, 4].into_iter().enumerate() {
            let n = e.group.slots[..14]
                .iter()
                .filter(|&&s| s == i as u8)
                .count();
            assert_eq!(n, w);
        }
        assert_eq!(e.members[2].ifindex, 13);
        assert_eq!(e.members[2].dst_mac, [2, 0, 0, 0, 0, 3]);
        let back = decode(g.prefix, &e.group, &e.members, &mut |i| {
            format!("e{}", i - 10)
        })
        .unwrap();
        assert_eq!(back.mode, GroupMode::Spray);
        let w: Vec<u32> = back.members.iter().map(|m| m.weight).collect();
        assert_eq!(w, [3, 3, 4, 4]);
        assert_eq!(back.members[0].interface, "e1");
    }

    fn slot_counts(row: &fc::Group, members: usize) -> Vec<usize> {
        let mut c = vec![0; members];
        for &s in &row.slots[..usize::from(row.n_slots)] {
            c[usize::from(s)] += 1;
        }
        c
    }

    /// Flow mode: 256 buckets (3:3:4:4 -> 55 55 73 73, by hand in fare_model::resilient);
    /// 3:3:4:3 moves 14, all of member 3's; a member gone from the list gives up exactly
    /// its buckets and the others keep theirs whatever their new index.
    #[test]
    fn flow_tables_move_only_what_they_must() {
        let g = group(&[3, 3, 4, 4], GroupMode::Flow);
        let e = encode(&g, None, &mut egress).unwrap();
        assert_eq!(usize::from(e.group.n_slots), FLOW_BUCKETS);
        assert_eq!(slot_counts(&e.group, 4), [55, 55, 73, 73]);
        let g2 = group(&[3, 3, 4, 3], GroupMode::Flow);
        let e2 = encode(&g2, Some((&g, &e.group)), &mut egress).unwrap();
        assert_eq!(slot_counts(&e2.group, 4), [59, 59, 79, 59]);
        let moved: Vec<(u8, u8)> = e
            .group
            .slots
            .iter()
            .zip(&e2.group.slots)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (*a, *b))
            .collect();
        assert_eq!(moved.len(), 14);
        assert!(moved.iter().all(|&(from, _)| from == 3));
        // What `fare show groups` reports: counts, and the 14 moved (73 - 59).
        let s = bucket_status(&g2, &e2.group, Some((&g, &e.group))).unwrap();
        assert_eq!(s.per_member, [59, 59, 79, 59]);
        assert_eq!((s.size, s.moved), (256, Some(14)));
        assert_eq!(bucket_status(&g, &e.group, None).unwrap().moved, None);
        let spray = group(&[1, 1], GroupMode::Spray);
        let es = encode(&spray, None, &mut egress).unwrap();
        assert_eq!(bucket_status(&spray, &es.group, None), None);
        // Member 1 (e2) leaves: the others are renumbered 0, 1, 2.
        let mut g3 = group(&[3, 3, 4, 3], GroupMode::Flow);
        g3.members.remove(1);
        let e3 = encode(&g3, Some((&g2, &e2.group)), &mut egress).unwrap();
        let renumber = [Some(0u8), None, Some(1), Some(2)];
        for (old, new) in e2.group.slots.iter().zip(&e3.group.slots) {
            if let Some(kept) = renumber[usize::from(*old)] {
                assert_eq!(*new, kept);
            }
        }
        // Too many weights for spray slots are fine as a table; decode reads buckets.
        let big = group(&[200, 100], GroupMode::Flow);
        let eb = encode(&big, None, &mut egress).unwrap();
        assert_eq!(slot_counts(&eb.group, 2), [171, 85]);
        let back = decode(big.prefix, &eb.group, &eb.members, &mut |i| {
            format!("e{}", i - 10)
        })
        .unwrap();
        assert_eq!(back.mode, GroupMode::Flow);
        assert_eq!(
            back.members.iter().map(|m| m.weight).collect::<Vec<_>>(),
            [171, 85]
        );
    }

    #[test]
    fn limits_are_errors() {
        let too_big = group(&[200, 57], GroupMode::Spray);
        assert!(matches!(
            encode(&too_big, None, &mut egress),
            Err(DataplaneError::InvalidGroup { .. })
        ));
        let mut no_mac = group(&[1], GroupMode::Spray);
        no_mac.members[0].neighbor_mac = None;
        assert!(encode(&no_mac, None, &mut egress).is_err());
        let many = group(&[1; 65], GroupMode::Spray);
        assert!(encode(&many, None, &mut egress).is_err());
    }

    #[test]
    fn same_forwarding_ignores_state() {
        let g = group(&[1, 2], GroupMode::Spray);
        let a = encode(&g, None, &mut egress).unwrap();
        let mut b = a.clone();
        b.members[0].state = fc::MEMBER_ADMIN_DOWN;
        b.group.generation = 7;
        assert!(a.same_forwarding(&b));
        let c = encode(&group(&[2, 1], GroupMode::Spray), None, &mut egress).unwrap();
        assert!(!a.same_forwarding(&c));
    }
}
