//! DPF flow classification (draft-wang-idr-dpf §2.2.3): the first FLOW_RULES entry that
//! matches gives the packet its color. Only packets whose route has per-color groups are
//! classified, so the rules cost nothing elsewhere.

use aya_ebpf::programs::XdpContext;
use fare_common::{
    FlowRule, MATCH_DPF_ALL, MATCH_DSCP, MATCH_DST, MATCH_DST_PORT, MATCH_PROTOCOL, MATCH_QP,
    MATCH_SRC, MATCH_SRC_PORT, MAX_FLOW_RULES, ROCEV2_UDP_PORT,
};

use crate::consts::IPPROTO_UDP;
use crate::maps::FLOW_RULES;
use crate::packet::ptr_at;

/// What the rules, the flow hash, ARN steering and ARN reception look at.
pub struct Fields {
    /// 4 or 6.
    pub family: u8,
    pub dscp: u8,
    pub protocol: u8,
    /// Addresses as four words in packet order (IPv4: word 0).
    pub src: [u32; 4],
    pub dst: [u32; 4],
    /// Source port << 16 | destination port (0 without ports).
    pub ports: u32,
    /// Offset of the L4 header; 0 when there is none to read (fragments).
    pub l4_offset: usize,
}

impl Fields {
    /// The fields of a packet that has none to read (the TC spray program's spray-only
    /// choice; a header that cannot be read again).
    pub const NONE: Fields = Fields {
        family: 4,
        dscp: 0,
        protocol: 0,
        src: [0; 4],
        dst: [0; 4],
        ports: 0,
        l4_offset: 0,
    };
}

/// A packet whose `Fields` are read from it on request (`ipv4::V4`, `ipv6::V6`), so a
/// packet whose route and group use none of them (spray mode, no colors, no steering,
/// no ARN reception) does not pay for reading them.
pub trait Classify {
    fn fields(&self) -> Fields;
}

/// Offset of the RoCEv2 destination QP: UDP header (8) + BTH octets 5..8.
const BTH_DEST_QP: usize = 8 + 5;

/// The color of the first matching rule, 0 when none matches.
#[inline(always)]
pub fn color(ctx: &XdpContext, f: &Fields) -> u32 {
    let qp = dest_qp(ctx, f);
    for i in 0..MAX_FLOW_RULES {
        let Some(rule) = FLOW_RULES.get(i) else {
            return 0;
        };
        if rule.color == 0 {
            return 0;
        }
        if matches(rule, f, qp) {
            return rule.color;
        }
    }
    0
}

/// `dest_qp` of a packet without one (QPs are 24 bits). A plain value, not an Option:
/// the undefined payload of a None could reach a register the verifier refuses to read.
const NO_QP: u32 = u32::MAX;

/// The RoCEv2 destination QP of a UDP packet to port 4791 (NO_QP otherwise).
#[inline(always)]
fn dest_qp(ctx: &XdpContext, f: &Fields) -> u32 {
    if f.protocol != IPPROTO_UDP || f.ports & 0xffff != ROCEV2_UDP_PORT as u32 || f.l4_offset == 0 {
        return NO_QP;
    }
    let Ok(p) = ptr_at::<[u8; 3]>(ctx, f.l4_offset + BTH_DEST_QP) else {
        return NO_QP;
    };
    // SAFETY: ptr_at checked the three bytes.
    let q = unsafe { *p };
    u32::from_be_bytes([0, q[0], q[1], q[2]])
}

#[inline(always)]
fn matches(r: &FlowRule, f: &Fields, qp: u32) -> bool {
    let m = r.matches & MATCH_DPF_ALL;
    if m & MATCH_DSCP != 0 && r.dscp & (1u64 << (f.dscp & 63)) == 0 {
        return false;
    }
    if m & MATCH_PROTOCOL != 0 && r.protocol != f.protocol {
        return false;
    }
    if m & (MATCH_SRC | MATCH_DST) != 0 && r.family != f.family {
        return false;
    }
    if m & MATCH_SRC != 0 && !prefix_match(&f.src, &r.src, &r.src_mask) {
        return false;
    }
    if m & MATCH_DST != 0 && !prefix_match(&f.dst, &r.dst, &r.dst_mask) {
        return false;
    }
    let sport = (f.ports >> 16) as u16;
    let dport = f.ports as u16;
    if m & (MATCH_SRC_PORT | MATCH_DST_PORT) != 0 && f.ports == 0 {
        return false;
    }
    if m & MATCH_SRC_PORT != 0 && (sport < r.src_port_lo || sport > r.src_port_hi) {
        return false;
    }
    if m & MATCH_DST_PORT != 0 && (dport < r.dst_port_lo || dport > r.dst_port_hi) {
        return false;
    }
    if m & MATCH_QP != 0 && (qp == NO_QP || qp < r.qp_lo || qp > r.qp_hi) {
        return false;
    }
    true
}

#[inline(always)]
fn prefix_match(addr: &[u32; 4], want: &[u32; 4], mask: &[u32; 4]) -> bool {
    (addr[0] & mask[0]) == want[0]
        && (addr[1] & mask[1]) == want[1]
        && (addr[2] & mask[2]) == want[2]
        && (addr[3] & mask[3]) == want[3]
}
