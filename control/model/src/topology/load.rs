//! The topology YAML format (docs/configuration.md) and its validation. Every problem comes back as
//! one `FileError` naming the file, the line and the problem; nothing here panics on input.

use super::{Node, Role, Topology};
use crate::yamlfile::{self, FileError};
use ipnet::IpNet;
use serde::Deserialize;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSchema {
    #[serde(default)]
    name: Option<String>,
    nodes: Vec<NodeEntry>,
    #[serde(default)]
    links: Vec<LinkEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeEntry {
    name: String,
    role: Role,
    #[serde(default)]
    asn: Option<u32>,
    #[serde(default)]
    router_id: Option<Ipv4Addr>,
    #[serde(default)]
    prefixes: Vec<IpNet>,
    #[serde(default)]
    pod: Option<u32>,
    #[serde(default)]
    plane: Option<u32>,
    #[serde(default)]
    target: super::Target,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkEntry {
    a: String,
    b: String,
    gbps: f64,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    color: Option<Color>,
}

/// A DPF color: a name (`red`) or the 32-bit Color value of RFC 9012.
#[derive(Deserialize)]
#[serde(untagged)]
enum Color {
    Number(u32),
    Name(String),
}

/// Reads and validates a topology file.
pub fn load(path: &Path) -> Result<Topology, FileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| FileError::new(path, None, format!("cannot read: {e}")))?;
    parse(path, &text)
}

