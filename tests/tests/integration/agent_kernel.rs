//! `fare agent` with the kernel backend and static groups, in namespaces:
//!
//! ```text
//!  src (10.0.0.1) ── r0 [rt: agent, kernel nexthop group 3:1] ─ r1 ── k1 (198.18.0.1)
//!                                                             └ r2 ── k2 (198.18.0.1)
//! ```
//! Traffic goes only to addresses of these namespaces.

use anyhow::{ensure, Result};
use fare_integration::agent::{member_packets, run_refused, Agent, TempDir};
use fare_integration::{have_root, have_tool, veth, Netns};

struct Lab {
    src: Netns,
    rt: Netns,
    _k1: Netns,
    _k2: Netns,
}

fn lab() -> Result<Lab> {
    let src = Netns::new("ag-src")?;
    let rt = Netns::new("ag-rt")?;
    let k1 = Netns::new("ag-k1")?;
    let k2 = Netns::new("ag-k2")?;
    veth(&src, "s0", &rt, "r0")?;
    veth(&rt, "r1", &k1, "k1")?;
    veth(&rt, "r2", &k2, "k2")?;
    src.sh(
        "ip addr add 10.0.0.1/24 dev s0 && ip route add default via 10.0.0.2 && \
         ip -6 addr add fd00::1/64 dev s0 nodad && ip -6 route add default via fd00::2",
    )?;
    rt.sh(
        "ip addr add 10.0.0.2/24 dev r0 && ip addr add 10.1.1.1/24 dev r1 && \
         ip addr add 10.1.2.1/24 dev r2 && sysctl -qw net.ipv4.ip_forward=1 && \
         ip -6 addr add fd00::2/64 dev r0 nodad && ip -6 addr add fd00:1::1/64 dev r1 nodad && \
         ip -6 addr add fd00:2::1/64 dev r2 nodad && sysctl -qw net.ipv6.conf.all.forwarding=1 && \
         sysctl -qw net.ipv4.fib_multipath_hash_policy=1",
    )?;
    for (i, k) in [(1, &k1), (2, &k2)] {
        k.sh(&format!(
            "ip addr add 10.1.{i}.2/24 dev k{i} && ip addr add 198.18.0.1/32 dev lo && \
             ip route add default via 10.1.{i}.1 && ip -6 addr add fd00:{i}::2/64 dev k{i} nodad && \
             ip -6 addr add 2001:db8:18::1/128 dev lo && ip -6 route add default via fd00:{i}::1"
        ))?;
    }
    Ok(Lab {
        src,
        rt,
        _k1: k1,
        _k2: k2,
    })
}

fn config(dir: &TempDir) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let socket = dir.0.join("run/rt.sock");
    let path = dir.write(
        "rt.yaml",
        &format!(
            r#"name: rt
router_id: 10.0.0.2
asn: 65001
management: {{socket: {}}}
dataplane: {{kind: kernel}}
static:
  - prefix: 198.18.0.0/16
    mode: flow
    members:
      - {{interface: r1, neighbor_mac: "02:00:00:00:00:01", next_hop: 10.1.1.2, weight: 3, bandwidth_gbps: 300}}
      - {{interface: r2, neighbor_mac: "02:00:00:00:00:02", next_hop: 10.1.2.2, weight: 1, bandwidth_gbps: 100}}
  - prefix: 2001:db8:18::/48
    mode: flow
    members:
      - {{interface: r1, neighbor_mac: "02:00:00:00:00:01", next_hop: "fd00:1::2", weight: 1}}
      - {{interface: r2, neighbor_mac: "02:00:00:00:00:02", next_hop: "fd00:2::2", weight: 2}}
"#,
            socket.display()
        ),
    )?;
    Ok((path, socket))
}

/// 400 UDP flows (distinct source ports) x 5 packets to 198.18.0.1.
fn send_flows(src: &Netns) -> Result<()> {
    src.exec(
        "python3",
        &[
            "-c",
            "import socket\n\
             for p in range(20000, 20400):\n\
             \x20   s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             \x20   s.bind(('10.0.0.1', p))\n\
             \x20   for _ in range(5): s.sendto(b'x' * 64, ('198.18.0.1', 9))\n\
             \x20   s.close()\n",
        ],
    )?;
    Ok(())
}

fn ping(src: &Netns) -> bool {
    src.exec("ping", &["-c", "1", "-W", "2", "198.18.0.1"])
        .is_ok()
}

