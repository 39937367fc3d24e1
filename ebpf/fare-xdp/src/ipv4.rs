//! IPv4 header: validation, flow key, TTL decrement with incremental checksum.

use aya_ebpf::programs::XdpContext;

use crate::classify::Fields;
use crate::consts::*;
use crate::flow::FlowKey;
use crate::packet::{ptr_at, Malformed};

pub struct Ipv4 {
    pub dst: [u8; 4],
    pub ttl: u8,
    pub flow: FlowKey,
    /// For DPF flow classification.
    pub fields: Fields,
}

#[inline(always)]
pub fn parse(ctx: &XdpContext, offset: usize) -> Result<Ipv4, Malformed> {
    let hdr: *const [u8; IPV4_MIN_HLEN] = ptr_at(ctx, offset)?;
    // SAFETY: ptr_at checked the 20 bytes.
    let h = unsafe { &*hdr };
    if h[0] >> 4 != 4 {
        return Err(Malformed);
    }
    let ihl = ((h[0] & 0x0f) as usize) * 4;
    if ihl < IPV4_MIN_HLEN {
        return Err(Malformed);
    }
    let total_len = u16::from_be_bytes([h[2], h[3]]) as usize;
    // The datagram must fit in the frame (padding after it is fine) and hold its header.
    if total_len < ihl || ctx.data() + offset + total_len > ctx.data_end() {
        return Err(Malformed);
    }
    let frag = u16::from_be_bytes([h[6], h[7]]);
    let protocol = h[9];
    let src = [h[12], h[13], h[14], h[15]];
    let dst = [h[16], h[17], h[18], h[19]];
    // Ports only from unfragmented datagrams, so all fragments hash alike.
    let whole = frag & (IPV4_MF | IPV4_OFFSET_MASK) == 0;
    let l4_offset = if whole { offset + (ihl & 0x3c) } else { 0 };
    let ports = if whole {
        crate::flow::ports(ctx, l4_offset, protocol)
    } else {
        0
    };
    Ok(Ipv4 {
        dst,
        ttl: h[8],
        flow: FlowKey::v4(src, dst, protocol, ports),
        fields: Fields {
            family: 4,
            dscp: h[1] >> 2,
            protocol,
            src: [u32::from_ne_bytes(src), 0, 0, 0],
            dst: [u32::from_ne_bytes(dst), 0, 0, 0],
            ports,
            l4_offset,
        },
    })
}

/// Decrements the TTL and patches the header checksum incrementally (RFC 1624): the
/// TTL is the high byte of its 16-bit word, so the sum changes by 0x0100.
#[inline(always)]
pub fn decrement_ttl(ctx: &XdpContext, offset: usize) -> Result<(), Malformed> {
    let ttl: *mut u8 = ptr_at(ctx, offset + 8)?;
    let check: *mut [u8; 2] = ptr_at(ctx, offset + 10)?;
    // SAFETY: both pointers were bounds-checked by ptr_at.
    unsafe {
        *ttl -= 1;
        let mut sum = u16::from_be_bytes(*check) as u32 + 0x0100;
        sum = (sum & 0xffff) + (sum >> 16);
        *check = (sum as u16).to_be_bytes();
    }
    Ok(())
}
