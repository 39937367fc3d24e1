//! A 2-spine, 3-leaf fabric of fare speakers in namespaces (one per node, real eBGP
//! sessions over veths): every group equals `fare weights`; taking a link down changes
//! the groups to the `fare weights --fail` answer, driven by the interface event alone.

use fare_integration::bgp::{wait_for, FareSpeaker, SpeakerFabric};
use fare_integration::{fare_bin, have_root, run};
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
    let fabric = SpeakerFabric::start("fab").unwrap();
    let (ns, speakers, link_of) = (&fabric.ns, &fabric.speakers, &fabric.link_of);
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

    // Whether the speakers' groups become `want` within `secs`.
    let converges = |want: &Groups, secs: u64| {
        wait_for(Duration::from_secs(secs), || {
            (observed(speakers) == *want).then_some(())
        })
        .is_some()
    };

    let want = expected(&[]);
    assert!(
        converges(&want, 40),
        "groups\n{:#?}\n!= fare weights\n{want:#?}",
        observed(speakers)
    );

    // Fail L1-S1 from L1's side; S1 sees the carrier go.
    let want = expected(&["--fail", "L1-S1"]);
    let before = Instant::now();
    ns["L1"].sh("ip link set dev l1s1 down").unwrap();
    assert!(
        converges(&want, 20),
        "after failure: groups\n{:#?}\n!= fare weights --fail\n{want:#?}",
        observed(speakers)
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
