//! Codec vectors: (bytes, value) pairs checked in both directions, a comment per field;
//! negative vectors assert the exact RFC 7606 outcome; proptest round trips.

use super::attribute::{flag, AsSegment, AS_SEQUENCE};
use super::error::{code, update as sub};
use super::*;
use ipnet::IpNet;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const CTX: Context = Context {
    four_octet_as: true,
};

fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut v = MARKER.to_vec();
    v.extend_from_slice(&((HEADER_LEN + body.len()) as u16).to_be_bytes());
    v.push(kind);
    v.extend_from_slice(body);
    fuzz_seed(kind, body, &v);
    v
}

/// With `FARE_FUZZ_SEEDS=DIR` (the repository's fuzz/seeds), every vector message built
/// here is also written as a seed of the `bgp_decode` (knobs byte, body) and `bgp_session`
/// (the peer's OPEN, then the message) fuzz targets, named by a hash of its bytes.
fn fuzz_seed(kind: u8, body: &[u8], whole: &[u8]) {
    use std::hash::{Hash, Hasher};
    let Some(dir) = std::env::var_os("FARE_FUZZ_SEEDS") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let open = Message::Open(Open::new(
        65001,
        90,
        Ipv4Addr::new(10, 0, 0, 1),
        vec![
            Capability::Multiprotocol { afi: 1, safi: 1 },
            Capability::Multiprotocol { afi: 2, safi: 1 },
            Capability::RouteRefresh,
            Capability::FourOctetAs(65001),
        ],
    ));
    let mut session = open.encode(CTX);
    session.extend_from_slice(whole);
    let mut decode = vec![0x80 | (kind & 0x07)];
    decode.extend_from_slice(body);
    let mut seeds = vec![("bgp_decode", decode), ("bgp_session", session)];
    if kind == msg_type::ROUTE_REFRESH && body.len() > 4 {
        // orf_upa: knobs (bit 0: IPv6) and the ORF block after AFI/reserved/SAFI.
        let mut orf = vec![u8::from(body[1] == 2)];
        orf.extend_from_slice(&body[4..]);
        seeds.push(("orf_upa", orf));
    }
    for (target, bytes) in seeds {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut h);
        let path = dir.join(target).join(format!("vector-{:016x}", h.finish()));
        std::fs::create_dir_all(dir.join(target)).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// Both directions: decode(bytes) == value and encode(value) == bytes.
fn both_ways(bytes: &[u8], value: &Message) {
    let decoded = Message::decode(bytes, CTX).unwrap();
    assert_eq!(&decoded, value);
    let encoded = value.encode(CTX);
    assert_eq!(hex(&encoded), hex(bytes));
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn update_of(body: &[u8]) -> Update {
    match Message::decode(&msg(msg_type::UPDATE, body), CTX).unwrap() {
        Message::Update(u) => u,
        other => panic!("{other:?}"),
    }
}

fn update_err(body: &[u8]) -> MessageError {
    Message::decode(&msg(msg_type::UPDATE, body), CTX).unwrap_err()
}

#[test]
fn open_with_capabilities() {
    let body = [
        0x04, // version 4
        0x5b, 0xa0, // my AS = AS_TRANS (23456)
        0x00, 0x5a, // hold time 90
        0x0a, 0x00, 0x00, 0x01, // BGP identifier 10.0.0.1
        0x1c, // optional parameters length 28
        0x02, 0x06, 0x01, 0x04, 0x00, 0x01, 0x00, 0x01, // capability MP IPv4 unicast
        0x02, 0x06, 0x01, 0x04, 0x00, 0x02, 0x00, 0x01, // capability MP IPv6 unicast
        0x02, 0x02, 0x02, 0x00, // capability route refresh
        0x02, 0x06, 0x41, 0x04, 0x00, 0x01, 0x11, 0x70, // capability 4-octet AS 70000
    ];
    let open = Open::new(
        70000,
        90,
        Ipv4Addr::new(10, 0, 0, 1),
        vec![
            Capability::Multiprotocol { afi: 1, safi: 1 },
            Capability::Multiprotocol { afi: 2, safi: 1 },
            Capability::RouteRefresh,
            Capability::FourOctetAs(70000),
        ],
    );
    both_ways(&msg(msg_type::OPEN, &body), &Message::Open(open.clone()));
    assert_eq!(open.asn(), 70000);
    assert_eq!(open.families(), [Family::Ipv4Unicast, Family::Ipv6Unicast]);
}

#[test]
fn open_keeps_unknown_capability() {
    let body = [
        0x04, 0xfd, 0xe9, // version 4, AS 65001
        0x00, 0xb4, 0x0a, 0x00, 0x00, 0x02, // hold 180, id 10.0.0.2
        0x05, // params length 5
        0x02, 0x03, 0x49, 0x01, 0x61, // capability 73 (FQDN), 1 octet "a"
    ];
    let Message::Open(o) = Message::decode(&msg(msg_type::OPEN, &body), CTX).unwrap() else {
        panic!()
    };
    assert_eq!(
        o.capabilities,
        [Capability::Unknown {
            code: 73,
            value: vec![0x61]
        }]
    );
    assert_eq!(Message::Open(o).encode(CTX), msg(msg_type::OPEN, &body));
}

#[test]
fn open_errors() {
    let base = [0x04, 0xfd, 0xe9, 0x00, 0xb4, 0x0a, 0x00, 0x00, 0x02, 0x00];
    let mut v3 = base;
    v3[0] = 3; // version 3
    let e = Message::decode(&msg(msg_type::OPEN, &v3), CTX).unwrap_err();
    assert_eq!((e.notification.code, e.notification.subcode), (2, 1));
    assert_eq!(e.notification.data, [0, 4]); // the version we support
    let mut hold1 = base;
    hold1[4] = 1; // hold time 1 s
    let e = Message::decode(&msg(msg_type::OPEN, &hold1), CTX).unwrap_err();
    assert_eq!((e.notification.code, e.notification.subcode), (2, 6));
    let mut id0 = base;
    id0[5] = 0; // BGP identifier 0.0.0.0
    id0[8] = 0;
    let e = Message::decode(&msg(msg_type::OPEN, &id0), CTX).unwrap_err();
    assert_eq!((e.notification.code, e.notification.subcode), (2, 3));
}

#[test]
fn keepalive_notification_route_refresh() {
    both_ways(&msg(msg_type::KEEPALIVE, &[]), &Message::Keepalive);
    both_ways(
        &msg(msg_type::NOTIFICATION, &[6, 2, 0xab]), // cease / admin shutdown, data 0xab
        &Message::Notification(Notification {
            code: 6,
            subcode: 2,
            data: vec![0xab],
        }),
    );
    both_ways(
        &msg(msg_type::ROUTE_REFRESH, &[0, 2, 0, 1]), // AFI 2, reserved, SAFI 1
        &Message::RouteRefresh(RouteRefresh {
            afi: 2,
            subtype: 0,
            safi: 1,
            orf: None,
        }),
    );
    // With one Address Prefix ORF entry (RFC 5291/5292): ADD PERMIT 10.200.2.1/32.
    both_ways(
        &msg(
            msg_type::ROUTE_REFRESH,
            &[
                0, 1, 0, 1, 1, 64, 0, 12, 0, 0, 0, 0, 5, 0, 0, 32, 10, 200, 2, 1,
            ],
        ),
        &Message::RouteRefresh(RouteRefresh {
            afi: 1,
            subtype: 0,
            safi: 1,
            orf: Some(super::orf::Orf {
                when: super::orf::When::Immediate,
                orf_type: super::orf::ADDRESS_PREFIX,
                entries: vec![super::orf::OrfEntry {
                    action: super::orf::Action::Add,
                    deny: false,
                    prefix: Some(super::orf::PrefixEntry {
                        sequence: 5,
                        min_len: 0,
                        max_len: 0,
                        prefix: "10.200.2.1/32".parse().unwrap(),
                    }),
                }],
                raw: vec![],
            }),
        }),
    );
}

#[test]
fn route_refresh_errors() {
    // BoRR (subtype 1) with a body, and a truncated ORF block: ROUTE-REFRESH Message
    // Error / Invalid Message Length (RFC 7313 §5).
    for body in [
        &[0u8, 1, 1, 1, 1, 64, 0, 0][..],
        &[0, 1, 0, 1, 1, 64, 0][..],
    ] {
        let e =
            Message::decode(&msg(msg_type::ROUTE_REFRESH, body), Context::default()).unwrap_err();
        assert_eq!(
            (e.notification.code, e.notification.subcode),
            (7, 1),
            "{body:?}"
        );
    }
}

#[test]
fn header_errors() {
    let mut bad_marker = msg(msg_type::KEEPALIVE, &[]);
    bad_marker[3] = 0;
    let e = frame_len(&bad_marker).unwrap_err();
    assert_eq!((e.notification.code, e.notification.subcode), (1, 1));
    let long_keepalive = msg(msg_type::KEEPALIVE, &[0]); // KEEPALIVE of 20 octets
    let e = frame_len(&long_keepalive).unwrap_err();
    assert_eq!((e.notification.code, e.notification.subcode), (1, 2));
    assert_eq!(e.notification.data, [0, 20]);
    let e = frame_len(&msg(9, &[])).unwrap_err(); // type 9
    assert_eq!(
        (
            e.notification.code,
            e.notification.subcode,
            e.notification.data
        ),
        (1, 3, vec![9])
    );
    assert_eq!(frame_len(&bad_marker[..10]).unwrap(), None);
}

/// The FARE route a leaf originates: IPv4 body NLRI with the Path Bandwidth community.
#[test]
fn update_ipv4_with_path_bandwidth() {
    use fare_model::bandwidth::Encoding;
    let body = [
        0x00, 0x00, // withdrawn routes length 0
        0x00, 0x1f, // total path attribute length 31
        0x40, 0x01, 0x01, 0x00, // ORIGIN IGP
        0x40, 0x02, 0x06, 0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9, // AS_PATH SEQ [65001]
        0x40, 0x03, 0x04, 0x0a, 0x01, 0x00, 0x01, // NEXT_HOP 10.1.0.1
        0xc0, 0x10, 0x08, // EXTENDED_COMMUNITIES, 8 octets
        0x01, 0xa0, // transitive IPv4-address-specific, subtype 0xa0
        0x0a, 0x00, 0x00, 0x01, // global admin: router ID 10.0.0.1
        0x4a, 0x40, // local admin: 12.5 GB/s (100 Gbps), IEEE 754 binary16
        0x18, 0xc0, 0x00, 0x02, // NLRI 192.0.2.0/24
    ];
    let pb = PathBandwidth::new(true, Ipv4Addr::new(10, 0, 0, 1), 100.0);
    let update = Update {
        attributes: PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence(vec![65001])),
            next_hop: Some(Ipv4Addr::new(10, 1, 0, 1)),
            ext_communities: vec![pb.to_community(0xa0, Encoding::Binary16)],
            ..Default::default()
        },
        nlri: vec![net("192.0.2.0/24")],
        ..Default::default()
    };
    both_ways(
        &msg(msg_type::UPDATE, &body),
        &Message::Update(update.clone()),
    );
    let back = update.attributes.ext_communities[0]
        .path_bandwidth(0xa0, Encoding::Binary16)
        .unwrap();
    assert_eq!(back.gbps(), 100.0);
    assert!(back.transitive);
    assert_eq!(back.router_id, Ipv4Addr::new(10, 0, 0, 1));
    // Another subtype is not ours.
    assert_eq!(
        update.attributes.ext_communities[0].path_bandwidth(0xa1, Encoding::Binary16),
        None
    );
}

