//! fare.p4 on BMv2 (`simple_switch_grpc`) programmed by fare's own P4Runtime client.
//!
//! One switch namespace, a source namespace on port 0 and a sink namespace on ports 1..4.
//! Checks: pipeline push, a 3:3:4:4 group in spray mode (exact per cycle) and flow mode
//! (within 3 points of the weights), an injected ARN removing a member at once and a
//! Type 2 restoring it, congestion on a rate-limited port sending an ARN upstream,
//! make-before-break replacement, and reconcile-on-reconnect.
//! Skipped (with the reason printed) without root, BMv2 or the compiled program.

use anyhow::{bail, ensure, Context, Result};
use fare::dataplane::p4rt::{P4RuntimeDataplane, P4RuntimeOptions};
use fare::dataplane::{Dataplane, Group, GroupMode, MacAddr, Member};
use fare_integration::p4::{bmv2_available, in_netns, pipeline, python, Fabric, GRPC_ADDR};
use ipnet::IpNet;
use std::net::Ipv4Addr;
use std::time::Duration;

const WEIGHTS: [u32; 4] = [3, 3, 4, 4];

fn options(fabric: &Fabric) -> P4RuntimeOptions {
    let (p4info, json) = pipeline();
    P4RuntimeOptions {
        address: GRPC_ADDR.to_string(),
        device_id: 1,
        election_id: 10,
        pipeline: Some((p4info, json)),
        ports: fabric.port_map(),
        router_mac: MacAddr([0x02, 0xfa, 0, 0, 0, 0xfe]),
        form: fare::dataplane::p4rt::GroupForm::Weighted,
        watch_ports: true,
        arn_hold: fare::dataplane::p4rt::DEFAULT_ARN_HOLD,
    }
}

/// A group over p1..pN with neighbor MACs 02:00:00:00:00:0i. `prefix` is a test constant.
fn group(prefix: &str, mode: GroupMode, weights: &[u32]) -> Group {
    Group {
        prefix: prefix.parse().expect("test prefix"),
        mode,
        members: weights
            .iter()
            .enumerate()
            .map(|(i, w)| Member {
                via: format!("10.1.{}.2", i + 1),
                interface: format!("p{}", i + 1),
                next_hop: None,
                neighbor_mac: Some(MacAddr([0x02, 0, 0, 0, 0, (i + 1) as u8])),
                weight: *w,
                bandwidth_gbps: f64::from(*w) * 25.0,
            })
            .collect(),
    }
}

/// Sends `count` UDP packets from the source namespace to `dst`; `flows` distinct source
/// ports (1 = one flow). Paced so BMv2 never drops at ingress.
fn send(fabric: &Fabric, dst: &str, count: usize, flows: usize) -> Result<()> {
    let script = format!(
        "from scapy.all import Ether, IP, UDP, Raw, sendp\n\
         pkts = [Ether(dst='02:fa:00:00:00:fe', src='02:00:00:00:00:aa')/IP(src='10.0.0.1', dst='{dst}', ttl=64)/\
         UDP(sport=10000 + (i % {flows}), dport=5000)/Raw(b'x'*32) for i in range({count})]\n\
         sendp(pkts, iface='s0', verbose=False, inter=0.0005)\n"
    );
    python(&fabric.src, &script).map(|_| ())
}

/// Member packet counters as the switch reports them, in member order.
async fn member_packets(dp: &mut P4RuntimeDataplane, prefix: &str) -> Result<Vec<u64>> {
    let prefix: IpNet = prefix.parse()?;
    let groups = dp.groups().await?;
    let g = groups
        .iter()
        .find(|g| g.group.prefix == prefix)
        .context("group not installed")?;
    Ok(g.members.iter().map(|m| m.packets).collect())
}

fn delta(after: &[u64], before: &[u64]) -> Vec<u64> {
    after.iter().zip(before).map(|(a, b)| a - b).collect()
}

/// Waits until the sink has seen `total` more packets than `before` (bounded).
fn settle(fabric: &Fabric, before: &[u64], total: u64) -> Result<Vec<u64>> {
    let mut last = before.to_vec();
    fare_integration::wait_until(Duration::from_secs(10), || {
        if let Ok(now) = fabric.sink_counts() {
            last = now;
        }
        delta(&last, before).iter().sum::<u64>() >= total
    });
    Ok(delta(&last, before))
}

