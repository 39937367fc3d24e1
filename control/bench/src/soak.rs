//! `fare bench soak`: every session, every time (root). Repeated `lab up` of a topology
//! (draft Figure 1 by default) while busy-loop processes keep the CPUs loaded, counting
//! the sessions not Established within a bound; then link flaps on one lab, with and
//! without the CPU load, timing each recovery.
//!
//! - Lab ups: each waits (as `fare lab up` does) until every agent's groups equal the
//!   ideal ones, at most `--bound` seconds after the agents started (or one check once
//!   every agent answers, if they answer later); then every agent's neighbors are read
//!   through its management socket. A session is stuck when either end does not show it
//!   Established.
//! - Flaps: `fare lab fail LINK` (down on both ends, waits for the failed state), then
//!   `fare lab restore LINK`. Recovery = from just before the link goes up until the
//!   later of the two ends' "session established" and the last "group installed" of
//!   any agent, read from the agents' log timestamps (same clock), once `restore` has
//!   seen every agent's groups equal the ideal ones (polled through the management
//!   sockets, at most 30 s). A flap not converged in that time counts as not recovered.

use super::command_line;
use super::lab_bench::{load_average, quantile, BenchLab};
use anyhow::{bail, Context};
use fare_lab::events::{self, Event};
use fare_lab::plan::{self, DataplaneKind, Routing};
use fare_lab::state::{self, StateDir};
use fare_lab::{agents, faults, up};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// `lab up` runs with the CPU hogs running.
    #[arg(long, default_value_t = 50)]
    ups: usize,
    /// Link flaps with the CPU hogs running.
    #[arg(long, default_value_t = 200)]
    flaps: usize,
    /// Link flaps without CPU hogs, on the same lab before the others (baseline).
    #[arg(long, default_value_t = 50)]
    baseline_flaps: usize,
    /// Busy-loop processes started (and killed) by the benchmark.
    #[arg(long, default_value_t = 2)]
    hogs: usize,
    /// Seconds after the agents start within which every session must be Established.
    #[arg(long, default_value_t = 60.0)]
    bound: f64,
    /// The link that flaps (`A-B` or a link name).
    #[arg(long, default_value = "S1-L3")]
    link: String,
    /// Topology the soak runs on.
    #[arg(long, default_value = "topologies/draft-fig1.yaml")]
    topology: PathBuf,
    /// The agents' data plane.
    #[arg(long, value_enum, default_value_t = DataplaneKind::Xdp)]
    dataplane: DataplaneKind,
}

/// Busy-loop child processes, killed when dropped.
struct Hogs(Vec<Child>);

impl Hogs {
    fn start(n: usize) -> anyhow::Result<Hogs> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .context("starting a CPU hog (sh)")?,
            );
        }
        Ok(Hogs(v))
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One `lab up`: seconds from the agents' start to the ideal groups (None: not within
/// the bound) and the sessions (`A-B`) not Established at the end.
struct UpRun {
    sessions: usize,
    converged_s: Option<f64>,
    stuck: Vec<String>,
}

