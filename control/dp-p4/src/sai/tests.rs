//! The SAI-P4 profile's builders against hand-written P4Infos, and its installer against
//! the in-memory P4Runtime target.
//!
//! `PINS_P4INFO` is written by hand for these tests in the shape of the SAI-P4 program's
//! P4Info as PINS switches expose it (only the tables, actions and action profile fare
//! uses; names as in SAI-P4, ids chosen here): the id types and ports are
//! `@p4runtime_translation(..., string)` new types (no bit width, a `type_name`), MACs and
//! addresses plain bit strings. `bmv2_p4info()` is the same with SAI-P4's
//! `-DPLATFORM_BMV2` widths instead: ids `bit<256>`, ports `bit<9>`. Every expected byte
//! below is written out by hand.

use super::backend::{SaiOptions, NO_SPRAY, VRF};
use super::*;
use crate::skeleton::selector_limits;
use crate::skeleton::GroupForm;
use fare_dataplane::{Dataplane, DataplaneError, Group, GroupLimits, GroupMode, Member};
use fare_p4runtime::entities::{entity_table, update};
use fare_p4runtime::fake::FakeTarget;
use p4::field_match::FieldMatchType as M;

const PINS_P4INFO: &str = r#"
pkg_info { arch: "v1model" platform_properties { multicast_group_table_size: 512 } }
tables {
  preamble { id: 1001 name: "ingress.l3_admit.l3_admit_table" alias: "l3_admit_table" }
  match_fields { id: 1 name: "dst_mac" bitwidth: 48 match_type: TERNARY }
  match_fields { id: 2 name: "in_port" match_type: OPTIONAL type_name { name: "port_id_t" } }
  action_refs { id: 2002 }
  size: 64
}
tables {
  preamble { id: 1002 name: "ingress.routing_lookup.vrf_table" alias: "vrf_table" }
  match_fields { id: 1 name: "vrf_id" match_type: EXACT type_name { name: "vrf_id_t" } }
  action_refs { id: 2001 }
  size: 64
}
tables {
  preamble { id: 1003 name: "ingress.acl_pre_ingress.acl_pre_ingress_table" alias: "acl_pre_ingress_table" }
  match_fields { id: 1 name: "is_ip" bitwidth: 1 match_type: OPTIONAL }
  match_fields { id: 2 name: "is_ipv4" bitwidth: 1 match_type: OPTIONAL }
  action_refs { id: 2003 }
  size: 254
}
tables {
  preamble { id: 1004 name: "ingress.routing_lookup.ipv4_table" alias: "ipv4_table" }
  match_fields { id: 1 name: "vrf_id" match_type: EXACT type_name { name: "vrf_id_t" } }
  match_fields { id: 2 name: "ipv4_dst" bitwidth: 32 match_type: LPM }
  action_refs { id: 2004 }
  size: 131072
}
tables {
  preamble { id: 1005 name: "ingress.routing_lookup.ipv6_table" alias: "ipv6_table" }
  match_fields { id: 1 name: "vrf_id" match_type: EXACT type_name { name: "vrf_id_t" } }
  match_fields { id: 2 name: "ipv6_dst" bitwidth: 128 match_type: LPM }
  action_refs { id: 2004 }
  size: 17000
}
tables {
  preamble { id: 1006 name: "ingress.routing_resolution.wcmp_group_table" alias: "wcmp_group_table" }
  match_fields { id: 1 name: "wcmp_group_id" match_type: EXACT type_name { name: "wcmp_group_id_t" } }
  action_refs { id: 2005 }
  implementation_id: 3001
  size: 3968
}
tables {
  preamble { id: 1007 name: "ingress.routing_resolution.nexthop_table" alias: "nexthop_table" }
  match_fields { id: 1 name: "nexthop_id" match_type: EXACT type_name { name: "nexthop_id_t" } }
  action_refs { id: 2006 }
  size: 4096
}
tables {
  preamble { id: 1008 name: "ingress.routing_resolution.neighbor_table" alias: "neighbor_table" }
  match_fields { id: 1 name: "router_interface_id" match_type: EXACT type_name { name: "router_interface_id_t" } }
  match_fields { id: 2 name: "neighbor_id" bitwidth: 128 match_type: EXACT }
  action_refs { id: 2007 }
  size: 4096
}
tables {
  preamble { id: 1009 name: "ingress.routing_resolution.router_interface_table" alias: "router_interface_table" }
  match_fields { id: 1 name: "router_interface_id" match_type: EXACT type_name { name: "router_interface_id_t" } }
  action_refs { id: 2008 }
  size: 4096
}
actions { preamble { id: 2001 name: "no_action" alias: "no_action" } }
actions { preamble { id: 2002 name: "ingress.l3_admit.admit_to_l3" alias: "admit_to_l3" } }
actions {
  preamble { id: 2003 name: "ingress.acl_pre_ingress.set_vrf" alias: "set_vrf" }
  params { id: 1 name: "vrf_id" type_name { name: "vrf_id_t" } }
}
actions {
  preamble { id: 2004 name: "ingress.routing_lookup.set_wcmp_group_id" alias: "set_wcmp_group_id" }
  params { id: 1 name: "wcmp_group_id" type_name { name: "wcmp_group_id_t" } }
}
actions {
  preamble { id: 2005 name: "set_nexthop_id" alias: "set_nexthop_id" }
  params { id: 1 name: "nexthop_id" type_name { name: "nexthop_id_t" } }
}
actions {
  preamble { id: 2006 name: "ingress.routing_resolution.set_ip_nexthop" alias: "set_ip_nexthop" }
  params { id: 1 name: "router_interface_id" type_name { name: "router_interface_id_t" } }
  params { id: 2 name: "neighbor_id" bitwidth: 128 }
}
actions {
  preamble { id: 2007 name: "ingress.routing_resolution.set_dst_mac" alias: "set_dst_mac" }
  params { id: 1 name: "dst_mac" bitwidth: 48 }
}
actions {
  preamble { id: 2008 name: "ingress.routing_resolution.unicast_set_port_and_src_mac" alias: "unicast_set_port_and_src_mac" }
  params { id: 1 name: "port" type_name { name: "port_id_t" } }
  params { id: 2 name: "src_mac" bitwidth: 48 }
}
action_profiles {
  preamble { id: 3001 name: "ingress.routing_resolution.wcmp_group_selector" alias: "wcmp_group_selector" }
  table_ids: 1006
  with_selector: true
  size: 49152
  max_group_size: 512
  sum_of_weights { }
}
type_info {
  new_types { key: "nexthop_id_t" value { translated_type { sdn_string { } } } }
  new_types { key: "port_id_t" value { translated_type { sdn_string { } } } }
  new_types { key: "router_interface_id_t" value { translated_type { sdn_string { } } } }
  new_types { key: "vrf_id_t" value { translated_type { sdn_string { } } } }
  new_types { key: "wcmp_group_id_t" value { translated_type { sdn_string { } } } }
}
"#;

