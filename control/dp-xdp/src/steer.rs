//! ARN per-flow mode in the XDP program (ebpf/fare-xdp/src/steer.rs): flows matching an
//! ARN's flow identifier avoid the port toward its sender; every other flow keeps every
//! member.
//!
//! - FLOW_STEER: the identifier's fields under its Mask -> the port to avoid.
//! - STEER_FILTER: a bit per FLOW_STEER key (`fc::steer_filter_bit`), written after the
//!   key is inserted and cleared after it is removed: the program looks a packet's flow
//!   up in FLOW_STEER only when its bit is set.
//! - STEER_MASKS[0]: the Mask the program builds packet keys with. The program matches one
//!   Mask at a time (more lookups per packet exceed the verifier's budget): while flows of
//!   one Mask are steered, an identifier with another Mask is refused here and the
//!   receiver falls back to removing the member for the identifier's destination.
//! - STEER_GROUPS[(group, port)]: a copy of the group (same members and slots, those via
//!   the port marked removed). Steered packets forward by the copy; like an ARN removal
//!   it never empties the group.

use super::encode::Encoded;
use super::{err, take_map};
use aya::maps::{Array, HashMap, MapData};
use aya::Ebpf;
use fare_arn::codec::{Family, FlowId};
use fare_common::{self as fc, FlowSteerKey, FlowSteerValue, SteerGroupKey};
use fare_dataplane::DataplaneError;
use std::collections::{BTreeMap, HashMap as StdHashMap};
use std::net::IpAddr;

/// The program's key for a flow identifier: masked fields, addresses as words in packet
/// order, ports as source << 16 | destination.
pub fn key_of(flow: &FlowId) -> FlowSteerKey {
    let words = |a: Option<IpAddr>| -> [u32; 4] {
        match a {
            None => [0; 4],
            Some(IpAddr::V4(v4)) => [u32::from_ne_bytes(v4.octets()), 0, 0, 0],
            Some(IpAddr::V6(v6)) => {
                let o = v6.octets();
                let w = |i: usize| u32::from_ne_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
                [w(0), w(4), w(8), w(12)]
            }
        }
    };
    FlowSteerKey {
        mask: u32::from(flow.mask()),
        family: match flow.family {
            Family::Ipv4 => 4,
            Family::Ipv6 => 6,
        },
        protocol: flow.protocol.map_or(0, u32::from),
        ports: (u32::from(flow.src_port.unwrap_or(0)) << 16)
            | u32::from(flow.dst_port.unwrap_or(0)),
        src: words(flow.src),
        dst: words(flow.dst),
    }
}

/// Whether `group` gets a steered copy for flows that avoid `ifindex`: some member
/// leaves there and some other does not.
pub fn needs_copy(group: &Encoded, ifindex: u32) -> bool {
    let via = group
        .members
        .iter()
        .filter(|m| m.ifindex == ifindex)
        .count();
    via != 0 && via != group.members.len()
}

/// The copy of `group` for flows that avoid `ifindex`, its members' states from the
/// group's current ones (`states`, see [`copy_states`]).
pub fn steered_copy(group: &Encoded, states: &[u32], ifindex: u32) -> Encoded {
    let mut copy = group.clone();
    let ifindexes: Vec<u32> = copy.members.iter().map(|m| m.ifindex).collect();
    for (m, s) in copy
        .members
        .iter_mut()
        .zip(copy_states(states, &ifindexes, ifindex))
    {
        m.state = s;
    }
    copy
}

/// Member states of a steered copy from the group's (`states`) and egress ports: those
/// through `port` are marked removed, unless no other member would be left in service
/// (then the copy forwards like the group: never emptied).
pub fn copy_states(states: &[u32], ifindexes: &[u32], port: u32) -> Vec<u32> {
    let others_active = states
        .iter()
        .zip(ifindexes)
        .any(|(s, i)| *i != port && *s == 0);
    states
        .iter()
        .zip(ifindexes)
        .map(|(s, i)| {
            if *i == port && others_active {
                s | fc::MEMBER_REMOVED_BY_ARN
            } else {
                *s
            }
        })
        .collect()
}

