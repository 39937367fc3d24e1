//! draft-wang-idr-dpf as namespace fabrics of `fare agent` processes (`dataplane: none`,
//! groups read with `fare show groups --json`):
//!
//! - Figure 1 (topologies/dpf-red-blue.yaml): Spine1's sessions red, Spine2's blue.
//!   Each color's routes use only its spine; primary red / backup blue uses red until the
//!   red fabric fails, then blue; all-colors uses both; an uncolored route uses both.
//! - Strict session coloring: a color mismatch between two agents, and between an agent
//!   and FRR (whose OPEN has no SESSION-COLOR), ends in the Color Mismatch NOTIFICATION
//!   and the session stays down; `last_error` names the mismatch.
//! - Flow mapping with XDP data planes and traffic: DSCP-red and RoCEv2-QP-blue flows each
//!   cross only their color's spine (the spines' own per-member counters), others both.
//! - FRR as a colorless transit spine: colored routes cross it; in loose mode the
//!   receiving leaf refuses a route whose color mismatches its session color.

use fare_integration::agent::{Agent, TempDir};
use fare_integration::bgp::{have_frr, wait_for, Frr};
use fare_integration::dpf_lab::{group_vias, DpfFabric, DpfSetup, BLUE, RED};
use fare_integration::{have_root, have_tool, link, veth, Netns};
use serde_json::Value;
use std::time::{Duration, Instant};

/// One agent's configuration: neighbors are (address, remote AS, interface, color).
#[allow(clippy::too_many_arguments)]
fn agent_config(
    dir: &TempDir,
    name: &str,
    rid: &str,
    asn: u32,
    role: &str,
    neighbors: &[(&str, u32, &str, Option<u32>)],
    prefixes: &[&str],
    dpf: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let socket = dir.0.join(format!("{name}.sock"));
    let mut text = format!(
        "name: {name}\nrouter_id: {rid}\nasn: {asn}\nmanagement: {{socket: {}}}\nfare: {{mode: draft, role: {role}}}\ndataplane: {{kind: none}}\nbgp: {{hold_time: 9, connect_retry_ms: 200, connect_retry_max_ms: 2000}}\nneighbors:\n",
        socket.display()
    );
    for (addr, ras, ifname, color) in neighbors {
        let c = color.map(|c| format!(", color: {c}")).unwrap_or_default();
        text += &format!(
            "  - {{address: {addr}, remote_as: {ras}, interface: {ifname}, bandwidth_gbps: 100{c}}}\n"
        );
    }
    text += &format!("prefixes: [{}]\n", prefixes.join(", "));
    text += dpf;
    let path = dir.write(&format!("{name}.yaml"), &text).unwrap();
    (path, socket)
}

fn wait_group(agent: &Agent, prefix: &str, want: Option<&[&str]>, secs: u64) -> bool {
    wait_for(Duration::from_secs(secs), || {
        let got = group_vias(agent, prefix);
        let ok = match want {
            Some(w) => got.as_deref().is_some_and(|g| g == w),
            None => got.is_none(),
        };
        ok.then_some(())
    })
    .is_some()
}

fn neighbor(agent: &Agent, address: &str) -> Value {
    agent
        .show("neighbors")
        .ok()
        .and_then(|v| {
            v.as_array()
                .and_then(|a| a.iter().find(|n| n["address"] == address).cloned())
        })
        .unwrap_or(Value::Null)
}

fn wait_established(agents: &[(&Agent, &str)], secs: u64) -> bool {
    wait_for(Duration::from_secs(secs), || {
        agents
            .iter()
            .all(|(a, peer)| neighbor(a, peer)["state"] == "Established")
            .then_some(())
    })
    .is_some()
}

