//! The BGP speaker of one node: listeners, one task per neighbor, and the task that owns
//! the RIBs and applies the FARE policy.
//!
//! Outputs go to one channel of [`SpeakerEvent`]s: WCMP groups for the data plane,
//! route views for `fare show routes`, neighbor status changes. The agent forwards them
//! to its data plane task and shared state; tests and benchmarks read them directly.

use super::community::{FibSuppress, PathBandwidth};
use super::dpf::{self, Dpf, Transit};
use super::fare::{Decision, Policy};
use super::neighbor::{
    Command, Neighbor, NeighborStatus, PeerConfig, SessionEvent, SessionInfo, SharedStatus,
};
use super::packet::attribute::flag;
use super::packet::upa::Upa;
use super::packet::{
    color, nlri, update, Aigp, AsPath, ColorCommunity, Context, Family, MpReach, Origin,
    PathAttributes, Update,
};
use super::packet::{orf, Capability};
use super::rib::{LocRoute, Path, Rib};
use super::socket::{self, Protection};
use super::upa;
use fare_model::bandwidth::Received;
use fare_model::forwarding::{ColorGroup, Group, GroupMode, Member};
use fare_model::topology::Role;
use ipnet::IpNet;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// One configured neighbor.
#[derive(Clone, Debug, PartialEq)]
pub struct NeighborSpec {
    pub address: IpAddr,
    pub remote_as: u32,
    /// Interface toward the neighbor: group member egress, link events, speed.
    pub interface: Option<String>,
    /// Link bandwidth; when absent, the interface speed is used.
    pub bandwidth_gbps: Option<f64>,
    pub passive: bool,
    pub local_address: Option<IpAddr>,
    pub protection: Protection,
    /// The neighbor's place in the Clos, when known: a spine whose multipath set comes
    /// from super-spines applies draft §4.2's "spine in another PoD" rule.
    pub role: Option<Role>,
    /// DPF session color (draft-wang-idr-dpf §2.1); `None` = uncolored session.
    pub color: Option<u32>,
    /// Accept Address Prefix ORFs (RFC 5291/5292) from this neighbor.
    pub orf_receive: bool,
    /// Send this neighbor an Address Prefix ORF asking for exactly these prefixes.
    pub orf_send: Vec<IpNet>,
    /// Tag routes from this neighbor with FIB-Suppress (draft-xu-idr-fare-in-mpson §4.2.1).
    pub fib_suppress: bool,
    /// Host routes this node announces unreachable (UPA) while no route covering them is
    /// learned from this neighbor (draft-xu-idr-fare-in-mpson §4.1; see [`super::upa`]).
    pub upa_hosts: Vec<IpNet>,
    /// Send this neighbor no route covered by one of this node's `prefixes` (aggregates
    /// only; UPAs still go).
    pub summary_only: bool,
}

impl NeighborSpec {
    /// The bandwidth of the link to this neighbor: the configured one, else the speed the
    /// interface's driver reports.
    fn link_gbps(&self) -> Option<f64> {
        self.bandwidth_gbps.or_else(|| {
            self.interface
                .as_deref()
                .and_then(super::link::interface_speed_gbps)
        })
    }
}

#[derive(Clone, Debug)]
pub struct SpeakerConfig {
    pub router_id: Ipv4Addr,
    pub asn: u32,
    /// TCP port to listen on and connect to (179).
    pub port: u16,
    /// Accept incoming sessions (one listener per address family).
    pub listen: bool,
    /// Listen on these addresses only (empty: the wildcard address of each family).
    /// Lets many speakers share one host and port, each on its own addresses.
    pub listen_addresses: Vec<IpAddr>,
    pub hold_time: u16,
    pub connect_retry: Duration,
    pub connect_retry_max: Duration,
    /// How often the carrier of neighbor interfaces is read (zero: netlink events only).
    pub link_poll: Duration,
    pub policy: Policy,
    pub group_mode: GroupMode,
    pub neighbors: Vec<NeighborSpec>,
    pub prefixes: Vec<IpNet>,
    /// How long a neighbor we accept ORFs from, and that can send them, gets to send its
    /// first ORF before it is sent the full table anyway (RFC 5291 §5).
    pub orf_wait: Duration,
    /// Emit a [`SpeakerEvent::Route`] per changed prefix (off for bulk benchmarks).
    pub route_events: bool,
    /// Deterministic Path Forwarding: session coloring mode, codepoints, route coloring.
    pub dpf: Dpf,
}

/// One path of a route as `fare show routes` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathView {
    pub neighbor: IpAddr,
    pub next_hop: Option<IpAddr>,
    pub as_path: Vec<u32>,
    /// From the Path Bandwidth community (the one weights used), Gbps.
    pub path_bandwidth_gbps: Option<f64>,
    pub weight: u32,
    /// Extended communities as received, 16 hex digits each.
    pub ext_communities: Vec<String>,
    /// DPF route colors (Color extended communities).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub colors: Vec<u32>,
    /// AIGP metric (RFC 7311), present on DPF primary-color paths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aigp: Option<u64>,
}

/// The WCMP group of one color of a prefix (draft-wang-idr-dpf §2.2.3): what flows
/// mapped to that color use.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ColorGroupView {
    pub color: u32,
    /// False: the color's paths are backups (not in the active multipath set).
    pub active: bool,
    /// (neighbor, weight)
    pub members: Vec<(IpAddr, u32)>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteView {
    pub prefix: IpNet,
    pub local: bool,
    /// Originated here as unreachable (UPA): this node's RNIC is disconnected.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unreachable: bool,
    /// WCMP from path bandwidths (false: ECMP, some path lacks the community).
    pub weighted: bool,
    pub paths: Vec<PathView>,
    /// Per-color groups of DPF-colored routes, active colors first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub color_groups: Vec<ColorGroupView>,
}

#[derive(Debug)]
pub enum SpeakerEvent {
    /// Install (Some) or remove (None) the group of a prefix.
    Group {
        prefix: IpNet,
        group: Option<Group>,
    },
    /// Install a group together with its per-color groups (DPF, draft-wang-idr-dpf
    /// §2.2.3): sent instead of `Group` while the route's active paths carry two or
    /// more colors.
    ColoredGroup {
        group: Group,
        colors: Vec<ColorGroup>,
    },
    Route {
        prefix: IpNet,
        route: Option<RouteView>,
    },
    Neighbor(NeighborStatus),
}

