//! The lab's addressing plan: a pure function of the topology and the options, computed
//! before anything touches the system (and unit-tested without root).
//!
//! - one namespace per node, `<prefix>-<lab>-<node>`; hosts behind a node that originates
//!   prefixes (and is not itself a stub) get `<prefix>-<lab>-<node>-h<k>`, one per prefix;
//! - one veth pair per topology link (parallel links too), interfaces `eth<k>` numbered
//!   per node in link order, each with a /31 from the link pool and a fixed MAC, so that
//!   agent configurations can name neighbor MACs without ARP;
//! - the node's router ID on `lo`; a host gets the second address of its prefix, the node
//!   the first (the host's default gateway);
//! - link capacity scaled down for tc: `gbps * scale_mbit_per_gbps` Mbit/s.

use fare_model::topology::{Role, Topology};
use ipnet::{IpNet, Ipv4Net};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr};

/// Namespace names start with this, so `fare lab down` finds every trace.
pub const NS_PREFIX: &str = "farelab";

/// The interface of a host namespace towards its node (and the node's towards it).
pub const HOST_IF: &str = "eth0";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DataplaneKind {
    Xdp,
    Kernel,
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Routing {
    /// Real BGP sessions between the agents.
    Bgp,
    /// Groups computed offline (`fare weights`) installed as static groups.
    Static,
}

/// What builds the nodes and links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Named network namespaces and veth pairs made with `ip` (no other tool needed).
    #[default]
    Netns,
    /// Debian's Mininet (hosts and links), namespaces then named for the other commands.
    Mininet,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SplitMode {
    /// Per-packet spray over the weighted members.
    Spray,
    /// Per-flow hashing over the weighted members.
    Flow,
    /// Per flowlet: a flow changes member only after an idle gap (the agents'
    /// `fare.flowlet_gap_us`, 500 µs by default), then picks by weight.
    Flowlet,
}

impl SplitMode {
    /// The name `--split` takes.
    pub fn name(self) -> &'static str {
        match self {
            SplitMode::Spray => "spray",
            SplitMode::Flow => "flow",
            SplitMode::Flowlet => "flowlet",
        }
    }
}

/// ARN settings of a lab (kept in its state so restarted agents get the same block).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabArn {
    /// Queue sampling period of the monitors (µs, >= 100).
    pub interval_us: u64,
    /// A removal ends by itself after this long unless refreshed.
    pub hold_ms: u64,
    /// Type 2 only after the queue stayed drained this long (see `MonitoredInterface`).
    #[serde(default)]
    pub clear_ms: u64,
    /// What a Type 1 does at the receivers (`arn.congestion.mode`).
    #[serde(default)]
    pub congestion: fare_arn::shift::CongestionMode,
}

impl Default for LabArn {
    fn default() -> Self {
        LabArn {
            interval_us: 1000,
            hold_ms: 1000,
            clear_ms: 200,
            congestion: fare_arn::shift::CongestionMode::Shift,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Mbit/s of tc rate per Gbps of topology capacity.
    pub scale_mbit_per_gbps: f64,
    /// /31 per link is taken from here.
    pub link_pool: Ipv4Net,
    pub dataplane: DataplaneKind,
    pub routing: Routing,
    pub split: SplitMode,
    #[serde(default)]
    pub backend: Backend,
    /// The agents' `arn:` block (None: ARN off).
    #[serde(default)]
    pub arn: Option<LabArn>,
    /// fare.p4's compiled outputs for `target: bmv2` nodes (None: found by `lab up`).
    #[serde(default)]
    pub p4_build: Option<std::path::PathBuf>,
    /// The agents' `fare.parallel_links` and the model's: per node or per session over
    /// parallel links.
    #[serde(default)]
    pub parallel_links: fare_model::parallel::ParallelLinks,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            scale_mbit_per_gbps: 1.0,
            link_pool: "172.16.0.0/12"
                .parse()
                .unwrap_or_else(|_| unreachable_pool()),
            dataplane: DataplaneKind::Kernel,
            routing: Routing::Bgp,
            split: SplitMode::Spray,
            backend: Backend::Netns,
            arn: Some(LabArn::default()),
            p4_build: None,
            parallel_links: Default::default(),
        }
    }
}

