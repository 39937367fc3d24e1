//! The SAI-P4 profile (`dataplane: {kind: p4runtime, profile: sai}`): WCMP groups written
//! into the SAI-P4 program that PINS/SONiC switches expose over P4Runtime, instead of
//! fare.p4. Reference: docs/p4.md, "SAI-P4 (PINS) profile".
//!
//! - [`SaiProgram`]: the tables, actions and parameters fare writes, resolved by name from
//!   the switch's P4Info once at load, each field with its encoding ([`Encoding`]).
//! - builders of every entity written (this file), hand-checked byte for byte in `tests`.
//! - [`backend::SaiDataplane`]: the installer (make-before-break order, limits, refusals).
//!
//! Per fare group (a prefix with weighted members: egress port, neighbor MAC, next hop):
//!
//! ```text
//! ipv4_table / ipv6_table (vrf, prefix)  -> set_wcmp_group_id("fare-g-N")
//! wcmp_group_table ("fare-g-N")          -> one-shot action set:
//!                                           set_nexthop_id("fare-nh-M") weight w watch port
//! nexthop_table ("fare-nh-M")            -> set_ip_nexthop(rif, neighbor_id)
//! neighbor_table (rif, neighbor_id)      -> set_dst_mac(neighbor MAC)
//! router_interface_table ("fare-rif-P")  -> unicast_set_port_and_src_mac(port P, router MAC)
//! ```
//!
//! and once per switch: `l3_admit_table` (packets to the router MAC are routed),
//! `vrf_table` (the VRF fare's routes live in) and `acl_pre_ingress_table` (every IP packet
//! is put in that VRF), as SAI-P4's own test entries do to forward IP packets.

pub mod backend;
#[cfg(test)]
mod tests;

use fare_dataplane::MacAddr;
use fare_p4runtime::client::P4rtError;
use fare_p4runtime::entities::canonical;
use fare_p4runtime::p4info::{self, id_of, name_of, P4Info};
use fare_p4runtime::proto::p4::config::v1 as p4cfg;
use fare_p4runtime::proto::p4::v1 as p4;
use ipnet::IpNet;
use std::net::{IpAddr, Ipv6Addr};

pub use backend::SaiDataplane;

/// How the value of one match field or parameter goes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// `@p4runtime_translation("", string)` (PINS): the bytes are a UTF-8 string, any
    /// length; the switch maps it to its own id.
    Str,
    /// A bit string of this width (SAI-P4 compiled with `-DPLATFORM_BMV2`, where the id
    /// types are `bit<256>` and ports `bit<9>`): canonical bytes.
    Bits(i32),
}

/// Id and encoding of one match field or action parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaiField {
    pub id: u32,
    pub encoding: Encoding,
}

impl SaiField {
    /// An id (VRF, router interface, next hop, WCMP group): the string's bytes in both
    /// encodings. As a bit string they must fit the width and not start with a zero octet
    /// (P4Runtime's canonical form); an ASCII id never does.
    pub fn id_bytes(&self, id: &str, what: &str) -> Result<Vec<u8>, P4rtError> {
        let bytes = id.as_bytes().to_vec();
        if bytes.is_empty() {
            return Err(P4rtError::Invalid(format!("{what}: empty id")));
        }
        if let Encoding::Bits(bits) = self.encoding {
            if bytes.len() * 8 > bits as usize || bytes[0] == 0 {
                return Err(P4rtError::Invalid(format!(
                    "{what}: id {id:?} does not fit {bits} bits"
                )));
            }
        }
        Ok(bytes)
    }

    /// A number (a port): its decimal string where translated (a PINS port's P4Runtime
    /// id), else canonical bytes.
    pub fn number_bytes(&self, value: u128, what: &str) -> Result<Vec<u8>, P4rtError> {
        match self.encoding {
            Encoding::Str => Ok(value.to_string().into_bytes()),
            Encoding::Bits(bits) => canonical(value, bits, what),
        }
    }

