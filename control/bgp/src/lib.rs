//! fare-bgp: BGP for FARE: wire codec, session FSM, RIB and the FARE/DPF/suppression
//! policy. It uses the model (`fare-model`) and nothing else of fare; the agent wires it
//! to a data plane (`fare-agent`'s `bgp_task`).
pub mod dpf;
pub mod events;
pub mod fare;
pub mod fsm;
pub mod neighbor;
pub mod packet;
pub mod rib;
pub mod socket;
pub mod speaker;
pub mod upa;

pub use packet::community;
