//! Generated fabrics for benchmarks and tests: 3-stage and 5-stage Clos (draft-xu-idr-fare
//! Figures 1 and 2, any size) and multi-plane scale-out fabrics of RNICs
//! (draft-xu-idr-fare-in-mpson Figure 1, up to 100,000 GPUs and more).
//!
//! AS numbers follow RFC 7938: every leaf its own AS, the spines of a 3-stage fabric (or of
//! one PoD) share an AS, the super-spines of a plane share an AS; RNICs are stubs with
//! their own AS each.

use super::{Node, NodeId, Role, Topology};
use ipnet::{IpNet, Ipv4Net};
use std::net::Ipv4Addr;

/// The /24 that holds the hosts behind leaf (or block) number `i` (0-based): 10.x.y.0/24.
pub fn block_prefix(i: u32) -> IpNet {
    let [_, _, x, y] = i.to_be_bytes();
    let net = Ipv4Net::new(Ipv4Addr::new(10, x, y, 0), 24).unwrap_or_default();
    IpNet::V4(net)
}

/// A router ID in 100.64.0.0/10 from a running number: apart from the node prefixes
/// (10/8) and from the lab's link addresses (172.16/12), since the lab puts router IDs
/// on loopbacks.
fn router_id(n: u32) -> Ipv4Addr {
    Ipv4Addr::from(0x6440_0000u32 | (n & 0x003f_ffff))
}

fn node(name: String, role: Role, asn: u32, rid: u32) -> Node {
    Node {
        asn: Some(asn),
        router_id: Some(router_id(rid)),
        ..Node::new(name, role)
    }
}

/// Why a generated fabric cannot be written, if it cannot: no node, a link capacity the
/// Path Bandwidth community cannot carry, or a reserved AS number (too many planes, say).
/// The loader applies the same rules to files.
pub fn check(t: &Topology) -> Result<(), String> {
    if t.nodes.is_empty() {
        return Err("a fabric needs at least one node".into());
    }
    for l in &t.links {
        crate::bandwidth::check_gbps(l.gbps).map_err(|e| format!("link {}: {e}", l.name))?;
    }
    for n in &t.nodes {
        if let Some(Err(e)) = n.asn.map(crate::bgp_ids::check_asn) {
            return Err(format!("node `{}`: {e}", n.name));
        }
    }
    Ok(())
}

/// 3-stage Clos: `leaves` leaves each linked to every one of `spines` spines by
/// `parallel` links of `gbps`. Leaf i originates `block_prefix(i)`. The spines share AS
/// 65100; leaf i has the 4-octet private AS 4,200,000,000 + i (RFC 6996), so no leaf
/// ever shares the spines' AS however many there are (65000 + i met 65100 at leaf 100).
pub fn clos3(leaves: u32, spines: u32, gbps: f64, parallel: u32) -> Topology {
    let mut t = Topology::new(format!("clos3-{leaves}x{spines}"));
    let spine_ids: Vec<NodeId> = (1..=spines)
        .map(|s| t.add_node(node(format!("S{s}"), Role::Spine, 65100, 1000 + s)))
        .collect();
    for l in 1..=leaves {
        let mut n = node(format!("L{l}"), Role::Leaf, 4_200_000_000 + l, l);
        n.prefixes.push(block_prefix(l - 1));
        let id = t.add_node(n);
        for &s in &spine_ids {
            for _ in 0..parallel.max(1) {
                t.add_link(s, id, gbps, None);
            }
        }
    }
    t
}

/// 5-stage Clos (draft-xu-idr-fare Figure 2): `pods` PoDs of `leaves` leaves and `planes`
/// spines (spine k of every PoD is in plane k), and `super_spines` super-spines per plane.
pub fn clos5(pods: u32, leaves: u32, planes: u32, super_spines: u32, gbps: f64) -> Topology {
    let mut t = Topology::new(format!("clos5-{pods}pods"));
    let mut rid = 0;
    let mut next = || {
        rid += 1;
        rid
    };
    let ss: Vec<Vec<NodeId>> = (1..=planes)
        .map(|k| {
            (1..=super_spines)
                .map(|j| {
                    let mut n = node(
                        format!("SS{j}@Plane{k}"),
                        Role::SuperSpine,
                        65500 + k,
                        next(),
                    );
                    n.plane = Some(k);
                    t.add_node(n)
                })
                .collect()
        })
        .collect();
    for p in 1..=pods {
        let spines: Vec<NodeId> = (1..=planes)
            .map(|k| {
                let mut n = node(format!("S{k}@PoD{p}"), Role::Spine, 65300 + p, next());
                n.pod = Some(p);
                n.plane = Some(k);
                let id = t.add_node(n);
                for &s in &ss[(k - 1) as usize] {
                    t.add_link(s, id, gbps, None);
                }
                id
            })
            .collect();
        for l in 1..=leaves {
            let mut n = node(
                format!("L{l}@PoD{p}"),
                Role::Leaf,
                4_200_000_000 + p * 1000 + l,
                next(),
            );
            n.pod = Some(p);
            n.prefixes.push(block_prefix((p - 1) * leaves + (l - 1)));
            let id = t.add_node(n);
            for &s in &spines {
                t.add_link(s, id, gbps, None);
            }
        }
    }
    t
}

