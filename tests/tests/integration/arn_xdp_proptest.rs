//! Property test of the XDP program's ARN parser against the agent's codec, through the
//! real program with BPF_PROG_TEST_RUN: UDP datagrams to the ARN port from the accepted
//! neighbor (on the test-run interface, lo) with arbitrary payloads (mostly near-valid
//! headers) and TTL 255 or not. Invariants: the program passes every one to the kernel
//! (XDP_PASS), counts exactly one ARN outcome, calls spoofed exactly the TTL != 255 ones,
//! and for Path-ID-only messages agrees with the codec on valid (deferred: no member
//! table in this test) against malformed; flow-identifier messages are deferred.
//!
//! Run: `cargo test -p fare-integration --test integration arn_xdp_proptest:: -- --nocapture` (root).

use anyhow::{Context, Result};
use fare::arn::codec::ArnMessage;
use fare::dp_xdp::arn::ArnFastPath;
use fare::dp_xdp::{TestRunOptions, XdpDataplane, XdpOptions};
use fare_integration::xdp_lab::have_xdp;
use fare_integration::{have_root, inns, Netns};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::collections::BTreeMap;
use std::time::Duration;

const XDP_PASS: u32 = 2;

fn frame(payload: &[u8], ttl: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    let total = 20 + 8 + payload.len();
    f.extend_from_slice(&[0x45, 0xc0]);
    f.extend_from_slice(&(total as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, ttl, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 2, 10, 0, 0, 1]);
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&9961u16.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

fn payload_strategy() -> impl Strategy<Value = Vec<u8>> {
    let header = (
        prop_oneof![Just(1u8), Just(2), Just(3), Just(4), any::<u8>()],
        prop_oneof![Just(0u8), Just(0x0f), any::<u8>()],
        any::<u8>(),
        prop_oneof![Just(0x40u8), Just(0u8), Just(0x80), Just(0xc0), any::<u8>()],
    );
    (
        header,
        proptest::collection::vec(any::<u8>(), 0..48),
        0usize..60,
    )
        .prop_map(|((t, v, m, p), rest, cut)| {
            let mut b = vec![t, v, m, p];
            b.extend(rest);
            b.truncate(cut);
            b
        })
}

fn outcome(before: &BTreeMap<&str, u64>, after: &BTreeMap<&str, u64>) -> Vec<String> {
    [
        "accepted",
        "malformed",
        "spoofed",
        "rate_limited",
        "deferred",
    ]
    .iter()
    .filter(|k| after.get(*k) != before.get(*k))
    .map(|k| k.to_string())
    .collect()
}

#[test]
fn xdp_arn_parser_agrees_with_the_codec() -> Result<()> {
    let test = "xdp_arn_parser_agrees_with_the_codec";
    if !(have_root(test) && have_xdp(test)) {
        return Ok(());
    }
    let ns = Netns::new("axp")?;
    // The datagrams' destination is this node's: the program acts only on ARNs to one of
    // its addresses (or a multicast group).
    ns.sh("ip link set lo up && ip addr add 10.0.0.1/32 dev lo")?;
    let node = format!("arnprop-{}", std::process::id());
    inns::run(&ns.name, move || -> Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let _enter = rt.enter();
        let mut opts = XdpOptions::new(node, vec![]);
        opts.arn = Some(ArnFastPath {
            udp_port: 9961,
            hold: Duration::from_secs(1),
            per_second: 1_000_000,
            burst: 1_000_000,
            neighbors: vec![("10.0.0.2".parse()?, "lo".into())],
            paths: BTreeMap::new(),
            congestion_shift: false,
        });
        let dp = XdpDataplane::open(&opts)?;
        let result = (|| -> Result<()> {
            let mut runner = TestRunner::new(Config {
                cases: 2000,
                failure_persistence: None,
                ..Config::default()
            });
            runner
                .run(
                    &(payload_strategy(), prop_oneof![Just(255u8), any::<u8>()]),
                    |(payload, ttl)| {
                        let before = dp
                            .arn_stats()
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        let run = dp
                            .test_run(&frame(&payload, ttl), TestRunOptions::default())
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        let after = dp
                            .arn_stats()
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        prop_assert_eq!(run.action, XDP_PASS);
                        let got = outcome(&before, &after);
                        let want = if ttl != 255 {
                            "spoofed"
                        } else if payload.len() >= 4
                            && payload[3] & 0x80 != 0
                            && ArnMessage::decode(&payload).is_ok()
                        {
                            "deferred"
                        } else if payload.len() >= 4
                            && payload[3] & 0x80 != 0
                            && (1..=4).contains(&payload[0])
                            && payload[1] >> 4 == 0
                            && payload[3] & 0x3f == 0
                        {
                            // A flow identifier the codec rejects: the program leaves it to
                            // the agent without decoding it.
                            "deferred"
                        } else if ArnMessage::decode(&payload).is_ok() {
                            "deferred" // valid, but this test lists no member slots
                        } else {
                            "malformed"
                        };
                        prop_assert_eq!(
                            got,
                            vec![want.to_string()],
                            "payload {:02x?} ttl {}",
                            payload,
                            ttl
                        );
                        Ok(())
                    },
                )
                .map_err(|e| anyhow::anyhow!("{e}"))
                .context("program and codec disagree")?;
            eprintln!("ARN counters: {:?}", dp.arn_stats()?);
            // A valid ARN to another node's address is transit traffic: no ARN outcome.
            let valid = ArnMessage::path(fare::arn::codec::ArnType::FailureDetected, 0, 7)
                .encode()
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let mut transit = frame(&valid, 255);
            transit[14 + 19] = 99; // destination 10.0.0.99
            let before = dp.arn_stats()?;
            dp.test_run(&transit, TestRunOptions::default())?;
            let after = dp.arn_stats()?;
            anyhow::ensure!(
                outcome(&before, &after).is_empty(),
                "an ARN to 10.0.0.99 counted as ours: {:?}",
                outcome(&before, &after)
            );
            // ... and to this node's address it is ours (deferred: no member table here).
            let before = dp.arn_stats()?;
            dp.test_run(&frame(&valid, 255), TestRunOptions::default())?;
            let after = dp.arn_stats()?;
            anyhow::ensure!(
                outcome(&before, &after) == ["deferred"],
                "{:?}",
                outcome(&before, &after)
            );
            Ok(())
        })();
        dp.destroy()?;
        result
    })
}