/// The same program compiled with `-DPLATFORM_BMV2`: no translation, ids `bit<256>`,
/// ports `bit<9>`.
fn bmv2_p4info() -> String {
    let mut text = PINS_P4INFO.to_string();
    for t in [
        "vrf_id_t",
        "wcmp_group_id_t",
        "nexthop_id_t",
        "router_interface_id_t",
    ] {
        text = text.replace(&format!("type_name {{ name: \"{t}\" }}"), "bitwidth: 256");
    }
    text = text.replace("type_name { name: \"port_id_t\" }", "bitwidth: 9");
    let cut = text.find("type_info").expect("fixture has type_info");
    text.truncate(cut);
    text
}

fn pins() -> SaiProgram {
    SaiProgram::resolve(&P4Info::from_text(PINS_P4INFO).expect("fixture parses"))
        .expect("fixture resolves")
}

fn bmv2() -> SaiProgram {
    SaiProgram::resolve(&P4Info::from_text(&bmv2_p4info()).expect("fixture parses"))
        .expect("fixture resolves")
}

fn exact(id: u32, value: &[u8]) -> p4::FieldMatch {
    p4::FieldMatch {
        field_id: id,
        field_match_type: Some(M::Exact(p4::field_match::Exact {
            value: value.to_vec(),
        })),
    }
}

