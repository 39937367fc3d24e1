//! WCMP groups: float path bandwidths -> integer weights, group-size reduction,
//! replicated members and the spray order.
//!
//! The reduction follows the problem statement of Zhou et al., "WCMP: Weighted Cost
//! Multipathing for Improved Fairness in Data Centers" (EuroSys 2014): a switch table
//! holds at most `N` replicated entries per group, so the ideal weights `w` are replaced
//! by integers `w'` with `sum w' <= N`, and the price is the oversubscription
//!
//! ```text
//! delta = max_i (w'_i * sum w) / (w_i * sum w')      (1.0 = exact)
//! ```
//!
//! the worst factor by which one member receives more than its share. For every candidate
//! group size `T` the smallest possible `max_i w'_i / w_i` is reached by the greedy
//! highest-quotient apportionment (D'Hondt/Jefferson: give the next entry to the member
//! with the smallest `(w'_i + 1) / w_i`), so scanning `T` and keeping the best is optimal,
//! not a heuristic; `exhaustive_best_delta` checks that in the tests and benchmarks.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Integer weights for a group, with the oversubscription the rounding caused.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    pub weights: Vec<u32>,
    /// delta = max_i (w'_i * sum w) / (w_i * sum w') against the ideal weights (1.0 = exact).
    pub delta: f64,
}

/// Ratios closer than this count as exact in [`weights`]: float noise. Bandwidths that
/// came over the wire are reduced with their encoding's tolerance instead
/// ([`weights_within`], [`crate::bandwidth::Encoding::ratio_tolerance`]).
pub const EXACT_TOLERANCE: f64 = 1e-6;

/// Without `--max-group-size`, the largest group searched for an exact ratio; ratios that
/// need more entries get the best group of at most this size.
pub const DEFAULT_SIZE_CAP: u32 = 1 << 16;

/// Integer weights proportional to `bandwidths`, reduced to the smallest group that
/// expresses the ratio (GCD reduction, tolerant of float32 rounding); with
/// `max_group_size`, the sum of weights is at most that and delta is as small as possible.
///
/// Members whose bandwidth is not positive (or NaN) get weight 0. Every member with a
/// positive bandwidth gets at least weight 1 unless the limit is below the number of such
/// members, in which case the largest ones are kept.
pub fn weights(bandwidths: &[f64], max_group_size: Option<u32>) -> Weights {
    weights_within(bandwidths, max_group_size, EXACT_TOLERANCE)
}

/// Like [`weights`], but the smallest group whose delta is within `1 + tolerance` of the
/// bandwidths counts as their ratio: the simplest ratio the bandwidths could stand for
/// when each is only known to a relative precision (values that crossed the wire). With
/// 10.6875 : 14.3125 (75/7 : 100/7 after a coarse encoding) and a tolerance of 1.6 %,
/// that is 3 : 4, not 171 : 229.
pub fn weights_within(bandwidths: &[f64], max_group_size: Option<u32>, tolerance: f64) -> Weights {
    let ideal = normalize(bandwidths);
    let positive = ideal.iter().filter(|&&x| x > 0.0).count() as u64;
    if positive == 0 {
        return Weights {
            weights: vec![0; bandwidths.len()],
            delta: 1.0,
        };
    }
    let cap = u64::from(
        max_group_size
            .unwrap_or(DEFAULT_SIZE_CAP)
            .min(DEFAULT_SIZE_CAP),
    )
    .max(1);
    let floor = if cap >= positive { 1 } else { 0 };
    best_apportionment(&ideal, floor, cap, tolerance.max(EXACT_TOLERANCE))
}

/// Bandwidths scaled to (0, 1] by the largest; non-positive and NaN become 0. Infinite
/// values (an originator's "maximum bandwidth") dominate: they become 1, finite ones 0.
fn normalize(bandwidths: &[f64]) -> Vec<f64> {
    let clean: Vec<f64> = bandwidths
        .iter()
        .map(|&b| if b > 0.0 { b } else { 0.0 })
        .collect();
    if clean.iter().any(|b| b.is_infinite()) {
        return clean
            .iter()
            .map(|b| if b.is_infinite() { 1.0 } else { 0.0 })
            .collect();
    }
    let max = clean.iter().copied().fold(0.0, f64::max);
    if max <= 0.0 {
        return clean;
    }
    clean.iter().map(|b| b / max).collect()
}

