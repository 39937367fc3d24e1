//! ARN reception: admission (configured neighbor, arrival interface, TTL 255, rate limit),
//! mapping (sender, Path ID) to group members (docs/CODEPOINTS.md "Path ID semantics"),
//! removal and restoration of those members through [`MemberControl`], timeout restore,
//! and reconciliation after the control plane re-installs groups.
//!
//! Everything rejected is counted in [`Counters`] and otherwise ignored.

use super::codec::{ArnMessage, ArnType, FlowId};
use super::config::{path_covers, ArnConfig, ArnNeighbor, RateLimit};
use super::transport::{self, ArnSocket, Datagram, TTL};
use async_trait::async_trait;
use fare_model::forwarding::{GroupStatus, Member, MemberError};
use ipnet::IpNet;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// A failure reported by the data plane side of the seam.
/// Why the data plane did not do what the receiver asked.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The member is the last one forwarding for its prefix (the rule is
    /// [`fare_model::forwarding::keep_last_active`]): kept, and counted as such.
    #[error(transparent)]
    LastActiveMember(MemberError),
    /// Anything else (a backend failure, the data plane task gone).
    #[error("{0}")]
    Failed(String),
}

impl From<MemberError> for ControlError {
    fn from(e: MemberError) -> Self {
        match e {
            e @ MemberError::LastActiveMember { .. } => ControlError::LastActiveMember(e),
            e => ControlError::Failed(e.to_string()),
        }
    }
}

/// What the receiver needs from the data plane: the installed groups and the per-member
/// on/off switch. Every data plane provides it (`fare-dataplane`: `dyn Dataplane`); the
/// agent plugs in its handle.
#[async_trait]
pub trait MemberControl: Send {
    async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError>;
    /// Switches member `index` of `prefix` — the member whose `via` is `via`, wherever
    /// it is in the group installed now (refused with `NoSuchMember` when it left).
    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        via: &str,
        active: bool,
    ) -> Result<(), ControlError>;
    /// ARN per-flow mode: flows matching `flow` avoid `interface` (or may use it again).
    /// Ok(false): the data plane cannot steer single flows.
    async fn steer_flow(
        &mut self,
        flow: &FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, ControlError> {
        let _ = (flow, interface, avoid);
        Ok(false)
    }
}

/// Receiver counters (shared with the agent's management API and metrics).
#[derive(Debug, Default)]
pub struct Counters {
    /// Datagrams read from the socket.
    pub received: AtomicU64,
    /// Passed every check and decoded.
    pub accepted: AtomicU64,
    /// Source address is no configured ARN neighbor.
    pub dropped_not_neighbor: AtomicU64,
    /// From a neighbor's address but over another interface.
    pub dropped_wrong_interface: AtomicU64,
    /// TTL / hop limit was not 255 (or unknown).
    pub dropped_ttl: AtomicU64,
    /// Over the sender's rate limit.
    pub dropped_rate: AtomicU64,
    /// Did not decode.
    pub malformed: AtomicU64,
    pub by_type: [AtomicU64; 4],
    /// Members switched off / back on.
    pub members_removed: AtomicU64,
    pub members_restored: AtomicU64,
    /// Removals that ended by timeout (no Type 2/4 arrived in `hold_ms`).
    pub expired: AtomicU64,
    /// Removals refused because the member was the last active one of its group.
    pub refused_last_member: AtomicU64,
    /// Removals the data plane failed to carry out for another reason (logged).
    pub backend_errors: AtomicU64,
    /// Removals dropped because a re-installed group no longer has that path.
    pub stale_dropped: AtomicU64,
    /// ARNs that matched no member.
    pub unmatched: AtomicU64,
    /// Per-flow mode: flows steered off a port / released (Type 2/4 or timeout).
    pub flows_steered: AtomicU64,
    pub flows_released: AtomicU64,
    /// ARNs passed on upstream because no alternative was left here.
    pub propagated: AtomicU64,
}

/// A plain copy of [`Counters`] for display and JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CountersSnapshot {
    pub received: u64,
    pub accepted: u64,
    pub dropped_not_neighbor: u64,
    pub dropped_wrong_interface: u64,
    pub dropped_ttl: u64,
    pub dropped_rate: u64,
    pub malformed: u64,
    pub type1: u64,
    pub type2: u64,
    pub type3: u64,
    pub type4: u64,
    pub members_removed: u64,
    pub members_restored: u64,
    pub expired: u64,
    pub refused_last_member: u64,
    pub backend_errors: u64,
    pub stale_dropped: u64,
    pub unmatched: u64,
    pub flows_steered: u64,
    pub flows_released: u64,
    pub propagated: u64,
}

impl Counters {
    pub fn snapshot(&self) -> CountersSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CountersSnapshot {
            received: g(&self.received),
            accepted: g(&self.accepted),
            dropped_not_neighbor: g(&self.dropped_not_neighbor),
            dropped_wrong_interface: g(&self.dropped_wrong_interface),
            dropped_ttl: g(&self.dropped_ttl),
            dropped_rate: g(&self.dropped_rate),
            malformed: g(&self.malformed),
            type1: g(&self.by_type[0]),
            type2: g(&self.by_type[1]),
            type3: g(&self.by_type[2]),
            type4: g(&self.by_type[3]),
            members_removed: g(&self.members_removed),
            members_restored: g(&self.members_restored),
            expired: g(&self.expired),
            refused_last_member: g(&self.refused_last_member),
            backend_errors: g(&self.backend_errors),
            stale_dropped: g(&self.stale_dropped),
            unmatched: g(&self.unmatched),
            flows_steered: g(&self.flows_steered),
            flows_released: g(&self.flows_released),
            propagated: g(&self.propagated),
        }
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Why a datagram was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    NotNeighbor,
    WrongInterface { ifindex: Option<u32> },
    Ttl(Option<u8>),
    RateLimited,
    Malformed(super::codec::DecodeError),
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::NotNeighbor => f.write_str("not a configured ARN neighbor"),
            Rejection::WrongInterface { ifindex } => {
                write!(f, "arrived on the wrong interface (ifindex {ifindex:?})")
            }
            Rejection::Ttl(t) => write!(f, "TTL/hop limit {t:?}, expected 255"),
            Rejection::RateLimited => f.write_str("over the rate limit"),
            Rejection::Malformed(e) => write!(f, "malformed: {e}"),
        }
    }
}

