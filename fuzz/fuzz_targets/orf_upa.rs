#![no_main]

//! ORF entries (RFC 5291/5292: the block after a ROUTE-REFRESH's AFI/SAFI and the OPEN
//! capability) and UPA extended communities (draft-krierhorn-idr-upa), decoded from the
//! same input. Invariants: nothing panics; a bad ORF block is ROUTE-REFRESH Message Error /
//! Invalid Message Length (RFC 7313 §5); a decoded block re-encodes to one that decodes to
//! the same entries, each prefix truncated to its length and its length range within the
//! family; an entry with no length range matches its own prefix (RFC 5292 §3); a
//! community reads as UPA exactly when its type is transitive opaque and its subtype the
//! configured one, and writing it back keeps every defined bit (D flag, originator).

use fare_bgp::packet::community::ExtCommunity;
use fare_bgp::packet::orf::{self, Action};
use fare_bgp::packet::upa::{self, Upa};
use fare_bgp::packet::{AFI_IPV4, AFI_IPV6};
use libfuzzer_sys::fuzz_target;

fn check_orf(afi: u16, block: &[u8]) {
    let decoded = match orf::decode(afi, block) {
        Ok(d) => d,
        Err(e) => {
            assert_eq!((e.notification.code, e.notification.subcode), (7, 1));
            return;
        }
    };
    let mut again = Vec::new();
    orf::encode(&decoded, &mut again);
    assert_eq!(orf::decode(afi, &again).as_ref(), Ok(&decoded));
    let mut prefixes = Vec::new();
    let mut deny = Vec::new();
    for entry in &decoded.entries {
        let Some(p) = entry.prefix else {
            assert_eq!(entry.action, Action::RemoveAll);
            continue;
        };
        assert_eq!(p.prefix, p.prefix.trunc());
        assert_eq!(p.prefix.addr().is_ipv4(), afi == AFI_IPV4);
        let max = p.prefix.max_prefix_len();
        assert!(p.min_len <= max && p.max_len <= max);
        if p.min_len == 0 && p.max_len == 0 {
            assert!(p.matches(&p.prefix));
        }
        prefixes.push(p);
        deny.push(entry.deny);
    }
    for p in &prefixes {
        let _ = orf::permits(&prefixes, &deny, &p.prefix);
    }
}

fn check_upa(communities: &[ExtCommunity], subtype: u8) {
    for c in communities {
        let upa = Upa::from_community(c, subtype);
        assert_eq!(
            upa.is_some(),
            c.0[0] == upa::TYPE_OPAQUE_TRANSITIVE && c.0[1] == subtype
        );
        if let Some(u) = upa {
            let [t, s, flags, _, a, b, cc, d] = c.0;
            assert_eq!(
                u.to_community(subtype).0,
                [t, s, flags & upa::FLAG_DROP, 0, a, b, cc, d]
            );
        }
    }
    assert_eq!(
        upa::unreachable(communities, subtype),
        communities
            .iter()
            .find_map(|c| Upa::from_community(c, subtype))
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, rest)) = data.split_first() else {
        return;
    };
    let afi = if knobs & 1 == 0 { AFI_IPV4 } else { AFI_IPV6 };
    check_orf(afi, rest);
    if let Some(families) = orf::decode_capability(rest) {
        assert_eq!(
            orf::decode_capability(&orf::encode_capability(&families)),
            Some(families)
        );
    }
    let communities: Vec<ExtCommunity> = rest
        .chunks_exact(8)
        .map(|c| ExtCommunity(c.try_into().expect("8 octets")))
        .collect();
    // The subtype is configurable: the default and one drawn from the input.
    check_upa(&communities, upa::DEFAULT_UPA_SUBTYPE);
    check_upa(&communities, knobs >> 1);
});
