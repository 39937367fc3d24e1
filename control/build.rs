//! Build steps of the `fare` crate, one file per concern under build/:
//! - ebpf.rs: builds the XDP program (ebpf/fare-xdp) for the BPF target and embeds it.
//! - protos.rs: compiles the management API protobufs (control/proto/) with tonic/prost.
//! - p4runtime.rs: compiles the P4Runtime/P4Info protobufs (control/proto/p4/).

#[path = "build/ebpf.rs"]
mod ebpf;
#[path = "build/p4runtime.rs"]
mod p4runtime;
#[path = "build/protos.rs"]
mod protos;

fn main() {
    ebpf::build();
    protos::build();
    p4runtime::build();
}
