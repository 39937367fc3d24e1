//! Linux nexthop objects (`RTM_*NEXTHOP`, linux/nexthop.h) as netlink messages.
//!
//! `netlink-packet-route` (0.34) has no nexthop-object messages, so this module encodes
//! and decodes the few we need: a nexthop (id, gateway, device), a weighted group
//! (ids with u16 weights), hash-threshold or resilient (`NHA_RES_GROUP`: buckets and
//! timers, Linux 5.13+), a resilient group's buckets (`RTM_GETNEXTHOPBUCKET`), and the
//! per-entry packet counters of a group (`NHA_OP_FLAGS = DUMP_STATS`, Linux 6.7+). The `netlink-packet-core` traits let the
//! messages travel over an ordinary `netlink-proto` connection.

use netlink_packet_core::{NetlinkDeserializable, NetlinkHeader, NetlinkSerializable};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const RTM_NEWNEXTHOP: u16 = 104;
pub const RTM_DELNEXTHOP: u16 = 105;
pub const RTM_GETNEXTHOP: u16 = 106;
pub const RTM_NEWNEXTHOPBUCKET: u16 = 116;
pub const RTM_GETNEXTHOPBUCKET: u16 = 118;

const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_GROUP_TYPE: u16 = 3;
const NHA_BLACKHOLE: u16 = 4;
const NHA_OIF: u16 = 5;
const NHA_GATEWAY: u16 = 6;
const NHA_GROUPS: u16 = 9;
const NHA_RES_GROUP: u16 = 12;
const NHA_RES_BUCKET: u16 = 13;
const NHA_OP_FLAGS: u16 = 14;
const NHA_RES_GROUP_BUCKETS: u16 = 1;
const NHA_RES_GROUP_IDLE_TIMER: u16 = 2;
const NHA_RES_GROUP_UNBALANCED_TIMER: u16 = 3;
const NHA_RES_BUCKET_INDEX: u16 = 1;
const NHA_RES_BUCKET_NH_ID: u16 = 3;
/// `NHA_GROUP_TYPE` of a resilient group (`NEXTHOP_GRP_TYPE_RES`).
pub const GROUP_TYPE_RESILIENT: u16 = 1;
const NLA_F_NESTED: u16 = 0x8000;
const NHA_GROUP_STATS: u16 = 15;
const NHA_GROUP_STATS_ENTRY: u16 = 1;
const NHA_GROUP_STATS_ENTRY_ID: u16 = 1;
const NHA_GROUP_STATS_ENTRY_PACKETS: u16 = 2;
/// Ask the kernel to include per-entry group statistics.
pub const NHA_OP_FLAG_DUMP_STATS: u32 = 1;

const NLA_TYPE_MASK: u16 = 0x3fff;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// Largest weight a group entry can carry (u16 weight - 1 on the wire, Linux 6.12+).
pub const MAX_WEIGHT: u32 = 65536;

/// One entry of a nexthop group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    pub id: u32,
    /// 1..=65536.
    pub weight: u32,
}

/// A nexthop attribute (`NHA_*`).
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Id(u32),
    Group(Vec<GroupEntry>),
    /// 0 = multipath (hash-threshold).
    GroupType(u16),
    Blackhole,
    Oif(u32),
    Gateway(IpAddr),
    /// Dump filter: groups only.
    Groups,
    OpFlags(u32),
    /// (entry nexthop id, packets) per group entry.
    GroupStats(Vec<(u32, u64)>),
    /// A resilient group's table and timers.
    ResGroup(ResGroup),
    /// One bucket of a resilient group (bucket dumps).
    ResBucket {
        index: u16,
        nexthop: u32,
    },
    Other(u16, Vec<u8>),
}

/// `NHA_RES_GROUP`: the bucket count and the timers (seconds / USER_HZ, i.e. 1/100 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResGroup {
    pub buckets: u16,
    /// A bucket idle this long may move to an underweight member; 0: at once.
    pub idle_timer: u32,
    /// After this long unbalanced, busy buckets move too; 0: never forced.
    pub unbalanced_timer: u32,
}

