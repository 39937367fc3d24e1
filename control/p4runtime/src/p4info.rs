//! A loaded P4Info and lookups by name.
//!
//! Ids are whatever the compiler assigned; nothing here or in the backend hard-codes one.
//! A name matches an object's fully qualified name (`FareIngress.routing.route_v4`), its
//! alias, or a unique dotted suffix of the qualified name (`routing.route_v4`).

use crate::proto::p4::config::v1 as p4cfg;
use crate::proto::FILE_DESCRIPTOR_SET;
use prost::Message;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum P4InfoError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("P4Info text: {0}")]
    Text(String),
    #[error("P4Info has no {kind} named {name:?}")]
    Missing { kind: &'static str, name: String },
    #[error("P4Info name {name:?} is ambiguous among {kind}s: {candidates}")]
    Ambiguous {
        kind: &'static str,
        name: String,
        candidates: String,
    },
    #[error("{kind} {owner}: no {what} named {name:?}")]
    MissingPart {
        kind: &'static str,
        owner: String,
        what: &'static str,
        name: String,
    },
}

/// The P4Info of the loaded program.
#[derive(Clone, Debug, PartialEq)]
pub struct P4Info {
    pub info: p4cfg::P4Info,
}

/// Anything with a P4Info preamble.
pub trait Named {
    const KIND: &'static str;
    fn preamble(&self) -> Option<&p4cfg::Preamble>;
}

macro_rules! named {
    ($t:ty, $kind:literal) => {
        impl Named for $t {
            const KIND: &'static str = $kind;
            fn preamble(&self) -> Option<&p4cfg::Preamble> {
                self.preamble.as_ref()
            }
        }
    };
}
named!(p4cfg::Table, "table");
named!(p4cfg::Action, "action");
named!(p4cfg::ActionProfile, "action profile");
named!(p4cfg::Counter, "counter");
named!(p4cfg::Register, "register");
named!(p4cfg::ControllerPacketMetadata, "controller header");

/// Id of a P4Info object's preamble (0 when missing, which no valid P4Info has).
pub fn id_of<T: Named>(item: &T) -> u32 {
    item.preamble().map_or(0, |p| p.id)
}

/// Qualified name of a P4Info object.
pub fn name_of<T: Named>(item: &T) -> &str {
    item.preamble().map_or("", |p| p.name.as_str())
}

fn matches(preamble: &p4cfg::Preamble, name: &str) -> bool {
    preamble.name == name
        || preamble.alias == name
        || preamble
            .name
            .strip_suffix(name)
            .is_some_and(|head| head.ends_with('.'))
}

