//! Group ids (slots of GROUPS) not referenced by any route. A freed id is reused only
//! after every other free id and never within a grace period, so a packet that read
//! the old route just before it was repointed still sees the complete old group.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Longer than an RCU grace period: XDP reads a group within one softirq.
pub const GRACE: Duration = Duration::from_millis(20);

#[derive(Debug)]
pub struct GroupIds {
    free: VecDeque<(u32, Instant)>,
}

impl GroupIds {
    /// All ids below `max` free except `used`.
    pub fn new(max: u32, used: impl Fn(u32) -> bool) -> GroupIds {
        let long_ago = Instant::now()
            .checked_sub(GRACE)
            .unwrap_or_else(Instant::now);
        GroupIds {
            free: (0..max)
                .filter(|&g| !used(g))
                .map(|g| (g, long_ago))
                .collect(),
        }
    }

    /// The id freed longest ago, and how long to wait before writing it.
    pub fn take(&mut self) -> Option<(u32, Duration)> {
        let (id, freed) = self.free.pop_front()?;
        Some((id, GRACE.saturating_sub(freed.elapsed())))
    }

    /// Whether `take_ready` would give an id now.
    pub fn has_ready(&self) -> bool {
        self.free
            .front()
            .is_some_and(|(_, freed)| freed.elapsed() >= GRACE)
    }

    /// The id freed longest ago if its grace period is over (no waiting: the caller
    /// has a fallback).
    pub fn take_ready(&mut self) -> Option<u32> {
        if !self.has_ready() {
            return None;
        }
        self.free.pop_front().map(|(id, _)| id)
    }

    pub fn release(&mut self, id: u32) {
        self.free.push_back((id, Instant::now()));
    }

    pub fn available(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_the_oldest_and_skips_used() {
        let mut ids = GroupIds::new(4, |g| g == 1);
        assert_eq!(ids.available(), 3);
        let (a, wait) = ids.take().unwrap();
        assert_eq!(a, 0);
        assert_eq!(wait, Duration::ZERO);
        ids.release(a);
        assert_eq!(ids.take().unwrap().0, 2);
        assert_eq!(ids.take().unwrap().0, 3);
        let (again, wait) = ids.take().unwrap();
        assert_eq!(again, 0);
        assert!(wait <= GRACE);
        assert!(ids.take().is_none());
    }
}
