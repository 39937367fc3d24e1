//! `fare bench chaos`: a lab fabric (draft Figure 1, XDP, by default) carries steady UDP
//! traffic for `--minutes` while a seeded random schedule of faults runs one at a time
//! with a settle gap: link flaps, degradations, `kill -9` of an agent and its restart,
//! and (with `--bmv2 NODE`) a BMv2 switch's restart. Then the checks (root):
//!
//! - every session Established on both ends, every group equal to the model;
//! - lost packets (sent - received per 100 ms slice of their send time) fall inside the
//!   fault windows (fault start .. recovery + `--grace`), and none after the last one;
//! - no agent's RSS or open fds grew without bound ([`checks::bounded`]).
//!
//! The same traffic runs first for `--baseline` seconds with no fault: its loss is the
//! baseline. Any failed check makes the command exit non-zero, naming it.

mod checks;
mod inflict;
mod outside;
mod sampler;
mod schedule;

use super::command_line;
use super::lab_bench::{quantile, BenchLab};
use anyhow::{bail, Context};
use checks::{Placement, Series};
use fare_lab::plan::{self, DataplaneKind, Routing};
use fare_lab::state::{self, StateDir};
use fare_lab::traffic::{Steady, SteadyCounts};
use fare_lab::{model_check, up};
use inflict::Done;
use std::fmt::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topology the soak runs on.
    #[arg(long, default_value = "topologies/draft-fig1.yaml")]
    topology: PathBuf,
    /// Minutes of traffic under faults.
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Seed of the fault schedule.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Nodes (transit only) run as BMv2 switches (`target: bmv2`); their switches restart
    /// among the faults. Needs simple_switch_grpc on PATH.
    #[arg(long, num_args = 1..)]
    bmv2: Vec<String>,
    /// The other agents' data plane.
    #[arg(long, value_enum, default_value_t = DataplaneKind::Xdp)]
    dataplane: DataplaneKind,
    /// Seconds between one fault's recovery and the next fault.
    #[arg(long, default_value_t = 5.0)]
    settle: f64,
    /// Seconds a fault window stretches past its recovery (packets in flight, queues).
    #[arg(long, default_value_t = 2.0)]
    grace: f64,
    /// Seconds of the same traffic with no fault, first (the baseline).
    #[arg(long, default_value_t = 60.0)]
    baseline: f64,
    /// UDP flows per source host.
    #[arg(long, default_value_t = 16)]
    flows: usize,
    /// Offered load per source host, Mbit/s of UDP payload (200-byte packets).
    #[arg(long, default_value_t = 0.4)]
    rate_mbit: f64,
    /// Lab name (default chaos<pid>).
    #[arg(long)]
    name: Option<String>,
    /// Also write the figures and every check's verdict as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

impl Args {
    /// Its bench/RESULTS.md section: a fabric with BMv2 switches has its own.
    pub fn section(&self) -> &'static str {
        if self.bmv2.is_empty() {
            "chaos"
        } else {
            "chaos-bmv2"
        }
    }
}

/// Slices of send time the traffic is counted in.
const SLICE_MS: u64 = 100;
/// Traffic runs this long after the last fault may start: the longest recovery (60 s),
/// the grace, and a tail that must be seen losing nothing.
const TAIL_S: f64 = 75.0;
/// How long `lab up` may take to converge before the soak starts: a BMv2 switch's agent
/// writes its groups one by one, slowly on a loaded machine (not measured).
const CONVERGE_S: u64 = 300;
/// The least traffic after the last window that shows no flow is black-holed.
const MIN_QUIET_S: f64 = 5.0;

/// One check: its name, verdict and what it saw.
#[derive(Debug, serde::Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// What the soak measured; the JSON of `--json`.
#[derive(Debug, serde::Serialize)]
struct Soak {
    lab: String,
    topology: String,
    bmv2: Vec<String>,
    seed: u64,
    minutes: f64,
    grace_s: f64,
    baseline: Placement,
    soak: Placement,
    faults: Vec<Done>,
    /// The slices that lost packets outside every window, with what was near them.
    outside: Vec<outside::Row>,
    /// Times a generator fell behind its pace (count, most packets behind).
    stalls: (usize, u64),
    agents: Vec<Series>,
    checks: Vec<Check>,
}