#[test]
fn update_ipv6_mp_reach_and_unreach() {
    let body = [
        0x00, 0x00, // withdrawn routes length 0
        0x00, 0x42, // total path attribute length 66
        0x80, 0x0f, 0x0a, 0x00, 0x02, 0x01, // MP_UNREACH_NLRI IPv6 unicast
        0x30, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, // withdrawn 2001:db8:1::/48
        0x80, 0x0e, 0x1a, 0x00, 0x02, 0x01, // MP_REACH_NLRI, 26 octets, IPv6 unicast
        0x10, // next hop length 16
        0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // next hop fd00::1
        0x00, // reserved
        0x20, 0x20, 0x01, 0x0d, 0xb8, // NLRI 2001:db8::/32
        0x40, 0x01, 0x01, 0x00, // ORIGIN IGP
        0x40, 0x02, 0x0a, 0x02, 0x02, 0, 0, 0xfd, 0xe9, 0, 0, 0xfe,
        0x4c, // AS_PATH [65001 65100]
        0x80, 0x04, 0x04, 0x00, 0x00, 0x00, 0x05, // MED 5
    ];
    let update = Update {
        attributes: PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence(vec![65001, 65100])),
            med: Some(5),
            mp_reach: Some(MpReach {
                family: Family::Ipv6Unicast,
                next_hops: vec![IpAddr::V6("fd00::1".parse().unwrap())],
                nlri: vec![net("2001:db8::/32")],
            }),
            mp_unreach: Some(MpUnreach {
                family: Family::Ipv6Unicast,
                withdrawn: vec![net("2001:db8:1::/48")],
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    both_ways(
        &msg(msg_type::UPDATE, &body),
        &Message::Update(update.clone()),
    );
    assert_eq!(
        update.announced().collect::<Vec<_>>(),
        [net("2001:db8::/32")]
    );
    assert_eq!(
        update.withdrawn_all().collect::<Vec<_>>(),
        [net("2001:db8:1::/48")]
    );
}

/// Unknown optional transitive attribute (type 99, Partial set) and an unknown extended
/// community survive decode + encode byte for byte.
#[test]
fn unknown_attribute_and_community_round_trip() {
    let body = [
        0x00, 0x00, // withdrawn routes length 0
        0x00, 0x1e, // total path attribute length 30
        0x40, 0x01, 0x01, 0x02, // ORIGIN INCOMPLETE
        0x40, 0x02, 0x00, // AS_PATH empty
        0x40, 0x03, 0x04, 0x0a, 0x00, 0x00, 0x09, // NEXT_HOP 10.0.0.9
        0xc0, 0x10, 0x08, 0x03, 0x0c, 0, 0, 0, 0, 0, 0x08, // ext community: opaque encap
        0xe0, 0x63, 0x02, 0xca, 0xfe, // type 99 optional transitive partial, 2 octets
        0x08, 0x0a, // NLRI 10.0.0.0/8
    ];
    let u = update_of(&body);
    assert!(u.errors.is_empty(), "{:?}", u.errors);
    assert_eq!(
        u.attributes.other,
        [RawAttribute {
            flags: flag::OPTIONAL | flag::TRANSITIVE | flag::PARTIAL,
            type_code: 99,
            value: vec![0xca, 0xfe]
        }]
    );
    assert_eq!(hex(&Message::Update(u).encode(CTX)), hex(&msg(2, &body)));
}

#[test]
fn two_octet_as_path() {
    let ctx = Context {
        four_octet_as: false,
    };
    let body = [
        0, 0, 0, 0x0d, // withdrawn 0, attributes 13
        0x40, 0x01, 0x01, 0x00, // ORIGIN IGP
        0x40, 0x02, 0x06, 0x02, 0x02, 0xfd, 0xe9, 0x5b, 0xa0, // AS_PATH [65001 23456]
    ];
    let Message::Update(u) = Message::decode(&msg(2, &body), ctx).unwrap() else {
        panic!()
    };
    assert_eq!(
        u.attributes.as_path.as_ref().unwrap().segments,
        [AsSegment {
            kind: AS_SEQUENCE,
            asns: vec![65001, 23456]
        }]
    );
    assert_eq!(Message::Update(u).encode(ctx), msg(2, &body));
}

// ---- RFC 7606 negative vectors ----

const ORIGIN_IGP: [u8; 4] = [0x40, 0x01, 0x01, 0x00];
const AS_PATH_65001: [u8; 9] = [0x40, 0x02, 0x06, 0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9];
const NEXT_HOP: [u8; 7] = [0x40, 0x03, 0x04, 0x0a, 0x01, 0x00, 0x01];
const NLRI_24: [u8; 4] = [0x18, 0xc0, 0x00, 0x02];

fn body_with(attrs: &[&[u8]], nlri: &[u8]) -> Vec<u8> {
    let a: Vec<u8> = attrs.concat();
    let mut b = vec![0, 0];
    b.extend_from_slice(&(a.len() as u16).to_be_bytes());
    b.extend_from_slice(&a);
    b.extend_from_slice(nlri);
    b
}

/// An attribute error as decoded: (attribute type, action, subcode).
type Outcome = (u8, AttrAction, u8);

fn outcome(u: &Update) -> Vec<Outcome> {
    u.errors
        .iter()
        .map(|e| (e.type_code, e.action, e.subcode))
        .collect()
}

/// RFC 7606 errors within one attribute: (case, attributes with NLRI 192.0.2.0/24, the
/// attribute type, the action and the subcode). Treat-as-withdraw keeps the prefixes
/// (to withdraw them); a discarded attribute leaves the route usable.
#[test]
fn rfc7606_attribute_errors() {
    use AttrAction::{Discard, TreatAsWithdraw};
    let table: [(&str, &[&[u8]], Outcome); 8] = [
        (
            "ORIGIN 7",
            &[&[0x40, 0x01, 0x01, 0x07], &AS_PATH_65001, &NEXT_HOP],
            (1, TreatAsWithdraw, sub::INVALID_ORIGIN),
        ),
        (
            "ORIGIN sent as optional (0xc0): flags conflict with a well-known type",
            &[&[0xc0, 0x01, 0x01, 0x00], &AS_PATH_65001, &NEXT_HOP],
            (1, TreatAsWithdraw, sub::ATTRIBUTE_FLAGS),
        ),
        (
            "ORIGIN twice",
            &[&ORIGIN_IGP, &ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP],
            (1, Discard, sub::MALFORMED_ATTRIBUTE_LIST),
        ),
        (
            "no NEXT_HOP",
            &[&ORIGIN_IGP, &AS_PATH_65001],
            (3, TreatAsWithdraw, sub::MISSING_WELL_KNOWN),
        ),
        (
            "NEXT_HOP claims 9 octets but only 4 follow inside the attribute section",
            &[
                &ORIGIN_IGP,
                &AS_PATH_65001,
                &[0x40, 0x03, 0x09, 10, 1, 0, 1],
            ],
            (3, TreatAsWithdraw, sub::ATTRIBUTE_LENGTH),
        ),
        (
            "EXTENDED_COMMUNITIES of 3 octets",
            &[
                &ORIGIN_IGP,
                &AS_PATH_65001,
                &NEXT_HOP,
                &[0xc0, 0x10, 0x03, 1, 2, 3],
            ],
            (16, TreatAsWithdraw, sub::OPTIONAL_ATTRIBUTE),
        ),
        (
            "EXTENDED_COMMUNITIES of 12 octets: a Link Bandwidth and a partial one",
            &[
                &ORIGIN_IGP,
                &AS_PATH_65001,
                &NEXT_HOP,
                &[
                    0xc0, 0x10, 0x0c, 0x00, 0x04, 0xfe, 0x4c, 0x4e, 0x95, 0x02, 0xf9, 0x40, 0x04,
                    0xfe, 0x4c,
                ],
            ],
            (16, TreatAsWithdraw, sub::OPTIONAL_ATTRIBUTE),
        ),
        (
            "ATOMIC_AGGREGATE of 1 octet",
            &[
                &ORIGIN_IGP,
                &AS_PATH_65001,
                &NEXT_HOP,
                &[0x40, 0x06, 0x01, 0x00],
            ],
            (6, Discard, sub::ATTRIBUTE_LENGTH),
        ),
    ];
    for (case, attrs, want) in table {
        let u = update_of(&body_with(attrs, &NLRI_24));
        assert_eq!(outcome(&u), [want], "{case}");
        assert_eq!(u.treat_as_withdraw(), want.1 == TreatAsWithdraw, "{case}");
        assert_eq!(u.nlri, [net("192.0.2.0/24")], "{case}");
    }
}

/// RFC 10005: a transitive (0x00 0x04) Link Bandwidth of 10 Gbps (1.25e9 bytes/s) and a
/// non-transitive (0x40 0x04) one of 20 Gbps, AS 65100, and one with a NaN value: decoded
/// as extended communities, the lowest valid value wins, the NaN one is counted.
#[test]
fn update_with_link_bandwidth() {
    use super::link_bandwidth;
    let u = update_of(&body_with(
        &[
            &ORIGIN_IGP,
            &AS_PATH_65001,
            &NEXT_HOP,
            &[
                0xc0, 0x10, 0x18, // EXTENDED_COMMUNITIES, 24 octets
                0x40, 0x04, 0xfe, 0x4c, 0x4f, 0x15, 0x02, 0xf9, // 2.5e9 bytes/s
                0x00, 0x04, 0xfe, 0x4c, 0x4e, 0x95, 0x02, 0xf9, // 1.25e9 bytes/s
                0x00, 0x04, 0xfe, 0x4c, 0x7f, 0xc0, 0x00, 0x00, // NaN
            ],
        ],
        &NLRI_24,
    ));
    assert!(u.errors.is_empty(), "{:?}", u.errors);
    let ecs = &u.attributes.ext_communities;
    assert_eq!(ecs.len(), 3);
    assert_eq!(link_bandwidth::lowest_gbps(ecs), Some(10.0));
    assert_eq!(link_bandwidth::invalid_count(ecs), 1);
}

#[test]
fn update_with_aigp_and_color() {
    let u = update_of(&body_with(
        &[
            &ORIGIN_IGP,
            &AS_PATH_65001,
            &NEXT_HOP,
            // EXTENDED_COMMUNITIES: Color (0x03 0x0b), flags 0, color 1
            &[0xc0, 0x10, 0x08, 0x03, 0x0b, 0, 0, 0, 0, 0, 1],
            // AIGP: flags optional (0x80), type 26, length 11; TLV type 1, length 11, metric 0
            &[0x80, 0x1a, 0x0b, 0x01, 0x00, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0],
        ],
        &NLRI_24,
    ));
    assert!(u.errors.is_empty(), "{:?}", u.errors);
    assert_eq!(u.attributes.aigp, Some(Aigp::new(0)));
    assert_eq!(color::route_colors(&u.attributes.ext_communities), [1]);
    // Re-encoded byte for byte (attributes are written in type order).
    let again = update_of(&{
        let mut b = Vec::new();
        u.encode(&mut b, CTX);
        b
    });
    assert_eq!(again.attributes, u.attributes);
}

#[test]
fn rfc7311_malformed_aigp_discarded() {
    // (AIGP attribute bytes, why it is malformed, subcode); the route survives without
    // AIGP.
    let table: [(&[u8], &str, u8); 4] = [
        (
            &[0x80, 0x1a, 0x0a, 0x01, 0x00, 0x0a, 0, 0, 0, 0, 0, 0, 0],
            "AIGP TLV length 10",
            sub::OPTIONAL_ATTRIBUTE,
        ),
        (
            &[0x80, 0x1a, 0x03, 0x09, 0x00, 0x03],
            "no AIGP TLV",
            sub::OPTIONAL_ATTRIBUTE,
        ),
        (
            &[0x80, 0x1a, 0x05, 0x01, 0x00, 0x0b, 0, 0],
            "TLV overruns the attribute",
            sub::OPTIONAL_ATTRIBUTE,
        ),
        (
            &[0xc0, 0x1a, 0x0b, 0x01, 0x00, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0],
            "transitive flag on AIGP: flags conflict",
            sub::ATTRIBUTE_FLAGS,
        ),
    ];
    for (attr, why, subcode) in table {
        let u = update_of(&body_with(
            &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, attr],
            &NLRI_24,
        ));
        assert_eq!(outcome(&u), [(26, AttrAction::Discard, subcode)], "{why}");
        assert_eq!(u.attributes.aigp, None, "{why}");
        assert!(!u.treat_as_withdraw(), "{why}");
    }
}

/// Errors RFC 7606 still answers with a session reset: (case, UPDATE body, subcode of
/// the UPDATE Message Error NOTIFICATION).
#[test]
fn rfc7606_session_resets() {
    let mp = [0x80, 0x0e, 0x09, 0x00, 0x01, 0x01, 0x04, 10, 0, 0, 1, 0x00];
    let table: [(&str, Vec<u8>, u8); 4] = [
        (
            "NLRI prefix length 33 for IPv4",
            body_with(
                &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP],
                &[0x21, 1, 2, 3, 4, 5],
            ),
            sub::INVALID_NETWORK_FIELD,
        ),
        (
            "withdrawn length 80, nothing follows",
            vec![0x00, 0x50, 0x00, 0x00],
            sub::MALFORMED_ATTRIBUTE_LIST,
        ),
        (
            "MP_REACH_NLRI twice",
            body_with(&[&ORIGIN_IGP, &AS_PATH_65001, &mp, &mp], &[]),
            sub::MALFORMED_ATTRIBUTE_LIST,
        ),
        (
            "unrecognized well-known attribute 99",
            body_with(&[&ORIGIN_IGP, &[0x40, 0x63, 0x00]], &[]),
            sub::UNRECOGNIZED_WELL_KNOWN,
        ),
    ];
    for (case, body, subcode) in table {
        let e = update_err(&body);
        assert_eq!(
            (e.notification.code, e.notification.subcode),
            (code::UPDATE, subcode),
            "{case}"
        );
    }
}

