//! Property test of the XDP parser and forwarder over arbitrary frames, run through the
//! real program with BPF_PROG_TEST_RUN: a host-side model of what the program must do
//! (action, the one outcome counter that moves, the output frame) is compared with the
//! program on structured frames (Ethernet / 802.1Q / 802.1ad, IPv4 / IPv6 with every header
//! field drawn from edge values, truncated at random points, bytes flipped) and on raw
//! random bytes. Invariants: every frame is counted once in `received` and once in exactly
//! one outcome; a forwarded frame differs from its input only in the MACs, TTL / hop limit
//! and IPv4 checksum, and a valid IPv4 checksum stays valid; nothing else is ever changed.
//!
//! Run: `cargo test -p fare-integration --test integration xdp_proptest:: -- --nocapture` (root).
//! `FARE_PROPTEST_CASES` sets the number of cases (default 3000).

use anyhow::{Context, Result};
use fare::dataplane::{Dataplane, GroupMode};
use fare::dp_xdp::{TestRunOptions, XdpDataplane, XdpOptions};
use fare_integration::inns;
use fare_integration::packets::checksum;
use fare_integration::xdp_lab::{egress_mac, group, sink_mac, xdp_ready, XdpLab, ROUTER_MAC};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;

/// What the program must do with a frame.
#[derive(Debug, PartialEq)]
struct Expected {
    action: u32,
    stat: &'static str,
    /// Offset of the TTL (IPv4) or hop limit (IPv6) byte decremented on redirect, and
    /// the IPv4 header range whose checksum must stay valid.
    l3: Option<(usize, Option<(usize, usize)>)>,
}

fn be16(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

/// The model. Routes: 198.18.0.0/16 and 2001:db8:18::/48, one active member (e1).
fn model(f: &[u8]) -> Expected {
    let malformed = Expected {
        action: XDP_DROP,
        stat: "malformed",
        l3: None,
    };
    let pass = |stat| Expected {
        action: XDP_PASS,
        stat,
        l3: None,
    };
    let mut ethertype = be16(f, 12);
    let mut l3 = 14;
    if ethertype == 0x8100 || ethertype == 0x88a8 {
        if f.len() < 18 {
            return malformed;
        }
        ethertype = be16(f, 16);
        l3 = 18;
    }
    if f[0] & 1 != 0 || (ethertype != 0x0800 && ethertype != 0x86dd) {
        return pass("not_ip");
    }
    if ethertype == 0x0800 {
        if f.len() < l3 + 20 || f[l3] >> 4 != 4 {
            return malformed;
        }
        let ihl = usize::from(f[l3] & 0xf) * 4;
        let total = usize::from(be16(f, l3 + 2));
        if ihl < 20 || total < ihl || l3 + total > f.len() {
            return malformed;
        }
        if f[l3 + 16..l3 + 18] != [198, 18] {
            return pass("no_route");
        }
        if f[l3 + 8] <= 1 {
            return pass("ttl_exceeded");
        }
        let header = (l3 + ihl <= f.len()).then_some((l3, l3 + ihl));
        Expected {
            action: XDP_REDIRECT,
            stat: "forwarded",
            l3: Some((l3 + 8, header)),
        }
    } else {
        if f.len() < l3 + 40 || f[l3] >> 4 != 6 {
            return malformed;
        }
        if l3 + 40 + usize::from(be16(f, l3 + 4)) > f.len() {
            return malformed;
        }
        if f[l3 + 24..l3 + 30] != [0x20, 0x01, 0x0d, 0xb8, 0x00, 0x18] {
            return pass("no_route");
        }
        if f[l3 + 7] <= 1 {
            return pass("ttl_exceeded");
        }
        Expected {
            action: XDP_REDIRECT,
            stat: "forwarded",
            l3: Some((l3 + 7, None)),
        }
    }
}

/// IPv4 header (with options of `ihl`*4 - 20 bytes) + payload; checksum valid unless
/// `bad_sum`.
#[allow(clippy::too_many_arguments)]
fn ipv4(
    version: u8,
    ihl: u8,
    total: Option<u16>,
    ttl: u8,
    frag: u16,
    proto: u8,
    routed: bool,
    payload: &[u8],
    bad_sum: bool,
) -> Vec<u8> {
    let hlen = (usize::from(ihl) * 4).max(20);
    let mut h = vec![0u8; hlen];
    h[0] = (version << 4) | (ihl & 0xf);
    let len = total.unwrap_or((hlen + payload.len()) as u16);
    h[2..4].copy_from_slice(&len.to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h[8] = ttl;
    h[9] = proto;
    h[12..16].copy_from_slice(&[10, 0, 0, 1]);
    h[16..20].copy_from_slice(&if routed {
        [198, 18, 3, 4]
    } else {
        [203, 0, 113, 9]
    });
    let ihl_bytes = (usize::from(ihl & 0xf) * 4).clamp(20, hlen);
    let c = checksum(&h[..ihl_bytes]) ^ if bad_sum { 0x5a5a } else { 0 };
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn ipv6(
    version: u8,
    plen: Option<u16>,
    hop: u8,
    next: u8,
    routed: bool,
    payload: &[u8],
) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    h[0] = version << 4;
    let len = plen.unwrap_or(payload.len() as u16);
    h[4..6].copy_from_slice(&len.to_be_bytes());
    h[6] = next;
    h[7] = hop;
    h[8..24].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let dst: [u8; 6] = if routed {
        [0x20, 0x01, 0x0d, 0xb8, 0x00, 0x18]
    } else {
        [0x20, 0x01, 0x0d, 0xb8, 0x00, 0x99]
    };
    h[24..30].copy_from_slice(&dst);
    h[39] = 7;
    h.extend_from_slice(payload);
    h
}

fn edge_u8() -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(0u8),
        Just(1),
        Just(2),
        Just(64),
        Just(255),
        any::<u8>()
    ]
}

