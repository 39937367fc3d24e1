//! RFC 10005 Link Bandwidth between fare agents and FRR, both ways, in namespaces:
//! - an FRR spine sets `extcommunity bandwidth` per session -> the fare leaf (accept)
//!   weighs each path by min(its link, the value received), as a FARE leaf does with
//!   the Path Bandwidth community;
//! - a fare spine sends the value it computed (send) -> FRR's UCMP installs kernel
//!   nexthop weights in that ratio.
//!
//! Expected values are computed by hand below from RFC 10005 (bytes/s) and the draft's
//! rules; FRR maps bandwidths to weights as floor(100 x bw / total) (its documented
//! 1..100 range), which the kernel's nexthop group shows.

use fare_integration::bgp::{have_frr, wait_for, Daemon, Frr, TempFile};
use fare_integration::{fare_bin, link, Netns};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// One `fare agent` (no data plane) in `ns`, its management socket, killed on drop.
struct Agent {
    _daemon: Daemon,
    _config: TempFile,
    socket: PathBuf,
    ns_name: String,
}

impl Agent {
    fn start(ns: &Netns, tag: &str, body: &str) -> Agent {
        let socket = std::env::temp_dir().join(format!("fare-{tag}-{}.sock", std::process::id()));
        let config = TempFile::new(
            &format!("{tag}.yaml"),
            &format!(
                "management: {{socket: {}}}\ndataplane: {{kind: none}}\nbgp: {{hold_time: 9}}\n{body}",
                socket.display()
            ),
        )
        .unwrap();
        let bin = fare_bin().unwrap();
        let daemon = Daemon(
            ns.command(bin.to_str().unwrap())
                .args(["agent", "--config", config.path()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        Agent {
            _daemon: daemon,
            _config: config,
            socket,
            ns_name: ns.name.clone(),
        }
    }

    fn show(&self, what: &str) -> Value {
        let bin = fare_bin().unwrap();
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &self.ns_name])
            .arg(bin)
            .args(["show", "--socket"])
            .arg(Path::new(&self.socket))
            .args([what, "--json"])
            .output();
        out.ok()
            .and_then(|o| serde_json::from_slice(&o.stdout).ok())
            .unwrap_or(Value::Null)
    }

    /// The members' (neighbor, weight) of `prefix`'s group once it has `n` members.
    fn group(&self, prefix: &str, n: usize) -> Option<Vec<(String, u64)>> {
        let v = self.show("groups");
        let g = v
            .as_array()?
            .iter()
            .find(|x| x["prefix"] == prefix)?
            .clone();
        let members: Vec<(String, u64)> = g["members"]
            .as_array()?
            .iter()
            .map(|m| {
                (
                    m["via"].as_str().unwrap_or_default().to_string(),
                    m["weight"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        (members.len() == n).then_some(members)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}

const FRR_SPINE: &str = "frr defaults datacenter
hostname s1
router bgp 65100
 bgp router-id 10.255.0.100
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.0.1.1 remote-as 65001
 neighbor 10.0.2.1 remote-as 65001
 address-family ipv4 unicast
  network 198.51.100.0/24
  neighbor 10.0.1.1 route-map LB2000 out
  neighbor 10.0.2.1 route-map LB1000 out
 exit-address-family
route-map LB2000 permit 10
 set extcommunity bandwidth 2000
route-map LB1000 permit 10
 set extcommunity bandwidth 1000
";

/// The nexthops (gateway, weight) of `ns`'s kernel route to `prefix`, sorted; None while
/// it has no multipath route.
fn kernel_hops(ns: &Netns, prefix: &str) -> Option<Vec<(String, u64)>> {
    let out = ns.exec("ip", &["-j", "route", "show", prefix]).ok()?;
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    let hops = v.as_array()?.first()?["nexthops"].as_array()?.clone();
    let mut got: Vec<(String, u64)> = hops
        .iter()
        .map(|h| {
            let gw = h["gateway"].as_str().unwrap_or_default().to_string();
            (gw, h["weight"].as_u64().unwrap_or(1))
        })
        .collect();
    got.sort();
    Some(got)
}

/// FRR spine -> fare leaf. FRR sends 2000 Mbps (2.5e8 bytes/s = 2 Gbps) over a 1.5 Gbps
/// link and 1000 Mbps (1 Gbps) over a 100 Gbps link. The leaf's path bandwidths are
/// min(1.5, 2) = 1.5 and min(100, 1) = 1: weights 3:2 (without `accept`: ECMP 1:1).
/// The two sessions reach one node, and FRR's values are per session (RFC 10005), so the
/// leaf reads them per session (`parallel_links: session`, docs/weights.md "Mixed
/// fabrics").
#[test]
fn bgp_frr_link_bandwidth_frr_spine_to_fare_leaf() {
    let test = "bgp_frr_link_bandwidth_frr_spine_to_fare_leaf";
    if !have_frr(test) {
        return;
    }
    let leaf = Netns::new("lbwa").unwrap();
    let spine = Netns::new("lbwb").unwrap();
    link(&leaf, "e1", "10.0.1.1/30", &spine, "s1", "10.0.1.2/30").unwrap();
    link(&leaf, "e2", "10.0.2.1/30", &spine, "s2", "10.0.2.2/30").unwrap();
    spine.sh("ip route add blackhole 198.51.100.0/24").unwrap();
    let _frr = Frr::start(&spine, FRR_SPINE).unwrap();
    let agent = Agent::start(
        &leaf,
        &format!("lbwa-{}", std::process::id()),
        "name: leaf1
router_id: 10.255.0.1
asn: 65001
fare: {mode: draft, parallel_links: session}
neighbors:
  - {address: 10.0.1.2, remote_as: 65100, interface: e1, bandwidth_gbps: 1.5, link_bandwidth: accept}
  - {address: 10.0.2.2, remote_as: 65100, interface: e2, bandwidth_gbps: 100, link_bandwidth: accept}
",
    );
    let want = vec![("10.0.1.2".to_string(), 3), ("10.0.2.2".to_string(), 2)];
    let got = wait_for(Duration::from_secs(40), || {
        agent
            .group("198.51.100.0/24", 2)
            .filter(|m| m.iter().all(|x| x.1 > 1))
    });
    let mut got = got.unwrap_or_else(|| panic!("groups: {}", agent.show("groups")));
    got.sort();
    assert_eq!(got, want, "groups: {}", agent.show("groups"));
    let neighbors = agent.show("neighbors");
    for n in neighbors.as_array().unwrap() {
        assert_eq!(n["link_bandwidth_ignored"], 0, "{neighbors}");
    }
}

/// FRR leaf with zebra: two sessions to the fare spine.
const FRR_LEAF: &str = "frr defaults datacenter
hostname l1
router bgp 65201
 bgp router-id 10.255.0.201
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.1.1.1 remote-as 65100
 neighbor 10.1.2.1 remote-as 65100
";

/// fare leaf (AS 65001, originates 203.0.113.0/24) -15 Gbps- fare spine =20 and 10 Gbps=
/// FRR leaf. Draft mode: the spine's path is min(15, max) = 15 Gbps, advertised as the
/// sum 15; toward each FRR session the Link Bandwidth is min(15, link): 15 and 10 Gbps.
/// FRR's weights: floor(100 x bw / total) of the binary32 values, 60 and 39, in the
/// kernel's nexthop group of the route.
#[test]
fn bgp_frr_link_bandwidth_fare_spine_to_frr_leaf() {
    let test = "bgp_frr_link_bandwidth_fare_spine_to_frr_leaf";
    if !have_frr(test) {
        return;
    }
    let d = Netns::new("lbwd").unwrap();
    let s = Netns::new("lbws").unwrap();
    let l = Netns::new("lbwl").unwrap();
    link(&d, "u1", "10.1.0.1/30", &s, "d1", "10.1.0.2/30").unwrap();
    link(&s, "l1", "10.1.1.1/30", &l, "s1", "10.1.1.2/30").unwrap();
    link(&s, "l2", "10.1.2.1/30", &l, "s2", "10.1.2.2/30").unwrap();
    let pid = std::process::id();
    let _leaf = Agent::start(
        &d,
        &format!("lbwd-{pid}"),
        "name: d1
router_id: 10.255.0.1
asn: 65001
fare: {mode: draft}
neighbors:
  - {address: 10.1.0.2, remote_as: 65100, interface: u1, bandwidth_gbps: 15}
prefixes: [203.0.113.0/24]
",
    );
    let spine = Agent::start(
        &s,
        &format!("lbws-{pid}"),
        "name: s1
router_id: 10.255.0.100
asn: 65100
fare: {mode: draft, role: spine}
neighbors:
  - {address: 10.1.0.1, remote_as: 65001, interface: d1, bandwidth_gbps: 15}
  - {address: 10.1.1.2, remote_as: 65201, interface: l1, bandwidth_gbps: 20, link_bandwidth: send}
  - {address: 10.1.2.2, remote_as: 65201, interface: l2, bandwidth_gbps: 10, link_bandwidth: send}
",
    );
    let frr = Frr::start_with_zebra(&l, FRR_LEAF).unwrap();
    let kernel = || {
        let got = kernel_hops(&l, "203.0.113.0/24")?;
        (got.len() == 2 && got[0].1 != got[1].1).then_some(got)
    };
    let got = wait_for(Duration::from_secs(60), kernel).unwrap_or_else(|| {
        panic!(
            "kernel route: {:?}\nFRR: {}\nspine: {}",
            l.exec("ip", &["route"]).map(|o| o.stdout),
            frr.vtysh("show bgp ipv4 unicast 203.0.113.0/24"),
            spine.show("neighbors")
        )
    });
    // On the wire 15 Gbps is the binary32 nearest 1.875e9 bytes/s, 1875000064; 10 Gbps
    // is 1.25e9 exactly. FRR: floor(100 x 1875000064 / 3125000064) = 60 and
    // floor(100 x 1.25e9 / 3125000064) = 39 (the 3:2 of the model within FRR's 1/100).
    let bytes = |gbps: f64| (gbps * 1e9 / 8.0) as f32 as u64;
    let total = bytes(15.0) + bytes(10.0);
    let frr_weight = |gbps: f64| 100 * bytes(gbps) / total;
    assert_eq!((frr_weight(15.0), frr_weight(10.0)), (60, 39));
    let want = vec![
        ("10.1.1.1".to_string(), frr_weight(15.0)),
        ("10.1.2.1".to_string(), frr_weight(10.0)),
    ];
    assert_eq!(
        got,
        want,
        "{}",
        frr.vtysh("show bgp ipv4 unicast 203.0.113.0/24")
    );
}

/// Measured against FRR 8.4 for the model (control/model/src/link_bandwidth.rs): the
/// weight of a path whose share is under 1 %, and what `set extcommunity bandwidth
/// cumulative` sends. FRR origin A (AS 65300) =3 sessions=> FRR R (AS 65400, zebra)
/// -> fare agent C (AS 65500, `link_bandwidth: accept`). A sets per session
/// `extcommunity bandwidth` 100, 25600 and 25600 Mbps: 12,500,000, 3,200,000,000 and
/// 3,200,000,000 bytes/s (all exact in binary32: under 2^24, and 12,500,000 x 256).
///
/// (a) R's UCMP weights, floor(100 x bw / total) with total 6,412,500,000:
///     100 x 12.5e6 / 6.4125e9 = 0.19 -> 0; 100 x 3.2e9 / 6.4125e9 = 49.9 -> 49.
/// (b) R's cumulative value: FRR 8.4 sums its multipaths' values as a 64-bit count, casts
///     it to 32 bits (route_set_ecommunity_lb: `(uint32_t)bgp_path_info_mpath_cumbw`)
///     and sends the nearest binary32: 6,412,500,000 - 2^32 = 2,117,532,704, spacing
///     128 there: 2,117,532,672 bytes/s (16.94 Gbps, where the sum is 51.3 Gbps).
///
/// Measured: zebra and the kernel show weight 1 for the 0 (the model's "at least 1"),
/// with kernel nexthop objects and with plain multipath routes (the lab's zebra), and C
/// receives 2,117,532,672.
#[test]
fn bgp_frr_link_bandwidth_small_share_and_cumulative() {
    let test = "bgp_frr_link_bandwidth_small_share_and_cumulative";
    if !have_frr(test) {
        return;
    }
    for zebra in [
        "hostname r\n",
        "hostname r\nno zebra nexthop kernel enable\n",
    ] {
        small_share_and_cumulative(test, zebra);
    }
}

fn small_share_and_cumulative(test: &str, zebra: &str) {
    let a = Netns::new("lbsa").unwrap();
    let r = Netns::new("lbsr").unwrap();
    let c = Netns::new("lbsc").unwrap();
    for k in 1..=3 {
        let (ai, ri) = (format!("r{k}"), format!("a{k}"));
        let (aa, ra) = (format!("10.3.{k}.1/30"), format!("10.3.{k}.2/30"));
        link(&a, &ai, &aa, &r, &ri, &ra).unwrap();
    }
    link(&r, "c1", "10.4.0.1/30", &c, "r1", "10.4.0.2/30").unwrap();
    a.sh("ip route add blackhole 198.51.100.0/24").unwrap();
    let _fa = Frr::start(&a, FRR_ORIGIN).unwrap();
    let fr = Frr::start_with_zebra_conf(&r, FRR_MIDDLE, zebra).unwrap();
    let agent = Agent::start(
        &c,
        &format!("lbsc-{}", std::process::id()),
        "name: c1
router_id: 10.255.0.50
asn: 65500
fare: {mode: draft}
neighbors:
  - {address: 10.4.0.1, remote_as: 65400, interface: r1, bandwidth_gbps: 1000, link_bandwidth: accept}
",
    );
    let bytes = |mbps: u64| mbps * 1_000_000 / 8;
    let sent = [bytes(100), bytes(25600), bytes(25600)];
    let total: u64 = sent.iter().sum();
    assert_eq!(total, 6_412_500_000);
    let floor_percent: Vec<u64> = sent.iter().map(|&b| 100 * b / total).collect();
    assert_eq!(floor_percent, [0, 49, 49]);

    // (a) R's kernel route and zebra's view, once it has its three nexthops.
    let kernel = || {
        let got = kernel_hops(&r, "198.51.100.0/24")?;
        (got.len() == 3 && got.iter().any(|h| h.1 > 1)).then_some(got)
    };
    let got = wait_for(Duration::from_secs(60), kernel).unwrap_or_else(|| {
        panic!(
            "kernel: {:?}\nFRR: {}",
            r.exec("ip", &["route"]).map(|o| o.stdout),
            fr.vtysh("show bgp ipv4 unicast 198.51.100.0/24")
        )
    });
    let zebra_json = fr.json("show ip route 198.51.100.0/24 json");
    eprintln!("{test} ({zebra:?}): kernel {got:?}\nzebra {zebra_json}");
    let want_kernel: Vec<(String, u64)> = vec![
        ("10.3.1.1".into(), 1),
        ("10.3.2.1".into(), 49),
        ("10.3.3.1".into(), 49),
    ];
    assert_eq!(got, want_kernel, "zebra: {zebra_json}");

    // (b) What C received from R.
    let want_bytes = (total as u32) as f32 as u64;
    assert_eq!(want_bytes, 2_117_532_672);
    let received = wait_for(Duration::from_secs(60), || {
        let v = agent.show("routes");
        let paths = v
            .as_array()?
            .iter()
            .find(|x| x["prefix"] == "198.51.100.0/24")?["paths"]
            .as_array()?
            .clone();
        paths.first()?["path_bandwidth_gbps"].as_f64()
    });
    let received = received.unwrap_or_else(|| panic!("routes: {}", agent.show("routes")));
    assert_eq!(
        (received * 1.25e8).round() as u64,
        want_bytes,
        "C received {received} Gbps; R: {}",
        fr.vtysh("show bgp ipv4 unicast 198.51.100.0/24")
    );
}

/// FRR origin A: one Link Bandwidth per session toward R.
const FRR_ORIGIN: &str = "frr defaults datacenter
hostname a
router bgp 65300
 bgp router-id 10.255.0.30
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.3.1.2 remote-as 65400
 neighbor 10.3.2.2 remote-as 65400
 neighbor 10.3.3.2 remote-as 65400
 address-family ipv4 unicast
  network 198.51.100.0/24
  neighbor 10.3.1.2 route-map LB100 out
  neighbor 10.3.2.2 route-map LB25600 out
  neighbor 10.3.3.2 route-map LB25600 out
 exit-address-family
route-map LB100 permit 10
 set extcommunity bandwidth 100
route-map LB25600 permit 10
 set extcommunity bandwidth 25600
";

/// FRR R: UCMP over A's three sessions, the cumulative value on to C (as the lab's
/// spines).
const FRR_MIDDLE: &str = "frr defaults datacenter
hostname r
router bgp 65400
 bgp router-id 10.255.0.40
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.3.1.1 remote-as 65300
 neighbor 10.3.2.1 remote-as 65300
 neighbor 10.3.3.1 remote-as 65300
 neighbor 10.4.0.2 remote-as 65500
 address-family ipv4 unicast
  neighbor 10.4.0.2 route-map CUMUL out
 exit-address-family
route-map CUMUL permit 10
 set extcommunity bandwidth cumulative
";
