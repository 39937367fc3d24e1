use super::*;
use fare_dataplane::MacAddr;
use std::collections::BTreeMap;

/// Every key of the agent configuration (but the `arn:` and `dpf:` blocks, which
/// arn.md and dpf.md describe) is in the reference, docs/configuration.md: a key added
/// without its documentation fails here.
#[test]
fn every_key_is_in_the_configuration_reference() {
    let reference = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/configuration.md"
    ))
    .expect("docs/configuration.md");
    let mac: MacAddr = "02:00:00:00:00:01".parse().expect("mac");
    let mut c = AgentConfig::new("n", Ipv4Addr::new(10, 0, 0, 1), 65001);
    c.neighbors
        .push(NeighborConfig::new(IpAddr::from([10, 0, 0, 2]), 65002));
    c.static_groups.push(StaticGroup {
        prefix: "10.9.0.0/16".parse().expect("prefix"),
        mode: GroupMode::Spray,
        members: vec![StaticMember {
            interface: "eth1".into(),
            neighbor_mac: mac,
            weight: 1,
            next_hop: None,
            bandwidth_gbps: None,
        }],
    });
    c.static_from = Some(StaticFrom {
        weights: "w.json".into(),
        node: "n".into(),
        mode: GroupMode::Spray,
        links: BTreeMap::from([(
            "l".to_string(),
            LinkMapping {
                interface: "eth1".into(),
                neighbor_mac: mac,
                next_hop: None,
            },
        )]),
    });
    let mut values = vec![serde_json::to_value(&c).expect("serializes")];
    for dataplane in [
        DataplaneConfig::Xdp {
            interfaces: vec![],
            pin_name: Some("n".into()),
            queues: vec![fare_dp_xdp::queues::QueueSpec {
                interface: "eth1".into(),
                rate_mbps: 1.0,
                limit_bytes: 0,
            }],
            egress_spray: vec!["eth1".into()],
        },
        DataplaneConfig::Kernel { interfaces: vec![] },
        DataplaneConfig::P4runtime(P4RuntimeConfig {
            address: "127.0.0.1:9559".into(),
            device_id: 1,
            election_id: 1,
            pipeline: Some(Pipeline {
                p4info: "a".into(),
                config: "b".into(),
            }),
            ports: BTreeMap::new(),
            max_group_size: Some(1),
            group_form: Default::default(),
            router_mac: None,
            watch_ports: true,
            profile: Default::default(),
        }),
    ] {
        values.push(serde_json::to_value(&dataplane).expect("serializes"));
    }
    fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    if k == "arn" || k == "dpf" || k == "ports" || k == "links" {
                        out.push(k.clone());
                        continue;
                    }
                    out.push(k.clone());
                    keys(v, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    values.iter().for_each(|v| keys(v, &mut all));
    let missing: Vec<&String> = all
        .iter()
        .filter(|k| !reference.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "not in docs/configuration.md: {missing:?}"
    );
}

const EXAMPLE: &str = r#"
name: leaf1
router_id: 10.0.0.1
asn: 65001
management: {socket: /run/fare/leaf1.sock}
fare: {mode: draft}
dataplane: {kind: xdp, interfaces: [eth1, eth2]}
neighbors:
  - {address: 10.1.0.2, remote_as: 65100, interface: eth1, bandwidth_gbps: 100}
prefixes: [192.0.2.0/24]
static:
  - prefix: 198.18.0.0/16
    mode: spray
    members:
      - {interface: eth1, neighbor_mac: "02:00:00:00:00:01", weight: 3}
      - {interface: eth2, neighbor_mac: "02:00:00:00:00:02", weight: 4}
"#;

#[test]
fn design_example_parses() {
    let c: AgentConfig = yamlfile::parse(Path::new("a.yaml"), EXAMPLE).unwrap();
    c.validate(Path::new("a.yaml"), EXAMPLE).unwrap();
    assert_eq!(c.static_groups[0].members[1].weight, 4);
    assert_eq!(
        c.dataplane,
        DataplaneConfig::Xdp {
            interfaces: vec!["eth1".into(), "eth2".into()],
            pin_name: None,
            queues: vec![],
            egress_spray: vec![],
        }
    );
}