/// Requests to a running speaker.
#[derive(Debug)]
pub enum SpeakerCommand {
    /// An interface changed: down -> its sessions' routes go at once and the sessions are
    /// reset; up -> reconnect now. `speed_gbps` updates the link bandwidth when the
    /// neighbor has none configured.
    Link {
        interface: String,
        up: bool,
        speed_gbps: Option<f64>,
    },
    /// Set (Some) or clear (None: back to the interface speed) the bandwidth of the links
    /// to one neighbor or of every neighbor over one interface, overriding the configured
    /// value, and re-decide every prefix at once. Replies with each matched neighbor and
    /// the bandwidth now used for it.
    SetBandwidth {
        neighbor: Option<IpAddr>,
        interface: Option<String>,
        gbps: Option<f64>,
        reply: tokio::sync::oneshot::Sender<Vec<(IpAddr, Option<f64>)>>,
    },
    /// Every route as `fare show routes` shows it.
    Routes(tokio::sync::oneshot::Sender<Vec<RouteView>>),
    /// Ask one neighbor (or every Established one) to re-send its routes with
    /// ROUTE-REFRESH (RFC 2918), one per negotiated family. Replies with the neighbors
    /// asked: Established ones that advertised the capability.
    Refresh {
        neighbor: Option<IpAddr>,
        reply: tokio::sync::oneshot::Sender<Vec<IpAddr>>,
    },
    Shutdown,
}

/// A running speaker.
#[derive(Clone)]
pub struct SpeakerHandle {
    pub commands: mpsc::Sender<SpeakerCommand>,
    pub neighbors: Vec<SharedStatus>,
}

struct Peer {
    spec: NeighborSpec,
    status: SharedStatus,
    commands: mpsc::UnboundedSender<Command>,
    incoming: mpsc::Sender<tokio::net::TcpStream>,
    session: Option<SessionInfo>,
    link_gbps: Option<f64>,
    link_up: bool,
    /// Prefix filters the neighbor sent (ORF), per family: (entry, deny). Empty = none.
    orf: HashMap<Family, Vec<(orf::PrefixEntry, bool)>>,
    /// Until then no UPDATE goes to the neighbor: it announced it will send an ORF and
    /// its first one (IMMEDIATE) has not come yet (RFC 5291 §5).
    orf_wait_until: Option<tokio::time::Instant>,
}

/// Starts listeners, neighbor tasks and the RIB task. Fails when a listener cannot bind.
pub async fn start(
    config: SpeakerConfig,
    events: mpsc::Sender<SpeakerEvent>,
) -> std::io::Result<SpeakerHandle> {
    let (session_tx, session_rx) = mpsc::channel(1024);
    let mut peers = HashMap::new();
    let mut statuses = Vec::new();
    for spec in &config.neighbors {
        let status = Arc::new(Mutex::new(NeighborStatus::new(
            spec.address,
            spec.remote_as,
        )));
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let (in_tx, in_rx) = mpsc::channel(4);
        let families = vec![Family::Ipv4Unicast, Family::Ipv6Unicast];
        let neighbor = Neighbor {
            config: PeerConfig {
                address: spec.address,
                remote_as: spec.remote_as,
                local_as: config.asn,
                router_id: config.router_id,
                port: config.port,
                hold_time: config.hold_time,
                connect_retry: config.connect_retry,
                connect_retry_max: config.connect_retry_max,
                passive: spec.passive,
                local_address: spec.local_address,
                protection: spec.protection.clone(),
                families,
                session_color: config.dpf.session(spec.color),
                orf_receive: spec.orf_receive,
                orf_send: spec.orf_send.clone(),
            },
            status: status.clone(),
            incoming: in_rx,
            events: session_tx.clone(),
            commands: cmd_rx,
        };
        tokio::spawn(neighbor.run());
        let link_gbps = spec.link_gbps();
        statuses.push(status.clone());
        peers.insert(
            spec.address,
            Peer {
                spec: spec.clone(),
                status,
                commands: cmd_tx,
                incoming: in_tx,
                session: None,
                link_gbps,
                link_up: true,
                orf: HashMap::new(),
                orf_wait_until: None,
            },
        );
    }
    let accept_to: HashMap<IpAddr, mpsc::Sender<tokio::net::TcpStream>> = peers
        .iter()
        .map(|(a, p)| (*a, p.incoming.clone()))
        .collect();
    if config.listen {
        let mut keys: Vec<(IpAddr, Protection)> = config
            .neighbors
            .iter()
            .map(|n| (n.address, n.protection.clone()))
            .collect();
        keys.sort_by_key(|k| k.0);
        for (any, v6) in [
            (IpAddr::V4(Ipv4Addr::UNSPECIFIED), false),
            (IpAddr::V6(Ipv6Addr::UNSPECIFIED), true),
        ] {
            let wanted: Vec<_> = keys.iter().filter(|k| k.0.is_ipv6() == v6).collect();
            if wanted.is_empty() {
                continue;
            }
            let binds: Vec<IpAddr> = if config.listen_addresses.is_empty() {
                vec![any]
            } else {
                config
                    .listen_addresses
                    .iter()
                    .copied()
                    .filter(|a| a.is_ipv6() == v6)
                    .collect()
            };
            // GTSM on the listener only when every neighbor of the family uses it, so
            // the SYN is checked too; otherwise it is set per accepted connection.
            let all_gtsm = wanted.iter().all(|k| k.1.gtsm);
            let gtsm_peers: HashSet<IpAddr> =
                wanted.iter().filter(|k| k.1.gtsm).map(|k| k.0).collect();
            for addr in binds {
                let listener = socket::listen(SocketAddr::new(addr, config.port))?;
                for (peer, prot) in &wanted {
                    if let Some(key) = &prot.md5_key {
                        socket::set_md5(&listener, *peer, Some(key))?;
                    }
                }
                if all_gtsm {
                    socket::set_gtsm(&listener, v6)?;
                }
                tokio::spawn(accept_loop(listener, accept_to.clone(), gtsm_peers.clone()));
            }
        }
    }
    let (cmd_tx, cmd_rx) = mpsc::channel(64);
    // Interface events: a link going down withdraws its routes at once (white paper §2.4).
    let watched: HashSet<String> = config
        .neighbors
        .iter()
        .filter_map(|n| n.interface.clone())
        .collect();
    if !watched.is_empty() {
        tokio::spawn(watch_links(watched, config.link_poll, cmd_tx.clone()));
    }
    let mut rib = Rib {
        upa_subtype: Some(config.policy.upa_subtype),
        ..Rib::default()
    };
    for p in &config.prefixes {
        rib.local.insert(p.trunc());
    }
    let task = RibTask {
        dirty: config.prefixes.iter().map(|p| p.trunc()).collect(),
        config,
        rib,
        peers,
        events,
        fib: HashMap::new(),
        color_fib: HashMap::new(),
        unreachable_learned: HashSet::new(),
    };
    tokio::spawn(task.run(session_rx, cmd_rx));
    Ok(SpeakerHandle {
        commands: cmd_tx,
        neighbors: statuses,
    })
}

