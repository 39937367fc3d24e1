//! Adoption: on connect to a switch that already runs this pipeline, its routes, groups
//! and ARN paths are read back and adopted; DPF state of an earlier agent is deleted.
use super::*;

impl P4RuntimeDataplane {
    /// Reads routes, group entries, profile groups and members back from the switch and
    /// rebuilds the installed groups from them.
    pub(super) async fn reconcile(&mut self) -> Result<(), P4rtError> {
        let prog = self.program.clone();
        let table = fare_p4runtime::entities::whole_table;
        let every = |entity| p4::Entity {
            entity: Some(entity),
        };
        let entities = self
            .session
            .client()
            .read(vec![
                table(prog.route_v4.table),
                table(prog.route_v6.table),
                table(prog.wcmp_group),
                table(prog.arn_rx),
                every(prog.member_key(0)),
                every(prog.profile_group_key(0)),
            ])
            .await?;
        let state = SwitchState::parse(&prog, entities);
        for (prefix, route) in &state.routes {
            let Some(pg) = state.group_entries.get(&route.group_id) else {
                continue;
            };
            let Some(members) = state.profile_groups.get(pg) else {
                continue;
            };
            // Merge replicas (same counter index) back into one member.
            let mut merged: Vec<(MemberAction, u32, Vec<u32>)> = Vec::new();
            for (member_id, weight) in members {
                let Some(action) = state.members.get(member_id) else {
                    continue;
                };
                match merged
                    .iter_mut()
                    .find(|(a, _, _)| a.counter == action.counter)
                {
                    Some((_, w, ids)) => {
                        *w += *weight;
                        ids.push(*member_id);
                    }
                    None => merged.push((action.clone(), *weight, vec![*member_id])),
                }
            }
            if merged.is_empty() {
                continue;
            }
            let group = Group {
                prefix: *prefix,
                mode: if route.spray {
                    GroupMode::Spray
                } else if route.flowlet {
                    GroupMode::Flowlet
                } else {
                    GroupMode::Flow
                },
                members: merged
                    .iter()
                    .map(|(a, w, _)| Member {
                        via: a.dst_mac.to_string(),
                        interface: self.interface_of(a.port),
                        next_hop: None,
                        neighbor_mac: Some(a.dst_mac),
                        weight: *w,
                        bandwidth_gbps: 0.0,
                    })
                    .collect(),
            };
            let installed = Installed {
                group,
                group_id: route.group_id,
                profile_group: *pg,
                members: merged
                    .iter()
                    .map(|(a, _, ids)| InstalledMember {
                        port: a.port,
                        member_ids: ids.clone(),
                        counter: a.counter,
                        arn_slot: a.arn_slot,
                        active: true,
                    })
                    .collect(),
                buckets: None,
                member_entries: Vec::new(),
            };
            self.group_ids.mark(u32::from(route.group_id));
            self.profile_groups.mark(*pg);
            for m in &installed.members {
                self.counters.mark(u32::from(m.counter));
                for id in &m.member_ids {
                    self.member_ids.mark(*id);
                }
            }
            self.groups.insert(*prefix, installed);
        }
        // ARN paths: (port, Path ID) -> slot, and which prefixes' members use each slot.
        for ((port, path_id), slot) in &state.arn_paths {
            self.arn_paths.insert((*port, *path_id), *slot);
            self.slots.mark(u32::from(*slot));
        }
        for (prefix, inst) in &self.groups {
            for m in inst.members.iter().filter(|m| m.arn_slot != 0) {
                self.prefix_slots.insert((*prefix, m.port), m.arn_slot);
            }
        }
        // Never hand out an id the switch still uses, even if it belongs to nothing we adopted.
        for id in state.members.keys() {
            self.member_ids.mark(*id);
        }
        for id in state.profile_groups.keys() {
            self.profile_groups.mark(*id);
        }
        self.adopt_buckets().await?;
        self.clear_dpf(&state).await?;
        tracing::info!(groups = self.groups.len(), "adopted the switch's groups");
        Ok(())
    }

