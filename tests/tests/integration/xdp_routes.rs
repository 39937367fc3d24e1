//! IPv4 route lookup through the real program (`BPF_PROG_TEST_RUN`): nested prefixes
//! from /0 to /32, which the fast path finds in its table (DIR4_TOP and blocks, 16 + 8 + 8
//! bits) and the full program in the trie. Each route's group has one member with a MAC
//! of its own, so the output frame names the route that forwarded it. Expectations are
//! written by hand from longest-prefix-match (the first test) or computed by a plain
//! longest match over the route list (the random one); neither shares code with the
//! loader's table; the table itself (read back from the maps) must answer wherever a
//! route does, so a table left empty (every packet quietly asking the trie) fails too. The first test
//! checks everything again after reopening the pins (an agent restart), the random one
//! its last case's routes.

use anyhow::{ensure, Context, Result};
use fare::dataplane::chain::Chain;
use fare::dataplane::{Dataplane, Group, GroupMode, MacAddr, Member, Offers};
use fare::dp_kernel::KernelDataplane;
use fare::dp_xdp::{TestRunOptions, XdpDataplane, XdpOptions};
use fare_integration::inns;
use fare_integration::packets::udp4_frame;
use fare_integration::xdp_lab::{XdpLab, GEN_MAC, ROUTER_MAC};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::net::Ipv4Addr;

const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;

/// A group for `prefix` with one member whose MAC ends in `tag`.
fn tagged(prefix: &str, tag: u8) -> Result<Group> {
    Ok(Group {
        prefix: prefix.parse()?,
        mode: GroupMode::Spray,
        members: vec![Member {
            via: format!("route-{tag}"),
            interface: "e1".into(),
            next_hop: None,
            neighbor_mac: Some(MacAddr([2, 0, 0, 0x77, 0, tag])),
            weight: 1,
            bandwidth_gbps: 0.0,
        }],
    })
}

/// The tag of the route that forwarded a UDP frame to `dst` (None: passed to the kernel,
/// no route).
fn route_of(dp: &XdpDataplane, dst: Ipv4Addr) -> Result<Option<u8>> {
    let frame = udp4_frame(
        ROUTER_MAC,
        GEN_MAC,
        Ipv4Addr::new(10, 9, 9, 9),
        dst,
        1000,
        2000,
        64,
    );
    let run = dp.test_run(&frame, TestRunOptions::default())?;
    match run.action {
        XDP_REDIRECT => Ok(Some(run.frame[5])),
        XDP_PASS => Ok(None),
        other => anyhow::bail!("{dst}: action {other}"),
    }
}