/// Forwards the link events of the `watched` interfaces to the speaker: every netlink
/// notification, and carrier changes the poll sees first (every `poll`; zero = no poll;
/// see [`super::link`] for why netlink alone is up to a second late).
async fn watch_links(watched: HashSet<String>, poll: Duration, tx: mpsc::Sender<SpeakerCommand>) {
    let mut netlink = match super::link::LinkWatcher::open() {
        Ok(w) => Some(w),
        Err(e) => {
            warn!("no link events (netlink): {e}");
            None
        }
    };
    let probe = if poll.is_zero() {
        None
    } else {
        super::link::CarrierProbe::open()
            .map_err(|e| warn!("no carrier poll: {e}"))
            .ok()
    };
    if netlink.is_none() && probe.is_none() {
        return;
    }
    // Last state told to the speaker (or first seen), per interface.
    let mut known: HashMap<String, bool> = HashMap::new();
    if let Some(p) = &probe {
        for i in &watched {
            if let Some(up) = p.is_up(i) {
                known.insert(i.clone(), up);
            }
        }
    }
    let mut tick = tokio::time::interval(if poll.is_zero() {
        Duration::from_secs(3600)
    } else {
        poll
    });
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let events = tokio::select! {
            r = async { netlink.as_mut()?.next().await.ok() }, if netlink.is_some() => match r {
                Some(events) => events,
                None => {
                    netlink = None;
                    continue;
                }
            },
            _ = tick.tick(), if probe.is_some() => {
                let Some(p) = &probe else { continue };
                watched
                    .iter()
                    .filter_map(|i| {
                        let up = p.is_up(i)?;
                        (known.get(i) != Some(&up)).then(|| super::link::LinkEvent {
                            interface: i.clone(),
                            up,
                        })
                    })
                    .collect()
            }
        };
        for e in events
            .into_iter()
            .filter(|e| watched.contains(&e.interface))
        {
            known.insert(e.interface.clone(), e.up);
            let speed_gbps = super::link::interface_speed_gbps(&e.interface);
            let cmd = SpeakerCommand::Link {
                interface: e.interface,
                up: e.up,
                speed_gbps,
            };
            if tx.send(cmd).await.is_err() {
                return;
            }
        }
        if netlink.is_none() && probe.is_none() {
            return;
        }
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    peers: HashMap<IpAddr, mpsc::Sender<tokio::net::TcpStream>>,
    gtsm: HashSet<IpAddr>,
) {
    loop {
        let (stream, from) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let ip = from.ip().to_canonical();
        match peers.get(&ip) {
            Some(tx) => {
                if gtsm.contains(&ip) {
                    if let Err(e) = socket::set_gtsm(&stream, ip.is_ipv6()) {
                        warn!(peer = %ip, "GTSM: {e}");
                    }
                }
                let _ = stream.set_nodelay(true);
                let _ = tx.try_send(stream);
            }
            None => debug!(%ip, "connection from an unconfigured address refused"),
        }
    }
}

struct RibTask {
    config: SpeakerConfig,
    rib: Rib,
    peers: HashMap<IpAddr, Peer>,
    events: mpsc::Sender<SpeakerEvent>,
    /// Members (neighbor, weight) of each installed group, to send only changes.
    fib: HashMap<IpNet, Vec<(IpAddr, u32)>>,
    /// Per-color groups sent with each group (DPF), to send only changes.
    color_fib: HashMap<IpNet, Vec<ColorGroupView>>,
    dirty: HashSet<IpNet>,
    /// Prefixes whose every path announces them unreachable (UPA): an RNIC's host
    /// routes derived from its aggregates, recomputed when an aggregate changes.
    unreachable_learned: HashSet<IpNet>,
}

impl RibTask {
    async fn run(
        mut self,
        mut sessions: mpsc::Receiver<SessionEvent>,
        mut commands: mpsc::Receiver<SpeakerCommand>,
    ) {
        self.flush().await;
        // With no neighbors configured nobody holds a session sender: the channel is
        // closed from the start, and the speaker still serves commands until shutdown.
        let mut sessions_open = true;
        loop {
            let orf_deadline = self.peers.values().filter_map(|p| p.orf_wait_until).min();
            tokio::select! {
                _ = tokio::time::sleep_until(orf_deadline.unwrap_or_else(tokio::time::Instant::now)),
                    if orf_deadline.is_some() => self.orf_wait_expired(),
                ev = sessions.recv(), if sessions_open => {
                    let Some(ev) = ev else {
                        sessions_open = false;
                        continue;
                    };
                    self.on_session(ev).await;
                    // Drain what is queued, then decide once for the batch.
                    for _ in 0..4096 {
                        match sessions.try_recv() {
                            Ok(ev) => self.on_session(ev).await,
                            Err(_) => break,
                        }
                    }
                }
                cmd = commands.recv() => match cmd {
                    Some(SpeakerCommand::Link { interface, up, speed_gbps }) => {
                        self.on_link(&interface, up, speed_gbps);
                    }
                    Some(SpeakerCommand::SetBandwidth { neighbor, interface, gbps, reply }) => {
                        let _ = reply.send(self.set_bandwidth(neighbor, interface.as_deref(), gbps));
                    }
                    Some(SpeakerCommand::Routes(reply)) => {
                        let mut all: Vec<RouteView> =
                            self.rib.loc.keys().copied().collect::<Vec<_>>()
                                .into_iter().filter_map(|p| self.view(p)).collect();
                        all.sort_by_key(|r| r.prefix);
                        let _ = reply.send(all);
                    }
                    Some(SpeakerCommand::Refresh { neighbor, reply }) => {
                        let _ = reply.send(self.request_refresh(neighbor));
                    }
                    Some(SpeakerCommand::Shutdown) | None => {
                        for p in self.peers.values() {
                            let _ = p.commands.send(Command::Shutdown);
                        }
                        return;
                    }
                },
            }
            self.flush().await;
        }
    }

