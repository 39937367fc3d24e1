//! ARN message types and their wire encoding (draft-wh-rtgwg-adaptive-routing-arn §3.2).
//!
//! The message is the UDP payload (see `transport`). Bits are numbered as in IETF
//! diagrams: bit 0 is the most significant bit. All multi-octet fields are big-endian.
//!
//! ```text
//! offset 0  Type (1..=4)
//! offset 1  Version (high nibble, 0) | Rsvd (low nibble: sent 0, ignored)
//! offset 2  Metric
//! offset 3  Para-Type: 0x80 = bit 0 flow identifier, 0x40 = bit 1 Path ID,
//!           0x3f (bits 2-7) unassigned: a message setting any of them is rejected
//! offset 4  parameters, in bit order: the flow identifier (if 0x80), then the Path ID
//!           (if 0x40); nothing may follow the last parameter.
//!
//! Flow identifier (bit 0), variable length:
//!   word 0 (4 octets): Opcode (bits 0-3: 0 = IPv4, 1 = IPv6)
//!                      Mask   (bits 4-8: 0x10 Protocol, 0x08 Source IP,
//!                              0x04 Destination IP, 0x02 Source Port, 0x01 Dest. Port)
//!                      Rsvd   (bits 9-23: sent 0, ignored)
//!                      Protocol (bits 24-31; always on the wire, meaningful only if
//!                              Mask 0x10 is set; sent 0 otherwise)
//!   then only the fields whose Mask bit is set, in this order:
//!     Source IP (4 or 16 octets by Opcode), Destination IP (4 or 16),
//!     Source Port (2), Destination Port (2)
//! Path ID (bit 1): 4 octets.
//! ```

use serde::Serialize;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The only version this codec speaks (draft: "The default value is 0").
use fare_common::arn_wire as wire;
pub use fare_common::arn_wire::{PARA_FLOW, PARA_PATH_ID, VERSION};
/// Mask bits of the flow identifier (bit 0 = Protocol is the most significant).
pub const MASK_PROTOCOL: u8 = 0x10;
pub const MASK_SRC: u8 = 0x08;
pub const MASK_DST: u8 = 0x04;
pub const MASK_SRC_PORT: u8 = 0x02;
pub const MASK_DST_PORT: u8 = 0x01;
/// Opcode values.
pub const OPCODE_IPV4: u8 = 0;
pub const OPCODE_IPV6: u8 = 1;
/// Longest message: header 4 + flow (4 + 16 + 16 + 2 + 2) + Path ID 4.
pub const MAX_LEN: usize = 48;

/// The purpose of a notification (the Type octet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ArnType {
    /// 1: congestion detected: remove the affected path.
    CongestionDetected = wire::TYPE_CONGESTION_DETECTED as isize,
    /// 2: congestion eliminated: restore it.
    CongestionEliminated = wire::TYPE_CONGESTION_ELIMINATED as isize,
    /// 3: failure detected: remove the affected path.
    FailureDetected = wire::TYPE_FAILURE_DETECTED as isize,
    /// 4: failure eliminated: restore it.
    FailureEliminated = wire::TYPE_FAILURE_ELIMINATED as isize,
}

impl ArnType {
    pub fn from_u8(v: u8) -> Option<ArnType> {
        match v {
            wire::TYPE_CONGESTION_DETECTED => Some(ArnType::CongestionDetected),
            wire::TYPE_CONGESTION_ELIMINATED => Some(ArnType::CongestionEliminated),
            wire::TYPE_FAILURE_DETECTED => Some(ArnType::FailureDetected),
            wire::TYPE_FAILURE_ELIMINATED => Some(ArnType::FailureEliminated),
            _ => None,
        }
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    /// True for Types 1 and 3 (the path must be removed), false for 2 and 4 (revocation).
    pub fn removes(self) -> bool {
        matches!(self, ArnType::CongestionDetected | ArnType::FailureDetected)
    }

    pub fn describe(self) -> &'static str {
        match self {
            ArnType::CongestionDetected => "congestion detected",
            ArnType::CongestionEliminated => "congestion eliminated",
            ArnType::FailureDetected => "failure detected",
            ArnType::FailureEliminated => "failure eliminated",
        }
    }
}

/// Address family of the flow identifier (Opcode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Family {
    #[default]
    Ipv4,
    Ipv6,
}