fn find<'a, T: Named>(items: &'a [T], name: &str) -> Result<&'a T, P4InfoError> {
    // An exact qualified name or alias wins over a suffix match.
    if let Some(exact) = items.iter().find(|i| {
        i.preamble()
            .is_some_and(|p| p.name == name || p.alias == name)
    }) {
        return Ok(exact);
    }
    let hits: Vec<&T> = items
        .iter()
        .filter(|i| i.preamble().is_some_and(|p| matches(p, name)))
        .collect();
    match hits.as_slice() {
        [one] => Ok(one),
        [] => Err(P4InfoError::Missing {
            kind: T::KIND,
            name: name.to_string(),
        }),
        many => Err(P4InfoError::Ambiguous {
            kind: T::KIND,
            name: name.to_string(),
            candidates: many
                .iter()
                .map(|i| name_of(*i))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

impl P4Info {
    /// Parses P4Info in protobuf text format (p4c `--p4runtime-files x.txtpb`).
    pub fn from_text(text: &str) -> Result<P4Info, P4InfoError> {
        let pool = prost_reflect::DescriptorPool::decode(FILE_DESCRIPTOR_SET)
            .map_err(|e| P4InfoError::Text(format!("descriptor set: {e}")))?;
        let desc = pool
            .get_message_by_name("p4.config.v1.P4Info")
            .ok_or_else(|| P4InfoError::Text("descriptor set lacks P4Info".into()))?;
        let dynamic = prost_reflect::DynamicMessage::parse_text_format(desc, text)
            .map_err(|e| P4InfoError::Text(e.to_string()))?;
        let info = p4cfg::P4Info::decode(dynamic.encode_to_vec().as_slice())
            .map_err(|e| P4InfoError::Text(e.to_string()))?;
        Ok(P4Info { info })
    }

    /// Parses binary P4Info (as returned by GetForwardingPipelineConfig).
    pub fn from_binary(bytes: &[u8]) -> Result<P4Info, P4InfoError> {
        p4cfg::P4Info::decode(bytes)
            .map(|info| P4Info { info })
            .map_err(|e| P4InfoError::Text(e.to_string()))
    }

    /// Loads a `.txtpb` (text) or any other extension (binary) P4Info file.
    pub fn load(path: &Path) -> Result<P4Info, P4InfoError> {
        let bytes = std::fs::read(path).map_err(|source| P4InfoError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let is_text = path
            .extension()
            .is_some_and(|e| e == "txtpb" || e == "txt" || e == "pbtxt");
        let parsed = if is_text {
            P4Info::from_text(&String::from_utf8_lossy(&bytes))
        } else {
            P4Info::from_binary(&bytes)
        };
        parsed.map_err(|e| P4InfoError::Text(format!("{}: {e}", path.display())))
    }

    pub fn table(&self, name: &str) -> Result<&p4cfg::Table, P4InfoError> {
        find(&self.info.tables, name)
    }

    pub fn action(&self, name: &str) -> Result<&p4cfg::Action, P4InfoError> {
        find(&self.info.actions, name)
    }

    pub fn action_profile(&self, name: &str) -> Result<&p4cfg::ActionProfile, P4InfoError> {
        find(&self.info.action_profiles, name)
    }

    pub fn counter(&self, name: &str) -> Result<&p4cfg::Counter, P4InfoError> {
        find(&self.info.counters, name)
    }

    pub fn register(&self, name: &str) -> Result<&p4cfg::Register, P4InfoError> {
        find(&self.info.registers, name)
    }

    pub fn controller_header(
        &self,
        name: &str,
    ) -> Result<&p4cfg::ControllerPacketMetadata, P4InfoError> {
        find(&self.info.controller_packet_metadata, name)
    }
}

/// A match field of a table, by name (`dst_addr`, or the full `hdr.ipv4.dst_addr`).
pub fn match_field<'a>(
    table: &'a p4cfg::Table,
    name: &str,
) -> Result<&'a p4cfg::MatchField, P4InfoError> {
    table
        .match_fields
        .iter()
        .find(|f| f.name == name || f.name.rsplit('.').next() == Some(name))
        .ok_or_else(|| P4InfoError::MissingPart {
            kind: "table",
            owner: name_of(table).to_string(),
            what: "match field",
            name: name.to_string(),
        })
}

/// A parameter of an action, by name.
pub fn param<'a>(
    action: &'a p4cfg::Action,
    name: &str,
) -> Result<&'a p4cfg::action::Param, P4InfoError> {
    action
        .params
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| P4InfoError::MissingPart {
            kind: "action",
            owner: name_of(action).to_string(),
            what: "parameter",
            name: name.to_string(),
        })
}

/// A field of a controller header (packet_in / packet_out), by name.
pub fn packet_metadata<'a>(
    header: &'a p4cfg::ControllerPacketMetadata,
    name: &str,
) -> Result<&'a p4cfg::controller_packet_metadata::Metadata, P4InfoError> {
    header
        .metadata
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| P4InfoError::MissingPart {
            kind: "controller header",
            owner: name_of(header).to_string(),
            what: "field",
            name: name.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"
pkg_info { arch: "v1model" }
tables {
  preamble { id: 33554433 name: "Ingress.routing.route_v4" alias: "route_v4" }
  match_fields { id: 1 name: "hdr.ipv4.dst_addr" bitwidth: 32 match_type: LPM }
  action_refs { id: 16777217 }
  size: 1024
}
tables {
  preamble { id: 33554434 name: "Ingress.other.route_v4" alias: "other.route_v4" }
}
actions {
  preamble { id: 16777217 name: "Ingress.routing.set_group" alias: "set_group" }
  params { id: 1 name: "group_id" bitwidth: 16 }
}
"#;

    #[test]
    fn text_format_parses_and_names_resolve() {
        let p = P4Info::from_text(SMALL).unwrap();
        assert_eq!(p.info.pkg_info.as_ref().unwrap().arch, "v1model");
        // Alias, full name and unique suffix all find the same table.
        assert_eq!(id_of(p.table("route_v4").unwrap()), 33554433);
        assert_eq!(
            id_of(p.table("Ingress.routing.route_v4").unwrap()),
            33554433
        );
        assert_eq!(id_of(p.table("routing.route_v4").unwrap()), 33554433);
        assert_eq!(id_of(p.table("other.route_v4").unwrap()), 33554434);
        let t = p.table("route_v4").unwrap();
        assert_eq!(match_field(t, "dst_addr").unwrap().bitwidth, 32);
        let a = p.action("set_group").unwrap();
        assert_eq!(param(a, "group_id").unwrap().id, 1);
    }

    #[test]
    fn missing_names_are_errors_not_panics() {
        let p = P4Info::from_text(SMALL).unwrap();
        assert!(matches!(p.table("nope"), Err(P4InfoError::Missing { .. })));
        let t = p.table("route_v4").unwrap();
        assert!(match_field(t, "src_addr").is_err());
        assert!(P4Info::from_text("tables { bogus: 1 }").is_err());
    }
}