#[test]
fn path_bandwidth_quantization() {
    use fare_model::bandwidth::Encoding;
    // Port speeds and their halves survive both encodings exactly.
    for gbps in [
        10.0, 25.0, 40.0, 50.0, 75.0, 100.0, 200.0, 225.0, 300.0, 400.0, 800.0,
    ] {
        assert_eq!(Encoding::Binary16.quantize(gbps), gbps);
        assert_eq!(Encoding::Float32Upper16.quantize(gbps), gbps);
    }
    // 75/7 Gbps = 1.339 GB/s: binary16 keeps 11 significant bits (spacing 2^-10 in
    // [1, 2)), the upper half of a binary32 only 8 (the 10.6875 seen on the wire before).
    let v = 75.0 / 7.0;
    assert_eq!(Encoding::Binary16.quantize(v), 1371.0 / 1024.0 * 8.0);
    assert_eq!(Encoding::Float32Upper16.quantize(v), 10.6875);
    // The bits, by hand: 12.5 GB/s = 1.5625 x 2^3 -> sign 0, exponent 3 + 15 = 18,
    // fraction 0.5625 x 1024 = 576: 0b0_10010_1001000000 = 0x4a40.
    assert_eq!(Encoding::Binary16.encode(100.0), 0x4a40);
    // The same value as the upper half of binary32: 0x4148_0000 -> 0x4148.
    assert_eq!(Encoding::Float32Upper16.encode(100.0), 0x4148);
    // Infinity ("maximum bandwidth") stays infinity; huge finite values saturate.
    assert_eq!(Encoding::Binary16.encode(f64::INFINITY), 0x7c00);
    assert_eq!(Encoding::Binary16.decode(0x7c00), f64::INFINITY);
    assert_eq!(Encoding::Binary16.quantize(1.0e7), 65504.0 * 8.0);
    assert_eq!(Encoding::Float32Upper16.encode(f64::INFINITY), 0x7f80);
    // Negative, NaN and zero read as no bandwidth.
    for bits in [0x0000, 0x8000, 0xbc00, 0x7e00] {
        assert_eq!(Encoding::Binary16.decode(bits), 0.0);
    }
    assert_eq!(Encoding::Binary16.encode(-5.0), 0);
    assert_eq!(Encoding::Binary16.encode(f64::NAN), 0);
}