/// An ARN (draft format, Path ID parameter) from the neighbor behind sink port `port`.
fn inject_arn(
    fabric: &Fabric,
    iface: &str,
    arn_type: u8,
    path_id: Ipv4Addr,
    ttl: u8,
) -> Result<()> {
    let p = path_id.octets();
    let script = format!(
        "from scapy.all import Ether, IP, UDP, Raw, sendp\n\
         arn = bytes([{arn_type}, 0x00, 10, 0x40, {}, {}, {}, {}])\n\
         sendp(Ether(dst='02:fa:00:00:00:fe')/IP(src='10.1.1.2', dst='10.1.1.1', ttl={ttl}, tos=0xc0)/\
         UDP(sport=9961, dport=9961)/Raw(arn), iface='{iface}', verbose=False)\n",
        p[0], p[1], p[2], p[3]
    );
    python(&fabric.dst, &script).map(|_| ())
}

#[test]
fn p4_bmv2_wcmp_spray_flow_arn() -> Result<()> {
    let test = "p4_bmv2_wcmp_spray_flow_arn";
    if !bmv2_available(test) {
        return Ok(());
    }
    let mut fabric = Fabric::new("p4w", 4)?;
    let sw = fabric.bmv2.sw.name.clone();
    let opts = options(&fabric);

    // Everything async runs on a thread inside the switch namespace (gRPC on its loopback);
    // traffic is sent from the test thread between steps, so the steps talk over channels.
    let (to_client, from_test) = std::sync::mpsc::channel::<&'static str>();
    let (to_test, from_client) = std::sync::mpsc::channel::<Result<Vec<u64>>>();
    let client = std::thread::spawn(move || {
        in_netns(&sw, move || async move {
            let mut dp = P4RuntimeDataplane::connect(opts).await?;
            let version = dp.client().capabilities().await?;
            tracing_log(&format!("P4Runtime API {version}"));
            loop {
                let step = match from_test.recv() {
                    Ok(s) => s,
                    Err(_) => return Ok(()),
                };
                let reply = async {
                    match step {
                        "install" => {
                            dp.install(&group("198.18.0.0/16", GroupMode::Spray, &WEIGHTS))
                                .await?;
                            dp.install(&group("198.19.0.0/16", GroupMode::Flow, &WEIGHTS))
                                .await?;
                            Ok(vec![])
                        }
                        "spray" => member_packets(&mut dp, "198.18.0.0/16").await,
                        "flow" => member_packets(&mut dp, "198.19.0.0/16").await,
                        "map-arn" => {
                            let prefixes: Vec<IpNet> = vec!["198.18.0.0/16".parse()?];
                            let slot = dp
                                .map_arn_path("p1", Ipv4Addr::new(10, 0, 0, 42), &prefixes)
                                .await?;
                            Ok(vec![u64::from(slot)])
                        }
                        "packet-in" => {
                            let (iface, reason, frame) =
                                dp.packet_in(Duration::from_secs(5)).await?;
                            ensure!(iface == "p1", "ARN packet-in from {iface}");
                            Ok(vec![u64::from(reason), frame.len() as u64])
                        }
                        // The data-plane removal outlives a slow sender (scapy needs
                        // seconds to start on a loaded machine); the short one is for the
                        // timeout-revocation check.
                        "hold-long" => {
                            dp.set_arn_hold(Duration::from_secs(120)).await?;
                            Ok(vec![])
                        }
                        "hold-short" => {
                            dp.set_arn_hold(Duration::from_millis(300)).await?;
                            Ok(vec![])
                        }
                        "replace" => {
                            // Make-before-break: new weights 1:1:1:1 for the spray group.
                            dp.install(&group("198.18.0.0/16", GroupMode::Spray, &[1, 1, 1, 1]))
                                .await?;
                            Ok(vec![])
                        }
                        other => bail!("unknown step {other}"),
                    }
                }
                .await;
                if to_test.send(reply).is_err() {
                    return Ok(());
                }
            }
        })
    });
    let step = |name: &'static str| -> Result<Vec<u64>> {
        to_client.send(name).context("client thread gone")?;
        from_client
            .recv_timeout(Duration::from_secs(60))
            .with_context(|| format!("step {name}: no answer"))?
    };

    // Member counters `name` once they count `total` packets more than `c0` (bounded wait
    // for a loaded machine), read again after a pause so late extras show up too.
    let counted_after = |name: &'static str, c0: &[u64], total: u64| -> Result<Vec<u64>> {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let now = delta(&step(name)?, c0);
            if now.iter().sum::<u64>() >= total || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(200));
        Ok(delta(&step(name)?, c0))
    };

    step("install")?;

    // Spray: 20 whole cycles of 14 packets carry exactly 60:60:80:80.
    let sink0 = fabric.sink_counts()?;
    let c0 = step("spray")?;
    send(&fabric, "198.18.1.1", 280, 1)?;
    let sink = settle(&fabric, &sink0, 280)?;
    let counted = delta(&step("spray")?, &c0);
    ensure!(
        counted == vec![60, 60, 80, 80],
        "spray member counters {counted:?}"
    );
    ensure!(sink == vec![60, 60, 80, 80], "spray at the sink {sink:?}");
    ensure!(fabric.bmv2.alive(), "switch died");

    // Flow: 4000 flows, shares within 3 points of 3:3:4:4.
    let c0 = step("flow")?;
    send(&fabric, "198.19.1.1", 4000, 4000)?;
    let counted = counted_after("flow", &c0, 4000)?;
    let total: u64 = counted.iter().sum();
    ensure!(total == 4000, "flow packets counted {total}");
    for (i, c) in counted.iter().enumerate() {
        let share = *c as f64 / total as f64;
        let ideal = f64::from(WEIGHTS[i]) / 14.0;
        ensure!(
            (share - ideal).abs() <= 0.03,
            "flow member {i}: share {share:.3} vs {ideal:.3} ({counted:?})"
        );
    }

    // ARN from the neighbor on p1 with Path ID 10.0.0.42 removes member 0 at once.
    step("hold-long")?;
    let slot = step("map-arn")?;
    ensure!(slot[0] > 0, "no ARN slot");
    inject_arn(&fabric, "d1", 1, Ipv4Addr::new(10, 0, 0, 42), 255)?;
    let punt = step("packet-in")?;
    ensure!(punt[0] == 1, "packet-in reason {}", punt[0]);
    let c0 = step("spray")?;
    send(&fabric, "198.18.1.1", 280, 1)?;
    let counted = counted_after("spray", &c0, 280)?;
    ensure!(counted[0] == 0, "removed member still used: {counted:?}");
    ensure!(
        counted.iter().sum::<u64>() == 280,
        "packets lost while steering: {counted:?}"
    );

    // An ARN without TTL 255 is dropped (and does not restore anything).
    inject_arn(&fabric, "d1", 2, Ipv4Addr::new(10, 0, 0, 42), 64)?;
    // Type 2 restores it.
    inject_arn(&fabric, "d1", 2, Ipv4Addr::new(10, 0, 0, 42), 255)?;
    let punt = step("packet-in")?;
    ensure!(punt[0] == 1, "packet-in reason {}", punt[0]);
    let c0 = step("spray")?;
    send(&fabric, "198.18.1.1", 280, 1)?;
    let counted = counted_after("spray", &c0, 280)?;
    ensure!(counted == vec![60, 60, 80, 80], "after Type 2: {counted:?}");

    // A removal no Type 2 revokes ends by itself after the hold time.
    step("hold-short")?;
    inject_arn(&fabric, "d1", 1, Ipv4Addr::new(10, 0, 0, 42), 255)?;
    let punt = step("packet-in")?;
    ensure!(punt[0] == 1, "packet-in reason {}", punt[0]);
    std::thread::sleep(Duration::from_millis(600));
    let c0 = step("spray")?;
    send(&fabric, "198.18.1.1", 280, 1)?;
    let counted = counted_after("spray", &c0, 280)?;
    ensure!(
        counted == vec![60, 60, 80, 80],
        "after the hold time: {counted:?}"
    );

    // Make-before-break replacement to 1:1:1:1: 280 packets = 70 each.
    step("replace")?;
    let c0 = step("spray")?;
    send(&fabric, "198.18.1.1", 280, 1)?;
    let counted = counted_after("spray", &c0, 280)?;
    ensure!(
        counted == vec![70, 70, 70, 70],
        "after replace: {counted:?}"
    );
    ensure!(fabric.bmv2.alive(), "switch died");

    drop(to_client);
    match client.join() {
        Ok(r) => r?,
        Err(_) => bail!("client thread panicked"),
    }
    Ok(())
}

