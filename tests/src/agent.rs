//! Helpers for `fare agent` tests: a running agent that stops on drop, temp config dirs,
//! `fare show` as JSON.

use crate::{fare_bin, wait_until, Netns};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Result<TempDir> {
        let n = DIRS.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("fare-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }

    pub fn write(&self, name: &str, text: &str) -> Result<PathBuf> {
        let path = self.0.join(name);
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// Writes `<name>.yaml` with `config` and starts an agent on it inside `ns`; the
    /// configuration's management socket must be `<this dir>/<name>.sock`.
    pub fn start_agent(&self, ns: &Netns, name: &str, config: &str) -> Result<Agent> {
        let path = self.write(&format!("{name}.yaml"), config)?;
        Agent::start(Some(ns), &path, &self.0.join(format!("{name}.sock")))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `fare agent` process (inside a namespace, or not). Dropping it sends SIGTERM and
/// waits (bounded), then SIGKILL.
pub struct Agent {
    pub child: Child,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl Agent {
    /// Starts `fare agent --config CONFIG` and waits (up to 10 s) for its socket.
    pub fn start(ns: Option<&Netns>, config: &Path, socket: &Path) -> Result<Agent> {
        Agent::start_with(ns, config, socket, &[])
    }

    /// [`Agent::start`] with more arguments after `--config CONFIG`.
    pub fn start_with(
        ns: Option<&Netns>,
        config: &Path,
        socket: &Path,
        args: &[&str],
    ) -> Result<Agent> {
        let bin = fare_bin()?;
        let log = config.with_extension("log");
        let mut cmd = match ns {
            // nsenter --net, not `ip netns exec`: the latter gives the agent a private
            // mount namespace whose /sys/fs/bpf (XDP pins) vanishes when the agent exits.
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net=/run/netns/{}", ns.name))
                    .arg(&bin)
                    .arg("agent");
                c
            }
            None => {
                let mut c = Command::new(&bin);
                c.arg("agent");
                c
            }
        };
        let child = cmd
            .arg("--config")
            .arg(config)
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("spawning fare agent")?;
        let mut agent = Agent {
            child,
            socket: socket.to_path_buf(),
            log,
        };
        // The socket appears once the data plane is programmed; an XDP agent's verifier
        // load alone takes several seconds on a busy 2-core machine.
        let up = wait_until(Duration::from_secs(30), || {
            socket.exists() || matches!(agent.child.try_wait(), Ok(Some(_)))
        });
        if !up || !socket.exists() {
            bail!("agent did not come up: {}", agent.log_text());
        }
        Ok(agent)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM and wait up to 10 s; returns the exit code.
    pub fn stop(&mut self) -> Result<Option<i32>> {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let mut code = None;
        let exited = wait_until(Duration::from_secs(10), || match self.child.try_wait() {
            Ok(Some(status)) => {
                code = status.code();
                true
            }
            _ => false,
        });
        if !exited {
            let _ = self.child.kill();
            let _ = self.child.wait();
            bail!("agent did not stop within 10 s after SIGTERM");
        }
        Ok(code)
    }

    /// `fare show --socket S WHAT --json`, parsed.
    pub fn show(&self, what: &str) -> Result<serde_json::Value> {
        show(&self.socket, what)
    }

    /// Waits (at most `timeout`) until ARNs have taken a member out; the `removed` list
    /// then (empty when none was taken out in time).
    pub fn wait_arn_removed(&self, timeout: Duration) -> Vec<serde_json::Value> {
        let mut removed = Vec::new();
        wait_until(timeout, || {
            removed = self.arn_removed();
            !removed.is_empty()
        });
        removed
    }

    /// The members ARNs have taken out (`removed` of `fare show arn`; empty when it
    /// cannot be read).
    pub fn arn_removed(&self) -> Vec<serde_json::Value> {
        self.show("arn")
            .ok()
            .and_then(|v| v["removed"].as_array().cloned())
            .unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.stop();
        }
    }
}

/// Runs `fare agent --config CONFIG` (inside `ns`, when given) to its end: its exit code
/// and stderr (for configurations it must refuse). Bounded: an agent still running after
/// 20 s did not refuse; it is killed and the code is `None`.
pub fn run_refused(ns: Option<&Netns>, config: &Path) -> Result<(Option<i32>, String)> {
    let bin = fare_bin()?;
    let mut cmd = match ns {
        Some(ns) => ns.command(bin.to_str().context("fare binary path")?),
        None => Command::new(&bin),
    };
    let log = config.with_extension("refused.log");
    let mut child = cmd
        .args(["agent", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("spawning fare agent")?;
    let mut code = None;
    let ended = wait_until(Duration::from_secs(20), || match child.try_wait() {
        Ok(Some(status)) => {
            code = status.code();
            true
        }
        _ => false,
    });
    if !ended {
        let _ = child.kill();
        let _ = child.wait();
    }
    let err = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    Ok((code, err))
}

pub fn show(socket: &Path, what: &str) -> Result<serde_json::Value> {
    let out = Command::new(fare_bin()?)
        .arg("show")
        .arg("--socket")
        .arg(socket)
        .args([what, "--json"])
        .output()?;
    if !out.status.success() {
        bail!("fare show {what}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// `f` of every member of `group` (one group of `fare show groups --json`), in order.
pub fn members<T>(group: &serde_json::Value, f: impl Fn(&serde_json::Value) -> T) -> Vec<T> {
    group["members"]
        .as_array()
        .map(|m| m.iter().map(f).collect())
        .unwrap_or_default()
}

/// The packet counters of `group`'s members, in order (0 where a member has none).
pub fn member_packets(group: &serde_json::Value) -> Vec<u64> {
    members(group, |m| m["packets"].as_u64().unwrap_or(0))
}
