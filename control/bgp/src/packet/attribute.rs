//! Path attributes (RFC 4271 §4.3/§5, RFC 4760, RFC 4360, RFC 6793) and their RFC 7606
//! error handling. Attributes fare does not interpret are kept as [`RawAttribute`]s, flags
//! and bytes exactly as received.

use super::aigp::Aigp;
use super::community::ExtCommunity;
use super::error::{code, update as sub, AttrAction, AttrError, MessageError};
use super::{nlri, Context, Family, Reader};
use ipnet::IpNet;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub mod flag {
    pub const OPTIONAL: u8 = 0x80;
    pub const TRANSITIVE: u8 = 0x40;
    pub const PARTIAL: u8 = 0x20;
    pub const EXTENDED_LENGTH: u8 = 0x10;
}

/// Attribute type codes (IANA "BGP Path Attributes").
pub mod attr_type {
    pub const ORIGIN: u8 = 1;
    pub const AS_PATH: u8 = 2;
    pub const NEXT_HOP: u8 = 3;
    pub const MED: u8 = 4;
    pub const LOCAL_PREF: u8 = 5;
    pub const ATOMIC_AGGREGATE: u8 = 6;
    pub const AGGREGATOR: u8 = 7;
    pub const COMMUNITIES: u8 = 8;
    pub const MP_REACH_NLRI: u8 = 14;
    pub const MP_UNREACH_NLRI: u8 = 15;
    pub const EXTENDED_COMMUNITIES: u8 = 16;
    pub const AIGP: u8 = super::super::aigp::ATTR_TYPE;
    pub const LARGE_COMMUNITIES: u8 = 32;
}
use attr_type as t;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    Igp = 0,
    Egp = 1,
    Incomplete = 2,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AsSegment {
    /// 1 = AS_SET, 2 = AS_SEQUENCE, 3/4 = confederation sequence/set (RFC 5065).
    pub kind: u8,
    pub asns: Vec<u32>,
}

pub const AS_SET: u8 = 1;
pub const AS_SEQUENCE: u8 = 2;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AsPath {
    pub segments: Vec<AsSegment>,
}

impl AsPath {
    pub fn sequence(asns: Vec<u32>) -> AsPath {
        if asns.is_empty() {
            return AsPath::default();
        }
        AsPath {
            segments: vec![AsSegment {
                kind: AS_SEQUENCE,
                asns,
            }],
        }
    }

    /// Path length for best-path selection (RFC 4271 §9.1.2.2): a set counts as one,
    /// confederation segments count zero.
    pub fn path_len(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match s.kind {
                AS_SEQUENCE => s.asns.len(),
                AS_SET => 1,
                _ => 0,
            })
            .sum()
    }

    pub fn first_as(&self) -> Option<u32> {
        self.segments
            .first()
            .filter(|s| s.kind == AS_SEQUENCE)
            .and_then(|s| s.asns.first().copied())
    }

    pub fn contains(&self, asn: u32) -> bool {
        self.segments.iter().any(|s| s.asns.contains(&asn))
    }

    /// The path with `asn` prepended (what an eBGP speaker sends).
    pub fn prepend(&self, asn: u32) -> AsPath {
        let mut segments = self.segments.clone();
        match segments.first_mut() {
            Some(s) if s.kind == AS_SEQUENCE && s.asns.len() < 255 => s.asns.insert(0, asn),
            _ => segments.insert(
                0,
                AsSegment {
                    kind: AS_SEQUENCE,
                    asns: vec![asn],
                },
            ),
        }
        AsPath { segments }
    }

    fn decode(value: &[u8], four_octet: bool) -> Option<AsPath> {
        let width = if four_octet { 4 } else { 2 };
        let mut r = Reader::new(value);
        let mut segments = Vec::new();
        while !r.is_empty() {
            let kind = r.u8()?;
            let count = r.u8()? as usize;
            if !(1..=4).contains(&kind) || count == 0 {
                return None;
            }
            let raw = r.take(count * width)?;
            let asns = raw
                .chunks_exact(width)
                .map(|c| {
                    if four_octet {
                        u32::from_be_bytes([c[0], c[1], c[2], c[3]])
                    } else {
                        u16::from_be_bytes([c[0], c[1]]) as u32
                    }
                })
                .collect();
            segments.push(AsSegment { kind, asns });
        }
        Some(AsPath { segments })
    }

    fn encode(&self, four_octet: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for s in &self.segments {
            for chunk in s.asns.chunks(255) {
                out.push(s.kind);
                out.push(chunk.len() as u8);
                for &asn in chunk {
                    if four_octet {
                        out.extend_from_slice(&asn.to_be_bytes());
                    } else {
                        let two = u16::try_from(asn).unwrap_or(super::open::AS_TRANS);
                        out.extend_from_slice(&two.to_be_bytes());
                    }
                }
            }
        }
        out
    }
}

