//! A new machine's state for a test: a private mount namespace in which nothing is
//! mounted on /sys/fs/bpf (as on a host without systemd, a container, a minimal VM), and
//! a machine busy on every core.

use anyhow::{Context, Result};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Prepended to every script run by [`run_sh`]: takes off every bpffs stacked on
/// /sys/fs/bpf (bounded: a mount that will not go fails the script with 90).
const NO_BPFFS: &str = r#"
i=0
while mountpoint -q /sys/fs/bpf; do
  umount /sys/fs/bpf || exit 90
  i=$((i + 1)); [ "$i" -lt 16 ] || exit 90
done
"#;

/// Runs `script` with `sh -c` in a mount namespace of its own (`unshare --mount
/// --propagation private`) without bpffs on /sys/fs/bpf; `args` are its `$1`...
/// SIGTERM after `limit` (a script should trap it to clean up). Whatever the script
/// mounts is gone with its last process.
pub fn run_sh(script: &str, args: &[&str], limit: Duration) -> Result<Output> {
    let full = format!("{NO_BPFFS}\n{script}");
    let secs = limit.as_secs().max(1).to_string();
    Command::new("timeout")
        .args([
            "-s",
            "TERM",
            &secs,
            "unshare",
            "--mount",
            "--propagation",
            "private",
        ])
        .args(["sh", "-c", &full, "sh"])
        .args(args)
        .output()
        .context("unshare")
}

/// `program` started as on a new machine: in a mount namespace of its own without bpffs
/// on /sys/fs/bpf (its arguments and environment are the caller's to add).
pub fn command(program: &Path) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!("{NO_BPFFS}\nexec \"$0\" \"$@\""))
        .arg(program);
    c
}

/// The number of bpf filesystems mounted exactly on /sys/fs/bpf in a mountinfo text
/// (proc(5): mount point in field 5, type after ` - `), read independently of fare's own
/// parser.
pub fn bpffs_mounts(mountinfo: &str) -> usize {
    mountinfo
        .lines()
        .filter(|l| {
            let mut halves = l.splitn(2, " - ");
            let point = halves.next().and_then(|h| h.split(' ').nth(4));
            let fstype = halves.next().and_then(|h| h.split(' ').next());
            point == Some("/sys/fs/bpf") && fstype == Some("bpf")
        })
        .count()
}

/// Busy loops on every core until dropped (at most `limit`): the build load under which
/// the race of agents mounting bpffs showed.
pub struct CpuLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuLoad {
    pub fn start(limit: Duration) -> CpuLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let start = Instant::now();
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) && start.elapsed() < limit {
                        for i in 0..100_000u64 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                        }
                    }
                })
            })
            .collect();
        CpuLoad { stop, threads }
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The first file of `dir` named `name`, as text ("" when missing).
pub fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}
