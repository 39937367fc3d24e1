//! A 2-spine, 3-leaf fabric of fare speakers in namespaces (one per node, real eBGP
//! sessions over veths): every group equals `fare weights`; taking a link down changes
//! the groups to the `fare weights --fail` answer, driven by the interface event alone.

use fare_integration::bgp::{config, wait_for, FareSpeaker};
use fare_integration::{fare_bin, have_root, run, veth, Netns};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const TOPOLOGY: &str = "name: fabric
nodes:
  - {name: L1, role: leaf, asn: 65001, router_id: 10.255.0.1, prefixes: [10.1.1.0/24]}
  - {name: L2, role: leaf, asn: 65002, router_id: 10.255.0.2, prefixes: [10.1.2.0/24]}
  - {name: L3, role: leaf, asn: 65003, router_id: 10.255.0.3, prefixes: [10.1.3.0/24]}
  - {name: S1, role: spine, asn: 65100, router_id: 10.255.1.1}
  - {name: S2, role: spine, asn: 65100, router_id: 10.255.1.2}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: L1, b: S2, gbps: 100}
  - {a: L2, b: S1, gbps: 100}
  - {a: L2, b: S2, gbps: 50}
  - {a: L3, b: S1, gbps: 100}
  - {a: L3, b: S2, gbps: 40}
";

struct Node {
    name: &'static str,
    asn: u32,
    rid: &'static str,
    prefixes: Vec<&'static str>,
}

/// (node, prefix) -> sorted (link name, weight).
type Groups = BTreeMap<(String, String), Vec<(String, u64)>>;

fn expected(args: &[&str]) -> Groups {
    let topo = std::env::temp_dir().join(format!("fare-fabric-{}.yaml", std::process::id()));
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let bin = fare_bin().unwrap();
    let mut full = vec!["weights", topo.to_str().unwrap(), "--json"];
    full.extend_from_slice(args);
    let out = run(bin.to_str().unwrap(), &full).unwrap();
    let _ = std::fs::remove_file(&topo);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut groups = Groups::new();
    for e in v.as_array().unwrap() {
        let mut members: Vec<(String, u64)> = e["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["link"].as_str().unwrap().to_string(),
                    m["weight"].as_u64().unwrap(),
                )
            })
            .collect();
        members.sort();
        groups.insert(
            (
                e["node"].as_str().unwrap().to_string(),
                e["prefix"].as_str().unwrap().to_string(),
            ),
            members,
        );
    }
    groups
}

