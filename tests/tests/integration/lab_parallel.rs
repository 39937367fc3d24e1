//! Parallel links in a live lab (real agents in namespaces, BGP sessions per link): the
//! three `--parallel-links` settings on the XDP and kernel data planes, with one of two
//! parallel links degraded and then down.
//!
//! Fabric: Leaf2 reaches Spine1 over P1 (100G) and P2 (40G), Spine2 over P3 (100G); each
//! spine has one 100G link to Leaf1 (U1, U2), so each advertises 100 for Leaf1's prefix.
//! Expected by hand (draft-xu-idr-fare-05: per node min(aggregate of the parallel links,
//! advertised), split evenly or in proportion to the links; -04: per session
//! min(link, advertised)), Leaf2 toward Leaf1's prefix:
//!
//! | setting           | healthy        | P2 at 10G        | P2 down     |
//! |-------------------|----------------|------------------|-------------|
//! | node-even         | 50:50:100 1:1:2 | 50:50:100 1:1:2  | P1:1 P3:1  |
//! | node-proportional | 71.4:28.6:100 5:2:7 | 90.9:9.1:100 10:1:11 | P1:1 P3:1 |
//! | session           | 100:40:100 5:2:5 | 100:10:100 10:1:10 | P1:1 P3:1 |
//!
//! and Spine1 toward Leaf2's prefix (P1, P2 from one node): even 1:1, proportional and
//! session 5:2 (10:1 with P2 at 10G). Besides those, every agent's groups must equal
//! `fare weights --parallel-links` of the same fabric (written apart: the lab's own check
//! uses the model in-process).
//!
//! The degrade and the failure touch one link of the pair (the lab's `degrade` and `fail`
//! take every link of a node pair): `fare set bandwidth` on both ends' agents, and both
//! ends' interfaces set down.

use anyhow::{bail, ensure, Context, Result};
use fare_integration::lab::{fare, Lab};
use fare_integration::{have_root, have_tool};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TOPOLOGY: &str = "name: parallel-unequal
nodes:
  - {name: Leaf1, role: leaf, asn: 65001, router_id: 10.0.0.1, prefixes: [192.0.2.0/24]}
  - {name: Leaf2, role: leaf, asn: 65002, router_id: 10.0.0.2, prefixes: [198.51.100.0/24]}
  - {name: Spine1, role: spine, asn: 65100, router_id: 10.0.1.1}
  - {name: Spine2, role: spine, asn: 65100, router_id: 10.0.1.2}
links:
  - {a: Leaf1, b: Spine1, gbps: 100, name: U1}
  - {a: Leaf1, b: Spine2, gbps: 100, name: U2}
  - {a: Spine1, b: Leaf2, gbps: 100, name: P1}
  - {a: Spine1, b: Leaf2, gbps: 40, name: P2}
  - {a: Spine2, b: Leaf2, gbps: 100, name: P3}
";

const TO_LEAF1: &str = "192.0.2.0/24";
const TO_LEAF2: &str = "198.51.100.0/24";

/// node -> prefix -> link -> weight (reduced by the group's gcd).
type Groups = BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn reduce(m: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let g = m.values().fold(0, |a, &b| gcd(a, b)).max(1);
    m.into_iter().map(|(k, v)| (k, v / g)).collect()
}

fn want(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(l, w)| (l.to_string(), *w)).collect()
}

