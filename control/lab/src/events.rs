//! What the agents of a lab did, as typed events: every agent runs with `--log-json`
//! (tracing JSON lines), and the events the lab checks — ARN sent and applied, sessions
//! up and down, groups installed and removed — carry an `event` field and typed fields.
//! A line without one (any other log line, a text line, a WARN) is no event: checks never
//! look at the words of a log.

use super::state::StateDir;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// One typed event of an agent's log (the `fields` of its JSON line, tagged by `event`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The node's monitor sent an ARN (refreshes are not logged as events).
    ArnSent {
        interface: String,
        arn_type: u8,
        metric: u8,
        /// Router ID of the node at the far end of the affected link.
        path_id: String,
    },
    /// An ARN from `sender` changed members of the node's groups.
    ArnApplied {
        sender: IpAddr,
        arn_type: u8,
        metric: u8,
        changes: u64,
    },
    SessionUp {
        peer: IpAddr,
    },
    SessionDown {
        peer: IpAddr,
        reason: String,
    },
    GroupInstalled {
        prefix: ipnet::IpNet,
        /// `interface:weight` per member.
        members: String,
    },
    GroupRemoved {
        prefix: ipnet::IpNet,
    },
}

impl Event {
    pub fn is_arn(&self) -> bool {
        matches!(self, Event::ArnSent { .. } | Event::ArnApplied { .. })
    }
}

/// An event of one node's agent at unix time `at` (seconds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentEvent {
    pub node: String,
    pub at: f64,
    #[serde(flatten)]
    pub event: Event,
}

/// The parts of a tracing JSON line the lab reads.
#[derive(Deserialize)]
struct JsonLine {
    timestamp: String,
    fields: serde_json::Value,
}

/// An RFC 3339 timestamp (as tracing writes it) as unix seconds.
pub fn unix_seconds(timestamp: &str) -> Option<f64> {
    let t: jiff::Timestamp = timestamp.parse().ok()?;
    Some(t.as_microsecond() as f64 / 1e6)
}

/// The typed event on one log line of `node`, if it carries one.
pub fn parse_line(node: &str, line: &str) -> Option<AgentEvent> {
    let l: JsonLine = serde_json::from_str(line).ok()?;
    let event: Event = serde_json::from_value(l.fields).ok()?;
    Some(AgentEvent {
        node: node.to_string(),
        at: unix_seconds(&l.timestamp)?,
        event,
    })
}

/// Every typed event in `node`'s log at or after unix time `since`, in log order.
pub fn of_node(dir: &StateDir, node: &str, since: f64) -> Vec<AgentEvent> {
    std::fs::read_to_string(dir.log(node))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| parse_line(node, l))
        .filter(|e| e.at >= since)
        .collect()
}

/// Every typed event of the given nodes at or after `since`, by time.
pub fn of_nodes<'a>(
    dir: &StateDir,
    nodes: impl IntoIterator<Item = &'a str>,
    since: f64,
) -> Vec<AgentEvent> {
    let mut all: Vec<AgentEvent> = nodes
        .into_iter()
        .flat_map(|n| of_node(dir, n, since))
        .collect();
    all.sort_by(|a, b| a.at.total_cmp(&b.at));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_as_tracing_writes_them() {
        assert_eq!(unix_seconds("1970-01-01T00:00:01.5Z"), Some(1.5));
        assert_eq!(unix_seconds("2000-03-01T00:00:00Z"), Some(951_868_800.0));
        assert_eq!(unix_seconds("garbage"), None);
    }

    #[test]
    fn only_lines_with_a_typed_event_are_events() {
        let sent = r#"{"timestamp":"2026-11-28T09:00:00.250000Z","level":"INFO","fields":{"message":"ARN sent","event":"arn_sent","interface":"eth2","arn_type":1,"metric":200,"path_id":"10.0.0.2","backlog":1234},"target":"fare_arn::monitor"}"#;
        let e = parse_line("spine1", sent).unwrap();
        assert_eq!(
            e.event,
            Event::ArnSent {
                interface: "eth2".into(),
                arn_type: 1,
                metric: 200,
                path_id: "10.0.0.2".into()
            }
        );
        assert_eq!(e.at, 1_795_856_400.25);
        // A WARN that speaks of ARN, as JSON or as text, is no event.
        let warn = r#"{"timestamp":"2026-11-28T09:00:00Z","level":"WARN","fields":{"message":"ARN sent type 1 learned"},"target":"x"}"#;
        assert_eq!(parse_line("spine1", warn), None);
        assert_eq!(
            parse_line("spine1", "2026-11-28T09:00:00Z WARN ARN sent, ARN applied"),
            None
        );
        // An event whose fields are not of their types is not taken either.
        let bad = sent.replace("\"arn_type\":1", "\"arn_type\":\"one\"");
        assert_eq!(parse_line("spine1", &bad), None);
    }
}
