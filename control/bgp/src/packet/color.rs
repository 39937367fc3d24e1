//! DPF wire pieces (draft-wang-idr-dpf): the Color extended community of RFC 9012 §4.3
//! that colors routes, and the SESSION-COLOR capability (draft §2.1.1) that carries a
//! session's color in OPEN. The capability code is TBD in the draft, so it is a parameter
//! here (default [`DEFAULT_SESSION_COLOR_CAPABILITY`], see docs/CODEPOINTS.md); the codec
//! keeps every capability it does not know as `Capability::Unknown`, and this module reads
//! and writes the configured code.

use super::community::ExtCommunity;
use super::open::Capability;

/// Color extended community: transitive opaque type, Color subtype (RFC 9012 §4.3).
pub const TYPE_TRANSITIVE_OPAQUE: u8 = 0x03;
pub const SUBTYPE_COLOR: u8 = 0x0b;

/// SESSION-COLOR capability code: 240, from the Experimental Use range 239-254 of the
/// Capability Codes registry (RFC 8810), until IANA assigns one.
pub const DEFAULT_SESSION_COLOR_CAPABILITY: u8 = 240;
/// OPEN Message Error subcode "Color mismatch": 12, the first unassigned value of the
/// registry (11 is Role Mismatch, RFC 9234), until IANA assigns one.
pub const DEFAULT_COLOR_MISMATCH_SUBCODE: u8 = 12;

/// A Color extended community: 2 octets of flags (kept as received; DPF ignores them)
/// and the 4-octet Color Value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColorCommunity {
    pub flags: u16,
    pub color: u32,
}

impl ColorCommunity {
    pub fn new(color: u32) -> Self {
        ColorCommunity { flags: 0, color }
    }

    /// `c` read as a Color community, if it is one.
    pub fn from_community(c: &ExtCommunity) -> Option<ColorCommunity> {
        let [t, s, f0, f1, a, b, cc, d] = c.0;
        (t == TYPE_TRANSITIVE_OPAQUE && s == SUBTYPE_COLOR).then(|| ColorCommunity {
            flags: u16::from_be_bytes([f0, f1]),
            color: u32::from_be_bytes([a, b, cc, d]),
        })
    }

    pub fn to_community(self) -> ExtCommunity {
        let [f0, f1] = self.flags.to_be_bytes();
        let [a, b, c, d] = self.color.to_be_bytes();
        ExtCommunity([TYPE_TRANSITIVE_OPAQUE, SUBTYPE_COLOR, f0, f1, a, b, c, d])
    }
}

/// The colors of a route: every Color community among its extended communities, in order.
pub fn route_colors(communities: &[ExtCommunity]) -> Vec<u32> {
    communities
        .iter()
        .filter_map(ColorCommunity::from_community)
        .map(|c| c.color)
        .collect()
}

/// `communities` without any Color community.
pub fn strip_colors(communities: &mut Vec<ExtCommunity>) {
    communities.retain(|c| ColorCommunity::from_community(c).is_none());
}

/// The SESSION-COLOR capability for `color` under capability code `code`.
pub fn session_color_capability(code: u8, color: u32) -> Capability {
    Capability::Unknown {
        code,
        value: color.to_be_bytes().to_vec(),
    }
}

/// What a received OPEN says about the sender's session color.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerColor {
    /// No SESSION-COLOR capability.
    None,
    Color(u32),
    /// The capability is there but its length is not 4, or it appears with two colors.
    Malformed,
}