fn l3_payload() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..48)
}

fn ipv4_strategy() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![4 => Just(4u8), 1 => 0u8..16],
        prop_oneof![4 => Just(5u8), 1 => 0u8..16],
        prop_oneof![3 => Just(None), 1 => any::<u16>().prop_map(Some)],
        edge_u8(),
        prop_oneof![
            Just(0u16),
            Just(0x2000),
            Just(0x0001),
            Just(0x4000),
            any::<u16>()
        ],
        prop_oneof![Just(6u8), Just(17), Just(132), Just(1), any::<u8>()],
        any::<bool>(),
        l3_payload(),
        prop_oneof![4 => Just(false), 1 => Just(true)],
    )
        .prop_map(|(v, ihl, total, ttl, frag, proto, routed, payload, bad)| {
            ipv4(v, ihl, total, ttl, frag, proto, routed, &payload, bad)
        })
}

fn ipv6_strategy() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![4 => Just(6u8), 1 => 0u8..16],
        prop_oneof![3 => Just(None), 1 => any::<u16>().prop_map(Some)],
        edge_u8(),
        prop_oneof![Just(6u8), Just(17), Just(58), Just(0), any::<u8>()],
        any::<bool>(),
        l3_payload(),
    )
        .prop_map(|(v, plen, hop, next, routed, payload)| {
            ipv6(v, plen, hop, next, routed, &payload)
        })
}

/// Structured frames, then maybe cut short and maybe with a few bytes overwritten.
fn frame_strategy() -> impl Strategy<Value = Vec<u8>> {
    let l3 = prop_oneof![
        4 => ipv4_strategy().prop_map(|p| (0x0800u16, p)),
        4 => ipv6_strategy().prop_map(|p| (0x86ddu16, p)),
        1 => l3_payload().prop_map(|p| (0x0806u16, p)),
        1 => (any::<u16>(), l3_payload()),
    ];
    let tag = prop_oneof![
        3 => Just(None),
        1 => Just(Some(0x8100u16)),
        1 => Just(Some(0x88a8u16)),
    ];
    let structured = (
        prop::bool::weighted(0.1),
        tag,
        l3,
        prop_oneof![3 => Just(None), 1 => any::<prop::sample::Index>().prop_map(Some)],
        prop_oneof![
            3 => Just(vec![]),
            1 => prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..3),
        ],
    )
        .prop_map(|(multicast, tag, (ethertype, l3), cut, flips)| {
            let mut dst = ROUTER_MAC;
            if multicast {
                dst[0] |= 1;
            }
            let mut f = dst.to_vec();
            f.extend_from_slice(&[2, 0, 0, 0, 0x10, 1]);
            if let Some(t) = tag {
                f.extend_from_slice(&t.to_be_bytes());
                f.extend_from_slice(&[0, 7]);
            }
            f.extend_from_slice(&ethertype.to_be_bytes());
            f.extend_from_slice(&l3);
            if let Some(at) = cut {
                let keep = 14 + at.index(f.len() - 13);
                f.truncate(keep);
            }
            // Flips never touch the first 12 bytes (MACs), so the model's routing
            // inputs stay what the flips made of them.
            for (at, byte) in flips {
                if f.len() > 12 {
                    let i = 12 + at.index(f.len() - 12);
                    f[i] = byte;
                }
            }
            f
        });
    let raw = prop::collection::vec(any::<u8>(), 14..160);
    prop_oneof![4 => structured, 1 => raw]
}

