//! BGP: wire codec, session FSM, RIB and the FARE/DPF/suppression policy.
pub mod packet;
