//! The agents' metrics judged by Prometheus' own tools, on the white paper's asymmetric
//! fabric in averaged mode (topologies/whitepaper-asymmetric.yaml, the smallest lab with a
//! weighted group):
//!
//! - every agent gets a metrics listener (its configuration edited, `fare lab restart`) on
//!   a veth from a monitoring namespace this test creates;
//! - `promtool check metrics` passes on each live agent's /metrics (Prometheus text
//!   format), whose BGP sessions are all Established;
//! - a real Prometheus server (own temp dir, a free port in the monitoring namespace,
//!   scrape interval 1 s) scrapes the four agents (OpenMetrics): every target is up, and
//!   a query for `fare_group_member_weight` of Leaf2's group 192.0.2.0/24 returns every
//!   member with the weight Leaf2 shows (ListGroups) and the model's 3:3:4:4 (white paper
//!   §2.2.1: Spine1 advertises (50+100)/2 = 75 on each of its two links to Leaf2, Spine2
//!   200/2 = 100);
//! - every Established session has an established timestamp between the lab's start and
//!   now, and the server's metadata API gives the units the `# UNIT` lines declare.

use anyhow::{bail, ensure, Context, Result};
use fare_integration::agent::TempDir;
use fare_integration::lab::Lab;
use fare_integration::{have_root, have_tool, run, Netns};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PREFIX: &str = "192.0.2.0/24";
const NODES: [&str; 4] = ["Leaf1", "Leaf2", "Spine1", "Spine2"];
const METRICS_PORT: u16 = 9108;

/// The Prometheus server; killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn lab_state(lab: &str) -> Result<Value> {
    let path = format!("/run/fare/lab/{lab}/state.json");
    Ok(serde_json::from_str(
        &std::fs::read_to_string(&path).context(path)?,
    )?)
}

/// Node name -> its namespace.
fn namespaces(state: &Value) -> BTreeMap<String, String> {
    state["plan"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| Some((n["name"].as_str()?.into(), n["ns"].as_str()?.into())))
        .collect()
}

/// Leaf2's interface -> the node across it.
fn leaf2_peers(state: &Value) -> BTreeMap<String, String> {
    let nodes = state["plan"]["nodes"].as_array().into_iter().flatten();
    nodes
        .filter(|n| n["name"] == "Leaf2")
        .flat_map(|n| n["ports"].as_array().into_iter().flatten())
        .filter_map(|p| Some((p["interface"].as_str()?.into(), p["peer"].as_str()?.into())))
        .collect()
}

/// The address node `i`'s agent serves metrics on (its end of the veth from `mon`).
fn metrics_addr(i: usize) -> String {
    format!("169.254.{}.2", 100 + i)
}

/// A veth from the monitoring namespace into the lab node's namespace, addressed; the
/// lab's namespace is not ours to delete, and the veth goes with either namespace.
fn connect(mon: &Netns, node_ns: &str, i: usize) -> Result<()> {
    let (mon_if, node_if) = (format!("m{i}"), "fare-metrics");
    run(
        "ip",
        &[
            "link", "add", &mon_if, "netns", &mon.name, "type", "veth", "peer", "name", node_if,
            "netns", node_ns,
        ],
    )?;
    let net = 100 + i;
    mon.exec(
        "ip",
        &[
            "addr",
            "add",
            &format!("169.254.{net}.1/30"),
            "dev",
            &mon_if,
        ],
    )?;
    mon.exec("ip", &["link", "set", &mon_if, "up"])?;
    let addr = format!("{}/30", metrics_addr(i));
    run("ip", &["-n", node_ns, "addr", "add", &addr, "dev", node_if])?;
    run("ip", &["-n", node_ns, "link", "set", node_if, "up"])?;
    Ok(())
}

/// Gives the node's agent a metrics listener (its configuration, through the agent's own
/// type) and restarts it with `fare lab restart`.
fn enable_metrics(lab: &Lab, node: &str, i: usize) -> Result<()> {
    let path = format!("/run/fare/lab/{}/agents/{node}.yaml", lab.name);
    let mut config = fare::agent::config::AgentConfig::load(std::path::Path::new(&path))?;
    config.management.metrics = Some(format!("{}:{METRICS_PORT}", metrics_addr(i)).parse()?);
    std::fs::write(&path, serde_norway::to_string(&config)?)?;
    lab.json("restart", &[node, "--timeout", "30"])?;
    Ok(())
}

/// `curl -sf URL` inside `mon`: the body.
fn get(mon: &Netns, url: &str) -> Result<String> {
    let out = mon.exec("curl", &["-sf", "--max-time", "5", url])?;
    Ok(String::from_utf8(out.stdout)?)
}

