//! Fabric model and YAML loader (`topologies/`).
