//! IPv6 header: validation, flow key, hop-limit decrement (no checksum in IPv6).

use aya_ebpf::programs::XdpContext;

use crate::classify::{Classify, Fields};
use crate::consts::*;
use crate::packet::{ptr_at, Malformed};

/// What every routed packet needs: the destination (the LPM key) and the hop limit; the
/// classification fields are read by `V6` only when used (see `ipv4::V4`).
pub struct Ipv6 {
    /// The header as `parse` checked it (for the hop-limit decrement).
    pub hdr: *mut [u16; IPV6_HLEN / 2],
    pub dst: [u8; 16],
    pub hop_limit: u8,
    /// The next header (shares its 16-bit word with the hop limit).
    pub next_header: u8,
}

#[inline(always)]
pub fn parse(ctx: &XdpContext, offset: usize) -> Result<Ipv6, Malformed> {
    // The header as 16-bit words (aligned: see `packet::read_be16`).
    let hdr: *mut [u16; IPV6_HLEN / 2] = ptr_at(ctx, offset)?;
    // SAFETY: ptr_at checked the 40 bytes.
    let h = unsafe { &*hdr };
    let [b0, _] = h[0].to_ne_bytes();
    if b0 >> 4 != 6 {
        return Err(Malformed);
    }
    let payload_len = crate::bound::mask!(u16::from_be(h[2]) as u64, 0xffff) as usize;
    if ctx.data() + offset + IPV6_HLEN + payload_len > ctx.data_end() {
        return Err(Malformed);
    }
    let [next_header, hop_limit] = h[3].to_ne_bytes();
    // The destination's eight 16-bit words are its 16 bytes in packet order.
    let d = [h[12], h[13], h[14], h[15], h[16], h[17], h[18], h[19]];
    // SAFETY: [u16; 8] and [u8; 16] have the same size, and every bit pattern is valid.
    let dst: [u8; 16] = unsafe { core::mem::transmute(d) };
    Ok(Ipv6 {
        hdr,
        dst,
        hop_limit,
        next_header,
    })
}

/// The classification fields of the IPv6 packet in `ctx` (which `parse` accepted), read
/// when used (see `ipv4::V4`).
pub struct V6<'a>(pub &'a XdpContext);

impl Classify for V6<'_> {
    #[inline(always)]
    fn fields(&self) -> Fields {
        match crate::eth::l3_offset(self.0) {
            Ok(offset) => fields_at(self.0, offset),
            Err(_) => Fields::NONE,
        }
    }
}

/// `V6` with the header's offset known (the fast path keeps it from the parse).
pub struct V6At<'a> {
    pub ctx: &'a XdpContext,
    pub offset: usize,
}

impl Classify for V6At<'_> {
    #[inline(always)]
    fn fields(&self) -> Fields {
        fields_at(self.ctx, self.offset)
    }
}

/// The classification fields of the IPv6 header at `offset`.
#[inline(always)]
pub fn fields_at(ctx: &XdpContext, offset: usize) -> Fields {
    let Ok(hdr) = ptr_at::<[u16; IPV6_HLEN / 2]>(ctx, offset) else {
        return Fields::NONE;
    };
    // SAFETY: ptr_at checked the 40 bytes.
    let h = unsafe { &*hdr };
    let [b0, b1] = h[0].to_ne_bytes();
    let next_header = h[3].to_ne_bytes()[0];
    // Addresses as four u32 words each, in packet byte order (the bytes as in memory).
    let word = |i: usize| h[i] as u32 | (h[i + 1] as u32) << 16;
    // Extension headers are not walked: such packets hash on addresses and protocol.
    let l4_offset = offset + IPV6_HLEN;
    Fields {
        family: 6,
        // Traffic class: low 4 bits of octet 0, high 4 of octet 1; DSCP is its top 6.
        dscp: (((b0 & 0x0f) << 4) | (b1 >> 4)) >> 2,
        protocol: next_header,
        src: [word(4), word(6), word(8), word(10)],
        dst: [word(12), word(14), word(16), word(18)],
        ports: crate::flow::ports(ctx, l4_offset, next_header),
        l4_offset,
    }
}

#[inline(always)]
pub fn decrement_hop_limit(ctx: &XdpContext, offset: usize) -> Result<(), Malformed> {
    decrement_hop_limit_at(ptr_at(ctx, offset)?);
    Ok(())
}

/// `decrement_hop_limit` on a header `parse` checked.
#[inline(always)]
pub fn decrement_hop_limit_at(hdr: *mut [u16; IPV6_HLEN / 2]) {
    // SAFETY: the caller's bounds check covered the 40 bytes; the hop limit is the
    // second byte of word 3.
    unsafe {
        let [next_header, hop_limit] = (*hdr)[3].to_ne_bytes();
        (*hdr)[3] = u16::from_ne_bytes([next_header, hop_limit - 1]);
    }
}