fn unreachable_pool() -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::new(172, 16, 0, 0), 12).unwrap_or_default()
}

/// One end of a link, seen from its node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Port {
    pub interface: String,
    /// Topology link name (`A-B`, `A-B#2` or the file's).
    pub link: String,
    pub addr: Ipv4Addr,
    pub mac: String,
    pub peer: String,
    pub peer_interface: String,
    pub peer_addr: Ipv4Addr,
    pub peer_mac: String,
    pub gbps: f64,
}

/// A host namespace that sources and sinks traffic for one prefix of a node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub ns: String,
    pub prefix: IpNet,
    /// The host's address (second of the prefix).
    pub addr: IpAddr,
    /// The node's address on the host link (first of the prefix): the gateway.
    pub gateway: IpAddr,
    /// Interface in the node's namespace towards this host.
    pub node_interface: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodePlan {
    pub name: String,
    pub ns: String,
    pub role: String,
    pub asn: u32,
    pub router_id: Ipv4Addr,
    pub prefixes: Vec<IpNet>,
    pub ports: Vec<Port>,
    pub hosts: Vec<Host>,
    /// Traffic end point inside the node itself (stubs: RNICs, hosts) — the prefix's first
    /// address on `lo`.
    pub local_endpoints: Vec<IpAddr>,
    /// `target: bmv2`: a `simple_switch_grpc` forwards for this node, its agent programs it
    /// over P4Runtime.
    #[serde(default)]
    pub bmv2: bool,
    /// `target: frr`: FRR's bgpd and zebra run this node (`frr`), not an agent.
    #[serde(default)]
    pub frr: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkPlan {
    pub name: String,
    pub a: String,
    pub a_interface: String,
    pub b: String,
    pub b_interface: String,
    pub gbps: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub lab: String,
    pub options: Options,
    pub nodes: Vec<NodePlan>,
    pub links: Vec<LinkPlan>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    #[error("lab name `{0}`: use letters, digits and `_` only, at most 12 characters")]
    BadLabName(String),
    #[error("link pool {pool} has room for {room} links, the topology has {links}")]
    PoolTooSmall {
        pool: Ipv4Net,
        room: u64,
        links: usize,
    },
    #[error("node `{node}` has {count} links; at most 4000 per node")]
    TooManyPorts { node: String, count: usize },
    #[error("prefix {prefix} of `{node}` has no room for a gateway and a host address")]
    PrefixTooSmall { node: String, prefix: IpNet },
    #[error(
        "node `{0}`: `target: bmv2` is for transit nodes in the lab (the switch would have to \
         deliver to the node's own hosts); remove its prefixes or the target"
    )]
    Bmv2WithPrefixes(String),
}

/// A lab name usable in namespace names: the topology name with anything else removed.
pub fn default_lab_name(topology_name: &str) -> String {
    let mut s: String = topology_name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    s.truncate(12);
    if s.is_empty() {
        s.push_str("lab");
    }
    s
}

pub fn check_lab_name(name: &str) -> Result<(), PlanError> {
    let ok = !name.is_empty()
        && name.len() <= 12
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(PlanError::BadLabName(name.to_string()))
    }
}

/// Namespace name prefix of every namespace of lab `lab`.
pub fn ns_prefix(lab: &str) -> String {
    format!("{NS_PREFIX}-{lab}-")
}

fn mac(kind: u8, node: usize, port: usize) -> String {
    format!(
        "02:{kind:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        (node >> 8) & 0xff,
        node & 0xff,
        (port >> 8) & 0xff,
        port & 0xff
    )
}

/// Host address `n` of a prefix (0 = network address).
fn nth_addr(prefix: &IpNet, n: u32) -> Option<IpAddr> {
    match prefix {
        IpNet::V4(p) => {
            let size = if p.prefix_len() >= 32 {
                1
            } else {
                1u64 << (32 - p.prefix_len())
            };
            // Stay inside the prefix, and off the broadcast address of ordinary subnets.
            if u64::from(n) >= size || (u64::from(n) + 1 >= size && p.prefix_len() < 31) {
                return None;
            }
            let base = u32::from(p.network());
            Some(IpAddr::V4(Ipv4Addr::from(base.checked_add(n)?)))
        }
        IpNet::V6(p) => {
            if p.prefix_len() >= 127 {
                return None;
            }
            let base = u128::from(p.network());
            Some(IpAddr::V6(std::net::Ipv6Addr::from(
                base.checked_add(u128::from(n))?,
            )))
        }
    }
}

