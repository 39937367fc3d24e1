use super::*;
use crate::config::AgentConfig;
use crate::state::{RoutePath, RouteSource, RouteStatus};
use fare_dataplane::{Group, GroupMode, Member, MemberStatus};
use std::collections::{BTreeMap, BTreeSet};

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
    s.established_at = Some(1_700_000_100);
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
            received_gbps: Some(40.0),
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
    let advertised = [
        Advertised {
            prefix: "192.0.2.0/24".parse().unwrap(),
            neighbor: "10.1.0.2".parse().unwrap(),
            path_bandwidth_gbps: Some(100.0),
        },
        // A prefix this node originates: unlimited bandwidth, no sample.
        Advertised {
            prefix: "192.0.2.128/25".parse().unwrap(),
            neighbor: "10.1.0.2".parse().unwrap(),
            path_bandwidth_gbps: Some(f64::INFINITY),
        },
    ];
    let snapshot = Snapshot {
        groups: &groups,
        ops: &[("install", 1, 0), ("remove", 2, 1)],
        advertised: &advertised,
        // As the XDP backend reads them: `received` is the sum of the outcomes.
        packets: &[
            ("received", 45),
            ("forwarded", 40),
            ("queue_dropped", 2),
            ("local", 3),
            ("dpf_colored", 7),
            ("arn_kept_last", 1),
        ],
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
        "fare_bgp_path_bandwidth_received_bytes_per_second{prefix=\"198.18.0.0/16\",neighbor=\"10.1.0.2\"} 5000000000.0".to_string(),
        "fare_bgp_path_bandwidth_used_bytes_per_second{prefix=\"198.18.0.0/16\",neighbor=\"10.1.0.2\"} 312500000.0".to_string(),
        "fare_bgp_path_bandwidth_advertised_bytes_per_second{prefix=\"192.0.2.0/24\",neighbor=\"10.1.0.2\"} 12500000000.0".to_string(),
        "fare_groups 1.0".to_string(),
        format!("fare_group_member_weight{{{member}}} 3.0"),
        format!("fare_group_member_path_bandwidth_bytes_per_second{{{member}}} 312500000.0"),
        format!("fare_group_member_packets_total{{{member}}} 42"),
        format!("fare_group_member_bytes_total{{{member}}} 4200"),
        "fare_bgp_neighbor_established_timestamp_seconds{neighbor=\"10.1.0.2\"} 1700000100.0"
            .to_string(),
        "fare_dataplane_operations_total{op=\"install\",outcome=\"ok\"} 1".to_string(),
        "fare_dataplane_operations_total{op=\"install\",outcome=\"error\"} 0".to_string(),
        "fare_dataplane_operations_total{op=\"remove\",outcome=\"error\"} 1".to_string(),
        "fare_xdp_packets_total{outcome=\"queue_dropped\"} 2".to_string(),
        "fare_xdp_packets_total{outcome=\"local\"} 3".to_string(),
        "fare_xdp_dpf_colored_packets_total 7".to_string(),
        "fare_xdp_arn_kept_last_member_total 1".to_string(),
        "fare_group_members 1.0".to_string(),
        "fare_metrics_series_capped{family=\"fare_group_member_weight\"} 0.0".to_string(),
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

/// Samples of the exposition by family (the name of the `# TYPE` line before them).
fn series(text: &str) -> BTreeMap<String, Vec<(String, f64)>> {
    let mut out: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    let mut family = String::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            family = rest.split(' ').next().unwrap().to_string();
            out.entry(family.clone()).or_default();
        } else if !l.starts_with('#') && !l.is_empty() {
            let (series, value) = l.rsplit_once(' ').unwrap();
            let value = value.parse().unwrap_or_else(|_| panic!("{l}"));
            out.get_mut(&family)
                .unwrap()
                .push((series.to_string(), value));
        }
    }
    out
}

/// The XDP outcomes sum to the packets received (45 = 40 + 2 + 3: `received` itself is
/// no sample), and no value is infinite: the originated prefix advertised with an
/// unlimited bandwidth has no sample at all.
#[test]
fn sums_are_totals_and_values_finite() {
    let text = text(false);
    let families = series(&text);
    let xdp = &families["fare_xdp_packets_total"];
    assert_eq!(xdp.iter().map(|(_, v)| v).sum::<f64>(), 45.0, "{xdp:?}");
    assert!(xdp.iter().all(|(s, _)| !s.contains("received")), "{xdp:?}");
    let ops = &families["fare_dataplane_operations_total"];
    assert_eq!(ops.iter().map(|(_, v)| v).sum::<f64>(), 4.0, "{ops:?}");
    for (family, samples) in &families {
        for (s, v) in samples {
            assert!(v.is_finite(), "{family}: {s} {v}");
        }
    }
    let advertised = &families["fare_bgp_path_bandwidth_advertised_bytes_per_second"];
    assert_eq!(advertised.len(), 1, "{advertised:?}");
}