fn lab_up(args: &Args, name: &str) -> anyhow::Result<(BenchLab, UpRun)> {
    let topology = fare_model::topology::load(&args.topology)
        .map_err(|e| anyhow::anyhow!("{e} (run from the repository root)"))?;
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
        converge_timeout: Duration::from_secs_f64(args.bound),
        fare: up::fare_binary(),
        progress: false,
    };
    let (lab, report) = BenchLab::start(&req)?;
    let dir = &lab.dir;
    let st = dir.load()?;
    // The agents publish session states every 0.5 s: give a converged lab that long.
    let deadline = Instant::now() + Duration::from_secs(2);
    let stuck = loop {
        let stuck = not_established(dir, &st);
        if stuck.is_empty() || report.converged_s.is_none() || Instant::now() > deadline {
            break stuck;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    Ok((
        lab,
        UpRun {
            sessions: report.sessions,
            converged_s: report.converged_s,
            stuck,
        },
    ))
}

/// Sessions (`A-B`, names sorted) that either end does not show Established.
pub(crate) fn not_established(dir: &StateDir, st: &state::LabState) -> Vec<String> {
    let mut out = BTreeSet::new();
    for node in &st.plan.nodes {
        let neighbors = agents::show_json(dir, &node.name, agents::Show::Neighbors);
        for port in &node.ports {
            let up = neighbors
                .as_ref()
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .any(|n| {
                    n["address"].as_str() == Some(&port.peer_addr.to_string())
                        && n["state"].as_str() == Some("Established")
                });
            if !up {
                let mut pair = [node.name.clone(), port.peer.clone()];
                pair.sort();
                out.insert(pair.join("-"));
            }
        }
    }
    out.into_iter().collect()
}

/// Times (unix s) of an agent's typed events in [from, to] that `want` takes.
fn logged(
    dir: &StateDir,
    node: &str,
    from: f64,
    to: f64,
    want: impl Fn(&Event) -> bool,
) -> Vec<f64> {
    events::of_node(dir, node, from)
        .into_iter()
        .filter(|e| e.at <= to && want(&e.event))
        .map(|e| e.at)
        .collect()
}

/// One flap's times, seconds from link up.
struct Flap {
    /// Later of the two ends' "session established".
    session_s: Option<f64>,
    /// Session up and every group back (None: not converged within 30 s).
    recovery_s: Option<f64>,
}

fn flap(name: &str, link: &str) -> anyhow::Result<Flap> {
    let dir = StateDir::new(name);
    let st = dir.load()?;
    let (a, b, links) = faults::resolve(&st.plan, link)?;
    let link_plan = links.first().context("no link")?;
    let (na, nb) = (
        st.plan.node(&a).context("no node")?,
        st.plan.node(&b).context("no node")?,
    );
    let addr_of = |n: &plan::NodePlan| {
        n.ports
            .iter()
            .find(|p| p.link == link_plan.name)
            .map(|p| std::net::IpAddr::from(p.addr))
    };
    // Each end logs the session with the other end's address as `peer`.
    let ends = [
        (a.clone(), addr_of(nb).context("no address")?),
        (b.clone(), addr_of(na).context("no address")?),
    ];
    let failed = faults::fail(Some(name), link, 30.0)?;
    if failed.convergence_s.is_none() {
        eprintln!("soak: the failure of {link} did not converge in 30 s");
    }
    let t_up = state::now();
    let restored = faults::restore(Some(name), link, 30.0)?;
    let t_end = state::now();
    let session_s = ends
        .iter()
        .map(|(node, peer)| {
            logged(
                &dir,
                node,
                t_up,
                t_end,
                |e| matches!(e, Event::SessionUp { peer: p } if p == peer),
            )
            .first()
            .map(|t| t - t_up)
        })
        .collect::<Option<Vec<f64>>>()
        .and_then(|v| v.into_iter().reduce(f64::max));
    let recovery_s = match (restored.convergence_s, session_s) {
        (Some(_), Some(s)) => {
            let last_group = st
                .plan
                .nodes
                .iter()
                .flat_map(|n| {
                    logged(&dir, &n.name, t_up, t_end, |e| {
                        matches!(e, Event::GroupInstalled { .. })
                    })
                })
                .map(|t| t - t_up)
                .reduce(f64::max)
                .unwrap_or(0.0);
            Some(s.max(last_group))
        }
        _ => None,
    };
    Ok(Flap {
        session_s,
        recovery_s,
    })
}

/// Recovery times over a series of flaps: one table row.
fn flap_row(label: &str, flaps: &[Flap]) -> String {
    let rec: Vec<f64> = flaps.iter().filter_map(|f| f.recovery_s).collect();
    let ses: Vec<f64> = flaps.iter().filter_map(|f| f.session_s).collect();
    let ms = |v: &[f64], q: f64| format!("{:.0}", quantile(v, q) * 1000.0);
    let over = rec.iter().filter(|t| **t > 1.0).count();
    format!(
        "| {label} | {} | {} | {} / {} / {} | {} / {} / {} | {over} |",
        flaps.len(),
        flaps.len() - rec.len(),
        ms(&ses, 0.5),
        ms(&ses, 0.99),
        ms(&ses, 1.0),
        ms(&rec, 0.5),
        ms(&rec, 0.99),
        ms(&rec, 1.0),
    )
}

pub fn run_bench(args: Args) -> anyhow::Result<String> {
    if !fare_lab::sys::have("tc") {
        bail!("fare bench soak needs tc (and root: it builds namespace labs)");
    }
    if args.ups == 0 {
        bail!("--ups must be at least 1 (the flaps run on the last lab)");
    }
    let name = format!("soak{}", std::process::id() % 10_000);
    let load_start = load_average();
    let started = Instant::now();

    let mut ups = Vec::new();
    let mut lab = None;
    {
        let _hogs = Hogs::start(args.hogs)?;
        for i in 0..args.ups {
            // The previous lab goes down first (names are reused).
            drop(lab.take());
            let (l, run) = lab_up(&args, &name)?;
            eprintln!(
                "soak: lab up {}/{}: converged {}, stuck sessions {:?}",
                i + 1,
                args.ups,
                run.converged_s
                    .map(|s| format!("{s:.2} s"))
                    .unwrap_or_else(|| "no".into()),
                run.stuck
            );
            ups.push(run);
            lab = Some(l);
        }
    }
    // `n` flaps of the link, each logged as `what` (with its number) and its recovery.
    let flaps = |n: usize, what: &dyn Fn(usize) -> String| -> anyhow::Result<Vec<Flap>> {
        (0..n)
            .map(|i| {
                let f = flap(&name, &args.link)?;
                eprintln!("soak: {}: {:?} s", what(i + 1), f.recovery_s);
                Ok(f)
            })
            .collect()
    };
    let baseline = flaps(args.baseline_flaps, &|i| {
        format!("baseline flap {i}/{}", args.baseline_flaps)
    })?;
    let loaded = {
        let _hogs = Hogs::start(args.hogs)?;
        flaps(args.flaps, &|i| {
            format!("flap {i}/{} with {} hogs", args.flaps, args.hogs)
        })?
    };
    drop(lab);
    let load_end = load_average();

    let sessions_per_up = ups.first().map(|u| u.sessions).unwrap_or(0);
    let stuck: usize = ups.iter().map(|u| u.stuck.len()).sum();
    let stuck_list: Vec<String> = ups
        .iter()
        .enumerate()
        .flat_map(|(i, u)| u.stuck.iter().map(move |s| format!("{s} (run {})", i + 1)))
        .collect();
    let conv: Vec<f64> = ups.iter().filter_map(|u| u.converged_s).collect();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "## Every session, every time: lab up and link flap soak (`soak`)\n"
    );
    let _ = writeln!(o, "Command: `{}` (root)\n", command_line());
    let _ = writeln!(
        o,
        "{} (`{}`, {} data plane, debug build unless the command says otherwise), {} busy-loop \
         processes on the machine's {} CPUs during the lab ups and the loaded flaps. Load \
         average at start {load_start}, at end {load_end}; {:.0} s in all.\n",
        args.topology.display(),
        args.link,
        match args.dataplane {
            DataplaneKind::Xdp => "XDP",
            DataplaneKind::Kernel => "kernel",
            DataplaneKind::None => "no",
        },
        args.hogs,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        started.elapsed().as_secs_f64()
    );
    let _ = writeln!(
        o,
        "**Lab ups.** {} `lab up` runs x {sessions_per_up} sessions with {} CPU hogs: \
         **{stuck} sessions not Established** when `lab up` stopped waiting (target 0){}: \
         {:.0} s after the agents' start, or at the first check once every agent answers \
         on its management socket if that is later. {} of {} runs converged to the ideal \
         groups, from the agents' start median {:.2} s, p99 {:.2} s, max {:.2} s (the \
         time includes the agents' start-up: the XDP agents load their programs before \
         BGP starts).\n",
        ups.len(),
        args.hogs,
        if stuck_list.is_empty() {
            String::new()
        } else {
            format!(" ({})", stuck_list.join(", "))
        },
        args.bound,
        conv.len(),
        ups.len(),
        quantile(&conv, 0.5),
        quantile(&conv, 0.99),
        quantile(&conv, 1.0),
    );
    let _ = writeln!(
        o,
        "**Link flaps** of {}: `fare lab fail` then `fare lab restore` (both ends down/up). \
         Session = the later end's \"session established\"; recovery = session up and the \
         last \"group installed\" of any agent (agents' log timestamps, from just before \
         the link goes up; counted once `restore` saw every agent's groups ideal). Target: \
         recovery p99 under 1 s.\n",
        args.link
    );
    let _ = writeln!(
        o,
        "| CPU load | flaps | not recovered in 30 s | session up, ms: median / p99 / max | recovery, ms: median / p99 / max | recoveries over 1 s |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    if !baseline.is_empty() {
        let _ = writeln!(o, "{}", flap_row("none (baseline)", &baseline));
    }
    if !loaded.is_empty() {
        let _ = writeln!(
            o,
            "{}",
            flap_row(&format!("{} CPU hogs", args.hogs), &loaded)
        );
    }
    let b: Vec<f64> = baseline.iter().filter_map(|f| f.recovery_s).collect();
    let l: Vec<f64> = loaded.iter().filter_map(|f| f.recovery_s).collect();
    if !b.is_empty() && !l.is_empty() {
        let _ = writeln!(
            o,
            "\nLoaded / baseline recovery: median x{:.2}, p99 x{:.2}.",
            quantile(&l, 0.5) / quantile(&b, 0.5),
            quantile(&l, 0.99) / quantile(&b, 0.99)
        );
    }
    Ok(o)
}
