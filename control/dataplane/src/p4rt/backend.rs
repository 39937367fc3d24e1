//! The `p4runtime` data plane: WCMP groups as fare.p4 action-selector groups.
//!
//! Per prefix: a route entry (prefix -> WCMP group id, spray or flow) and a group table
//! entry (group id -> action-profile group). A group update is make-before-break: new
//! members and a new profile group are written first, then the group table entry is
//! switched to it in one MODIFY (a single atomic table write), then the old profile group
//! and members are deleted. No packet sees a half-built group.
//!
//! On connect, if the switch already runs our pipeline (same cookie), its routes and
//! groups are read back and adopted: re-installing an identical group writes nothing, so a
//! restarted agent does not disturb forwarding.
//!
//! BMv2 facts this relies on (see docs): a member weight w is w copies, the group size limit
//! is the sum of weights (we pass it as `max_size`), weight 0 is invalid, and a group whose
//! members are all inactive through `watch_port` crashes the switch, so the members on one
//! port per group (the anchor) never get a watch port.

use super::client::{Client, P4rtError, PacketIn};
use super::config::P4RuntimeConfig;
use super::p4info::P4Info;
use super::program::{self, update, FareProgram, GroupMember};
use super::proto::p4::config::v1 as p4cfg;
use super::proto::p4::v1 as p4;
use crate::{
    validate, ColorGroup, ColorStatus, Dataplane, DataplaneError, FlowRule, Group, GroupLimits,
    GroupMode, GroupStatus, MacAddr, Member, MemberStatus,
};
use async_trait::async_trait;
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

const BACKEND: &str = "p4runtime";
/// Group ids 1..GROUP_IDS (fare.p4 GROUP_TABLE_SIZE), counter indices 1..COUNTERS.
const GROUP_IDS: u16 = 1024;
const COUNTERS: u16 = 16384;
const ARN_SLOTS: u16 = 4096;

fn err(e: P4rtError) -> DataplaneError {
    DataplaneError::backend(BACKEND, e.to_string())
}

/// How weights reach the switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GroupForm {
    /// One member per next hop with a P4Runtime weight (BMv2).
    #[default]
    Weighted,
    /// Weight w = w members of weight 1 (targets that reject weights).
    Replicated,
}

/// Everything needed to open the backend.
#[derive(Clone, Debug)]
pub struct P4RuntimeOptions {
    pub address: String,
    pub device_id: u64,
    pub election_id: u64,
    /// P4Info + device config pushed on connect; None = use what the switch runs.
    pub pipeline: Option<(PathBuf, PathBuf)>,
    /// Interface name -> P4 port.
    pub ports: BTreeMap<String, u32>,
    /// Source MAC of routed packets.
    pub router_mac: MacAddr,
    pub form: GroupForm,
    /// How long an ARN removal lasts in the data plane unless a Type 2/4 revokes it
    /// (the agent's `arn.hold_ms`).
    pub arn_hold: Duration,
}

/// Default data-plane ARN hold time, the agent's default `arn.hold_ms`.
pub const DEFAULT_ARN_HOLD: Duration = Duration::from_secs(1);

impl P4RuntimeOptions {
    pub fn from_config(config: &P4RuntimeConfig) -> P4RuntimeOptions {
        P4RuntimeOptions {
            address: config.address.clone(),
            device_id: config.device_id,
            election_id: config.election_id,
            pipeline: config
                .pipeline
                .as_ref()
                .map(|p| (p.p4info.clone(), p.config.clone())),
            ports: config.ports.clone(),
            router_mac: MacAddr([0x02, 0xfa, 0x4e, 0, 0, 1]),
            form: GroupForm::Weighted,
            arn_hold: DEFAULT_ARN_HOLD,
        }
    }

    fn arn_hold_us(&self) -> u64 {
        u64::try_from(self.arn_hold.as_micros())
            .unwrap_or(u64::MAX)
            .min((1 << 48) - 1)
    }
}

/// One next hop as written to the switch.
#[derive(Clone, Debug, PartialEq)]
struct InstalledMember {
    port: u32,
    /// One id (weighted form) or `weight` ids (replicated form); empty while inactive.
    member_ids: Vec<u32>,
    counter: u16,
    arn_slot: u16,
    active: bool,
}

#[derive(Clone, Debug, PartialEq)]
struct Installed {
    group: Group,
    group_id: u16,
    profile_group: u32,
    members: Vec<InstalledMember>,
}

/// DPF: one per-color group of a route (its own group id). Active colors are reachable
/// through `color_group`; backup colors only through `group_fallback`.
#[derive(Clone, Debug, PartialEq)]
struct InstalledColor {
    color: u32,
    active: bool,
    inst: Installed,
}

/// Small id allocator: lowest free id in 1..limit.
#[derive(Debug, Default)]
struct Ids {
    used: BTreeSet<u32>,
    limit: u32,
    next: u32,
}

impl Ids {
    fn new(limit: u32) -> Ids {
        Ids {
            used: BTreeSet::new(),
            limit,
            next: 1,
        }
    }

    /// Next free id, cycling so a just-freed id is not reused at once.
    fn take(&mut self) -> Option<u32> {
        for _ in 0..self.limit {
            let id = self.next;
            self.next = if self.next + 1 >= self.limit {
                1
            } else {
                self.next + 1
            };
            if self.used.insert(id) {
                return Some(id);
            }
        }
        None
    }

    fn mark(&mut self, id: u32) {
        self.used.insert(id);
    }

