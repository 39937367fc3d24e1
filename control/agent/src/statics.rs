//! Static groups: the `static:` configuration and groups computed offline by
//! `fare weights --json`, turned into data plane [`Group`]s.
//!
//! The weights conversion (`static_from:` in the agent configuration):
//!
//! ```yaml
//! static_from:
//!   weights: leaf2-weights.json   # `fare weights TOPO --json > leaf2-weights.json`
//!   node: L2                      # which node of the topology this agent is
//!   mode: spray                   # or flow (default spray)
//!   links:                        # topology link name -> this node's side of it
//!     S1-L2: {interface: eth1, neighbor_mac: "02:00:00:00:00:01", next_hop: 10.1.0.1}
//!     S2-L2: {interface: eth2, neighbor_mac: "02:00:00:00:00:02", next_hop: 10.1.1.1}
//! ```
//!
//! Every entry of the JSON array whose `node` is `node` becomes one static group: its
//! `prefix`, and per member the `weight` and `bandwidth_gbps` from the JSON and the
//! interface, neighbor MAC and next hop of its `link` from `links`. A member whose link
//! is not in `links` is an error (naming the link), never silently dropped.

use fare_dataplane::{Group, GroupMode, MacAddr, Member};
use fare_model::yamlfile::{self, FileError};
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Drives an agent with groups computed offline by `fare weights TOPO --json`:
/// the entries of `node` become static groups, each member's topology link mapped to
/// this node's interface and neighbor.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticFrom {
    /// The JSON file; a relative path is relative to the configuration file.
    pub weights: PathBuf,
    /// The topology node this agent is.
    pub node: String,
    #[serde(default)]
    pub mode: GroupMode,
    /// Topology link name (the `link` of each member) -> how to reach it here.
    pub links: BTreeMap<String, LinkMapping>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkMapping {
    pub interface: String,
    pub neighbor_mac: MacAddr,
    /// Next-hop address, needed by the kernel backend.
    #[serde(default)]
    pub next_hop: Option<IpAddr>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticGroup {
    pub prefix: IpNet,
    #[serde(default)]
    pub mode: GroupMode,
    pub members: Vec<StaticMember>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticMember {
    pub interface: String,
    pub neighbor_mac: MacAddr,
    pub weight: u32,
    /// Next-hop address, needed by the kernel backend.
    #[serde(default)]
    pub next_hop: Option<IpAddr>,
    /// Bandwidth behind this member (informational, shown by `fare show groups`).
    #[serde(default)]
    pub bandwidth_gbps: Option<f64>,
}

/// The data plane group of a `static:` entry. `via` is the neighbor MAC, as
/// `fare show groups` reports it for static members.
pub fn group_of(config: &StaticGroup) -> Group {
    Group {
        prefix: config.prefix,
        mode: config.mode,
        members: config.members.iter().map(member_of).collect(),
    }
}

fn member_of(m: &StaticMember) -> Member {
    Member {
        via: m.neighbor_mac.to_string(),
        interface: m.interface.clone(),
        next_hop: m.next_hop,
        neighbor_mac: Some(m.neighbor_mac),
        weight: m.weight,
        bandwidth_gbps: m.bandwidth_gbps.unwrap_or(0.0),
    }
}

/// One entry of `fare weights --json` (extra keys are ignored).
#[derive(Debug, Deserialize)]
pub struct WeightsEntry {
    pub node: String,
    pub prefix: IpNet,
    pub members: Vec<WeightsMember>,
}

#[derive(Debug, Deserialize)]
pub struct WeightsMember {
    pub via: String,
    pub link: String,
    pub bandwidth_gbps: f64,
    pub weight: u32,
}

/// Reads `from.weights` and converts the entries of `from.node` into static groups.
/// `config_path`/`config_text` locate errors that belong to the configuration file.
pub fn from_weights(
    from: &StaticFrom,
    config_path: &Path,
    config_text: &str,
) -> Result<Vec<StaticGroup>, FileError> {
    let config_line = |needle: &str| {
        let start = yamlfile::find_line(config_text, "static_from", 1).unwrap_or(1);
        yamlfile::find_line(config_text, needle, start)
    };
    let file = resolve(config_path, &from.weights);
    let text = std::fs::read_to_string(&file).map_err(|e| {
        FileError::new(
            config_path,
            config_line("weights"),
            format!("static_from.weights: cannot read {}: {e}", file.display()),
        )
    })?;
    let entries = parse_weights(&file, &text)?;
    convert(from, &entries)
        .map_err(|(needle, problem)| FileError::new(config_path, config_line(&needle), problem))
}

/// Parses `fare weights --json` output; errors name the JSON file, line and column.
pub fn parse_weights(file: &Path, text: &str) -> Result<Vec<WeightsEntry>, FileError> {
    serde_json::from_str(text).map_err(|e| FileError {
        path: file.to_path_buf(),
        line: Some(e.line()),
        column: Some(e.column()),
        problem: e
            .to_string()
            .split(" at line ")
            .next()
            .unwrap_or("")
            .to_string(),
    })
}

/// The conversion itself. An error is (text to find in the config, problem).
pub fn convert(
    from: &StaticFrom,
    entries: &[WeightsEntry],
) -> Result<Vec<StaticGroup>, (String, String)> {
    let mut groups = Vec::new();
    for entry in entries.iter().filter(|e| e.node == from.node) {
        let mut members = Vec::with_capacity(entry.members.len());
        for m in &entry.members {
            let link = from.links.get(&m.link).ok_or_else(|| {
                (
                    "links".to_string(),
                    format!(
                        "static_from.links has no entry for link {:?} (member via {} of {} on node {})",
                        m.link, m.via, entry.prefix, from.node
                    ),
                )
            })?;
            members.push(StaticMember {
                interface: link.interface.clone(),
                neighbor_mac: link.neighbor_mac,
                weight: m.weight,
                next_hop: link.next_hop,
                bandwidth_gbps: Some(m.bandwidth_gbps),
            });
        }
        groups.push(StaticGroup {
            prefix: entry.prefix,
            mode: from.mode,
            members,
        });
    }
    if groups.is_empty() {
        return Err((
            "node".to_string(),
            format!(
                "static_from: node {:?} has no groups in {}",
                from.node,
                from.weights.display()
            ),
        ));
    }
    Ok(groups)
}

fn resolve(config_path: &Path, file: &Path) -> PathBuf {
    if file.is_absolute() {
        return file.to_path_buf();
    }
    match config_path.parent() {
        Some(dir) => dir.join(file),
        None => file.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AgentConfig;
    use fare_dataplane::GroupMode;

    const WEIGHTS: &str = r#"[
 {"node":"L1","prefix":"192.0.2.0/24","members":[{"via":"S1","link":"L1-S1","bandwidth_gbps":100.0,"weight":1}]},
 {"node":"L2","prefix":"192.0.2.0/24","members":[
   {"via":"S1","link":"S1-L2","bandwidth_gbps":75.0,"weight":3},
   {"via":"S2","link":"S2-L2","bandwidth_gbps":100.0,"weight":4}]}
]"#;

    fn config(dir: &Path, links: &str) -> PathBuf {
        std::fs::write(dir.join("w.json"), WEIGHTS).unwrap();
        let path = dir.join("agent.yaml");
        std::fs::write(
            &path,
            format!(
                "name: l2\nrouter_id: 10.0.0.2\nasn: 65002\nstatic_from:\n  weights: w.json\n  node: L2\n  mode: flow\n  links:\n{links}"
            ),
        )
        .unwrap();
        path
    }

    fn tempdir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fare-statics-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn weights_become_static_groups() {
        let dir = tempdir("ok");
        let path = config(
            &dir,
            "    S1-L2: {interface: e1, neighbor_mac: \"02:00:00:00:00:01\", next_hop: 10.1.0.1}\n    S2-L2: {interface: e2, neighbor_mac: \"02:00:00:00:00:02\"}\n",
        );
        let c = AgentConfig::load(&path).unwrap();
        assert_eq!(c.static_groups.len(), 1);
        let g = group_of(&c.static_groups[0]);
        assert_eq!(g.prefix.to_string(), "192.0.2.0/24");
        assert_eq!(g.mode, GroupMode::Flow);
        assert_eq!(g.members[0].via, "02:00:00:00:00:01");
        assert_eq!(g.members[0].interface, "e1");
        assert_eq!(g.members[0].weight, 3);
        assert_eq!(g.members[0].bandwidth_gbps, 75.0);
        assert_eq!(g.members[0].next_hop, Some("10.1.0.1".parse().unwrap()));
        assert_eq!(g.members[1].weight, 4);
        assert_eq!(g.members[1].next_hop, None);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unmapped_link_names_the_link_and_the_line() {
        let dir = tempdir("unmapped");
        let path = config(
            &dir,
            "    S1-L2: {interface: e1, neighbor_mac: \"02:00:00:00:00:01\"}\n",
        );
        let e = AgentConfig::load(&path).unwrap_err();
        assert_eq!(e.line, Some(8), "{e}");
        assert!(e.problem.contains("\"S2-L2\""), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bad_weights_json_names_its_line() {
        let e = parse_weights(Path::new("w.json"), "[\n{\"node\": 3}\n]").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.to_string().starts_with("w.json:2:"), "{e}");
    }

    #[test]
    fn missing_weights_file_points_at_the_config() {
        let dir = tempdir("missing");
        let path = config(
            &dir,
            "    S1-L2: {interface: e1, neighbor_mac: \"02:00:00:00:00:01\"}\n",
        );
        std::fs::remove_file(dir.join("w.json")).unwrap();
        let e = AgentConfig::load(&path).unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
