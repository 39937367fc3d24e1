//! `fare bench mpson`: routes stored per RNIC, leaf and spine of a generated multi-plane
//! fabric under each route-table suppression technique of draft-xu-idr-fare-in-mpson §4.

use super::{command_line, cpu_seconds, peak_rss_bytes, reset_peak_rss};
use fare_model::mpson::{self as scale, Fabric, Scenario, Technique, STORED_PATH_BYTES};
use fare_model::topology::gen;
use std::fmt::Write;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The generated multi-plane fabric (`fare topo gen multiplane`) the benchmark runs
    /// on; the defaults are the 100,000-GPU, 4-plane fabric.
    #[command(flatten)]
    fabric: fare_model::topology::gen::MultiPlane,
    /// (RNIC, plane) links down in the degraded run (default: 0.1% of 400,000).
    #[arg(long, default_value_t = 400)]
    disconnected: u32,
    /// Size of every RNIC's all-to-all communication group (it also talks to its two ring
    /// neighbors): what it requests with Prefix-ORF.
    #[arg(long, default_value_t = 64)]
    group: u32,
    /// Seed of the random scenario.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn human(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn bytes(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.1} kB", b / 1e3)
    }
}

pub fn run(args: Args) -> anyhow::Result<String> {
    let params = args.fabric.clone();
    let baseline = args.fabric.gpus as f64 * args.fabric.planes as f64;
    let mut md = String::new();
    writeln!(md, "## Multi-plane route-table suppression (`mpson`)\n")?;
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    writeln!(md, "Command: `{}` ({build} build)\n", command_line())?;

    let t0 = Instant::now();
    let topo = gen::multiplane(&params);
    let gen_s = t0.elapsed().as_secs_f64();
    reset_peak_rss();
    let cpu0 = cpu_seconds();
    let t1 = Instant::now();
    let fabric = Fabric::from_topology(&topo)?;
    drop(topo);
    let healthy = Scenario::random(&fabric, 0, args.group, args.seed);
    let degraded = Scenario::random(&fabric, args.disconnected, args.group, args.seed);
    let mut rows = Vec::new();
    for (state, s) in [("healthy", &healthy), ("degraded", &degraded)] {
        for t in Technique::ALL {
            rows.push((state, scale::analyse(&fabric, s, t)));
        }
    }
    let wall = t1.elapsed().as_secs_f64();
    let cpu = cpu_seconds()
        .zip(cpu0)
        .map_or("n/a".into(), |(b, a)| format!("{:.2} s", b - a));
    let peak = peak_rss_bytes().map_or("n/a".into(), |b| bytes(b as f64));

    writeln!(
        md,
        "Fabric from `fare topo gen multiplane`: {} GPUs (one RNIC each) on {} planes, {} RNICs \
         per leaf, {} spines per plane: {} leaves and {} spines, {} block aggregates per \
         plane (built in {gen_s:.1} s). Degraded: {} (RNIC, plane) links down at random \
         (seed {}). Prefix-ORF workload: every RNIC talks to an all-to-all group of {} RNICs \
         spread over the fabric and to its two ring neighbors.\n",
        args.fabric.gpus,
        args.fabric.planes,
        args.fabric.rnics_per_leaf,
        args.fabric.spines_per_plane,
        fabric.leaves.len(),
        fabric.spines.len(),
        fabric.aggregates.iter().max().unwrap_or(&0),
        args.disconnected,
        args.seed,
        args.group,
    )?;
    writeln!(
        md,
        "Draft baseline (§4): {} GPUs x {} planes = **{} routes per RNIC**. Columns: paths = \
         routes stored (Adj-RIB-In, one per prefix and plane/neighbor), FIB = forwarding \
         entries; mean (max) over the nodes of the role. RNIC memory at {STORED_PATH_BYTES} B \
         per stored path.\n",
        args.fabric.gpus,
        args.fabric.planes,
        human(baseline)
    )?;
    writeln!(
        md,
        "| links | technique | RNIC paths | of baseline | RNIC FIB | RNIC memory | leaf RIB | leaf paths | leaf FIB | spine FIB |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|")?;
    for (state, r) in &rows {
        writeln!(
            md,
            "| {state} | {} | {} ({}) | {:.3}% | {} ({}) | {} | {} | {} | {} ({}) | {} |",
            r.technique.label(),
            human(r.rnic.paths.mean),
            human(r.rnic.paths.max as f64),
            100.0 * r.rnic.paths.mean / baseline,
            human(r.rnic.fib.mean),
            human(r.rnic.fib.max as f64),
            bytes(r.rnic.paths.mean * STORED_PATH_BYTES as f64),
            human(r.leaf.rib.mean),
            human(r.leaf.paths.mean),
            human(r.leaf.fib.mean),
            human(r.leaf.fib.max as f64),
            human(r.spine.fib.mean),
        )?;
    }
    let none = &rows[0].1;
    writeln!(
        md,
        "\nFabric-wide, RNIC paths stored: no suppression {} ({}); aggregation {}; \
         Prefix-ORF {} (healthy).",
        human(none.rnic.total_paths as f64),
        bytes(none.rnic.total_paths as f64 * STORED_PATH_BYTES as f64),
        human(rows[1].1.rnic.total_paths as f64),
        human(rows[2].1.rnic.total_paths as f64),
    )?;
    writeln!(
        md,
        "\nAnalysis of all {} RNICs, {} leaves and {} spines for 8 (link state, technique) \
         cases: wall {wall:.2} s, CPU {cpu}, peak RSS {peak} (the generated topology is \
         dropped first; the counts come from set sizes per plane, not from materialised \
         tables).",
        fabric.rnics(),
        fabric.leaves.len(),
        fabric.spines.len()
    )?;
    Ok(md)
}
