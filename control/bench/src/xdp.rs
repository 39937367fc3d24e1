//! `fare bench xdp`: per-packet cost of the XDP program with `BPF_PROG_TEST_RUN`
//! (kernel-timed, no interface involved): IPv4/IPv6 x spray/flow, against two baselines
//! measured in the same run: the minimal forwarder of the benchmark object (Ethernet +
//! IPv4 parse, one LPM lookup, MAC rewrite, redirect: the limit of this data path) on the
//! IPv4 frame, and fare's program on a non-IP frame (parse, count, pass to the kernel).
//! Needs root; the frames are never transmitted.

use super::command_line;
use super::xdp_objects::MinForwarder;
use anyhow::{ensure, Context};
use etherparse::PacketBuilder;
use fare_dataplane::xdp::{TestRun, TestRunOptions, XdpDataplane, XdpOptions};
use fare_dataplane::{Dataplane, Group, GroupMode, MacAddr, Member};
use std::fmt::Write;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Program runs per case.
    #[arg(long, default_value_t = 500_000)]
    runs: u32,
    /// Existing interface used as every member's egress (frames are not sent).
    #[arg(long, default_value = "lo")]
    egress: String,
}

const ROUTER: [u8; 6] = [2, 0, 0, 0, 0x20, 0];
const SENDER: [u8; 6] = [2, 0, 0, 0, 0x10, 1];
/// A TEST_RUN call reuses the (rewritten) frame: TTL 255 allows 254 forwarded runs.
const RUNS_PER_CALL: u32 = 250;
const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;

fn group(prefix: &str, mode: GroupMode, egress: &str) -> anyhow::Result<Group> {
    Ok(Group {
        prefix: prefix.parse()?,
        mode,
        members: [3u32, 3, 4, 4]
            .iter()
            .enumerate()
            .map(|(i, &weight)| Member {
                via: format!("bench-{i}"),
                interface: egress.to_string(),
                next_hop: None,
                neighbor_mac: Some(MacAddr([2, 0, 0, 0, 0, i as u8 + 1])),
                weight,
                bandwidth_gbps: 100.0,
            })
            .collect(),
    })
}

fn udp_frame(v6: bool, dst_last: u8) -> anyhow::Result<Vec<u8>> {
    let eth = PacketBuilder::ethernet2(SENDER, ROUTER);
    let payload = [0u8; 18];
    let mut out = Vec::new();
    if v6 {
        let mut src = [0u8; 16];
        src[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        src[15] = 1;
        let mut dst = [0u8; 16];
        dst[..6].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, dst_last]);
        dst[15] = 7;
        eth.ipv6(src, dst, 255)
            .udp(1000, 4791)
            .write(&mut out, &payload)?;
    } else {
        eth.ipv4([10, 0, 0, 1], [198, dst_last, 0, 7], 255)
            .udp(1000, 4791)
            .write(&mut out, &payload)?;
    }
    Ok(out)
}

/// Mean ns per run over `runs` kernel-timed runs (the kernel reports whole ns per call).
fn cost(dp: &XdpDataplane, frame: &[u8], runs: u32, action: u32) -> anyhow::Result<f64> {
    cost_of(|f, o| Ok(dp.test_run(f, o)?), frame, runs, action)
}

fn cost_of(
    test_run: impl Fn(&[u8], TestRunOptions) -> anyhow::Result<TestRun>,
    frame: &[u8],
    runs: u32,
    action: u32,
) -> anyhow::Result<f64> {
    let calls = (runs / RUNS_PER_CALL).max(1);
    let mut total = 0u64;
    for _ in 0..calls {
        let r = test_run(
            frame,
            TestRunOptions {
                repeat: RUNS_PER_CALL,
                ..Default::default()
            },
        )?;
        ensure!(
            r.action == action,
            "the program returned {} (expected {action})",
            r.action
        );
        total += u64::from(r.ns_per_run) * u64::from(RUNS_PER_CALL);
    }
    Ok(total as f64 / f64::from(calls * RUNS_PER_CALL))
}