/// A session that is not Established has no established timestamp.
#[test]
fn established_timestamp_only_while_established() {
    let mut state = state();
    let address = "10.1.0.2".parse().unwrap();
    state.set_neighbor_state(address, SessionState::Active, None);
    let text = encode(&registry(&state, &Snapshot::default()), false).0;
    let families = series(&text);
    assert!(families["fare_bgp_neighbor_state"].len() == 6, "{text}");
    assert!(
        !text.contains("\nfare_bgp_neighbor_established_timestamp_seconds{"),
        "{text}"
    );
}

/// OpenMetrics declares the unit of every family whose name ends with one, as the
/// name's last part (`bytes_per_second`, `bytes`, `seconds`), and of no other.
#[test]
fn openmetrics_declares_units() {
    let text = text(true);
    let lines: Vec<&str> = text.lines().collect();
    let mut checked = 0;
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.strip_prefix("# TYPE ") else {
            continue;
        };
        let name = rest.split(' ').next().unwrap();
        let want = ["bytes_per_second", "bytes", "seconds"]
            .into_iter()
            .find(|u| name.ends_with(&format!("_{u}")));
        let declared = lines[i + 1..]
            .iter()
            .take_while(|l| l.starts_with("# ") && !l.starts_with("# TYPE "))
            .find_map(|l| l.strip_prefix(&format!("# UNIT {name} ")));
        assert_eq!(declared, want, "{name}");
        checked += usize::from(want.is_some());
    }
    // process_cpu_seconds, process_*_memory_bytes, process_start_time_seconds, the
    // established timestamp, four path bandwidth families, member bytes.
    assert_eq!(checked, 10, "{text}");
}

/// The comment of `field` in message Neighbor of fare.proto, lines joined, without the
/// final period.
fn proto_comment(proto: &str, field: &str) -> Option<String> {
    let message = proto
        .split("message Neighbor {")
        .nth(1)?
        .split("\n}")
        .next()?;
    let lines: Vec<&str> = message.lines().map(str::trim).collect();
    let at = lines
        .iter()
        .position(|l| l.split_whitespace().nth(1) == Some(field))?;
    let mut comment: Vec<&str> = lines[..at]
        .iter()
        .rev()
        .take_while(|l| l.starts_with("//"))
        .map(|l| l.trim_start_matches('/').trim())
        .collect();
    comment.reverse();
    Some(comment.join(" ").trim_end_matches('.').to_string())
}

/// The help of every per-neighbor family is the comment of its field in the proto.
#[test]
fn neighbor_help_texts_are_the_protos() {
    let proto = include_str!("../../proto/fare.proto");
    let text = text(false);
    for (name, field, help, _) in NEIGHBOR_COUNTERS.iter().chain(&NEIGHBOR_GAUGES) {
        assert_eq!(
            proto_comment(proto, field).as_deref(),
            Some(*help),
            "{field}"
        );
        let name = if NEIGHBOR_COUNTERS.iter().any(|c| c.0 == *name) {
            format!("{name}_total")
        } else {
            name.to_string()
        };
        assert!(text.contains(&format!("# HELP {name} {help}.\n")), "{name}");
    }
    assert_eq!(
        proto_comment(proto, "flaps").as_deref(),
        Some("Transitions out of Established (an Established session that ended)")
    );
}

/// An agent with 512 prefixes, each with a group of 64 members and 64 BGP paths (one per
/// neighbor), advertised to the 64 neighbors: the families labelled by prefix would have
/// 512 x 64 = 32,768 series each.
fn large() -> (AgentState, Vec<GroupStatus>, Vec<Advertised>) {
    let mut state = state();
    let neighbors: Vec<std::net::IpAddr> = (0..64u8)
        .map(|i| std::net::IpAddr::from([10, 2, i, 1]))
        .collect();
    for n in &neighbors {
        let mut s = fare_bgp::neighbor::NeighborStatus::new(*n, 65100);
        s.state = SessionState::Established;
        s.established_at = Some(1_700_000_000);
        state.neighbors.insert(
            *n,
            crate::state::NeighborStatus::configured(&neighbor(*n), state.started),
        );
        state.update_neighbor(&s);
    }
    let prefixes: Vec<ipnet::IpNet> = (0..512u32)
        .map(|i| {
            format!("10.{}.{}.0/24", 100 + i / 256, i % 256)
                .parse()
                .unwrap()
        })
        .collect();
    let mut groups = Vec::new();
    let mut advertised = Vec::new();
    for p in &prefixes {
        state.set_route(RouteStatus {
            prefix: *p,
            source: RouteSource::Bgp,
            paths: neighbors
                .iter()
                .map(|n| RoutePath {
                    neighbor: Some(*n),
                    path_bandwidth_gbps: Some(10.0),
                    received_gbps: Some(40.0),
                    selected: true,
                    ..Default::default()
                })
                .collect(),
        });
        let mut g = group();
        g.group.prefix = *p;
        g.group.members = neighbors
            .iter()
            .enumerate()
            .map(|(i, n)| Member {
                via: n.to_string(),
                interface: format!("eth{i}"),
                ..g.group.members[0].clone()
            })
            .collect();
        g.members = vec![g.members[0].clone(); 64];
        groups.push(g);
        // The speaker answers with at most one entry more than the cap.
        advertised.extend(neighbors.iter().map(|n| Advertised {
            prefix: *p,
            neighbor: *n,
            path_bandwidth_gbps: Some(10.0),
        }));
    }
    advertised.truncate(MAX_PREFIX_SERIES + 1);
    (state, groups, advertised)
}