fn tracing_log(line: &str) {
    eprintln!("{line}");
}

/// A port slowed to 200 packets/s (BMv2 queue rate) fills its queue under a burst: the
/// switch sends an ARN Type 1 (Path ID = the neighbor's router ID, TTL 255, DSCP CS6, UDP
/// 9961) to the upstream port, and Type 2 once a packet finds the queue drained.
#[test]
fn p4_bmv2_congestion_sends_arn() -> Result<()> {
    let test = "p4_bmv2_congestion_sends_arn";
    if !bmv2_available(test) {
        return Ok(());
    }
    let fabric = Fabric::new("p4c", 2)?;
    let sw = fabric.bmv2.sw.name.clone();
    let opts = options(&fabric);
    let s0_mac: MacAddr = Fabric::mac(&fabric.src, "s0")?.parse()?;
    in_netns(&sw, move || async move {
        let mut dp = P4RuntimeDataplane::connect(opts).await?;
        dp.install(&group("198.20.0.0/16", GroupMode::Spray, &[1]))
            .await?;
        dp.monitor_port(
            "p1",
            20,
            5,
            Ipv4Addr::new(10, 0, 0, 2),
            &[(
                "p0".to_string(),
                s0_mac,
                Ipv4Addr::new(10, 0, 0, 254),
                Ipv4Addr::new(10, 0, 0, 1),
            )],
        )
        .await?;
        Ok(())
    })?;
    if let Err(e) = fabric.bmv2.set_queue_rate(1, 200) {
        fare_integration::skip(
            test,
            &format!(
                "cannot rate-limit a BMv2 queue ({e:#}); simple_switch_grpc needs \
                 its Thrift runtime server (configure --with-thrift)"
            ),
        );
        return Ok(());
    }
    let script = "from scapy.all import Ether, IP, UDP, Raw, sendp, AsyncSniffer\n\
        import time\n\
        sn = AsyncSniffer(iface='s0', filter='udp dst port 9961')\n\
        sn.start(); time.sleep(0.5)\n\
        burst = [Ether(dst='02:fa:00:00:00:fe')/IP(src='10.0.0.1', dst='198.20.1.1')/UDP(sport=1, dport=2)/Raw(b'x'*64)]*300\n\
        sendp(burst, iface='s0', verbose=False)\n\
        time.sleep(3)\n\
        sendp(burst[:3], iface='s0', verbose=False, inter=0.2)\n\
        time.sleep(1)\n\
        for p in sn.stop():\n\
        \x20   ip = p['IP']\n\
        \x20   print(ip.ttl, ip.tos >> 2, p['UDP'].dport, bytes(p['UDP'].payload).hex())\n";
    let out = python(&fabric.src, script)?;
    let arns: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    ensure!(!arns.is_empty(), "no ARN left the switch");
    // ttl, dscp, port, ARN bytes: Type 1, version 0, metric, Para-Type 0x40, Path ID 10.0.0.2.
    let first = &arns[0];
    ensure!(
        first[0] == "255" && first[1] == "48" && first[2] == "9961",
        "ARN header {first:?}"
    );
    ensure!(
        first[3].starts_with("0100") && first[3][6..].starts_with("400a000002"),
        "ARN {first:?}"
    );
    ensure!(
        arns.iter().any(|a| a[3].starts_with("0200")),
        "no congestion-eliminated ARN: {arns:?}"
    );
    Ok(())
}
