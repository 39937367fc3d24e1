//! BGP-4 wire codec: one module per message, path attributes, errors.
//!
//! Decision (time-boxed evaluation of netgauze-bgp-pkt, rustbgpd-wire, routecore and
//! zettabgp): fare owns a focused codec. What we need from a codec is narrow but strict:
//! every RFC 7606 outcome (attribute discard / treat-as-withdraw / session reset with the
//! exact NOTIFICATION code and subcode) decided while parsing, byte-for-byte survival of
//! unknown optional transitive attributes and of unknown extended communities (DPF and the
//! FIB-Suppress community come later and must pass through nodes that do not know them),
//! and the Path Bandwidth community with a configurable subtype. netgauze-bgp-pkt fails the
//! whole UPDATE on a malformed attribute (no per-attribute outcome) and pulls in a large
//! dependency tree; routecore parses lazily for route servers and leaves RFC 7606 outcomes
//! to the caller; zettabgp has no RFC 7606 handling; rustbgpd-wire comes closest but is a
//! young single-maintainer crate whose API changed in most of its many 0.x releases. A
//! codec of this size is cheaper to own than to adapt, and it is tested as (bytes, value)
//! vectors in both directions, negative RFC 7606 vectors, proptest round trips and a
//! cargo-fuzz target (`fuzz/`, `bgp_decode`).
//!
//! Framing: [`frame_len`] finds one message in a byte stream; [`Message::decode`] decodes it
//! with the negotiated [`Context`]; [`Message::encode`] produces the bytes.

pub mod aigp;
pub mod attribute;
pub mod codes;
pub mod color;
pub mod community;
pub mod error;
pub mod link_bandwidth;
pub mod nlri;
pub mod notification;
pub mod open;
pub mod orf;
pub mod upa;
pub mod update;

pub use aigp::Aigp;
pub use attribute::{AsPath, AsSegment, MpReach, MpUnreach, Origin, PathAttributes, RawAttribute};
pub use color::{ColorCommunity, PeerColor};
pub use community::{ExtCommunity, PathBandwidth};
pub use error::{AttrAction, AttrError, MessageError};
pub use link_bandwidth::LinkBandwidth;
pub use notification::Notification;
pub use open::{Capability, Open};
pub use update::Update;

use error::{code, header};

pub const MARKER: [u8; 16] = [0xff; 16];
pub const HEADER_LEN: usize = 19;
pub const MAX_MESSAGE_LEN: usize = 4096;

/// Message type codes (RFC 4271 §4.1, RFC 2918).
pub mod msg_type {
    pub const OPEN: u8 = 1;
    pub const UPDATE: u8 = 2;
    pub const NOTIFICATION: u8 = 3;
    pub const KEEPALIVE: u8 = 4;
    pub const ROUTE_REFRESH: u8 = 5;
}

/// Address family identifiers (IANA) fare speaks: unicast only.
pub const AFI_IPV4: u16 = 1;
pub const AFI_IPV6: u16 = 2;
pub const SAFI_UNICAST: u8 = 1;

/// An address family + subsequent address family we can carry routes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    Ipv4Unicast,
    Ipv6Unicast,
}

impl Family {
    pub fn from_afi_safi(afi: u16, safi: u8) -> Option<Family> {
        match (afi, safi) {
            (AFI_IPV4, SAFI_UNICAST) => Some(Family::Ipv4Unicast),
            (AFI_IPV6, SAFI_UNICAST) => Some(Family::Ipv6Unicast),
            _ => None,
        }
    }

    pub fn afi_safi(self) -> (u16, u8) {
        match self {
            Family::Ipv4Unicast => (AFI_IPV4, SAFI_UNICAST),
            Family::Ipv6Unicast => (AFI_IPV6, SAFI_UNICAST),
        }
    }
}

/// What both sides negotiated; decoding and encoding depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// RFC 6793: AS numbers in AS_PATH are 4 octets.
    pub four_octet_as: bool,
}

impl Context {
    /// The context of a session whose peer sent `peer_open` (None before its OPEN):
    /// 4-octet AS numbers once the peer announced the capability (we always do). fare
    /// announces neither ADD-PATH (RFC 7911) nor Extended Messages (RFC 8654), so a peer's
    /// offer of them changes nothing: NLRI carry no path identifier and messages stay
    /// within [`MAX_MESSAGE_LEN`].
    pub fn negotiated(peer_open: Option<&Open>) -> Context {
        Context {
            four_octet_as: peer_open.is_some_and(|o| {
                o.capabilities
                    .iter()
                    .any(|c| matches!(c, Capability::FourOctetAs(_)))
            }),
        }
    }
}

impl Default for Context {
    fn default() -> Self {
        Context {
            four_octet_as: true,
        }
    }
}