/// Reads the SESSION-COLOR capability (code `code`) from the capabilities of an OPEN.
pub fn peer_session_color(capabilities: &[Capability], code: u8) -> PeerColor {
    let mut found = PeerColor::None;
    for cap in capabilities {
        let Capability::Unknown { code: c, value } = cap else {
            continue;
        };
        if *c != code {
            continue;
        }
        let Ok(b) = <[u8; 4]>::try_from(value.as_slice()) else {
            return PeerColor::Malformed;
        };
        let color = u32::from_be_bytes(b);
        found = match found {
            PeerColor::None => PeerColor::Color(color),
            PeerColor::Color(x) if x == color => found,
            _ => return PeerColor::Malformed,
        };
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn color_community_vectors() {
        // (bytes, flags, color)
        let table: [([u8; 8], u16, u32); 3] = [
            // type 0x03 transitive opaque, subtype 0x0b Color, flags 0, color 1
            ([0x03, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01], 0, 1),
            // flags kept as received (RFC 9256 CO bits), color 0xdeadbeef
            (
                [0x03, 0x0b, 0x40, 0x00, 0xde, 0xad, 0xbe, 0xef],
                0x4000,
                0xdead_beef,
            ),
            // color 0 is a color like any other
            ([0x03, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], 0, 0),
        ];
        for (bytes, flags, color) in table {
            let c = ColorCommunity::from_community(&ExtCommunity(bytes)).unwrap();
            assert_eq!(c, ColorCommunity { flags, color });
            assert_eq!(c.to_community().0, bytes);
        }
        // Not a color: non-transitive opaque (0x43), other subtype, Path Bandwidth.
        for bytes in [
            [0x43, 0x0b, 0, 0, 0, 0, 0, 1],
            [0x03, 0x0c, 0, 0, 0, 0, 0, 1],
            [0x01, 0xa0, 10, 0, 0, 1, 0x41, 0x48],
        ] {
            assert_eq!(ColorCommunity::from_community(&ExtCommunity(bytes)), None);
        }
    }

    #[test]
    fn route_colors_and_strip() {
        let mut cs = vec![
            ExtCommunity([0x01, 0xa0, 10, 0, 0, 1, 0x41, 0x48]),
            ColorCommunity::new(2).to_community(),
            ColorCommunity::new(7).to_community(),
        ];
        assert_eq!(route_colors(&cs), [2, 7]);
        strip_colors(&mut cs);
        assert_eq!(cs.len(), 1);
        assert!(route_colors(&cs).is_empty());
    }

    #[test]
    fn session_color_capability_vectors() {
        let code = DEFAULT_SESSION_COLOR_CAPABILITY;
        // (capabilities, what they say)
        let table: Vec<(Vec<Capability>, PeerColor)> = vec![
            (vec![Capability::RouteRefresh], PeerColor::None),
            (vec![session_color_capability(code, 5)], PeerColor::Color(5)),
            (
                vec![
                    Capability::Unknown {
                        code,
                        value: vec![0, 0, 1],
                    }, // length 3
                ],
                PeerColor::Malformed,
            ),
            (
                vec![
                    session_color_capability(code, 5),
                    session_color_capability(code, 6),
                ],
                PeerColor::Malformed,
            ),
            // the same color twice is still that color
            (
                vec![
                    session_color_capability(code, 5),
                    session_color_capability(code, 5),
                ],
                PeerColor::Color(5),
            ),
            // another code is not ours
            (vec![session_color_capability(code + 1, 5)], PeerColor::None),
        ];
        for (caps, want) in table {
            assert_eq!(peer_session_color(&caps, code), want, "{caps:?}");
        }
    }

    #[test]
    fn session_color_capability_on_the_wire() {
        use crate::packet::{Context, Message, Open};
        let open = Open::new(
            65001,
            9,
            "10.0.0.1".parse().unwrap(),
            vec![session_color_capability(240, 0x0102_0304)],
        );
        let bytes = Message::Open(open.clone()).encode(Context::default());
        // ... optional parameters length 8: parameter type 2 (capabilities), length 6,
        // capability code 240, length 4, color value 01 02 03 04
        assert_eq!(
            &bytes[28..],
            &[0x08, 0x02, 0x06, 0xf0, 0x04, 0x01, 0x02, 0x03, 0x04]
        );
        let Ok(Message::Open(back)) = Message::decode(&bytes, Context::default()) else {
            panic!()
        };
        assert_eq!(back, open);
        assert_eq!(
            peer_session_color(&back.capabilities, 240),
            PeerColor::Color(0x0102_0304)
        );
    }
}
