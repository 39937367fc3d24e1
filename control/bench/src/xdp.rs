//! `fare bench xdp`: per-packet cost of the XDP program with `BPF_PROG_TEST_RUN`
//! (kernel-timed, no interface involved): IPv4/IPv6 x spray/flow/flowlet, against two baselines
//! measured in the same run: the minimal forwarder of the benchmark object (Ethernet +
//! IPv4 parse, one LPM lookup, MAC rewrite, redirect: the limit of this data path) on the
//! IPv4 frame, and fare's program on a non-IP frame (parse, count, pass to the kernel).
//! Two more cases: a DPF route (a flow rule gives the frame a color), and a route with a
//! steered copy (ARN per-flow mode steers another flow; the frame pays for the lookup).
//! Needs root; the frames are never transmitted.

use super::command_line;
use super::xdp_objects::MinForwarder;
use anyhow::{ensure, Context};
use etherparse::PacketBuilder;
use fare_arn::codec::{Family, FlowId};
use fare_dataplane::dpf::{Protocol, Range};
use fare_dataplane::{
    ColorGroup, Dataplane, Dpf, FlowRule, FlowSteering, Group, GroupMode, MacAddr, Member,
};
use fare_dp_xdp::verifier::{self, VerifierCounts};
use fare_dp_xdp::{TestRun, TestRunOptions, XdpDataplane, XdpOptions};
use std::fmt::Write;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Program runs per case, spread over the rounds.
    #[arg(long, default_value_t = 50_000)]
    runs: u32,
    /// Rounds: each measures every case once (runs / rounds runs), so that a busy
    /// moment of the machine falls on all of them; medians over the rounds are reported.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Existing interface used as every member's egress (frames are not sent).
    #[arg(long, default_value = "lo")]
    egress: String,
    /// Also measure this fare XDP object (ELF, e.g. an earlier build's
    /// `fare-xdp.o`) in the same rounds, as "previous"; its maps must have this build's
    /// layout.
    #[arg(long)]
    previous: Option<std::path::PathBuf>,
}

const ROUTER: [u8; 6] = [2, 0, 0, 0, 0x20, 0];
const SENDER: [u8; 6] = [2, 0, 0, 0, 0x10, 1];
/// A TEST_RUN call reuses the (rewritten) frame: TTL 255 allows 254 forwarded runs.
const RUNS_PER_CALL: u32 = 250;
const XDP_PASS: u32 = 2;
/// Calls made (and not counted) before each measured call of a program, so that the
/// measured one finds its code, maps and frame in the caches the way back-to-back
/// packets do, not as the calls of the other programs left them.
const WARM_UP_CALLS: u32 = 1;
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

/// Kernel-timed ns per run of one call of RUNS_PER_CALL runs (the kernel reports whole ns
/// per call), checking the action.
fn one_call(
    test_run: impl Fn(&[u8], TestRunOptions) -> anyhow::Result<TestRun>,
    frame: &[u8],
    action: u32,
) -> anyhow::Result<f64> {
    let opts = || TestRunOptions {
        repeat: RUNS_PER_CALL,
        ..Default::default()
    };
    for _ in 0..WARM_UP_CALLS {
        test_run(frame, opts())?;
    }
    let r = test_run(frame, opts())?;
    ensure!(
        r.action == action,
        "the program returned {} (expected {action})",
        r.action
    );
    Ok(f64::from(r.ns_per_run))
}

