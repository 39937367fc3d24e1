//! Builds the benchmark-only eBPF object (ebpf/fare-bench-xdp: minimal forwarder, traffic
//! generator, sink) with fare-dp-xdp's eBPF build step and embeds it here, so that the
//! product crates carry only the production XDP program.

#[path = "../dp-xdp/build/ebpf.rs"]
mod ebpf;

fn main() {
    ebpf::build_crate("fare-bench-xdp", "fare_bench_xdp_embedded");
}
