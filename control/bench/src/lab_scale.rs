//! `fare bench lab-scale`: how large a BGP-routed `fare lab` fabric comes up and converges
//! on this machine, and where the time goes. Generated 3-stage Clos fabrics of growing
//! size, one after the other in one run: the smallest is the baseline the others are
//! compared with (per node and per session). Per fabric: the phases of `lab up`
//! (namespaces, links, addresses + shaping, agents answering), BGP convergence (every
//! agent's groups equal to the model's, from the agents' start), and the agents' resident
//! memory and CPU time once converged.

use crate::lab_bench::BenchLab;
use anyhow::Context;
use fare_lab::plan::{self, DataplaneKind, Routing};
use fare_lab::up;
use std::fmt::Write as _;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Fabrics as LEAVESxSPINES, smallest (the baseline) first.
    #[arg(long, value_delimiter = ',', default_values_t = ["8x4".to_string(), "64x16".to_string(), "196x4".to_string(), "240x8".to_string()])]
    pub fabrics: Vec<String>,
    /// The agents' data plane (`none`: BGP and group computation only).
    #[arg(long, value_enum, default_value_t = DataplaneKind::None)]
    pub dataplane: DataplaneKind,
    /// Longest wait for convergence per fabric, in seconds.
    #[arg(long, default_value_t = 180)]
    pub converge_timeout: u64,
}

struct Row {
    fabric: String,
    report: up::UpReport,
    rss_mib_mean: f64,
    rss_mib_max: f64,
    cpu_s_mean: f64,
    cpu_s_max: f64,
    load: f64,
}

fn parse_fabric(s: &str) -> anyhow::Result<(u32, u32)> {
    let (l, sp) = s
        .split_once('x')
        .with_context(|| format!("--fabrics {s}: expected LEAVESxSPINES"))?;
    Ok((l.trim().parse()?, sp.trim().parse()?))
}

/// (VmRSS in MiB, utime + stime in s) of a process.
fn rss_and_cpu(pid: u32) -> Option<(f64, f64)> {
    let pid = pid.to_string();
    let kb = crate::proc_status_kb(&pid, "VmRSS:")?;
    Some((kb as f64 / 1024.0, crate::cpu_seconds_of(&pid)?))
}

/// `x` against the baseline `b`, or "-" where the baseline is too small to divide by
/// (CPU time is counted in 10 ms ticks).
fn ratio(x: f64, b: f64) -> String {
    if b.is_finite() && b > 0.0 && x.is_finite() {
        format!("x{:.2}", x / b)
    } else {
        "-".to_string()
    }
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN)
}

fn one(leaves: u32, spines: u32, args: &Args) -> anyhow::Result<Row> {
    let topology = fare_model::topology::gen::clos3(leaves, spines, 100.0, 1);
    let topology_path = std::env::temp_dir().join(format!("fare-lab-scale-{leaves}x{spines}.yaml"));
    std::fs::write(&topology_path, topology.to_yaml())?;
    let options = plan::Options {
        dataplane: args.dataplane,
        routing: Routing::Bgp,
        arn: None,
        ..Default::default()
    };
    let req = up::UpRequest {
        topology_path,
        topology,
        lab: format!("sc{leaves}x{spines}"),
        options,
        mode: fare_model::bandwidth::Mode::Draft,
        max_group_size: None,
        agents: true,
        agent_timeout: Duration::from_secs(120),
        converge_timeout: Duration::from_secs(args.converge_timeout),
        fare: up::fare_binary(),
        progress: true,
    };
    let (lab, report) = BenchLab::start(&req)?;
    let load = load_average();
    let state = lab.dir.load()?;
    let per_agent: Vec<(f64, f64)> = state
        .agents
        .iter()
        .filter_map(|(_, pid)| rss_and_cpu(*pid))
        .collect();
    let n = per_agent.len().max(1) as f64;
    let stat = |f: fn(&(f64, f64)) -> f64| {
        let v: Vec<f64> = per_agent.iter().map(f).collect();
        (
            v.iter().sum::<f64>() / n,
            v.iter().cloned().fold(0.0, f64::max),
        )
    };
    let (rss_mib_mean, rss_mib_max) = stat(|x| x.0);
    let (cpu_s_mean, cpu_s_max) = stat(|x| x.1);
    // Dropping `lab` takes the fabric down.
    Ok(Row {
        fabric: format!("clos3 {leaves}x{spines}"),
        report,
        rss_mib_mean,
        rss_mib_max,
        cpu_s_mean,
        cpu_s_max,
        load,
    })
}

