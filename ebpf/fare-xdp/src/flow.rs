//! Flow key (5-tuple) and its hash for per-flow groups.

use aya_ebpf::programs::XdpContext;

use crate::consts::*;
use crate::packet::ptr_at;

/// The 5-tuple, with IPv6 addresses folded to 32 bits (cheap to carry; hashed only by
/// groups in flow mode).
pub struct FlowKey {
    src: u32,
    dst: u32,
    /// Source port << 16 | destination port (0 when the protocol has none).
    ports: u32,
    protocol: u8,
}

impl FlowKey {
    /// `src`/`dst`: the addresses' bytes in packet order, read as one native u32.
    #[inline(always)]
    pub fn v4(src: u32, dst: u32, protocol: u8, ports: u32) -> FlowKey {
        FlowKey {
            src,
            dst,
            ports,
            protocol,
        }
    }

    /// `src`/`dst`: each address as four native u32 words of its bytes in packet order.
    #[inline(always)]
    pub fn v6(src: &[u32; 4], dst: &[u32; 4], protocol: u8, ports: u32) -> FlowKey {
        FlowKey {
            src: fold16(src),
            dst: fold16(dst),
            ports,
            protocol,
        }
    }

    /// 32-bit hash of the 5-tuple (murmur3-style mixing of each word, fmix32 finish).
    #[inline(always)]
    pub fn hash(&self) -> u32 {
        let mut h = 0x9747_b28c_u32;
        h = mix(h, self.src);
        h = mix(h, self.dst);
        h = mix(h, self.ports);
        h = mix(h, self.protocol as u32);
        fmix32(h)
    }
}

/// A new, independent-looking hash from `h` (flow mode re-picks a slot with it).
#[inline(always)]
pub fn rehash(h: u32) -> u32 {
    fmix32(h ^ 0x9e37_79b9)
}

#[inline(always)]
fn fold16(w: &[u32; 4]) -> u32 {
    w[0] ^ w[1].rotate_left(8) ^ w[2].rotate_left(16) ^ w[3].rotate_left(24)
}

#[inline(always)]
fn mix(h: u32, k: u32) -> u32 {
    let k = k
        .wrapping_mul(0xcc9e_2d51)
        .rotate_left(15)
        .wrapping_mul(0x1b87_3593);
    (h ^ k)
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64)
}

#[inline(always)]
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Source and destination port of a TCP/UDP/SCTP header at `offset` (0 otherwise, or
/// when the header is cut short).
#[inline(always)]
pub fn ports(ctx: &XdpContext, offset: usize, protocol: u8) -> u32 {
    if protocol != IPPROTO_TCP && protocol != IPPROTO_UDP && protocol != IPPROTO_SCTP {
        return 0;
    }
    // Two 16-bit loads (the L4 header is at an even offset, see `packet::read_be16`).
    match ptr_at::<[u16; 2]>(ctx, offset) {
        Ok(p) => {
            // SAFETY: ptr_at checked the four bytes.
            let [sport, dport] = unsafe { *p };
            (u16::from_be(sport) as u32) << 16 | u16::from_be(dport) as u32
        }
        Err(_) => 0,
    }
}