#[test]
fn bgp_fabric_matches_fare_weights_and_converges_on_link_down() {
    let test = "bgp_fabric_matches_fare_weights_and_converges_on_link_down";
    if !have_root(test) {
        return;
    }
    let nodes = [
        Node {
            name: "L1",
            asn: 65001,
            rid: "10.255.0.1",
            prefixes: vec!["10.1.1.0/24"],
        },
        Node {
            name: "L2",
            asn: 65002,
            rid: "10.255.0.2",
            prefixes: vec!["10.1.2.0/24"],
        },
        Node {
            name: "L3",
            asn: 65003,
            rid: "10.255.0.3",
            prefixes: vec!["10.1.3.0/24"],
        },
        Node {
            name: "S1",
            asn: 65100,
            rid: "10.255.1.1",
            prefixes: vec![],
        },
        Node {
            name: "S2",
            asn: 65100,
            rid: "10.255.1.2",
            prefixes: vec![],
        },
    ];
    let links = [
        ("L1", "S1", 100.0),
        ("L1", "S2", 100.0),
        ("L2", "S1", 100.0),
        ("L2", "S2", 50.0),
        ("L3", "S1", 100.0),
        ("L3", "S2", 40.0),
    ];
    let ns: BTreeMap<&str, Netns> = nodes
        .iter()
        .map(|n| {
            (
                n.name,
                Netns::new(&format!("fab{}", n.name.to_lowercase())).unwrap(),
            )
        })
        .collect();
    // Per node: (neighbor address, remote AS, bandwidth, interface); per address: link name.
    let mut neighbors: BTreeMap<&str, Vec<(String, u32, f64, String)>> = BTreeMap::new();
    let mut link_of: BTreeMap<String, String> = BTreeMap::new();
    let asn = |name: &str| nodes.iter().find(|n| n.name == name).unwrap().asn;
    for (i, (a, b, bw)) in links.iter().enumerate() {
        let (ia, ib) = (
            format!("{}{}", a.to_lowercase(), b.to_lowercase()),
            format!("{}{}", b.to_lowercase(), a.to_lowercase()),
        );
        veth(&ns[a], &ia, &ns[b], &ib).unwrap();
        let (aa, ba) = (format!("10.0.{i}.1"), format!("10.0.{i}.2"));
        ns[a].sh(&format!("ip addr add {aa}/30 dev {ia}")).unwrap();
        ns[b].sh(&format!("ip addr add {ba}/30 dev {ib}")).unwrap();
        neighbors
            .entry(a)
            .or_default()
            .push((ba.clone(), asn(b), *bw, ia.clone()));
        neighbors
            .entry(b)
            .or_default()
            .push((aa.clone(), asn(a), *bw, ib.clone()));
        link_of.insert(ba, format!("{a}-{b}"));
        link_of.insert(aa, format!("{a}-{b}"));
    }
    let mut speakers = BTreeMap::new();
    for n in &nodes {
        let list: Vec<(&str, u32, f64)> = neighbors[n.name]
            .iter()
            .map(|(a, asn, bw, _)| (a.as_str(), *asn, *bw))
            .collect();
        let mut c = config(n.rid, n.asn, &list, &n.prefixes);
        for (spec, (_, _, _, ifname)) in c.neighbors.iter_mut().zip(&neighbors[n.name]) {
            spec.interface = Some(ifname.clone());
        }
        if n.name.starts_with('S') {
            c.policy.role = fare::topology::Role::Spine;
        }
        speakers.insert(n.name, FareSpeaker::start(&ns[n.name], c).unwrap());
    }
    let observed = |speakers: &BTreeMap<&str, FareSpeaker>| -> Groups {
        let mut g = Groups::new();
        for (name, s) in speakers {
            let Ok(o) = s.observed.lock() else { continue };
            for (prefix, group) in &o.groups {
                let mut members: Vec<(String, u64)> = group
                    .members
                    .iter()
                    .map(|m| {
                        (
                            link_of.get(&m.via).cloned().unwrap_or_default(),
                            m.weight as u64,
                        )
                    })
                    .collect();
                members.sort();
                g.insert((name.to_string(), prefix.to_string()), members);
            }
        }
        g
    };

    let want = expected(&[]);
    let converged = wait_for(Duration::from_secs(40), || {
        let got = observed(&speakers);
        (got == want).then_some(())
    });
    assert!(
        converged.is_some(),
        "groups\n{:#?}\n!= fare weights\n{want:#?}",
        observed(&speakers)
    );

    // Fail L1-S1 from L1's side; S1 sees the carrier go.
    let want = expected(&["--fail", "L1-S1"]);
    let before = Instant::now();
    ns["L1"].sh("ip link set dev l1s1 down").unwrap();
    let converged = wait_for(Duration::from_secs(20), || {
        let got = observed(&speakers);
        (got == want).then_some(())
    });
    assert!(
        converged.is_some(),
        "after failure: groups\n{:#?}\n!= fare weights --fail\n{want:#?}",
        observed(&speakers)
    );
    let event_at = before - speakers["L1"].started;
    let last = speakers
        .values()
        .filter_map(|s| {
            s.observed
                .lock()
                .ok()?
                .group_changes
                .last()
                .map(|c| c.0 + s.started.duration_since(speakers["L1"].started))
        })
        .max()
        .unwrap();
    eprintln!(
        "link down -> last group update: {:?}",
        last.saturating_sub(event_at)
    );
}
