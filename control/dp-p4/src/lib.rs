//! The P4 data planes: a switch programmed through P4Runtime (`fare-p4runtime`), in one
//! of two profiles on one skeleton.
//!
//! - `skeleton`: what both profiles share: install runs, next-hop MACs, the session
//!   brought up to date before writing, one result per group, the same-forwarding rule.
//! - `session`: the session a profile keeps with its switch (pipeline push, reconnect
//!   with backoff, mastership lost and regained), one rule for both profiles.
//! - `fare`: the fare.p4 profile (BMv2 `simple_switch_grpc`, or a Tofino-style target
//!   running the same P4Info names): make-before-break groups, replay, adoption.
//! - `program`: fare.p4's objects resolved by name, and builders of every entity written.
//! - `dpf`: the DPF part of them (flow rules, per-color groups, fallback).
//! - `responses`: parsers of a switch's answers to fare.p4's profile, from wire bytes
//!   (fuzzing).
//! - `sai`: the SAI-P4 (PINS) profile: WCMP groups in SAI-P4's tables.
//! - `arn_setup`: the agent's `arn:` block written into the pipeline's ARN tables.
//! - `config`: the `p4runtime` data plane's configuration keys.

pub mod arn_setup;
pub mod config;
pub mod dpf;
pub mod fare;
pub mod program;
pub mod responses;
pub mod sai;
pub(crate) mod session;
mod skeleton;

pub use fare::{GroupForm, P4RuntimeDataplane, P4RuntimeOptions, DEFAULT_ARN_HOLD};
pub use program::QueueThresholds;