/// The soak's Markdown section and the names of the failed checks.
pub struct Outcome {
    pub body: String,
    pub failed: Vec<String>,
}

pub fn run_bench(args: Args) -> anyhow::Result<Outcome> {
    if !fare_lab::sys::have("tc") {
        bail!("fare bench chaos needs tc (and root: it builds namespace labs)");
    }
    if !(args.minutes.is_finite() && args.minutes > 0.0 && args.minutes <= 24.0 * 60.0) {
        bail!("--minutes must be in (0, 1440]");
    }
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("chaos{}", std::process::id() % 100_000));
    let started = Instant::now();
    let lab = lab_up(&args, &name)?;
    let st = StateDir::new(&name).load()?;
    eprintln!(
        "chaos: baseline, {:.0} s of traffic with no fault",
        args.baseline
    );
    let baseline = traffic(&args, &st.plan, args.baseline, |_| Ok(()))?;
    let baseline = checks::place(&baseline.sent, &baseline.received, SLICE_MS, &[], 0.0);
    let sampler = sampler::Sampler::start(&name);
    let duration = args.minutes * 60.0;
    let mut faults_done = Vec::new();
    let counts = traffic(&args, &st.plan, duration + TAIL_S, |t0| {
        faults_done = run_faults(&args, &name, &st.plan, t0 + duration)?;
        Ok(())
    })?;
    let agents = sampler.finish();
    let windows: Vec<_> = faults_done.iter().map(Done::window).collect();
    let soak = checks::place(
        &counts.sent,
        &counts.received,
        SLICE_MS,
        &windows,
        args.grace,
    );
    let outside = outside::explain(
        &soak.outside,
        SLICE_MS,
        &faults_done,
        &counts.gaps,
        &counts.stalls,
    );
    let stalls = (
        counts.stalls.len(),
        counts.stalls.iter().map(|s| s.packets).max().unwrap_or(0),
    );
    let checks = final_checks(&name, &soak, &faults_done, &agents)?;
    drop(lab);
    let result = Soak {
        lab: name,
        topology: args.topology.display().to_string(),
        bmv2: args.bmv2.clone(),
        seed: args.seed,
        minutes: args.minutes,
        grace_s: args.grace,
        baseline,
        soak,
        faults: faults_done,
        outside,
        stalls,
        agents,
        checks,
    };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&result)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let failed = result
        .checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    Ok(Outcome {
        body: report(&args, &result, started.elapsed().as_secs_f64()),
        failed,
    })
}

/// `lab up` of the topology with `--bmv2` nodes made `target: bmv2`.
fn lab_up(args: &Args, name: &str) -> anyhow::Result<BenchLab> {
    let mut topology = fare_model::topology::load(&args.topology)
        .map_err(|e| anyhow::anyhow!("{e} (run from the repository root)"))?;
    for n in &args.bmv2 {
        let node = topology
            .nodes
            .iter_mut()
            .find(|x| x.name == *n)
            .with_context(|| format!("--bmv2 {n}: no such node in the topology"))?;
        node.target = fare_model::topology::Target::Bmv2;
    }
    let req = up::UpRequest {
        topology_path: args.topology.clone(),
        topology,
        lab: name.to_string(),
        options: plan::Options {
            dataplane: args.dataplane,
            routing: Routing::Bgp,
            ..plan::Options::default()
        },
        mode: fare_model::bandwidth::Mode::Draft,
        max_group_size: None,
        agents: true,
        agent_timeout: Duration::from_secs(120),
        converge_timeout: Duration::from_secs(CONVERGE_S),
        fare: up::fare_binary(),
        progress: false,
    };
    // (`up` takes down what it built when it fails half-way.)
    let (lab, report) = BenchLab::start(&req)?;
    if report.converged_s.is_none() {
        bail!("lab up: the fabric did not converge to the model in {CONVERGE_S} s");
    }
    Ok(lab)
}

