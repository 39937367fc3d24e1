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

mod adoption;
pub(crate) use adoption::adoptable;
mod arn;
mod buckets;
mod colors;
mod groups;
mod replay;
#[cfg(test)]
mod session_tests;

use replay::{Desired, DesiredGroup};

use crate::config::{P4GroupForm, P4RuntimeConfig};
use crate::program::{self, FareProgram};
use crate::session::{Session, Target};
use crate::skeleton::{self, Profile};
pub use crate::skeleton::{selector_limits, GroupForm, DEFAULT_ROUTER_MAC};
use async_trait::async_trait;
use fare_dataplane::{
    validate, ColorGroup, ColorStatus, Dataplane, DataplaneError, Dpf, FlowRule, Group,
    GroupLimits, GroupMode, GroupStatus, MacAddr, Member, MemberStatus, Offers,
};
use fare_p4runtime::client::{Client, P4rtError, PacketIn};
use fare_p4runtime::entities::{update, update_of, GroupMember};
use fare_p4runtime::proto::p4::v1 as p4;
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
    /// Members carry their egress port as `watch_port` (`dataplane.watch_ports`).
    pub watch_ports: bool,
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
            router_mac: config.router_mac.unwrap_or(DEFAULT_ROUTER_MAC),
            form: match config.group_form {
                P4GroupForm::Weighted => GroupForm::Weighted,
                P4GroupForm::Replicated => GroupForm::Replicated,
            },
            watch_ports: config.watch_ports,
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
    /// Flow mode's bucket table as written (bucket -> member index); None without one.
    buckets: Option<Vec<u16>>,
    /// Member indices with a wcmp_member entry (flow mode).
    member_entries: Vec<u16>,
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
    /// The switch, the pushed pipeline, and whether fare may write now.
    session: Session,
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
    /// The limit learned from RESOURCE_EXHAUSTED answers: one less than the smallest
    /// group size the target refused.
    learned_limit: Option<u32>,
    /// Largest group size the target took; smallest it refused.
    target_taken: u32,
    target_refused: Option<u32>,
    /// What the agent asked for (written again after a reconnect or regained mastership).
    desired: Desired,
    /// The switch's own addresses as written to `arn_local_v4/v6`.
    local_written: BTreeSet<IpAddr>,
    /// Sends the queue probes of the monitored ports (stopped when the backend drops).
    probes: Option<arn::ProbeTask>,
    /// Flowlet mode's idle gap (microseconds) written into flowlet groups' routes.
    flowlet_gap_us: u32,
}

impl P4RuntimeDataplane {
    /// DPF: yes; flow steering: no.
    pub const OFFERS: Offers = Offers {
        dpf: true,
        flow_steering: false,
    };
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
        let target = Target::of(&options.address, options.device_id, options.election_id);
        let (session, info, fresh) =
            Session::connect(target, options.pipeline.as_ref(), BACKEND).await?;
        let program = FareProgram::resolve(&info).map_err(err)?;
        let limits = selector_limits(
            info.action_profile("wcmp.wcmp_selector")
                .map_err(|e| err(e.into()))?,
            options.form,
        );
        tracing::info!(?limits, "p4runtime: group limits from the P4Info");
        let mut dp = P4RuntimeDataplane {
            session,
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
            learned_limit: None,
            target_taken: 0,
            target_refused: None,
            desired: Desired::default(),
            local_written: BTreeSet::new(),
            probes: None,
            flowlet_gap_us: buckets::DEFAULT_FLOWLET_GAP_US,
        };
        if !fresh {
            dp.reconcile().await.map_err(err)?;
        }
        Ok(dp)
    }

    /// The P4Runtime client (tests, packet I/O, benchmarks).
    pub fn client(&mut self) -> &mut Client {
        self.session.client()
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
}

#[async_trait]
impl Dataplane for P4RuntimeDataplane {
    fn dpf(&mut self) -> Option<&mut dyn Dpf> {
        Some(self)
    }