/// Validates topology YAML `text` that came from `path` (used in error messages).
pub fn parse(path: &Path, text: &str) -> Result<Topology, FileError> {
    let file: FileSchema = yamlfile::parse(path, text)?;
    let node_lines = yamlfile::sequence_item_lines(text, "nodes");
    let link_lines = yamlfile::sequence_item_lines(text, "links");
    let at = |lines: &[usize], i: usize, field: &str, problem: String| {
        let line = yamlfile::item_field_line(text, lines, i, field)
            .or_else(|| yamlfile::find_line(text, field, 1));
        FileError::new(path, line, problem)
    };

    let name = file.name.unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    if file.nodes.is_empty() {
        let line = yamlfile::find_line(text, "nodes", 1);
        return Err(FileError::new(
            path,
            line,
            "a fabric needs at least one node",
        ));
    }
    let mut topo = Topology::new(name);
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for (i, n) in file.nodes.into_iter().enumerate() {
        if n.name.trim().is_empty() {
            return Err(at(&node_lines, i, "name", "node name is empty".into()));
        }
        if topo.node_id(&n.name).is_some() {
            let first = first_line
                .get(&n.name)
                .map(|l| format!(" (first at line {l})"))
                .unwrap_or_default();
            return Err(at(
                &node_lines,
                i,
                "name",
                format!("duplicate node name `{}`{first}", n.name),
            ));
        }
        if let Some(Err(e)) = n.asn.map(crate::bgp_ids::check_asn) {
            return Err(at(
                &node_lines,
                i,
                "asn",
                format!("node `{}`: asn: {e}", n.name),
            ));
        }
        if let Some(Err(e)) = n.router_id.map(crate::bgp_ids::check_router_id) {
            return Err(at(
                &node_lines,
                i,
                "router_id",
                format!("node `{}`: router_id: {e}", n.name),
            ));
        }
        if let Err(e) = frr_role(n.target, n.role, &n.prefixes) {
            return Err(at(
                &node_lines,
                i,
                "target",
                format!("node `{}`: {e}", n.name),
            ));
        }
        if let Some(line) = node_lines.get(i) {
            first_line.insert(n.name.clone(), *line);
        }
        topo.add_node(Node {
            name: n.name,
            role: n.role,
            asn: n.asn,
            router_id: n.router_id,
            prefixes: n.prefixes,
            pod: n.pod,
            plane: n.plane,
            target: n.target,
        });
    }

    // A router ID inside a node's prefix would be a local address stealing that
    // prefix's traffic (the lab puts router IDs on loopbacks; ARN names paths by them).
    for (i, n) in topo.nodes.iter().enumerate() {
        let Some(id) = n.router_id else { continue };
        if let Some((owner, prefix)) = topo.nodes.iter().find_map(|o| {
            o.prefixes
                .iter()
                .find(|p| p.contains(&std::net::IpAddr::V4(id)))
                .map(|p| (o, p))
        }) {
            return Err(at(
                &node_lines,
                i,
                "router_id",
                format!(
                    "router_id {id} of `{}` lies inside prefix {prefix} of `{}`",
                    n.name, owner.name
                ),
            ));
        }
    }

    let mut link_names: HashMap<String, usize> = HashMap::new();
    for (i, l) in file.links.into_iter().enumerate() {
        let a = topo.node_id(&l.a).ok_or_else(|| {
            at(
                &link_lines,
                i,
                "a",
                format!("link to unknown node `{}`", l.a),
            )
        })?;
        let b = topo.node_id(&l.b).ok_or_else(|| {
            at(
                &link_lines,
                i,
                "b",
                format!("link to unknown node `{}`", l.b),
            )
        })?;
        if a == b {
            return Err(at(
                &link_lines,
                i,
                "b",
                format!("link joins `{}` to itself", l.a),
            ));
        }
        if let Err(e) = crate::bandwidth::check_gbps(l.gbps) {
            return Err(at(
                &link_lines,
                i,
                "gbps",
                format!("link {}-{}: gbps: {e}", l.a, l.b),
            ));
        }
        if let Some(name) = &l.name {
            if name.trim().is_empty() {
                return Err(at(&link_lines, i, "name", "link name is empty".into()));
            }
        }
        // Every link is an eBGP session (the model and the agents both assume it): two
        // ends in one AS would drop each other's routes as AS-path loops.
        if let (Some(x), Some(y)) = (topo.nodes[a].asn, topo.nodes[b].asn) {
            if x == y {
                return Err(at(
                    &link_lines,
                    i,
                    "b",
                    format!(
                        "link {}-{}: both ends are in AS {x}; every link is an eBGP session, give them different AS numbers",
                        l.a, l.b
                    ),
                ));
            }
        }
        // The model's routes climb the stages and come down (valley-free): a link
        // between two switches of one stage (a peer link) is a path it does not model.
        let (ra, rb) = (topo.nodes[a].role, topo.nodes[b].role);
        if ra.stage() == rb.stage() && !ra.is_stub() {
            return Err(at(
                &link_lines,
                i,
                "b",
                format!(
                    "link {}-{}: both ends are {} switches; links run between stages (leaf-spine, spine-super-spine), a peer link is not modeled",
                    l.a,
                    l.b,
                    ra.as_str()
                ),
            ));
        }
        let id = topo.add_link(a, b, l.gbps, l.name);
        topo.links[id].color = l.color.map(|c| match c {
            Color::Number(n) => n.to_string(),
            Color::Name(s) => s,
        });
        let name = topo.links[id].name.clone();
        if let Some(first) = link_names.get(&name) {
            let first = link_lines
                .get(*first)
                .map(|l| format!(" (first at line {l})"))
                .unwrap_or_default();
            return Err(at(
                &link_lines,
                i,
                "a",
                format!("duplicate link name `{name}`{first}"),
            ));
        }
        link_names.insert(name, i);
    }
    Ok(topo)
}

