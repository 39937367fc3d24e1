//! The Link Bandwidth extended community (RFC 10005), what boxes that do not speak FARE
//! (FRR `set extcommunity bandwidth`, Arista, Cisco) use for UCMP: a two-octet
//! AS-specific extended community, type 0x00 (transitive) or 0x40 (non-transitive),
//! sub-type 0x04, global administrator = a 2-octet AS, local administrator = the bandwidth
//! in bytes per second as an IEEE 754 binary32.
//!
//! fare reads it as a path's bandwidth where no Path Bandwidth community is present and
//! writes it toward neighbors configured for it (docs/configuration.md,
//! `link_bandwidth`). Gbps here are fare's unit: 1 Gbps = 125 000 000 bytes/s.

use super::community::ExtCommunity;
use super::open::AS_TRANS;

/// Two-octet AS-specific extended community types (RFC 4360 §3.1).
pub const TYPE_AS2_TRANSITIVE: u8 = 0x00;
pub const TYPE_AS2_NON_TRANSITIVE: u8 = 0x40;
/// The Link Bandwidth sub-type (RFC 10005).
pub const SUBTYPE_LINK_BANDWIDTH: u8 = 0x04;

/// What a session does with the Link Bandwidth community (per neighbor; `off` by
/// default: FARE neighbors carry the Path Bandwidth community instead).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Neither read nor sent.
    #[default]
    Off,
    /// Read as the path's bandwidth where no Path Bandwidth community is present.
    Accept,
    /// Attached to what this neighbor is sent, with the value fare computed.
    Send,
    /// Both.
    Both,
}

impl Mode {
    pub fn accepts(self) -> bool {
        matches!(self, Mode::Accept | Mode::Both)
    }

    pub fn sends(self) -> bool {
        matches!(self, Mode::Send | Mode::Both)
    }
}

/// A decoded Link Bandwidth community.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkBandwidth {
    pub transitive: bool,
    pub asn: u16,
    /// Bytes per second as carried (finite and not negative once read by [`read`]).
    pub bytes_per_sec: f32,
}

/// What one extended community is as a Link Bandwidth community.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Read {
    /// Not a Link Bandwidth community.
    Other,
    /// One with a usable value.
    Valid(LinkBandwidth),
    /// One whose value is NaN, infinite or negative: ignored (and counted).
    Invalid,
}

impl LinkBandwidth {
    /// A community for `gbps` from `asn` (a 4-octet AS is carried as AS_TRANS).
    pub fn from_gbps(transitive: bool, asn: u32, gbps: f64) -> LinkBandwidth {
        LinkBandwidth {
            transitive,
            asn: u16::try_from(asn).unwrap_or(AS_TRANS),
            bytes_per_sec: fare_model::link_bandwidth::wire_bytes(gbps),
        }
    }

    pub fn gbps(&self) -> f64 {
        f64::from(self.bytes_per_sec) / fare_model::link_bandwidth::BYTES_PER_GBPS
    }

    pub fn to_community(self) -> ExtCommunity {
        let t = if self.transitive {
            TYPE_AS2_TRANSITIVE
        } else {
            TYPE_AS2_NON_TRANSITIVE
        };
        let [a, b] = self.asn.to_be_bytes();
        let [c, d, e, f] = self.bytes_per_sec.to_be_bytes();
        ExtCommunity([t, SUBTYPE_LINK_BANDWIDTH, a, b, c, d, e, f])
    }
}

/// `c` read as a Link Bandwidth community.
pub fn read(c: &ExtCommunity) -> Read {
    let [t, s, a, b, v @ ..] = c.0;
    if s != SUBTYPE_LINK_BANDWIDTH || (t != TYPE_AS2_TRANSITIVE && t != TYPE_AS2_NON_TRANSITIVE) {
        return Read::Other;
    }
    let bytes_per_sec = f32::from_be_bytes(v);
    if !bytes_per_sec.is_finite() || bytes_per_sec < 0.0 {
        return Read::Invalid;
    }
    Read::Valid(LinkBandwidth {
        transitive: t == TYPE_AS2_TRANSITIVE,
        asn: u16::from_be_bytes([a, b]),
        bytes_per_sec,
    })
}

/// The bandwidth of a route's Link Bandwidth communities: the lowest valid one, whatever
/// its transitivity (RFC 10005: several on one route, the lowest wins).
pub fn lowest_gbps(communities: &[ExtCommunity]) -> Option<f64> {
    communities
        .iter()
        .filter_map(|c| match read(c) {
            Read::Valid(lb) => Some(lb.gbps()),
            _ => None,
        })
        .min_by(f64::total_cmp)
}

/// How many of `communities` are Link Bandwidth communities with an unusable value.
pub fn invalid_count(communities: &[ExtCommunity]) -> usize {
    communities
        .iter()
        .filter(|c| read(c) == Read::Invalid)
        .count()
}

