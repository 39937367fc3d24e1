//! ARN per-flow mode in the real XDP program (BPF_PROG_TEST_RUN): a flow identifier
//! (UDP to 198.18.0.1 port 4791) steered off e1 leaves through e2 only, whatever its
//! hash; other flows keep both members; releasing it restores the spread; a steered flow
//! whose only other member is out still forwards (never emptied).

use anyhow::{ensure, Result};
use fare::arn::codec::{Family, FlowId};
use fare::dataplane::{Dataplane, FlowSteering, GroupMode};
use fare::dp_xdp::{TestRunOptions, XdpDataplane};
use fare_integration::packets::udp4_frame;
use fare_integration::xdp_lab::{group, sink_mac, XdpLab, ROUTER_MAC};

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

const XDP_REDIRECT: u32 = 4;

/// The sinks (1 = e1, 2 = e2) frames of `sport -> dst:dport` leave for, over 64 source ports.
fn egress(dp: &XdpDataplane, dst: Ipv4Addr, dport: u16) -> Result<BTreeSet<u8>> {
    let mut out = BTreeSet::new();
    for sport in 1000..1064 {
        let frame = udp4_frame(
            ROUTER_MAC,
            [2, 0, 0, 0, 0x10, 1],
            Ipv4Addr::new(10, 0, 0, 1),
            dst,
            sport,
            dport,
            64,
        );
        let run = dp.test_run(&frame, TestRunOptions::default())?;
        ensure!(
            run.action == XDP_REDIRECT,
            "action {} ({:?})",
            run.action,
            dp.stats()?
        );
        out.insert(run.frame[5]);
    }
    Ok(out)
}

#[test]
fn flow_arn_steers_only_matching_flows_in_the_program() -> Result<()> {
    let Some(lab) = XdpLab::for_test("flow_arn_steers_only_matching_flows_in_the_program", "st")?
    else {
        return Ok(());
    };
    lab.with_dataplane(
        |_| {},
        |rt, dp| {
            {
                rt.block_on(dp.install(&group("198.18.0.0/16", &[1, 1], GroupMode::Flow)?))?;
                let (e1, e2) = (sink_mac(1)[5], sink_mac(2)[5]);
                let dst = Ipv4Addr::new(198, 18, 0, 1);
                ensure!(egress(dp, dst, 4791)? == BTreeSet::from([e1, e2]));
                let flow = FlowId {
                    family: Family::Ipv4,
                    protocol: Some(17),
                    src: None,
                    dst: Some(dst.into()),
                    src_port: None,
                    dst_port: Some(4791),
                };
                ensure!(rt.block_on(dp.steer_flow(&flow, "e1", true))?);
                ensure!(
                    egress(dp, dst, 4791)? == BTreeSet::from([e2]),
                    "steered flow still on e1"
                );
                ensure!(
                    egress(dp, dst, 5000)? == BTreeSet::from([e1, e2]),
                    "other flows moved"
                );
                ensure!(
                    egress(dp, Ipv4Addr::new(198, 18, 0, 2), 4791)? == BTreeSet::from([e1, e2])
                );
                // Another Mask while one is in use: refused (the receiver removes the member).
                let other = FlowId {
                    dst_port: None,
                    ..flow.clone()
                };
                ensure!(!rt.block_on(dp.steer_flow(&other, "e1", true))?);
                // A re-install keeps the steering (the copy follows the new group).
                rt.block_on(dp.install(&group("198.18.0.0/16", &[2, 1], GroupMode::Flow)?))?;
                ensure!(egress(dp, dst, 4791)? == BTreeSet::from([e2]));
                // e2 out as well: the steered flow is not dropped, it keeps e1.
                let prefix = "198.18.0.0/16".parse()?;
                rt.block_on(dp.set_member_active(prefix, 1, false))?;
                ensure!(egress(dp, dst, 4791)? == BTreeSet::from([e1]));
                rt.block_on(dp.set_member_active(prefix, 1, true))?;
                ensure!(egress(dp, dst, 4791)? == BTreeSet::from([e2]));
                ensure!(rt.block_on(dp.steer_flow(&flow, "e1", false))?);
                ensure!(
                    egress(dp, dst, 4791)? == BTreeSet::from([e1, e2]),
                    "not released"
                );
                Ok(())
            }
        },
    )
}