    /// A plain bit-string value (addresses, MACs): never translated in SAI-P4.
    pub fn value_bytes(&self, value: u128, what: &str) -> Result<Vec<u8>, P4rtError> {
        match self.encoding {
            Encoding::Bits(bits) => canonical(value, bits, what),
            Encoding::Str => Err(P4rtError::Invalid(format!(
                "{what}: the P4Info gives this field a translated (string) type"
            ))),
        }
    }
}

/// The encoding of a field of `bitwidth` bits and type `type_name` (SAI-P4's `type`s).
fn encoding_of(
    info: &P4Info,
    type_name: Option<&p4cfg::P4NamedType>,
    bitwidth: i32,
    what: &str,
) -> Result<Encoding, P4rtError> {
    use p4cfg::p4_new_type_spec::Representation;
    use p4cfg::p4_new_type_translation::SdnType;
    let spec = type_name.and_then(|t| {
        info.info
            .type_info
            .as_ref()
            .and_then(|ti| ti.new_types.get(&t.name))
    });
    let translated = spec.and_then(|s| match &s.representation {
        Some(Representation::TranslatedType(t)) => Some(t.sdn_type),
        _ => None,
    });
    match translated {
        Some(Some(SdnType::SdnString(_))) => Ok(Encoding::Str),
        Some(Some(SdnType::SdnBitwidth(w))) if w > 0 => Ok(Encoding::Bits(w)),
        _ if bitwidth > 0 => Ok(Encoding::Bits(bitwidth)),
        _ => Err(P4rtError::Invalid(format!(
            "{what}: neither a bit width nor a string translation in the P4Info"
        ))),
    }
}

fn key(info: &P4Info, t: &p4cfg::Table, name: &str) -> Result<SaiField, P4rtError> {
    let f = p4info::match_field(t, name)?;
    Ok(SaiField {
        id: f.id,
        encoding: encoding_of(
            info,
            f.type_name.as_ref(),
            f.bitwidth,
            &format!("{}.{name}", name_of(t)),
        )?,
    })
}

fn param(info: &P4Info, a: &p4cfg::Action, name: &str) -> Result<SaiField, P4rtError> {
    let p = p4info::param(a, name)?;
    Ok(SaiField {
        id: p.id,
        encoding: encoding_of(
            info,
            p.type_name.as_ref(),
            p.bitwidth,
            &format!("{}({name})", name_of(a)),
        )?,
    })
}

/// `action` resolved and checked to be one of `table`'s actions.
fn action_of<'a>(
    info: &'a P4Info,
    table: &p4cfg::Table,
    name: &str,
) -> Result<&'a p4cfg::Action, P4rtError> {
    let a = info.action(name)?;
    if !table.action_refs.iter().any(|r| r.id == id_of(a)) {
        return Err(P4rtError::Invalid(format!(
            "P4Info: table {} has no action {}",
            name_of(table),
            name_of(a)
        )));
    }
    Ok(a)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteTable {
    pub table: u32,
    pub vrf: SaiField,
    pub dst: SaiField,
    /// The destination's width (32 or 128).
    pub dst_bits: i32,
}

/// SAI-P4's objects fare writes, resolved from the switch's P4Info.
#[derive(Clone, Debug, PartialEq)]
pub struct SaiProgram {
    pub l3_admit: u32,
    pub l3_admit_dst_mac: SaiField,
    pub admit_to_l3: u32,
    pub vrf_table: u32,
    pub vrf_table_vrf: SaiField,
    pub no_action: u32,
    pub acl_pre_ingress: u32,
    pub acl_pre_ingress_is_ip: SaiField,
    pub set_vrf: u32,
    pub set_vrf_vrf: SaiField,
    pub ipv4: RouteTable,
    pub ipv6: RouteTable,
    pub set_wcmp_group_id: u32,
    pub set_wcmp_group_id_group: SaiField,
    pub wcmp_group: u32,
    pub wcmp_group_id: SaiField,
    pub set_nexthop_id: u32,
    pub set_nexthop_id_nexthop: SaiField,
    /// The WCMP selector (its sizes bound a group).
    pub selector: p4cfg::ActionProfile,
    pub nexthop: u32,
    pub nexthop_id: SaiField,
    pub set_ip_nexthop: u32,
    pub set_ip_nexthop_rif: SaiField,
    pub set_ip_nexthop_neighbor: SaiField,
    pub neighbor: u32,
    pub neighbor_rif: SaiField,
    pub neighbor_id: SaiField,
    pub set_dst_mac: u32,
    pub set_dst_mac_mac: SaiField,
    pub rif: u32,
    pub rif_id: SaiField,
    /// `unicast_set_port_and_src_mac` where the table has it, else the older
    /// `set_port_and_src_mac` (same parameters).
    pub set_port_and_src_mac: u32,
    pub rif_port: SaiField,
    pub rif_src_mac: SaiField,
}

