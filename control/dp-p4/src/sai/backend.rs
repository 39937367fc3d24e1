//! The installer of the SAI-P4 profile: fare's groups as SAI-P4 router interfaces,
//! neighbors, next hops, one-shot WCMP groups and routes.
//!
//! Write order (a P4Runtime target may apply the updates of one Write in any order, so
//! each step is its own Write, sent after the previous one was answered): router
//! interfaces, then neighbors, then next hops, then the WCMP group (INSERT, or one MODIFY
//! of its action set: a replacement is make-before-break, no packet sees a half-written
//! group), then the route. What nothing uses any more is deleted afterwards in reverse:
//! next hops, then neighbors, then router interfaces. A removed route goes route, WCMP
//! group, then the same clean-up. Groups installed together share each phase's Write.
//!
//! A switch that already runs the pipeline is read back and its fare entries adopted (a
//! restarted agent does not interrupt forwarding); a lost session or mastership is
//! handled as for fare.p4 (`crate::session`), then the groups are written again.
//!
//! Refused (SAI-P4 has no such thing): spray mode (SAI-P4 hashes flows), DPF colors and
//! flow rules, ARN in the data plane. See docs/p4.md, "SAI-P4 (PINS) profile".

mod adopt;
mod writes;

use super::{key_of, neighbor_id, Encoding, SaiField, SaiProgram, WcmpAction};
use crate::config::P4RuntimeConfig;
use crate::session::{Session, Target};
use crate::skeleton::{self, selector_limits, GroupForm, Outcomes, Profile, DEFAULT_ROUTER_MAC};
use async_trait::async_trait;
use fare_dataplane::{
    validate, Dataplane, DataplaneError, Group, GroupLimits, GroupMode, GroupStatus, MacAddr,
    MemberStatus, Offers,
};
use fare_p4runtime::client::{Client, P4rtError};
use fare_p4runtime::entities::value_of;
use fare_p4runtime::entities::{entity_table, update};
use fare_p4runtime::proto::p4::v1 as p4;
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;
use std::path::PathBuf;

const BACKEND: &str = "p4runtime (sai)";

/// The VRF fare's routes live in (SAI-P4 forbids writing the default VRF, "").
pub const VRF: &str = "fare";

fn err(e: P4rtError) -> DataplaneError {
    DataplaneError::backend(BACKEND, e.to_string())
}

/// Why spray mode is refused.
pub const NO_SPRAY: &str = "spray mode is not available with profile sai: SAI-P4's WCMP \
     selector hashes flows (set the group's mode to flow)";

/// Everything needed to open the SAI profile.
#[derive(Clone, Debug)]
pub struct SaiOptions {
    pub address: String,
    pub device_id: u64,
    pub election_id: u64,
    /// P4Info + device config pushed on connect; None = use what the switch runs.
    pub pipeline: Option<(PathBuf, PathBuf)>,
    /// Interface name -> P4Runtime port (a PINS port's P4Runtime id, written as its
    /// decimal string where the P4Info translates ports; BMv2's port number otherwise).
    pub ports: BTreeMap<String, u32>,
    pub router_mac: MacAddr,
    /// Members carry their egress port as watch port, except those on the group's
    /// anchor port (the heaviest member's), so a group never has every member down.
    pub watch_ports: bool,
    /// The target's limit on a group's sum of weights, below the P4Info's.
    pub max_group_size: Option<u32>,
}

impl SaiOptions {
    pub fn from_config(config: &P4RuntimeConfig) -> SaiOptions {
        SaiOptions {
            address: config.address.clone(),
            device_id: config.device_id,
            election_id: config.election_id,
            pipeline: config
                .pipeline
                .as_ref()
                .map(|p| (p.p4info.clone(), p.config.clone())),
            ports: config.ports.clone(),
            router_mac: config.router_mac.unwrap_or(DEFAULT_ROUTER_MAC),
            watch_ports: config.watch_ports,
            max_group_size: config.max_group_size,
        }
    }
}

/// One next hop as SAI-P4 knows it: egress port and neighbor id.
type Hop = (u32, Ipv6Addr);

