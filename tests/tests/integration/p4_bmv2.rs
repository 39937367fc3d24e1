//! fare.p4 on BMv2 (`simple_switch_grpc`) programmed by fare's own P4Runtime client.
//!
//! One switch namespace, a source namespace on port 0 and a sink namespace on ports 1..4.
//! Checks: pipeline push, a 3:3:4:4 group in spray mode (exact per cycle) and flow mode
//! (within 3 points of the weights), an injected ARN removing a member at once and a
//! Type 2 restoring it, congestion on a rate-limited port sending an ARN upstream,
//! make-before-break replacement, and reconcile-on-reconnect.
//! Skipped (with the reason printed) without root, BMv2 or the compiled program.

use anyhow::{bail, ensure, Context, Result};
use fare::dataplane::p4rt::P4RuntimeDataplane;
use fare::dataplane::{Dataplane, Group, GroupMode, MacAddr};
use fare_integration::delta;
use fare_integration::p4::{in_netns, members, python, Fabric};
use ipnet::IpNet;
use std::net::Ipv4Addr;
use std::time::Duration;

const WEIGHTS: [u32; 4] = [3, 3, 4, 4];

/// A group over p1..pN with neighbor MACs 02:00:00:00:00:0i. `prefix` is a test constant.
fn group(prefix: &str, mode: GroupMode, weights: &[u32]) -> Group {
    Group {
        prefix: prefix.parse().expect("test prefix"),
        mode,
        members: members(weights, |w| f64::from(w) * 25.0),
    }
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

#[test]
fn p4_bmv2_wcmp_spray_flow_arn() -> Result<()> {
    let Some(mut fabric) = Fabric::for_test("p4_bmv2_wcmp_spray_flow_arn", "p4w", 4)? else {
        return Ok(());
    };
    let sw = fabric.bmv2.sw.name.clone();
    let opts = fabric.options(10);

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
    // 280 packets (one flow) to the spray group, its member counters once they counted them.
    let spray_280 = |fabric: &Fabric| -> Result<Vec<u64>> {
        let c0 = step("spray")?;
        fabric.send_udp("198.18.1.1", 280, 1)?;
        counted_after("spray", &c0, 280)
    };

    step("install")?;

    // Spray: 20 whole cycles of 14 packets carry exactly 60:60:80:80.
    let sink0 = fabric.sink_counts()?;
    let c0 = step("spray")?;
    fabric.send_udp("198.18.1.1", 280, 1)?;
    let sink = fabric.sink_delta_after(&sink0, 280, Duration::from_secs(10));
    let counted = delta(&step("spray")?, &c0);
    ensure!(
        counted == vec![60, 60, 80, 80],
        "spray member counters {counted:?}"
    );
    ensure!(sink == vec![60, 60, 80, 80], "spray at the sink {sink:?}");
    ensure!(fabric.bmv2.alive(), "switch died");

    // Flow: 4000 flows, shares within 3 points of 3:3:4:4.
    let c0 = step("flow")?;
    fabric.send_udp("198.19.1.1", 4000, 4000)?;
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
    fabric.inject_arn("d1", 1, Ipv4Addr::new(10, 0, 0, 42), 255)?;
    let punt = step("packet-in")?;
    ensure!(punt[0] == 1, "packet-in reason {}", punt[0]);
    let counted = spray_280(&fabric)?;
    ensure!(counted[0] == 0, "removed member still used: {counted:?}");
    ensure!(
        counted.iter().sum::<u64>() == 280,
        "packets lost while steering: {counted:?}"
    );

    // An ARN without TTL 255 is dropped (and does not restore anything).
    fabric.inject_arn("d1", 2, Ipv4Addr::new(10, 0, 0, 42), 64)?;
    // Type 2 restores it.
    fabric.inject_arn("d1", 2, Ipv4Addr::new(10, 0, 0, 42), 255)?;
    let punt = step("packet-in")?;
    ensure!(punt[0] == 1, "packet-in reason {}", punt[0]);
    let counted = spray_280(&fabric)?;
    ensure!(counted == vec![60, 60, 80, 80], "after Type 2: {counted:?}");

    // A removal no Type 2 revokes ends by itself after the hold time.
    step("hold-short")?;
    fabric.inject_arn("d1", 1, Ipv4Addr::new(10, 0, 0, 42), 255)?;
    let punt = step("packet-in")?;
    ensure!(punt[0] == 1, "packet-in reason {}", punt[0]);
    std::thread::sleep(Duration::from_millis(600));
    let counted = spray_280(&fabric)?;
    ensure!(
        counted == vec![60, 60, 80, 80],
        "after the hold time: {counted:?}"
    );

    // Make-before-break replacement to 1:1:1:1: 280 packets = 70 each.
    step("replace")?;
    let counted = spray_280(&fabric)?;
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
    let Some(fabric) = Fabric::for_test(test, "p4c", 2)? else {
        return Ok(());
    };
    let sw = fabric.bmv2.sw.name.clone();
    let opts = fabric.options(10);
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
