//! Ethernet with at most one VLAN tag (802.1Q or 802.1ad): finds the L3 header.

use aya_ebpf::programs::XdpContext;

use crate::consts::*;
use crate::packet::{ptr_at, read_be16, Malformed};

pub enum L3 {
    Ipv4,
    Ipv6,
    Other,
}

pub struct Frame {
    /// The header as `parse` checked it (the MACs are its first six words).
    pub hdr: *mut [u16; ETH_HLEN / 2],
    pub l3: L3,
    /// Offset of the L3 header (after the optional tag).
    pub l3_offset: usize,
}

#[inline(always)]
pub fn parse(ctx: &XdpContext) -> Result<Frame, Malformed> {
    // The header as seven 16-bit words: one bounds check for the MACs and the ethertype.
    let hdr: *mut [u16; ETH_HLEN / 2] = ptr_at(ctx, 0)?;
    // SAFETY: ptr_at checked the 14 bytes.
    let h = unsafe { &*hdr };
    let mut ethertype = u16::from_be(h[6]);
    let mut l3_offset = ETH_HLEN;
    if ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD {
        ethertype = read_be16(ctx, ETH_HLEN + 2)?;
        l3_offset += VLAN_HLEN;
    }
    // The I/G bit: the first bit on the wire, the low bit of the first byte.
    let multicast = h[0].to_ne_bytes()[0] & 1 != 0;
    let l3 = match ethertype {
        // Broadcast/multicast frames are never routed by us.
        _ if multicast => L3::Other,
        ETH_P_IP => L3::Ipv4,
        ETH_P_IPV6 => L3::Ipv6,
        _ => L3::Other,
    };
    Ok(Frame { hdr, l3, l3_offset })
}

/// Offset of the L3 header of a frame `parse` found to be IPv4/IPv6, read again from
/// the frame. The forwarding path calls this after choosing the member instead of
/// keeping `Frame::l3_offset` live across the choice: the verifier can then treat
/// tagged and untagged frames as one state there (the member walk is verified once
/// instead of twice).
#[inline(always)]
pub fn l3_offset(ctx: &XdpContext) -> Result<usize, Malformed> {
    let ethertype = read_be16(ctx, 12)?;
    if ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD {
        Ok(ETH_HLEN + VLAN_HLEN)
    } else {
        Ok(ETH_HLEN)
    }
}
