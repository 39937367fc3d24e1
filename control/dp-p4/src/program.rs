//! fare.p4 as seen from the controller: every table, action, parameter, profile, counter,
//! register and controller header it uses, resolved by name from the P4Info once at load
//! (a renamed object fails here, with its name, instead of at the first write), and the
//! builders of every P4Runtime entity the backend writes.

use fare_dataplane::MacAddr;
use fare_p4runtime::client::P4rtError;
use fare_p4runtime::entities::{
    canonical, exact, field_of, key_of, param, param_of, value_of, Field, GroupMember,
};
use fare_p4runtime::p4info::{self, id_of, P4Info};
use fare_p4runtime::proto::p4::v1 as p4;
use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteTable {
    pub table: u32,
    pub dst: Field,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetGroup {
    pub action: u32,
    pub group_id: Field,
    pub spray: Field,
    /// Flowlet mode's idle gap (absent in programs without flowlet mode).
    pub flowlet_gap: Option<Field>,
}

/// Flow mode's resilient bucket table (wcmp_bucket: (group, bucket) -> member index) and
/// the member table it points into (wcmp_member: member index -> next hop).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketTables {
    pub bucket_table: u32,
    pub group_id: Field,
    pub bucket: Field,
    pub set_bucket_member: u32,
    pub bucket_member: Field,
    pub member_table: u32,
    pub member_index: Field,
    /// Buckets per group: the P4Info's bucket key is 16 bits, the program's table size
    /// is compiled in (`FLOW_BUCKETS` in p4/include/constants.p4).
    pub buckets: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetNexthop {
    pub action: u32,
    pub port: Field,
    pub dst_mac: Field,
    pub src_mac: Field,
    pub arn_slot: Field,
    pub member_index: Field,
}

/// Resolved ids of fare.p4.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FareProgram {
    pub route_v4: RouteTable,
    pub route_v6: RouteTable,
    pub set_group: SetGroup,
    pub wcmp_group: u32,
    pub wcmp_group_id: Field,
    pub selector: u32,
    /// The selector's `max_group_size` from the P4Info (0: unstated).
    pub selector_max_group_size: i32,
    pub set_nexthop: SetNexthop,
    /// Flow mode as a bucket table; None for a program with only the selector.
    pub buckets: Option<BucketTables>,
    pub arn_rx: u32,
    pub arn_rx_port: Field,
    pub arn_rx_path: Field,
    pub mark_slot: u32,
    pub mark_slot_slot: Field,
    pub mark_slot_hold: Field,
    /// The switch's own addresses (an ARN to any other is forwarded, not received).
    pub arn_local_v4: RouteTable,
    pub arn_local_v6: RouteTable,
    pub arn_local_action: u32,
    pub arn_monitor: u32,
    pub arn_monitor_port: Field,
    pub monitor: u32,
    pub monitor_params: [Field; 7],
    pub arn_encap: u32,
    pub arn_encap_port: Field,
    pub encap_v4: u32,
    pub encap_v4_params: [Field; 4],
    pub member_packets: u32,
    pub arn_tx_counter: u32,
    pub arn_rx_counter: u32,
    pub spray_counter: u32,
    pub port_congested: u32,
    pub packet_in_port: Field,
    pub packet_in_reason: Field,
    pub packet_out_port: Field,
    pub packet_out_flags: Field,
    pub dpf: crate::dpf::DpfProgram,
}

/// `packet_in.reason` values (constants.p4).
pub const PUNT_REASON_ARN: u8 = 1;
pub const PUNT_REASON_ARN_BAD: u8 = 2;

/// `packet_out.flags`: a queue probe (constants.p4), dropped after its port's ARN monitor.
pub const PACKET_OUT_PROBE: u8 = 1;

/// Largest limit for which the pipeline's Metric is exact (`QueueThresholds::metric_scale`).
pub const MAX_LIMIT_PACKETS: u32 = 0xffff;

/// One port of fare.p4's ARN monitor (`monitor` action): depths in packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueThresholds {
    /// Type 1 when the queue reaches this depth.
    pub high: u32,
    /// Type 2 when it is below this depth again.
    pub low: u32,
    /// The depth that maps to Metric 255 (1..=MAX_LIMIT_PACKETS).
    pub limit: u32,
    /// Type 1 repeated this often while the queue stays congested; also how often the
    /// controller probes the port so that a drained queue is seen without traffic.
    pub refresh: Duration,
}

impl QueueThresholds {
    /// `ceil(255 * 2^32 / limit)`: the pipeline computes the Metric as
    /// `(depth * scale) >> 32`, which equals `floor(255 * depth / limit)` (docs/CODEPOINTS.md)
    /// for every depth below a limit under 2^16 (the error `depth / 2^32` stays under the
    /// `1 / limit` gap to the next integer).
    pub fn metric_scale(&self) -> u64 {
        let limit = u64::from(self.limit.clamp(1, MAX_LIMIT_PACKETS));
        (255u64 << 32).div_ceil(limit)
    }
}

