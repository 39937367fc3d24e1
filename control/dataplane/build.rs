//! Build steps of `fare-dataplane`, one file per concern under build/:
//! - ebpf.rs: builds the XDP program (ebpf/fare-xdp) for the BPF target and embeds it.
//! - p4runtime.rs: compiles the P4Runtime/P4Info protobufs (proto/p4/) with tonic/prost.

#[path = "build/ebpf.rs"]
mod ebpf;
#[path = "build/p4runtime.rs"]
mod p4runtime;

fn main() {
    ebpf::build();
    p4runtime::build();
}
