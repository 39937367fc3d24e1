//! Builds the XDP program (ebpf/fare-xdp) for the BPF target and embeds it; the step
//! itself is build/ebpf.rs, which fare-bench's build script shares.

#[path = "build/ebpf.rs"]
mod ebpf;

fn main() {
    ebpf::build();
}