/// STEER_FILTER's words for `keys`: the bit of every key set (`fc::steer_filter_bit`).
pub fn filter_of<'a>(keys: impl IntoIterator<Item = &'a FlowSteerKey>) -> Vec<u32> {
    let mut words = vec![0u32; fc::STEER_FILTER_WORDS as usize];
    for k in keys {
        let bit = fc::steer_filter_bit(k);
        words[(bit >> 5) as usize] |= 1 << (bit & 31);
    }
    words
}

pub struct SteerMaps {
    flows: HashMap<MapData, FlowSteerKey, FlowSteerValue>,
    masks: Array<MapData, u32>,
    groups: HashMap<MapData, SteerGroupKey, u32>,
    /// None: an object without the filter (an earlier build's).
    filter: Option<Array<MapData, u32>>,
    /// What `filter` holds.
    filter_words: Vec<u32>,
    /// Steered flows -> avoided port.
    pub steered: StdHashMap<FlowSteerKey, u32>,
    /// (group, port) -> its steered copy's group id.
    pub copies: BTreeMap<(u32, u32), u32>,
}

impl SteerMaps {
    /// Takes the maps and clears what an earlier agent left (its receiver's state is gone
    /// with it, so nothing would ever release those flows; the copies' group ids are not
    /// referenced by any route, so the id allocator treats them as free).
    pub fn take(ebpf: &mut Ebpf) -> Result<SteerMaps, DataplaneError> {
        let mut m = SteerMaps {
            flows: take_map(ebpf, fc::FLOW_STEER)?,
            masks: take_map(ebpf, fc::STEER_MASKS)?,
            groups: take_map(ebpf, fc::STEER_GROUPS)?,
            filter: take_map(ebpf, fc::STEER_FILTER).ok(),
            filter_words: vec![0; fc::STEER_FILTER_WORDS as usize],
            steered: StdHashMap::new(),
            copies: BTreeMap::new(),
        };
        let _ = m.masks.set(0, 0, 0);
        if let Some(filter) = &mut m.filter {
            for i in 0..fc::STEER_FILTER_WORDS {
                let _ = filter.set(i, 0, 0);
            }
        }
        let keys: Vec<FlowSteerKey> = m.flows.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = m.flows.remove(&k);
        }
        let keys: Vec<SteerGroupKey> = m.groups.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = m.groups.remove(&k);
        }
        Ok(m)
    }

    /// The Mask in use (0: none).
    pub fn mask(&self) -> u32 {
        self.steered.keys().next().map_or(0, |k| k.mask)
    }

    /// Steers `key` away from `ifindex`; false when another Mask is in use.
    pub fn add(&mut self, key: FlowSteerKey, ifindex: u32) -> Result<bool, DataplaneError> {
        let mask = self.mask();
        if mask != 0 && mask != key.mask {
            return Ok(false);
        }
        let value = FlowSteerValue {
            ifindex,
            _pad: 0,
            since_ns: super::queues::monotonic_ns(),
        };
        self.flows
            .insert(key, value, 0)
            .map_err(|e| err(format!("FLOW_STEER: {e}")))?;
        self.steered.insert(key, ifindex);
        // After the entry: a packet that sees the bit finds the entry.
        self.write_filter()?;
        if mask == 0 {
            self.masks
                .set(0, key.mask, 0)
                .map_err(|e| err(format!("STEER_MASKS: {e}")))?;
        }
        Ok(true)
    }

    /// Releases `key`; true when it was steered.
    pub fn remove(&mut self, key: &FlowSteerKey) -> bool {
        if self.steered.remove(key).is_none() {
            return false;
        }
        let _ = self.flows.remove(key);
        // After the entry: a packet that still sees the bit only misses in FLOW_STEER.
        if let Err(e) = self.write_filter() {
            tracing::warn!("xdp: {e} (a set bit only costs its flows a lookup)");
        }
        if self.steered.is_empty() {
            let _ = self.masks.set(0, 0, 0);
        }
        true
    }

    /// Brings STEER_FILTER to the steered keys, writing the words that change.
    fn write_filter(&mut self) -> Result<(), DataplaneError> {
        let Some(filter) = &mut self.filter else {
            return Ok(());
        };
        let words = filter_of(self.steered.keys());
        for (i, (&new, old)) in words.iter().zip(self.filter_words.iter_mut()).enumerate() {
            if new != *old {
                filter
                    .set(i as u32, new, 0)
                    .map_err(|e| err(format!("STEER_FILTER[{i}]: {e}")))?;
                *old = new;
            }
        }
        Ok(())
    }

    /// Ports some steered flow avoids.
    pub fn ports(&self) -> Vec<u32> {
        let mut p: Vec<u32> = self.steered.values().copied().collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    pub fn set_copy(&mut self, group: u32, ifindex: u32, copy: u32) -> Result<(), DataplaneError> {
        self.groups
            .insert(SteerGroupKey { group, ifindex }, copy, 0)
            .map_err(|e| err(format!("STEER_GROUPS: {e}")))?;
        self.copies.insert((group, ifindex), copy);
        Ok(())
    }

    /// Forgets the copy of (group, port); returns its group id to release.
    pub fn drop_copy(&mut self, group: u32, ifindex: u32) -> Option<u32> {
        let _ = self.groups.remove(&SteerGroupKey { group, ifindex });
        self.copies.remove(&(group, ifindex))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_only_masked_fields_in_packet_order() {
        let flow = FlowId {
            family: Family::Ipv4,
            protocol: Some(17),
            src: None,
            dst: Some("192.0.2.7".parse().expect("addr")),
            src_port: None,
            dst_port: Some(4791),
        };
        let k = key_of(&flow);
        assert_eq!(k.mask, 0x10 | 0x04 | 0x01);
        assert_eq!(k.family, 4);
        assert_eq!(k.protocol, 17);
        assert_eq!(k.ports, 4791);
        assert_eq!(k.dst[0].to_ne_bytes(), [192, 0, 2, 7]);
        assert_eq!(k.src, [0; 4]);
    }

    #[test]
    fn the_filter_has_the_bit_of_every_steered_key() {
        let keys: Vec<FlowSteerKey> = (0..100u32)
            .map(|i| FlowSteerKey {
                mask: 0x15,
                family: 4,
                protocol: 17,
                ports: 4791 + i,
                dst: [0x0702_00c0 + i, 0, 0, 0],
                ..FlowSteerKey::default()
            })
            .collect();
        let words = filter_of(&keys);
        assert_eq!(words.len(), fc::STEER_FILTER_WORDS as usize);
        for k in &keys {
            let bit = fc::steer_filter_bit(k);
            assert!(bit < 32 * fc::STEER_FILTER_WORDS);
            assert_ne!(words[(bit >> 5) as usize] & (1 << (bit & 31)), 0);
        }
        // Distinct keys spread: 100 keys set nearly 100 of the 65,536 bits.
        let set: u32 = words.iter().map(|w| w.count_ones()).sum();
        assert!((95..=100).contains(&set), "{set} bits set");
        assert!(filter_of(&[]).iter().all(|&w| w == 0));
    }

    #[test]
    fn copy_marks_the_avoided_port_removed_and_needs_another() {
        let member = |ifindex| fc::Member {
            ifindex,
            ..fc::Member::default()
        };
        let g = Encoded {
            group: fc::Group::default(),
            members: vec![member(3), member(4), member(3)],
        };
        assert!(needs_copy(&g, 3));
        let c = steered_copy(&g, &[0, 0, 0], 3);
        let states: Vec<u32> = c.members.iter().map(|m| m.state).collect();
        assert_eq!(
            states,
            vec![fc::MEMBER_REMOVED_BY_ARN, 0, fc::MEMBER_REMOVED_BY_ARN]
        );
        assert!(!needs_copy(&g, 9));
        let only = Encoded {
            group: fc::Group::default(),
            members: vec![member(3)],
        };
        assert!(!needs_copy(&only, 3));
        // The other member out: the copy keeps the avoided one in service.
        let r = fc::MEMBER_REMOVED_BY_ARN;
        let a = fc::MEMBER_ADMIN_DOWN;
        assert_eq!(copy_states(&[0, 0], &[3, 4], 3), vec![r, 0]);
        assert_eq!(copy_states(&[0, a], &[3, 4], 3), vec![0, a]);
    }
}
