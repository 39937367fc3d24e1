//! Outbound Route Filtering (RFC 5291) with Address Prefix ORF entries (RFC 5292): the
//! capability a speaker advertises in its OPEN, and the ORF block a ROUTE-REFRESH may
//! carry after its AFI/SAFI. draft-xu-idr-fare-in-mpson §4.2 uses it so that an RNIC asks
//! its leaf for the host routes it needs and receives only those.
//!
//! ROUTE-REFRESH body with ORF (RFC 5291 §4):
//! ```text
//! AFI (2) | Reserved (1) | SAFI (1) | When-to-refresh (1) | ORF Type (1) | Length (2) | entries
//! entry:  Action (2 bits) Match (1 bit) Reserved (5 bits) | type-specific part
//! Address Prefix ORF part (RFC 5292 §3): Sequence (4) | Min Len (1) | Max Len (1) |
//!                                        Length (1) | Prefix (ceil(Length/8) octets)
//! ```
//! A REMOVE-ALL entry has no type-specific part. Entries of ORF types other than Address
//! Prefix are kept as raw bytes (their length is not known, so they must be the only
//! block). Cisco's pre-standard prefix-list ORF (type 128, capability 130, which FRR also
//! sends) has the same entry layout as type 64.

use super::error::MessageError;
use super::{Reader, AFI_IPV4, AFI_IPV6};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Capability code of RFC 5291 (Outbound Route Filtering).
pub const CAPABILITY: u8 = 3;
/// The pre-standard capability code (Cisco, FRR).
pub const CAPABILITY_PRESTANDARD: u8 = 130;
/// ORF type of RFC 5292.
pub const ADDRESS_PREFIX: u8 = 64;
/// Cisco's prefix-list ORF type, same entry layout.
pub const PREFIX_LIST_PRESTANDARD: u8 = 128;

/// Send/Receive field of the capability.
pub const RECEIVE: u8 = 1;
pub const SEND: u8 = 2;
pub const BOTH: u8 = 3;

/// ROUTE-REFRESH Message Error (RFC 7313 §5), Invalid Message Length.
const INVALID_LENGTH: u8 = 1;

fn malformed(why: &'static str) -> MessageError {
    MessageError::new(
        super::error::code::ROUTE_REFRESH,
        INVALID_LENGTH,
        vec![],
        why,
    )
}

/// One family of the ORF capability: which ORF types the speaker can send or receive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrfFamily {
    pub afi: u16,
    pub safi: u8,
    /// (ORF type, Send/Receive).
    pub types: Vec<(u8, u8)>,
}

/// Decodes the capability value (a list of families).
pub fn decode_capability(value: &[u8]) -> Option<Vec<OrfFamily>> {
    let mut r = Reader::new(value);
    let mut out = Vec::new();
    while !r.is_empty() {
        let afi = r.u16()?;
        r.u8()?;
        let safi = r.u8()?;
        let n = r.u8()?;
        let mut types = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            types.push((r.u8()?, r.u8()?));
        }
        out.push(OrfFamily { afi, safi, types });
    }
    Some(out)
}