impl Family {
    fn opcode(self) -> u8 {
        match self {
            Family::Ipv4 => OPCODE_IPV4,
            Family::Ipv6 => OPCODE_IPV6,
        }
    }

    fn addr_len(self) -> usize {
        match self {
            Family::Ipv4 => 4,
            Family::Ipv6 => 16,
        }
    }

    pub fn of(addr: &IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::Ipv4,
            IpAddr::V6(_) => Family::Ipv6,
        }
    }
}

/// The bitmap of the bits whose field is present: (present, bit).
fn bitmap(fields: &[(bool, u8)]) -> u8 {
    fields
        .iter()
        .filter(|(present, _)| *present)
        .fold(0, |m, (_, bit)| m | bit)
}

/// Para-Type bit 0: the affected flow (five-tuple); each field present iff its Mask bit is set.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct FlowId {
    /// Opcode: the family of `src` and `dst` (also meaningful when both are absent).
    pub family: Family,
    pub protocol: Option<u8>,
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
}

impl FlowId {
    /// The Mask field (5 bits, Protocol = 0x10 ... Destination Port = 0x01).
    pub fn mask(&self) -> u8 {
        bitmap(&[
            (self.protocol.is_some(), MASK_PROTOCOL),
            (self.src.is_some(), MASK_SRC),
            (self.dst.is_some(), MASK_DST),
            (self.src_port.is_some(), MASK_SRC_PORT),
            (self.dst_port.is_some(), MASK_DST_PORT),
        ])
    }

    /// Wire length of this parameter.
    pub fn wire_len(&self) -> usize {
        let a = self.family.addr_len();
        4 + self.src.map_or(0, |_| a)
            + self.dst.map_or(0, |_| a)
            + self.src_port.map_or(0, |_| 2)
            + self.dst_port.map_or(0, |_| 2)
    }

    /// True when a packet's five-tuple matches every field this identifier carries.
    pub fn matches(
        &self,
        protocol: u8,
        src: IpAddr,
        dst: IpAddr,
        src_port: u16,
        dst_port: u16,
    ) -> bool {
        self.protocol.is_none_or(|p| p == protocol)
            && self.src.is_none_or(|a| a == src)
            && self.dst.is_none_or(|a| a == dst)
            && self.src_port.is_none_or(|p| p == src_port)
            && self.dst_port.is_none_or(|p| p == dst_port)
    }
}

/// One Adaptive Routing Notification.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArnMessage {
    pub kind: ArnType,
    /// Metric: e.g. the congestion level (fare sends the queue level in 1/255 of the
    /// configured queue limit; see `monitor`).
    pub metric: u8,
    /// Para-Type bit 0.
    pub flow: Option<FlowId>,
    /// Para-Type bit 1: the router ID of the node at the far end of the affected link,
    /// as seen from the sender (docs/CODEPOINTS.md).
    pub path_id: Option<u32>,
}

impl ArnMessage {
    /// A message about a path (the usual case).
    pub fn path(kind: ArnType, metric: u8, path_id: u32) -> ArnMessage {
        ArnMessage {
            kind,
            metric,
            flow: None,
            path_id: Some(path_id),
        }
    }

    /// The Para-Type bitmap this message encodes to.
    pub fn para_type(&self) -> u8 {
        bitmap(&[
            (self.flow.is_some(), PARA_FLOW),
            (self.path_id.is_some(), PARA_PATH_ID),
        ])
    }

    pub fn wire_len(&self) -> usize {
        4 + self.flow.as_ref().map_or(0, FlowId::wire_len) + self.path_id.map_or(0, |_| 4)
    }