/// Steady traffic for `seconds` while `during(start unix s)` runs; the counts per slice.
fn traffic(
    args: &Args,
    plan: &plan::Plan,
    seconds: f64,
    during: impl FnOnce(f64) -> anyhow::Result<()>,
) -> anyhow::Result<SteadyCounts> {
    let t0 = state::now();
    let steady = Steady::start(plan, args.flows, args.rate_mbit, seconds, SLICE_MS)?;
    during(t0)?;
    let left = t0 + seconds + 0.5 - state::now();
    if left > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(left));
    }
    Ok(steady.finish())
}

/// Faults of the schedule, one at a time with the settle gap, until `last_start`.
fn run_faults(
    args: &Args,
    lab: &str,
    plan: &plan::Plan,
    last_start: f64,
) -> anyhow::Result<Vec<Done>> {
    let mut done = Vec::new();
    let settle = Duration::from_secs_f64(args.settle.clamp(0.0, 600.0));
    std::thread::sleep(settle);
    for fault in schedule::Schedule::new(plan, args.seed) {
        if state::now() > last_start {
            break;
        }
        let d = inflict::inflict(lab, &fault);
        eprintln!(
            "chaos: {:>4.0} s  {fault}: recovered {}",
            d.start - done.first().map_or(d.start, |f: &Done| f.start),
            match (&d.error, d.recovery_s) {
                (Some(e), _) => format!("no: {e}"),
                (None, None) => "no (60 s)".to_string(),
                (None, Some(s)) => format!("in {s:.2} s"),
            }
        );
        let failed = d.error.is_some();
        done.push(d);
        if failed {
            break; // the fabric is not whole: further faults would say nothing
        }
        std::thread::sleep(settle);
    }
    Ok(done)
}

fn check(name: &'static str, ok: bool, detail: String) -> Check {
    Check { name, ok, detail }
}

/// Sessions, model, loss placement, recoveries, RSS and fds.
fn final_checks(
    lab: &str,
    soak: &Placement,
    faults: &[Done],
    agents: &[Series],
) -> anyhow::Result<Vec<Check>> {
    let dir = StateDir::new(lab);
    let st = dir.load()?;
    let stuck = super::soak::not_established(&dir, &st);
    let model = model_check::wait_converged(&dir, &st, Instant::now(), Duration::from_secs(10))?;
    let unrecovered: Vec<String> = faults
        .iter()
        .filter(|f| f.recovery_s.is_none())
        .map(|f| match &f.error {
            Some(e) => format!("{} ({e})", f.fault),
            None => f.fault.clone(),
        })
        .collect();
    let mut out = vec![
        check(
            "faults",
            !faults.is_empty(),
            format!("{} faults", faults.len()),
        ),
        check(
            "recovered",
            unrecovered.is_empty(),
            format!("not recovered in {} s: {unrecovered:?}", inflict::TIMEOUT_S),
        ),
        check(
            "sessions",
            stuck.is_empty(),
            format!("not Established on both ends: {stuck:?}"),
        ),
        check(
            "model",
            model.is_ok(),
            match &model {
                Ok(_) => "every group equals the model".into(),
                Err(m) => format!("{} differences, first: {:?}", m.len(), m.first()),
            },
        ),
        check(
            "traffic",
            soak.sent > 0,
            format!("{} packets sent", soak.sent),
        ),
        check(
            "loss outside windows",
            soak.outside.is_empty(),
            format!(
                "{} slices, first (start unix s, packets): {:?}",
                soak.outside.len(),
                &soak.outside[..soak.outside.len().min(8)]
            ),
        ),
        check(
            "after the last window",
            soak.after_last == 0 && soak.quiet_tail_s >= MIN_QUIET_S,
            format!(
                "{} lost in {:.1} s of traffic after the last window",
                soak.after_last, soak.quiet_tail_s
            ),
        ),
    ];
    out.extend(growth_checks(agents));
    Ok(out)
}