/// `struct nhmsg` + attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct NexthopMessage {
    /// `RTM_NEWNEXTHOP`, `RTM_DELNEXTHOP` or `RTM_GETNEXTHOP`.
    pub kind: u16,
    pub family: u8,
    pub scope: u8,
    pub protocol: u8,
    pub flags: u32,
    pub attrs: Vec<Attr>,
}

impl NexthopMessage {
    pub fn new(kind: u16, family: u8, protocol: u8, attrs: Vec<Attr>) -> Self {
        NexthopMessage {
            kind,
            family,
            scope: 0,
            protocol,
            flags: 0,
            attrs,
        }
    }

    /// A single nexthop: `ip nexthop add id ID via GW dev IFINDEX proto P`.
    pub fn nexthop(id: u32, gateway: IpAddr, oif: u32, protocol: u8) -> Self {
        let family = match gateway {
            IpAddr::V4(_) => AF_INET,
            IpAddr::V6(_) => AF_INET6,
        };
        Self::new(
            RTM_NEWNEXTHOP,
            family,
            protocol,
            vec![Attr::Id(id), Attr::Oif(oif), Attr::Gateway(gateway)],
        )
    }

    /// A weighted multipath group: `ip nexthop add id ID group a,wa/b,wb proto P`.
    pub fn group(id: u32, entries: Vec<GroupEntry>, protocol: u8) -> Self {
        // Groups are family AF_UNSPEC.
        Self::new(
            RTM_NEWNEXTHOP,
            0,
            protocol,
            vec![Attr::Id(id), Attr::Group(entries), Attr::GroupType(0)],
        )
    }

    /// A resilient group: `ip nexthop add id ID group a,wa/b,wb type resilient buckets N
    /// idle_timer I unbalanced_timer U proto P`.
    pub fn resilient_group(id: u32, entries: Vec<GroupEntry>, res: ResGroup, protocol: u8) -> Self {
        Self::new(
            RTM_NEWNEXTHOP,
            0,
            protocol,
            vec![
                Attr::Id(id),
                Attr::Group(entries),
                Attr::GroupType(GROUP_TYPE_RESILIENT),
                Attr::ResGroup(res),
            ],
        )
    }

    /// A dump of the buckets of resilient group `id` (`ip nexthop bucket show id ID`).
    pub fn bucket_dump(id: u32) -> Self {
        Self::new(RTM_GETNEXTHOPBUCKET, 0, 0, vec![Attr::Id(id)])
    }

    pub fn delete(id: u32) -> Self {
        Self::new(RTM_DELNEXTHOP, 0, 0, vec![Attr::Id(id)])
    }

    /// A dump of every nexthop object (with group statistics).
    pub fn dump() -> Self {
        Self::new(
            RTM_GETNEXTHOP,
            0,
            0,
            vec![Attr::OpFlags(NHA_OP_FLAG_DUMP_STATS)],
        )
    }

    pub fn id(&self) -> Option<u32> {
        self.attrs.iter().find_map(|a| match a {
            Attr::Id(id) => Some(*id),
            _ => None,
        })
    }

    pub fn group_entries(&self) -> Option<&[GroupEntry]> {
        self.attrs.iter().find_map(|a| match a {
            Attr::Group(g) => Some(g.as_slice()),
            _ => None,
        })
    }

    pub fn gateway(&self) -> Option<IpAddr> {
        self.attrs.iter().find_map(|a| match a {
            Attr::Gateway(g) => Some(*g),
            _ => None,
        })
    }

    pub fn oif(&self) -> Option<u32> {
        self.attrs.iter().find_map(|a| match a {
            Attr::Oif(i) => Some(*i),
            _ => None,
        })
    }

