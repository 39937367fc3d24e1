//! fare.p4 on BMv2 (`simple_switch_grpc`) programmed by fare's own P4Runtime client.
//!
//! One switch namespace, a source namespace on port 0 and a sink namespace on ports 1..4.
//! Checks: pipeline push, a 3:3:4:4 group in spray mode (exact per cycle) and flow mode
//! (within 3 points of the weights), an injected ARN removing a member at once and a
//! Type 2 restoring it, congestion on a rate-limited port sending an ARN upstream,
//! make-before-break replacement, and reconcile-on-reconnect.
//! Skipped (with the reason printed) without root, BMv2 or the compiled program.

use anyhow::{bail, ensure, Context, Result};
use fare::dataplane::{Dataplane, Group, GroupMode, MacAddr};
use fare::dp_p4::{P4RuntimeDataplane, QueueThresholds};
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
                            // ARNs are received only when sent to the switch's own address.
                            dp.set_local_addresses(&["10.1.1.1".parse()?]).await?;
                            let prefixes: Vec<IpNet> = vec!["198.18.0.0/16".parse()?];
                            let slot = dp
                                .map_arn_path("p1", Ipv4Addr::new(10, 0, 0, 42), &prefixes)
                                .await?;
                            Ok(vec![u64::from(slot)])
                        }
                        "rx-counters" => arn_rx_counters(&mut dp).await,
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

    // The counters step `name` reads, once they count `total` more than `c0` (bounded wait
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

    // Malformed ARNs (docs/CODEPOINTS.md) are counted (arn_rx_counter 3) and dropped:
    // Version 1, an unassigned Para-Type bit, Type 5. None removes the member.
    let rx0 = step("rx-counters")?;
    for arn in [
        [1u8, 0x10, 10, 0x40, 10, 0, 0, 42],
        [1, 0x00, 10, 0x60, 10, 0, 0, 42],
        [5, 0x00, 10, 0x40, 10, 0, 0, 42],
    ] {
        fabric.send_arn("d1", "10.1.1.1", 255, &arn)?;
    }
    let rx = counted_after("rx-counters", &rx0, 3)?;
    ensure!(
        rx == vec![0, 0, 0, 3],
        "ARN receive counters after 3 malformed: {rx:?}"
    );
    let counted = spray_280(&fabric)?;
    ensure!(
        counted == vec![60, 60, 80, 80],
        "after malformed ARNs: {counted:?}"
    );

    // An ARN to an address that is not the switch's crosses it like any packet (here
    // routed by the spray group to a sink) and is not acted on.
    let rx0 = step("rx-counters")?;
    let sink0 = fabric.sink_counts()?;
    fabric.send_arn("d1", "198.18.7.7", 255, &[1, 0, 10, 0x40, 10, 0, 0, 42])?;
    let sink = fabric.sink_delta_after(&sink0, 1, Duration::from_secs(10));
    ensure!(
        sink.iter().sum::<u64>() == 1,
        "transit ARN at the sinks: {sink:?}"
    );
    let rx = delta(&step("rx-counters")?, &rx0);
    ensure!(rx == vec![0, 0, 0, 0], "a transit ARN was received: {rx:?}");
    let counted = spray_280(&fabric)?;
    ensure!(
        counted == vec![60, 60, 80, 80],
        "after a transit ARN: {counted:?}"
    );

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

/// `arn_rx_counter` (fare.p4): applied, unknown path, bad TTL, malformed.
async fn arn_rx_counters(dp: &mut P4RuntimeDataplane) -> Result<Vec<u64>> {
    use fare::p4runtime::proto::p4::v1 as p4;
    let entity = dp
        .program()
        .counter_entry(dp.program().arn_rx_counter, None);
    let mut counts = vec![0u64; 4];
    for e in dp.client().read(vec![entity]).await? {
        if let Some(p4::entity::Entity::CounterEntry(c)) = e.entity {
            let index = c.index.map(|i| i.index).unwrap_or(-1);
            if let (Ok(i), Some(d)) = (usize::try_from(index), c.data) {
                if i < counts.len() {
                    counts[i] = u64::try_from(d.packet_count).unwrap_or(0);
                }
            }
        }
    }
    Ok(counts)
}

fn tracing_log(line: &str) {
    eprintln!("{line}");
}

