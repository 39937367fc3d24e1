//! Session protections against FRR bgpd, and an independent decoder's view of our bytes:
//! - GTSM (RFC 5082) and TCP MD5 (RFC 2385) on both sides: the session comes up and routes
//!   flow; tshark, capturing the whole session, decodes every BGP message with no
//!   malformed-packet mark;
//! - a wrong MD5 key on fare's side: the session never establishes;
//! - GTSM on fare's side only: FRR's single-hop eBGP packets arrive with TTL 1, below
//!   fare's minimum of 254, so the session never establishes.
//!
//! Run: `cargo test -p fare-integration --test integration bgp_frr_security:: -- --nocapture` (root).

use fare::bgp::socket::Protection;
use fare_integration::bgp::{
    config, have_frr, output, pair_v4, start_capture, stop_capture, wait_for, FareSpeaker, Frr,
    TempFile,
};
use fare_integration::{have_tool, Netns};
use std::time::Duration;

fn frr_conf(gtsm: bool, md5: Option<&str>) -> String {
    let mut c = String::from(
        "frr defaults datacenter
hostname frr
router bgp 65002
 bgp router-id 10.0.0.2
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.0.0.1 remote-as 65001
",
    );
    if gtsm {
        c.push_str(" neighbor 10.0.0.1 ttl-security hops 1\n");
    }
    if let Some(k) = md5 {
        c.push_str(&format!(" neighbor 10.0.0.1 password {k}\n"));
    }
    c.push_str(
        " address-family ipv4 unicast
  network 198.51.100.0/24
 exit-address-family
",
    );
    c
}

fn setup(tag: &str, frr: &str) -> (Netns, Netns, Frr) {
    let (a, b) = pair_v4(tag).unwrap();
    b.sh("ip route add blackhole 198.51.100.0/24").unwrap();
    let f = Frr::start(&b, frr).unwrap();
    (a, b, f)
}

/// fare in `a`, peering with FRR at 10.0.0.2 with GTSM on or off and an MD5 key or none.
fn speaker(a: &Netns, gtsm: bool, md5_key: Option<&str>) -> FareSpeaker {
    let protection = Protection {
        gtsm,
        md5_key: md5_key.map(String::from),
    };
    let mut c = config(
        "10.0.0.1",
        65001,
        &[("10.0.0.2", 65002, 100.0)],
        &["192.0.2.0/24"],
    );
    c.neighbors[0].protection = protection;
    FareSpeaker::start(a, c).unwrap()
}

#[test]
fn bgp_frr_gtsm_md5_session_and_tshark_sees_no_malformed_packet() {
    let test = "bgp_frr_gtsm_md5_session_and_tshark_sees_no_malformed_packet";
    if !have_frr(test) {
        return;
    }
    let tshark = have_tool(test, "tshark");
    let (a, b) = pair_v4("sect").unwrap();
    b.sh("ip route add blackhole 198.51.100.0/24").unwrap();
    let pcap = TempFile::new("bgp.pcap", "").unwrap();
    let capture = tshark.then(|| start_capture(&a, "pa0", &pcap).unwrap());
    let frr = Frr::start(&b, &frr_conf(true, Some("fare-secret"))).unwrap();
    let fare = speaker(&a, true, Some("fare-secret"));
    let up = fare.established_within(Duration::from_secs(30), &["10.0.0.2"]);
    assert!(up, "no session: {}", frr.vtysh("show bgp summary"));
    let g = wait_for(Duration::from_secs(20), || fare.group("198.51.100.0/24"));
    assert!(g.is_some(), "no route from FRR");
    let r = wait_for(Duration::from_secs(20), || {
        let v = frr.json("show bgp ipv4 unicast 192.0.2.0/24 json");
        v["paths"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
            .then_some(v)
    });
    assert!(r.is_some(), "FRR has no 192.0.2.0/24");
    let nbr = frr.json("show bgp neighbors 10.0.0.1 json");
    eprintln!("FRR neighbor state: {}", nbr["10.0.0.1"]["bgpState"]);
    // A few keepalives into the capture.
    std::thread::sleep(Duration::from_secs(4));
    let Some(capture) = capture else {
        return; // SKIPPED already printed by have_tool
    };
    stop_capture(capture);
    let count = |filter: &str| -> usize {
        output(&a, "tshark", &["-r", pcap.path(), "-Y", filter])
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count()
    };
    let opens = count("bgp.type == 1");
    let updates = count("bgp.type == 2");
    let keepalives = count("bgp.type == 4");
    let malformed = count("_ws.malformed || _ws.expert.severity == error");
    eprintln!(
        "tshark: {opens} OPEN, {updates} UPDATE, {keepalives} KEEPALIVE frames, {malformed} malformed/error"
    );
    assert!(opens >= 2, "tshark decoded {opens} OPEN frames");
    assert!(updates >= 2, "tshark decoded {updates} UPDATE frames");
    assert!(
        keepalives >= 2,
        "tshark decoded {keepalives} KEEPALIVE frames"
    );
    assert_eq!(
        malformed,
        0,
        "tshark marks frames malformed:\n{}",
        output(
            &a,
            "tshark",
            &[
                "-r",
                pcap.path(),
                "-V",
                "-Y",
                "_ws.malformed || _ws.expert.severity == error"
            ]
        )
    );
    // fare's Path Bandwidth community decoded by tshark as an extended community.
    let ext = output(
        &a,
        "tshark",
        &[
            "-r",
            pcap.path(),
            "-Y",
            "bgp.type == 2 && ip.src == 10.0.0.1",
            "-T",
            "fields",
            "-e",
            "bgp.ext_com.type",
        ],
    );
    assert!(
        ext.lines().any(|l| !l.trim().is_empty()),
        "no extended community in fare's UPDATEs"
    );
}

#[test]
fn bgp_frr_md5_key_mismatch_never_establishes() {
    let test = "bgp_frr_md5_key_mismatch_never_establishes";
    if !have_frr(test) {
        return;
    }
    let (a, _b, frr) = setup("md5x", &frr_conf(false, Some("right-key")));
    let fare = speaker(&a, false, Some("wrong-key"));
    let up = fare.established_within(Duration::from_secs(8), &["10.0.0.2"]);
    assert!(!up, "session up despite the MD5 key mismatch");
    let state = frr.json("show bgp neighbors 10.0.0.1 json")["10.0.0.1"]["bgpState"].clone();
    assert_ne!(state, "Established", "FRR: {state}");
    // With matching keys the session comes up: see the first test.
}

#[test]
fn bgp_frr_gtsm_rejects_a_peer_sending_ttl_1() {
    let test = "bgp_frr_gtsm_rejects_a_peer_sending_ttl_1";
    if !have_frr(test) {
        return;
    }
    // FRR without ttl-security sends single-hop eBGP with TTL 1.
    let (a, _b, frr) = setup("gtsx", &frr_conf(false, None));
    let fare = speaker(&a, true, None);
    let up = fare.established_within(Duration::from_secs(8), &["10.0.0.2"]);
    assert!(
        !up,
        "session up although FRR's packets arrive with TTL 1: {}",
        frr.vtysh("show bgp summary")
    );
}
