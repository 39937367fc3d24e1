//! Bounds-checked access to packet bytes: every read or write goes through `ptr_at`,
//! which the verifier can follow (offset + size <= data_end).

use aya_ebpf::programs::XdpContext;

/// The packet is too short for a header it claims to have, or a header field is invalid.
pub struct Malformed;

/// Pointer to a `T` at `offset`, or `Malformed` when the packet is too short.
#[inline(always)]
pub fn ptr_at<T>(ctx: &XdpContext, offset: usize) -> Result<*mut T, Malformed> {
    let start = ctx.data();
    let end = ctx.data_end();
    if start + offset + core::mem::size_of::<T>() > end {
        return Err(Malformed);
    }
    Ok((start + offset) as *mut T)
}

/// Reads a big-endian u16 at `offset` (even: one 16-bit load). Every XDP mode hands the
/// program a frame that starts 2-byte aligned, and the parsers read 16-bit fields only at
/// even offsets (Ethernet, VLAN, IPv4/IPv6 and L4 headers all have even lengths), so
/// their loads are aligned; the program also reads 16-bit words of the IPv4 header and
/// of the MAC fields this way.
#[inline(always)]
pub fn read_be16(ctx: &XdpContext, offset: usize) -> Result<u16, Malformed> {
    let p: *const u16 = ptr_at(ctx, offset)?;
    // SAFETY: ptr_at checked that the two bytes are inside the packet.
    Ok(u16::from_be(unsafe { *p }))
}

/// Frame length in bytes (for the byte counters).
#[inline(always)]
pub fn len(ctx: &XdpContext) -> u64 {
    (ctx.data_end() - ctx.data()) as u64
}
