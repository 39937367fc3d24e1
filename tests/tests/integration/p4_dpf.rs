//! DPF (draft-wang-idr-dpf §2.2.3) in fare.p4 on BMv2, programmed by fare's P4Runtime
//! backend: flow rules give packets a color, a route's per-color groups carry them.
//!
//! One switch, a source namespace on port 0, a sink namespace on ports 1..4. The route
//! sprays over p1..p4; color 1 (DSCP 10) is p1+p2, color 2 (RoCEv2 destination QPs
//! 0x100-0x1ff) is p3+p4. Checked at the sink's interfaces and the switch's counters:
//! each color only on its members, unmatched traffic on all four; when ARNs remove both
//! members of color 1, its traffic falls back to the route's other members at once (the
//! data plane's fallback, no controller write); a plain install drops the colors.
//! Skipped (with the reason printed) without root, BMv2 or the compiled program.

use anyhow::{bail, ensure, Context, Result};
use fare::dataplane::dpf::{Protocol, Range};
use fare::dataplane::{ColorGroup, Dataplane, Dpf, FlowRule, Group, GroupMode};
use fare::dp_p4::{P4RuntimeDataplane, P4RuntimeOptions};
use fare_integration::delta;
use fare_integration::p4::{in_netns, member, python, Fabric};
use std::net::Ipv4Addr;
use std::time::Duration;

const PREFIX: &str = "198.18.0.0/16";

fn group(ports: &[u32]) -> Group {
    Group {
        prefix: PREFIX.parse().expect("test prefix"),
        mode: GroupMode::Spray,
        members: ports.iter().map(|p| member(*p, 1, 100.0)).collect(),
    }
}

fn colors() -> Vec<ColorGroup> {
    vec![
        ColorGroup {
            color: 1,
            active: true,
            members: group(&[1, 2]).members,
        },
        ColorGroup {
            color: 2,
            active: true,
            members: group(&[3, 4]).members,
        },
    ]
}

/// `{color: 1, dscp: [10]}` and `{color: 2, protocol: udp, dst_port: 4791, qp: 0x100-0x1ff}`.
fn rules() -> Vec<FlowRule> {
    let none = FlowRule {
        color: 1,
        dscp: vec![],
        protocol: None,
        src: None,
        dst: None,
        src_port: None,
        dst_port: None,
        qp: None,
    };
    vec![
        FlowRule {
            dscp: vec![10],
            ..none.clone()
        },
        FlowRule {
            color: 2,
            protocol: Some(Protocol(17)),
            dst_port: Some(Range { lo: 4791, hi: 4791 }),
            qp: Some(Range {
                lo: 0x100,
                hi: 0x1ff,
            }),
            ..none
        },
    ]
}

/// What the test sends.
#[derive(Clone, Copy)]
enum Traffic {
    /// UDP with DSCP 10 (color 1).
    Dscp10,
    /// RoCEv2 (UDP 4791 + BTH) to destination QP `qp`.
    Roce(u32),
}