/// Leaf2's group for PREFIX as ListGroups gives it: interface -> weight.
fn leaf2_group(lab: &Lab) -> Result<BTreeMap<String, u64>> {
    let groups = lab.show("Leaf2", "groups")?;
    Ok(groups
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["prefix"] == PREFIX)
        .flat_map(|g| g["members"].as_array().into_iter().flatten())
        .filter_map(|m| Some((m["interface"].as_str()?.into(), m["weight"].as_u64()?)))
        .collect())
}

/// Weights over far nodes, divided by their gcd and sorted.
fn ratios(group: &BTreeMap<String, u64>, peers: &BTreeMap<String, String>) -> Vec<(String, u64)> {
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let g = group.values().fold(0, |a, w| gcd(a, *w)).max(1);
    let mut out: Vec<(String, u64)> = group
        .iter()
        .map(|(i, w)| (peers.get(i).cloned().unwrap_or_else(|| i.clone()), w / g))
        .collect();
    out.sort();
    out
}

fn model() -> Vec<(String, u64)> {
    [("Spine1", 3), ("Spine1", 3), ("Spine2", 4), ("Spine2", 4)]
        .map(|(n, w)| (n.to_string(), w))
        .to_vec()
}

/// Polls (at most `secs`) until `check` gives Some.
fn poll<T>(secs: u64, what: &str, mut check: impl FnMut() -> Result<Option<T>>) -> Result<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = check()? {
            eprintln!("{what}: after {:.1} s", start.elapsed().as_secs_f64());
            return Ok(v);
        }
        if start.elapsed() > Duration::from_secs(secs) {
            bail!("{what}: not within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The samples of `family` in a Prometheus text exposition: (labels, value).
fn samples<'a>(text: &'a str, family: &str) -> Vec<(&'a str, &'a str)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name_labels, value) = l.rsplit_once(' ')?;
            let (name, labels) = name_labels.split_once('{').unwrap_or((name_labels, ""));
            (name == family).then_some((labels, value))
        })
        .collect()
}