    /// Encodes the message (Version 0, reserved bits 0).
    ///
    /// Fails only when the flow identifier mixes families (an address that does not match
    /// its `family`), which the wire cannot express.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(self.wire_len());
        out.push(self.kind.code());
        out.push(VERSION << 4);
        out.push(self.metric);
        out.push(self.para_type());
        if let Some(flow) = &self.flow {
            let word: u32 = (u32::from(flow.family.opcode()) << 28)
                | (u32::from(flow.mask()) << 23)
                | u32::from(flow.protocol.unwrap_or(0));
            out.extend_from_slice(&word.to_be_bytes());
            for (field, addr) in [("src", flow.src), ("dst", flow.dst)] {
                match (flow.family, addr) {
                    (_, None) => {}
                    (Family::Ipv4, Some(IpAddr::V4(a))) => out.extend_from_slice(&a.octets()),
                    (Family::Ipv6, Some(IpAddr::V6(a))) => out.extend_from_slice(&a.octets()),
                    (family, Some(_)) => return Err(EncodeError::FamilyMismatch { field, family }),
                }
            }
            if let Some(p) = flow.src_port {
                out.extend_from_slice(&p.to_be_bytes());
            }
            if let Some(p) = flow.dst_port {
                out.extend_from_slice(&p.to_be_bytes());
            }
        }
        if let Some(id) = self.path_id {
            out.extend_from_slice(&id.to_be_bytes());
        }
        Ok(out)
    }

    /// Decodes one message that fills `bytes` exactly.
    pub fn decode(bytes: &[u8]) -> Result<ArnMessage, DecodeError> {
        let mut r = Reader { bytes, pos: 0 };
        let type_octet = r.u8("type")?;
        let kind = ArnType::from_u8(type_octet).ok_or(DecodeError {
            offset: 0,
            field: "type",
            problem: Problem::Invalid(format!("unknown type {type_octet} (expected 1-4)")),
        })?;
        let version = r.u8("version")? >> 4;
        if version != VERSION {
            return Err(DecodeError {
                offset: 1,
                field: "version",
                problem: Problem::Invalid(format!("unsupported version {version} (expected 0)")),
            });
        }
        let metric = r.u8("metric")?;
        let para_type = r.u8("para_type")?;
        let unknown = para_type & !(PARA_FLOW | PARA_PATH_ID);
        if unknown != 0 {
            return Err(DecodeError {
                offset: 3,
                field: "para_type",
                problem: Problem::Invalid(format!(
                    "unassigned Para-Type bits 0x{unknown:02x} set (only 0x80 flow and 0x40 path id are defined)"
                )),
            });
        }
        let flow = (para_type & PARA_FLOW != 0)
            .then(|| decode_flow(&mut r))
            .transpose()?;
        let path_id = (para_type & PARA_PATH_ID != 0)
            .then(|| r.u32("path_id"))
            .transpose()?;
        if r.pos != bytes.len() {
            return Err(DecodeError {
                offset: r.pos,
                field: "trailing",
                problem: Problem::Invalid(format!(
                    "{} octet(s) after the last parameter",
                    bytes.len() - r.pos
                )),
            });
        }
        Ok(ArnMessage {
            kind,
            metric,
            flow,
            path_id,
        })
    }
}

fn decode_flow(r: &mut Reader) -> Result<FlowId, DecodeError> {
    let start = r.pos;
    let word = r.u32("flow.opcode")?;
    let opcode = (word >> 28) as u8;
    let mask = ((word >> 23) & 0x1f) as u8;
    let family = match opcode {
        OPCODE_IPV4 => Family::Ipv4,
        OPCODE_IPV6 => Family::Ipv6,
        other => {
            return Err(DecodeError {
                offset: start,
                field: "flow.opcode",
                problem: Problem::Invalid(format!(
                    "unknown opcode {other} (expected 0 = IPv4 or 1 = IPv6)"
                )),
            })
        }
    };
    let protocol = (mask & MASK_PROTOCOL != 0).then_some((word & 0xff) as u8);
    let addr = |r: &mut Reader, bit: u8, field: &'static str| {
        if mask & bit == 0 {
            return Ok(None);
        }
        Ok(Some(match family {
            Family::Ipv4 => IpAddr::V4(Ipv4Addr::from(r.array::<4>(field)?)),
            Family::Ipv6 => IpAddr::V6(Ipv6Addr::from(r.array::<16>(field)?)),
        }))
    };
    let src = addr(r, MASK_SRC, "flow.src")?;
    let dst = addr(r, MASK_DST, "flow.dst")?;
    let src_port = (mask & MASK_SRC_PORT != 0)
        .then(|| r.u16("flow.src_port"))
        .transpose()?;
    let dst_port = (mask & MASK_DST_PORT != 0)
        .then(|| r.u16("flow.dst_port"))
        .transpose()?;
    Ok(FlowId {
        family,
        protocol,
        src,
        dst,
        src_port,
        dst_port,
    })
}