#[test]
fn agent_kernel_static_groups_forward_and_survive_restart() -> Result<()> {
    let test = "agent_kernel_static_groups_forward_and_survive_restart";
    if !have_root(test) || !have_tool(test, "python3") || !have_tool(test, "ping") {
        return Ok(());
    }
    let lab = lab()?;
    let dir = TempDir::new("agent-kernel")?;
    let (config, socket) = config(&dir)?;
    let mut agent = Agent::start(Some(&lab.rt), &config, &socket)?;

    // Local-only management socket.
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&socket)?.permissions());
    ensure!(mode & 0o777 == 0o600, "socket mode {mode:o}");

    // The kernel has the weighted group and the route.
    let route = String::from_utf8(
        lab.rt
            .exec("ip", &["route", "show", "198.18.0.0/16"])?
            .stdout,
    )?;
    ensure!(
        route.contains("nhid") && route.contains("proto 250"),
        "{route}"
    );
    let nh = String::from_utf8(lab.rt.exec("ip", &["nexthop", "show"])?.stdout)?;
    ensure!(nh.contains("group") && nh.contains(",3/"), "{nh}");
    let route6 = String::from_utf8(
        lab.rt
            .exec("ip", &["-6", "route", "show", "2001:db8:18::/48"])?
            .stdout,
    )?;
    ensure!(route6.contains("nhid"), "{route6}");

    ensure!(ping(&lab.src), "no forwarding through the group");
    send_flows(&lab.src)?;

    // JSON contract, exact keys.
    let groups = agent.show("groups")?;
    let g = &groups[0];
    ensure!(
        g["prefix"] == "198.18.0.0/16" && g["mode"] == "flow",
        "{groups}"
    );
    let mut keys: Vec<_> = g["members"][0]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    ensure!(
        keys == ["bandwidth_gbps", "interface", "packets", "via", "weight"],
        "{keys:?}"
    );
    ensure!(g["members"][0]["via"] == "02:00:00:00:00:01" && g["members"][0]["weight"] == 3);
    ensure!(g["members"][1]["interface"] == "r2" && g["members"][1]["bandwidth_gbps"] == 100.0);
    // A flow group is a resilient group: 3:1 of 512 buckets is 384/128 (the kernel's
    // rounding of 512 * 3/4), a fresh group so nothing moved.
    ensure!(
        g["buckets"]
            == serde_json::json!({"size": 512, "per_member": [384, 128], "moved": null,
                                  "assigned_by": "kernel"}),
        "{groups}"
    );

    // Per-member packet counters from the kernel: 2000 flow packets, weights 3:1.
    let packets = member_packets(&groups[0]);
    let total: u64 = packets.iter().sum();
    println!("agent_kernel: member packets {packets:?}");
    if total == 0 {
        println!("agent_kernel: kernel reports no nexthop group statistics (needs Linux 6.7+)");
    } else {
        ensure!(total >= 2000, "{packets:?}");
        let share = packets[0] as f64 / total as f64;
        ensure!(
            (share - 0.75).abs() < 0.1,
            "share of the weight-3 member {share:.3} ({packets:?})"
        );
    }

    // Graceful stop leaves the data plane forwarding.
    ensure!(agent.stop()? == Some(0), "exit code: {}", agent.log_text());
    ensure!(!socket.exists(), "socket left behind");
    let route = String::from_utf8(
        lab.rt
            .exec("ip", &["route", "show", "198.18.0.0/16"])?
            .stdout,
    )?;
    ensure!(route.contains("nhid"), "route gone after stop: {route:?}");
    ensure!(ping(&lab.src), "forwarding stopped with the agent");

    // A new agent adopts the group and replaces it make-before-break: still one route,
    // three nexthop objects (two members + group), counters carried over.
    let agent = Agent::start(Some(&lab.rt), &config, &socket)?;
    ensure!(agent.log_text().contains("adopted"), "{}", agent.log_text());
    ensure!(ping(&lab.src));
    let nh = String::from_utf8(lab.rt.exec("ip", &["nexthop", "show"])?.stdout)?;
    ensure!(nh.lines().count() == 6, "stale nexthop objects: {nh}");
    let shown = agent.show("groups")?;
    // Adopted and replaced in place with the same weights: no bucket moved.
    ensure!(shown[0]["buckets"]["moved"] == 0, "{shown}");
    let after = member_packets(&shown[0]);
    ensure!(
        after.iter().sum::<u64>() >= total,
        "counters went back: {after:?} < {packets:?}"
    );
    Ok(())
}

#[test]
fn agent_kernel_member_without_next_hop_is_refused() -> Result<()> {
    let test = "agent_kernel_member_without_next_hop_is_refused";
    if !have_root(test) {
        return Ok(());
    }
    let rt = Netns::new("ag-nh")?;
    let peer = Netns::new("ag-nhp")?;
    veth(&rt, "r1", &peer, "k1")?;
    let dir = TempDir::new("agent-nonh")?;
    let config = dir.write(
        "rt.yaml",
        &format!(
            "name: rt\nrouter_id: 10.0.0.2\nasn: 65001\nmanagement: {{socket: {}}}\n\
             dataplane: {{kind: kernel}}\nstatic:\n  - prefix: 198.18.0.0/16\n    members:\n      \
             - {{interface: r1, neighbor_mac: \"02:00:00:00:00:01\", weight: 1}}\n",
            dir.0.join("s.sock").display()
        ),
    )?;
    let (code, err) = run_refused(Some(&rt), &config)?;
    ensure!(code == Some(1), "{err}");
    ensure!(err.contains("next_hop"), "{err}");
    Ok(())
}