/// One candidate in the greedy: the member whose next entry raises its ratio least.
#[derive(Clone, Copy, PartialEq)]
struct Next {
    /// (w'_i + 1) / x_i: the member's entries per unit of ideal weight after one more.
    quotient: f64,
    index: usize,
}

impl Eq for Next {}

impl Ord for Next {
    fn cmp(&self, other: &Self) -> Ordering {
        // Min-heap on quotient, then on index (lower index first) for determinism.
        other
            .quotient
            .total_cmp(&self.quotient)
            .then_with(|| other.index.cmp(&self.index))
    }
}

impl PartialOrd for Next {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Scans group sizes T = (members * floor).max(1) ..= cap, apportioning greedily, and
/// returns the T with the smallest delta (the smallest such T on ties). Stops at the first
/// T within `tolerance` of exact: that is the GCD-reduced ratio.
fn best_apportionment(ideal: &[f64], floor: u32, cap: u64, tolerance: f64) -> Weights {
    let total_ideal: f64 = ideal.iter().sum();
    let mut w: Vec<u32> = ideal
        .iter()
        .map(|&x| if x > 0.0 { floor } else { 0 })
        .collect();
    let mut heap: BinaryHeap<Next> = ideal
        .iter()
        .enumerate()
        .filter(|(_, &x)| x > 0.0)
        .map(|(index, &x)| Next {
            quotient: f64::from(floor + 1) / x,
            index,
        })
        .collect();
    // max_i w'_i / x_i so far; it only grows as entries are added.
    let mut max_ratio = w
        .iter()
        .zip(ideal)
        .filter(|(_, &x)| x > 0.0)
        .map(|(&wi, &x)| f64::from(wi) / x)
        .fold(0.0, f64::max);
    let mut size: u64 = w.iter().map(|&x| u64::from(x)).sum();
    let mut best: Option<(f64, Vec<u32>)> = None;
    loop {
        if size > 0 {
            let delta = max_ratio * total_ideal / size as f64;
            let better = match &best {
                None => true,
                Some((d, _)) => delta < *d * (1.0 - 1e-12),
            };
            if better {
                best = Some((delta, w.clone()));
            }
            if delta <= 1.0 + tolerance {
                break;
            }
        }
        if size >= cap {
            break;
        }
        let Some(next) = heap.pop() else { break };
        let i = next.index;
        w[i] += 1;
        size += 1;
        max_ratio = max_ratio.max(f64::from(w[i]) / ideal[i]);
        heap.push(Next {
            quotient: f64::from(w[i] + 1) / ideal[i],
            index: i,
        });
    }
    let (delta, weights) = best.unwrap_or((1.0, w));
    Weights {
        weights,
        delta: snap(delta),
    }
}

/// The oversubscription of integer weights `reduced` against ideal `bandwidths`
/// (README, docs/weights.md): max_i (w'_i * sum w) / (w_i * sum w'); 1.0 = exact.
pub fn delta(bandwidths: &[f64], reduced: &[u32]) -> f64 {
    let ideal = normalize(bandwidths);
    let total_ideal: f64 = ideal.iter().sum();
    let total: u64 = reduced.iter().map(|&w| u64::from(w)).sum();
    if total == 0 || total_ideal <= 0.0 {
        return 1.0;
    }
    let d = reduced
        .iter()
        .zip(&ideal)
        .map(|(&w, &x)| {
            if w == 0 {
                0.0
            } else if x <= 0.0 {
                f64::INFINITY
            } else {
                f64::from(w) * total_ideal / (x * total as f64)
            }
        })
        .fold(0.0, f64::max);
    snap(d)
}

/// delta is never below 1; float noise around an exact ratio reads as exactly 1.
fn snap(delta: f64) -> f64 {
    if delta < 1.0 + 1e-9 {
        1.0
    } else {
        delta
    }
}

/// The best delta any integer weights with sum <= `max_group_size` can reach, by trying
/// all of them (keeping every positive member when the limit allows, like `weights`).
/// A reference for tests and benchmarks: exponential, small cases only.
pub fn exhaustive_best_delta(bandwidths: &[f64], max_group_size: u32) -> f64 {
    let positive: Vec<usize> = (0..bandwidths.len())
        .filter(|&i| bandwidths[i] > 0.0)
        .collect();
    if positive.is_empty() {
        return 1.0;
    }
    let floor = if max_group_size as usize >= positive.len() {
        1
    } else {
        0
    };
    let mut w = vec![0u32; bandwidths.len()];
    let mut best = f64::INFINITY;
    fn walk(
        bw: &[f64],
        members: &[usize],
        floor: u32,
        left: u32,
        w: &mut Vec<u32>,
        best: &mut f64,
    ) {
        let Some((&i, rest)) = members.split_first() else {
            if w.iter().any(|&x| x > 0) {
                *best = best.min(delta(bw, w));
            }
            return;
        };
        let reserve = floor * rest.len() as u32;
        if left < floor + reserve {
            return;
        }
        for v in floor..=left - reserve {
            w[i] = v;
            walk(bw, rest, floor, left - v, w, best);
        }
        w[i] = 0;
    }
    walk(
        bandwidths,
        &positive,
        floor,
        max_group_size,
        &mut w,
        &mut best,
    );
    best
}

/// Proportional rounding, the baseline a reduction must never lose to: each member's
/// share of `max_group_size` rounded to nearest (at least 1 for positive members), the
/// scale shrunk until the sum fits.
pub fn proportional_rounding(bandwidths: &[f64], max_group_size: u32) -> Vec<u32> {
    let ideal = normalize(bandwidths);
    let total: f64 = ideal.iter().sum();
    if total <= 0.0 {
        return vec![0; bandwidths.len()];
    }
    let positive = ideal.iter().filter(|&&x| x > 0.0).count();
    let floor = u32::from(max_group_size as usize >= positive);
    let mut scale = f64::from(max_group_size) / total;
    loop {
        let mut w: Vec<u32> = ideal
            .iter()
            .map(|&x| {
                if x > 0.0 {
                    ((x * scale).round() as u32).max(floor)
                } else {
                    0
                }
            })
            .collect();
        let mut sum: u64 = w.iter().map(|&v| u64::from(v)).sum();
        if sum == 0 {
            // Everything rounded away: a group needs one member, the largest.
            let largest = (0..ideal.len())
                .max_by(|&a, &b| ideal[a].total_cmp(&ideal[b]))
                .unwrap_or(0);
            w[largest] = 1;
            sum = 1;
        }
        if sum <= u64::from(max_group_size) || scale < 1e-9 {
            return w;
        }
        scale *= 0.99;
    }
}

/// Replicated members in spray order (smooth weighted round robin): slot -> member index.
/// Any window of sum(w) consecutive slots holds exactly w_i slots of member i, and the
/// slots of each member are spread as evenly as the weights allow.
///
/// This is also the replicated-member form of a group, for targets that accept only
/// unweighted members: install one entry per slot.
pub fn spray_order(weights: &[u32]) -> Vec<usize> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let mut current = vec![0i64; weights.len()];
    let mut order = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        let (mut best, mut best_value) = (0, i64::MIN);
        for (i, (c, &w)) in current.iter_mut().zip(weights).enumerate() {
            *c += i64::from(w);
            // Highest running value wins; the lower index on ties.
            if *c > best_value {
                (best, best_value) = (i, *c);
            }
        }
        current[best] -= total;
        order.push(best);
    }
    order
}

