//! The agent's state as the management API's messages: neighbors, routes, plain groups
//! (without counters) and the watch events made of them.

use super::pb;
use super::pb::watch_event::Event;
use crate::state::{NeighborStatus, RouteStatus};
use fare_dataplane::{ColorGroup, Group, GroupMode, Member};

pub fn neighbor(n: &NeighborStatus) -> pb::Neighbor {
    pb::Neighbor {
        address: n.address.to_string(),
        remote_as: n.remote_as,
        state: n.state.to_string(),
        last_error: n.last_error.clone().unwrap_or_default(),
        interface: n.interface.clone().unwrap_or_default(),
        bandwidth_gbps: n.bandwidth_gbps.unwrap_or(0.0),
        uptime_seconds: n.since.elapsed().as_secs(),
        prefixes_received: n.prefixes_received,
        updates_received: n.updates_received,
        updates_sent: n.updates_sent,
        malformed_updates: n.malformed_updates,
        link_bandwidth_ignored: n.link_bandwidth_ignored,
        notifications_sent: n.notifications_sent,
        notifications_received: n.notifications_received,
        color: n.color,
        flaps: n.flaps,
        prefixes_accepted: n.prefixes_accepted,
        prefixes_advertised: n.prefixes_advertised,
        admin_down: n.admin_down.is_some(),
        shutdown_message: n.admin_down.clone().unwrap_or_default(),
        drained: n.drained,
    }
}

pub fn route(r: &RouteStatus) -> pb::Route {
    pb::Route {
        prefix: r.prefix.to_string(),
        source: r.source.to_string(),
        paths: r
            .paths
            .iter()
            .map(|p| pb::RoutePath {
                next_hop: p.next_hop.map(|a| a.to_string()).unwrap_or_default(),
                neighbor: p.neighbor.map(|a| a.to_string()).unwrap_or_default(),
                as_path: p.as_path.clone(),
                path_bandwidth_gbps: p.path_bandwidth_gbps,
                selected: p.selected,
                received_gbps: p.received_gbps.filter(|g| g.is_finite()),
                received_max: p.received_gbps.is_some_and(f64::is_infinite),
            })
            .collect(),
    }
}

fn member(m: &Member) -> pb::Member {
    pb::Member {
        via: m.via.clone(),
        interface: m.interface.clone(),
        weight: m.weight,
        bandwidth_gbps: m.bandwidth_gbps,
        active: true,
        next_hop: m.next_hop.map(|a| a.to_string()).unwrap_or_default(),
        neighbor_mac: m.neighbor_mac.map(|a| a.to_string()).unwrap_or_default(),
        ..Default::default()
    }
}

fn mode(m: GroupMode) -> String {
    match m {
        GroupMode::Spray => "spray",
        GroupMode::Flow => "flow",
        GroupMode::Flowlet => "flowlet",
    }
    .to_string()
}

/// A group as installed, without counters (what a watch event carries).
pub fn plain_group(g: &Group, colors: &[ColorGroup]) -> pb::Group {
    pb::Group {
        prefix: g.prefix.to_string(),
        mode: mode(g.mode),
        members: g.members.iter().map(member).collect(),
        colors: colors
            .iter()
            .map(|c| pb::ColorGroup {
                color: c.color,
                members: c.members.iter().map(member).collect(),
                fit: None,
            })
            .collect(),
        fit: None,
        buckets: None,
    }
}

pub fn session_event(n: &NeighborStatus) -> Event {
    Event::Session(pb::SessionChange {
        neighbor: n.address.to_string(),
        state: n.state.to_string(),
        last_error: n.last_error.clone().unwrap_or_default(),
        admin_down: n.admin_down.is_some(),
        drained: n.drained,
    })
}

pub fn route_event(r: &RouteStatus) -> Event {
    Event::Route(pb::RouteChange {
        route: Some(route(r)),
        withdrawn: false,
    })
}

pub fn route_withdrawn(prefix: ipnet::IpNet, source: crate::state::RouteSource) -> Event {
    Event::Route(pb::RouteChange {
        route: Some(pb::Route {
            prefix: prefix.to_string(),
            source: source.to_string(),
            paths: vec![],
        }),
        withdrawn: true,
    })
}

pub fn group_event(g: &Group, colors: &[ColorGroup]) -> Event {
    Event::Group(pb::GroupChange {
        group: Some(plain_group(g, colors)),
        removed: false,
    })
}

pub fn group_removed(prefix: ipnet::IpNet) -> Event {
    Event::Group(pb::GroupChange {
        group: Some(pb::Group {
            prefix: prefix.to_string(),
            ..Default::default()
        }),
        removed: true,
    })
}

/// The API's event for `change` (`Watch`).
pub fn event_of(change: &crate::changes::Change) -> Event {
    use crate::changes::Change;
    match change {
        Change::Session(n) => session_event(n),
        Change::Route(r) => route_event(r),
        Change::RouteWithdrawn(prefix, source) => route_withdrawn(*prefix, *source),
        Change::Group { group, colors } => group_event(group, colors),
        Change::GroupRemoved(prefix) => group_removed(*prefix),
        Change::Bandwidth { neighbor, gbps } => Event::Bandwidth(pb::BandwidthChange {
            neighbor: neighbor.to_string(),
            bandwidth_gbps: *gbps,
        }),
        Change::Arn {
            prefix,
            via,
            removed,
            share,
        } => Event::Arn(pb::ArnChange {
            prefix: prefix.to_string(),
            via: via.clone(),
            removed: *removed,
            share: *share,
        }),
    }
}

/// The speaker's explanation of a prefix as the API's message.
pub fn explanation(
    e: &fare_bgp::speaker::RouteExplain,
    node: &str,
    interface: impl Fn(&std::net::IpAddr) -> Option<String>,
    group: Option<pb::Group>,
) -> pb::RouteExplanation {
    pb::RouteExplanation {
        prefix: e.prefix.to_string(),
        node: node.to_string(),
        mode: serde_name(&e.mode),
        encoding: serde_name(&e.encoding),
        parallel_links: e.parallel_links.name().to_string(),
        rule: e.rule.to_string(),
        weighted: e.weighted,
        paths: e
            .paths
            .iter()
            .map(|p| pb::ExplainedPath {
                neighbor: p.neighbor.to_string(),
                interface: interface(&p.neighbor).unwrap_or_default(),
                as_path: p.as_path.clone(),
                wire_bits: p.wire_bits.map(u32::from),
                path_bandwidth_gbps: p.path_gbps,
                link_value_bits: p.link_value_bits.map(u32::from),
                link_value_gbps: p.link_value_gbps,
                link_bandwidth_gbps: Some(p.link_gbps).filter(|g| g.is_finite()),
                bandwidth_gbps: p.bandwidth_gbps,
                weight: p.weight,
            })
            .collect(),
        tolerance: e.tolerance,
        ratio: e.ratio.clone(),
        ratio_delta: e.ratio_delta,
        max_group_size: e.max_group_size,
        advertised_gbps: e.advertised_gbps,
        group,
    }
}

/// A value's serde name (`draft`, `binary16`): what the configuration file says.
fn serde_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}
