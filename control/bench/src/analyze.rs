//! `fare bench analyze`: the failure sweep of `fare analyze` on a generated multi-plane
//! fabric, measured whole (time and peak memory against the targets). The baseline, in the
//! same run: per class of failure (kind and roles) a seeded sample is analysed both ways,
//! incrementally and by solving the failed fabric whole (naive), whose reports must be
//! equal; the naive sweep's time is extrapolated from the class sizes. A smaller fabric is
//! swept whole three ways (shared between twins, each failure on its own, naive), with
//! equal reports.

use super::command_line;
use fare_model::analyze::{self, failures, symmetry, Base, Failure, Kind, Phases};
use fare_model::bandwidth::Mode;
use fare_model::rng::Rng;
use fare_model::sim;
use fare_model::sim::incremental::{Engine, Repropagator};
use fare_model::topology::gen::{self, MultiPlane};
use fare_model::topology::Topology;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The generated multi-plane fabric; the defaults are the 100,000-GPU, 4-plane one.
    #[command(flatten)]
    fabric: MultiPlane,
    /// Path bandwidth propagation: the drafts' min-sum (draft) or the sum/N variant
    /// (averaged), as `fare weights --mode`.
    #[arg(long, value_enum, default_value_t = Mode::Draft)]
    mode: Mode,
    /// Failures sampled per class (kind and roles), each analysed both ways.
    #[arg(long, default_value_t = 1)]
    sample: usize,
    /// Skip the whole sweep of the large fabric (only the samples and the small sweep).
    #[arg(long)]
    no_sweep: bool,
    /// Seed of the failure sample (the same seed, the same failures).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// GPUs of the smaller fabric swept whole (every failure, measured).
    #[arg(long, default_value_t = 512)]
    sweep_gpus: u32,
}

impl Args {
    /// Draft mode writes section `analyze`, averaged mode `analyze-averaged`.
    pub fn section(&self) -> &'static str {
        match self.mode {
            Mode::Draft => "analyze",
            Mode::Averaged => "analyze-averaged",
        }
    }
}

/// Peak resident set of this process so far (getrusage ru_maxrss), bytes.
fn max_rss() -> u64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes the struct it is given; zeroed is a valid rusage.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    u.ru_maxrss.max(0) as u64 * 1024
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// "link leaf-spine", "node rnic", "plane": what a failure's cost depends on.
fn class(topo: &Topology, f: &Failure) -> String {
    let role = |n: usize| topo.nodes[n].role.as_str();
    match f.kind {
        Kind::Link => {
            let (a, b) = f.pairs[0];
            let (mut x, mut y) = (role(a), role(b));
            if topo.nodes[a].role.stage() > topo.nodes[b].role.stage() {
                std::mem::swap(&mut x, &mut y);
            }
            format!("link {x}-{y}")
        }
        Kind::Node => format!("node {}", role(f.nodes[0])),
        Kind::Plane => "plane".into(),
        Kind::Pair => "pair".into(),
    }
}

/// Mean seconds per failure of one class, both ways, and the incremental phases.
struct ClassTime {
    count: usize,
    sampled: usize,
    incremental: f64,
    naive: f64,
    phases: Phases,
    recomputed: f64,
    /// Sampled failures whose incremental report differs from the naive one.
    differ: Vec<String>,
}

fn sample_class(
    base: &Base,
    (engine, rep): (&Engine, &mut Repropagator),
    all: &[&Failure],
    (k, rng): (usize, &mut Rng),
) -> ClassTime {
    let mut t = ClassTime {
        count: all.len(),
        sampled: 0,
        incremental: 0.0,
        naive: 0.0,
        phases: Phases::default(),
        recomputed: 0.0,
        differ: Vec::new(),
    };
    for _ in 0..k.min(all.len()) {
        let f = all[rng.below(all.len() as u64) as usize];
        let s = Instant::now();
        let (r, p) = base.one_with((engine, &mut *rep), f);
        t.incremental += s.elapsed().as_secs_f64();
        let s = Instant::now();
        let full = base.one(f, true);
        t.naive += s.elapsed().as_secs_f64();
        if (analyze::Report {
            recomputed: 0,
            ..r.clone()
        }) != (analyze::Report {
            recomputed: 0,
            ..full
        }) {
            t.differ.push(f.name.clone());
        }
        t.phases.select += p.select;
        t.phases.solve += p.solve;
        t.phases.compare += p.compare;
        t.recomputed += r.recomputed as f64;
        t.sampled += 1;
    }
    let n = t.sampled.max(1) as f64;
    t.incremental /= n;
    t.naive /= n;
    t.phases.select /= n;
    t.phases.solve /= n;
    t.phases.compare /= n;
    t.recomputed /= n;
    t
}

