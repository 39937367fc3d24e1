//! The draft-wang-idr-dpf Figure 1 fabric, for the DPF tests and the failover benchmark:
//! host h1 behind Leaf1, host h2 behind Leaf2, red Spine1, blue Spine2.
//!
//! ```text
//!              s1(red, AS65100)
//!   h1 ─ l1(AS65001)            l2(AS65002) ─ h2      h1 192.0.2.10, h2 198.18.0.10
//!              s2(blue, AS65100)
//! ```
//! Every `fare agent` runs `dataplane: xdp` (`DpfFabric::up`) or `none`
//! (`DpfSetup::xdp` false); the XDP pins are removed on drop.

use crate::agent::{Agent, TempDir};
use crate::{veth, Netns};
use anyhow::{Context, Result};
use std::path::PathBuf;

pub const RED: u32 = 1;
pub const BLUE: u32 = 2;

pub struct DpfFabric {
    pub s1: Netns,
    pub s2: Netns,
    pub l1: Netns,
    pub l2: Netns,
    pub h1: Netns,
    pub h2: Netns,
    /// Spine1, Spine2, Leaf1, Leaf2.
    pub agents: Vec<Agent>,
    names: Vec<String>,
    _dir: TempDir,
}

impl Drop for DpfFabric {
    fn drop(&mut self) {
        for a in &mut self.agents {
            let _ = a.stop();
        }
        for node in &self.names {
            let _ = std::fs::remove_dir_all(format!("/sys/fs/bpf/fare/{node}"));
        }
    }
}

struct Node<'a> {
    rid: &'a str,
    asn: u32,
    role: &'a str,
    interfaces: &'a str,
    /// (address, remote AS, interface, color)
    neighbors: &'a [(&'a str, u32, &'a str, u32)],
    prefixes: &'a [&'a str],
    dpf: &'a str,
}

fn write_config(dir: &TempDir, name: &str, n: &Node, xdp: bool) -> Result<(PathBuf, PathBuf)> {
    let socket = dir.0.join(format!("{name}.sock"));
    let dataplane = if xdp {
        format!("{{kind: xdp, interfaces: [{}]}}", n.interfaces)
    } else {
        "{kind: none}".to_string()
    };
    let mut text = format!(
        "name: {name}\nrouter_id: {}\nasn: {}\nmanagement: {{socket: {}}}\nfare: {{mode: draft, role: {}}}\n\
         dataplane: {dataplane}\nbgp: {{hold_time: 9, connect_retry_ms: 200, connect_retry_max_ms: 2000}}\nneighbors:\n",
        n.rid,
        n.asn,
        socket.display(),
        n.role,
    );
    for (addr, ras, ifname, color) in n.neighbors {
        text += &format!(
            "  - {{address: {addr}, remote_as: {ras}, interface: {ifname}, bandwidth_gbps: 100, color: {color}}}\n"
        );
    }
    text += &format!("prefixes: [{}]\n{}", n.prefixes.join(", "), n.dpf);
    Ok((dir.write(&format!("{name}.yaml"), &text)?, socket))
}

/// How the fabric is set up: data planes, the nodes' `dpf:` blocks (empty: none), what
/// Leaf2 originates (Leaf1 originates 192.0.2.0/24).
pub struct DpfSetup<'a> {
    /// XDP data planes (else `dataplane: none`).
    pub xdp: bool,
    pub spine_dpf: &'a str,
    pub leaf1_dpf: &'a str,
    pub leaf2_dpf: &'a str,
    pub leaf2_prefixes: &'a [&'a str],
}

impl DpfFabric {
    /// The XDP fabric: `leaf1_dpf`/`leaf2_dpf` are the leaves' `dpf:` blocks (Leaf2
    /// originates 198.18.0.0/24; empty = uncolored route).
    pub fn up(tag: &str, leaf1_dpf: &str, leaf2_dpf: &str) -> Result<DpfFabric> {
        DpfFabric::build(
            tag,
            &DpfSetup {
                xdp: true,
                spine_dpf: "",
                leaf1_dpf,
                leaf2_dpf,
                leaf2_prefixes: &["198.18.0.0/24"],
            },
        )
    }

