//! `fare bench wcmp`: group reduction speed and quality.

use super::{command_line, Rng};
use fare_model::wcmp;
use std::fmt::Write;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Random groups per (members, limit) case.
    #[arg(long, default_value_t = 20_000)]
    groups: usize,
    /// Random small cases compared with exhaustive search.
    #[arg(long, default_value_t = 2_000)]
    exhaustive: usize,
    /// Seed of the random bandwidths.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Port speeds with partial-lane failures (1/4, 1/2, 3/4 of the lanes lost).
fn random_bandwidth(rng: &mut Rng) -> f64 {
    let speed = [100.0, 200.0, 400.0, 800.0][rng.below(4) as usize];
    let lanes = [1.0, 1.0, 1.0, 0.75, 0.5, 0.25][rng.below(6) as usize];
    speed * lanes
}

fn stats(v: &[f64]) -> (f64, f64) {
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    (mean, v.iter().copied().fold(1.0, f64::max))
}

pub fn run(args: Args) -> anyhow::Result<String> {
    let mut md = String::new();
    writeln!(md, "## WCMP group reduction (`wcmp`)\n")?;
    writeln!(md, "Command: `{}` (release build)\n", command_line())?;
    writeln!(
        md,
        "Random groups of port speeds 100-800G with partial-lane failures; limit = max sum of \
         weights. Baseline in the same run: proportional rounding (each share of the limit \
         rounded, at least 1). delta = max_i (w'_i * sum w) / (w_i * sum w').\n"
    )?;
    writeln!(
        md,
        "| members | limit | fare groups/s | rounding groups/s | fare mean / max delta | rounding mean / max delta |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|")?;
    let mut rng = Rng::new(args.seed);
    for members in [4usize, 16, 64] {
        for limit in [16u32, 64, 256, 4096] {
            if (limit as usize) < members {
                continue;
            }
            let groups: Vec<Vec<f64>> = (0..args.groups)
                .map(|_| (0..members).map(|_| random_bandwidth(&mut rng)).collect())
                .collect();
            let t = Instant::now();
            let ours: Vec<f64> = groups
                .iter()
                .map(|g| wcmp::weights(g, Some(limit)).delta)
                .collect();
            let ours_s = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let rounded: Vec<Vec<u32>> = groups
                .iter()
                .map(|g| wcmp::proportional_rounding(g, limit))
                .collect();
            let base_s = t.elapsed().as_secs_f64();
            let base: Vec<f64> = groups
                .iter()
                .zip(&rounded)
                .map(|(g, w)| wcmp::delta(g, w))
                .collect();
            let (om, ox) = stats(&ours);
            let (bm, bx) = stats(&base);
            writeln!(
                md,
                "| {members} | {limit} | {:.0} | {:.0} | {om:.4} / {ox:.4} | {bm:.4} / {bx:.4} |",
                args.groups as f64 / ours_s.max(1e-9),
                args.groups as f64 / base_s.max(1e-9),
            )?;
        }
    }

    // Against the optimum, found by trying every weight vector.
    let mut ratio = Vec::new();
    let mut base_ratio = Vec::new();
    for _ in 0..args.exhaustive {
        let members = 2 + rng.below(3) as usize;
        let limit = members as u32 + rng.below(12) as u32;
        let g: Vec<f64> = (0..members).map(|_| 1.0 + rng.unit() * 99.0).collect();
        let best = wcmp::exhaustive_best_delta(&g, limit);
        ratio.push(wcmp::weights(&g, Some(limit)).delta / best);
        base_ratio.push(wcmp::delta(&g, &wcmp::proportional_rounding(&g, limit)) / best);
    }
    let (rm, rx) = stats(&ratio);
    let (bm, bx) = stats(&base_ratio);
    let exact = ratio.iter().filter(|&&r| r <= 1.0 + 1e-9).count();
    writeln!(
        md,
        "\nAgainst exhaustive search ({} random groups of 2-4 members with real-valued \
         bandwidths, limit = members .. members+11): fare's delta / optimal delta mean \
         {rm:.6}, max {rx:.6} (optimal in {exact} of {}); proportional rounding: mean \
         {bm:.4}, max {bx:.4}.",
        args.exhaustive, args.exhaustive
    )?;
    Ok(md)
}
