//! fare's speaker against FRR bgpd (Debian `frr`) in network namespaces: sessions over
//! IPv4 and IPv6, routes both ways in both families, the Path Bandwidth community
//! attached by fare and seen by FRR.

use fare_integration::bgp::{config, wait_for, FareSpeaker, Frr};
use fare_integration::{have_root, have_tool, veth, Netns};
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

#[test]
fn bgp_frr_session_routes_both_ways_ipv4_ipv6() {
    let test = "bgp_frr_session_routes_both_ways_ipv4_ipv6";
    if !have_root(test) || !have_tool(test, "/usr/lib/frr/bgpd") || !have_tool(test, "vtysh") {
        return;
    }
    let a = Netns::new("bgpa").unwrap();
    let b = Netns::new("bgpb").unwrap();
    veth(&a, "fa0", &b, "fb0").unwrap();
    a.sh("ip addr add 10.0.0.1/30 dev fa0 && ip addr add fd00::1/64 dev fa0 nodad")
        .unwrap();
    b.sh("ip addr add 10.0.0.2/30 dev fb0 && ip addr add fd00::2/64 dev fb0 nodad")
        .unwrap();
    // Static routes stand in for zebra on the FRR side so its networks are "present".
    b.sh("ip route add blackhole 198.51.100.0/24 && ip -6 route add blackhole 2001:db8:b::/48")
        .unwrap();
    let frr = Frr::start(&b, FRR_CONF).unwrap();
    let fare = FareSpeaker::start(
        &a,
        config(
            "10.0.0.1",
            65001,
            &[("10.0.0.2", 65002, 100.0), ("fd00::2", 65002, 100.0)],
            &["192.0.2.0/24", "2001:db8:a::/48"],
        ),
    )
    .unwrap();

    let up = wait_for(Duration::from_secs(30), || {
        (fare.is_established("10.0.0.2") && fare.is_established("fd00::2")).then_some(())
    });
    assert!(
        up.is_some(),
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
    let r4 = wait_for(Duration::from_secs(20), || {
        let v = frr.json("show bgp ipv4 unicast 192.0.2.0/24 json");
        let has = v["paths"].as_array().is_some_and(|p| !p.is_empty());
        has.then_some(v)
    })
    .unwrap_or_else(|| {
        panic!(
            "FRR has no 192.0.2.0/24: {}",
            frr.vtysh("show bgp ipv4 unicast")
        )
    });
    let path = &r4["paths"][0];
    assert_eq!(path["aspath"]["string"], "65001", "{path}");
    let ext = path["extendedCommunity"]["string"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!ext.is_empty(), "FRR shows no extended community: {path}");
    let r6 = wait_for(Duration::from_secs(20), || {
        let v = frr.json("show bgp ipv6 unicast 2001:db8:a::/48 json");
        let has = v["paths"].as_array().is_some_and(|p| !p.is_empty());
        has.then_some(v)
    })
    .unwrap_or_else(|| {
        panic!(
            "FRR has no 2001:db8:a::/48: {}",
            frr.vtysh("show bgp ipv6 unicast")
        )
    });
    assert_eq!(r6["paths"][0]["aspath"]["string"], "65001");
    eprintln!("FRR sees fare's community as: {ext}");
}