#[test]
fn dpf_figure1_colors_stay_on_their_spines_and_backup_takes_over() {
    let test = "dpf_figure1_colors_stay_on_their_spines_and_backup_takes_over";
    if !have_root(test) {
        return;
    }
    let strict = "dpf: {session_coloring: strict}\n";
    let f = DpfFabric::build(
        "dpf",
        &DpfSetup {
            xdp: false,
            spine_dpf: strict,
            leaf1_dpf: strict,
            leaf2_dpf: "dpf:\n  session_coloring: strict\n  routes:\n    - {prefix: 198.51.100.0/24, primary: 1, backup: 2}\n    - {prefix: 203.0.113.0/24, color: 2}\n    - {prefix: 198.18.0.0/24, color: all}\n    - {prefix: 198.18.1.0/24, primary: 2, backup: all}\n",
            leaf2_prefixes: &[
                "198.51.100.0/24",
                "203.0.113.0/24",
                "198.18.0.0/24",
                "198.18.1.0/24",
            ],
        },
    )
    .unwrap();
    let (a_s1, a_s2, a_l1, a_l2) = (f.spine1(), f.spine2(), f.leaf1(), f.leaf2());
    assert!(
        wait_established(
            &[
                (a_l1, "10.1.1.2"),
                (a_l1, "10.2.1.2"),
                (a_l2, "10.1.2.2"),
                (a_l2, "10.2.2.2"),
            ],
            40
        ),
        "strict sessions with matching colors come up: {:?} {:?}",
        a_l1.show("neighbors"),
        a_l2.show("neighbors")
    );
    let red = "10.1.1.2";
    let blue = "10.2.1.2";
    // Primary red, backup blue: red only while red works.
    assert!(
        wait_group(a_l1, "198.51.100.0/24", Some(&[red]), 30),
        "primary red: {:?}",
        group_vias(a_l1, "198.51.100.0/24")
    );
    // One color (blue): only over Spine2; Spine1 never even learns it.
    assert!(
        wait_group(a_l1, "203.0.113.0/24", Some(&[blue]), 20),
        "blue only: {:?}",
        group_vias(a_l1, "203.0.113.0/24")
    );
    assert_eq!(group_vias(a_s1, "203.0.113.0/24"), None);
    // All colors, and an uncolored route: both spines.
    assert!(
        wait_group(a_l1, "198.18.0.0/24", Some(&[red, blue]), 20),
        "all colors: {:?}",
        group_vias(a_l1, "198.18.0.0/24")
    );
    assert!(
        wait_group(a_l2, "192.0.2.0/24", Some(&["10.1.2.2", "10.2.2.2"]), 20),
        "uncolored: {:?}",
        group_vias(a_l2, "192.0.2.0/24")
    );
    // Primary blue, backup all colors.
    assert!(
        wait_group(a_l1, "198.18.1.0/24", Some(&[blue]), 20),
        "primary blue: {:?}",
        group_vias(a_l1, "198.18.1.0/24")
    );
    // Spine2 holds the backup copy of the red-primary route.
    assert!(wait_group(a_s2, "198.51.100.0/24", Some(&["10.2.2.1"]), 10));

    // The red fabric fails (Spine1-Leaf2): the backup (blue) takes over at Leaf1.
    let t0 = Instant::now();
    f.s1.sh("ip link set l2 down").unwrap();
    assert!(
        wait_group(a_l1, "198.51.100.0/24", Some(&[blue]), 30),
        "backup after the red fabric failed: {:?}",
        group_vias(a_l1, "198.51.100.0/24")
    );
    eprintln!("failover to backup seen after {:?}", t0.elapsed());
    // Blue-only and blue-primary routes did not move; all-colors lost red.
    assert_eq!(
        group_vias(a_l1, "203.0.113.0/24").as_deref(),
        Some(&[blue.to_string()][..])
    );
    assert!(wait_group(a_l1, "198.18.0.0/24", Some(&[blue]), 20));
    // Red comes back: primary again.
    f.s1.sh("ip link set l2 up").unwrap();
    assert!(
        wait_group(a_l1, "198.51.100.0/24", Some(&[red]), 40),
        "primary after repair: {:?}",
        group_vias(a_l1, "198.51.100.0/24")
    );
}

