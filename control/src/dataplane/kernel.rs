//! `kernel` data plane backend (to be implemented).
