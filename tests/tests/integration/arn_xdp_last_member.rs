//! The XDP program's ARN receiver never takes out a group's last member in service (as
//! the agent's receiver refuses to): through the real program (BPF_PROG_TEST_RUN), a
//! Type 1 from the neighbor on e1 takes member 0 out, a Type 1 from the neighbor on e2
//! would take out the last one and is counted `arn_kept_last` instead, so traffic keeps
//! flowing through e2; a Type 2 from e1's neighbor brings member 0 back.

use anyhow::{ensure, Result};
use fare::dataplane::{Dataplane, GroupMode};
use fare::dp_xdp::arn::ArnFastPath;
use fare::dp_xdp::{TestRunOptions, XdpDataplane};
use fare::netdev::links as netdev;
use fare_integration::packets::{ethernet, ipv4, udp, udp4_frame, ETH_P_IP};
use fare_integration::xdp_lab::{group, sink_mac, XdpLab, ROUTER_MAC};

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

const XDP_PASS: u32 = 2;

/// An ARN datagram (Path ID 0) from `src` with TTL 255.
fn arn(src: [u8; 4], kind: u8) -> Vec<u8> {
    let payload = [kind, 0, 9, 0x40, 0, 0, 0, 0];
    let mut f = ethernet(ROUTER_MAC, [0x02, 0, 0, 0, 0, 9], None, ETH_P_IP);
    f.extend(ipv4(
        Ipv4Addr::from(src),
        Ipv4Addr::new(10, 0, 0, 1),
        17,
        255,
        &udp(40000, 9961, &payload),
    ));
    f
}

/// The sinks 64 spray-mode packets leave for.
fn egress(dp: &XdpDataplane) -> Result<BTreeSet<u8>> {
    let mut out = BTreeSet::new();
    for sport in 0..64 {
        let frame = udp4_frame(
            ROUTER_MAC,
            [2, 0, 0, 0, 0x10, 1],
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(198, 18, 0, 1),
            1000 + sport,
            2000,
            64,
        );
        out.insert(dp.test_run(&frame, TestRunOptions::default())?.frame[5]);
    }
    Ok(out)
}

/// Runs `check` on the XDP data plane of a lab tagged `tag` whose ARN fast path hears the
/// neighbors 10.0.0.2 (e1) and 10.0.0.3 (e2), `congestion_shift` as given, with a spray
/// group 198.18.0.0/16 over e1 and e2 (1:1) installed. `check` gets the data plane, a
/// function passing an ARN frame in through an interface (it must be XDP_PASS), and the
/// last MAC bytes of the e1 and e2 sinks. Skipped (the reason printed) without root,
/// ethtool or XDP.
fn with_arn_group(
    test: &str,
    tag: &str,
    congestion_shift: bool,
    check: impl FnOnce(&XdpDataplane, &dyn Fn(Vec<u8>, &str) -> Result<()>, u8, u8) -> Result<()>
        + Send
        + 'static,
) -> Result<()> {
    // The ARNs arrive on an interface: BPF_PROG_TEST_RUN takes one (an XDP context) from
    // Linux 5.15 on. Older kernels (the guest of Debian 11's 5.10) skip, saying so.
    if let Some((release, text)) = fare::dp_xdp::kernel::Release::running() {
        if release < fare::dp_xdp::kernel::Release(5, 15, 0) {
            fare_integration::skip(
                test,
                &format!(
                    "BPF_PROG_TEST_RUN with an ingress interface needs Linux 5.15 (this is {text})"
                ),
            );
            return Ok(());
        }
    }
    let Some(lab) = XdpLab::for_test(test, tag)? else {
        return Ok(());
    };
    // The ARNs' destination is the router's own address (the program acts only on those).
    lab.router.sh("ip addr add 10.0.0.1/32 dev lo")?;
    let configure = move |opts: &mut fare::dp_xdp::XdpOptions| {
        opts.arn = Some(ArnFastPath {
            udp_port: 9961,
            hold: Duration::from_secs(60),
            per_second: 1_000_000,
            burst: 1_000_000,
            neighbors: vec![
                ("10.0.0.2".parse().expect("addr"), "e1".into()),
                ("10.0.0.3".parse().expect("addr"), "e2".into()),
            ],
            paths: BTreeMap::new(),
            congestion_shift,
        });
    };
    lab.with_dataplane(configure, |rt, dp| {
        rt.block_on(dp.install(&group("198.18.0.0/16", &[1, 1], GroupMode::Spray)?))?;
        let (e1, e2) = (sink_mac(1)[5], sink_mac(2)[5]);
        let on = |name: &str| -> Result<TestRunOptions> {
            Ok(TestRunOptions {
                ingress_ifindex: netdev::ifindex(name)?,
                ..TestRunOptions::default()
            })
        };
        let run = |frame: Vec<u8>, via: &str| -> Result<()> {
            let r = dp.test_run(&frame, on(via)?)?;
            ensure!(r.action == XDP_PASS, "ARN action {}", r.action);
            Ok(())
        };
        check(dp, &run, e1, e2)
    })
}

#[test]
fn xdp_arn_never_removes_the_last_member() -> Result<()> {
    with_arn_group(
        "xdp_arn_never_removes_the_last_member",
        "lm",
        false,
        |dp, run, e1, e2| {
            ensure!(egress(dp)? == BTreeSet::from([e1, e2]));
            run(arn([10, 0, 0, 2], 1), "e1")?;
            ensure!(egress(dp)? == BTreeSet::from([e2]), "member 0 not out");
            run(arn([10, 0, 0, 3], 1), "e2")?;
            ensure!(
                egress(dp)? == BTreeSet::from([e2]),
                "the last member went out too"
            );
            let stats = dp.stats()?;
            ensure!(stats["arn_kept_last"] == 1, "{stats:?}");
            let arn_stats = dp.arn_stats()?;
            ensure!(arn_stats["removed"] == 1, "{arn_stats:?}");
            run(arn([10, 0, 0, 2], 2), "e1")?;
            ensure!(egress(dp)? == BTreeSet::from([e1, e2]), "member 0 not back");
            Ok(())
        },
    )
}

/// `arn.congestion.mode: shift`: the program leaves congestion (Types 1/2) to the agent,
/// which re-weights the group, and acts on failure only: a Type 1 moves nothing and is
/// counted `deferred`, a Type 3 takes the member out, a Type 4 brings it back.
#[test]
fn xdp_arn_in_shift_mode_acts_on_failures_only() -> Result<()> {
    with_arn_group(
        "xdp_arn_in_shift_mode_acts_on_failures_only",
        "sh",
        true,
        |dp, run, e1, e2| {
            run(arn([10, 0, 0, 2], 1), "e1")?;
            ensure!(
                egress(dp)? == BTreeSet::from([e1, e2]),
                "Type 1 took member 0 out"
            );
            ensure!(dp.arn_stats()?["deferred"] == 1, "{:?}", dp.arn_stats()?);
            run(arn([10, 0, 0, 2], 3), "e1")?;
            ensure!(
                egress(dp)? == BTreeSet::from([e2]),
                "Type 3 left member 0 in"
            );
            run(arn([10, 0, 0, 2], 4), "e1")?;
            ensure!(
                egress(dp)? == BTreeSet::from([e1, e2]),
                "Type 4 did not restore"
            );
            Ok(())
        },
    )
}