/// A group's members' next hops (in member order) and each next hop's MAC.
type Plan = (Vec<Hop>, BTreeMap<Hop, MacAddr>);

#[derive(Clone, Debug, PartialEq)]
struct Installed {
    group: Group,
    id: String,
    /// Per member of `group`: its next hop.
    hops: Vec<Hop>,
    active: Vec<bool>,
}

/// What is written to the switch besides groups and routes.
#[derive(Debug, Default)]
struct Written {
    /// Port -> router interface id.
    rifs: BTreeMap<u32, String>,
    /// Neighbor -> its MAC as written.
    neighbors: BTreeMap<Hop, MacAddr>,
    /// Neighbor -> next hop id.
    nexthops: BTreeMap<Hop, String>,
}

pub struct SaiDataplane {
    /// The switch, the pushed pipeline, and whether fare may write now.
    session: Session,
    program: SaiProgram,
    options: SaiOptions,
    limits: GroupLimits,
    groups: BTreeMap<IpNet, Installed>,
    written: Written,
    next_nexthop: u64,
    next_group: u64,
}

/// Most updates in one Write.
pub const MAX_BATCH: usize = 500;

/// The value of exact match field `field` of `e`.
fn exact_of(e: &p4::TableEntry, field: u32) -> Option<&[u8]> {
    e.r#match
        .iter()
        .find(|m| m.field_id == field)
        .and_then(|m| match &m.field_match_type {
            Some(p4::field_match::FieldMatchType::Exact(x)) => Some(x.value.as_slice()),
            _ => None,
        })
}

/// Parameter `param` of `e`'s direct action, when that action is `action`.
fn param_bytes(e: &p4::TableEntry, action: u32, param: u32) -> Option<&[u8]> {
    match e.action.as_ref().and_then(|a| a.r#type.as_ref()) {
        Some(p4::table_action::Type::Action(a)) if a.action_id == action => a
            .params
            .iter()
            .find(|x| x.param_id == param)
            .map(|x| x.value.as_slice()),
        _ => None,
    }
}

/// An id as read back (a bit-string field may come back padded to its width).
fn read_id(f: SaiField, bytes: &[u8]) -> Option<String> {
    let bytes = match f.encoding {
        Encoding::Bits(_) => &bytes[bytes.iter().position(|b| *b != 0)?..],
        Encoding::Str => bytes,
    };
    String::from_utf8(bytes.to_vec()).ok()
}

/// A number (a port) as read back.
fn read_number(f: SaiField, bytes: &[u8]) -> Option<u128> {
    match f.encoding {
        Encoding::Str => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Encoding::Bits(_) => Some(value_of(bytes)),
    }
}

fn mac_of(bytes: &[u8]) -> MacAddr {
    let v = value_of(bytes).to_be_bytes();
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&v[10..]);
    MacAddr(mac)
}

/// N of an id `<kind>N`.
fn number_after(id: &str, kind: &str) -> Option<u64> {
    id.strip_prefix(kind)?.parse().ok()
}

/// The prefix a route entry matches (no LPM field: the default route).
fn route_prefix(e: &p4::TableEntry, table: &super::RouteTable) -> Option<IpNet> {
    let lpm = e.r#match.iter().find(|m| m.field_id == table.dst.id);
    let (value, len) = match lpm.and_then(|m| m.field_match_type.as_ref()) {
        Some(p4::field_match::FieldMatchType::Lpm(l)) => (value_of(&l.value), l.prefix_len),
        None => (0, 0),
        Some(_) => return None,
    };
    let len = u8::try_from(len).ok()?;
    if table.dst_bits == 32 {
        let addr = std::net::Ipv4Addr::from(u32::try_from(value).ok()?);
        ipnet::Ipv4Net::new(addr, len).ok().map(IpNet::V4)
    } else {
        ipnet::Ipv6Net::new(Ipv6Addr::from(value), len)
            .ok()
            .map(IpNet::V6)
    }
}

