//! AS-path loops: eBGP drops a route whose AS_PATH holds the receiver's own AS (RFC 4271
//! §9.1.2), and a speaker does not send it there at all. Two nodes in one AS (leaves
//! numbered alike, RFC 7938 §5.2.4) therefore never use a path through each other: the
//! leaves of one AS get no routes to each other's prefixes.
//!
//! Only an AS held by two or more nodes can make a loop (on a shortest path a node is not on
//! its own path), so only those are tracked: per node, the set of shared ASes on its best
//! paths, one bit each. A fabric without shared ASes costs nothing.
//!
//! Where a node's equal-cost routes differ in whether they hold an AS (anycast prefixes
//! from leaves of different ASes), which AS_PATH a speaker advertises depends on the order
//! its routes arrived in; the model takes the union: the route counts as a loop.

use crate::topology::{NodeId, Topology};
use rustc_hash::FxHashMap;

/// Which nodes are in an AS that another node shares.
pub(super) struct SharedAs {
    /// Per node, the index of its shared AS, or `NOT_SHARED`.
    index: Vec<u32>,
    /// 64-bit words per node in a `Bits` set: 0 when no AS is shared.
    words: usize,
}

const NOT_SHARED: u32 = u32::MAX;

impl SharedAs {
    pub(super) fn new(topo: &Topology) -> SharedAs {
        let mut count: FxHashMap<u32, u32> = FxHashMap::default();
        for asn in topo.nodes.iter().filter_map(|n| n.asn) {
            *count.entry(asn).or_insert(0) += 1;
        }
        let mut ids: FxHashMap<u32, u32> = FxHashMap::default();
        let index = topo
            .nodes
            .iter()
            .map(|n| match n.asn {
                Some(asn) if count[&asn] > 1 => {
                    let next = ids.len() as u32;
                    *ids.entry(asn).or_insert(next)
                }
                _ => NOT_SHARED,
            })
            .collect();
        SharedAs {
            index,
            words: ids.len().div_ceil(64),
        }
    }

    /// The shared-AS index of node `n`, if its AS is shared.
    #[inline]
    pub(super) fn of(&self, n: NodeId) -> Option<u32> {
        let i = *self.index.get(n)?;
        (i != NOT_SHARED).then_some(i)
    }

    pub(super) fn any(&self) -> bool {
        self.words > 0
    }
}

/// Per node, the shared ASes on its best paths (its own included).
pub(super) struct Bits {
    bits: Vec<u64>,
    words: usize,
}

impl Bits {
    pub(super) fn new(shared: &SharedAs, nodes: usize) -> Bits {
        Bits {
            bits: vec![0; shared.words * nodes],
            words: shared.words,
        }
    }

    pub(super) fn row(&self, n: NodeId) -> &[u64] {
        &self.bits[n * self.words..(n + 1) * self.words]
    }

    pub(super) fn set_row(&mut self, n: NodeId, row: &[u64]) {
        self.bits[n * self.words..(n + 1) * self.words].copy_from_slice(row);
    }

    pub(super) fn clear(&mut self, n: NodeId) {
        self.bits[n * self.words..(n + 1) * self.words].fill(0);
    }

    /// Whether AS `index` is on `m`'s best paths (false when nothing is tracked).
    #[inline]
    pub(super) fn holds(&self, m: NodeId, index: Option<u32>) -> bool {
        match index {
            Some(i) if self.words > 0 => self.row(m)[i as usize / 64] & (1 << (i % 64)) != 0,
            _ => false,
        }
    }

    /// `n`'s set: its own AS and every member's set.
    pub(super) fn join(
        &mut self,
        n: NodeId,
        own: Option<u32>,
        members: impl Iterator<Item = NodeId>,
    ) {
        if self.words == 0 {
            return;
        }
        let mut row = vec![0u64; self.words];
        for m in members {
            for (w, b) in row.iter_mut().zip(self.row(m)) {
                *w |= b;
            }
        }
        if let Some(i) = own {
            row[i as usize / 64] |= 1 << (i % 64);
        }
        self.bits[n * self.words..(n + 1) * self.words].copy_from_slice(&row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{Node, Role};

    /// 130 leaves, two per AS (65 shared ASes: two words per node), and one alone.
    fn pairs() -> Topology {
        let mut t = Topology::new("pairs");
        for i in 0..131u32 {
            let mut n = Node::new(format!("L{i}"), Role::Leaf);
            n.asn = Some(65000 + i / 2);
            t.add_node(n);
        }
        t
    }

    #[test]
    fn shared_ases_by_hand() {
        let t = pairs();
        let shared = SharedAs::new(&t);
        assert!(shared.any());
        // Leaves 2k and 2k+1 share AS 65000 + k, index k; leaf 130 (AS 65065) is alone.
        assert_eq!(
            (shared.of(0), shared.of(1), shared.of(3)),
            (Some(0), Some(0), Some(1))
        );
        assert_eq!((shared.of(129), shared.of(130)), (Some(64), None));
        assert!(!SharedAs::new(&Topology::new("empty")).any());
    }

    /// Bit sets of two words per node: each node's own row, joins over members, clearing.
    #[test]
    fn bits_across_two_words_by_hand() {
        let t = pairs();
        let shared = SharedAs::new(&t);
        let mut bits = Bits::new(&shared, t.nodes.len());
        // Node 5 holds AS indexes 1 (its own) and 64 (the second word).
        bits.join(5, Some(1), std::iter::empty());
        bits.set_row(7, &[0, 1]);
        bits.join(9, None, [5, 7].into_iter());
        assert_eq!(bits.row(5), [1 << 1, 0]);
        assert_eq!(bits.row(7), [0, 1]);
        assert_eq!(bits.row(9), [1 << 1, 1]);
        for (node, index, held) in [(9, 1, true), (9, 64, true), (9, 0, false), (5, 64, false)] {
            assert_eq!(bits.holds(node, Some(index)), held, "{node} {index}");
        }
        assert!(!bits.holds(9, None));
        // Neighbors' rows are untouched; clearing empties one row only.
        assert_eq!(
            (bits.row(4), bits.row(6), bits.row(8), bits.row(10)),
            (
                [0, 0].as_slice(),
                [0, 0].as_slice(),
                [0, 0].as_slice(),
                [0, 0].as_slice()
            )
        );
        bits.clear(9);
        assert_eq!(bits.row(9), [0, 0]);
        assert_eq!(bits.row(7), [0, 1]);
    }
}
