//! A P4Runtime client that knows no P4 program; the profiles (`fare-dp-p4`) build on it.
//!
//! - `proto`: the generated P4Runtime v1 / P4Info types.
//! - `p4info`: the loaded P4Info with lookups by name (never hard-coded ids).
//! - `entities`: fields resolved by name, canonical byte strings, entity and update builders.
//! - `client`: the P4Runtime client (arbitration, pipeline, Write/Read, packet I/O, errors).
//! - `fake` (feature `fake`, and in tests): a P4Runtime target in memory.

pub mod client;
pub mod entities;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod p4info;
pub mod proto;