// ---- property tests ----

fn arb_v4net() -> impl Strategy<Value = IpNet> {
    (any::<u32>(), 0u8..=32).prop_map(|(a, l)| {
        IpNet::new(IpAddr::V4(Ipv4Addr::from(a)), l)
            .unwrap()
            .trunc()
    })
}

fn arb_v6net() -> impl Strategy<Value = IpNet> {
    (any::<u128>(), 0u8..=128).prop_map(|(a, l)| {
        IpNet::new(IpAddr::V6(Ipv6Addr::from(a)), l)
            .unwrap()
            .trunc()
    })
}

fn arb_attrs() -> impl Strategy<Value = PathAttributes> {
    (
        proptest::option::of(prop_oneof![
            Just(Origin::Igp),
            Just(Origin::Egp),
            Just(Origin::Incomplete)
        ]),
        proptest::option::of(proptest::collection::vec(any::<u32>(), 1..20)),
        proptest::option::of(any::<u32>().prop_filter("unicast", |a| {
            let a = Ipv4Addr::from(*a);
            !(a.is_unspecified() || a.is_multicast() || a.is_broadcast())
        })),
        proptest::option::of(any::<u32>()),
        proptest::collection::vec(any::<[u8; 8]>(), 0..5),
        proptest::option::of(proptest::collection::vec(arb_v6net(), 0..10)),
        proptest::collection::vec(
            (100u8..=200, proptest::collection::vec(any::<u8>(), 0..300)),
            0..3,
        ),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(origin, path, nh, med, ecs, v6, mut raws, aigp)| {
            raws.sort_by_key(|r| r.0);
            let mut seen = std::collections::BTreeSet::new();
            PathAttributes {
                origin,
                as_path: path.map(AsPath::sequence),
                next_hop: nh.map(Ipv4Addr::from),
                med,
                ext_communities: ecs.into_iter().map(ExtCommunity).collect(),
                mp_reach: v6.map(|nlri| MpReach {
                    family: Family::Ipv6Unicast,
                    next_hops: vec![IpAddr::V6("fd00::1".parse().unwrap())],
                    nlri,
                }),
                other: raws
                    .into_iter()
                    .filter(|(t, _)| seen.insert(*t))
                    .map(|(type_code, value)| RawAttribute {
                        flags: flag::OPTIONAL
                            | flag::TRANSITIVE
                            | if value.len() > 255 {
                                flag::EXTENDED_LENGTH
                            } else {
                                0
                            },
                        type_code,
                        value,
                    })
                    .collect(),
                aigp: aigp.map(Aigp::new),
                ..Default::default()
            }
        })
}