/// ROUTE-REFRESH (RFC 2918): ask the peer to resend its Adj-RIB-Out for one family,
/// optionally with Outbound Route Filter entries (RFC 5291, see [`orf`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteRefresh {
    pub afi: u16,
    /// Reserved in RFC 2918; the message subtype in RFC 7313. Kept as received.
    pub subtype: u8,
    pub safi: u8,
    pub orf: Option<orf::Orf>,
}

// UPDATE is by far the most frequent message: boxing it would cost an allocation each.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Open(Open),
    Update(Update),
    Notification(Notification),
    Keepalive,
    RouteRefresh(RouteRefresh),
}

/// Length of the first message in `buf` once its header is complete (`None` until then).
/// A bad marker or length is an error that ends the session (RFC 4271 §6.1).
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, MessageError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    if buf[..16] != MARKER {
        return Err(MessageError::new(
            code::HEADER,
            header::CONNECTION_NOT_SYNCHRONIZED,
            vec![],
            "marker is not all ones",
        ));
    }
    let len = u16::from_be_bytes([buf[16], buf[17]]) as usize;
    let min = match buf[18] {
        msg_type::OPEN => 29,
        msg_type::UPDATE => 23,
        msg_type::NOTIFICATION => 21,
        msg_type::KEEPALIVE => 19,
        msg_type::ROUTE_REFRESH => 23,
        other => {
            return Err(MessageError::new(
                code::HEADER,
                header::BAD_MESSAGE_TYPE,
                vec![other],
                "unknown message type",
            ))
        }
    };
    // ROUTE-REFRESH is 23 octets, or longer with ORF entries (RFC 5291).
    let exact = buf[18] == msg_type::KEEPALIVE;
    if len < min || len > MAX_MESSAGE_LEN || (exact && len != min) {
        return Err(MessageError::new(
            code::HEADER,
            header::BAD_MESSAGE_LENGTH,
            buf[16..18].to_vec(),
            "bad message length",
        ));
    }
    Ok(Some(len))
}

impl Message {
    /// Decodes one whole message (header included), as delimited by [`frame_len`].
    pub fn decode(buf: &[u8], ctx: Context) -> Result<Message, MessageError> {
        let len = frame_len(buf)?.ok_or_else(|| {
            MessageError::new(
                code::HEADER,
                header::BAD_MESSAGE_LENGTH,
                vec![],
                "truncated header",
            )
        })?;
        if len != buf.len() {
            return Err(MessageError::new(
                code::HEADER,
                header::BAD_MESSAGE_LENGTH,
                buf[16..18].to_vec(),
                "length field does not match the message",
            ));
        }
        let body = &buf[HEADER_LEN..];
        Ok(match buf[18] {
            msg_type::OPEN => Message::Open(Open::decode(body)?),
            msg_type::UPDATE => Message::Update(Update::decode(body, ctx)?),
            msg_type::NOTIFICATION => Message::Notification(Notification::decode(body)),
            msg_type::KEEPALIVE => Message::Keepalive,
            _ => {
                let afi = u16::from_be_bytes([body[0], body[1]]);
                if body[2] != 0 && body.len() != 4 {
                    // RFC 7313 §5: BoRR/EoRR carry nothing after AFI/SAFI.
                    return Err(MessageError::new(
                        code::ROUTE_REFRESH,
                        1,
                        vec![],
                        "ROUTE-REFRESH subtype with a body",
                    ));
                }
                Message::RouteRefresh(RouteRefresh {
                    afi,
                    subtype: body[2],
                    safi: body[3],
                    orf: match &body[4..] {
                        [] => None,
                        rest => Some(orf::decode(afi, rest)?),
                    },
                })
            }
        })
    }

    /// Encodes the message with its header. UPDATEs larger than 4096 octets are the
    /// caller's concern (see [`update::pack`]).
    pub fn encode(&self, ctx: Context) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&MARKER);
        out.extend_from_slice(&[0, 0, 0]);
        let kind = match self {
            Message::Open(o) => {
                o.encode(&mut out);
                msg_type::OPEN
            }
            Message::Update(u) => {
                u.encode(&mut out, ctx);
                msg_type::UPDATE
            }
            Message::Notification(n) => {
                n.encode(&mut out);
                msg_type::NOTIFICATION
            }
            Message::Keepalive => msg_type::KEEPALIVE,
            Message::RouteRefresh(r) => {
                out.extend_from_slice(&r.afi.to_be_bytes());
                out.push(r.subtype);
                out.push(r.safi);
                if let Some(o) = &r.orf {
                    orf::encode(o, &mut out);
                }
                msg_type::ROUTE_REFRESH
            }
        };
        let len = out.len() as u16;
        out[16..18].copy_from_slice(&len.to_be_bytes());
        out[18] = kind;
        out
    }
}

/// A bounds-checked reader over a byte slice; every read failure is a `None` the caller
/// maps to the RFC error of its context.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.buf.len() {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    pub fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(self.buf.len()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
