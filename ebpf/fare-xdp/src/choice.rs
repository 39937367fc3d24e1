//! What choosing a member yields: the next hop, or where the search for one stopped.
//! Its own module so that the flowlet code and the forwarding code that calls it both
//! use these without importing each other.

use fare_common::{GroupRow, Member};

/// The member a packet goes to: its MEMBERS row (read in place, not copied), its index
/// in the group and this CPU's row of the group (where its counters are).
pub struct NextHop {
    pub row: *mut GroupRow,
    pub index: u32,
    pub member: &'static Member,
}

/// What `first_choice` found.
pub enum Choice {
    /// The start slot's member, in service (the cursor has moved past it).
    Member(NextHop),
    /// The start slot's member is out of service (nothing changed yet).
    OutOfService(Start),
    /// No member: the group is empty, unknown, or not in a mode this caller handles.
    Nothing,
}

/// Where `first_choice` started: this CPU's row, the group's slot count and mode, the
/// start slot and its member index.
pub struct Start {
    pub(crate) row: *mut GroupRow,
    pub(crate) n: u32,
    pub(crate) flow_mode: bool,
    pub(crate) slot: u32,
    pub(crate) index: u32,
}

impl Start {
    /// A flow-mode (or flowlet-mode) start at `slot`, whose member `index` is out.
    #[inline(always)]
    pub fn flow(row: *mut GroupRow, n: u32, slot: u32, index: u32) -> Start {
        Start {
            row,
            n,
            flow_mode: true,
            slot,
            index,
        }
    }
}