proptest! {
    #[test]
    fn update_round_trip(
        attrs in arb_attrs(),
        nlri in proptest::collection::vec(arb_v4net(), 0..50),
        withdrawn in proptest::collection::vec(arb_v4net(), 0..50),
    ) {
        let u = Update { withdrawn, attributes: attrs, nlri, errors: vec![] };
        let bytes = Message::Update(u.clone()).encode(CTX);
        prop_assume!(bytes.len() <= MAX_MESSAGE_LEN);
        let mut back = match Message::decode(&bytes, CTX).unwrap() {
            Message::Update(b) => b,
            other => panic!("{other:?}"),
        };
        // Missing-mandatory findings are about the content, not the codec.
        back.errors.retain(|e| e.subcode != sub::MISSING_WELL_KNOWN);
        prop_assert_eq!(&back, &u);
        prop_assert_eq!(Message::Update(back).encode(CTX), bytes);
    }

    /// What the `bgp_decode` fuzz target checks, on random bodies of every type.
    #[test]
    fn decode_never_panics_and_reencodes(kind in 0u8..8, bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let m = msg(kind, &bytes);
        if let Ok(first) = Message::decode(&m, CTX) {
            let again = Message::decode(&first.encode(CTX), CTX).unwrap();
            match (&first, &again) {
                (Message::Update(a), Message::Update(b)) => {
                    prop_assert_eq!(&a.attributes, &b.attributes);
                    prop_assert_eq!(&a.nlri, &b.nlri);
                }
                _ => prop_assert_eq!(first, again),
            }
        }
    }

    #[test]
    fn path_bandwidth_round_trip(gbps in 0.001f64..4.0e5, rid in any::<u32>(), transitive in any::<bool>()) {
        use fare_model::bandwidth::Encoding;
        for enc in [Encoding::Binary16, Encoding::Float32Upper16] {
            let pb = PathBandwidth::new(transitive, Ipv4Addr::from(rid), gbps);
            let back = pb.to_community(0xa0, enc).path_bandwidth(0xa0, enc).unwrap();
            prop_assert_eq!(back.router_id, pb.router_id);
            prop_assert_eq!(back.transitive, transitive);
            // Within half a unit in the last place (normal range: >= 0.49 Mbps).
            prop_assert!((back.gbps() - gbps).abs() / gbps <= enc.relative_precision() * 1.0000001,
                "{enc:?} {gbps} -> {}", back.gbps());
            // A decoded value encodes to the same bits again: relaying never drifts.
            prop_assert_eq!(enc.quantize(back.gbps()), back.gbps());
        }
    }
}

#[test]
fn pack_splits_large_announcements() {
    let attrs = PathAttributes {
        origin: Some(Origin::Igp),
        as_path: Some(AsPath::sequence(vec![65001])),
        next_hop: Some(Ipv4Addr::new(10, 0, 0, 1)),
        ..Default::default()
    };
    let nets: Vec<IpNet> = (0..5000u32)
        .map(|i| IpNet::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (i << 8))), 24).unwrap())
        .collect();
    let updates = update::pack(&attrs, &nets, CTX);
    assert!(updates.len() > 1);
    let mut all = Vec::new();
    for u in updates {
        let bytes = Message::Update(u.clone()).encode(CTX);
        assert!(bytes.len() <= MAX_MESSAGE_LEN);
        all.extend(u.nlri);
    }
    assert_eq!(all, nets);
    let w = update::pack_withdraw(&nets);
    assert_eq!(w.iter().map(|u| u.withdrawn.len()).sum::<usize>(), 5000);
}

/// Session fuzzing crasher: a peer's route with a 4000-octet unknown optional transitive
/// attribute (its UPDATE exactly 4096 octets) left no room for a prefix once re-advertised,
/// and the budget computation underflowed (a panic in the agent). Such attributes are not
/// sent at all (RFC 8654 §4); smaller ones still are, within 4096 octets.
#[test]
fn pack_refuses_attributes_too_large_to_send() {
    let with_unknown = |len: usize| PathAttributes {
        origin: Some(Origin::Igp),
        as_path: Some(AsPath::sequence(vec![65001, 65100])),
        next_hop: Some(Ipv4Addr::new(10, 0, 0, 1)),
        other: vec![RawAttribute {
            flags: flag::OPTIONAL | flag::TRANSITIVE | flag::EXTENDED_LENGTH,
            type_code: 250,
            value: vec![0x5a; len],
        }],
        ..Default::default()
    };
    let nets = [net("198.51.100.0/24")];
    assert!(update::pack(&with_unknown(4040), &nets, CTX).is_empty());
    assert!(update::pack(&with_unknown(4096), &nets, CTX).is_empty());
    let fits = update::pack(&with_unknown(3900), &nets, CTX);
    assert_eq!(fits.len(), 1);
    assert!(Message::Update(fits[0].clone()).encode(CTX).len() <= MAX_MESSAGE_LEN);
}