/// Why a member is out: the condition (congestion or failure) and the Path ID named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Cause {
    failure: bool,
    path_id: u32,
}

impl Cause {
    fn of(msg: &ArnMessage) -> Cause {
        Cause {
            failure: matches!(
                msg.kind,
                ArnType::FailureDetected | ArnType::FailureEliminated
            ),
            path_id: msg.path_id.unwrap_or(0),
        }
    }
}

/// A member taken out by ARN: group prefix + the sender it points to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct RemovalKey {
    prefix: IpNet,
    sender: IpAddr,
}

#[derive(Clone, Debug)]
struct Removal {
    index: usize,
    /// The member's `via`: the data plane switches the member that has it, wherever it
    /// is in the group installed by then.
    via: String,
    /// Every condition that keeps the member out, with its expiry.
    causes: BTreeMap<Cause, Instant>,
    /// When the member went out, and the Metric of the latest ARN that kept it out.
    since: Instant,
    metric: u8,
}

/// A member held out by ARN, as `fare show arn` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovedMember {
    pub prefix: IpNet,
    pub index: usize,
    /// The ARN sender (the member's next hop).
    pub sender: IpAddr,
    pub since: Instant,
    pub metric: u8,
    /// Every condition keeping it out: (failure?, Path ID, expiry).
    pub causes: Vec<RemovalCause>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemovalCause {
    /// Type 3 (link failure) rather than Type 1 (congestion).
    pub failure: bool,
    pub path_id: u32,
    pub expires: Instant,
}

impl RemovedMember {
    /// `congestion (path 10.0.0.2, metric 200) from 10.1.0.2` for tables and logs.
    pub fn reason(&self) -> String {
        let causes: Vec<String> = self
            .causes
            .iter()
            .map(|c| {
                format!(
                    "{} path {}",
                    if c.failure { "failure" } else { "congestion" },
                    std::net::Ipv4Addr::from(c.path_id)
                )
            })
            .collect();
        format!(
            "ARN {} (metric {}) from {}",
            causes.join(", "),
            self.metric,
            self.sender
        )
    }
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

/// One accepted neighbor with its resolved interface index.
#[derive(Clone, Debug)]
struct Neighbor {
    address: IpAddr,
    interface: String,
    ifindex: u32,
}

/// One change the receiver made to the data plane (for logs, tests and benchmarks).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberChange {
    pub prefix: IpNet,
    pub index: usize,
    pub active: bool,
    pub sender: IpAddr,
}

/// A flow the data plane keeps off the port toward `sender` until `expires`.
#[derive(Clone, Debug)]
struct SteeredFlow {
    sender: IpAddr,
    flow: FlowId,
    interface: String,
    expires: Instant,
}

/// The receiver's state machine; [`run`] drives it from sockets and timers.
pub struct Receiver {
    neighbors: Vec<Neighbor>,
    paths: BTreeMap<u32, Vec<IpNet>>,
    hold: Duration,
    rate: RateLimit,
    buckets: HashMap<IpAddr, Bucket>,
    removals: BTreeMap<RemovalKey, Removal>,
    /// Per-flow mode: flows the data plane steers off the port toward their sender.
    steered: Vec<SteeredFlow>,
    /// UDP port ARNs go to (propagation).
    port: u16,
    /// Propagation upstream: off, or the refresh period that limits repeats.
    propagate: Option<Duration>,
    /// ARN conditions passed on, by (sender, Path ID, failure?) -> when last sent.
    propagated: HashMap<(IpAddr, u32, bool), Instant>,
    /// ARNs to send, with their destinations; [`run`] sends them.
    outbox: Vec<(ArnMessage, Vec<IpAddr>)>,
    counters: Arc<Counters>,
    /// A copy of the removals for readers outside the receiver task (management API).
    published: Arc<std::sync::RwLock<Vec<RemovedMember>>>,
}

impl Receiver {
    /// `extra_neighbors` are the BGP neighbors that name an interface (the agent adds them).
    pub fn new(config: &ArnConfig, extra_neighbors: &[ArnNeighbor]) -> Receiver {
        let neighbors: Vec<Neighbor> = config
            .accepted_neighbors(extra_neighbors)
            .into_iter()
            .map(|n| Neighbor {
                address: n.address,
                ifindex: transport::ifindex(&n.interface),
                interface: n.interface,
            })
            .collect();
        let paths = config.path_table();
        Receiver {
            neighbors,
            paths,
            hold: config.hold(),
            rate: config.rate_limit,
            buckets: HashMap::new(),
            removals: BTreeMap::new(),
            steered: Vec::new(),
            port: config.udp_port,
            propagate: config.propagate.then(|| config.refresh()),
            propagated: HashMap::new(),
            outbox: Vec::new(),
            counters: Arc::new(Counters::default()),
            published: Arc::default(),
        }
    }

    /// Where [`run`] keeps a copy of [`Receiver::removed_members`] up to date.
    pub fn published(&self) -> Arc<std::sync::RwLock<Vec<RemovedMember>>> {
        self.published.clone()
    }