impl FareProgram {
    pub fn resolve(info: &P4Info) -> Result<FareProgram, P4rtError> {
        let route = |name: &str| -> Result<RouteTable, P4rtError> {
            let t = info.table(name)?;
            Ok(RouteTable {
                table: id_of(t),
                dst: field_of(p4info::match_field(t, "dst_addr")?),
            })
        };
        let set_group = info.action("routing.set_group")?;
        let wcmp_group = info.table("wcmp.wcmp_group")?;
        let set_nexthop = info.action("wcmp.set_nexthop")?;
        let arn_rx = info.table("arn_receive.arn_rx")?;
        let mark_slot = info.action("arn_receive.mark_slot")?;
        let arn_monitor = info.table("arn_monitor.arn_monitor")?;
        let local_action = info.action("arn_addressed.local")?;
        let monitor = info.action("arn_monitor.monitor")?;
        let arn_encap = info.table("arn_build.arn_encap")?;
        let encap_v4 = info.action("arn_build.encap_v4")?;
        let packet_in = info.controller_header("packet_in")?;
        let packet_out = info.controller_header("packet_out")?;
        let meta = |h, name| -> Result<Field, P4rtError> {
            let m = p4info::packet_metadata(h, name)?;
            Ok(Field {
                id: m.id,
                bits: m.bitwidth,
            })
        };
        Ok(FareProgram {
            route_v4: route("routing.route_v4")?,
            route_v6: route("routing.route_v6")?,
            set_group: SetGroup {
                action: id_of(set_group),
                group_id: param_of(set_group, "group_id")?,
                spray: param_of(set_group, "spray")?,
                flowlet_gap: param_of(set_group, "flowlet_gap_us").ok(),
            },
            wcmp_group: id_of(wcmp_group),
            wcmp_group_id: field_of(p4info::match_field(wcmp_group, "group_id")?),
            selector: id_of(info.action_profile("wcmp.wcmp_selector")?),
            selector_max_group_size: info.action_profile("wcmp.wcmp_selector")?.max_group_size,
            set_nexthop: SetNexthop {
                action: id_of(set_nexthop),
                port: param_of(set_nexthop, "port")?,
                dst_mac: param_of(set_nexthop, "dst_mac")?,
                src_mac: param_of(set_nexthop, "src_mac")?,
                arn_slot: param_of(set_nexthop, "arn_slot")?,
                member_index: param_of(set_nexthop, "member_index")?,
            },
            buckets: BucketTables::resolve(info).ok(),
            arn_rx: id_of(arn_rx),
            arn_rx_port: field_of(p4info::match_field(arn_rx, "ingress_port")?),
            arn_rx_path: field_of(p4info::match_field(arn_rx, "path_id")?),
            mark_slot: id_of(mark_slot),
            mark_slot_slot: param_of(mark_slot, "slot")?,
            mark_slot_hold: param_of(mark_slot, "hold_us")?,
            arn_local_v4: route("arn_addressed.arn_local_v4")?,
            arn_local_v6: route("arn_addressed.arn_local_v6")?,
            arn_local_action: id_of(local_action),
            arn_monitor: id_of(arn_monitor),
            arn_monitor_port: field_of(p4info::match_field(arn_monitor, "egress_port")?),
            monitor: id_of(monitor),
            monitor_params: [
                param_of(monitor, "high_threshold")?,
                param_of(monitor, "low_threshold")?,
                param_of(monitor, "limit_packets")?,
                param_of(monitor, "metric_scale")?,
                param_of(monitor, "refresh_us")?,
                param_of(monitor, "neighbor_router_id")?,
                param_of(monitor, "clone_session")?,
            ],
            arn_encap: id_of(arn_encap),
            arn_encap_port: field_of(p4info::match_field(arn_encap, "egress_port")?),
            encap_v4: id_of(encap_v4),
            encap_v4_params: [
                param_of(encap_v4, "dst_mac")?,
                param_of(encap_v4, "src_mac")?,
                param_of(encap_v4, "src_addr")?,
                param_of(encap_v4, "dst_addr")?,
            ],
            member_packets: id_of(info.counter("wcmp.member_packets")?),
            arn_tx_counter: id_of(info.counter("arn_monitor.arn_tx_counter")?),
            arn_rx_counter: id_of(info.counter("arn_receive.arn_rx_counter")?),
            spray_counter: id_of(info.register("wcmp.spray_counter")?),
            port_congested: id_of(info.register("arn_monitor.port_congested")?),
            packet_in_port: meta(packet_in, "ingress_port")?,
            packet_in_reason: meta(packet_in, "reason")?,
            packet_out_port: meta(packet_out, "egress_port")?,
            packet_out_flags: meta(packet_out, "flags")?,
            dpf: crate::dpf::DpfProgram::resolve(info)?,
        })
    }
}

/// fare.p4's `FLOW_BUCKETS` (p4/include/constants.p4), the same as the XDP data plane's.
pub const FLOW_BUCKETS: usize = fare_model::resilient::DEFAULT_BUCKETS;

impl BucketTables {
    fn resolve(info: &P4Info) -> Result<BucketTables, P4rtError> {
        let bucket = info.table("wcmp.wcmp_bucket")?;
        let member = info.table("wcmp.wcmp_member")?;
        let set = info.action("wcmp.set_bucket_member")?;
        Ok(BucketTables {
            bucket_table: id_of(bucket),
            group_id: key_of(bucket, "group_id")?,
            bucket: key_of(bucket, "bucket")?,
            set_bucket_member: id_of(set),
            bucket_member: param_of(set, "member_index")?,
            member_table: id_of(member),
            member_index: key_of(member, "member_index")?,
            buckets: FLOW_BUCKETS,
        })
    }

    /// Bucket entry (group, bucket) -> member index; without the action, a key.
    pub fn bucket_entry(
        &self,
        group_id: u16,
        bucket: usize,
        member: Option<u16>,
    ) -> Result<p4::TableEntry, P4rtError> {
        let action = match member {
            Some(m) => Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: self.set_bucket_member,
                    params: vec![param(self.bucket_member, u128::from(m), "member_index")?],
                })),
            }),
            None => None,
        };
        Ok(p4::TableEntry {
            table_id: self.bucket_table,
            r#match: vec![
                exact(self.group_id, u128::from(group_id), "group_id")?,
                exact(self.bucket, bucket as u128, "bucket")?,
            ],
            action,
            ..Default::default()
        })
    }

    /// Member entry: member index -> `set_nexthop` (`action`); without it, a key.
    pub fn member_entry(
        &self,
        member_index: u16,
        action: Option<p4::Action>,
    ) -> Result<p4::TableEntry, P4rtError> {
        Ok(p4::TableEntry {
            table_id: self.member_table,
            r#match: vec![exact(
                self.member_index,
                u128::from(member_index),
                "member_index",
            )?],
            action: action.map(|a| p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(a)),
            }),
            ..Default::default()
        })
    }
}

fn mac_value(mac: MacAddr) -> u128 {
    value_of(&mac.0)
}

