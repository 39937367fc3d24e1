//! fare's speaker against BIRD 2 (Debian `bird2`): sessions over IPv4 and IPv6, routes both
//! ways in both families, the Path Bandwidth community seen by BIRD.

use fare_integration::bgp::{output, pair, pair_config, wait_for, Daemon, FareSpeaker, TempFile};
use fare_integration::{have_root, have_tool};
use std::process::Stdio;
use std::time::Duration;

const BIRD_CONF: &str = "
router id 10.0.0.2;
protocol device { scan time 1; }
protocol static s4 { ipv4; route 203.0.113.0/24 blackhole; }
protocol static s6 { ipv6; route 2001:db8:d::/48 blackhole; }
protocol bgp fare4 {
  local 10.0.0.2 as 65004;
  neighbor 10.0.0.1 as 65001;
  hold time 9;
  connect retry time 1;
  ipv4 { import all; export all; };
}
protocol bgp fare6 {
  local fd00::2 as 65004;
  neighbor fd00::1 as 65001;
  hold time 9;
  connect retry time 1;
  ipv6 { import all; export all; };
}
";

#[test]
fn bgp_bird_session_routes_both_ways_ipv4_ipv6() {
    let test = "bgp_bird_session_routes_both_ways_ipv4_ipv6";
    if !have_root(test) || !have_tool(test, "bird") || !have_tool(test, "birdc") {
        return;
    }
    let (a, b) = pair("brd").unwrap();
    let conf = TempFile::new("bird.conf", BIRD_CONF).unwrap();
    let sock = TempFile::new("bird.ctl", "").unwrap();
    let _ = std::fs::remove_file(&sock.0);
    let _bird = Daemon(
        b.command("bird")
            .args(["-f", "-c", conf.path(), "-s", sock.path()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let birdc = |cmd: &str| output(&b, "birdc", &["-s", sock.path(), cmd]);

    let fare = FareSpeaker::start(&a, pair_config(65004)).unwrap();
    assert!(
        fare.established_within(Duration::from_secs(30), &["10.0.0.2", "fd00::2"]),
        "sessions not established: {}",
        birdc("show protocols")
    );

    let g4 = wait_for(Duration::from_secs(20), || fare.group("203.0.113.0/24"));
    let g6 = wait_for(Duration::from_secs(20), || fare.group("2001:db8:d::/48"));
    assert_eq!(g4.expect("IPv4 route from BIRD").members[0].via, "10.0.0.2");
    assert_eq!(g6.expect("IPv6 route from BIRD").members[0].via, "fd00::2");

    let v4 = wait_for(Duration::from_secs(20), || {
        let out = birdc("show route 192.0.2.0/24 all");
        out.contains("BGP.as_path: 65001").then_some(out)
    })
    .unwrap_or_else(|| panic!("BIRD lacks 192.0.2.0/24: {}", birdc("show route all")));
    // BIRD prints an unknown IPv4-address-specific community as (unknown 0xTTSS, global,
    // local): type 0x01, subtype 0xa0, router ID, binary16 +inf (0x7c00 = 31744).
    assert!(
        v4.contains("BGP.ext_community: (unknown 0x1a0, 10.0.0.1, 31744)"),
        "{v4}"
    );
    let v6 = wait_for(Duration::from_secs(20), || {
        let out = birdc("show route 2001:db8:a::/48 all");
        out.contains("BGP.as_path: 65001").then_some(out)
    });
    assert!(
        v6.is_some(),
        "BIRD lacks 2001:db8:a::/48: {}",
        birdc("show route all")
    );
}
