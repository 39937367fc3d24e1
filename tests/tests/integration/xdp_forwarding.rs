//! XDP forwarding through real veths: a router namespace with one ingress and four
//! egress veths to four sink namespaces (see `fare_integration::xdp_lab`). The sender
//! is pinned to one CPU, so the per-CPU spray cursor sees every packet.
//!
//! Run: `cargo test -p fare-integration --test integration xdp_forwarding:: -- --test-threads=1` (root).

use anyhow::{ensure, Result};
use fare::dataplane::{Dataplane, GroupMode};
use fare::dp_xdp::{XdpDataplane, XdpOptions};
use fare_integration::packets::*;
use fare_integration::xdp_lab::{group, XdpLab, GEN_MAC, ROUTER_MAC};
use fare_integration::{delta, inns, wait_until};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const SENDER_CPU: usize = 0;

#[derive(Clone, Copy, Debug)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn prefix(self) -> &'static str {
        match self {
            Family::V4 => "198.18.0.0/16",
            Family::V6 => "2001:db8:18::/48",
        }
    }

    /// Flow `flow` toward the group's prefix, with the given TTL / hop limit.
    fn frame(self, flow: u32, ttl: u8) -> Vec<u8> {
        let sport = 1024 + (flow % 60_000) as u16;
        match self {
            Family::V4 => udp4_frame(
                ROUTER_MAC,
                GEN_MAC,
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(198, 18, (flow >> 8) as u8, flow as u8),
                sport,
                4791,
                ttl,
            ),
            Family::V6 => udp6_frame(
                ROUTER_MAC,
                GEN_MAC,
                Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
                Ipv6Addr::new(
                    0x2001,
                    0xdb8,
                    0x18,
                    0,
                    0,
                    0,
                    (flow >> 16) as u16,
                    flow as u16,
                ),
                sport,
                4791,
                ttl,
            ),
        }
    }
}

/// Runs `f` on a fresh bench tagged `tag` with the backend attached to r0 in its router
/// namespace (skipped, the reason printed, without root, ethtool or the XDP program).
fn with_router(
    test: &str,
    tag: &str,
    f: impl FnOnce(&XdpLab, &tokio::runtime::Runtime, &mut XdpDataplane) -> Result<()> + Send,
) -> Result<()> {
    let Some(lab) = XdpLab::for_test(test, tag)? else {
        return Ok(());
    };
    lab.with_dataplane(
        |opts| opts.interfaces = vec!["r0".into()],
        |rt, dp| f(&lab, rt, dp),
    )
}

/// Per-member packet counters of the group for `prefix`.
fn member_packets(
    rt: &tokio::runtime::Runtime,
    dp: &mut XdpDataplane,
    prefix: &str,
) -> Result<Vec<u64>> {
    let groups = rt.block_on(dp.groups())?;
    let g = groups
        .iter()
        .find(|g| g.group.prefix.to_string() == prefix)
        .ok_or_else(|| anyhow::anyhow!("no group {prefix}"))?;
    Ok(g.members.iter().map(|m| m.packets).collect())
}

/// Sends `count` frames (blocking) and waits until the sinks saw `expect_at_sinks` more.
fn send_and_settle(
    lab: &XdpLab,
    count: u64,
    expect_at_sinks: u64,
    frame: impl Fn(u64) -> Vec<u8> + Send + 'static,
) -> Result<Vec<u64>> {
    let before = lab.sink_rx()?;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = lab
        .spawn_sender(SENDER_CPU, count, stop, Duration::from_secs(120), frame)
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))??;
    ensure!(sent == count, "sent only {sent} of {count}");
    Ok(lab.arrived(&before, expect_at_sinks))
}

#[test]
fn xdp_spray_follows_weights_within_one_cycle() -> Result<()> {
    const PACKETS: u64 = 100_000;
    with_router(
        "xdp_spray_follows_weights_within_one_cycle",
        "xs",
        |lab, rt, dp| {
            let sinks = lab.sinks.len();
            for family in [Family::V4, Family::V6] {
                for weights in [[3u64, 3, 4, 4], [1, 1, 2, 2]] {
                    let w32: Vec<u32> = weights.iter().map(|&w| w as u32).collect();
                    rt.block_on(dp.install(&group(family.prefix(), &w32, GroupMode::Spray)?))?;
                    let before = member_packets(rt, dp, family.prefix())?;
                    let at_sinks = send_and_settle(lab, PACKETS, PACKETS, move |i| {
                        family.frame(i as u32, 64)
                    })?;
                    let counted = delta(&member_packets(rt, dp, family.prefix())?, &before);
                    let cycle: u64 = weights.iter().sum();
                    for i in 0..sinks {
                        let exact = PACKETS as f64 * weights[i] as f64 / cycle as f64;
                        ensure!(
                        (counted[i] as f64 - exact).abs() <= cycle as f64,
                        "{family:?} {weights:?}: member {i} counted {} packets, exact share {exact:.0} (all {counted:?})",
                        counted[i]
                    );
                        ensure!(
                        at_sinks[i] == counted[i],
                        "{family:?} {weights:?}: sink {i} received {} but member counter says {} ({at_sinks:?})",
                        at_sinks[i],
                        counted[i]
                    );
                    }
                    eprintln!("spray {family:?} {weights:?}: {counted:?} of {PACKETS}");
                }
            }
            Ok(())
        },
    )
}

