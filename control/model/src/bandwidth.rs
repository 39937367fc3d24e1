//! Path-bandwidth algebra: how a node derives the bandwidth of each of its routes and the
//! value it re-advertises (draft-xu-idr-fare §3–4 and the white paper's averaging rule,
//! §2.2.1). Pure functions over numbers in Gbps, shared by the offline simulator (`sim`)
//! and the BGP speaker, so both compute the same groups.
//!
//! On the wire the Path Bandwidth community carries GB/s in a 16-bit float
//! ([`Encoding`], 1 GB/s = 8 Gbps). Every value a node advertises goes through that
//! encoding, so the model ([`crate::sim`]) quantizes at every hop exactly as the speaker
//! does, and ratios are reduced with a tolerance that matches the encoding
//! ([`Encoding::ratio_tolerance`]).

use crate::role::Role;
use serde::{Deserialize, Serialize};

/// Which propagation rule a node applies when it re-advertises a route.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// draft-xu-idr-fare: advertise the sum over equal-cost routes.
    #[default]
    Draft,
    /// White paper §2.2.1: sum over incoming routes / eligible outgoing interfaces,
    /// then min with the outgoing link.
    Averaged,
}

/// How a bandwidth is written into the 2-octet Local Administrator of the Path Bandwidth
/// community. The draft asks for "IEEE floating point format" in GB/s; the only IEEE 754
/// format of 16 bits is binary16.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// IEEE 754 binary16 (half precision), round to nearest even: 11 significant bits,
    /// relative rounding error at most 2^-11 (0.049 %), largest finite value 65504 GB/s
    /// (524 Tbps; larger finite values saturate there), +infinity kept as infinity.
    #[default]
    Binary16,
    /// The upper 16 bits of an IEEE 754 binary32 (the bfloat16 layout), round to nearest
    /// even: 8 significant bits, relative rounding error at most 2^-8 (0.39 %). What fare
    /// sent before binary16; kept for interoperability with such speakers.
    Float32Upper16,
}

impl Encoding {
    /// The 16 bits sent for `gbps`. Negative values and NaN are sent as 0.
    pub fn encode(self, gbps: f64) -> u16 {
        let gbytes = if gbps > 0.0 { gbps / 8.0 } else { 0.0 };
        match self {
            Encoding::Binary16 => {
                let h = half::f16::from_f64(gbytes);
                if h.is_infinite() && gbytes.is_finite() {
                    half::f16::MAX.to_bits()
                } else {
                    h.to_bits()
                }
            }
            Encoding::Float32Upper16 => {
                let bits = (gbytes as f32).to_bits();
                let round = 0x7fff + ((bits >> 16) & 1);
                let hi = (bits.saturating_add(round) >> 16) as u16;
                // A finite value that rounded to infinity saturates like binary16.
                if hi == 0x7f80 && gbytes.is_finite() {
                    0x7f7f
                } else {
                    hi
                }
            }
        }
    }

    /// The bandwidth in Gbps the 16 bits stand for. Negative values and NaN read as 0
    /// (no usable bandwidth); +infinity is the originator's "maximum bandwidth value".
    pub fn decode(self, bits: u16) -> f64 {
        let gbytes = match self {
            Encoding::Binary16 => half::f16::from_bits(bits).to_f64(),
            Encoding::Float32Upper16 => f64::from(f32::from_bits(u32::from(bits) << 16)),
        };
        if gbytes > 0.0 {
            gbytes * 8.0
        } else {
            0.0
        }
    }

    /// The value `gbps` has after one trip through the community.
    pub fn quantize(self, gbps: f64) -> f64 {
        self.decode(self.encode(gbps))
    }

    /// Largest relative rounding error of one encoding (half a unit in the last place).
    pub fn relative_precision(self) -> f64 {
        match self {
            Encoding::Binary16 => 2f64.powi(-11),
            Encoding::Float32Upper16 => 2f64.powi(-8),
        }
    }

