//! `fare topo check FILE` and `fare topo gen ...`.

use super::InputError;
use fare_model::topology::{self, gen};
use std::path::PathBuf;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Validate a topology file; on error print FILE:LINE: problem and exit 2.
    Check {
        /// Topology YAML file.
        file: PathBuf,
        /// Print `{"file", "ok", "name", "nodes", "links", "summary"}` as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Generate a fabric as topology YAML (for benchmarks and experiments).
    #[command(subcommand)]
    Gen(Gen),
}

#[derive(clap::Subcommand, Debug)]
pub enum Gen {
    /// 3-stage Clos (draft-xu-idr-fare Figure 1): every leaf linked to every spine.
    Clos3 {
        /// Leaves.
        #[arg(long, default_value_t = 8)]
        leaves: u32,
        /// Spines.
        #[arg(long, default_value_t = 4)]
        spines: u32,
        /// Capacity of every link, Gbps.
        #[arg(long, default_value_t = 100.0)]
        gbps: f64,
        /// Parallel links per leaf-spine pair.
        #[arg(long, default_value_t = 1)]
        parallel: u32,
        #[command(flatten)]
        out: Output,
    },
    /// 5-stage Clos (draft-xu-idr-fare Figure 2): PoDs of leaves and spines, spine k of
    /// every PoD linked to the super-spines of plane k.
    Clos5 {
        /// PoDs.
        #[arg(long, default_value_t = 8)]
        pods: u32,
        /// Leaves per PoD.
        #[arg(long, default_value_t = 4)]
        leaves: u32,
        /// Spines per PoD = PoD-interconnect planes.
        #[arg(long, default_value_t = 4)]
        planes: u32,
        /// Super-spines per plane.
        #[arg(long, default_value_t = 4)]
        super_spines: u32,
        /// Capacity of every link, Gbps.
        #[arg(long, default_value_t = 400.0)]
        gbps: f64,
        #[command(flatten)]
        out: Output,
    },
    /// Multi-plane scale-out fabric of RNICs (draft-xu-idr-fare-in-mpson Figure 1); the
    /// defaults are 100,000 GPUs on 4 planes of 512 x 100G switches.
    Multiplane {
        #[command(flatten)]
        fabric: gen::MultiPlane,
        #[command(flatten)]
        out: Output,
    },
}

#[derive(clap::Args, Debug)]
pub struct Output {
    /// Write here instead of standard output.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Check { file, json } => {
            let t = topology::load(&file)?;
            if json {
                let v = serde_json::json!({"file": file.display().to_string(), "ok": true,
                    "name": t.name, "nodes": t.nodes.len(), "links": t.links.len(),
                    "summary": t.summary()});
                crate::outln!("{v}")?;
            } else {
                crate::outln!("{}: ok: {}", file.display(), t.summary())?;
            }
            Ok(())
        }
        Command::Gen(g) => {
            let (t, out) = match g {
                Gen::Clos3 {
                    leaves,
                    spines,
                    gbps,
                    parallel,
                    out,
                } => (gen::clos3(leaves, spines, gbps, parallel), out),
                Gen::Clos5 {
                    pods,
                    leaves,
                    planes,
                    super_spines,
                    gbps,
                    out,
                } => (gen::clos5(pods, leaves, planes, super_spines, gbps), out),
                Gen::Multiplane { fabric, out } => (gen::multiplane(&fabric), out),
            };
            // Refused before anything is written: `topo check` would refuse the file.
            gen::check(&t).map_err(InputError)?;
            let yaml = t.to_yaml();
            match out.output {
                Some(path) => {
                    std::fs::write(&path, yaml).map_err(|e| {
                        InputError(format!("{}: cannot write: {e}", path.display()))
                    })?;
                    eprintln!("{}: {}", path.display(), t.summary());
                }
                None => super::write_out(yaml.as_bytes())?,
            }
            Ok(())
        }
    }
}