/// True for a Link Bandwidth community of either type (valid or not).
pub fn is_link_bandwidth(c: &ExtCommunity) -> bool {
    read(c) != Read::Other
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 10 Gbps = 1.25e9 bytes/s = 0x4E9502F9 as binary32; AS 65100 = 0xFE4C.
    #[test]
    fn vector_ten_gbps_both_types() {
        let lb = LinkBandwidth::from_gbps(true, 65100, 10.0);
        let c = lb.to_community();
        assert_eq!(c.0, [0x00, 0x04, 0xfe, 0x4c, 0x4e, 0x95, 0x02, 0xf9]);
        assert_eq!(read(&c), Read::Valid(lb));
        assert_eq!(lb.gbps(), 10.0);
        let nt = ExtCommunity([0x40, 0x04, 0xfe, 0x4c, 0x4e, 0x95, 0x02, 0xf9]);
        match read(&nt) {
            Read::Valid(x) => {
                assert!(!x.transitive);
                assert_eq!(x.gbps(), 10.0);
            }
            other => panic!("{other:?}"),
        }
        // A 4-octet AS goes as AS_TRANS.
        assert_eq!(
            LinkBandwidth::from_gbps(true, 4_200_000_000, 1.0).asn,
            23456
        );
    }

    /// docs/configuration.md, `link_bandwidth`: `accept` reads, `send` writes, `both`
    /// does both, `off` neither.
    #[test]
    fn mode_reads_and_writes() {
        let table = [
            (Mode::Off, false, false),
            (Mode::Accept, true, false),
            (Mode::Send, false, true),
            (Mode::Both, true, true),
        ];
        for (mode, accepts, sends) in table {
            assert_eq!((mode.accepts(), mode.sends()), (accepts, sends), "{mode:?}");
        }
    }

    #[test]
    fn other_communities_are_not_link_bandwidth() {
        // Route Target 0x00 0x02, an IPv4-specific 0x01 0x04, an opaque 0x03 0x04.
        for t in [[0x00, 0x02], [0x01, 0x04], [0x03, 0x04], [0x41, 0x04]] {
            let c = ExtCommunity([t[0], t[1], 0, 1, 0x4e, 0x95, 0x02, 0xf9]);
            assert_eq!(read(&c), Read::Other, "{t:?}");
        }
    }

    /// Either type with sub-type 4 is a Link Bandwidth community, whatever its value
    /// (an unusable one included); sub-type 4 under another type is not.
    #[test]
    fn is_link_bandwidth_by_type_and_subtype() {
        let nan = [0x7f, 0xc0, 0x00, 0x00];
        let ten = [0x4e, 0x95, 0x02, 0xf9];
        let table = [
            ([0x00, 0x04], ten, true),
            ([0x40, 0x04], ten, true),
            ([0x00, 0x04], nan, true),
            ([0x40, 0x04], nan, true),
            ([0x00, 0x02], ten, false),
            ([0x01, 0x04], ten, false),
            ([0x43, 0x04], ten, false),
        ];
        for ([t, s], [c, d, e, f], want) in table {
            let ec = ExtCommunity([t, s, 0xfe, 0x4c, c, d, e, f]);
            assert_eq!(is_link_bandwidth(&ec), want, "{:02x?}", ec.0);
        }
    }

    /// NaN, +inf, -inf and a negative value are ignored (and counted); -0.0 is zero.
    #[test]
    fn unusable_values_are_ignored() {
        let bad = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1.0];
        let mut all: Vec<ExtCommunity> = bad
            .iter()
            .map(|v| {
                let [c, d, e, f] = v.to_be_bytes();
                ExtCommunity([0x00, 0x04, 0, 1, c, d, e, f])
            })
            .collect();
        assert!(all.iter().all(|c| read(c) == Read::Invalid));
        assert_eq!(lowest_gbps(&all), None);
        all.push(LinkBandwidth::from_gbps(false, 1, 20.0).to_community());
        assert_eq!(lowest_gbps(&all), Some(20.0));
        assert_eq!(invalid_count(&all), 4);
        let zero = ExtCommunity([0x00, 0x04, 0, 1, 0x80, 0, 0, 0]);
        assert_eq!(lowest_gbps(&[zero]), Some(0.0));
    }

    proptest! {
        /// Every finite non-negative binary32 survives encode -> decode bit for bit.
        #[test]
        fn round_trip(transitive: bool, asn: u16, bits in 0u32..0x7f80_0000) {
            let lb = LinkBandwidth { transitive, asn, bytes_per_sec: f32::from_bits(bits) };
            prop_assert_eq!(read(&lb.to_community()), Read::Valid(lb));
        }

        /// Several on one route, in any order and of either type, among other
        /// communities: the lowest wins.
        #[test]
        fn lowest_of_several(
            values in proptest::collection::vec((any::<bool>(), 0.0f64..1e4), 1..8),
            others in proptest::collection::vec(any::<[u8; 8]>(), 0..4),
        ) {
            let mut cs: Vec<ExtCommunity> = values
                .iter()
                .map(|(t, g)| LinkBandwidth::from_gbps(*t, 65000, *g).to_community())
                .collect();
            cs.extend(others.into_iter().map(ExtCommunity).filter(|c| !is_link_bandwidth(c)));
            cs.reverse();
            let want = values
                .iter()
                .map(|(t, g)| LinkBandwidth::from_gbps(*t, 65000, *g).gbps())
                .fold(f64::INFINITY, f64::min);
            prop_assert_eq!(lowest_gbps(&cs), Some(want));
        }
    }
}