    /// DPF state an earlier agent left (flow rules, color and fallback entries, and the
    /// groups no route points at: its color groups) is deleted rather than adopted; the
    /// agent writes its own again (`set_flow_rules`, `install_colored`).
    async fn clear_dpf(&mut self, state: &SwitchState) -> Result<(), P4rtError> {
        let d = self.program.dpf.clone();
        let table = fare_p4runtime::entities::whole_table;
        let entries = self
            .session
            .client()
            .read(vec![
                table(d.flow_color),
                table(d.color_group),
                table(d.group_fallback),
            ])
            .await?;
        let mut deletes: Vec<p4::Update> = entries
            .into_iter()
            .filter_map(|e| match e.entity {
                Some(p4::entity::Entity::TableEntry(t)) => Some(update(
                    p4::update::Type::Delete,
                    fare_p4runtime::entities::entity_table(p4::TableEntry {
                        table_id: t.table_id,
                        r#match: t.r#match,
                        priority: t.priority,
                        ..Default::default()
                    }),
                )),
                _ => None,
            })
            .collect();
        let routed: BTreeSet<u16> = state.routes.values().map(|r| r.group_id).collect();
        let mut orphans = Vec::new();
        for (gid, pg) in &state.group_entries {
            if !routed.contains(gid) {
                deletes.push(update(
                    p4::update::Type::Delete,
                    fare_p4runtime::entities::entity_table(self.program.group_key(*gid)?),
                ));
                orphans.push(*pg);
            }
        }
        if deletes.is_empty() {
            return Ok(());
        }
        tracing::info!(
            entries = deletes.len(),
            "deleting DPF state of an earlier agent"
        );
        for chunk in groups::batches(deletes) {
            self.write(chunk).await?;
        }
        for pg in orphans {
            let ids: Vec<u32> = state
                .profile_groups
                .get(&pg)
                .map(|m| m.iter().map(|(id, _)| *id).collect())
                .unwrap_or_default();
            self.undo(pg, &ids).await;
        }
        Ok(())
    }
}