/// `e` with every byte string in canonical form (no leading zero octets), to compare
/// what was written with what a target reads back.
fn canon(e: &p4::TableEntry) -> p4::TableEntry {
    fn c(b: &[u8]) -> Vec<u8> {
        let start = b
            .iter()
            .position(|x| *x != 0)
            .unwrap_or(b.len().saturating_sub(1));
        b[start.min(b.len())..].to_vec()
    }
    use p4::field_match::FieldMatchType as M;
    let mut e = e.clone();
    for m in &mut e.r#match {
        match &mut m.field_match_type {
            Some(M::Exact(x)) => x.value = c(&x.value),
            Some(M::Ternary(x)) => {
                x.value = c(&x.value);
                x.mask = c(&x.mask);
            }
            Some(M::Lpm(x)) => x.value = c(&x.value),
            Some(M::Optional(x)) => x.value = c(&x.value),
            Some(M::Range(x)) => {
                x.low = c(&x.low);
                x.high = c(&x.high);
            }
            None => {}
        }
    }
    if let Some(p4::table_action::Type::Action(a)) =
        e.action.as_mut().and_then(|a| a.r#type.as_mut())
    {
        for x in &mut a.params {
            x.value = c(&x.value);
        }
    }
    e.counter_data = None;
    e
}

/// The router interface of egress port `port`. Every id fare writes starts with `fare-`
/// and names its kind (`fare-rif-`, `fare-nh-`, `fare-g-`), so fare's entries are told
/// apart from others' on a switch that other controllers program too.
fn rif_id(port: u32) -> String {
    format!("fare-rif-{port}")
}

impl SaiDataplane {
    /// DPF: no; flow steering: no.
    pub const OFFERS: Offers = Offers {
        dpf: false,
        flow_steering: false,
    };
    /// Opens the profile from the agent's `dataplane: {kind: p4runtime, profile: sai}`.
    pub async fn open(config: &P4RuntimeConfig) -> Result<SaiDataplane, DataplaneError> {
        Self::connect(SaiOptions::from_config(config)).await
    }

    /// Connects, becomes primary, pushes the pipeline unless the switch already runs it
    /// (then adopts what an earlier fare left, see `adopt`), and writes the switch-wide
    /// entries (L3 admission of the router MAC, fare's VRF and the ACL that puts IP
    /// packets in it) where missing.
    pub async fn connect(options: SaiOptions) -> Result<SaiDataplane, DataplaneError> {
        let target = Target::of(&options.address, options.device_id, options.election_id);
        let (session, info, fresh) =
            Session::connect(target, options.pipeline.as_ref(), BACKEND).await?;
        let program = SaiProgram::resolve(&info).map_err(err)?;
        let limits = selector_limits(&program.selector, GroupForm::Weighted)
            .min(GroupLimits::size(options.max_group_size.unwrap_or(0)));
        tracing::info!(?limits, "sai: group limits from the P4Info");
        let mut dp = SaiDataplane {
            session,
            program,
            options,
            limits,
            groups: BTreeMap::new(),
            written: Written::default(),
            next_nexthop: 1,
            next_group: 1,
        };
        if fresh {
            dp.write_base().await.map_err(err)?;
        } else {
            dp.adopt().await.map_err(err)?;
        }
        Ok(dp)
    }

