//! fare.p4's DPF objects (p4/include/dpf.p4) resolved by name, and the entries the backend
//! writes: flow rules -> `flow_color`, (route group, color) -> `color_group`, group ->
//! `group_fallback`. Semantics as in `dataplane::dpf` (what the XDP program does too).

use fare_dataplane::FlowRule;
use fare_p4runtime::client::P4rtError;
use fare_p4runtime::entities::{canonical, key_of as key, param_of, Field};
use fare_p4runtime::p4info::{id_of, P4Info};
use fare_p4runtime::proto::p4::v1 as p4;
use ipnet::IpNet;

/// Key fields of `flow_color`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowKeys {
    pub ip_version: Field,
    pub dscp: Field,
    pub protocol: Field,
    pub src_addr: Field,
    pub dst_addr: Field,
    pub l4_valid: Field,
    pub src_port: Field,
    pub dst_port: Field,
    pub qp_valid: Field,
    pub dest_qp: Field,
}

/// Resolved ids of dpf.p4.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpfProgram {
    pub flow_color: u32,
    pub keys: FlowKeys,
    pub set_color: u32,
    pub set_color_color: Field,
    pub color_group: u32,
    pub color_group_gid: Field,
    pub color_group_color: Field,
    pub use_group: u32,
    pub use_group_gid: Field,
    pub group_fallback: u32,
    pub group_fallback_gid: Field,
    pub set_fallback: u32,
    pub set_fallback_gid: Field,
}

fn ternary(field: Field, value: u128, mask: u128, what: &str) -> Result<p4::FieldMatch, P4rtError> {
    Ok(p4::FieldMatch {
        field_id: field.id,
        field_match_type: Some(p4::field_match::FieldMatchType::Ternary(
            p4::field_match::Ternary {
                value: canonical(value & mask, field.bits, what)?,
                mask: canonical(mask, field.bits, what)?,
            },
        )),
    })
}

/// A range match, or None for the full range (P4Runtime: a don't-care is omitted).
fn range(field: Field, lo: u32, hi: u32, what: &str) -> Result<Option<p4::FieldMatch>, P4rtError> {
    let max = if field.bits >= 32 {
        u32::MAX
    } else {
        (1u32 << field.bits) - 1
    };
    if lo > hi || hi > max {
        return Err(P4rtError::Invalid(format!(
            "{what}: range {lo}-{hi} does not fit"
        )));
    }
    if lo == 0 && hi == max {
        return Ok(None);
    }
    Ok(Some(p4::FieldMatch {
        field_id: field.id,
        field_match_type: Some(p4::field_match::FieldMatchType::Range(
            p4::field_match::Range {
                low: canonical(u128::from(lo), field.bits, what)?,
                high: canonical(u128::from(hi), field.bits, what)?,
            },
        )),
    }))
}

fn exact(field: Field, value: u128, what: &str) -> Result<p4::FieldMatch, P4rtError> {
    Ok(p4::FieldMatch {
        field_id: field.id,
        field_match_type: Some(p4::field_match::FieldMatchType::Exact(
            p4::field_match::Exact {
                value: canonical(value, field.bits, what)?,
            },
        )),
    })
}

fn action(id: u32, params: Vec<p4::action::Param>) -> Option<p4::TableAction> {
    Some(p4::TableAction {
        r#type: Some(p4::table_action::Type::Action(p4::Action {
            action_id: id,
            params,
        })),
    })
}

/// Action `id` with its one parameter `field` set to group `gid`; None without a group
/// (a key only, for DELETE).
fn group_action(
    id: u32,
    field: Field,
    gid: Option<u16>,
) -> Result<Option<p4::TableAction>, P4rtError> {
    match gid {
        Some(g) => Ok(action(id, vec![param(field, u128::from(g), "group_id")?])),
        None => Ok(None),
    }
}

fn param(field: Field, value: u128, what: &str) -> Result<p4::action::Param, P4rtError> {
    Ok(p4::action::Param {
        param_id: field.id,
        value: canonical(value, field.bits, what)?,
    })
}

/// (value, mask) of a prefix as the 128-bit `src_addr`/`dst_addr` keys hold it (IPv4 in
/// the low 32 bits), and its IP version.
fn prefix_key(net: IpNet) -> (u128, u128, u128) {
    match net.trunc() {
        IpNet::V4(n) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(n.prefix_len()))
                .unwrap_or(0);
            (u128::from(u32::from(n.network())), u128::from(mask), 4)
        }
        IpNet::V6(n) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(n.prefix_len()))
                .unwrap_or(0);
            (u128::from(n.network()), mask, 6)
        }
    }
}