/// Opens a data plane (its own pin directory `node`) with the four benchmark groups.
fn open(
    rt: &tokio::runtime::Runtime,
    node: String,
    object: Option<Vec<u8>>,
    egress: &str,
) -> anyhow::Result<XdpDataplane> {
    let mut opts = XdpOptions::new(node, vec![]);
    opts.object = object;
    let mut dp = XdpDataplane::open(&opts).context("opening the XDP data plane (needs root)")?;
    let installed = (|| -> anyhow::Result<()> {
        rt.block_on(dp.install(&group("198.18.0.0/16", GroupMode::Spray, egress)?))?;
        rt.block_on(dp.install(&group("198.19.0.0/16", GroupMode::Flow, egress)?))?;
        rt.block_on(dp.install(&group("2001:db8:18::/48", GroupMode::Spray, egress)?))?;
        rt.block_on(dp.install(&group("2001:db8:19::/48", GroupMode::Flow, egress)?))?;
        // Flowlet groups with the default gap (the benchmark's packets come within it:
        // each keeps its flowlet), and one with gap 0 (every packet starts a flowlet).
        rt.block_on(dp.install(&group("198.23.0.0/16", GroupMode::Flowlet, egress)?))?;
        rt.block_on(dp.install(&group("2001:db8:23::/48", GroupMode::Flowlet, egress)?))?;
        dp.set_flowlet_gap_us(0);
        rt.block_on(dp.install(&group("198.24.0.0/16", GroupMode::Flowlet, egress)?))?;
        dp.set_flowlet_gap_us(fare_dataplane::DEFAULT_FLOWLET_GAP_US);
        // A /24 and a host route: the fast path's IPv4 table takes two and three reads.
        rt.block_on(dp.install(&group("198.22.0.0/24", GroupMode::Spray, egress)?))?;
        rt.block_on(dp.install(&group("198.21.0.7/32", GroupMode::Spray, egress)?))?;
        // DPF: a route with one color (its group the same four members), and a rule that
        // gives the benchmark's UDP frames (to port 4791) that color.
        let spray = group("198.20.0.0/16", GroupMode::Spray, egress)?;
        let colors = [ColorGroup {
            color: 1,
            active: true,
            members: spray.members.clone(),
        }];
        rt.block_on(dp.install_colored(&spray, &colors))?;
        rt.block_on(dp.set_flow_rules(&[FlowRule {
            color: 1,
            dscp: vec![],
            protocol: Some(Protocol(17)),
            src: None,
            dst: None,
            src_port: None,
            dst_port: Some(Range { lo: 4791, hi: 4791 }),
            qp: None,
        }]))?;
        Ok(())
    })();
    match installed {
        Ok(()) => Ok(dp),
        Err(e) => {
            dp.destroy()?;
            Err(e)
        }
    }
}

/// The flow `open_steered` steers (ARN per-flow mode): UDP to port 9 of 198.18.0.9, none
/// of the benchmark's frames.
fn steered_flow() -> FlowId {
    FlowId {
        family: Family::Ipv4,
        protocol: Some(17),
        src: None,
        dst: Some(std::net::Ipv4Addr::new(198, 18, 0, 9).into()),
        src_port: None,
        dst_port: Some(9),
    }
}

/// A veth pair of the benchmark's (`name` and `name` + "p"), deleted on drop: `name` is
/// the second port of the steered case (frames redirected there in a test run are never
/// sent).
struct SecondPort(String);

impl SecondPort {
    fn new(name: String) -> anyhow::Result<SecondPort> {
        let peer = format!("{name}p");
        super::xdp_forward::run(
            "ip",
            &["link", "add", &name, "type", "veth", "peer", "name", &peer],
        )?;
        let port = SecondPort(name);
        super::xdp_forward::run("ip", &["link", "set", &port.0, "up"])?;
        Ok(port)
    }
}

impl Drop for SecondPort {
    fn drop(&mut self) {
        let _ = super::xdp_forward::run("ip", &["link", "del", &self.0]);
    }
}

