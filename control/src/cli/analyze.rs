//! `fare analyze`: what if this fails, for every link, node and plane of a topology
//! (`fare_model::analyze` computes; this prints).

use super::analyze_summary::{covered, kind, Summary};
use super::InputError;
use fare_model::analyze::{self, failures, Base, Kind, Report};
use fare_model::sim;
use fare_model::topology;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// The long description of `fare analyze --help` and of its manual page (set on the
/// subcommand: a doc comment there would replace one set here).
pub const LONG_ABOUT: &str = "Takes every link (all parallel links between two nodes), every node and, on \
multi-plane fabrics, every plane down in turn (and with --n2, pairs of link and node failures \
drawn with a seed), and reports for each what `fare weights --fail` would show: the groups that \
change, the groups left without a route, the worst oversubscription per destination (demand at \
the ideal split over capacity), the change of stranded capacity, the groups a data plane limit \
reduces and the groups left with one path. Ranked worst first; see analyze.md in the documentation.\n\n\
Example: fare analyze topologies/whitepaper-asymmetric.yaml --mode averaged --top 5";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topology YAML file (its format: configuration.md in the documentation).
    pub topology: PathBuf,
    /// How the model computes, as for `fare weights` (--fail/--degrade refused: the
    /// sweep fails every element itself).
    #[command(flatten)]
    pub model: super::model_args::ModelArgs,
    /// Also this many double failures (pairs of link and node failures), sampled.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub n2: usize,
    /// Seed of the --n2 sample.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Print JSON: {"summary": {...}, "failures": [...]} (ranked, --top of them).
    #[arg(long)]
    pub json: bool,
    /// Also write the ranked table as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Show the N worst failures (0: all).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
    /// Keep the N worst destinations of each failure (0: all); `destinations_hurt` still
    /// counts every one. Bounds memory on large fabrics, where one failure can touch
    /// every destination.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub destinations: usize,
    /// Propagate every destination again for every failure (slow; the incremental
    /// result is the same).
    #[arg(long)]
    pub full: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let topo = topology::load(&args.topology)?;
    if !args.model.fail.is_empty() || !args.model.degrade.is_empty() {
        return Err(InputError(
            "--fail/--degrade: analyze fails every link, node and plane itself".into(),
        )
        .into());
    }
    // Every core for the unfailed fabric (the failures run in parallel anyway).
    let options = sim::Options {
        threads: 0,
        ..args.model.options()
    };
    if topo.links.is_empty() {
        return Err(InputError(format!("{}: no links to fail", args.topology.display())).into());
    }
    let start = Instant::now();
    let mut all = failures::singles(&topo);
    let pairs = failures::sample_pairs(&all, args.n2, args.seed);
    all.extend(pairs);
    let mut base = Base::new(&topo, &options);
    base.destinations = args.destinations;
    let reports = analyze::analyze(&base, &all, args.full);
    let count = |k: Kind| all.iter().filter(|f| f.kind == k).count();
    let summary = Summary {
        topology: args.topology.display().to_string(),
        fabric: topo.summary(),
        mode: options.mode,
        failures: all.len(),
        links: count(Kind::Link),
        nodes: count(Kind::Node),
        planes: count(Kind::Plane),
        pairs: count(Kind::Pair),
        recomputed: reports.iter().map(|r| r.recomputed).sum(),
        destinations_total: all.len() * base.solution.origin_sets.len(),
        reduced_groups_before: base.reduced_groups,
        seconds: start.elapsed().as_secs_f64(),
    };
    let shown = match args.top {
        0 => &reports[..],
        n => &reports[..n.min(reports.len())],
    };
    if let Some(path) = &args.html {
        std::fs::write(path, super::analyze_html::page(&summary, shown))
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    // Rendered whole, then written: a failed write is an OutputError (see cli::main).
    let mut out = Vec::new();
    if args.json {
        let v = serde_json::json!({"summary": summary, "failures": shown});
        serde_json::to_writer(&mut out, &v)?;
        writeln!(out)?;
    } else {
        write_text(&mut out, &summary, shown)?;
    }
    super::write_out(&out)?;
    Ok(())
}

fn write_text(out: &mut impl Write, s: &Summary, reports: &[Report]) -> std::io::Result<()> {
    writeln!(out, "{}: {}", s.topology, s.fabric)?;
    writeln!(
        out,
        "{:?} mode: {} failures ({}) in {:.2} s; {} of {} (failure, destination) pairs re-propagated",
        s.mode,
        s.failures,
        covered(s),
        s.seconds,
        s.recomputed,
        s.destinations_total
    )?;
    let w = reports
        .iter()
        .map(|r| r.failure.len())
        .fold("failure".len(), usize::max);
    writeln!(
        out,
        "{:>4}  {:w$}  {:5}  {:>7}  {:>11}  {:>6}  {:>14}  {:>7}  {:>11}  worst destination",
        "rank",
        "failure",
        "kind",
        "changed",
        "unreachable",
        "oversub",
        "stranded Gbps",
        "reduced",
        "single-path"
    )?;
    for (i, r) in reports.iter().enumerate() {
        let worst = r.destinations.first().map_or_else(String::new, |d| {
            let p = d
                .prefixes
                .first()
                .map_or_else(String::new, |p| p.to_string());
            format!("{p} at {}", if d.node.is_empty() { "-" } else { &d.node })
        });
        writeln!(
            out,
            "{:>4}  {:w$}  {:5}  {:>7}  {:>11}  {:>6.3}  {:>+14.1}  {:>7}  {:>11}  {worst}",
            i + 1,
            r.failure,
            kind(r.kind),
            r.changed_groups,
            r.unreachable,
            r.worst_oversubscription,
            r.stranded_gbps,
            r.reduced_groups,
            r.single_path
        )?;
    }
    Ok(())
}
