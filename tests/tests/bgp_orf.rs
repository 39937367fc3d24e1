//! Outbound Route Filtering (RFC 5291/5292) with FRR and between fare speakers, as
//! draft-xu-idr-fare-in-mpson §4.2 uses it: fare plays the leaf (`orf_receive` on the
//! session, several RNIC host routes originated), FRR plays the RNIC and sends its inbound prefix list as an ORF
//! (`capability orf prefix-list send`). FRR's pre-policy view of what it received
//! (`soft-reconfiguration inbound`) holds only the permitted host route: fare filtered at
//! the source. Without ORF on fare's side FRR receives every route (the control case).
//! Between two fare speakers the RNIC side sends the ORF itself (`orf_send`).

use fare::bgp::packet::{frame_len, orf, Context, Message};
use fare_integration::bgp::{
    config, output, start_capture, stop_capture, wait_for, FareSpeaker, Frr, TempFile,
};
use fare_integration::{have_root, have_tool, veth, Netns};
use std::time::Duration;

const FRR_CONF: &str = "frr defaults datacenter
hostname rnic
ip prefix-list WANT seq 5 permit 10.200.1.2/32
router bgp 65002
 bgp router-id 10.0.0.2
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 timers bgp 3 9
 neighbor 10.0.0.1 remote-as 65001
 address-family ipv4 unicast
  neighbor 10.0.0.1 activate
  neighbor 10.0.0.1 soft-reconfiguration inbound
  neighbor 10.0.0.1 capability orf prefix-list send
  neighbor 10.0.0.1 prefix-list WANT in
 exit-address-family
";

const OFFERED: [&str; 4] = [
    "10.200.1.1/32",
    "10.200.1.2/32",
    "10.200.1.3/32",
    "192.0.2.0/24",
];

