//! Every root integration test in one binary (one link step, one file on disk), a
//! module per area. Run one module: `cargo test -p fare-integration --test integration
//! bgp_fabric:: -- --test-threads=1`. Tests share the machine's network stack: run them
//! one at a time.

mod agent_cli;
mod agent_config_proptest;
mod agent_kernel;
mod agent_xdp;
mod agent_xdp_limits;
mod analyze_cli;
mod arn_lab;
mod arn_multicast;
mod arn_propagation;
mod arn_shift;
mod arn_transport;
mod arn_xdp;
mod arn_xdp_last_member;
mod arn_xdp_proptest;
mod bgp_agent_frr;
mod bgp_bird;
mod bgp_fabric;
mod bgp_fib_suppress;
mod bgp_frr;
mod bgp_frr_security;
mod bgp_frr_transit;
mod bgp_gobgp;
mod bgp_orf;
mod bgp_rfc7606;
mod bgp_session_fuzz;
mod chaos_soak;
mod dpf_red_blue;
mod lab_bandwidth;
mod lab_bmv2;
mod lab_demo;
mod lab_differential;
mod lab_events;
mod lab_report;
mod lab_restart;
mod lab_split;
mod lab_updown;
mod metrics_prometheus;
mod mgmt_api;
mod mpson_planes;
mod mpson_upa;
mod p4_bmv2;
mod p4_dpf;
mod p4_reconcile;
mod p4_sai;
mod p4_session;
mod package;
mod xdp_agent;
mod xdp_fixtures;
mod xdp_forwarding;
mod xdp_proptest;
mod xdp_queue;
mod xdp_routes;
mod xdp_steer;