impl DpfProgram {
    pub fn resolve(info: &P4Info) -> Result<DpfProgram, P4rtError> {
        let flow_color = info.table("dpf.flow_color")?;
        let set_color = info.action("dpf.set_color")?;
        let color_group = info.table("dpf.color_group")?;
        let use_group = info.action("dpf.use_group")?;
        let group_fallback = info.table("dpf.group_fallback")?;
        let set_fallback = info.action("dpf.set_fallback")?;
        Ok(DpfProgram {
            flow_color: id_of(flow_color),
            keys: FlowKeys {
                ip_version: key(flow_color, "ip_version")?,
                dscp: key(flow_color, "dscp")?,
                protocol: key(flow_color, "protocol")?,
                src_addr: key(flow_color, "src_addr")?,
                dst_addr: key(flow_color, "dst_addr")?,
                l4_valid: key(flow_color, "l4_valid")?,
                src_port: key(flow_color, "src_port")?,
                dst_port: key(flow_color, "dst_port")?,
                qp_valid: key(flow_color, "qp_valid")?,
                dest_qp: key(flow_color, "dest_qp")?,
            },
            set_color: id_of(set_color),
            set_color_color: param_of(set_color, "color")?,
            color_group: id_of(color_group),
            color_group_gid: key(color_group, "group_id")?,
            color_group_color: key(color_group, "color")?,
            use_group: id_of(use_group),
            use_group_gid: param_of(use_group, "group_id")?,
            group_fallback: id_of(group_fallback),
            group_fallback_gid: key(group_fallback, "group_id")?,
            set_fallback: id_of(set_fallback),
            set_fallback_gid: param_of(set_fallback, "group_id")?,
        })
    }

    /// The `flow_color` entries of `rules`: rule i gets priority len - i (first match
    /// wins); a rule with k DSCP values becomes k entries of that priority.
    pub fn flow_entries(&self, rules: &[FlowRule]) -> Result<Vec<p4::TableEntry>, P4rtError> {
        let k = &self.keys;
        let mut out = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            r.check().map_err(|e| P4rtError::Invalid(e.to_string()))?;
            let priority = i32::try_from(rules.len() - i)
                .map_err(|_| P4rtError::Invalid("too many flow rules".into()))?;
            let mut common = Vec::new();
            let mut version = None;
            for (net, field, what) in [(r.src, k.src_addr, "src"), (r.dst, k.dst_addr, "dst")] {
                if let Some(net) = net {
                    let (value, mask, v) = prefix_key(net);
                    version = Some(v);
                    if mask != 0 {
                        common.push(ternary(field, value, mask, what)?);
                    }
                }
            }
            if let Some(v) = version {
                common.push(ternary(k.ip_version, v, 0xf, "ip_version")?);
            }
            if let Some(p) = r.protocol {
                common.push(ternary(k.protocol, u128::from(p.0), 0xff, "protocol")?);
            }
            if r.src_port.is_some() || r.dst_port.is_some() {
                common.push(ternary(k.l4_valid, 1, 1, "l4_valid")?);
            }
            for (rg, field, what) in [
                (r.src_port, k.src_port, "src_port"),
                (r.dst_port, k.dst_port, "dst_port"),
            ] {
                if let Some(rg) = rg {
                    common.extend(range(field, rg.lo, rg.hi, what)?);
                }
            }
            if let Some(q) = r.qp {
                common.push(ternary(k.qp_valid, 1, 1, "qp_valid")?);
                common.extend(range(k.dest_qp, q.lo, q.hi, "qp")?);
            }
            let act = action(
                self.set_color,
                vec![param(self.set_color_color, u128::from(r.color), "color")?],
            );
            let mut dscps: Vec<Option<u8>> = r.dscp.iter().map(|d| Some(*d)).collect();
            dscps.sort();
            dscps.dedup();
            if dscps.is_empty() {
                dscps.push(None);
            }
            for d in dscps {
                let mut m = common.clone();
                if let Some(d) = d {
                    m.push(ternary(k.dscp, u128::from(d), 0x3f, "dscp")?);
                }
                // P4Runtime wants match fields in any order but each once; sort by id
                // so entries compare equal however they were built.
                m.sort_by_key(|f| f.field_id);
                out.push(p4::TableEntry {
                    table_id: self.flow_color,
                    r#match: m,
                    action: act.clone(),
                    priority,
                    ..Default::default()
                });
            }
        }
        Ok(out)
    }

    /// (route group, color) -> the color's group.
    pub fn color_entry(
        &self,
        route_gid: u16,
        color: u32,
        color_gid: Option<u16>,
    ) -> Result<p4::TableEntry, P4rtError> {
        Ok(p4::TableEntry {
            table_id: self.color_group,
            r#match: vec![
                exact(self.color_group_gid, u128::from(route_gid), "group_id")?,
                exact(self.color_group_color, u128::from(color), "color")?,
            ],
            action: group_action(self.use_group, self.use_group_gid, color_gid)?,
            ..Default::default()
        })
    }

    /// group -> its fallback group (`target` None: key only, for DELETE).
    pub fn fallback_entry(
        &self,
        gid: u16,
        target: Option<u16>,
    ) -> Result<p4::TableEntry, P4rtError> {
        Ok(p4::TableEntry {
            table_id: self.group_fallback,
            r#match: vec![exact(self.group_fallback_gid, u128::from(gid), "group_id")?],
            action: group_action(self.set_fallback, self.set_fallback_gid, target)?,
            ..Default::default()
        })
    }
}