impl SaiProgram {
    pub fn resolve(info: &P4Info) -> Result<SaiProgram, P4rtError> {
        let l3_admit = info.table("l3_admit_table")?;
        let admit = action_of(info, l3_admit, "admit_to_l3")?;
        let vrf_table = info.table("vrf_table")?;
        let no_action = action_of(info, vrf_table, "no_action")?;
        let acl = info.table("acl_pre_ingress_table")?;
        let set_vrf = action_of(info, acl, "set_vrf")?;
        let route = |name: &str, dst: &str| -> Result<RouteTable, P4rtError> {
            let t = info.table(name)?;
            Ok(RouteTable {
                table: id_of(t),
                vrf: key(info, t, "vrf_id")?,
                dst: key(info, t, dst)?,
                dst_bits: p4info::match_field(t, dst)?.bitwidth,
            })
        };
        let ipv4 = route("ipv4_table", "ipv4_dst")?;
        let ipv6 = route("ipv6_table", "ipv6_dst")?;
        let v4_table = info.table("ipv4_table")?;
        let set_group = action_of(info, v4_table, "set_wcmp_group_id")?;
        action_of(info, info.table("ipv6_table")?, "set_wcmp_group_id")?;
        let wcmp = info.table("wcmp_group_table")?;
        let set_nexthop_id = action_of(info, wcmp, "set_nexthop_id")?;
        let selector = info
            .info
            .action_profiles
            .iter()
            .find(|p| p.table_ids.contains(&id_of(wcmp)) && p.with_selector)
            .ok_or_else(|| {
                P4rtError::Invalid(format!(
                    "P4Info: table {} has no action selector",
                    name_of(wcmp)
                ))
            })?;
        let nexthop = info.table("nexthop_table")?;
        let set_ip_nexthop = action_of(info, nexthop, "set_ip_nexthop")?;
        let neighbor = info.table("neighbor_table")?;
        let set_dst_mac = action_of(info, neighbor, "set_dst_mac")?;
        let rif = info.table("router_interface_table")?;
        let set_port = action_of(info, rif, "unicast_set_port_and_src_mac")
            .or_else(|_| action_of(info, rif, "set_port_and_src_mac"))?;
        Ok(SaiProgram {
            l3_admit: id_of(l3_admit),
            l3_admit_dst_mac: key(info, l3_admit, "dst_mac")?,
            admit_to_l3: id_of(admit),
            vrf_table: id_of(vrf_table),
            vrf_table_vrf: key(info, vrf_table, "vrf_id")?,
            no_action: id_of(no_action),
            acl_pre_ingress: id_of(acl),
            acl_pre_ingress_is_ip: key(info, acl, "is_ip")?,
            set_vrf: id_of(set_vrf),
            set_vrf_vrf: param(info, set_vrf, "vrf_id")?,
            ipv4,
            ipv6,
            set_wcmp_group_id: id_of(set_group),
            set_wcmp_group_id_group: param(info, set_group, "wcmp_group_id")?,
            wcmp_group: id_of(wcmp),
            wcmp_group_id: key(info, wcmp, "wcmp_group_id")?,
            set_nexthop_id: id_of(set_nexthop_id),
            set_nexthop_id_nexthop: param(info, set_nexthop_id, "nexthop_id")?,
            selector: selector.clone(),
            nexthop: id_of(nexthop),
            nexthop_id: key(info, nexthop, "nexthop_id")?,
            set_ip_nexthop: id_of(set_ip_nexthop),
            set_ip_nexthop_rif: param(info, set_ip_nexthop, "router_interface_id")?,
            set_ip_nexthop_neighbor: param(info, set_ip_nexthop, "neighbor_id")?,
            neighbor: id_of(neighbor),
            neighbor_rif: key(info, neighbor, "router_interface_id")?,
            neighbor_id: key(info, neighbor, "neighbor_id")?,
            set_dst_mac: id_of(set_dst_mac),
            set_dst_mac_mac: param(info, set_dst_mac, "dst_mac")?,
            rif: id_of(rif),
            rif_id: key(info, rif, "router_interface_id")?,
            set_port_and_src_mac: id_of(set_port),
            rif_port: param(info, set_port, "port")?,
            rif_src_mac: param(info, set_port, "src_mac")?,
        })
    }
}

