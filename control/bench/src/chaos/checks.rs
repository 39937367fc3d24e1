//! The chaos soak's verdicts on what was measured, kept apart from the faults: where the
//! lost packets fall against the fault windows, and whether an agent's memory or file
//! descriptors grew without bound.

use std::collections::BTreeMap;

/// A fault's window, unix seconds: from just before the fault until the fabric had
/// recovered from its repair (sessions up, groups equal to the model).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub start: f64,
    pub end: f64,
}

/// Lost packets placed in time against the windows.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Placement {
    pub sent: u64,
    pub lost: u64,
    /// Lost in slices that overlap a window stretched by the grace.
    pub inside: u64,
    /// Lost anywhere else: (slice start, unix s; packets).
    pub outside: Vec<(f64, u64)>,
    /// Packets sent after the last window (plus grace) and lost.
    pub after_last: u64,
    /// Seconds of traffic after the last window plus grace.
    pub quiet_tail_s: f64,
}

/// Sent minus received per slice (`slice_ms` wide, keyed by send time / `slice_ms`),
/// placed against `windows` each stretched by `grace` seconds at its end.
pub fn place(
    sent: &BTreeMap<u64, u64>,
    received: &BTreeMap<u64, u64>,
    slice_ms: u64,
    windows: &[Window],
    grace: f64,
) -> Placement {
    let width = slice_ms as f64 / 1000.0;
    let last_end = windows.iter().map(|w| w.end + grace).reduce(f64::max);
    let mut p = Placement::default();
    for (slice, n) in sent {
        let t0 = *slice as f64 * width;
        let lost = n.saturating_sub(received.get(slice).copied().unwrap_or(0));
        p.sent += n;
        p.lost += lost;
        let inside = windows
            .iter()
            .any(|w| t0 < w.end + grace && t0 + width > w.start);
        if inside {
            p.inside += lost;
        } else if lost > 0 {
            p.outside.push((t0, lost));
        }
        if last_end.is_some_and(|e| t0 >= e) {
            p.after_last += lost;
        }
    }
    let first = sent.keys().next().map(|s| *s as f64 * width);
    let end = sent.keys().next_back().map(|s| (*s + 1) as f64 * width);
    p.quiet_tail_s = match (end, last_end.or(first)) {
        (Some(end), Some(from)) => (end - from).max(0.0),
        _ => 0.0,
    };
    p
}

/// Samples of one agent process (RSS in kB, open fds), in time order.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Series {
    pub node: String,
    pub pid: u32,
    pub rss_kb: Vec<u64>,
    pub fds: Vec<u64>,
}

/// RSS may end at most this much above its early peak: 10 % plus 4 MiB.
pub fn rss_limit(first_max_kb: u64) -> u64 {
    first_max_kb + first_max_kb / 10 + 4096
}

/// Open fds may end at most this many above their early peak.
pub const FD_MARGIN: u64 = 8;

/// Bounded growth: the last third's maximum is at most `limit(the first two thirds'
/// maximum)` (two thirds, so that an agent's start-up ramp is behind it). Fewer than 6
/// samples say nothing (None); else Some(verdict, earlier max, last third's max).
pub fn bounded(samples: &[u64], limit: impl Fn(u64) -> u64) -> Option<(bool, u64, u64)> {
    if samples.len() < 6 {
        return None;
    }
    let third = samples.len() / 3;
    let first = samples[..samples.len() - third]
        .iter()
        .copied()
        .max()
        .unwrap_or(0);
    let last = samples[samples.len() - third..]
        .iter()
        .copied()
        .max()
        .unwrap_or(0);
    Some((last <= limit(first), first, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_inside_windows_outside_and_after_the_last() {
        // 100 ms slices from t = 100 s; one window 100.25 .. 100.4 s, grace 0.1 s.
        let sent: BTreeMap<u64, u64> = (1000..1010).map(|s| (s, 10)).collect();
        let mut received = sent.clone();
        received.insert(1000, 9); // 100.0 s: before the window
        received.insert(1002, 0); // 100.2 s: overlaps the window's start
        received.insert(1004, 5); // 100.4 s: inside the grace
        received.insert(1008, 7); // 100.8 s: after the window and grace
        let w = [Window {
            start: 100.25,
            end: 100.4,
        }];
        let p = place(&sent, &received, 100, &w, 0.1);
        assert_eq!(p.sent, 100);
        assert_eq!(p.lost, 1 + 10 + 5 + 3);
        assert_eq!(p.inside, 15);
        assert_eq!(p.outside.len(), 2);
        assert!((p.outside[0].0 - 100.0).abs() < 1e-9 && p.outside[0].1 == 1);
        assert!((p.outside[1].0 - 100.8).abs() < 1e-9 && p.outside[1].1 == 3);
        assert_eq!(p.after_last, 3);
        // Traffic ran until 101.0 s; the window and grace ended at 100.5 s.
        assert!((p.quiet_tail_s - 0.5).abs() < 1e-9, "{}", p.quiet_tail_s);
    }

    #[test]
    fn growth_is_judged_on_the_last_third_against_the_rest() {
        // A start-up ramp, then flat.
        let flat = [11, 35, 58, 58, 59, 58];
        assert_eq!(bounded(&flat, |m| m + 2), Some((true, 58, 59)));
        let leak = [100, 110, 120, 130, 140, 150];
        assert_eq!(bounded(&leak, |m| m + 2), Some((false, 130, 150)));
        assert_eq!(bounded(&leak[..5], |m| m), None);
        assert_eq!(rss_limit(10_240), 10_240 + 1_024 + 4_096);
    }
}
