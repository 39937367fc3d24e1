//! IPv6 header: validation, flow key, hop-limit decrement (no checksum in IPv6).

use aya_ebpf::programs::XdpContext;

use crate::classify::Fields;
use crate::consts::*;
use crate::flow::FlowKey;
use crate::packet::{ptr_at, Malformed};

pub struct Ipv6 {
    pub dst: [u8; 16],
    pub hop_limit: u8,
    pub flow: FlowKey,
    /// For DPF flow classification.
    pub fields: Fields,
}

#[inline(always)]
pub fn parse(ctx: &XdpContext, offset: usize) -> Result<Ipv6, Malformed> {
    let hdr: *const [u8; IPV6_HLEN] = ptr_at(ctx, offset)?;
    // SAFETY: ptr_at checked the 40 bytes.
    let h = unsafe { &*hdr };
    if h[0] >> 4 != 6 {
        return Err(Malformed);
    }
    let payload_len = u16::from_be_bytes([h[4], h[5]]) as usize;
    if ctx.data() + offset + IPV6_HLEN + payload_len > ctx.data_end() {
        return Err(Malformed);
    }
    let next_header = h[6];
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src.copy_from_slice(&h[8..24]);
    dst.copy_from_slice(&h[24..40]);
    // Extension headers are not walked: such packets hash on addresses and protocol.
    let ports = crate::flow::ports(ctx, offset + IPV6_HLEN, next_header);
    let words = |a: &[u8; 16]| {
        let w = |i: usize| u32::from_ne_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
        [w(0), w(4), w(8), w(12)]
    };
    Ok(Ipv6 {
        dst,
        hop_limit: h[7],
        flow: FlowKey::v6(&src, &dst, next_header, ports),
        fields: Fields {
            family: 6,
            // Traffic class: low 4 bits of octet 0, high 4 of octet 1; DSCP is its top 6.
            dscp: (((h[0] & 0x0f) << 4) | (h[1] >> 4)) >> 2,
            protocol: next_header,
            src: words(&src),
            dst: words(&dst),
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
