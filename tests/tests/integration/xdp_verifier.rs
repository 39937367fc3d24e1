//! The verifier's budget of the XDP pipeline (docs/xdp.md, "A pipeline of stages"):
//! every program of the built-in object, loaded as the agent loads it (without and with
//! ARN reception), must stay under 60 % of the kernel's 1,000,000 instructions, so that
//! the next feature still fits beside it. Run on every kernel of `scripts/kernels test`
//! too. The counts themselves are in bench/RESULTS.md (`fare bench kernels`).
//!
//! Run: `cargo test -p fare-integration --test integration xdp_verifier:: -- --test-threads=1` (root).

use anyhow::{ensure, Result};
use fare::dp_xdp::{pins, verifier};
use fare_integration::xdp_lab::xdp_ready;
use std::path::Path;

/// The share of the limit no program may pass.
const MAX_SHARE: f64 = 0.60;

#[test]
fn every_xdp_program_under_60_percent_of_the_verifier_limit() -> Result<()> {
    let test = "every_xdp_program_under_60_percent_of_the_verifier_limit";
    if !xdp_ready(test) {
        return Ok(());
    }
    let node = format!("test-verifier-{}", std::process::id());
    let check = verifier::check_running(Path::new(pins::DEFAULT_ROOT), &node)?;
    let loads = check.counts.loads();
    // The entry and at least the full program, each loaded twice; the TC program.
    ensure!(loads.len() >= 5, "too few programs loaded: {loads:?}");
    let limit = (f64::from(verifier::LIMIT) * MAX_SHARE) as u32;
    for (program, count) in &loads {
        println!("Linux {}: {program} {count}", check.release);
        if *count == verifier::NOT_REPORTED {
            continue; // before Linux 5.16: loaded, no count
        }
        ensure!(
            *count < limit,
            "{program}: the verifier processed {count} instructions on Linux {}, past {} % \
             of its limit of {} (split the program further: docs/xdp.md)",
            check.release,
            MAX_SHARE * 100.0,
            verifier::LIMIT
        );
    }
    Ok(())
}
