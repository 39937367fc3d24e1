//! `fare bench SUITE`: benchmarks as named suites. Each suite prints its results and
//! rewrites its own section of bench/RESULTS.md (see `results`). To add a suite, add a
//! module here with `Args` and `run(args) -> anyhow::Result<String>` (the Markdown
//! section) and a variant to `Suite`.

pub mod analyze;
pub mod arn;
pub mod arn_shift;
pub mod arn_xdp;
pub mod chaos;
pub mod elephant;
pub mod kernels;
pub mod lab_bench;
pub mod lab_scale;
pub mod modes;
pub mod mpson;
pub mod reload;
pub mod resilient;
pub mod results;
pub mod sim;
pub mod soak;
pub mod wcmp;
pub mod xdp;
pub mod xdp_forward;
pub mod xdp_objects;

use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub suite: Suite,
    /// Results file; the suite rewrites only its own section.
    #[arg(long, global = true, default_value = "bench/RESULTS.md")]
    pub results: PathBuf,
    /// Print the results without touching the results file.
    #[arg(long, global = true)]
    pub no_write: bool,
}

#[derive(clap::Subcommand, Debug)]
pub enum Suite {
    /// Fabric-wide propagation on a generated multi-plane fabric (default 100,000 GPUs):
    /// wall time and peak memory, and the speedup of group sharing over per-node work.
    Sim(sim::Args),
    /// `fare analyze`'s failure sweep on the 100k-GPU fabric: incremental vs rerunning
    /// every destination.
    Analyze(analyze::Args),
    /// Routes stored per RNIC, leaf and spine of a generated multi-plane fabric (default
    /// 100,000 GPUs, 4 planes) with no suppression, aggregation + unreachable host routes,
    /// Prefix-ORF and FIB-Suppress (draft-xu-idr-fare-in-mpson §4), vs the 400,000 baseline.
    Mpson(mpson::Args),
    /// WCMP group reduction: groups/s and oversubscription against proportional rounding
    /// and against the exhaustive-search optimum.
    Wcmp(wcmp::Args),
    /// Per-flow WCMP: flows moved per weight change for the replicated-member layout and
    /// resilient bucket tables, against the least possible (issue's table, random groups).
    Resilient(resilient::Args),
    /// XDP program cost per packet with BPF_PROG_TEST_RUN (IPv4/IPv6, spray/flow); root.
    Xdp(xdp::Args),
    /// The verifier's work per XDP/TC program on each kernel of the matrix (a QEMU guest
    /// per kernel, scripts/kernels) against the host kernel's; root.
    Kernels(kernels::Args),
    /// Forwarding rate of the XDP spray path vs the kernel's weighted nexthop group, one
    /// router core, same namespaces and run; root.
    XdpForward(xdp_forward::Args),
    /// Four elephant flows over four equal rate-limited paths: aggregate throughput of
    /// kernel flow-hash ECMP vs XDP spray over many seeds (flow placements); root, iperf3.
    Elephant(elephant::Args),
    /// ARN reaction time against BGP alone on a `fare lab` spine-leaf fabric: congestion
    /// and link failure, onset -> traffic moved off the path at the ingress leaf; root.
    Arn(arn::Args),
    /// ARN reaction inside the XDP program against the agent's user-space receiver, same
    /// ARN, same trial: sender's send -> member out at the receiver; root.
    ArnXdp(arn_xdp::Args),
    /// ARN congestion shift against whole-member removal and no ARN: four paths, one
    /// congested, delivered throughput, loss and queueing delay; root.
    ArnShift(arn_shift::Args),
    /// Group modes (`lab up --split`) under long TCP flows on Figure 1 with XDP, a degraded
    /// link and an ARN congestion event: goodput and reordering at the ends; root, iperf3.
    Modes(modes::Args),
    /// Every session, every time: repeated `lab up` and link flaps under CPU load (root).
    Soak(soak::Args),
    /// How large a BGP-routed lab fabric comes up and converges here, and where the time
    /// goes: generated Clos fabrics of growing size in one run (root).
    LabScale(lab_scale::Args),
    /// One change to a running lab node's file (a prefix added) applied by SIGHUP against
    /// restarting its agent: time until the fabric has it, sessions down, UPDATEs (root).
    Reload(reload::Args),
    /// Chaos soak: a lab fabric under steady traffic and random faults (flaps,
    /// degradations, agent kill -9, BMv2 restarts) for minutes; every session up, every
    /// group the model's, loss only inside fault windows, bounded memory (root).
    Chaos(chaos::Args),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut failed = Vec::new();
    let (name, body) = match args.suite {
        Suite::Sim(a) => ("sim", sim::run(a)?),
        Suite::Analyze(a) => (a.section(), analyze::run(a)?),
        Suite::Mpson(a) => ("mpson", mpson::run(a)?),
        Suite::Wcmp(a) => ("wcmp", wcmp::run(a)?),
        Suite::Resilient(a) => ("resilient", resilient::run(a)?),
        Suite::Xdp(a) => ("xdp", xdp::run(a)?),
        Suite::Kernels(a) => ("kernels", kernels::run(a)?),
        Suite::XdpForward(a) => ("xdp-forward", xdp_forward::run_bench(a)?),
        Suite::Elephant(a) => ("elephant", elephant::run_bench(a)?),
        Suite::Arn(a) => (a.section(), arn::run_bench(a)?),
        Suite::ArnXdp(a) => ("arn-xdp", arn_xdp::run_bench(a)?),
        Suite::ArnShift(a) => ("arn-shift", arn_shift::run_bench(a)?),
        Suite::Modes(a) => ("modes", modes::run_bench(a)?),
        Suite::Soak(a) => ("soak", soak::run_bench(a)?),
        Suite::LabScale(a) => ("lab-scale", lab_scale::run_bench(a)?),
        Suite::Reload(a) => ("reload", reload::run_bench(a)?),
        Suite::Chaos(a) => {
            let section = a.section();
            let out = chaos::run_bench(a)?;
            failed = out.failed;
            (section, out.body)
        }
    };
    println!("{body}");
    if !args.no_write {
        results::write_section(&args.results, name, &body)?;
        eprintln!("wrote section `{name}` of {}", args.results.display());
    }
    if !failed.is_empty() {
        anyhow::bail!("{name}: checks failed:\n  {}", failed.join("\n  "));
    }
    Ok(())
}

/// Peak resident set size of this process so far, in bytes (Linux VmHWM).
pub fn peak_rss_bytes() -> Option<u64> {
    proc_status_kb("self", "VmHWM:").map(|kb| kb * 1024)
}

/// Current resident set size, in bytes (Linux VmRSS).
pub fn rss_bytes() -> Option<u64> {
    proc_status_kb("self", "VmRSS:").map(|kb| kb * 1024)
}

/// Resets the peak RSS to the current RSS, so the next peak belongs to what runs next.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// A `kB` line (`VmRSS:`, `VmHWM:` ...) of `/proc/PID/status`; `pid` "self" for this process.
pub fn proc_status_kb(pid: &str, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time (user + system) this process has used so far, in seconds: on a shared
/// machine it shows the work apart from waiting for a core.
pub fn cpu_seconds() -> Option<f64> {
    cpu_seconds_of("self")
}

/// CPU time (user + system) process `pid` has used so far, in seconds.
pub fn cpu_seconds_of(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on Linux/x86-64.
    Some(ticks as f64 / 100.0)
}

/// The command line that produced a result, for the results file.
pub fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("fare {}", args.join(" "))
}

pub use fare_model::rng::Rng;