/// What `reconcile` reads back.
#[derive(Clone, Debug, PartialEq)]
struct MemberAction {
    port: u32,
    dst_mac: MacAddr,
    arn_slot: u16,
    counter: u16,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct RouteAction {
    group_id: u16,
    spray: bool,
    /// A flowlet gap in the route: flowlet mode.
    flowlet: bool,
}

#[derive(Debug, Default)]
struct SwitchState {
    routes: BTreeMap<IpNet, RouteAction>,
    group_entries: BTreeMap<u16, u32>,
    profile_groups: BTreeMap<u32, Vec<(u32, u32)>>,
    members: BTreeMap<u32, MemberAction>,
    arn_paths: BTreeMap<(u32, Ipv4Addr), u16>,
}

/// How many routes, group entries, profile groups, members and ARN paths adoption would
/// take from `entities` (the `responses` entry point for read answers).
pub(crate) fn adoptable(prog: &FareProgram, entities: Vec<p4::Entity>) -> usize {
    let s = SwitchState::parse(prog, entities);
    s.routes.len()
        + s.group_entries.len()
        + s.profile_groups.len()
        + s.members.len()
        + s.arn_paths.len()
}

pub(super) fn param_value(action: &p4::Action, id: u32) -> u128 {
    action
        .params
        .iter()
        .find(|p| p.param_id == id)
        .map_or(0, |p| fare_p4runtime::entities::value_of(&p.value))
}

impl SwitchState {
    /// Interprets entities read from the switch; anything that does not fit fare.p4's shape
    /// is skipped (it is not ours to adopt).
    pub(super) fn parse(prog: &FareProgram, entities: Vec<p4::Entity>) -> SwitchState {
        use p4::entity::Entity as E;
        let mut s = SwitchState::default();
        for entity in entities {
            match entity.entity {
                Some(E::TableEntry(t))
                    if t.table_id == prog.route_v4.table || t.table_id == prog.route_v6.table =>
                {
                    let v6 = t.table_id == prog.route_v6.table;
                    let (addr, len) =
                        match t.r#match.first().and_then(|m| m.field_match_type.as_ref()) {
                            Some(p4::field_match::FieldMatchType::Lpm(l)) => {
                                (fare_p4runtime::entities::value_of(&l.value), l.prefix_len)
                            }
                            _ => (0, 0),
                        };
                    let Ok(len) = u8::try_from(len) else { continue };
                    let prefix = if v6 {
                        IpNet::new(IpAddr::V6(addr.into()), len)
                    } else {
                        let Ok(a) = u32::try_from(addr) else { continue };
                        IpNet::new(IpAddr::V4(Ipv4Addr::from(a)), len)
                    };
                    let Ok(prefix) = prefix else { continue };
                    let Some(p4::table_action::Type::Action(a)) = t.action.and_then(|a| a.r#type)
                    else {
                        continue;
                    };
                    if a.action_id != prog.set_group.action {
                        continue;
                    }
                    let Ok(group_id) = u16::try_from(param_value(&a, prog.set_group.group_id.id))
                    else {
                        continue;
                    };
                    s.routes.insert(
                        prefix,
                        RouteAction {
                            group_id,
                            spray: param_value(&a, prog.set_group.spray.id) == 1,
                            flowlet: prog
                                .set_group
                                .flowlet_gap
                                .is_some_and(|f| param_value(&a, f.id) > 0),
                        },
                    );
                }
                Some(E::TableEntry(t)) if t.table_id == prog.arn_rx => {
                    let exact = |id: u32| {
                        t.r#match.iter().find(|m| m.field_id == id).and_then(|m| {
                            match m.field_match_type.as_ref() {
                                Some(p4::field_match::FieldMatchType::Exact(e)) => {
                                    Some(fare_p4runtime::entities::value_of(&e.value))
                                }
                                _ => None,
                            }
                        })
                    };
                    let (Some(port), Some(path)) =
                        (exact(prog.arn_rx_port.id), exact(prog.arn_rx_path.id))
                    else {
                        continue;
                    };
                    let Some(p4::table_action::Type::Action(a)) = t.action.and_then(|a| a.r#type)
                    else {
                        continue;
                    };
                    let (Ok(port), Ok(path), Ok(slot)) = (
                        u32::try_from(port),
                        u32::try_from(path),
                        u16::try_from(param_value(&a, prog.mark_slot_slot.id)),
                    ) else {
                        continue;
                    };
                    if a.action_id == prog.mark_slot && slot != 0 {
                        s.arn_paths.insert((port, Ipv4Addr::from(path)), slot);
                    }
                }
                Some(E::TableEntry(t)) if t.table_id == prog.wcmp_group => {
                    let gid = match t.r#match.first().and_then(|m| m.field_match_type.as_ref()) {
                        Some(p4::field_match::FieldMatchType::Exact(e)) => {
                            fare_p4runtime::entities::value_of(&e.value)
                        }
                        _ => continue,
                    };
                    let Ok(gid) = u16::try_from(gid) else {
                        continue;
                    };
                    if let Some(p4::table_action::Type::ActionProfileGroupId(pg)) =
                        t.action.and_then(|a| a.r#type)
                    {
                        s.group_entries.insert(gid, pg);
                    }
                }
                Some(E::ActionProfileGroup(g)) if g.action_profile_id == prog.selector => {
                    let members = g
                        .members
                        .iter()
                        .map(|m| (m.member_id, u32::try_from(m.weight.max(1)).unwrap_or(1)))
                        .collect();
                    s.profile_groups.insert(g.group_id, members);
                }
                Some(E::ActionProfileMember(m)) if m.action_profile_id == prog.selector => {
                    let Some(a) = m.action else { continue };
                    if a.action_id != prog.set_nexthop.action {
                        continue;
                    }
                    let n = &prog.set_nexthop;
                    let mac = param_value(&a, n.dst_mac.id).to_be_bytes();
                    let mut dst_mac = [0u8; 6];
                    dst_mac.copy_from_slice(&mac[10..16]);
                    let (Ok(port), Ok(arn_slot), Ok(counter)) = (
                        u32::try_from(param_value(&a, n.port.id)),
                        u16::try_from(param_value(&a, n.arn_slot.id)),
                        u16::try_from(param_value(&a, n.member_index.id)),
                    ) else {
                        continue;
                    };
                    s.members.insert(
                        m.member_id,
                        MemberAction {
                            port,
                            dst_mac: MacAddr(dst_mac),
                            arn_slot,
                            counter,
                        },
                    );
                }
                _ => {}
            }
        }
        s
    }
}