/// RSS and fds of every agent series with enough samples.
fn growth_checks(agents: &[Series]) -> Vec<Check> {
    let mut grew = Vec::new();
    let mut judged = 0;
    for s in agents {
        let rss = checks::bounded(&s.rss_kb, checks::rss_limit);
        let fds = checks::bounded(&s.fds, |m| m + checks::FD_MARGIN);
        if let Some((ok, a, b)) = rss {
            judged += 1;
            if !ok {
                grew.push(format!("{} (pid {}) RSS {a} -> {b} kB", s.node, s.pid));
            }
        }
        if let Some((false, a, b)) = fds {
            grew.push(format!("{} (pid {}) fds {a} -> {b}", s.node, s.pid));
        }
    }
    vec![check(
        "memory and fds bounded",
        grew.is_empty() && judged > 0,
        format!("{judged} series judged; grew: {grew:?}"),
    )]
}

fn ms(v: &[f64], q: f64) -> String {
    if v.is_empty() {
        return "-".into();
    }
    format!("{:.0}", quantile(v, q) * 1000.0)
}

fn fault_rows(o: &mut String, faults: &[Done]) {
    let _ = writeln!(
        o,
        "| fault | count | not recovered in 60 s | recovery, ms: median / max | window, s: median / max |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|");
    let mut kinds: Vec<&str> = faults.iter().map(|f| f.kind).collect();
    kinds.dedup();
    kinds.sort();
    kinds.dedup();
    for kind in kinds {
        let of: Vec<&Done> = faults.iter().filter(|f| f.kind == kind).collect();
        let rec: Vec<f64> = of.iter().filter_map(|f| f.recovery_s).collect();
        let win: Vec<f64> = of.iter().map(|f| f.end - f.start).collect();
        let _ = writeln!(
            o,
            "| {kind} | {} | {} | {} / {} | {:.1} / {:.1} |",
            of.len(),
            of.len() - rec.len(),
            ms(&rec, 0.5),
            ms(&rec, 1.0),
            quantile(&win, 0.5),
            quantile(&win, 1.0),
        );
    }
}

fn agent_rows(o: &mut String, agents: &[Series]) {
    let _ = writeln!(
        o,
        "| agent (pid) | samples | RSS, kB: first / last / max before the last third / last third's max | fds: first / last / max |"
    );
    let _ = writeln!(o, "|---|---|---|---|");
    for s in agents {
        let (Some(r0), Some(r1), Some(f0), Some(f1)) = (
            s.rss_kb.first(),
            s.rss_kb.last(),
            s.fds.first(),
            s.fds.last(),
        ) else {
            continue;
        };
        let thirds = checks::bounded(&s.rss_kb, checks::rss_limit)
            .map_or("- / -".into(), |(_, a, b)| format!("{a} / {b}"));
        let _ = writeln!(
            o,
            "| {} ({}) | {} | {r0} / {r1} / {thirds} | {f0} / {f1} / {} |",
            s.node,
            s.pid,
            s.rss_kb.len(),
            s.fds.iter().max().unwrap_or(&0)
        );
    }
}

fn loss_line(label: &str, p: &Placement) -> String {
    let pct = |n: u64| 100.0 * n as f64 / p.sent.max(1) as f64;
    format!(
        "| {label} | {} | {} ({:.3} %) | {} | {} | {} |",
        p.sent,
        p.lost,
        pct(p.lost),
        p.inside,
        p.outside.iter().map(|(_, n)| n).sum::<u64>(),
        p.after_last
    )
}

