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

use super::{key_of, neighbor_id, Encoding, SaiField, SaiProgram, WcmpAction};
use crate::config::P4RuntimeConfig;
use crate::fare::{selector_limits, GroupForm, DEFAULT_ROUTER_MAC};
use crate::session::{Session, Target};
use async_trait::async_trait;
use fare_dataplane::{
    validate, ColorGroup, Dataplane, DataplaneError, FlowRule, Group, GroupLimits, GroupMode,
    GroupStatus, MacAddr, MemberStatus,
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

/// True when `a` and `b` program the same entries (display-only fields ignored).
fn same_forwarding(a: &Group, b: &Group) -> bool {
    a.prefix == b.prefix
        && a.mode == b.mode
        && a.members.len() == b.members.len()
        && a.members.iter().zip(&b.members).all(|(x, y)| {
            x.interface == y.interface
                && x.neighbor_mac == y.neighbor_mac
                && x.next_hop == y.next_hop
                && x.weight == y.weight
        })
}

/// The router interface of egress port `port`. Every id fare writes starts with `fare-`
/// and names its kind (`fare-rif-`, `fare-nh-`, `fare-g-`), so fare's entries are told
/// apart from others' on a switch that other controllers program too.
fn rif_id(port: u32) -> String {
    format!("fare-rif-{port}")
}

impl SaiDataplane {
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

    /// Brings the session up to date (`crate::session`: reconnect with backoff, mastership
    /// lost and regained) and writes the groups again when it asks for it. Err while fare
    /// cannot write.
    async fn ensure_session(&mut self) -> Result<(), DataplaneError> {
        if let Some(fresh) = self.session.refresh().await {
            self.resync(fresh).await?;
            tracing::info!(
                groups = self.groups.len(),
                "sai: session restored, groups rewritten"
            );
        }
        self.session.writable()
    }

    /// After a new session or a regained mastership: a switch that lost the pipeline
    /// (`fresh`) gets the switch-wide entries and every group again; one that kept its
    /// entries is adopted and repaired.
    async fn resync(&mut self, fresh: bool) -> Result<(), DataplaneError> {
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
            match self.groups.get_mut(&d.group.prefix) {
                Some(inst)
                    if same_forwarding(&inst.group, &d.group) && d.active.iter().all(|a| *a) =>
                {
                    inst.group = d.group;
                }
                _ => jobs.push((d.group, d.active)),
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

    /// A switch that already runs this pipeline may hold an earlier fare's entries (a
    /// restarted agent, a lost connection): they are read back and adopted, so that
    /// re-installing the same group writes nothing and forwarding is not interrupted.
    /// Router interfaces, neighbors, next hops and WCMP groups are fare's by their ids
    /// (`fare-`), routes by fare's VRF. What cannot be adopted (a route whose group is
    /// not fare's or names a port missing from `ports`, a group without a route, an entry
    /// that does not parse) is deleted, routes first. The switch-wide entries are written
    /// where missing or different.
    async fn adopt(&mut self) -> Result<(), P4rtError> {
        let p = self.program.clone();
        let rows = |found: Vec<p4::Entity>| -> Vec<p4::TableEntry> {
            found
                .into_iter()
                .filter_map(|e| match e.entity {
                    Some(p4::entity::Entity::TableEntry(t)) => Some(t),
                    _ => None,
                })
                .collect()
        };
        let read = |table: u32| fare_p4runtime::entities::whole_table(table);
        let ours = |f: SaiField, e: &p4::TableEntry, kind: &str| {
            exact_of(e, f.id)
                .and_then(|b| read_id(f, b))
                .filter(|id| id.starts_with(kind))
        };
        // Stale entries by table, deleted in dependency order at the end.
        let mut stale: Vec<Vec<p4::TableEntry>> = vec![Vec::new(); 5];
        const ROUTES: usize = 0;
        const GROUPS: usize = 1;
        const NEXTHOPS: usize = 2;
        const NEIGHBORS: usize = 3;
        const RIFS: usize = 4;

        // Router interfaces: id -> port.
        let mut rif_port: BTreeMap<String, u32> = BTreeMap::new();
        let mut fix = Vec::new();
        for e in rows(self.session.client().read(vec![read(p.rif)]).await?) {
            let Some(id) = ours(p.rif_id, &e, "fare-rif-") else {
                continue;
            };
            let port = param_bytes(&e, p.set_port_and_src_mac, p.rif_port.id)
                .and_then(|b| read_number(p.rif_port, b))
                .and_then(|v| u32::try_from(v).ok())
                .filter(|port| rif_id(*port) == id);
            let Some(port) = port else {
                stale[RIFS].push(e);
                continue;
            };
            let want = p.rif_entry(&id, port, self.options.router_mac)?;
            if canon(&e) != canon(&want) {
                fix.push(update(p4::update::Type::Modify, entity_table(want)));
            }
            rif_port.insert(id.clone(), port);
            self.written.rifs.insert(port, id);
        }
        // A router MAC changed since: the router interfaces are modified in place.
        self.write(fix).await?;

        // Neighbors: (port, neighbor id) -> MAC.
        for e in rows(self.session.client().read(vec![read(p.neighbor)]).await?) {
            let Some(rif) = ours(p.neighbor_rif, &e, "fare-rif-") else {
                continue;
            };
            let nid = exact_of(&e, p.neighbor_id.id).map(|b| Ipv6Addr::from(value_of(b)));
            let mac = param_bytes(&e, p.set_dst_mac, p.set_dst_mac_mac.id).map(mac_of);
            match (rif_port.get(&rif), nid, mac) {
                (Some(port), Some(nid), Some(mac)) => {
                    self.written.neighbors.insert((*port, nid), mac);
                }
                _ => stale[NEIGHBORS].push(e),
            }
        }

        // Next hops: id -> (port, neighbor id).
        let mut nexthop_hop: BTreeMap<String, Hop> = BTreeMap::new();
        for e in rows(self.session.client().read(vec![read(p.nexthop)]).await?) {
            let Some(id) = ours(p.nexthop_id, &e, "fare-nh-") else {
                continue;
            };
            let rif = param_bytes(&e, p.set_ip_nexthop, p.set_ip_nexthop_rif.id)
                .and_then(|b| read_id(p.set_ip_nexthop_rif, b));
            let nid = param_bytes(&e, p.set_ip_nexthop, p.set_ip_nexthop_neighbor.id)
                .map(|b| Ipv6Addr::from(value_of(b)));
            let hop = match (rif.and_then(|r| rif_port.get(&r).copied()), nid) {
                (Some(port), Some(nid)) if self.written.neighbors.contains_key(&(port, nid)) => {
                    (port, nid)
                }
                _ => {
                    stale[NEXTHOPS].push(e);
                    continue;
                }
            };
            if let Some(n) = number_after(&id, "fare-nh-") {
                self.next_nexthop = self.next_nexthop.max(n + 1);
            }
            nexthop_hop.insert(id.clone(), hop);
            self.written.nexthops.insert(hop, id);
        }

        // WCMP groups: id -> [(next hop, weight)].
        let mut wcmp: BTreeMap<String, (Vec<(Hop, i32)>, p4::TableEntry)> = BTreeMap::new();
        for e in rows(self.session.client().read(vec![read(p.wcmp_group)]).await?) {
            let Some(id) = ours(p.wcmp_group_id, &e, "fare-g-") else {
                continue;
            };
            if let Some(n) = number_after(&id, "fare-g-") {
                self.next_group = self.next_group.max(n + 1);
            }
            let set = match e.action.as_ref().and_then(|a| a.r#type.as_ref()) {
                Some(p4::table_action::Type::ActionProfileActionSet(set)) => set.clone(),
                _ => {
                    stale[GROUPS].push(e);
                    continue;
                }
            };
            let actions: Option<Vec<(Hop, i32)>> = set
                .action_profile_actions
                .iter()
                .map(|a| {
                    let act = a.action.as_ref()?;
                    let nh = act
                        .params
                        .iter()
                        .find(|x| x.param_id == p.set_nexthop_id_nexthop.id)
                        .and_then(|x| read_id(p.set_nexthop_id_nexthop, &x.value))?;
                    Some((*nexthop_hop.get(&nh)?, a.weight))
                })
                .collect();
            match actions {
                Some(actions) if !actions.is_empty() => {
                    wcmp.insert(id, (actions, e));
                }
                _ => stale[GROUPS].push(e),
            }
        }

        // Routes in fare's VRF: prefix -> group.
        let mut routed = BTreeSet::new();
        for table in [&p.ipv4, &p.ipv6] {
            for e in rows(self.session.client().read(vec![read(table.table)]).await?) {
                let vrf = exact_of(&e, table.vrf.id).and_then(|b| read_id(table.vrf, b));
                if vrf.as_deref() != Some(VRF) {
                    continue;
                }
                let prefix = route_prefix(&e, table);
                let gid = param_bytes(&e, p.set_wcmp_group_id, p.set_wcmp_group_id_group.id)
                    .and_then(|b| read_id(p.set_wcmp_group_id_group, b));
                let adopted = match (prefix, gid) {
                    (Some(prefix), Some(gid)) => wcmp
                        .get(&gid)
                        .and_then(|(actions, _)| self.adopted_group(prefix, actions))
                        .map(|(group, hops)| (prefix, gid, group, hops)),
                    _ => None,
                };
                let Some((prefix, gid, group, hops)) = adopted else {
                    stale[ROUTES].push(e);
                    continue;
                };
                let active = vec![true; group.members.len()];
                routed.insert(gid.clone());
                self.groups.insert(
                    prefix,
                    Installed {
                        group,
                        id: gid,
                        hops,
                        active,
                    },
                );
            }
        }
        for (gid, (_, e)) in wcmp {
            if !routed.contains(&gid) {
                stale[GROUPS].push(e);
            }
        }

        // Delete what was not adopted: routes, groups, then (unused) next hops,
        // neighbors and router interfaces.
        let dropped: usize = stale.iter().map(Vec::len).sum();
        for entries in stale.iter().take(2) {
            let deletes = entries
                .iter()
                .map(|e| update(p4::update::Type::Delete, entity_table(key_of(e))))
                .collect();
            self.write(deletes).await?;
        }
        self.collect().await?;
        for entries in stale.iter().skip(2) {
            let deletes = entries
                .iter()
                .map(|e| update(p4::update::Type::Delete, entity_table(key_of(e))))
                .collect();
            self.write(deletes).await?;
        }
        tracing::info!(
            groups = self.groups.len(),
            dropped,
            "sai: an earlier fare's entries adopted"
        );

        // The switch-wide entries: written where missing or different.
        let base = self.base_entries()?;
        let mut present = Vec::new();
        for e in &base {
            let found = rows(self.session.client().read(vec![read(e.table_id)]).await?);
            present.push(
                found
                    .into_iter()
                    .find(|x| canon(&key_of(x)) == canon(&key_of(e))),
            );
        }
        let upsert = |i: usize| -> Option<p4::Update> {
            match &present[i] {
                None => Some(update(
                    p4::update::Type::Insert,
                    entity_table(base[i].clone()),
                )),
                Some(x) if canon(x) != canon(&base[i]) => Some(update(
                    p4::update::Type::Modify,
                    entity_table(base[i].clone()),
                )),
                Some(_) => None,
            }
        };
        let first: Vec<p4::Update> = (0..2).filter_map(upsert).collect();
        let second: Vec<p4::Update> = (2..3).filter_map(upsert).collect();
        self.write(first).await?;
        self.write(second).await
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
        self.write_groups(vec![(group.clone(), active.to_vec())])
            .await
            .pop()
            .unwrap_or_else(|| Err(DataplaneError::backend(BACKEND, "no result")))
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
        let result = self.write_groups_inner(jobs).await;
        if let Err(e) = self.collect().await {
            tracing::warn!(error = %e, "sai: unused next hops not deleted");
        }
        result
    }

    async fn write_groups_inner(
        &mut self,
        jobs: Vec<(Group, Vec<bool>)>,
    ) -> Vec<Result<(), DataplaneError>> {
        let p = self.program.clone();
        let mut results: Vec<Option<Result<(), DataplaneError>>> = Vec::new();
        // Per job: its members' next hops and their MACs.
        let mut plans: Vec<Option<Plan>> = Vec::new();
        for (group, _) in &jobs {
            match self.plan(group) {
                Ok(plan) => {
                    plans.push(Some(plan));
                    results.push(None);
                }
                Err(e) => {
                    plans.push(None);
                    results.push(Some(Err(e)));
                }
            }
        }
        let prefixes: Vec<IpNet> = jobs.iter().map(|(g, _)| g.prefix).collect();
        let fail = |results: &mut Vec<Option<Result<(), DataplaneError>>>,
                    plans: &mut Vec<Option<Plan>>,
                    i: usize,
                    why: String| {
            plans[i] = None;
            results[i] = Some(Err(DataplaneError::backend(
                BACKEND,
                format!("{}: {why}", prefixes[i]),
            )));
        };

        // 1. Router interfaces, one per new egress port.
        let mut ports: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, plan) in plans.iter().enumerate() {
            for (port, _) in plan.iter().flat_map(|(hops, _)| hops) {
                if !self.written.rifs.contains_key(port) {
                    ports.entry(*port).or_default().push(i);
                }
            }
        }
        let mut updates = Vec::new();
        for port in ports.keys() {
            match p.rif_entry(&rif_id(*port), *port, self.options.router_mac) {
                Ok(e) => updates.push(update(p4::update::Type::Insert, entity_table(e))),
                Err(e) => return self.abandon(results, e),
            }
        }
        let failed = self.write_phase(updates).await;
        for ((port, users), outcome) in ports.iter().zip(failed) {
            match outcome {
                None => {
                    self.written.rifs.insert(*port, rif_id(*port));
                }
                Some(why) => {
                    for &i in users {
                        fail(
                            &mut results,
                            &mut plans,
                            i,
                            format!("router interface: {why}"),
                        );
                    }
                }
            }
        }

        // 2. Neighbors: new ones inserted, a known one whose MAC changed modified.
        let mut neighbors: BTreeMap<Hop, (MacAddr, Vec<usize>)> = BTreeMap::new();
        for (i, plan) in plans.iter().enumerate() {
            for (hop, mac) in plan.iter().flat_map(|(_, macs)| macs) {
                if self.written.neighbors.get(hop) != Some(mac) {
                    neighbors
                        .entry(*hop)
                        .or_insert((*mac, Vec::new()))
                        .1
                        .push(i);
                }
            }
        }
        let mut updates = Vec::new();
        for (hop, (mac, _)) in &neighbors {
            let kind = if self.written.neighbors.contains_key(hop) {
                p4::update::Type::Modify
            } else {
                p4::update::Type::Insert
            };
            match p.neighbor_entry(&rif_id(hop.0), hop.1, *mac) {
                Ok(e) => updates.push(update(kind, entity_table(e))),
                Err(e) => return self.abandon(results, e),
            }
        }
        let failed = self.write_phase(updates).await;
        for ((hop, (mac, users)), outcome) in neighbors.iter().zip(failed) {
            match outcome {
                None => {
                    self.written.neighbors.insert(*hop, *mac);
                }
                Some(why) => {
                    for &i in users {
                        fail(&mut results, &mut plans, i, format!("neighbor: {why}"));
                    }
                }
            }
        }

        // 3. Next hops, one per new (port, neighbor).
        let mut hops: BTreeMap<Hop, Vec<usize>> = BTreeMap::new();
        for (i, plan) in plans.iter().enumerate() {
            for hop in plan.iter().flat_map(|(_, macs)| macs.keys()) {
                if !self.written.nexthops.contains_key(hop) {
                    hops.entry(*hop).or_default().push(i);
                }
            }
        }
        let mut updates = Vec::new();
        let mut ids = Vec::new();
        for hop in hops.keys() {
            let id = format!("fare-nh-{}", self.next_nexthop);
            self.next_nexthop += 1;
            match p.nexthop_entry(&id, &rif_id(hop.0), hop.1) {
                Ok(e) => updates.push(update(p4::update::Type::Insert, entity_table(e))),
                Err(e) => return self.abandon(results, e),
            }
            ids.push(id);
        }
        let failed = self.write_phase(updates).await;
        for (((hop, users), id), outcome) in hops.iter().zip(ids).zip(failed) {
            match outcome {
                None => {
                    self.written.nexthops.insert(*hop, id);
                }
                Some(why) => {
                    for &i in users {
                        fail(&mut results, &mut plans, i, format!("next hop: {why}"));
                    }
                }
            }
        }

        // 4. The WCMP groups: one action per next hop (members to the same next hop
        // merged, their weights added), inactive members left out; INSERT, or one MODIFY
        // of a replaced group's action set.
        let mut written_groups = Vec::new(); // (job, id, new, entry)
        let mut updates = Vec::new();
        for (i, (group, active)) in jobs.iter().enumerate() {
            let Some((member_hops, _)) = &plans[i] else {
                continue;
            };
            let actions = match self.actions(group, member_hops, active) {
                Ok(a) => a,
                Err(e) => {
                    fail(&mut results, &mut plans, i, e.to_string());
                    continue;
                }
            };
            let existing = self.groups.get(&group.prefix).map(|inst| inst.id.clone());
            let (id, kind) = match existing {
                Some(id) => (id, p4::update::Type::Modify),
                None => {
                    let id = format!("fare-g-{}", self.next_group);
                    self.next_group += 1;
                    (id, p4::update::Type::Insert)
                }
            };
            match p.wcmp_group_entry(&id, &actions) {
                Ok(e) => {
                    updates.push(update(kind, entity_table(e.clone())));
                    written_groups.push((i, id, kind == p4::update::Type::Insert, e));
                }
                Err(e) => fail(&mut results, &mut plans, i, e.to_string()),
            }
        }
        let failed = self.write_phase(updates).await;
        let mut routed = Vec::new();
        for ((i, id, new, entry), outcome) in written_groups.into_iter().zip(failed) {
            match outcome {
                None => routed.push((i, id, new, entry)),
                Some(why) => fail(&mut results, &mut plans, i, format!("WCMP group: {why}")),
            }
        }

        // 5. Routes, for new groups only (a replaced group keeps its id).
        let mut updates = Vec::new();
        let mut new_routes = Vec::new();
        for (n, (i, id, new, _)) in routed.iter().enumerate() {
            if !*new {
                continue;
            }
            match p.route_entry(VRF, jobs[*i].0.prefix, id) {
                Ok(e) => {
                    updates.push(update(p4::update::Type::Insert, entity_table(e)));
                    new_routes.push(n);
                }
                Err(e) => return self.abandon(results, e),
            }
        }
        let failed = self.write_phase(updates).await;
        let mut unrouted = BTreeSet::new();
        for (n, outcome) in new_routes.into_iter().zip(failed) {
            if let Some(why) = outcome {
                let i = routed[n].0;
                fail(&mut results, &mut plans, i, format!("route: {why}"));
                unrouted.insert(n);
            }
        }
        // The groups of routes that failed are deleted again.
        let undo: Vec<p4::Update> = unrouted
            .iter()
            .map(|n| {
                update(
                    p4::update::Type::Delete,
                    entity_table(key_of(&routed[*n].3)),
                )
            })
            .collect();
        for outcome in self.write_phase(undo).await.into_iter().flatten() {
            tracing::warn!(error = %outcome, "sai: WCMP group of a failed route not deleted");
        }
        for (n, (i, id, _, _)) in routed.into_iter().enumerate() {
            if unrouted.contains(&n) {
                continue;
            }
            let Some((member_hops, _)) = plans[i].take() else {
                continue;
            };
            let (group, active) = &jobs[i];
            self.groups.insert(
                group.prefix,
                Installed {
                    group: group.clone(),
                    id,
                    hops: member_hops,
                    active: active.clone(),
                },
            );
            results[i] = Some(Ok(()));
            tracing::debug!(prefix = %group.prefix, "sai: group written");
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(DataplaneError::backend(BACKEND, "no result"))))
            .collect()
    }

    /// Installs groups of distinct prefixes together: each checked (flow mode, limits)
    /// and its next hops' MACs resolved, unchanged ones skipped, the rest written.
    async fn install_run(&mut self, groups: &[Group]) -> Vec<Result<(), DataplaneError>> {
        let mut results: Vec<Option<Result<(), DataplaneError>>> =
            (0..groups.len()).map(|_| None).collect();
        let mut jobs = Vec::new();
        let mut slots = Vec::new();
        for (i, group) in groups.iter().enumerate() {
            if let Err(e) = self.check(group) {
                results[i] = Some(Err(e));
                continue;
            }
            // BGP members name only a next hop: the switch rewrites the destination MAC,
            // so take it from the kernel's neighbor table like the other backends do.
            let group = match fare_dataplane::neighbors::fill_macs(group, BACKEND).await {
                Ok(resolved) => resolved.unwrap_or_else(|| group.clone()),
                Err(e) => {
                    results[i] = Some(Err(e));
                    continue;
                }
            };
            if let Some(inst) = self.groups.get_mut(&group.prefix) {
                if same_forwarding(&inst.group, &group) && inst.active.iter().all(|a| *a) {
                    // Nothing to write; display-only fields (bandwidths) are kept.
                    inst.group = group;
                    results[i] = Some(Ok(()));
                    continue;
                }
            }
            let active = vec![true; group.members.len()];
            jobs.push((group, active));
            slots.push(i);
        }
        if !jobs.is_empty() {
            match self.ensure_session().await {
                Ok(()) => {
                    for (slot, r) in slots.into_iter().zip(self.write_groups(jobs).await) {
                        results[slot] = Some(r);
                    }
                }
                Err(e) => {
                    for slot in slots {
                        results[slot] = Some(Err(DataplaneError::backend(BACKEND, e.to_string())));
                    }
                }
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(DataplaneError::backend(BACKEND, "no result"))))
            .collect()
    }

    /// Every group not yet decided fails with `e` (an entity that cannot be built).
    fn abandon(
        &self,
        results: Vec<Option<Result<(), DataplaneError>>>,
        e: P4rtError,
    ) -> Vec<Result<(), DataplaneError>> {
        let why = e.to_string();
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(DataplaneError::backend(BACKEND, why.clone()))))
            .collect()
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
impl Dataplane for SaiDataplane {
    fn name(&self) -> &'static str {
        BACKEND
    }

    fn limits(&self) -> GroupLimits {
        self.limits
    }

    async fn maintain(&mut self) -> Result<(), DataplaneError> {
        self.session.probe().await;
        self.ensure_session().await
    }

    async fn install(&mut self, group: &Group) -> Result<(), DataplaneError> {
        self.install_batch(std::slice::from_ref(group))
            .await
            .pop()
            .unwrap_or_else(|| Err(DataplaneError::backend(BACKEND, "no result")))
    }

    /// Groups of distinct prefixes share each phase's Write (see `write_groups`); a
    /// prefix twice cuts the batch before its second install, which then sees the first
    /// one installed (in order, like separate calls).
    async fn install_batch(&mut self, groups: &[Group]) -> Vec<Result<(), DataplaneError>> {
        let mut out = Vec::with_capacity(groups.len());
        for run in fare_dataplane::distinct_prefix_runs(groups) {
            out.extend(self.install_run(run).await);
        }
        out
    }

    async fn install_colored(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError> {
        if !colors.is_empty() {
            return Err(DataplaneError::backend(
                BACKEND,
                "DPF colors are not available with profile sai (SAI-P4 has no per-color groups)",
            ));
        }
        self.install(group).await
    }

    async fn set_flow_rules(&mut self, rules: &[FlowRule]) -> Result<(), DataplaneError> {
        if rules.is_empty() {
            return Ok(());
        }
        Err(DataplaneError::backend(
            BACKEND,
            "DPF flow rules are not available with profile sai (use profile fare)",
        ))
    }

    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        self.ensure_session().await?;
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
        self.ensure_session().await?;
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
