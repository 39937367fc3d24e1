//! IPv4 header: validation, flow key, TTL decrement with incremental checksum.

use aya_ebpf::programs::XdpContext;

use crate::classify::{Classify, Fields};
use crate::consts::*;
use crate::packet::{ptr_at, Malformed};

/// What every routed packet needs: the destination (the LPM key) and the TTL. The
/// classification fields (source, ports, protocol, DSCP) are read by `V4` only when the
/// route or group uses them.
pub struct Ipv4 {
    /// The header as `parse` checked it (for the TTL decrement).
    pub hdr: *mut [u16; IPV4_MIN_HLEN / 2],
    pub dst: [u8; 4],
    pub ttl: u8,
    /// Shares its 16-bit word with the TTL: free to read (the fast path's ARN check).
    pub protocol: u8,
}

#[inline(always)]
pub fn parse(ctx: &XdpContext, offset: usize) -> Result<Ipv4, Malformed> {
    // The header as ten 16-bit words: half the loads of a byte-wise read (the frame
    // starts 2-byte aligned and the header at an even offset, see `packet::read_be16`).
    let hdr: *mut [u16; IPV4_MIN_HLEN / 2] = ptr_at(ctx, offset)?;
    // SAFETY: ptr_at checked the 20 bytes.
    let h = unsafe { &*hdr };
    let version_ihl = h[0].to_ne_bytes()[0];
    if version_ihl >> 4 != 4 {
        return Err(Malformed);
    }
    let ihl = ((version_ihl & 0x0f) as usize) * 4;
    if ihl < IPV4_MIN_HLEN {
        return Err(Malformed);
    }
    let total_len = crate::bound::mask!(u16::from_be(h[1]) as u64, 0xffff) as usize;
    // The datagram must fit in the frame (padding after it is fine) and hold its header.
    if total_len < ihl || ctx.data() + offset + total_len > ctx.data_end() {
        return Err(Malformed);
    }
    let [ttl, protocol] = h[4].to_ne_bytes();
    // Addresses as u32 in packet byte order (the bytes as they are in memory).
    let dst = h[8] as u32 | (h[9] as u32) << 16;
    Ok(Ipv4 {
        hdr,
        dst: dst.to_ne_bytes(),
        ttl,
        protocol,
    })
}

/// The classification fields of the IPv4 packet in `ctx` (which `parse` accepted), read
/// from the packet when a route, group or the ARN receiver asks for them: a spray-mode
/// group of a route without colors or steering never does. The header's offset is read
/// again from the frame (see `eth::l3_offset`) rather than kept from the parse.
pub struct V4<'a>(pub &'a XdpContext);

impl Classify for V4<'_> {
    #[inline(always)]
    fn fields(&self) -> Fields {
        match crate::eth::l3_offset(self.0) {
            Ok(offset) => fields_at(self.0, offset),
            Err(_) => Fields::NONE,
        }
    }
}

/// `V4` with the header's offset known (the fast path keeps it from the parse).
pub struct V4At<'a> {
    pub ctx: &'a XdpContext,
    pub offset: usize,
}

impl Classify for V4At<'_> {
    #[inline(always)]
    fn fields(&self) -> Fields {
        fields_at(self.ctx, self.offset)
    }
}

/// The classification fields of the IPv4 header at `offset`.
#[inline(always)]
pub fn fields_at(ctx: &XdpContext, offset: usize) -> Fields {
    let Ok(hdr) = ptr_at::<[u16; IPV4_MIN_HLEN / 2]>(ctx, offset) else {
        return Fields::NONE;
    };
    // SAFETY: ptr_at checked the 20 bytes.
    let h = unsafe { &*hdr };
    let [version_ihl, tos] = h[0].to_ne_bytes();
    let ihl = ((version_ihl & 0x0f) as usize) * 4;
    let frag = u16::from_be(h[3]);
    let protocol = h[4].to_ne_bytes()[1];
    let src = h[6] as u32 | (h[7] as u32) << 16;
    let dst = h[8] as u32 | (h[9] as u32) << 16;
    // Ports only from unfragmented datagrams, so all fragments hash alike.
    let whole = frag & (IPV4_MF | IPV4_OFFSET_MASK) == 0;
    let l4_offset = if whole { offset + (ihl & 0x3c) } else { 0 };
    let ports = if whole {
        crate::flow::ports(ctx, l4_offset, protocol)
    } else {
        0
    };
    Fields {
        family: 4,
        dscp: tos >> 2,
        protocol,
        src: [src, 0, 0, 0],
        dst: [dst, 0, 0, 0],
        ports,
        l4_offset,
    }
}

/// Decrements the TTL and patches the header checksum incrementally (RFC 1624), as the
/// kernel's ip_decrease_ttl: the TTL is the high byte of its 16-bit word, so the sum
/// grows by 0x0100 in network order. Both words are read and written as native 16-bit
/// words: the one's complement sum is the same in either byte order (RFC 1071), so the
/// addend is 0x0100 byte-swapped, and the TTL (> 1 here) is the word's first byte.
#[inline(always)]
pub fn decrement_ttl(ctx: &XdpContext, offset: usize) -> Result<(), Malformed> {
    decrement_ttl_at(ptr_at(ctx, offset)?);
    Ok(())
}

/// `decrement_ttl` on a header `parse` checked.
#[inline(always)]
pub fn decrement_ttl_at(hdr: *mut [u16; IPV4_MIN_HLEN / 2]) {
    // SAFETY: the caller's bounds check covered the 20 bytes (TTL, protocol, checksum
    // are words 4 and 5).
    unsafe {
        let [ttl, protocol] = (*hdr)[4].to_ne_bytes();
        (*hdr)[4] = u16::from_ne_bytes([ttl - 1, protocol]);
        let sum = (*hdr)[5] as u32 + u16::from_be(0x0100) as u32;
        (*hdr)[5] = (sum + (sum >> 16)) as u16;
    }
}
