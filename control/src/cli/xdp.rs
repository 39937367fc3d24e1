//! `fare xdp check`: does this kernel take fare's XDP program?

use fare_dp_xdp::{kernel, pins, verifier};
use std::path::PathBuf;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Check that this kernel runs fare's XDP data plane: its release against the
    /// minimum, then every program of the built-in object loaded (nothing attached; the
    /// XDP programs without and with ARN reception) with the instructions the kernel's
    /// verifier processed, of its limit of 1,000,000.
    /// Exit 1 when the kernel is older than the minimum or refuses a program.
    Check {
        /// bpffs directory for the scratch maps (removed afterwards).
        #[arg(long, default_value = pins::DEFAULT_ROOT)]
        pin_root: PathBuf,
        /// Print `{"kernel", "minimum", "supported", "programs": [{"program",
        /// "verified_insns"}], "load_ms"}` as JSON (load_ms: all the loads;
        /// verified_insns null where the kernel does not report it, before 5.16).
        #[arg(long)]
        json: bool,
    },
}

/// The kernel's limit of instructions processed per program load.
const VERIFIER_LIMIT: u32 = verifier::LIMIT;

pub fn run(c: Command) -> anyhow::Result<()> {
    let Command::Check { pin_root, json } = c;
    kernel::check().map_err(anyhow::Error::msg)?;
    let verifier::KernelCheck {
        release,
        counts,
        load_ms,
    } = verifier::check_running(&pin_root, &format!("check-{}", std::process::id()))?;
    let programs = counts.loads();
    if json {
        // null: loaded, the count not reported (before Linux 5.16).
        let list: Vec<_> = programs
            .iter()
            .map(|(p, n)| {
                let n = (*n != verifier::NOT_REPORTED).then_some(*n);
                serde_json::json!({"program": p, "verified_insns": n})
            })
            .collect();
        let out = serde_json::json!({
            "kernel": release,
            "minimum": kernel::MINIMUM.to_string(),
            "supported": true,
            "programs": list,
            "load_ms": load_ms,
        });
        crate::outln!("{out}")?;
        return Ok(());
    }
    crate::outln!("Linux {release}: supported (minimum {})", kernel::MINIMUM)?;
    crate::outln!(
        "{:<36} {:>14} {:>9}",
        "PROGRAM",
        "VERIFIED INSNS",
        "OF LIMIT"
    )?;
    for (p, n) in programs {
        if n == verifier::NOT_REPORTED {
            crate::outln!(
                "{p:<36} {:>14} {:>9}",
                "loaded",
                "(count not reported before 5.16)"
            )?;
            continue;
        }
        let share = f64::from(n) * 100.0 / f64::from(VERIFIER_LIMIT);
        crate::outln!("{p:<36} {n:>14} {share:>8.1}%")?;
    }
    crate::outln!("loaded in {load_ms} ms")?;
    Ok(())
}