/// Node names as they appear in namespace names: characters other than letters, digits,
/// `_`, `-`, `.` become `_`, at most 40 characters, made unique with a `_<index>` suffix.
fn ns_names(topo: &Topology) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    topo.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut s: String = n
                .name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                        c
                    } else {
                        '_'
                    }
                })
                .take(40)
                .collect();
            if !seen.insert(s.clone()) {
                s = format!("{s}_{i}");
                seen.insert(s.clone());
            }
            s
        })
        .collect()
}

/// Computes the plan. Node order and port numbering follow the topology file.
pub fn plan(topo: &Topology, lab: &str, options: &Options) -> Result<Plan, PlanError> {
    check_lab_name(lab)?;
    let room = 1u64 << (31 - u32::from(options.link_pool.prefix_len().min(31)));
    if topo.links.len() as u64 > room {
        return Err(PlanError::PoolTooSmall {
            pool: options.link_pool,
            room,
            links: topo.links.len(),
        });
    }
    let prefix = ns_prefix(lab);
    let ns_names = ns_names(topo);
    let mut nodes: Vec<NodePlan> = topo
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| NodePlan {
            name: n.name.clone(),
            ns: format!("{prefix}{}", ns_names[i]),
            role: n.role.as_str().to_string(),
            // Private 4-octet ASN per node when the file gives none.
            asn: n.asn.unwrap_or(4_200_000_000 + i as u32),
            router_id: fare_model::bgp_ids::router_id(n.router_id, i),
            prefixes: n.prefixes.clone(),
            ports: Vec::new(),
            hosts: Vec::new(),
            local_endpoints: Vec::new(),
            bmv2: n.target == fare_model::topology::Target::Bmv2,
            frr: n.target == fare_model::topology::Target::Frr,
        })
        .collect();
    // Interface numbers: eth0 is the first host link, eth1.. the fabric links.
    let mut next_port: Vec<usize> = vec![1; topo.nodes.len()];
    let pool = u32::from(options.link_pool.network());
    let mut links = Vec::with_capacity(topo.links.len());
    for (k, l) in topo.links.iter().enumerate() {
        let (pa, pb) = (next_port[l.a], next_port[l.b]);
        for (node, port) in [(l.a, pa), (l.b, pb)] {
            if port > 4000 {
                return Err(PlanError::TooManyPorts {
                    node: topo.nodes[node].name.clone(),
                    count: port,
                });
            }
        }
        next_port[l.a] += 1;
        next_port[l.b] += 1;
        let addr_a = Ipv4Addr::from(pool + 2 * k as u32);
        let addr_b = Ipv4Addr::from(pool + 2 * k as u32 + 1);
        let (if_a, if_b) = (format!("eth{pa}"), format!("eth{pb}"));
        let (mac_a, mac_b) = (mac(0xfa, l.a, pa), mac(0xfa, l.b, pb));
        let (na, nb) = (&topo.nodes[l.a].name, &topo.nodes[l.b].name);
        nodes[l.a].ports.push(Port {
            interface: if_a.clone(),
            link: l.name.clone(),
            addr: addr_a,
            mac: mac_a.clone(),
            peer: nb.clone(),
            peer_interface: if_b.clone(),
            peer_addr: addr_b,
            peer_mac: mac_b.clone(),
            gbps: l.gbps,
        });
        nodes[l.b].ports.push(Port {
            interface: if_b.clone(),
            link: l.name.clone(),
            addr: addr_b,
            mac: mac_b,
            peer: na.clone(),
            peer_interface: if_a.clone(),
            peer_addr: addr_a,
            peer_mac: mac_a,
            gbps: l.gbps,
        });
        links.push(LinkPlan {
            name: l.name.clone(),
            a: na.clone(),
            a_interface: if_a,
            b: nb.clone(),
            b_interface: if_b,
            gbps: l.gbps,
        });
    }
    for (i, n) in topo.nodes.iter().enumerate() {
        add_hosts(&mut nodes[i], n, &format!("{prefix}{}", ns_names[i]))?;
    }
    Ok(Plan {
        lab: lab.to_string(),
        options: options.clone(),
        nodes,
        links,
    })
}