    /// After a new session or a regained mastership: a switch that lost the pipeline
    /// (`fresh`) gets the switch-wide entries and every group again; one that kept its
    /// entries is adopted and repaired.
    async fn replay(&mut self, fresh: bool) -> Result<(), DataplaneError> {
        self.written = Written::default();
        let desired: Vec<Installed> = std::mem::take(&mut self.groups).into_values().collect();
        if fresh {
            self.write_base().await.map_err(err)?;
        } else {
            // A switch that kept its entries (our connection alone was lost, or another
            // controller was primary for a while): adopt them, remove the groups fare no
            // longer wants, rewrite those that differ.
            self.adopt().await.map_err(err)?;
            let unwanted: Vec<IpNet> = self
                .groups
                .keys()
                .filter(|k| !desired.iter().any(|d| d.group.prefix == **k))
                .copied()
                .collect();
            for prefix in unwanted {
                self.remove_inner(prefix).await?;
            }
        }
        let mut jobs = Vec::new();
        for d in desired {
            // Adopted as wanted: nothing to write.
            let all_active = d.active.iter().all(|a| *a);
            let kept = self.groups.get_mut(&d.group.prefix).is_some_and(|inst| {
                skeleton::refresh_if_unchanged(
                    &mut inst.group,
                    all_active,
                    &d.group,
                    skeleton::NextHop::Written,
                )
            });
            if !kept {
                jobs.push((d.group, d.active));
            }
        }
        let mut first_error = None;
        for r in self.write_groups(jobs).await {
            if let Err(e) = r {
                tracing::warn!(error = %e, "sai: group not rewritten");
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) if self.session.not_writing().is_some() => Err(e),
            _ => Ok(()),
        }
    }

    pub fn program(&self) -> &SaiProgram {
        &self.program
    }

    /// The P4Runtime client (tests).
    pub fn client(&mut self) -> &mut Client {
        self.session.client()
    }

    /// Write RPCs sent so far.
    pub fn writes(&self) -> u64 {
        self.session.writes()
    }

    /// One Write through the session (refused while fare is not the primary).
    async fn write(&mut self, updates: Vec<p4::Update>) -> Result<(), P4rtError> {
        self.session.write(updates).await
    }

    fn base_entries(&self) -> Result<Vec<p4::TableEntry>, P4rtError> {
        Ok(vec![
            self.program.l3_admit_entry(self.options.router_mac)?,
            self.program.vrf_entry(VRF)?,
            self.program.acl_pre_ingress_entry(VRF)?,
        ])
    }

    /// The switch-wide entries: L3 admission and the VRF first, then the ACL entry that
    /// names the VRF (its own Write).
    async fn write_base(&mut self) -> Result<(), P4rtError> {
        let base = self.base_entries()?;
        let insert = |e: &p4::TableEntry| update(p4::update::Type::Insert, entity_table(e.clone()));
        self.write(base[..2].iter().map(insert).collect()).await?;
        self.write(base[2..].iter().map(insert).collect()).await
    }

    /// The group an adopted route forwards with: one member per next hop (interface from
    /// the `ports` map, MAC from its neighbor entry, next hop from the neighbor id).
    fn adopted_group(&self, prefix: IpNet, actions: &[(Hop, i32)]) -> Option<(Group, Vec<Hop>)> {
        let mut members = Vec::with_capacity(actions.len());
        let mut hops = Vec::with_capacity(actions.len());
        for (hop, weight) in actions {
            let interface = self
                .options
                .ports
                .iter()
                .find(|(_, port)| **port == hop.0)
                .map(|(name, _)| name.clone())?;
            let mac = *self.written.neighbors.get(hop)?;
            let next_hop = match hop.1.to_ipv4_mapped() {
                Some(v4) => Some(std::net::IpAddr::V4(v4)),
                None if hop.1 == neighbor_id(None, mac) => None,
                None => Some(std::net::IpAddr::V6(hop.1)),
            };
            members.push(fare_dataplane::Member {
                via: next_hop.map_or_else(|| mac.to_string(), |a| a.to_string()),
                interface,
                next_hop,
                neighbor_mac: Some(mac),
                weight: u32::try_from(*weight).ok().filter(|w| *w > 0)?,
                bandwidth_gbps: 0.0,
            });
            hops.push(*hop);
        }
        Some((
            Group {
                prefix,
                mode: GroupMode::Flow,
                members,
            },
            hops,
        ))
    }

    /// Deletes the route of `prefix`, then its group, then what no group uses.
    async fn remove_inner(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        let inst = self
            .groups
            .get(&prefix)
            .cloned()
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        let p = self.program.clone();
        let route = p.route_entry(VRF, prefix, &inst.id).map_err(err)?;
        self.write(vec![update(
            p4::update::Type::Delete,
            entity_table(key_of(&route)),
        )])
        .await
        .map_err(err)?;
        let group = p.wcmp_group_entry(&inst.id, &[]).map_err(err)?;
        let result = self
            .write(vec![update(
                p4::update::Type::Delete,
                entity_table(key_of(&group)),
            )])
            .await;
        self.groups.remove(&prefix);
        result.map_err(err)?;
        self.collect().await.map_err(err)
    }

