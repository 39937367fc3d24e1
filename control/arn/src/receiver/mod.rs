//! ARN reception: admission (configured neighbor, arrival interface, TTL 255, rate limit),
//! mapping (sender, Path ID) to group members (docs/CODEPOINTS.md "Path ID semantics"),
//! removal and restoration of those members through [`MemberControl`], timeout restore,
//! and reconciliation after the control plane re-installs groups.
//!
//! Everything rejected is counted in [`Counters`] and otherwise ignored.

use super::codec::{ArnMessage, ArnType, FlowId};
use super::config::{path_covers, ArnConfig, ArnNeighbor, RateLimit};
use super::shift::{CongestionMode, Share, ShiftConfig};
use super::transport::{self, ArnSocket, Datagram, TTL};
use fare_model::forwarding::{GroupStatus, Member, MemberRef};
use ipnet::IpNet;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

mod control;
mod counters;

pub use control::{ControlError, MemberControl};
use counters::bump;
pub use counters::{Counters, CountersSnapshot, Rejection};

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct RemovalKey {
    prefix: IpNet,
    sender: IpAddr,
}

impl RemovalKey {
    /// Member `index` (`via`) of this key's group, as the data plane is asked to switch it.
    fn member<'a>(&self, index: usize, via: &'a str) -> MemberRef<'a> {
        MemberRef {
            prefix: self.prefix,
            index,
            via,
        }
    }

    /// The change to report: member `index` switched to `active`, or given `share`.
    fn change(&self, index: usize, active: bool, share: Option<f64>) -> MemberChange {
        MemberChange {
            prefix: self.prefix,
            index,
            active,
            sender: self.sender,
            share_permille: share.map(permille),
        }
    }
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
    /// Congestion shift: the member is in service with this share of its weight, in
    /// thousandths (None: taken out).
    pub share_permille: Option<u32>,
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
        let what = match self.share_permille {
            Some(p) => format!(": share {:.1} % of its weight", f64::from(p) / 10.0),
            None => String::new(),
        };
        format!(
            "ARN {} (metric {}) from {}{what}",
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
    /// Congestion shift: the member's new share of its weight, in thousandths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_permille: Option<u32>,
}

/// A member whose share a congestion shift lowered (`arn::shift`).
#[derive(Clone, Debug)]
struct Shifted {
    index: usize,
    via: String,
    share: Share,
    path_ids: std::collections::BTreeSet<u32>,
    metric: u8,
    since: Instant,
    /// The hold time: without a refresh by then the share starts to come back.
    expires: Instant,
}

