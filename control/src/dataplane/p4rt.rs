//! `p4rt` data plane backend (to be implemented).