/// Prefixes FRR received from fare before its own inbound policy.
fn received(frr: &Frr) -> Vec<String> {
    let v = frr.json("show bgp ipv4 unicast neighbors 10.0.0.1 received-routes json");
    let mut out: Vec<String> = v["receivedRoutes"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// Runs the session; returns what FRR received and, when tshark is here, the ORF entries
/// tshark decoded on the wire (`action match sequence prefix` per entry).
fn run(test: &str, orf_receive: bool) -> (Vec<String>, Option<Vec<String>>) {
    let a = Netns::new("orfa").unwrap();
    let b = Netns::new("orfb").unwrap();
    veth(&a, "fa0", &b, "fb0").unwrap();
    a.sh("ip addr add 10.0.0.1/30 dev fa0").unwrap();
    b.sh("ip addr add 10.0.0.2/30 dev fb0").unwrap();
    let pcap = TempFile::new("orf.pcap", "").unwrap();
    let capture = have_tool(test, "tshark").then(|| start_capture(&a, "fa0", &pcap).unwrap());
    let frr = Frr::start(&b, FRR_CONF).unwrap();
    let mut cfg = config("10.0.0.1", 65001, &[("10.0.0.2", 65002, 100.0)], &OFFERED);
    cfg.neighbors[0].orf_receive = orf_receive;
    let fare = FareSpeaker::start(&a, cfg).unwrap();
    let up = wait_for(Duration::from_secs(30), || {
        fare.is_established("10.0.0.2").then_some(())
    });
    assert!(up.is_some(), "{test}: {}", frr.vtysh("show bgp summary"));
    // Routes arrive within a few seconds; the filtered set must then stay as it is.
    let _ = wait_for(Duration::from_secs(15), || {
        let r = received(&frr);
        r.iter().any(|p| p == "10.200.1.2/32").then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    let got = received(&frr);
    eprintln!("{test}: FRR received {got:?}");
    let wire = capture.map(|c| {
        stop_capture(c);
        // Wireshark names the ORF block but decodes entries of the pre-standard type 128
        // only: take the flag/type/length from it and decode the message itself with
        // fare's codec from the captured bytes.
        let out = output(
            &a,
            "tshark",
            &[
                "-r",
                pcap.path(),
                "-Y",
                "bgp.route_refresh.orf",
                "-T",
                "fields",
                "-e",
                "bgp.route_refresh.orf.flag",
                "-e",
                "bgp.route_refresh.orf.type",
                "-e",
                "bgp.route_refresh.orf.length",
                "-e",
                "tcp.payload",
            ],
        );
        eprintln!("{test}: ORF on the wire (flag, type, length, payload): {out:?}");
        out.lines().map(str::to_string).collect()
    });
    (got, wire)
}

#[test]
fn bgp_frr_orf_prefix_list_filters_at_the_leaf() {
    let test = "bgp_frr_orf_prefix_list_filters_at_the_leaf";
    if !have_root(test) || !have_tool(test, "/usr/lib/frr/bgpd") || !have_tool(test, "vtysh") {
        return;
    }
    let (got, wire) = run(test, true);
    assert_eq!(got, ["10.200.1.2/32"], "with ORF");
    if let Some(wire) = wire {
        // FRR's ROUTE-REFRESH carried its prefix list: IMMEDIATE, Address Prefix ORF,
        // one entry ADD PERMIT seq 5 10.200.1.2/32.
        let line = wire.first().expect("no ROUTE-REFRESH with ORF on the wire");
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(&f[..3], ["1", "64", "12"], "{line}");
        let bytes: Vec<u8> = (0..f[3].len() / 2)
            .filter_map(|i| u8::from_str_radix(&f[3][2 * i..2 * i + 2], 16).ok())
            .collect();
        // The segment may carry more messages after it.
        let n = frame_len(&bytes).ok().flatten().unwrap_or(bytes.len());
        let first = &bytes[..n.min(bytes.len())];
        let Ok(Message::RouteRefresh(rr)) = Message::decode(first, Context::default()) else {
            panic!("not a ROUTE-REFRESH: {line}");
        };
        let entries = rr.orf.expect("ORF block").entries;
        assert_eq!(entries.len(), 1, "{entries:?}");
        let e = &entries[0];
        let p = e.prefix.expect("prefix entry");
        assert_eq!(
            (e.action, e.deny, p.sequence, p.prefix.to_string()),
            (orf::Action::Add, false, 5, "10.200.1.2/32".to_string())
        );
    }
    let mut all: Vec<String> = OFFERED.iter().map(|s| s.to_string()).collect();
    all.sort();
    let (got, _) = run(test, false);
    assert_eq!(got, all, "without ORF (control)");
}

/// Both ends fare: the RNIC's speaker sends the ORF itself (`orf_send`), the leaf filters.
#[test]
fn bgp_orf_between_fare_speakers() {
    let test = "bgp_orf_between_fare_speakers";
    if !have_root(test) {
        return;
    }
    let a = Netns::new("orfl").unwrap();
    let b = Netns::new("orfr").unwrap();
    veth(&a, "fa0", &b, "fb0").unwrap();
    a.sh("ip addr add 10.0.0.1/30 dev fa0").unwrap();
    b.sh("ip addr add 10.0.0.2/30 dev fb0").unwrap();
    let mut leaf = config("10.0.0.1", 65001, &[("10.0.0.2", 65002, 100.0)], &OFFERED);
    leaf.neighbors[0].orf_receive = true;
    let mut rnic = config("10.0.0.2", 65002, &[("10.0.0.1", 65001, 100.0)], &[]);
    rnic.neighbors[0].orf_send = vec![
        "10.200.1.2/32".parse().unwrap(),
        "10.200.1.3/32".parse().unwrap(),
    ];
    let _leaf = FareSpeaker::start(&a, leaf).unwrap();
    let rnic = FareSpeaker::start(&b, rnic).unwrap();
    let routes = || {
        let mut r: Vec<String> = rnic.routes().iter().map(|r| r.prefix.to_string()).collect();
        r.sort();
        r
    };
    let want = ["10.200.1.2/32", "10.200.1.3/32"];
    let got = wait_for(Duration::from_secs(20), || (routes() == want).then_some(()));
    assert!(got.is_some(), "{test}: the RNIC holds {:?}", routes());
    // And stays so (no late full table).
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(routes(), want);
}
