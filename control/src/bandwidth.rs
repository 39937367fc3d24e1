//! Path-bandwidth algebra: how a node derives the bandwidth of each of its routes and the
//! value it re-advertises (draft-xu-idr-fare and the white paper's averaging rule).

use serde::{Deserialize, Serialize};

/// Which propagation rule a node applies when it re-advertises a route.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// draft-xu-idr-fare: advertise the sum over equal-cost routes.
    #[default]
    Draft,
    /// White paper §2.2.1: sum over incoming routes / eligible outgoing interfaces,
    /// then min with the outgoing link.
    Averaged,
}
