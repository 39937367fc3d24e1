//! Congestion shifts load, not paths (draft-wh-rtgwg-adaptive-routing-arn §1: "when
//! congestion occurs, some traffic can still flow through the link, so AR ensures that only
//! the excess or partial traffic is re-routed").
//!
//! The one rule every data plane applies (docs/arn.md, "Congestion: the share shift"). A
//! member toward a congested link keeps a *share factor* `f` (1 = its full WCMP weight);
//! its installed weight is `w * f`, the other members keep theirs, so they keep their ratio
//! among themselves and take the excess in proportion to their weights:
//!
//! - **Cut** (Type 1 with Metric m): `f <- max(min_share, f * (1 - max_cut * m / 255))`.
//!   With the defaults (max_cut 0.5) Metric 255 halves the share, 128 takes 25 % of it, 26
//!   takes 5 %. The sender's Metric is its queue level (255 * backlog / limit), so a fuller
//!   queue moves more.
//! - **Damping**: at most one cut per `damping_ms`, and a refresh (Type 1 while the member
//!   is already cut) cuts again only when its Metric is not below the one of the last cut:
//!   a queue that drains shows the last cut is enough; one that does not shows the link
//!   still cannot carry the share, and the share moves further toward what it can carry.
//! - **Hysteresis**: a cut remembers the share that was congested; the recovery after a
//!   Type 2 stops at `(1 - hysteresis)` times it as long as the last Type 1 is less than
//!   `memory_ms` old. So a link that carries some but not all of its share settles just
//!   below the congested level instead of sawing between full and cut.
//! - **Recovery** (Type 2, or no refresh within the hold time): the share comes back by
//!   `recover_step` every `recover_ms` up to the ceiling above (1 once the memory is over);
//!   at 1 the member is back to its weight and the entry ends.
//! - Failure is not congestion: Type 3 removes the member (no traffic passes a failed
//!   link), Type 4 restores it; the receiver does that outside this module.
//!
//! [`weights`] turns base weights and factors into the weights to install; the data plane
//! task then fits them to the backend's limits like any group (`dataplane::limits`).

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// What a Type 1 (congestion detected) does at the receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CongestionMode {
    /// Lower the congested member's share by the Metric (this module).
    #[default]
    Shift,
    /// Take the whole member out, as for a failure (the behaviour before the shift).
    Remove,
}

/// A congestion mode that is neither `shift` nor `remove` (what was given).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: expected shift or remove")]
pub struct UnknownCongestionMode(pub String);

impl std::str::FromStr for CongestionMode {
    type Err = UnknownCongestionMode;
    fn from_str(s: &str) -> Result<Self, UnknownCongestionMode> {
        match s {
            "shift" => Ok(CongestionMode::Shift),
            "remove" => Ok(CongestionMode::Remove),
            _ => Err(UnknownCongestionMode(s.to_string())),
        }
    }
}

/// `arn.congestion`: the shift's parameters (docs/arn.md).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ShiftConfig {
    #[serde(default)]
    pub mode: CongestionMode,
    /// Fraction of the share a Type 1 with Metric 255 takes away (0 < max_cut <= 1).
    #[serde(default = "default_max_cut")]
    pub max_cut: f64,
    /// The share never goes below this fraction of the member's weight (0 < min_share <= 1).
    #[serde(default = "default_min_share")]
    pub min_share: f64,
    /// At most one cut per this period.
    #[serde(default = "default_damping_ms")]
    pub damping_ms: u64,
    /// Recovery stops at (1 - hysteresis) x the share last found congested (0 <= h < 1)...
    #[serde(default = "default_hysteresis")]
    pub hysteresis: f64,
    /// ...until the last Type 1 is this old.
    #[serde(default = "default_memory_ms")]
    pub memory_ms: u64,
    /// Share given back per recovery step (0 < step <= 1)...
    #[serde(default = "default_recover_step")]
    pub recover_step: f64,
    /// ...once per this period.
    #[serde(default = "default_recover_ms")]
    pub recover_ms: u64,
}

