//! The XDP object built by control/dp-xdp/build/ebpf.rs, when bpf-linker was available.

/// The eBPF object (ELF), or None when this binary was built without it.
pub fn bytes() -> Option<&'static [u8]> {
    #[cfg(fare_xdp_embedded)]
    {
        Some(aya::include_bytes_aligned!(concat!(
            env!("OUT_DIR"),
            "/fare-xdp.o"
        )))
    }
    #[cfg(not(fare_xdp_embedded))]
    {
        None
    }
}

/// Why the xdp backend cannot start in a build without the object.
pub const MISSING: &str = "this fare binary was built without the XDP program (bpf-linker was \
missing at build time): run scripts/setup to install bpf-linker, then rebuild";
