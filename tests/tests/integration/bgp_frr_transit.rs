//! leaf - spine - leaf where the spine is FRR bgpd, which does not know FARE:
//! the transitive Path Bandwidth community crosses it unchanged, the non-transitive one
//! does not (RFC 4360 §6), and the far leaf computes the weights `fare weights` gives for
//! the same topology.

use fare_integration::bgp::{config, have_frr, wait_for, FareSpeaker, Frr};
use fare_integration::{fare_bin, link, run, Netns};
use std::time::Duration;

const FRR_CONF: &str = "frr defaults datacenter
hostname s1
router bgp 65100
 bgp router-id 10.255.0.100
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.0.1.1 remote-as 65001
 neighbor 10.0.2.2 remote-as 65002
 neighbor 10.0.3.2 remote-as 65002
";

const TOPOLOGY: &str = "name: transit
nodes:
  - {name: L1, role: leaf, asn: 65001, router_id: 10.255.0.1, prefixes: [192.0.2.0/24]}
  - {name: S1, role: spine, asn: 65100, router_id: 10.255.0.100}
  - {name: L2, role: leaf, asn: 65002, router_id: 10.255.0.2}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: L2, b: S1, gbps: 100}
  - {a: L2, b: S1, gbps: 50}
";

#[test]
fn bgp_frr_transit_spine_community_crosses_unchanged() {
    let test = "bgp_frr_transit_spine_community_crosses_unchanged";
    if !have_frr(test) {
        return;
    }
    let l1 = Netns::new("trl1").unwrap();
    let s1 = Netns::new("trs1").unwrap();
    let l2 = Netns::new("trl2").unwrap();
    link(&l1, "l1s", "10.0.1.1/30", &s1, "s1a", "10.0.1.2/30").unwrap();
    link(&l2, "l2a", "10.0.2.2/30", &s1, "s1b", "10.0.2.1/30").unwrap();
    link(&l2, "l2b", "10.0.3.2/30", &s1, "s1c", "10.0.3.1/30").unwrap();
    let frr = Frr::start(&s1, FRR_CONF).unwrap();

    // L1 originates with both communities: as a super-spine-role speaker it attaches the
    // non-transitive link value as well, so we can watch FRR drop it.
    let mut c1 = config(
        "10.255.0.1",
        65001,
        &[("10.0.1.2", 65100, 100.0)],
        &["192.0.2.0/24"],
    );
    c1.policy.role = fare::topology::Role::SuperSpine;
    let leaf1 = FareSpeaker::start(&l1, c1).unwrap();
    let leaf2 = FareSpeaker::start(
        &l2,
        config(
            "10.255.0.2",
            65002,
            &[("10.0.2.1", 65100, 100.0), ("10.0.3.1", 65100, 50.0)],
            &[],
        ),
    )
    .unwrap();

    let group = wait_for(Duration::from_secs(40), || {
        leaf2.group("192.0.2.0/24").filter(|g| g.members.len() == 2)
    })
    .unwrap_or_else(|| {
        panic!(
            "leaf2 has no 2-member group; FRR: {}",
            frr.vtysh("show bgp ipv4 unicast")
        )
    });
    assert!(leaf1.is_established("10.0.1.2"));

    // FRR did receive both communities from leaf 1 (it shows unknown ones as UNK:type, subtype).
    let at_frr = frr.json("show bgp ipv4 unicast 192.0.2.0/24 json");
    let ext = at_frr["paths"][0]["extendedCommunity"]["string"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        ext.contains("UNK:1, 160") && ext.contains("UNK:65, 160"),
        "FRR got: {at_frr}"
    );

    let routes = leaf2.routes();
    let route = routes
        .iter()
        .find(|r| r.prefix.to_string() == "192.0.2.0/24")
        .expect("route in leaf2's RIB");
    assert!(route.weighted, "{route:?}");
    for path in &route.paths {
        // Exactly one community, the transitive one as leaf 1 wrote it: type 0x01,
        // subtype 0xa0, router ID 10.255.0.1, value +inf GB/s ("maximum", draft §4.2).
        assert_eq!(path.ext_communities, ["01a00aff00017c00"], "{path:?}");
    }

    // The same weights as `fare weights` for this topology.
    let topo = std::env::temp_dir().join(format!("fare-transit-{}.yaml", std::process::id()));
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let bin = fare_bin().unwrap();
    let out = run(
        bin.to_str().unwrap(),
        &["weights", topo.to_str().unwrap(), "--json"],
    )
    .unwrap();
    let _ = std::fs::remove_file(&topo);
    let expected: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = expected
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["node"] == "L2" && e["prefix"] == "192.0.2.0/24")
        .expect("fare weights has L2's group");
    let mut want: Vec<(u64, u64)> = entry["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let link = m["link"].as_str().unwrap_or_default();
            let bw = if link.ends_with("#2") { 50 } else { 100 };
            (bw, m["weight"].as_u64().unwrap())
        })
        .collect();
    let mut got: Vec<(u64, u64)> = group
        .members
        .iter()
        .map(|m| {
            let bw = if m.via == "10.0.3.1" { 50 } else { 100 };
            (bw, m.weight as u64)
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "leaf2 group {group:?} vs fare weights {entry}");
}
