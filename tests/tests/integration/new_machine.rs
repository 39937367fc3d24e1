//! The first run on a new machine: nothing mounted on /sys/fs/bpf, a busy machine, the
//! lab's twelve agents starting at once. Each must find the one bpffs that the first of
//! them mounts (never stack a second on it, never pin into a mount another hides), so
//! every agent comes up, every group equals the model, and exactly one bpffs is mounted
//! afterwards, run after run.

use anyhow::{ensure, Result};
use fare_integration::new_machine::{bpffs_mounts, read, run_sh, CpuLoad};
use fare_integration::{fare_bin, have_root, have_tool, repo_root};
use std::time::Duration;

const UP_AND_DOWN: &str = r#"
fare=$1 topo=$2 name=$3 out=$4
trap '"$fare" lab down "$name" >"$out/down.log" 2>&1' EXIT
trap 'exit 143' TERM INT
"$fare" lab up "$topo" --name "$name" --dataplane xdp --json >"$out/up.json" 2>"$out/up.log"
echo $? >"$out/up.rc"
cat /proc/self/mountinfo >"$out/mountinfo"
"#;

/// Runs of the bring-up (FARE_NEW_MACHINE_RUNS overrides).
fn runs() -> usize {
    std::env::var("FARE_NEW_MACHINE_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
}

#[test]
fn lab_xdp_up_without_bpffs_under_load_mounts_one() -> Result<()> {
    let test = "lab_xdp_up_without_bpffs_under_load_mounts_one";
    if !have_root(test) || !have_tool(test, "unshare") || !have_tool(test, "tc") {
        return Ok(());
    }
    let fare = fare_bin()?;
    let topo = repo_root().join("topologies/draft-fig1.yaml");
    for run in 0..runs() {
        let out = tempdir(run)?;
        let name = format!("nm{}x{run}", std::process::id() % 10_000);
        let result = {
            let _load = CpuLoad::start(Duration::from_secs(300));
            run_sh(
                UP_AND_DOWN,
                &[
                    &fare.to_string_lossy(),
                    &topo.to_string_lossy(),
                    &name,
                    &out.to_string_lossy(),
                ],
                Duration::from_secs(300),
            )?
        };
        let check = check_run(&out, &result);
        let _ = std::fs::remove_dir_all(&out);
        check.map_err(|e| e.context(format!("run {} of {}", run + 1, runs())))?;
    }
    Ok(())
}

fn tempdir(run: usize) -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("fare-new-machine-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Every agent up, every group the model's, one bpffs on /sys/fs/bpf.
fn check_run(out: &std::path::Path, result: &std::process::Output) -> Result<()> {
    let log = read(out, "up.log");
    let tail: String = log.lines().rev().take(12).collect::<Vec<_>>().join("\n");
    ensure!(
        read(out, "up.rc").trim() == "0",
        "lab up failed (shell: {}, {}); its log ends:\n{tail}",
        result.status,
        String::from_utf8_lossy(&result.stderr).trim()
    );
    let up: serde_json::Value = serde_json::from_str(&read(out, "up.json"))?;
    ensure!(up["nodes"] == 12, "lab up reports {} nodes", up["nodes"]);
    ensure!(
        up["converged_s"].is_number(),
        "groups did not converge to the model: {}",
        up["mismatches"]
    );
    let mounts = bpffs_mounts(&read(out, "mountinfo"));
    ensure!(
        mounts == 1,
        "{mounts} bpf filesystems on /sys/fs/bpf after lab up"
    );
    Ok(())
}

/// Env var naming the start file of a contender (see `bpffs_contender`).
const CONTENDER_START: &str = "FARE_BPFFS_CONTENDER_START";
const CONTENDERS: usize = 24;
const CONTENDED_RUNS: usize = 10;

const CONTEND: &str = r#"
bin=$1 start=$2 n=$3 out=$4
mkfifo "$start" || exit 91
i=0
while [ "$i" -lt "$n" ]; do
  FARE_BPFFS_CONTENDER_START=$start "$bin" --ignored --exact new_machine::bpffs_contender \
    --test-threads=1 -q >"$out/contender-$i.log" 2>&1 &
  i=$((i + 1))
done
sleep 1
# Every contender blocks opening the FIFO for reading; one open for writing wakes them
# all at once.
exec 3>"$start"
exec 3>&-
fails=0
for pid in $(jobs -p); do wait "$pid" || fails=$((fails + 1)); done
echo "$fails" >"$out/fails"
cat /proc/self/mountinfo >"$out/mountinfo"
"#;

/// What an agent does first, by many processes released at the same instant on a
/// machine without bpffs: exactly one bpffs is mounted, and every process finds its pin
/// directory on it. (Barrier-released contenders make the race of check-then-mount
/// without a lock show in most runs, where the lab's agents hit it only now and then.)
#[test]
fn bpffs_mounted_once_by_contending_agents() -> Result<()> {
    let test = "bpffs_mounted_once_by_contending_agents";
    if !have_root(test) || !have_tool(test, "unshare") {
        return Ok(());
    }
    let bin = std::env::current_exe()?;
    for run in 0..CONTENDED_RUNS {
        let out = tempdir(100 + run)?;
        let start = out.join("start");
        let result = run_sh(
            CONTEND,
            &[
                &bin.to_string_lossy(),
                &start.to_string_lossy(),
                &CONTENDERS.to_string(),
                &out.to_string_lossy(),
            ],
            Duration::from_secs(120),
        )?;
        let fails = read(&out, "fails");
        let mounts = bpffs_mounts(&read(&out, "mountinfo"));
        let first_log = read(&out, "contender-0.log");
        let _ = std::fs::remove_dir_all(&out);
        ensure!(
            fails.trim() == "0",
            "run {run}: {} of {CONTENDERS} contenders failed (shell: {}); the first's log: {first_log}",
            fails.trim(),
            result.status
        );
        ensure!(
            mounts == 1,
            "run {run}: {mounts} bpf filesystems on /sys/fs/bpf"
        );
    }
    Ok(())
}

/// One contender of `bpffs_mounted_once_by_contending_agents` (run by it, in its
/// private mount namespace): waits at the start FIFO, then prepares a pin directory as
/// an agent's first open does.
#[test]
#[ignore = "a child process of bpffs_mounted_once_by_contending_agents"]
fn bpffs_contender() -> Result<()> {
    let Ok(start) = std::env::var(CONTENDER_START) else {
        return Ok(());
    };
    // Blocks until the test opens the FIFO for writing (the script's timeout bounds it).
    drop(std::fs::File::open(&start)?);
    let root = std::path::Path::new(fare::dp_xdp::pins::DEFAULT_ROOT);
    let pins = fare::dp_xdp::pins::PinDir::new(root, &format!("contender-{}", std::process::id()));
    pins.prepare(root)?;
    // The directory must still be reachable once every contender has mounted or not.
    std::thread::sleep(Duration::from_millis(500));
    ensure!(
        pins.maps().is_dir(),
        "{} vanished (hidden by a later mount)",
        pins.maps().display()
    );
    Ok(())
}