/// MP_REACH_NLRI (RFC 4760 §3) for a family fare carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MpReach {
    pub family: Family,
    /// One next hop, or for IPv6 a global and a link-local one (RFC 2545).
    pub next_hops: Vec<IpAddr>,
    pub nlri: Vec<IpNet>,
}

/// MP_UNREACH_NLRI (RFC 4760 §4) for a family fare carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MpUnreach {
    pub family: Family,
    pub withdrawn: Vec<IpNet>,
}

/// An attribute kept as received: unknown types, and known ones fare does not interpret.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RawAttribute {
    pub flags: u8,
    pub type_code: u8,
    pub value: Vec<u8>,
}

impl RawAttribute {
    pub fn is_transitive(&self) -> bool {
        self.flags & flag::TRANSITIVE != 0
    }
    pub fn is_optional(&self) -> bool {
        self.flags & flag::OPTIONAL != 0
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PathAttributes {
    pub origin: Option<Origin>,
    pub as_path: Option<AsPath>,
    pub next_hop: Option<Ipv4Addr>,
    pub med: Option<u32>,
    pub local_pref: Option<u32>,
    /// EXTENDED_COMMUNITIES in wire order; empty = attribute absent.
    pub ext_communities: Vec<ExtCommunity>,
    pub mp_reach: Option<MpReach>,
    pub mp_unreach: Option<MpUnreach>,
    /// AIGP (RFC 7311); DPF marks primary-color routes with metric 0.
    pub aigp: Option<Aigp>,
    /// Everything else, in the order received.
    pub other: Vec<RawAttribute>,
}

/// RFC 8326's GRACEFUL_SHUTDOWN well-known community, 65535:0.
pub const GRACEFUL_SHUTDOWN: [u8; 4] = [0xff, 0xff, 0x00, 0x00];

impl PathAttributes {
    fn communities(&self) -> Option<&RawAttribute> {
        self.other
            .iter()
            .find(|r| r.type_code == attr_type::COMMUNITIES)
    }

    /// The COMMUNITIES attribute holds GRACEFUL_SHUTDOWN (RFC 8326).
    pub fn has_graceful_shutdown(&self) -> bool {
        self.communities()
            .is_some_and(|r| r.value.chunks(4).any(|c| c == GRACEFUL_SHUTDOWN))
    }

    /// Adds GRACEFUL_SHUTDOWN to the COMMUNITIES attribute (created when absent).
    pub fn add_graceful_shutdown(&mut self) {
        if self.has_graceful_shutdown() {
            return;
        }
        match self
            .other
            .iter_mut()
            .find(|r| r.type_code == attr_type::COMMUNITIES)
        {
            Some(r) => r.value.extend_from_slice(&GRACEFUL_SHUTDOWN),
            None => self.other.push(RawAttribute {
                flags: flag::OPTIONAL | flag::TRANSITIVE,
                type_code: attr_type::COMMUNITIES,
                value: GRACEFUL_SHUTDOWN.to_vec(),
            }),
        }
    }
}

/// Which O/T flag bits a known attribute must have (RFC 4271 §5, RFC 7606 §3(c)).
fn expected_flags(type_code: u8) -> Option<u8> {
    let ot = flag::OPTIONAL | flag::TRANSITIVE;
    Some(match type_code {
        t::ORIGIN | t::AS_PATH | t::NEXT_HOP | t::LOCAL_PREF | t::ATOMIC_AGGREGATE => {
            flag::TRANSITIVE
        }
        t::MED | t::MP_REACH_NLRI | t::MP_UNREACH_NLRI | t::AIGP => flag::OPTIONAL,
        t::AGGREGATOR | t::COMMUNITIES | t::EXTENDED_COMMUNITIES | t::LARGE_COMMUNITIES => ot,
        _ => return None,
    })
}

/// RFC 7606 §7: what a malformed instance of a known attribute costs.
fn action_for(type_code: u8) -> AttrAction {
    match type_code {
        // RFC 7311 §3: a malformed AIGP attribute is discarded.
        t::ATOMIC_AGGREGATE | t::AGGREGATOR | t::AIGP => AttrAction::Discard,
        _ => AttrAction::TreatAsWithdraw,
    }
}

fn reset(subcode: u8, data: Vec<u8>, reason: &'static str) -> MessageError {
    MessageError::new(code::UPDATE, subcode, data, reason)
}

impl PathAttributes {
    /// Decodes the path attribute section. Errors that RFC 7606 resolves without a session
    /// reset are pushed to `errors` (the attribute is then left out); the others return Err.
    pub fn decode(
        buf: &[u8],
        ctx: Context,
        errors: &mut Vec<AttrError>,
    ) -> Result<PathAttributes, MessageError> {
        let mut attrs = PathAttributes::default();
        let mut seen = BTreeSet::new();
        let mut r = Reader::new(buf);
        while !r.is_empty() {
            let start = buf.len() - r.remaining();
            let header = (|| {
                let flags = r.u8()?;
                let type_code = r.u8()?;
                let len = if flags & flag::EXTENDED_LENGTH != 0 {
                    r.u16()? as usize
                } else {
                    r.u8()? as usize
                };
                Some((flags, type_code, r.take(len)?))
            })();
            let Some((flags, type_code, value)) = header else {
                // RFC 7606 §4: the attribute overruns the section; the rest cannot be
                // parsed, so the whole UPDATE is treated as withdraw.
                errors.push(AttrError {
                    type_code: buf.get(start + 1).copied().unwrap_or(0),
                    action: AttrAction::TreatAsWithdraw,
                    subcode: sub::ATTRIBUTE_LENGTH,
                    reason: "attribute length overruns the attribute section",
                });
                break;
            };
            let whole = &buf[start..buf.len() - r.remaining()];
            let is_mp = type_code == t::MP_REACH_NLRI || type_code == t::MP_UNREACH_NLRI;
            if !seen.insert(type_code) {
                if is_mp {
                    // RFC 7606 §3(g): MP_(UN)REACH_NLRI twice ends the session.
                    return Err(reset(
                        sub::MALFORMED_ATTRIBUTE_LIST,
                        vec![],
                        "MP_REACH_NLRI or MP_UNREACH_NLRI appears twice",
                    ));
                }
                errors.push(AttrError {
                    type_code,
                    action: AttrAction::Discard,
                    subcode: sub::MALFORMED_ATTRIBUTE_LIST,
                    reason: "duplicate attribute (all but the first discarded)",
                });
                continue;
            }
            let ot = flags & (flag::OPTIONAL | flag::TRANSITIVE);
            match expected_flags(type_code) {
                Some(expected) if expected != ot => {
                    if is_mp {
                        return Err(reset(
                            sub::ATTRIBUTE_FLAGS,
                            whole.to_vec(),
                            "MP attribute with wrong flags",
                        ));
                    }
                    errors.push(AttrError {
                        type_code,
                        action: action_for(type_code),
                        subcode: sub::ATTRIBUTE_FLAGS,
                        reason: "attribute flags conflict with the attribute type",
                    });
                    continue;
                }
                None if flags & flag::OPTIONAL == 0 => {
                    return Err(reset(
                        sub::UNRECOGNIZED_WELL_KNOWN,
                        whole.to_vec(),
                        "unrecognized well-known attribute",
                    ));
                }
                _ => {}
            }
            if let Err((subcode, reason)) = attrs.decode_one(flags, type_code, value, ctx) {
                if is_mp {
                    return Err(reset(subcode, whole.to_vec(), reason));
                }
                errors.push(AttrError {
                    type_code,
                    action: action_for(type_code),
                    subcode,
                    reason,
                });
            }
        }
        // In the order `encode` writes them (ascending type, RFC 4271 §5), so that what
        // is re-advertised decodes to the same attributes.
        attrs.other.sort_by_key(|a| a.type_code);
        Ok(attrs)
    }

    fn decode_one(
        &mut self,
        flags: u8,
        type_code: u8,
        value: &[u8],
        ctx: Context,
    ) -> Result<(), (u8, &'static str)> {
        let u32_of = |v: &[u8]| <[u8; 4]>::try_from(v).ok().map(u32::from_be_bytes);
        match type_code {
            t::ORIGIN => {
                self.origin = Some(match value {
                    [0] => Origin::Igp,
                    [1] => Origin::Egp,
                    [2] => Origin::Incomplete,
                    [_] => return Err((sub::INVALID_ORIGIN, "undefined ORIGIN value")),
                    _ => return Err((sub::ATTRIBUTE_LENGTH, "ORIGIN length is not 1")),
                })
            }
            t::AS_PATH => {
                self.as_path = Some(
                    AsPath::decode(value, ctx.four_octet_as)
                        .ok_or((sub::MALFORMED_AS_PATH, "malformed AS_PATH"))?,
                )
            }
            t::NEXT_HOP => {
                let a = Ipv4Addr::from(
                    u32_of(value).ok_or((sub::ATTRIBUTE_LENGTH, "NEXT_HOP length is not 4"))?,
                );
                if a.is_unspecified() || a.is_multicast() || a.is_broadcast() {
                    return Err((sub::INVALID_NEXT_HOP, "NEXT_HOP is not a unicast address"));
                }
                self.next_hop = Some(a);
            }
            t::MED => {
                self.med =
                    Some(u32_of(value).ok_or((sub::ATTRIBUTE_LENGTH, "MED length is not 4"))?)
            }
            t::LOCAL_PREF => {
                self.local_pref = Some(
                    u32_of(value).ok_or((sub::ATTRIBUTE_LENGTH, "LOCAL_PREF length is not 4"))?,
                )
            }
            t::EXTENDED_COMMUNITIES => {
                if !value.len().is_multiple_of(8) {
                    return Err((
                        sub::OPTIONAL_ATTRIBUTE,
                        "EXTENDED_COMMUNITIES length is not a multiple of 8",
                    ));
                }
                self.ext_communities = value
                    .chunks_exact(8)
                    .map(|c| {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(c);
                        ExtCommunity(b)
                    })
                    .collect();
            }
            t::AIGP => {
                self.aigp =
                    Some(Aigp::decode(value).ok_or((sub::OPTIONAL_ATTRIBUTE, "malformed AIGP"))?)
            }
            t::MP_REACH_NLRI => return self.decode_mp_reach(flags, value),
            t::MP_UNREACH_NLRI => return self.decode_mp_unreach(flags, value),
            _ => {
                let ok = match type_code {
                    t::ATOMIC_AGGREGATE => value.is_empty(),
                    t::AGGREGATOR => value.len() == if ctx.four_octet_as { 8 } else { 6 },
                    t::COMMUNITIES => value.len().is_multiple_of(4),
                    t::LARGE_COMMUNITIES => value.len().is_multiple_of(12),
                    _ => true,
                };
                if !ok {
                    return Err((
                        sub::ATTRIBUTE_LENGTH,
                        "attribute length is wrong for its type",
                    ));
                }
                self.other.push(RawAttribute {
                    flags,
                    type_code,
                    value: value.to_vec(),
                });
            }
        }
        Ok(())
    }

    /// The AFI/SAFI that opens MP_REACH_NLRI and MP_UNREACH_NLRI (`type_code`), with a
    /// reader past it; None for a family we never negotiate: the attribute is ignored,
    /// kept as received.
    fn mp_family<'v>(
        &mut self,
        flags: u8,
        type_code: u8,
        value: &'v [u8],
        bad: (u8, &'static str),
    ) -> Result<Option<(Family, Reader<'v>)>, (u8, &'static str)> {
        let mut r = Reader::new(value);
        let afi = r.u16().ok_or(bad)?;
        let safi = r.u8().ok_or(bad)?;
        let Some(family) = Family::from_afi_safi(afi, safi) else {
            self.other.push(RawAttribute {
                flags,
                type_code,
                value: value.to_vec(),
            });
            return Ok(None);
        };
        Ok(Some((family, r)))
    }

    fn decode_mp_reach(&mut self, flags: u8, value: &[u8]) -> Result<(), (u8, &'static str)> {
        let bad = (sub::OPTIONAL_ATTRIBUTE, "malformed MP_REACH_NLRI");
        let Some((family, mut r)) = self.mp_family(flags, t::MP_REACH_NLRI, value, bad)? else {
            return Ok(());
        };
        let nh_len = r.u8().ok_or(bad)? as usize;
        let nh = r.take(nh_len).ok_or(bad)?;
        let v6 = |b: &[u8]| {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            IpAddr::V6(Ipv6Addr::from(a))
        };
        let next_hops = match nh_len {
            4 => vec![IpAddr::V4(Ipv4Addr::new(nh[0], nh[1], nh[2], nh[3]))],
            16 => vec![v6(nh)],
            32 => vec![v6(&nh[..16]), v6(&nh[16..])],
            _ => return Err((sub::OPTIONAL_ATTRIBUTE, "MP_REACH_NLRI next hop length")),
        };
        r.u8().ok_or(bad)?; // reserved
        let nlri = nlri::decode(r.rest(), family)
            .ok_or((sub::OPTIONAL_ATTRIBUTE, "malformed NLRI in MP_REACH_NLRI"))?;
        self.mp_reach = Some(MpReach {
            family,
            next_hops,
            nlri,
        });
        Ok(())
    }

    fn decode_mp_unreach(&mut self, flags: u8, value: &[u8]) -> Result<(), (u8, &'static str)> {
        let bad = (sub::OPTIONAL_ATTRIBUTE, "malformed MP_UNREACH_NLRI");
        let Some((family, mut r)) = self.mp_family(flags, t::MP_UNREACH_NLRI, value, bad)? else {
            return Ok(());
        };
        let withdrawn = nlri::decode(r.rest(), family).ok_or(bad)?;
        self.mp_unreach = Some(MpUnreach { family, withdrawn });
        Ok(())
    }

    /// Encodes the attribute section: MP attributes first (RFC 7606 §5.1), then by type code.
    pub fn encode(&self, ctx: Context, out: &mut Vec<u8>) {
        let mut items: Vec<(u16, u8, u8, Vec<u8>)> = Vec::new(); // (order, flags, type, value)
        let wk = flag::TRANSITIVE;
        let opt = flag::OPTIONAL;
        let opt_t = flag::OPTIONAL | flag::TRANSITIVE;
        if let Some(u) = &self.mp_unreach {
            let (afi, safi) = u.family.afi_safi();
            let mut v = afi.to_be_bytes().to_vec();
            v.push(safi);
            nlri::encode(&u.withdrawn, &mut v);
            items.push((0, opt, t::MP_UNREACH_NLRI, v));
        }
        if let Some(m) = &self.mp_reach {
            let (afi, safi) = m.family.afi_safi();
            let mut v = afi.to_be_bytes().to_vec();
            v.push(safi);
            let mut nh = Vec::new();
            for a in &m.next_hops {
                match a {
                    IpAddr::V4(a) => nh.extend_from_slice(&a.octets()),
                    IpAddr::V6(a) => nh.extend_from_slice(&a.octets()),
                }
            }
            v.push(nh.len() as u8);
            v.extend_from_slice(&nh);
            v.push(0);
            nlri::encode(&m.nlri, &mut v);
            items.push((1, opt, t::MP_REACH_NLRI, v));
        }
        let order = |ty: u8| 256 + ty as u16;
        if let Some(o) = self.origin {
            items.push((order(t::ORIGIN), wk, t::ORIGIN, vec![o as u8]));
        }
        if let Some(p) = &self.as_path {
            items.push((
                order(t::AS_PATH),
                wk,
                t::AS_PATH,
                p.encode(ctx.four_octet_as),
            ));
        }
        if let Some(nh) = self.next_hop {
            items.push((order(t::NEXT_HOP), wk, t::NEXT_HOP, nh.octets().to_vec()));
        }
        if let Some(m) = self.med {
            items.push((order(t::MED), opt, t::MED, m.to_be_bytes().to_vec()));
        }
        if let Some(l) = self.local_pref {
            items.push((
                order(t::LOCAL_PREF),
                wk,
                t::LOCAL_PREF,
                l.to_be_bytes().to_vec(),
            ));
        }
        if !self.ext_communities.is_empty() {
            let v = self.ext_communities.iter().flat_map(|c| c.0).collect();
            items.push((
                order(t::EXTENDED_COMMUNITIES),
                opt_t,
                t::EXTENDED_COMMUNITIES,
                v,
            ));
        }
        if let Some(aigp) = &self.aigp {
            items.push((order(t::AIGP), opt, t::AIGP, aigp.encode()));
        }
        for raw in &self.other {
            items.push((
                order(raw.type_code),
                raw.flags,
                raw.type_code,
                raw.value.clone(),
            ));
        }
        items.sort_by_key(|i| i.0);
        for (_, flags, type_code, value) in items {
            write_attr(out, flags, type_code, &value);
        }
    }
}

/// Writes one attribute; the extended-length flag is kept as given and forced on when the
/// value needs it.
fn write_attr(out: &mut Vec<u8>, mut flags: u8, type_code: u8, value: &[u8]) {
    if value.len() > 255 {
        flags |= flag::EXTENDED_LENGTH;
    }
    out.push(flags);
    out.push(type_code);
    if flags & flag::EXTENDED_LENGTH != 0 {
        out.extend_from_slice(&(value.len().min(u16::MAX as usize) as u16).to_be_bytes());
    } else {
        out.push(value.len() as u8);
    }
    out.extend_from_slice(value);
}

#[cfg(test)]
mod graceful_shutdown_tests {
    use super::*;

    /// RFC 8326 §3: 65535:0 joins the COMMUNITIES attribute (optional transitive, type
    /// 8), once; communities already there stay.
    #[test]
    fn graceful_shutdown_joins_the_communities() {
        let mut a = PathAttributes::default();
        assert!(!a.has_graceful_shutdown());
        a.add_graceful_shutdown();
        a.add_graceful_shutdown();
        assert_eq!(
            a.other,
            vec![RawAttribute {
                flags: 0xc0,
                type_code: 8,
                value: vec![0xff, 0xff, 0, 0]
            }]
        );
        let mut b = PathAttributes {
            other: vec![RawAttribute {
                flags: 0xc0,
                type_code: 8,
                value: vec![0xfd, 0xe8, 0, 1],
            }],
            ..Default::default()
        };
        b.add_graceful_shutdown();
        assert_eq!(b.other[0].value, [0xfd, 0xe8, 0, 1, 0xff, 0xff, 0, 0]);
        assert!(b.has_graceful_shutdown());
    }
}

#[cfg(test)]
mod as_path_tests {
    use super::*;

    fn seg(kind: u8, asns: &[u32]) -> AsSegment {
        AsSegment {
            kind,
            asns: asns.to_vec(),
        }
    }

    /// RFC 4271 §9.1.2.2 (a): an AS_SET counts as one AS whatever its size; RFC 5065
    /// §5.3: confederation segments (3 = AS_CONFED_SEQUENCE, 4 = AS_CONFED_SET) count
    /// zero.
    #[test]
    fn path_len_counts_sets_as_one_and_confederations_as_zero() {
        let path = AsPath {
            segments: vec![
                seg(AS_SEQUENCE, &[65001, 65002]),
                seg(AS_SET, &[1, 2, 3]),
                seg(3, &[64512, 64513]),
                seg(4, &[64514]),
            ],
        };
        assert_eq!(path.path_len(), 3);
        assert_eq!(AsPath::default().path_len(), 0);
        assert_eq!(AsPath::sequence(vec![1, 2, 3, 4]).path_len(), 4);
    }

    /// RFC 4271 §4.3: the Optional bit is 0x80, the Transitive bit 0x40; the Partial and
    /// Extended Length bits (0x20, 0x10) say nothing of either.
    #[test]
    fn optional_and_transitive_bits() {
        let table = [
            (0x00, false, false),
            (0x40, false, true),
            (0x80, true, false),
            (0xc0, true, true),
            (0xe0, true, true),
            (0x30, false, false),
        ];
        for (flags, optional, transitive) in table {
            let r = RawAttribute {
                flags,
                type_code: 99,
                value: vec![],
            };
            assert_eq!(
                (r.is_optional(), r.is_transitive()),
                (optional, transitive),
                "{flags:#04x}"
            );
        }
    }

    /// RFC 7606 §7.2: an AS_PATH segment of an unknown type (not 1-4) or of length 0 is
    /// malformed, each on its own.
    #[test]
    fn as_path_segment_type_and_length_checked_separately() {
        assert_eq!(
            AsPath::decode(&[2, 1, 0, 0, 0xfd, 0xe9], true),
            Some(AsPath::sequence(vec![65001]))
        );
        assert_eq!(AsPath::decode(&[5, 1, 0, 0, 0xfd, 0xe9], true), None);
        assert_eq!(AsPath::decode(&[0, 1, 0, 0, 0xfd, 0xe9], true), None);
        assert_eq!(AsPath::decode(&[2, 0], true), None);
        assert_eq!(AsPath::decode(&[2, 1, 0xfd, 0xe9, 2, 0], false), None);
    }

    /// RFC 4271 §5.1.2: the speaker's AS goes first in the leading AS_SEQUENCE, or in a new
    /// AS_SEQUENCE when the path is empty or starts with an AS_SET; a segment holds at
    /// most 255 ASes (its length is one octet), so a full one gets a new segment before
    /// it.
    #[test]
    fn prepend_by_rfc4271() {
        assert_eq!(
            AsPath::default().prepend(65001).segments,
            [seg(AS_SEQUENCE, &[65001])]
        );
        assert_eq!(
            AsPath::sequence(vec![65002]).prepend(65001).segments,
            [seg(AS_SEQUENCE, &[65001, 65002])]
        );
        let set = AsPath {
            segments: vec![seg(AS_SET, &[1, 2])],
        };
        assert_eq!(
            set.prepend(65001).segments,
            [seg(AS_SEQUENCE, &[65001]), seg(AS_SET, &[1, 2])]
        );
        let full: Vec<u32> = (1..=255).collect();
        assert_eq!(
            AsPath::sequence(full.clone()).prepend(65001).segments,
            [seg(AS_SEQUENCE, &[65001]), seg(AS_SEQUENCE, &full)]
        );
        let mut expect = vec![65001];
        expect.extend(1..=254);
        assert_eq!(
            AsPath::sequence((1..=254).collect())
                .prepend(65001)
                .segments,
            [seg(AS_SEQUENCE, &expect)]
        );
    }
}
