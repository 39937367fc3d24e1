//! Management API (gRPC on a unix socket) served by the agent and used by `fare show`.
//!
//! The service is defined in `control/agent/proto/fare.proto` (package `fare.mgmt.v1`).
//! The socket is local-only by default: its parent directory is created, a stale socket
//! file is replaced, and the socket is made mode 0600 (root only).

pub mod client;
pub mod json;
pub mod queries;
pub mod server;
pub mod tls;
pub mod tls_client;
pub mod views;
pub mod watch;

/// Generated protobuf types and the tonic client/server.
pub mod pb {
    #![allow(clippy::all, clippy::pedantic)]
    tonic::include_proto!("fare.mgmt.v1");
}

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum MgmtError {
    #[error("no management socket at {0} (is the agent running?)")]
    NoSocket(PathBuf),
    #[error("cannot connect to {path} (is the agent running?): {source}")]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("another agent is already serving {0}")]
    InUse(PathBuf),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS: {0}")]
    Tls(String),
    /// The agent refused this client (its certificate, or none), in one line.
    #[error("{0}")]
    Refused(String),
    #[error("gRPC transport: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("request failed: {0}")]
    Status(#[from] tonic::Status),
}