/// Sends `count` packets of `kind` from the source namespace, paced for BMv2; returns the
/// sink packets per port they made, once all arrived (bounded wait for a loaded machine),
/// read again after a pause so late extras show up too.
fn send(fabric: &Fabric, kind: Traffic, count: usize) -> Result<Vec<u64>> {
    let before = fabric.sink_counts()?;
    let (tos, l4) = match kind {
        Traffic::Dscp10 => (
            10 << 2,
            "UDP(sport=10000 + (i % 50), dport=5000)/Raw(b'x'*32)".to_string(),
        ),
        Traffic::Roce(qp) => (
            0,
            format!(
                "UDP(sport=49152 + (i % 50), dport=4791)/Raw(bytes([4, 0x40, 0xff, 0xff, 0, {}, {}, {}, 0x80, 0, 0, i % 256]) + b'y'*32)",
                (qp >> 16) & 0xff,
                (qp >> 8) & 0xff,
                qp & 0xff
            ),
        ),
    };
    let script = format!(
        "from scapy.all import Ether, IP, UDP, Raw, sendp\n\
         pkts = [Ether(dst='02:fa:00:00:00:fe', src='02:00:00:00:00:aa')/IP(src='10.0.0.1', dst='198.18.1.1', ttl=64, tos={tos})/{l4} for i in range({count})]\n\
         sendp(pkts, iface='s0', verbose=False, inter=0.0005)\n"
    );
    python(&fabric.src, &script)?;
    fabric.sink_delta_after(&before, count as u64, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    Ok(delta(&fabric.sink_counts()?, &before))
}

/// Steps the namespace thread runs on the test's request.
enum Step {
    Setup,
    /// Per color: packets its members counted so far (color order: 1, 2).
    ColorCounts,
    MapArn,
    PacketIn,
    Plain,
}

#[test]
fn p4_dpf_flows_follow_their_color_and_fall_back() -> Result<()> {
    let Some(mut fabric) =
        Fabric::for_test("p4_dpf_flows_follow_their_color_and_fall_back", "p4d", 4)?
    else {
        return Ok(());
    };
    let sw = fabric.bmv2.sw.name.clone();
    let opts = P4RuntimeOptions {
        arn_hold: Duration::from_secs(120),
        ..fabric.options(10)
    };

    let (to_client, from_test) = std::sync::mpsc::channel::<Step>();
    let (to_test, from_client) = std::sync::mpsc::channel::<Result<Vec<u64>>>();
    let client = std::thread::spawn(move || {
        in_netns(&sw, move || async move {
            let mut dp = P4RuntimeDataplane::connect(opts).await?;
            while let Ok(step) = from_test.recv() {
                let reply = async {
                    match step {
                        Step::Setup => {
                            dp.set_flow_rules(&rules()).await?;
                            dp.install_colored(&group(&[1, 2, 3, 4]), &colors()).await?;
                            Ok(vec![])
                        }
                        Step::ColorCounts => {
                            let groups = dp.groups().await?;
                            let g = groups
                                .iter()
                                .find(|g| g.group.prefix.to_string() == PREFIX)
                                .context("route not installed")?;
                            Ok(g.colors
                                .iter()
                                .map(|c| c.status.iter().map(|m| m.packets).sum())
                                .collect())
                        }
                        Step::MapArn => {
                            // ARNs are received only when sent to the switch's address
                            // (Fabric::inject_arn sends them to 10.1.1.1).
                            dp.set_local_addresses(&["10.1.1.1".parse()?]).await?;
                            let prefixes = vec![PREFIX.parse()?];
                            dp.map_arn_path("p1", Ipv4Addr::new(10, 0, 0, 41), &prefixes)
                                .await?;
                            dp.map_arn_path("p2", Ipv4Addr::new(10, 0, 0, 42), &prefixes)
                                .await?;
                            Ok(vec![])
                        }
                        Step::PacketIn => {
                            let (_, reason, _) = dp.packet_in(Duration::from_secs(10)).await?;
                            Ok(vec![u64::from(reason)])
                        }
                        Step::Plain => {
                            dp.install(&group(&[1, 2, 3, 4])).await?;
                            let groups = dp.groups().await?;
                            Ok(vec![groups.iter().map(|g| g.colors.len() as u64).sum()])
                        }
                    }
                }
                .await;
                if to_test.send(reply).is_err() {
                    break;
                }
            }
            Ok(())
        })
    });
    let step = |s: Step| -> Result<Vec<u64>> {
        to_client.send(s).context("client thread gone")?;
        from_client
            .recv_timeout(Duration::from_secs(60))
            .context("no answer from the client thread")?
    };

    step(Step::Setup)?;

    // Color 1 (DSCP 10) only on p1+p2, spread evenly (spray).
    let got = send(&fabric, Traffic::Dscp10, 200)?;
    ensure!(got == vec![100, 100, 0, 0], "DSCP 10 at the sink {got:?}");

    // Color 2 (RoCEv2 QP 0x150) only on p3+p4.
    let got = send(&fabric, Traffic::Roce(0x150), 200)?;
    ensure!(got == vec![0, 0, 100, 100], "QP 0x150 at the sink {got:?}");

    // An unmatched QP: the route's group, all four.
    let got = send(&fabric, Traffic::Roce(0x300), 200)?;
    ensure!(got == vec![50, 50, 50, 50], "QP 0x300 at the sink {got:?}");

    // The per-color counters the backend reports (fare show groups) saw the same.
    let per_color = step(Step::ColorCounts)?;
    ensure!(
        per_color == vec![200, 200],
        "per-color counters {per_color:?}"
    );

    // ARNs remove both members of color 1 in the data plane: its traffic falls back to
    // the route's group, where p1/p2 are skipped too.
    step(Step::MapArn)?;
    fabric.inject_arn("d1", 3, Ipv4Addr::new(10, 0, 0, 41), 255)?;
    fabric.inject_arn("d2", 3, Ipv4Addr::new(10, 0, 0, 42), 255)?;
    for _ in 0..2 {
        let reason = step(Step::PacketIn)?;
        ensure!(reason == vec![1], "packet-in reason {reason:?}");
    }
    let got = send(&fabric, Traffic::Dscp10, 200)?;
    ensure!(
        got[0] + got[1] <= 2 && got[2] + got[3] >= 198,
        "DSCP 10 after color 1 failed: {got:?} (want p3/p4)"
    );
    ensure!(fabric.bmv2.alive(), "switch died");

    // A plain install drops the colors: DSCP 10 uses the route's group again.
    let n = step(Step::Plain)?;
    ensure!(n == vec![0], "colors left after a plain install: {n:?}");

    drop(to_client);
    match client.join() {
        Ok(r) => r?,
        Err(_) => bail!("client thread panicked"),
    }
    ensure!(fabric.bmv2.alive(), "switch died");
    Ok(())
}