/// What an FRR node may be: a spine that originates nothing. The model knows what FRR
/// does with the routes a FARE leaf sends and passes on (docs/configuration.md, "Mixed
/// fabrics"); an FRR leaf or super-spine would need rules for routes that reach it with
/// no bandwidth at all, which neither the model nor the lab has.
fn frr_role(
    target: super::Target,
    role: super::Role,
    prefixes: &[ipnet::IpNet],
) -> Result<(), String> {
    if target != super::Target::Frr {
        return Ok(());
    }
    if role != super::Role::Spine {
        return Err(format!(
            "target frr is supported for spines only, not `{}`",
            role.as_str()
        ));
    }
    if !prefixes.is_empty() {
        return Err("target frr: an FRR spine originates no prefixes".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(Path::new("t.yaml"), text).unwrap_err().to_string()
    }

    const BASE: &str = "name: t\nnodes:\n  - {name: L1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}\n  - {name: S1, role: spine, asn: 65100, router_id: 10.0.1.1}\n";

    /// From a file: what its text parses to; a missing file is named.
    #[test]
    fn loads_a_file_and_names_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("fare-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.yaml");
        std::fs::write(
            &path,
            format!("{BASE}links:\n  - {{a: L1, b: S1, gbps: 100}}\n"),
        )
        .unwrap();
        let t = load(&path).unwrap();
        let names: Vec<&str> = t.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!((names, t.links.len()), (vec!["L1", "S1"], 1));
        let missing = load(&dir.join("none.yaml")).unwrap_err();
        assert_eq!(missing.line, None);
        assert!(missing.path.ends_with("none.yaml"), "{missing}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn loads_nodes_links_and_parallel_names() {
        let t = parse(
            Path::new("t.yaml"),
            &format!(
                "{BASE}links:\n  - {{a: L1, b: S1, gbps: 100}}\n  - {{a: L1, b: S1, gbps: 50}}\n  - {{a: S1, b: L1, gbps: 25, name: x, color: red}}\n"
            ),
        )
        .unwrap();
        assert_eq!(t.nodes.len(), 2);
        let names: Vec<&str> = t.links.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["L1-S1", "L1-S1#2", "x"]);
        assert_eq!(t.links[2].color.as_deref(), Some("red"));
        assert_eq!(t.nodes[0].prefixes[0].to_string(), "192.0.2.0/24");
        // The writer's output reads back to the same topology.
        assert_eq!(parse(Path::new("t.yaml"), &t.to_yaml()).unwrap(), t);
    }

    #[test]
    fn frr_is_a_spine_that_originates_nothing() {
        let ok = parse(
            Path::new("t.yaml"),
            "nodes:\n  - {name: S1, role: spine, target: frr}\nlinks: []\n",
        )
        .unwrap();
        assert_eq!(ok.nodes[0].target, super::super::Target::Frr);
        assert_eq!(parse(Path::new("t.yaml"), &ok.to_yaml()).unwrap(), ok);
        let e =
            err("nodes:\n  - {name: S1, role: spine}\n  - {name: L1, role: leaf, target: frr}\n");
        assert_eq!(
            e,
            "t.yaml:3: node `L1`: target frr is supported for spines only, not `leaf`"
        );
        let e = err("nodes:\n  - name: S1\n    role: spine\n    prefixes: [192.0.2.0/24]\n    target: frr\n");
        assert_eq!(
            e,
            "t.yaml:5: node `S1`: target frr: an FRR spine originates no prefixes"
        );
    }

    #[test]
    fn unknown_node_names_its_line() {
        let e = err(&format!(
            "{BASE}links:\n  - {{a: L1, b: S1, gbps: 100}}\n  - a: L1\n    b: S9\n    gbps: 100\n"
        ));
        assert_eq!(e, "t.yaml:8: link to unknown node `S9`");
    }

    #[test]
    fn duplicate_node_names_its_line() {
        let e = err(&format!("{BASE}  - {{name: L1, role: leaf}}\n"));
        assert_eq!(e, "t.yaml:5: duplicate node name `L1` (first at line 3)");
    }

    #[test]
    fn non_positive_capacity_is_rejected() {
        let e = err(&format!("{BASE}links:\n  - {{a: L1, b: S1, gbps: 0}}\n"));
        let range = "Gbps is outside what the Path Bandwidth community carries \
                     (0.00048828125 to 524032 Gbps, binary16 GB/s)";
        assert_eq!(e, format!("t.yaml:6: link L1-S1: gbps: 0 {range}"));
        let e = err(&format!(
            "{BASE}links:\n  - {{a: L1, b: S1, gbps: 1e300}}\n"
        ));
        assert_eq!(e, format!("t.yaml:6: link L1-S1: gbps: 1e300 {range}"));
        let e = err(&format!(
            "{BASE}links:\n  - {{a: L1, b: S1, gbps: 524033}}\n"
        ));
        assert_eq!(e, format!("t.yaml:6: link L1-S1: gbps: 524033 {range}"));
        parse(
            Path::new("t.yaml"),
            &format!("{BASE}links:\n  - {{a: L1, b: S1, gbps: 524032}}\n"),
        )
        .expect("the largest binary16 value is carried");
        let e = err(&format!("{BASE}links:\n  - {{a: L1, b: S1, gbps: -5}}\n"));
        assert!(e.starts_with("t.yaml:6: "), "{e}");
        let e = err(&format!("{BASE}links:\n  - {{a: L1, b: S1, gbps: .nan}}\n"));
        assert!(e.starts_with("t.yaml:6: "), "{e}");
    }

    #[test]
    fn bad_prefix_role_and_self_link() {
        let e = err("nodes:\n  - {name: L1, role: leaf, prefixes: [192.0.2.0/33]}\n");
        assert!(e.starts_with("t.yaml:2:"), "{e}");
        let e = err("nodes:\n  - {name: L1, role: router}\n");
        assert!(
            e.starts_with("t.yaml:2:") && e.contains("unknown variant"),
            "{e}"
        );
        let e = err("nodes:\n  - {name: L1, role: leaf}\nlinks:\n  - {a: L1, b: L1, gbps: 1}\n");
        assert_eq!(e, "t.yaml:4: link joins `L1` to itself");
        let e = err("nodes:\n  - {name: L1, role: leaf, asn: 65100}\n  - {name: S1, role: spine, asn: 65100}\nlinks:\n  - {a: L1, b: S1, gbps: 1}\n");
        assert!(
            e.starts_with("t.yaml:5: ") && e.contains("both ends are in AS 65100"),
            "{e}"
        );
    }

    /// A peer link between two switches of one stage is refused at its line; two stubs
    /// (a host behind a host) may be joined.
    #[test]
    fn a_link_inside_one_stage_is_refused() {
        let two = |role: &str| {
            format!("nodes:\n  - {{name: A, role: {role}}}\n  - {{name: B, role: {role}}}\nlinks:\n  - {{a: A, b: B, gbps: 100}}\n")
        };
        for role in ["leaf", "spine", "super-spine"] {
            let e = err(&two(role));
            assert_eq!(
                e,
                format!("t.yaml:5: link A-B: both ends are {role} switches; links run between stages (leaf-spine, spine-super-spine), a peer link is not modeled")
            );
        }
        for role in ["host", "rnic"] {
            assert!(parse(Path::new("t.yaml"), &two(role)).is_ok(), "{role}");
        }
    }

    #[test]
    fn router_id_inside_a_prefix_is_refused() {
        let e = err("name: t\nnodes:\n  - {name: L1, role: leaf, prefixes: [10.0.1.0/24]}\n  - {name: S1, role: spine, router_id: 10.0.1.1}\n");
        assert_eq!(
            e,
            "t.yaml:4: router_id 10.0.1.1 of `S1` lies inside prefix 10.0.1.0/24 of `L1`"
        );
    }

    #[test]
    fn empty_fabric_and_reserved_numbers() {
        assert_eq!(
            err("name: t\nnodes: []\n"),
            "t.yaml:2: a fabric needs at least one node"
        );
        assert_eq!(
            err(&BASE.replace("asn: 65100", "asn: 23456")),
            "t.yaml:4: node `S1`: asn: AS 23456 is AS_TRANS, reserved for 2-octet fields (RFC 6793)"
        );
        assert_eq!(
            err(&BASE.replace("asn: 65001", "asn: 0")),
            "t.yaml:3: node `L1`: asn: AS 0 is reserved (RFC 7607)"
        );
        assert_eq!(
            err(&BASE.replace("router_id: 10.0.1.1", "router_id: 0.0.0.0")),
            "t.yaml:4: node `S1`: router_id: 0.0.0.0 is not a BGP identifier (RFC 6286: it must \
             be non-zero)"
        );
    }

    #[test]
    fn duplicate_link_name() {
        let e = err(&format!(
            "{BASE}links:\n  - {{a: L1, b: S1, gbps: 1, name: x}}\n  - {{a: L1, b: S1, gbps: 1, name: x}}\n"
        ));
        assert_eq!(e, "t.yaml:7: duplicate link name `x` (first at line 6)");
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "",
            "[",
            "nodes: 5",
            "nodes:\n  - 7\n",
            "\u{0}",
            "nodes: []\nlinks: [{}]",
        ] {
            assert!(parse(Path::new("t.yaml"), text).is_err() || text.contains("[]"));
        }
    }
}