/// The slices lost outside the windows, with the flows, nearest fault event and stalls.
fn outside_rows(o: &mut String, r: &Soak) {
    let _ = writeln!(
        o,
        "\nGenerators fell {} or more packets behind their pace {} times (at most {} \
         packets behind; each skipped that backlog rather than burst it).",
        fare_lab::gen::STALL,
        r.stalls.0,
        r.stalls.1
    );
    if r.outside.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\n| slice lost outside (unix s) | lost | runs of lost packets there (flows' \
         sequence numbers), per source->destination node | nearest fault event | slice - \
         event, ms | generator stalls within 2 s |\n|---|---|---|---|---|---|"
    );
    for x in r.outside.iter().take(OUTSIDE_ROWS) {
        let _ = writeln!(
            o,
            "| {:.1} | {} | {} | {} | {:+} | {} |",
            x.slice_s,
            x.lost,
            short(&x.flows),
            x.nearest,
            x.distance_ms,
            if x.stalls.is_empty() {
                "none".into()
            } else {
                short(&x.stalls)
            }
        );
    }
    if r.outside.len() > OUTSIDE_ROWS {
        let _ = writeln!(
            o,
            "\n({} more slices in the JSON of `--json`.)",
            r.outside.len() - OUTSIDE_ROWS
        );
    }
}

/// Slices lost outside the windows the section lists (all are in the JSON).
const OUTSIDE_ROWS: usize = 12;

/// The first four items, and how many more.
fn short(v: &[String]) -> String {
    let mut s = v.iter().take(4).cloned().collect::<Vec<_>>().join("; ");
    if v.len() > 4 {
        let _ = write!(s, "; {} more", v.len() - 4);
    }
    s
}

fn report(args: &Args, r: &Soak, total_s: f64) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "## Chaos soak{}: faults under traffic, nothing lost outside them (`{}`)\n",
        if args.bmv2.is_empty() {
            ""
        } else {
            " with BMv2"
        },
        args.section()
    );
    let _ = writeln!(o, "Command: `{}` (root)\n", command_line());
    let _ = writeln!(
        o,
        "{} ({} data plane{}), seed {}: {:.0} min of UDP traffic ({} flows per source host, \
         {} Mbit/s each, 200-byte packets counted per {SLICE_MS} ms of send time at both \
         ends; faults start during the first {:.0} min, traffic runs {TAIL_S} s longer) \
         under {} faults one at a time, {} s apart after each recovery; first {:.0} s \
         of the same traffic with no fault (baseline). A window runs from just before a \
         fault until every session is up and every group equals the model after its \
         repair, plus {} s grace. {:.0} s in all, debug build unless the command says \
         otherwise.\n",
        r.topology,
        format!("{:?}", args.dataplane).to_lowercase(),
        if r.bmv2.is_empty() {
            String::new()
        } else {
            format!(", BMv2 switches at {}", r.bmv2.join(", "))
        },
        r.seed,
        r.minutes,
        args.flows,
        args.rate_mbit,
        r.minutes,
        r.faults.len(),
        args.settle,
        args.baseline,
        r.grace_s,
        total_s
    );
    fault_rows(&mut o, &r.faults);
    let _ = writeln!(
        o,
        "\n| traffic | packets sent | lost | lost inside windows | lost outside | lost after the last window |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    let _ = writeln!(o, "{}", loss_line("baseline (no fault)", &r.baseline));
    let _ = writeln!(o, "{}", loss_line("under faults", &r.soak));
    outside_rows(&mut o, r);
    let _ = writeln!(
        o,
        "\nAgents sampled once a second (a restarted agent starts a new row). Rule: the \
         last third's maximum RSS at most the maximum before it x 1.1 + 4 MiB, fds at most \
         +{}; rows with fewer than 6 samples are not judged.\n",
        checks::FD_MARGIN
    );
    agent_rows(&mut o, &r.agents);
    let _ = writeln!(o, "\n| check | verdict | detail |\n|---|---|---|");
    for c in &r.checks {
        let _ = writeln!(
            o,
            "| {} | {} | {} |",
            c.name,
            if c.ok { "pass" } else { "FAIL" },
            c.detail.replace('|', "/")
        );
    }
    o
}