#[test]
fn p4runtime_block_parses() {
    let text = r#"
name: s1
router_id: 10.0.0.9
asn: 65100
dataplane:
  kind: p4runtime
  address: 127.0.0.1:9559
  device_id: 1
  election_id: 1
  pipeline: {p4info: p4/build/fare.p4info.txtpb, config: p4/build/fare.json}
  ports: {e1: 1, e2: 2}
"#;
    let c: AgentConfig = yamlfile::parse(Path::new("s.yaml"), text).unwrap();
    match c.dataplane {
        DataplaneConfig::P4runtime(p) => {
            assert_eq!(p.ports["e2"], 2);
            assert_eq!(
                p.group_form,
                fare_dp_p4::config::P4GroupForm::Weighted,
                "default form"
            );
            assert_eq!(p.router_mac, None);
        }
        other => panic!("{other:?}"),
    }
    let replicated = text.replace(
        "  ports: {e1: 1, e2: 2}\n",
        "  ports: {e1: 1, e2: 2}\n  group_form: replicated\n  router_mac: 02:aa:00:00:00:07\n",
    );
    let c: AgentConfig = yamlfile::parse(Path::new("s.yaml"), &replicated).unwrap();
    match c.dataplane {
        DataplaneConfig::P4runtime(p) => {
            assert_eq!(p.group_form, fare_dp_p4::config::P4GroupForm::Replicated);
            assert_eq!(
                p.router_mac,
                Some(fare_dataplane::MacAddr([2, 0xaa, 0, 0, 0, 7]))
            );
            let o = fare_dp_p4::P4RuntimeOptions::from_config(&p);
            assert_eq!(o.form, fare_dp_p4::GroupForm::Replicated);
            assert_eq!(o.router_mac, fare_dataplane::MacAddr([2, 0xaa, 0, 0, 0, 7]));
        }
        other => panic!("{other:?}"),
    }
    let bad = text.replace(
        "  ports: {e1: 1, e2: 2}\n",
        "  ports: {e1: 1, e2: 2}\n  group_form: copies\n",
    );
    let e = yamlfile::parse::<AgentConfig>(Path::new("s.yaml"), &bad).unwrap_err();
    // The `dataplane` block is tagged by `kind`, so the error points at the document.
    assert!(e.to_string().contains("unknown variant `copies`"), "{e}");
}

#[test]
fn parallel_links_setting() {
    let text = r#"
name: l1
router_id: 10.0.0.1
asn: 65001
fare:
  parallel_links: node-even
dataplane: {kind: xdp, interfaces: [e1]}
neighbors:
  - {address: 10.1.0.2, remote_as: 65100}
"#;
    let c = load_text(text).unwrap();
    assert_eq!(
        c.fare.parallel_links,
        fare_model::parallel::ParallelLinks::NodeEven
    );
    let c = load_text(&text.replace("node-even", "session")).unwrap();
    assert_eq!(
        c.fare.parallel_links,
        fare_model::parallel::ParallelLinks::Session
    );
    let c = load_text(&text.replace("  parallel_links: node-even\n", "  mode: draft\n"));
    assert_eq!(
        c.unwrap().fare.parallel_links,
        fare_model::parallel::ParallelLinks::NodeProportional
    );
    let e = load_text(&text.replace("node-even", "node")).unwrap_err();
    assert_eq!(e.line, Some(6), "{e}");
    assert!(e.to_string().contains("unknown variant `node`"), "{e}");
}