    /// Builds the namespaces and starts the four agents.
    pub fn build(tag: &str, setup: &DpfSetup) -> Result<DpfFabric> {
        let ns = |n: &str| Netns::new(&format!("{tag}{n}"));
        let (s1, s2, l1, l2, h1, h2) = (
            ns("s1")?,
            ns("s2")?,
            ns("l1")?,
            ns("l2")?,
            ns("h1")?,
            ns("h2")?,
        );
        veth(&s1, "l1", &l1, "s1")?;
        veth(&s1, "l2", &l2, "s1")?;
        veth(&s2, "l1", &l1, "s2")?;
        veth(&s2, "l2", &l2, "s2")?;
        veth(&h1, "uplink", &l1, "host")?;
        veth(&h2, "uplink", &l2, "host")?;
        // No reverse-path filter on any interface: the leaves' kernels forward to the
        // hosts but hold no routes (the XDP data planes hold them).
        let routed = "sysctl -qw net.ipv4.ip_forward=1 && for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $f; done";
        for n in [&s1, &s2, &l1, &l2] {
            n.sh(routed)?;
        }
        s1.sh("ip addr add 10.1.1.2/30 dev l1 && ip addr add 10.1.2.2/30 dev l2")?;
        s2.sh("ip addr add 10.2.1.2/30 dev l1 && ip addr add 10.2.2.2/30 dev l2")?;
        l1.sh("ip addr add 10.1.1.1/30 dev s1 && ip addr add 10.2.1.1/30 dev s2 && ip addr add 192.0.2.1/24 dev host")?;
        l2.sh("ip addr add 10.1.2.1/30 dev s1 && ip addr add 10.2.2.1/30 dev s2 && ip addr add 198.18.0.1/24 dev host")?;
        // The hosts' sockets must fill in UDP checksums themselves: veth would leave them
        // to an offload that XDP_REDIRECT skips (h2 counted every datagram as InErrors).
        for h in [&h1, &h2].into_iter().filter(|_| setup.xdp) {
            h.sh("ethtool -K uplink tx off >/dev/null")?;
        }
        h1.sh("ip addr add 192.0.2.10/24 dev uplink && ip route add default via 192.0.2.1")?;
        h2.sh("ip addr add 198.18.0.10/24 dev uplink && ip route add default via 198.18.0.1")?;
        let dir = TempDir::new(&format!("dpf-lab-{tag}"))?;
        let names: Vec<String> = ["s1", "s2", "l1", "l2"]
            .iter()
            .map(|n| format!("{tag}-{n}-{}", std::process::id()))
            .collect();
        let nodes = [
            Node {
                rid: "10.0.1.1",
                asn: 65100,
                role: "spine",
                interfaces: "l1, l2",
                neighbors: &[
                    ("10.1.1.1", 65001, "l1", RED),
                    ("10.1.2.1", 65002, "l2", RED),
                ],
                prefixes: &[],
                dpf: setup.spine_dpf,
            },
            Node {
                rid: "10.0.1.2",
                asn: 65100,
                role: "spine",
                interfaces: "l1, l2",
                neighbors: &[
                    ("10.2.1.1", 65001, "l1", BLUE),
                    ("10.2.2.1", 65002, "l2", BLUE),
                ],
                prefixes: &[],
                dpf: setup.spine_dpf,
            },
            Node {
                rid: "10.0.0.1",
                asn: 65001,
                role: "leaf",
                interfaces: "host, s1, s2",
                neighbors: &[
                    ("10.1.1.2", 65100, "s1", RED),
                    ("10.2.1.2", 65100, "s2", BLUE),
                ],
                prefixes: &["192.0.2.0/24"],
                dpf: setup.leaf1_dpf,
            },
            Node {
                rid: "10.0.0.2",
                asn: 65002,
                role: "leaf",
                interfaces: "host, s1, s2",
                neighbors: &[
                    ("10.1.2.2", 65100, "s1", RED),
                    ("10.2.2.2", 65100, "s2", BLUE),
                ],
                prefixes: setup.leaf2_prefixes,
                dpf: setup.leaf2_dpf,
            },
        ];
        let mut fabric = DpfFabric {
            s1,
            s2,
            l1,
            l2,
            h1,
            h2,
            agents: Vec::new(),
            names: names.clone(),
            _dir: dir,
        };
        let spaces = [&fabric.s1, &fabric.s2, &fabric.l1, &fabric.l2];
        let mut agents = Vec::new();
        for ((node, name), space) in nodes.iter().zip(&names).zip(spaces) {
            let (config, socket) = write_config(&fabric._dir, name, node, setup.xdp)?;
            let agent = Agent::start(Some(space), &config, &socket)
                .with_context(|| format!("starting {name}"))?;
            agents.push(agent);
        }
        fabric.agents = agents;
        Ok(fabric)
    }

    pub fn spine1(&self) -> &Agent {
        &self.agents[0]
    }
    pub fn spine2(&self) -> &Agent {
        &self.agents[1]
    }
    pub fn leaf1(&self) -> &Agent {
        &self.agents[2]
    }
    pub fn leaf2(&self) -> &Agent {
        &self.agents[3]
    }
}

/// The neighbor addresses of `prefix`'s group at `agent` (sorted), None without one.
pub fn group_vias(agent: &Agent, prefix: &str) -> Option<Vec<String>> {
    let groups = agent.show("groups").ok()?;
    let g = groups.as_array()?.iter().find(|g| g["prefix"] == prefix)?;
    let mut vias: Vec<String> = g["members"]
        .as_array()?
        .iter()
        .filter_map(|m| m["via"].as_str().map(String::from))
        .collect();
    vias.sort();
    Some(vias)
}
