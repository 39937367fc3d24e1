//! What the ARN task shares with the rest of the agent (`fare show arn`, metrics, a
//! reload's new monitor thresholds): filled by `arn_task`, held in the agent's state.

use fare_arn::receiver::{Counters, RemovedMember};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// What `fare show arn` reads: receiver counters, members held out, ARNs sent.
#[derive(Clone, Debug)]
pub struct ArnStatus {
    pub udp_port: u16,
    pub counters: Arc<Counters>,
    pub removed: Arc<RwLock<Vec<RemovedMember>>>,
    pub sent: Arc<SentCounters>,
    /// Watched interfaces (empty without `arn.monitor`), each with its congestion signal
    /// once the monitor knows it (`eth2: qdisc backlog + BQL inflight`).
    pub monitored: Arc<RwLock<Vec<String>>>,
    /// Where a reload sends new thresholds of the watched interfaces (with `arn.monitor`).
    pub thresholds: Option<std::sync::mpsc::Sender<Vec<fare_arn::config::MonitoredInterface>>>,
}

impl ArnStatus {
    pub fn monitored(&self) -> Vec<String> {
        self.monitored
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn removed(&self) -> Vec<RemovedMember> {
        self.removed
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// ARNs this node sent, by Type (refreshes included).
#[derive(Debug, Default)]
pub struct SentCounters {
    pub by_type: [AtomicU64; 4],
}

impl SentCounters {
    pub fn get(&self, kind: u8) -> u64 {
        usize::from(kind)
            .checked_sub(1)
            .and_then(|i| self.by_type.get(i))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
}
