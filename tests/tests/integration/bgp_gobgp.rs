//! fare's speaker against GoBGP (Debian `gobgpd`): sessions over IPv4 and IPv6, routes both
//! ways in both families, the Path Bandwidth community seen by GoBGP.

use fare_integration::bgp::{output, pair, pair_config, wait_for, Daemon, FareSpeaker, TempFile};
use fare_integration::{have_root, have_tool};
use std::process::Stdio;
use std::time::Duration;

/// gobgpd's configuration: AS 65003, a session to fare over each family.
fn gobgp_conf() -> String {
    let mut conf = "[global.config]\n  as = 65003\n  router-id = \"10.0.0.2\"\n".to_string();
    for (address, family) in [("10.0.0.1", "ipv4-unicast"), ("fd00::1", "ipv6-unicast")] {
        conf += &format!(
            r#"[[neighbors]]
  [neighbors.config]
    neighbor-address = "{address}"
    peer-as = 65001
  [neighbors.timers.config]
    connect-retry = 1
    hold-time = 9
    keepalive-interval = 3
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "{family}"
"#
        );
    }
    conf
}

#[test]
fn bgp_gobgp_session_routes_both_ways_ipv4_ipv6() {
    let test = "bgp_gobgp_session_routes_both_ways_ipv4_ipv6";
    if !have_root(test) || !have_tool(test, "gobgpd") || !have_tool(test, "gobgp") {
        return;
    }
    let (a, b) = pair("gob").unwrap();
    let conf = TempFile::new("gobgpd.toml", &gobgp_conf()).unwrap();
    let _gobgpd = Daemon(
        b.command("gobgpd")
            .args([
                "-f",
                conf.path(),
                "--api-hosts",
                "127.0.0.1:50051",
                "--pprof-disable",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let gobgp = |args: &[&str]| {
        let mut full = vec!["-u", "127.0.0.1", "-p", "50051"];
        full.extend_from_slice(args);
        output(&b, "gobgp", &full)
    };
    wait_for(Duration::from_secs(10), || {
        (!gobgp(&["global"]).is_empty()).then_some(())
    })
    .expect("gobgpd API up");
    gobgp(&["global", "rib", "add", "203.0.113.0/24", "-a", "ipv4"]);
    gobgp(&["global", "rib", "add", "2001:db8:c::/48", "-a", "ipv6"]);

    let fare = FareSpeaker::start(&a, pair_config(65003)).unwrap();
    assert!(
        fare.established_within(Duration::from_secs(30), &["10.0.0.2", "fd00::2"]),
        "sessions not established: {}",
        gobgp(&["neighbor"])
    );

    let g4 = wait_for(Duration::from_secs(20), || fare.group("203.0.113.0/24"));
    let g6 = wait_for(Duration::from_secs(20), || fare.group("2001:db8:c::/48"));
    assert_eq!(
        g4.expect("IPv4 route from GoBGP").members[0].via,
        "10.0.0.2"
    );
    assert_eq!(g6.expect("IPv6 route from GoBGP").members[0].via, "fd00::2");

    let v4 = wait_for(Duration::from_secs(20), || {
        let out = gobgp(&["global", "rib", "-a", "ipv4", "192.0.2.0/24", "-j"]);
        out.contains("192.0.2.0/24").then_some(out)
    })
    .unwrap_or_else(|| {
        panic!(
            "GoBGP lacks 192.0.2.0/24: {}",
            gobgp(&["global", "rib", "-a", "ipv4"])
        )
    });
    let json: serde_json::Value = serde_json::from_str(&v4).unwrap();
    let text = json.to_string();
    // GoBGP keeps unknown extended communities as type/subtype/value.
    assert!(
        text.contains("\"type\":1") && text.contains("\"subtype\":160"),
        "{text}"
    );
    let v6 = wait_for(Duration::from_secs(20), || {
        let out = gobgp(&["global", "rib", "-a", "ipv6"]);
        out.contains("2001:db8:a::/48").then_some(out)
    });
    assert!(
        v6.is_some(),
        "GoBGP lacks 2001:db8:a::/48: {}",
        gobgp(&["global", "rib", "-a", "ipv6"])
    );
}