    fn free(&mut self, id: u32) {
        self.used.remove(&id);
    }
}

pub struct P4RuntimeDataplane {
    client: Client,
    program: FareProgram,
    options: P4RuntimeOptions,
    groups: BTreeMap<IpNet, Installed>,
    group_ids: Ids,
    profile_groups: Ids,
    member_ids: Ids,
    counters: Ids,
    slots: Ids,
    /// (arrival port, Path ID) -> removal slot.
    arn_paths: BTreeMap<(u32, Ipv4Addr), u16>,
    /// (prefix, egress port) -> removal slot of the members of that prefix on that port.
    prefix_slots: BTreeMap<(IpNet, u32), u16>,
    /// DPF: per-color groups by route prefix, active colors first.
    colors: BTreeMap<IpNet, Vec<InstalledColor>>,
    /// DPF: group_fallback entries as written (group id -> fallback group id).
    fallbacks: BTreeMap<u16, u16>,
    /// DPF: flow_color entries as written.
    flow_entries: Vec<p4::TableEntry>,
    /// What one group may hold: the selector's sizes from the P4Info, and the
    /// configured target limit (`dataplane.max_group_size`).
    limits: GroupLimits,
}

/// What one group may hold in action profile `profile` (P4Runtime spec, ActionProfile):
/// `max_group_size` (0: unset, then `size`, the whole profile) bounds the sum of
/// weights under SumOfWeights semantics (the default), the number of members under
/// SumOfMembers (which may also bound each member's weight). In the replicated form each
/// unit of weight is a member of weight 1, so the bound is on the sum of weights either way.
pub fn selector_limits(profile: &p4cfg::ActionProfile, form: GroupForm) -> GroupLimits {
    use p4cfg::action_profile::SelectorSizeSemantics;
    let positive = |v: i64| u32::try_from(v).ok().filter(|&v| v > 0);
    let group = positive(i64::from(profile.max_group_size)).or(positive(profile.size));
    match (&profile.selector_size_semantics, form) {
        (Some(SelectorSizeSemantics::SumOfMembers(m)), GroupForm::Weighted) => GroupLimits {
            max_size: None,
            max_members: group,
            max_member_weight: positive(i64::from(m.max_member_weight)),
        },
        _ => GroupLimits {
            max_size: group,
            max_members: None,
            max_member_weight: None,
        },
    }
}

/// FNV-1a over the pipeline files: the cookie that tells whether the switch runs them.
fn cookie_of(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}

impl P4RuntimeDataplane {
    /// Opens the backend from the agent's `dataplane: {kind: p4runtime, ...}` block.
    pub async fn open(config: &P4RuntimeConfig) -> Result<P4RuntimeDataplane, DataplaneError> {
        let mut dp = Self::connect(P4RuntimeOptions::from_config(config)).await?;
        dp.set_target_limit(config.max_group_size);
        Ok(dp)
    }

    /// A target's own limit on the sum of weights of one group, below what its P4Info
    /// states (e.g. a switch ASIC's selector group size); None or 0: none.
    pub fn set_target_limit(&mut self, max_group_size: Option<u32>) {
        self.limits = self
            .limits
            .min(GroupLimits::size(max_group_size.unwrap_or(0)));
    }

    /// Connects, becomes primary, pushes the pipeline unless the switch already runs it,
    /// and adopts the switch's current groups.
    pub async fn connect(options: P4RuntimeOptions) -> Result<P4RuntimeDataplane, DataplaneError> {
        let mut client = Client::connect(&options.address, options.device_id, options.election_id)
            .await
            .map_err(err)?;
        let (info, fresh) = match &options.pipeline {
            Some((p4info_path, config_path)) => {
                let read = |p: &PathBuf| {
                    std::fs::read(p).map_err(|source| DataplaneError::Io {
                        backend: BACKEND,
                        what: format!("reading {}", p.display()),
                        source,
                    })
                };
                let text = read(p4info_path)?;
                let device_config = read(config_path)?;
                let info = P4Info::load(p4info_path).map_err(|e| err(e.into()))?;
                let cookie = cookie_of(&[&text, &device_config]);
                let running = client.pipeline_cookie().await.map_err(err)?;
                if running == Some(cookie) {
                    tracing::info!(cookie, "switch already runs this pipeline; reconciling");
                    (info, false)
                } else {
                    client
                        .set_pipeline(&info, device_config, cookie)
                        .await
                        .map_err(err)?;
                    tracing::info!(cookie, "pipeline pushed (VERIFY_AND_COMMIT)");
                    (info, true)
                }
            }
            None => {
                let info = client.pipeline_p4info().await.map_err(err)?;
                (info, false)
            }
        };
        let program = FareProgram::resolve(&info).map_err(err)?;
        let limits = selector_limits(
            info.action_profile("wcmp.wcmp_selector")
                .map_err(|e| err(e.into()))?,
            options.form,
        );
        tracing::info!(?limits, "p4runtime: group limits from the P4Info");
        let mut dp = P4RuntimeDataplane {
            client,
            program,
            options,
            groups: BTreeMap::new(),
            group_ids: Ids::new(u32::from(GROUP_IDS)),
            profile_groups: Ids::new(u32::MAX),
            member_ids: Ids::new(u32::MAX),
            counters: Ids::new(u32::from(COUNTERS)),
            slots: Ids::new(u32::from(ARN_SLOTS)),
            arn_paths: BTreeMap::new(),
            prefix_slots: BTreeMap::new(),
            colors: BTreeMap::new(),
            fallbacks: BTreeMap::new(),
            flow_entries: Vec::new(),
            limits,
        };
        if !fresh {
            dp.reconcile().await.map_err(err)?;
        }
        Ok(dp)
    }