pub fn encode_capability(families: &[OrfFamily]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in families {
        out.extend_from_slice(&f.afi.to_be_bytes());
        out.push(0);
        out.push(f.safi);
        out.push(f.types.len().min(255) as u8);
        for (t, sr) in f.types.iter().take(255) {
            out.push(*t);
            out.push(*sr);
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Immediate,
    Defer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Add,
    Remove,
    RemoveAll,
}

/// The Address Prefix ORF part of an entry (RFC 5292): the peer sends routes whose prefix
/// is covered by `prefix` with a length in min_len..=max_len (0 = the prefix's own
/// length / the family's maximum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixEntry {
    pub sequence: u32,
    pub min_len: u8,
    pub max_len: u8,
    pub prefix: IpNet,
}

impl PrefixEntry {
    /// True when a route to `route` matches this entry.
    pub fn matches(&self, route: &IpNet) -> bool {
        let own = self.prefix.prefix_len();
        let lo = if self.min_len == 0 { own } else { self.min_len };
        let hi = if self.max_len == 0 {
            if self.min_len == 0 {
                own
            } else {
                self.prefix.max_prefix_len()
            }
        } else {
            self.max_len
        };
        self.prefix.contains(route) && (lo..=hi).contains(&route.prefix_len())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrfEntry {
    pub action: Action,
    /// Match field: true = DENY, false = PERMIT.
    pub deny: bool,
    /// None for REMOVE-ALL.
    pub prefix: Option<PrefixEntry>,
}

/// The ORF block of a ROUTE-REFRESH.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Orf {
    pub when: When,
    pub orf_type: u8,
    pub entries: Vec<OrfEntry>,
    /// The entries of an ORF type we do not know, as received.
    pub raw: Vec<u8>,
}

/// Decodes the ORF block after a ROUTE-REFRESH's AFI/SAFI (`rest`, non-empty).
pub fn decode(afi: u16, rest: &[u8]) -> Result<Orf, MessageError> {
    let mut r = Reader::new(rest);
    let when = match r.u8().ok_or_else(|| malformed("ORF: no When-to-refresh"))? {
        1 => When::Immediate,
        2 => When::Defer,
        _ => return Err(malformed("ORF: bad When-to-refresh")),
    };
    let orf_type = r.u8().ok_or_else(|| malformed("ORF: no ORF type"))?;
    let len = r.u16().ok_or_else(|| malformed("ORF: no length"))?;
    let body = r
        .take(usize::from(len))
        .ok_or_else(|| malformed("ORF: length beyond the message"))?;
    if !r.is_empty() {
        // Several ORF blocks are allowed by RFC 5291; fare asks for and honours one.
        return Err(malformed("ORF: more than one ORF type in one message"));
    }
    if orf_type != ADDRESS_PREFIX && orf_type != PREFIX_LIST_PRESTANDARD {
        return Ok(Orf {
            when,
            orf_type,
            entries: Vec::new(),
            raw: body.to_vec(),
        });
    }
    let mut e = Reader::new(body);
    let mut entries = Vec::new();
    while !e.is_empty() {
        let head = e.u8().ok_or_else(|| malformed("ORF: truncated entry"))?;
        let action = match head >> 6 {
            0 => Action::Add,
            1 => Action::Remove,
            2 => Action::RemoveAll,
            _ => return Err(malformed("ORF: bad action")),
        };
        let deny = head & 0x20 != 0;
        if action == Action::RemoveAll {
            entries.push(OrfEntry {
                action,
                deny,
                prefix: None,
            });
            continue;
        }
        let sequence = e.u32().ok_or_else(|| malformed("ORF: truncated entry"))?;
        let min_len = e.u8().ok_or_else(|| malformed("ORF: truncated entry"))?;
        let max_len = e.u8().ok_or_else(|| malformed("ORF: truncated entry"))?;
        let bits = e.u8().ok_or_else(|| malformed("ORF: truncated entry"))?;
        let bytes = e
            .take(usize::from(bits).div_ceil(8))
            .ok_or_else(|| malformed("ORF: truncated prefix"))?;
        let prefix = prefix_of(afi, bits, bytes).ok_or_else(|| malformed("ORF: bad prefix"))?;
        let max = prefix.max_prefix_len();
        if min_len > max || max_len > max || (max_len != 0 && min_len > max_len) {
            return Err(malformed("ORF: bad length range"));
        }
        entries.push(OrfEntry {
            action,
            deny,
            prefix: Some(PrefixEntry {
                sequence,
                min_len,
                max_len,
                prefix,
            }),
        });
    }
    Ok(Orf {
        when,
        orf_type,
        entries,
        raw: Vec::new(),
    })
}

fn prefix_of(afi: u16, bits: u8, bytes: &[u8]) -> Option<IpNet> {
    match afi {
        AFI_IPV4 if bits <= 32 => {
            let mut a = [0u8; 4];
            a[..bytes.len()].copy_from_slice(bytes);
            Ipv4Net::new(Ipv4Addr::from(a), bits)
                .ok()
                .map(|n| IpNet::V4(n.trunc()))
        }
        AFI_IPV6 if bits <= 128 => {
            let mut a = [0u8; 16];
            a[..bytes.len()].copy_from_slice(bytes);
            Ipv6Net::new(Ipv6Addr::from(a), bits)
                .ok()
                .map(|n| IpNet::V6(n.trunc()))
        }
        _ => None,
    }
}

/// Appends the ORF block (after AFI/SAFI).
pub fn encode(orf: &Orf, out: &mut Vec<u8>) {
    out.push(match orf.when {
        When::Immediate => 1,
        When::Defer => 2,
    });
    out.push(orf.orf_type);
    let mut body = Vec::new();
    if orf.orf_type == ADDRESS_PREFIX || orf.orf_type == PREFIX_LIST_PRESTANDARD {
        for e in &orf.entries {
            let action = match e.action {
                Action::Add => 0u8,
                Action::Remove => 1,
                Action::RemoveAll => 2,
            };
            body.push(action << 6 | if e.deny { 0x20 } else { 0 });
            let (Some(p), false) = (e.prefix, e.action == Action::RemoveAll) else {
                continue;
            };
            body.extend_from_slice(&p.sequence.to_be_bytes());
            body.push(p.min_len);
            body.push(p.max_len);
            let bits = p.prefix.prefix_len();
            body.push(bits);
            let octets = usize::from(bits).div_ceil(8);
            match p.prefix {
                IpNet::V4(n) => body.extend_from_slice(&n.network().octets()[..octets]),
                IpNet::V6(n) => body.extend_from_slice(&n.network().octets()[..octets]),
            }
        }
    } else {
        body.extend_from_slice(&orf.raw);
    }
    out.extend_from_slice(&(body.len().min(u16::MAX as usize) as u16).to_be_bytes());
    out.extend_from_slice(&body);
}

/// The permit/deny decision of a prefix list for `route` (RFC 5292 §4: entries in
/// sequence order, first match decides; no match = deny).
pub fn permits(entries: &[PrefixEntry], deny: &[bool], route: &IpNet) -> bool {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| entries[i].sequence);
    order
        .into_iter()
        .find(|&i| entries[i].matches(route))
        .map(|i| !deny[i])
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    /// (bytes after AFI/SAFI, value) pairs, both directions.
    #[test]
    fn vectors_round_trip() {
        let cases: Vec<(Vec<u8>, Orf)> = vec![
            (
                // IMMEDIATE, type 64, one ADD PERMIT 10.200.2.1/32 seq 5, lengths 0/0.
                vec![1, 64, 0, 12, 0x00, 0, 0, 0, 5, 0, 0, 32, 10, 200, 2, 1],
                Orf {
                    when: When::Immediate,
                    orf_type: ADDRESS_PREFIX,
                    entries: vec![OrfEntry {
                        action: Action::Add,
                        deny: false,
                        prefix: Some(PrefixEntry {
                            sequence: 5,
                            min_len: 0,
                            max_len: 0,
                            prefix: p("10.200.2.1/32"),
                        }),
                    }],
                    raw: vec![],
                },
            ),
            (
                // DEFER, type 128, REMOVE-ALL then ADD DENY 10.0.0.0/8 ge 24 le 32.
                vec![2, 128, 0, 10, 0x80, 0x20, 0, 0, 0, 10, 24, 32, 8, 10],
                Orf {
                    when: When::Defer,
                    orf_type: PREFIX_LIST_PRESTANDARD,
                    entries: vec![
                        OrfEntry {
                            action: Action::RemoveAll,
                            deny: false,
                            prefix: None,
                        },
                        OrfEntry {
                            action: Action::Add,
                            deny: true,
                            prefix: Some(PrefixEntry {
                                sequence: 10,
                                min_len: 24,
                                max_len: 32,
                                prefix: p("10.0.0.0/8"),
                            }),
                        },
                    ],
                    raw: vec![],
                },
            ),
            (
                // An unknown ORF type: kept as raw bytes.
                vec![1, 99, 0, 3, 7, 8, 9],
                Orf {
                    when: When::Immediate,
                    orf_type: 99,
                    entries: vec![],
                    raw: vec![7, 8, 9],
                },
            ),
        ];
        for (bytes, orf) in cases {
            assert_eq!(decode(AFI_IPV4, &bytes).unwrap(), orf, "{bytes:?}");
            let mut out = Vec::new();
            encode(&orf, &mut out);
            assert_eq!(out, bytes);
        }
    }

    /// An IPv4 prefix length past 32 is a malformed entry (refused, not read past the
    /// address): ADD PERMIT, length 33, five octets.
    #[test]
    fn ipv4_length_past_32_refused() {
        let ok = [1, 64, 0, 12, 0x00, 0, 0, 0, 5, 0, 0, 32, 10, 200, 2, 1];
        assert!(decode(AFI_IPV4, &ok).is_ok());
        let long = [1, 64, 0, 13, 0x00, 0, 0, 0, 5, 0, 0, 33, 10, 200, 2, 1, 0];
        assert!(decode(AFI_IPV4, &long).is_err());
    }

    /// IPv6 Address Prefix ORF entries (RFC 5292 §4, AFI 2): ADD PERMIT 2001:db8::/32
    /// ge 48 le 64 seq 7, a /128 (16 octets), and a length of 129 refused.
    #[test]
    fn ipv6_entries() {
        let bytes = [
            1, 64, 0, 12, 0x00, 0, 0, 0, 7, 48, 64, 32, 0x20, 0x01, 0x0d, 0xb8,
        ];
        let orf = decode(AFI_IPV6, &bytes).unwrap();
        assert_eq!(
            orf.entries,
            [OrfEntry {
                action: Action::Add,
                deny: false,
                prefix: Some(PrefixEntry {
                    sequence: 7,
                    min_len: 48,
                    max_len: 64,
                    prefix: p("2001:db8::/32"),
                }),
            }]
        );
        let mut out = Vec::new();
        encode(&orf, &mut out);
        assert_eq!(out, bytes);
        let mut host = vec![1, 64, 0, 24, 0x00, 0, 0, 0, 8, 0, 0, 128];
        host.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let orf = decode(AFI_IPV6, &host).unwrap();
        assert_eq!(
            orf.entries[0].prefix.as_ref().map(|e| e.prefix),
            Some(p("2001:db8::1/128"))
        );
        let mut long = host.clone();
        long[3] = 25;
        long[11] = 129;
        long.push(0);
        assert!(decode(AFI_IPV6, &long).is_err());
    }

    #[test]
    fn malformed_blocks_are_route_refresh_errors() {
        for bad in [
            vec![3, 64, 0, 0],                               // When-to-refresh 3
            vec![1, 64, 0, 5, 0x00],                         // length beyond the message
            vec![1, 64, 0, 1, 0x00],                         // truncated entry
            vec![1, 64, 0, 1, 0xc0],                         // action 3
            vec![1, 64, 0, 8, 0, 0, 0, 0, 1, 0, 0, 33],      // /33, and no prefix octets
            vec![1, 64, 0, 9, 0, 0, 0, 0, 1, 33, 0, 8, 10],  // min len 33
            vec![1, 64, 0, 9, 0, 0, 0, 0, 1, 28, 24, 8, 10], // min > max
            vec![1, 64, 0, 0, 1, 64, 0, 0],                  // two blocks
        ] {
            let e = decode(AFI_IPV4, &bad).unwrap_err();
            let n = &e.notification;
            assert_eq!((n.code, n.subcode), (7, 1), "{bad:?}");
        }
    }

    #[test]
    fn capability_round_trip() {
        let value = [0, 1, 0, 1, 2, 64, 3, 128, 2];
        let f = decode_capability(&value).unwrap();
        assert_eq!(
            f,
            [OrfFamily {
                afi: 1,
                safi: 1,
                types: vec![(64, BOTH), (128, SEND)]
            }]
        );
        assert_eq!(encode_capability(&f), value);
        assert!(decode_capability(&[0, 1, 0, 1, 2, 64]).is_none());
    }

    #[test]
    fn prefix_entries_match_by_range_and_sequence() {
        let e = |seq, min, max, s: &str| PrefixEntry {
            sequence: seq,
            min_len: min,
            max_len: max,
            prefix: p(s),
        };
        // Exact host route.
        assert!(e(1, 0, 0, "10.200.2.1/32").matches(&p("10.200.2.1/32")));
        assert!(!e(1, 0, 0, "10.200.0.0/16").matches(&p("10.200.2.1/32")));
        // ge 24 (le = 32 implied).
        assert!(e(1, 24, 0, "10.200.0.0/16").matches(&p("10.200.2.1/32")));
        assert!(!e(1, 24, 0, "10.200.0.0/16").matches(&p("10.200.0.0/16")));
        // First match in sequence order decides; no match denies.
        let list = [e(20, 24, 32, "10.0.0.0/8"), e(10, 32, 32, "10.200.2.1/32")];
        assert!(!permits(&list, &[false, true], &p("10.200.2.1/32")));
        assert!(permits(&list, &[false, true], &p("10.200.3.1/32")));
        assert!(!permits(&list, &[false, true], &p("192.0.2.0/24")));
    }

    fn entry() -> impl Strategy<Value = OrfEntry> {
        (0u8..3, any::<bool>(), any::<u32>(), any::<u32>(), 0u8..=32).prop_map(
            |(a, deny, seq, addr, len)| {
                let action = [Action::Add, Action::Remove, Action::RemoveAll][usize::from(a)];
                let prefix = (action != Action::RemoveAll).then(|| PrefixEntry {
                    sequence: seq,
                    min_len: len,
                    max_len: 32,
                    prefix: IpNet::V4(Ipv4Net::new(Ipv4Addr::from(addr), len).unwrap().trunc()),
                });
                OrfEntry {
                    action,
                    deny,
                    prefix,
                }
            },
        )
    }

    proptest! {
        #[test]
        fn encode_decode_round_trips(entries in proptest::collection::vec(entry(), 0..20), defer: bool) {
            let orf = Orf {
                when: if defer { When::Defer } else { When::Immediate },
                orf_type: ADDRESS_PREFIX,
                entries,
                raw: vec![],
            };
            let mut out = Vec::new();
            encode(&orf, &mut out);
            prop_assert_eq!(decode(AFI_IPV4, &out).unwrap(), orf);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), v6: bool) {
            let _ = decode(if v6 { AFI_IPV6 } else { AFI_IPV4 }, &bytes);
            let _ = decode_capability(&bytes);
        }
    }
}
