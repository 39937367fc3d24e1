//! `fare lab`: emulated fabrics on this machine.
//!
//! A topology file becomes one network namespace per node, one veth pair per link shaped
//! to the (scaled) link capacity with tc, host namespaces behind the nodes that originate
//! prefixes, and one `fare agent` per node — with BGP sessions between them, or with the
//! groups `fare weights` computes installed as static groups. Then traffic, failures,
//! degradations and congestion, and a report of the measured split against the ideal one.
//!
//! ```text
//!  plan (pure: names, addresses, MACs, rates) -> up (ip/tc batches, agent configs, agents)
//!  state dir (/run/fare/lab/<lab>/) <- every command reads it; down needs only names
//!  traffic (UDP generator in host namespaces) -> stats (interface counters) -> report
//!                                  traffic_load (sim groups x traffic matrix) ┘
//!  model_check (live groups and sessions vs the model) <- up, fail/degrade/restore
//!  events (agents' JSON logs, typed) -> congest, report_data -> report_html (one page)
//! ```

/// `println!` for the lab's commands: a closed or full standard output is an error the
/// CLI reports as such (quietly for a closed pipe, as `fare show` does), never a panic.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::write_out(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes `text` to standard output; [`LabError::Output`] when it cannot.
pub(crate) fn write_out(text: &str) -> Result<(), LabError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(LabError::Output)
}

pub mod agents;
pub mod arn;
pub mod bmv2;
pub mod down;
pub mod events;
pub mod fabric_svg;
pub mod faults;
pub mod frr;
pub mod gaps;
pub mod gen;
pub mod history_svg;
pub mod mininet;
pub mod model_check;
pub mod plan;
pub mod report;
pub mod report_data;
pub mod report_html;
pub mod restart;
pub mod shaping;
pub mod state;
pub mod stats;
pub mod sys;
pub mod traffic;
pub mod traffic_load;
pub mod up;

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    #[error(transparent)]
    Sys(#[from] sys::SysError),
    #[error(transparent)]
    State(#[from] state::StateError),
    #[error(transparent)]
    Agents(#[from] agents::AgentsError),
    #[error("lab `{0}` is already up (fare lab down {0} removes it)")]
    AlreadyUp(String),
    #[error("agents did not start: {0}")]
    AgentFailed(String),
    /// Bad input from the command line (exit code 2 in the CLI).
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Standard output closed or full (the CLI exits quietly on a closed pipe).
    #[error("writing to standard output: {0}")]
    Output(std::io::Error),
    /// The lab runs, but not as asked (a split too far from the ideal one): exit code 1.
    #[error("{0}")]
    Check(String),
}