/// Priority of fare's `l3_admit_table` and `acl_pre_ingress_table` entries (ternary and
/// optional matches need one; SAI-P4 reserves the highest for the switch itself).
pub const ENTRY_PRIORITY: i32 = 1;

/// The neighbor id of a next hop: SAI-P4's `neighbor_id` is an IPv6 address (a SAI
/// neighbor entry's IP). An IPv6 next hop is itself, an IPv4 one IPv4-mapped
/// (`::ffff:a.b.c.d`), and a member without a next-hop address (a static member that
/// names only a MAC) gets the EUI-64 link-local address of its MAC.
pub fn neighbor_id(next_hop: Option<IpAddr>, mac: MacAddr) -> Ipv6Addr {
    match next_hop {
        Some(IpAddr::V6(a)) => a,
        Some(IpAddr::V4(a)) => a.to_ipv6_mapped(),
        None => {
            let m = mac.0;
            Ipv6Addr::from([
                0xfe,
                0x80,
                0,
                0,
                0,
                0,
                0,
                0,
                m[0] ^ 0x02,
                m[1],
                m[2],
                0xff,
                0xfe,
                m[3],
                m[4],
                m[5],
            ])
        }
    }
}

fn exact_match(field_id: u32, value: Vec<u8>) -> p4::FieldMatch {
    p4::FieldMatch {
        field_id,
        field_match_type: Some(p4::field_match::FieldMatchType::Exact(
            p4::field_match::Exact { value },
        )),
    }
}

fn action(action_id: u32, params: Vec<(u32, Vec<u8>)>) -> p4::Action {
    p4::Action {
        action_id,
        params: params
            .into_iter()
            .map(|(param_id, value)| p4::action::Param { param_id, value })
            .collect(),
    }
}

fn entry(table_id: u32, matches: Vec<p4::FieldMatch>, a: Option<p4::Action>) -> p4::TableEntry {
    p4::TableEntry {
        table_id,
        r#match: matches,
        action: a.map(|a| p4::TableAction {
            r#type: Some(p4::table_action::Type::Action(a)),
        }),
        ..Default::default()
    }
}

fn mac_value(mac: MacAddr) -> u128 {
    mac.0
        .iter()
        .fold(0u128, |acc, b| (acc << 8) | u128::from(*b))
}

/// One member of a WCMP group as written: a next hop and its weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WcmpAction {
    pub nexthop_id: String,
    pub weight: i32,
    /// The member's egress port as its watch port (None: not watched).
    pub watch_port: Option<u32>,
}

