//! `fare agent` + `fare show` without a data plane (`kind: none`): JSON contracts,
//! configuration errors (exit 2, one line naming file and line), missing socket.

use anyhow::{ensure, Result};
use fare_integration::agent::{members, run_refused, show, Agent, TempDir};
use fare_integration::fare_bin;
use serde_json::json;

fn config(dir: &TempDir, weight2: u32) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let socket = dir.0.join("run/leaf1.sock");
    let path = dir.write(
        "leaf1.yaml",
        &format!(
            r#"name: leaf1
router_id: 10.0.0.1
asn: 65001
management: {{socket: {}, metrics: "127.0.0.1:{}"}}
dataplane: {{kind: none}}
# Passive and not listening: the test sends nothing to 10.1.0.2 (not ours).
bgp: {{listen: false}}
neighbors:
  - {{address: 10.1.0.2, remote_as: 65100, interface: eth1, bandwidth_gbps: 100, passive: true}}
static:
  - prefix: 198.18.0.0/16
    mode: spray
    members:
      - {{interface: eth1, neighbor_mac: "02:00:00:00:00:01", weight: 3}}
      - {{interface: eth2, neighbor_mac: "02:00:00:00:00:02", weight: {weight2}}}
"#,
            socket.display(),
            metrics_port()
        ),
    )?;
    Ok((path, socket))
}

/// A loopback port unlikely to collide between concurrent test runs.
fn metrics_port() -> u16 {
    20_000 + (std::process::id() % 20_000) as u16
}

/// GET `path` over plain HTTP/1.0 on loopback: (status code, body).
fn get(path: &str) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", metrics_port()))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_string()))
}

#[test]
fn agent_show_json_contracts() -> Result<()> {
    let dir = TempDir::new("agent-cli")?;
    let (path, socket) = config(&dir, 4)?;
    let mut agent = Agent::start(None, &path, &socket)?;
    let groups = agent.show("groups")?;
    ensure!(
        groups
            == json!([{"prefix": "198.18.0.0/16", "mode": "spray", "size": 7, "limit": null,
                "reduced_from": null, "delta": null, "members": [
                {"via": "02:00:00:00:00:01", "interface": "eth1", "weight": 3, "bandwidth_gbps": 0.0, "packets": 0},
                {"via": "02:00:00:00:00:02", "interface": "eth2", "weight": 4, "bandwidth_gbps": 0.0, "packets": 0}]}]),
        "{groups}"
    );
    let neighbors = agent.show("neighbors")?;
    let n = &neighbors[0];
    ensure!(
        n["address"] == "10.1.0.2" && n["remote_as"] == 65100,
        "{neighbors}"
    );
    ensure!(n["state"].is_string(), "{neighbors}");
    let routes = agent.show("routes")?;
    ensure!(
        routes[0]["prefix"] == "198.18.0.0/16" && routes[0]["source"] == "static",
        "{routes}"
    );
    let (code, metrics) = get("/metrics")?;
    ensure!(code == 200, "{code}: {metrics}");
    for line in [
        "fare_groups 1.0",
        "fare_routes{source=\"static\"} 1.0",
        "fare_group_member_weight{prefix=\"198.18.0.0/16\",via=\"02:00:00:00:00:02\",interface=\"eth2\"} 4.0",
    ] {
        ensure!(metrics.lines().any(|l| l == line), "missing {line} in {metrics}");
    }
    // One session, in exactly one state, whichever the FSM is in right now.
    let states: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("fare_bgp_neighbor_state{neighbor=\"10.1.0.2\","))
        .filter(|l| l.ends_with(" 1.0"))
        .collect();
    ensure!(states.len() == 1, "{states:?} in {metrics}");
    // Metrics are on /metrics only.
    let (code, _) = get("/")?;
    ensure!(code == 404, "GET / answered {code}");
    ensure!(agent.stop()? == Some(0), "{}", agent.log_text());
    Ok(())
}

