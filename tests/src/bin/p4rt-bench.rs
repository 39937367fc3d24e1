//! P4Runtime write throughput against BMv2: fare's Rust client (tonic/prost) and the PyPI
//! `p4runtime` Python bindings write the same entities, in the same batch sizes, in the
//! same run, alternating rounds. Needs root, `simple_switch_grpc` and the p4runtime venv
//! (scripts/setup); prints SKIPPED otherwise.
//!
//!   cargo run --release -p fare-integration --bin p4rt-bench -- [ROUTES] [GROUPS] [BATCH] [ROUNDS]

use anyhow::{Context, Result};
use fare::dataplane::p4rt::client::Client;
use fare::dataplane::p4rt::p4info::P4Info;
use fare::dataplane::p4rt::program::{entity_table, update, FareProgram, GroupMember};
use fare::dataplane::p4rt::proto::p4::v1 as p4;
use fare::dataplane::MacAddr;
use fare_integration::p4::{
    bmv2_available, have_p4runtime_python, in_netns, p4runtime_venv, pipeline, Fabric, GRPC_ADDR,
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

fn python_round(sw: &str, routes: u32, groups: u32, batch: usize, base: u32) -> Result<Rates> {
    let (p4info, _) = pipeline();
    let py = p4runtime_venv().join("bin/python3");
    let script = repo_root().join("tests/p4/bench_writer.py");
    let election = (20 + base).to_string();
    let out = run(
        "ip",
        &[
            "netns",
            "exec",
            sw,
            &py.to_string_lossy(),
            &script.to_string_lossy(),
            GRPC_ADDR,
            "1",
            &election,
            &p4info.to_string_lossy(),
            &routes.to_string(),
            &groups.to_string(),
            &batch.to_string(),
            &base.to_string(),
        ],
    )?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("python output")?;
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

fn main() -> Result<()> {
    let test = "p4rt-bench";
    if !bmv2_available(test) || !have_p4runtime_python(test) {
        return Ok(());
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
