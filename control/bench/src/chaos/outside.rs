//! What the slices that lost packets outside every fault window had near them: the flows
//! whose sequence numbers jumped there (source and destination nodes), the nearest fault
//! event (start, repair, recovery) with its signed distance, and any generator that fell
//! behind its pace close by (a stalled sender bursts its backlog).

use super::inflict::Done;
use fare_lab::traffic::{FlowGap, Stall};
use std::collections::{BTreeMap, BTreeSet};

/// One slice that lost packets outside the windows, explained.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    /// Slice start, unix s.
    pub slice_s: f64,
    pub lost: u64,
    /// The runs of lost packets the slice overlaps, per source->destination node pair:
    /// "SRC->DST: F flows, N packets", most packets first.
    pub flows: Vec<String>,
    /// The nearest fault event, e.g. "recovered from flap L2-S1".
    pub nearest: String,
    /// Slice start minus that event's time, ms (positive: the slice came after it).
    pub distance_ms: i64,
    /// "NODE n packets at +ms" for generator stalls within [`NEAR_MS`] of the slice.
    pub stalls: Vec<String>,
}

/// How far from a slice a generator stall is reported.
const NEAR_MS: i64 = 2_000;

pub fn explain(
    outside: &[(f64, u64)],
    slice_ms: u64,
    faults: &[Done],
    gaps: &[FlowGap],
    stalls: &[Stall],
) -> Vec<Row> {
    outside
        .iter()
        .map(|&(slice_s, lost)| {
            let from_ms = (slice_s * 1000.0).round() as u64;
            let to_ms = from_ms + slice_ms;
            let near = gaps
                .iter()
                .filter(|g| g.gap.after_ms < to_ms && g.gap.before_ms > from_ms);
            let flows = by_pair(near);
            let (nearest, distance_ms) = nearest_event(slice_s, faults);
            let stalls = stalls
                .iter()
                .filter(|s| (s.at_ms as i64 - from_ms as i64).abs() <= NEAR_MS)
                .map(|s| {
                    format!(
                        "{} {} packets at {:+} ms",
                        s.node,
                        s.packets,
                        s.at_ms as i64 - from_ms as i64
                    )
                })
                .collect();
            Row {
                slice_s,
                lost,
                flows,
                nearest,
                distance_ms,
                stalls,
            }
        })
        .collect()
}

/// Runs of lost packets summed per node pair: "SRC->DST: F flows, N packets".
fn by_pair<'a>(gaps: impl Iterator<Item = &'a FlowGap>) -> Vec<String> {
    let mut pairs: BTreeMap<(&str, &str), (BTreeSet<&str>, u64)> = BTreeMap::new();
    for g in gaps {
        let e = pairs.entry((&g.from, &g.to)).or_default();
        e.0.insert(&g.gap.flow);
        e.1 += g.gap.lost;
    }
    let mut v: Vec<_> = pairs.into_iter().collect();
    v.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
    v.into_iter()
        .map(|((from, to), (flows, n))| format!("{from}->{to}: {} flows, {n} packets", flows.len()))
        .collect()
}

/// The fault event closest in time to `t` (unix s) and `t` minus it, in ms.
fn nearest_event(t: f64, faults: &[Done]) -> (String, i64) {
    let events = faults.iter().flat_map(|f| {
        [
            (format!("start of {}", f.fault), f.start),
            (format!("repair of {}", f.fault), f.repaired),
            (format!("recovered from {}", f.fault), f.end),
        ]
    });
    events
        .min_by(|a, b| (t - a.1).abs().total_cmp(&(t - b.1).abs()))
        .map_or(("no fault".into(), 0), |(name, at)| {
            (name, ((t - at) * 1000.0).round() as i64)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fare_lab::gaps::Gap;

    #[test]
    fn a_slice_names_its_flows_the_nearest_event_and_stalls_close_by() {
        let done = |fault: &str, start: f64, repaired: f64, end: f64| Done {
            fault: fault.into(),
            kind: "link flap",
            start,
            repaired,
            end,
            recovery_s: Some(end - repaired),
            error: None,
        };
        let faults = [
            done("flap L1-S1", 100.0, 101.0, 105.0),
            done("flap L2-S1", 200.0, 201.0, 209.0),
        ];
        let gap = |from: &str, after_ms, before_ms| FlowGap {
            from: from.into(),
            to: "L8".into(),
            gap: Gap {
                flow: "10.0.1.2:4000".into(),
                lost: 2,
                after_ms,
                before_ms,
            },
        };
        // Slice 112.3 s: 7.3 s after L1-S1's recovery, 87.7 s before L2-S1's start.
        let gaps = [
            gap("L1", 112_290, 112_330), // overlaps
            gap("L2", 112_100, 112_299), // ends before the slice
            gap("L3", 112_400, 112_500), // starts after it
        ];
        let stalls = [
            Stall {
                node: "L4".into(),
                at_ms: 112_000,
                packets: 40,
            },
            Stall {
                node: "L5".into(),
                at_ms: 115_000,
                packets: 40,
            },
        ];
        let rows = explain(&[(112.3, 2)], 100, &faults, &gaps, &stalls);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.lost, 2);
        assert_eq!(r.flows, vec!["L1->L8: 1 flows, 2 packets"]);
        assert_eq!(r.nearest, "recovered from flap L1-S1");
        assert_eq!(r.distance_ms, 7_300);
        assert_eq!(r.stalls, vec!["L4 40 packets at -300 ms"]);
    }
}
