//! `kernel` data plane backend: the same groups as Linux weighted nexthop groups, the
//! baseline users would otherwise pick and a fallback where XDP is unavailable.
//!
//! Per group: one nexthop object per member (`via NEXT_HOP dev INTERFACE`), one group
//! object with the members' weights (u16 weights, Linux 6.12+), and the route
//! `PREFIX nhid GROUP proto fare(250)`. A `spray` group is a hash-threshold group; a
//! `flow` group a resilient one (Linux 5.13+: [`KERNEL_BUCKETS`] buckets, idle timer 0,
//! no unbalanced timer). A replacement is make-before-break: new member nexthops and a
//! new group id, the route repointed with `NLM_F_REPLACE`, then the old objects deleted.
//! A resilient group is instead replaced in place (same id, `NLM_F_REPLACE`, the members
//! that stay keep their nexthop ids), because the kernel keeps a group's buckets only
//! across an in-place replacement: new members' nexthops first, the group swapped in one
//! request, the leaving members' nexthops deleted last, so no packet meets a missing
//! object. The kernel, not fare, picks which buckets move (fare cannot write buckets):
//! with idle timer 0 it moves at once as many buckets as the new weights require, from
//! the members above their new share to those below. Every object carries protocol 250,
//! so a restarted agent finds (adopts) what the previous one installed and the routes
//! keep forwarding.
//!
//! Limits (documented in README):
//! - The kernel hashes flows onto members: `spray` groups are installed, but traffic is
//!   spread per flow (the kernel has no per-packet multipath).
//! - Every member needs `next_hop` (an IP address) and `interface`.
//! - Counters: packets per member from the kernel's nexthop group statistics
//!   (`NHA_OP_FLAGS` DUMP_STATS, Linux 6.7+; 0 on older kernels); no byte counters (0).
//! - `set_member_active(false)` rebuilds the group without that member (the kernel has
//!   no per-entry switch), make-before-break as for any replacement.
//! - Routes go to the main table.

pub mod nexthop;

use async_trait::async_trait;
use fare_dataplane::{
    validate, BucketStatus, Dataplane, DataplaneError, Group, GroupLimits, GroupMode, GroupStatus,
    Member, MemberStatus, Offers,
};
use futures::StreamExt;
use ipnet::IpNet;
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL,
    NLM_F_REPLACE, NLM_F_REQUEST,
};
use netlink_packet_route::route::{RouteAttribute, RouteMessage, RouteProtocol};
use nexthop::{GroupEntry, NexthopMessage, ResGroup, MAX_WEIGHT};
use rtnetlink::RouteMessageBuilder;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tracing::{debug, info, warn};

/// Route and nexthop protocol number of fare's objects (unassigned in
/// /etc/iproute2/rt_protos; see docs/CODEPOINTS.md).
pub const RTPROT_FARE: u8 = 250;
/// First nexthop id fare allocates (ids are per network namespace; this keeps clear of
/// the small ids people type by hand).
const FIRST_ID: u32 = 0x0fa0_0000;
const NAME: &str = "kernel";
/// Why a flowlet group is refused (the agent's configuration check says it first).
pub const NO_FLOWLETS: &str = "flowlet mode is not available in the kernel data plane \
     (Linux nexthop groups keep no per-flow state); use flow";
/// Buckets of a `flow` group's resilient nexthop group: one bucket is 0.2 % of the
/// group's flows (the kernel allows up to 65535; more buckets, finer shares, a longer
/// bucket dump).
pub const KERNEL_BUCKETS: u16 = 512;

/// The resilient table of a `flow` group: idle timer 0, so the kernel migrates the
/// buckets a weight change requires at once (as fare's own tables do); no unbalanced
/// timer (nothing is left unbalanced with idle timer 0).
pub const RESILIENT: ResGroup = ResGroup {
    buckets: KERNEL_BUCKETS,
    idle_timer: 0,
    unbalanced_timer: 0,
};

