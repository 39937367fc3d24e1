//! The load every link direction should carry — the ideal weighted split: traffic
//! demands pushed through the converged groups (the
//! `fare weights` computation), each member taking weight / sum of the traffic, hop by
//! hop until the prefix's origin. The result is the load each link direction should
//! carry, to compare with what the interface counters measured.

use fare_model::sim::RouteGroup;
use ipnet::IpNet;
use std::collections::HashMap;

/// `mbit` of traffic from node `from` to `prefix`.
#[derive(Clone, Debug, PartialEq)]
pub struct Demand {
    pub from: String,
    pub prefix: IpNet,
    pub mbit: f64,
}

/// (link name, sending node) -> Mbit/s.
pub type LinkLoads = HashMap<(String, String), f64>;

/// Pushes every demand through the groups. Traffic a node has no group for (and does not
/// originate) is counted as unroutable.
pub fn split(
    groups: &[RouteGroup],
    origins: &HashMap<IpNet, Vec<String>>,
    demands: &[Demand],
) -> (LinkLoads, f64) {
    let index: HashMap<(&str, IpNet), &RouteGroup> = groups
        .iter()
        .map(|g| ((g.node.as_str(), g.prefix), g))
        .collect();
    let mut loads = LinkLoads::new();
    let mut unroutable = 0.0;
    for d in demands {
        push(
            &index,
            origins,
            &d.from,
            d.prefix,
            d.mbit,
            0,
            &mut loads,
            &mut unroutable,
        );
    }
    (loads, unroutable)
}

#[allow(clippy::too_many_arguments)]
fn push(
    index: &HashMap<(&str, IpNet), &RouteGroup>,
    origins: &HashMap<IpNet, Vec<String>>,
    node: &str,
    prefix: IpNet,
    mbit: f64,
    depth: usize,
    loads: &mut LinkLoads,
    unroutable: &mut f64,
) {
    if origins
        .get(&prefix)
        .is_some_and(|o| o.iter().any(|n| n == node))
    {
        return;
    }
    // Valley-free paths are at most 2 x stages long; deeper means a loop.
    let Some(g) = index.get(&(node, prefix)).filter(|_| depth < 16) else {
        *unroutable += mbit;
        return;
    };
    let total: u32 = g.members.iter().map(|m| m.weight).sum();
    if total == 0 {
        *unroutable += mbit;
        return;
    }
    for m in &g.members {
        let share = mbit * f64::from(m.weight) / f64::from(total);
        *loads
            .entry((m.link.clone(), node.to_string()))
            .or_insert(0.0) += share;
        push(
            index,
            origins,
            &m.via,
            prefix,
            share,
            depth + 1,
            loads,
            unroutable,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fare_model::sim::Member;

    fn member(via: &str, link: &str, weight: u32) -> Member {
        Member {
            via: via.into(),
            link: link.into(),
            bandwidth_gbps: 0.0,
            weight,
        }
    }

    #[test]
    fn splits_by_weight_hop_by_hop() {
        let p: IpNet = "192.0.2.0/24".parse().unwrap();
        let groups = vec![
            RouteGroup {
                node: "L1".into(),
                prefix: p,
                members: vec![member("S1", "S1-L1", 1), member("S2", "S2-L1", 3)],
                delta: 1.0,
                ecmp: false,
                frr: false,
            },
            RouteGroup {
                node: "S1".into(),
                prefix: p,
                members: vec![member("L2", "S1-L2", 1)],
                delta: 1.0,
                ecmp: false,
                frr: false,
            },
            RouteGroup {
                node: "S2".into(),
                prefix: p,
                members: vec![member("L2", "S2-L2", 1)],
                delta: 1.0,
                ecmp: false,
                frr: false,
            },
        ];
        let origins = HashMap::from([(p, vec!["L2".to_string()])]);
        let (loads, lost) = split(
            &groups,
            &origins,
            &[Demand {
                from: "L1".into(),
                prefix: p,
                mbit: 40.0,
            }],
        );
        assert_eq!(lost, 0.0);
        assert_eq!(loads[&("S1-L1".to_string(), "L1".to_string())], 10.0);
        assert_eq!(loads[&("S2-L2".to_string(), "S2".to_string())], 30.0);
    }
}