    fn name(&self) -> &'static str {
        BACKEND
    }

    fn limits(&self) -> GroupLimits {
        self.limits
    }

    async fn maintain(&mut self) -> Result<(), DataplaneError> {
        skeleton::maintain(self).await
    }

    async fn install(&mut self, group: &Group) -> Result<(), DataplaneError> {
        skeleton::install(self, group).await
    }

    async fn install_batch(&mut self, groups: &[Group]) -> Vec<Result<(), DataplaneError>> {
        skeleton::install_batch(self, groups).await
    }

    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        let wanted = self.desired.groups.remove(&prefix).is_some();
        skeleton::ensure_session(self).await?;
        match self.remove_inner(prefix).await {
            // Asked for but never written (the switch was away): nothing to delete.
            Err(DataplaneError::NoSuchGroup(_)) if wanted => Ok(()),
            other => other,
        }
    }

    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
        // Reads are allowed to a backup; while the switch is unreachable the groups are
        // reported as written, without counters.
        let _ = skeleton::ensure_session(self).await;
        let prog = self.program.clone();
        // One read of the whole member counter; cells by index.
        let cells = match self
            .session
            .client()
            .read(vec![prog.counter_entry(prog.member_packets, None)])
            .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "member counters not read");
                Vec::new()
            }
        };
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
                buckets: None,
            })
            .collect())
    }

    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError> {
        skeleton::ensure_session(self).await?;
        self.set_member_active_inner(prefix, index, active).await?;
        if let Some(d) = self.desired.groups.get_mut(&prefix) {
            if active {
                d.inactive.remove(&index);
            } else {
                d.inactive.insert(index);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Dpf for P4RuntimeDataplane {
    async fn install_colored(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError> {
        validate(group)?;
        self.desired.groups.insert(
            group.prefix,
            DesiredGroup {
                group: group.clone(),
                colors: Some(colors.to_vec()),
                inactive: BTreeSet::new(),
            },
        );
        skeleton::ensure_session(self).await?;
        self.install_colored_inner(group, colors).await
    }

    async fn set_flow_rules(&mut self, rules: &[FlowRule]) -> Result<(), DataplaneError> {
        self.desired.flow_rules = rules.to_vec();
        skeleton::ensure_session(self).await?;
        self.set_flow_rules_inner(rules).await
    }
}

#[async_trait]
impl Profile for P4RuntimeDataplane {
    const BACKEND: &'static str = BACKEND;

    fn session(&mut self) -> &mut Session {
        &mut self.session
    }

    async fn resync(&mut self, fresh: bool) -> Result<(), DataplaneError> {
        self.replay(fresh).await
    }

    /// A DPF route goes its own way (a plain install drops its colors: their groups and
    /// entries are deleted); any other valid group is recorded as the agent's wish.
    async fn admit(&mut self, group: &Group) -> Option<Result<(), DataplaneError>> {
        let colored = self
            .desired
            .groups
            .get(&group.prefix)
            .and_then(|d| d.colors.as_ref())
            .is_some_and(|c| !c.is_empty());
        if colored || self.colors.contains_key(&group.prefix) {
            return Some(self.install_colored(group, &[]).await);
        }
        if let Err(e) = validate(group) {
            return Some(Err(e));
        }
        self.desired.groups.insert(
            group.prefix,
            DesiredGroup {
                group: group.clone(),
                colors: None,
                inactive: BTreeSet::new(),
            },
        );
        None
    }

    async fn write_run(&mut self, groups: Vec<Group>) -> Vec<Result<(), DataplaneError>> {
        self.install_groups(groups).await
    }
}

impl P4RuntimeDataplane {
    pub(super) async fn install_colored_inner(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError> {
        let resolved = fare_dataplane::neighbors::fill_macs(group, BACKEND).await?;
        let group = resolved.as_ref().unwrap_or(group);
        let unchanged = self.groups.get_mut(&group.prefix).is_some_and(|inst| {
            let all_active = inst.members.iter().all(|m| m.active);
            skeleton::refresh_if_unchanged(
                &mut inst.group,
                all_active,
                group,
                skeleton::NextHop::NotWritten,
            )
        });
        if !unchanged {
            let active = vec![true; group.members.len()];
            self.write_group(group, &active).await?;
        }
        self.write_colors(group, colors).await
    }

    /// Replaces the DPF flow rules: the old entries are deleted, then (a separate Write,
    /// since a kept rule has the same key) the new ones inserted.
    pub(super) async fn set_flow_rules_inner(
        &mut self,
        rules: &[FlowRule],
    ) -> Result<(), DataplaneError> {
        let entries = self.program.dpf.flow_entries(rules).map_err(err)?;
        let deletes: Vec<p4::Update> = self
            .flow_entries
            .iter()
            .map(|e| {
                update(
                    p4::update::Type::Delete,
                    fare_p4runtime::entities::entity_table(p4::TableEntry {
                        action: None,
                        ..e.clone()
                    }),
                )
            })
            .collect();
        for chunk in groups::batches(deletes) {
            self.write(chunk).await.map_err(err)?;
        }
        self.flow_entries.clear();
        let inserts: Vec<p4::Update> = entries
            .iter()
            .map(|e| {
                update(
                    p4::update::Type::Insert,
                    fare_p4runtime::entities::entity_table(e.clone()),
                )
            })
            .collect();
        for chunk in groups::batches(inserts) {
            self.write(chunk).await.map_err(err)?;
        }
        tracing::info!(
            rules = rules.len(),
            entries = entries.len(),
            "p4runtime: DPF flow rules set"
        );
        self.flow_entries = entries;
        Ok(())
    }

    /// Deletes a route and its group: the route entry, then the group table entry, then
    /// the profile group, then its members (each its own Write).
    pub(super) async fn remove_inner(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
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
        let route = prog.route(prefix, inst.group_id, false, 0).map_err(err)?;
        let route_key = p4::TableEntry {
            action: None,
            ..route
        };
        self.write(vec![update(
            p4::update::Type::Delete,
            fare_p4runtime::entities::entity_table(route_key),
        )])
        .await
        .map_err(err)?;
        self.groups.remove(&prefix);
        self.drop_profile(&inst).await;
        Ok(())
    }

    pub(super) async fn set_member_active_inner(
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
        let mut flags: Vec<bool> = inst.members.iter().map(|m| m.active).collect();
        fare_dataplane::keep_last_active(prefix, &flags, index, active)?;
        if flags[index] == active {
            return Ok(());
        }
        flags[index] = active;
        self.write_group(&inst.group, &flags).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fare_p4runtime::p4info::P4Info;
    use fare_p4runtime::proto::p4::config::v1 as p4cfg;

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
}
