//! fare's speaker against FRR bgpd (Debian `frr`) in network namespaces: sessions over
//! IPv4 and IPv6, routes both ways in both families, the Path Bandwidth community
//! attached by fare and seen by FRR.

use fare_integration::bgp::{have_frr, pair, pair_config, wait_for, FareSpeaker, Frr};
use std::time::Duration;

const FRR_CONF: &str = "frr defaults datacenter
hostname frr
router bgp 65002
 bgp router-id 10.0.0.2
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 timers bgp 3 9
 neighbor 10.0.0.1 remote-as 65001
 neighbor fd00::1 remote-as 65001
 address-family ipv4 unicast
  network 198.51.100.0/24
  neighbor 10.0.0.1 activate
 exit-address-family
 address-family ipv6 unicast
  network 2001:db8:b::/48
  neighbor fd00::1 activate
 exit-address-family
";

/// FRR's `show bgp FAMILY unicast PREFIX json` once it has a path (waits up to 20 s;
/// panics with FRR's table otherwise).
fn route_at(frr: &Frr, family: &str, prefix: &str) -> serde_json::Value {
    wait_for(Duration::from_secs(20), || {
        let v = frr.json(&format!("show bgp {family} unicast {prefix} json"));
        let has = v["paths"].as_array().is_some_and(|p| !p.is_empty());
        has.then_some(v)
    })
    .unwrap_or_else(|| {
        panic!(
            "FRR has no {prefix}: {}",
            frr.vtysh(&format!("show bgp {family} unicast"))
        )
    })
}

#[test]
fn bgp_frr_session_routes_both_ways_ipv4_ipv6() {
    let test = "bgp_frr_session_routes_both_ways_ipv4_ipv6";
    if !have_frr(test) {
        return;
    }
    let (a, b) = pair("bgp").unwrap();
    // Static routes stand in for zebra on the FRR side so its networks are "present".
    b.sh("ip route add blackhole 198.51.100.0/24 && ip -6 route add blackhole 2001:db8:b::/48")
        .unwrap();
    let frr = Frr::start(&b, FRR_CONF).unwrap();
    let fare = FareSpeaker::start(&a, pair_config(65002)).unwrap();

    assert!(
        fare.established_within(Duration::from_secs(30), &["10.0.0.2", "fd00::2"]),
        "sessions did not establish: {}",
        frr.vtysh("show bgp summary")
    );

    // FRR -> fare, both families.
    let g4 = wait_for(Duration::from_secs(20), || fare.group("198.51.100.0/24"));
    let g6 = wait_for(Duration::from_secs(20), || fare.group("2001:db8:b::/48"));
    let g4 = g4.expect("IPv4 route from FRR");
    let g6 = g6.expect("IPv6 route from FRR");
    assert_eq!(g4.members[0].via, "10.0.0.2");
    assert_eq!(g6.members[0].via, "fd00::2");
    // FRR's routes carry no Path Bandwidth community: plain ECMP weight.
    assert_eq!(g4.members[0].weight, 1);

    // fare -> FRR, both families, with the Path Bandwidth community.
    let r4 = route_at(&frr, "ipv4", "192.0.2.0/24");
    let path = &r4["paths"][0];
    assert_eq!(path["aspath"]["string"], "65001", "{path}");
    let ext = path["extendedCommunity"]["string"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!ext.is_empty(), "FRR shows no extended community: {path}");
    let r6 = route_at(&frr, "ipv6", "2001:db8:a::/48");
    assert_eq!(r6["paths"][0]["aspath"]["string"], "65001");
    eprintln!("FRR sees fare's community as: {ext}");
}
