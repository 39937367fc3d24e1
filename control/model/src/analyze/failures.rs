//! The failures `fare analyze` sweeps: every link (all parallel links between two nodes
//! together, as `fare weights --fail A-B` takes them down), every node, every plane of a
//! multi-plane fabric, and pairs of those sampled with a seed.

use crate::rng::Rng;
use crate::topology::{NodeId, Role, Topology};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

/// What fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Link,
    Node,
    Plane,
    /// Two single failures at once (N-2).
    Pair,
}

/// One failure: the node pairs whose links all go down, and the nodes that are down
/// themselves (their own groups are not counted as changes).
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub kind: Kind,
    pub name: String,
    /// Unordered node pairs (smaller id first), sorted, without duplicates.
    pub pairs: Vec<(NodeId, NodeId)>,
    /// Failed nodes, sorted.
    pub nodes: Vec<NodeId>,
}

impl Failure {
    /// The `fare weights --fail` arguments that take the same links down.
    pub fn fail_args(&self, topo: &Topology) -> Vec<String> {
        self.pairs
            .iter()
            .map(|&(a, b)| format!("{}-{}", topo.nodes[a].name, topo.nodes[b].name))
            .collect()
    }

    /// `topo` with this failure's links removed (node ids unchanged).
    pub fn apply(&self, topo: &Topology) -> Topology {
        let down: FxHashSet<(NodeId, NodeId)> = self.pairs.iter().copied().collect();
        let mut t = topo.clone();
        t.links
            .retain(|l| !down.contains(&(l.a.min(l.b), l.a.max(l.b))));
        t
    }

    fn merge(a: &Failure, b: &Failure) -> Failure {
        let mut pairs: Vec<_> = a.pairs.iter().chain(&b.pairs).copied().collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut nodes: Vec<_> = a.nodes.iter().chain(&b.nodes).copied().collect();
        nodes.sort_unstable();
        nodes.dedup();
        Failure {
            kind: Kind::Pair,
            name: format!("{} + {}", a.name, b.name),
            pairs,
            nodes,
        }
    }
}

/// Every single failure: links (by node pair, in file order), then nodes with links (in
/// file order), then planes (when nodes name at least two planes).
pub fn singles(topo: &Topology) -> Vec<Failure> {
    let mut out = Vec::new();
    let mut seen = FxHashSet::default();
    let mut incident: FxHashMap<NodeId, Vec<(NodeId, NodeId)>> = FxHashMap::default();
    for l in &topo.links {
        let p = (l.a.min(l.b), l.a.max(l.b));
        if seen.insert(p) {
            out.push(Failure {
                kind: Kind::Link,
                name: format!("{}-{}", topo.nodes[l.a].name, topo.nodes[l.b].name),
                pairs: vec![p],
                nodes: Vec::new(),
            });
            incident.entry(p.0).or_default().push(p);
            incident.entry(p.1).or_default().push(p);
        }
    }
    for (id, n) in topo.nodes.iter().enumerate() {
        if let Some(pairs) = incident.get(&id) {
            let mut pairs = pairs.clone();
            pairs.sort_unstable();
            out.push(Failure {
                kind: Kind::Node,
                name: n.name.clone(),
                pairs,
                nodes: vec![id],
            });
        }
    }
    out.extend(planes(topo, &incident));
    out
}

/// One failure per plane: every switch of the plane down (RNICs stay, with their other
/// planes' links).
fn planes(topo: &Topology, incident: &FxHashMap<NodeId, Vec<(NodeId, NodeId)>>) -> Vec<Failure> {
    let mut planes: Vec<u32> = topo
        .nodes
        .iter()
        .filter(|n| n.role != Role::Rnic && n.role != Role::Host)
        .filter_map(|n| n.plane)
        .collect();
    planes.sort_unstable();
    planes.dedup();
    if planes.len() < 2 {
        return Vec::new();
    }
    planes
        .into_iter()
        .map(|p| {
            let nodes: Vec<NodeId> = (0..topo.nodes.len())
                .filter(|&i| topo.nodes[i].plane == Some(p) && !topo.nodes[i].role.is_stub())
                .collect();
            let mut pairs: Vec<_> = nodes
                .iter()
                .flat_map(|n| incident.get(n).into_iter().flatten().copied())
                .collect();
            pairs.sort_unstable();
            pairs.dedup();
            Failure {
                kind: Kind::Plane,
                name: format!("plane {p}"),
                pairs,
                nodes,
            }
        })
        .collect()
}

/// `count` distinct pairs of link and node failures drawn with `seed` (fewer when the
/// fabric has fewer pairs).
pub fn sample_pairs(singles: &[Failure], count: usize, seed: u64) -> Vec<Failure> {
    let pool: Vec<&Failure> = singles
        .iter()
        .filter(|f| matches!(f.kind, Kind::Link | Kind::Node))
        .collect();
    let n = pool.len() as u64;
    let possible = n * n.saturating_sub(1) / 2;
    let want = (count as u64).min(possible);
    let mut rng = Rng::new(seed);
    let mut chosen = FxHashSet::default();
    let mut out = Vec::new();
    // Bounded: at most 64 draws per wanted pair (collisions only when nearly all wanted).
    for _ in 0..want.saturating_mul(64) {
        if out.len() as u64 == want {
            break;
        }
        let (i, j) = (rng.below(n), rng.below(n));
        if i == j || !chosen.insert((i.min(j), i.max(j))) {
            continue;
        }
        let (a, b) = (pool[i.min(j) as usize], pool[i.max(j) as usize]);
        out.push(Failure::merge(a, b));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::gen;

    #[test]
    fn clos3_has_a_failure_per_link_pair_and_node() {
        // 4 leaves x 2 spines: 8 links, 6 nodes, no planes.
        let t = gen::clos3(4, 2, 100.0, 1);
        let s = singles(&t);
        assert_eq!(s.iter().filter(|f| f.kind == Kind::Link).count(), 8);
        assert_eq!(s.iter().filter(|f| f.kind == Kind::Node).count(), 6);
        let spine = s.iter().find(|f| f.name == "S1").unwrap();
        assert_eq!(spine.pairs.len(), 4);
        let pairs = sample_pairs(&s, 5, 7);
        assert_eq!(pairs.len(), 5);
        assert_eq!(pairs, sample_pairs(&s, 5, 7), "same seed, same sample");
        // 14 singles: 91 pairs at most, each drawn once and of two different singles.
        let all = sample_pairs(&s, 1000, 1);
        assert_eq!(all.len(), 91);
        let distinct: FxHashSet<&str> = all.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(distinct.len(), 91);
        for f in &all {
            let (a, b) = f.name.split_once(" + ").unwrap();
            assert_ne!(a, b);
        }
    }

    #[test]
    fn multiplane_fabrics_have_plane_failures() {
        let t = gen::multiplane(&gen::MultiPlane {
            gpus: 16,
            planes: 2,
            rnics_per_leaf: 4,
            spines_per_plane: 2,
            ..Default::default()
        });
        let planes: Vec<_> = singles(&t)
            .into_iter()
            .filter(|f| f.kind == Kind::Plane)
            .collect();
        assert_eq!(planes.len(), 2);
        // Plane 1: 4 leaves x 2 spines + 16 RNIC links.
        assert_eq!(planes[0].pairs.len(), 8 + 16);
        assert!(planes[0].nodes.iter().all(|&n| !t.nodes[n].role.is_stub()));
    }
}