impl SaiProgram {
    /// `l3_admit_table`: packets whose destination MAC is the router's are routed.
    pub fn l3_admit_entry(&self, router_mac: MacAddr) -> Result<p4::TableEntry, P4rtError> {
        let f = self.l3_admit_dst_mac;
        let mut e = entry(
            self.l3_admit,
            vec![p4::FieldMatch {
                field_id: f.id,
                field_match_type: Some(p4::field_match::FieldMatchType::Ternary(
                    p4::field_match::Ternary {
                        value: f.value_bytes(mac_value(router_mac), "router MAC")?,
                        mask: f.value_bytes((1u128 << 48) - 1, "MAC mask")?,
                    },
                )),
            }],
            Some(action(self.admit_to_l3, vec![])),
        );
        e.priority = ENTRY_PRIORITY;
        Ok(e)
    }

    /// `vrf_table`: creates VRF `vrf`.
    pub fn vrf_entry(&self, vrf: &str) -> Result<p4::TableEntry, P4rtError> {
        Ok(entry(
            self.vrf_table,
            vec![exact_match(
                self.vrf_table_vrf.id,
                self.vrf_table_vrf.id_bytes(vrf, "vrf_id")?,
            )],
            Some(action(self.no_action, vec![])),
        ))
    }

    /// `acl_pre_ingress_table`: every IP packet (`is_ip` = 1) is looked up in VRF `vrf`.
    pub fn acl_pre_ingress_entry(&self, vrf: &str) -> Result<p4::TableEntry, P4rtError> {
        let f = self.acl_pre_ingress_is_ip;
        let mut e = entry(
            self.acl_pre_ingress,
            vec![p4::FieldMatch {
                field_id: f.id,
                field_match_type: Some(p4::field_match::FieldMatchType::Optional(
                    p4::field_match::Optional {
                        value: f.value_bytes(1, "is_ip")?,
                    },
                )),
            }],
            Some(action(
                self.set_vrf,
                vec![(
                    self.set_vrf_vrf.id,
                    self.set_vrf_vrf.id_bytes(vrf, "vrf_id")?,
                )],
            )),
        );
        e.priority = ENTRY_PRIORITY;
        Ok(e)
    }

    /// `router_interface_table`: router interface `rif` sends out of `port` with source
    /// MAC `src_mac`.
    pub fn rif_entry(
        &self,
        rif: &str,
        port: u32,
        src_mac: MacAddr,
    ) -> Result<p4::TableEntry, P4rtError> {
        Ok(entry(
            self.rif,
            vec![exact_match(
                self.rif_id.id,
                self.rif_id.id_bytes(rif, "router_interface_id")?,
            )],
            Some(action(
                self.set_port_and_src_mac,
                vec![
                    (
                        self.rif_port.id,
                        self.rif_port.number_bytes(u128::from(port), "port")?,
                    ),
                    (
                        self.rif_src_mac.id,
                        self.rif_src_mac
                            .value_bytes(mac_value(src_mac), "src_mac")?,
                    ),
                ],
            )),
        ))
    }

    /// `neighbor_table`: neighbor `neighbor` behind `rif` has MAC `mac`.
    pub fn neighbor_entry(
        &self,
        rif: &str,
        neighbor: Ipv6Addr,
        mac: MacAddr,
    ) -> Result<p4::TableEntry, P4rtError> {
        Ok(entry(
            self.neighbor,
            vec![
                exact_match(
                    self.neighbor_rif.id,
                    self.neighbor_rif.id_bytes(rif, "router_interface_id")?,
                ),
                exact_match(
                    self.neighbor_id.id,
                    self.neighbor_id
                        .value_bytes(u128::from(neighbor), "neighbor_id")?,
                ),
            ],
            Some(action(
                self.set_dst_mac,
                vec![(
                    self.set_dst_mac_mac.id,
                    self.set_dst_mac_mac
                        .value_bytes(mac_value(mac), "dst_mac")?,
                )],
            )),
        ))
    }

