//! Fabric model and YAML loader (`topologies/`).
//!
//! A topology is a list of nodes (with a role that places them in a Clos stage) and a list
//! of links; several links between the same pair are parallel links, each its own member
//! of a WCMP group. `load` reads the YAML format of docs/configuration.md, `gen` builds large fabrics.

pub mod gen;
pub mod load;

use ipnet::IpNet;
use std::collections::HashMap;
use std::net::Ipv4Addr;

pub use load::{load, parse};
// Roles are shared with the bandwidth rules, which the topology's checks use.
pub use crate::role::Role;

/// Index of a node in `Topology::nodes`.
pub type NodeId = usize;
/// Index of a link in `Topology::links`.
pub type LinkId = usize;

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub role: Role,
    pub asn: Option<u32>,
    pub router_id: Option<Ipv4Addr>,
    /// Prefixes this node originates.
    pub prefixes: Vec<IpNet>,
    pub pod: Option<u32>,
    pub plane: Option<u32>,
    /// What forwards for this node in `fare lab` (a Linux agent, or a BMv2 switch).
    pub target: Target,
}

impl Node {
    /// A node with only a name and a role: no AS, router ID, prefixes, PoD or plane,
    /// forwarded by Linux.
    pub fn new(name: impl Into<String>, role: Role) -> Node {
        Node {
            name: name.into(),
            role,
            asn: None,
            router_id: None,
            prefixes: Vec::new(),
            pod: None,
            plane: None,
            target: Target::default(),
        }
    }
}

/// What runs a node: the default `linux` (a `fare agent` with the XDP or kernel data
/// plane), `bmv2` (a `simple_switch_grpc` running fare.p4, programmed by the node's agent
/// over P4Runtime), or `frr` (FRR's bgpd and zebra: a box that does not speak FARE and
/// does UCMP from the RFC 10005 Link Bandwidth community; spines only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    #[default]
    Linux,
    Bmv2,
    Frr,
}

impl Target {
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Linux => "linux",
            Target::Bmv2 => "bmv2",
            Target::Frr => "frr",
        }
    }

    /// Whether the node runs fare (and so speaks FARE's Path Bandwidth community).
    pub fn is_fare(self) -> bool {
        self != Target::Frr
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub a: NodeId,
    pub b: NodeId,
    /// Capacity in Gbps (line rate, or what is left after a partial-lane failure).
    pub gbps: f64,
    /// "A-B", then "A-B#2", ... for parallel links, unless the file names it.
    pub name: String,
    /// DPF session color, if any.
    pub color: Option<String>,
}

impl Link {
    /// The node at the other end from `n`.
    pub fn other(&self, n: NodeId) -> NodeId {
        if self.a == n {
            self.b
        } else {
            self.a
        }
    }

    fn joins(&self, x: NodeId, y: NodeId) -> bool {
        (self.a == x && self.b == y) || (self.a == y && self.b == x)
    }
}

/// A validated fabric: every link joins two distinct known nodes with a positive capacity,
/// names are unique.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Topology {
    pub name: String,
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
    by_name: HashMap<String, NodeId>,
    /// Links added so far per unordered node pair, for default names of parallel links.
    pair_count: HashMap<(NodeId, NodeId), u32>,
}

/// Why a change to a topology (failure, degradation) cannot be applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChangeError {
    #[error("unknown node `{0}`")]
    UnknownNode(String),
    #[error("no link between `{0}` and `{1}`")]
    NoLink(String, String),
    #[error(
        "capacity of `{0}-{1}` must be a number of Gbps the Path Bandwidth community carries \
         ({min} to {max}), not {2}",
        min = crate::bandwidth::MIN_GBPS,
        max = crate::bandwidth::MAX_GBPS
    )]
    BadCapacity(String, String, f64),
}

impl Topology {
    /// An empty topology; add nodes and links with `add_node` / `add_link`.
    pub fn new(name: impl Into<String>) -> Self {
        Topology {
            name: name.into(),
            ..Default::default()
        }
    }

    /// Adds a node; returns its id. Names must be unique (the loader checks; generators
    /// make them so).
    pub fn add_node(&mut self, node: Node) -> NodeId {
        let id = self.nodes.len();
        self.by_name.insert(node.name.clone(), id);
        self.nodes.push(node);
        id
    }

    /// Adds a link with the default name ("A-B", "A-B#2", ...) unless `name` is given.
    pub fn add_link(&mut self, a: NodeId, b: NodeId, gbps: f64, name: Option<String>) -> LinkId {
        let default = self.default_link_name(a, b);
        *self.pair_count.entry((a.min(b), a.max(b))).or_insert(0) += 1;
        let name = name.unwrap_or(default);
        self.links.push(Link {
            a,
            b,
            gbps,
            name,
            color: None,
        });
        self.links.len() - 1
    }

