//! `fare bench sim`: fabric-wide propagation on a generated multi-plane fabric.

use super::{command_line, cpu_seconds, peak_rss_bytes, reset_peak_rss, rss_bytes};
use fare_model::bandwidth::Mode;
use fare_model::parallel::ParallelLinks;
use fare_model::sim;
use fare_model::topology::gen::{self, MultiPlane};
use std::fmt::Write;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The generated multi-plane fabric (`fare topo gen multiplane`) the benchmark runs
    /// on; the defaults are the 100,000-GPU, 4-plane fabric.
    #[command(flatten)]
    fabric: fare_model::topology::gen::MultiPlane,
    /// GPUs of the smaller fabric on which group sharing is compared with per-node work.
    #[arg(long, default_value_t = 16_384)]
    baseline_gpus: u32,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Also time writing the fabric as YAML and loading it back.
    #[arg(long)]
    yaml: bool,
}

fn mib(b: Option<u64>) -> String {
    b.map_or("n/a".into(), |b| {
        format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
    })
}

pub fn run(args: Args) -> anyhow::Result<String> {
    let params = args.fabric.clone();
    let load_at_start = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "n/a".into());
    let mut md = String::new();
    writeln!(md, "## Fabric-wide propagation (`sim`)\n")?;
    writeln!(md, "Command: `{}` (release build)\n", command_line())?;

    let t0 = Instant::now();
    let topo = gen::multiplane(&params);
    let gen_s = t0.elapsed().as_secs_f64();
    let summary = topo.summary();
    writeln!(
        md,
        "Fabric: {} GPUs on {} planes, {} RNICs per leaf, {} spines per plane: {summary}. \
         Built in {gen_s:.2} s; resident after building: {}.\n",
        args.fabric.gpus,
        args.fabric.planes,
        args.fabric.rnics_per_leaf,
        args.fabric.spines_per_plane,
        mib(rss_bytes())
    )?;
    if args.yaml {
        let t = Instant::now();
        let yaml = topo.to_yaml();
        let write_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let back = fare_model::topology::parse("generated.yaml".as_ref(), &yaml)?;
        writeln!(
            md,
            "YAML: {:.0} MB written in {write_s:.2} s, loaded and validated in {:.2} s ({} links).\n",
            yaml.len() as f64 / 1e6,
            t.elapsed().as_secs_f64(),
            back.links.len()
        )?;
    }

    writeln!(
        md,
        "| mode, parallel links | wall time | CPU time | peak RSS during solve | origin sets | distinct groups | (node, origin set) groups |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|")?;
    // Draft per session first: the rule before parallel links were computed per node, the
    // baseline of the per-node rows (the fabric has no parallel links, so the groups are
    // the same and the difference is the per-node rule's cost).
    for (mode, parallel) in [
        (Mode::Draft, ParallelLinks::Session),
        (Mode::Draft, ParallelLinks::NodeProportional),
        (Mode::Averaged, ParallelLinks::NodeProportional),
    ] {
        let options = sim::Options {
            mode,
            parallel,
            threads: args.threads,
            ..Default::default()
        };
        reset_peak_rss();
        let cpu = cpu_seconds();
        let t = Instant::now();
        let solution = sim::solve(&topo, &options);
        let solve_s = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds()
            .zip(cpu)
            .map_or("n/a".into(), |(b, a)| format!("{:.2} s", b - a));
        let peak = peak_rss_bytes();
        let pairs = solution.node_group_count();
        writeln!(
            md,
            "| {mode:?}, {} | {solve_s:.2} s | {cpu} | {} | {} | {} | {pairs} |",
            parallel.name(),
            mib(peak),
            solution.origin_sets.len(),
            solution.distinct_groups()
        )?;
    }
    writeln!(
        md,
        "\nPeak RSS is the process's VmHWM, reset just before each solve (it includes the \
         fabric itself, already resident). CPU time is summed over the worker threads. \
         Targets: < 5 s, < 2 GiB. Machine load (1-min average) at the start: \
         {load_at_start} on 2 cores, so wall time is well above CPU time / threads."
    )?;

    // Baseline, same run: the same algorithm without sharing stub computations.
    let small = gen::multiplane(&MultiPlane {
        gpus: args.baseline_gpus,
        ..params.clone()
    });
    let mut times = Vec::new();
    for no_sharing in [true, false] {
        let options = sim::Options {
            threads: args.threads,
            no_stub_sharing: no_sharing,
            ..Default::default()
        };
        let t = Instant::now();
        let s = sim::solve(&small, &options);
        times.push((t.elapsed().as_secs_f64(), s.distinct_groups()));
    }
    writeln!(
        md,
        "\nBaseline ({} GPUs, draft): per-node computation {:.3} s vs shared {:.3} s: \
         sharing is {:.1}x faster ({} distinct groups either way).",
        args.baseline_gpus,
        times[0].0,
        times[1].0,
        times[0].0 / times[1].0.max(1e-9),
        times[1].1
    )?;
    Ok(md)
}
