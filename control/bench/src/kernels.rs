//! `fare bench kernels`: the verifier's work per program on each kernel of the matrix
//! (scripts/kernels: a QEMU guest per kernel running `fare xdp check`) against the host
//! kernel's, measured in the same run.

use anyhow::{bail, Context, Result};
use fare_dp_xdp::kernel::{self, Release};
use fare_dp_xdp::verifier::{self, VerifierCounts};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The kernel matrix script (boots the guests).
    #[arg(long, default_value = "scripts/kernels")]
    pub script: PathBuf,
}

/// One kernel's figures.
struct Row {
    name: String,
    release: String,
    counts: VerifierCounts,
    load_ms: u64,
}

pub fn run(args: Args) -> Result<String> {
    let host = host_row()?;
    let out = std::env::temp_dir().join(format!("fare-bench-kernels-{}", std::process::id()));
    let status = Command::new(&args.script)
        .arg("check")
        .env("FARE_KERNELS_OUT", &out)
        .status()
        .with_context(|| format!("running {}", args.script.display()))?;
    let guests = guest_rows(&out);
    let _ = std::fs::remove_dir_all(&out);
    let guests = guests?;
    if !status.success() || guests.is_empty() {
        bail!("{} check failed ({status})", args.script.display());
    }
    Ok(table(&host, &guests))
}

fn host_row() -> Result<Row> {
    let root = Path::new(fare_dp_xdp::pins::DEFAULT_ROOT);
    let node = format!("bench-kernels-{}", std::process::id());
    let c = verifier::check_running(root, &node)?;
    Ok(Row {
        name: "host".into(),
        release: c.release,
        counts: c.counts,
        load_ms: c.load_ms,
    })
}

/// The `check.json` of every guest folder under `out`.
fn guest_rows(out: &Path) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(out)?
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let text = std::fs::read_to_string(dir.join("check.json")).with_context(|| {
            format!("{}: no check.json (the guest did not boot?)", dir.display())
        })?;
        let v: serde_json::Value = serde_json::from_str(&text)?;
        let loads = v["programs"].as_array().cloned().unwrap_or_default();
        let loads = loads.iter().map(|p| {
            (
                p["program"].as_str().unwrap_or("?"),
                p["verified_insns"].as_u64().unwrap_or(0) as u32,
            )
        });
        rows.push(Row {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            release: v["kernel"].as_str().unwrap_or("?").to_string(),
            counts: VerifierCounts::from_loads(loads),
            load_ms: v["load_ms"].as_u64().unwrap_or(0),
        });
    }
    Ok(rows)
}

fn table(host: &Row, guests: &[Row]) -> String {
    let limit = f64::from(verifier::LIMIT);
    let mut s = String::from(
        "## Verifier work per kernel (`fare bench kernels`)\n\n\
         Instructions the kernel's verifier processed loading each program (`fare xdp \
         check`: nothing attached; the XDP program is a pipeline, the entry `fare_xdp` and \
         its stages, each verified on its own; ARN reception is a load-time flag, so each \
         XDP program is loaded twice), its share of the 1,000,000 limit (the larger of the \
         two loads), and its ratio to the host kernel's, measured in the same run. Guests \
         run under QEMU's TCG: their load times are emulation's, not the kernel's.\n\n\
         | kernel | release | program | count | with ARN reception | of 1M | x host | all loads |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in std::iter::once(host).chain(guests) {
        let ratio = |a: u32, b: Option<u32>| match (a, b) {
            (verifier::NOT_REPORTED, _) | (_, None | Some(verifier::NOT_REPORTED)) => {
                "-".to_string()
            }
            (a, Some(b)) => format!("{:.2}", f64::from(a) / f64::from(b)),
        };
        // Below the minimum the agent refuses the kernel; `fare xdp check` loaded it
        // with FARE_XDP_ANY_KERNEL=1 (scripts/kernels).
        let refused = Release::parse(&r.release).is_some_and(|k| k < kernel::MINIMUM);
        let name = if refused {
            format!(
                "{} (refused; loaded with {}=1)",
                r.name,
                kernel::ANY_KERNEL_ENV
            )
        } else {
            r.name.clone()
        };
        for (i, p) in r.counts.programs.iter().enumerate() {
            let largest = p.count.max(p.with_arn.unwrap_or(0));
            let share = match largest {
                verifier::NOT_REPORTED => "-".to_string(),
                n => format!("{:.1} %", f64::from(n) * 100.0 / limit),
            };
            let on_host = host.counts.get(&p.name);
            let x_host = match p.with_arn {
                Some(a) => format!(
                    "{}, {}",
                    ratio(p.count, on_host.map(|h| h.count)),
                    ratio(a, on_host.and_then(|h| h.with_arn))
                ),
                None => ratio(p.count, on_host.map(|h| h.count)),
            };
            let (kernel, release, loads) = if i == 0 {
                (
                    name.as_str(),
                    r.release.as_str(),
                    format!("{:.1} s", r.load_ms as f64 / 1000.0),
                )
            } else {
                ("", "", String::new())
            };
            s.push_str(&format!(
                "| {kernel} | {release} | {} | {} | {} | {share} | {x_host} | {loads} |\n",
                p.name,
                count(p.count),
                p.with_arn.map_or_else(|| "-".to_string(), count),
            ));
        }
    }
    s.push_str(
        "\n\"loaded, no count\": the kernel loaded the program but reports no count (before \
         Linux 5.16).\n",
    );
    s.push_str("\nCommand: `fare bench kernels` (root; boots each guest of `scripts/kernels`).\n");
    s
}

/// A count for the table ("loaded, no count" where the kernel does not report it).
fn count(n: u32) -> String {
    match n {
        verifier::NOT_REPORTED => "loaded, no count".to_string(),
        n => n.to_string(),
    }
}