/// A cursor that reports where the input ran out and which field needed the octets.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let end = self.pos + N;
        let slice = self.bytes.get(self.pos..end).ok_or(DecodeError {
            offset: self.pos,
            field,
            problem: Problem::Truncated {
                need: N,
                have: self.bytes.len().saturating_sub(self.pos),
            },
        })?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        self.pos = end;
        Ok(out)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }
}

/// Why a field could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The message ended inside the field.
    Truncated { need: usize, have: usize },
    /// The field holds a value this codec rejects.
    Invalid(String),
}

/// A malformed message: the byte offset (from the Type octet) and the field that failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset} ({field}): {problem}")]
pub struct DecodeError {
    pub offset: usize,
    /// Field name as in `fare arn decode --json` (`type`, `version`, `metric`, `para_type`,
    /// `flow.opcode`, `flow.src`, ..., `path_id`, or `trailing`).
    pub field: &'static str,
    pub problem: Problem,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Truncated { need, have } => {
                write!(f, "truncated: needs {need} octet(s), {have} left")
            }
            Problem::Invalid(why) => f.write_str(why),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("flow {field} address does not match the flow family {family:?}")]
    FamilyMismatch { field: &'static str, family: Family },
}

/// The JSON form printed by `fare arn decode --json` (field names are a contract).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ArnJson {
    #[serde(rename = "type")]
    pub kind: u8,
    pub version: u8,
    pub metric: u8,
    pub para_type: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_id: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct FlowJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<u16>,
}

impl From<&ArnMessage> for ArnJson {
    fn from(m: &ArnMessage) -> ArnJson {
        ArnJson {
            kind: m.kind.code(),
            version: VERSION,
            metric: m.metric,
            para_type: m.para_type(),
            flow: m.flow.as_ref().map(|f| FlowJson {
                protocol: f.protocol,
                src: f.src,
                dst: f.dst,
                src_port: f.src_port,
                dst_port: f.dst_port,
            }),
            path_id: m.path_id,
        }
    }
}

