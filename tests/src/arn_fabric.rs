//! The ARN spine-leaf lab (topologies/arn-spine-leaf.yaml) shared by the ARN tests:
//! `fare lab up` with the test's options, UDP traffic from leaf1's host to leaf2's host
//! sprayed over spine1 and spine2, and leaf1's share through spine1 read from its
//! interface counters. Dropping it stops the traffic, continues the agents the test
//! stopped, and takes the lab down.

use crate::lab::{fare, Lab};
use crate::{fare_bin, run};
use anyhow::{ensure, Context, Result};
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct ArnFabric {
    /// Taken down (`fare lab down`) when dropped, after the traffic has stopped.
    lab: Lab,
    traffic: Vec<Child>,
    /// Agent pids the test SIGSTOPped (continued on drop).
    pub stopped: Vec<i32>,
}

impl Drop for ArnFabric {
    fn drop(&mut self) {
        for pid in &self.stopped {
            let _ = Command::new("kill")
                .args(["-CONT", &pid.to_string()])
                .output();
        }
        for c in &mut self.traffic {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl ArnFabric {
    /// `fare lab up topologies/arn-spine-leaf.yaml --name NAME EXTRA...`.
    pub fn up(name: String, extra: &[&str]) -> Result<ArnFabric> {
        let (lab, out) = Lab::up("topologies/arn-spine-leaf.yaml", &name, extra)?;
        let lab = ArnFabric {
            lab,
            traffic: Vec::new(),
            stopped: Vec::new(),
        };
        ensure!(
            out.status.success(),
            "lab up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(lab)
    }

    /// The lab with static routing and `dataplane`, named `<tag><pid mod 100000>`, with
    /// the options `extra`.
    pub fn up_static(tag: &str, dataplane: &str, extra: &[&str]) -> Result<ArnFabric> {
        let mut args = vec!["--routing", "static", "--dataplane", dataplane];
        args.extend_from_slice(extra);
        ArnFabric::up(format!("{tag}{}", std::process::id() % 100_000), &args)
    }

    pub fn name(&self) -> &str {
        &self.lab.name
    }

    pub fn ns(&self, node: &str) -> String {
        format!("farelab-{}-{node}", self.lab.name)
    }

    /// `fare ARGS...`; its stdout, or an error with its stderr.
    pub fn fare(&self, args: &[&str]) -> Result<String> {
        let out = fare(args)?;
        ensure!(
            out.status.success(),
            "fare {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The pid of `node`'s agent (from the lab's state.json).
    pub fn agent_pid(&self, node: &str) -> Result<i32> {
        let state: Value = serde_json::from_str(&std::fs::read_to_string(format!(
            "/run/fare/lab/{}/state.json",
            self.lab.name
        ))?)?;
        state["agents"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e[0] == node))
            .and_then(|e| e[1].as_i64())
            .map(|p| p as i32)
            .with_context(|| format!("{node}'s agent pid in state.json"))
    }

    /// UDP from leaf1's host to leaf2's host (198.51.100.2): `kbit` over 64 flows for
    /// `seconds`, with a sink at leaf2's host.
    pub fn start_traffic(&mut self, kbit: u64, seconds: u64) -> Result<()> {
        let fare = fare_bin()?.to_string_lossy().to_string();
        let (kbit, seconds) = (kbit.to_string(), seconds.to_string());
        for (ns, args) in [
            (
                self.ns("leaf2-h0"),
                vec!["lab", "gen", "--sink", "--duration", &seconds],
            ),
            (
                self.ns("leaf1-h0"),
                vec![
                    "lab",
                    "gen",
                    "--to",
                    "198.51.100.2",
                    "--rate-kbit",
                    &kbit,
                    "--flows",
                    "64",
                    "--duration",
                    &seconds,
                ],
            ),
        ] {
            let child = Command::new("ip")
                .args(["netns", "exec", &ns, &fare])
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            self.traffic.push(child);
        }
        Ok(())
    }

    /// `node`'s transmit counter `what` ("packets", "bytes") of `ifname`.
    pub fn tx(&self, node: &str, ifname: &str, what: &str) -> Result<u64> {
        let out = run(
            "ip",
            &["-n", &self.ns(node), "-j", "-s", "link", "show", ifname],
        )?;
        let v: Value = serde_json::from_slice(&out.stdout)?;
        v[0]["stats64"]["tx"][what]
            .as_u64()
            .with_context(|| format!("no tx {what} counter"))
    }

    pub fn tx_packets(&self, node: &str, ifname: &str) -> Result<u64> {
        self.tx(node, ifname, "packets")
    }

    /// `fare show WHAT --json` of `node`'s agent, parsed.
    pub fn show(&self, node: &str, what: &str) -> Result<Value> {
        self.lab.show(node, what)
    }

    /// Starts the traffic (`start_traffic`), waits (at most 10 s) until it flows through
    /// leaf1, and returns the share of it via spine1 over one second.
    pub fn start_traffic_share(&mut self, kbit: u64, seconds: u64) -> Result<f64> {
        self.start_traffic(kbit, seconds)?;
        ensure!(
            crate::wait_until(Duration::from_secs(10), || self
                .spine1_share(Duration::from_millis(500))
                .is_ok()),
            "no traffic through leaf1"
        );
        self.spine1_share(Duration::from_secs(1))
    }

    /// Share of leaf1's packets toward leaf2 that left over spine1 (eth1) during `window`.
    pub fn spine1_share(&self, window: Duration) -> Result<f64> {
        let before = (
            self.tx_packets("leaf1", "eth1")?,
            self.tx_packets("leaf1", "eth2")?,
        );
        std::thread::sleep(window);
        let e1 = self.tx_packets("leaf1", "eth1")? - before.0;
        let e2 = self.tx_packets("leaf1", "eth2")? - before.1;
        ensure!(e1 + e2 > 50, "almost no traffic: {e1} + {e2} packets");
        Ok(e1 as f64 / (e1 + e2) as f64)
    }
}