/// A port slowed to 50 packets/s (BMv2 queue rate) fills its queue under a burst of
/// RoCEv2 packets (UDP 4791 with a BTH): the switch sends ARN Type 1 upstream (Path ID =
/// the neighbor's router ID, TTL 255, DSCP CS6, UDP 9961, exactly the 8-octet message:
/// no BTH left between UDP and ARN), repeats it every refresh interval while the queue
/// stays congested, and sends Type 2 once the queue has drained although no packet is
/// sent any more (the agent's probes show the switch the drained queue).
///
/// Expectations from docs/CODEPOINTS.md, computed by hand: high 20 packets, limit 40,
/// so the onset (depth 20) carries Metric floor(255 * 20 / 40) = 127; Type 2 carries 0.
#[test]
fn p4_bmv2_congestion_sends_arn() -> Result<()> {
    let test = "p4_bmv2_congestion_sends_arn";
    let Some(fabric) = Fabric::for_test(test, "p4c", 2)? else {
        return Ok(());
    };
    let sw = fabric.bmv2.sw.name.clone();
    let opts = fabric.options(10);
    let s0_mac: MacAddr = Fabric::mac(&fabric.src, "s0")?.parse()?;
    let refresh = Duration::from_millis(200);
    // The client stays connected (its probes running) until the test says stop.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let client = std::thread::spawn(move || {
        in_netns(&sw, move || async move {
            let programmed = async {
                let mut dp = P4RuntimeDataplane::connect(opts).await?;
                dp.install(&group("198.20.0.0/16", GroupMode::Spray, &[1]))
                    .await?;
                let thresholds = QueueThresholds {
                    high: 20,
                    low: 5,
                    limit: 40,
                    refresh,
                };
                dp.monitor_port(
                    "p1",
                    thresholds,
                    Ipv4Addr::new(10, 0, 0, 2),
                    &[(
                        "p0".to_string(),
                        s0_mac,
                        Ipv4Addr::new(10, 0, 0, 254),
                        Ipv4Addr::new(10, 0, 0, 1),
                    )],
                )
                .await?;
                Ok::<_, anyhow::Error>(dp)
            }
            .await;
            match programmed {
                Ok(dp) => {
                    let _ = ready_tx.send(Ok(()));
                    // Bounded: the test sends stop, or gives up with its thread.
                    let _ = tokio::time::timeout(Duration::from_secs(120), stop_rx).await;
                    drop(dp);
                    Ok(())
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(anyhow::anyhow!("{e:#}")));
                    Ok(())
                }
            }
        })
    });
    let finish = |stop: tokio::sync::oneshot::Sender<()>| -> Result<()> {
        let _ = stop.send(());
        match client.join() {
            Ok(r) => r,
            Err(_) => bail!("client thread panicked"),
        }
    };
    match ready_rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            finish(stop_tx)?;
            return Err(e);
        }
        Err(_) => {
            finish(stop_tx)?;
            bail!("the switch was not programmed within 60 s");
        }
    }
    if let Err(e) = fabric.bmv2.set_queue_rate(1, 50) {
        finish(stop_tx)?;
        fare_integration::skip(
            test,
            &format!(
                "cannot rate-limit a BMv2 queue ({e:#}); simple_switch_grpc needs \
                 its Thrift runtime server (configure --with-thrift)"
            ),
        );
        return Ok(());
    }
    // 120 RoCEv2 SEND packets (BTH: opcode 4, P_Key 0xffff, DestQP 0x11), then nothing:
    // the sniffer runs 4 s past the burst (the queue of 64 packets drains in 1.3 s).
    let script = "from scapy.all import Ether, IP, UDP, Raw, sendp, AsyncSniffer\n\
        import time\n\
        sn = AsyncSniffer(iface='s0', filter='udp dst port 9961')\n\
        sn.start(); time.sleep(0.5)\n\
        bth = bytes([4, 0x40, 0xff, 0xff, 0, 0, 0, 0x11, 0, 0, 0, 1])\n\
        burst = [Ether(dst='02:fa:00:00:00:fe')/IP(src='10.0.0.1', dst='198.20.1.1')/UDP(sport=49152, dport=4791)/Raw(bth + b'x'*64 + b'\\0'*4)]*120\n\
        t0 = time.time()\n\
        sendp(burst, iface='s0', verbose=False)\n\
        t1 = time.time()\n\
        time.sleep(4)\n\
        print('sent', t1 - t0)\n\
        for p in sn.stop():\n\
        \x20   ip = p['IP']\n\
        \x20   print('%.3f' % (p.time - t1), ip.ttl, ip.tos >> 2, p['UDP'].dport, ip.len, p['UDP'].len, bytes(p['UDP'].payload).hex())\n";
    let out = python(&fabric.src, script);
    finish(stop_tx)?;
    let out = out?;
    // Lines: seconds after the burst's end, ttl, dscp, port, IP length, UDP length, ARN hex.
    let arns: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| !l.starts_with("sent"))
        .map(|l| l.split_whitespace().collect())
        .filter(|f: &Vec<&str>| f.len() == 7)
        .collect();
    ensure!(!arns.is_empty(), "no ARN left the switch ({out})");
    tracing_log(&format!("ARNs at the upstream neighbor: {arns:?}"));
    for a in &arns {
        ensure!(
            a[1] == "255" && a[2] == "48" && a[3] == "9961" && a[4] == "36" && a[5] == "16",
            "ARN headers (ttl, dscp, port, IP length 36, UDP length 16): {a:?}"
        );
        ensure!(
            a[6].len() == 16 && a[6][6..].starts_with("400a000002") && &a[6][2..4] == "00",
            "ARN message (8 octets, Version 0, Path ID 10.0.0.2 only): {a:?}"
        );
    }
    let kind = |a: &Vec<&str>| a[6][..2].to_string();
    let metric = |a: &Vec<&str>| u8::from_str_radix(&a[6][4..6], 16).unwrap_or(0);
    let first = &arns[0];
    ensure!(
        kind(first) == "01" && metric(first) == 127,
        "onset: Type 1 with Metric 127 (depth 20 of 40) expected: {first:?}"
    );
    let type1: Vec<&Vec<&str>> = arns.iter().filter(|a| kind(a) == "01").collect();
    ensure!(
        type1.len() >= 2,
        "Type 1 not refreshed while congested: {arns:?}"
    );
    ensure!(
        type1.iter().all(|a| metric(a) >= 1),
        "Type 1 with Metric 0: {arns:?}"
    );
    let times: Vec<f64> = type1.iter().filter_map(|a| a[0].parse().ok()).collect();
    ensure!(
        times.windows(2).all(|w| w[1] - w[0] >= 0.1),
        "Type 1 repeated faster than the refresh interval (200 ms): {times:?}"
    );
    let last = arns.last().context("no ARN")?;
    ensure!(
        kind(last) == "02" && metric(last) == 0,
        "no Type 2 (Metric 0) after the queue drained without traffic: {arns:?}"
    );
    ensure!(
        arns.iter().filter(|a| kind(a) == "02").count() == 1,
        "more than one Type 2: {arns:?}"
    );
    Ok(())
}