/// Parameters of a multi-plane scale-out fabric (also the options of `fare topo gen
/// multiplane`, defaults from [`MultiPlane::default`]).
#[derive(Clone, Debug, clap::Args)]
pub struct MultiPlane {
    /// RNICs (one per GPU).
    #[arg(long, default_value_t = MultiPlane::default().gpus)]
    pub gpus: u32,
    /// Planes (one link per plane from every RNIC).
    #[arg(long, default_value_t = MultiPlane::default().planes)]
    pub planes: u32,
    /// RNICs behind one leaf: a block of RNICs shares one leaf in every plane.
    #[arg(long, default_value_t = MultiPlane::default().rnics_per_leaf)]
    pub rnics_per_leaf: u32,
    /// Spines per plane; every leaf of the plane links to every spine.
    #[arg(long, default_value_t = MultiPlane::default().spines_per_plane)]
    pub spines_per_plane: u32,
    /// Capacity of an RNIC's link into one plane.
    #[arg(long, default_value_t = MultiPlane::default().rnic_gbps)]
    pub rnic_gbps: f64,
    /// Capacity of one leaf-spine link.
    #[arg(long, default_value_t = MultiPlane::default().fabric_gbps)]
    pub fabric_gbps: f64,
}

impl Default for MultiPlane {
    /// 100,000 GPUs on 4 planes of 51.2T switches (512 x 100G): 256 RNICs and 256
    /// uplinks per leaf, 391 leaves and 256 spines per plane.
    fn default() -> Self {
        MultiPlane {
            gpus: 100_000,
            planes: 4,
            rnics_per_leaf: 256,
            spines_per_plane: 256,
            rnic_gbps: 100.0,
            fabric_gbps: 100.0,
        }
    }
}