#[test]
fn flowlet_mode_and_gap_are_checked() {
    let text = r#"
name: l1
router_id: 10.0.0.1
asn: 65001
fare:
  group_mode: flowlet
dataplane: {kind: xdp, interfaces: [e1]}
neighbors:
  - {address: 10.1.0.2, remote_as: 65100}
static:
  - prefix: 198.18.0.0/16
    mode: flowlet
    members:
      - {interface: e1, neighbor_mac: "02:00:00:00:00:01", weight: 3}
"#;
    let c = load_text(text).unwrap();
    assert_eq!(c.fare.group_mode, GroupMode::Flowlet);
    assert_eq!(c.fare.flowlet_gap_us, 500);
    assert_eq!(c.static_groups[0].mode, GroupMode::Flowlet);
    let gap = text.replace(
        "group_mode: flowlet\n",
        "group_mode: flowlet\n  flowlet_gap_us: 150\n",
    );
    assert_eq!(load_text(&gap).unwrap().fare.flowlet_gap_us, 150);
    // Out of range: the gap's own line (line 1 is the empty one after r#").
    for bad in ["0", "1000001"] {
        let t = gap.replace("flowlet_gap_us: 150", &format!("flowlet_gap_us: {bad}"));
        let e = load_text(&t).unwrap_err();
        assert_eq!(e.line, Some(7), "{e}");
        assert!(
            e.problem.contains("must be 1..=1000000 microseconds"),
            "{e}"
        );
    }
    // The kernel keeps no per-flow state: the BGP groups' mode is refused at its
    // line, then (BGP groups in flow mode) the static group at its prefix.
    let kernel = text.replace("kind: xdp, interfaces: [e1]", "kind: kernel");
    let e = load_text(&kernel).unwrap_err();
    assert_eq!(e.line, Some(6), "{e}");
    assert!(
        e.problem
            .contains("fare.group_mode flowlet is not available"),
        "{e}"
    );
    let e = load_text(&kernel.replace("group_mode: flowlet", "group_mode: flow")).unwrap_err();
    assert_eq!(e.line, Some(11), "{e}");
    assert!(e.problem.contains("mode flowlet is not available"), "{e}");
    let p4 = text.replace(
        "kind: xdp, interfaces: [e1]",
        "kind: p4runtime, address: '127.0.0.1:9559', ports: {e1: 1}",
    );
    // fare.p4 keeps flowlets in registers; SAI-P4 has no per-flow state.
    assert_eq!(load_text(&p4).unwrap().fare.group_mode, GroupMode::Flowlet);
    let sai = p4.replace("ports: {e1: 1}", "ports: {e1: 1}, profile: sai");
    let e = load_text(&sai).unwrap_err();
    assert_eq!(e.line, Some(6), "{e}");
    assert!(e.problem.contains("dataplane.profile sai"), "{e}");
    let e = yamlfile::parse::<AgentConfig>(
        Path::new("d.yaml"),
        &text.replace("group_mode: flowlet", "group_mode: flowlets"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown variant `flowlets`"), "{e}");
}

#[test]
fn sai_profile_parses_and_refuses_spray() {
    let text = r#"
name: s1
router_id: 10.0.0.9
asn: 65100
dataplane:
  kind: p4runtime
  address: 127.0.0.1:9559
  ports: {e1: 1, e2: 2}
  profile: sai
static:
  - prefix: 198.18.0.0/16
    mode: flow
    members:
      - {interface: e1, neighbor_mac: "02:00:00:00:00:01", weight: 3}
"#;
    use fare_dp_p4::config::P4Profile;
    let c: AgentConfig = yamlfile::parse(Path::new("s.yaml"), text).unwrap();
    c.validate(Path::new("s.yaml"), text).unwrap();
    match &c.dataplane {
        DataplaneConfig::P4runtime(p) => assert_eq!(p.profile, P4Profile::Sai),
        other => panic!("{other:?}"),
    }
    // Default: fare.p4.
    let fare = text.replace("  profile: sai\n", "");
    let c: AgentConfig = yamlfile::parse(Path::new("s.yaml"), &fare).unwrap();
    match &c.dataplane {
        DataplaneConfig::P4runtime(p) => assert_eq!(p.profile, P4Profile::Fare),
        other => panic!("{other:?}"),
    }
    // A spray static group: one line naming the group (line 11: its prefix; line 1
    // is the empty one after r#").
    let spray = text.replace("mode: flow", "mode: spray");
    let c: AgentConfig = yamlfile::parse(Path::new("s.yaml"), &spray).unwrap();
    let e = c.validate(Path::new("s.yaml"), &spray).unwrap_err();
    assert_eq!(e.line, Some(11), "{e}");
    assert!(e.to_string().contains("mode spray is not available"), "{e}");
    // An unknown profile.
    let bad = text.replace("profile: sai", "profile: tofino");
    let e = yamlfile::parse::<AgentConfig>(Path::new("s.yaml"), &bad).unwrap_err();
    assert!(e.to_string().contains("unknown variant `tofino`"), "{e}");
}

#[test]
fn zero_weight_names_the_line() {
    let text = EXAMPLE.replace("weight: 4", "weight: 0");
    let c: AgentConfig = yamlfile::parse(Path::new("a.yaml"), &text).unwrap();
    let e = c.validate(Path::new("a.yaml"), &text).unwrap_err();
    assert_eq!(e.line, Some(16), "{e}");
}

#[test]
fn bad_mac_is_an_error_with_line() {
    let text = EXAMPLE.replace("02:00:00:00:00:02", "02:00:00:00:00");
    let e = yamlfile::parse::<AgentConfig>(Path::new("a.yaml"), &text).unwrap_err();
    assert_eq!(e.line, Some(16), "{e}");
}

const DPF: &str = r#"
name: leaf1
router_id: 10.0.0.1
asn: 65001
neighbors:
  - {address: 10.1.0.2, remote_as: 65100, color: 1}
  - {address: 10.1.0.6, remote_as: 65100, color: 2}
prefixes: [192.0.2.0/24, 198.51.100.0/24]
dpf:
  session_coloring: strict
  mismatch_subcode: 12
  routes:
    - {prefix: 192.0.2.0/24, primary: 1, backup: 2}
    - {prefix: 198.51.100.0/24, color: all}
"#;

fn load_text(text: &str) -> Result<AgentConfig, FileError> {
    let c: AgentConfig = yamlfile::parse(Path::new("d.yaml"), text)?;
    c.validate(Path::new("d.yaml"), text)?;
    Ok(c)
}

#[test]
fn dpf_flow_rules_parse_and_bad_ones_name_their_line() {
    let base =
        "name: l1\nrouter_id: 10.0.0.1\nasn: 65001\ndataplane: {kind: xdp, interfaces: [e1]}\n";
    let good = format!("{base}dpf:\n  flows:\n    - {{color: 1, dscp: [26]}}\n    - {{color: 2, protocol: udp, dst_port: 4791, qp: 0x100-0x1ff}}\n");
    let c = load_text(&good).unwrap();
    assert_eq!(c.dpf.unwrap().flows.len(), 2);
    let bad = format!(
        "{base}dpf:\n  flows:\n    - {{color: 1, dscp: [26]}}\n    - {{color: 2, dscp: [99]}}\n"
    );
    let e = load_text(&bad).unwrap_err().to_string();
    assert!(e.starts_with("d.yaml:8:") && e.contains("DSCP 99"), "{e}");
    let bad_queue = good.replace(
        "kind: xdp, interfaces: [e1]",
        "kind: xdp, interfaces: [e1], queues: [{interface: e1, rate_mbps: 0}]",
    );
    let e = load_text(&bad_queue).expect_err("rate 0").to_string();
    assert!(e.contains("rate_mbps must be a positive"), "{e}");
    let kernel = good.replace("kind: xdp, interfaces: [e1]", "kind: none");
    let e = load_text(&kernel).unwrap_err().to_string();
    assert!(e.contains("needs dataplane kind xdp"), "{e}");
    let p4 = good.replace(
        "kind: xdp, interfaces: [e1]",
        "kind: p4runtime, address: '127.0.0.1:9559', ports: {e1: 1}",
    );
    assert_eq!(load_text(&p4).unwrap().dpf.unwrap().flows.len(), 2);
}

#[test]
fn dpf_block_parses() {
    let c = load_text(DPF).unwrap();
    let d = c.dpf.unwrap();
    assert_eq!(d.session_coloring, fare_bgp::dpf::SessionColoring::Strict);
    assert_eq!(d.routes.len(), 2);
    assert_eq!(d.capability_code, 240);
}

#[test]
fn dpf_non_staged_as_numbering_is_refused() {
    let text = DPF.replace("10.1.0.6, remote_as: 65100", "10.1.0.6, remote_as: 65101");
    let e = load_text(&text).unwrap_err();
    assert!(e.problem.contains("strictly staged"), "{e}");
    assert_eq!(e.line, Some(5), "{e}");
    // Without a backup color the numbering does not matter.
    let text = text.replace("primary: 1, backup: 2", "color: 1");
    load_text(&text).unwrap();
}

#[test]
fn dpf_bad_route_coloring_names_the_line() {
    let e = load_text(&DPF.replace("backup: 2", "backup: 1")).unwrap_err();
    assert_eq!(e.line, Some(13), "{e}");
    let e = load_text(&DPF.replace("198.51.100.0/24, color", "203.0.113.0/24, color")).unwrap_err();
    assert!(e.problem.contains("not among"), "{e}");
    assert_eq!(e.line, Some(14), "{e}");
}