fn default_max_cut() -> f64 {
    0.5
}
fn default_min_share() -> f64 {
    0.0625
}
fn default_damping_ms() -> u64 {
    200
}
fn default_hysteresis() -> f64 {
    0.1
}
fn default_memory_ms() -> u64 {
    5000
}
fn default_recover_step() -> f64 {
    0.125
}
fn default_recover_ms() -> u64 {
    250
}

impl Default for ShiftConfig {
    fn default() -> Self {
        ShiftConfig {
            mode: CongestionMode::Shift,
            max_cut: default_max_cut(),
            min_share: default_min_share(),
            damping_ms: default_damping_ms(),
            hysteresis: default_hysteresis(),
            memory_ms: default_memory_ms(),
            recover_step: default_recover_step(),
            recover_ms: default_recover_ms(),
        }
    }
}

impl ShiftConfig {
    /// Checks the ranges; the error is (key, problem).
    pub fn check(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, why: &str| Err((k.to_string(), format!("congestion.{k} {why}")));
        if !(self.max_cut > 0.0 && self.max_cut <= 1.0) {
            return bad("max_cut", "must be in (0, 1]");
        }
        if !(self.min_share > 0.0 && self.min_share <= 1.0) {
            return bad("min_share", "must be in (0, 1]");
        }
        if !(self.hysteresis >= 0.0 && self.hysteresis < 1.0) {
            return bad("hysteresis", "must be in [0, 1)");
        }
        if !(self.recover_step > 0.0 && self.recover_step <= 1.0) {
            return bad("recover_step", "must be in (0, 1]");
        }
        if self.recover_ms == 0 {
            return bad("recover_ms", "must be positive");
        }
        Ok(())
    }

    /// The share after one cut of `share` by Metric `metric` (the shift function).
    pub fn cut(&self, share: f64, metric: u8) -> f64 {
        let f = share * (1.0 - self.max_cut * f64::from(metric) / 255.0);
        f.max(self.min_share).min(share)
    }
}

/// The shift state of one member toward a congested link.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    /// Fraction of the member's weight it keeps (min_share..=1).
    pub factor: f64,
    /// When the last cut happened and the Metric that made it.
    last_cut: Option<(Instant, u8)>,
    /// Recovery ceiling: (1 - hysteresis) x the share last found congested...
    ceiling: f64,
    /// ...until then (the last Type 1 + memory).
    ceiling_until: Instant,
    /// Type 2 (or the hold time) started the recovery; the last step.
    recovering: Option<Instant>,
    /// Cuts and recovery steps made (for logs and the settling test).
    pub changes: u64,
}

impl Share {
    /// A member at its full weight.
    pub fn new(now: Instant) -> Share {
        Share {
            factor: 1.0,
            last_cut: None,
            ceiling: 1.0,
            ceiling_until: now,
            recovering: None,
            changes: 0,
        }
    }

    /// A Type 1 with `metric`. True when the share changed.
    pub fn congested(&mut self, c: &ShiftConfig, metric: u8, now: Instant) -> bool {
        self.ceiling_until = now + Duration::from_millis(c.memory_ms);
        let onset = self.recovering.take().is_some() || self.last_cut.is_none();
        let may = match self.last_cut {
            None => true,
            Some((t, m)) => {
                now.saturating_duration_since(t) >= Duration::from_millis(c.damping_ms)
                    && (onset || metric >= m)
            }
        };
        if !may {
            return false;
        }
        let next = c.cut(self.factor, metric);
        if next >= self.factor {
            return false;
        }
        self.ceiling = (self.factor * (1.0 - c.hysteresis)).max(next);
        self.factor = next;
        self.last_cut = Some((now, metric));
        self.changes += 1;
        true
    }

    /// Type 2, or no Type 1 within the hold time: start giving the share back.
    pub fn cleared(&mut self, now: Instant) {
        if self.recovering.is_none() {
            self.recovering = Some(now);
        }
    }

    pub fn is_recovering(&self) -> bool {
        self.recovering.is_some()
    }