    /// The P4Runtime client (tests, packet I/O, benchmarks).
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    pub fn program(&self) -> &FareProgram {
        &self.program
    }

    fn port(&self, interface: &str) -> Result<u32, DataplaneError> {
        self.options.ports.get(interface).copied().ok_or_else(|| {
            DataplaneError::backend(
                BACKEND,
                format!("interface {interface:?} is not in the p4runtime `ports` map"),
            )
        })
    }

    fn interface_of(&self, port: u32) -> String {
        self.options
            .ports
            .iter()
            .find(|(_, p)| **p == port)
            .map_or_else(|| format!("port{port}"), |(name, _)| name.clone())
    }

    /// Reads routes, group entries, profile groups and members back from the switch and
    /// rebuilds the installed groups from them.
    async fn reconcile(&mut self) -> Result<(), P4rtError> {
        let prog = self.program.clone();
        let table = |id| {
            program::entity_table(p4::TableEntry {
                table_id: id,
                ..Default::default()
            })
        };
        let entities = self
            .client
            .read(vec![
                table(prog.route_v4.table),
                table(prog.route_v6.table),
                table(prog.wcmp_group),
                table(prog.arn_rx),
                p4::Entity {
                    entity: Some(p4::entity::Entity::ActionProfileMember(
                        p4::ActionProfileMember {
                            action_profile_id: prog.selector,
                            ..Default::default()
                        },
                    )),
                },
                p4::Entity {
                    entity: Some(p4::entity::Entity::ActionProfileGroup(
                        p4::ActionProfileGroup {
                            action_profile_id: prog.selector,
                            ..Default::default()
                        },
                    )),
                },
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
        self.clear_dpf(&state).await?;
        tracing::info!(groups = self.groups.len(), "adopted the switch's groups");
        Ok(())
    }

    /// DPF state an earlier agent left (flow rules, color and fallback entries, and the
    /// groups no route points at: its color groups) is deleted rather than adopted; the
    /// agent writes its own again (`set_flow_rules`, `install_colored`).
    async fn clear_dpf(&mut self, state: &SwitchState) -> Result<(), P4rtError> {
        let d = self.program.dpf.clone();
        let table = |id| {
            program::entity_table(p4::TableEntry {
                table_id: id,
                ..Default::default()
            })
        };
        let entries = self
            .client
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
                    program::entity_table(p4::TableEntry {
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
                    program::entity_table(self.program.group_key(*gid)?),
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
        self.client.write(deletes).await?;
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

    /// Writes the per-color groups of `group.prefix` (whose route group is installed),
    /// their `color_group` and `group_fallback` entries, and deletes colors that are gone.
    async fn write_colors(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError> {
        let prefix = group.prefix;
        let route_gid = self
            .groups
            .get(&prefix)
            .map(|i| i.group_id)
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        let old: Vec<InstalledColor> = self.colors.remove(&prefix).unwrap_or_default();
        let mut new: Vec<InstalledColor> = Vec::with_capacity(colors.len());
        let mut result = Ok(());
        for c in colors {
            if c.members.is_empty() || new.iter().any(|n| n.color == c.color) {
                continue;
            }
            let as_group = Group {
                prefix,
                mode: group.mode,
                members: c.members.clone(),
            };
            let resolved = crate::xdp::neighbor::fill_macs(&as_group, BACKEND).await;
            let cg = match resolved {
                Ok(r) => r.unwrap_or(as_group),
                Err(e) => {
                    result = Err(e);
                    continue;
                }
            };
            let prev = old.iter().find(|o| o.color == c.color).map(|o| &o.inst);
            let inst = match prev {
                Some(p) if same_forwarding(&p.group, &cg) && p.members.iter().all(|m| m.active) => {
                    Installed {
                        group: cg,
                        ..p.clone()
                    }
                }
                _ => {
                    let active = vec![true; cg.members.len()];
                    match self.write_profile(&cg, &active, prev).await {
                        Ok(i) => i,
                        Err(e) => {
                            result = Err(e);
                            continue;
                        }
                    }
                }
            };
            new.push(InstalledColor {
                color: c.color,
                active: c.active,
                inst,
            });
        }
        let d = self.program.dpf.clone();
        let mut updates = Vec::new();
        // color_group: one entry per active color.
        for n in &new {
            let was = old.iter().find(|o| o.color == n.color);
            let was_active = was.is_some_and(|o| o.active);
            let same_gid = was.is_some_and(|o| o.inst.group_id == n.inst.group_id);
            let entry = program::entity_table(
                d.color_entry(route_gid, n.color, Some(n.inst.group_id))
                    .map_err(err)?,
            );
            match (n.active, was_active) {
                (true, false) => updates.push(update(p4::update::Type::Insert, entry)),
                (true, true) if !same_gid => updates.push(update(p4::update::Type::Modify, entry)),
                (false, true) => updates.push(update(
                    p4::update::Type::Delete,
                    program::entity_table(d.color_entry(route_gid, n.color, None).map_err(err)?),
                )),
                _ => {}
            }
        }
        for o in old.iter().filter(|o| o.active) {
            if !new.iter().any(|n| n.color == o.color) {
                updates.push(update(
                    p4::update::Type::Delete,
                    program::entity_table(d.color_entry(route_gid, o.color, None).map_err(err)?),
                ));
            }
        }
        // group_fallback: the route's group -> its first backup color; an active color ->
        // the route's group when that has other members, else the first backup color.
        let backup = new.iter().find(|n| !n.active).map(|n| n.inst.group_id);
        let route_members: Vec<(String, Option<MacAddr>)> = self
            .groups
            .get(&prefix)
            .map(|i| {
                i.group
                    .members
                    .iter()
                    .map(|m| (m.interface.clone(), m.neighbor_mac))
                    .collect()
            })
            .unwrap_or_default();
        let mut wanted: BTreeMap<u16, u16> = BTreeMap::new();
        if let Some(b) = backup {
            wanted.insert(route_gid, b);
        }
        for n in new.iter().filter(|n| n.active) {
            let others = route_members.iter().any(|(i, mac)| {
                !n.inst
                    .group
                    .members
                    .iter()
                    .any(|m| &m.interface == i && m.neighbor_mac == *mac)
            });
            let target = if others { Some(route_gid) } else { backup };
            if let Some(t) = target {
                wanted.insert(n.inst.group_id, t);
            }
        }
        let mine: BTreeSet<u16> = std::iter::once(route_gid)
            .chain(old.iter().map(|o| o.inst.group_id))
            .chain(new.iter().map(|n| n.inst.group_id))
            .collect();
        for gid in &mine {
            let have = self.fallbacks.get(gid).copied();
            let want = wanted.get(gid).copied();
            let kind = match (have, want) {
                (None, Some(_)) => p4::update::Type::Insert,
                (Some(h), Some(w)) if h != w => p4::update::Type::Modify,
                (Some(_), None) => p4::update::Type::Delete,
                _ => continue,
            };
            updates.push(update(
                kind,
                program::entity_table(d.fallback_entry(*gid, want).map_err(err)?),
            ));
            match want {
                Some(w) => self.fallbacks.insert(*gid, w),
                None => self.fallbacks.remove(gid),
            };
        }
        if !updates.is_empty() {
            if let Err(e) = self.client.write(updates).await {
                result = Err(err(e));
            }
        }
        // Colors that are gone: their entries are already deleted above.
        for o in old {
            if !new.iter().any(|n| n.color == o.color) {
                self.drop_profile(&o.inst).await;
            }
        }
        if !new.is_empty() {
            self.colors.insert(prefix, new);
        }
        result
    }

    /// The ARN removal slot for (port, prefix), 0 when no ARN path maps to it.
    fn slot_for(&self, prefix: IpNet, port: u32) -> u16 {
        self.prefix_slots.get(&(prefix, port)).copied().unwrap_or(0)
    }

    /// Writes `group` with `active` members make-before-break over whatever is installed.
    async fn write_group(&mut self, group: &Group, active: &[bool]) -> Result<(), DataplaneError> {
        let old = self.groups.get(&group.prefix).cloned();
        let inst = self.write_profile(group, active, old.as_ref()).await?;
        // The route entry: new, or its mode changed.
        if old.as_ref().is_none_or(|o| o.group.mode != group.mode) {
            let kind = if old.is_some() {
                p4::update::Type::Modify
            } else {
                p4::update::Type::Insert
            };
            let spray = group.mode == GroupMode::Spray;
            let route = self
                .program
                .route(group.prefix, inst.group_id, spray)
                .map_err(err)?;
            if let Err(e) = self
                .client
                .write(vec![update(kind, program::entity_table(route))])
                .await
            {
                if old.is_none() {
                    self.drop_profile(&inst).await;
                }
                return Err(err(e));
            }
        }
        self.groups.insert(group.prefix, inst);
        Ok(())
    }

    /// Deletes a group table entry with its profile group and members, and frees its ids.
    async fn drop_profile(&mut self, inst: &Installed) {
        if let Ok(key) = self.program.group_key(inst.group_id) {
            if let Err(e) = self
                .client
                .write(vec![update(
                    p4::update::Type::Delete,
                    program::entity_table(key),
                )])
                .await
            {
                tracing::debug!(error = %e, group = inst.group_id, "group entry not deleted");
            }
        }
        let ids: Vec<u32> = inst
            .members
            .iter()
            .flat_map(|m| m.member_ids.clone())
            .collect();
        self.undo(inst.profile_group, &ids).await;
        for m in &inst.members {
            self.counters.free(u32::from(m.counter));
        }
        self.group_ids.free(u32::from(inst.group_id));
    }

    /// Writes the members, profile group and group table entry of `group` make-before-break
    /// over `old` (same group id), and returns what is installed. Routes are the caller's.
    async fn write_profile(
        &mut self,
        group: &Group,
        active: &[bool],
        old: Option<&Installed>,
    ) -> Result<Installed, DataplaneError> {
        let old = old.cloned();
        let ports = group
            .members
            .iter()
            .map(|m| self.port(&m.interface))
            .collect::<Result<Vec<u32>, _>>()?;
        let prog = self.program.clone();
        let port_bits = prog.set_nexthop.port.bits;
        let exhausted = |what: &str| DataplaneError::backend(BACKEND, format!("out of {what}"));

        // Keep counter indices of members that survive (same interface and MAC).
        let mut counters = Vec::with_capacity(group.members.len());
        let mut new_counters = Vec::new();
        for (m, port) in group.members.iter().zip(&ports) {
            let kept = old.as_ref().and_then(|o| {
                o.group
                    .members
                    .iter()
                    .zip(&o.members)
                    .find(|(om, im)| im.port == *port && om.neighbor_mac == m.neighbor_mac)
                    .map(|(_, im)| im.counter)
            });
            let c = match kept {
                Some(c) if !counters.contains(&c) => c,
                _ => {
                    let c = self
                        .counters
                        .take()
                        .ok_or_else(|| exhausted("member counters"))?
                        as u16;
                    new_counters.push(c);
                    c
                }
            };
            counters.push(c);
        }

        // The anchor port never gets a watch port, so the group can never be all-inactive.
        let anchor = group
            .members
            .iter()
            .zip(&ports)
            .zip(active)
            .filter(|(_, a)| **a)
            .max_by_key(|((m, _), _)| m.weight)
            .map(|((_, p), _)| *p);

        let mut installed_members = Vec::with_capacity(group.members.len());
        let mut member_updates = Vec::new();
        let mut group_members = Vec::new();
        for (i, (m, port)) in group.members.iter().zip(&ports).enumerate() {
            let slot = self.slot_for(group.prefix, *port);
            let mac = m.neighbor_mac.ok_or_else(|| DataplaneError::InvalidGroup {
                prefix: group.prefix,
                why: format!(
                    "member via {} has no neighbor MAC and no next hop to resolve one from",
                    m.via
                ),
            })?;
            let mut ids = Vec::new();
            if active[i] {
                let copies = match self.options.form {
                    GroupForm::Weighted => 1,
                    GroupForm::Replicated => m.weight,
                };
                for _ in 0..copies {
                    let id = self
                        .member_ids
                        .take()
                        .ok_or_else(|| exhausted("member ids"))?;
                    ids.push(id);
                    let entity = prog
                        .member(id, *port, mac, self.options.router_mac, slot, counters[i])
                        .map_err(err)?;
                    member_updates.push(update(
                        p4::update::Type::Insert,
                        p4::Entity {
                            entity: Some(p4::entity::Entity::ActionProfileMember(entity)),
                        },
                    ));
                    let weight = match self.options.form {
                        GroupForm::Weighted => i32::try_from(m.weight).unwrap_or(i32::MAX),
                        GroupForm::Replicated => 1,
                    };
                    group_members.push(GroupMember {
                        member_id: id,
                        weight,
                        watch_port: (Some(*port) != anchor).then_some(*port),
                    });
                }
            }
            installed_members.push(InstalledMember {
                port: *port,
                member_ids: ids,
                counter: counters[i],
                arn_slot: slot,
                active: active[i],
            });
        }

        let pg = self
            .profile_groups
            .take()
            .ok_or_else(|| exhausted("profile group ids"))?;
        let group_id = match &old {
            Some(o) => o.group_id,
            None => self
                .group_ids
                .take()
                .ok_or_else(|| exhausted("group ids"))? as u16,
        };
        let profile = prog
            .profile_group(pg, &group_members, port_bits)
            .map_err(err)?;
        let mut make = member_updates;
        make.push(update(
            p4::update::Type::Insert,
            p4::Entity {
                entity: Some(p4::entity::Entity::ActionProfileGroup(profile)),
            },
        ));
        let new_member_ids: Vec<u32> = group_members.iter().map(|m| m.member_id).collect();

        // 1. Make: members and the new profile group.
        if let Err(e) = self.client.write(make).await {
            self.undo(pg, &new_member_ids).await;
            for c in new_counters {
                self.counters.free(u32::from(c));
            }
            if old.is_none() {
                self.group_ids.free(u32::from(group_id));
            }
            return Err(err(e));
        }
        // Zero the counters of newly allocated indices (they may have been used before).
        let zero: Vec<p4::Update> = new_counters
            .iter()
            .map(|c| {
                update(
                    p4::update::Type::Modify,
                    p4::Entity {
                        entity: Some(p4::entity::Entity::CounterEntry(p4::CounterEntry {
                            counter_id: prog.member_packets,
                            index: Some(p4::Index {
                                index: i64::from(*c),
                            }),
                            data: Some(p4::CounterData::default()),
                        })),
                    },
                )
            })
            .collect();
        if let Err(e) = self.client.write(zero).await {
            tracing::debug!(error = %e, "could not zero new member counters");
        }

        // 2. Switch: one table write moves the group id to the new profile group.
        let kind = if old.is_some() {
            p4::update::Type::Modify
        } else {
            p4::update::Type::Insert
        };
        let switch = vec![update(
            kind,
            program::entity_table(prog.group_entry(group_id, pg).map_err(err)?),
        )];
        if let Err(e) = self.client.write(switch).await {
            self.undo(pg, &new_member_ids).await;
            for c in new_counters {
                self.counters.free(u32::from(c));
            }
            if old.is_none() {
                self.group_ids.free(u32::from(group_id));
            }
            return Err(err(e));
        }

        // 3. Break: the old profile group and its members.
        if let Some(o) = &old {
            let old_ids: Vec<u32> = o
                .members
                .iter()
                .flat_map(|m| m.member_ids.clone())
                .collect();
            self.undo(o.profile_group, &old_ids).await;
            for m in &o.members {
                if !counters.contains(&m.counter) {
                    self.counters.free(u32::from(m.counter));
                }
            }
        }
        Ok(Installed {
            group: group.clone(),
            group_id,
            profile_group: pg,
            members: installed_members,
        })
    }

    /// Deletes a profile group and its members (best effort: a failed insert may have left
    /// some of them behind) and frees their ids.
    async fn undo(&mut self, profile_group: u32, member_ids: &[u32]) {
        let prog = &self.program;
        let mut updates = vec![update(
            p4::update::Type::Delete,
            p4::Entity {
                entity: Some(p4::entity::Entity::ActionProfileGroup(
                    p4::ActionProfileGroup {
                        action_profile_id: prog.selector,
                        group_id: profile_group,
                        ..Default::default()
                    },
                )),
            },
        )];
        for id in member_ids {
            updates.push(update(
                p4::update::Type::Delete,
                p4::Entity {
                    entity: Some(p4::entity::Entity::ActionProfileMember(
                        p4::ActionProfileMember {
                            action_profile_id: prog.selector,
                            member_id: *id,
                            action: None,
                        },
                    )),
                },
            ));
        }
        if let Err(e) = self.client.write(updates).await {
            tracing::debug!(error = %e, "cleanup of profile group {profile_group} incomplete");
        }
        self.profile_groups.free(profile_group);
        for id in member_ids {
            self.member_ids.free(*id);
        }
    }

    /// Maps ARNs arriving on `interface` with `path_id` to the members of `prefixes` that
    /// leave through `interface`: such an ARN removes (Types 1, 3) or restores (2, 4) them
    /// in the data plane at once. Rewrites affected installed groups.
    pub async fn map_arn_path(
        &mut self,
        interface: &str,
        path_id: Ipv4Addr,
        prefixes: &[IpNet],
    ) -> Result<u16, DataplaneError> {
        let port = self.port(interface)?;
        let slot = match self.arn_paths.get(&(port, path_id)) {
            Some(s) => *s,
            None => {
                let s = self
                    .slots
                    .take()
                    .ok_or_else(|| DataplaneError::backend(BACKEND, "out of ARN slots"))?
                    as u16;
                let entry = self
                    .program
                    .arn_rx_entry(port, path_id, s, self.options.arn_hold_us())
                    .map_err(err)?;
                self.client
                    .write(vec![update(
                        p4::update::Type::Insert,
                        program::entity_table(entry),
                    )])
                    .await
                    .map_err(err)?;
                self.arn_paths.insert((port, path_id), s);
                s
            }
        };
        for prefix in prefixes {
            self.prefix_slots.insert((*prefix, port), slot);
            if let Some(inst) = self.groups.get(prefix).cloned() {
                let active: Vec<bool> = inst.members.iter().map(|m| m.active).collect();
                self.write_group(&inst.group, &active).await?;
            }
            // DPF color groups of the prefix carry the same slots.
            if let Some(mut colors) = self.colors.remove(prefix) {
                let mut result = Ok(());
                for c in &mut colors {
                    let active: Vec<bool> = c.inst.members.iter().map(|m| m.active).collect();
                    match self
                        .write_profile(&c.inst.group, &active, Some(&c.inst))
                        .await
                    {
                        Ok(i) => c.inst = i,
                        Err(e) => result = Err(e),
                    }
                }
                self.colors.insert(*prefix, colors);
                result?;
            }
        }
        Ok(slot)
    }

    /// Configures ARN generation: when `interface`'s queue reaches `high` packets, an ARN
    /// Type 1 with Path ID `neighbor_router_id` goes to every `targets` port; Type 2 below
    /// `low`. `targets`: (interface, neighbor MAC, our address, neighbor address).
    pub async fn monitor_port(
        &mut self,
        interface: &str,
        high: u32,
        low: u32,
        neighbor_router_id: Ipv4Addr,
        targets: &[(String, MacAddr, Ipv4Addr, Ipv4Addr)],
    ) -> Result<(), DataplaneError> {
        let port = self.port(interface)?;
        // One clone session per monitored port (ids start at 1; 0 is not a valid session).
        let session = port + 1;
        let mut updates = Vec::new();
        let mut target_ports = Vec::new();
        for (iface, mac, src, dst) in targets {
            let p = self.port(iface)?;
            target_ports.push(p);
            let entry = self
                .program
                .arn_encap_entry(p, *mac, self.options.router_mac, *src, *dst)
                .map_err(err)?;
            updates.push(update(
                p4::update::Type::Insert,
                program::entity_table(entry),
            ));
        }
        updates.push(update(
            p4::update::Type::Insert,
            self.program.clone_session(session, &target_ports),
        ));
        let monitor = self
            .program
            .arn_monitor_entry(port, high, low, neighbor_router_id, session)
            .map_err(err)?;
        updates.push(update(
            p4::update::Type::Insert,
            program::entity_table(monitor),
        ));
        self.client.write(updates).await.map_err(err)
    }

    /// Lifetime of a data-plane removal that no Type 2/4 revokes: rewrites every ARN
    /// path entry (the hold travels with the entry; BMv2 refuses register writes).
    pub async fn set_arn_hold(&mut self, hold: Duration) -> Result<(), DataplaneError> {
        self.options.arn_hold = hold;
        let hold_us = self.options.arn_hold_us();
        let mut updates = Vec::new();
        for ((port, path_id), slot) in &self.arn_paths {
            let entry = self
                .program
                .arn_rx_entry(*port, *path_id, *slot, hold_us)
                .map_err(err)?;
            updates.push(update(
                p4::update::Type::Modify,
                program::entity_table(entry),
            ));
        }
        if updates.is_empty() {
            return Ok(());
        }
        self.client.write(updates).await.map_err(err)
    }

    /// Sends a complete Ethernet frame out of `interface` (ARN Types 3/4 on link failure).
    pub async fn packet_out(
        &mut self,
        interface: &str,
        frame: Vec<u8>,
    ) -> Result<(), DataplaneError> {
        let port = self.port(interface)?;
        let meta = self.program.packet_out_metadata(port).map_err(err)?;
        self.client.packet_out(frame, meta).await.map_err(err)
    }

    /// Next packet sent to the controller: (arrival interface, reason, frame).
    pub async fn packet_in(
        &mut self,
        limit: Duration,
    ) -> Result<(String, u8, Vec<u8>), DataplaneError> {
        let PacketIn { payload, metadata } = self.client.packet_in(limit).await.map_err(err)?;
        let (port, reason) = self
            .program
            .packet_in_meta(&metadata)
            .ok_or_else(|| DataplaneError::backend(BACKEND, "packet-in without fare metadata"))?;
        Ok((self.interface_of(port), reason, payload))
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
}

#[derive(Debug, Default)]
struct SwitchState {
    routes: BTreeMap<IpNet, RouteAction>,
    group_entries: BTreeMap<u16, u32>,
    profile_groups: BTreeMap<u32, Vec<(u32, u32)>>,
    members: BTreeMap<u32, MemberAction>,
    arn_paths: BTreeMap<(u32, Ipv4Addr), u16>,
}

fn param_value(action: &p4::Action, id: u32) -> u128 {
    action
        .params
        .iter()
        .find(|p| p.param_id == id)
        .map_or(0, |p| program::value_of(&p.value))
}

impl SwitchState {
    /// Interprets entities read from the switch; anything that does not fit fare.p4's shape
    /// is skipped (it is not ours to adopt).
    fn parse(prog: &FareProgram, entities: Vec<p4::Entity>) -> SwitchState {
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
                                (program::value_of(&l.value), l.prefix_len)
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
                        },
                    );
                }
                Some(E::TableEntry(t)) if t.table_id == prog.arn_rx => {
                    let exact = |id: u32| {
                        t.r#match.iter().find(|m| m.field_id == id).and_then(|m| {
                            match m.field_match_type.as_ref() {
                                Some(p4::field_match::FieldMatchType::Exact(e)) => {
                                    Some(program::value_of(&e.value))
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
                            program::value_of(&e.value)
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

/// True when `a` and `b` program the same forwarding (ignoring display-only fields).
fn same_forwarding(a: &Group, b: &Group) -> bool {
    a.prefix == b.prefix
        && a.mode == b.mode
        && a.members.len() == b.members.len()
        && a.members.iter().zip(&b.members).all(|(x, y)| {
            x.interface == y.interface && x.neighbor_mac == y.neighbor_mac && x.weight == y.weight
        })
}

#[async_trait]
impl Dataplane for P4RuntimeDataplane {
    fn name(&self) -> &'static str {
        BACKEND
    }

    fn limits(&self) -> GroupLimits {
        self.limits
    }

    async fn install(&mut self, group: &Group) -> Result<(), DataplaneError> {
        if self.colors.contains_key(&group.prefix) {
            return self.install_colored(group, &[]).await;
        }
        validate(group)?;
        // BGP members name only a next hop: the switch rewrites the destination MAC, so
        // take it from the kernel's neighbor table like the XDP backend does.
        let resolved = crate::xdp::neighbor::fill_macs(group, BACKEND).await?;
        let group = resolved.as_ref().unwrap_or(group);
        if let Some(inst) = self.groups.get_mut(&group.prefix) {
            if same_forwarding(&inst.group, group) && inst.members.iter().all(|m| m.active) {
                // Adopted or unchanged: keep the switch as it is, refresh display fields.
                inst.group = group.clone();
                return Ok(());
            }
        }
        let active = vec![true; group.members.len()];
        self.write_group(group, &active).await
    }

    async fn install_colored(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError> {
        validate(group)?;
        let resolved = crate::xdp::neighbor::fill_macs(group, BACKEND).await?;
        let group = resolved.as_ref().unwrap_or(group);
        let unchanged = self.groups.get(&group.prefix).is_some_and(|inst| {
            same_forwarding(&inst.group, group) && inst.members.iter().all(|m| m.active)
        });
        if unchanged {
            if let Some(inst) = self.groups.get_mut(&group.prefix) {
                inst.group = group.clone();
            }
        } else {
            let active = vec![true; group.members.len()];
            self.write_group(group, &active).await?;
        }
        self.write_colors(group, colors).await
    }

    async fn set_flow_rules(&mut self, rules: &[FlowRule]) -> Result<(), DataplaneError> {
        let entries = self.program.dpf.flow_entries(rules).map_err(err)?;
        let mut updates: Vec<p4::Update> = self
            .flow_entries
            .iter()
            .map(|e| {
                update(
                    p4::update::Type::Delete,
                    program::entity_table(p4::TableEntry {
                        action: None,
                        ..e.clone()
                    }),
                )
            })
            .collect();
        updates.extend(
            entries
                .iter()
                .map(|e| update(p4::update::Type::Insert, program::entity_table(e.clone()))),
        );
        if updates.is_empty() {
            return Ok(());
        }
        self.client.write(updates).await.map_err(err)?;
        tracing::info!(
            rules = rules.len(),
            entries = entries.len(),
            "p4runtime: DPF flow rules set"
        );
        self.flow_entries = entries;
        Ok(())
    }

    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        if let Some(inst) = self.groups.get(&prefix).cloned() {
            if self.colors.contains_key(&prefix) {
                self.write_colors(&inst.group, &[]).await?;
            }
        }
        let inst = self
            .groups
            .get(&prefix)
            .cloned()
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        let prog = self.program.clone();
        let route = prog.route(prefix, inst.group_id, false).map_err(err)?;
        let route_key = p4::TableEntry {
            action: None,
            ..route
        };
        self.client
            .write(vec![
                update(p4::update::Type::Delete, program::entity_table(route_key)),
                update(
                    p4::update::Type::Delete,
                    program::entity_table(prog.group_key(inst.group_id).map_err(err)?),
                ),
            ])
            .await
            .map_err(err)?;
        let ids: Vec<u32> = inst
            .members
            .iter()
            .flat_map(|m| m.member_ids.clone())
            .collect();
        self.undo(inst.profile_group, &ids).await;
        for m in &inst.members {
            self.counters.free(u32::from(m.counter));
        }
        self.group_ids.free(u32::from(inst.group_id));
        self.groups.remove(&prefix);
        Ok(())
    }

    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
        let prog = self.program.clone();
        // One read of the whole member counter; cells by index.
        let cells = self
            .client
            .read(vec![prog.counter_entry(prog.member_packets, None)])
            .await
            .map_err(err)?;
        let mut counts: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
        for e in cells {
            if let Some(p4::entity::Entity::CounterEntry(c)) = e.entity {
                let index = c.index.map_or(0, |i| i.index);
                let data = c.data.unwrap_or_default();
                counts.insert(
                    index,
                    (
                        u64::try_from(data.packet_count).unwrap_or(0),
                        u64::try_from(data.byte_count).unwrap_or(0),
                    ),
                );
            }
        }
        Ok(self
            .groups
            .values()
            .map(|inst| GroupStatus {
                group: inst.group.clone(),
                members: inst
                    .members
                    .iter()
                    .map(|m| {
                        let (packets, bytes) =
                            counts.get(&i64::from(m.counter)).copied().unwrap_or((0, 0));
                        MemberStatus {
                            packets,
                            bytes,
                            active: m.active,
                        }
                    })
                    .collect(),
                colors: self
                    .colors
                    .get(&inst.group.prefix)
                    .map(|cs| {
                        cs.iter()
                            .map(|c| ColorStatus {
                                color: c.color,
                                members: c.inst.group.members.clone(),
                                status: c
                                    .inst
                                    .members
                                    .iter()
                                    .map(|m| {
                                        let (packets, bytes) = counts
                                            .get(&i64::from(m.counter))
                                            .copied()
                                            .unwrap_or((0, 0));
                                        MemberStatus {
                                            packets,
                                            bytes,
                                            active: m.active,
                                        }
                                    })
                                    .collect(),
                                fit: None,
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                fit: None,
            })
            .collect())
    }

    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError> {
        let inst = self
            .groups
            .get(&prefix)
            .cloned()
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        if index >= inst.members.len() {
            return Err(DataplaneError::backend(
                BACKEND,
                format!("group {prefix} has no member {index}"),
            ));
        }
        let mut flags: Vec<bool> = inst.members.iter().map(|m| m.active).collect();
        if flags[index] == active {
            return Ok(());
        }
        crate::keep_last_active(prefix, &flags, index, active)?;
        flags[index] = active;
        self.write_group(&inst.group, &flags).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_cycle_and_skip_used() {
        let mut ids = Ids::new(4);
        assert_eq!(ids.take(), Some(1));
        assert_eq!(ids.take(), Some(2));
        ids.free(1);
        assert_eq!(ids.take(), Some(3));
        assert_eq!(ids.take(), Some(1));
        assert_eq!(ids.take(), None);
    }

    /// The committed fare.p4 (BMv2): `action_selector(..., SELECTOR_SIZE = 16384, ...)`,
    /// no max_group_size, so a group may use the whole profile; a target limit lowers it.
    #[test]
    fn group_limits_from_the_p4info() {
        let text = include_str!("../../../../p4/build/fare.p4info.txtpb");
        let info = P4Info::from_text(text).unwrap();
        let selector = info.action_profile("wcmp.wcmp_selector").unwrap();
        let l = selector_limits(selector, GroupForm::Weighted);
        assert_eq!(l, GroupLimits::size(16384));
        assert_eq!(selector_limits(selector, GroupForm::Replicated), l);

        // A target that states max_group_size 256 (Tofino's ActionSelector in fare_tna.p4).
        let mut tna = selector.clone();
        tna.max_group_size = 256;
        assert_eq!(
            selector_limits(&tna, GroupForm::Weighted),
            GroupLimits::size(256)
        );
        // SumOfMembers: members counted, each weight bounded; replicated members are
        // weight-1 members, so there the bound is on the sum of weights.
        tna.selector_size_semantics =
            Some(p4cfg::action_profile::SelectorSizeSemantics::SumOfMembers(
                p4cfg::action_profile::SumOfMembers {
                    max_member_weight: 100,
                },
            ));
        assert_eq!(
            selector_limits(&tna, GroupForm::Weighted),
            GroupLimits {
                max_size: None,
                max_members: Some(256),
                max_member_weight: Some(100),
            }
        );
        assert_eq!(
            selector_limits(&tna, GroupForm::Replicated),
            GroupLimits::size(256)
        );
        // The configured target limit: the smaller wins.
        assert_eq!(
            l.min(GroupLimits::size(64)).max_size,
            Some(64),
            "target limit below the P4Info's"
        );
    }

    #[test]
    fn cookie_depends_on_every_byte() {
        assert_ne!(cookie_of(&[b"a", b"b"]), cookie_of(&[b"a", b"c"]));
        assert_eq!(cookie_of(&[b"ab"]), cookie_of(&[b"a", b"b"]));
    }
}