    /// The default name of the next link between A and B: "A-B" for the first,
    /// "A-B#k" for the k-th.
    pub fn default_link_name(&self, a: NodeId, b: NodeId) -> String {
        let nth = 1 + self
            .pair_count
            .get(&(a.min(b), a.max(b)))
            .copied()
            .unwrap_or(0);
        let base = format!("{}-{}", self.nodes[a].name, self.nodes[b].name);
        if nth == 1 {
            base
        } else {
            format!("{base}#{nth}")
        }
    }

    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    /// Links between `a` and `b`, in file order.
    pub fn links_between(&self, a: NodeId, b: NodeId) -> impl Iterator<Item = LinkId> + '_ {
        (0..self.links.len()).filter(move |&l| self.links[l].joins(a, b))
    }

    fn pair(&self, a: &str, b: &str) -> Result<(NodeId, NodeId), ChangeError> {
        let x = self
            .node_id(a)
            .ok_or_else(|| ChangeError::UnknownNode(a.to_string()))?;
        let y = self
            .node_id(b)
            .ok_or_else(|| ChangeError::UnknownNode(b.to_string()))?;
        if self.links_between(x, y).next().is_none() {
            return Err(ChangeError::NoLink(a.to_string(), b.to_string()));
        }
        Ok((x, y))
    }

    /// Removes every link between `a` and `b` (a link failure after BGP converged).
    /// Returns how many were removed.
    pub fn fail(&mut self, a: &str, b: &str) -> Result<usize, ChangeError> {
        let (x, y) = self.pair(a, b)?;
        let before = self.links.len();
        self.links.retain(|l| !l.joins(x, y));
        Ok(before - self.links.len())
    }

    /// Sets the capacity of every link between `a` and `b` to `gbps` (a partial-lane
    /// failure). Returns how many links changed.
    pub fn degrade(&mut self, a: &str, b: &str, gbps: f64) -> Result<usize, ChangeError> {
        if crate::bandwidth::check_gbps(gbps).is_err() {
            return Err(ChangeError::BadCapacity(a.to_string(), b.to_string(), gbps));
        }
        let (x, y) = self.pair(a, b)?;
        let mut n = 0;
        for l in self.links.iter_mut().filter(|l| l.joins(x, y)) {
            l.gbps = gbps;
            n += 1;
        }
        Ok(n)
    }

    /// Per node, its links as (neighbor, link), ordered by neighbor then file order.
    pub fn adjacency(&self) -> Vec<Vec<(NodeId, LinkId)>> {
        let mut adj = vec![Vec::new(); self.nodes.len()];
        for (id, l) in self.links.iter().enumerate() {
            adj[l.a].push((l.b, id));
            adj[l.b].push((l.a, id));
        }
        for list in &mut adj {
            list.sort_unstable();
        }
        adj
    }

    /// The topology as YAML in the format `load` reads (one flow mapping per line).
    pub fn to_yaml(&self) -> String {
        use std::fmt::Write;
        let mut s = String::with_capacity(64 * (self.nodes.len() + self.links.len()));
        let _ = writeln!(s, "name: {}", yaml_str(&self.name));
        s.push_str("nodes:\n");
        for n in &self.nodes {
            let _ = write!(
                s,
                "  - {{name: {}, role: {}",
                yaml_str(&n.name),
                n.role.as_str()
            );
            if let Some(asn) = n.asn {
                let _ = write!(s, ", asn: {asn}");
            }
            if let Some(id) = n.router_id {
                let _ = write!(s, ", router_id: {id}");
            }
            if let Some(p) = n.pod {
                let _ = write!(s, ", pod: {p}");
            }
            if let Some(p) = n.plane {
                let _ = write!(s, ", plane: {p}");
            }
            if n.target != Target::Linux {
                let _ = write!(s, ", target: {}", n.target.as_str());
            }
            if !n.prefixes.is_empty() {
                let list: Vec<String> = n.prefixes.iter().map(|p| p.to_string()).collect();
                let _ = write!(s, ", prefixes: [{}]", list.join(", "));
            }
            s.push_str("}\n");
        }
        s.push_str("links:\n");
        let mut seen: HashMap<(NodeId, NodeId), u32> = HashMap::new();
        for l in &self.links {
            let (a, b) = (&self.nodes[l.a].name, &self.nodes[l.b].name);
            let _ = write!(
                s,
                "  - {{a: {}, b: {}, gbps: {}",
                yaml_str(a),
                yaml_str(b),
                l.gbps
            );
            let nth = seen.entry((l.a.min(l.b), l.a.max(l.b))).or_insert(0);
            *nth += 1;
            let default = if *nth == 1 {
                format!("{a}-{b}")
            } else {
                format!("{a}-{b}#{nth}")
            };
            if l.name != default {
                let _ = write!(s, ", name: {}", yaml_str(&l.name));
            }
            if let Some(c) = &l.color {
                let _ = write!(s, ", color: {}", yaml_str(c));
            }
            s.push_str("}\n");
        }
        s
    }
}

