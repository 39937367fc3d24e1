//! Helpers for fare's integration tests: network namespaces that clean themselves up,
//! veth links, skip rules for missing privileges or tools, the `fare` binary.
//!
//! Every namespace a test makes has a unique name (`fare-<tag>-<pid>-<n>`) and is deleted
//! in `Drop`, also when the test fails; processes left inside are killed first.

pub mod agent;
pub mod arn_fabric;
pub mod bgp;
pub mod dpf_lab;
pub mod inns;
pub mod lab;
pub mod new_machine;
pub mod packets;
pub mod rawbgp;
pub mod xdp_lab;

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub mod p4;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// True when running as root; otherwise prints why the test is skipped.
/// Records that `test` did not run, and why: printed (stderr, as cargo shows it with
/// --nocapture or on failure) and appended to the file named by FARE_SKIP_LOG, which
/// `scripts/test` lists at the end of a run, so a green run says what it did not test.
pub fn skip(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
    if let Ok(path) = std::env::var("FARE_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}

pub fn have_root(test: &str) -> bool {
    // SAFETY-free check: uid 0 owns /proc/self.
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    if !root {
        skip(test, "needs root (network namespaces)");
    }
    root
}

/// True when `tool` is on PATH; otherwise prints why the test is skipped.
pub fn have_tool(test: &str, tool: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !found {
        skip(test, &format!("`{tool}` is not on PATH"));
    }
    found
}

/// Runs a command, failing with its stderr when it exits non-zero.
pub fn run(cmd: &str, args: &[&str]) -> Result<Output> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("spawning {cmd}"))?;
    if !out.status.success() {
        bail!(
            "{cmd} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// A network namespace owned by the test.
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates `fare-<tag>-<pid>-<n>` with loopback up. `tag` should be short: the
    /// name also prefixes interface names in some tests (15-character limit).
    pub fn new(tag: &str) -> Result<Netns> {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("fare-{tag}-{}-{n}", std::process::id());
        run("ip", &["netns", "add", &name])?;
        let ns = Netns { name };
        ns.exec("ip", &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Runs a command inside the namespace and waits for it.
    pub fn exec(&self, cmd: &str, args: &[&str]) -> Result<Output> {
        let mut full = vec!["netns", "exec", &self.name, cmd];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// Runs this build's `fare ARGS...` inside the namespace, failing with its stderr.
    pub fn fare(&self, args: &[&str]) -> Result<Output> {
        let bin = fare_bin()?;
        self.exec(bin.to_str().context("fare binary path")?, args)
    }

    /// Runs a shell snippet inside the namespace.
    pub fn sh(&self, script: &str) -> Result<Output> {
        self.exec("sh", &["-c", script])
    }

    /// A `Command` that will run inside the namespace (for spawning daemons).
    pub fn command(&self, cmd: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, cmd]);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
        {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stderr(Stdio::null())
            .status();
    }
}

/// Creates a veth pair `a_if` (in `a`) <-> `b_if` (in `b`), both up.
pub fn veth(a: &Netns, a_if: &str, b: &Netns, b_if: &str) -> Result<()> {
    run(
        "ip",
        &[
            "link", "add", a_if, "netns", &a.name, "type", "veth", "peer", "name", b_if, "netns",
            &b.name,
        ],
    )?;
    a.exec("ip", &["link", "set", a_if, "up"])?;
    b.exec("ip", &["link", "set", b_if, "up"])?;
    Ok(())
}

/// `veth` with an address on each end: `a_addr` (address/prefix) on `a_if` in `a`,
/// `b_addr` on `b_if` in `b`.
pub fn link(
    a: &Netns,
    a_if: &str,
    a_addr: &str,
    b: &Netns,
    b_if: &str,
    b_addr: &str,
) -> Result<()> {
    veth(a, a_if, b, b_if)?;
    a.exec("ip", &["addr", "add", a_addr, "dev", a_if])?;
    b.exec("ip", &["addr", "add", b_addr, "dev", b_if])?;
    Ok(())
}

/// Polls `check` every 20 ms until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Counters `after` minus `before`, element by element.
pub fn delta(after: &[u64], before: &[u64]) -> Vec<u64> {
    after.iter().zip(before).map(|(a, b)| a - b).collect()
}

/// Path of the `fare` binary of this build (built on demand when missing).
pub fn fare_bin() -> Result<PathBuf> {
    // target/<profile>/deps/<test-binary> (tests) or target/<profile>/<bin> (benchmark
    // binaries) -> target/<profile>/fare
    let exe = std::env::current_exe()?;
    let parent = exe.parent().context("unexpected test binary location")?;
    let profile_dir = if parent.ends_with("deps") {
        parent.parent().context("unexpected test binary location")?
    } else {
        parent
    };
    let bin = profile_dir.join("fare");
    // `cargo test -p fare-integration` alone does not rebuild the `fare` binary: build it
    // when missing or older than its sources, so a stale one never tests old code.
    // (`cargo test --workspace` builds it first, with the workspace's feature set.)
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        // The binary embeds the XDP object, so eBPF sources count too.
        let sources = [repo_root().join("control"), repo_root().join("ebpf")];
        if !is_stale(&bin, &sources) {
            return Ok(());
        }
        let mut args = vec!["build", "-q", "-p", "fare", "--bin", "fare"];
        if profile_dir.ends_with("release") {
            args.push("--release");
        }
        run("cargo", &args)
            .map(|_| ())
            .map_err(|e| format!("{e:#}"))
    });
    if let Err(e) = built {
        bail!("building fare: {e}");
    }
    Ok(bin)
}

/// Whether `bin` is missing or older than any file under `sources`.
fn is_stale(bin: &std::path::Path, sources: &[PathBuf]) -> bool {
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else {
        return true;
    };
    let mut dirs = sources.to_vec();
    // Bounded walk: the control crate has a few hundred files.
    for _ in 0..10_000 {
        let Some(dir) = dirs.pop() else { break };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else if e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t > built)
            {
                return true;
            }
        }
    }
    false
}

/// Root of the repository (for topologies/, p4/build/).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}