impl FareProgram {
    /// Route entry: `prefix` -> WCMP group `group_id`, spray or per-flow.
    pub fn route(
        &self,
        prefix: IpNet,
        group_id: u16,
        spray: bool,
        flowlet_gap_us: u32,
    ) -> Result<p4::TableEntry, P4rtError> {
        let prefix = prefix.trunc();
        let (table, value) = match prefix.addr() {
            IpAddr::V4(a) => (&self.route_v4, u128::from(u32::from(a))),
            IpAddr::V6(a) => (&self.route_v6, u128::from(a)),
        };
        // P4Runtime: an LPM match of length 0 is expressed by omitting the field.
        let mut matches = Vec::new();
        if prefix.prefix_len() > 0 {
            matches.push(p4::FieldMatch {
                field_id: table.dst.id,
                field_match_type: Some(p4::field_match::FieldMatchType::Lpm(
                    p4::field_match::Lpm {
                        value: canonical(value, table.dst.bits, "route prefix")?,
                        prefix_len: i32::from(prefix.prefix_len()),
                    },
                )),
            });
        }
        Ok(p4::TableEntry {
            table_id: table.table,
            r#match: matches,
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: self.set_group.action,
                    params: self.set_group_params(group_id, spray, flowlet_gap_us)?,
                })),
            }),
            ..Default::default()
        })
    }

    fn set_group_params(
        &self,
        group_id: u16,
        spray: bool,
        flowlet_gap_us: u32,
    ) -> Result<Vec<p4::action::Param>, P4rtError> {
        let g = &self.set_group;
        let mut params = vec![
            param(g.group_id, u128::from(group_id), "group_id")?,
            param(g.spray, u128::from(spray), "spray")?,
        ];
        match g.flowlet_gap {
            Some(f) => params.push(param(f, u128::from(flowlet_gap_us), "flowlet_gap_us")?),
            None if flowlet_gap_us > 0 => {
                return Err(P4rtError::Invalid(
                    "flowlet mode: the P4 program's set_group has no flowlet_gap_us".into(),
                ))
            }
            None => {}
        }
        Ok(params)
    }

    /// Group table entry: WCMP group `group_id` -> action-profile group `profile_group`.
    pub fn group_entry(
        &self,
        group_id: u16,
        profile_group: u32,
    ) -> Result<p4::TableEntry, P4rtError> {
        Ok(p4::TableEntry {
            table_id: self.wcmp_group,
            r#match: vec![exact(self.wcmp_group_id, u128::from(group_id), "group_id")?],
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::ActionProfileGroupId(profile_group)),
            }),
            ..Default::default()
        })
    }

    /// Key-only group table entry (for DELETE and reads).
    pub fn group_key(&self, group_id: u16) -> Result<p4::TableEntry, P4rtError> {
        Ok(p4::TableEntry {
            table_id: self.wcmp_group,
            r#match: vec![exact(self.wcmp_group_id, u128::from(group_id), "group_id")?],
            ..Default::default()
        })
    }

    /// Profile group `id` of the selector as a key (to read or delete it); 0 reads every
    /// one.
    pub fn profile_group_key(&self, id: u32) -> p4::entity::Entity {
        p4::entity::Entity::ActionProfileGroup(p4::ActionProfileGroup {
            action_profile_id: self.selector,
            group_id: id,
            ..Default::default()
        })
    }

    /// Member `id` of the selector as a key (to read or delete it); 0 reads every one.
    pub fn member_key(&self, id: u32) -> p4::entity::Entity {
        p4::entity::Entity::ActionProfileMember(p4::ActionProfileMember {
            action_profile_id: self.selector,
            member_id: id,
            action: None,
        })
    }

    /// `set_nexthop` of one next hop (an action-profile member's or a wcmp_member entry's).
    pub fn nexthop(
        &self,
        port: u32,
        dst_mac: MacAddr,
        src_mac: MacAddr,
        arn_slot: u16,
        member_index: u16,
    ) -> Result<p4::Action, P4rtError> {
        let a = &self.set_nexthop;
        Ok(p4::Action {
            action_id: a.action,
            params: vec![
                param(a.port, u128::from(port), "port")?,
                param(a.dst_mac, mac_value(dst_mac), "dst_mac")?,
                param(a.src_mac, mac_value(src_mac), "src_mac")?,
                param(a.arn_slot, u128::from(arn_slot), "arn_slot")?,
                param(a.member_index, u128::from(member_index), "member_index")?,
            ],
        })
    }

    /// Action-profile member: one next hop.
    pub fn member(
        &self,
        member_id: u32,
        port: u32,
        dst_mac: MacAddr,
        src_mac: MacAddr,
        arn_slot: u16,
        member_index: u16,
    ) -> Result<p4::ActionProfileMember, P4rtError> {
        Ok(p4::ActionProfileMember {
            action_profile_id: self.selector,
            member_id,
            action: Some(self.nexthop(port, dst_mac, src_mac, arn_slot, member_index)?),
        })
    }

    /// Action-profile group with weighted members. `max_size` is the sum of weights when
    /// the P4Info states a `max_group_size` (the target then sizes the group by it), else 0:
    /// "the largest the target supports", so a target whose limit the P4Info does not state
    /// answers a group beyond it with RESOURCE_EXHAUSTED (P4Runtime spec, ActionProfileGroup),
    /// which the backend acts on, rather than refusing `max_size` itself.
    pub fn profile_group(
        &self,
        group_id: u32,
        members: &[GroupMember],
        port_bits: i32,
    ) -> Result<p4::ActionProfileGroup, P4rtError> {
        let mut out = Vec::with_capacity(members.len());
        let mut max_size: i32 = 0;
        for m in members {
            if m.weight <= 0 {
                return Err(P4rtError::Invalid(format!(
                    "member {} has weight {} (must be positive)",
                    m.member_id, m.weight
                )));
            }
            max_size = max_size.saturating_add(m.weight);
            let watch = match m.watch_port {
                Some(p) => Some(p4::action_profile_group::member::WatchKind::WatchPort(
                    canonical(u128::from(p), port_bits, "watch_port")?,
                )),
                None => None,
            };
            out.push(p4::action_profile_group::Member {
                member_id: m.member_id,
                weight: m.weight,
                watch_kind: watch,
            });
        }
        Ok(p4::ActionProfileGroup {
            action_profile_id: self.selector,
            group_id,
            members: out,
            max_size: if self.selector_max_group_size > 0 {
                max_size
            } else {
                0
            },
        })
    }

    /// ARN reception: (arrival port, Path ID) -> removal slot, removed for `hold_us`
    /// microseconds unless revoked earlier.
    pub fn arn_rx_entry(
        &self,
        port: u32,
        path_id: Ipv4Addr,
        slot: u16,
        hold_us: u64,
    ) -> Result<p4::TableEntry, P4rtError> {
        Ok(p4::TableEntry {
            table_id: self.arn_rx,
            r#match: vec![
                exact(self.arn_rx_port, u128::from(port), "ingress_port")?,
                exact(self.arn_rx_path, u128::from(u32::from(path_id)), "path_id")?,
            ],
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: self.mark_slot,
                    params: vec![
                        param(self.mark_slot_slot, u128::from(slot), "slot")?,
                        param(self.mark_slot_hold, u128::from(hold_us), "hold_us")?,
                    ],
                })),
            }),
            ..Default::default()
        })
    }

    /// ARN generation: monitor `port`'s queue at `thresholds`; the neighbor there has
    /// router ID `neighbor` (the Path ID); notify through clone `session`.
    pub fn arn_monitor_entry(
        &self,
        port: u32,
        thresholds: &QueueThresholds,
        neighbor: Ipv4Addr,
        session: u32,
    ) -> Result<p4::TableEntry, P4rtError> {
        let [h, l, lim, sc, r, n, s] = self.monitor_params;
        let refresh_us = u64::try_from(thresholds.refresh.as_micros()).unwrap_or(u64::MAX);
        Ok(p4::TableEntry {
            table_id: self.arn_monitor,
            r#match: vec![exact(
                self.arn_monitor_port,
                u128::from(port),
                "egress_port",
            )?],
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: self.monitor,
                    params: vec![
                        param(h, u128::from(thresholds.high), "high_threshold")?,
                        param(l, u128::from(thresholds.low), "low_threshold")?,
                        param(
                            lim,
                            u128::from(thresholds.limit.clamp(1, MAX_LIMIT_PACKETS)),
                            "limit_packets",
                        )?,
                        param(sc, u128::from(thresholds.metric_scale()), "metric_scale")?,
                        param(r, u128::from(refresh_us.max(1)), "refresh_us")?,
                        param(n, u128::from(u32::from(neighbor)), "neighbor_router_id")?,
                        param(s, u128::from(session), "clone_session")?,
                    ],
                })),
            }),
            ..Default::default()
        })
    }

    /// One of the switch's own addresses: ARNs sent there are received, not forwarded.
    pub fn arn_local_entry(&self, address: IpAddr) -> Result<p4::TableEntry, P4rtError> {
        let (table, value) = match address {
            IpAddr::V4(a) => (&self.arn_local_v4, u128::from(u32::from(a))),
            IpAddr::V6(a) => (&self.arn_local_v6, u128::from(a)),
        };
        Ok(p4::TableEntry {
            table_id: table.table,
            r#match: vec![exact(table.dst, value, "dst_addr")?],
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: self.arn_local_action,
                    params: vec![],
                })),
            }),
            ..Default::default()
        })
    }

    /// Addresses of ARNs sent out of `port`.
    pub fn arn_encap_entry(
        &self,
        port: u32,
        dst_mac: MacAddr,
        src_mac: MacAddr,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<p4::TableEntry, P4rtError> {
        let [dm, sm, sa, da] = self.encap_v4_params;
        Ok(p4::TableEntry {
            table_id: self.arn_encap,
            r#match: vec![exact(self.arn_encap_port, u128::from(port), "egress_port")?],
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: self.encap_v4,
                    params: vec![
                        param(dm, mac_value(dst_mac), "dst_mac")?,
                        param(sm, mac_value(src_mac), "src_mac")?,
                        param(sa, u128::from(u32::from(src)), "src_addr")?,
                        param(da, u128::from(u32::from(dst)), "dst_addr")?,
                    ],
                })),
            }),
            ..Default::default()
        })
    }

    /// Clone session whose replicas are the ports ARNs are sent to. Uses the numeric
    /// `egress_port` (P4Runtime 1.3, what BMv2's server speaks) rather than 1.4's bytes.
    #[allow(deprecated)]
    pub fn clone_session(&self, session: u32, ports: &[u32]) -> p4::Entity {
        p4::Entity {
            entity: Some(p4::entity::Entity::PacketReplicationEngineEntry(
                p4::PacketReplicationEngineEntry {
                    r#type: Some(
                        p4::packet_replication_engine_entry::Type::CloneSessionEntry(
                            p4::CloneSessionEntry {
                                session_id: session,
                                replicas: ports
                                    .iter()
                                    .map(|p| p4::Replica {
                                        port_kind: Some(p4::replica::PortKind::EgressPort(*p)),
                                        instance: 1,
                                    })
                                    .collect(),
                                class_of_service: 0,
                                packet_length_bytes: 0,
                            },
                        ),
                    ),
                },
            )),
        }
    }

    /// A register cell (index Some) or the whole register (None, for reads).
    pub fn register_entry(
        &self,
        register: u32,
        index: Option<i64>,
        value: Option<Vec<u8>>,
    ) -> p4::Entity {
        p4::Entity {
            entity: Some(p4::entity::Entity::RegisterEntry(p4::RegisterEntry {
                register_id: register,
                index: index.map(|index| p4::Index { index }),
                data: value.map(|v| p4::P4Data {
                    data: Some(p4::p4_data::Data::Bitstring(v)),
                }),
            })),
        }
    }

    /// A counter cell (index Some) or every cell (None), for reads.
    pub fn counter_entry(&self, counter: u32, index: Option<i64>) -> p4::Entity {
        p4::Entity {
            entity: Some(p4::entity::Entity::CounterEntry(p4::CounterEntry {
                counter_id: counter,
                index: index.map(|index| p4::Index { index }),
                data: None,
            })),
        }
    }

    /// PacketOut metadata sending the payload out of `port`; a `probe` only passes the
    /// port's ARN monitor and is dropped before the wire.
    pub fn packet_out_metadata(
        &self,
        port: u32,
        probe: bool,
    ) -> Result<Vec<(u32, Vec<u8>)>, P4rtError> {
        let flags = if probe { PACKET_OUT_PROBE } else { 0 };
        Ok(vec![
            (
                self.packet_out_port.id,
                canonical(u128::from(port), self.packet_out_port.bits, "egress_port")?,
            ),
            (self.packet_out_flags.id, vec![flags]),
        ])
    }

    /// (ingress port, reason) of a packet-in; None when the metadata is missing.
    pub fn packet_in_meta(&self, metadata: &[(u32, Vec<u8>)]) -> Option<(u32, u8)> {
        let get = |f: Field| {
            metadata
                .iter()
                .find(|(id, _)| *id == f.id)
                .map(|(_, v)| value_of(v))
        };
        let port = u32::try_from(get(self.packet_in_port)?).ok()?;
        let reason = u8::try_from(get(self.packet_in_reason)?).ok()?;
        Some((port, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_strips_leading_zeros_and_checks_width() {
        assert_eq!(canonical(0, 9, "p").unwrap(), vec![0]);
        assert_eq!(canonical(1, 9, "p").unwrap(), vec![1]);
        assert_eq!(canonical(511, 9, "p").unwrap(), vec![1, 0xff]);
        assert!(canonical(512, 9, "p").is_err());
        assert_eq!(canonical(0x0a000000, 32, "a").unwrap(), vec![10, 0, 0, 0]);
        assert_eq!(value_of(&[0, 0, 1, 2]), 0x102);
        assert_eq!(value_of(&[]), 0);
    }
}

/// Request builders checked field by field against a P4Info. The fixture below is written
/// for these tests in the shape p4c gives fare.p4 (qualified names, aliases, widths); ids
/// are arbitrary on purpose, so a builder that hard-coded an id would fail. The committed
/// p4c output, when present, must resolve too (`committed_p4info_resolves`).
#[cfg(test)]
mod builder_tests {
    use super::*;
    use p4::field_match::FieldMatchType;

    const FIXTURE: &str = r#"
pkg_info { arch: "v1model" }
tables {
  preamble { id: 40001 name: "FareIngress.routing.route_v4" alias: "route_v4" }
  match_fields { id: 1 name: "dst_addr" bitwidth: 32 match_type: LPM }
  action_refs { id: 50001 }
  size: 4096
}
tables {
  preamble { id: 40002 name: "FareIngress.routing.route_v6" alias: "route_v6" }
  match_fields { id: 1 name: "dst_addr" bitwidth: 128 match_type: LPM }
  action_refs { id: 50001 }
}
tables {
  preamble { id: 40003 name: "FareIngress.wcmp.wcmp_group" alias: "wcmp_group" }
  match_fields { id: 1 name: "group_id" bitwidth: 16 match_type: EXACT }
  action_refs { id: 50002 }
  implementation_id: 60001
}
tables {
  preamble { id: 40004 name: "FareIngress.arn_receive.arn_rx" alias: "arn_rx" }
  match_fields { id: 1 name: "ingress_port" bitwidth: 9 match_type: EXACT }
  match_fields { id: 2 name: "path_id" bitwidth: 32 match_type: EXACT }
  action_refs { id: 50003 }
}
tables {
  preamble { id: 40005 name: "FareEgress.arn_monitor.arn_monitor" alias: "arn_monitor" }
  match_fields { id: 1 name: "egress_port" bitwidth: 9 match_type: EXACT }
  action_refs { id: 50004 }
}
tables {
  preamble { id: 40006 name: "FareEgress.arn_build.arn_encap" alias: "arn_encap" }
  match_fields { id: 1 name: "egress_port" bitwidth: 9 match_type: EXACT }
  action_refs { id: 50005 }
}
tables {
  preamble { id: 40010 name: "FareIngress.arn_addressed.arn_local_v4" alias: "arn_local_v4" }
  match_fields { id: 1 name: "dst_addr" bitwidth: 32 match_type: EXACT }
  action_refs { id: 50009 }
}
tables {
  preamble { id: 40011 name: "FareIngress.arn_addressed.arn_local_v6" alias: "arn_local_v6" }
  match_fields { id: 1 name: "dst_addr" bitwidth: 128 match_type: EXACT }
  action_refs { id: 50009 }
}
tables {
  preamble { id: 40007 name: "FareIngress.dpf.flow_color" alias: "flow_color" }
  match_fields { id: 1 name: "ip_version" bitwidth: 4 match_type: TERNARY }
  match_fields { id: 2 name: "dscp" bitwidth: 6 match_type: TERNARY }
  match_fields { id: 3 name: "protocol" bitwidth: 8 match_type: TERNARY }
  match_fields { id: 4 name: "src_addr" bitwidth: 128 match_type: TERNARY }
  match_fields { id: 5 name: "dst_addr" bitwidth: 128 match_type: TERNARY }
  match_fields { id: 6 name: "l4_valid" bitwidth: 1 match_type: TERNARY }
  match_fields { id: 7 name: "src_port" bitwidth: 16 match_type: RANGE }
  match_fields { id: 8 name: "dst_port" bitwidth: 16 match_type: RANGE }
  match_fields { id: 9 name: "qp_valid" bitwidth: 1 match_type: TERNARY }
  match_fields { id: 10 name: "dest_qp" bitwidth: 24 match_type: RANGE }
  action_refs { id: 50006 }
}
tables {
  preamble { id: 40008 name: "FareIngress.dpf.color_group" alias: "color_group" }
  match_fields { id: 1 name: "group_id" bitwidth: 16 match_type: EXACT }
  match_fields { id: 2 name: "color" bitwidth: 32 match_type: EXACT }
  action_refs { id: 50007 }
}
tables {
  preamble { id: 40009 name: "FareIngress.dpf.group_fallback" alias: "group_fallback" }
  match_fields { id: 1 name: "group_id" bitwidth: 16 match_type: EXACT }
  action_refs { id: 50008 }
}
actions {
  preamble { id: 50009 name: "FareIngress.arn_addressed.local" alias: "local" }
}
actions {
  preamble { id: 50006 name: "FareIngress.dpf.set_color" alias: "set_color" }
  params { id: 1 name: "color" bitwidth: 32 }
}
actions {
  preamble { id: 50007 name: "FareIngress.dpf.use_group" alias: "use_group" }
  params { id: 1 name: "group_id" bitwidth: 16 }
}
actions {
  preamble { id: 50008 name: "FareIngress.dpf.set_fallback" alias: "set_fallback" }
  params { id: 1 name: "group_id" bitwidth: 16 }
}
actions {
  preamble { id: 50001 name: "FareIngress.routing.set_group" alias: "set_group" }
  params { id: 1 name: "group_id" bitwidth: 16 }
  params { id: 2 name: "spray" bitwidth: 1 }
  params { id: 3 name: "flowlet_gap_us" bitwidth: 32 }
}
actions {
  preamble { id: 50002 name: "FareIngress.wcmp.set_nexthop" alias: "set_nexthop" }
  params { id: 1 name: "port" bitwidth: 9 }
  params { id: 2 name: "dst_mac" bitwidth: 48 }
  params { id: 3 name: "src_mac" bitwidth: 48 }
  params { id: 4 name: "arn_slot" bitwidth: 16 }
  params { id: 5 name: "member_index" bitwidth: 16 }
}
actions {
  preamble { id: 50003 name: "FareIngress.arn_receive.mark_slot" alias: "mark_slot" }
  params { id: 1 name: "slot" bitwidth: 16 }
  params { id: 2 name: "hold_us" bitwidth: 48 }
}
actions {
  preamble { id: 50004 name: "FareEgress.arn_monitor.monitor" alias: "monitor" }
  params { id: 1 name: "high_threshold" bitwidth: 19 }
  params { id: 2 name: "low_threshold" bitwidth: 19 }
  params { id: 3 name: "limit_packets" bitwidth: 19 }
  params { id: 4 name: "metric_scale" bitwidth: 40 }
  params { id: 5 name: "refresh_us" bitwidth: 48 }
  params { id: 6 name: "neighbor_router_id" bitwidth: 32 }
  params { id: 7 name: "clone_session" bitwidth: 32 }
}
actions {
  preamble { id: 50005 name: "FareEgress.arn_build.encap_v4" alias: "encap_v4" }
  params { id: 1 name: "dst_mac" bitwidth: 48 }
  params { id: 2 name: "src_mac" bitwidth: 48 }
  params { id: 3 name: "src_addr" bitwidth: 32 }
  params { id: 4 name: "dst_addr" bitwidth: 32 }
}
action_profiles {
  preamble { id: 60001 name: "FareIngress.wcmp.wcmp_selector" alias: "wcmp_selector" }
  table_ids: 40003
  with_selector: true
  size: 16384
}
counters {
  preamble { id: 70001 name: "FareIngress.wcmp.member_packets" alias: "member_packets" }
  spec { unit: BOTH }
  size: 16384
}
counters {
  preamble { id: 70002 name: "FareEgress.arn_monitor.arn_tx_counter" alias: "arn_tx_counter" }
  spec { unit: PACKETS }
  size: 512
}
counters {
  preamble { id: 70003 name: "FareIngress.arn_receive.arn_rx_counter" alias: "arn_rx_counter" }
  spec { unit: PACKETS }
  size: 4
}
controller_packet_metadata {
  preamble { id: 80001 name: "packet_in" alias: "packet_in" annotations: "@controller_header(\"packet_in\")" }
  metadata { id: 1 name: "ingress_port" bitwidth: 16 }
  metadata { id: 2 name: "reason" bitwidth: 8 }
  metadata { id: 3 name: "pad" bitwidth: 8 }
}
controller_packet_metadata {
  preamble { id: 80002 name: "packet_out" alias: "packet_out" }
  metadata { id: 1 name: "egress_port" bitwidth: 16 }
  metadata { id: 2 name: "flags" bitwidth: 16 }
}
registers {
  preamble { id: 90001 name: "arn_removed" alias: "arn_removed" }
  type_spec { bitstring { bit { bitwidth: 1 } } }
  size: 4096
}
registers {
  preamble { id: 90002 name: "arn_removed_until" alias: "arn_removed_until" }
  type_spec { bitstring { bit { bitwidth: 48 } } }
  size: 4096
}
registers {
  preamble { id: 90003 name: "FareIngress.wcmp.spray_counter" alias: "spray_counter" }
  type_spec { bitstring { bit { bitwidth: 32 } } }
  size: 1024
}
registers {
  preamble { id: 90004 name: "FareEgress.arn_monitor.port_congested" alias: "port_congested" }
  type_spec { bitstring { bit { bitwidth: 1 } } }
  size: 512
}
registers {
  preamble { id: 90005 name: "FareEgress.arn_monitor.port_last_arn" alias: "port_last_arn" }
  type_spec { bitstring { bit { bitwidth: 48 } } }
  size: 512
}
"#;

    fn prog() -> FareProgram {
        FareProgram::resolve(&P4Info::from_text(FIXTURE).expect("fixture parses"))
            .expect("fixture resolves")
    }

    fn action(e: &p4::TableEntry) -> &p4::Action {
        match e.action.as_ref().and_then(|a| a.r#type.as_ref()) {
            Some(p4::table_action::Type::Action(a)) => a,
            other => panic!("not a direct action: {other:?}"),
        }
    }

    fn params(a: &p4::Action) -> Vec<(u32, Vec<u8>)> {
        a.params
            .iter()
            .map(|p| (p.param_id, p.value.clone()))
            .collect()
    }

    fn ternary_of(e: &p4::TableEntry, id: u32) -> Option<(Vec<u8>, Vec<u8>)> {
        e.r#match
            .iter()
            .find(|m| m.field_id == id)
            .and_then(|m| match &m.field_match_type {
                Some(FieldMatchType::Ternary(t)) => Some((t.value.clone(), t.mask.clone())),
                _ => None,
            })
    }

    fn range_of(e: &p4::TableEntry, id: u32) -> Option<(Vec<u8>, Vec<u8>)> {
        e.r#match
            .iter()
            .find(|m| m.field_id == id)
            .and_then(|m| match &m.field_match_type {
                Some(FieldMatchType::Range(r)) => Some((r.low.clone(), r.high.clone())),
                _ => None,
            })
    }

    #[test]
    fn dpf_flow_rules_become_prioritized_entries() {
        let rules: Vec<fare_dataplane::FlowRule> = serde_norway::from_str(
            "- {color: 7, dscp: [26, 10], protocol: udp, src: 10.1.0.0/16, dst_port: 4791, qp: 0x100-0x1ff}\n\
             - {color: 9, dst: '2001:db8::/33', src_port: 0-65535}\n",
        )
        .unwrap();
        let p = prog();
        let d = &p.dpf;
        let e = d.flow_entries(&rules).unwrap();
        // Two DSCP values: two entries of the first rule's priority, then the second rule.
        assert_eq!(e.len(), 3);
        assert_eq!(
            e.iter().map(|x| x.priority).collect::<Vec<_>>(),
            vec![2, 2, 1]
        );
        assert!(e.iter().all(|x| x.table_id == 40007));
        let first = &e[0];
        assert_eq!(ternary_of(first, 2), Some((vec![10], vec![0x3f])));
        assert_eq!(ternary_of(&e[1], 2), Some((vec![26], vec![0x3f])));
        assert_eq!(ternary_of(first, 1), Some((vec![4], vec![0xf])));
        assert_eq!(ternary_of(first, 3), Some((vec![17], vec![0xff])));
        assert_eq!(
            ternary_of(first, 4),
            Some((vec![10, 1, 0, 0], vec![255, 255, 0, 0]))
        );
        assert_eq!(ternary_of(first, 6), Some((vec![1], vec![1])));
        assert_eq!(
            range_of(first, 8),
            Some((vec![0x12, 0xb7], vec![0x12, 0xb7]))
        );
        assert_eq!(ternary_of(first, 9), Some((vec![1], vec![1])));
        assert_eq!(range_of(first, 10), Some((vec![1, 0], vec![1, 0xff])));
        assert_eq!(range_of(first, 7), None, "no src_port rule, no key");
        let a = action(first);
        assert_eq!((a.action_id, params(a)), (50006, vec![(1, vec![7])]));
        // IPv6 /33 and a full port range (a don't-care is omitted).
        let v6 = &e[2];
        assert_eq!(ternary_of(v6, 1), Some((vec![6], vec![0xf])));
        let (value, mask) = ternary_of(v6, 5).unwrap();
        assert_eq!(&value[..5], &[0x20, 0x01, 0x0d, 0xb8, 0]);
        assert_eq!(&mask[..5], &[0xff, 0xff, 0xff, 0xff, 0x80]);
        assert_eq!(range_of(v6, 7), None);
        assert_eq!(ternary_of(v6, 6), Some((vec![1], vec![1])));
        // A bad rule is refused before anything is written.
        let bad: fare_dataplane::FlowRule = serde_norway::from_str("{color: 0}").unwrap();
        assert!(d.flow_entries(&[bad]).is_err());
    }

    #[test]
    fn dpf_color_and_fallback_entries() {
        let p = prog();
        let d = &p.dpf;
        let e = d.color_entry(3, 0x1_0000, Some(9)).unwrap();
        assert_eq!(e.table_id, 40008);
        let keys: Vec<(u32, Vec<u8>)> = e
            .r#match
            .iter()
            .map(|m| match &m.field_match_type {
                Some(FieldMatchType::Exact(x)) => (m.field_id, x.value.clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(keys, vec![(1, vec![3]), (2, vec![1, 0, 0])]);
        assert_eq!(params(action(&e)), vec![(1, vec![9])]);
        assert_eq!(action(&e).action_id, 50007);
        assert!(d.color_entry(3, 1, None).unwrap().action.is_none());
        let f = d.fallback_entry(4, Some(5)).unwrap();
        assert_eq!(f.table_id, 40009);
        assert_eq!(action(&f).action_id, 50008);
        assert_eq!(params(action(&f)), vec![(1, vec![5])]);
    }

    #[test]
    fn route_v4_entry() {
        let e = prog()
            .route("198.18.7.9/16".parse().unwrap(), 7, true, 0)
            .unwrap();
        assert_eq!(e.table_id, 40001);
        assert_eq!(e.r#match.len(), 1);
        assert_eq!(e.r#match[0].field_id, 1);
        match &e.r#match[0].field_match_type {
            // Host bits are cleared; canonical bytes.
            Some(FieldMatchType::Lpm(l)) => {
                assert_eq!(l.value, vec![198, 18, 0, 0]);
                assert_eq!(l.prefix_len, 16);
            }
            other => panic!("{other:?}"),
        }
        let a = action(&e);
        assert_eq!(a.action_id, 50001);
        assert_eq!(params(a), vec![(1, vec![7]), (2, vec![1]), (3, vec![0])]);
        assert_eq!(e.priority, 0);
        assert!(!e.is_default_action);
    }

    #[test]
    fn route_v6_and_default_route() {
        let p = prog();
        let e = p
            .route("2001:db8::/32".parse().unwrap(), 300, false, 250)
            .unwrap();
        assert_eq!(e.table_id, 40002);
        match &e.r#match[0].field_match_type {
            Some(FieldMatchType::Lpm(l)) => {
                let mut v = vec![0x20, 0x01, 0x0d, 0xb8];
                v.extend([0u8; 12]);
                assert_eq!(l.value, v);
                assert_eq!(l.prefix_len, 32);
            }
            other => panic!("{other:?}"),
        }
        // Flowlet mode: the gap in microseconds, canonical bytes.
        assert_eq!(
            params(action(&e)),
            vec![(1, vec![1, 44]), (2, vec![0]), (3, vec![250])]
        );
        // /0: the LPM field is omitted (P4Runtime's wildcard).
        let d = p.route("0.0.0.0/0".parse().unwrap(), 1, true, 0).unwrap();
        assert!(d.r#match.is_empty());
    }

    #[test]
    fn group_entry_points_at_profile_group() {
        let e = prog().group_entry(5, 123_456).unwrap();
        assert_eq!(e.table_id, 40003);
        assert_eq!(
            e.r#match.len(),
            1,
            "selector fields are not matched by P4Runtime"
        );
        match &e.r#match[0].field_match_type {
            Some(FieldMatchType::Exact(x)) => assert_eq!(x.value, vec![5]),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            e.action.unwrap().r#type,
            Some(p4::table_action::Type::ActionProfileGroupId(123_456))
        );
    }

    #[test]
    fn member_and_weighted_group() {
        let p = prog();
        let m = p
            .member(
                9,
                3,
                MacAddr([2, 0, 0, 0, 0, 1]),
                MacAddr([2, 0xfa, 0, 0, 0, 0xfe]),
                4,
                11,
            )
            .unwrap();
        assert_eq!(m.action_profile_id, 60001);
        assert_eq!(m.member_id, 9);
        let a = m.action.unwrap();
        assert_eq!(a.action_id, 50002);
        assert_eq!(
            params(&a),
            vec![
                (1, vec![3]),
                (2, vec![2, 0, 0, 0, 0, 1]),
                (3, vec![2, 0xfa, 0, 0, 0, 0xfe]),
                (4, vec![4]),
                (5, vec![11]),
            ]
        );
        let members = [
            GroupMember {
                member_id: 1,
                weight: 3,
                watch_port: None,
            },
            GroupMember {
                member_id: 2,
                weight: 3,
                watch_port: Some(2),
            },
            GroupMember {
                member_id: 3,
                weight: 4,
                watch_port: Some(3),
            },
            GroupMember {
                member_id: 4,
                weight: 4,
                watch_port: Some(4),
            },
        ];
        let g = p.profile_group(77, &members, 9).unwrap();
        assert_eq!(g.action_profile_id, 60001);
        assert_eq!(g.group_id, 77);
        assert_eq!(g.max_size, 0, "no max_group_size in the P4Info: max_size 0");
        let mut sized = p.clone();
        sized.selector_max_group_size = 256;
        let g2 = sized.profile_group(77, &members, 9).unwrap();
        assert_eq!(
            g2.max_size, 14,
            "stated max_group_size: max_size = sum of weights"
        );
        let got: Vec<(u32, i32)> = g.members.iter().map(|m| (m.member_id, m.weight)).collect();
        assert_eq!(got, vec![(1, 3), (2, 3), (3, 4), (4, 4)]);
        assert_eq!(g.members[0].watch_kind, None);
        assert_eq!(
            g.members[1].watch_kind,
            Some(p4::action_profile_group::member::WatchKind::WatchPort(
                vec![2]
            ))
        );
        let zero = [GroupMember {
            member_id: 1,
            weight: 0,
            watch_port: None,
        }];
        assert!(p.profile_group(1, &zero, 9).is_err(), "weight 0 is refused");
    }

    #[test]
    fn arn_entries() {
        let p = prog();
        let rx = p
            .arn_rx_entry(1, Ipv4Addr::new(10, 0, 0, 42), 3, 1_000_000)
            .unwrap();
        assert_eq!(rx.table_id, 40004);
        let keys: Vec<(u32, Vec<u8>)> = rx
            .r#match
            .iter()
            .map(|m| match &m.field_match_type {
                Some(FieldMatchType::Exact(x)) => (m.field_id, x.value.clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(keys, vec![(1, vec![1]), (2, vec![10, 0, 0, 42])]);
        assert_eq!(action(&rx).action_id, 50003);
        assert_eq!(
            params(action(&rx)),
            vec![(1, vec![3]), (2, vec![0x0f, 0x42, 0x40])]
        );

        let t = QueueThresholds {
            high: 20,
            low: 5,
            limit: 40,
            refresh: Duration::from_millis(250),
        };
        let mon = p
            .arn_monitor_entry(2, &t, Ipv4Addr::new(10, 0, 0, 2), 3)
            .unwrap();
        assert_eq!(mon.table_id, 40005);
        assert_eq!(action(&mon).action_id, 50004);
        assert_eq!(
            params(action(&mon)),
            vec![
                (1, vec![20]),
                (2, vec![5]),
                (3, vec![40]),
                // 255 * 2^32 / 40 = 27,380,416,512 = 0x6_6000_0000 (exact).
                (4, vec![6, 0x60, 0, 0, 0]),
                // 250 ms = 250,000 us = 0x03d090.
                (5, vec![3, 0xd0, 0x90]),
                (6, vec![10, 0, 0, 2]),
                (7, vec![3])
            ]
        );
        let too_high = QueueThresholds { high: 1 << 19, ..t };
        assert!(p
            .arn_monitor_entry(2, &too_high, Ipv4Addr::LOCALHOST, 3)
            .is_err());

        let v4 = p.arn_local_entry("10.1.1.1".parse().unwrap()).unwrap();
        assert_eq!(v4.table_id, 40010);
        assert_eq!(action(&v4).action_id, 50009);
        let keys: Vec<_> = v4
            .r#match
            .iter()
            .map(|m| match &m.field_match_type {
                Some(FieldMatchType::Exact(e)) => (m.field_id, e.value.clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(keys, vec![(1, vec![10, 1, 1, 1])]);
        let v6 = p.arn_local_entry("2001:db8::1".parse().unwrap()).unwrap();
        assert_eq!(v6.table_id, 40011);

        let enc = p
            .arn_encap_entry(
                0,
                MacAddr([2, 0, 0, 0, 0, 0xaa]),
                MacAddr([2, 0xfa, 0, 0, 0, 0xfe]),
                Ipv4Addr::new(10, 0, 0, 254),
                Ipv4Addr::new(10, 0, 0, 1),
            )
            .unwrap();
        assert_eq!(enc.table_id, 40006);
        assert_eq!(action(&enc).action_id, 50005);
        assert_eq!(
            params(action(&enc)),
            vec![
                (1, vec![2, 0, 0, 0, 0, 0xaa]),
                (2, vec![2, 0xfa, 0, 0, 0, 0xfe]),
                (3, vec![10, 0, 0, 254]),
                (4, vec![10, 0, 0, 1]),
            ]
        );
    }

    #[test]
    #[allow(deprecated)]
    fn clone_session_registers_counters_packet_io() {
        let p = prog();
        match p.clone_session(3, &[0, 4]).entity {
            Some(p4::entity::Entity::PacketReplicationEngineEntry(e)) => match e.r#type {
                Some(p4::packet_replication_engine_entry::Type::CloneSessionEntry(c)) => {
                    assert_eq!(c.session_id, 3);
                    let ports: Vec<_> = c.replicas.iter().map(|r| r.port_kind.clone()).collect();
                    assert_eq!(
                        ports,
                        vec![
                            Some(p4::replica::PortKind::EgressPort(0)),
                            Some(p4::replica::PortKind::EgressPort(4))
                        ]
                    );
                    assert!(c.replicas.iter().all(|r| r.instance == 1));
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
        match p
            .register_entry(p.spray_counter, Some(7), Some(vec![1]))
            .entity
        {
            Some(p4::entity::Entity::RegisterEntry(r)) => {
                assert_eq!(r.register_id, 90003);
                assert_eq!(r.index, Some(p4::Index { index: 7 }));
                assert_eq!(
                    r.data.and_then(|d| d.data),
                    Some(p4::p4_data::Data::Bitstring(vec![1]))
                );
            }
            other => panic!("{other:?}"),
        }
        match p.counter_entry(p.member_packets, None).entity {
            Some(p4::entity::Entity::CounterEntry(c)) => {
                assert_eq!(c.counter_id, 70001);
                assert_eq!(c.index, None, "no index = every cell");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            p.packet_out_metadata(3, false).unwrap(),
            vec![(1, vec![3]), (2, vec![0])]
        );
        assert_eq!(
            p.packet_out_metadata(3, true).unwrap(),
            vec![(1, vec![3]), (2, vec![PACKET_OUT_PROBE])]
        );
        assert_eq!(
            p.packet_in_meta(&[(1, vec![0, 7]), (2, vec![1])]),
            Some((7, 1))
        );
        assert_eq!(p.packet_in_meta(&[(2, vec![1])]), None);
    }

    /// The pipeline's Metric, `(depth * scale) >> 32` clamped to 1..=255 (255 from the
    /// limit on), against docs/CODEPOINTS.md's `clamp(floor(255 * depth / limit), 1, 255)`
    /// computed with integer division: every depth of every limit up to 1,500, and the
    /// depths next to each multiple's boundary for limits up to the largest allowed.
    #[test]
    fn metric_scale_gives_the_documented_metric_exactly() {
        let pipeline = |depth: u64, t: &QueueThresholds| -> u64 {
            if depth >= u64::from(t.limit) {
                255
            } else {
                ((depth * t.metric_scale()) >> 32).max(1)
            }
        };
        let documented = |depth: u64, limit: u64| (255 * depth / limit).clamp(1, 255);
        let at = |limit: u32| QueueThresholds {
            high: 1,
            low: 0,
            limit,
            refresh: Duration::from_millis(1),
        };
        for limit in 1..=1500u32 {
            let t = at(limit);
            for depth in 0..=u64::from(limit) + 2 {
                assert_eq!(
                    pipeline(depth, &t),
                    documented(depth, limit.into()),
                    "depth {depth} limit {limit}"
                );
            }
        }
        for limit in [4_093u32, 40_000, 65_521, MAX_LIMIT_PACKETS] {
            let t = at(limit);
            for m in 1..255u64 {
                // The first depth of Metric m and the one before it.
                let first = (m * u64::from(limit)).div_ceil(255);
                for depth in [first - 1, first, first + 1] {
                    assert_eq!(
                        pipeline(depth, &t),
                        documented(depth, limit.into()),
                        "depth {depth} limit {limit}"
                    );
                }
            }
        }
        // The product fits the pipeline's 64 bits: depth < 2^16, scale < 2^40.
        assert!(at(1).metric_scale() < 1 << 40);
    }

    #[test]
    fn renamed_object_fails_at_resolve_with_its_name() {
        let broken = FIXTURE.replace("wcmp.set_nexthop", "wcmp.set_next_hop");
        let e = FareProgram::resolve(&P4Info::from_text(&broken).unwrap()).unwrap_err();
        assert!(e.to_string().contains("wcmp.set_nexthop"), "{e}");
    }

    /// The P4Info p4c wrote for fare.p4 (committed under p4/build/).
    use fare_p4runtime::p4info::name_of;

    const COMMITTED: &str = include_str!("../../../p4/build/fare.p4info.txtpb");

    #[test]
    fn committed_p4info_resolves() {
        let info = P4Info::from_text(COMMITTED).unwrap();
        let p = FareProgram::resolve(&info).unwrap();
        assert_eq!(p.set_nexthop.port.bits, 9);
        assert_eq!(p.route_v6.dst.bits, 128);
        assert_eq!(p.mark_slot_hold.bits, 48);
    }

    /// The P4Info p4c's Tofino backend wrote for tna/fare_tna.p4 with standard extern
    /// messages (p4/build/tna/, `make -C p4 tna`): the same backend resolves it by the same
    /// names, flow mode's bucket and member tables and set_group's flowlet gap included.
    /// What differs for a controller: Tofino's 9-bit port, the 20-bit QP range key.
    #[test]
    fn committed_tna_p4info_resolves() {
        let text = include_str!("../../../p4/build/tna/fare_tna.p4info.txtpb");
        let info = match P4Info::from_text(text) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        };
        let p = match FareProgram::resolve(&info) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(p.set_nexthop.port.bits, 9);
        assert_eq!(p.route_v6.dst.bits, 128);
        assert_eq!(p.monitor_params.len(), 7);
        assert_eq!(p.selector_max_group_size, 256);
        assert_eq!(p.set_group.flowlet_gap.map(|f| f.bits), Some(32));
        let Some(b) = p.buckets else {
            panic!("the TNA P4Info has no bucket table");
        };
        assert_eq!(b.buckets, 256);
        assert_eq!((b.group_id.bits, b.bucket.bits), (16, 16));
        assert_eq!((b.bucket_member.bits, b.member_index.bits), (16, 16));
        // The same shape as fare.p4's bucket and member tables, up to ids.
        let bmv2 = FareProgram::resolve(&P4Info::from_text(COMMITTED).unwrap()).unwrap();
        let Some(bb) = bmv2.buckets else {
            panic!("fare.p4's P4Info has no bucket table");
        };
        let widths = |t: &BucketTables| {
            [t.group_id, t.bucket, t.bucket_member, t.member_index].map(|f| f.bits)
        };
        assert_eq!(widths(&b), widths(&bb));
        assert_eq!(b.buckets, bb.buckets);
    }

    /// Everything of a P4Info the backend relies on except ids (p4c assigns those from
    /// hashes of the names): tables with their keys and actions, action parameters,
    /// counters, registers, controller headers, the selector.
    fn shape(info: &P4Info) -> Vec<String> {
        let i = &info.info;
        let action_name = |id: u32| {
            i.actions
                .iter()
                .find(|a| id_of(*a) == id)
                .map_or("?".to_string(), |a| name_of(a).to_string())
        };
        let mut out = Vec::new();
        for t in &i.tables {
            let keys: Vec<String> = t
                .match_fields
                .iter()
                .map(|m| format!("{}:{}:{:?}", m.name, m.bitwidth, m.r#match))
                .collect();
            out.push(format!("table {} {keys:?}", name_of(t)));
            for r in &t.action_refs {
                out.push(format!("table {} action {}", name_of(t), action_name(r.id)));
            }
            if t.implementation_id != 0 {
                out.push(format!("table {} has an implementation", name_of(t)));
            }
        }
        for a in &i.actions {
            let params: Vec<String> = a
                .params
                .iter()
                .map(|p| format!("{}:{}", p.name, p.bitwidth))
                .collect();
            out.push(format!("action {} {params:?}", name_of(a)));
        }
        for c in &i.counters {
            out.push(format!("counter {} {}", name_of(c), c.size));
        }
        for r in &i.registers {
            out.push(format!("register {} {}", name_of(r), r.size));
        }
        for h in &i.controller_packet_metadata {
            let m: Vec<String> = h
                .metadata
                .iter()
                .map(|m| format!("{}:{}", m.name, m.bitwidth))
                .collect();
            out.push(format!("header {} {m:?}", name_of(h)));
        }
        for p in &i.action_profiles {
            out.push(format!(
                "profile {} {} {}",
                name_of(p),
                p.with_selector,
                p.size
            ));
        }
        out
    }

    /// The hand-written fixture above (fixed ids, so the tests can check every field) is
    /// the committed p4c output up to ids: every object it has, p4c made the same way.
    #[test]
    fn fixture_is_the_committed_p4info_up_to_ids() {
        let committed = shape(&P4Info::from_text(COMMITTED).unwrap());
        for line in shape(&P4Info::from_text(FIXTURE).unwrap()) {
            assert!(
                committed.contains(&line),
                "fixture has `{line}`, which p4/build/fare.p4info.txtpb does not"
            );
        }
    }
}
