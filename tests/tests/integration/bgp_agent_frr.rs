//! `fare agent` (the binary, `dataplane: none`) peering with FRR bgpd: `fare show
//! neighbors|routes|groups --json` report the session, the learned routes and the groups.

use fare_integration::bgp::{have_frr, wait_for, Daemon, Frr, TempFile, FRR_SPINE_TWO_LINKS};
use fare_integration::{fare_bin, link, Netns};
use std::process::Stdio;
use std::time::Duration;

#[test]
fn bgp_agent_frr_show_neighbors_routes_groups() {
    let test = "bgp_agent_frr_show_neighbors_routes_groups";
    if !have_frr(test) {
        return;
    }
    let a = Netns::new("agfa").unwrap();
    let b = Netns::new("agfb").unwrap();
    link(&a, "e1", "10.0.1.1/30", &b, "s1", "10.0.1.2/30").unwrap();
    link(&a, "e2", "10.0.2.1/30", &b, "s2", "10.0.2.2/30").unwrap();
    b.sh("ip route add blackhole 198.51.100.0/24").unwrap();
    let _frr = Frr::start(&b, FRR_SPINE_TWO_LINKS).unwrap();
    let socket = std::env::temp_dir().join(format!("fare-agfa-{}.sock", std::process::id()));
    let config = TempFile::new(
        "agent.yaml",
        &format!(
            "name: leaf1
router_id: 10.255.0.1
asn: 65001
management: {{socket: {}}}
fare: {{mode: draft}}
dataplane: {{kind: none}}
bgp: {{hold_time: 9}}
neighbors:
  - {{address: 10.0.1.2, remote_as: 65100, interface: e1, bandwidth_gbps: 100}}
  - {{address: 10.0.2.2, remote_as: 65100, interface: e2, bandwidth_gbps: 50}}
prefixes: [192.0.2.0/24]
",
            socket.display()
        ),
    )
    .unwrap();
    let bin = fare_bin().unwrap();
    let _agent = Daemon(
        a.command(bin.to_str().unwrap())
            .args(["agent", "--config", config.path()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let show = |what: &str| -> serde_json::Value {
        let out = a
            .command(bin.to_str().unwrap())
            .args(["show", "--socket", socket.to_str().unwrap(), what, "--json"])
            .output();
        out.ok()
            .and_then(|o| serde_json::from_slice(&o.stdout).ok())
            .unwrap_or(serde_json::Value::Null)
    };
    let neighbors = wait_for(Duration::from_secs(30), || {
        let v = show("neighbors");
        let up = v
            .as_array()
            .is_some_and(|n| n.len() == 2 && n.iter().all(|x| x["state"] == "Established"));
        up.then_some(v)
    });
    assert!(neighbors.is_some(), "neighbors: {}", show("neighbors"));
    // FRR's prefix over both links: one group, members in link proportion... FRR sends no
    // community, so ECMP (draft §4.1).
    let groups = wait_for(Duration::from_secs(20), || {
        let v = show("groups");
        let found = v.as_array().and_then(|g| {
            g.iter()
                .find(|x| {
                    x["prefix"] == "198.51.100.0/24"
                        && x["members"].as_array().is_some_and(|m| m.len() == 2)
                })
                .cloned()
        });
        found
    })
    .unwrap_or_else(|| panic!("groups: {}", show("groups")));
    for m in groups["members"].as_array().unwrap() {
        assert_eq!(m["weight"], 1, "{groups}");
    }
    let routes = show("routes");
    assert!(routes.to_string().contains("198.51.100.0/24"), "{routes}");
    let _ = std::fs::remove_file(&socket);
}