    /// How far (as WCMP oversubscription, see [`crate::wcmp`]) integer weights may be from
    /// received bandwidths and still count as their exact ratio. A received value has been
    /// rounded where it was sent, and a sum of rounded values is rounded again: two
    /// roundings, 2 x the precision; a ratio compares two such values: 4 x the relative
    /// precision. Ratios closer than that (0.2 % with binary16, 1.6 % with the upper half
    /// of a binary32) are one ratio to fare.
    pub fn ratio_tolerance(self) -> f64 {
        4.0 * self.relative_precision()
    }
}

/// The smallest link bandwidth (Gbps) fare accepts: binary16's smallest normal value,
/// 2^-14 GB/s (= 2^-11 Gbps, about 0.5 Mbit/s). Below it the community would carry a
/// subnormal (fewer significant bits) and then 0, "no bandwidth".
pub const MIN_GBPS: f64 = 8.0 / 16384.0;

/// The largest link bandwidth (Gbps) fare accepts: binary16's largest finite value,
/// 65504 GB/s (524,032 Gbps). Larger values would saturate or become infinity, the
/// originator's "maximum bandwidth". The upper half of a binary32 carries a wider range,
/// so this bound holds for both encodings (every configuration and topology uses it).
pub const MAX_GBPS: f64 = 65504.0 * 8.0;

/// Why `gbps` cannot be a link bandwidth, if it cannot: it must be a finite number within
/// what the Path Bandwidth community carries ([`MIN_GBPS`] ..= [`MAX_GBPS`]).
pub fn check_gbps(gbps: f64) -> Result<(), String> {
    if (MIN_GBPS..=MAX_GBPS).contains(&gbps) {
        return Ok(());
    }
    Err(format!(
        "{} Gbps is outside what the Path Bandwidth community carries \
         ({MIN_GBPS} to {MAX_GBPS} Gbps, binary16 GB/s)",
        short_number(gbps)
    ))
}

/// A number for an error message: exponent notation when plain digits would run long.
pub fn short_number(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-4..1e7).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// The sum of bandwidths in a fixed order (ascending), so every node and the model
/// get the same bits whatever order their routes arrived in.
pub fn sum(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    v.into_iter().sum()
}

/// The value an originator attaches in draft mode: "a maximum bandwidth value". Every
/// receiver takes the min with its link, so the first hop's link is what counts.
pub const ORIGIN_MAX_GBPS: f64 = f64::INFINITY;

/// The optional parts of draft-xu-idr-fare §4.2 (5-stage Clos), as switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftOptions {
    /// Super-spines attach a non-transitive Path Bandwidth community with the bandwidth of
    /// their link(s) toward the advertising spine ("COULD optionally attach"). Without it,
    /// spines of other PoDs fall back to plain ECMP over the super-spines.
    pub link_community: bool,
    /// Spines of other PoDs lower the transitive value to the total bandwidth toward the
    /// next-next hop when that is smaller ("COULD optionally update"; off by default).
    pub remote_spine_update: bool,
}

impl Default for DraftOptions {
    fn default() -> Self {
        DraftOptions {
            link_community: true,
            remote_spine_update: false,
        }
    }
}

impl DraftOptions {
    /// The non-transitive value a node attaches to a prefix it originates, sent over a
    /// link of `link_gbps`: a super-spine with the optional link community on attaches
    /// the link's capacity (as to what it passes on), any other node nothing.
    pub fn originated_link_value(&self, role: Role, link_gbps: f64) -> Option<f64> {
        (role == Role::SuperSpine && self.link_community).then_some(link_gbps)
    }
}

/// How a node treats a route under draft-xu-idr-fare, by its role and where its
/// equal-cost routes came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Leaves and spines that learned the route from below (§4.1, first part of §4.2):
    /// weight = min(link, received), advertise the sum of the weights.
    Normal,
    /// A super-spine (§4.2): the transitive value passes unchanged; optionally a
    /// non-transitive value with the bandwidth of the link toward the advertiser.
    SuperSpine,
    /// A spine that learned the route from super-spines (§4.2, "a spine node in another
    /// PoD"): weight = min(link, non-transitive value), ECMP if a route lacks it; the
    /// transitive value passes unchanged (optionally lowered).
    RemoteSpine,
}

