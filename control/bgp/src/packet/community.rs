//! Extended communities (RFC 4360) and FARE's Path Bandwidth community
//! (draft-xu-idr-fare §3): an IPv4-address-specific extended community, type 0x01
//! (transitive) or 0x41 (non-transitive), subtype configurable (see docs/CODEPOINTS.md),
//! global administrator = router ID of the node that set the value, local administrator =
//! the path bandwidth in gigabytes per second (1 GB/s = 8 Gbps) as a 16-bit float
//! ([`Encoding`]: IEEE 754 binary16 by default).

use fare_model::bandwidth::Encoding;
use std::net::Ipv4Addr;

/// Default Path Bandwidth subtype (the draft leaves it TBD).
pub const DEFAULT_PATH_BANDWIDTH_SUBTYPE: u8 = 0xa0;
/// IPv4-address-specific extended community types.
pub const TYPE_IPV4_TRANSITIVE: u8 = 0x01;
pub const TYPE_IPV4_NON_TRANSITIVE: u8 = 0x41;
/// Bit of the type octet that marks a community non-transitive (RFC 4360 §2).
pub const NON_TRANSITIVE_BIT: u8 = 0x40;

/// One extended community exactly as on the wire; unknown ones pass through unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExtCommunity(pub [u8; 8]);

impl ExtCommunity {
    pub fn is_transitive(&self) -> bool {
        self.0[0] & NON_TRANSITIVE_BIT == 0
    }

    /// True when this is a Path Bandwidth community of `subtype` (either type).
    pub fn is_path_bandwidth(&self, subtype: u8) -> bool {
        let [t, s, ..] = self.0;
        s == subtype && (t == TYPE_IPV4_TRANSITIVE || t == TYPE_IPV4_NON_TRANSITIVE)
    }

    /// This community read as a Path Bandwidth community of `subtype`, if it is one.
    pub fn path_bandwidth(&self, subtype: u8, encoding: Encoding) -> Option<PathBandwidth> {
        if !self.is_path_bandwidth(subtype) {
            return None;
        }
        let [t, _, a, b, c, d, hi, lo] = self.0;
        Some(PathBandwidth {
            transitive: t == TYPE_IPV4_TRANSITIVE,
            router_id: Ipv4Addr::new(a, b, c, d),
            gbps: encoding.decode(u16::from_be_bytes([hi, lo])),
        })
    }
}

/// The decoded Path Bandwidth community.
///
/// Layout: an IPv4-address-specific extended community has 4 octets of global
/// administrator and 2 of local administrator, so the "IEEE floating point" value of the
/// draft is a 16-bit float: IEEE 754 binary16 by default (see [`Encoding`] and
/// docs/CODEPOINTS.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathBandwidth {
    pub transitive: bool,
    pub router_id: Ipv4Addr,
    /// Gigabits per second; never negative or NaN once decoded.
    pub gbps: f64,
}

impl PathBandwidth {
    pub fn new(transitive: bool, router_id: Ipv4Addr, gbps: f64) -> Self {
        PathBandwidth {
            transitive,
            router_id,
            gbps,
        }
    }

    /// The value in gigabits per second (what topologies and `fare weights` use).
    /// +infinity is the "maximum bandwidth value" an originator may attach (draft §4).
    pub fn gbps(&self) -> f64 {
        if self.gbps > 0.0 {
            self.gbps
        } else {
            0.0
        }
    }

    pub fn to_community(&self, subtype: u8, encoding: Encoding) -> ExtCommunity {
        let t = if self.transitive {
            TYPE_IPV4_TRANSITIVE
        } else {
            TYPE_IPV4_NON_TRANSITIVE
        };
        let [a, b, c, d] = self.router_id.octets();
        let [hi, lo] = encoding.encode(self.gbps).to_be_bytes();
        ExtCommunity([t, subtype, a, b, c, d, hi, lo])
    }
}