/// Multi-plane fabric (draft-xu-idr-fare-in-mpson Figure 1): every RNIC has one link into
/// each plane, to the leaf of its block; each plane is a 2-tier leaf-spine Clos. Host
/// routes are aggregated at the leaves (mpson §4.1): the leaf of block b in every plane
/// originates `block_prefix(b)`, so an RNIC spreads traffic to block b over the planes.
pub fn multiplane(p: &MultiPlane) -> Topology {
    let per_leaf = p.rnics_per_leaf.max(1);
    let blocks = p.gpus.div_ceil(per_leaf);
    let mut t = Topology::new(format!("multiplane-{}gpus-{}planes", p.gpus, p.planes));
    let mut rid = 0;
    let mut next = || {
        rid += 1;
        rid
    };
    // leaves[k][b]: the leaf of block b in plane k.
    let mut leaves: Vec<Vec<NodeId>> = Vec::new();
    for k in 1..=p.planes {
        let spines: Vec<NodeId> = (1..=p.spines_per_plane)
            .map(|s| {
                let mut n = node(format!("S{s}@Plane{k}"), Role::Spine, 65100 + k, next());
                n.plane = Some(k);
                t.add_node(n)
            })
            .collect();
        let plane_leaves = (1..=blocks)
            .map(|b| {
                let mut n = node(
                    format!("L{b}@Plane{k}"),
                    Role::Leaf,
                    4_100_000_000 + k * 100_000 + b,
                    next(),
                );
                n.plane = Some(k);
                n.prefixes.push(block_prefix(b - 1));
                let id = t.add_node(n);
                for &s in &spines {
                    t.add_link(s, id, p.fabric_gbps, None);
                }
                id
            })
            .collect();
        leaves.push(plane_leaves);
    }
    for r in 1..=p.gpus {
        let b = ((r - 1) / per_leaf) as usize;
        let id = t.add_node(node(format!("R{r}"), Role::Rnic, 4_200_000_000 + r, next()));
        for plane in &leaves {
            t.add_link(plane[b], id, p.rnic_gbps, None);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name, AS, router ID, PoD, plane, prefix and link of two small fabrics, by
    /// hand from the rules above (the topology's YAML lists them all).
    #[test]
    fn small_fabrics_by_hand() {
        let three = "name: clos3-2x2\nnodes:\n\
            \x20 - {name: S1, role: spine, asn: 65100, router_id: 100.64.3.233}\n\
            \x20 - {name: S2, role: spine, asn: 65100, router_id: 100.64.3.234}\n\
            \x20 - {name: L1, role: leaf, asn: 4200000001, router_id: 100.64.0.1, prefixes: [10.0.0.0/24]}\n\
            \x20 - {name: L2, role: leaf, asn: 4200000002, router_id: 100.64.0.2, prefixes: [10.0.1.0/24]}\n\
            links:\n";
        let links3: String = [
            "S1-L1", "S1-L1", "S2-L1", "S2-L1", "S1-L2", "S1-L2", "S2-L2", "S2-L2",
        ]
        .iter()
        .map(|p| {
            let (a, b) = p.split_once('-').unwrap();
            format!("  - {{a: {a}, b: {b}, gbps: 100}}\n")
        })
        .collect();
        assert_eq!(clos3(2, 2, 100.0, 2).to_yaml(), format!("{three}{links3}"));
        let five = "name: clos5-2pods\nnodes:\n\
            \x20 - {name: SS1@Plane1, role: super-spine, asn: 65501, router_id: 100.64.0.1, plane: 1}\n\
            \x20 - {name: SS1@Plane2, role: super-spine, asn: 65502, router_id: 100.64.0.2, plane: 2}\n\
            \x20 - {name: S1@PoD1, role: spine, asn: 65301, router_id: 100.64.0.3, pod: 1, plane: 1}\n\
            \x20 - {name: S2@PoD1, role: spine, asn: 65301, router_id: 100.64.0.4, pod: 1, plane: 2}\n\
            \x20 - {name: L1@PoD1, role: leaf, asn: 4200001001, router_id: 100.64.0.5, pod: 1, prefixes: [10.0.0.0/24]}\n\
            \x20 - {name: S1@PoD2, role: spine, asn: 65302, router_id: 100.64.0.6, pod: 2, plane: 1}\n\
            \x20 - {name: S2@PoD2, role: spine, asn: 65302, router_id: 100.64.0.7, pod: 2, plane: 2}\n\
            \x20 - {name: L1@PoD2, role: leaf, asn: 4200002001, router_id: 100.64.0.8, pod: 2, prefixes: [10.0.1.0/24]}\n\
            links:\n\
            \x20 - {a: SS1@Plane1, b: S1@PoD1, gbps: 100}\n\
            \x20 - {a: SS1@Plane2, b: S2@PoD1, gbps: 100}\n\
            \x20 - {a: S1@PoD1, b: L1@PoD1, gbps: 100}\n\
            \x20 - {a: S2@PoD1, b: L1@PoD1, gbps: 100}\n\
            \x20 - {a: SS1@Plane1, b: S1@PoD2, gbps: 100}\n\
            \x20 - {a: SS1@Plane2, b: S2@PoD2, gbps: 100}\n\
            \x20 - {a: S1@PoD2, b: L1@PoD2, gbps: 100}\n\
            \x20 - {a: S2@PoD2, b: L1@PoD2, gbps: 100}\n";
        assert_eq!(clos5(2, 1, 2, 1, 100.0).to_yaml(), five);
        // Two leaves per PoD: blocks numbered across PoDs, 10.0.0-3.0/24.
        let blocks: Vec<String> = clos5(2, 2, 1, 1, 100.0)
            .nodes
            .iter()
            .flat_map(|n| n.prefixes.iter().map(|p| format!("{} {p}", n.name)))
            .collect();
        assert_eq!(
            blocks,
            [
                "L1@PoD1 10.0.0.0/24",
                "L2@PoD1 10.0.1.0/24",
                "L1@PoD2 10.0.2.0/24",
                "L2@PoD2 10.0.3.0/24"
            ]
        );
        // Router IDs stay in 100.64.0.0/10 however many nodes.
        assert_eq!(router_id(0x40_0001), std::net::Ipv4Addr::new(100, 64, 0, 1));
        assert_eq!(
            router_id(0x3f_ffff),
            std::net::Ipv4Addr::new(100, 127, 255, 255)
        );
    }

    /// 3 RNICs in blocks of 2 on 2 planes with one spine each, by hand: leaves per block
    /// and plane, RNIC links into every plane, the two capacities.
    #[test]
    fn small_multiplane_by_hand() {
        let t = multiplane(&MultiPlane {
            gpus: 3,
            planes: 2,
            rnics_per_leaf: 2,
            spines_per_plane: 1,
            rnic_gbps: 200.0,
            fabric_gbps: 400.0,
        });
        let want = "name: multiplane-3gpus-2planes\nnodes:\n\
            \x20 - {name: S1@Plane1, role: spine, asn: 65101, router_id: 100.64.0.1, plane: 1}\n\
            \x20 - {name: L1@Plane1, role: leaf, asn: 4100100001, router_id: 100.64.0.2, plane: 1, prefixes: [10.0.0.0/24]}\n\
            \x20 - {name: L2@Plane1, role: leaf, asn: 4100100002, router_id: 100.64.0.3, plane: 1, prefixes: [10.0.1.0/24]}\n\
            \x20 - {name: S1@Plane2, role: spine, asn: 65102, router_id: 100.64.0.4, plane: 2}\n\
            \x20 - {name: L1@Plane2, role: leaf, asn: 4100200001, router_id: 100.64.0.5, plane: 2, prefixes: [10.0.0.0/24]}\n\
            \x20 - {name: L2@Plane2, role: leaf, asn: 4100200002, router_id: 100.64.0.6, plane: 2, prefixes: [10.0.1.0/24]}\n\
            \x20 - {name: R1, role: rnic, asn: 4200000001, router_id: 100.64.0.7}\n\
            \x20 - {name: R2, role: rnic, asn: 4200000002, router_id: 100.64.0.8}\n\
            \x20 - {name: R3, role: rnic, asn: 4200000003, router_id: 100.64.0.9}\n\
            links:\n\
            \x20 - {a: S1@Plane1, b: L1@Plane1, gbps: 400}\n\
            \x20 - {a: S1@Plane1, b: L2@Plane1, gbps: 400}\n\
            \x20 - {a: S1@Plane2, b: L1@Plane2, gbps: 400}\n\
            \x20 - {a: S1@Plane2, b: L2@Plane2, gbps: 400}\n\
            \x20 - {a: L1@Plane1, b: R1, gbps: 200}\n\
            \x20 - {a: L1@Plane2, b: R1, gbps: 200}\n\
            \x20 - {a: L1@Plane1, b: R2, gbps: 200}\n\
            \x20 - {a: L1@Plane2, b: R2, gbps: 200}\n\
            \x20 - {a: L2@Plane1, b: R3, gbps: 200}\n\
            \x20 - {a: L2@Plane2, b: R3, gbps: 200}\n";
        assert_eq!(t.to_yaml(), want);
    }

    #[test]
    fn check_refuses_what_no_speaker_can_run() {
        assert!(check(&clos3(2, 2, 100.0, 1)).is_ok());
        assert!(check(&Topology::new("empty")).is_err());
        assert!(check(&clos3(2, 2, 0.0, 1)).is_err());
        let mut t = clos3(1, 1, 100.0, 1);
        t.nodes[0].asn = Some(23456);
        assert!(check(&t).is_err());
    }

    #[test]
    fn sizes() {
        let t = clos3(8, 4, 100.0, 1);
        assert_eq!((t.nodes.len(), t.links.len()), (12, 32));
        let t = clos5(8, 4, 4, 4, 400.0);
        assert_eq!(t.nodes.len(), 16 + 8 * 8);
        assert_eq!(t.links.len(), 8 * 4 * 4 + 8 * 4 * 4);
        let t = multiplane(&MultiPlane {
            gpus: 10,
            planes: 2,
            rnics_per_leaf: 4,
            spines_per_plane: 2,
            ..Default::default()
        });
        // 3 blocks: 2 planes x (2 spines + 3 leaves) + 10 RNICs.
        assert_eq!(t.nodes.len(), 2 * 5 + 10);
        assert_eq!(t.links.len(), 2 * 3 * 2 + 10 * 2);
        assert_eq!(block_prefix(258).to_string(), "10.1.2.0/24");
    }
}