/// Fuzz crasher (bgp_decode): unknown attributes out of type order on the wire came back
/// reordered by `encode`, so the re-encoded UPDATE decoded to different attributes.
#[test]
fn unknown_attributes_out_of_order_round_trip() {
    let body = [
        0x00, 0x00, // no withdrawn routes
        0x00, 0x06, // path attributes: 6 octets
        0xef, 0x09, 0x00, // flags 0xef (optional transitive partial), type 9, empty
        0x80, 0x00, 0x00, // flags 0x80 (optional), type 0, empty
    ];
    let ctx = Context {
        four_octet_as: false,
    };
    let Ok(first) = Message::decode(&msg(msg_type::UPDATE, &body), ctx) else {
        panic!("decodes");
    };
    let again = Message::decode(&first.encode(ctx), ctx).unwrap();
    let (Message::Update(a), Message::Update(b)) = (&first, &again) else {
        panic!("UPDATEs");
    };
    assert_eq!(a.attributes, b.attributes);
    let types: Vec<u8> = a.attributes.other.iter().map(|r| r.type_code).collect();
    assert_eq!(types, [0, 9]);
}

/// RFC 7606 §3(d) with MP_REACH_NLRI: an UPDATE that announces IPv6 prefixes without
/// ORIGIN is treat-as-withdraw; one whose MP_REACH_NLRI announces nothing (RFC 4760 §3:
/// an empty NLRI field is allowed, e.g. an End-of-RIB marker's family) reaches nothing,
/// so nothing is missing.
#[test]
fn rfc7606_missing_origin_with_mp_reach() {
    const MP_REACH_ONE: [u8; 29] = [
        0x80, 0x0e, 0x1a, 0x00, 0x02, 0x01, // MP_REACH_NLRI, 26 octets, IPv6 unicast
        0x10, // next hop length 16
        0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // next hop fd00::1
        0x00, // reserved
        0x20, 0x20, 0x01, 0x0d, 0xb8, // NLRI 2001:db8::/32
    ];
    const MP_REACH_NONE: [u8; 24] = [
        0x80, 0x0e, 0x15, 0x00, 0x02, 0x01, // MP_REACH_NLRI, 21 octets, IPv6 unicast
        0x10, // next hop length 16
        0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // next hop fd00::1
        0x00, // reserved, no NLRI
    ];
    let u = update_of(&body_with(&[&MP_REACH_ONE, &AS_PATH_65001], &[]));
    assert_eq!(
        outcome(&u),
        [(
            attribute::attr_type::ORIGIN,
            AttrAction::TreatAsWithdraw,
            sub::MISSING_WELL_KNOWN
        )]
    );
    let u = update_of(&body_with(&[&MP_REACH_NONE, &AS_PATH_65001], &[]));
    assert_eq!(outcome(&u), []);
    // NEXT_HOP is mandatory only with NLRI in the body (RFC 4760 §3: MP_REACH_NLRI
    // carries its own next hop).
    let u = update_of(&body_with(
        &[&ORIGIN_IGP, &MP_REACH_ONE, &AS_PATH_65001],
        &[],
    ));
    assert_eq!(outcome(&u), []);
}

/// fare sends one capability per Optional Parameter (RFC 5492 §4), but the Optional
/// Parameters Length is one octet: when one parameter per capability would pass 255
/// octets, all capabilities go in a single parameter, cut to the 253 octets it can hold.
#[test]
fn open_capabilities_past_255_octets_share_one_parameter() {
    let id = Ipv4Addr::new(10, 0, 0, 1);
    // 64 multiprotocol capabilities: 64 x 8 = 512 octets as separate parameters; 64 x 6
    // = 384 octets of capabilities, cut to 253.
    let caps: Vec<Capability> = (0..64)
        .map(|afi| Capability::Multiprotocol { afi, safi: 1 })
        .collect();
    let mut body = Vec::new();
    Open::new(65001, 90, id, caps).encode(&mut body);
    assert_eq!(body.len(), 10 + 255);
    assert_eq!(body[9], 255, "optional parameters length");
    assert_eq!(
        body[10..12],
        [2, 253],
        "one capabilities parameter of 253 octets"
    );
    assert_eq!(body[12..24], [1, 4, 0, 0, 0, 1, 1, 4, 0, 1, 0, 1]);
    // The 43rd capability (AFI 42) is cut after its code octet.
    assert_eq!(body[12 + 42 * 6..], [1]);

    // Exactly 255 octets as separate parameters still go separately: route refresh (2 +
    // 2) and an unknown capability of 247 octets (2 + 2 + 247).
    let caps = vec![
        Capability::RouteRefresh,
        Capability::Unknown {
            code: 73,
            value: vec![0x61; 247],
        },
    ];
    let mut body = Vec::new();
    Open::new(65001, 90, id, caps).encode(&mut body);
    assert_eq!(body.len(), 10 + 255);
    assert_eq!(body[9..16], [255, 2, 2, 2, 0, 2, 249]);
    assert_eq!(body[16..18], [73, 247]);
}

/// The packing budget by hand. ORIGIN (4 octets) + AS_PATH [65001] (3 + 2 + 4) +
/// NEXT_HOP (7) = 20 octets of attributes; pack leaves 4096 - 19 (header) - 4 (the two
/// length fields) - 8 (slack) - 20 = 4045 octets of NLRI: 809 /32s (5 octets each)
/// exactly, 1011 /24s (4 octets each, 4044 octets).
#[test]
fn pack_budget_boundaries() {
    let attrs = PathAttributes {
        origin: Some(Origin::Igp),
        as_path: Some(AsPath::sequence(vec![65001])),
        next_hop: Some(Ipv4Addr::new(10, 0, 0, 1)),
        ..Default::default()
    };
    let hosts = |n: u32| -> Vec<IpNet> {
        (0..n)
            .map(|i| IpNet::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), 32).unwrap())
            .collect()
    };
    let sizes = |us: &[Update]| us.iter().map(|u| u.nlri.len()).collect::<Vec<_>>();
    let one = update::pack(&attrs, &hosts(809), CTX);
    assert_eq!(sizes(&one), [809]);
    assert_eq!(
        Message::Update(one[0].clone()).encode(CTX).len(),
        19 + 4 + 20 + 4045
    );
    assert_eq!(sizes(&update::pack(&attrs, &hosts(810), CTX)), [809, 1]);
    let slash24 = |n: u32| -> Vec<IpNet> {
        (0..n)
            .map(|i| IpNet::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (i << 8))), 24).unwrap())
            .collect()
    };
    assert_eq!(sizes(&update::pack(&attrs, &slash24(1011), CTX)), [1011]);
    assert_eq!(sizes(&update::pack(&attrs, &slash24(1012), CTX)), [1011, 1]);
}

