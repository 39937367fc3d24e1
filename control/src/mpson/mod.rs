//! FARE in multi-plane scale-out networks (draft-xu-idr-fare-in-mpson): RNICs as per-plane
//! stub BGP speakers, and the two route-table suppression techniques of its §4.
//!
//! - `scale`: offline count of the routes every RNIC, leaf and spine stores on a generated
//!   fabric, with no suppression, with aggregation + unreachable host routes (§4.1), with
//!   Prefix-ORF (§4.2) and with Prefix-ORF + FIB-Suppress (§4.2.1) (`fare bench mpson`).

pub mod scale;
