//! Resilient weighted groups: a fixed table of `B` buckets per group, the flow hash picks
//! a bucket (`table[(hash * B) >> 32]`), and a weight change moves only the buckets the new
//! weights require.
//!
//! With the replicated-member layout (`wcmp::spray_order`, one slot per unit of weight) a
//! change of any weight changes the number of slots and so the slot of most hashes: most
//! flows change member although few must. Here the table size stays `B` and
//!
//! 1. every member's bucket count is its largest-remainder (Hamilton) apportionment of
//!    `B` by the new weights ([`apportion`]): deterministic, each count within one bucket
//!    of `w_i * B / sum w`;
//! 2. only buckets of members above their new count (or gone, weight 0) move, the excess
//!    spread evenly over each such member's buckets;
//! 3. they go to members below their new count, interleaved in smooth weighted
//!    round-robin order of what each one lacks. A failed member's buckets thus go to the
//!    others in proportion to their weights (within the roundings: a survivor may also
//!    pass on the one remainder bucket it had), and a member that comes back takes
//!    buckets only from members above their share.
//!
//! Buckets moved = sum of excesses = half the L1 distance of the counts, which is at most
//! the total-variation distance between the old and new shares times `B`, plus less than
//! one bucket per member for each of the two roundings (`moved <= ceil(TV * B) + members`).
//!
//! A fresh group's table is the spray order of its counts ([`fresh`]): consecutive hash
//! ranges go to different members, so no member owns one long range of the hash space.

use crate::wcmp::spray_order;

/// The XDP data plane's bucket count: its group row holds 256 one-byte slots
/// (`fare_common::MAX_SLOTS`), one per-CPU copy per group; one bucket is 0.39 % of a group.
pub const DEFAULT_BUCKETS: usize = 256;

/// A table and how it came from the previous one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// Bucket -> member index; empty when no member has a positive weight.
    pub table: Vec<usize>,
    /// Buckets whose member changed (all of them for a fresh table).
    pub moved: usize,
}

/// Largest-remainder apportionment of `buckets` by `weights`: floor of every quota, then
/// one more bucket to the largest remainders (the lower index on ties). All zero when the
/// weights sum to 0.
pub fn apportion(weights: &[u32], buckets: usize) -> Vec<usize> {
    let total: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if total == 0 {
        return vec![0; weights.len()];
    }
    let b = buckets as u128;
    let mut counts: Vec<usize> = weights
        .iter()
        .map(|&w| (u128::from(w) * b / total) as usize)
        .collect();
    let given: usize = counts.iter().sum();
    let mut by_remainder: Vec<usize> = (0..weights.len()).collect();
    // Stable sort: equal remainders keep the lower index first.
    by_remainder.sort_by_key(|&i| std::cmp::Reverse(u128::from(weights[i]) * b % total));
    for &i in by_remainder.iter().take(buckets - given) {
        counts[i] += 1;
    }
    counts
}

/// The table of a fresh group: its apportionment in spray order.
pub fn fresh(weights: &[u32], buckets: usize) -> Vec<usize> {
    let counts: Vec<u32> = apportion(weights, buckets)
        .into_iter()
        .map(|c| c as u32)
        .collect();
    spray_order(&counts)
}