    /// A recovery step when one is due. True when the share changed.
    pub fn tick(&mut self, c: &ShiftConfig, now: Instant) -> bool {
        let Some(last) = self.recovering else {
            return false;
        };
        if now.saturating_duration_since(last) < Duration::from_millis(c.recover_ms) {
            return false;
        }
        let cap = if now < self.ceiling_until {
            self.ceiling
        } else {
            1.0
        };
        let next = (self.factor + c.recover_step).min(cap).min(1.0);
        if next <= self.factor {
            return false;
        }
        self.factor = next;
        self.recovering = Some(now);
        self.changes += 1;
        true
    }

    /// Back to the full weight: the entry can go.
    pub fn done(&self) -> bool {
        self.factor >= 1.0
    }
}

/// Weight resolution of a shifted group: base weights are multiplied by this before the
/// factors apply, so a share of 1/16 of a weight-1 member is still a whole weight. The
/// data plane task reduces the result to the backend's limits (optimally, `wcmp`).
pub const RESOLUTION: u32 = 16;

/// The weights to install for `base` weights with share `factors` (same order; 1.0 = the
/// member's full weight). Unshifted groups (every factor 1) keep their weights as they
/// are; otherwise every weight is `round(w * RESOLUTION * f)`, at least 1, so the
/// unshifted members keep their exact ratio.
pub fn weights(base: &[u32], factors: &[f64]) -> Vec<u32> {
    if factors.iter().all(|f| *f >= 1.0) {
        return base.to_vec();
    }
    base.iter()
        .enumerate()
        .map(|(i, &w)| {
            let f = factors.get(i).copied().unwrap_or(1.0).clamp(0.0, 1.0);
            let x = (f64::from(w) * f64::from(RESOLUTION) * f).round();
            (x.min(f64::from(u32::MAX)) as u32).max(1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    /// By hand: f' = f * (1 - 0.5 * m / 255), never below 1/16.
    #[test]
    fn the_cut_is_proportional_to_the_metric() {
        let c = ShiftConfig::default();
        assert_eq!(c.cut(1.0, 255), 0.5);
        assert_eq!(c.cut(1.0, 0), 1.0);
        // 1 - 0.5 * 51/255 = 0.9
        assert!((c.cut(1.0, 51) - 0.9).abs() < 1e-12);
        // 0.8 * (1 - 0.5 * 102/255) = 0.8 * 0.8 = 0.64
        assert!((c.cut(0.8, 102) - 0.64).abs() < 1e-12);
        // 0.1 * 0.5 = 0.05 < 1/16
        assert_eq!(c.cut(0.1, 255), 0.0625);
        let all = ShiftConfig {
            max_cut: 1.0,
            ..ShiftConfig::default()
        };
        assert_eq!(all.cut(1.0, 255), 0.0625);
    }

    #[test]
    fn refreshes_cut_only_after_damping_and_while_the_queue_does_not_drain() {
        let c = ShiftConfig::default();
        let t0 = Instant::now();
        let mut s = Share::new(t0);
        assert!(s.congested(&c, 255, t0)); // 1 -> 0.5
        assert_eq!(s.factor, 0.5);
        assert!(!s.congested(&c, 255, ms(t0, 100))); // damped (200 ms)
        assert!(s.congested(&c, 255, ms(t0, 250))); // 0.5 -> 0.25
        assert_eq!(s.factor, 0.25);
        assert!(!s.congested(&c, 128, ms(t0, 500))); // draining: 128 < 255, no cut
        assert_eq!(s.factor, 0.25);
        // 0.25 * (1 - 0.5 * 200/255) but only when the Metric is back up to the last cut's
        assert!(!s.congested(&c, 200, ms(t0, 750)));
        assert!(s.congested(&c, 255, ms(t0, 1000))); // 0.125
        assert!(s.congested(&c, 255, ms(t0, 1250))); // 0.0625 floor
        assert!(!s.congested(&c, 255, ms(t0, 1500))); // at the floor: nothing to change
        assert_eq!(s.factor, 0.0625);
        assert_eq!(s.changes, 4);
    }

    /// Type 2 gives the share back in steps of 1/8 every 250 ms, up to 0.9 x the share
    /// that was congested while the memory (5 s after the last Type 1) lasts, then to 1.
    #[test]
    fn recovery_is_gradual_and_stops_below_the_congested_share() {
        let c = ShiftConfig::default();
        let t0 = Instant::now();
        let mut s = Share::new(t0);
        s.congested(&c, 255, t0); // 0.5, ceiling 0.9
        assert!(!s.tick(&c, ms(t0, 300))); // no Type 2 yet
        s.cleared(ms(t0, 300));
        assert!(!s.tick(&c, ms(t0, 400))); // first step after 250 ms
        let mut seen = vec![];
        for k in 1..=6 {
            if s.tick(&c, ms(t0, 300 + 250 * k)) {
                seen.push(s.factor);
            }
        }
        // 0.625, 0.75, 0.875, 0.9 (ceiling), then nothing until the memory ends
        assert_eq!(seen, vec![0.625, 0.75, 0.875, 0.9]);
        assert!(s.tick(&c, ms(t0, 5000))); // memory over: 1.0
        assert!(s.done());
        assert_eq!(s.changes, 6);
    }

    /// A link that carries 30 % of the member's share: each time the share is above 0.3
    /// the queue fills and a Type 1 (Metric 255) comes, refreshed every 250 ms; below it,
    /// it drains and a Type 2 comes. Over 10 s the share settles under 0.3 after 4 cuts
    /// and 3 steps (by hand: 1 -> 0.5 -> 0.25, back 0.375, cut 0.1875, back 0.3125, cut
    /// 0.15625, back to the ceiling 0.28125 at 1.05 s), then stays until the memory of the
    /// last Type 1 ends (5.79 s) and probes once more: a bounded number of changes, and
    /// the share is over what the link carries only briefly.
    #[test]
    fn a_link_that_carries_part_of_the_share_settles() {
        let c = ShiftConfig::default();
        let t0 = Instant::now();
        let mut s = Share::new(t0);
        let capacity = 0.3;
        let mut congested = false;
        let mut over_steps = 0;
        let mut settled_at = None;
        for step in 0..1000u64 {
            let now = ms(t0, step * 10);
            let over = s.factor > capacity;
            if over {
                over_steps += 1;
            }
            if over && (!congested || step % 25 == 0) {
                s.congested(&c, 255, now);
                congested = true;
            } else if !over && congested {
                s.cleared(now);
                congested = false;
            }
            s.tick(&c, now);
            if s.changes == 7 && settled_at.is_none() {
                settled_at = Some((step * 10, s.factor));
            }
        }
        assert_eq!(settled_at, Some((1050, 0.28125)));
        assert!(s.changes <= 14, "{} changes", s.changes);
        assert!(
            over_steps <= 100,
            "over capacity {over_steps} of 1000 steps"
        );
        assert!(s.factor <= capacity && s.factor >= 0.2, "{}", s.factor);
    }

    #[test]
    fn weights_keep_the_others_ratio() {
        // unshifted: as given
        assert_eq!(weights(&[3, 3, 4, 4], &[1.0; 4]), vec![3, 3, 4, 4]);
        // member 2 at half: 3*16 : 3*16 : 4*16/2 : 4*16
        assert_eq!(
            weights(&[3, 3, 4, 4], &[1.0, 1.0, 0.5, 1.0]),
            vec![48, 48, 32, 64]
        );
        // 1/16 of weight 1 is still 1; 0.3 of 1 -> round(4.8) = 5
        assert_eq!(weights(&[1, 1], &[0.0625, 1.0]), vec![1, 16]);
        assert_eq!(
            weights(&[1, 1, 1, 1], &[0.3, 1.0, 1.0, 1.0]),
            vec![5, 16, 16, 16]
        );
    }

    #[test]
    fn config_ranges_are_checked() {
        assert!(ShiftConfig::default().check().is_ok());
        let bad = ShiftConfig {
            min_share: 0.0,
            ..ShiftConfig::default()
        };
        assert_eq!(bad.check().unwrap_err().0, "min_share");
        let bad = ShiftConfig {
            hysteresis: 1.0,
            ..ShiftConfig::default()
        };
        assert_eq!(bad.check().unwrap_err().0, "hysteresis");
    }
}