fn permille(f: f64) -> u32 {
    (f * 1000.0).round().clamp(0.0, 1000.0) as u32
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
    /// What a Type 1 does (shift or remove) and the shift's parameters.
    shift: ShiftConfig,
    /// Members whose share a congestion shift lowered.
    shifted: BTreeMap<RemovalKey, Shifted>,
    /// The multicast group ARNs may arrive on (others are dropped).
    group: Option<IpAddr>,
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
            shift: config.congestion.clone(),
            shifted: BTreeMap::new(),
            group: config.multicast.as_ref().map(|m| m.group),
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
        if let Some(dst) = d.dst.filter(|a| a.is_multicast()) {
            if self.group != Some(dst) {
                bump(&c.dropped_other_group);
                return Err(Rejection::OtherGroup(dst));
            }
        }
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
        let shift = self.shift.mode == CongestionMode::Shift && !cause.failure;
        let mut changes = Vec::new();
        let mut refused = false;
        for (prefix, index, via) in targets {
            let key = RemovalKey { prefix, sender };
            if shift && msg.kind.removes() && !has_alternative(&groups, prefix, index) {
                // Shifting the only member in service moves nothing: this node has no
                // alternative (the propagation rule below passes the ARN upstream).
                bump(&self.counters.refused_last_member);
                refused = true;
                continue;
            }
            if shift {
                if let Some(change) = self.apply_shift(control, &key, index, &via, msg, now).await {
                    changes.extend(change);
                    continue;
                }
            }
            if msg.kind.removes() {
                let expires = now + self.hold;
                if let Some(r) = self.removals.get_mut(&key) {
                    r.causes.insert(cause, expires);
                    r.metric = msg.metric;
                    continue; // already out: refreshed
                }
                let member = key.member(index, &via);
                match control.set_member_active(member, false).await {
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
                        changes.push(key.change(index, false, None));
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
                    let member = key.member(index, &via);
                    if self.restore(control, member).await {
                        changes.push(key.change(index, true, None));
                    }
                }
            }
        }
        self.plan_propagation(sender, msg, refused, now);
        changes
    }

    /// Congestion shift (`arn::shift`) of the member `key` names: a Type 1 cuts its share
    /// by the Metric (damped), a Type 2 starts giving it back. None: not handled here (the
    /// data plane cannot shift, or a Type 2 for a member that is not shifted): the caller
    /// goes on with the removal rules.
    async fn apply_shift<C: MemberControl + ?Sized>(
        &mut self,
        control: &mut C,
        key: &RemovalKey,
        index: usize,
        via: &str,
        msg: &ArnMessage,
        now: Instant,
    ) -> Option<Option<MemberChange>> {
        if !msg.kind.removes() {
            let s = self.shifted.get_mut(key)?;
            s.share.cleared(now);
            return Some(None);
        }
        let hold = self.hold;
        let e = self.shifted.entry(*key).or_insert_with(|| Shifted {
            index,
            via: via.to_string(),
            share: Share::new(now),
            path_ids: Default::default(),
            metric: msg.metric,
            since: now,
            expires: now + hold,
        });
        e.expires = now + hold;
        e.metric = msg.metric;
        e.path_ids.insert(msg.path_id.unwrap_or(0));
        if !e.share.congested(&self.shift, msg.metric, now) {
            return Some(None); // damped, or already at the floor
        }
        let (factor, index, via) = (e.share.factor, e.index, e.via.clone());
        let member = key.member(index, &via);
        match control.set_member_share(member, factor).await {
            Ok(true) => {
                bump(&self.counters.shares_cut);
                info!(prefix = %key.prefix, index, sender = %key.sender, metric = msg.metric, share = factor, "ARN: congested member's share lowered");
                Some(Some(key.change(index, true, Some(factor))))
            }
            Ok(false) => {
                self.shifted.remove(key);
                None
            }
            Err(e) => {
                bump(&self.counters.backend_errors);
                warn!(prefix = %key.prefix, index, error = %e, "ARN: the data plane failed to shift the member's share");
                self.shifted.remove(key);
                Some(None)
            }
        }
    }

    /// Recovery of shifted members: a share whose hold time ran out without a refresh
    /// starts coming back as on Type 2; due steps are written to the data plane.
    async fn tick_shares<C: MemberControl + ?Sized>(
        &mut self,
        control: &mut C,
        now: Instant,
    ) -> Vec<MemberChange> {
        let mut changes = Vec::new();
        let keys: Vec<RemovalKey> = self.shifted.keys().copied().collect();
        for key in keys {
            let Some(e) = self.shifted.get_mut(&key) else {
                continue;
            };
            if !e.share.is_recovering() && e.expires <= now {
                e.share.cleared(now);
                bump(&self.counters.expired);
            }
            if !e.share.tick(&self.shift, now) {
                if e.share.done() {
                    self.shifted.remove(&key);
                }
                continue;
            }
            let (factor, index, via) = (e.share.factor, e.index, e.via.clone());
            if e.share.done() {
                self.shifted.remove(&key);
            }
            let member = key.member(index, &via);
            match control.set_member_share(member, factor).await {
                Ok(_) => {
                    bump(&self.counters.shares_restored);
                    info!(prefix = %key.prefix, index, share = factor, "ARN: share given back");
                    changes.push(key.change(index, true, Some(factor)));
                }
                Err(e) => {
                    bump(&self.counters.backend_errors);
                    warn!(prefix = %key.prefix, index, error = %e, "ARN: cannot give the share back");
                }
            }
        }
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
        member: MemberRef<'_>,
    ) -> bool {
        match control.set_member_active(member, true).await {
            Ok(()) => {
                bump(&self.counters.members_restored);
                true
            }
            Err(e) => {
                let MemberRef { prefix, index, .. } = member;
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
                done.push((*key, r.index, r.via.clone()));
            }
        }
        let mut changes = self.tick_shares(control, now).await;
        for (key, index, via) in done {
            self.removals.remove(&key);
            bump(&self.counters.expired);
            info!(prefix = %key.prefix, index, sender = %key.sender, "ARN removal timed out: member restored");
            let member = key.member(index, &via);
            if self.restore(control, member).await {
                changes.push(key.change(index, true, None));
            }
        }
        changes
    }

    /// The group of `key`'s prefix in `groups` and the index of its member toward `key`'s
    /// sender; None when either is gone.
    fn toward<'g>(
        &self,
        groups: &'g [GroupStatus],
        key: &RemovalKey,
    ) -> Option<(&'g GroupStatus, usize)> {
        let n = self.neighbors.iter().find(|n| n.address == key.sender)?;
        let g = groups.iter().find(|g| g.group.prefix == key.prefix)?;
        Some((g, member_toward(&g.group.members, n)?))
    }

    /// After the control plane re-installed groups (BGP converged): removals whose group or
    /// member toward the sender is gone are dropped; the others are applied again at the
    /// member's current index (a fresh install has every member active).
    pub async fn reconcile<C: MemberControl + ?Sized>(&mut self, control: &mut C) {
        let Ok(groups) = control.groups().await else {
            return;
        };
        // Shifted members: the data plane task keeps their shares across re-installs;
        // only follow the member's index, and forget members that left the group.
        let keys: Vec<RemovalKey> = self.shifted.keys().copied().collect();
        for key in keys {
            let found = self
                .toward(&groups, &key)
                .map(|(g, i)| (i, g.group.members[i].via.clone()));
            match found {
                Some((index, via)) => {
                    if let Some(e) = self.shifted.get_mut(&key) {
                        e.index = index;
                        e.via = via;
                    }
                }
                None => {
                    self.shifted.remove(&key);
                    bump(&self.counters.stale_dropped);
                }
            }
        }
        let keys: Vec<RemovalKey> = self.removals.keys().copied().collect();
        for key in keys {
            let found = self.toward(&groups, &key).map(|(g, i)| {
                let active = g.members.get(i).is_none_or(|s| s.active);
                (i, g.group.members[i].via.clone(), active)
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
                        let member = key.member(index, &via);
                        if let Err(e) = control.set_member_active(member, false).await {
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

    /// Members currently held out by ARN (or, shifted, carrying less), with why and until
    /// when.
    pub fn removed_members(&self) -> Vec<RemovedMember> {
        let shifted = self
            .shifted
            .iter()
            .filter(|(_, s)| !s.share.done())
            .map(|(k, s)| RemovedMember {
                prefix: k.prefix,
                index: s.index,
                sender: k.sender,
                since: s.since,
                metric: s.metric,
                causes: s
                    .path_ids
                    .iter()
                    .map(|&path_id| RemovalCause {
                        failure: false,
                        path_id,
                        expires: s.expires,
                    })
                    .collect(),
                share_permille: Some(permille(s.share.factor)),
            });
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
                share_permille: None,
            })
            .chain(shifted)
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

/// True when the group of `prefix` has a member in service other than `index`.
fn has_alternative(groups: &[GroupStatus], prefix: IpNet, index: usize) -> bool {
    groups
        .iter()
        .find(|g| g.group.prefix == prefix)
        .is_some_and(|g| {
            (0..g.group.members.len())
                .any(|i| i != index && g.members.get(i).is_none_or(|m| m.active))
        })
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
                            // Typed fields for readers of JSON logs (`fare lab`).
                            info!(
                                event = "arn_applied",
                                %sender,
                                arn_type = msg.kind.code(),
                                metric = msg.metric,
                                changes = changes.len(),
                                "ARN applied: {msg}"
                            );
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
mod tests;