/// The new table for `weights` given the `previous` one (bucket -> member index in the
/// same numbering as `weights`; an index without a weight, e.g. `usize::MAX`, is a member
/// that is gone). Without a previous table, or one of another size, the table is fresh.
pub fn reassign(previous: Option<&[usize]>, weights: &[u32], buckets: usize) -> Assignment {
    let targets = apportion(weights, buckets);
    let Some(previous) = previous.filter(|p| p.len() == buckets && buckets > 0) else {
        let table = fresh(weights, buckets);
        let moved = table.len();
        return Assignment { table, moved };
    };
    if targets.iter().all(|&t| t == 0) {
        return Assignment {
            table: Vec::new(),
            moved: buckets,
        };
    }
    let n = weights.len();
    // Previous counts of current members; gone members count nowhere (target 0).
    let mut counts = vec![0usize; n];
    for &m in previous {
        if m < n {
            counts[m] += 1;
        }
    }
    // Which of a member's buckets it gives up: its j-th of c when floor((j+1)e/c) steps.
    let mut seen = vec![0usize; n];
    let mut freed = Vec::new();
    for (bucket, &m) in previous.iter().enumerate() {
        if m >= n {
            freed.push(bucket);
            continue;
        }
        let (c, e) = (counts[m], counts[m].saturating_sub(targets[m]));
        let j = seen[m];
        seen[m] += 1;
        if (j + 1) * e / c > j * e / c {
            freed.push(bucket);
        }
    }
    let lacking: Vec<u32> = targets
        .iter()
        .zip(&counts)
        .map(|(&t, &c)| t.saturating_sub(c) as u32)
        .collect();
    let mut table = previous.to_vec();
    for (&bucket, member) in freed.iter().zip(spray_order(&lacking)) {
        table[bucket] = member;
    }
    Assignment {
        table,
        moved: freed.len(),
    }
}

/// Buckets per member of `table` (indices below `members`).
pub fn counts(table: &[usize], members: usize) -> Vec<usize> {
    let mut out = vec![0; members];
    for &m in table {
        if let Some(c) = out.get_mut(m) {
            *c += 1;
        }
    }
    out
}