impl fmt::Display for ArnMessage {
    /// One line with every field, for logs and `fare arn decode`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "type {} ({}) version {VERSION} metric {} para_type 0x{:02x}",
            self.kind.code(),
            self.kind.describe(),
            self.metric,
            self.para_type()
        )?;
        if let Some(flow) = &self.flow {
            write!(
                f,
                " flow [{} mask 0x{:02x}",
                match flow.family {
                    Family::Ipv4 => "ipv4",
                    Family::Ipv6 => "ipv6",
                },
                flow.mask()
            )?;
            if let Some(p) = flow.protocol {
                write!(f, " protocol {p}")?;
            }
            if let Some(a) = flow.src {
                write!(f, " src {a}")?;
            }
            if let Some(a) = flow.dst {
                write!(f, " dst {a}")?;
            }
            if let Some(p) = flow.src_port {
                write!(f, " src_port {p}")?;
            }
            if let Some(p) = flow.dst_port {
                write!(f, " dst_port {p}")?;
            }
            f.write_str("]")?;
        }
        if let Some(id) = self.path_id {
            write!(f, " path_id {id} ({})", Ipv4Addr::from(id))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The draft's names of the four Types (§3.2), as logs and `fare arn decode` print
    /// them.
    #[test]
    fn type_names() {
        let table = [
            (1, "congestion detected", true),
            (2, "congestion eliminated", false),
            (3, "failure detected", true),
            (4, "failure eliminated", false),
        ];
        for (code, name, removes) in table {
            let t = ArnType::from_u8(code).unwrap();
            assert_eq!((t.code(), t.describe(), t.removes()), (code, name, removes));
        }
    }

    /// The one-line form of logs and `fare arn decode`, written out by hand.
    #[test]
    fn display_line() {
        let m = ArnMessage {
            kind: ArnType::CongestionDetected,
            metric: 200,
            flow: Some(FlowId {
                family: Family::Ipv4,
                protocol: Some(6),
                src: Some("192.0.2.1".parse().unwrap()),
                dst: Some("198.51.100.2".parse().unwrap()),
                src_port: Some(1000),
                dst_port: Some(443),
            }),
            path_id: Some(0x0a00_0001),
        };
        assert_eq!(
            m.to_string(),
            "type 1 (congestion detected) version 0 metric 200 para_type 0xc0 flow [ipv4 mask \
             0x1f protocol 6 src 192.0.2.1 dst 198.51.100.2 src_port 1000 dst_port 443] \
             path_id 167772161 (10.0.0.1)"
        );
        let m = ArnMessage {
            kind: ArnType::FailureEliminated,
            metric: 0,
            flow: Some(FlowId {
                family: Family::Ipv6,
                ..FlowId::default()
            }),
            path_id: None,
        };
        assert_eq!(
            m.to_string(),
            "type 4 (failure eliminated) version 0 metric 0 para_type 0x80 flow [ipv6 mask 0x00]"
        );
    }

    #[test]
    fn family_of_an_address() {
        assert_eq!(Family::of(&"192.0.2.1".parse().unwrap()), Family::Ipv4);
        assert_eq!(Family::of(&"2001:db8::1".parse().unwrap()), Family::Ipv6);
    }

    /// A flow identifier matches a packet when every field it carries is equal; an
    /// absent field matches anything.
    #[test]
    fn flow_matches_field_by_field() {
        let (src, dst): (IpAddr, IpAddr) = (
            "192.0.2.1".parse().unwrap(),
            "198.51.100.2".parse().unwrap(),
        );
        let other: IpAddr = "203.0.113.3".parse().unwrap();
        let flow = FlowId {
            family: Family::Ipv4,
            protocol: Some(6),
            src: Some(src),
            dst: Some(dst),
            src_port: Some(1000),
            dst_port: Some(443),
        };
        assert!(flow.matches(6, src, dst, 1000, 443));
        assert!(!flow.matches(17, src, dst, 1000, 443), "protocol");
        assert!(!flow.matches(6, other, dst, 1000, 443), "source");
        assert!(!flow.matches(6, src, other, 1000, 443), "destination");
        assert!(!flow.matches(6, src, dst, 1001, 443), "source port");
        assert!(!flow.matches(6, src, dst, 1000, 444), "destination port");
        let any = FlowId::default();
        assert!(any.matches(17, other, other, 1, 2));
        let dst_only = FlowId {
            dst: Some(dst),
            ..FlowId::default()
        };
        assert!(dst_only.matches(17, other, dst, 1, 2));
        assert!(!dst_only.matches(17, dst, other, 1, 2));
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// (bytes, message) pairs checked in both directions.
    fn vectors() -> Vec<(Vec<u8>, ArnMessage)> {
        vec![
            (
                hex("01 00 2a 40   0a000002"), // type 1, v0, metric 42, path id 10.0.0.2
                ArnMessage::path(ArnType::CongestionDetected, 42, 0x0a00_0002),
            ),
            (
                hex("02 00 00 00"), // type 2, no parameters
                ArnMessage {
                    kind: ArnType::CongestionEliminated,
                    metric: 0,
                    flow: None,
                    path_id: None,
                },
            ),
            (
                // type 3, metric 255, flow + path id
                // word: opcode 0, mask 11111 (0x0f800000), protocol 17
                hex("03 00 ff c0   0f800011  c0000201 c6336401  1f90 2383  0a000003"),
                ArnMessage {
                    kind: ArnType::FailureDetected,
                    metric: 255,
                    flow: Some(FlowId {
                        family: Family::Ipv4,
                        protocol: Some(17),
                        src: Some("192.0.2.1".parse().unwrap()),
                        dst: Some("198.51.100.1".parse().unwrap()),
                        src_port: Some(8080),
                        dst_port: Some(9091),
                    }),
                    path_id: Some(0x0a00_0003),
                },
            ),
            (
                // type 4, IPv6 flow with only dst address and dst port: opcode 1, mask 00101
                hex("04 00 07 80   12800000  20010db8000000000000000000000001  12b7"),
                ArnMessage {
                    kind: ArnType::FailureEliminated,
                    metric: 7,
                    flow: Some(FlowId {
                        family: Family::Ipv6,
                        protocol: None,
                        src: None,
                        dst: Some("2001:db8::1".parse().unwrap()),
                        src_port: None,
                        dst_port: Some(4791),
                    }),
                    path_id: None,
                },
            ),
        ]
    }

    #[test]
    fn vectors_encode_and_decode() {
        // FARE_FUZZ_SEEDS=DIR (the repository's fuzz/seeds): the vectors become seeds of
        // the arn_decode fuzz target.
        let seeds = std::env::var_os("FARE_FUZZ_SEEDS")
            .map(|d| std::path::PathBuf::from(d).join("arn_decode"));
        for (i, (bytes, msg)) in vectors().into_iter().enumerate() {
            assert_eq!(msg.encode().unwrap(), bytes, "encode {msg}");
            assert_eq!(ArnMessage::decode(&bytes).unwrap(), msg);
            assert_eq!(msg.wire_len(), bytes.len());
            if let Some(dir) = &seeds {
                std::fs::create_dir_all(dir).unwrap();
                std::fs::write(dir.join(format!("vector-{i}")), &bytes).unwrap();
            }
        }
    }

    #[test]
    fn reserved_bits_and_unmasked_protocol_are_ignored() {
        // Rsvd nibble 0x5, flow Rsvd bits set, Protocol 6 present but Mask bit clear.
        let m = ArnMessage::decode(&hex("01 05 01 80  007fff06")).unwrap();
        let flow = m.flow.unwrap();
        assert_eq!(flow.protocol, None);
        assert_eq!(flow.mask(), 0);
    }

    fn err(s: &str) -> (usize, &'static str) {
        let e = ArnMessage::decode(&hex(s)).unwrap_err();
        (e.offset, e.field)
    }

    #[test]
    fn malformed_messages_name_offset_and_field() {
        assert_eq!(err(""), (0, "type"));
        assert_eq!(err("05 00 00 00"), (0, "type"));
        assert_eq!(err("00 00 00 00"), (0, "type"));
        assert_eq!(err("01"), (1, "version"));
        assert_eq!(err("01 10 00 00"), (1, "version"));
        assert_eq!(err("01 00"), (2, "metric"));
        assert_eq!(err("01 00 00"), (3, "para_type"));
        assert_eq!(err("01 00 00 20"), (3, "para_type"));
        assert_eq!(err("01 00 00 40 0a00"), (4, "path_id"));
        assert_eq!(err("01 00 00 80 20000000"), (4, "flow.opcode"));
        assert_eq!(err("01 00 00 80 0400"), (4, "flow.opcode"));
        assert_eq!(err("01 00 00 80 04000000 c000"), (8, "flow.src"));
        assert_eq!(err("01 00 00 80 12000000 c0000201"), (8, "flow.dst"));
        assert_eq!(err("01 00 00 80 01000000 00"), (8, "flow.src_port"));
        assert_eq!(err("01 00 00 80 00800000"), (8, "flow.dst_port"));
        assert_eq!(err("01 00 00 c0 00000000 0a000001 ff"), (12, "trailing"));
        let e = ArnMessage::decode(&hex("01 00 00 40 0a")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "byte 4 (path_id): truncated: needs 4 octet(s), 1 left"
        );
    }

    #[test]
    fn json_names_are_the_contract() {
        let (bytes, _) = vectors().remove(3);
        let m = ArnMessage::decode(&bytes).unwrap();
        let v = serde_json::to_value(ArnJson::from(&m)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": 4, "version": 0, "metric": 7, "para_type": 128,
                "flow": {"dst": "2001:db8::1", "dst_port": 4791}})
        );
        let m = ArnMessage::path(ArnType::CongestionDetected, 9, 0x0a00_0002);
        let v = serde_json::to_value(ArnJson::from(&m)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": 1, "version": 0, "metric": 9, "para_type": 64,
                "path_id": 167772162u32})
        );
    }

    #[test]
    fn mixed_family_is_an_encode_error() {
        let m = ArnMessage {
            kind: ArnType::CongestionDetected,
            metric: 1,
            flow: Some(FlowId {
                family: Family::Ipv6,
                src: Some("192.0.2.1".parse().unwrap()),
                ..Default::default()
            }),
            path_id: None,
        };
        assert!(m.encode().is_err());
    }

    pub(crate) fn arb_message() -> impl Strategy<Value = ArnMessage> {
        let kind = (1u8..=4).prop_map(|t| ArnType::from_u8(t).unwrap());
        let flow = (
            any::<bool>(),
            proptest::option::of(any::<u8>()),
            proptest::option::of(any::<[u8; 16]>()),
            proptest::option::of(any::<[u8; 16]>()),
            proptest::option::of(any::<u16>()),
            proptest::option::of(any::<u16>()),
        )
            .prop_map(|(v6, protocol, src, dst, src_port, dst_port)| {
                let addr = |a: [u8; 16]| -> IpAddr {
                    if v6 {
                        IpAddr::V6(Ipv6Addr::from(a))
                    } else {
                        IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))
                    }
                };
                FlowId {
                    family: if v6 { Family::Ipv6 } else { Family::Ipv4 },
                    protocol,
                    src: src.map(addr),
                    dst: dst.map(addr),
                    src_port,
                    dst_port,
                }
            });
        (
            kind,
            any::<u8>(),
            proptest::option::of(flow),
            proptest::option::of(any::<u32>()),
        )
            .prop_map(|(kind, metric, flow, path_id)| ArnMessage {
                kind,
                metric,
                flow,
                path_id,
            })
    }

    proptest! {
        #[test]
        fn encode_then_decode_is_identity(m in arb_message()) {
            let bytes = m.encode().unwrap();
            prop_assert_eq!(bytes.len(), m.wire_len());
            prop_assert!(bytes.len() <= MAX_LEN);
            prop_assert_eq!(ArnMessage::decode(&bytes).unwrap(), m);
        }

        #[test]
        fn decode_never_panics_and_reencodes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            match ArnMessage::decode(&bytes) {
                Ok(m) => {
                    // Re-encoding reproduces the input up to reserved bits and an unmasked Protocol.
                    let again = m.encode().unwrap();
                    prop_assert_eq!(again.len(), bytes.len());
                    prop_assert_eq!(ArnMessage::decode(&again).unwrap(), m);
                }
                Err(e) => prop_assert!(e.offset <= bytes.len()),
            }
        }

        #[test]
        fn every_truncation_is_an_error(m in arb_message()) {
            let bytes = m.encode().unwrap();
            for cut in 0..bytes.len() {
                let e = ArnMessage::decode(&bytes[..cut]).unwrap_err();
                prop_assert!(e.offset <= cut, "{} at cut {}", e, cut);
            }
        }
    }
}