fn direct(e: &p4::TableEntry) -> (u32, Vec<(u32, Vec<u8>)>) {
    match e.action.as_ref().and_then(|a| a.r#type.as_ref()) {
        Some(p4::table_action::Type::Action(a)) => (
            a.action_id,
            a.params
                .iter()
                .map(|p| (p.param_id, p.value.clone()))
                .collect(),
        ),
        other => panic!("not a direct action: {other:?}"),
    }
}

const ROUTER_MAC: MacAddr = MacAddr([0x02, 0xfa, 0x4e, 0x00, 0x00, 0x01]);

#[test]
fn encodings_follow_the_p4info() {
    let p = pins();
    assert_eq!(p.vrf_table_vrf.encoding, Encoding::Str);
    assert_eq!(p.wcmp_group_id.encoding, Encoding::Str);
    assert_eq!(p.rif_port.encoding, Encoding::Str);
    assert_eq!(p.neighbor_id.encoding, Encoding::Bits(128));
    assert_eq!(p.rif_src_mac.encoding, Encoding::Bits(48));
    let b = bmv2();
    assert_eq!(b.vrf_table_vrf.encoding, Encoding::Bits(256));
    assert_eq!(b.nexthop_id.encoding, Encoding::Bits(256));
    assert_eq!(b.rif_port.encoding, Encoding::Bits(9));
    // Ids by name, not by number.
    assert_eq!(
        (p.wcmp_group, p.set_nexthop_id, p.selector.size),
        (1006, 2005, 49152)
    );
}

#[test]
fn group_limit_is_the_selectors_max_group_size() {
    let p = pins();
    assert_eq!(
        selector_limits(&p.selector, GroupForm::Weighted),
        GroupLimits::size(512)
    );
}

