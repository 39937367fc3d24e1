//! Egress virtual queues of the XDP program (ebpf/fare-xdp/src/queue.rs), from user
//! space: configure a port's rate and limit, set the ARN thresholds, read the backlog,
//! and wait for the program's threshold-crossing events.
//!
//! Everything goes through the pinned maps (`<pin root>/<node>/maps/QUEUES` and
//! `QUEUE_EVENTS`), so the agent's data plane, its ARN monitor thread, `fare lab` and the
//! benchmarks each open their own handle on the same state.

use super::pins::PinDir;
use anyhow::Context;
use aya::maps::{HashMap, Map, MapData, RingBuf};
use fare_common::{EgressQueue, QueueEvent, QUEUES, QUEUE_EVENTS};
use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One port's queue in the agent configuration (`dataplane: {kind: xdp, queues: [...]}`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    pub interface: String,
    /// Drain rate: the link (or shaper) rate in Mbit/s.
    pub rate_mbps: f64,
    /// Tail drop above this backlog (0 = never drop, measure only).
    #[serde(default)]
    pub limit_bytes: u32,
}

impl QueueSpec {
    pub fn rate_bytes_per_s(&self) -> u64 {
        (self.rate_mbps * 1e6 / 8.0).round() as u64
    }
}

pub use fare_arn::monitor::monotonic_ns;

/// The QUEUES map of one node's program.
pub struct Queues {
    map: HashMap<MapData, u32, EgressQueue>,
}

/// The map `name` pinned under `<pin root>/<node>/maps` (the program must have been
/// loaded once), with its path for errors.
fn pinned(pin_root: &Path, node: &str, name: &str) -> anyhow::Result<(MapData, PathBuf)> {
    let path = PinDir::new(pin_root, node).maps().join(name);
    let data = MapData::from_pin(&path).with_context(|| format!("{}", path.display()))?;
    Ok((data, path))
}

impl Queues {
    /// Opens `<pin root>/<node>/maps/QUEUES` (the program must have been loaded once).
    pub fn open(pin_root: &Path, node: &str) -> anyhow::Result<Queues> {
        let (data, path) = pinned(pin_root, node, QUEUES)?;
        let map = HashMap::try_from(Map::HashMap(data))
            .with_context(|| format!("{}: not a hash map", path.display()))?;
        Ok(Queues::new(map))
    }

    /// The map as the loader handed it over (the data plane's own handle).
    pub fn new(map: HashMap<MapData, u32, EgressQueue>) -> Queues {
        Queues { map }
    }

    /// Ports that have a queue.
    pub fn ifindexes(&self) -> Vec<u32> {
        self.map.keys().filter_map(Result::ok).collect()
    }

    pub fn get(&self, ifindex: u32) -> Option<EgressQueue> {
        self.map.get(&ifindex, 0).ok()
    }

    /// Keeps a queue for `ifindex` at `rate_bytes_per_s` (0 removes it), tail-dropping
    /// above `limit_bytes`; thresholds already set stay, the state starts empty.
    pub fn configure(
        &mut self,
        ifindex: u32,
        rate_bytes_per_s: u64,
        limit_bytes: u32,
    ) -> anyhow::Result<()> {
        if rate_bytes_per_s == 0 {
            let _ = self.map.remove(&ifindex);
            return Ok(());
        }
        let old = self.get(ifindex).unwrap_or_default();
        let q = EgressQueue {
            rate_bytes_per_s,
            limit_bytes,
            high_bytes: old.high_bytes,
            low_bytes: old.low_bytes,
            ..EgressQueue::default()
        };
        self.map.insert(ifindex, q, 0).context("writing QUEUES")
    }

    /// A new drain rate for an existing queue (the backlog carries on).
    pub fn set_rate(&mut self, ifindex: u32, rate_bytes_per_s: u64) -> anyhow::Result<()> {
        let mut q = self
            .get(ifindex)
            .with_context(|| format!("no virtual queue on ifindex {ifindex}"))?;
        let now = monotonic_ns();
        q.backlog = q.backlog_at(now);
        q.last_ns = now;
        q.rate_bytes_per_s = rate_bytes_per_s.max(1);
        self.map.insert(ifindex, q, 0).context("writing QUEUES")
    }

    /// The ARN monitor's thresholds: the program reports upward crossings of `high`.
    pub fn set_thresholds(&mut self, ifindex: u32, high: u32, low: u32) -> anyhow::Result<bool> {
        let Some(mut q) = self.get(ifindex) else {
            return Ok(false);
        };
        q.high_bytes = high;
        q.low_bytes = low;
        self.map.insert(ifindex, q, 0).context("writing QUEUES")?;
        Ok(true)
    }

