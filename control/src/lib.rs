//! fare: Fully Adaptive Routing Ethernet — the `fare` command on top of the crates by layer.
//!
//! Data flows one way, and the crate graph makes the compiler enforce it:
//!
//! ```text
//!  fare-model (topology, bandwidth, wcmp, sim, forwarding: pure)
//!    <- fare-bgp (codec, FSM, RIB, policy)
//!    <- fare-arn (codec, monitor, receiver)
//!    <- fare-dataplane (trait; XDP, kernel, P4Runtime backends)
//!    <- fare-agent (configuration, wiring, management API, metrics)
//!    <- fare-lab (fabrics in namespaces)  <- fare-bench (harnesses)
//!    <- fare (this crate: the command line)
//! ```
//!
//! The crates are re-exported under their layer names (`fare::bgp`, `fare::dataplane`...)
//! for the integration tests and tools built on this crate.

pub use fare_agent as agent;
pub use fare_agent::mgmt;
pub use fare_arn as arn;
#[cfg(feature = "bench")]
pub use fare_bench as bench;
pub use fare_bgp as bgp;
pub use fare_dataplane as dataplane;
pub use fare_lab as lab;
pub use fare_model::{
    bandwidth, forwarding, mpson, parallel, resilient, sim, topology, wcmp, yamlfile,
};

pub mod cli;