    fn port(&self, interface: &str) -> Result<u32, DataplaneError> {
        self.options.ports.get(interface).copied().ok_or_else(|| {
            DataplaneError::backend(
                BACKEND,
                format!("interface {interface:?} is not in the p4runtime `ports` map"),
            )
        })
    }

    /// Checks what the SAI profile can forward: flow mode, within the selector's limits.
    fn check(&self, group: &Group) -> Result<(), DataplaneError> {
        validate(group)?;
        let invalid = |why: String| DataplaneError::InvalidGroup {
            prefix: group.prefix,
            why,
        };
        if group.mode == GroupMode::Spray {
            return Err(invalid(NO_SPRAY.into()));
        }
        if group.mode == GroupMode::Flowlet {
            return Err(invalid(
                "flowlet mode is not available with the SAI profile (SAI-P4 keeps no \
                 per-flow state)"
                    .into(),
            ));
        }
        let sum: u64 = group.members.iter().map(|m| u64::from(m.weight)).sum();
        if let Some(max) = self.limits.max_size {
            if sum > u64::from(max) {
                return Err(invalid(format!(
                    "sum of weights {sum} exceeds the WCMP selector's max_group_size {max}"
                )));
            }
        }
        if let Some(max) = self.limits.max_members {
            if group.members.len() > max as usize {
                return Err(invalid(format!(
                    "{} members exceed the WCMP selector's {max}",
                    group.members.len()
                )));
            }
        }
        if let Some(max) = self.limits.max_member_weight {
            if group.members.iter().any(|m| m.weight > max) {
                return Err(invalid(format!(
                    "a weight exceeds the WCMP selector's max_member_weight {max}"
                )));
            }
        }
        if group
            .members
            .iter()
            .any(|m| i32::try_from(m.weight).is_err())
        {
            return Err(invalid("a weight exceeds 2^31 - 1".into()));
        }
        Ok(())
    }

    /// Writes `group` (members flagged in `active`) make-before-break.
    async fn write_group(&mut self, group: &Group, active: &[bool]) -> Result<(), DataplaneError> {
        let results = self
            .write_groups(vec![(group.clone(), active.to_vec())])
            .await;
        skeleton::only(BACKEND, results)
    }

    /// Writes groups of distinct prefixes together, one result per group: each phase
    /// (router interfaces, neighbors, next hops, WCMP groups, routes) is one Write for all
    /// of them (at most [`MAX_BATCH`] updates each), sent after the previous one was
    /// answered. A group whose update failed in one phase takes no part in the later ones
    /// (a WCMP group written for a route that failed is deleted again). Afterwards what no
    /// installed group uses is deleted (best effort).
    async fn write_groups(
        &mut self,
        jobs: Vec<(Group, Vec<bool>)>,
    ) -> Vec<Result<(), DataplaneError>> {
        let result = self.write_phases(jobs).await;
        if let Err(e) = self.collect().await {
            tracing::warn!(error = %e, "sai: unused next hops not deleted");
        }
        result
    }

    /// The next hop (egress port, neighbor id) of each member of `group`, and each next
    /// hop's MAC.
    fn plan(&self, group: &Group) -> Result<Plan, DataplaneError> {
        let mut hops = Vec::with_capacity(group.members.len());
        let mut macs = BTreeMap::new();
        for m in &group.members {
            let port = self.port(&m.interface)?;
            let mac = m.neighbor_mac.ok_or_else(|| DataplaneError::InvalidGroup {
                prefix: group.prefix,
                why: format!(
                    "member via {} on {} has no neighbor MAC and no resolvable next hop",
                    m.via, m.interface
                ),
            })?;
            let hop = (port, neighbor_id(m.next_hop, mac));
            macs.insert(hop, mac);
            hops.push(hop);
        }
        Ok((hops, macs))
    }

