//! Unreachable Prefix Announcement (draft-krierhorn-idr-upa-02), the mechanism
//! draft-xu-idr-fare-in-mpson §4.1 uses: a leaf that aggregates its RNICs' host routes
//! advertises an RNIC's /32 as unreachable while that RNIC is disconnected from its plane.
//!
//! A UPA route is an ordinary route for the unreachable prefix that carries the UPA
//! extended community:
//!
//! ```text
//!  0        1        2        3        4  ..  7
//! +--------+--------+--------+--------+-----------+
//! | 0x03   | subtype| flags  | 0x00   | originator|   transitive opaque (RFC 4360 §3.3)
//! +--------+--------+--------+--------+-----------+
//!   flags: 0x80 = D (receivers may drop traffic to the prefix); other bits sent 0,
//!   ignored; the reserved octet is sent 0 and ignored; originator = router ID of the
//!   node that announced the prefix unreachable.
//! ```
//!
//! The subtype is TBD in the draft; fare's default (0x09, what FRR's implementation of the
//! draft sends) is configurable (docs/CODEPOINTS.md). A malformed extended communities
//! attribute is handled by the attribute codec (RFC 7606 treat-as-withdraw, which withdraws
//! the UPA too); a UPA community itself cannot be malformed: all 8 octets are defined or
//! ignored.

use super::community::ExtCommunity;
use std::net::Ipv4Addr;

/// Transitive opaque extended community type (RFC 4360 §3.3).
pub const TYPE_OPAQUE_TRANSITIVE: u8 = 0x03;
/// Default UPA subtype (TBD in draft-krierhorn-idr-upa-02).
pub const DEFAULT_UPA_SUBTYPE: u8 = 0x09;
/// Flags octet: D bit.
pub const FLAG_DROP: u8 = 0x80;

/// The decoded UPA extended community.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Upa {
    /// D bit: receivers may install the prefix as a discard route. fare's leaves send it
    /// clear: an RNIC avoids the plane instead of dropping.
    pub drop: bool,
    pub originator: Ipv4Addr,
}

impl Upa {
    pub fn new(originator: Ipv4Addr) -> Upa {
        Upa {
            drop: false,
            originator,
        }
    }

    pub fn to_community(self, subtype: u8) -> ExtCommunity {
        let [a, b, c, d] = self.originator.octets();
        let flags = if self.drop { FLAG_DROP } else { 0 };
        ExtCommunity([TYPE_OPAQUE_TRANSITIVE, subtype, flags, 0, a, b, c, d])
    }

    /// This community read as UPA of `subtype`, if it is one.
    pub fn from_community(c: &ExtCommunity, subtype: u8) -> Option<Upa> {
        let [t, s, flags, _reserved, a, b, c, d] = c.0;
        (t == TYPE_OPAQUE_TRANSITIVE && s == subtype).then(|| Upa {
            drop: flags & FLAG_DROP != 0,
            originator: Ipv4Addr::new(a, b, c, d),
        })
    }
}