    /// `nexthop_table`: next hop `nexthop` is neighbor `neighbor` behind `rif`.
    pub fn nexthop_entry(
        &self,
        nexthop: &str,
        rif: &str,
        neighbor: Ipv6Addr,
    ) -> Result<p4::TableEntry, P4rtError> {
        Ok(entry(
            self.nexthop,
            vec![exact_match(
                self.nexthop_id.id,
                self.nexthop_id.id_bytes(nexthop, "nexthop_id")?,
            )],
            Some(action(
                self.set_ip_nexthop,
                vec![
                    (
                        self.set_ip_nexthop_rif.id,
                        self.set_ip_nexthop_rif
                            .id_bytes(rif, "router_interface_id")?,
                    ),
                    (
                        self.set_ip_nexthop_neighbor.id,
                        self.set_ip_nexthop_neighbor
                            .value_bytes(u128::from(neighbor), "neighbor_id")?,
                    ),
                ],
            )),
        ))
    }

    /// `wcmp_group_table`, one-shot: group `group` hashes flows over `actions` by weight.
    pub fn wcmp_group_entry(
        &self,
        group: &str,
        actions: &[WcmpAction],
    ) -> Result<p4::TableEntry, P4rtError> {
        let mut set = Vec::with_capacity(actions.len());
        for a in actions {
            if a.weight <= 0 {
                return Err(P4rtError::Invalid(format!(
                    "WCMP group {group}: weight {} of next hop {} is not positive",
                    a.weight, a.nexthop_id
                )));
            }
            let watch_kind = match a.watch_port {
                Some(port) => Some(p4::action_profile_action::WatchKind::WatchPort(
                    self.rif_port.number_bytes(u128::from(port), "watch port")?,
                )),
                None => None,
            };
            set.push(p4::ActionProfileAction {
                action: Some(action(
                    self.set_nexthop_id,
                    vec![(
                        self.set_nexthop_id_nexthop.id,
                        self.set_nexthop_id_nexthop
                            .id_bytes(&a.nexthop_id, "nexthop_id")?,
                    )],
                )),
                weight: a.weight,
                watch_kind,
            });
        }
        Ok(p4::TableEntry {
            table_id: self.wcmp_group,
            r#match: vec![exact_match(
                self.wcmp_group_id.id,
                self.wcmp_group_id.id_bytes(group, "wcmp_group_id")?,
            )],
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::ActionProfileActionSet(
                    p4::ActionProfileActionSet {
                        action_profile_actions: set,
                    },
                )),
            }),
            ..Default::default()
        })
    }

    /// `ipv4_table` / `ipv6_table`: `prefix` in VRF `vrf` -> WCMP group `group`.
    pub fn route_entry(
        &self,
        vrf: &str,
        prefix: IpNet,
        group: &str,
    ) -> Result<p4::TableEntry, P4rtError> {
        let prefix = prefix.trunc();
        let (table, value) = match prefix.addr() {
            IpAddr::V4(a) => (&self.ipv4, u128::from(u32::from(a))),
            IpAddr::V6(a) => (&self.ipv6, u128::from(a)),
        };
        let mut matches = vec![exact_match(
            table.vrf.id,
            table.vrf.id_bytes(vrf, "vrf_id")?,
        )];
        // P4Runtime: an LPM match of length 0 is expressed by omitting the field.
        if prefix.prefix_len() > 0 {
            matches.push(p4::FieldMatch {
                field_id: table.dst.id,
                field_match_type: Some(p4::field_match::FieldMatchType::Lpm(
                    p4::field_match::Lpm {
                        value: table.dst.value_bytes(value, "route prefix")?,
                        prefix_len: i32::from(prefix.prefix_len()),
                    },
                )),
            });
        }
        Ok(entry(
            table.table,
            matches,
            Some(action(
                self.set_wcmp_group_id,
                vec![(
                    self.set_wcmp_group_id_group.id,
                    self.set_wcmp_group_id_group
                        .id_bytes(group, "wcmp_group_id")?,
                )],
            )),
        ))
    }
}

/// The key of `entry` (its action dropped), for a DELETE.
pub fn key_of(entry: &p4::TableEntry) -> p4::TableEntry {
    p4::TableEntry {
        action: None,
        ..entry.clone()
    }
}
