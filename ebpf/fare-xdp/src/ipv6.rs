//! IPv6 header: validation, flow key, hop-limit decrement (no checksum in IPv6).

use aya_ebpf::programs::XdpContext;

use crate::classify::Fields;
use crate::consts::*;
use crate::packet::{ptr_at, Malformed};

pub struct Ipv6 {
    pub dst: [u8; 16],
    pub hop_limit: u8,
    /// For DPF flow classification.
    pub fields: Fields,
}

#[inline(always)]
pub fn parse(ctx: &XdpContext, offset: usize) -> Result<Ipv6, Malformed> {
    // The header as 16-bit words (aligned: see `packet::read_be16`).
    let hdr: *const [u16; IPV6_HLEN / 2] = ptr_at(ctx, offset)?;
    // SAFETY: ptr_at checked the 40 bytes.
    let h = unsafe { &*hdr };
    let [b0, b1] = h[0].to_ne_bytes();
    if b0 >> 4 != 6 {
        return Err(Malformed);
    }
    let payload_len = u16::from_be(h[2]) as usize;
    if ctx.data() + offset + IPV6_HLEN + payload_len > ctx.data_end() {
        return Err(Malformed);
    }
    let [next_header, hop_limit] = h[3].to_ne_bytes();
    // Addresses as four u32 words each, in packet byte order (the bytes as in memory).
    let word = |i: usize| h[i] as u32 | (h[i + 1] as u32) << 16;
    let src = [word(4), word(6), word(8), word(10)];
    let dst = [word(12), word(14), word(16), word(18)];
    let mut dst_bytes = [0u8; 16];
    for (i, w) in dst.iter().enumerate() {
        dst_bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
    }
    // Extension headers are not walked: such packets hash on addresses and protocol.
    let ports = crate::flow::ports(ctx, offset + IPV6_HLEN, next_header);
    Ok(Ipv6 {
        dst: dst_bytes,
        hop_limit,
        fields: Fields {
            family: 6,
            // Traffic class: low 4 bits of octet 0, high 4 of octet 1; DSCP is its top 6.
            dscp: (((b0 & 0x0f) << 4) | (b1 >> 4)) >> 2,
            protocol: next_header,
            src,
            dst,
            ports,
            l4_offset: offset + IPV6_HLEN,
        },
    })
}

#[inline(always)]
pub fn decrement_hop_limit(ctx: &XdpContext, offset: usize) -> Result<(), Malformed> {
    let hop: *mut u8 = ptr_at(ctx, offset + 7)?;
    // SAFETY: bounds-checked by ptr_at.
    unsafe { *hop -= 1 };
    Ok(())
}