impl Rule {
    pub fn for_node(role: Role, learned_from_above: bool) -> Rule {
        match role {
            Role::SuperSpine => Rule::SuperSpine,
            Role::Spine if learned_from_above => Rule::RemoteSpine,
            _ => Rule::Normal,
        }
    }
}

/// One of a node's equal-cost routes for a prefix, as received.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Received {
    /// Capacity of the link the route came over.
    pub link_gbps: f64,
    /// Transitive Path Bandwidth value, if the route carries one.
    pub path_gbps: Option<f64>,
    /// Non-transitive Path Bandwidth value (attached by super-spines), if any.
    pub link_value_gbps: Option<f64>,
}

/// How a group spreads traffic over its routes.
#[derive(Clone, Debug, PartialEq)]
pub enum Spread {
    /// WCMP in proportion to these bandwidths (one per route).
    Weighted(Vec<f64>),
    /// Plain ECMP: some route lacks the community the rule needs (§4: "SHOULD NOT be
    /// performed unless all equal-cost routes ... carry" it).
    Equal,
}

impl Spread {
    /// The bandwidth to report for route `i`: its weight, or the link under ECMP.
    pub fn bandwidth(&self, i: usize, routes: &[Received]) -> f64 {
        match self {
            Spread::Weighted(b) => b[i],
            Spread::Equal => routes[i].link_gbps,
        }
    }
}

/// The bandwidth of each equal-cost route of a node (its WCMP weights before rounding).
/// In averaged mode the sender already took the min with the link; the min here is a
/// no-op then, and keeps a receiver safe from a sender that did not.
pub fn route_bandwidths(mode: Mode, rule: Rule, routes: &[Received]) -> Spread {
    let value = |r: &Received| match (mode, rule) {
        (Mode::Draft, Rule::RemoteSpine) => r.link_value_gbps,
        _ => r.path_gbps,
    };
    if routes.iter().any(|r| value(r).is_none()) {
        return Spread::Equal;
    }
    Spread::Weighted(
        routes
            .iter()
            .map(|r| r.link_gbps.min(value(r).unwrap_or(r.link_gbps)))
            .collect(),
    )
}

/// The communities a node attaches when it re-advertises a route (draft mode).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Advertised {
    pub path_gbps: Option<f64>,
    pub link_value_gbps: Option<f64>,
}

/// Draft mode: what a node advertises given its equal-cost routes and their spread.
pub fn draft_advertise(
    rule: Rule,
    routes: &[Received],
    spread: &Spread,
    options: &DraftOptions,
) -> Advertised {
    // The transitive value as received; several routes normally carry the same one (set
    // by the same spine), else the largest is kept.
    let received = || {
        routes
            .iter()
            .map(|r| r.path_gbps)
            .try_fold(f64::NEG_INFINITY, |acc, v| v.map(|v| acc.max(v)))
            .filter(|v| *v > f64::NEG_INFINITY)
    };
    match rule {
        Rule::Normal => Advertised {
            path_gbps: match spread {
                Spread::Weighted(b) => Some(sum(b.iter().copied())),
                Spread::Equal => None,
            },
            link_value_gbps: None,
        },
        Rule::SuperSpine => Advertised {
            path_gbps: received(),
            link_value_gbps: options
                .link_community
                .then(|| sum(routes.iter().map(|r| r.link_gbps))),
        },
        Rule::RemoteSpine => {
            let mut path = received();
            if options.remote_spine_update {
                if let (Some(p), Spread::Weighted(b)) = (path, spread) {
                    path = Some(p.min(sum(b.iter().copied())));
                }
            }
            Advertised {
                path_gbps: path,
                link_value_gbps: None,
            }
        }
    }
}