#[test]
fn xdp_flow_mode_spreads_flows_and_keeps_each_on_one_member() -> Result<()> {
    with_router(
        "xdp_flow_mode_spreads_flows_and_keeps_each_on_one_member",
        "xw",
        |lab, rt, dp| {
            const FLOWS: u64 = 10_000;
            let weights = [3u32, 3, 4, 4];
            let sum: u32 = weights.iter().sum();
            for family in [Family::V4, Family::V6] {
                rt.block_on(dp.install(&group(family.prefix(), &weights, GroupMode::Flow)?))?;
                let before = member_packets(rt, dp, family.prefix())?;
                let at_sinks =
                    send_and_settle(lab, FLOWS, FLOWS, move |i| family.frame(i as u32, 64))?;
                let counted = delta(&member_packets(rt, dp, family.prefix())?, &before);
                ensure!(
                    at_sinks == counted,
                    "{family:?}: sinks {at_sinks:?} vs counters {counted:?}"
                );
                for (i, w) in weights.iter().enumerate() {
                    let share = counted[i] as f64 / FLOWS as f64;
                    let want = f64::from(*w) / f64::from(sum);
                    ensure!(
                    (share - want).abs() <= 0.03,
                    "{family:?}: member {i} carries {share:.4} of the flows, want {want:.4} ± 0.03 ({counted:?})"
                );
                }
                eprintln!("flow {family:?}: {counted:?} over {FLOWS} flows");
                // One flow, many packets: exactly one member moves.
                let before = member_packets(rt, dp, family.prefix())?;
                send_and_settle(lab, 1000, 1000, move |_| family.frame(4242, 64))?;
                let moved = delta(&member_packets(rt, dp, family.prefix())?, &before);
                ensure!(
                    moved.iter().filter(|&&m| m > 0).count() == 1
                        && moved.iter().sum::<u64>() == 1000,
                    "{family:?}: a single flow was spread: {moved:?}"
                );
            }
            Ok(())
        },
    )
}

#[test]
fn xdp_ttl_expired_and_malformed_are_counted_not_forwarded() -> Result<()> {
    with_router(
        "xdp_ttl_expired_and_malformed_are_counted_not_forwarded",
        "xt",
        |lab, rt, dp| {
            rt.block_on(dp.install(&group(
                Family::V4.prefix(),
                &[1, 1, 1, 1],
                GroupMode::Spray,
            )?))?;
            rt.block_on(dp.install(&group(
                Family::V6.prefix(),
                &[1, 1, 1, 1],
                GroupMode::Spray,
            )?))?;
            let icmp_before = lab.gen_icmp_time_exceeded()?;
            let stats_before = dp.stats()?;
            // 100 IPv4 TTL 1, 100 IPv6 hop limit 1.
            send_and_settle(lab, 200, 0, |i| {
                if i < 100 {
                    Family::V4.frame(i as u32, 1)
                } else {
                    Family::V6.frame(i as u32, 1)
                }
            })?;
            // 300 malformed: IPv4 cut short, IPv4 bad IHL, IPv6 payload length past the end.
            send_and_settle(lab, 300, 0, |i| {
                let mut f = Family::V4.frame(i as u32, 64);
                match i % 3 {
                    0 => f.truncate(14 + 10),
                    1 => f[14] = 0x43,
                    _ => {
                        f = Family::V6.frame(i as u32, 64);
                        f[18..20].copy_from_slice(&999u16.to_be_bytes());
                    }
                }
                f
            })?;
            let mut icmp = icmp_before;
            wait_until(Duration::from_secs(3), || {
                icmp = lab.gen_icmp_time_exceeded().unwrap_or(icmp_before);
                icmp > icmp_before
            });
            std::thread::sleep(Duration::from_millis(200));
            let stats = dp.stats()?;
            let moved = |k: &str| stats[k] - stats_before[k];
            ensure!(
                moved("ttl_exceeded") == 200,
                "ttl_exceeded moved {}",
                moved("ttl_exceeded")
            );
            ensure!(
                moved("malformed") == 300,
                "malformed moved {}",
                moved("malformed")
            );
            ensure!(
                moved("forwarded") == 0,
                "forwarded moved {}",
                moved("forwarded")
            );
            let sinks: u64 = lab.sink_rx()?.iter().sum();
            ensure!(sinks == 0, "sinks received {sinks} frames");
            ensure!(
                icmp > icmp_before,
                "the kernel sent no ICMP time exceeded for the TTL-1 packets"
            );
            eprintln!(
                "ttl_exceeded {} malformed {} icmp time exceeded at the sender {}",
                moved("ttl_exceeded"),
                moved("malformed"),
                icmp - icmp_before
            );
            Ok(())
        },
    )
}