    pub fn res_group(&self) -> Option<ResGroup> {
        self.attrs.iter().find_map(|a| match a {
            Attr::ResGroup(r) => Some(*r),
            _ => None,
        })
    }

    /// (bucket index, nexthop id) of a bucket message.
    pub fn bucket(&self) -> Option<(u16, u32)> {
        self.attrs.iter().find_map(|a| match a {
            Attr::ResBucket { index, nexthop } => Some((*index, *nexthop)),
            _ => None,
        })
    }

    pub fn group_stats(&self) -> Option<&[(u32, u64)]> {
        self.attrs.iter().find_map(|a| match a {
            Attr::GroupStats(s) => Some(s.as_slice()),
            _ => None,
        })
    }
}

fn nla(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len() + (4 - len % 4) % 4, 0);
}

impl Attr {
    fn emit(&self, out: &mut Vec<u8>) {
        match self {
            Attr::Id(v) => nla(out, NHA_ID, &v.to_ne_bytes()),
            Attr::Oif(v) => nla(out, NHA_OIF, &v.to_ne_bytes()),
            Attr::OpFlags(v) => nla(out, NHA_OP_FLAGS, &v.to_ne_bytes()),
            Attr::GroupType(v) => nla(out, NHA_GROUP_TYPE, &v.to_ne_bytes()),
            Attr::Blackhole => nla(out, NHA_BLACKHOLE, &[]),
            Attr::Groups => nla(out, NHA_GROUPS, &[]),
            Attr::Gateway(IpAddr::V4(a)) => nla(out, NHA_GATEWAY, &a.octets()),
            Attr::Gateway(IpAddr::V6(a)) => nla(out, NHA_GATEWAY, &a.octets()),
            Attr::Group(entries) => {
                // struct nexthop_grp { u32 id; u8 weight; u8 weight_high; u16 resvd2; }
                // carrying weight - 1.
                let mut p = Vec::with_capacity(entries.len() * 8);
                for e in entries {
                    let w = e.weight.clamp(1, MAX_WEIGHT) - 1;
                    p.extend_from_slice(&e.id.to_ne_bytes());
                    p.push((w & 0xff) as u8);
                    p.push((w >> 8) as u8);
                    p.extend_from_slice(&[0, 0]);
                }
                nla(out, NHA_GROUP, &p)
            }
            // Only ever received; emitted empty for completeness.
            Attr::GroupStats(_) => nla(out, NHA_GROUP_STATS, &[]),
            Attr::ResGroup(r) => {
                let mut p = Vec::new();
                nla(&mut p, NHA_RES_GROUP_BUCKETS, &r.buckets.to_ne_bytes());
                nla(
                    &mut p,
                    NHA_RES_GROUP_IDLE_TIMER,
                    &r.idle_timer.to_ne_bytes(),
                );
                nla(
                    &mut p,
                    NHA_RES_GROUP_UNBALANCED_TIMER,
                    &r.unbalanced_timer.to_ne_bytes(),
                );
                nla(out, NHA_RES_GROUP | NLA_F_NESTED, &p)
            }
            Attr::ResBucket { index, nexthop } => {
                let mut p = Vec::new();
                nla(&mut p, NHA_RES_BUCKET_INDEX, &index.to_ne_bytes());
                nla(&mut p, NHA_RES_BUCKET_NH_ID, &nexthop.to_ne_bytes());
                nla(out, NHA_RES_BUCKET | NLA_F_NESTED, &p)
            }
            Attr::Other(kind, payload) => nla(out, *kind, payload),
        }
    }
}