    fn publish(&self) {
        let now = self.removed_members();
        let mut p = self.published.write().unwrap_or_else(|e| e.into_inner());
        if *p != now {
            *p = now;
        }
    }

    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Admission: the datagram must come from a configured neighbor address, over that
    /// neighbor's interface, with TTL / hop limit 255, within the rate limit, and decode.
    pub fn admit(
        &mut self,
        d: &Datagram,
        payload: &[u8],
        now: Instant,
    ) -> Result<(IpAddr, ArnMessage), Rejection> {
        let c = &self.counters;
        bump(&c.received);
        let sender = canonical(d.from.ip());
        let Some(n) = self.neighbors.iter_mut().find(|n| n.address == sender) else {
            bump(&c.dropped_not_neighbor);
            return Err(Rejection::NotNeighbor);
        };
        if n.ifindex == 0 {
            n.ifindex = transport::ifindex(&n.interface);
        }
        if d.ifindex != Some(n.ifindex) {
            bump(&c.dropped_wrong_interface);
            return Err(Rejection::WrongInterface { ifindex: d.ifindex });
        }
        if d.ttl != Some(TTL) {
            bump(&c.dropped_ttl);
            return Err(Rejection::Ttl(d.ttl));
        }
        let rate = self.rate;
        let bucket = self.buckets.entry(sender).or_insert(Bucket {
            tokens: f64::from(rate.burst.max(1)),
            last: now,
        });
        let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * f64::from(rate.per_second))
            .min(f64::from(rate.burst.max(1)));
        bucket.last = now;
        if bucket.tokens < 1.0 {
            bump(&c.dropped_rate);
            return Err(Rejection::RateLimited);
        }
        bucket.tokens -= 1.0;
        // A payload longer than the buffer was cut: the length check in decode catches it.
        let msg = if d.len > payload.len() {
            Err(super::codec::DecodeError {
                offset: payload.len(),
                field: "trailing",
                problem: super::codec::Problem::Invalid(format!(
                    "datagram of {} octets is longer than any ARN",
                    d.len
                )),
            })
        } else {
            ArnMessage::decode(payload)
        };
        match msg {
            Ok(m) => {
                bump(&c.accepted);
                bump(&c.by_type[usize::from(m.kind.code() - 1)]);
                Ok((sender, m))
            }
            Err(e) => {
                bump(&c.malformed);
                Err(Rejection::Malformed(e))
            }
        }
    }

    /// The (prefix, member index) pairs an ARN from `sender` designates in `groups`.
    fn targets(
        &self,
        sender: IpAddr,
        msg: &ArnMessage,
        groups: &[GroupStatus],
    ) -> Vec<(IpNet, usize, String)> {
        let Some(neighbor) = self.neighbors.iter().find(|n| n.address == sender) else {
            return Vec::new();
        };
        // A Path ID names the prefixes behind one path; an ID this node does not list (a
        // path it no longer has) designates nothing, never every path toward the sender.
        let behind: Option<&Vec<IpNet>> = match msg.path_id.filter(|id| *id != 0) {
            None => None,
            Some(id) => match self.paths.get(&id) {
                Some(list) => Some(list),
                None if self.paths.is_empty() => None,
                None => return Vec::new(),
            },
        };
        let flow_dst = msg.flow.as_ref().and_then(|f| f.dst);
        let mut out = Vec::new();
        for g in groups {
            let prefix = g.group.prefix;
            if let Some(list) = behind {
                if !path_covers(list, &prefix) {
                    continue;
                }
            }
            if let Some(dst) = flow_dst {
                if !prefix.contains(&dst) {
                    continue;
                }
            }
            if let Some(i) = member_toward(&g.group.members, neighbor) {
                out.push((prefix, i, g.group.members[i].via.clone()));
            }
        }
        out
    }

    /// Per-flow mode: an ARN with a flow identifier steers only the matching flows off
    /// the port toward the sender, when the data plane can (XDP); None = it cannot (or
    /// this flow was not steered), the member path below handles the ARN.
    async fn apply_flow<C: MemberControl + ?Sized>(
        &mut self,
        control: &mut C,
        sender: IpAddr,
        msg: &ArnMessage,
        now: Instant,
    ) -> Option<Vec<MemberChange>> {
        let flow = msg.flow.as_ref()?;
        let pos = self
            .steered
            .iter()
            .position(|s| s.sender == sender && s.flow == *flow);
        if !msg.kind.removes() {
            let s = self.steered.remove(pos?);
            if let Err(e) = control.steer_flow(&s.flow, &s.interface, false).await {
                warn!(error = %e, "ARN: releasing a steered flow failed");
            }
            bump(&self.counters.flows_released);
            info!(%sender, interface = %s.interface, %msg, "ARN: flow released");
            return Some(Vec::new());
        }
        if let Some(i) = pos {
            self.steered[i].expires = now + self.hold; // refreshed
            return Some(Vec::new());
        }
        let interface = self
            .neighbors
            .iter()
            .find(|n| n.address == sender)
            .map(|n| n.interface.clone())
            .filter(|i| !i.is_empty())?;
        match control.steer_flow(flow, &interface, true).await {
            Ok(true) => {
                bump(&self.counters.flows_steered);
                info!(%sender, %interface, %msg, "ARN: flow steered off the port toward the sender");
                self.steered.push(SteeredFlow {
                    sender,
                    flow: flow.clone(),
                    interface,
                    expires: now + self.hold,
                });
                Some(Vec::new())
            }
            Ok(false) => None,
            Err(e) => {
                warn!(error = %e, "ARN: flow steering failed; removing the member instead");
                None
            }
        }
    }

    /// Applies one accepted ARN; returns the member changes made.
    pub async fn apply<C: MemberControl + ?Sized>(
        &mut self,
        control: &mut C,
        sender: IpAddr,
        msg: &ArnMessage,
        now: Instant,
    ) -> Vec<MemberChange> {
        if let Some(changes) = self.apply_flow(control, sender, msg, now).await {
            return changes;
        }
        let groups = match control.groups().await {
            Ok(g) => g,
            Err(e) => {
                warn!(error = %e, "ARN: cannot read groups");
                return Vec::new();
            }
        };
        let targets = self.targets(sender, msg, &groups);
        if targets.is_empty() {
            bump(&self.counters.unmatched);
            debug!(%sender, %msg, "ARN matched no group member");
        }
        let cause = Cause::of(msg);
        let mut changes = Vec::new();
        let mut refused = false;
        for (prefix, index, via) in targets {
            let key = RemovalKey { prefix, sender };
            if msg.kind.removes() {
                let expires = now + self.hold;
                if let Some(r) = self.removals.get_mut(&key) {
                    r.causes.insert(cause, expires);
                    r.metric = msg.metric;
                    continue; // already out: refreshed
                }
                match control.set_member_active(prefix, index, &via, false).await {
                    Ok(()) => {
                        bump(&self.counters.members_removed);
                        self.removals.insert(
                            key,
                            Removal {
                                index,
                                via: via.clone(),
                                causes: BTreeMap::from([(cause, expires)]),
                                since: now,
                                metric: msg.metric,
                            },
                        );
                        changes.push(MemberChange {
                            prefix,
                            index,
                            active: false,
                            sender,
                        });
                    }
                    Err(ControlError::LastActiveMember(_)) => {
                        bump(&self.counters.refused_last_member);
                        refused = true;
                        info!(%prefix, index, "ARN: member kept (no alternative left)");
                    }
                    Err(e) => {
                        bump(&self.counters.backend_errors);
                        refused = true;
                        warn!(%prefix, index, error = %e, "ARN: the data plane failed to take the member out");
                    }
                }
            } else if let Some(r) = self.removals.get_mut(&key) {
                // Revocation: Path ID 0 / absent revokes every cause of that condition kind.
                r.causes.retain(|c, _| {
                    !(c.failure == cause.failure
                        && (cause.path_id == 0 || c.path_id == cause.path_id))
                });
                if r.causes.is_empty() {
                    let (index, via) = (r.index, r.via.clone());
                    self.removals.remove(&key);
                    if self.restore(control, prefix, index, &via).await {
                        changes.push(MemberChange {
                            prefix,
                            index,
                            active: true,
                            sender,
                        });
                    }
                }
            }
        }
        self.plan_propagation(sender, msg, refused, now);
        changes
    }

    /// Propagation upstream: a Type 1/3 this node could not act on (no alternative to the
    /// member toward the sender) goes on, unchanged, to every other ARN neighbor (at most
    /// once per refresh period per condition); the matching Type 2/4 follows it.
    fn plan_propagation(&mut self, sender: IpAddr, msg: &ArnMessage, refused: bool, now: Instant) {
        let Some(refresh) = self.propagate else {
            return;
        };
        let path_id = msg.path_id.unwrap_or(0);
        let key = (sender, path_id, Cause::of(msg).failure);
        if msg.kind.removes() {
            // Only a Path ID this node knows the prefixes of: an unlisted one matches
            // every member toward the sender, and passing that on can come back around
            // the fabric.
            if !refused || !self.paths.contains_key(&path_id) {
                return;
            }
            if self
                .propagated
                .get(&key)
                .is_some_and(|t| now.duration_since(*t) < refresh)
            {
                return;
            }
            self.propagated.insert(key, now);
        } else if self.propagated.remove(&key).is_none() {
            return;
        }
        let to: Vec<IpAddr> = self
            .neighbors
            .iter()
            .map(|n| n.address)
            .filter(|a| *a != sender)
            .collect();
        if to.is_empty() {
            return;
        }
        bump(&self.counters.propagated);
        info!(%sender, %msg, to = ?to, "ARN propagated upstream (no alternative here)");
        self.outbox.push((msg.clone(), to));
    }

    /// The ARNs to send now (see `plan_propagation`).
    pub fn take_outbox(&mut self) -> Vec<(ArnMessage, Vec<IpAddr>)> {
        std::mem::take(&mut self.outbox)
    }

    async fn restore<C: MemberControl + ?Sized>(
        &self,
        control: &mut C,
        prefix: IpNet,
        index: usize,
        via: &str,
    ) -> bool {
        match control.set_member_active(prefix, index, via, true).await {
            Ok(()) => {
                bump(&self.counters.members_restored);
                true
            }
            Err(e) => {
                warn!(%prefix, index, error = %e, "ARN: cannot restore member");
                false
            }
        }
    }

    /// Restores members whose every cause has expired (no Type 2/4 arrived in time).
    pub async fn expire<C: MemberControl + ?Sized>(
        &mut self,
        control: &mut C,
        now: Instant,
    ) -> Vec<MemberChange> {
        let (over, kept): (Vec<SteeredFlow>, Vec<SteeredFlow>) = std::mem::take(&mut self.steered)
            .into_iter()
            .partition(|s| s.expires <= now);
        self.steered = kept;
        for s in over {
            bump(&self.counters.flows_released);
            info!(sender = %s.sender, interface = %s.interface, "ARN flow steering timed out: flow released");
            if let Err(e) = control.steer_flow(&s.flow, &s.interface, false).await {
                warn!(error = %e, "ARN: releasing a steered flow failed");
            }
        }
        let mut done = Vec::new();
        for (key, r) in self.removals.iter_mut() {
            r.causes.retain(|_, expires| *expires > now);
            if r.causes.is_empty() {
                done.push((key.clone(), r.index, r.via.clone()));
            }
        }
        let mut changes = Vec::new();
        for (key, index, via) in done {
            self.removals.remove(&key);
            bump(&self.counters.expired);
            info!(prefix = %key.prefix, index, sender = %key.sender, "ARN removal timed out: member restored");
            if self.restore(control, key.prefix, index, &via).await {
                changes.push(MemberChange {
                    prefix: key.prefix,
                    index,
                    active: true,
                    sender: key.sender,
                });
            }
        }
        changes
    }

    /// After the control plane re-installed groups (BGP converged): removals whose group or
    /// member toward the sender is gone are dropped; the others are applied again at the
    /// member's current index (a fresh install has every member active).
    pub async fn reconcile<C: MemberControl + ?Sized>(&mut self, control: &mut C) {
        let Ok(groups) = control.groups().await else {
            return;
        };
        let keys: Vec<RemovalKey> = self.removals.keys().cloned().collect();
        for key in keys {
            let neighbor = self
                .neighbors
                .iter()
                .find(|n| n.address == key.sender)
                .cloned();
            let found = groups
                .iter()
                .find(|g| g.group.prefix == key.prefix)
                .and_then(|g| {
                    neighbor
                        .as_ref()
                        .and_then(|n| member_toward(&g.group.members, n))
                        .map(|i| {
                            let active = g.members.get(i).is_none_or(|s| s.active);
                            (i, g.group.members[i].via.clone(), active)
                        })
                });
            match found {
                None => {
                    self.removals.remove(&key);
                    bump(&self.counters.stale_dropped);
                    info!(prefix = %key.prefix, sender = %key.sender, "ARN removal dropped: path no longer installed");
                }
                Some((index, via, active)) => {
                    if let Some(r) = self.removals.get_mut(&key) {
                        r.index = index;
                        r.via = via.clone();
                    }
                    if active {
                        if let Err(e) = control
                            .set_member_active(key.prefix, index, &via, false)
                            .await
                        {
                            self.removals.remove(&key);
                            match e {
                                ControlError::LastActiveMember(_) => {
                                    bump(&self.counters.refused_last_member)
                                }
                                _ => bump(&self.counters.backend_errors),
                            }
                            info!(prefix = %key.prefix, error = %e, "ARN removal dropped after re-install");
                        }
                    }
                }
            }
        }
    }

    /// Members currently held out by ARN, with why and until when.
    pub fn removed_members(&self) -> Vec<RemovedMember> {
        self.removals
            .iter()
            .map(|(k, r)| RemovedMember {
                prefix: k.prefix,
                index: r.index,
                sender: k.sender,
                since: r.since,
                metric: r.metric,
                causes: r
                    .causes
                    .iter()
                    .map(|(c, expires)| RemovalCause {
                        failure: c.failure,
                        path_id: c.path_id,
                        expires: *expires,
                    })
                    .collect(),
            })
            .collect()
    }

    /// Members currently held out by ARN: (prefix, index, sender).
    pub fn removed(&self) -> Vec<(IpNet, usize, IpAddr)> {
        self.removals
            .iter()
            .map(|(k, r)| (k.prefix, r.index, k.sender))
            .collect()
    }
}