fn neighbor(address: std::net::IpAddr) -> crate::config::NeighborConfig {
    let yaml = format!(
        "name: l1\nrouter_id: 10.0.0.1\nasn: 65001\nneighbors:\n  - {{address: {address}, remote_as: 65100}}\n"
    );
    let config: AgentConfig =
        fare_model::yamlfile::parse(std::path::Path::new("a.yaml"), &yaml).unwrap();
    config.neighbors[0].clone()
}

/// The families labelled by prefix are held to `MAX_PREFIX_SERIES` (2,048) series each,
/// the same members in each member family, and say they reached the cap. Hand count of
/// the whole scrape: 8 capped families x 2,048 = 16,384; per neighbor (65): 6 states +
/// 1 timestamp + 8 counters + 2 gauges = 17, 1,105 in all; then 42: build and agent
/// info 2, routes 3, groups and members 2, the 8 capped flags, ARN 4 + 4 + 8 + 10 + 1.
/// 17,531 series, where 512 x 64 uncapped would be 8 x 32,768 = 262,144 and more.
#[test]
fn series_are_capped_on_a_large_agent() {
    let (state, groups, advertised) = large();
    let snapshot = Snapshot {
        groups: &groups,
        advertised: &advertised,
        ..Default::default()
    };
    let text = encode(&registry(&state, &snapshot), false).0;
    let families = series(&text);
    let capped = [
        "fare_group_member_weight",
        "fare_group_member_path_bandwidth_bytes_per_second",
        "fare_group_member_active",
        "fare_group_member_packets_total",
        "fare_group_member_bytes_total",
        "fare_bgp_path_bandwidth_received_bytes_per_second",
        "fare_bgp_path_bandwidth_used_bytes_per_second",
        "fare_bgp_path_bandwidth_advertised_bytes_per_second",
    ];
    for family in capped {
        let n = families[family].len();
        assert_eq!(n, MAX_PREFIX_SERIES, "{family}");
        let flag = format!("fare_metrics_series_capped{{family=\"{family}\"}} 1.0");
        assert!(text.lines().any(|l| l == flag), "{flag}");
    }
    let labels = |family: &str| -> BTreeSet<String> {
        let samples = &families[family];
        samples
            .iter()
            .map(|(s, _)| s[family.len()..].to_string())
            .collect()
    };
    let members = labels("fare_group_member_weight");
    assert!(
        members == labels("fare_group_member_active"),
        "not the same members"
    );
    // The first members in prefix order: the 64 of each of the first 32 prefixes.
    for i in [0, 31] {
        let first = format!("{{prefix=\"10.100.{i}.0/24\",via=\"10.2.0.1\",interface=\"eth0\"}}");
        assert!(members.contains(&first), "{first}");
    }
    assert!(text.contains("fare_group_members 32768.0\n"));
    assert_eq!(families["fare_bgp_neighbor_state"].len(), 65 * 6);
    let total: usize = families.values().map(Vec::len).sum();
    assert_eq!(total, 8 * 2_048 + 65 * 17 + 42);
    promtool_agrees(&text, &families);
}

/// The real judge, when installed: `promtool check metrics` passes the exposition and
/// its cardinality table (`--extended`) gives each family the count found above.
fn promtool_agrees(text: &str, families: &BTreeMap<String, Vec<(String, f64)>>) {
    use std::io::Write;
    let Ok(mut child) = std::process::Command::new("promtool")
        .args(["check", "metrics", "--extended"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool not installed: the exposition is not checked by it");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "promtool: {stdout}\n{stderr}");
    let mut compared = 0;
    for line in stdout.lines() {
        let cells: Vec<&str> = line.split_whitespace().collect();
        let [name, count, ..] = cells[..] else {
            continue;
        };
        let (Some(samples), Ok(count)) = (families.get(name), count.parse::<usize>()) else {
            continue;
        };
        assert_eq!(samples.len(), count, "{name}");
        compared += 1;
    }
    assert!(compared >= 20, "promtool's table:\n{stdout}");
}
