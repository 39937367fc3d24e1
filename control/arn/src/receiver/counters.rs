//! What the receiver counts, and why it rejects a datagram.

use serde::Serialize;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

/// Receiver counters (shared with the agent's management API and metrics).
#[derive(Debug, Default)]
pub struct Counters {
    /// Datagrams read from the socket.
    pub received: AtomicU64,
    /// Passed every check and decoded.
    pub accepted: AtomicU64,
    /// Source address is no configured ARN neighbor.
    pub dropped_not_neighbor: AtomicU64,
    /// From a neighbor's address but over another interface.
    pub dropped_wrong_interface: AtomicU64,
    /// TTL / hop limit was not 255 (or unknown).
    pub dropped_ttl: AtomicU64,
    /// Over the sender's rate limit.
    pub dropped_rate: AtomicU64,
    /// Did not decode.
    pub malformed: AtomicU64,
    pub by_type: [AtomicU64; 4],
    /// Members switched off / back on.
    pub members_removed: AtomicU64,
    pub members_restored: AtomicU64,
    /// Removals that ended by timeout (no Type 2/4 arrived in `hold_ms`).
    pub expired: AtomicU64,
    /// Removals refused because the member was the last active one of its group.
    pub refused_last_member: AtomicU64,
    /// Removals the data plane failed to carry out for another reason (logged).
    pub backend_errors: AtomicU64,
    /// Removals dropped because a re-installed group no longer has that path.
    pub stale_dropped: AtomicU64,
    /// ARNs that matched no member.
    pub unmatched: AtomicU64,
    /// Per-flow mode: flows steered off a port / released (Type 2/4 or timeout).
    pub flows_steered: AtomicU64,
    pub flows_released: AtomicU64,
    /// ARNs passed on upstream because no alternative was left here.
    pub propagated: AtomicU64,
    /// Congestion shift: share cuts and recovery steps written to the data plane.
    pub shares_cut: AtomicU64,
    pub shares_restored: AtomicU64,
    /// Multicast ARNs to a group this node does not listen to.
    pub dropped_other_group: AtomicU64,
}

/// A plain copy of [`Counters`] for display and JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CountersSnapshot {
    pub received: u64,
    pub accepted: u64,
    pub dropped_not_neighbor: u64,
    pub dropped_wrong_interface: u64,
    pub dropped_ttl: u64,
    pub dropped_rate: u64,
    pub malformed: u64,
    pub type1: u64,
    pub type2: u64,
    pub type3: u64,
    pub type4: u64,
    pub members_removed: u64,
    pub members_restored: u64,
    pub expired: u64,
    pub refused_last_member: u64,
    pub backend_errors: u64,
    pub stale_dropped: u64,
    pub unmatched: u64,
    pub flows_steered: u64,
    pub flows_released: u64,
    pub propagated: u64,
    pub shares_cut: u64,
    pub shares_restored: u64,
    pub dropped_other_group: u64,
}

impl Counters {
    pub fn snapshot(&self) -> CountersSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CountersSnapshot {
            received: g(&self.received),
            accepted: g(&self.accepted),
            dropped_not_neighbor: g(&self.dropped_not_neighbor),
            dropped_wrong_interface: g(&self.dropped_wrong_interface),
            dropped_ttl: g(&self.dropped_ttl),
            dropped_rate: g(&self.dropped_rate),
            malformed: g(&self.malformed),
            type1: g(&self.by_type[0]),
            type2: g(&self.by_type[1]),
            type3: g(&self.by_type[2]),
            type4: g(&self.by_type[3]),
            members_removed: g(&self.members_removed),
            members_restored: g(&self.members_restored),
            expired: g(&self.expired),
            refused_last_member: g(&self.refused_last_member),
            backend_errors: g(&self.backend_errors),
            stale_dropped: g(&self.stale_dropped),
            unmatched: g(&self.unmatched),
            flows_steered: g(&self.flows_steered),
            flows_released: g(&self.flows_released),
            propagated: g(&self.propagated),
            shares_cut: g(&self.shares_cut),
            shares_restored: g(&self.shares_restored),
            dropped_other_group: g(&self.dropped_other_group),
        }
    }
}

pub(super) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Why a datagram was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    NotNeighbor,
    /// Sent to a multicast group this node is not configured for.
    OtherGroup(IpAddr),
    WrongInterface {
        ifindex: Option<u32>,
    },
    Ttl(Option<u8>),
    RateLimited,
    Malformed(crate::codec::DecodeError),
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::NotNeighbor => f.write_str("not a configured ARN neighbor"),
            Rejection::OtherGroup(g) => write!(f, "sent to multicast group {g}, not ours"),
            Rejection::WrongInterface { ifindex } => {
                write!(f, "arrived on the wrong interface (ifindex {ifindex:?})")
            }
            Rejection::Ttl(t) => write!(f, "TTL/hop limit {t:?}, expected 255"),
            Rejection::RateLimited => f.write_str("over the rate limit"),
            Rejection::Malformed(e) => write!(f, "malformed: {e}"),
        }
    }
}
