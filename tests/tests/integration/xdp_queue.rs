//! The XDP program's egress virtual queue (ebpf/fare-xdp/src/queue.rs) with frames run
//! through the real program (BPF_PROG_TEST_RUN): a port at 1000 bytes/s with a 1800-byte
//! limit admits 30 frames of 60 bytes and drops the rest (counted), reports exactly one
//! upward crossing of its high mark on the ring buffer, and drains at its rate.

use anyhow::{ensure, Context, Result};
use fare::dataplane::{Dataplane, GroupMode};
use fare::dp_xdp::queues::{QueueEvents, QueueSpec, Queues};
use fare::dp_xdp::{TestRunOptions, XdpOptions};
use fare_integration::packets::udp4_frame;
use fare_integration::xdp_lab::{group, XdpLab, ROUTER_MAC};

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

const XDP_DROP: u32 = 1;
const XDP_REDIRECT: u32 = 4;
const FRAME: u64 = 60;

#[test]
fn virtual_queue_admits_up_to_its_limit_reports_one_crossing_and_drains() -> Result<()> {
    let Some(lab) = XdpLab::for_test(
        "virtual_queue_admits_up_to_its_limit_reports_one_crossing_and_drains",
        "vq",
    )?
    else {
        return Ok(());
    };
    let node = lab.node.clone();
    let configure = |opts: &mut XdpOptions| {
        opts.queues = vec![QueueSpec {
            interface: "e1".into(),
            rate_mbps: 0.008, // 1000 bytes/s: nothing drains during the test
            limit_bytes: 1800,
        }];
    };
    lab.with_dataplane(configure, move |rt, dp| {
        {
            rt.block_on(dp.install(&group("198.18.0.0/16", &[1], GroupMode::Spray)?))?;
            let root = Path::new(fare::dp_xdp::pins::DEFAULT_ROOT);
            let mut queues = Queues::open(root, &node)?;
            let mut events = QueueEvents::open(root, &node)?;
            let ifindex = fare::netdev::links::ifindex("e1")?;
            ensure!(queues.set_thresholds(ifindex, 1200, 300)?, "no queue on e1");
            let frame = udp4_frame(
                ROUTER_MAC,
                [2, 0, 0, 0, 0x10, 1],
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(198, 18, 0, 1),
                1000,
                2000,
                64,
            );
            ensure!(frame.len() as u64 == FRAME);
            let (mut sent, mut dropped) = (0u64, 0u64);
            for _ in 0..40 {
                match dp.test_run(&frame, TestRunOptions::default())?.action {
                    XDP_REDIRECT => sent += 1,
                    XDP_DROP => dropped += 1,
                    other => anyhow::bail!("action {other}"),
                }
            }
            let q = queues.get(ifindex).context("queue gone")?;
            eprintln!("after 40 frames: {q:?}");
            ensure!(
                sent == 30 && dropped == 10,
                "sent {sent}, dropped {dropped}"
            );
            ensure!(q.packets == sent && q.drops == dropped, "{q:?}");
            ensure!(q.crossings == 1 && q.crossed_ns != 0, "{q:?}");
            // The 31st frame waits behind 30 (1800 bytes at 1000 B/s: ~1.8 s); the mean
            // over the 30 admitted is ~0.87 s.
            let mean_ms = q.delay_ns as f64 / q.packets as f64 / 1e6;
            ensure!((800.0..950.0).contains(&mean_ms), "mean delay {mean_ms} ms");
            let stats = dp.stats()?;
            ensure!(stats["queue_dropped"] == dropped, "{stats:?}");
            let got = events.wait(Duration::from_millis(100));
            ensure!(got.len() == 1, "events {got:?}");
            ensure!(
                got[0].ifindex == ifindex && got[0].backlog >= 1200 && got[0].t_ns == q.crossed_ns,
                "{got:?}"
            );

            // A fast drain empties it: the next frame is admitted, no new crossing.
            queues.set_rate(ifindex, 1_000_000_000)?;
            std::thread::sleep(Duration::from_millis(5));
            ensure!(queues.backlog_now(ifindex) == Some(0));
            ensure!(dp.test_run(&frame, TestRunOptions::default())?.action == XDP_REDIRECT);
            let q = queues.get(ifindex).context("queue gone")?;
            ensure!(q.crossings == 1 && q.backlog == FRAME, "{q:?}");
            ensure!(events.wait(Duration::from_millis(10)).is_empty());
            Ok(())
        }
    })
}
