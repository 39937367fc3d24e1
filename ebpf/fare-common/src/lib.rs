//! Map keys and values shared by the XDP program (`fare-xdp`) and the control plane.
//! One definition of every map type, `#[repr(C)]`, used by both sides.
#![no_std]