#[test]
fn route_entry_bytes() {
    let net: IpNet = "10.1.0.0/16".parse().unwrap();
    for p in [pins(), bmv2()] {
        let e = p.route_entry(VRF, net, "fare-g-1").unwrap();
        assert_eq!(e.table_id, 1004);
        assert_eq!(e.r#match.len(), 2);
        assert_eq!(e.r#match[0], exact(1, b"fare"));
        assert_eq!(
            e.r#match[1].field_match_type,
            Some(M::Lpm(p4::field_match::Lpm {
                value: vec![0x0a, 0x01, 0x00, 0x00],
                prefix_len: 16
            }))
        );
        assert_eq!(direct(&e), (2004, vec![(1, b"fare-g-1".to_vec())]));
    }
    // IPv6, host bits cleared; a default route omits the LPM field.
    let p = pins();
    let e = p
        .route_entry(VRF, "2001:db8::1/32".parse().unwrap(), "g")
        .unwrap();
    assert_eq!(e.table_id, 1005);
    assert_eq!(
        e.r#match[1].field_match_type,
        Some(M::Lpm(p4::field_match::Lpm {
            value: vec![0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            prefix_len: 32
        }))
    );
    let e = p
        .route_entry(VRF, "0.0.0.0/0".parse().unwrap(), "g")
        .unwrap();
    assert_eq!(e.r#match, vec![exact(1, b"fare")]);
}

#[test]
fn wcmp_group_entry_is_a_one_shot_action_set() {
    let actions = [
        WcmpAction {
            nexthop_id: "fare-nh-1".into(),
            weight: 3,
            watch_port: None,
        },
        WcmpAction {
            nexthop_id: "fare-nh-2".into(),
            weight: 1,
            watch_port: Some(2),
        },
    ];
    // PINS: the watch port is the port's P4Runtime id as a string; BMv2: its number.
    for (p, watch) in [(pins(), b"2".to_vec()), (bmv2(), vec![0x02])] {
        let e = p.wcmp_group_entry("fare-g-7", &actions).unwrap();
        assert_eq!(e.table_id, 1006);
        assert_eq!(e.r#match, vec![exact(1, b"fare-g-7")]);
        let Some(p4::table_action::Type::ActionProfileActionSet(set)) =
            e.action.and_then(|a| a.r#type)
        else {
            panic!("not an action set");
        };
        let got: Vec<_> = set
            .action_profile_actions
            .iter()
            .map(|a| {
                let act = a.action.as_ref().unwrap();
                (
                    act.action_id,
                    act.params[0].param_id,
                    act.params[0].value.clone(),
                    a.weight,
                    a.watch_kind.clone(),
                )
            })
            .collect();
        use p4::action_profile_action::WatchKind;
        assert_eq!(
            got,
            vec![
                (2005, 1, b"fare-nh-1".to_vec(), 3, None),
                (
                    2005,
                    1,
                    b"fare-nh-2".to_vec(),
                    1,
                    Some(WatchKind::WatchPort(watch))
                ),
            ]
        );
    }
    let bad = [WcmpAction {
        nexthop_id: "x".into(),
        weight: 0,
        watch_port: None,
    }];
    assert!(pins().wcmp_group_entry("g", &bad).is_err());
}

#[test]
fn nexthop_neighbor_and_rif_entry_bytes() {
    let v4 = neighbor_id(Some("10.0.0.2".parse().unwrap()), ROUTER_MAC);
    let mapped = vec![0xff, 0xff, 10, 0, 0, 2];
    for p in [pins(), bmv2()] {
        let e = p.nexthop_entry("fare-nh-1", "fare-rif-1", v4).unwrap();
        assert_eq!(e.table_id, 1007);
        assert_eq!(e.r#match, vec![exact(1, b"fare-nh-1")]);
        assert_eq!(
            direct(&e),
            (2006, vec![(1, b"fare-rif-1".to_vec()), (2, mapped.clone())])
        );
        let mac = MacAddr([0x0a, 0, 0, 0, 0, 0x22]);
        let e = p.neighbor_entry("fare-rif-1", v4, mac).unwrap();
        assert_eq!(e.table_id, 1008);
        assert_eq!(e.r#match, vec![exact(1, b"fare-rif-1"), exact(2, &mapped)]);
        assert_eq!(direct(&e), (2007, vec![(1, vec![0x0a, 0, 0, 0, 0, 0x22])]));
    }
    // Port 1: "1" on PINS (translated), 0x01 on BMv2 (bit<9>).
    let mac = vec![0x02, 0xfa, 0x4e, 0, 0, 1];
    let e = pins().rif_entry("fare-rif-1", 1, ROUTER_MAC).unwrap();
    assert_eq!(e.table_id, 1009);
    assert_eq!(e.r#match, vec![exact(1, b"fare-rif-1")]);
    assert_eq!(
        direct(&e),
        (2008, vec![(1, b"1".to_vec()), (2, mac.clone())])
    );
    let e = bmv2().rif_entry("fare-rif-1", 1, ROUTER_MAC).unwrap();
    assert_eq!(direct(&e), (2008, vec![(1, vec![0x01]), (2, mac)]));
    assert!(
        bmv2().rif_entry("r", 512, ROUTER_MAC).is_err(),
        "port 512 > bit<9>"
    );
}

#[test]
fn neighbor_ids() {
    let mac = MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
    // EUI-64 link-local: universal/local bit flipped, ff:fe in the middle.
    assert_eq!(
        neighbor_id(None, mac),
        "fe80::ff:fe00:1".parse::<Ipv6Addr>().unwrap()
    );
    let a: Ipv6Addr = "fe80::1".parse().unwrap();
    assert_eq!(neighbor_id(Some(IpAddr::V6(a)), mac), a);
    assert_eq!(
        neighbor_id(Some("192.0.2.1".parse().unwrap()), mac),
        "::ffff:192.0.2.1".parse::<Ipv6Addr>().unwrap()
    );
}

#[test]
fn switch_wide_entries() {
    for p in [pins(), bmv2()] {
        let e = p.l3_admit_entry(ROUTER_MAC).unwrap();
        assert_eq!((e.table_id, e.priority), (1001, 1));
        assert_eq!(
            e.r#match,
            vec![p4::FieldMatch {
                field_id: 1,
                field_match_type: Some(M::Ternary(p4::field_match::Ternary {
                    value: vec![0x02, 0xfa, 0x4e, 0, 0, 1],
                    mask: vec![0xff; 6],
                })),
            }]
        );
        assert_eq!(direct(&e), (2002, vec![]));
        let e = p.vrf_entry(VRF).unwrap();
        assert_eq!(e.r#match, vec![exact(1, b"fare")]);
        assert_eq!(direct(&e), (2001, vec![]));
        let e = p.acl_pre_ingress_entry(VRF).unwrap();
        assert_eq!((e.table_id, e.priority), (1003, 1));
        assert_eq!(
            e.r#match,
            vec![p4::FieldMatch {
                field_id: 1,
                field_match_type: Some(M::Optional(p4::field_match::Optional { value: vec![1] })),
            }]
        );
        assert_eq!(direct(&e), (2003, vec![(1, b"fare".to_vec())]));
    }
}

#[test]
fn ids_must_fit_bmv2s_bit_width() {
    let b = bmv2();
    let long = "x".repeat(33);
    assert!(b.vrf_entry(&"x".repeat(32)).is_ok());
    assert!(b.vrf_entry(&long).is_err(), "33 octets > bit<256>");
    assert!(pins().vrf_entry(&long).is_ok(), "strings have no width");
    assert!(b.vrf_entry("").is_err());
}

#[test]
fn a_missing_table_is_named() {
    let text = PINS_P4INFO.replace("alias: \"nexthop_table\"", "alias: \"nh\"");
    let text = text.replace("routing_resolution.nexthop_table", "routing_resolution.nh");
    let e = SaiProgram::resolve(&P4Info::from_text(&text).unwrap()).unwrap_err();
    assert!(e.to_string().contains("nexthop_table"), "{e}");
}

// --- The installer against the in-memory target ---------------------------------------

fn member(port: u32, weight: u32) -> Member {
    Member {
        via: format!("10.0.{port}.2"),
        interface: format!("p{port}"),
        next_hop: Some(format!("10.0.{port}.2").parse().unwrap()),
        neighbor_mac: Some(MacAddr([0x0a, 0, 0, 0, 0, port as u8])),
        weight,
        bandwidth_gbps: 1.0,
    }
}

fn group(prefix: &str, members: Vec<Member>) -> Group {
    Group {
        prefix: prefix.parse().unwrap(),
        mode: GroupMode::Flow,
        members,
    }
}

/// A directory of this test's own, removed when dropped.
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn open(target: &FakeTarget) -> (SaiDataplane, Dir) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = Dir(std::env::temp_dir().join(format!("fare-sai-{}-{n}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let info = dir.0.join("sai.p4info.txtpb");
    std::fs::write(&info, PINS_P4INFO).unwrap();
    let config = dir.0.join("sai.json");
    std::fs::write(&config, b"{}").unwrap();
    let options = SaiOptions {
        address: target.address.clone(),
        device_id: 1,
        election_id: 1,
        pipeline: Some((info, config)),
        ports: (1..=4).map(|i| (format!("p{i}"), i)).collect(),
        router_mac: ROUTER_MAC,
        watch_ports: true,
        max_group_size: None,
    };
    (SaiDataplane::connect(options).await.unwrap(), dir)
}

/// Entries of `table` in the target, as (first match value, direct action or action set).
fn table(target: &FakeTarget, table: u32) -> Vec<p4::TableEntry> {
    target
        .lock()
        .tables
        .iter()
        .filter(|((t, _), _)| *t == table)
        .map(|(_, e)| e.clone())
        .collect()
}

fn first_key(e: &p4::TableEntry) -> Vec<u8> {
    match &e.r#match[0].field_match_type {
        Some(M::Exact(x)) => x.value.clone(),
        other => panic!("{other:?}"),
    }
}

/// (next hop id, weight) of the WCMP group entry `id`.
fn group_actions(target: &FakeTarget, id: &str) -> Vec<(String, i32)> {
    let e = table(target, 1006)
        .into_iter()
        .find(|e| first_key(e) == id.as_bytes())
        .expect("group entry");
    let Some(p4::table_action::Type::ActionProfileActionSet(set)) = e.action.and_then(|a| a.r#type)
    else {
        panic!("not an action set")
    };
    set.action_profile_actions
        .iter()
        .map(|a| {
            let v = &a.action.as_ref().unwrap().params[0].value;
            (String::from_utf8(v.clone()).unwrap(), a.weight)
        })
        .collect()
}

#[tokio::test]
async fn install_replace_remove_in_dependency_order() {
    let target = FakeTarget::start().await;
    let (mut dp, _dir) = open(&target).await;
    // Switch-wide: l3_admit + vrf, then the ACL naming the VRF.
    assert_eq!(target.lock().batches, vec![2, 1]);
    assert_eq!(dp.limits(), GroupLimits::size(512));

    let g = group("10.1.0.0/16", vec![member(1, 3), member(2, 1)]);
    dp.install(&g).await.unwrap();
    // rifs, neighbors, next hops, group, route: five Writes after the two above.
    assert_eq!(target.lock().batches, vec![2, 1, 2, 2, 2, 1, 1]);
    assert_eq!(
        group_actions(&target, "fare-g-1"),
        vec![("fare-nh-1".into(), 3), ("fare-nh-2".into(), 1)]
    );
    let routes = table(&target, 1004);
    assert_eq!(routes.len(), 1);
    assert_eq!(direct(&routes[0]), (2004, vec![(1, b"fare-g-1".to_vec())]));
    // Re-installing the same group writes nothing, also with other bandwidths.
    dp.install(&g).await.unwrap();
    let mut g_bw = g.clone();
    g_bw.members[0].bandwidth_gbps = 40.0;
    dp.install(&g_bw).await.unwrap();
    assert_eq!(target.lock().batches.len(), 7);
    let shown = dp.groups().await.unwrap();
    assert_eq!(shown[0].group.members[0].bandwidth_gbps, 40.0);

    // Replace: port 2 -> port 3. New rif, neighbor and next hop first, then one MODIFY
    // of the group, then the old next hop, neighbor and rif deleted (in that order).
    let before = target.lock().batches.len();
    let g2 = group("10.1.0.0/16", vec![member(1, 3), member(3, 1)]);
    dp.install(&g2).await.unwrap();
    assert_eq!(target.lock().batches[before..], [1, 1, 1, 1, 1, 1, 1]);
    assert_eq!(
        group_actions(&target, "fare-g-1"),
        vec![("fare-nh-1".into(), 3), ("fare-nh-3".into(), 1)]
    );
    let rifs: Vec<Vec<u8>> = table(&target, 1009).iter().map(first_key).collect();
    assert_eq!(rifs, vec![b"fare-rif-1".to_vec(), b"fare-rif-3".to_vec()]);
    assert_eq!(table(&target, 1007).len(), 2);
    assert_eq!(table(&target, 1008).len(), 2);

    // A member removed by the agent: the group is rewritten without it.
    dp.set_member_active(g2.prefix, 1, false).await.unwrap();
    assert_eq!(
        group_actions(&target, "fare-g-1"),
        vec![("fare-nh-1".into(), 3)]
    );
    assert!(dp.set_member_active(g2.prefix, 0, false).await.is_err());
    dp.set_member_active(g2.prefix, 1, true).await.unwrap();
    assert_eq!(group_actions(&target, "fare-g-1").len(), 2);

    // Remove: route, group, then next hops, neighbors, rifs; the switch-wide entries stay.
    dp.remove(g2.prefix).await.unwrap();
    for t in [1004, 1006, 1007, 1008, 1009] {
        assert!(table(&target, t).is_empty(), "table {t} emptied");
    }
    assert_eq!(target.lock().tables.len(), 3);
    assert!(matches!(
        dp.remove(g2.prefix).await,
        Err(DataplaneError::NoSuchGroup(_))
    ));
}

#[tokio::test]
async fn refused_what_sai_p4_cannot_do() {
    let target = FakeTarget::start().await;
    let (mut dp, _dir) = open(&target).await;
    let mut spray = group("10.2.0.0/16", vec![member(1, 1)]);
    spray.mode = GroupMode::Spray;
    let e = dp.install(&spray).await.unwrap_err();
    assert!(e.to_string().contains(NO_SPRAY), "{e}");
    let big = group("10.3.0.0/16", vec![member(1, 500), member(2, 13)]);
    let e = dp.install(&big).await.unwrap_err();
    assert!(e.to_string().contains("max_group_size 512"), "{e}");
    // No per-color groups in SAI-P4: the profile offers no DPF (and the agent refuses
    // `dpf:` with it).
    assert!(dp.dpf().is_none());
    assert_eq!(fare_dataplane::Offers::of(&mut dp), SaiDataplane::OFFERS);
    // Nothing was written for any of them.
    assert_eq!(target.lock().tables.len(), 3);
    // 512 exactly is taken.
    let full = group("10.3.0.0/16", vec![member(1, 500), member(2, 12)]);
    dp.install(&full).await.unwrap();
}

#[tokio::test]
async fn a_restarted_agent_adopts_what_the_last_one_wrote() {
    let target = FakeTarget::start().await;
    let g = group("10.1.0.0/16", vec![member(1, 3), member(2, 1)]);
    let g_b = group("10.5.0.0/16", vec![member(1, 1)]);
    {
        let (mut dp, _dir) = open(&target).await;
        dp.install(&g).await.unwrap();
        dp.install(&g_b).await.unwrap();
        // A group of fare's without a route (left by a crash between two Writes).
        let orphan = dp
            .program()
            .wcmp_group_entry(
                "fare-g-99",
                &[WcmpAction {
                    nexthop_id: "fare-nh-1".into(),
                    weight: 1,
                    watch_port: None,
                }],
            )
            .unwrap();
        dp.client()
            .write(vec![update(p4::update::Type::Insert, entity_table(orphan))])
            .await
            .unwrap();
    }
    let pushes = target.lock().pipeline_pushes;
    let before = target.lock().batches.len();
    // Same pipeline: not pushed again; the groups are adopted, the orphan deleted (one
    // Write), the switch-wide entries found as they should be (no Write).
    let (mut dp, _dir) = open(&target).await;
    assert_eq!(target.lock().pipeline_pushes, pushes);
    assert_eq!(target.lock().batches[before..], [1]);
    // 3 switch-wide + 2 rifs, 2 neighbors, 2 next hops, 2 groups, 2 routes.
    assert_eq!(target.lock().tables.len(), 13);
    let shown = dp.groups().await.unwrap();
    assert_eq!(shown.len(), 2);
    assert_eq!(shown[0].group.members[0].interface, "p1");
    assert_eq!(shown[0].group.members[0].weight, 3);
    // Re-installing the same groups writes nothing: forwarding is not disturbed.
    let before = target.lock().batches.len();
    dp.install_batch(&[g.clone(), g_b.clone()]).await;
    assert_eq!(target.lock().batches.len(), before);
    // A changed one is one MODIFY; new ids continue after the highest one seen.
    dp.install(&group("10.5.0.0/16", vec![member(1, 2), member(2, 1)]))
        .await
        .unwrap();
    assert_eq!(target.lock().batches[before..], [1]);
    dp.install(&group("10.6.0.0/16", vec![member(3, 1)]))
        .await
        .unwrap();
    assert_eq!(
        group_actions(&target, "fare-g-100"),
        vec![("fare-nh-3".into(), 1)]
    );
    // An adopted group is removed like any other.
    dp.remove(g.prefix).await.unwrap();
    assert_eq!(table(&target, 1006).len(), 2);
}

#[tokio::test]
async fn a_restarted_switch_gets_the_pipeline_and_the_groups_again() {
    let target = FakeTarget::start().await;
    let (mut dp, _dir) = open(&target).await;
    dp.install(&group("10.1.0.0/16", vec![member(1, 3), member(2, 1)]))
        .await
        .unwrap();
    target.kill();
    // The next write finds the session gone; while it is, calls fail at once.
    let g2 = group("10.2.0.0/16", vec![member(1, 1)]);
    assert!(dp.install(&g2).await.is_err());
    let e = dp.install(&g2).await.unwrap_err();
    assert!(e.to_string().contains("reconnecting"), "{e}");
    target.restart();
    let mut restored = false;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if dp.maintain().await.is_ok() {
            restored = true;
            break;
        }
    }
    assert!(restored, "session restored within 10 s");
    assert_eq!(target.lock().pipeline_pushes, 2, "pipeline pushed again");
    // 3 switch-wide + 2 rifs + 2 neighbors + 2 next hops + the group + its route.
    assert_eq!(target.lock().tables.len(), 11);
    // Fresh ids (fare-g-2 went to the install that failed).
    assert_eq!(
        group_actions(&target, "fare-g-3"),
        vec![("fare-nh-3".into(), 3), ("fare-nh-4".into(), 1)]
    );
    dp.install(&g2).await.unwrap();
    assert_eq!(target.lock().tables.len(), 13);
}

#[tokio::test]
async fn groups_of_one_batch_share_each_phases_write() {
    let target = FakeTarget::start().await;
    let (mut dp, _dir) = open(&target).await;
    // Another controller's route for the second prefix: its INSERT fails.
    let taken = dp
        .program()
        .route_entry(VRF, "10.12.0.0/16".parse().unwrap(), "other")
        .unwrap();
    dp.client()
        .write(vec![update(p4::update::Type::Insert, entity_table(taken))])
        .await
        .unwrap();
    let before = target.lock().batches.len();
    let groups = [
        group("10.11.0.0/16", vec![member(1, 1), member(2, 1)]),
        group("10.12.0.0/16", vec![member(3, 1), member(4, 2)]),
        group("10.13.0.0/16", vec![member(2, 3), member(3, 1)]),
    ];
    let results = dp.install_batch(&groups).await;
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    let e = results[1].as_ref().unwrap_err().to_string();
    assert!(e.contains("10.12.0.0/16") && e.contains("route"), "{e}");
    // 4 rifs, 4 neighbors, 4 next hops, 3 groups, 3 routes: five Writes; then the
    // failed route's group deleted, then its next hop on port 4, neighbor, rif.
    assert_eq!(target.lock().batches[before..], [4, 4, 4, 3, 3, 1, 1, 1, 1]);
    // Left: 3 switch-wide + the other controller's route + 3 rifs, 3 neighbors,
    // 3 next hops, 2 groups, 2 routes.
    assert_eq!(target.lock().tables.len(), 3 + 1 + 3 + 3 + 3 + 2 + 2);
    assert_eq!(table(&target, 1006).len(), 2);
}

#[tokio::test]
async fn fare_resumes_after_another_controller_and_repairs_the_switch() {
    let target = FakeTarget::start().await;
    let (mut dp, _dir) = open(&target).await;
    let g = group("10.1.0.0/16", vec![member(1, 3), member(2, 1)]);
    let g_b = group("10.5.0.0/16", vec![member(1, 1)]);
    dp.install_batch(&[g.clone(), g_b.clone()]).await;
    // Another controller with a higher election id takes over and deletes g_b's route.
    let mut other = fare_p4runtime::client::Client::connect(&target.address, 1, 20)
        .await
        .unwrap();
    let route = dp
        .program()
        .route_entry(VRF, g_b.prefix, "fare-g-2")
        .unwrap();
    other
        .write(vec![update(
            p4::update::Type::Delete,
            entity_table(key_of(&route)),
        )])
        .await
        .unwrap();
    // fare's next write is refused (PERMISSION_DENIED): fare stands back, and writes
    // nothing until the switch names it primary again.
    let g_c = group("10.7.0.0/16", vec![member(3, 1)]);
    assert!(dp.install(&g_c).await.is_err());
    let e = dp.install(&g_c).await.unwrap_err().to_string();
    assert!(e.contains("standing back"), "{e}");
    drop(other);
    let mut restored = false;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if dp.maintain().await.is_ok() {
            restored = true;
            break;
        }
    }
    assert!(restored, "primary again within 10 s");
    // Not restarted: no new pipeline; g adopted as it was, g_b (its group orphaned)
    // written again.
    assert_eq!(target.lock().pipeline_pushes, 1);
    let routes: Vec<p4::TableEntry> = table(&target, 1004);
    assert_eq!(routes.len(), 2);
    assert_eq!(table(&target, 1006).len(), 2);
    dp.install(&g_c).await.unwrap();
    assert_eq!(table(&target, 1004).len(), 3);
}