/// `fare weights FILE --parallel-links SETTING --json`: the model, by link.
fn model(file: &Path, setting: &str) -> Result<Groups> {
    let file = file.to_string_lossy();
    let out = fare(&["weights", &file, "--parallel-links", setting, "--json"])?;
    ensure!(
        out.status.success(),
        "fare weights: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout)?;
    let mut groups = Groups::new();
    for g in list.as_array().into_iter().flatten() {
        let (Some(node), Some(prefix)) = (g["node"].as_str(), g["prefix"].as_str()) else {
            continue;
        };
        let members: BTreeMap<String, u64> = g["members"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| Some((m["link"].as_str()?.to_string(), m["weight"].as_u64()?)))
            .collect();
        groups
            .entry(node.to_string())
            .or_default()
            .insert(prefix.to_string(), reduce(members));
    }
    Ok(groups)
}

/// The lab's state file.
fn state(lab: &str) -> Result<Value> {
    let path = format!("/run/fare/lab/{lab}/state.json");
    Ok(serde_json::from_str(
        &std::fs::read_to_string(&path).context(path)?,
    )?)
}

/// Per node: its namespace and, per port, (interface, link).
fn ports(state: &Value) -> BTreeMap<String, (String, Vec<(String, String)>)> {
    let mut out = BTreeMap::new();
    for n in state["plan"]["nodes"].as_array().into_iter().flatten() {
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let list = n["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| (s(&p["interface"]), s(&p["link"])))
            .collect();
        out.insert(s(&n["name"]), (s(&n["ns"]), list));
    }
    out
}

/// Every agent's groups (members that forward), by link.
fn live(lab: &str, state: &Value) -> Result<Groups> {
    let mut groups = Groups::new();
    for (node, (_, ports)) in ports(state) {
        let socket = format!("/run/fare/lab/{lab}/{node}.sock");
        let out = fare(&["show", "--socket", &socket, "groups", "--json"])?;
        ensure!(out.status.success(), "fare show groups on {node} failed");
        let list: Value = serde_json::from_slice(&out.stdout)?;
        for g in list.as_array().into_iter().flatten() {
            let Some(prefix) = g["prefix"].as_str() else {
                continue;
            };
            let mut members = BTreeMap::new();
            for m in g["members"].as_array().into_iter().flatten() {
                if m["active"] == Value::Bool(false) {
                    continue;
                }
                let i = m["interface"].as_str().unwrap_or("");
                let link = ports
                    .iter()
                    .find(|p| p.0 == i)
                    .map(|p| p.1.clone())
                    .unwrap_or_else(|| format!("?{i}"));
                *members.entry(link).or_insert(0) += m["weight"].as_u64().unwrap_or(0);
            }
            if !members.is_empty() {
                groups
                    .entry(node.clone())
                    .or_default()
                    .insert(prefix.to_string(), reduce(members));
            }
        }
    }
    Ok(groups)
}

/// Waits (at most 30 s) until every agent's groups equal the model's and the two
/// hand-computed groups hold.
fn wait(
    lab: &str,
    state: &Value,
    model: &Groups,
    leaf2: &BTreeMap<String, u64>,
    spine1: &BTreeMap<String, u64>,
    step: &str,
) -> Result<()> {
    let get =
        |g: &Groups, node: &str, prefix: &str| g.get(node).and_then(|p| p.get(prefix)).cloned();
    ensure!(
        get(model, "Leaf2", TO_LEAF1).as_ref() == Some(leaf2),
        "{step}: the model's Leaf2 group is {:?}, by hand {leaf2:?}",
        get(model, "Leaf2", TO_LEAF1)
    );
    ensure!(
        get(model, "Spine1", TO_LEAF2).as_ref() == Some(spine1),
        "{step}: the model's Spine1 group is {:?}, by hand {spine1:?}",
        get(model, "Spine1", TO_LEAF2)
    );
    let start = Instant::now();
    loop {
        let have = live(lab, state)?;
        if &have == model {
            eprintln!(
                "  {step}: live = model after {:.2} s",
                start.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!("{step}: live {have:?}\nmodel {model:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The fabric with P2 changed (`None`: removed), written for `fare weights`.
fn variant(dir: &Path, name: &str, p2: Option<f64>) -> Result<PathBuf> {
    let line = "  - {a: Spine1, b: Leaf2, gbps: 40, name: P2}\n";
    let text = match p2 {
        Some(g) => TOPOLOGY.replace(
            line,
            &format!("  - {{a: Spine1, b: Leaf2, gbps: {g}, name: P2}}\n"),
        ),
        None => TOPOLOGY.replace(line, ""),
    };
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path)
}

/// (healthy, P2 at 10G) hand-computed groups of Leaf2 toward Leaf1 and of Spine1 toward
/// Leaf2, per setting (module comment).
type Expected = [(
    &'static [(&'static str, u64)],
    &'static [(&'static str, u64)],
); 2];

fn expected(setting: &str) -> Expected {
    match setting {
        "node-even" => [
            (&[("P1", 1), ("P2", 1), ("P3", 2)], &[("P1", 1), ("P2", 1)]),
            (&[("P1", 1), ("P2", 1), ("P3", 2)], &[("P1", 1), ("P2", 1)]),
        ],
        "node-proportional" => [
            (&[("P1", 5), ("P2", 2), ("P3", 7)], &[("P1", 5), ("P2", 2)]),
            (
                &[("P1", 10), ("P2", 1), ("P3", 11)],
                &[("P1", 10), ("P2", 1)],
            ),
        ],
        _ => [
            (&[("P1", 5), ("P2", 2), ("P3", 5)], &[("P1", 5), ("P2", 2)]),
            (
                &[("P1", 10), ("P2", 1), ("P3", 10)],
                &[("P1", 10), ("P2", 1)],
            ),
        ],
    }
}

/// One lab: up with `setting` on `dataplane`, healthy, P2 at 10G, P2 back, P2 down.
fn run_one(dir: &Path, setting: &str, dataplane: &str) -> Result<()> {
    let file = dir.join("parallel-unequal.yaml");
    std::fs::write(&file, TOPOLOGY)?;
    let degraded = variant(dir, "p2-at-10.yaml", Some(10.0))?;
    let down = variant(dir, "p2-down.yaml", None)?;
    let short = match setting {
        "node-even" => "e",
        "node-proportional" => "p",
        _ => "s",
    };
    let tag = format!("pl{short}{}", &dataplane[..1]);
    let args = [
        "--parallel-links",
        setting,
        "--dataplane",
        dataplane,
        "--no-arn",
        "--converge-timeout",
        "60",
    ];
    let (lab, up) = Lab::start(&file.to_string_lossy(), &tag, &args)?;
    let st = state(&lab.name)?;
    ensure!(
        st["plan"]["options"]["parallel_links"] == setting,
        "lab state: {}",
        st["plan"]["options"]["parallel_links"]
    );
    drop(up);
    let [healthy, at10] = expected(setting);
    let step = |s: &str| format!("{setting} on {dataplane}: {s}");
    wait(
        &lab.name,
        &st,
        &model(&file, setting)?,
        &want(healthy.0),
        &want(healthy.1),
        &step("healthy"),
    )?;

    let nodes = ports(&st);
    let port = |node: &str| -> Result<(String, String)> {
        let (ns, list) = nodes.get(node).context("node not in the plan")?;
        let ifname = list
            .iter()
            .find(|p| p.1 == "P2")
            .map(|p| p.0.clone())
            .context("no port on P2")?;
        Ok((ns.clone(), ifname))
    };
    let set_bandwidth = |gbps: &str| -> Result<()> {
        for node in ["Spine1", "Leaf2"] {
            let (_, ifname) = port(node)?;
            let socket = format!("/run/fare/lab/{}/{node}.sock", lab.name);
            let out = fare(&[
                "set",
                "bandwidth",
                "--socket",
                &socket,
                "--interface",
                &ifname,
                gbps,
            ])?;
            ensure!(
                out.status.success(),
                "fare set bandwidth on {node}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    };
    set_bandwidth("10")?;
    wait(
        &lab.name,
        &st,
        &model(&degraded, setting)?,
        &want(at10.0),
        &want(at10.1),
        &step("P2 at 10G"),
    )?;
    set_bandwidth("40")?;
    wait(
        &lab.name,
        &st,
        &model(&file, setting)?,
        &want(healthy.0),
        &want(healthy.1),
        &step("P2 back at 40G"),
    )?;

    for node in ["Spine1", "Leaf2"] {
        let (ns, ifname) = port(node)?;
        let out = std::process::Command::new("ip")
            .args(["-n", &ns, "link", "set", &ifname, "down"])
            .output()?;
        ensure!(out.status.success(), "ip link set down on {node}");
    }
    let one = [("P1", 1), ("P3", 1)];
    wait(
        &lab.name,
        &st,
        &model(&down, setting)?,
        &want(&one),
        &want(&[("P1", 1)]),
        &step("P2 down"),
    )?;
    lab.down()
}

#[test]
fn lab_parallel_links_per_node_and_per_session() -> Result<()> {
    let test = "lab_parallel_links_per_node_and_per_session";
    if !have_root(test) || !have_tool(test, "tc") {
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("fare-lab-parallel-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut failed = Vec::new();
    for dataplane in ["xdp", "kernel"] {
        for setting in ["node-even", "node-proportional", "session"] {
            if let Err(e) = run_one(&dir, setting, dataplane) {
                eprintln!("{setting} on {dataplane}: {e:#}");
                failed.push(format!("{setting} on {dataplane}: {e:#}"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    ensure!(failed.is_empty(), "{}", failed.join("\n"));
    Ok(())
}