/// Withdrawals by hand: 4096 - 19 - 4 - 16 (slack) = 4057 octets of withdrawn routes
/// per UPDATE: one /32 (5) and 1013 /24s (4052) fill it exactly; one /24 more goes in a
/// second UPDATE. IPv6 ones go in MP_UNREACH_NLRI with the same budget: 238 /128s (17
/// octets each, 4046).
#[test]
fn pack_withdraw_budget_boundaries() {
    let mut nets = vec![net("192.0.2.1/32")];
    nets.extend(
        (0..1014u32)
            .map(|i| IpNet::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (i << 8))), 24).unwrap()),
    );
    let sizes = |us: &[Update]| {
        us.iter()
            .map(|u| {
                u.withdrawn.len()
                    + u.attributes
                        .mp_unreach
                        .as_ref()
                        .map_or(0, |m| m.withdrawn.len())
            })
            .collect::<Vec<_>>()
    };
    let full = update::pack_withdraw(&nets[..1014]);
    assert_eq!(sizes(&full), [1014]);
    assert_eq!(
        Message::Update(full[0].clone()).encode(CTX).len(),
        19 + 4 + 4057
    );
    assert_eq!(sizes(&update::pack_withdraw(&nets)), [1014, 1]);
    let v6: Vec<IpNet> = (0..239u128)
        .map(|i| IpNet::new(IpAddr::V6(Ipv6Addr::from((0x2001_0db8u128 << 96) + i)), 128).unwrap())
        .collect();
    let w = update::pack_withdraw(&v6);
    assert_eq!(sizes(&w), [238, 1]);
    assert!(w.iter().all(|u| u.withdrawn.is_empty()));
}

/// RFC 4271 §5 / RFC 7606 §3(c): AGGREGATOR, COMMUNITIES, EXTENDED_COMMUNITIES and
/// LARGE_COMMUNITIES are optional transitive; sent with only the Optional bit, each is an
/// Attribute Flags Error: AGGREGATOR is then discarded (RFC 7606 §7.7), the others make
/// the UPDATE treat-as-withdraw (§7.8, §7.14, RFC 8092 §6).
#[test]
fn rfc7606_optional_transitive_attributes_with_wrong_flags() {
    use AttrAction::{Discard, TreatAsWithdraw};
    let table: [(&[u8], Outcome); 4] = [
        (
            &[0x80, 0x07, 0x08, 0, 0, 0xfd, 0xe9, 10, 0, 0, 1],
            (7, Discard, sub::ATTRIBUTE_FLAGS),
        ),
        (
            &[0x80, 0x08, 0x04, 0xff, 0xff, 0, 0],
            (8, TreatAsWithdraw, sub::ATTRIBUTE_FLAGS),
        ),
        (
            &[0x80, 0x10, 0x08, 0, 2, 0xfd, 0xe9, 0, 0, 0, 1],
            (16, TreatAsWithdraw, sub::ATTRIBUTE_FLAGS),
        ),
        (
            &[0x80, 0x20, 0x0c, 0, 0, 0xfd, 0xe9, 0, 0, 0, 1, 0, 0, 0, 2],
            (32, TreatAsWithdraw, sub::ATTRIBUTE_FLAGS),
        ),
    ];
    for (attr, want) in table {
        let body = body_with(&[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, attr], &NLRI_24);
        assert_eq!(outcome(&update_of(&body)), [want], "{}", hex(attr));
    }
}

/// LOCAL_PREF (RFC 4271 §4.3 type 5, well-known, 4 octets) as a vector both ways, and
/// with a wrong length: RFC 7606 §7.5, treat-as-withdraw.
#[test]
fn local_pref_vector() {
    const LOCAL_PREF_200: [u8; 7] = [0x40, 0x05, 0x04, 0x00, 0x00, 0x00, 0xc8];
    let body = body_with(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &LOCAL_PREF_200],
        &NLRI_24,
    );
    let u = update_of(&body);
    assert_eq!(u.attributes.local_pref, Some(200));
    assert!(u.attributes.other.is_empty());
    assert_eq!(outcome(&u), []);
    both_ways(&msg(msg_type::UPDATE, &body), &Message::Update(u));
    let short: [u8; 6] = [0x40, 0x05, 0x03, 0x00, 0x00, 0xc8];
    let u = update_of(&body_with(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &short],
        &NLRI_24,
    ));
    assert_eq!(u.attributes.local_pref, None);
    assert_eq!(
        outcome(&u),
        [(5, AttrAction::TreatAsWithdraw, sub::ATTRIBUTE_LENGTH)]
    );
}

/// RFC 4271 §6.3 / RFC 7606 §7.3: a NEXT_HOP that is not a unicast address (0.0.0.0, a
/// multicast one, the limited broadcast) is an Invalid NEXT_HOP Attribute error,
/// treat-as-withdraw; each of the three on its own.
#[test]
fn rfc7606_next_hop_not_unicast() {
    for (nh, bad) in [
        ([0, 0, 0, 0], true),
        ([224, 0, 0, 1], true),
        ([239, 255, 255, 250], true),
        ([255, 255, 255, 255], true),
        ([10, 1, 0, 1], false),
    ] {
        let attr = [0x40, 0x03, 0x04, nh[0], nh[1], nh[2], nh[3]];
        let u = update_of(&body_with(&[&ORIGIN_IGP, &AS_PATH_65001, &attr], &NLRI_24));
        let want: &[Outcome] = if bad {
            &[(3, AttrAction::TreatAsWithdraw, sub::INVALID_NEXT_HOP)]
        } else {
            &[]
        };
        assert_eq!(outcome(&u), want, "{nh:?}");
    }
}

/// RFC 7606 §7.7, §7.8 and RFC 8092 §6: lengths of AGGREGATOR (8 octets with 4-octet AS
/// numbers, 6 without), COMMUNITIES (a multiple of 4) and LARGE_COMMUNITIES (a multiple
/// of 12). A wrong one discards AGGREGATOR and makes the UPDATE treat-as-withdraw for
/// the others; a right one is kept as received.
#[test]
fn rfc7606_lengths_of_kept_attributes() {
    use AttrAction::{Discard, TreatAsWithdraw};
    let two = Context {
        four_octet_as: false,
    };
    let as_path_2 = [0x40, 0x02, 0x04, 0x02, 0x01, 0xfd, 0xe9];
    // (context, attribute, the error or None)
    let table: [(Context, &[u8], Option<Outcome>); 10] = [
        (
            CTX,
            &[0xc0, 0x07, 0x08, 0, 0, 0xfd, 0xe9, 10, 0, 0, 1],
            None,
        ),
        (
            CTX,
            &[0xc0, 0x07, 0x06, 0xfd, 0xe9, 10, 0, 0, 1],
            Some((7, Discard, sub::ATTRIBUTE_LENGTH)),
        ),
        (two, &[0xc0, 0x07, 0x06, 0xfd, 0xe9, 10, 0, 0, 1], None),
        (
            two,
            &[0xc0, 0x07, 0x08, 0, 0, 0xfd, 0xe9, 10, 0, 0, 1],
            Some((7, Discard, sub::ATTRIBUTE_LENGTH)),
        ),
        (CTX, &[0xc0, 0x08, 0x04, 0xfd, 0xe9, 0, 1], None),
        (
            CTX,
            &[0xc0, 0x08, 0x08, 0xfd, 0xe9, 0, 1, 0xfd, 0xe9, 0, 2],
            None,
        ),
        (
            CTX,
            &[0xc0, 0x08, 0x05, 0xfd, 0xe9, 0, 1, 0],
            Some((8, TreatAsWithdraw, sub::ATTRIBUTE_LENGTH)),
        ),
        (
            CTX,
            &[0xc0, 0x20, 0x0c, 0, 0, 0xfd, 0xe9, 0, 0, 0, 1, 0, 0, 0, 2],
            None,
        ),
        (
            CTX,
            &[0xc0, 0x20, 0x08, 0, 0, 0xfd, 0xe9, 0, 0, 0, 1],
            Some((32, TreatAsWithdraw, sub::ATTRIBUTE_LENGTH)),
        ),
        (
            CTX,
            &[
                0xc0, 0x20, 0x10, 0, 0, 0xfd, 0xe9, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3,
            ],
            Some((32, TreatAsWithdraw, sub::ATTRIBUTE_LENGTH)),
        ),
    ];
    for (ctx, attr, want) in table {
        let path: &[u8] = if ctx.four_octet_as {
            &AS_PATH_65001
        } else {
            &as_path_2
        };
        let body = body_with(&[&ORIGIN_IGP, path, &NEXT_HOP, attr], &NLRI_24);
        let Message::Update(u) = Message::decode(&msg(msg_type::UPDATE, &body), ctx).unwrap()
        else {
            panic!()
        };
        match want {
            Some(o) => {
                assert_eq!(outcome(&u), [o], "{}", hex(attr));
                assert!(u.attributes.other.is_empty(), "{}", hex(attr));
            }
            None => {
                assert_eq!(outcome(&u), [], "{}", hex(attr));
                assert_eq!(u.attributes.other.len(), 1, "{}", hex(attr));
                assert_eq!(u.attributes.other[0].value, attr[3..], "{}", hex(attr));
            }
        }
    }
}