/// Averaged mode (white paper §2.2.1): the value sent on one outgoing link,
/// min(PathBWsum / N, link), N = eligible outgoing interfaces (not the incoming ones).
pub fn averaged_advertise(path_sum_gbps: f64, outgoing: usize, link_gbps: f64) -> f64 {
    if outgoing == 0 {
        return link_gbps;
    }
    (path_sum_gbps / outgoing as f64).min(link_gbps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// §4.2's optional link value on originated prefixes: only a super-spine attaches
    /// one (its link's capacity, 40 here), and only with the link community on; a leaf
    /// or a spine attaches none either way.
    #[test]
    fn only_a_super_spine_attaches_a_link_value_to_what_it_originates() {
        let on = DraftOptions::default();
        let off = DraftOptions {
            link_community: false,
            ..on
        };
        assert_eq!(on.originated_link_value(Role::SuperSpine, 40.0), Some(40.0));
        assert_eq!(off.originated_link_value(Role::SuperSpine, 40.0), None);
        for role in [Role::Leaf, Role::Spine, Role::Rnic] {
            assert_eq!(on.originated_link_value(role, 40.0), None, "{role:?}");
            assert_eq!(off.originated_link_value(role, 40.0), None, "{role:?}");
        }
    }

    /// A super-spine or remote spine passes on the transitive value it received; with no
    /// route to take it from, or a route without it, it attaches none (never -infinity).
    #[test]
    fn nothing_received_nothing_passed_on() {
        let o = DraftOptions {
            link_community: true,
            remote_spine_update: false,
        };
        for rule in [Rule::SuperSpine, Rule::RemoteSpine] {
            let a = draft_advertise(rule, &[], &Spread::Equal, &o);
            assert_eq!(a.path_gbps, None, "{rule:?}");
            let a = draft_advertise(rule, &[r(100.0, None)], &Spread::Equal, &o);
            assert_eq!(a.path_gbps, None, "{rule:?}");
        }
    }

    /// Half a unit in the last place: binary16 has 11 significant bits (2^-11), the upper
    /// half of a binary32 8 (2^-8); a ratio of two twice-rounded values is 4 x that.
    #[test]
    fn precision_and_tolerance_by_hand() {
        assert_eq!(Encoding::Binary16.relative_precision(), 1.0 / 2048.0);
        assert_eq!(Encoding::Float32Upper16.relative_precision(), 1.0 / 256.0);
        assert_eq!(Encoding::Binary16.ratio_tolerance(), 0.001953125);
        assert_eq!(Encoding::Float32Upper16.ratio_tolerance(), 0.015625);
    }

    /// Wire vectors worked by hand from IEEE 754 (round to nearest, ties to even) for both
    /// encodings, at the rounding boundaries: a tie rounds to the even neighbour (so an
    /// odd one rounds up, an even one stays), one unit off the tie does not; subnormals;
    /// saturation of a finite value below infinity; NaN and negatives as 0.
    #[test]
    fn wire_vectors_round_to_nearest_even() {
        // The upper half of a binary32: the value whose binary32 bits are `b` (exact in
        // f64), in Gbps (x 8).
        let from32 = |b: u32| f64::from(f32::from_bits(b)) * 8.0;
        let up = Encoding::Float32Upper16;
        for (gbps, bits, why) in [
            (100.0, 0x4148, "12.5 GB/s = 0x41480000, exact"),
            (100.25, 0x4148, "0x41488000: a tie, 0x4148 even: stays"),
            (100.75, 0x414a, "0x41498000: a tie, 0x4149 odd: up to even"),
            (from32(0x4148_8001), 0x4149, "one above the tie: up"),
            (from32(0x4149_7fff), 0x4149, "one below the tie: down"),
            (
                from32(0x0000_8000),
                0x0000,
                "subnormal tie, even: down to 0",
            ),
            (from32(0x0001_8000), 0x0002, "subnormal tie, odd: up"),
            (from32(0x7f7f_ffff), 0x7f7f, "rounds to infinity: saturates"),
            (from32(0x7f7f_7fff), 0x7f7f, "largest below the tie"),
            (f64::INFINITY, 0x7f80, "infinity stays infinity"),
            (f64::NAN, 0x0000, "NaN as 0"),
            (-100.0, 0x0000, "negative as 0"),
            (-0.0, 0x0000, "negative zero as 0, not 0x8000"),
        ] {
            assert_eq!(up.encode(gbps), bits, "float32-upper16 {gbps}: {why}");
        }
        // binary16: 12.5 GB/s = 1.5625 x 2^3 -> exponent 18, fraction 576: 0x4a40; one unit
        // there is 2^-7 GB/s (1/16 Gbps).
        let b16 = Encoding::Binary16;
        for (gbps, bits, why) in [
            (100.0, 0x4a40, "exact"),
            (100.03125, 0x4a40, "tie above 0x4a40 (even): stays"),
            (100.09375, 0x4a42, "tie above 0x4a41 (odd): up to even"),
            (100.0625 + 1.0 / 128.0, 0x4a41, "below the next tie: 0x4a41"),
            (8.0 * 2f64.powi(-24), 0x0001, "smallest subnormal, exact"),
            (8.0 * 2f64.powi(-25), 0x0000, "tie with 0 (even): 0"),
            (8.0 * 3.0 * 2f64.powi(-25), 0x0002, "tie between 1 and 2: 2"),
            (
                8.0 * 65520.0,
                0x7bff,
                "rounds to infinity: saturates at 65504",
            ),
            (f64::INFINITY, 0x7c00, "infinity stays infinity"),
            (f64::NAN, 0x0000, "NaN as 0"),
            (-0.0, 0x0000, "negative zero as 0, not 0x8000"),
        ] {
            assert_eq!(b16.encode(gbps), bits, "binary16 {gbps}: {why}");
        }
        // Decoding: the bits as the value they stand for; NaN and -0 as 0.
        assert_eq!(up.decode(0x414a), 100.75 + 0.25);
        assert_eq!(up.decode(0x7f80), f64::INFINITY);
        assert_eq!(up.decode(0xffc0), 0.0);
        assert_eq!(up.decode(0x8000), 0.0);
        // -0 reads as +0 (a -0 would print as "-0 Gbps").
        assert!(up.decode(0x8000).is_sign_positive());
        assert!(b16.decode(0x8000).is_sign_positive());
        assert_eq!(b16.decode(0x4a42), 100.125);
        assert_eq!(b16.decode(0x7c00), f64::INFINITY);
        assert_eq!(b16.decode(0x7e00), 0.0);
    }

    /// The bounds are binary16's smallest normal (bits 0x0400, 2^-14 GB/s) and largest
    /// finite value (bits 0x7bff, 65504 GB/s), both carried exactly; beyond them nothing is.
    #[test]
    fn gbps_bounds_are_what_binary16_carries() {
        let b16 = Encoding::Binary16;
        assert_eq!(b16.encode(MIN_GBPS), 0x0400);
        assert_eq!(b16.decode(0x0400), MIN_GBPS);
        assert_eq!(b16.encode(MAX_GBPS), 0x7bff);
        assert_eq!(b16.decode(0x7bff), MAX_GBPS);
        assert_eq!(MIN_GBPS, 0.00048828125);
        assert_eq!(MAX_GBPS, 524032.0);
        for ok in [MIN_GBPS, 1.0, 100.0, 800.0, MAX_GBPS] {
            assert_eq!(check_gbps(ok), Ok(()), "{ok}");
            let up = Encoding::Float32Upper16;
            assert!(up.quantize(ok) > 0.0 && up.quantize(ok).is_finite(), "{ok}");
        }
        for bad in [
            0.0,
            -1.0,
            MIN_GBPS / 2.0,
            MAX_GBPS * 1.001,
            f64::NAN,
            f64::INFINITY,
            1e300,
        ] {
            assert!(check_gbps(bad).is_err(), "{bad}");
        }
        assert_eq!(
            check_gbps(1e300).unwrap_err(),
            "1e300 Gbps is outside what the Path Bandwidth community carries \
             (0.00048828125 to 524032 Gbps, binary16 GB/s)"
        );
    }

    fn r(link: f64, path: Option<f64>) -> Received {
        Received {
            link_gbps: link,
            path_gbps: path,
            link_value_gbps: None,
        }
    }

    #[test]
    fn draft_weight_is_min_and_advert_is_sum() {
        let routes = [r(50.0, Some(ORIGIN_MAX_GBPS)), r(100.0, Some(80.0))];
        let s = route_bandwidths(Mode::Draft, Rule::Normal, &routes);
        assert_eq!(s, Spread::Weighted(vec![50.0, 80.0]));
        let adv = draft_advertise(Rule::Normal, &routes, &s, &DraftOptions::default());
        assert_eq!(adv.path_gbps, Some(130.0));
    }

    #[test]
    fn ecmp_unless_every_route_carries_the_community() {
        let routes = [r(100.0, Some(10.0)), r(100.0, None)];
        assert_eq!(
            route_bandwidths(Mode::Draft, Rule::Normal, &routes),
            Spread::Equal
        );
        let s = Spread::Equal;
        assert_eq!(s.bandwidth(1, &routes), 100.0);
        let adv = draft_advertise(Rule::Normal, &routes, &s, &DraftOptions::default());
        assert_eq!(adv.path_gbps, None);
    }

    #[test]
    fn super_spine_keeps_transitive_and_adds_link_value() {
        let routes = [r(400.0, Some(1600.0)), r(400.0, Some(1600.0))];
        let s = route_bandwidths(Mode::Draft, Rule::SuperSpine, &routes);
        let adv = draft_advertise(Rule::SuperSpine, &routes, &s, &DraftOptions::default());
        assert_eq!(adv.path_gbps, Some(1600.0));
        assert_eq!(adv.link_value_gbps, Some(800.0));
        let off = DraftOptions {
            link_community: false,
            ..Default::default()
        };
        assert_eq!(
            draft_advertise(Rule::SuperSpine, &routes, &s, &off).link_value_gbps,
            None
        );
    }

    #[test]
    fn remote_spine_uses_link_value_or_falls_back_to_ecmp() {
        let with = |lv| Received {
            link_gbps: 400.0,
            path_gbps: Some(1600.0),
            link_value_gbps: lv,
        };
        let routes = [with(Some(200.0)), with(Some(400.0))];
        let s = route_bandwidths(Mode::Draft, Rule::RemoteSpine, &routes);
        assert_eq!(s, Spread::Weighted(vec![200.0, 400.0]));
        let adv = draft_advertise(Rule::RemoteSpine, &routes, &s, &DraftOptions::default());
        assert_eq!(adv.path_gbps, Some(1600.0), "not updated by default");
        let upd = DraftOptions {
            remote_spine_update: true,
            ..Default::default()
        };
        assert_eq!(
            draft_advertise(Rule::RemoteSpine, &routes, &s, &upd).path_gbps,
            Some(600.0)
        );
        let routes = [with(Some(200.0)), with(None)];
        assert_eq!(
            route_bandwidths(Mode::Draft, Rule::RemoteSpine, &routes),
            Spread::Equal
        );
        // Averaged mode has no 5-stage special case.
        assert_eq!(
            route_bandwidths(Mode::Averaged, Rule::RemoteSpine, &routes),
            Spread::Weighted(vec![400.0, 400.0])
        );
    }

    #[test]
    fn white_paper_averaging() {
        // Spine 1: L1 + L3 = 50 + 100 = 150 over N = 2 -> 75 on L5 and L6.
        assert_eq!(averaged_advertise(150.0, 2, 100.0), 75.0);
        // Spine 2: 200 / 2 = 100, min with the 100G link.
        assert_eq!(averaged_advertise(200.0, 2, 100.0), 100.0);
        assert_eq!(averaged_advertise(200.0, 0, 40.0), 40.0);
    }

    #[test]
    fn rules_by_role() {
        assert_eq!(Rule::for_node(Role::SuperSpine, false), Rule::SuperSpine);
        assert_eq!(Rule::for_node(Role::Spine, true), Rule::RemoteSpine);
        assert_eq!(Rule::for_node(Role::Spine, false), Rule::Normal);
        assert_eq!(Rule::for_node(Role::Leaf, true), Rule::Normal);
    }
}
