//! The host's network devices, the one home of fare's link and neighbor syscalls:
//!
//! - `links`: interfaces by name and index, their MACs and addresses (ioctl, getifaddrs).
//! - `neighbor`: next-hop MACs from the kernel's ARP/NDP table, resolving a missing one.
//! - `carrier`: interface speed, link events (rtnetlink) and a fast carrier poll (ethtool).
//! - `host`: what the data planes ask about next hops, as a trait: the kernel, or a fake.

pub mod carrier;
pub mod host;
pub mod links;
pub mod neighbor;