/// Runs traffic while `change` is applied `rounds` times; returns (sent, forwarded).
fn traffic_while(
    lab: &XdpLab,
    rt: &tokio::runtime::Runtime,
    dp: &mut XdpDataplane,
    mut change: impl FnMut(&tokio::runtime::Runtime, &mut XdpDataplane, usize) -> Result<()>,
    rounds: usize,
) -> Result<(u64, Vec<u64>)> {
    let before = lab.sink_rx()?;
    let stop = Arc::new(AtomicBool::new(false));
    let sender = lab.spawn_sender(
        SENDER_CPU,
        5_000_000,
        stop.clone(),
        Duration::from_secs(120),
        |i| Family::V4.frame(i as u32 % 5000, 64),
    );
    // Let traffic start before the first change.
    std::thread::sleep(Duration::from_millis(100));
    let result = (0..rounds).try_for_each(|r| change(rt, dp, r));
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let sent = sender
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))??;
    result?;
    Ok((sent, lab.arrived(&before, sent)))
}

#[test]
fn xdp_make_before_break_1000_replacements_lose_nothing() -> Result<()> {
    with_router(
        "xdp_make_before_break_1000_replacements_lose_nothing",
        "xm",
        |lab, rt, dp| {
            let prefix = Family::V4.prefix();
            let variants = [
                group(prefix, &[3, 3, 4, 4], GroupMode::Spray)?,
                group(prefix, &[1, 1, 2, 2], GroupMode::Spray)?,
                group(prefix, &[3, 3, 4, 4], GroupMode::Flow)?,
                group(prefix, &[1, 2], GroupMode::Spray)?,
                group(prefix, &[5, 1, 1], GroupMode::Flow)?,
            ];
            rt.block_on(dp.install(&variants[0]))?;
            let stats_before = dp.stats()?;
            let (sent, at_sinks) = traffic_while(
                lab,
                rt,
                dp,
                |rt, dp, r| Ok(rt.block_on(dp.install(&variants[(r + 1) % variants.len()]))?),
                1000,
            )?;
            let stats = dp.stats()?;
            let moved = |k: &str| stats[k] - stats_before[k];
            let delivered: u64 = at_sinks.iter().sum();
            eprintln!(
            "1000 replacements under traffic: sent {sent}, delivered {delivered} {at_sinks:?}, forwarded {}, no_member {}, no_route {}",
            moved("forwarded"),
            moved("no_member"),
            moved("no_route")
        );
            ensure!(
                sent > 10_000,
                "too little traffic during the replacements: {sent}"
            );
            // `received` counts every frame the program saw; the veths' own link-local
            // chatter (IPv6 router solicitations, MLD) may add a few besides our traffic.
            ensure!(
                moved("received") >= sent,
                "the router saw {} of {sent}",
                moved("received")
            );
            ensure!(
                moved("forwarded") == sent,
                "forwarded {} of {sent}",
                moved("forwarded")
            );
            ensure!(delivered == sent, "delivered {delivered} of {sent}");
            Ok(())
        },
    )
}

#[test]
fn xdp_reopen_from_pins_under_traffic_loses_nothing() -> Result<()> {
    let Some(lab) = XdpLab::for_test("xdp_reopen_from_pins_under_traffic_loses_nothing", "xp")?
    else {
        return Ok(());
    };
    inns::run(&lab.router.name, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let _enter = rt.enter();
        let opts = XdpOptions::new(lab.node.clone(), vec!["r0".into()]);
        let g = group(Family::V4.prefix(), &[3, 3, 4, 4], GroupMode::Spray)?;
        let mut first = Some(XdpDataplane::open(&opts)?);
        if let Some(dp) = first.as_mut() {
            rt.block_on(dp.install(&g))?;
        }
        // The "agent" goes away (its process state is gone, the pins stay) and a new one
        // opens the same pins, three times, while traffic flows.
        let mut dp = XdpDataplane::open(&opts)?;
        let stats_before = dp.stats()?;
        let (sent, at_sinks) = traffic_while(
            &lab,
            &rt,
            &mut dp,
            |rt, dp, _| {
                drop(first.take());
                let mut again = XdpDataplane::open(&opts)?;
                let adopted = rt.block_on(again.groups())?;
                ensure!(adopted.len() == 1, "adopted {} groups", adopted.len());
                let w: Vec<u32> = adopted[0].group.members.iter().map(|m| m.weight).collect();
                ensure!(w == [3, 3, 4, 4], "adopted weights {w:?}");
                // Reconciling to the same group is a no-op.
                rt.block_on(again.install(&g))?;
                *dp = again;
                std::thread::sleep(Duration::from_millis(50));
                Ok(())
            },
            3,
        )?;
        let stats = dp.stats()?;
        let delivered: u64 = at_sinks.iter().sum();
        eprintln!(
            "3 reopenings under traffic: sent {sent}, delivered {delivered}, forwarded {}",
            stats["forwarded"] - stats_before["forwarded"]
        );
        ensure!(delivered == sent, "delivered {delivered} of {sent}");
        dp.destroy()?;
        Ok(())
    })
}