    async fn on_session(&mut self, ev: SessionEvent) {
        match ev {
            SessionEvent::Up { peer, info } => {
                if let Some(p) = self.peers.get_mut(&peer) {
                    // RFC 5291 §5: a neighbor that will send an ORF gets no UPDATE before
                    // it (or before the wait ends).
                    p.orf_wait_until = (p.spec.orf_receive && peer_sends_orf(&info))
                        .then(|| tokio::time::Instant::now() + self.config.orf_wait);
                    p.session = Some(info);
                    self.rib.adj_out.remove(&peer);
                    self.dirty.extend(self.rib.loc.keys().copied());
                    self.neighbor_event(peer).await;
                }
            }
            SessionEvent::Down { peer, .. } => {
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.session = None;
                    // ORFs live as long as the session that carried them (RFC 5291 §5).
                    p.orf.clear();
                    p.orf_wait_until = None;
                }
                let gone = self.rib.forget_peer(peer);
                self.dirty.extend(gone);
                self.neighbor_event(peer).await;
            }
            SessionEvent::RouteRefresh {
                peer,
                family: Some(family),
                orf: Some(filter),
            } => {
                // New filter entries: re-evaluate what the neighbor gets (routes it no longer
                // permits are withdrawn), now or at the next plain refresh (DEFER).
                let Some(p) = self.peers.get_mut(&peer) else {
                    return;
                };
                let list = p.orf.entry(family).or_default();
                apply_orf(list, &filter.entries);
                info!(%peer, ?family, entries = list.len(), when = ?filter.when, "ORF received");
                if filter.when == orf::When::Immediate && p.orf_wait_until.take().is_some() {
                    // The first ORF: now the initial UPDATEs, filtered.
                    self.dirty.extend(self.rib.loc.keys().copied());
                } else if filter.when == orf::When::Immediate {
                    self.dirty.extend(
                        self.rib
                            .loc
                            .keys()
                            .copied()
                            .filter(|p| nlri::family_of(p) == family),
                    );
                }
            }
            SessionEvent::RouteRefresh { peer, family, .. } => {
                // Re-send this family's Adj-RIB-Out (RFC 2918 §4): forget what was sent.
                // A neighbor we wait for asks for its routes now (its ORF entries, if
                // any, came deferred): the wait is over.
                if let Some(p) = self.peers.get_mut(&peer) {
                    if p.orf_wait_until.take().is_some() {
                        self.dirty.extend(self.rib.loc.keys().copied());
                    }
                }
                let of_family = |p: &IpNet| family.is_none_or(|f| nlri::family_of(p) == f);
                if let Some(t) = self.rib.adj_out.get_mut(&peer) {
                    t.retain(|p, _| !of_family(p));
                }
                self.dirty
                    .extend(self.rib.loc.keys().copied().filter(|p| of_family(p)));
            }
            SessionEvent::Update { peer, update } => {
                // Malformed UPDATEs are rare: refresh the neighbor's counters in the views.
                let malformed = !update.errors.is_empty();
                self.on_update(peer, *update);
                if malformed {
                    self.neighbor_event(peer).await;
                }
            }
        }
    }

    async fn neighbor_event(&self, peer: IpAddr) {
        if let Some(p) = self.peers.get(&peer) {
            let status = p.status.lock().ok().map(|s| s.clone());
            if let Some(s) = status {
                let _ = self.events.send(SpeakerEvent::Neighbor(s)).await;
            }
        }
    }

    /// Sends ROUTE-REFRESH for every negotiated family to `neighbor` (or to all), when
    /// Established and the peer advertised the capability; returns who was asked.
    fn request_refresh(&self, neighbor: Option<IpAddr>) -> Vec<IpAddr> {
        let mut asked: Vec<IpAddr> = self
            .peers
            .iter()
            .filter(|(a, _)| neighbor.is_none_or(|n| n == **a))
            .filter_map(|(a, p)| {
                let info = p.session.as_ref().filter(|i| i.route_refresh)?;
                p.commands
                    .send(Command::Refresh(info.families.clone()))
                    .ok()
                    .map(|_| *a)
            })
            .collect();
        asked.sort();
        asked
    }

    fn on_update(&mut self, peer: IpAddr, mut u: Update) {
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        let remote_as = p.spec.remote_as;
        let session_color = p.spec.color;
        let tag_fib_suppress = p.spec.fib_suppress;
        for prefix in u.withdrawn_all().collect::<Vec<_>>() {
            if self.rib.forget(peer, prefix) {
                self.dirty.insert(prefix);
            }
        }
        let announced: Vec<IpNet> = u.announced().collect();
        if announced.is_empty() {
            return;
        }
        let withdraw = u.treat_as_withdraw();
        let a = &mut u.attributes;
        // RFC 4271 §9.1.2 loop detection and §6.3 first-AS check (RFC 7606: withdraw).
        let looped = a
            .as_path
            .as_ref()
            .is_some_and(|p| p.contains(self.config.asn));
        let wrong_first = a.as_path.as_ref().and_then(AsPath::first_as) != Some(remote_as);
        if withdraw || looped || wrong_first {
            if wrong_first && !looped && !withdraw {
                warn!(%peer, "first AS of AS_PATH is not the neighbor's: treat-as-withdraw");
            }
            for prefix in announced {
                if self.rib.forget(peer, prefix) {
                    self.dirty.insert(prefix);
                }
            }
            return;
        }
        // AIGP only over DPF-colored sessions (RFC 7311 §3: off on eBGP unless enabled).
        if session_color.is_none() {
            a.aigp = None;
        }
        // DPF §2.1.2: a route whose color mismatches the session color is not accepted.
        if !dpf::accepts(session_color, &color::route_colors(&a.ext_communities)) {
            debug!(%peer, "route color mismatches the session color: refused");
            if let Some(p) = self.peers.get(&peer) {
                if let Ok(mut st) = p.status.lock() {
                    st.color_mismatched_routes += announced.len() as u64;
                }
            }
            for prefix in announced {
                if self.rib.forget(peer, prefix) {
                    self.dirty.insert(prefix);
                }
            }
            return;
        }
        if tag_fib_suppress {
            let subtype = self.config.policy.fib_suppress_subtype;
            if !a
                .ext_communities
                .iter()
                .any(|c| c.fib_suppress(subtype).is_some())
            {
                let tag = FibSuppress::new(self.config.asn, self.config.router_id);
                a.ext_communities.push(tag.to_community(subtype));
            }
        }
        // LOCAL_PREF from an external neighbor is ignored (RFC 4271 §5.1.5).
        a.local_pref = None;
        a.mp_unreach = None;
        if let Some(m) = a.mp_reach.as_mut() {
            m.nlri.clear();
        }
        let attrs = Arc::new(u.attributes);
        for prefix in announced {
            if self.rib.learn(peer, prefix, attrs.clone()) {
                self.dirty.insert(prefix);
            }
        }
    }

    fn on_link(&mut self, interface: &str, up: bool, speed_gbps: Option<f64>) {
        let mut changed = false;
        let mut down = Vec::new();
        for (addr, p) in self.peers.iter_mut() {
            if p.spec.interface.as_deref() != Some(interface) {
                continue;
            }
            if p.spec.bandwidth_gbps.is_none() && speed_gbps.is_some() && p.link_gbps != speed_gbps
            {
                p.link_gbps = speed_gbps;
                changed = true;
            }
            if p.link_up != up {
                info!(peer = %addr, %interface, up, "link event");
                p.link_up = up;
                changed = true;
                let _ = p
                    .commands
                    .send(if up { Command::Kick } else { Command::Reset });
                if !up {
                    p.session = None;
                    p.orf_wait_until = None;
                    down.push(*addr);
                }
            }
        }
        for addr in down {
            let gone = self.rib.forget_peer(addr);
            self.dirty.extend(gone);
        }
        if changed {
            // A link's bandwidth feeds every weight and every advertised value.
            self.dirty.extend(self.rib.loc.keys().copied());
        }
    }

    /// [`SpeakerCommand::SetBandwidth`]: the new value becomes the neighbor's configured
    /// one (link events no longer change it); `None` goes back to the interface speed.
    fn set_bandwidth(
        &mut self,
        neighbor: Option<IpAddr>,
        interface: Option<&str>,
        gbps: Option<f64>,
    ) -> Vec<(IpAddr, Option<f64>)> {
        let mut matched = Vec::new();
        for (addr, p) in self.peers.iter_mut() {
            let hit = neighbor == Some(*addr)
                || (interface.is_some() && p.spec.interface.as_deref() == interface);
            if !hit {
                continue;
            }
            p.spec.bandwidth_gbps = gbps;
            let now = p.spec.link_gbps();
            if p.link_gbps != now {
                info!(peer = %addr, from = ?p.link_gbps, to = ?now, "link bandwidth set");
                p.link_gbps = now;
                // Every weight and advertised value may use this link.
                self.dirty.extend(self.rib.loc.keys().copied());
            }
            matched.push((*addr, now));
        }
        matched.sort_by_key(|m| m.0);
        matched
    }

    /// Colors of every path of `prefix` outside its multipath set.
    fn inactive_colors(&self, prefix: IpNet, active: &[Path]) -> Vec<Vec<u32>> {
        self.rib
            .adj_in
            .iter()
            .filter(|(peer, _)| !active.iter().any(|x| x.peer == **peer))
            .filter_map(|(_, t)| t.get(&prefix))
            .map(|a| color::route_colors(&a.ext_communities))
            .filter(|c| !c.is_empty())
            .collect()
    }

    /// Per-color WCMP groups (draft §2.2.3): the active set split by color, then the
    /// colors only inactive (backup) paths carry.
    fn color_groups(&self, prefix: IpNet, active: &[Path]) -> Vec<ColorGroupView> {
        self.color_paths(prefix, active)
            .into_iter()
            .map(|(color, is_active, subset, d)| ColorGroupView {
                color,
                active: is_active,
                members: subset.iter().map(|x| x.peer).zip(d.weights).collect(),
            })
            .collect()
    }

    /// (color, active, its paths, their decision) per color, active colors first.
    fn color_paths(&self, prefix: IpNet, active: &[Path]) -> Vec<(u32, bool, Vec<Path>, Decision)> {
        let mut out: Vec<(u32, bool, Vec<Path>, Decision)> = Vec::new();
        let add = |paths: Vec<Path>, is_active: bool, out: &mut Vec<_>| {
            let mut colors: Vec<u32> = paths
                .iter()
                .flat_map(|x| color::route_colors(&x.attrs.ext_communities))
                .collect();
            colors.sort();
            colors.dedup();
            for c in colors {
                if out
                    .iter()
                    .any(|g: &(u32, bool, Vec<Path>, Decision)| g.0 == c)
                {
                    continue;
                }
                let subset: Vec<Path> = paths
                    .iter()
                    .filter(|x| color::route_colors(&x.attrs.ext_communities).contains(&c))
                    .cloned()
                    .collect();
                let (_, d) = self.decide(&subset);
                out.push((c, is_active, subset, d));
            }
        };
        add(active.to_vec(), true, &mut out);
        let mut backups: Vec<Path> = self
            .rib
            .adj_in
            .iter()
            .filter(|(peer, _)| !active.iter().any(|x| x.peer == **peer))
            .filter_map(|(peer, t)| {
                t.get(&prefix).map(|a| Path {
                    peer: *peer,
                    attrs: a.clone(),
                })
            })
            .collect();
        backups.sort_by_key(|x| x.peer);
        add(backups, false, &mut out);
        out
    }

    /// The per-color groups the data plane gets with the group of `prefix`: only when
    /// the active paths carry two or more colors (with one, every flow already stays on
    /// that color's paths).
    fn data_plane_colors(&self, prefix: IpNet, active: &[Path]) -> Vec<ColorGroup> {
        let mut colors: Vec<u32> = active
            .iter()
            .flat_map(|x| color::route_colors(&x.attrs.ext_communities))
            .collect();
        colors.sort();
        colors.dedup();
        if colors.len() < 2 {
            return vec![];
        }
        self.color_paths(prefix, active)
            .into_iter()
            .map(|(color, is_active, subset, d)| ColorGroup {
                color,
                active: is_active,
                members: subset
                    .iter()
                    .enumerate()
                    .map(|(i, p)| self.member(p, d.weights[i], d.bandwidths_gbps[i]))
                    .collect(),
            })
            .collect()
    }

    fn link_gbps(&self, peer: &IpAddr) -> Option<f64> {
        self.peers.get(peer).and_then(|x| x.link_gbps)
    }

    fn inputs(&self, paths: &[Path]) -> Vec<Received> {
        let subtype = self.config.policy.subtype;
        let encoding = self.config.policy.encoding;
        paths
            .iter()
            .map(|p| {
                let mut input = Received {
                    // Unknown link speed: the community alone decides.
                    link_gbps: self.link_gbps(&p.peer).unwrap_or(f64::INFINITY),
                    path_gbps: None,
                    link_value_gbps: None,
                };
                for c in &p.attrs.ext_communities {
                    if let Some(pb) = c.path_bandwidth(subtype, encoding) {
                        if pb.transitive {
                            input.path_gbps.get_or_insert(pb.gbps());
                        } else {
                            input.link_value_gbps.get_or_insert(pb.gbps());
                        }
                    }
                }
                input
            })
            .collect()
    }

    /// Whether a set was learned from super-spines: by the neighbors' configured roles,
    /// else by every path carrying the non-transitive value only super-spines attach.
    fn learned_from_above(&self, paths: &[Path], inputs: &[Received]) -> bool {
        let roles: Vec<Option<Role>> = paths
            .iter()
            .map(|p| self.peers.get(&p.peer).and_then(|x| x.spec.role))
            .collect();
        if roles.iter().all(Option::is_some) {
            roles.iter().all(|r| *r == Some(Role::SuperSpine))
        } else {
            inputs.iter().all(|r| r.link_value_gbps.is_some())
        }
    }

    fn decide(&self, paths: &[Path]) -> (Vec<Received>, Decision) {
        let inputs = self.inputs(paths);
        let above = self.learned_from_above(paths, &inputs);
        let d = self.config.policy.decide(&inputs, above);
        (inputs, d)
    }

    fn next_hop(p: &Path, peer: &IpAddr) -> IpAddr {
        if let Some(m) = &p.attrs.mp_reach {
            if let Some(nh) = m.next_hops.first() {
                return *nh;
            }
        }
        p.attrs.next_hop.map(IpAddr::V4).unwrap_or(*peer)
    }

    fn view(&self, prefix: IpNet) -> Option<RouteView> {
        Some(match self.rib.loc.get(&prefix)? {
            LocRoute::Local | LocRoute::Unreachable => RouteView {
                prefix,
                local: true,
                unreachable: matches!(self.rib.loc.get(&prefix), Some(LocRoute::Unreachable)),
                weighted: false,
                paths: vec![],
                color_groups: vec![],
            },
            LocRoute::Learned(paths) => {
                let (_, d) = self.decide(paths);
                RouteView {
                    prefix,
                    local: false,
                    unreachable: false,
                    weighted: d.weighted(),
                    paths: paths
                        .iter()
                        .enumerate()
                        .map(|(i, p)| PathView {
                            neighbor: p.peer,
                            next_hop: Some(Self::next_hop(p, &p.peer)),
                            as_path: p
                                .attrs
                                .as_path
                                .iter()
                                .flat_map(|a| a.segments.iter().flat_map(|s| s.asns.clone()))
                                .collect(),
                            path_bandwidth_gbps: d.weighted().then(|| d.bandwidths_gbps[i]),
                            weight: d.weights[i],
                            ext_communities: p
                                .attrs
                                .ext_communities
                                .iter()
                                .map(|c| c.0.iter().map(|b| format!("{b:02x}")).collect())
                                .collect(),
                            colors: color::route_colors(&p.attrs.ext_communities),
                            aigp: p.attrs.aigp.as_ref().map(|a| a.metric),
                        })
                        .collect(),
                    color_groups: self.color_groups(prefix, paths),
                }
            }
        })
    }

    /// Decides every dirty prefix, then sends group changes and UPDATEs.
    async fn flush(&mut self) {
        self.update_unreachable();
        if self.dirty.is_empty() {
            return;
        }
        // An RNIC's host routes derived from an aggregate follow the aggregate.
        if self.config.policy.role == Role::Rnic {
            let derived: Vec<IpNet> = self
                .unreachable_learned
                .iter()
                .filter(|u| self.dirty.iter().any(|d| d != *u && d.contains(*u)))
                .copied()
                .collect();
            self.dirty.extend(derived);
        }
        let mut dirty: Vec<IpNet> = self.dirty.drain().collect();
        // Aggregates first: host routes derived from them read their new paths.
        dirty.sort_by_key(|p| p.prefix_len());
        let established: Vec<IpAddr> = self
            .peers
            .iter()
            .filter(|(_, p)| p.session.is_some())
            .map(|(a, _)| *a)
            .collect();
        // Per neighbor: attributes -> prefixes to announce, and prefixes to withdraw.
        let mut announce: HashMap<IpAddr, HashMap<Arc<PathAttributes>, Vec<IpNet>>> =
            HashMap::new();
        let mut withdraw: HashMap<IpAddr, Vec<IpNet>> = HashMap::new();
        let mut interned: HashSet<Arc<PathAttributes>> = HashSet::new();
        for prefix in dirty {
            self.rib.decide(prefix);
            let route = self.rib.loc.get(&prefix).cloned();
            let decision = match &route {
                Some(LocRoute::Learned(paths)) => {
                    let (inputs, d) = self.decide(paths);
                    if self.all_unreachable(paths) {
                        if self.unreachable_learned.insert(prefix) {
                            let from: Vec<IpAddr> = paths.iter().map(|p| p.peer).collect();
                            info!(%prefix, ?from, "UPA received");
                        }
                        self.program_avoiding(prefix, paths).await;
                    } else {
                        self.upa_gone(prefix);
                        if self.fib_suppressed(paths) {
                            self.program_none(prefix).await;
                        } else {
                            self.program(prefix, paths, &d).await;
                        }
                    }
                    Some((inputs, d))
                }
                _ => {
                    self.upa_gone(prefix);
                    self.program_none(prefix).await;
                    None
                }
            };
            if self.config.route_events {
                let view = self.view(prefix);
                let _ = self
                    .events
                    .send(SpeakerEvent::Route {
                        prefix,
                        route: view,
                    })
                    .await;
            }
            // Which neighbors get the route at all (averaged mode divides by their count):
            // not those it came from, not those already on its AS path.
            let incoming: Vec<IpAddr> = match &route {
                Some(LocRoute::Learned(paths)) => paths.iter().map(|p| p.peer).collect(),
                _ => vec![],
            };
            let targets: Vec<IpAddr> = established
                .iter()
                .copied()
                .filter(|a| !incoming.contains(a) && self.eligible(&route, *a))
                .collect();
            for &peer in &established {
                if self
                    .peers
                    .get(&peer)
                    .is_some_and(|p| p.orf_wait_until.is_some())
                {
                    continue;
                }
                // A neighbor's ORF filters what it is sent, not the averaged split.
                let out = if targets.contains(&peer)
                    && self.orf_permits(&prefix, peer)
                    && !self.summarized(&prefix, route.as_ref(), peer)
                {
                    self.outgoing(
                        prefix,
                        route.as_ref(),
                        decision.as_ref(),
                        peer,
                        targets.len(),
                    )
                } else {
                    None
                };
                let out = out.map(|a| match interned.get(&a) {
                    Some(x) => x.clone(),
                    None => {
                        let x = Arc::new(a);
                        interned.insert(x.clone());
                        x
                    }
                });
                let table = self.rib.adj_out.entry(peer).or_default();
                match out {
                    Some(a) => {
                        if table.get(&prefix) != Some(&a) {
                            table.insert(prefix, a.clone());
                            announce
                                .entry(peer)
                                .or_default()
                                .entry(a)
                                .or_default()
                                .push(prefix);
                        }
                    }
                    None => {
                        if table.remove(&prefix).is_some() {
                            withdraw.entry(peer).or_default().push(prefix);
                        }
                    }
                }
            }
        }
        let ctx = Context::default();
        for peer in established {
            let mut updates = Vec::new();
            if let Some(w) = withdraw.remove(&peer) {
                updates.extend(update::pack_withdraw(&w));
            }
            if let Some(groups) = announce.remove(&peer) {
                for (attrs, mut prefixes) in groups {
                    prefixes.sort();
                    updates.extend(update::pack(&attrs, &prefixes, ctx));
                }
            }
            if !updates.is_empty() {
                if let Some(p) = self.peers.get(&peer) {
                    let _ = p.commands.send(Command::Send(updates));
                }
            }
        }
    }

    fn eligible(&self, route: &Option<LocRoute>, peer: IpAddr) -> bool {
        let Some(p) = self.peers.get(&peer) else {
            return false;
        };
        match route {
            None => false,
            Some(LocRoute::Local | LocRoute::Unreachable) => true,
            // An RNIC is a stub speaker in each plane (mpson §3): it advertises only what
            // it originates, never one plane's routes (or UPAs) into another.
            Some(LocRoute::Learned(_)) if self.config.policy.role.is_stub() => false,
            // Sender-side loop check: a neighbor already on the AS path would drop it.
            Some(LocRoute::Learned(paths)) => !paths[0]
                .attrs
                .as_path
                .as_ref()
                .is_some_and(|a| a.contains(p.spec.remote_as)),
        }
    }

    /// True when every path carries a FIB-Suppress community another router attached
    /// (§4.2.1): the route stays in the RIB and is advertised, but not installed. The
    /// router that tagged it (the RNIC's own leaf) installs it, and so does an RNIC: it
    /// asked for exactly these host routes by Prefix-ORF to install them (§4.2);
    /// suppression is for switches.
    fn fib_suppressed(&self, paths: &[Path]) -> bool {
        if self.config.policy.role.is_stub() {
            return false;
        }
        let subtype = self.config.policy.fib_suppress_subtype;
        !paths.is_empty()
            && paths.iter().all(|p| {
                p.attrs.ext_communities.iter().any(|c| {
                    c.fib_suppress(subtype)
                        .is_some_and(|f| f.router_id != self.config.router_id)
                })
            })
    }

    /// True when every path announces the prefix unreachable (UPA).
    fn all_unreachable(&self, paths: &[Path]) -> bool {
        upa::all_unreachable(paths, self.config.policy.upa_subtype)
    }

    /// Recomputes which configured RNIC host routes this node announces unreachable: a
    /// host is reachable while some neighbor it is configured on (`upa_hosts`) gave us a
    /// route covering it. Changes make the prefix dirty (UPA advertised or withdrawn).
    fn update_unreachable(&mut self) {
        let configured = self
            .peers
            .iter()
            .map(|(a, p)| (*a, p.spec.upa_hosts.as_slice()));
        let now =
            upa::unreachable_hosts(configured, &self.rib.adj_in, self.config.policy.upa_subtype);
        if now == self.rib.unreachable {
            return;
        }
        for host in now.difference(&self.rib.unreachable) {
            info!(prefix = %host, "host unreachable through its neighbor: UPA advertised");
        }
        for host in self.rib.unreachable.difference(&now) {
            info!(prefix = %host, "host reachable again: UPA withdrawn");
        }
        self.dirty
            .extend(now.symmetric_difference(&self.rib.unreachable).copied());
        self.rib.unreachable = now;
    }

    /// A UPA-derived host route of an RNIC is over (the UPA was withdrawn or a path
    /// reaches the prefix again).
    fn upa_gone(&mut self, prefix: IpNet) {
        if self.unreachable_learned.remove(&prefix) {
            info!(%prefix, "UPA withdrawn: host route follows the aggregate again");
        }
    }

    /// What a node does with a prefix announced unreachable through `paths` (mpson
    /// §4.1). Switches install nothing. An RNIC installs a host route whose members are
    /// those of its longest-matching aggregate minus the neighbors that announced the
    /// prefix unreachable, so its traffic to the prefix no longer enters their planes;
    /// the aggregate stays installed (make-before-break: the more specific route takes
    /// over in one step).
    async fn program_avoiding(&mut self, prefix: IpNet, paths: &[Path]) {
        if self.config.policy.role != Role::Rnic {
            self.program_none(prefix).await;
            return;
        }
        let avoid: Vec<IpAddr> = paths.iter().map(|p| p.peer).collect();
        let remaining = upa::avoiding(
            &self.rib.loc,
            prefix,
            &avoid,
            self.config.policy.upa_subtype,
        );
        if remaining.is_empty() {
            // Nowhere else to go: the aggregate (if any) is as good as nothing.
            self.program_none(prefix).await;
            return;
        }
        let (_, d) = self.decide(&remaining);
        let new = !self.fib.contains_key(&prefix);
        self.program(prefix, &remaining, &d).await;
        if new {
            info!(%prefix, ?avoid, members = remaining.len(), "host route avoids the unreachable plane");
        }
    }

    /// True when `prefix` stays behind one of this node's aggregates toward `peer`
    /// (`summary_only`); UPAs always go.
    fn summarized(&self, prefix: &IpNet, route: Option<&LocRoute>, peer: IpAddr) -> bool {
        let Some(LocRoute::Learned(paths)) = route else {
            return false;
        };
        self.peers.get(&peer).is_some_and(|p| p.spec.summary_only)
            && !self.all_unreachable(paths)
            && upa::covered(&self.rib.local, prefix)
    }

    /// Peers whose wait for a first ORF is over: they get the full table now.
    fn orf_wait_expired(&mut self) {
        let now = tokio::time::Instant::now();
        let mut expired = false;
        for (addr, p) in self.peers.iter_mut() {
            if p.orf_wait_until.is_some_and(|t| t <= now) {
                p.orf_wait_until = None;
                warn!(peer = %addr, "no ORF within the wait: sending the full table");
                expired = true;
            }
        }
        if expired {
            self.dirty.extend(self.rib.loc.keys().copied());
        }
    }

    /// False when the neighbor's ORF for the prefix's family does not permit it.
    fn orf_permits(&self, prefix: &IpNet, peer: IpAddr) -> bool {
        let Some(list) = self
            .peers
            .get(&peer)
            .and_then(|p| p.orf.get(&nlri::family_of(prefix)))
            .filter(|l| !l.is_empty())
        else {
            return true;
        };
        let (entries, deny): (Vec<orf::PrefixEntry>, Vec<bool>) = list.iter().copied().unzip();
        orf::permits(&entries, &deny, prefix)
    }

    /// The attributes `prefix` is advertised with to `peer`.
    fn outgoing(
        &self,
        prefix: IpNet,
        route: Option<&LocRoute>,
        decision: Option<&(Vec<Received>, Decision)>,
        peer: IpAddr,
        outgoing_neighbors: usize,
    ) -> Option<PathAttributes> {
        let p = self.peers.get(&peer)?;
        let session = p.session.as_ref()?;
        let policy = &self.config.policy;
        let subtype = policy.subtype;
        let encoding = policy.encoding;
        let mut a = PathAttributes::default();
        match route? {
            LocRoute::Unreachable => {
                a.origin = Some(Origin::Igp);
                a.as_path = Some(AsPath::sequence(vec![self.config.asn]));
                a.ext_communities
                    .push(Upa::new(self.config.router_id).to_community(policy.upa_subtype));
            }
            LocRoute::Local => {
                // DPF §2.2.1: which sessions get the prefix, with which color and AIGP.
                let orig = dpf::originate(self.config.dpf.coloring(&prefix), p.spec.color)?;
                if let Some(c) = orig.color {
                    a.ext_communities
                        .push(ColorCommunity::new(c).to_community());
                }
                if orig.aigp_zero {
                    a.aigp = Some(Aigp::new(0));
                }
                a.origin = Some(Origin::Igp);
                a.as_path = Some(AsPath::sequence(vec![self.config.asn]));
                let value = policy.originate(p.link_gbps);
                a.ext_communities.push(
                    PathBandwidth::new(true, self.config.router_id, value)
                        .to_community(subtype, encoding),
                );
                // A super-spine attaches its link value to what it originates too.
                if policy.role == Role::SuperSpine && policy.draft.link_community {
                    if let Some(l) = p.link_gbps {
                        a.ext_communities.push(
                            PathBandwidth::new(false, self.config.router_id, l)
                                .to_community(subtype, encoding),
                        );
                    }
                }
            }
            LocRoute::Learned(paths) => {
                // DPF §2.2.2: match the session color against the active paths, then
                // against the inactive ones (re-advertise recolored, AIGP stripped).
                let active: Vec<Vec<u32>> = paths
                    .iter()
                    .map(|x| color::route_colors(&x.attrs.ext_communities))
                    .collect();
                let inactive = self.inactive_colors(prefix, paths);
                let (template, recolor) = match dpf::transit(p.spec.color, &active, &inactive) {
                    Transit::AsIs(i) => (i, None),
                    Transit::Recolor(c) => (0, Some(c)),
                    Transit::Skip => return None,
                };
                let best = &paths.get(template).unwrap_or(&paths[0]).attrs;
                if recolor.is_none() && p.spec.color.is_some() {
                    a.aigp = best.aigp.clone();
                }
                let (inputs, d) = decision?;
                a.origin = best.origin;
                a.as_path = Some(
                    best.as_path
                        .clone()
                        .unwrap_or_default()
                        .prepend(self.config.asn),
                );
                let keep = policy.passes_transitive(d);
                let adv = policy.readvertise(inputs, d, p.link_gbps, outgoing_neighbors);
                for c in &best.ext_communities {
                    // Non-transitive communities stop at the AS boundary (RFC 4360 §6).
                    if !c.is_transitive() {
                        continue;
                    }
                    if c.is_path_bandwidth(subtype) && !keep {
                        continue;
                    }
                    a.ext_communities.push(*c);
                }
                if let Some(c) = recolor {
                    color::strip_colors(&mut a.ext_communities);
                    a.ext_communities
                        .push(ColorCommunity::new(c).to_community());
                }
                if !keep {
                    if let Some(v) = adv.path_gbps {
                        a.ext_communities.push(
                            PathBandwidth::new(true, self.config.router_id, v)
                                .to_community(subtype, encoding),
                        );
                    }
                }
                if let Some(v) = adv.link_value_gbps {
                    a.ext_communities.push(
                        PathBandwidth::new(false, self.config.router_id, v)
                            .to_community(subtype, encoding),
                    );
                }
                for raw in &best.other {
                    if raw.is_optional() && !raw.is_transitive() {
                        continue;
                    }
                    if matches!(raw.type_code, 14 | 15 | 17 | 18) {
                        continue;
                    }
                    let mut raw = raw.clone();
                    if raw.is_optional() && !is_known(raw.type_code) {
                        raw.flags |= flag::PARTIAL;
                    }
                    a.other.push(raw);
                }
            }
        }
        a.ext_communities.sort();
        a.ext_communities.dedup();
        // NEXT_HOP = our address on this session (eBGP next-hop-self).
        let local = session.local_address;
        match (nlri::family_of(&prefix), local) {
            (Family::Ipv4Unicast, IpAddr::V4(v4)) => a.next_hop = Some(v4),
            (Family::Ipv4Unicast, IpAddr::V6(_)) => return None,
            (Family::Ipv6Unicast, local) => {
                let nh = match local {
                    IpAddr::V6(v6) => v6,
                    IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                };
                a.mp_reach = Some(MpReach {
                    family: Family::Ipv6Unicast,
                    next_hops: vec![IpAddr::V6(nh)],
                    nlri: vec![],
                });
            }
        }
        session
            .families
            .contains(&nlri::family_of(&prefix))
            .then_some(a)
    }

    /// The data plane member for path `p`.
    fn member(&self, p: &Path, weight: u32, bandwidth_gbps: f64) -> Member {
        let spec = self.peers.get(&p.peer).map(|x| &x.spec);
        Member {
            via: p.peer.to_string(),
            interface: spec.and_then(|s| s.interface.clone()).unwrap_or_default(),
            next_hop: Some(Self::next_hop(p, &p.peer)),
            neighbor_mac: None,
            weight,
            bandwidth_gbps,
        }
    }

    async fn program(&mut self, prefix: IpNet, paths: &[Path], d: &Decision) {
        let key: Vec<(IpAddr, u32)> = paths
            .iter()
            .map(|p| p.peer)
            .zip(d.weights.iter().copied())
            .collect();
        let colors = self.data_plane_colors(prefix, paths);
        let color_key: Vec<ColorGroupView> = colors
            .iter()
            .map(|c| ColorGroupView {
                color: c.color,
                active: c.active,
                members: c
                    .members
                    .iter()
                    .filter_map(|m| m.via.parse().ok().map(|a| (a, m.weight)))
                    .collect(),
            })
            .collect();
        let same_colors = self
            .color_fib
            .get(&prefix)
            .map_or(color_key.is_empty(), |k| *k == color_key);
        if self.fib.get(&prefix) == Some(&key) && same_colors {
            return;
        }
        let members = paths
            .iter()
            .enumerate()
            .map(|(i, p)| self.member(p, d.weights[i], d.bandwidths_gbps[i]))
            .collect();
        self.fib.insert(prefix, key);
        let group = Group {
            prefix,
            mode: self.config.group_mode,
            members,
        };
        let event = if colors.is_empty() {
            self.color_fib.remove(&prefix);
            SpeakerEvent::Group {
                prefix,
                group: Some(group),
            }
        } else {
            self.color_fib.insert(prefix, color_key);
            SpeakerEvent::ColoredGroup { group, colors }
        };
        let _ = self.events.send(event).await;
    }

    async fn program_none(&mut self, prefix: IpNet) {
        self.color_fib.remove(&prefix);
        if self.fib.remove(&prefix).is_some() {
            let _ = self
                .events
                .send(SpeakerEvent::Group {
                    prefix,
                    group: None,
                })
                .await;
        }
    }
}

