//! `p4rt` data plane backend: a switch programmed through P4Runtime (BMv2
//! `simple_switch_grpc`, or a Tofino-style target running the same P4Info names).
//!
//! - `proto`: the generated P4Runtime v1 / P4Info types.
//! - `p4info`: the loaded P4Info with lookups by name (never hard-coded ids).
//! - `client`: the P4Runtime client (arbitration, pipeline, Write/Read, packet I/O, errors).
//! - `session`: the session a profile keeps with its switch (pipeline push, reconnect
//!   with backoff, mastership lost and regained), one rule for both profiles.
//! - `program`: fare.p4's objects resolved by name, and builders of every entity written.
//! - `dpf`: the DPF part of them (flow rules, per-color groups, fallback).
//! - `backend`: the `Dataplane` implementation (make-before-break groups, reconcile).
//! - `responses`: the client's parsers of a switch's answers, from wire bytes (fuzzing).
//! - `sai`: the SAI-P4 (PINS) profile: WCMP groups in SAI-P4's tables.
//! - `arn_setup`: the agent's `arn:` block written into the pipeline's ARN tables.

pub mod arn_setup;
pub mod backend;
pub mod client;
pub mod config;
pub mod dpf;
#[cfg(test)]
pub(crate) mod fake;
pub mod p4info;
pub mod program;
pub mod proto;
pub mod responses;
pub mod sai;
pub(crate) mod session;

pub use backend::{GroupForm, P4RuntimeDataplane, P4RuntimeOptions, DEFAULT_ARN_HOLD};
pub use program::QueueThresholds;