/// The host namespaces (or, for stubs and hosts, the local end points) of one node's
/// prefixes; `ns` is the node's namespace.
fn add_hosts(
    node: &mut NodePlan,
    n: &fare_model::topology::Node,
    ns: &str,
) -> Result<(), PlanError> {
    if node.bmv2 && !n.prefixes.is_empty() {
        return Err(PlanError::Bmv2WithPrefixes(n.name.clone()));
    }
    for (k, p) in n.prefixes.iter().enumerate() {
        let bad = || PlanError::PrefixTooSmall {
            node: n.name.clone(),
            prefix: *p,
        };
        if n.role.is_stub() || n.role == Role::Host {
            // A host route (an RNIC's /32) is its own end point.
            let single = p.prefix_len() == p.max_prefix_len();
            let endpoint = if single {
                Some(p.addr())
            } else {
                nth_addr(p, 1)
            };
            node.local_endpoints.push(endpoint.ok_or_else(bad)?);
            continue;
        }
        let gateway = nth_addr(p, 1).ok_or_else(bad)?;
        let addr = nth_addr(p, 2).ok_or_else(bad)?;
        let node_interface = if k == 0 {
            HOST_IF.to_string()
        } else {
            format!("h{k}")
        };
        node.hosts.push(Host {
            ns: format!("{ns}-h{k}"),
            prefix: *p,
            addr,
            gateway,
            node_interface,
        });
    }

    Ok(())
}

impl Options {
    /// tc rate of a link of `gbps`, in kbit/s (at least 8).
    pub fn rate_kbit(&self, gbps: f64) -> u64 {
        ((gbps * self.scale_mbit_per_gbps * 1000.0).round() as u64).max(8)
    }
}

impl Plan {
    pub fn node(&self, name: &str) -> Option<&NodePlan> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Every namespace of the lab: nodes, then hosts.
    pub fn namespaces(&self) -> Vec<String> {
        let mut v: Vec<String> = self.nodes.iter().map(|n| n.ns.clone()).collect();
        v.extend(
            self.nodes
                .iter()
                .flat_map(|n| n.hosts.iter().map(|h| h.ns.clone())),
        );
        v
    }

    /// Links between nodes `a` and `b` (either order).
    pub fn links_between(&self, a: &str, b: &str) -> Vec<&LinkPlan> {
        self.links
            .iter()
            .filter(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a))
            .collect()
    }

    /// Number of BGP sessions (one per link) when routing is BGP.
    pub fn sessions(&self) -> usize {
        self.links.len()
    }
}

/// One veth pair: ends named in the lab's namespaces.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VethPair {
    pub ns_a: String,
    pub if_a: String,
    pub mac_a: Option<String>,
    pub ns_b: String,
    pub if_b: String,
    pub mac_b: Option<String>,
}