/// Total-variation distance between the shares of two weight vectors (members by index,
/// a missing one has weight 0): the least fraction of flows any scheme must move.
pub fn tv_distance(old: &[u32], new: &[u32]) -> f64 {
    let sum = |w: &[u32]| w.iter().map(|&x| f64::from(x)).sum::<f64>();
    let (so, sn) = (sum(old), sum(new));
    if so == 0.0 || sn == 0.0 {
        return if so == sn { 0.0 } else { 1.0 };
    }
    let n = old.len().max(new.len());
    let share = |w: &[u32], s: f64, i: usize| w.get(i).map_or(0.0, |&x| f64::from(x) / s);
    (0..n)
        .map(|i| (share(old, so, i) - share(new, sn, i)).abs())
        .sum::<f64>()
        / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn change(old: &[u32], new: &[u32]) -> (Vec<usize>, Assignment) {
        let before = fresh(old, DEFAULT_BUCKETS);
        let after = reassign(Some(&before), new, DEFAULT_BUCKETS);
        (before, after)
    }

    /// The issue's table with 256 buckets, counts computed by hand (quota floors, then
    /// the largest remainders of w * 256 mod sum w).
    #[test]
    fn issue_table_by_hand() {
        // 3:3:4:4 (sum 14): 54 r12, 73 r2 -> 55 55 73 73; 3:3:4:3 (13): 59 r1, 78 r10
        // -> 59 59 79 59. Member 3 gives 14 (5.5 %, TV 10/182 = 5.49 %).
        type Case<'a> = (&'a [u32], &'a [u32], [usize; 4], [usize; 4], usize);
        let cases: [Case; 5] = [
            (
                &[3, 3, 4, 4],
                &[3, 3, 4, 3],
                [55, 55, 73, 73],
                [59, 59, 79, 59],
                14,
            ),
            // 64 each; 4:4:4:3 (15): 68 r4, 51 r3 -> 69 68 68 51; 13 moved (TV 5 %).
            (&[4, 4, 4, 4], &[4, 4, 4, 3], [64; 4], [69, 68, 68, 51], 13),
            // 2:2:2:1 (7): 73 r1, 36 r4 -> 73 73 73 37; 27 moved (TV 3/28 = 10.7 %).
            (&[16; 4], &[16, 16, 16, 8], [64; 4], [73, 73, 73, 37], 27),
            // 4:4:4:1 (13): 78 r10, 19 r9 -> 79 79 79 19; 45 moved (TV 9/52 = 17.3 %).
            (&[1; 4], &[4, 4, 4, 1], [64; 4], [79, 79, 79, 19], 45),
            // 7:8:8:8 (31): 57 r25, 66 r2 -> 58 66 66 66; 3:4:4:4 (15): 51 r3, 68 r4
            // -> 51 69 68 68; member 0 gives 7 (2.7 %, TV 2.58 %).
            (
                &[7, 8, 8, 8],
                &[3, 4, 4, 4],
                [58, 66, 66, 66],
                [51, 69, 68, 68],
                7,
            ),
        ];
        for (old, new, before_counts, after_counts, moved) in cases {
            let (before, after) = change(old, new);
            assert_eq!(counts(&before, 4), before_counts, "{old:?}");
            assert_eq!(counts(&after.table, 4), after_counts, "{old:?} -> {new:?}");
            assert_eq!(after.moved, moved, "{old:?} -> {new:?}");
            let changed = before
                .iter()
                .zip(&after.table)
                .filter(|(a, b)| a != b)
                .count();
            assert_eq!(changed, moved);
        }
    }

    #[test]
    fn failed_member_spreads_and_comes_back_from_the_others_only() {
        let before = fresh(&[1, 1, 1, 1], 256);
        // 256 / 3 = 85 r1 each: member 0 takes the extra one.
        let failed = reassign(Some(&before), &[1, 1, 1, 0], 256);
        assert_eq!(counts(&failed.table, 4), [86, 85, 85, 0]);
        assert_eq!(failed.moved, 64);
        for (a, b) in before.iter().zip(&failed.table) {
            assert!(a == b || *a == 3, "only member 3's buckets move");
        }
        let back = reassign(Some(&failed.table), &[1, 1, 1, 1], 256);
        assert_eq!(counts(&back.table, 4), [64; 4]);
        assert_eq!(back.moved, 64);
        for (a, b) in failed.table.iter().zip(&back.table) {
            assert!(a == b || *b == 3, "only buckets to member 3 move");
        }
        // A member gone from the list (index past the weights) counts as failed.
        let gone: Vec<usize> = before
            .iter()
            .map(|&m| if m == 3 { usize::MAX } else { m })
            .collect();
        assert_eq!(reassign(Some(&gone), &[1, 1, 1], 256).table, failed.table);
    }

    /// The last member dropped from the list: its buckets hold the index just past the new
    /// weights (3 of 3), gone like any index without a weight, the same table as its
    /// weight going to 0.
    #[test]
    fn last_member_dropped_from_the_list() {
        let before = fresh(&[1, 1, 1, 1], 256);
        let failed = reassign(Some(&before), &[1, 1, 1, 0], 256);
        let dropped = reassign(Some(&before), &[1, 1, 1], 256);
        assert_eq!(dropped.table, failed.table);
        assert_eq!(dropped.moved, 64);
    }

    /// From no weight to some, or back, every flow moves: a distance of 1; from none to
    /// none, 0. Otherwise half the L1 distance of the shares: 1:1 -> 1:3 moves 1/4.
    #[test]
    fn tv_distance_by_hand() {
        assert_eq!(tv_distance(&[0, 0], &[1, 1]), 1.0);
        assert_eq!(tv_distance(&[3], &[0]), 1.0);
        assert_eq!(tv_distance(&[], &[2]), 1.0);
        assert_eq!(tv_distance(&[0], &[]), 0.0);
        assert_eq!(tv_distance(&[1, 1], &[1, 3]), 0.25);
        assert_eq!(tv_distance(&[1, 1], &[1, 1, 2]), 0.5);
    }

    #[test]
    fn fresh_table_interleaves_and_edge_cases() {
        assert_eq!(fresh(&[1, 1], 4), [0, 1, 0, 1]);
        assert_eq!(fresh(&[3, 1], 8), [0, 0, 1, 0, 0, 0, 1, 0]);
        assert_eq!(apportion(&[0, 0], 8), [0, 0]);
        assert!(reassign(None, &[0, 0], 8).table.is_empty());
        let t = fresh(&[1, 2], 8);
        assert!(reassign(Some(&t), &[0, 0], 8).table.is_empty());
        // Another size: fresh.
        assert_eq!(reassign(Some(&t), &[1, 1], 4).table, [0, 1, 0, 1]);
        // No change, nothing moves.
        let same = reassign(Some(&t), &[2, 4], 8);
        assert_eq!((same.table.as_slice(), same.moved), (t.as_slice(), 0));
        assert!((tv_distance(&[1, 1], &[1, 0]) - 0.5).abs() < 1e-12);
        assert_eq!(tv_distance(&[], &[]), 0.0);
    }

    fn weight_vec(n: usize) -> impl Strategy<Value = Vec<u32>> {
        prop::collection::vec(prop_oneof![Just(0u32), 1u32..20, 1u32..1000], n)
    }

    /// A group of 1..=16 members and two to four successive weight vectors.
    fn history() -> impl Strategy<Value = (Vec<Vec<u32>>, usize)> {
        (1usize..=16).prop_flat_map(|n| {
            (
                prop::collection::vec(weight_vec(n), 2..5),
                prop_oneof![Just(256usize), Just(64), 1usize..600],
            )
        })
    }

    proptest! {
        #[test]
        fn apportionment_sums_and_is_within_one(w in weight_vec(12), b in 0usize..5000) {
            let c = apportion(&w, b);
            let total: u64 = w.iter().map(|&x| u64::from(x)).sum();
            if total == 0 {
                prop_assert!(c.iter().all(|&x| x == 0));
            } else {
                prop_assert_eq!(c.iter().sum::<usize>(), b);
                for (&x, &wi) in c.iter().zip(&w) {
                    let quota = f64::from(wi) * b as f64 / total as f64;
                    prop_assert!((x as f64 - quota).abs() < 1.0, "{} vs {}", x, quota);
                }
            }
        }

        /// Every step: counts = apportionment, moved within the bound, only members above
        /// their count give, only members below it take.
        #[test]
        fn changes_move_only_what_they_must((steps, b) in history()) {
            let mut table = reassign(None, &steps[0], b).table;
            let mut old = steps[0].clone();
            for new in &steps[1..] {
                let a = reassign(Some(&table), new, b);
                let target = apportion(new, b);
                if target.iter().all(|&t| t == 0) {
                    prop_assert!(a.table.is_empty());
                    table = Vec::new();
                    old = new.clone();
                    continue;
                }
                prop_assert_eq!(a.table.len(), b);
                prop_assert_eq!(counts(&a.table, new.len()), target.clone());
                let changed = table.iter().zip(&a.table).filter(|(x, y)| x != y).count();
                if table.len() == b {
                    prop_assert_eq!(changed, a.moved);
                    let before = counts(&table, new.len());
                    for (&x, &y) in table.iter().zip(&a.table) {
                        if x != y {
                            prop_assert!(before[x] > target[x], "{} gave below its share", x);
                            prop_assert!(before[y] < target[y], "{} took above its share", y);
                        }
                    }
                    let tv = tv_distance(&old, new);
                    let bound = (tv * b as f64 - 1e-9).ceil() as usize + new.len();
                    prop_assert!(a.moved <= bound, "{:?} -> {:?}: {} moved, bound {}", old, new, a.moved, bound);
                }
                table = a.table;
                old = new.clone();
            }
        }

        /// A failed member's buckets go to the others in proportion to their weights:
        /// each receives its new count minus its old (within the two roundings, which
        /// can also move one remainder bucket between survivors).
        #[test]
        fn failure_spreads_by_weight(w in prop::collection::vec(1u32..50, 2..10), pick in 0usize..10, b in 64usize..1024) {
            let f = pick % w.len();
            let before = fresh(&w, b);
            let mut new = w.clone();
            new[f] = 0;
            let a = reassign(Some(&before), &new, b);
            let freed = counts(&before, w.len())[f];
            // A survivor can lose the remainder bucket it had (the quotas' fractions
            // change): at most one each.
            prop_assert!(a.moved >= freed && a.moved < freed + w.len());
            let rest: f64 = new.iter().map(|&x| f64::from(x)).sum();
            let got = counts(&a.table, w.len());
            let had = counts(&before, w.len());
            for i in (0..w.len()).filter(|&i| i != f) {
                let gain = got[i] as f64 - had[i] as f64;
                let fair = freed as f64 * f64::from(w[i]) / rest;
                prop_assert!(gain >= -1.0);
                prop_assert!((gain - fair).abs() < 3.0, "member {} gained {} of {} (fair {})", i, gain, freed, fair);
            }
        }
    }
}