/// The UPA a route's communities carry (the first one, if several), i.e. whether the
/// route announces its prefix unreachable.
pub fn unreachable(communities: &[ExtCommunity], subtype: u8) -> Option<Upa> {
    communities
        .iter()
        .find_map(|c| Upa::from_community(c, subtype))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{msg_type, Context, Message, HEADER_LEN, MARKER};
    use proptest::prelude::*;

    /// (community bytes, value) in both directions.
    #[test]
    fn vectors() {
        let cases: [([u8; 8], Upa); 3] = [
            (
                // type opaque, subtype 0x09, flags 0, reserved, originator 10.0.0.2
                [0x03, 0x09, 0x00, 0x00, 10, 0, 0, 2],
                Upa::new(Ipv4Addr::new(10, 0, 0, 2)),
            ),
            (
                // D bit set
                [0x03, 0x09, 0x80, 0x00, 10, 1, 0, 1],
                Upa {
                    drop: true,
                    originator: Ipv4Addr::new(10, 1, 0, 1),
                },
            ),
            (
                [0x03, 0x09, 0x00, 0x00, 255, 255, 255, 255],
                Upa::new(Ipv4Addr::BROADCAST),
            ),
        ];
        for (bytes, value) in cases {
            let c = ExtCommunity(bytes);
            assert_eq!(Upa::from_community(&c, DEFAULT_UPA_SUBTYPE), Some(value));
            assert_eq!(value.to_community(DEFAULT_UPA_SUBTYPE), c);
            assert!(c.is_transitive(), "UPA must cross the plane's ASes");
        }
    }

    #[test]
    fn unknown_flags_and_reserved_are_ignored() {
        let c = ExtCommunity([0x03, 0x09, 0x7f, 0xff, 10, 0, 0, 1]);
        assert_eq!(
            Upa::from_community(&c, DEFAULT_UPA_SUBTYPE),
            Some(Upa::new(Ipv4Addr::new(10, 0, 0, 1)))
        );
    }

    #[test]
    fn other_communities_are_not_upa() {
        let not_upa = [
            // Color (opaque, subtype 0x0b)
            [0x03, 0x0b, 0, 0, 0, 0, 0, 1],
            // non-transitive opaque, subtype 0x09
            [0x43, 0x09, 0, 0, 10, 0, 0, 1],
            // Path Bandwidth
            [0x01, 0xa0, 10, 0, 0, 1, 0x42, 0xc8],
            // FIB-Suppress
            [0x00, 0xa1, 0xfd, 0xf3, 10, 1, 0, 1],
        ];
        for b in not_upa {
            assert_eq!(
                Upa::from_community(&ExtCommunity(b), DEFAULT_UPA_SUBTYPE),
                None
            );
        }
        // Configured subtype: the default one is then an unknown community.
        let c = Upa::new(Ipv4Addr::LOCALHOST).to_community(0xa2);
        assert_eq!(Upa::from_community(&c, DEFAULT_UPA_SUBTYPE), None);
        assert!(Upa::from_community(&c, 0xa2).is_some());
        assert_eq!(unreachable(&[], DEFAULT_UPA_SUBTYPE), None);
    }

    fn update_with_ext_communities(value: &[u8]) -> Vec<u8> {
        let mut attrs = vec![
            0x40, 0x01, 0x01, 0x00, // ORIGIN IGP
            0x40, 0x02, 0x06, 0x02, 0x01, 0x00, 0x00, 0xfd, 0xeb, // AS_PATH [65003]
            0x40, 0x03, 0x04, 10, 0, 0, 1, // NEXT_HOP 10.0.0.1
            0xc0, 0x10, // EXTENDED COMMUNITIES, optional transitive
        ];
        attrs.push(value.len() as u8);
        attrs.extend_from_slice(value);
        let mut body = vec![0, 0]; // no withdrawn routes
        body.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
        body.extend_from_slice(&attrs);
        body.extend_from_slice(&[32, 10, 200, 1, 1]); // NLRI 10.200.1.1/32
        let mut msg = MARKER.to_vec();
        msg.extend_from_slice(&((HEADER_LEN + body.len()) as u16).to_be_bytes());
        msg.push(msg_type::UPDATE);
        msg.extend_from_slice(&body);
        msg
    }

    #[test]
    fn upa_route_through_message_decode() {
        let bytes = update_with_ext_communities(&[0x03, 0x09, 0x00, 0x00, 10, 1, 0, 1]);
        let Ok(Message::Update(u)) = Message::decode(&bytes, Context::default()) else {
            panic!("decodes");
        };
        assert!(u.errors.is_empty());
        assert_eq!(
            unreachable(&u.attributes.ext_communities, DEFAULT_UPA_SUBTYPE),
            Some(Upa::new(Ipv4Addr::new(10, 1, 0, 1)))
        );
        assert_eq!(
            Message::Update(u).encode(Context::default()),
            bytes,
            "re-encodes byte for byte"
        );
    }

    #[test]
    fn rfc7606_truncated_upa_is_treat_as_withdraw() {
        use crate::packet::AttrAction;
        // 7 octets: not a whole extended community.
        let bytes = update_with_ext_communities(&[0x03, 0x09, 0x00, 0x00, 10, 1, 0]);
        let Ok(Message::Update(u)) = Message::decode(&bytes, Context::default()) else {
            panic!("decodes");
        };
        assert!(u.treat_as_withdraw());
        assert!(u
            .errors
            .iter()
            .any(|e| e.type_code == 16 && e.action == AttrAction::TreatAsWithdraw));
    }

    proptest! {
        #[test]
        fn round_trip(rid in any::<u32>(), drop in any::<bool>(), subtype in any::<u8>()) {
            let u = Upa { drop, originator: Ipv4Addr::from(rid) };
            prop_assert_eq!(Upa::from_community(&u.to_community(subtype), subtype), Some(u));
        }

        #[test]
        fn any_community_decodes_without_panic(bytes in any::<[u8; 8]>(), subtype in any::<u8>()) {
            let c = ExtCommunity(bytes);
            if let Some(u) = Upa::from_community(&c, subtype) {
                prop_assert_eq!(bytes[0], TYPE_OPAQUE_TRANSITIVE);
                prop_assert_eq!(u.originator.octets(), [bytes[4], bytes[5], bytes[6], bytes[7]]);
            }
        }
    }
}
