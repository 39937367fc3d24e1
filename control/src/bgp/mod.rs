//! BGP: wire codec, session FSM, RIB and the FARE/DPF/suppression policy.
pub mod agent;
pub mod dpf;
pub mod events;
pub mod fare;
pub mod fsm;
pub mod link;
pub mod neighbor;
pub mod packet;
pub mod rib;
pub mod socket;
pub mod speaker;
pub mod upa;

pub use packet::community;

pub use agent::run;
