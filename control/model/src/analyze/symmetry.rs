//! Twins: nodes with the same links (the same neighbors over the same number of links of
//! the same capacities) and the same attributes the model reads (role, plane, PoD,
//! prefixes, AS). Swapping two twins maps the fabric onto itself, so a link or node
//! failure and its image under such swaps have the same report up to renaming: `fare
//! analyze` computes one failure per class and renames it for the others.
//!
//! The classes come from the topology's structure (each node's adjacency), never from
//! how it was generated: a swap of twins is an automorphism by construction.

use super::failures::{Failure, Kind};
use crate::topology::{NodeId, Role, Topology};
use ipnet::IpNet;
use rustc_hash::FxHashMap;

/// Per node, its representative: the smallest node id among its twins.
pub struct Twins {
    rep: Vec<NodeId>,
}

/// What the model reads of a node besides its links. The AS matters only through
/// whether another node shares it, and which one.
type Attributes = (Role, Option<u32>, Option<u32>, Vec<IpNet>, Option<u32>);

impl Twins {
    pub fn new(topo: &Topology) -> Twins {
        let mut asn_count: FxHashMap<u32, u32> = FxHashMap::default();
        for asn in topo.nodes.iter().filter_map(|n| n.asn) {
            *asn_count.entry(asn).or_insert(0) += 1;
        }
        let adj = topo.adjacency();
        let mut classes: FxHashMap<(Attributes, Vec<(NodeId, u64)>), NodeId> = FxHashMap::default();
        let rep = topo
            .nodes
            .iter()
            .enumerate()
            .map(|(id, n)| {
                let shared_asn = n.asn.filter(|a| asn_count[a] > 1);
                let attributes = (n.role, n.plane, n.pod, n.prefixes.clone(), shared_asn);
                let links = adj[id]
                    .iter()
                    .map(|&(m, l)| (m, topo.links[l].gbps.to_bits()))
                    .collect();
                *classes.entry((attributes, links)).or_insert(id)
            })
            .collect();
        Twins { rep }
    }

    /// The node's representative twin (itself when it has none smaller).
    pub fn rep(&self, n: NodeId) -> NodeId {
        self.rep[n]
    }

    /// For a link or node failure: the failure of the representatives it maps to
    /// (as a key: kind and node pairs) and the swaps (twin, representative) that map
    /// that failure back onto `f`. None for planes and pairs (computed on their own).
    pub fn canonical(&self, f: &Failure) -> Option<(Key, Swaps)> {
        match f.kind {
            Kind::Link => {
                let (a, b) = f.pairs[0];
                let (ra, rb) = (self.rep[a], self.rep[b]);
                let swaps = [(a, ra), (b, rb)]
                    .into_iter()
                    .filter(|(x, r)| x != r)
                    .collect();
                Some(((Kind::Link, ra.min(rb), ra.max(rb)), swaps))
            }
            Kind::Node => {
                let u = f.nodes[0];
                let r = self.rep[u];
                let swaps = if u == r { Vec::new() } else { vec![(u, r)] };
                Some(((Kind::Node, r, r), swaps))
            }
            Kind::Plane | Kind::Pair => None,
        }
    }
}

/// A canonical failure: kind and its representatives' node ids.
pub type Key = (Kind, NodeId, NodeId);

/// Disjoint transpositions (node, representative).
pub type Swaps = Vec<(NodeId, NodeId)>;

/// Where the swaps send node `n`.
pub fn image(swaps: &Swaps, n: NodeId) -> NodeId {
    for &(x, r) in swaps {
        if n == x {
            return r;
        }
        if n == r {
            return x;
        }
    }
    n
}

/// The smallest image of the sorted node list `set` under the swaps.
pub fn min_image(swaps: &Swaps, set: &[NodeId]) -> Option<NodeId> {
    let moved = |n: NodeId| swaps.iter().any(|&(x, r)| n == x || n == r);
    // The first unmoved node, and the images of the moved ones (at most 4).
    let fixed = set.iter().copied().find(|&n| !moved(n));
    let images = swaps
        .iter()
        .flat_map(|&(x, r)| [x, r])
        .filter(|n| set.binary_search(n).is_ok())
        .map(|n| image(swaps, n));
    fixed.into_iter().chain(images).min()
}

/// The failure `swaps` map onto `f` (the swaps are involutions): its representatives'.
pub fn preimage(f: &Failure, swaps: &Swaps) -> Failure {
    if swaps.is_empty() {
        return f.clone();
    }
    let mut pairs: Vec<(NodeId, NodeId)> = f
        .pairs
        .iter()
        .map(|&(a, b)| {
            let (a, b) = (image(swaps, a), image(swaps, b));
            (a.min(b), a.max(b))
        })
        .collect();
    pairs.sort_unstable();
    let mut nodes: Vec<NodeId> = f.nodes.iter().map(|&n| image(swaps, n)).collect();
    nodes.sort_unstable();
    Failure {
        kind: f.kind,
        name: f.name.clone(),
        pairs,
        nodes,
    }
}