#[test]
fn dpf_strict_color_mismatch_keeps_the_session_down() {
    let test = "dpf_strict_color_mismatch_keeps_the_session_down";
    if !have_root(test) {
        return;
    }
    let a = Netns::new("dpfma").unwrap();
    let b = Netns::new("dpfmb").unwrap();
    link(&a, "tob", "10.9.0.1/30", &b, "toa", "10.9.0.2/30").unwrap();
    let dir = TempDir::new("dpf-mismatch").unwrap();
    let strict = "dpf: {session_coloring: strict, mismatch_subcode: 12}\n";
    let (ca, ka) = agent_config(
        &dir,
        "a",
        "10.0.9.1",
        65001,
        "leaf",
        &[("10.9.0.2", 65100, "tob", Some(RED))],
        &["192.0.2.0/24"],
        strict,
    );
    let (cb, kb) = agent_config(
        &dir,
        "b",
        "10.0.9.2",
        65100,
        "spine",
        &[("10.9.0.1", 65001, "toa", Some(BLUE))],
        &[],
        strict,
    );
    let aa = Agent::start(Some(&a), &ca, &ka).unwrap();
    let ab = Agent::start(Some(&b), &cb, &kb).unwrap();
    let mismatch = wait_for(Duration::from_secs(20), || {
        let na = neighbor(&aa, "10.9.0.2");
        let nb = neighbor(&ab, "10.9.0.1");
        let named = |n: &Value| {
            n["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("color mismatch"))
        };
        (named(&na) && named(&nb)).then_some((na, nb))
    });
    let (na, nb) = mismatch.unwrap_or_else(|| {
        panic!(
            "no color mismatch reported: {} / {}",
            neighbor(&aa, "10.9.0.2"),
            neighbor(&ab, "10.9.0.1")
        )
    });
    eprintln!("a: {}\nb: {}", na["last_error"], nb["last_error"]);
    let text = format!("{} {}", na["last_error"], nb["last_error"]);
    assert!(
        text.contains("(2/12)"),
        "NOTIFICATION code 2 subcode 12: {text}"
    );
    // It stays down across several connect retries.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        assert_ne!(neighbor(&aa, "10.9.0.2")["state"], "Established");
        assert_ne!(neighbor(&ab, "10.9.0.1")["state"], "Established");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        neighbor(&aa, "10.9.0.2")["notifications_sent"]
            .as_u64()
            .unwrap_or(0)
            >= 1
    );
}

const FRR_STRICT_PEER: &str = "frr defaults datacenter
hostname frr1
router bgp 65100
 bgp router-id 10.0.8.2
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.8.0.1 remote-as 65001
 neighbor 10.8.0.1 timers connect 1
";

#[test]
fn dpf_strict_colored_session_refuses_colorless_frr() {
    let test = "dpf_strict_colored_session_refuses_colorless_frr";
    if !have_frr(test) {
        return;
    }
    let a = Netns::new("dpffa").unwrap();
    let b = Netns::new("dpffb").unwrap();
    link(&a, "tofrr", "10.8.0.1/30", &b, "toa", "10.8.0.2/30").unwrap();
    let frr = Frr::start(&b, FRR_STRICT_PEER).unwrap();
    let dir = TempDir::new("dpf-frr-strict").unwrap();
    let (ca, ka) = agent_config(
        &dir,
        "a",
        "10.0.8.1",
        65001,
        "leaf",
        &[("10.8.0.2", 65100, "tofrr", Some(RED))],
        &["192.0.2.0/24"],
        "dpf: {session_coloring: strict}\n",
    );
    let aa = Agent::start(Some(&a), &ca, &ka).unwrap();
    let n = wait_for(Duration::from_secs(30), || {
        let n = neighbor(&aa, "10.8.0.2");
        n["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("session color mismatch: local 1, peer none"))
            .then_some(n)
    })
    .unwrap_or_else(|| panic!("{}", neighbor(&aa, "10.8.0.2")));
    eprintln!("agent: {}", n["last_error"]);
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        assert_ne!(neighbor(&aa, "10.8.0.2")["state"], "Established");
        std::thread::sleep(Duration::from_millis(250));
    }
    // FRR saw our NOTIFICATION (OPEN Message Error) and is not Established either.
    let frr_view = frr.vtysh("show bgp neighbors 10.8.0.1");
    assert!(!frr_view.contains("BGP state = Established"), "{frr_view}");
    assert!(frr_view.contains("OPEN Message Error"), "{frr_view}");
}

const FRR_TRANSIT: &str = "frr defaults datacenter
hostname transit
router bgp 65100
 bgp router-id 10.0.7.9
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.7.1.1 remote-as 65001
 neighbor 10.7.2.1 remote-as 65002
";

