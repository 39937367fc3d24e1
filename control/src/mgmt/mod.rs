//! Management API (gRPC on a unix socket) served by the agent and used by `fare show`.
