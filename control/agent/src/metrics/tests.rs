use super::*;
use crate::config::AgentConfig;
use crate::state::{RoutePath, RouteSource, RouteStatus};
use fare_dataplane::{Group, GroupMode, Member, MemberStatus};

fn state() -> AgentState {
    let config: AgentConfig = fare_model::yamlfile::parse(
        std::path::Path::new("a.yaml"),
        "name: l1\nrouter_id: 10.0.0.1\nasn: 65001\nprefixes: [192.0.2.0/24]\nneighbors:\n  - {address: 10.1.0.2, remote_as: 65100}\n",
    )
    .unwrap();
    let mut state = AgentState::from_config(&config, "none");
    let address = "10.1.0.2".parse().unwrap();
    let mut s = fare_bgp::neighbor::NeighborStatus::new(address, 65100);
    s.state = SessionState::Established;
    (
        s.flaps,
        s.prefixes_received,
        s.prefixes_accepted,
        s.prefixes_advertised,
    ) = (2, 9, 4, 1);
    state.update_neighbor(&s);
    state.set_route(RouteStatus {
        prefix: "198.18.0.0/16".parse().unwrap(),
        source: RouteSource::Bgp,
        paths: vec![RoutePath {
            neighbor: Some(address),
            path_bandwidth_gbps: Some(2.5),
            selected: true,
            ..Default::default()
        }],
    });
    state
}

fn group() -> GroupStatus {
    GroupStatus {
        group: Group {
            prefix: "198.18.0.0/16".parse().unwrap(),
            mode: GroupMode::Spray,
            members: vec![Member {
                via: "10.1.0.2".into(),
                interface: "eth1".into(),
                next_hop: None,
                neighbor_mac: None,
                weight: 3,
                bandwidth_gbps: 2.5,
            }],
        },
        members: vec![MemberStatus {
            packets: 42,
            bytes: 4200,
            active: true,
        }],
        colors: Vec::new(),
        fit: None,
        buckets: None,
    }
}

fn text(openmetrics: bool) -> String {
    let groups = [group()];
    let advertised = [Advertised {
        prefix: "192.0.2.0/24".parse().unwrap(),
        neighbor: "10.1.0.2".parse().unwrap(),
        path_bandwidth_gbps: Some(100.0),
    }];
    let snapshot = Snapshot {
        groups: &groups,
        ops: &[("install", 1)],
        advertised: &advertised,
        packets: &[("forwarded", 40), ("queue_dropped", 2)],
        process: Some(ProcessStats {
            cpu_seconds: 1.5,
            start_time_seconds: 1_700_000_000.0,
            ..Default::default()
        }),
    };
    encode(&registry(&state(), &snapshot), openmetrics).0
}

/// Values by hand from the state above, in base units (2.5 Gbps = 2.5e9 bits/s =
/// 312,500,000 bytes/s; 100 Gbps = 12,500,000,000 bytes/s).
#[test]
fn families_carry_state_groups_and_advertised_values() {
    let text = text(false);
    let member = "prefix=\"198.18.0.0/16\",via=\"10.1.0.2\",interface=\"eth1\"";
    for line in [
        "fare_bgp_neighbor_state{neighbor=\"10.1.0.2\",state=\"Established\"} 1.0".to_string(),
        "fare_bgp_neighbor_state{neighbor=\"10.1.0.2\",state=\"Idle\"} 0.0".to_string(),
        "fare_bgp_neighbor_flaps_total{neighbor=\"10.1.0.2\"} 2".to_string(),
        "fare_bgp_neighbor_prefixes_received_total{neighbor=\"10.1.0.2\"} 9".to_string(),
        "fare_bgp_neighbor_prefixes_accepted{neighbor=\"10.1.0.2\"} 4.0".to_string(),
        "fare_bgp_neighbor_prefixes_advertised{neighbor=\"10.1.0.2\"} 1.0".to_string(),
        "fare_routes{source=\"local\"} 1.0".to_string(),
        "fare_routes{source=\"bgp\"} 1.0".to_string(),
        "fare_routes{source=\"static\"} 0.0".to_string(),
        "fare_bgp_path_bandwidth_received_bytes_per_second{prefix=\"198.18.0.0/16\",neighbor=\"10.1.0.2\"} 312500000.0".to_string(),
        "fare_bgp_path_bandwidth_advertised_bytes_per_second{prefix=\"192.0.2.0/24\",neighbor=\"10.1.0.2\"} 12500000000.0".to_string(),
        "fare_groups 1.0".to_string(),
        format!("fare_group_member_weight{{{member}}} 3.0"),
        format!("fare_group_member_path_bandwidth_bytes_per_second{{{member}}} 312500000.0"),
        format!("fare_group_member_packets_total{{{member}}} 42"),
        format!("fare_group_member_bytes_total{{{member}}} 4200"),
        "fare_dataplane_operations_total{op=\"install\"} 1".to_string(),
        "fare_xdp_packets_total{counter=\"queue_dropped\"} 2".to_string(),
        "fare_arn_sent_total{type=\"1\"} 0".to_string(),
        "process_cpu_seconds_total 1.5".to_string(),
        "process_start_time_seconds 1700000000.0".to_string(),
        format!(
            "fare_build_info{{version=\"{}\",commit=\"{}\"}} 1.0",
            env!("CARGO_PKG_VERSION"),
            crate::BUILD_COMMIT
        ),
        "fare_agent_info{name=\"l1\",router_id=\"10.0.0.1\",asn=\"65001\",dataplane=\"none\"} 1.0"
            .to_string(),
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    // Every sample belongs to a family declared just before it, with help.
    let mut family = "";
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            family = rest.split(' ').next().unwrap();
            assert!(text.contains(&format!("# HELP {family} ")), "{l}");
        } else if !l.starts_with('#') {
            let name = l.split(['{', ' ']).next().unwrap();
            assert_eq!(name, family, "{l}");
        }
    }
}

/// OpenMetrics: counters declared without `_total`, samples with it, `# EOF` at the end.
#[test]
fn openmetrics_on_request() {
    let text = text(true);
    assert!(
        text.contains("# TYPE fare_bgp_neighbor_flaps counter\n"),
        "{text}"
    );
    assert!(text.contains("\nfare_bgp_neighbor_flaps_total{neighbor=\"10.1.0.2\"} 2\n"));
    assert_eq!(text.lines().last(), Some("# EOF"));
}

/// The names a query can use: counters with `_total`, every family once.
#[test]
fn family_names_come_from_the_registry() {
    let names = family_names();
    for n in [
        "fare_bgp_neighbor_flaps_total",
        "fare_group_member_weight",
        "fare_arn_dropped_total",
        "process_start_time_seconds",
        "process_cpu_seconds_total",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} not in {names:?}");
    }
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len());
}
