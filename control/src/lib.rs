//! fare: Fully Adaptive Routing Ethernet — the `fare` command on top of the crates by layer.
//!
//! Data flows one way, and the crate graph makes the compiler enforce it:
//!
//! ```text
//!  fare-model (topology, bandwidth, wcmp, sim, forwarding: pure)
//!    <- fare-netdev (the host's links, neighbors, carrier)
//!    <- fare-bgp (codec, FSM, RIB, policy)
//!    <- fare-arn (codec, monitor, receiver)
//!    <- fare-dataplane (the trait, its shared checks, a chain of backends)
//!    <- fare-dp-xdp | fare-dp-kernel | fare-dp-p4 (<- fare-p4runtime: the client)
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
pub use fare_dp_kernel as dp_kernel;
pub use fare_dp_p4 as dp_p4;
pub use fare_dp_xdp as dp_xdp;
pub use fare_lab as lab;
pub use fare_model::{
    bandwidth, forwarding, mpson, parallel, resilient, sim, topology, wcmp, yamlfile,
};
pub use fare_netdev as netdev;
pub use fare_p4runtime as p4runtime;

pub mod cli;