/// The replicated-member expansion in member order (`[a, a, a, b, c, c]` for 3:1:2):
/// what the white paper's ASIC installs. Use `spray_order` for the interleaved form.
pub fn replicated_members(weights: &[u32]) -> Vec<usize> {
    weights
        .iter()
        .enumerate()
        .flat_map(|(i, &w)| std::iter::repeat_n(i, w as usize))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn white_paper_3_3_4_4() {
        let w = weights(&[75.0, 75.0, 100.0, 100.0], None);
        assert_eq!(w.weights, [3, 3, 4, 4]);
        assert_eq!(w.delta, 1.0);
    }

    #[test]
    fn heterogeneous_one_third_two_thirds() {
        let w = weights(
            &[100.0, 100.0, 100.0, 100.0, 200.0, 200.0, 200.0, 200.0],
            None,
        );
        assert_eq!(w.weights, [1, 1, 1, 1, 2, 2, 2, 2]);
    }

    #[test]
    fn gcd_reduction_tolerates_float32_rounding() {
        // 100/3 and 200/3 after a trip through f32 (the community's encoding).
        let a = f64::from((100.0f64 / 3.0) as f32);
        let b = f64::from((200.0f64 / 3.0) as f32);
        assert_eq!(weights(&[a, b], None).weights, [1, 2]);
        assert_eq!(weights(&[40.0, 60.0, 100.0], None).weights, [2, 3, 5]);
        assert_eq!(weights(&[7.0], None).weights, [1]);
    }

    #[test]
    fn tolerance_finds_the_simple_ratio_behind_quantized_values() {
        // Issue seen live: 75/7 and 100/7 Gbps after the upper half of a float32.
        let bw = [10.6875, 14.3125, 14.3125, 14.3125];
        let exact = weights(&bw, None);
        assert!(
            exact.weights.iter().sum::<u32>() > 200,
            "{:?}",
            exact.weights
        );
        let w = weights_within(&bw, None, 4.0 * 2f64.powi(-8));
        assert_eq!(w.weights, [3, 4, 4, 4]);
        // The delta reported is against the values given, not the ratio guessed.
        assert!(w.delta > 1.0 && w.delta < 1.004, "{}", w.delta);
        // A real difference beyond the tolerance stays: 100 : 99 is not 1 : 1 at 0.2 %
        // (a simpler ratio within the tolerance, such as 90 : 89, may stand for it).
        let w = weights_within(&[100.0, 99.0], None, 4.0 * 2f64.powi(-11));
        assert!(w.weights[0] > w.weights[1], "{:?}", w.weights);
        assert!(w.delta <= 1.0 + 4.0 * 2f64.powi(-11), "{}", w.delta);
        // ... and 1000 : 999 is, being closer than the precision.
        let w = weights_within(&[1000.0, 999.0], None, 4.0 * 2f64.powi(-11));
        assert_eq!(w.weights, [1, 1]);
    }

    #[test]
    fn non_positive_members_get_zero() {
        assert_eq!(
            weights(&[0.0, 50.0, -1.0, f64::NAN], None).weights,
            [0, 1, 0, 0]
        );
        assert_eq!(weights(&[0.0, 0.0], None).weights, [0, 0]);
        assert_eq!(weights(&[], None).weights, Vec::<u32>::new());
        assert_eq!(
            weights(&[f64::INFINITY, f64::INFINITY], None).weights,
            [1, 1]
        );
    }

    #[test]
    fn limit_is_met_with_best_delta() {
        // 3:3:4:4 needs 14 entries; with 8 the best is 2:2:2:2 (delta 8/7) or similar.
        let bw = [75.0, 75.0, 100.0, 100.0];
        let w = weights(&bw, Some(8));
        assert!(w.weights.iter().sum::<u32>() <= 8);
        let best = exhaustive_best_delta(&bw, 8);
        assert!((w.delta - best).abs() < 1e-9, "{} vs {best}", w.delta);
        assert!((w.delta - delta(&bw, &w.weights)).abs() < 1e-12);
    }

    /// The ratio, not the magnitude, decides: bandwidths near the largest double (their sum
    /// overflows) and subnormal ones (1000 and 3000 times the smallest, whose reciprocal
    /// overflows) give the same weights as 1:1 and 1:3, exactly.
    #[test]
    fn extreme_magnitudes_keep_their_ratio() {
        let w = weights(&[f64::MAX, f64::MAX], None);
        assert_eq!((w.weights.as_slice(), w.delta), (&[1, 1][..], 1.0));
        let w = weights(&[f64::MAX / 2.0, f64::MAX], None);
        assert_eq!((w.weights.as_slice(), w.delta), (&[1, 2][..], 1.0));
        let tiny = [f64::from_bits(1000), f64::from_bits(3000)];
        let w = weights(&tiny, None);
        assert_eq!((w.weights.as_slice(), w.delta), (&[1, 3][..], 1.0));
        assert_eq!(delta(&tiny, &[1, 3]), 1.0);
        assert_eq!(delta(&[f64::MAX, f64::MAX], &[1, 1]), 1.0);
    }

    /// Every member with a positive bandwidth keeps weight 1 when the limit allows it,
    /// however small its share; members at 0 do not count toward that (2 positive members,
    /// limit 2: 1 + 1, though 3 members are listed).
    #[test]
    fn small_member_keeps_one_entry_within_the_limit() {
        let w = weights(&[100.0, 1.0, 0.0], Some(2));
        assert_eq!(w.weights, [1, 1, 0]);
        // delta: member 1 gets 1/2 of the group for 1/101 of the bandwidth.
        assert!((w.delta - 101.0 / 2.0).abs() < 1e-9, "{}", w.delta);
    }

    /// Equal deltas: the smallest group wins. 3:4 within 3 entries: 1:1 gives member 0
    /// (3/7 of the bandwidth) 1/2 of the group, delta (1/2) / (3/7) = 7/6; 1:2 gives
    /// member 1 (4/7) 2/3, delta (2/3) / (4/7) = 7/6 too: 1:1 it is. Within 4 entries 2:2
    /// is 1:1 again.
    #[test]
    fn ties_go_to_the_smallest_group() {
        for limit in [3, 4] {
            let w = weights(&[3.0, 4.0], Some(limit));
            assert_eq!(w.weights, [1, 1], "limit {limit}");
            assert!((w.delta - 7.0 / 6.0).abs() < 1e-12, "{}", w.delta);
        }
        let w = weights(&[4.0, 3.0], Some(3));
        assert_eq!(w.weights, [1, 1]);
    }

    /// The proportional baseline by hand: each share of the limit rounded to nearest.
    /// 1:1:4 of 8: 8/6 = 1.33 -> 1, 1.33 -> 1, 32/6 = 5.33 -> 5 (7 entries, within 8).
    /// 8:9 of 18: 144/17 = 8.47 -> 8, 162/17 = 9.53 -> 10.
    #[test]
    fn proportional_rounding_by_hand() {
        assert_eq!(proportional_rounding(&[1.0, 1.0, 4.0], 8), [1, 1, 5]);
        assert_eq!(proportional_rounding(&[8.0, 9.0], 18), [8, 10]);
        assert_eq!(proportional_rounding(&[8.0, 9.0], 16), [8, 8]);
        assert_eq!(proportional_rounding(&[0.0, 0.0], 4), [0, 0]);
        // A limit of 0 cannot be met: the scale shrinks to nothing and the largest member
        // is kept alone.
        assert_eq!(proportional_rounding(&[1.0, 2.0], 0), [0, 1]);
    }

    /// Float noise below 1 + 1e-9 reads as exact; from there on the value is kept.
    #[test]
    fn snap_threshold_is_exclusive() {
        assert_eq!(snap(1.0 + 5e-10), 1.0);
        assert_eq!(snap(1.0 + 1e-9), 1.0 + 1e-9);
        assert_eq!(snap(1.5), 1.5);
    }

    /// The exhaustive reference leaves members without bandwidth out (weight 0), as
    /// `weights` does: 1 : 0 within 2 entries is exact, 1 : 0 : 1 within 2 too.
    #[test]
    fn exhaustive_reference_skips_zero_members() {
        assert_eq!(exhaustive_best_delta(&[1.0, 0.0], 2), 1.0);
        assert_eq!(exhaustive_best_delta(&[1.0, 0.0, 1.0], 2), 1.0);
        assert_eq!(exhaustive_best_delta(&[0.0, 0.0], 4), 1.0);
    }

    #[test]
    fn limit_below_member_count_keeps_the_largest() {
        let w = weights(&[10.0, 40.0, 20.0, 30.0], Some(2));
        assert_eq!(w.weights, [0, 1, 0, 1]);
    }

    #[test]
    fn delta_matches_design_definition() {
        // ideal 1:1, reduced 2:1 -> member 0 gets 2/3 instead of 1/2: delta 4/3.
        assert!((delta(&[1.0, 1.0], &[2, 1]) - 4.0 / 3.0).abs() < 1e-12);
        assert_eq!(delta(&[1.0, 3.0], &[1, 3]), 1.0);
        // Nothing to compare: no ideal bandwidth, or no entry at all, is 1 (not infinite).
        assert_eq!(delta(&[0.0, 0.0], &[1, 1]), 1.0);
        assert_eq!(delta(&[1.0, 2.0], &[0, 0]), 1.0);
        // An entry for a member without bandwidth is infinitely oversubscribed.
        assert_eq!(delta(&[1.0, 0.0], &[1, 1]), f64::INFINITY);
    }

    #[test]
    fn spray_order_counts_and_interleaves() {
        let order = spray_order(&[1, 1, 2, 2]);
        assert_eq!(order.len(), 6);
        for (i, w) in [1, 1, 2, 2].iter().enumerate() {
            assert_eq!(order.iter().filter(|&&m| m == i).count(), *w);
        }
        // Smooth: 3:1 never puts the heavy member's three slots in a row... except
        // by wrap-around; the single slot sits in the middle.
        assert_eq!(spray_order(&[3, 1]), [0, 0, 1, 0]);
        assert_eq!(replicated_members(&[2, 0, 1]), [0, 0, 2]);
    }

    fn bandwidth_vec() -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(
            prop_oneof![
                Just(0.0),
                0.001f64..1000.0,
                (1u32..9).prop_map(|k| f64::from(k) * 25.0)
            ],
            1..9,
        )
    }

    proptest! {
        #[test]
        fn sum_within_limit_and_no_needless_zero(bw in bandwidth_vec(), limit in 1u32..200) {
            let w = weights(&bw, Some(limit));
            prop_assert_eq!(w.weights.len(), bw.len());
            prop_assert!(w.weights.iter().map(|&x| u64::from(x)).sum::<u64>() <= u64::from(limit));
            let positive = bw.iter().filter(|&&b| b > 0.0).count();
            for (b, x) in bw.iter().zip(&w.weights) {
                if *b <= 0.0 {
                    prop_assert_eq!(*x, 0);
                } else if positive <= limit as usize {
                    prop_assert!(*x >= 1, "positive member dropped: {:?} -> {:?}", bw, w.weights);
                }
            }
            prop_assert!(w.delta >= 1.0);
            prop_assert!((w.delta - delta(&bw, &w.weights)).abs() < 1e-9 * w.delta);
        }

        #[test]
        fn never_worse_than_proportional_rounding(bw in bandwidth_vec(), limit in 1u32..200) {
            let w = weights(&bw, Some(limit));
            let baseline = proportional_rounding(&bw, limit);
            prop_assert!(baseline.iter().map(|&x| u64::from(x)).sum::<u64>() <= u64::from(limit));
            prop_assert!(w.delta <= delta(&bw, &baseline) * (1.0 + 1e-9),
                "{:?} limit {}: {:?} ({}) vs rounding {:?} ({})",
                bw, limit, w.weights, w.delta, baseline, delta(&bw, &baseline));
        }

        #[test]
        fn optimal_against_exhaustive_search(
            bw in prop::collection::vec(1u32..20, 1..4).prop_map(|v| v.into_iter().map(f64::from).collect::<Vec<_>>()),
            limit in 1u32..12,
        ) {
            let w = weights(&bw, Some(limit));
            let best = exhaustive_best_delta(&bw, limit);
            prop_assert!((w.delta - best).abs() <= 1e-9 * best, "{:?} limit {}: {} vs {}", bw, limit, w.delta, best);
        }

        #[test]
        fn spray_windows_hold_exact_counts(ws in prop::collection::vec(0u32..6, 1..6)) {
            let order = spray_order(&ws);
            let total: usize = ws.iter().map(|&w| w as usize).sum();
            prop_assert_eq!(order.len(), total);
            if total > 0 {
                // Any window of `total` consecutive slots of the repeating sequence.
                let cyc: Vec<usize> = order.iter().chain(order.iter()).copied().collect();
                for start in 0..total {
                    for (i, &w) in ws.iter().enumerate() {
                        let n = cyc[start..start + total].iter().filter(|&&m| m == i).count();
                        prop_assert_eq!(n, w as usize);
                    }
                }
            }
        }

        /// Small integer ratios, each value rounded twice (up to 2 x the binary16
        /// precision), come back as exactly those ratios.
        #[test]
        fn tolerance_recovers_small_ratios(ks in prop::collection::vec(1u32..9, 1..9),
                                           noise in prop::collection::vec(-1.0f64..1.0, 9),
                                           scale in 1.0f64..500.0) {
            let u = 2f64.powi(-11);
            let bw: Vec<f64> = ks.iter().zip(&noise)
                .map(|(&k, e)| f64::from(k) * scale * (1.0 + 2.0 * u * e)).collect();
            let w = weights_within(&bw, None, 4.0 * u);
            let g = ks.iter().copied().fold(0, |a, b| { let (mut a, mut b) = (a, b); while b != 0 { (a, b) = (b, a % b); } a });
            let expect: Vec<u32> = ks.iter().map(|k| k / g).collect();
            prop_assert_eq!(w.weights, expect, "{:?}", bw);
        }

        #[test]
        fn unlimited_is_exact_for_integer_ratios(ks in prop::collection::vec(1u32..50, 1..8)) {
            let bw: Vec<f64> = ks.iter().map(|&k| f64::from(k) * 12.5).collect();
            let w = weights(&bw, None);
            prop_assert_eq!(w.delta, 1.0);
            let g = ks.iter().copied().fold(0, |a, b| { let (mut a, mut b) = (a, b); while b != 0 { (a, b) = (b, a % b); } a });
            let expect: Vec<u32> = ks.iter().map(|k| k / g).collect();
            prop_assert_eq!(w.weights, expect);
        }
    }
}
