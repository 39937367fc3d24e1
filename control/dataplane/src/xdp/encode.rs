//! `Group` <-> map rows: replicated-member slots in spray order (from `wcmp`) and one
//! `Member` row per next hop. Pure functions: interface lookups are passed in.

use crate::{validate, DataplaneError, Group, GroupMode, MacAddr, Member};
use fare_common as fc;
use fare_model::wcmp;
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
    }
}

/// Encodes `group`; `egress` resolves an interface name.
pub fn encode(
    group: &Group,
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
    if total > fc::MAX_SLOTS as u64 {
        return Err(invalid(format!(
            "sum of weights {total} exceeds the xdp group size limit {} (reduce the group, \
             e.g. `fare weights --max-group-size {}`)",
            fc::MAX_SLOTS,
            fc::MAX_SLOTS
        )));
    }
    let mut row = fc::Group {
        n_slots: total as u16,
        mode: mode_code(group.mode),
        n_members: group.members.len() as u8,
        ..Default::default()
    };
    let order = wcmp::spray_order(&weights);
    if order.len() != total as usize {
        return Err(invalid(format!(
            "spray order has {} slots for weights summing to {total}",
            order.len()
        )));
    }
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
    let mode = if row.mode == fc::MODE_FLOW {
        GroupMode::Flow
    } else {
        GroupMode::Spray
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
        let g = group(&[3, 3, 4, 4], GroupMode::Flow);
        let e = encode(&g, &mut egress).unwrap();
        assert_eq!(e.group.n_slots, 14);
        assert_eq!(e.group.mode, fc::MODE_FLOW);
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
        assert_eq!(back.mode, GroupMode::Flow);
        let w: Vec<u32> = back.members.iter().map(|m| m.weight).collect();
        assert_eq!(w, [3, 3, 4, 4]);
        assert_eq!(back.members[0].interface, "e1");
    }

    #[test]
    fn limits_are_errors() {
        let too_big = group(&[200, 57], GroupMode::Spray);
        assert!(matches!(
            encode(&too_big, &mut egress),
            Err(DataplaneError::InvalidGroup { .. })
        ));
        let mut no_mac = group(&[1], GroupMode::Spray);
        no_mac.members[0].neighbor_mac = None;
        assert!(encode(&no_mac, &mut egress).is_err());
        let many = group(&[1; 65], GroupMode::Spray);
        assert!(encode(&many, &mut egress).is_err());
    }

    #[test]
    fn same_forwarding_ignores_state() {
        let g = group(&[1, 2], GroupMode::Spray);
        let a = encode(&g, &mut egress).unwrap();
        let mut b = a.clone();
        b.members[0].state = fc::MEMBER_ADMIN_DOWN;
        b.group.generation = 7;
        assert!(a.same_forwarding(&b));
        let c = encode(&group(&[2, 1], GroupMode::Spray), &mut egress).unwrap();
        assert!(!a.same_forwarding(&c));
    }
}
