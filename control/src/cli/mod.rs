//! The `fare` command line. One module per subcommand; this file only dispatches.
//!
//! Exit codes: 0 success, 1 runtime failure, 2 bad input (file, line and problem on
//! one line of stderr).

pub mod agent;
pub mod arn;
pub mod lab;
pub mod set;
pub mod show;
pub mod topo;
pub mod weights;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "fare",
    version,
    about = "Fully Adaptive Routing Ethernet: path bandwidth -> WCMP groups -> XDP/P4 data planes",
    long_about = "fare learns end-to-end path bandwidth (BGP Path Bandwidth extended community), \
turns it into weighted ECMP groups and programs an XDP or P4Runtime data plane. \
Run `fare COMMAND --help` for each command."
)]
pub struct Cli {
    /// Log filter (tracing env-filter syntax), e.g. `info`, `fare=debug`.
    #[arg(long, global = true, env = "FARE_LOG", default_value = "info")]
    pub log: String,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true)]
    pub log_json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Compute the WCMP group of every (node, prefix) of a topology offline.
    Weights(weights::Args),
    /// Check or generate topology files.
    #[command(subcommand)]
    Topo(topo::Command),
    /// Run the per-node agent (BGP speaker + data plane programming).
    Agent(agent::Args),
    /// Show the state of a running agent through its management socket.
    Show(show::Args),
    /// Change a running agent through its management socket (link bandwidth).
    #[command(subcommand)]
    Set(set::Command),
    /// Decode or send Adaptive Routing Notifications.
    #[command(subcommand)]
    Arn(arn::Command),
    /// Emulated fabrics on this machine (network namespaces).
    #[command(subcommand)]
    Lab(lab::Command),
    /// Run benchmarks and write bench/RESULTS.md.
    Bench(fare_bench::Args),
}

/// An error caused by the user's input: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

pub fn init_logging(filter: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests) is harmless: keep the first subscriber.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.log, cli.log_json);
    let result = match cli.command {
        Command::Weights(a) => weights::run(a),
        Command::Topo(c) => topo::run(c),
        Command::Agent(a) => agent::run(a),
        Command::Show(a) => show::run(a),
        Command::Set(c) => set::run(c),
        Command::Arn(c) => arn::run(c),
        Command::Lab(c) => lab::run(c),
        Command::Bench(a) => fare_bench::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let input = e.downcast_ref::<InputError>().is_some()
                || e.downcast_ref::<fare_model::yamlfile::FileError>()
                    .is_some();
            eprintln!("fare: {e:#}");
            if input {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
