//! P4Runtime write throughput against BMv2: fare's Rust client (tonic/prost) and the PyPI
//! `p4runtime` Python bindings write the same entities, in the same batch sizes, in the
//! same run, alternating rounds. Needs root, `simple_switch_grpc` and the p4runtime venv
//! (scripts/setup); prints SKIPPED otherwise.
//!
//!   cargo run --release -p fare-integration --bin p4rt-bench -- [ROUTES] [GROUPS] [BATCH] [ROUNDS]
//!
//! `agent [N] [ROUNDS]`: the agent's own install path instead of raw Writes: N routes, each
//! with a 4-member WCMP group, handed to the agent's data plane task (`DataplaneHandle::
//! install`, where the BGP side hands over its groups) all at once (batched) or one after
//! the other, until the switch answered; then the same N groups changed make-before-break.
//! Baseline in the same run: the Python bindings doing the same writes
//! (`tests/p4/install_writer.py`).

use anyhow::{Context, Result};
use fare::bench::results;
use fare::dataplane::MacAddr;
use fare::dp_p4::program::FareProgram;
use fare::dp_p4::{P4RuntimeDataplane, P4RuntimeOptions};
use fare::p4runtime::client::Client;
use fare::p4runtime::entities::{entity_table, update, GroupMember};
use fare::p4runtime::p4info::P4Info;
use fare::p4runtime::proto::p4::v1 as p4;
use fare_integration::p4::{
    bmv2_available, have_p4runtime_python, in_netns, members, p4runtime_venv, pipeline, Fabric,
    GRPC_ADDR,
};
use fare_integration::{repo_root, run};
use std::net::Ipv4Addr;
use std::time::Instant;

#[derive(Clone, Copy, Debug, Default)]
struct Rates {
    routes: f64,
    delete: f64,
    members_groups: f64,
}