pub fn run_bench(args: Args) -> anyhow::Result<String> {
    let fabrics: Vec<(u32, u32)> = args
        .fabrics
        .iter()
        .map(|s| parse_fabric(s))
        .collect::<anyhow::Result<_>>()?;
    let mut rows = Vec::new();
    for (l, s) in &fabrics {
        eprintln!("lab-scale: clos3 {l}x{s}");
        rows.push(one(*l, *s, &args)?);
    }
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Labs of 200+ nodes: lab up and BGP convergence by fabric size (`lab-scale`)\n"
    );
    let _ = writeln!(
        out,
        "Command: `{}` ({build} build, data plane `{}`, ARN off). Each fabric is brought up, \
         measured and taken down in turn; the first is the baseline of the ratio columns \
         (convergence time per session, agent CPU per session). Convergence: from the agents' \
         start until every agent's groups equal the model's and every session is Established.\n",
        crate::command_line(),
        match args.dataplane {
            DataplaneKind::None => "none",
            DataplaneKind::Kernel => "kernel",
            DataplaneKind::Xdp => "xdp",
        }
    );
    let _ = writeln!(
        out,
        "| fabric | nodes | sessions | namespaces | links | addresses + shaping | agents answering | converged | conv./session vs baseline | agent RSS mean / max | agent CPU mean / max | CPU/session vs baseline | load |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let base = rows.first().map(|r| {
        let sessions = r.report.sessions.max(1) as f64;
        (
            r.report.converged_s.unwrap_or(f64::NAN) / sessions,
            r.cpu_s_mean * r.report.nodes as f64 / sessions,
        )
    });
    for r in &rows {
        let sessions = r.report.sessions.max(1) as f64;
        let conv = r.report.converged_s;
        let (b_conv, b_cpu) = base.unwrap_or((f64::NAN, f64::NAN));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} s | {:.2} s | {:.2} s | {:.2} s | {} | {} | {:.1} / {:.1} MiB | {:.2} / {:.2} s | {} | {:.1} |",
            r.fabric,
            r.report.nodes,
            r.report.sessions,
            r.report.namespaces_s,
            r.report.links_s,
            r.report.addresses_s,
            r.report.agents_s,
            conv.map_or(format!("not in {} s", args.converge_timeout), |c| format!("{c:.2} s")),
            ratio(conv.unwrap_or(f64::NAN) / sessions, b_conv),
            r.rss_mib_mean,
            r.rss_mib_max,
            r.cpu_s_mean,
            r.cpu_s_max,
            ratio(r.cpu_s_mean * r.report.nodes as f64 / sessions, b_cpu),
            r.load,
        );
    }
    if let Some(big) = rows.iter().max_by_key(|r| r.report.nodes) {
        let agents_cpu = big.cpu_s_mean * big.report.nodes as f64;
        let _ = writeln!(
            out,
            "\nLargest fabric: {} nodes / {} sessions {} (target: 200+ nodes under 60 s); its \
             agents used {:.1} s of CPU together ({:.2} s each on average, the spines most), \
             {:.1} MiB RSS each on average. `lab up` itself: namespaces {:.2} s, veth links \
             {:.2} s (one `ip -batch`), addresses + shaping + sysctls {:.2} s (one `ip`/`tc` \
             batch and one `sysctl` per namespace, a few namespaces at a time), agents \
             answering {:.2} s: BGP convergence, i.e. the agents' CPU on this 2-core machine, \
             is where the time goes.",
            big.report.nodes,
            big.report.sessions,
            big.report
                .converged_s
                .map_or("did not converge".to_string(), |c| format!(
                    "converged in {c:.1} s"
                )),
            agents_cpu,
            big.cpu_s_mean,
            big.rss_mib_mean,
            big.report.namespaces_s,
            big.report.links_s,
            big.report.addresses_s,
            big.report.agents_s,
        );
    }
    Ok(out)
}
