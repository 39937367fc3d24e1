//! Offline fabric-wide propagation (no root, no daemons).
