//! Mixed fabrics: the RFC 10005 Link Bandwidth community between fare and boxes that do
//! not speak FARE (FRR), as both the speaker and the model ([`crate::sim`]) apply it.
//!
//! - fare takes a route's bandwidth from its transitive Path Bandwidth community; only
//!   where there is none, and the neighbor is configured `link_bandwidth: accept|both`,
//!   from the lowest Link Bandwidth it carries ([`path_value`]).
//! - Toward such a neighbor (`send|both`), fare attaches the Path Bandwidth value it sends,
//!   capped by the link, as bytes/s in an IEEE 754 binary32 ([`wire_gbps`]).
//! - FRR 8.4 reads that value into a 32-bit count of bytes/s (above 34.36 Gbps it wraps,
//!   [`frr_read`]) and, with multipath and every path carrying one, installs UCMP weights
//!   floor(100 x bw / total) ([`frr_weights`]); otherwise ECMP. Toward its neighbors it
//!   sends what the lab configures on outbound: `set extcommunity bandwidth cumulative`,
//!   the sum over its multipaths cast to 32 bits ([`frr_cumulative`]). It keeps FARE's
//!   Path Bandwidth community, an unknown transitive one to FRR, on the route unchanged
//!   (RFC 4360 §2).

/// Bytes per second in one Gbps (RFC 10005 carries bytes/s).
pub const BYTES_PER_GBPS: f64 = 1e9 / 8.0;

/// The bandwidth fare takes for one received route: the transitive Path Bandwidth value,
/// else (from a neighbor it accepts the community from) the Link Bandwidth one, else none.
pub fn path_value(
    path_bandwidth: Option<f64>,
    link_bandwidth: Option<f64>,
    accepted: bool,
) -> Option<f64> {
    path_bandwidth.or(link_bandwidth.filter(|_| accepted))
}

/// `gbps` as the Link Bandwidth community carries it: binary32 bytes/s.
pub fn wire_bytes(gbps: f64) -> f32 {
    (gbps * BYTES_PER_GBPS) as f32
}

/// `gbps` as the Link Bandwidth community carries it ([`wire_bytes`]), back in Gbps.
pub fn wire_gbps(gbps: f64) -> f64 {
    f64::from(wire_bytes(gbps)) / BYTES_PER_GBPS
}

/// What FRR 8.4 keeps of a received Link Bandwidth of `gbps`: the binary32 bytes/s
/// converted to a 32-bit unsigned count, modulo 2^32 (the x86-64 conversion FRR's C
/// compiles to). 100 Gbps reads as 3,910,065,152 bytes/s (31.28 Gbps).
pub fn frr_read(gbps: f64) -> u32 {
    (wire_bytes(gbps) as u64 & u64::from(u32::MAX)) as u32
}

/// FRR's nexthop weights over its multipaths' Link Bandwidth values (as [`frr_read`]
/// keeps them): floor(100 x bw / total), at least 1; `None` (ECMP) when a path has none
/// or a zero one (FRR treats the two alike; `bgp bestpath bandwidth` is left at its
/// default). A single path is installed without a weight: 1.
pub fn frr_weights(bytes: &[Option<u32>]) -> Option<Vec<u32>> {
    if bytes.len() == 1 {
        return bytes[0].filter(|&b| b > 0).map(|_| vec![1]);
    }
    let values: Vec<u64> = bytes
        .iter()
        .map(|b| b.filter(|&b| b > 0).map(u64::from))
        .collect::<Option<_>>()?;
    let total: u64 = values.iter().sum();
    Some(
        values
            .iter()
            .map(|&b| ((100 * b / total) as u32).max(1))
            .collect(),
    )
}