/// Default FIB-Suppress subtype (draft-xu-idr-fare-in-mpson §4.2.1 leaves it TBD): in the
/// first-come-first-served range of the transitive two-octet AS-specific registry.
pub const DEFAULT_FIB_SUPPRESS_SUBTYPE: u8 = 0xa1;
/// Transitive two-octet AS-specific extended community type (RFC 4360 §3.1).
pub const TYPE_AS2_TRANSITIVE: u8 = 0x00;

/// The FIB-Suppress community (draft-xu-idr-fare-in-mpson §4.2.1): routes that carry it
/// may stay out of the forwarding table. Global administrator = AS of the router that
/// attached it (AS_TRANS for a 4-octet AS), local administrator = its router ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FibSuppress {
    pub asn: u16,
    pub router_id: Ipv4Addr,
}

impl FibSuppress {
    pub fn new(asn: u32, router_id: Ipv4Addr) -> FibSuppress {
        FibSuppress {
            asn: u16::try_from(asn).unwrap_or(super::open::AS_TRANS),
            router_id,
        }
    }

    pub fn to_community(self, subtype: u8) -> ExtCommunity {
        let [a, b] = self.asn.to_be_bytes();
        let [c, d, e, f] = self.router_id.octets();
        ExtCommunity([TYPE_AS2_TRANSITIVE, subtype, a, b, c, d, e, f])
    }
}

impl ExtCommunity {
    /// This community read as FIB-Suppress of `subtype`, if it is one.
    pub fn fib_suppress(&self, subtype: u8) -> Option<FibSuppress> {
        let [t, s, a, b, c, d, e, f] = self.0;
        (t == TYPE_AS2_TRANSITIVE && s == subtype).then(|| FibSuppress {
            asn: u16::from_be_bytes([a, b]),
            router_id: Ipv4Addr::new(c, d, e, f),
        })
    }
}

#[cfg(test)]
mod fib_suppress_tests {
    use super::*;

    /// gbps() is never negative, nor a negative zero (which would print as "-0"); NaN
    /// reads as 0 and the originator's +infinity stays.
    #[test]
    fn gbps_is_never_negative() {
        let id = Ipv4Addr::new(10, 0, 0, 1);
        let g = |v: f64| PathBandwidth::new(true, id, v).gbps();
        assert_eq!(g(-0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(g(-1.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(g(f64::NAN).to_bits(), 0.0f64.to_bits());
        assert_eq!(g(f64::INFINITY), f64::INFINITY);
        assert_eq!(g(12.5), 12.5);
    }

    #[test]
    fn transitive_bit_by_rfc4360() {
        // RFC 4360 §2: bit 0x40 of the type octet set = non-transitive, whatever the rest.
        for (t, transitive) in [(0x00, true), (0x01, true), (0x03, true), (0x80, true)] {
            assert_eq!(
                ExtCommunity([t, 0, 0, 0, 0, 0, 0, 0]).is_transitive(),
                transitive
            );
        }
        for t in [0x40, 0x41, 0x43, 0xc0] {
            assert!(
                !ExtCommunity([t, 0, 0, 0, 0, 0, 0, 0]).is_transitive(),
                "{t:#04x}"
            );
        }
    }

    #[test]
    fn fib_suppress_round_trips_and_is_transitive() {
        let f = FibSuppress::new(65011, Ipv4Addr::new(10, 1, 0, 1));
        let c = f.to_community(DEFAULT_FIB_SUPPRESS_SUBTYPE);
        assert_eq!(c.0, [0x00, 0xa1, 0xfd, 0xf3, 10, 1, 0, 1]);
        assert!(c.is_transitive());
        assert_eq!(c.fib_suppress(DEFAULT_FIB_SUPPRESS_SUBTYPE), Some(f));
        assert_eq!(c.fib_suppress(0xa2), None);
        // A 4-octet AS is carried as AS_TRANS.
        assert_eq!(
            FibSuppress::new(4_200_000_011, Ipv4Addr::LOCALHOST).asn,
            23456
        );
        // A Route Target (0x00 0x02) is not FIB-Suppress.
        assert_eq!(
            ExtCommunity([0, 2, 0, 1, 0, 0, 0, 1]).fib_suppress(DEFAULT_FIB_SUPPRESS_SUBTYPE),
            None
        );
    }
}
