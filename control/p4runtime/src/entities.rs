//! Builders and lookups of P4Runtime entities that any P4 program uses: fields resolved
//! from the P4Info, canonical byte strings, table entries, updates, group members.

use crate::client::P4rtError;
use crate::p4info;
use crate::proto::p4::v1 as p4;

/// Id and width of one match field / action parameter / packet metadata field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub id: u32,
    pub bits: i32,
}

pub fn field_of(f: &crate::proto::p4::config::v1::MatchField) -> Field {
    Field {
        id: f.id,
        bits: f.bitwidth,
    }
}

/// Match field `name` of table `t`, resolved once at load.
pub fn key_of(t: &crate::proto::p4::config::v1::Table, name: &str) -> Result<Field, P4rtError> {
    Ok(field_of(p4info::match_field(t, name)?))
}

/// Parameter `name` of action `a`, resolved once at load.
pub fn param_of(a: &crate::proto::p4::config::v1::Action, name: &str) -> Result<Field, P4rtError> {
    let p = p4info::param(a, name)?;
    Ok(Field {
        id: p.id,
        bits: p.bitwidth,
    })
}

/// P4Runtime canonical byte string of `value` for a `bits`-wide field: big-endian, no
/// leading zero octets, at least one octet.
pub fn canonical(value: u128, bits: i32, what: &str) -> Result<Vec<u8>, P4rtError> {
    if bits <= 0 || (bits < 128 && value >> bits != 0) {
        return Err(P4rtError::Width {
            what: what.to_string(),
            value,
            bits,
        });
    }
    let bytes = value.to_be_bytes();
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(15);
    Ok(bytes[first..].to_vec())
}

/// Value of a P4Runtime byte string (padded or canonical).
pub fn value_of(bytes: &[u8]) -> u128 {
    bytes
        .iter()
        .rev()
        .take(16)
        .rev()
        .fold(0u128, |acc, b| (acc << 8) | u128::from(*b))
}

pub fn param(field: Field, value: u128, what: &str) -> Result<p4::action::Param, P4rtError> {
    Ok(p4::action::Param {
        param_id: field.id,
        value: canonical(value, field.bits, what)?,
    })
}

pub fn exact(field: Field, value: u128, what: &str) -> Result<p4::FieldMatch, P4rtError> {
    Ok(p4::FieldMatch {
        field_id: field.id,
        field_match_type: Some(p4::field_match::FieldMatchType::Exact(
            p4::field_match::Exact {
                value: canonical(value, field.bits, what)?,
            },
        )),
    })
}

/// Every entry of table `id` (a read).
pub fn whole_table(id: u32) -> p4::Entity {
    entity_table(p4::TableEntry {
        table_id: id,
        ..Default::default()
    })
}

pub fn entity_table(entry: p4::TableEntry) -> p4::Entity {
    p4::Entity {
        entity: Some(p4::entity::Entity::TableEntry(entry)),
    }
}

pub fn update(kind: p4::update::Type, entity: p4::Entity) -> p4::Update {
    p4::Update {
        r#type: kind as i32,
        entity: Some(entity),
    }
}

/// [`update`] of one entity of the given kind (a member, a profile group, ...).
pub fn update_of(kind: p4::update::Type, entity: p4::entity::Entity) -> p4::Update {
    update(
        kind,
        p4::Entity {
            entity: Some(entity),
        },
    )
}

/// One weighted member of an action-profile group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupMember {
    pub member_id: u32,
    pub weight: i32,
    pub watch_port: Option<u32>,
}
