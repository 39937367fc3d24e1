//! `xdp` data plane backend (to be implemented).