    /// The backlog now (drained since the last frame), if `ifindex` has a queue.
    pub fn backlog_now(&self, ifindex: u32) -> Option<u64> {
        let q = self.get(ifindex)?;
        (q.rate_bytes_per_s != 0).then(|| q.backlog_at(monotonic_ns()))
    }
}

/// The program's threshold crossings (QUEUE_EVENTS ring buffer).
pub struct QueueEvents {
    ring: RingBuf<MapData>,
}

impl QueueEvents {
    pub fn open(pin_root: &Path, node: &str) -> anyhow::Result<QueueEvents> {
        let (data, path) = pinned(pin_root, node, QUEUE_EVENTS)?;
        let ring = RingBuf::try_from(Map::RingBuf(data))
            .with_context(|| format!("{}: not a ring buffer", path.display()))?;
        Ok(QueueEvents { ring })
    }

    /// Waits up to `timeout` for events and returns those ready (possibly none).
    pub fn wait(&mut self, timeout: Duration) -> Vec<QueueEvent> {
        let mut out = self.drain();
        if !out.is_empty() {
            return out;
        }
        let mut fds = [libc::pollfd {
            fd: self.ring.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one valid pollfd and timespec; no signal mask.
        unsafe { libc::ppoll(fds.as_mut_ptr(), 1, &ts, std::ptr::null()) };
        out = self.drain();
        out
    }

    fn drain(&mut self) -> Vec<QueueEvent> {
        let mut out = Vec::new();
        while let Some(item) = self.ring.next() {
            if item.len() >= std::mem::size_of::<QueueEvent>() {
                // SAFETY: the program writes whole QueueEvents; read unaligned.
                out.push(unsafe { std::ptr::read_unaligned(item.as_ptr() as *const QueueEvent) });
            }
        }
        out
    }
}

/// Both handles the ARN monitor reads: the backlogs and the crossings.
pub struct VirtualQueues {
    queues: Queues,
    events: QueueEvents,
}

impl VirtualQueues {
    pub fn open(pin_root: &Path, node: &str) -> anyhow::Result<VirtualQueues> {
        Ok(VirtualQueues {
            queues: Queues::open(pin_root, node)?,
            events: QueueEvents::open(pin_root, node)?,
        })
    }
}

impl fare_arn::monitor::QueueSource for VirtualQueues {
    fn set_thresholds(&mut self, ifindex: u32, high_bytes: u32, low_bytes: u32) -> bool {
        self.queues
            .set_thresholds(ifindex, high_bytes, low_bytes)
            .unwrap_or(false)
    }

    fn backlog_now(&self, ifindex: u32) -> Option<u64> {
        self.queues.backlog_now(ifindex)
    }

    fn wait(&mut self, timeout: Duration) -> Vec<fare_arn::monitor::QueueCrossing> {
        self.events
            .wait(timeout)
            .into_iter()
            .map(|e| fare_arn::monitor::QueueCrossing {
                ifindex: e.ifindex,
                backlog: e.backlog,
                t_ns: e.t_ns,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backlog_drains_at_the_rate_and_never_below_zero() {
        let q = EgressQueue {
            rate_bytes_per_s: 1_000_000, // 1 byte per µs
            backlog: 5000,
            last_ns: 1_000_000_000,
            ..EgressQueue::default()
        };
        assert_eq!(q.backlog_at(1_000_000_000), 5000);
        assert_eq!(q.backlog_at(1_001_000_000), 4000);
        assert_eq!(q.backlog_at(1_010_000_000), 0);
        // A clock read before the last frame (another CPU) drains nothing.
        assert_eq!(q.backlog_at(999_000_000), 5000);
        // Hours later, no overflow even at 400 Gbit/s.
        let fast = EgressQueue {
            rate_bytes_per_s: 50_000_000_000,
            ..q
        };
        assert_eq!(fast.backlog_at(u64::MAX), 0);
    }

    #[test]
    fn spec_rate_is_mbit_to_bytes() {
        let spec: QueueSpec =
            serde_norway::from_str("{interface: eth1, rate_mbps: 100, limit_bytes: 625000}")
                .expect("spec");
        assert_eq!(spec.rate_bytes_per_s(), 12_500_000);
        assert!(serde_norway::from_str::<QueueSpec>("{interface: eth1, rate: 1}").is_err());
    }
}