/// IPv4-mapped IPv6 senders compare as IPv4.
fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    }
}

/// The member of a group that egresses toward `n`: by next hop / `via` address first,
/// else, for static members (which know only a MAC), by interface.
fn member_toward(members: &[Member], n: &Neighbor) -> Option<usize> {
    member_toward_address(members, n.address, &n.interface)
}

/// The member that egresses toward the neighbor `address` on `interface` (its next hop,
/// else a static member on that interface). The XDP program's table uses the same rule.
pub fn member_toward_address(
    members: &[Member],
    address: IpAddr,
    interface: &str,
) -> Option<usize> {
    let addr = address.to_string();
    members
        .iter()
        .position(|m| m.next_hop == Some(address) || m.via == addr)
        .or_else(|| {
            members.iter().position(|m| {
                m.interface == interface && m.next_hop.is_none() && m.via.parse::<IpAddr>().is_err()
            })
        })
}

/// What [`run`] reports for every datagram (for `fare arn listen` and tests).
#[derive(Clone, Debug, Serialize)]
pub struct ReceiverEvent {
    pub from: IpAddr,
    pub ttl: Option<u8>,
    /// The decoded message (as `fare arn decode --json`) when accepted.
    pub message: Option<super::codec::ArnJson>,
    /// Why it was dropped, when it was.
    pub dropped: Option<String>,
    pub changes: Vec<MemberChange>,
}