    /// The action set of `group`: one action per next hop of an active member (weights
    /// of members to the same next hop added); every port but the anchor's (the heaviest
    /// next hop's) watched when `watch_ports` is set.
    fn actions(
        &self,
        group: &Group,
        hops: &[Hop],
        active: &[bool],
    ) -> Result<Vec<WcmpAction>, DataplaneError> {
        let mut weights: BTreeMap<Hop, i64> = BTreeMap::new();
        let mut order = Vec::new();
        for ((hop, m), on) in hops.iter().zip(&group.members).zip(active) {
            if !*on {
                continue;
            }
            if !weights.contains_key(hop) {
                order.push(*hop);
            }
            *weights.entry(*hop).or_default() += i64::from(m.weight);
        }
        let anchor = order
            .iter()
            .max_by_key(|h| (weights[*h], std::cmp::Reverse(**h)))
            .map(|h| h.0);
        let mut actions = Vec::with_capacity(order.len());
        for hop in &order {
            let nexthop_id = self.written.nexthops.get(hop).cloned().ok_or_else(|| {
                DataplaneError::backend(BACKEND, "next hop not written".to_string())
            })?;
            actions.push(WcmpAction {
                nexthop_id,
                weight: i32::try_from(weights[hop]).map_err(|_| DataplaneError::InvalidGroup {
                    prefix: group.prefix,
                    why: "merged weight exceeds 2^31 - 1".into(),
                })?,
                watch_port: (self.options.watch_ports && Some(hop.0) != anchor).then_some(hop.0),
            });
        }
        Ok(actions)
    }

    /// Sends `updates` in Writes of at most [`MAX_BATCH`]; per update, None when it was
    /// applied, else why not (the target's per-update error; every update of a Write
    /// that failed without them, and of every later Write).
    async fn write_phase(&mut self, updates: Vec<p4::Update>) -> Vec<Option<String>> {
        let mut out = Vec::with_capacity(updates.len());
        let mut gone: Option<String> = None;
        let mut it = updates.into_iter().peekable();
        while it.peek().is_some() {
            let chunk: Vec<p4::Update> = it.by_ref().take(MAX_BATCH).collect();
            let n = chunk.len();
            if let Some(why) = &gone {
                out.extend(std::iter::repeat_n(Some(why.clone()), n));
                continue;
            }
            match self.write(chunk).await {
                Ok(()) => out.extend(std::iter::repeat_n(None, n)),
                Err(P4rtError::Rpc { error, .. }) if !error.updates.is_empty() => {
                    let mut mine = vec![None; n];
                    for u in &error.updates {
                        if let Some(slot) = mine.get_mut(u.index) {
                            *slot = Some(format!("{:?}: {}", u.code, u.message));
                        }
                    }
                    out.extend(mine);
                }
                Err(e) => {
                    let why = e.to_string();
                    out.extend(std::iter::repeat_n(Some(why.clone()), n));
                    gone = Some(why);
                }
            }
        }
        out
    }