fn check(dp: &XdpDataplane, frame: &[u8]) -> Result<(), TestCaseError> {
    let fail = |e: anyhow::Error| TestCaseError::fail(format!("{e:#}"));
    let before = dp.stats().map_err(|e| fail(e.into()))?;
    let run = dp
        .test_run(frame, TestRunOptions::default())
        .map_err(|e| fail(e.into()))?;
    let after = dp.stats().map_err(|e| fail(e.into()))?;
    let want = model(frame);
    prop_assert_eq!(run.action, want.action, "frame {:02x?}", frame);
    prop_assert_eq!(after["received"] - before["received"], 1);
    let moved: Vec<(&str, u64)> = after
        .iter()
        .filter(|(k, v)| **k != "received" && **v != before[*k])
        .map(|(k, v)| (*k, v - before[*k]))
        .collect();
    prop_assert_eq!(moved, vec![(want.stat, 1)], "frame {:02x?}", frame);
    match want.l3 {
        None => prop_assert_eq!(&run.frame[..], frame, "a frame not forwarded was changed"),
        Some((ttl_at, header)) => {
            let mut expected = frame.to_vec();
            expected[..6].copy_from_slice(&sink_mac(1));
            expected[6..12].copy_from_slice(&egress_mac(1));
            expected[ttl_at] -= 1;
            prop_assert_eq!(run.frame.len(), frame.len());
            // Everything but the IPv4 checksum is exactly as predicted.
            let mut got = run.frame.clone();
            if let Some((start, _)) = header {
                got[start + 10..start + 12].copy_from_slice(&frame[start + 10..start + 12]);
            }
            prop_assert_eq!(&got[..], &expected[..], "frame {:02x?}", frame);
            if let Some((start, end)) = header {
                if checksum(&frame[start..end]) == 0 {
                    prop_assert_eq!(
                        checksum(&run.frame[start..end]),
                        0,
                        "a valid IPv4 checksum became invalid: {:02x?}",
                        frame
                    );
                }
            }
        }
    }
    Ok(())
}

#[test]
fn xdp_parser_matches_the_model_on_arbitrary_frames() -> Result<()> {
    let test = "xdp_parser_matches_the_model_on_arbitrary_frames";
    if !xdp_ready(test) {
        return Ok(());
    }
    let cases: u32 = std::env::var("FARE_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let lab = XdpLab::new("xp")?;
    let node = lab.node.clone();
    inns::run(&lab.router.name, move || -> Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let _enter = rt.enter();
        let mut dp = XdpDataplane::open(&XdpOptions::new(node, vec![]))?;
        let result = (|| -> Result<()> {
            rt.block_on(dp.install(&group("198.18.0.0/16", &[1], GroupMode::Spray)?))?;
            rt.block_on(dp.install(&group("2001:db8:18::/48", &[1], GroupMode::Flow)?))?;
            let mut runner = TestRunner::new(Config {
                cases,
                failure_persistence: None,
                ..Config::default()
            });
            runner
                .run(&frame_strategy(), |frame| check(&dp, &frame))
                .map_err(|e| anyhow::anyhow!("{e}"))
                .context("program and model disagree")?;
            let stats = dp.stats()?;
            eprintln!("{cases} frames through the program: {stats:?}");
            Ok(())
        })();
        dp.destroy()?;
        result
    })
}
