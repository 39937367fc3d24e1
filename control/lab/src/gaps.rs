//! Where a sink saw packets go missing: each stamped packet carries its flow's sequence
//! number, so a jump in a flow's sequence is a run of lost packets, placed in time
//! between the send stamps of the packets either side of it. A packet that arrives after
//! its gap was recorded (reordered, not lost) is taken back out of that gap.

use std::collections::HashMap;
use std::net::SocketAddr;

/// A run of packets one flow lost, as the sink saw it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Gap {
    /// The flow's source (address:port) as the sink saw it.
    pub flow: String,
    /// Packets missing from the run (after late arrivals were taken back).
    pub lost: u64,
    /// Send time (unix ms) of the flow's last packet received before the run.
    pub after_ms: u64,
    /// Send time (unix ms) of the flow's first packet received after the run.
    pub before_ms: u64,
}

/// Per-flow sequence tracking at a sink.
#[derive(Default)]
pub struct Tracker {
    /// Flow -> (next expected sequence, send stamp of the last packet in order).
    next: HashMap<SocketAddr, (u32, u64)>,
    /// Gaps with their missing sequence range [from, to).
    gaps: Vec<(SocketAddr, u32, u32, Gap)>,
}

impl Tracker {
    /// One stamped packet of `flow`. A flow numbers its packets from 0 (the sink starts
    /// before the senders), so a first packet above 0 opens a gap ending at it.
    pub fn packet(&mut self, flow: SocketAddr, seq: u32, ms: u64) {
        let (next, last_ms) = self.next.get(&flow).copied().unwrap_or((0, ms));
        if seq >= next {
            if seq > next {
                self.gaps.push((
                    flow,
                    next,
                    seq,
                    Gap {
                        flow: flow.to_string(),
                        lost: u64::from(seq - next),
                        after_ms: last_ms,
                        before_ms: ms,
                    },
                ));
            }
            self.next.insert(flow, (seq.wrapping_add(1), ms));
            return;
        }
        // Late: a packet of a run already counted as lost (search the newest first).
        if let Some(g) = self
            .gaps
            .iter_mut()
            .rev()
            .find(|(f, from, to, _)| *f == flow && (*from..*to).contains(&seq))
        {
            g.3.lost = g.3.lost.saturating_sub(1);
        }
    }

    /// The gaps that still miss packets, in the order they opened.
    pub fn finish(self) -> Vec<Gap> {
        self.gaps
            .into_iter()
            .map(|g| g.3)
            .filter(|g| g.lost > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_is_a_gap_between_its_neighbours_stamps_and_late_packets_fill_it() {
        let a: SocketAddr = "10.0.1.2:40000".parse().unwrap();
        let b: SocketAddr = "10.0.2.2:40001".parse().unwrap();
        let mut t = Tracker::default();
        t.packet(a, 0, 1000);
        t.packet(a, 1, 1004);
        t.packet(b, 0, 1001);
        // a: 2, 3, 4 lost; 5 arrives at stamp 1020; then 3 arrives late.
        t.packet(a, 5, 1020);
        t.packet(a, 3, 1012);
        t.packet(b, 1, 1005);
        // b: 2 lost, nothing late.
        t.packet(b, 3, 1013);
        let g = t.finish();
        assert_eq!(
            g,
            vec![
                Gap {
                    flow: a.to_string(),
                    lost: 2,
                    after_ms: 1004,
                    before_ms: 1020
                },
                Gap {
                    flow: b.to_string(),
                    lost: 1,
                    after_ms: 1005,
                    before_ms: 1013
                },
            ]
        );
        // A gap filled entirely by late packets is no gap.
        let mut t = Tracker::default();
        t.packet(a, 0, 1);
        t.packet(a, 2, 3);
        t.packet(a, 1, 2);
        assert!(t.finish().is_empty());
    }
}