#[test]
fn dpf_colorless_frr_transit_carries_colored_routes() {
    let test = "dpf_colorless_frr_transit_carries_colored_routes";
    if !have_frr(test) {
        return;
    }
    let s = Netns::new("dpfts").unwrap();
    let l1 = Netns::new("dpftl1").unwrap();
    let l2 = Netns::new("dpftl2").unwrap();
    link(&s, "l1", "10.7.1.2/30", &l1, "s", "10.7.1.1/30").unwrap();
    link(&s, "l2", "10.7.2.2/30", &l2, "s", "10.7.2.1/30").unwrap();
    let _frr = Frr::start(&s, FRR_TRANSIT).unwrap();
    let dir = TempDir::new("dpf-frr-transit").unwrap();
    // Leaf2: uncolored session to FRR; a red, a blue and an uncolored prefix.
    let (c2, k2) = agent_config(
        &dir,
        "leaf2",
        "10.0.7.2",
        65002,
        "leaf",
        &[("10.7.2.2", 65100, "s", None)],
        &["198.51.100.0/24", "203.0.113.0/24", "192.0.2.0/24"],
        "dpf:\n  routes:\n    - {prefix: 198.51.100.0/24, color: 1}\n    - {prefix: 203.0.113.0/24, color: 2}\n",
    );
    // Leaf1: loose mode, its session to FRR is red.
    let (c1, k1) = agent_config(
        &dir,
        "leaf1",
        "10.0.7.1",
        65001,
        "leaf",
        &[("10.7.1.2", 65100, "s", Some(RED))],
        &[],
        "dpf: {session_coloring: loose}\n",
    );
    let a2 = Agent::start(Some(&l2), &c2, &k2).unwrap();
    let a1 = Agent::start(Some(&l1), &c1, &k1).unwrap();
    assert!(
        wait_established(&[(&a1, "10.7.1.2"), (&a2, "10.7.2.2")], 40),
        "{:?} {:?}",
        a1.show("neighbors"),
        a2.show("neighbors")
    );
    // Red and uncolored routes cross FRR and are accepted on the red session.
    assert!(
        wait_group(&a1, "198.51.100.0/24", Some(&["10.7.1.2"]), 30),
        "red over FRR: {:?}",
        a1.show("groups")
    );
    assert!(wait_group(&a1, "192.0.2.0/24", Some(&["10.7.1.2"]), 10));
    // The blue route reaches Leaf1 too (FRR keeps the community), but loose mode refuses
    // it on a red session.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(group_vias(&a1, "203.0.113.0/24"), None);
    let n = neighbor(&a1, "10.7.1.2");
    assert!(n["prefixes_received"].as_u64().unwrap_or(0) >= 3, "{n}");
}

/// Sends `count` UDP datagrams from `ns` to `dst:port` with DSCP `dscp`; with `qp`, the
/// payload is a RoCEv2 Base Transport Header (SEND Only) to that destination QP.
fn send_udp(ns: &Netns, dst: &str, port: u16, dscp: u8, qp: Option<u32>, count: u32) {
    let payload = match qp {
        // BTH: opcode 0x04, flags, P_Key 0xffff, reserved, dest QP (24 bits), PSN.
        Some(q) => format!(
            "bytes([0x04, 0x40, 0xff, 0xff, 0x00, {}, {}, {}, 0x00, 0x00, 0x00, 0x01]) + bytes(32)",
            (q >> 16) & 0xff,
            (q >> 8) & 0xff,
            q & 0xff
        ),
        None => "bytes(44)".to_string(),
    };
    let script = format!(
        "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, {tos})\np = {payload}\nfor i in range({count}):\n    s.sendto(p, ('{dst}', {port}))\n    if i % 50 == 49:\n        time.sleep(0.002)\n",
        tos = u32::from(dscp) << 2
    );
    let out = ns
        .exec("/usr/bin/python3", &["-c", &script])
        .expect("python3 sender");
    assert!(out.status.success(), "{out:?}");
}

/// Packets the XDP data plane of `agent` forwarded for `prefix` (all members).
fn group_packets(agent: &Agent, prefix: &str) -> u64 {
    agent
        .show("groups")
        .ok()
        .and_then(|g| {
            g.as_array()?
                .iter()
                .find(|g| g["prefix"] == prefix)
                .map(|g| {
                    g["members"]
                        .as_array()
                        .map(|m| m.iter().filter_map(|m| m["packets"].as_u64()).sum())
                        .unwrap_or(0)
                })
        })
        .unwrap_or(0)
}

