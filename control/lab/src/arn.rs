//! The `arn:` block of the agent configurations `fare lab up` writes (on unless
//! `--no-arn`): every node watches the tbf queue of each of its fabric ports and accepts
//! ARN from every link neighbor, so `fare lab congest A-B` makes A send Type 1 to its other
//! neighbors, which move traffic off their members toward A (and back on Type 2).
//!
//! - Monitor: one entry per fabric port, Path ID = router ID of the node at the far end;
//!   thresholds in bytes below the smallest tbf limit (`shaping::TBF_MIN_LIMIT_BYTES`), so they
//!   are crossed at any rate, also after `congest` shrinks the shaper. Type 2 waits until
//!   the queue stayed drained for `clear_ms`: traffic that left a congested link on Type 1
//!   drains its queue at once, and without the wait would come straight back.
//! - Accepted senders: the far end of every fabric port (needed with static routing,
//!   where there are no BGP neighbors).
//! - Paths (Path ID -> prefixes): F -> every prefix some node forwards over a link to F in
//!   the converged groups (the `fare weights` computation). A receiver then only touches
//!   groups for destinations behind the congested link.

use super::plan::{NodePlan, Plan};
use super::shaping::TBF_MIN_LIMIT_BYTES;
use fare_arn::config::{ArnConfig, ArnNeighbor, MonitorConfig, MonitoredInterface, PathPrefixes};
use fare_model::sim::RouteGroup;
use std::collections::{BTreeMap, BTreeSet};

pub use super::plan::LabArn;

/// Backlog at or above which a port is congested: half the smallest tbf queue.
pub const HIGH_BYTES: u64 = TBF_MIN_LIMIT_BYTES / 2;
/// Backlog at or below which congestion is over.
pub const LOW_BYTES: u64 = TBF_MIN_LIMIT_BYTES / 8;

/// Path ID (router ID, dotted) -> prefixes forwarded over some link into that node.
pub fn paths(plan: &Plan, groups: &[RouteGroup]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for g in groups {
        let Some(node) = plan.node(&g.node) else {
            continue;
        };
        for m in &g.members {
            let far = node
                .ports
                .iter()
                .find(|p| p.link == m.link)
                .and_then(|p| plan.node(&p.peer));
            if let Some(far) = far {
                out.entry(far.router_id.to_string())
                    .or_default()
                    .insert(g.prefix.to_string());
            }
        }
    }
    out
}

/// The `arn:` block of one node.
pub fn block(
    plan: &Plan,
    node: &NodePlan,
    arn: &LabArn,
    paths: &BTreeMap<String, BTreeSet<String>>,
) -> ArnConfig {
    let neighbors = node
        .ports
        .iter()
        .map(|p| ArnNeighbor {
            address: p.peer_addr.into(),
            interface: p.interface.clone(),
        })
        .collect();
    let interfaces: Vec<MonitoredInterface> = node
        .ports
        .iter()
        .filter_map(|p| {
            let far = plan.node(&p.peer)?;
            Some(MonitoredInterface {
                interface: p.interface.clone(),
                path_id: far.router_id,
                high_bytes: HIGH_BYTES as u32,
                low_bytes: LOW_BYTES as u32,
                limit_bytes: Some(TBF_MIN_LIMIT_BYTES as u32),
                clear_ms: arn.clear_ms,
                notify: Vec::new(),
            })
        })
        .collect();
    // Path IDs are router IDs, prefixes those the plan's groups route: both parse.
    let paths = paths
        .iter()
        .filter_map(|(id, prefixes)| {
            Some(PathPrefixes {
                path_id: id.parse().ok()?,
                prefixes: prefixes.iter().filter_map(|p| p.parse().ok()).collect(),
            })
        })
        .collect();
    ArnConfig {
        hold_ms: arn.hold_ms,
        refresh_ms: (arn.hold_ms / 4).max(1),
        neighbors,
        paths,
        monitor: (!interfaces.is_empty())
            .then(|| MonitorConfig::new(arn.interval_us.max(100), interfaces)),
        congestion: fare_arn::shift::ShiftConfig {
            mode: arn.congestion,
            ..fare_arn::shift::ShiftConfig::default()
        },
        ..ArnConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{plan, Options};
    use std::path::Path;

    #[test]
    fn spine_leaf_blocks_name_the_far_ends_and_the_prefixes_behind_them() {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/arn-spine-leaf.yaml"),
        )
        .unwrap();
        let topo = fare_model::topology::parse(Path::new("arn-spine-leaf.yaml"), &text).unwrap();
        let p = plan(&topo, "t", &Options::default()).unwrap();
        let groups = crate::model_check::ideal_groups(
            &topo,
            fare_model::bandwidth::Mode::Draft,
            Default::default(),
            None,
            &[],
        );
        let paths = paths(&p, &groups);
        // leaf1 and the spines reach leaf2's prefix over links into leaf2 (10.0.0.2) ...
        assert!(paths["10.0.0.2"].contains("198.51.100.0/24"));
        // ... and leaf1 reaches it over links into the spines.
        assert!(paths["10.0.1.1"].contains("198.51.100.0/24"));
        let spine1 = p.node("spine1").unwrap();
        let b = block(&p, spine1, &LabArn::default(), &paths);
        // What the agent reads back from the file.
        let yaml = serde_norway::to_string(&b).unwrap();
        let config: ArnConfig = serde_norway::from_str(&yaml).unwrap();
        config.check().unwrap();
        let m = config.monitor.unwrap();
        assert_eq!(m.interfaces.len(), 2);
        assert_eq!(m.interfaces[1].path_id.to_string(), "10.0.0.2");
        assert!(u64::from(m.interfaces[0].high_bytes) < TBF_MIN_LIMIT_BYTES);
        assert_eq!(config.neighbors.len(), 2);
    }
}