/// A YAML scalar for a name: plain when safe, quoted otherwise.
fn yaml_str(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '#' | '/'))
        && !s.starts_with(['-', '#', '@']);
    if plain {
        s.to_string()
    } else {
        format!("{s:?}")
    }
}
impl Topology {
    /// "N nodes (roles), M links (K parallel), P prefixes".
    pub fn summary(&self) -> String {
        let mut roles: Vec<(&str, usize)> = Vec::new();
        for n in &self.nodes {
            match roles.iter_mut().find(|(r, _)| *r == n.role.as_str()) {
                Some((_, c)) => *c += 1,
                None => roles.push((n.role.as_str(), 1)),
            }
        }
        let roles: Vec<String> = roles.iter().map(|(r, c)| format!("{c} {r}")).collect();
        let mut pairs = std::collections::HashSet::new();
        let parallel = self
            .links
            .iter()
            .filter(|l| !pairs.insert((l.a.min(l.b), l.a.max(l.b))))
            .count();
        let prefixes: std::collections::HashSet<_> =
            self.nodes.iter().flat_map(|n| n.prefixes.iter()).collect();
        format!(
            "{} nodes ({}), {} links ({} parallel), {} prefixes",
            self.nodes.len(),
            roles.join(", "),
            self.links.len(),
            parallel,
            prefixes.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A-B twice, B-C once, by hand: links between a pair either way round, failing and
    /// degrading only that pair's links, the other end of a link.
    #[test]
    fn links_between_a_pair_either_way_fail_and_degrade_by_hand() {
        let mut t = Topology::new("t");
        let [a, b, c] = ["A", "B", "C"].map(|n| t.add_node(Node::new(n, Role::Leaf)));
        t.add_link(a, b, 100.0, None);
        t.add_link(b, c, 100.0, None);
        t.add_link(b, a, 100.0, None);
        assert_eq!(t.links_between(a, b).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(t.links_between(b, a).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(t.links_between(c, b).collect::<Vec<_>>(), [1]);
        assert_eq!(t.links_between(a, c).count(), 0);
        assert_eq!(t.links_between(a, a).count(), 0);
        assert_eq!((t.links[0].other(a), t.links[0].other(b)), (b, a));
        assert_eq!((t.links[1].other(c), t.links[1].other(b)), (b, c));
        assert_eq!(t.degrade("C", "B", 40.0).ok(), Some(1));
        assert_eq!(
            t.links.iter().map(|l| l.gbps).collect::<Vec<_>>(),
            [100.0, 40.0, 100.0]
        );
        assert_eq!(t.fail("B", "A").ok(), Some(2));
        assert_eq!(t.links.len(), 1);
        assert_eq!((t.links[0].a, t.links[0].b), (b, c));
        assert!(t.fail("A", "C").is_err());
    }

    /// Adjacency, the YAML written and the summary of a small fabric, by hand.
    #[test]
    fn adjacency_yaml_and_summary_by_hand() {
        let mut t = Topology::new("two leaves");
        let leaf = |name: &str, asn: u32, prefix: &str| {
            let mut n = Node::new(name, Role::Leaf);
            n.asn = Some(asn);
            n.prefixes.push(prefix.parse().unwrap());
            n
        };
        let a = t.add_node(leaf("L1@Plane1", 65001, "10.0.1.0/24"));
        let b = t.add_node(leaf("-odd", 65002, "10.0.1.0/24"));
        let mut spine = Node::new("S1", Role::Spine);
        spine.target = Target::Frr;
        spine.plane = Some(1);
        let c = t.add_node(spine);
        t.add_link(a, c, 100.0, None);
        t.add_link(c, b, 40.0, Some("uplink".into()));
        t.add_link(c, a, 100.0, None);
        assert_eq!(
            t.adjacency(),
            vec![
                vec![(c, 0), (c, 2)],
                vec![(c, 1)],
                vec![(a, 0), (a, 2), (b, 1)]
            ]
        );
        let want = "name: \"two leaves\"\nnodes:\n\
                    \x20 - {name: L1@Plane1, role: leaf, asn: 65001, prefixes: [10.0.1.0/24]}\n\
                    \x20 - {name: \"-odd\", role: leaf, asn: 65002, prefixes: [10.0.1.0/24]}\n\
                    \x20 - {name: S1, role: spine, plane: 1, target: frr}\n\
                    links:\n\
                    \x20 - {a: L1@Plane1, b: S1, gbps: 100}\n\
                    \x20 - {a: S1, b: \"-odd\", gbps: 40, name: uplink}\n\
                    \x20 - {a: S1, b: L1@Plane1, gbps: 100}\n";
        assert_eq!(t.to_yaml(), want);
        assert_eq!(
            t.summary(),
            "3 nodes (2 leaf, 1 spine), 3 links (1 parallel), 1 prefixes"
        );
    }

    #[test]
    fn yaml_names_plain_only_when_safe() {
        for plain in ["L1", "a/b.c_d-e", "L1@Plane2", "x#2"] {
            assert_eq!(yaml_str(plain), plain);
        }
        for quoted in ["", "a b", "-x", "#x", "@x", "a:b"] {
            assert_eq!(yaml_str(quoted), format!("{quoted:?}"));
        }
    }

    #[test]
    fn only_frr_nodes_do_not_run_fare() {
        let runs: Vec<bool> = [Target::Linux, Target::Bmv2, Target::Frr]
            .iter()
            .map(|t| t.is_fare())
            .collect();
        assert_eq!(runs, [true, true, false]);
    }
}