/// `open`, then the IPv4 spray route's group again with its last two members on `second`
/// and one flow steered away from `second` (ARN per-flow mode): the route gets a steered
/// copy (`ROUTE_STEERED`), so each of its packets looks its flow up in the steering
/// table, which the benchmark's frames do not match.
fn open_steered(
    rt: &tokio::runtime::Runtime,
    node: String,
    object: Option<Vec<u8>>,
    egress: &str,
    second: &str,
) -> anyhow::Result<XdpDataplane> {
    let mut dp = open(rt, node, object, egress)?;
    let steered = (|| -> anyhow::Result<()> {
        let mut spray = group("198.18.0.0/16", GroupMode::Spray, egress)?;
        for m in &mut spray.members[2..] {
            m.interface = second.to_string();
        }
        rt.block_on(dp.install(&spray))?;
        ensure!(
            rt.block_on(dp.steer_flow(&steered_flow(), second, true))?,
            "the XDP data plane refused to steer a flow"
        );
        Ok(())
    })();
    match steered {
        Ok(()) => Ok(dp),
        Err(e) => {
            dp.destroy()?;
            Err(e)
        }
    }
}

/// 485641 -> "485,641".
fn thousands(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `values` in ascending order.
fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

fn median(values: &[f64]) -> f64 {
    let v = sorted(values);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Mean of the middle half of `values` (the interquartile mean): a call of a few
/// microseconds that an interrupt or the hypervisor stretched tenfold moves a plain mean
/// of the calls more than any change to the program does; the median alone is as robust
/// but moves in whole nanoseconds (the kernel's resolution per call).
fn interquartile_mean(values: &[f64]) -> f64 {
    let v = sorted(values);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    let (lo, hi) = (n / 4, n - n / 4);
    let middle = &v[lo..hi.max(lo + 1)];
    middle.iter().sum::<f64>() / middle.len() as f64
}

/// One row of the table: ns per run of every round.
struct Row {
    label: String,
    ns: Vec<f64>,
}

pub fn run(args: Args) -> anyhow::Result<String> {
    ensure!(args.rounds >= 1, "--rounds must be at least 1");
    let previous: Option<Vec<u8>> = match &args.previous {
        Some(path) => {
            Some(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)
        }
        None => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let _enter = rt.enter();
    let pid = std::process::id();
    let counts = verifier_counts(pid, previous.as_deref())?;
    // The steered case's second port, made before any data plane so that its failure
    // leaves nothing behind.
    let second = SecondPort::new(format!("fbst{pid}"))?;
    // Each program's data plane and its steered one (see `open_steered`).
    let open_both = |who: &str, object: Option<Vec<u8>>| -> anyhow::Result<Planes> {
        let plain = open(
            &rt,
            format!("bench-xdp-{who}{pid}"),
            object.clone(),
            &args.egress,
        )?;
        match open_steered(
            &rt,
            format!("bench-xdp-{who}steer-{pid}"),
            object,
            &args.egress,
            &second.0,
        ) {
            Ok(steered) => Ok(Planes { plain, steered }),
            Err(e) => {
                plain.destroy()?;
                Err(e)
            }
        }
    };
    let fare = open_both("", None)?;
    // A previous object whose maps differ from this build's (a changed layout) cannot be
    // fed by this build: its verifier counts are still reported, its cost is not.
    let mut unmeasured = None;
    let prev = match &previous {
        Some(bytes) => match open_both("prev-", Some(bytes.clone())) {
            Ok(p) => Some(p),
            Err(e) => {
                let first = format!("{e:#}");
                let first = first.lines().next().unwrap_or_default().to_string();
                tracing::warn!("the --previous object is not measured: {first}");
                unmeasured = Some(first);
                None
            }
        },
        None => None,
    };
    let result = measure(&args, &fare, prev.as_ref(), &counts, unmeasured.as_deref());
    fare.destroy()?;
    if let Some(p) = prev {
        p.destroy()?;
    }
    result
}

/// A program's two data planes: the benchmark's groups, and the same with a steered flow
/// (`open_steered`), for the steered case.
struct Planes {
    plain: XdpDataplane,
    steered: XdpDataplane,
}

impl Planes {
    fn destroy(self) -> anyhow::Result<()> {
        let plain = self.plain.destroy();
        self.steered.destroy()?;
        Ok(plain?)
    }
}

/// The verifier's instruction counts of fare's object and of the previous one (when
/// given), each loaded against scratch maps.
fn verifier_counts(
    pid: u32,
    previous: Option<&[u8]>,
) -> anyhow::Result<Vec<(&'static str, VerifierCounts)>> {
    let root = std::path::Path::new(fare_dp_xdp::pins::DEFAULT_ROOT);
    let mut out = vec![(
        "fare",
        verifier::counts(None, root, &format!("bench-xdp-verifier-{pid}"))?,
    )];
    if let Some(bytes) = previous {
        out.push((
            "previous",
            verifier::counts(Some(bytes), root, &format!("bench-xdp-verifier-prev-{pid}"))
                .context("the --previous object")?,
        ));
    }
    Ok(out)
}

fn measure(
    args: &Args,
    fare: &Planes,
    prev: Option<&Planes>,
    verifier: &[(&str, VerifierCounts)],
    unmeasured: Option<&str>,
) -> anyhow::Result<String> {
    let mut arp = Vec::new();
    arp.extend_from_slice(&ROUTER);
    arp.extend_from_slice(&SENDER);
    arp.extend_from_slice(&0x0806u16.to_be_bytes());
    arp.extend_from_slice(&[0u8; 46]);
    // The minimal forwarder holds the IPv4 routes fare holds (the spray, the flow, the two flowlet and the
    // DPF group's /16, the /24 and the /32 host route), so both tries have the same nodes. `min_one`
    // holds the first only (a one-node trie), as in runs before this row.
    let mut min = MinForwarder::open()?;
    let mut min_one = MinForwarder::open()?;
    for (addr, len) in [
        ([198, 18, 0, 0], 16),
        ([198, 19, 0, 0], 16),
        ([198, 20, 0, 0], 16),
        ([198, 21, 0, 7], 32),
        ([198, 22, 0, 0], 24),
        ([198, 23, 0, 0], 16),
        ([198, 24, 0, 0], 16),
    ] {
        min.route(addr, len, &args.egress, ROUTER, [2, 0, 0, 0, 0, 1])?;
    }
    min_one.route(
        [198, 18, 0, 0],
        16,
        &args.egress,
        ROUTER,
        [2, 0, 0, 0, 0, 1],
    )?;
    let v4 = udp_frame(false, 18)?;
    // (case, frame, on the steered data plane)
    let cases = [
        ("IPv4 spray", udp_frame(false, 18)?, false),
        ("IPv4 flow", udp_frame(false, 19)?, false),
        ("IPv6 spray", udp_frame(true, 0x18)?, false),
        ("IPv6 flow", udp_frame(true, 0x19)?, false),
        ("IPv4 flowlet, inside the gap", udp_frame(false, 23)?, false),
        (
            "IPv6 flowlet, inside the gap",
            udp_frame(true, 0x23)?,
            false,
        ),
        (
            "IPv4 flowlet, gap 0 (a new flowlet every packet)",
            udp_frame(false, 24)?,
            false,
        ),
        ("IPv4 spray, DPF color", udp_frame(false, 20)?, false),
        ("IPv4 spray, /24 route", udp_frame(false, 22)?, false),
        ("IPv4 spray, /32 route", udp_frame(false, 21)?, false),
        (
            "IPv4 spray, route with a steered flow (not this one)",
            udp_frame(false, 18)?,
            true,
        ),
    ];
    let per_round = (args.runs / args.rounds).max(RUNS_PER_CALL);
    let mut min_row = Row {
        label: "minimal forwarder: IPv4 -> XDP_REDIRECT".into(),
        ns: Vec::new(),
    };
    let mut min_one_row = Row {
        label: "minimal forwarder, one route: IPv4 -> XDP_REDIRECT".into(),
        ns: Vec::new(),
    };
    let mut non_ip = Row {
        label: "fare: non-IP -> XDP_PASS".into(),
        ns: Vec::new(),
    };
    let dp = &fare.plain;
    let mut programs = vec![("fare", fare)];
    if let Some(p) = prev {
        programs.push(("previous", p));
    }
    let mut rows: Vec<Row> = programs
        .iter()
        .flat_map(|(who, _)| {
            cases.iter().map(move |(name, _, _)| Row {
                label: format!("{who}: {name} -> XDP_REDIRECT"),
                ns: Vec::new(),
            })
        })
        .collect();
    // Within a round the programs take turns call by call (minimal forwarder, its one-route
    // variant, non-IP, then every case of every program), so that a slow moment of this
    // shared machine falls on all of them alike; a round's figure is each one's
    // interquartile mean over its calls.
    let calls = (per_round / RUNS_PER_CALL).max(1);
    // Every call on one CPU: the per-CPU rows and counters stay in that core's caches, and
    // a migration between calls does not put one program on a core another tenant loads.
    let cpu = std::thread::available_parallelism().map_or(0, |n| n.get() - 1);
    super::xdp_forward::pin_thread(cpu)?;
    for _ in 0..args.rounds {
        let mut per_call = vec![Vec::with_capacity(calls as usize); 3 + rows.len()];
        for _ in 0..calls {
            per_call[0].push(one_call(|f, o| min.test_run(f, o), &v4, XDP_REDIRECT)?);
            per_call[1].push(one_call(|f, o| min_one.test_run(f, o), &v4, XDP_REDIRECT)?);
            per_call[2].push(one_call(|f, o| Ok(dp.test_run(f, o)?), &arp, XDP_PASS)?);
            let mut i = 3;
            for (_, planes) in &programs {
                for (_, frame, steered) in &cases {
                    let program = if *steered {
                        &planes.steered
                    } else {
                        &planes.plain
                    };
                    per_call[i].push(one_call(
                        |f, o| Ok(program.test_run(f, o)?),
                        frame,
                        XDP_REDIRECT,
                    )?);
                    i += 1;
                }
            }
        }
        min_row.ns.push(interquartile_mean(&per_call[0]));
        min_one_row.ns.push(interquartile_mean(&per_call[1]));
        non_ip.ns.push(interquartile_mean(&per_call[2]));
        for (row, calls) in rows.iter_mut().zip(&per_call[3..]) {
            row.ns.push(interquartile_mean(calls));
        }
    }
    let baseline = median(&non_ip.ns);
    // Ratio to the minimal forwarder of the same round; median, min and max over rounds.
    let ratios = |r: &Row| -> Vec<f64> {
        r.ns.iter()
            .zip(&min_row.ns)
            .map(|(ns, min)| ns / min)
            .collect()
    };
    let mut md = String::new();
    writeln!(md, "## XDP per-packet cost (`xdp`)\n")?;
    writeln!(md, "Command: `{}` (as root)\n", command_line())?;
    writeln!(
        md,
        "`BPF_PROG_TEST_RUN` of the fare XDP program, {} runs per case in {} rounds (each \
         round measures every case once, {per_round} runs, in calls of {RUNS_PER_CALL} \
         runs that take turns: one call of each program and case, then the next), 64-86 \
         byte UDP frames, group of \
         4 members with weights 3:3:4:4. Kernel-timed ns per run (the kernel reports whole ns \
         per call of {RUNS_PER_CALL} runs), every call on one CPU and after one uncounted call \
         of the same program and frame (warm caches, as for back-to-back packets); a \
         round's figure is the mean of the middle half of its calls (interrupted calls \
         left out), the table's the median over the rounds. Baselines in the same \
         rounds: the minimal forwarder (`bench_min_fwd` of the benchmark object: Ethernet + \
         IPv4 parse, one LPM lookup, MAC rewrite, redirect; the IPv4 frame) with fare's IPv4 \
         routes (198.18.0.0/16, 198.19.0.0/16, 198.20.0.0/16, 198.22.0.0/24 and \
         198.21.0.7/32, so that its trie has the nodes of fare's), and fare's program on a \
         non-IP frame (parse, count, XDP_PASS). fare's fast path finds an IPv4 route in its \
         table (DIR4_TOP by the first two bytes, then a block per further byte: one array \
         read for the /16 routes, two for the /24 and three for the /32 of the \"/24 route\" \
         and \"/32 route\" cases), the minimal forwarder in its LPM trie. \
         \"DPF color\": a route with one active color (its group the same four members) and \
         the flow rule `{{color: 1, protocol: udp, dst_port: 4791}}`, which the frame matches \
         (classification, then the color's group). \
         \"route with a steered flow\": the IPv4 spray frame through a data plane whose \
         spray group has its last two members on a second port (a veth) and which steers \
         one other flow (UDP to 198.18.0.9 port 9, ARN per-flow mode) away from that \
         port, so the route has a steered copy: each of its packets looks its flow up in \
         the steering table (a miss here; a steered flow's packets would take the full \
         program). \
         \"x minimal forwarder\" is the median over the rounds of the ratio to the minimal \
         forwarder of the same round (min-max in brackets). The row \"one route\" is the \
         minimal forwarder with the first route only (a one-node trie), the baseline of \
         runs before it was added.\n",
        per_round * args.rounds,
        args.rounds,
    )?;
    if let Some(path) = &args.previous {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        match unmeasured {
            None => writeln!(
                md,
                "\"previous\": the fare XDP object `{name}`, loaded and measured in the same \
                 rounds.\n"
            )?,
            Some(why) => writeln!(
                md,
                "\"previous\": the fare XDP object `{name}` could not be fed by this build \
                 ({why}; its maps must have this build's layout): only its verifier counts \
                 are given.\n"
            )?,
        }
    }
    writeln!(
        md,
        "| case | ns/packet | x minimal forwarder | x non-IP | Mpps per core (program only) |"
    )?;
    writeln!(md, "|---|---|---|---|---|")?;
    for r in [&min_row, &min_one_row, &non_ip].into_iter().chain(&rows) {
        let ns = median(&r.ns);
        let q = ratios(r);
        let lo = q.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = q.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        writeln!(
            md,
            "| {} | {ns:.1} | {:.2} ({lo:.2}-{hi:.2}) | {:.2} | {:.1} |",
            r.label,
            median(&q),
            ns / baseline,
            1000.0 / ns
        )?;
    }
    writeln!(
        md,
        "\nVerifier (instructions the kernel processed loading each program; its limit is \
         1M): {}.",
        verifier
            .iter()
            .map(|(who, c)| format!(
                "{who}: {}",
                c.programs
                    .iter()
                    .map(|p| match p.with_arn {
                        Some(a) => format!(
                            "{} {} (with ARN reception {})",
                            p.name,
                            thousands(p.count),
                            thousands(a)
                        ),
                        None => format!("{} {}", p.name, thousands(p.count)),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .collect::<Vec<_>>()
            .join("; ")
    )?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::{interquartile_mean, thousands};

    #[test]
    fn interquartile_mean_leaves_out_the_outer_quarters() {
        assert_eq!(interquartile_mean(&[40.0, 41.0, 39.0, 400.0]), 40.5);
        assert_eq!(
            interquartile_mean(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 80.0]),
            4.5
        );
        assert_eq!(interquartile_mean(&[7.0]), 7.0);
        assert!(interquartile_mean(&[]).is_nan());
    }

    #[test]
    fn thousands_groups_digits_by_three() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(66289), "66,289");
        assert_eq!(thousands(485641), "485,641");
        assert_eq!(thousands(1000000), "1,000,000");
    }
}