struct Installed {
    group: Group,
    group_id: u32,
    /// One nexthop id per member of `group`.
    member_ids: Vec<u32>,
    active: Vec<bool>,
    /// Packets counted by earlier incarnations of this group (a replacement with the
    /// same members, e.g. an ARN on/off, must not reset the counters).
    carried: Vec<u64>,
    /// A resilient group (flow mode): its buckets as last dumped, moved at the last change.
    buckets: Option<BucketStatus>,
}

pub struct KernelDataplane {
    routes: rtnetlink::Handle,
    nexthops: netlink_proto::ConnectionHandle<NexthopMessage>,
    installed: BTreeMap<IpNet, Installed>,
    used_ids: BTreeSet<u32>,
    next_id: u32,
    ifindex: HashMap<String, u32>,
    /// Largest member weight this kernel takes (see [`kernel_limits`]).
    limits: GroupLimits,
}

/// Entries of one nexthop group: `NHA_GROUP` is one netlink attribute (u16 length, 4
/// octets of header) of 8-octet `struct nexthop_grp` entries.
pub const MAX_GROUP_ENTRIES: u32 = (u16::MAX as u32 - 4) / 8;

/// Kernel releases from which a group entry carries a 16-bit weight (`weight_high`).
const WIDE_WEIGHTS_SINCE: (u32, u32) = (6, 12);

