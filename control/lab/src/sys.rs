//! The few system tools the lab drives (`ip`, `tc`, `sysctl` through `ip netns exec`),
//! run as child processes with their stderr kept for the error message. Batches keep the
//! number of processes per namespace small, which is what bounds `lab up` time.

use std::io::Write;
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum SysError {
    #[error("cannot run `{cmd}`: {source}")]
    Spawn {
        cmd: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{cmd}` failed: {stderr}")]
    Failed { cmd: String, stderr: String },
}

fn describe(cmd: &str, args: &[&str]) -> String {
    let mut s = cmd.to_string();
    for a in args.iter().take(12) {
        s.push(' ');
        s.push_str(a);
    }
    s
}

/// Runs `cmd args`, returning stdout; a non-zero exit is an error carrying stderr.
pub fn run(cmd: &str, args: &[&str]) -> Result<String, SysError> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| SysError::Spawn {
            cmd: describe(cmd, args),
            source,
        })?;
    if !out.status.success() {
        return Err(SysError::Failed {
            cmd: describe(cmd, args),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The index of interface `ifname` inside namespace `ns`.
pub fn ifindex(ns: &str, ifname: &str) -> Result<u32, SysError> {
    let args = ["-n", ns, "-o", "link", "show", "dev", ifname];
    let out = run("ip", &args)?;
    out.split(':')
        .next()
        .and_then(|i| i.trim().parse().ok())
        .ok_or_else(|| SysError::Failed {
            cmd: describe("ip", &args),
            stderr: format!("no ifindex for {ifname} in {ns} in its output"),
        })
}

/// Runs `cmd args` feeding `input` on stdin (the `-batch -` form of ip and tc).
pub fn run_stdin(cmd: &str, args: &[&str], input: &str) -> Result<String, SysError> {
    let spawn_err = |source| SysError::Spawn {
        cmd: describe(cmd, args),
        source,
    };
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_err)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).map_err(spawn_err)?;
    }
    let out = child.wait_with_output().map_err(spawn_err)?;
    if !out.status.success() {
        let first_lines: String = String::from_utf8_lossy(&out.stderr)
            .lines()
            .take(3)
            .collect::<Vec<_>>()
            .join("; ");
        return Err(SysError::Failed {
            cmd: describe(cmd, args),
            stderr: first_lines,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip -batch -` in the root namespace, or in `ns` when given.
pub fn ip_batch(ns: Option<&str>, lines: &str) -> Result<(), SysError> {
    if lines.is_empty() {
        return Ok(());
    }
    match ns {
        Some(ns) => run_stdin("ip", &["-n", ns, "-batch", "-"], lines),
        None => run_stdin("ip", &["-batch", "-"], lines),
    }
    .map(|_| ())
}

/// `tc -batch -` inside `ns`.
pub fn tc_batch(ns: &str, lines: &str) -> Result<(), SysError> {
    if lines.is_empty() {
        return Ok(());
    }
    run_stdin("tc", &["-n", ns, "-batch", "-"], lines).map(|_| ())
}

/// `ip netns exec NS cmd args`.
pub fn netns_exec(ns: &str, cmd: &str, args: &[&str]) -> Result<String, SysError> {
    let mut full = vec!["netns", "exec", ns, cmd];
    full.extend_from_slice(args);
    run("ip", &full)
}

/// Every network namespace name on the machine.
pub fn list_netns() -> Result<Vec<String>, SysError> {
    let out = run("ip", &["netns", "list"])?;
    Ok(out
        .lines()
        // "name (id: 3)" -> "name"
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Pids of the processes inside namespace `ns`.
pub fn netns_pids(ns: &str) -> Vec<i32> {
    run("ip", &["netns", "pids", ns])
        .map(|out| out.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// True when `tool` is on PATH.
pub fn have(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

/// Sends `signal` to `pid`; false when there is no such process.
pub fn kill(pid: i32, signal: nix::sys::signal::Signal) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).is_ok()
}

pub fn alive(pid: i32) -> bool {
    // Signal 0 checks existence; a zombie child still counts until reaped.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true)
}