/// RFC 2545 §3: an IPv6 MP_REACH_NLRI next hop of 32 octets is a global address and a
/// link-local one.
#[test]
fn mp_reach_global_and_link_local_next_hops() {
    let mut attr = vec![
        0x80, 0x0e, 0x2a, 0x00, 0x02, 0x01, // MP_REACH_NLRI, 42 octets, IPv6 unicast
        0x20, // next hop length 32
    ];
    attr.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    attr.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    attr.extend_from_slice(&[0x00, 0x20, 0x20, 0x01, 0x0d, 0xb8]); // reserved, 2001:db8::/32
    let body = body_with(&[&ORIGIN_IGP, &AS_PATH_65001, &attr], &[]);
    let u = update_of(&body);
    assert_eq!(outcome(&u), []);
    let m = u.attributes.mp_reach.as_ref().unwrap();
    assert_eq!(
        m.next_hops,
        [
            "2001:db8::1".parse::<IpAddr>().unwrap(),
            "fe80::2".parse::<IpAddr>().unwrap()
        ]
    );
    assert_eq!(m.nlri, [net("2001:db8::/32")]);
}

/// An attribute value over 255 octets forces the Extended Length bit (RFC 4271 §4.3) and a
/// two-octet length, whatever flags it was given; 255 octets still fit one octet.
#[test]
fn long_attribute_values_get_extended_length() {
    let with = |len: usize| PathAttributes {
        other: vec![RawAttribute {
            flags: flag::OPTIONAL | flag::TRANSITIVE,
            type_code: 99,
            value: vec![0x5a; len],
        }],
        ..Default::default()
    };
    let mut out = Vec::new();
    with(300).encode(CTX, &mut out);
    assert_eq!(out[..4], [0xd0, 99, 0x01, 0x2c]);
    assert_eq!(out.len(), 4 + 300);
    let mut out = Vec::new();
    with(255).encode(CTX, &mut out);
    assert_eq!(out[..3], [0xc0, 99, 0xff]);
    assert_eq!(out.len(), 3 + 255);
}

/// The MP attributes go first (MP_UNREACH_NLRI, then MP_REACH_NLRI: RFC 7606 §5.1), then
/// every other attribute by type code, a (reserved) type 0 kept as received included.
#[test]
fn mp_attributes_first_then_by_type_code() {
    let attrs = PathAttributes {
        origin: Some(Origin::Igp),
        mp_reach: Some(MpReach {
            family: Family::Ipv6Unicast,
            next_hops: vec!["fd00::1".parse().unwrap()],
            nlri: vec![],
        }),
        mp_unreach: Some(MpUnreach {
            family: Family::Ipv6Unicast,
            withdrawn: vec![],
        }),
        other: vec![RawAttribute {
            flags: flag::OPTIONAL | flag::TRANSITIVE,
            type_code: 0,
            value: vec![7],
        }],
        ..Default::default()
    };
    let mut out = Vec::new();
    attrs.encode(CTX, &mut out);
    let mut types = Vec::new();
    let mut i = 0;
    while i < out.len() {
        let (flags, ty) = (out[i], out[i + 1]);
        let (len, head) = if flags & flag::EXTENDED_LENGTH != 0 {
            (usize::from(u16::from_be_bytes([out[i + 2], out[i + 3]])), 4)
        } else {
            (usize::from(out[i + 2]), 3)
        };
        types.push(ty);
        i += head + len;
    }
    assert_eq!(types, [15, 14, 0, 1]);
}

/// RFC 6793 §4: AS numbers are four octets on a session only once the peer's OPEN
/// carried the 4-octet AS capability; before its OPEN, and without the capability, two.
#[test]
fn four_octet_as_negotiated_from_the_peer_open() {
    let id = Ipv4Addr::new(10, 0, 0, 2);
    let with = Open::new(65001, 90, id, vec![Capability::FourOctetAs(65001)]);
    let without = Open::new(65001, 90, id, vec![Capability::RouteRefresh]);
    assert!(!Context::negotiated(None).four_octet_as);
    assert!(!Context::negotiated(Some(&without)).four_octet_as);
    assert!(Context::negotiated(Some(&with)).four_octet_as);
}

/// RFC 4271 §4.1 / §6.1: the smallest message of each type (OPEN 29, UPDATE 23,
/// NOTIFICATION 21, KEEPALIVE 19, ROUTE-REFRESH 23 octets per RFC 2918) and at most 4096
/// octets; a Length field outside that is a Bad Message Length error carrying the field.
#[test]
fn header_length_bounds_per_type() {
    let header = |kind: u8, len: u16| {
        let mut h = MARKER.to_vec();
        h.extend_from_slice(&len.to_be_bytes());
        h.push(kind);
        h
    };
    for (kind, min) in [(1u8, 29u16), (2, 23), (3, 21), (4, 19), (5, 23)] {
        assert_eq!(
            frame_len(&header(kind, min)),
            Ok(Some(usize::from(min))),
            "type {kind}"
        );
        let e = frame_len(&header(kind, min - 1)).unwrap_err();
        assert_eq!(
            (e.notification.code, e.notification.subcode),
            (1, 2),
            "type {kind}"
        );
        assert_eq!(e.notification.data, (min - 1).to_be_bytes());
        if kind != 4 {
            assert_eq!(
                frame_len(&header(kind, 4096)),
                Ok(Some(4096)),
                "type {kind}"
            );
        }
        let e = frame_len(&header(kind, 4097)).unwrap_err();
        assert_eq!(e.notification.data, [0x10, 0x01], "type {kind}");
    }
}