    /// Deletes what no installed group uses: next hops, then neighbors, then router
    /// interfaces (each its own Write).
    async fn collect(&mut self) -> Result<(), P4rtError> {
        let p = self.program.clone();
        let used: BTreeSet<Hop> = self
            .groups
            .values()
            .flat_map(|i| i.hops.iter().copied())
            .collect();
        let ports: BTreeSet<u32> = used.iter().map(|h| h.0).collect();
        let gone: Vec<(Hop, String)> = self
            .written
            .nexthops
            .iter()
            .filter(|(h, _)| !used.contains(h))
            .map(|(h, id)| (*h, id.clone()))
            .collect();
        let mut deletes = Vec::new();
        for (hop, id) in &gone {
            let e = p.nexthop_entry(id, &rif_id(hop.0), hop.1)?;
            deletes.push(update(p4::update::Type::Delete, entity_table(key_of(&e))));
        }
        self.write(deletes).await?;
        for (hop, _) in gone {
            self.written.nexthops.remove(&hop);
        }
        let gone: Vec<(Hop, MacAddr)> = self
            .written
            .neighbors
            .iter()
            .filter(|(h, _)| !used.contains(h))
            .map(|(h, m)| (*h, *m))
            .collect();
        let mut deletes = Vec::new();
        for (hop, mac) in &gone {
            let e = p.neighbor_entry(&rif_id(hop.0), hop.1, *mac)?;
            deletes.push(update(p4::update::Type::Delete, entity_table(key_of(&e))));
        }
        self.write(deletes).await?;
        for (hop, _) in gone {
            self.written.neighbors.remove(&hop);
        }
        let gone: Vec<u32> = self
            .written
            .rifs
            .keys()
            .filter(|port| !ports.contains(port))
            .copied()
            .collect();
        let mut deletes = Vec::new();
        for port in &gone {
            let e = p.rif_entry(&rif_id(*port), *port, self.options.router_mac)?;
            deletes.push(update(p4::update::Type::Delete, entity_table(key_of(&e))));
        }
        self.write(deletes).await?;
        for port in gone {
            self.written.rifs.remove(&port);
        }
        Ok(())
    }
}

#[async_trait]
impl Profile for SaiDataplane {
    const BACKEND: &'static str = BACKEND;

    fn session(&mut self) -> &mut Session {
        &mut self.session
    }

    async fn resync(&mut self, fresh: bool) -> Result<(), DataplaneError> {
        self.replay(fresh).await
    }

    /// SAI-P4's own checks (flow mode, limits, weights); every group then takes the
    /// common path.
    async fn admit(&mut self, group: &Group) -> Option<Result<(), DataplaneError>> {
        self.check(group).err().map(Err)
    }

    /// Unchanged groups are skipped (display-only fields kept), the rest written.
    async fn write_run(&mut self, groups: Vec<Group>) -> Vec<Result<(), DataplaneError>> {
        let mut results = Outcomes::new(BACKEND, groups.len());
        let mut jobs = Vec::new();
        let mut slots = Vec::new();
        for (i, group) in groups.into_iter().enumerate() {
            let unchanged = self.groups.get_mut(&group.prefix).is_some_and(|inst| {
                let all_active = inst.active.iter().all(|a| *a);
                skeleton::refresh_if_unchanged(
                    &mut inst.group,
                    all_active,
                    &group,
                    skeleton::NextHop::Written,
                )
            });
            if unchanged {
                results.set(i, Ok(()));
                continue;
            }
            let active = vec![true; group.members.len()];
            jobs.push((group, active));
            slots.push(i);
        }
        if !jobs.is_empty() {
            results.set_all(&slots, self.write_groups(jobs).await);
        }
        results.finish()
    }
}

#[async_trait]
impl Dataplane for SaiDataplane {
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

    /// Groups of distinct prefixes share each phase's Write (see `write_groups`).
    async fn install_batch(&mut self, groups: &[Group]) -> Vec<Result<(), DataplaneError>> {
        skeleton::install_batch(self, groups).await
    }

    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        skeleton::ensure_session(self).await?;
        self.remove_inner(prefix).await
    }

    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
        // SAI-P4 has no per-member counters: the members' states only.
        Ok(self
            .groups
            .values()
            .map(|inst| GroupStatus {
                group: inst.group.clone(),
                members: inst
                    .active
                    .iter()
                    .map(|a| MemberStatus {
                        packets: 0,
                        bytes: 0,
                        active: *a,
                    })
                    .collect(),
                colors: Vec::new(),
                fit: None,
                buckets: None,
            })
            .collect())
    }

    /// Without ARN in the data plane, a member is removed by rewriting its group's action
    /// set without it (one MODIFY).
    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError> {
        skeleton::ensure_session(self).await?;
        let inst = self
            .groups
            .get(&prefix)
            .cloned()
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        fare_dataplane::keep_last_active(prefix, &inst.active, index, active)?;
        if inst.active[index] == active {
            return Ok(());
        }
        let mut flags = inst.active.clone();
        flags[index] = active;
        self.write_group(&inst.group, &flags).await
    }
}