/// What an FRR node with `set extcommunity bandwidth cumulative` sends: the sum of its
/// multipaths' values cast to 32 bits (FRR 8.4: `(uint32_t)` of the 64-bit sum, so it
/// wraps above 2^32 bytes/s), in Gbps as a binary32 of bytes/s. `None` when that is 0
/// (FRR then attaches none). Measured in `bgp_frr_link_bandwidth_small_share_and_cumulative`.
pub fn frr_cumulative(bytes: &[Option<u32>]) -> Option<f64> {
    let sum: u64 = bytes.iter().flatten().map(|&b| u64::from(b)).sum();
    let sent = sum as u32;
    (sent > 0).then(|| f64::from(sent as f32) / BYTES_PER_GBPS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_bandwidth_wins_then_link_bandwidth_where_accepted() {
        assert_eq!(path_value(Some(40.0), Some(10.0), true), Some(40.0));
        assert_eq!(path_value(None, Some(10.0), true), Some(10.0));
        assert_eq!(path_value(None, Some(10.0), false), None);
        assert_eq!(path_value(None, None, true), None);
    }

    /// By hand: 100 Gbps = 1.25e10 bytes/s = 5^11 x 2^8, not exact in binary32 (spacing
    /// 1024 there): 12,499,999,744; minus 2 x 2^32: 3,910,065,152. 15 Gbps = 1.875e9,
    /// nearest binary32 1,875,000,064 (spacing 128). 10 Gbps = 1.25e9 exactly
    /// (2^7 x 9765625, 24 significant bits). 25 Gbps = 3.125e9, spacing 256:
    /// 3,124,999,936.
    #[test]
    fn frr_reads_bytes_per_second_modulo_2_32() {
        assert_eq!(frr_read(100.0), 3_910_065_152);
        assert_eq!(frr_read(15.0), 1_875_000_064);
        assert_eq!(frr_read(10.0), 1_250_000_000);
        assert_eq!(frr_read(25.0), 3_124_999_936);
    }

    /// What a Gbps value reads back as after the binary32 bytes/s of the wire (the values
    /// of `frr_reads_bytes_per_second_modulo_2_32`, divided by 1.25e8 bytes/s per Gbps).
    #[test]
    fn wire_gbps_is_the_binary32_value_back_in_gbps() {
        assert_eq!(wire_gbps(10.0), 10.0);
        assert_eq!(wire_gbps(15.0), 1_875_000_064.0 / 1.25e8);
        assert_eq!(wire_gbps(100.0), 12_499_999_744.0 / 1.25e8);
        assert_eq!(wire_gbps(0.0), 0.0);
    }

    /// FRR's 60 and 39 for 15 and 10 Gbps (measured against FRR 8.4 in
    /// `bgp_frr_link_bandwidth`): 100 x 1875000064 / 3125000064 = 60.0000008,
    /// 100 x 1.25e9 / 3125000064 = 39.9999992.
    #[test]
    fn frr_weights_floor_percent() {
        let b = [Some(frr_read(15.0)), Some(frr_read(10.0))];
        assert_eq!(frr_weights(&b), Some(vec![60, 39]));
        assert_eq!(frr_weights(&[Some(5), None]), None);
        assert_eq!(frr_weights(&[Some(1), Some(1000)]), Some(vec![1, 99]));
        // The sum 3,125,000,064 rounds to the binary32 3,125,000,192 (spacing 256, ties
        // to even).
        assert_eq!(frr_cumulative(&b), Some(3_125_000_192.0 / 1.25e8));
        assert_eq!(frr_cumulative(&[None]), None);
    }

    /// A zero bandwidth counts as none (ECMP): on a single path (installed without a
    /// weight, 1, only when it has a value) and among several.
    #[test]
    fn frr_weights_zero_is_none() {
        assert_eq!(frr_weights(&[Some(5)]), Some(vec![1]));
        assert_eq!(frr_weights(&[Some(0)]), None);
        assert_eq!(frr_weights(&[None]), None);
        assert_eq!(frr_weights(&[Some(0), Some(5)]), None);
        assert_eq!(frr_weights(&[Some(5), Some(0)]), None);
        assert_eq!(frr_weights(&[Some(5), Some(15)]), Some(vec![25, 75]));
    }

    /// Against FRR 8.4 (`bgp_frr_link_bandwidth_small_share_and_cumulative`): paths of
    /// 100, 25600 and 25600 Mbps (12.5e6 and 3.2e9 bytes/s). Weights floor(100 x b /
    /// 6.4125e9) = 0, 49, 49: FRR installs 1, 49, 49. Cumulative: 6,412,500,000 - 2^32 =
    /// 2,117,532,704, nearest binary32 (spacing 128) 2,117,532,672.
    #[test]
    fn frr_small_share_and_cumulative_wrap() {
        let b = [Some(12_500_000), Some(3_200_000_000), Some(3_200_000_000)];
        assert_eq!(frr_weights(&b), Some(vec![1, 49, 49]));
        assert_eq!(frr_cumulative(&b), Some(2_117_532_672.0 / BYTES_PER_GBPS));
        // A sum of exactly 2^32 casts to 0: no community.
        assert_eq!(frr_cumulative(&[Some(1 << 31), Some(1 << 31)]), None);
    }
}