impl Plan {
    /// Every link of the plan once (fabric links, then node-host links), as either backend
    /// creates them.
    pub fn veth_pairs(&self) -> Vec<VethPair> {
        let mut out = Vec::new();
        for node in &self.nodes {
            for p in &node.ports {
                let Some(peer) = self.node(&p.peer) else {
                    continue;
                };
                // Each link once: from the end whose (namespace, interface) sorts first.
                if (node.ns.as_str(), p.interface.as_str())
                    > (peer.ns.as_str(), p.peer_interface.as_str())
                {
                    continue;
                }
                out.push(VethPair {
                    ns_a: node.ns.clone(),
                    if_a: p.interface.clone(),
                    mac_a: Some(p.mac.to_string()),
                    ns_b: peer.ns.clone(),
                    if_b: p.peer_interface.clone(),
                    mac_b: Some(p.peer_mac.to_string()),
                });
            }
            for h in &node.hosts {
                out.push(VethPair {
                    ns_a: node.ns.clone(),
                    if_a: h.node_interface.clone(),
                    mac_a: None,
                    ns_b: h.ns.clone(),
                    if_b: HOST_IF.to_string(),
                    mac_b: None,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const TOPO: &str = r#"
name: Small-Test
nodes:
  - {name: S1, role: spine, asn: 65100, router_id: 10.0.1.1}
  - {name: L1, role: leaf, asn: 65001, router_id: 10.0.0.1, prefixes: [192.0.2.0/24, 2001:db8::/64]}
  - {name: L2, role: leaf, asn: 65002, router_id: 10.0.0.2, prefixes: [198.51.100.0/24]}
links:
  - {a: S1, b: L1, gbps: 100}
  - {a: S1, b: L1, gbps: 50}
  - {a: S1, b: L2, gbps: 400}
"#;

    fn topo() -> Topology {
        fare_model::topology::parse(Path::new("t.yaml"), TOPO).unwrap()
    }

    #[test]
    fn parallel_links_get_their_own_interfaces_and_addresses() {
        let p = plan(&topo(), "t1", &Options::default()).unwrap();
        let s1 = p.node("S1").unwrap();
        assert_eq!(s1.ns, "farelab-t1-S1");
        let ifs: Vec<_> = s1.ports.iter().map(|p| p.interface.as_str()).collect();
        assert_eq!(ifs, ["eth1", "eth2", "eth3"]);
        assert_eq!(s1.ports[1].link, "S1-L1#2");
        assert_eq!(s1.ports[1].addr, Ipv4Addr::new(172, 16, 0, 2));
        assert_eq!(s1.ports[1].peer_addr, Ipv4Addr::new(172, 16, 0, 3));
        let l1 = p.node("L1").unwrap();
        assert_eq!(l1.ports[1].interface, "eth2");
        assert_eq!(l1.ports[1].peer_mac, s1.ports[1].mac);
        assert_ne!(l1.ports[1].mac, s1.ports[1].mac);
    }

    #[test]
    fn a_stub_host_route_is_its_own_end_point() {
        let t = fare_model::topology::parse(
            Path::new("t.yaml"),
            "nodes:\n  - {name: L1, role: leaf}\n  - {name: R1, role: rnic, prefixes: [10.200.2.1/32, 10.201.0.0/24]}\n  - {name: R2, role: rnic, prefixes: [10.200.2.2/31]}\nlinks:\n  - {a: L1, b: R1, gbps: 100}\n  - {a: L1, b: R2, gbps: 100}\n",
        )
        .unwrap();
        let p = plan(&t, "t", &Options::default()).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // Not 10.200.2.2: that is the next RNIC's address.
        assert_eq!(
            p.node("R1").unwrap().local_endpoints,
            [ip("10.200.2.1"), ip("10.201.0.1")]
        );
        assert_eq!(p.node("R2").unwrap().local_endpoints, [ip("10.200.2.3")]);
    }

    #[test]
    fn hosts_sit_behind_leaves_one_per_prefix() {
        let p = plan(&topo(), "t1", &Options::default()).unwrap();
        let l1 = p.node("L1").unwrap();
        assert_eq!(l1.hosts.len(), 2);
        assert_eq!(l1.hosts[0].ns, "farelab-t1-L1-h0");
        assert_eq!(l1.hosts[0].addr.to_string(), "192.0.2.2");
        assert_eq!(l1.hosts[0].gateway.to_string(), "192.0.2.1");
        assert_eq!(l1.hosts[1].addr.to_string(), "2001:db8::2");
        assert_eq!(l1.hosts[1].node_interface, "h1");
        assert_eq!(p.namespaces().len(), 3 + 3);
    }

    #[test]
    fn rates_scale_and_names_are_checked() {
        let o = Options::default();
        assert_eq!(o.rate_kbit(100.0), 100_000);
        assert_eq!(o.rate_kbit(0.0001), 8);
        assert_eq!(default_lab_name("draft-fig1"), "draftfig1");
        assert!(plan(&topo(), "bad-name", &o).is_err());
        let odd = TOPO.replace("S1", "SS1@Plane1");
        let t = fare_model::topology::parse(Path::new("t.yaml"), &odd).unwrap();
        let p = plan(&t, "t", &o).unwrap();
        assert_eq!(p.nodes[0].ns, "farelab-t-SS1_Plane1");
        let tiny = Options {
            link_pool: "10.0.0.0/31".parse().unwrap(),
            ..o
        };
        assert!(matches!(
            plan(&topo(), "t", &tiny),
            Err(PlanError::PoolTooSmall { .. })
        ));
    }
}