/// `major.minor` of a kernel release string (`6.18.44-fc-v509` -> (6, 18)).
pub fn release_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Nexthop group limits of a kernel release: no limit on the sum of weights (the kernel
/// spreads hash space by weight), at most [`MAX_GROUP_ENTRIES`] members, weights up to
/// 65536 from Linux 6.12 (`weight_high`), 256 before (one octet, weight - 1). An unknown
/// release gets the older, smaller limit.
pub fn kernel_limits(release: Option<&str>) -> GroupLimits {
    let wide = release
        .and_then(release_version)
        .is_some_and(|v| v >= WIDE_WEIGHTS_SINCE);
    GroupLimits {
        max_size: None,
        max_members: Some(MAX_GROUP_ENTRIES),
        max_member_weight: Some(if wide { MAX_WEIGHT } else { 256 }),
    }
}

/// The running kernel's limits (from /proc/sys/kernel/osrelease).
fn running_kernel_limits() -> GroupLimits {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok();
    kernel_limits(release.as_deref())
}

fn err(what: impl Into<String>) -> DataplaneError {
    DataplaneError::backend(NAME, what)
}

fn os_err(what: String, code: i32) -> DataplaneError {
    DataplaneError::Io {
        backend: NAME,
        what,
        source: std::io::Error::from_raw_os_error(code.abs()),
    }
}

impl KernelDataplane {
    /// DPF: no; flow steering: no.
    pub const OFFERS: Offers = Offers {
        dpf: false,
        flow_steering: false,
    };
    /// Opens netlink connections and adopts the groups a previous agent left.
    /// `_interfaces` is informational: members name their interface.
    pub async fn open(_interfaces: &[String]) -> Result<KernelDataplane, DataplaneError> {
        let (conn, routes, _) =
            rtnetlink::new_connection().map_err(|source| DataplaneError::Io {
                backend: NAME,
                what: "opening rtnetlink".into(),
                source,
            })?;
        tokio::spawn(conn);
        let (conn, nexthops, _) =
            netlink_proto::new_connection::<NexthopMessage>(netlink_sys::protocols::NETLINK_ROUTE)
                .map_err(|source| DataplaneError::Io {
                    backend: NAME,
                    what: "opening netlink for nexthops".into(),
                    source,
                })?;
        tokio::spawn(conn);
        let mut dp = KernelDataplane {
            routes,
            nexthops,
            installed: BTreeMap::new(),
            used_ids: BTreeSet::new(),
            next_id: FIRST_ID,
            ifindex: HashMap::new(),
            limits: running_kernel_limits(),
        };
        dp.adopt().await?;
        Ok(dp)
    }

    /// Sends one nexthop request and collects the answers; a NACK becomes an error.
    /// Creates one nexthop object; when the kernel refuses it, deletes `created` (the
    /// objects made for the same group so far) before returning the error.
    async fn create_or_undo(
        &mut self,
        msg: NexthopMessage,
        what: String,
        created: &[u32],
    ) -> Result<(), DataplaneError> {
        let flags = NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        if let Err(e) = self.nh_request(msg, flags, what).await {
            self.delete_ids(created).await;
            return Err(e);
        }
        Ok(())
    }

    async fn nh_request(
        &self,
        msg: NexthopMessage,
        flags: u16,
        what: String,
    ) -> Result<Vec<NexthopMessage>, DataplaneError> {
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | flags;
        let mut req = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
        req.finalize();
        let mut answers = self
            .nexthops
            .request(req, netlink_sys::SocketAddr::new(0, 0))
            .map_err(|e| err(format!("{what}: {e}")))?;
        let mut out = Vec::new();
        while let Some(answer) = answers.next().await {
            match answer.payload {
                NetlinkPayload::InnerMessage(m) => out.push(m),
                NetlinkPayload::Error(e) => {
                    if let Some(code) = e.code {
                        return Err(os_err(what, code.get()));
                    }
                }
                NetlinkPayload::Done(_) => break,
                _ => {}
            }
        }
        Ok(out)
    }

    fn alloc_id(&mut self) -> u32 {
        while self.used_ids.contains(&self.next_id) || self.next_id == 0 {
            self.next_id = self.next_id.wrapping_add(1);
        }
        let id = self.next_id;
        self.used_ids.insert(id);
        self.next_id = self.next_id.wrapping_add(1);
        id
    }

    async fn ifindex(&mut self, name: &str) -> Result<u32, DataplaneError> {
        if let Some(i) = self.ifindex.get(name) {
            return Ok(*i);
        }
        let mut links = self
            .routes
            .link()
            .get()
            .match_name(name.to_string())
            .execute();
        match links.next().await {
            Some(Ok(link)) => {
                self.ifindex.insert(name.to_string(), link.header.index);
                Ok(link.header.index)
            }
            Some(Err(e)) => Err(err(format!("interface {name}: {e}"))),
            None => Err(err(format!("interface {name} not found"))),
        }
    }

    async fn ifname(&self, index: u32) -> String {
        use netlink_packet_route::link::LinkAttribute;
        let mut links = self.routes.link().get().match_index(index).execute();
        if let Some(Ok(link)) = links.next().await {
            for a in link.attributes {
                if let LinkAttribute::IfName(n) = a {
                    return n;
                }
            }
        }
        format!("if{index}")
    }

    /// Finds fare's routes and groups left by a previous agent and takes them over.
    async fn adopt(&mut self) -> Result<(), DataplaneError> {
        let all = self
            .nh_request(
                NexthopMessage::dump(),
                NLM_F_DUMP,
                "dumping nexthops".into(),
            )
            .await?;
        let by_id: HashMap<u32, &NexthopMessage> = all
            .iter()
            .filter_map(|m| m.id().map(|id| (id, m)))
            .collect();
        self.used_ids = by_id.keys().copied().collect();
        let mut routes = Vec::new();
        for family in [false, true] {
            let msg = if family {
                RouteMessageBuilder::<Ipv6Addr>::new().build()
            } else {
                RouteMessageBuilder::<Ipv4Addr>::new().build()
            };
            let mut dump = self.routes.route().get(msg).execute();
            while let Some(r) = dump.next().await {
                let r = r.map_err(|e| err(format!("dumping routes: {e}")))?;
                if r.header.protocol == RouteProtocol::Other(RTPROT_FARE) {
                    routes.push(r);
                }
            }
        }
        for r in routes {
            let (Some(prefix), Some(group_id)) = (route_prefix(&r), route_nhid(&r)) else {
                continue;
            };
            let Some(entries) = by_id.get(&group_id).and_then(|g| g.group_entries()) else {
                continue;
            };
            let resilient = by_id.get(&group_id).and_then(|g| g.res_group());
            let mut members = Vec::new();
            let mut member_ids = Vec::new();
            for e in entries {
                let Some(nh) = by_id.get(&e.id) else { continue };
                let next_hop = nh.gateway();
                let interface = match nh.oif() {
                    Some(i) => self.ifname(i).await,
                    None => String::new(),
                };
                members.push(Member {
                    via: next_hop.map(|a| a.to_string()).unwrap_or_default(),
                    interface,
                    next_hop,
                    neighbor_mac: None,
                    weight: e.weight,
                    bandwidth_gbps: 0.0,
                });
                member_ids.push(e.id);
            }
            if members.is_empty() {
                continue;
            }
            info!(%prefix, group_id, members = members.len(), "adopted kernel group left by a previous agent");
            let n = members.len();
            // What the adopted table's last change moved is not known.
            let buckets = match resilient {
                Some(_) => self.bucket_status(group_id, &member_ids, None).await,
                None => None,
            };
            self.installed.insert(
                prefix,
                Installed {
                    group: Group {
                        prefix,
                        mode: GroupMode::Flow,
                        members,
                    },
                    group_id,
                    member_ids,
                    active: vec![true; n],
                    carried: vec![0; n],
                    buckets,
                },
            );
        }
        Ok(())
    }

    /// Creates member nexthops and the group for the active members of `group`;
    /// returns (group id, member ids).
    async fn create(
        &mut self,
        group: &Group,
        active: &[bool],
    ) -> Result<(u32, Vec<u32>), DataplaneError> {
        let (member_ids, _) = self.member_nexthops(group, &[]).await?;
        let entries = group_entries(group, active, &member_ids);
        let group_id = self.alloc_id();
        let nexthop = match group.mode {
            GroupMode::Flow => {
                NexthopMessage::resilient_group(group_id, entries, RESILIENT, RTPROT_FARE)
            }
            // Flowlet groups are refused before they get here.
            GroupMode::Spray | GroupMode::Flowlet => {
                NexthopMessage::group(group_id, entries, RTPROT_FARE)
            }
        };
        let what = format!("nexthop group {group_id} for {}", group.prefix);
        self.create_or_undo(nexthop, what, &member_ids).await?;
        Ok((group_id, member_ids))
    }

    /// One nexthop id per member of `group`: the id of `keep` (interface, next hop, id)
    /// when the member is there, else a new nexthop object. Returns (ids, the new ones);
    /// on an error the new ones are deleted again.
    async fn member_nexthops(
        &mut self,
        group: &Group,
        keep: &[(String, Option<IpAddr>, u32)],
    ) -> Result<(Vec<u32>, Vec<u32>), DataplaneError> {
        let mut member_ids = Vec::with_capacity(group.members.len());
        let mut created = Vec::new();
        for m in &group.members {
            let kept = keep.iter().find(|(i, nh, id)| {
                *i == m.interface && *nh == m.next_hop && !member_ids.contains(id)
            });
            if let Some((_, _, id)) = kept {
                member_ids.push(*id);
                continue;
            }
            let oif = match self.ifindex(&m.interface).await {
                Ok(oif) => oif,
                Err(e) => {
                    self.delete_ids(&created).await;
                    return Err(e);
                }
            };
            let Some(gateway) = m.next_hop else {
                self.delete_ids(&created).await;
                return Err(DataplaneError::InvalidGroup {
                    prefix: group.prefix,
                    why: format!(
                        "member via {} on {} has no next_hop (the kernel backend needs one)",
                        m.via, m.interface
                    ),
                });
            };
            let id = self.alloc_id();
            let nexthop = NexthopMessage::nexthop(id, gateway, oif, RTPROT_FARE);
            let what = format!("nexthop {id} via {gateway} dev {}", m.interface);
            self.create_or_undo(nexthop, what, &created).await?;
            member_ids.push(id);
            created.push(id);
        }
        Ok((member_ids, created))
    }

    /// Bucket index -> nexthop id of resilient group `group_id`, from the kernel's dump.
    async fn bucket_table(&self, group_id: u32) -> Result<Vec<u32>, DataplaneError> {
        let answers = self
            .nh_request(
                NexthopMessage::bucket_dump(group_id),
                NLM_F_DUMP,
                format!("dumping the buckets of nexthop group {group_id}"),
            )
            .await?;
        let mut table = Vec::with_capacity(usize::from(KERNEL_BUCKETS));
        for (index, nexthop) in answers.iter().filter_map(|m| m.bucket()) {
            let i = usize::from(index);
            if table.len() <= i {
                table.resize(i + 1, 0);
            }
            table[i] = nexthop;
        }
        Ok(table)
    }

    /// Buckets per member of resilient group `group_id` as the kernel holds them now, and
    /// how many changed nexthop against `before` (a dump taken before the change).
    async fn bucket_status(
        &self,
        group_id: u32,
        member_ids: &[u32],
        before: Option<&[u32]>,
    ) -> Option<BucketStatus> {
        let table = match self.bucket_table(group_id).await {
            Ok(t) => t,
            Err(e) => {
                warn!("{e}");
                return None;
            }
        };
        let per_member = member_ids
            .iter()
            .map(|id| table.iter().filter(|b| *b == id).count() as u32)
            .collect();
        let moved = before
            .filter(|b| b.len() == table.len())
            .map(|b| b.iter().zip(&table).filter(|(x, y)| x != y).count() as u32);
        Some(BucketStatus {
            size: table.len() as u32,
            per_member,
            moved,
            assigned_by: "kernel".into(),
        })
    }

    /// A resilient group replaced in place: same group id, the members that stay keep
    /// their nexthops (and so their buckets), new members' nexthops exist before the
    /// group names them, leaving members' nexthops go after it no longer does.
    async fn replace_in_place(
        &mut self,
        group: Group,
        active: Vec<bool>,
        carried: Vec<u64>,
    ) -> Result<(), DataplaneError> {
        let Some(old) = self.installed.get(&group.prefix) else {
            return Err(DataplaneError::NoSuchGroup(group.prefix));
        };
        let group_id = old.group_id;
        let keep: Vec<(String, Option<IpAddr>, u32)> = old
            .group
            .members
            .iter()
            .zip(&old.member_ids)
            .map(|(m, id)| (m.interface.clone(), m.next_hop, *id))
            .collect();
        let before = self.bucket_table(group_id).await.ok();
        let (member_ids, created) = self.member_nexthops(&group, &keep).await?;
        let entries = group_entries(&group, &active, &member_ids);
        let msg = NexthopMessage::resilient_group(group_id, entries, RESILIENT, RTPROT_FARE);
        let what = format!("replacing nexthop group {group_id} for {}", group.prefix);
        if let Err(e) = self.nh_request(msg, NLM_F_ACK | NLM_F_REPLACE, what).await {
            self.delete_ids(&created).await;
            return Err(e);
        }
        let buckets = self
            .bucket_status(group_id, &member_ids, before.as_deref())
            .await;
        let gone: Vec<u32> = keep
            .iter()
            .map(|k| k.2)
            .filter(|id| !member_ids.contains(id))
            .collect();
        self.delete_ids(&gone).await;
        self.installed.insert(
            group.prefix,
            Installed {
                group,
                group_id,
                member_ids,
                active,
                carried,
                buckets,
            },
        );
        Ok(())
    }

    /// Points the route of `prefix` at `group_id` (create or replace).
    async fn point_route(&self, prefix: IpNet, group_id: u32) -> Result<(), DataplaneError> {
        let msg = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(prefix.network(), prefix.prefix_len())
            .map_err(|e| err(format!("route {prefix}: {e}")))?
            .nhid(group_id)
            .protocol(RouteProtocol::Other(RTPROT_FARE))
            .build();
        self.routes
            .route()
            .add(msg)
            .replace()
            .execute()
            .await
            .map_err(|e| err(format!("route {prefix} nhid {group_id}: {e}")))
    }

    /// Deletes nexthop objects, logging failures (cleanup must go on).
    async fn delete_ids(&mut self, ids: &[u32]) {
        for &id in ids {
            if let Err(e) = self
                .nh_request(
                    NexthopMessage::delete(id),
                    NLM_F_ACK,
                    format!("deleting nexthop {id}"),
                )
                .await
            {
                debug!("{e}");
            }
            self.used_ids.remove(&id);
        }
    }

    /// Make-before-break: new objects, repoint the route, delete the old objects.
    async fn replace(&mut self, group: Group, active: Vec<bool>) -> Result<(), DataplaneError> {
        // Counters carry over when the members stay the same (only weights or states change).
        let mut carried = vec![0; group.members.len()];
        if let Some(old) = self.installed.get(&group.prefix) {
            let same = old.group.members.len() == group.members.len()
                && old
                    .group
                    .members
                    .iter()
                    .zip(&group.members)
                    .all(|(a, b)| a.interface == b.interface && a.next_hop == b.next_hop);
            if same {
                let packets = self.packets(old.group_id).await;
                for (i, id) in old.member_ids.iter().enumerate() {
                    carried[i] = old.carried.get(i).copied().unwrap_or(0)
                        + packets.get(id).copied().unwrap_or(0);
                }
            }
        }
        // The kernel keeps buckets only across an in-place replacement of a resilient
        // group (it refuses a change of type or of bucket count in place).
        let in_place = group.mode == GroupMode::Flow
            && self
                .installed
                .get(&group.prefix)
                .and_then(|i| i.buckets.as_ref())
                .is_some_and(|b| b.size == u32::from(KERNEL_BUCKETS));
        if in_place {
            return self.replace_in_place(group, active, carried).await;
        }
        let (group_id, member_ids) = self.create(&group, &active).await?;
        let buckets = match group.mode {
            GroupMode::Flow => self.bucket_status(group_id, &member_ids, None).await,
            GroupMode::Spray | GroupMode::Flowlet => None,
        };
        if let Err(e) = self.point_route(group.prefix, group_id).await {
            let mut ids = vec![group_id];
            ids.extend(&member_ids);
            self.delete_ids(&ids).await;
            return Err(e);
        }
        if let Some(old) = self.installed.insert(
            group.prefix,
            Installed {
                group,
                group_id,
                member_ids,
                active,
                carried,
                buckets,
            },
        ) {
            let mut ids = vec![old.group_id];
            ids.extend(&old.member_ids);
            self.delete_ids(&ids).await;
        }
        Ok(())
    }

    async fn packets(&self, group_id: u32) -> HashMap<u32, u64> {
        let mut msg = NexthopMessage::delete(group_id);
        msg.kind = nexthop::RTM_GETNEXTHOP;
        msg.attrs
            .push(nexthop::Attr::OpFlags(nexthop::NHA_OP_FLAG_DUMP_STATS));
        match self
            .nh_request(msg, 0, format!("reading nexthop group {group_id}"))
            .await
        {
            Ok(answers) => answers
                .iter()
                .filter_map(|m| m.group_stats())
                .flatten()
                .copied()
                .collect(),
            Err(e) => {
                debug!("{e}");
                HashMap::new()
            }
        }
    }
}

/// The group entries of the active members (ids in member order).
fn group_entries(group: &Group, active: &[bool], member_ids: &[u32]) -> Vec<GroupEntry> {
    group
        .members
        .iter()
        .zip(member_ids)
        .enumerate()
        .filter(|(i, _)| active.get(*i).copied().unwrap_or(true))
        .map(|(_, (m, id))| GroupEntry {
            id: *id,
            weight: m.weight.min(MAX_WEIGHT),
        })
        .collect()
}

fn route_prefix(r: &RouteMessage) -> Option<IpNet> {
    use netlink_packet_route::route::RouteAddress;
    let len = r.header.destination_prefix_length;
    let addr = r.attributes.iter().find_map(|a| match a {
        RouteAttribute::Destination(RouteAddress::Inet(a)) => Some(IpAddr::V4(*a)),
        RouteAttribute::Destination(RouteAddress::Inet6(a)) => Some(IpAddr::V6(*a)),
        _ => None,
    })?;
    IpNet::new(addr, len).ok()
}

fn route_nhid(r: &RouteMessage) -> Option<u32> {
    r.attributes.iter().find_map(|a| match a {
        RouteAttribute::NhId(id) => Some(*id),
        _ => None,
    })
}

#[async_trait]
impl Dataplane for KernelDataplane {
    fn name(&self) -> &'static str {
        NAME
    }

    fn limits(&self) -> GroupLimits {
        self.limits
    }

    async fn install(&mut self, group: &Group) -> Result<(), DataplaneError> {
        validate(group)?;
        if let Some(inst) = self.installed.get(&group.prefix) {
            // The same group again (a BGP re-advertisement, a restarted agent's static
            // groups): nothing to change.
            if inst.group == *group && inst.active.iter().all(|a| *a) {
                return Ok(());
            }
        }
        if group.mode == GroupMode::Flowlet {
            return Err(DataplaneError::InvalidGroup {
                prefix: group.prefix,
                why: NO_FLOWLETS.into(),
            });
        }
        let was_spray = self
            .installed
            .get(&group.prefix)
            .is_some_and(|i| i.group.mode == GroupMode::Spray);
        if group.mode == GroupMode::Spray && !was_spray {
            warn!(prefix = %group.prefix, "kernel backend: spray requested, the kernel spreads per flow");
        }
        if let Some(why) = self.limits.violation(&group.members) {
            return Err(DataplaneError::InvalidGroup {
                prefix: group.prefix,
                why: format!("kernel nexthop group: {why}"),
            });
        }
        let active = vec![true; group.members.len()];
        self.replace(group.clone(), active).await
    }

    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        let old = self
            .installed
            .remove(&prefix)
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        let msg = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(prefix.network(), prefix.prefix_len())
            .map_err(|e| err(format!("route {prefix}: {e}")))?
            .protocol(RouteProtocol::Other(RTPROT_FARE))
            .build();
        match self.routes.route().del(msg).execute().await {
            Ok(()) => {}
            // The kernel deletes a route itself when its last next hop's link goes down:
            // the route is gone, which is what was asked; its nexthop objects remain.
            Err(rtnetlink::Error::NetlinkError(e))
                if e.code.is_some_and(|c| c.get().abs() == libc::ESRCH) => {}
            Err(e) => return Err(err(format!("deleting route {prefix}: {e}"))),
        }
        let mut ids = vec![old.group_id];
        ids.extend(&old.member_ids);
        self.delete_ids(&ids).await;
        Ok(())
    }

    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
        let mut out = Vec::with_capacity(self.installed.len());
        for inst in self.installed.values() {
            let packets = self.packets(inst.group_id).await;
            let members = inst
                .member_ids
                .iter()
                .zip(&inst.active)
                .zip(&inst.carried)
                .map(|((id, &active), carried)| MemberStatus {
                    packets: carried + packets.get(id).copied().unwrap_or(0),
                    bytes: 0,
                    active,
                })
                .collect();
            out.push(GroupStatus {
                group: inst.group.clone(),
                members,
                colors: Vec::new(),
                fit: None,
                buckets: inst.buckets.clone(),
            });
        }
        Ok(out)
    }

    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError> {
        let inst = self
            .installed
            .get(&prefix)
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        fare_dataplane::keep_last_active(prefix, &inst.active, index, active)?;
        let mut states = inst.active.clone();
        states[index] = active;
        if states == inst.active {
            return Ok(());
        }
        let group = inst.group.clone();
        self.replace(group, states).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_limit_follows_the_kernel_release() {
        assert_eq!(release_version("6.18.44-fc-v509"), Some((6, 18)));
        assert_eq!(release_version("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(release_version("6.12"), Some((6, 12)));
        assert_eq!(release_version("garbage"), None);
        let w = |r: Option<&str>| kernel_limits(r).max_member_weight;
        assert_eq!(w(Some("6.12.0")), Some(65536));
        assert_eq!(w(Some("7.0.1")), Some(65536));
        assert_eq!(w(Some("6.11.9")), Some(256));
        assert_eq!(w(Some("5.15.0-91-generic")), Some(256));
        assert_eq!(w(None), Some(256));
        // (65535 - 4) / 8 entries of 8 octets fit one NHA_GROUP attribute.
        assert_eq!(kernel_limits(None).max_members, Some(8191));
        assert_eq!(kernel_limits(None).max_size, None);
    }
}
