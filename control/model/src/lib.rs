//! fare-model: what FARE computes, with no I/O but reading a topology file. The agent,
//! the BGP speaker, the lab and `fare weights` all use it; it uses none of them (the
//! compiler enforces the one-way flow).
//!
//! - [`topology`]: fabrics (nodes, roles, links, prefixes) and their YAML format;
//!   [`role`]: where a node sits in the Clos.
//! - [`analyze`]: every single failure (and sampled pairs) and what it does to the groups.
//! - [`bandwidth`]: the path-bandwidth algebra of draft-xu-idr-fare and the white
//!   paper's averaging, and the wire encoding of the value.
//! - [`wcmp`]: bandwidths -> integer weights, optimal reduction to a group-size limit,
//!   replicated members and the spray order.
//! - [`resilient`]: per-flow bucket tables whose weight changes move only the flows the
//!   new weights require.
//! - [`sim`]: every node's group for every prefix once BGP has converged.
//! - [`forwarding`]: what a data plane is given (groups, members, DPF colors) and the
//!   rules every data plane keeps (group-size limits, the last active member).
//! - [`bgp_ids`]: the AS numbers and BGP identifiers a speaker may be configured with.
//! - [`mpson`]: route-table sizes of multi-plane fabrics under each suppression technique.

pub mod analyze;
pub mod bandwidth;
pub mod bgp_ids;
pub mod forwarding;
pub mod link_bandwidth;
pub mod mpson;
pub mod parallel;
pub mod resilient;
pub mod rng;
pub mod role;
pub mod sim;
pub mod topology;
pub mod wcmp;
pub mod yamlfile;
