//! Flow hash for per-flow groups (the 5-tuple of a packet's `Fields`), computed only for a
//! group in flow mode.

use aya_ebpf::programs::XdpContext;

use crate::classify::Fields;
use crate::consts::*;
use crate::packet::ptr_at;

const SEED: u64 = 0x9747_b28c_a5a5_f00d;
const K1: u64 = 0x9e37_79b9_7f4a_7c15;
const K2: u64 = 0xbf58_476d_1ce4_e5b9;
const K3: u64 = 0x94d0_49bb_1331_11eb;

/// The flow hash of a packet's fields (`hash_v4` or `hash_v6` by family).
#[inline(always)]
pub fn hash(f: &Fields) -> u32 {
    if f.family == 4 {
        hash_v4(f.src[0], f.dst[0], f.protocol, f.ports)
    } else {
        hash_v6(&f.src, &f.dst, f.protocol, f.ports)
    }
}

/// 32-bit hash of an IPv4 5-tuple. `src`/`dst`: the addresses' bytes in packet order read
/// as one native u32; `ports`: source port << 16 | destination port (0 when none).
///
/// Multiplicative, in 64-bit words: both addresses as one word times an odd constant,
/// XOR ports and protocol, times a second constant, then a xorshift-multiply finish whose
/// high half is the hash (flow mode maps the high bits onto the slots). Three
/// multiplications where the earlier murmur3-style hash chained fourteen 32-bit ones and
/// eight rotations (three instructions each in BPF). Modelled over 14,000 flows on 14
/// slots (sequential sources, destinations, ports, both addresses together, random
/// tuples; IPv4 and IPv6), the busiest slot was within 4-11 % of the mean (the earlier
/// hash: 2-11 %; about 6 % is what random placement gives).
#[inline(always)]
pub fn hash_v4(src: u32, dst: u32, protocol: u8, ports: u32) -> u32 {
    let a = ((src as u64) << 32 | dst as u64) ^ SEED;
    let b = (ports as u64) << 8 | protocol as u64;
    finish((a.wrapping_mul(K1) ^ b).wrapping_mul(K2))
}

/// 32-bit hash of an IPv6 5-tuple: each address (four native u32 words of its bytes in
/// packet order) folded to 64 bits, then as `hash_v4` with one more word.
#[inline(always)]
pub fn hash_v6(src: &[u32; 4], dst: &[u32; 4], protocol: u8, ports: u32) -> u32 {
    let a = fold64(src) ^ SEED;
    let b = fold64(dst);
    let c = (ports as u64) << 8 | protocol as u64;
    finish(((a.wrapping_mul(K1) ^ b).wrapping_mul(K2) ^ c).wrapping_mul(K1))
}

#[inline(always)]
fn fold64(w: &[u32; 4]) -> u64 {
    ((w[0] ^ w[2]) as u64) << 32 | (w[1] ^ w[3]) as u64
}

#[inline(always)]
fn finish(h: u64) -> u32 {
    ((h ^ (h >> 32)).wrapping_mul(K3) >> 32) as u32
}

/// A new, independent-looking hash from `h` (flow mode re-picks a slot with it).
#[inline(always)]
pub fn rehash(h: u32) -> u32 {
    fmix32(h ^ 0x9e37_79b9)
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