/// True when the peer's OPEN says it will send Address Prefix ORFs (RFC 5291 §4).
fn peer_sends_orf(info: &SessionInfo) -> bool {
    info.capabilities.iter().any(|c| match c {
        Capability::Orf(list) => list.iter().any(|f| {
            f.types.iter().any(|(t, sr)| {
                matches!(*t, orf::ADDRESS_PREFIX | orf::PREFIX_LIST_PRESTANDARD)
                    && sr & orf::SEND != 0
            })
        }),
        _ => false,
    })
}

fn is_known(type_code: u8) -> bool {
    matches!(type_code, 1..=8 | 14..=16 | 32)
}

/// Applies ORF entries to a neighbor's list (RFC 5291 §3): ADD replaces an entry of the
/// same sequence and prefix, REMOVE deletes it, REMOVE-ALL empties the list.
fn apply_orf(list: &mut Vec<(orf::PrefixEntry, bool)>, entries: &[orf::OrfEntry]) {
    for e in entries {
        match (e.action, e.prefix) {
            (orf::Action::RemoveAll, _) => list.clear(),
            (orf::Action::Add, Some(p)) => {
                list.retain(|(q, _)| (q.sequence, q.prefix) != (p.sequence, p.prefix));
                list.push((p, e.deny));
            }
            (orf::Action::Remove, Some(p)) => {
                list.retain(|(q, _)| (q.sequence, q.prefix) != (p.sequence, p.prefix))
            }
            _ => {}
        }
    }
}