/// `fare --socket S neighbor shutdown ADDR --message M`: (exit code, stderr).
fn shutdown(socket: &std::path::Path, message: &str) -> Result<(Option<i32>, String)> {
    let out = std::process::Command::new(fare_bin()?)
        .arg("--socket")
        .arg(socket)
        .args(["neighbor", "shutdown", "10.1.0.2", "--message", message])
        .output()?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `fare agent --socket S` serves the API on S, not on the file's `management.socket`
/// (also after a SIGHUP); a shutdown message longer than RFC 8203's 255 octets is refused
/// (exit 2) and leaves the neighbor as it was, where it used to be cut without a word.
#[test]
fn agent_socket_flag_and_shutdown_message_limit() -> Result<()> {
    let dir = TempDir::new("agent-flags")?;
    let (path, file_socket) = config(&dir, 4)?;
    let socket = dir.0.join("flag.sock");
    let flag = socket.to_str().unwrap_or_default();
    let mut agent = Agent::start_with(None, &path, &socket, &["--socket", flag])?;
    ensure!(!file_socket.exists(), "also served on the file's socket");
    let cfg = agent.show("config")?;
    let yaml = cfg["yaml"].as_str().unwrap_or_default();
    ensure!(yaml.contains(&format!("socket: {flag}")), "{cfg}");
    // SIGHUP: the command line's socket stays the running one.
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe {
        libc::kill(agent.child.id() as i32, libc::SIGHUP);
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    ensure!(agent.show("neighbors").is_ok() && !file_socket.exists());

    // 256 octets: 128 two-octet characters.
    let long = "é".repeat(128);
    let (code, err) = shutdown(&socket, &long)?;
    ensure!(code == Some(2), "{code:?}: {err}");
    ensure!(
        err == "fare: the shutdown message is 256 octets; a Shutdown Communication carries at \
                most 255 (RFC 8203 as updated by RFC 9003)\n",
        "{err}"
    );
    let n = &agent.show("neighbors")?[0];
    ensure!(
        n["admin_down"] == false && n["shutdown_message"].is_null(),
        "{n}"
    );
    // 255 octets go through whole.
    let fits = format!("{}x", "é".repeat(127));
    let (code, err) = shutdown(&socket, &fits)?;
    ensure!(code == Some(0), "{code:?}: {err}");
    let n = &agent.show("neighbors")?[0];
    ensure!(
        n["admin_down"] == true && n["shutdown_message"] == fits.as_str(),
        "{n}"
    );
    ensure!(agent.stop()? == Some(0), "{}", agent.log_text());
    Ok(())
}

#[test]
fn agent_bad_config_exits_2_with_file_and_line() -> Result<()> {
    let dir = TempDir::new("agent-bad")?;
    let (path, _) = config(&dir, 0)?;
    let (code, err) = run_refused(None, &path)?;
    ensure!(code == Some(2), "{err}");
    let prefix = format!("fare: {}:15", path.display());
    ensure!(err.starts_with(&prefix), "{err}");
    ensure!(err.trim_end().lines().count() == 1, "{err}");

    // Unknown key: names its line too.
    let bad = dir.write(
        "typo.yaml",
        "name: a\nrouter_id: 10.0.0.1\nasn: 1\nneighbours: []\n",
    )?;
    let (code, err) = run_refused(None, &bad)?;
    ensure!(code == Some(2), "{err}");
    ensure!(err.contains("typo.yaml:4"), "{err}");
    Ok(())
}

#[test]
fn show_without_agent_says_so() -> Result<()> {
    let dir = TempDir::new("agent-none")?;
    let missing = dir.0.join("nothing.sock");
    let e = show(&missing, "groups").unwrap_err().to_string();
    ensure!(e.contains("is the agent running?"), "{e}");
    Ok(())
}

/// The documented conversion: `fare weights --json` output drives an agent through
/// `static_from` (white paper asymmetric example, averaged mode: Leaf2 gets 3:3:4:4).
#[test]
fn agent_static_from_fare_weights() -> Result<()> {
    let dir = TempDir::new("agent-weights")?;
    let topo = fare_integration::repo_root().join("topologies/whitepaper-asymmetric.yaml");
    let out = std::process::Command::new(fare_bin()?)
        .arg("weights")
        .arg(&topo)
        .args(["--mode", "averaged", "--json"])
        .output()?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.write("w.json", &String::from_utf8(out.stdout)?)?;
    let socket = dir.0.join("leaf2.sock");
    let links: String = (5..=8)
        .map(|l| {
            format!(
                "    L{l}: {{interface: e{}, neighbor_mac: \"02:00:00:00:00:0{l}\"}}\n",
                l - 4
            )
        })
        .collect();
    let config = dir.write(
        "leaf2.yaml",
        &format!(
            "name: leaf2\nrouter_id: 10.0.0.2\nasn: 65002\nmanagement: {{socket: {}}}\n\
             static_from:\n  weights: w.json\n  node: Leaf2\n  links:\n{links}",
            socket.display()
        ),
    )?;
    let agent = Agent::start(None, &config, &socket)?;
    let groups = agent.show("groups")?;
    let g = &groups[0];
    ensure!(
        g["prefix"] == "192.0.2.0/24" && g["mode"] == "spray",
        "{groups}"
    );
    let got: Vec<(String, u64, f64)> = members(g, |m| {
        (
            m["interface"].as_str().unwrap_or("").to_string(),
            m["weight"].as_u64().unwrap_or(0),
            m["bandwidth_gbps"].as_f64().unwrap_or(0.0),
        )
    });
    let want: Vec<(String, u64, f64)> = vec![
        ("e1".into(), 3, 75.0),
        ("e2".into(), 3, 75.0),
        ("e3".into(), 4, 100.0),
        ("e4".into(), 4, 100.0),
    ];
    ensure!(got == want, "{got:?}");
    ensure!(g["members"][0]["via"] == "02:00:00:00:00:05", "{groups}");
    Ok(())
}