/// Receives on `sockets` until `stop` resolves: admits, applies, expires and reconciles.
/// `groups_changed` is notified by the control plane after it installs groups.
pub async fn run<C: MemberControl + ?Sized>(
    mut receiver: Receiver,
    sockets: Vec<ArnSocket>,
    control: &mut C,
    groups_changed: Arc<tokio::sync::Notify>,
    events: Option<tokio::sync::mpsc::UnboundedSender<ReceiverEvent>>,
    stop: impl std::future::Future<Output = ()>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Datagram, Vec<u8>)>(1024);
    let mut readers = tokio::task::JoinSet::new();
    for socket in sockets {
        let tx = tx.clone();
        readers.spawn(async move {
            let mut buf = [0u8; 2048];
            loop {
                match socket.recv(&mut buf).await {
                    Ok(d) => {
                        let n = d.len.min(buf.len());
                        if tx.send((d, buf[..n].to_vec())).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        warn!(error = %e, "ARN socket receive failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
    }
    drop(tx);
    // Propagated ARNs leave with the ARN options (TTL 255, CS6) to the receive port.
    let outgoing = match transport::BlockingSender::new(receiver.port) {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(error = %e, "no socket to propagate ARNs from");
            None
        }
    };
    let tick = (receiver.hold / 10).clamp(Duration::from_millis(1), Duration::from_millis(50));
    let mut timer = tokio::time::interval(tick);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some((d, payload)) = rx.recv() => {
                let now = Instant::now();
                let (message, dropped, changes) = match receiver.admit(&d, &payload[..payload.len().min(super::codec::MAX_LEN)], now) {
                    Ok((sender, msg)) => {
                        debug!(%sender, %msg, "ARN accepted");
                        let changes = receiver.apply(control, sender, &msg, now).await;
                        if !changes.is_empty() {
                            info!(%sender, %msg, changes = changes.len(), "ARN applied");
                        }
                        (Some((&msg).into()), None, changes)
                    }
                    Err(why) => {
                        debug!(from = %d.from, %why, "ARN dropped");
                        (None, Some(why.to_string()), Vec::new())
                    }
                };
                if let Some(tx) = &events {
                    let _ = tx.send(ReceiverEvent { from: d.from.ip(), ttl: d.ttl, message, dropped, changes });
                }
                for (msg, to) in receiver.take_outbox() {
                    if let Some(sender) = &outgoing {
                        sender.send(&msg, &to);
                    }
                }
            }
            _ = timer.tick() => {
                let changes = receiver.expire(control, Instant::now()).await;
                if let (Some(tx), false) = (&events, changes.is_empty()) {
                    for c in changes {
                        let _ = tx.send(ReceiverEvent { from: c.sender, ttl: None, message: None, dropped: None, changes: vec![c] });
                    }
                }
            }
            _ = groups_changed.notified() => {
                receiver.reconcile(control).await;
            }
        }
        receiver.publish();
    }
    readers.abort_all();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PathPrefixes;
    use fare_model::forwarding::{keep_last_active, Group, GroupMode, MemberStatus};
    use std::collections::BTreeMap;

    /// Groups in memory under the data planes' last-member rule: what the receiver
    /// switches in these tests (the real data planes have their own tests).
    #[derive(Default)]
    struct NullDataplane(BTreeMap<IpNet, GroupStatus>);

    impl NullDataplane {
        async fn install(&mut self, group: &Group) -> Result<(), ControlError> {
            let members = vec![
                MemberStatus {
                    active: true,
                    ..Default::default()
                };
                group.members.len()
            ];
            let status = GroupStatus {
                group: group.clone(),
                members,
                colors: Vec::new(),
                fit: None,
            };
            self.0.insert(group.prefix, status);
            Ok(())
        }
    }

    #[async_trait]
    impl MemberControl for NullDataplane {
        async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError> {
            Ok(self.0.values().cloned().collect())
        }

        async fn set_member_active(
            &mut self,
            prefix: IpNet,
            index: usize,
            via: &str,
            active: bool,
        ) -> Result<(), ControlError> {
            let status = self
                .0
                .get_mut(&prefix)
                .ok_or_else(|| ControlError::Failed(format!("no group for {prefix}")))?;
            let vias = status.group.members.iter().map(|m| m.via.as_str());
            let index = fare_model::forwarding::member_now(prefix, index, Some(via), Some(vias))?;
            let states: Vec<bool> = status.members.iter().map(|m| m.active).collect();
            keep_last_active(prefix, &states, index, active)?;
            status.members[index].active = active;
            Ok(())
        }
    }
    use std::net::{Ipv4Addr, SocketAddr};

    const S1: &str = "10.1.0.2";
    const S2: &str = "10.1.1.2";
    const LEAF2: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn member(via: &str, interface: &str) -> Member {
        Member {
            via: via.into(),
            interface: interface.into(),
            next_hop: Some(via.parse().unwrap()),
            neighbor_mac: None,
            weight: 1,
            bandwidth_gbps: 100.0,
        }
    }

    fn group(prefix: &str) -> Group {
        Group {
            prefix: prefix.parse().unwrap(),
            mode: GroupMode::Spray,
            members: vec![member(S1, "lo"), member(S2, "lo")],
        }
    }

    fn config() -> ArnConfig {
        ArnConfig {
            neighbors: vec![
                ArnNeighbor {
                    address: S1.parse().unwrap(),
                    interface: "lo".into(),
                },
                ArnNeighbor {
                    address: S2.parse().unwrap(),
                    interface: "lo".into(),
                },
            ],
            paths: vec![PathPrefixes {
                path_id: LEAF2,
                prefixes: vec!["192.0.2.0/24".parse().unwrap()],
            }],
            hold_ms: 100,
            rate_limit: RateLimit {
                per_second: 10,
                burst: 3,
            },
            ..ArnConfig::default()
        }
    }

    fn datagram(from: &str, ttl: u8) -> Datagram {
        Datagram {
            len: 8,
            from: SocketAddr::new(from.parse().unwrap(), 40000),
            ttl: Some(ttl),
            ifindex: Some(transport::ifindex("lo")),
            dst: None,
        }
    }

    async fn setup() -> (Receiver, NullDataplane) {
        let mut dp = NullDataplane::default();
        dp.install(&group("192.0.2.0/24")).await.unwrap();
        dp.install(&group("198.51.100.0/24")).await.unwrap();
        (Receiver::new(&config(), &[]), dp)
    }

    async fn active(dp: &mut NullDataplane, prefix: &str) -> Vec<bool> {
        let p: IpNet = prefix.parse().unwrap();
        MemberControl::groups(dp)
            .await
            .unwrap()
            .into_iter()
            .find(|g| g.group.prefix == p)
            .unwrap()
            .members
            .iter()
            .map(|m| m.active)
            .collect()
    }

    #[test]
    fn admission_checks_neighbor_ttl_interface_rate_and_format() {
        let mut r = Receiver::new(&config(), &[]);
        let now = Instant::now();
        let good = ArnMessage::path(ArnType::CongestionDetected, 9, LEAF2.into())
            .encode()
            .unwrap();
        assert!(r.admit(&datagram(S1, 255), &good, now).is_ok());
        assert_eq!(
            r.admit(&datagram("10.9.9.9", 255), &good, now),
            Err(Rejection::NotNeighbor)
        );
        assert_eq!(
            r.admit(&datagram(S1, 254), &good, now),
            Err(Rejection::Ttl(Some(254)))
        );
        let mut wrong_if = datagram(S1, 255);
        wrong_if.ifindex = Some(9999);
        assert!(matches!(
            r.admit(&wrong_if, &good, now),
            Err(Rejection::WrongInterface { .. })
        ));
        assert!(matches!(
            r.admit(&datagram(S1, 255), &good[..5], now),
            Err(Rejection::Malformed(_))
        ));
        // burst 3: two more pass (one token went to the malformed one), then rate limited
        assert!(r.admit(&datagram(S1, 255), &good, now).is_ok());
        assert_eq!(
            r.admit(&datagram(S1, 255), &good, now),
            Err(Rejection::RateLimited)
        );
        // tokens come back with time
        assert!(r
            .admit(&datagram(S1, 255), &good, now + Duration::from_millis(200))
            .is_ok());
        let c = r.counters().snapshot();
        assert_eq!(
            (
                c.received,
                c.accepted,
                c.dropped_not_neighbor,
                c.dropped_ttl
            ),
            (8, 3, 1, 1)
        );
        assert_eq!(
            (
                c.dropped_wrong_interface,
                c.malformed,
                c.dropped_rate,
                c.type1
            ),
            (1, 1, 1, 3)
        );
    }

    #[tokio::test]
    async fn congestion_removes_only_members_toward_sender_behind_path_then_restores() {
        let (mut r, mut dp) = setup().await;
        let s1: IpAddr = S1.parse().unwrap();
        let now = Instant::now();
        let up = ArnMessage::path(ArnType::CongestionDetected, 200, LEAF2.into());
        let changes = r.apply(&mut dp, s1, &up, now).await;
        assert_eq!(changes.len(), 1);
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![false, true]);
        // the other prefix is not behind leaf2
        assert_eq!(active(&mut dp, "198.51.100.0/24").await, vec![true, true]);
        let down = ArnMessage::path(ArnType::CongestionEliminated, 0, LEAF2.into());
        let changes = r.apply(&mut dp, s1, &down, now).await;
        assert_eq!(changes.len(), 1);
        assert!(changes[0].active);
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, true]);
    }

    #[tokio::test]
    async fn path_id_zero_means_every_group_via_sender() {
        let (mut r, mut dp) = setup().await;
        let s2: IpAddr = S2.parse().unwrap();
        let m = ArnMessage::path(ArnType::FailureDetected, 0, 0);
        r.apply(&mut dp, s2, &m, Instant::now()).await;
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, false]);
        assert_eq!(active(&mut dp, "198.51.100.0/24").await, vec![true, false]);
        // congestion end does not revoke a failure
        let end = ArnMessage::path(ArnType::CongestionEliminated, 0, 0);
        r.apply(&mut dp, s2, &end, Instant::now()).await;
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, false]);
        let end = ArnMessage::path(ArnType::FailureEliminated, 0, 0);
        r.apply(&mut dp, s2, &end, Instant::now()).await;
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, true]);
    }

    #[tokio::test]
    async fn last_member_is_never_removed() {
        let (mut r, mut dp) = setup().await;
        let now = Instant::now();
        let m = ArnMessage::path(ArnType::FailureDetected, 0, LEAF2.into());
        r.apply(&mut dp, S1.parse().unwrap(), &m, now).await;
        let changes = r.apply(&mut dp, S2.parse().unwrap(), &m, now).await;
        assert!(changes.is_empty());
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![false, true]);
        assert_eq!(r.counters().snapshot().refused_last_member, 1);
    }

    /// The race a live fabric hit: BGP re-installs a group (members reordered) between
    /// the receiver reading the groups and switching a member. The member toward the
    /// sender goes out, never the one that took its index.
    #[tokio::test]
    async fn a_group_reinstalled_meanwhile_never_loses_the_wrong_member() {
        struct Stale {
            dp: NullDataplane,
            seen: Vec<GroupStatus>,
        }
        #[async_trait]
        impl MemberControl for Stale {
            async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError> {
                Ok(self.seen.clone())
            }
            async fn set_member_active(
                &mut self,
                prefix: IpNet,
                index: usize,
                via: &str,
                active: bool,
            ) -> Result<(), ControlError> {
                MemberControl::set_member_active(&mut self.dp, prefix, index, via, active).await
            }
        }
        let (mut r, mut dp) = setup().await;
        let seen = MemberControl::groups(&mut dp).await.unwrap();
        // Re-installed as [S2, S1] after the receiver read [S1, S2].
        let mut g = group("192.0.2.0/24");
        g.members.reverse();
        dp.install(&g).await.unwrap();
        let mut stale = Stale { dp, seen };
        let m = ArnMessage::path(ArnType::FailureDetected, 0, LEAF2.into());
        r.apply(&mut stale, S1.parse().unwrap(), &m, Instant::now())
            .await;
        // [S2, S1]: S1 (now index 1) is out, S2 forwards.
        assert_eq!(
            active(&mut stale.dp, "192.0.2.0/24").await,
            vec![true, false]
        );
        // A member that left the group meanwhile is not switched at all.
        let (mut r, mut dp) = setup().await;
        let seen = MemberControl::groups(&mut dp).await.unwrap();
        let mut g = group("192.0.2.0/24");
        g.members.remove(0);
        g.members.push(member("192.0.2.99", "lo"));
        dp.install(&g).await.unwrap();
        let mut stale = Stale { dp, seen };
        r.apply(&mut stale, S1.parse().unwrap(), &m, Instant::now())
            .await;
        assert_eq!(
            active(&mut stale.dp, "192.0.2.0/24").await,
            vec![true, true]
        );
        assert_eq!(r.counters().snapshot().backend_errors, 1);
    }

    /// A Path ID this node does not list designates nothing (not every path toward the
    /// sender); Path ID 0 / absent still means every path toward it.
    #[tokio::test]
    async fn an_unlisted_path_id_moves_nothing() {
        let (mut r, mut dp) = setup().await;
        let s1: IpAddr = S1.parse().unwrap();
        let m = ArnMessage::path(ArnType::FailureDetected, 0, 4242);
        let changes = r.apply(&mut dp, s1, &m, Instant::now()).await;
        assert!(changes.is_empty(), "{changes:?}");
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, true]);
        assert_eq!(active(&mut dp, "198.51.100.0/24").await, vec![true, true]);
    }

    #[tokio::test]
    async fn removal_times_out_unless_refreshed() {
        let (mut r, mut dp) = setup().await;
        let t0 = Instant::now();
        let s1: IpAddr = S1.parse().unwrap();
        let m = ArnMessage::path(ArnType::CongestionDetected, 1, LEAF2.into());
        r.apply(&mut dp, s1, &m, t0).await;
        // refreshed at 80 ms: still out at 150 ms
        r.apply(&mut dp, s1, &m, t0 + Duration::from_millis(80))
            .await;
        assert!(r
            .expire(&mut dp, t0 + Duration::from_millis(150))
            .await
            .is_empty());
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![false, true]);
        let back = r.expire(&mut dp, t0 + Duration::from_millis(181)).await;
        assert_eq!(back.len(), 1);
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, true]);
        assert_eq!(r.counters().snapshot().expired, 1);
    }

    #[tokio::test]
    async fn reinstall_drops_stale_removals_and_keeps_live_ones() {
        let (mut r, mut dp) = setup().await;
        let now = Instant::now();
        let m = ArnMessage::path(ArnType::CongestionDetected, 1, 0);
        r.apply(&mut dp, S1.parse().unwrap(), &m, now).await;
        assert_eq!(r.removed().len(), 2);
        // BGP converged: 192.0.2.0/24 no longer goes via S1; 198.51.100.0/24 is
        // re-installed unchanged (fresh install = all members active).
        let mut g = group("192.0.2.0/24");
        g.members.remove(0);
        dp.install(&g).await.unwrap();
        dp.install(&group("198.51.100.0/24")).await.unwrap();
        r.reconcile(&mut dp).await;
        assert_eq!(r.removed().len(), 1);
        assert_eq!(r.counters().snapshot().stale_dropped, 1);
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true]);
        assert_eq!(active(&mut dp, "198.51.100.0/24").await, vec![false, true]);
    }

    #[tokio::test]
    async fn flow_arn_narrows_to_the_group_of_its_destination() {
        let (mut r, mut dp) = setup().await;
        let m = ArnMessage {
            kind: ArnType::CongestionDetected,
            metric: 5,
            flow: Some(crate::FlowId {
                dst: Some("198.51.100.7".parse().unwrap()),
                ..Default::default()
            }),
            path_id: None,
        };
        r.apply(&mut dp, S1.parse().unwrap(), &m, Instant::now())
            .await;
        assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, true]);
        assert_eq!(active(&mut dp, "198.51.100.0/24").await, vec![false, true]);
    }

    /// A data plane that steers flows (like XDP) over the NullDataplane's groups.
    struct Steering {
        dp: NullDataplane,
        calls: Vec<(FlowId, String, bool)>,
    }

    #[async_trait]
    impl MemberControl for Steering {
        async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError> {
            MemberControl::groups(&mut self.dp).await
        }
        async fn set_member_active(
            &mut self,
            prefix: IpNet,
            index: usize,
            via: &str,
            active: bool,
        ) -> Result<(), ControlError> {
            MemberControl::set_member_active(&mut self.dp, prefix, index, via, active).await
        }
        async fn steer_flow(
            &mut self,
            flow: &FlowId,
            interface: &str,
            avoid: bool,
        ) -> Result<bool, ControlError> {
            self.calls
                .push((flow.clone(), interface.to_string(), avoid));
            Ok(true)
        }
    }

    #[tokio::test]
    async fn flow_arn_steers_only_the_flow_when_the_data_plane_can() {
        let (mut r, dp) = setup().await;
        let mut st = Steering { dp, calls: vec![] };
        let flow = crate::FlowId {
            protocol: Some(17),
            dst: Some("198.51.100.7".parse().unwrap()),
            dst_port: Some(4791),
            ..Default::default()
        };
        let m = |kind| ArnMessage {
            kind,
            metric: 5,
            flow: Some(flow.clone()),
            path_id: None,
        };
        let t0 = Instant::now();
        let s1: IpAddr = S1.parse().unwrap();
        r.apply(&mut st, s1, &m(ArnType::CongestionDetected), t0)
            .await;
        // Every member stays in service; the flow is steered off S1's interface.
        assert_eq!(
            active(&mut st.dp, "198.51.100.0/24").await,
            vec![true, true]
        );
        assert_eq!(st.calls.len(), 1);
        assert!(st.calls[0].2 && st.calls[0].0 == flow && !st.calls[0].1.is_empty());
        // A refresh does not steer twice; Type 2 releases it.
        r.apply(&mut st, s1, &m(ArnType::CongestionDetected), t0)
            .await;
        assert_eq!(st.calls.len(), 1);
        r.apply(&mut st, s1, &m(ArnType::CongestionEliminated), t0)
            .await;
        assert_eq!(st.calls.len(), 2);
        assert!(!st.calls[1].2);
        // Without Type 2 the hold time releases it.
        r.apply(&mut st, s1, &m(ArnType::FailureDetected), t0).await;
        r.expire(&mut st, t0 + Duration::from_secs(3600)).await;
        assert_eq!(st.calls.len(), 4);
        assert!(!st.calls[3].2);
        let c = r.counters().snapshot();
        assert_eq!((c.flows_steered, c.flows_released), (2, 2));
    }

    /// A data plane whose group for 192.0.2.0/24 has one member, via S1.
    async fn only_via_s1() -> NullDataplane {
        let mut dp = NullDataplane::default();
        dp.install(&Group {
            prefix: "192.0.2.0/24".parse().unwrap(),
            mode: GroupMode::Spray,
            members: vec![member(S1, "lo")],
        })
        .await
        .unwrap();
        dp
    }

    #[tokio::test]
    async fn arn_without_alternative_is_propagated_to_the_other_neighbors() {
        // The only way to 192.0.2.0/24 is via S1: nothing to do here, pass it on.
        let mut dp = only_via_s1().await;
        let on = ArnConfig {
            propagate: true,
            ..config()
        };
        let mut r = Receiver::new(&on, &[]);
        let s1: IpAddr = S1.parse().unwrap();
        let s2: IpAddr = S2.parse().unwrap();
        let m = |kind| ArnMessage {
            kind,
            metric: 9,
            flow: None,
            path_id: Some(u32::from(LEAF2)),
        };
        let t0 = Instant::now();
        r.apply(&mut dp, s1, &m(ArnType::CongestionDetected), t0)
            .await;
        let out = r.take_outbox();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, m(ArnType::CongestionDetected));
        assert_eq!(out[0].1, vec![s2]); // never back to the sender
                                        // A refresh within the refresh period is not passed on again; later it is.
        r.apply(&mut dp, s1, &m(ArnType::CongestionDetected), t0)
            .await;
        assert!(r.take_outbox().is_empty());
        let later = t0 + Duration::from_secs(1);
        r.apply(&mut dp, s1, &m(ArnType::CongestionDetected), later)
            .await;
        assert_eq!(r.take_outbox().len(), 1);
        // Type 2 follows the propagated Type 1, once.
        r.apply(&mut dp, s1, &m(ArnType::CongestionEliminated), later)
            .await;
        let out = r.take_outbox();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0.kind, ArnType::CongestionEliminated);
        r.apply(&mut dp, s1, &m(ArnType::CongestionEliminated), later)
            .await;
        assert!(r.take_outbox().is_empty());
        assert_eq!(r.counters().snapshot().propagated, 3);
        // An ARN this node can act on (two members) is not propagated.
        let (mut r, mut dp) = setup().await;
        r.apply(&mut dp, s1, &m(ArnType::CongestionDetected), t0)
            .await;
        assert!(r.take_outbox().is_empty());
        // Off by configuration.
        let mut off = Receiver::new(
            &ArnConfig {
                propagate: false,
                ..config()
            },
            &[],
        );
        let mut dp1 = only_via_s1().await;
        off.apply(&mut dp1, s1, &m(ArnType::CongestionDetected), t0)
            .await;
        assert!(off.take_outbox().is_empty());
    }
}