pub fn run(args: Args) -> anyhow::Result<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let _enter = rt.enter();
    let node = format!("bench-xdp-{}", std::process::id());
    let mut dp = XdpDataplane::open(&XdpOptions::new(node, vec![]))
        .context("opening the XDP data plane (needs root)")?;
    let result = (|| -> anyhow::Result<String> {
        rt.block_on(dp.install(&group("198.18.0.0/16", GroupMode::Spray, &args.egress)?))?;
        rt.block_on(dp.install(&group("198.19.0.0/16", GroupMode::Flow, &args.egress)?))?;
        rt.block_on(dp.install(&group("2001:db8:18::/48", GroupMode::Spray, &args.egress)?))?;
        rt.block_on(dp.install(&group("2001:db8:19::/48", GroupMode::Flow, &args.egress)?))?;
        let mut arp = Vec::new();
        arp.extend_from_slice(&ROUTER);
        arp.extend_from_slice(&SENDER);
        arp.extend_from_slice(&0x0806u16.to_be_bytes());
        arp.extend_from_slice(&[0u8; 46]);
        let baseline = cost(&dp, &arp, args.runs, XDP_PASS)?;
        let mut min = MinForwarder::open()?;
        min.route(
            [198, 18, 0, 0],
            16,
            &args.egress,
            ROUTER,
            [2, 0, 0, 0, 0, 1],
        )?;
        let v4 = udp_frame(false, 18)?;
        let min_ns = cost_of(|f, o| min.test_run(f, o), &v4, args.runs, XDP_REDIRECT)?;
        let cases = [
            ("IPv4 spray", udp_frame(false, 18)?),
            ("IPv4 flow", udp_frame(false, 19)?),
            ("IPv6 spray", udp_frame(true, 0x18)?),
            ("IPv6 flow", udp_frame(true, 0x19)?),
        ];
        let mut md = String::new();
        writeln!(md, "## XDP per-packet cost (`xdp`)\n")?;
        writeln!(md, "Command: `{}` (as root)\n", command_line())?;
        writeln!(
            md,
            "`BPF_PROG_TEST_RUN` of the fare XDP program, {} runs per case, 64-86 byte UDP \
             frames, group of 4 members with weights 3:3:4:4. Kernel-timed ns per run (the \
             kernel reports whole ns per call of {RUNS_PER_CALL} runs). Baselines in the same \
             run: the minimal forwarder (`bench_min_fwd` of the benchmark object: Ethernet + IPv4 \
             parse, one LPM lookup, MAC rewrite, redirect; the IPv4 frame), and fare's program \
             on a non-IP frame (parse, count, XDP_PASS).\n",
            args.runs
        )?;
        writeln!(
            md,
            "| case | ns/packet | x minimal forwarder | x non-IP | Mpps per core (program only) |"
        )?;
        writeln!(md, "|---|---|---|---|---|")?;
        writeln!(
            md,
            "| minimal forwarder: IPv4 -> XDP_REDIRECT | {min_ns:.1} | 1.00 | {:.2} | {:.1} |",
            min_ns / baseline,
            1000.0 / min_ns
        )?;
        writeln!(
            md,
            "| fare: non-IP -> XDP_PASS | {baseline:.1} | {:.2} | 1.00 | {:.1} |",
            baseline / min_ns,
            1000.0 / baseline
        )?;
        for (name, frame) in &cases {
            let ns = cost(&dp, frame, args.runs, XDP_REDIRECT)?;
            writeln!(
                md,
                "| fare: {name} -> XDP_REDIRECT | {ns:.1} | {:.2} | {:.2} | {:.1} |",
                ns / min_ns,
                ns / baseline,
                1000.0 / ns
            )?;
        }
        Ok(md)
    })();
    dp.destroy()?;
    result
}