/// The ARN constants `p4/include/constants.p4` repeats for the P4 compiler agree with
/// the one source in `fare_common::arn_wire` (used by this codec and the XDP program).
#[cfg(test)]
mod p4_constants_agree {
    use fare_common::arn_wire as wire;

    fn p4_value(text: &str, name: &str) -> u64 {
        let line = text
            .lines()
            .find(|l| {
                let l = l.trim_start();
                (l.starts_with("const ") && l.contains(&format!(" {name} ")))
                    || l.starts_with(&format!("#define {name} "))
            })
            .unwrap_or_else(|| panic!("{name} not in constants.p4"));
        // A trailing `//` comment is not part of the value.
        let code = line.split("//").next().unwrap_or_default();
        let v = code
            .rsplit(['=', ' '])
            .map(|t| t.trim().trim_end_matches(';'))
            .find(|t| !t.is_empty())
            .unwrap_or_default();
        let parsed = match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => v.parse(),
        };
        parsed.unwrap_or_else(|_| panic!("{name}: `{v}` is not a number"))
    }

    #[test]
    fn constants_p4_matches_fare_common() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/include/constants.p4");
        let text = std::fs::read_to_string(path).expect("p4/include/constants.p4");
        // (fare.p4 writes and checks Version 0 as a literal.)
        assert_eq!(wire::VERSION, 0);
        let expect: [(&str, u64); 7] = [
            ("ARN_UDP_PORT", wire::DEFAULT_UDP_PORT.into()),
            (
                "ARN_CONGESTION_DETECTED",
                wire::TYPE_CONGESTION_DETECTED.into(),
            ),
            (
                "ARN_CONGESTION_ELIMINATED",
                wire::TYPE_CONGESTION_ELIMINATED.into(),
            ),
            ("ARN_FAILURE_DETECTED", wire::TYPE_FAILURE_DETECTED.into()),
            (
                "ARN_FAILURE_ELIMINATED",
                wire::TYPE_FAILURE_ELIMINATED.into(),
            ),
            ("ARN_PARA_FLOW", wire::PARA_FLOW.into()),
            ("ARN_PARA_PATH_ID", wire::PARA_PATH_ID.into()),
        ];
        for (name, value) in expect {
            assert_eq!(p4_value(&text, name), value, "{name} in constants.p4");
        }
    }
}