pub fn run(args: Args) -> anyhow::Result<String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut md = String::new();
    writeln!(
        md,
        "## What if this fails: the failure sweep (`{}`)\n",
        args.section()
    )?;
    writeln!(md, "Command: `{}` (release build)\n", command_line())?;
    let t = Instant::now();
    let topo = gen::multiplane(&args.fabric);
    writeln!(
        md,
        "Fabric: {} GPUs on {} planes: {}; built in {:.2} s.",
        args.fabric.gpus,
        args.fabric.planes,
        topo.summary(),
        t.elapsed().as_secs_f64()
    )?;
    let options = sim::Options {
        mode: args.mode,
        ..Default::default()
    };
    let t = Instant::now();
    let base = Base::new(&topo, &options);
    let all = failures::singles(&topo);
    writeln!(
        md,
        "{:?} mode. Unfailed fabric solved in {:.2} s; {} single failures; {} destinations.\n",
        args.mode,
        t.elapsed().as_secs_f64(),
        all.len(),
        base.solution.origin_sets.len()
    )?;
    let mut classes: BTreeMap<String, Vec<&Failure>> = BTreeMap::new();
    for f in &all {
        classes.entry(class(&topo, f)).or_default().push(f);
    }
    let t = Instant::now();
    let twins = symmetry::Twins::new(&topo);
    let twin_classes = |list: &[&Failure]| {
        let keys: std::collections::HashSet<_> = list
            .iter()
            .enumerate()
            .map(|(i, f)| twins.canonical(f).map_or((f.kind, i, usize::MAX), |c| c.0))
            .collect();
        keys.len()
    };
    writeln!(md, "Twins found in {:.2} s.\n", t.elapsed().as_secs_f64())?;
    writeln!(md, "| class | failures | twin classes (computed) | sampled | incremental per failure | destinations changed | naive per failure | naive / incremental | phases: prepare / propagate / compare |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|")?;
    let mut rng = Rng::new(args.seed);
    let (mut naive_total, mut shared_total, mut differ) = (0.0, 0.0, Vec::new());
    let engine = base.engine();
    let mut rep = engine.repropagator();
    for (name, list) in &classes {
        let c = sample_class(&base, (&engine, &mut rep), list, (args.sample, &mut rng));
        let computed = twin_classes(list);
        naive_total += c.naive * c.count as f64;
        shared_total += c.incremental * computed as f64;
        differ.extend(c.differ.iter().cloned());
        writeln!(
            md,
            "| {name} | {} | {computed} | {} | {:.4} s | {:.1} of {} | {:.4} s | {:.0}x | {:.4} / {:.4} / {:.4} s |",
            c.count,
            c.sampled,
            c.incremental,
            c.recomputed,
            base.solution.origin_sets.len(),
            c.naive,
            c.naive / c.incremental.max(1e-9),
            c.phases.select,
            c.phases.solve,
            c.phases.compare
        )?;
    }
    drop(rep);
    drop(engine);
    let per = threads as f64;
    writeln!(
        md,
        "\nSampled failures whose incremental report differs from the naive one: {}. \
         Estimated from the samples (one computation per twin class): {:.0} s on {threads} \
         threads.",
        if differ.is_empty() {
            "none".to_string()
        } else {
            differ.join(", ")
        },
        shared_total / per,
    )?;
    if !args.no_sweep {
        let mut base = base;
        base.destinations = 10;
        let t = Instant::now();
        let reports = analyze::analyze(&base, &all, false);
        let seconds = t.elapsed().as_secs_f64();
        let worst = reports.first().map_or_else(String::new, |r| {
            format!(
                "{} ({} groups unreachable, worst oversubscription {:.3})",
                r.failure, r.unreachable, r.worst_oversubscription
            )
        });
        writeln!(
            md,
            "\n**Whole sweep, measured: {} failures in {seconds:.1} s on {threads} threads \
             (target < 60 s); peak RSS (getrusage, whole run) {:.2} GiB (target < 4 GiB).** \
             Worst: {worst}. Naive sweep extrapolated from the samples: {:.0} s on {threads} \
             threads, {:.0}x the measured sweep.",
            all.len(),
            gib(max_rss()),
            naive_total / per,
            naive_total / per / seconds.max(1e-9),
        )?;
    }
    sweep(&mut md, &args)?;
    if !differ.is_empty() {
        anyhow::bail!(
            "incremental and naive reports differ for {}",
            differ.join(", ")
        );
    }
    Ok(md)
}

/// The smaller fabric swept whole, both ways, measured.
fn sweep(md: &mut String, args: &Args) -> anyhow::Result<()> {
    let small = gen::multiplane(&MultiPlane {
        gpus: args.sweep_gpus,
        ..args.fabric.clone()
    });
    let options = sim::Options {
        mode: args.mode,
        ..Default::default()
    };
    let base = Base::new(&small, &options);
    let all = failures::singles(&small);
    let mut times = Vec::new();
    let mut worst = String::new();
    let mut results = Vec::new();
    for way in 0..3 {
        let t = Instant::now();
        let reports = match way {
            0 => analyze::analyze(&base, &all, false),
            1 => analyze::analyze_each(&base, &all, false),
            _ => analyze::analyze(&base, &all, true),
        };
        times.push(t.elapsed().as_secs_f64());
        if let Some(r) = reports.first() {
            worst = format!(
                "{} ({} groups unreachable, worst oversubscription {:.3})",
                r.failure, r.unreachable, r.worst_oversubscription
            );
        }
        // How many destinations were redone differs by design; the figures must not.
        let figures: Vec<_> = reports
            .into_iter()
            .map(|r| analyze::Report { recomputed: 0, ..r })
            .collect();
        results.push(figures);
    }
    let same = results[0] == results[1] && results[1] == results[2];
    if !same {
        anyhow::bail!("the three sweeps of the small fabric differ");
    }
    writeln!(
        md,
        "\nWhole sweep, measured ({} GPUs: {}): {} failures in {:.2} s shared between twins, \
         {:.2} s incremental each, {:.2} s naive ({:.1}x shared vs naive); the three \
         reports {}; worst: {worst}. Peak RSS (getrusage) at the end: {:.2} GiB.",
        args.sweep_gpus,
        small.summary(),
        all.len(),
        times[0],
        times[1],
        times[2],
        times[2] / times[0].max(1e-9),
        if same { "equal" } else { "DIFFER" },
        gib(max_rss())
    )?;
    Ok(())
}