async fn timed(client: &mut Client, updates: Vec<p4::Update>, batch: usize) -> Result<f64> {
    let n = updates.len();
    let mut chunks = Vec::new();
    let mut it = updates.into_iter().peekable();
    while it.peek().is_some() {
        chunks.push(it.by_ref().take(batch).collect::<Vec<_>>());
    }
    let start = Instant::now();
    for chunk in chunks {
        client.write(chunk).await?;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

async fn rust_round(
    routes: u32,
    groups: u32,
    batch: usize,
    base: u32,
    push: bool,
) -> Result<Rates> {
    let (p4info_path, json) = pipeline();
    let info = P4Info::load(&p4info_path)?;
    let prog = FareProgram::resolve(&info)?;
    let mut client = Client::connect(GRPC_ADDR, 1, 10 + u64::from(base)).await?;
    if push {
        client.set_pipeline(&info, std::fs::read(&json)?, 1).await?;
    }
    let route = |kind, i: u32| -> Result<p4::Update> {
        let mut e = prog.route(
            ipnet::IpNet::new(Ipv4Addr::from((11u32 << 24) | i).into(), 32)?,
            (1 + i % 1000) as u16,
            true,
            0,
        )?;
        if kind == p4::update::Type::Delete {
            e.action = None;
        }
        Ok(update(kind, entity_table(e)))
    };
    let inserts = (0..routes)
        .map(|i| route(p4::update::Type::Insert, i))
        .collect::<Result<Vec<_>>>()?;
    let deletes = (0..routes)
        .map(|i| route(p4::update::Type::Delete, i))
        .collect::<Result<Vec<_>>>()?;
    let r_ins = timed(&mut client, inserts, batch).await?;
    let r_del = timed(&mut client, deletes, batch).await?;
    let mut updates = Vec::new();
    for g in 0..groups {
        let mut members = Vec::new();
        for (j, w) in [3, 3, 4, 4].into_iter().enumerate() {
            let id = base + g * 4 + j as u32;
            let m = prog.member(
                id,
                j as u32 + 1,
                MacAddr([2, 0, 0, 0, 0, j as u8 + 1]),
                MacAddr([2, 0xfa, 0, 0, 0, 0xfe]),
                0,
                1,
            )?;
            updates.push(update(
                p4::update::Type::Insert,
                p4::Entity {
                    entity: Some(p4::entity::Entity::ActionProfileMember(m)),
                },
            ));
            members.push(GroupMember {
                member_id: id,
                weight: w,
                watch_port: None,
            });
        }
        let pg = prog.profile_group(base + g, &members, prog.set_nexthop.port.bits)?;
        updates.push(update(
            p4::update::Type::Insert,
            p4::Entity {
                entity: Some(p4::entity::Entity::ActionProfileGroup(pg)),
            },
        ));
    }
    let r_groups = timed(&mut client, updates, batch).await?;
    Ok(Rates {
        routes: r_ins,
        delete: r_del,
        members_groups: r_groups,
    })
}

/// Runs one of the Python p4runtime writers of tests/p4 in the switch namespace against
/// device 1, `election`; its JSON answer.
fn python_writer(
    sw: &str,
    script: &str,
    election: &str,
    args: &[String],
) -> Result<serde_json::Value> {
    let (p4info, _) = pipeline();
    let py = p4runtime_venv().join("bin/python3");
    let script = repo_root().join("tests/p4").join(script);
    let (py, script, p4info) = (
        py.to_string_lossy(),
        script.to_string_lossy(),
        p4info.to_string_lossy(),
    );
    let mut argv = vec![
        "netns", "exec", sw, &py, &script, GRPC_ADDR, "1", election, &p4info,
    ];
    argv.extend(args.iter().map(String::as_str));
    let out = run("ip", &argv)?;
    serde_json::from_slice(&out.stdout).context("python output")
}

fn python_round(sw: &str, routes: u32, groups: u32, batch: usize, base: u32) -> Result<Rates> {
    let election = (20 + base).to_string();
    let v = python_writer(
        sw,
        "bench_writer.py",
        &election,
        &[routes, groups, batch as u32, base].map(|n| n.to_string()),
    )?;
    let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
    Ok(Rates {
        routes: f("routes_per_s"),
        delete: f("delete_per_s"),
        members_groups: f("members_groups_per_s"),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Install and change rates (routes or groups per second) of one agent round.
#[derive(Clone, Copy, Debug, Default)]
struct Install {
    install: f64,
    change: f64,
}

fn agent_group(i: u32, weights: [u32; 4]) -> Result<fare::dataplane::Group> {
    Ok(fare::dataplane::Group {
        prefix: ipnet::IpNet::new(Ipv4Addr::from((12u32 << 24) | (i << 8)).into(), 24)?,
        mode: fare::dataplane::GroupMode::Spray,
        members: members(&weights, |_| 100.0),
    })
}

/// N installs then N changes through the agent's data plane task: all handed over at
/// once (`batched`), or each awaited before the next.
async fn agent_round(n: u32, batched: bool, opts: P4RuntimeOptions) -> Result<Install> {
    let dp = P4RuntimeDataplane::connect(opts).await?;
    let prog = dp.program().clone();
    let (handle, task) = fare::agent::dataplane_task::spawn(Box::new(dp));
    let first: Vec<_> = (0..n)
        .map(|i| agent_group(i, [3, 3, 4, 4]))
        .collect::<Result<_>>()?;
    let second: Vec<_> = (0..n)
        .map(|i| agent_group(i, [4, 4, 3, 3]))
        .collect::<Result<_>>()?;
    let mut rates = [0.0; 2];
    for (k, groups) in [first.clone(), second].into_iter().enumerate() {
        let start = Instant::now();
        if batched {
            let results =
                futures::future::join_all(groups.into_iter().map(|g| handle.install(g))).await;
            for r in results {
                r?;
            }
        } else {
            for g in groups {
                handle.install(g).await?;
            }
        }
        rates[k] = f64::from(n) / start.elapsed().as_secs_f64();
        // What was timed is on the switch: its route table and profile groups, read by a
        // second (backup) session.
        let (routes, groups) = switch_counts(&prog).await?;
        anyhow::ensure!(
            routes == n as usize && groups == n as usize,
            "after {} {n} groups the switch has {routes} routes and {groups} profile groups",
            if k == 0 { "installing" } else { "changing" }
        );
    }
    let removed = futures::future::join_all(first.iter().map(|g| handle.remove(g.prefix))).await;
    for r in removed {
        r?;
    }
    drop(handle);
    drop(task.await?);
    Ok(Install {
        install: rates[0],
        change: rates[1],
    })
}

/// Route entries and profile groups on the switch, read by a backup session.
async fn switch_counts(prog: &FareProgram) -> Result<(usize, usize)> {
    let mut reader = Client::open(GRPC_ADDR, 1, 5, std::time::Duration::from_secs(5)).await?;
    let entities = reader
        .read(vec![
            entity_table(p4::TableEntry {
                table_id: prog.route_v4.table,
                ..Default::default()
            }),
            p4::Entity {
                entity: Some(p4::entity::Entity::ActionProfileGroup(
                    p4::ActionProfileGroup {
                        action_profile_id: prog.selector,
                        ..Default::default()
                    },
                )),
            },
        ])
        .await?;
    let routes = entities
        .iter()
        .filter(|e| matches!(e.entity, Some(p4::entity::Entity::TableEntry(_))))
        .count();
    Ok((routes, entities.len() - routes))
}

fn python_install_round(sw: &str, n: u32) -> Result<Install> {
    let v = python_writer(
        sw,
        "install_writer.py",
        "20",
        &[n.to_string(), "500".into()],
    )?;
    Ok(Install {
        install: v["install_per_s"].as_f64().unwrap_or(0.0),
        change: v["change_per_s"].as_f64().unwrap_or(0.0),
    })
}

fn agent_bench(args: &[u32]) -> Result<()> {
    let n = args.first().copied().unwrap_or(500);
    let rounds = args.get(1).copied().unwrap_or(3);
    anyhow::ensure!(
        (1..=1000).contains(&n),
        "N must be 1..1000 (fare.p4's group table has 1024 entries)"
    );
    let fabric = Fabric::new("p4i", 4)?;
    let sw = fabric.bmv2.sw.name.clone();
    let (mut batched, mut single, mut python) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        for mode in [true, false] {
            let opts = P4RuntimeOptions {
                router_mac: fare::dp_p4::fare::DEFAULT_ROUTER_MAC,
                ..fabric.options(10)
            };
            let r = in_netns(&sw, move || async move { agent_round(n, mode, opts).await })?;
            if mode {
                batched.push(r);
            } else {
                single.push(r);
            }
        }
        python.push(python_install_round(&sw, n)?);
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut md = String::new();
    md.push_str(
        "## P4Runtime: the agent's install path (fare vs the Python `p4runtime` bindings)\n\n",
    );
    md.push_str(&format!(
        "What: {n} routes, each with its own 4-member WCMP group (3:3:4:4), handed to the \
         agent's data plane task (`DataplaneHandle::install`, where the BGP side hands over \
         the groups it computed) until the switch (BMv2 `simple_switch_grpc`, fare.p4) \
         answered; then the same {n} groups changed make-before-break (4:4:3:3). fare: all \
         {n} queued at once (the task batches them: one Write per phase, at most 500 \
         updates each) and, for comparison, each awaited before the next (a batch of one). \
         Baseline in the same run: the PyPI `p4runtime` bindings doing the same writes in \
         the same order and batch size (`tests/p4/install_writer.py`), request building \
         timed too. Not included: BGP UPDATE parsing and the WCMP computation (see the `bgp` \
         section for those). Medians of {rounds} rounds, alternating.\n\n"
    ));
    md.push_str(&format!(
        "Command (root; BMv2 on PATH; `scripts/setup` for the Python venv):\n\n    \
         cargo run --release -p fare-integration --bin p4rt-bench -- agent {n} {rounds}\n\n\
         Result (load average at the end: {}):\n\n",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    ));
    md.push_str("| what | fare agent, queued together | fare agent, one at a time | Python p4runtime, same writes | queued / Python |\n");
    md.push_str("|---|---|---|---|---|\n");
    let mut row = |what: &str, f: fn(&Install) -> f64| {
        let b = median(batched.iter().map(f).collect());
        let s = median(single.iter().map(f).collect());
        let p = median(python.iter().map(f).collect());
        md.push_str(&format!(
            "| {what} | {b:.0}/s | {s:.0}/s | {p:.0}/s | {:.2}x |\n",
            b / p
        ));
    };
    row("new routes (route + group)", |r| r.install);
    row("group changes (make-before-break)", |r| r.change);
    println!("{md}");
    let path = repo_root().join("bench/RESULTS.md");
    results::write_section(&path, "p4rt-agent", &md)?;
    eprintln!("wrote section `p4rt-agent` of {}", path.display());
    Ok(())
}

fn main() -> Result<()> {
    let test = "p4rt-bench";
    if !bmv2_available(test) || !have_p4runtime_python(test) {
        return Ok(());
    }
    if std::env::args().nth(1).as_deref() == Some("agent") {
        let args: Vec<u32> = std::env::args()
            .skip(2)
            .filter_map(|a| a.parse().ok())
            .collect();
        return agent_bench(&args);
    }
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let routes = args.first().copied().unwrap_or(2000);
    let groups = args.get(1).copied().unwrap_or(250);
    let batch = args.get(2).copied().unwrap_or(100) as usize;
    let rounds = args.get(3).copied().unwrap_or(3);
    let fabric = Fabric::new("p4b", 4)?;
    let sw = fabric.bmv2.sw.name.clone();
    let (mut rust, mut python) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let base = 1 + round * 20_000;
        let sw2 = sw.clone();
        rust.push(in_netns(&sw2, move || async move {
            rust_round(routes, groups, batch, base, round == 0).await
        })?);
        python.push(python_round(&sw, routes, groups, batch, base + 10_000)?);
    }
    println!("P4Runtime writes to BMv2 simple_switch_grpc: {routes} routes, {groups} groups x 4 members, batch {batch}, {rounds} rounds (median)");
    println!("| what | fare (Rust, tonic) | Python p4runtime | ratio |");
    println!("|---|---|---|---|");
    let row = |what: &str, f: fn(&Rates) -> f64| {
        let r = median(rust.iter().map(f).collect());
        let p = median(python.iter().map(f).collect());
        println!("| {what} | {r:.0}/s | {p:.0}/s | {:.2}x |", r / p);
    };
    row("route inserts", |r| r.routes);
    row("route deletes", |r| r.delete);
    row("members + groups inserts", |r| r.members_groups);
    Ok(())
}