/// Removes the agents' XDP pins (the program outlives the agent on purpose).
struct Pins(Vec<String>);

impl Drop for Pins {
    fn drop(&mut self) {
        for node in &self.0 {
            let _ = std::fs::remove_dir_all(format!("/sys/fs/bpf/fare/{node}"));
        }
    }
}

/// Figure 1 with XDP data planes and traffic (draft §2.2.3): Leaf2 advertises
/// 198.18.0.0/24 with all colors, so Leaf1 has red (Spine1) and blue (Spine2) groups for
/// it. Leaf1's flow rules make DSCP 10 red and RoCEv2 to QPs 0x100-0x1ff blue. The
/// spines' own XDP counters prove where each flow went: red only over Spine1, blue only
/// over Spine2, unclassified over both.
#[test]
fn dpf_xdp_flows_follow_their_color() {
    let test = "dpf_xdp_flows_follow_their_color";
    if !have_root(test) || !have_tool(test, "/usr/bin/python3") || !have_tool(test, "ethtool") {
        return;
    }
    if !fare_integration::xdp_lab::have_xdp(test) {
        return;
    }
    let f = DpfFabric::up(
        "dx",
        "dpf:\n  flows:\n    - {color: 1, dscp: [10]}\n    - {color: 2, protocol: udp, dst_port: 4791, qp: 0x100-0x1ff}\n",
        "dpf:\n  routes:\n    - {prefix: 198.18.0.0/24, color: all}\n",
    )
    .unwrap();
    let (a_s1, a_s2, a_l1, h1) = (f.spine1(), f.spine2(), f.leaf1(), &f.h1);
    let prefix = "198.18.0.0/24";
    assert!(
        wait_group(a_l1, prefix, Some(&["10.1.1.2", "10.2.1.2"]), 60),
        "all colors at Leaf1: {:?}\n{}",
        a_l1.show("groups"),
        a_l1.log_text()
    );
    assert!(wait_group(a_s1, prefix, Some(&["10.1.2.1"]), 30));
    assert!(wait_group(a_s2, prefix, Some(&["10.2.2.1"]), 30));
    // Warm up ARP on the path to h2 (Leaf2 forwards to it through the kernel).
    send_udp(h1, "198.18.0.10", 9000, 0, None, 5);
    std::thread::sleep(Duration::from_millis(500));

    let counts = || (group_packets(a_s1, prefix), group_packets(a_s2, prefix));
    let n = 300u64;
    let run = |what: &str, dscp: u8, port: u16, qp: Option<u32>| {
        let before = counts();
        send_udp(h1, "198.18.0.10", port, dscp, qp, n as u32);
        // Counters are read through the agents: give the last packets a moment.
        let after = wait_for(Duration::from_secs(10), || {
            let c = counts();
            (c.0 + c.1 >= before.0 + before.1 + n).then_some(c)
        })
        .unwrap_or_else(counts);
        let moved = (after.0 - before.0, after.1 - before.1);
        eprintln!(
            "{what}: spine1 (red) +{}, spine2 (blue) +{}",
            moved.0, moved.1
        );
        moved
    };
    let red = run("DSCP 10 (red)", 10, 9000, None);
    assert_eq!(red, (n, 0), "red flow only over Spine1");
    let blue = run("RoCEv2 QP 0x150 (blue)", 0, 4791, Some(0x150));
    assert_eq!(blue, (0, n), "blue flow only over Spine2");
    let other_qp = run("RoCEv2 QP 0x250 (no rule)", 0, 4791, Some(0x250));
    assert_eq!(other_qp.0 + other_qp.1, n);
    assert!(
        other_qp.0 > 0 && other_qp.1 > 0,
        "unclassified traffic sprays over both colors: {other_qp:?}"
    );
    // Leaf1's own counters per color: the classified flows went through the color groups.
    let groups = a_l1.show("groups").unwrap_or_default();
    assert_eq!(
        (
            color_packets(&groups, prefix, 1),
            color_packets(&groups, prefix, 2)
        ),
        (Some(n), Some(n)),
        "per-color counters at Leaf1: {groups}"
    );
}