fn with_router(test: &str, tag: &str, f: impl FnOnce(&str) -> Result<()> + Send) -> Result<()> {
    let Some(lab) = XdpLab::for_test(test, tag)? else {
        return Ok(());
    };
    let node = lab.node.clone();
    inns::run(&lab.router.name, move || f(&node))
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

#[test]
fn xdp_routes_nested_prefixes_hand_computed() -> Result<()> {
    with_router("xdp_routes_nested_prefixes_hand_computed", "xr", |node| {
        let rt = runtime()?;
        let _enter = rt.enter();
        let opts = XdpOptions::new(node.to_string(), vec![]);
        let mut dp = XdpDataplane::open(&opts)?;
        let routes = [
            ("0.0.0.0/0", 1),
            ("10.0.0.0/8", 2),
            ("10.1.0.0/16", 3),
            ("10.1.2.0/24", 4),
            ("10.1.2.128/25", 5),
            ("10.1.2.3/32", 6),
            ("10.1.255.255/32", 7),
            ("172.16.0.0/12", 8),
        ];
        for (p, tag) in routes {
            rt.block_on(dp.install(&tagged(p, tag)?))?;
        }
        // Longest match by hand: (destination, route tag).
        let want: [(&str, Option<u8>); 12] = [
            ("192.0.2.1", Some(1)),
            ("10.200.0.1", Some(2)),
            ("10.1.9.9", Some(3)),
            ("10.1.2.4", Some(4)),
            ("10.1.2.127", Some(4)),
            ("10.1.2.128", Some(5)),
            ("10.1.2.3", Some(6)),
            ("10.1.255.255", Some(7)),
            ("10.1.255.254", Some(3)),
            ("172.31.255.255", Some(8)),
            ("172.32.0.0", Some(1)),
            ("10.2.0.0", Some(2)),
        ];
        let check = |dp: &XdpDataplane, want: &[(&str, Option<u8>)], when: &str| -> Result<()> {
            let mut wrong = Vec::new();
            for (dst, tag) in want {
                let got = route_of(dp, dst.parse()?)?;
                if got != *tag {
                    wrong.push(format!("{dst}: route {got:?}, want {tag:?}"));
                }
                // The fast path found it in its table, not in the trie behind it.
                if dp.ipv4_table_route(dst.parse()?).is_some() != tag.is_some() {
                    wrong.push(format!("{dst}: the IPv4 table has no entry for it"));
                }
            }
            ensure!(wrong.is_empty(), "{when}:\n{}", wrong.join("\n"));
            Ok(())
        };
        check(&dp, &want, "all routes")?;
        // An agent restart: the next one adopts the table with the routes.
        drop(dp);
        let mut dp = XdpDataplane::open(&opts)?;
        check(&dp, &want, "after reopening the pins")?;
        // Removals reach the covering route; the default route's removal leaves no
        // route (the kernel's).
        for p in ["10.1.2.0/24", "10.1.2.3/32", "0.0.0.0/0"] {
            rt.block_on(dp.remove(p.parse()?))?;
        }
        check(
            &dp,
            &[
                ("10.1.2.4", Some(3)),
                ("10.1.2.3", Some(3)),
                ("10.1.2.200", Some(5)),
                ("192.0.2.1", None),
                ("10.1.255.255", Some(7)),
            ],
            "after removals",
        )?;
        dp.destroy()?;
        Ok(())
    })
}

/// A random route: a prefix from a few nesting /8s and /16s, any length.
fn arb_route() -> impl Strategy<Value = (u32, u8)> {
    (
        prop::sample::select(vec![0x0a00_0000u32, 0x0a01_0000, 0xc612_0000]),
        any::<u32>(),
        prop::sample::select(vec![0u8, 8, 12, 16, 17, 20, 24, 25, 28, 30, 32]),
    )
        .prop_map(|(hi, lo, len)| {
            let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            ((hi | (lo & 0x0001_ffff)) & m, len)
        })
}

fn covers(net: u32, len: u8, a: u32) -> bool {
    len == 0 || (a >> (32 - u32::from(len))) == (net >> (32 - u32::from(len)))
}

#[test]
fn xdp_routes_random_against_longest_match() -> Result<()> {
    with_router("xdp_routes_random_against_longest_match", "xq", |node| {
        let rt = runtime()?;
        let _enter = rt.enter();
        let opts = XdpOptions::new(node.to_string(), vec![]);
        let mut dp = XdpDataplane::open(&opts)?;
        let cases: u32 = std::env::var("FARE_PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(12, |n: u32| n.clamp(1, 200));
        let mut runner = TestRunner::new_with_rng(
            Config {
                cases,
                failure_persistence: None,
                ..Config::default()
            },
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        );
        let strategy = (
            prop::collection::vec((arb_route(), any::<bool>()), 1..24),
            prop::collection::vec(any::<u32>(), 8),
        );
        let dp_cell = std::cell::RefCell::new(&mut dp);
        let result = runner.run(&strategy, |(ops, probes)| {
            let mut dp = dp_cell.borrow_mut();
            // Each case starts from no route.
            for g in rt.block_on(dp.groups()).map_err(fail)? {
                rt.block_on(dp.remove(g.group.prefix)).map_err(fail)?;
            }
            let mut list: Vec<(u32, u8, u8)> = Vec::new();
            for (i, ((net, len), remove)) in ops.into_iter().enumerate() {
                let prefix = format!("{}/{len}", Ipv4Addr::from(net));
                list.retain(|(n, l, _)| (*n, *l) != (net, len));
                if remove {
                    let _ = rt.block_on(dp.remove(prefix.parse().map_err(fail)?));
                } else {
                    let tag = (i + 1) as u8;
                    rt.block_on(dp.install(&tagged(&prefix, tag).map_err(fail)?))
                        .map_err(fail)?;
                    list.push((net, len, tag));
                }
            }
            let mut at = probes.clone();
            for (n, l, _) in &list {
                let last = n | if *l == 0 {
                    u32::MAX
                } else {
                    !(u32::MAX << (32 - l))
                };
                at.extend([*n, last, n.wrapping_sub(1), last.wrapping_add(1)]);
            }
            for a in at {
                let want = list
                    .iter()
                    .filter(|(n, l, _)| covers(*n, *l, a))
                    .max_by_key(|(_, l, _)| *l)
                    .map(|(_, _, t)| *t);
                let got = route_of(&dp, Ipv4Addr::from(a)).map_err(fail)?;
                prop_assert_eq!(got, want, "to {} with routes {:?}", Ipv4Addr::from(a), list);
                prop_assert_eq!(
                    dp.ipv4_table_route(Ipv4Addr::from(a)).is_some(),
                    want.is_some(),
                    "the IPv4 table's entry for {} with routes {:?}",
                    Ipv4Addr::from(a),
                    list
                );
            }
            Ok(())
        });
        result.map_err(|e| anyhow::anyhow!("{e}"))?;
        // The last case's routes survive a reopening.
        let before: Vec<_> = (0..=255u32)
            .map(|i| route_of(&dp, Ipv4Addr::from(0x0a01_0000 | i << 8 | 7)))
            .collect::<Result<_>>()?;
        drop(dp);
        let dp = XdpDataplane::open(&opts)?;
        let after: Vec<_> = (0..=255u32)
            .map(|i| route_of(&dp, Ipv4Addr::from(0x0a01_0000 | i << 8 | 7)))
            .collect::<Result<_>>()?;
        ensure!(before == after, "routes changed by reopening the pins");
        dp.destroy().context("destroying the data plane")?;
        Ok(())
    })
}

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

/// With `egress_spray` the agent runs XDP as the primary of a chain whose follower is
/// the kernel (host routes). The IPv4 table runs out of blocks (1,024; a /32 alone in
/// its /16 takes two: one for its /16, one for its /24), so the last route is left to
/// the trie; once a route is removed and its blocks' grace period is over, the data
/// plane's upkeep (`maintain`, called by the agent every second) must reach the XDP
/// backend through the chain and give the route its entries again. A chain that answers
/// `maintain` itself never refills the table.
#[test]
fn xdp_routes_refilled_through_the_host_routes_chain() -> Result<()> {
    let test = "xdp_routes_refilled_through_the_host_routes_chain";
    with_router(test, "xc", |node| {
        let rt = runtime()?;
        let _enter = rt.enter();
        let xdp = XdpDataplane::open(&XdpOptions::new(node.to_string(), vec![]))?;
        let kernel = rt.block_on(KernelDataplane::open(&["e1".to_string()]))?;
        let mut chain = Chain::new(xdp).then(Box::new(kernel));
        ensure!(
            Offers::of(&mut chain) == XdpDataplane::OFFERS,
            "the chain offers what its XDP primary offers"
        );
        let groups = host_routes(BLOCKS / 2 + 1)?;
        for r in rt.block_on(chain.install_batch(&groups)) {
            r?;
        }
        let last = Ipv4Addr::new(22, 0, 7, 9); // the route installed last
        let want = Some(tag_of(BLOCKS / 2));
        ensure!(
            route_of(chain.primary(), last)? == want,
            "the trie forwards it"
        );
        ensure!(
            chain.primary().ipv4_table_route(last).is_none(),
            "with every block taken, the last /32 should be left to the trie"
        );
        rt.block_on(chain.remove(groups[0].prefix))?;
        // The freed blocks are reused only after their grace period (20 ms).
        std::thread::sleep(std::time::Duration::from_millis(100));
        rt.block_on(chain.maintain())?;
        ensure!(
            chain.primary().ipv4_table_route(last).is_some(),
            "maintain through the chain did not refill the IPv4 table"
        );
        ensure!(
            route_of(chain.primary(), last)? == want,
            "the refilled entry forwards elsewhere"
        );
        for g in &groups[1..] {
            rt.block_on(chain.remove(g.prefix))?;
        }
        chain.into_primary().destroy()?;
        Ok(())
    })
}

/// Blocks of the IPv4 table (`fare_common::dir4::MAX_BLOCKS`).
const BLOCKS: usize = 1024;

fn tag_of(i: usize) -> u8 {
    (i % 250) as u8 + 1
}

/// `n` host routes, /32s in distinct /16s of 20.0.0.0/6 (two blocks each). Members name
/// a next hop on e1 (the kernel's route) and a MAC (XDP's rewrite) tagged by route.
fn host_routes(n: usize) -> Result<Vec<Group>> {
    (0..n)
        .map(|i| {
            let mut g = tagged(&format!("{}.{}.7.9/32", 20 + i / 256, i % 256), tag_of(i))?;
            g.members[0].next_hop = Some("10.1.1.1".parse()?);
            Ok(g)
        })
        .collect()
}
