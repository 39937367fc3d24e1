//! WCMP groups: float path bandwidths -> integer weights, group-size reduction,
//! replicated members and the spray order.

/// Integer weights for a group, with the oversubscription the rounding caused.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    pub weights: Vec<u32>,
    /// delta = max_i (w'_i * sum w) / (w_i * sum w') against the ideal weights (1.0 = exact).
    pub delta: f64,
}

/// Integer weights proportional to `bandwidths`, reduced by their GCD; with
/// `max_group_size`, the sum of weights is at most that.
pub fn weights(bandwidths: &[f64], max_group_size: Option<u32>) -> Weights {
    // Placeholder until the foundation lands: millis, GCD-reduced, no size limit.
    let _ = max_group_size;
    let ints: Vec<u64> = bandwidths
        .iter()
        .map(|b| (b * 1000.0).round().max(1.0) as u64)
        .collect();
    let g = ints.iter().copied().fold(0, gcd).max(1);
    Weights {
        weights: ints.iter().map(|w| (w / g) as u32).collect(),
        delta: 1.0,
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Replicated members in spray order (smooth weighted round robin): slot -> member index.
/// Any window of sum(w) consecutive slots holds exactly w_i slots of member i.
pub fn spray_order(weights: &[u32]) -> Vec<usize> {
    let total: i64 = weights.iter().map(|&w| w as i64).sum();
    let mut current = vec![0i64; weights.len()];
    let mut order = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, &w) in current.iter_mut().zip(weights) {
            *c += w as i64;
        }
        let (best, _) = current
            .iter()
            .enumerate()
            .max_by_key(|&(i, &c)| (c, std::cmp::Reverse(i)))
            .expect("non-empty when total > 0");
        current[best] -= total;
        order.push(best);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn white_paper_3_3_4_4() {
        assert_eq!(
            weights(&[75.0, 75.0, 100.0, 100.0], None).weights,
            [3, 3, 4, 4]
        );
    }

    #[test]
    fn spray_order_counts() {
        let order = spray_order(&[1, 1, 2, 2]);
        assert_eq!(order.len(), 6);
        for (i, w) in [1, 1, 2, 2].iter().enumerate() {
            assert_eq!(order.iter().filter(|&&m| m == i).count(), *w);
        }
    }
}