/// Iterates over the attributes of `buf`: (type without flags, payload).
/// Stops (with an error) at a length that does not fit.
fn attrs(mut buf: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8]), DecodeError>> {
    std::iter::from_fn(move || {
        if buf.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        let kind = u16::from_ne_bytes([buf[2], buf[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            buf = &[];
            return Some(Err(DecodeError(format!(
                "attribute {kind} has bad length {len}"
            ))));
        }
        let payload = &buf[4..len];
        let next = (len + 3) & !3;
        buf = buf.get(next..).unwrap_or(&[]);
        Some(Ok((kind, payload)))
    })
}

fn u32_of(p: &[u8]) -> Result<u32, DecodeError> {
    p.get(..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_ne_bytes)
        .ok_or_else(|| DecodeError("short u32 attribute".into()))
}

fn u16_of(p: &[u8]) -> Result<u16, DecodeError> {
    p.get(..2)
        .and_then(|b| b.try_into().ok())
        .map(u16::from_ne_bytes)
        .ok_or_else(|| DecodeError("short u16 attribute".into()))
}

/// Netlink `uint`: 4 or 8 bytes.
fn uint_of(p: &[u8]) -> Result<u64, DecodeError> {
    match p.len() {
        4 => Ok(u64::from(u32_of(p)?)),
        8 => Ok(u64::from_ne_bytes(
            p.try_into().map_err(|_| DecodeError("uint".into()))?,
        )),
        n => Err(DecodeError(format!("uint attribute of {n} bytes"))),
    }
}

fn parse_attr(kind: u16, p: &[u8]) -> Result<Attr, DecodeError> {
    Ok(match kind {
        NHA_ID => Attr::Id(u32_of(p)?),
        NHA_OIF => Attr::Oif(u32_of(p)?),
        NHA_OP_FLAGS => Attr::OpFlags(u32_of(p)?),
        NHA_GROUP_TYPE if p.len() >= 2 => Attr::GroupType(u16::from_ne_bytes([p[0], p[1]])),
        NHA_BLACKHOLE => Attr::Blackhole,
        NHA_GROUPS => Attr::Groups,
        NHA_GATEWAY => match p.len() {
            4 => Attr::Gateway(IpAddr::V4(Ipv4Addr::new(p[0], p[1], p[2], p[3]))),
            16 => {
                let o: [u8; 16] = p.try_into().map_err(|_| DecodeError("gateway".into()))?;
                Attr::Gateway(IpAddr::V6(Ipv6Addr::from(o)))
            }
            n => return Err(DecodeError(format!("gateway of {n} bytes"))),
        },
        NHA_GROUP => Attr::Group(
            p.chunks_exact(8)
                .map(|c| GroupEntry {
                    id: u32::from_ne_bytes([c[0], c[1], c[2], c[3]]),
                    weight: (u32::from(c[4]) | (u32::from(c[5]) << 8)) + 1,
                })
                .collect(),
        ),
        NHA_RES_GROUP => {
            let mut r = ResGroup {
                buckets: 0,
                idle_timer: 0,
                unbalanced_timer: 0,
            };
            for a in attrs(p) {
                match a? {
                    (NHA_RES_GROUP_BUCKETS, v) => r.buckets = u16_of(v)?,
                    (NHA_RES_GROUP_IDLE_TIMER, v) => r.idle_timer = u32_of(v)?,
                    (NHA_RES_GROUP_UNBALANCED_TIMER, v) => r.unbalanced_timer = u32_of(v)?,
                    _ => {}
                }
            }
            Attr::ResGroup(r)
        }
        NHA_RES_BUCKET => {
            let (mut index, mut nexthop) = (None, None);
            for a in attrs(p) {
                match a? {
                    (NHA_RES_BUCKET_INDEX, v) => index = Some(u16_of(v)?),
                    (NHA_RES_BUCKET_NH_ID, v) => nexthop = Some(u32_of(v)?),
                    _ => {}
                }
            }
            match (index, nexthop) {
                (Some(index), Some(nexthop)) => Attr::ResBucket { index, nexthop },
                _ => return Err(DecodeError("bucket without index or nexthop".into())),
            }
        }
        NHA_GROUP_STATS => {
            let mut stats = Vec::new();
            for entry in attrs(p) {
                let (k, e) = entry?;
                if k != NHA_GROUP_STATS_ENTRY {
                    continue;
                }
                let (mut id, mut packets) = (None, 0);
                for a in attrs(e) {
                    match a? {
                        (NHA_GROUP_STATS_ENTRY_ID, v) => id = Some(u32_of(v)?),
                        (NHA_GROUP_STATS_ENTRY_PACKETS, v) => packets = uint_of(v)?,
                        _ => {}
                    }
                }
                if let Some(id) = id {
                    stats.push((id, packets));
                }
            }
            Attr::GroupStats(stats)
        }
        other => Attr::Other(other, p.to_vec()),
    })
}

#[derive(Debug, thiserror::Error)]
#[error("malformed nexthop message: {0}")]
pub struct DecodeError(String);

impl NetlinkSerializable for NexthopMessage {
    fn message_type(&self) -> u16 {
        self.kind
    }

    fn buffer_len(&self) -> usize {
        self.encode().len()
    }

    fn serialize(&self, buffer: &mut [u8]) {
        let bytes = self.encode();
        let n = bytes.len().min(buffer.len());
        buffer[..n].copy_from_slice(&bytes[..n]);
    }
}

impl NexthopMessage {
    fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.family, self.scope, self.protocol, 0];
        out.extend_from_slice(&self.flags.to_ne_bytes());
        for a in &self.attrs {
            a.emit(&mut out);
        }
        out
    }

    pub fn decode(kind: u16, payload: &[u8]) -> Result<Self, DecodeError> {
        if payload.len() < 8 {
            return Err(DecodeError(format!("nhmsg of {} bytes", payload.len())));
        }
        let mut attributes = Vec::new();
        for a in attrs(&payload[8..]) {
            let (k, p) = a?;
            attributes.push(parse_attr(k, p)?);
        }
        Ok(NexthopMessage {
            kind,
            family: payload[0],
            scope: payload[1],
            protocol: payload[2],
            flags: u32::from_ne_bytes([payload[4], payload[5], payload[6], payload[7]]),
            attrs: attributes,
        })
    }
}

