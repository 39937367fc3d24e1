//! DPF rows: flow rules -> FLOW_RULES, a route's per-color groups -> COLOR_SETS.
//! Pure functions (see `dataplane::dpf` for the semantics).

use fare_common as fc;
use fare_dataplane::{DataplaneError, FlowRule};
use ipnet::IpNet;

/// The FLOW_RULES rows of `rules` (an unused row ends the list in the program).
pub fn encode_rules(rules: &[FlowRule]) -> Result<Vec<fc::FlowRule>, DataplaneError> {
    if rules.len() > fc::MAX_FLOW_RULES as usize {
        return Err(DataplaneError::backend(
            "xdp",
            format!(
                "{} flow rules; the xdp data plane holds at most {}",
                rules.len(),
                fc::MAX_FLOW_RULES
            ),
        ));
    }
    rules
        .iter()
        .map(|r| {
            r.check()
                .map_err(|e| DataplaneError::backend("xdp", e.to_string()))?;
            Ok(encode_rule(r))
        })
        .collect()
}

fn encode_rule(r: &FlowRule) -> fc::FlowRule {
    let mut row = fc::FlowRule {
        color: r.color,
        ..Default::default()
    };
    if !r.dscp.is_empty() {
        row.matches |= fc::MATCH_DSCP;
        row.dscp = r.dscp.iter().fold(0u64, |m, d| m | 1u64 << (d & 63));
    }
    if let Some(p) = r.protocol {
        row.matches |= fc::MATCH_PROTOCOL;
        row.protocol = p.0;
    }
    if let Some(net) = r.src {
        row.matches |= fc::MATCH_SRC;
        (row.src, row.src_mask, row.family) = prefix_words(net);
    }
    if let Some(net) = r.dst {
        row.matches |= fc::MATCH_DST;
        (row.dst, row.dst_mask, row.family) = prefix_words(net);
    }
    if let Some(p) = r.src_port {
        row.matches |= fc::MATCH_SRC_PORT;
        (row.src_port_lo, row.src_port_hi) = (p.lo as u16, p.hi as u16);
    }
    if let Some(p) = r.dst_port {
        row.matches |= fc::MATCH_DST_PORT;
        (row.dst_port_lo, row.dst_port_hi) = (p.lo as u16, p.hi as u16);
    }
    if let Some(q) = r.qp {
        row.matches |= fc::MATCH_QP;
        (row.qp_lo, row.qp_hi) = (q.lo, q.hi);
    }
    row
}

/// (masked address, mask, family) as the program compares them: four words in packet
/// byte order, read as native-endian u32s (the program reads the packet the same way).
fn prefix_words(net: IpNet) -> ([u32; 4], [u32; 4], u8) {
    let (octets, len, family): (Vec<u8>, u8, u8) = match net.trunc() {
        IpNet::V4(n) => (n.network().octets().to_vec(), n.prefix_len(), 4),
        IpNet::V6(n) => (n.network().octets().to_vec(), n.prefix_len(), 6),
    };
    let mut addr = [0u8; 16];
    let mut mask = [0u8; 16];
    addr[..octets.len()].copy_from_slice(&octets);
    for (i, m) in mask.iter_mut().enumerate().take(octets.len()) {
        let bits = (usize::from(len)).saturating_sub(i * 8).min(8);
        *m = if bits == 0 { 0 } else { 0xffu8 << (8 - bits) };
    }
    let words = |b: &[u8; 16]| {
        let w = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        [w(0), w(4), w(8), w(12)]
    };
    (words(&addr), words(&mask), family)
}

/// A COLOR_SETS row: (color, group id, active) per color, at most MAX_COLORS_PER_ROUTE.
pub fn color_set(entries: &[(u32, u32, bool)]) -> fc::ColorSet {
    let mut set = fc::ColorSet::default();
    for (slot, &(color, group, active)) in set.entries.iter_mut().zip(entries) {
        *slot = fc::ColorEntry {
            color,
            group,
            flags: if active { fc::COLOR_ACTIVE } else { 0 },
        };
    }
    set.n = entries.len().min(fc::MAX_COLORS_PER_ROUTE) as u32;
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_become_rows() {
        let rules: Vec<FlowRule> = serde_norway::from_str(
            "- {color: 7, dscp: [0, 46], protocol: udp, src: 10.1.0.0/16, dst_port: 4791, qp: 16-31}\n- {color: 9, dst: '2001:db8::/33'}\n",
        )
        .unwrap();
        let rows = encode_rules(&rules).unwrap();
        let r = &rows[0];
        assert_eq!(r.color, 7);
        assert_eq!(
            r.matches,
            fc::MATCH_DSCP | fc::MATCH_PROTOCOL | fc::MATCH_SRC | fc::MATCH_DST_PORT | fc::MATCH_QP
        );
        assert_eq!(r.dscp, 1 | 1 << 46);
        assert_eq!(r.protocol, 17);
        assert_eq!(r.family, 4);
        assert_eq!(r.src[0], u32::from_ne_bytes([10, 1, 0, 0]));
        assert_eq!(r.src_mask, [u32::from_ne_bytes([255, 255, 0, 0]), 0, 0, 0]);
        assert_eq!((r.dst_port_lo, r.dst_port_hi), (4791, 4791));
        assert_eq!((r.qp_lo, r.qp_hi), (16, 31));
        let v6 = &rows[1];
        assert_eq!(v6.family, 6);
        assert_eq!(v6.matches, fc::MATCH_DST);
        assert_eq!(
            v6.dst_mask,
            [u32::MAX, u32::from_ne_bytes([0x80, 0, 0, 0]), 0, 0]
        );
        assert_eq!(v6.dst[0], u32::from_ne_bytes([0x20, 0x01, 0x0d, 0xb8]));
    }

    #[test]
    fn too_many_or_bad_rules_are_refused() {
        let one: FlowRule = serde_norway::from_str("{color: 1}").unwrap();
        let many = vec![one; fc::MAX_FLOW_RULES as usize + 1];
        assert!(encode_rules(&many).is_err());
        let bad: FlowRule = serde_norway::from_str("{color: 0}").unwrap();
        assert!(encode_rules(&[bad]).is_err());
    }

    #[test]
    fn color_set_flags_active_colors() {
        let s = color_set(&[(1, 10, true), (2, 11, false)]);
        assert_eq!(s.n, 2);
        assert_eq!(s.entries[0].flags, fc::COLOR_ACTIVE);
        assert_eq!(s.entries[1].flags, 0);
        assert_eq!(s.entries[1].group, 11);
    }
}