/// `promtool check metrics` on the agent's /metrics; every session Established there.
fn promtool_check(mon: &Netns, node: &str, i: usize) -> Result<()> {
    let url = format!("http://{}:{METRICS_PORT}/metrics", metrics_addr(i));
    let text = poll(
        30,
        &format!("{node}: sessions Established in its metrics"),
        || {
            let text = get(mon, &url)?;
            let states = samples(&text, "fare_bgp_neighbor_state");
            let up = states
                .iter()
                .filter(|(l, v)| l.contains("state=\"Established\"") && *v == "1.0")
                .count();
            let neighbors = states.len() / 6;
            Ok((neighbors >= 2 && up == neighbors).then_some(text))
        },
    )?;
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    {
        use std::io::Write;
        let mut stdin = promtool.stdin.take().context("promtool stdin")?;
        stdin.write_all(text.as_bytes())?;
    }
    let out = promtool.wait_with_output()?;
    ensure!(
        out.status.success(),
        "{node}: promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// A free TCP port on the monitoring namespace's loopback.
fn free_port(mon: &Netns) -> Result<u16> {
    fare_integration::inns::run(&mon.name, || {
        Ok(std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port())
    })
}

fn start_prometheus(mon: &Netns, dir: &TempDir, port: u16) -> Result<Server> {
    let targets: Vec<String> = (0..NODES.len())
        .map(|i| format!("\"{}:{METRICS_PORT}\"", metrics_addr(i)))
        .collect();
    let config = dir.write(
        "prometheus.yml",
        &format!(
            "global: {{scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}}\n\
             scrape_configs:\n  - job_name: fare\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    )?;
    let log = std::fs::File::create(dir.0.join("prometheus.log"))?;
    let child = mon
        .command("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.0.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    Ok(Server(child))
}

/// `GET /api/v1/query?query=Q` on the server: the result vector.
fn query(mon: &Netns, port: u16, q: &str) -> Result<Vec<Value>> {
    let out = mon.exec(
        "curl",
        &[
            "-sf",
            "--max-time",
            "5",
            "-G",
            &format!("http://127.0.0.1:{port}/api/v1/query"),
            "--data-urlencode",
            &format!("query={q}"),
        ],
    );
    let Ok(out) = out else {
        return Ok(Vec::new()); // not listening yet
    };
    let v: Value = serde_json::from_slice(&out.stdout)?;
    ensure!(v["status"] == "success", "query {q}: {v}");
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Every Established session of the four agents has an established timestamp, taken
/// after the lab started (its sessions came up then) and not in the future.
fn established_timestamps(mon: &Netns, port: u16, started: f64) -> Result<()> {
    let up = query(
        mon,
        port,
        "fare_bgp_neighbor_state{state=\"Established\"} == 1",
    )?;
    let stamps = query(mon, port, "fare_bgp_neighbor_established_timestamp_seconds")?;
    ensure!(
        !up.is_empty() && stamps.len() == up.len(),
        "{} sessions Established, {} timestamps: {stamps:?}",
        up.len(),
        stamps.len()
    );
    let now = unix_now();
    for s in &stamps {
        let at: f64 = s["value"][1].as_str().context("value")?.parse()?;
        ensure!(
            at >= started.floor() && at <= now,
            "{s} (lab started {started})"
        );
    }
    Ok(())
}

/// The server read the unit of each family from the OpenMetrics `# UNIT` lines.
fn units_declared(mon: &Netns, port: u16) -> Result<()> {
    for (family, unit) in [
        (
            "fare_group_member_path_bandwidth_bytes_per_second",
            "bytes_per_second",
        ),
        ("fare_bgp_neighbor_established_timestamp_seconds", "seconds"),
        ("process_resident_memory_bytes", "bytes"),
    ] {
        let out = mon.exec(
            "curl",
            &[
                "-sf",
                "--max-time",
                "5",
                &format!("http://127.0.0.1:{port}/api/v1/metadata?metric={family}"),
            ],
        )?;
        let v: Value = serde_json::from_slice(&out.stdout)?;
        let units: Vec<&str> = v["data"][family]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["unit"].as_str())
            .collect();
        ensure!(units == [unit], "{family}: metadata {v}");
    }
    Ok(())
}

#[test]
fn prometheus_scrapes_a_labs_agents() -> Result<()> {
    let test = "prometheus_scrapes_a_labs_agents";
    if !have_root(test)
        || !have_tool(test, "tc")
        || !have_tool(test, "curl")
        || !have_tool(test, "promtool")
        || !have_tool(test, "prometheus")
    {
        return Ok(());
    }
    let started = unix_now();
    let (lab, _) = Lab::start(
        "topologies/whitepaper-asymmetric.yaml",
        "prom",
        &["--mode", "averaged", "--no-arn", "--converge-timeout", "60"],
    )?;
    let st = lab_state(&lab.name)?;
    let ns = namespaces(&st);
    let peers = leaf2_peers(&st);
    let mon = Netns::new("prom")?;
    for (i, node) in NODES.iter().enumerate() {
        connect(&mon, ns.get(*node).context("node namespace")?, i)?;
        enable_metrics(&lab, node, i)?;
    }
    let group = poll(60, "Leaf2's group 3:3:4:4 after the restarts", || {
        let g = leaf2_group(&lab)?;
        Ok((ratios(&g, &peers) == model()).then_some(g))
    })?;
    for (i, node) in NODES.iter().enumerate() {
        promtool_check(&mon, node, i)?;
    }

    let dir = TempDir::new("prometheus")?;
    let port = free_port(&mon)?;
    let _server = start_prometheus(&mon, &dir, port)?;
    let leaf2 = format!("{}:{METRICS_PORT}", metrics_addr(1));
    let q = format!("fare_group_member_weight{{instance=\"{leaf2}\",prefix=\"{PREFIX}\"}}");
    let result = poll(60, "Prometheus has Leaf2's member weights", || {
        let r = query(&mon, port, &q)?;
        Ok((r.len() == group.len()).then_some(r))
    })
    .with_context(|| std::fs::read_to_string(dir.0.join("prometheus.log")).unwrap_or_default())?;
    let scraped: BTreeMap<String, u64> = result
        .iter()
        .filter_map(|s| {
            let interface = s["metric"]["interface"].as_str()?.to_string();
            let weight = s["value"][1].as_str()?.parse::<f64>().ok()?;
            Some((interface, weight as u64))
        })
        .collect();
    ensure!(
        scraped == group,
        "Prometheus {scraped:?}, ListGroups {group:?}"
    );
    ensure!(ratios(&scraped, &peers) == model(), "{scraped:?}");
    // Every agent's OpenMetrics scrape parsed by the server: all four targets up.
    let up = poll(30, "all targets up", || {
        let r = query(&mon, port, "up == 1")?;
        Ok((r.len() == NODES.len()).then_some(r))
    })?;
    eprintln!("targets up: {}", up.len());
    established_timestamps(&mon, port, started)?;
    units_declared(&mon, port)?;
    drop(_server);
    drop(mon);
    lab.down()
}