impl NetlinkDeserializable for NexthopMessage {
    type Error = DecodeError;

    fn deserialize(header: &NetlinkHeader, payload: &[u8]) -> Result<Self, Self::Error> {
        NexthopMessage::decode(header.message_type, payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_round_trips_with_u16_weights() {
        let m = NexthopMessage::group(
            7,
            vec![
                GroupEntry { id: 1, weight: 3 },
                GroupEntry { id: 2, weight: 300 },
            ],
            0xfa,
        );
        let bytes = m.encode();
        // nhmsg: family 0, scope 0, protocol 0xfa, pad, flags 0
        assert_eq!(&bytes[..8], &[0, 0, 0xfa, 0, 0, 0, 0, 0]);
        // NHA_ID: len 8, type 1, value 7
        assert_eq!(&bytes[8..12], &[8, 0, 1, 0]);
        // NHA_GROUP entry 2: id 2, weight-1 = 299 = 0x012b -> low 0x2b, high 0x01
        assert_eq!(
            &bytes[16 + 4 + 8..16 + 4 + 16],
            &[2, 0, 0, 0, 0x2b, 0x01, 0, 0]
        );
        assert_eq!(NexthopMessage::decode(RTM_NEWNEXTHOP, &bytes).unwrap(), m);
    }

    #[test]
    fn resilient_group_and_bucket_round_trip() {
        let res = ResGroup {
            buckets: 512,
            idle_timer: 0,
            unbalanced_timer: 0,
        };
        let m =
            NexthopMessage::resilient_group(7, vec![GroupEntry { id: 1, weight: 3 }], res, 0xfa);
        let bytes = m.encode();
        // NHA_ID (8) + NHA_GROUP (4 + 8) + NHA_GROUP_TYPE (4 + 2, padded to 8), then
        // NHA_RES_GROUP, nested: 4 + BUCKETS (4 + 2 -> 8) + IDLE (8) + UNBALANCED (8).
        let at = 8 + 8 + 12 + 8;
        assert_eq!(&bytes[at..at + 4], &[28, 0, 12, 0x80]);
        assert_eq!(&bytes[at + 4..at + 10], &[6, 0, 1, 0, 0, 2]);
        let back = NexthopMessage::decode(RTM_NEWNEXTHOP, &bytes).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.res_group(), Some(res));
        let b = NexthopMessage::new(
            RTM_NEWNEXTHOPBUCKET,
            0,
            0,
            vec![
                Attr::Id(7),
                Attr::ResBucket {
                    index: 300,
                    nexthop: 9,
                },
            ],
        );
        let back = NexthopMessage::decode(RTM_NEWNEXTHOPBUCKET, &b.encode()).unwrap();
        assert_eq!(back.bucket(), Some((300, 9)));
        // A bucket without its nexthop is an error, not a panic.
        let mut msg = vec![0u8; 8];
        let mut inner = Vec::new();
        nla(&mut inner, NHA_RES_BUCKET_INDEX, &3u16.to_ne_bytes());
        nla(&mut msg, NHA_RES_BUCKET | NLA_F_NESTED, &inner);
        assert!(NexthopMessage::decode(RTM_NEWNEXTHOPBUCKET, &msg).is_err());
    }

    #[test]
    fn nexthop_round_trips_v4_and_v6() {
        for gw in ["10.1.0.2", "fd00::2"] {
            let m = NexthopMessage::nexthop(9, gw.parse().unwrap(), 4, 0xfa);
            let back = NexthopMessage::decode(RTM_NEWNEXTHOP, &m.encode()).unwrap();
            assert_eq!(back.gateway(), Some(gw.parse().unwrap()));
            assert_eq!(back.oif(), Some(4));
            assert_eq!(back.id(), Some(9));
        }
    }

    #[test]
    fn group_stats_are_decoded() {
        // NHA_GROUP_STATS { ENTRY { ID 11, PACKETS (u64) 5 }, ENTRY { ID 12, PACKETS (u32) 6 } }
        let mut e1 = Vec::new();
        nla(&mut e1, NHA_GROUP_STATS_ENTRY_ID, &11u32.to_ne_bytes());
        nla(&mut e1, NHA_GROUP_STATS_ENTRY_PACKETS, &5u64.to_ne_bytes());
        let mut e2 = Vec::new();
        nla(&mut e2, NHA_GROUP_STATS_ENTRY_ID, &12u32.to_ne_bytes());
        nla(&mut e2, NHA_GROUP_STATS_ENTRY_PACKETS, &6u32.to_ne_bytes());
        let mut stats = Vec::new();
        nla(&mut stats, NHA_GROUP_STATS_ENTRY | 0x8000, &e1);
        nla(&mut stats, NHA_GROUP_STATS_ENTRY | 0x8000, &e2);
        let mut msg = vec![0u8; 8];
        nla(&mut msg, NHA_GROUP_STATS | 0x8000, &stats);
        let m = NexthopMessage::decode(RTM_NEWNEXTHOP, &msg).unwrap();
        assert_eq!(m.group_stats(), Some(&[(11, 5), (12, 6)][..]));
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        assert!(NexthopMessage::decode(RTM_NEWNEXTHOP, &[0; 4]).is_err());
        // attribute claiming 200 bytes in a 12-byte message
        let bad = [0, 0, 0, 0, 0, 0, 0, 0, 200, 0, 1, 0];
        assert!(NexthopMessage::decode(RTM_NEWNEXTHOP, &bad).is_err());
        // short u32
        let short = [0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 1, 0, 1, 2, 0, 0];
        assert!(NexthopMessage::decode(RTM_NEWNEXTHOP, &short).is_err());
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = NexthopMessage::decode(RTM_NEWNEXTHOP, &bytes);
        }
    }
}