/// Packets counted by the members of `color`'s group of `prefix` (`fare show groups
/// --json`), None when the route has no such color group.
fn color_packets(groups: &Value, prefix: &str, color: u64) -> Option<u64> {
    let g = groups.as_array()?.iter().find(|g| g["prefix"] == prefix)?;
    let c = g["colors"]
        .as_array()?
        .iter()
        .find(|c| c["color"].as_u64() == Some(color))?;
    Some(
        c["members"]
            .as_array()?
            .iter()
            .filter_map(|m| m["packets"].as_u64())
            .sum(),
    )
}

/// Sends `count` UDP datagrams from source address `src` in `ns` to `dst:port`.
fn send_udp_from(ns: &Netns, src: &str, dst: &str, port: u16, count: u32) {
    let script = format!(
        "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('{src}', 0))\nfor i in range({count}):\n    s.sendto(bytes(48), ('{dst}', {port}))\n    if i % 50 == 49:\n        time.sleep(0.002)\n"
    );
    let out = ns
        .exec("/usr/bin/python3", &["-c", &script])
        .expect("python3 sender");
    assert!(out.status.success(), "{out:?}");
}

/// The draft's Figure 3 (§3.1), scaled down: two rails (Leaf1, Leaf9), fabric A = spines
/// A1, A2 (color 1), fabric B = spines B1, B2 (color 2). Two tenants share GPU server 1:
/// tenant A's address is mapped to fabric A, tenant B's to fabric B (Leaf1's flow rules
/// by source prefix). Each tenant's traffic crosses only its fabric's spines and is still
/// spread over both spines of that fabric.
#[test]
fn dpf_figure3_tenants_on_their_spine_sets() {
    let test = "dpf_figure3_tenants_on_their_spine_sets";
    if !have_root(test)
        || !have_tool(test, "/usr/bin/python3")
        || !fare_integration::xdp_lab::have_xdp(test)
    {
        return;
    }
    let spines = ["a1", "a2", "b1", "b2"];
    let colors = [RED, RED, BLUE, BLUE];
    let sp: Vec<Netns> = spines
        .iter()
        .map(|s| Netns::new(&format!("f3{s}")).unwrap())
        .collect();
    let l1 = Netns::new("f3l1").unwrap();
    let l9 = Netns::new("f3l9").unwrap();
    let g1 = Netns::new("f3g1").unwrap();
    let g2 = Netns::new("f3g2").unwrap();
    for (i, s) in sp.iter().enumerate() {
        let x = i + 1;
        veth(s, "r1", &l1, spines[i]).unwrap();
        veth(s, "r2", &l9, spines[i]).unwrap();
        s.sh(&format!(
            "ip addr add 10.{x}.1.2/30 dev r1 && ip addr add 10.{x}.2.2/30 dev r2"
        ))
        .unwrap();
        l1.sh(&format!("ip addr add 10.{x}.1.1/30 dev {}", spines[i]))
            .unwrap();
        l9.sh(&format!("ip addr add 10.{x}.2.1/30 dev {}", spines[i]))
            .unwrap();
    }
    veth(&g1, "nic", &l1, "gpu").unwrap();
    veth(&g2, "nic", &l9, "gpu").unwrap();
    for ns in sp.iter().chain([&l1, &l9]) {
        ns.sh("sysctl -qw net.ipv4.ip_forward=1 && for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $f; done")
            .unwrap();
    }
    l1.sh("ip addr add 192.0.2.1/24 dev gpu").unwrap();
    l9.sh("ip addr add 198.18.0.1/24 dev gpu").unwrap();
    g1.sh("ip addr add 192.0.2.10/24 dev nic && ip addr add 192.0.2.200/24 dev nic && ip route add default via 192.0.2.1")
        .unwrap();
    g2.sh("ip addr add 198.18.0.10/24 dev nic && ip route add default via 198.18.0.1")
        .unwrap();
    let dir = TempDir::new("dpf-fig3").unwrap();
    let tag = std::process::id();
    let name = |n: &str| format!("dpf3-{n}-{tag}");
    let _pins = Pins(
        spines
            .iter()
            .chain(&["l1", "l9"])
            .map(|n| name(n))
            .collect(),
    );
    let xdp = |path: std::path::PathBuf, ifs: &str| {
        let text = std::fs::read_to_string(&path).unwrap().replace(
            "dataplane: {kind: none}",
            &format!("dataplane: {{kind: xdp, interfaces: [{ifs}]}}"),
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let mut agents = Vec::new();
    for (i, s) in sp.iter().enumerate() {
        let x = i + 1;
        let (a1, a2) = (format!("10.{x}.1.1"), format!("10.{x}.2.1"));
        let (c, k) = agent_config(
            &dir,
            &name(spines[i]),
            &format!("10.0.1.{x}"),
            65100,
            "spine",
            &[
                (&a1, 65001, "r1", Some(colors[i])),
                (&a2, 65009, "r2", Some(colors[i])),
            ],
            &[],
            "",
        );
        agents.push(Agent::start(Some(s), &xdp(c, "r1, r2"), &k).unwrap());
    }
    let leaf_neighbors = |rail: u32| -> Vec<NeighborOwned> {
        (0..4)
            .map(|i| {
                (
                    format!("10.{}.{rail}.2", i + 1),
                    65100,
                    spines[i],
                    Some(colors[i]),
                )
            })
            .collect()
    };
    let n1 = leaf_neighbors(1);
    let n9 = leaf_neighbors(2);
    let (c1, k1) = agent_config(
        &dir,
        &name("l1"),
        "10.0.0.1",
        65001,
        "leaf",
        &refs(&n1),
        &["192.0.2.0/24"],
        "dpf:\n  flows:\n    - {color: 1, src: 192.0.2.0/25}     # tenant A (LLM-A)\n    - {color: 2, src: 192.0.2.128/25}   # tenant B (LLM-B)\n",
    );
    let a_l1 = Agent::start(Some(&l1), &xdp(c1, "gpu, a1, a2, b1, b2"), &k1).unwrap();
    let (c9, k9) = agent_config(
        &dir,
        &name("l9"),
        "10.0.0.9",
        65009,
        "leaf",
        &refs(&n9),
        &["198.18.0.0/24"],
        "dpf:\n  routes:\n    - {prefix: 198.18.0.0/24, color: all}\n",
    );
    let _a_l9 = Agent::start(Some(&l9), &xdp(c9, "a1, a2, b1, b2"), &k9).unwrap();
    let prefix = "198.18.0.0/24";
    let all = ["10.1.1.2", "10.2.1.2", "10.3.1.2", "10.4.1.2"];
    assert!(
        wait_group(&a_l1, prefix, Some(&all), 90),
        "Leaf1 over all four spines: {:?}\n{}",
        a_l1.show("groups"),
        a_l1.log_text()
    );
    for a in &agents {
        assert!(wait_for(Duration::from_secs(30), || group_vias(a, prefix)).is_some());
    }
    send_udp_from(&g1, "192.0.2.10", "198.18.0.10", 9000, 5);
    std::thread::sleep(Duration::from_millis(500));
    let n = 400u64;
    let counts = || -> Vec<u64> { agents.iter().map(|a| group_packets(a, prefix)).collect() };
    let run = |who: &str, src: &str| -> Vec<u64> {
        let before = counts();
        send_udp_from(&g1, src, "198.18.0.10", 9000, n as u32);
        let after = wait_for(Duration::from_secs(10), || {
            let c = counts();
            (c.iter().sum::<u64>() >= before.iter().sum::<u64>() + n).then_some(c)
        })
        .unwrap_or_else(counts);
        let moved: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        eprintln!("{who}: spines A1 A2 B1 B2 +{moved:?}");
        moved
    };
    let a = run("tenant A", "192.0.2.10");
    assert_eq!(a[0] + a[1], n, "tenant A only over fabric A: {a:?}");
    assert_eq!(a[2] + a[3], 0, "tenant A never over fabric B: {a:?}");
    assert!(a[0] > 0 && a[1] > 0, "spread within fabric A: {a:?}");
    let b = run("tenant B", "192.0.2.200");
    assert_eq!(b[2] + b[3], n, "tenant B only over fabric B: {b:?}");
    assert_eq!(b[0] + b[1], 0, "tenant B never over fabric A: {b:?}");
    assert!(b[2] > 0 && b[3] > 0, "spread within fabric B: {b:?}");
}

type NeighborOwned = (String, u32, &'static str, Option<u32>);

/// Borrowed view of owned neighbor tuples, for `agent_config`.
fn refs(v: &[NeighborOwned]) -> Vec<(&str, u32, &str, Option<u32>)> {
    v.iter()
        .map(|(a, r, i, c)| (a.as_str(), *r, *i, *c))
        .collect()
}
