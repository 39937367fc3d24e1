//! Helpers for the `fare lab` tests: run the CLI, list a lab's namespaces.

use crate::{fare_bin, run};
use anyhow::Result;
use std::process::{Command, Output};

/// `fare ARGS...`, its output collected.
pub fn fare(args: &[&str]) -> Result<Output> {
    Ok(Command::new(fare_bin()?).args(args).output()?)
}

/// Network namespaces whose name starts with `prefix` (`farelab-<lab>-`).
pub fn namespaces(prefix: &str) -> Vec<String> {
    run("ip", &["netns", "list"])
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| n.starts_with(prefix))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether Debian's Mininet can be imported by the system Python; prints the SKIPPED
/// line otherwise.
pub fn have_mininet(test: &str) -> bool {
    let ok = std::process::Command::new(fare::lab::mininet::PYTHON)
        .args(["-c", "import mininet.net"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        crate::skip(test, "Debian's mininet is not installed");
    }
    ok
}

/// A lab brought up by a test: `down` checks that it goes away completely; dropping it
/// without `down` (a failed test) still removes it.
pub struct Lab {
    pub name: String,
    down: bool,
}

impl Lab {
    /// `fare lab up TOPOLOGY --name NAME EXTRA... --json`: the lab (to be taken down even
    /// when `up` failed, as it may have built part of it) and `up`'s output.
    pub fn up(topology: &str, name: &str, extra: &[&str]) -> Result<(Lab, Output)> {
        let topo = crate::repo_root().join(topology);
        let mut args = vec!["lab", "up"];
        let topo = topo.to_string_lossy().into_owned();
        args.push(&topo);
        args.extend(["--name", name]);
        args.extend_from_slice(extra);
        args.push("--json");
        let lab = Lab {
            name: name.to_string(),
            down: false,
        };
        let out = fare(&args)?;
        Ok((lab, out))
    }

    /// `up` of a lab named `<tag><pid mod 100000>`; an error (with its stderr) when `up`
    /// fails, the lab taken down then too.
    pub fn start(topology: &str, tag: &str, extra: &[&str]) -> Result<(Lab, Output)> {
        let name = format!("{tag}{}", std::process::id() % 100_000);
        let (lab, up) = Lab::up(topology, &name, extra)?;
        anyhow::ensure!(
            up.status.success(),
            "lab up: {}",
            String::from_utf8_lossy(&up.stderr)
        );
        Ok((lab, up))
    }

    /// `fare lab traffic --from FROM --to TO --rate-mbit RATE --duration SECONDS EXTRA...`,
    /// parsed.
    pub fn traffic(
        &self,
        from: &str,
        to: &str,
        rate_mbit: u32,
        seconds: u32,
        extra: &[&str],
    ) -> Result<serde_json::Value> {
        let (rate, seconds) = (rate_mbit.to_string(), seconds.to_string());
        let mut args = vec!["--from", from, "--to", to, "--rate-mbit", &rate];
        args.extend(["--duration", &seconds]);
        args.extend_from_slice(extra);
        self.json("traffic", &args)
    }

    /// `fare show WHAT --json` of `node`'s agent, parsed; an error when it fails.
    pub fn show(&self, node: &str, what: &str) -> Result<serde_json::Value> {
        let socket = format!("/run/fare/lab/{}/{node}.sock", self.name);
        let out = fare(&["show", "--socket", &socket, what, "--json"])?;
        anyhow::ensure!(
            out.status.success(),
            "fare show {what} on {node}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    /// `fare lab SUBCOMMAND ARGS... --name NAME --json --quiet`, parsed; an error when it
    /// fails.
    pub fn json(&self, subcommand: &str, args: &[&str]) -> Result<serde_json::Value> {
        let mut all = vec!["lab", subcommand];
        all.extend_from_slice(args);
        all.extend(["--name", &self.name, "--json"]);
        if subcommand == "traffic" {
            all.push("--quiet");
        }
        let out = fare(&all)?;
        anyhow::ensure!(
            out.status.success(),
            "lab {subcommand}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    /// `fare lab down NAME`; then no namespace of the lab may be left.
    pub fn down(mut self) -> Result<()> {
        self.down = true;
        let out = fare(&["lab", "down", &self.name])?;
        anyhow::ensure!(
            out.status.success(),
            "lab down: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let left = namespaces(&format!("farelab-{}-", self.name));
        anyhow::ensure!(left.is_empty(), "namespaces left: {left:?}");
        Ok(())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.down {
            let _ = fare(&["lab", "down", &self.name]);
        }
    }
}

/// A kernel route: destination and (device, weight) of each nexthop.
pub type KernelRoute = (String, Vec<(String, u64)>);

/// `ip -n NS -j route show SELECTOR...` read apart from the lab's own reader: per route its
/// destination and (device, weight) of each nexthop (a single nexthop: weight 1).
pub fn kernel_routes(ns: &str, selector: &[&str]) -> Result<Vec<KernelRoute>> {
    let mut args = vec!["-n", ns, "-j", "route", "show"];
    args.extend_from_slice(selector);
    let out = run("ip", &args)?;
    let routes: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let hop = |h: &serde_json::Value| {
        let dev = h["dev"].as_str().unwrap_or("").to_string();
        (dev, h["weight"].as_u64().unwrap_or(1))
    };
    Ok(routes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let hops = match r["nexthops"].as_array() {
                Some(h) => h.iter().map(hop).collect(),
                None => vec![hop(r)],
            };
            Some((r["dst"].as_str()?.to_string(), hops))
        })
        .collect())
}
