//! The BGP speaker of one node: listeners, one task per neighbor, and the task that owns
//! the RIBs and applies the FARE policy.
//!
//! Outputs go to one channel of [`SpeakerEvent`]s: WCMP groups for the data plane,
//! route views for `fare show routes`, neighbor status changes. The agent forwards them
//! to its data plane task and shared state; tests and benchmarks read them directly.

use super::dpf::Dpf;
use super::fare::Policy;
use super::neighbor::{Command, NeighborStatus, SessionInfo, SharedStatus};
pub use super::packet::link_bandwidth::Mode as LinkBandwidthMode;
use super::packet::{orf, Family};
use super::rib::{EntryId, Rib};
use super::socket::{self, Protection};
use fare_model::forwarding::{ColorGroup, Group, GroupMode, Member};
use fare_model::topology::Role;
use ipnet::IpNet;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

mod decision;
mod events;
mod export;
mod mpson;
mod runtime;
pub use runtime::Replaced;

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
    /// The RFC 10005 Link Bandwidth community on this session (a neighbor that does not
    /// speak FARE).
    pub link_bandwidth: LinkBandwidthMode,
    /// Type of the Link Bandwidth community sent: transitive (0x00, what FRR 8 reads
    /// for UCMP) or non-transitive (0x40).
    pub link_bandwidth_transitive: bool,
}

impl NeighborSpec {
    /// A neighbor with nothing but its address and AS: actively connected, no interface
    /// or bandwidth, uncolored, no ORF, FIB-Suppress or UPA hosts.
    pub fn new(address: IpAddr, remote_as: u32) -> NeighborSpec {
        NeighborSpec {
            address,
            remote_as,
            interface: None,
            bandwidth_gbps: None,
            passive: false,
            local_address: None,
            protection: Protection::default(),
            role: None,
            color: None,
            orf_receive: false,
            orf_send: vec![],
            fib_suppress: false,
            upa_hosts: vec![],
            summary_only: false,
            link_bandwidth: LinkBandwidthMode::Off,
            link_bandwidth_transitive: true,
        }
    }

    /// The bandwidth of the link to this neighbor: the configured one, else the speed the
    /// interface's driver reports.
    fn link_gbps(&self) -> Option<f64> {
        self.bandwidth_gbps.or_else(|| {
            self.interface
                .as_deref()
                .and_then(fare_netdev::carrier::interface_speed_gbps)
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
    /// The bandwidth the decision gave the path (the received value capped by the link,
    /// or what the rule made of it), Gbps; None when the route is not weighted.
    pub path_bandwidth_gbps: Option<f64>,
    /// The Path Bandwidth value as received (infinite: "max"), Gbps; None without one.
    pub received_gbps: Option<f64>,
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
    /// The groups one decision round changed, in the order decided: runs of prefixes
    /// given one and the same group (one shared member list), or whose group is removed.
    /// One event per round (and per [`MAX_GROUP_BATCH`] prefixes), not one per prefix.
    Groups(Vec<GroupRun>),
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

/// Prefixes given one group, or whose group is removed (see [`SpeakerEvent::Groups`]).
#[derive(Clone, Debug, PartialEq)]
pub enum GroupRun {
    /// Install a group of `members` for each of `prefixes`.
    Install {
        prefixes: Vec<IpNet>,
        mode: GroupMode,
        members: Arc<[Member]>,
    },
    /// Remove the group of each of these prefixes.
    Remove(Vec<IpNet>),
}

impl GroupRun {
    pub fn prefixes(&self) -> &[IpNet] {
        match self {
            GroupRun::Install { prefixes, .. } | GroupRun::Remove(prefixes) => prefixes,
        }
    }

    /// Each prefix with its own [`Group`] (None: removed), for consumers that install
    /// prefix by prefix.
    pub fn groups(&self) -> impl Iterator<Item = (IpNet, Option<Group>)> + '_ {
        self.prefixes().iter().map(move |&prefix| {
            let group = match self {
                GroupRun::Install { mode, members, .. } => Some(Group {
                    prefix,
                    mode: *mode,
                    members: members.to_vec(),
                }),
                GroupRun::Remove(_) => None,
            };
            (prefix, group)
        })
    }
}

/// At most this many prefixes in one [`SpeakerEvent::Groups`].
pub const MAX_GROUP_BATCH: usize = 16_384;

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
    /// The operator shuts one neighbor down (`down`: the RFC 8203 shutdown communication)
    /// or enables it again (`None`). Replies false when it is not configured.
    AdminState {
        neighbor: IpAddr,
        down: Option<String>,
        reply: tokio::sync::oneshot::Sender<bool>,
    },
    /// Soft reset of one neighbor: ROUTE-REFRESH in (when the peer can) and every route
    /// advertised out again. Replies false when it is not configured.
    SoftReset {
        neighbor: IpAddr,
        reply: tokio::sync::oneshot::Sender<bool>,
    },
    /// Drain (`drained`) or undrain the links to one neighbor or of every neighbor over
    /// one interface: while drained, what this node advertises over them carries
    /// GRACEFUL_SHUTDOWN (RFC 8326) and its paths through them are used only when no
    /// other is left. Replies with the neighbors matched.
    Drain {
        neighbor: Option<IpAddr>,
        interface: Option<String>,
        drained: bool,
        reply: tokio::sync::oneshot::Sender<Vec<IpAddr>>,
    },
    /// The Path Bandwidth advertised to each neighbor, per prefix (from the
    /// Adj-RIBs-Out), at most `limit` entries, sorted by prefix then neighbor.
    Advertised {
        limit: usize,
        reply: tokio::sync::oneshot::Sender<Vec<Advertised>>,
    },
    /// Why one prefix has its group (`fare show explain`): its multipath set's inputs
    /// as received and the decision taken on them. None: no learned route.
    Explain {
        prefix: IpNet,
        reply: tokio::sync::oneshot::Sender<Option<RouteExplain>>,
    },
    /// Add a neighbor (a configuration reload): its task starts, the listeners take its
    /// connections; the other sessions are not touched. Err says why it cannot be added
    /// to the running speaker (then it needs a restart).
    AddNeighbor {
        spec: Box<NeighborSpec>,
        reply: tokio::sync::oneshot::Sender<Result<(), String>>,
    },
    /// Remove a neighbor (a configuration reload): its session ends with Cease / Peer
    /// De-configured (RFC 4486), its routes are withdrawn, its task stops; the other
    /// sessions are not touched. Replies false when it is not configured.
    RemoveNeighbor {
        neighbor: IpAddr,
        reply: tokio::sync::oneshot::Sender<bool>,
    },
    /// New session timers (a configuration reload): every neighbor uses them from its
    /// next OPEN and connection attempt; no session is reset.
    SetTimers {
        hold_time: u16,
        connect_retry: Duration,
        connect_retry_max: Duration,
    },
    /// Spread packets over the members this way from now on (a configuration reload):
    /// every group is installed again with the new mode; no session is touched.
    SetGroupMode(GroupMode),
    /// Change a neighbor's configuration (a configuration reload); see
    /// [`RibTask::replace_neighbor`]. Err says why the running speaker cannot.
    ReplaceNeighbor {
        spec: Box<NeighborSpec>,
        reply: tokio::sync::oneshot::Sender<Result<runtime::Replaced, String>>,
    },
    /// Originate exactly `prefixes` from now on (a configuration reload): the new ones
    /// are advertised, those no longer listed withdrawn, no session is touched. Replies
    /// with (added, removed), each sorted.
    SetPrefixes {
        prefixes: Vec<IpNet>,
        reply: tokio::sync::oneshot::Sender<(Vec<IpNet>, Vec<IpNet>)>,
    },
    Shutdown,
}

/// One path of a multipath set as the FARE decision took it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathExplain {
    pub neighbor: IpAddr,
    pub as_path: Vec<u32>,
    /// The 16 bits of the first transitive Path Bandwidth community, as received.
    pub wire_bits: Option<u16>,
    /// The same for the non-transitive one (attached by super-spines).
    pub link_value_bits: Option<u16>,
    /// Link bandwidth toward the neighbor and the decoded values.
    pub link_gbps: f64,
    pub path_gbps: Option<f64>,
    pub link_value_gbps: Option<f64>,
    /// The bandwidth the decision gave the path, and its weight.
    pub bandwidth_gbps: f64,
    pub weight: u32,
}

/// The decision of one prefix, with everything it was computed from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteExplain {
    pub prefix: IpNet,
    pub mode: fare_model::bandwidth::Mode,
    pub encoding: fare_model::bandwidth::Encoding,
    /// Per node or per session over parallel links (`fare.parallel_links`).
    pub parallel_links: fare_model::parallel::ParallelLinks,
    /// `min-sum`, `super-spine-pass-through`, `remote-spine` or `sum-over-n`.
    pub rule: &'static str,
    pub weighted: bool,
    pub paths: Vec<PathExplain>,
    /// Ratios within 1 + this count as exact.
    pub tolerance: f64,
    /// The weights without a group-size limit, and their oversubscription.
    pub ratio: Vec<u32>,
    pub ratio_delta: f64,
    /// The policy's limit (`fare.max_group_size`), if any.
    pub max_group_size: Option<u32>,
    /// Draft: the transitive value advertised, before the wire (None: none, or averaged
    /// mode, where it depends on each outgoing link).
    pub advertised_gbps: Option<f64>,
}

/// One prefix as advertised to one neighbor, with the Path Bandwidth it carries.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Advertised {
    pub prefix: IpNet,
    pub neighbor: IpAddr,
    /// None: advertised without a Path Bandwidth community.
    pub path_bandwidth_gbps: Option<f64>,
}

/// A running speaker.
#[derive(Clone)]
pub struct SpeakerHandle {
    pub commands: mpsc::Sender<SpeakerCommand>,
    /// Every configured neighbor's status (neighbors added and removed at run time too).
    pub neighbors: Arc<Mutex<Vec<SharedStatus>>>,
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
    /// The neighbor's address as group members name it (`Member::via`), formatted once
    /// instead of for every group.
    via: String,
    /// Drained by the operator ([`SpeakerCommand::Drain`]).
    drained: bool,
    /// Its task's generation: events of another (an earlier task of the same address)
    /// are dropped.
    generation: u64,
}

/// Starts listeners, neighbor tasks and the RIB task. Fails when a listener cannot bind.
pub async fn start(
    config: SpeakerConfig,
    events: mpsc::Sender<SpeakerEvent>,
) -> std::io::Result<SpeakerHandle> {
    // Decoded UPDATEs waiting for the RIB task: a few dozen are enough to keep it busy,
    // and each holds its prefixes (~16 KiB for a full one), so a long queue is only
    // memory (about 20 MiB at 1024 in a million-prefix ingest, kept by the allocator
    // after).
    let (session_tx, session_rx) = mpsc::channel(64);
    let mut peers = FxHashMap::default();
    let mut statuses = Vec::new();
    for spec in &config.neighbors {
        let peer = runtime::spawn_neighbor(&config, spec, &session_tx);
        statuses.push(peer.status.clone());
        peers.insert(spec.address, peer);
    }
    let accept = runtime::SharedAccept::default();
    if let Ok(mut t) = accept.write() {
        t.peers = peers
            .iter()
            .map(|(a, p)| (*a, p.incoming.clone()))
            .collect();
    }
    let mut listening = Vec::new();
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
            if let Ok(mut t) = accept.write() {
                t.gtsm
                    .extend(wanted.iter().filter(|k| k.1.gtsm).map(|k| k.0));
            }
            listening.push((v6, all_gtsm));
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
                tokio::spawn(accept_loop(listener, accept.clone()));
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
        tokio::spawn(watch_links(
            watched.clone(),
            config.link_poll,
            cmd_tx.clone(),
        ));
    }
    let statuses = Arc::new(Mutex::new(statuses));
    let runtime = runtime::Runtime {
        sessions: Some(session_tx),
        accept,
        listening,
        watched,
        commands: Some(cmd_tx.downgrade()),
        statuses: statuses.clone(),
    };
    let mut rib = Rib::default();
    rib.upa_subtype = Some(config.policy.upa_subtype);
    for p in &config.prefixes {
        rib.local.insert(p.trunc());
    }
    let task = RibTask {
        dirty: config.prefixes.iter().map(|p| p.trunc()).collect(),
        config,
        rib,
        peers,
        events,
        color_fib: FxHashMap::default(),
        batch: Default::default(),
        unreachable_learned: FxHashSet::default(),
        runtime,
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
    let mut netlink = match fare_netdev::carrier::LinkWatcher::open() {
        Ok(w) => Some(w),
        Err(e) => {
            warn!("no link events (netlink): {e}");
            None
        }
    };
    let probe = if poll.is_zero() {
        None
    } else {
        fare_netdev::carrier::CarrierProbe::open()
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
                        (known.get(i) != Some(&up)).then(|| fare_netdev::carrier::LinkEvent {
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
            let speed_gbps = fare_netdev::carrier::interface_speed_gbps(&e.interface);
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

async fn accept_loop(listener: tokio::net::TcpListener, table: runtime::SharedAccept) {
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
        let (to, gtsm) = match table.read() {
            Ok(t) => (t.peers.get(&ip).cloned(), t.gtsm.contains(&ip)),
            Err(_) => (None, false),
        };
        match to {
            Some(tx) => {
                if gtsm {
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

/// Prefixes to decide at the next flush. Those a learned or forgotten path made dirty
/// come with their RIB entry, in arrival order: the RIB marks the entry queued, so each
/// is listed once without a hash set, decided without a lookup, and the entries are
/// read in the order the feed made them. The others (whole-table re-decisions, local
/// and UPA prefixes, a neighbor's routes when it goes) in a set.
#[derive(Default)]
struct Dirty {
    queued: Vec<(IpNet, EntryId)>,
    other: FxHashSet<IpNet>,
}

impl Dirty {
    /// A prefix whose entry the RIB just queued ([`Rib::queue`]).
    fn push(&mut self, prefix: IpNet, entry: EntryId) {
        self.queued.push((prefix, entry));
    }
    fn len(&self) -> usize {
        self.queued.len() + self.other.len()
    }
    fn is_empty(&self) -> bool {
        self.queued.is_empty() && self.other.is_empty()
    }
    fn iter(&self) -> impl Iterator<Item = &IpNet> {
        self.queued.iter().map(|(p, _)| p).chain(self.other.iter())
    }
    /// Every prefix to decide, once: the queued ones, then the others `rib` has not
    /// queued.
    fn drain(&mut self, rib: &Rib) -> Vec<(IpNet, Option<EntryId>)> {
        let mut all: Vec<(IpNet, Option<EntryId>)> =
            self.queued.drain(..).map(|(p, e)| (p, Some(e))).collect();
        all.extend(
            self.other
                .drain()
                .filter(|p| !rib.is_queued(p))
                .map(|p| (p, None)),
        );
        all
    }
}

impl Extend<IpNet> for Dirty {
    fn extend<I: IntoIterator<Item = IpNet>>(&mut self, prefixes: I) {
        self.other.extend(prefixes);
    }
}

impl FromIterator<IpNet> for Dirty {
    fn from_iter<I: IntoIterator<Item = IpNet>>(prefixes: I) -> Self {
        Dirty {
            queued: Vec::new(),
            other: prefixes.into_iter().collect(),
        }
    }
}

/// At most this many dirty prefixes before the RIB task decides them (see `RibTask::run`).
const MAX_BATCH_PREFIXES: usize = 16_384;

struct RibTask {
    config: SpeakerConfig,
    rib: Rib,
    peers: FxHashMap<IpAddr, Peer>,
    events: mpsc::Sender<SpeakerEvent>,
    /// Per-color groups sent with each group (DPF), to send only changes.
    color_fib: FxHashMap<IpNet, Vec<ColorGroupView>>,
    dirty: Dirty,
    /// Group changes of the decision round under way, sent at its end.
    batch: decision::GroupBatch,
    /// Prefixes whose every path announces them unreachable (UPA): an RNIC's host
    /// routes derived from its aggregates, recomputed when an aggregate changes.
    unreachable_learned: FxHashSet<IpNet>,
    /// What neighbors added at run time need of the running speaker.
    runtime: runtime::Runtime,
}

impl RibTask {
    async fn run(
        mut self,
        mut sessions: mpsc::Receiver<crate::neighbor::Tagged>,
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
                    self.on_tagged(ev).await;
                    // Drain what is queued, then decide once for the batch. The batch is
                    // bounded in prefixes too: while this task is behind, the dirty set
                    // (and what `flush` builds from it) would otherwise hold the whole
                    // backlog at once (a million prefixes: tens of MiB at the peak).
                    for _ in 0..4096 {
                        if self.dirty.len() >= MAX_BATCH_PREFIXES {
                            break;
                        }
                        match sessions.try_recv() {
                            Ok(ev) => self.on_tagged(ev).await,
                            Err(_) => break,
                        }
                    }
                }
                cmd = commands.recv() => match cmd {
                    Some(SpeakerCommand::Link { interface, up, speed_gbps }) => {
                        self.on_link(&interface, up, speed_gbps).await;
                    }
                    Some(SpeakerCommand::SetBandwidth { neighbor, interface, gbps, reply }) => {
                        let _ = reply.send(self.set_bandwidth(neighbor, interface.as_deref(), gbps));
                    }
                    Some(SpeakerCommand::Routes(reply)) => {
                        let mut all: Vec<RouteView> =
                            self.rib.prefixes().collect::<Vec<_>>()
                                .into_iter().filter_map(|p| self.view(p)).collect();
                        all.sort_by_key(|r| r.prefix);
                        let _ = reply.send(all);
                    }
                    Some(SpeakerCommand::Refresh { neighbor, reply }) => {
                        let _ = reply.send(self.request_refresh(neighbor));
                    }
                    Some(SpeakerCommand::AdminState { neighbor, down, reply }) => {
                        let _ = reply.send(self.admin_state(neighbor, down));
                    }
                    Some(SpeakerCommand::AddNeighbor { spec, reply }) => {
                        let _ = reply.send(self.add_neighbor(*spec));
                    }
                    Some(SpeakerCommand::SetTimers { hold_time, connect_retry, connect_retry_max }) => {
                        self.config.hold_time = hold_time;
                        self.config.connect_retry = connect_retry;
                        self.config.connect_retry_max = connect_retry_max;
                        for p in self.peers.values() {
                            let _ = p.commands.send(Command::Timers { hold_time, connect_retry, connect_retry_max });
                        }
                    }
                    Some(SpeakerCommand::SetGroupMode(mode)) => {
                        if self.config.group_mode != mode {
                            info!(?mode, "group mode changed");
                            self.config.group_mode = mode;
                            self.dirty.extend(self.rib.prefixes());
                            self.batch.relabel = true;
                        }
                    }
                    Some(SpeakerCommand::ReplaceNeighbor { spec, reply }) => {
                        let _ = reply.send(self.replace_neighbor(*spec));
                    }
                    Some(SpeakerCommand::RemoveNeighbor { neighbor, reply }) => {
                        let _ = reply.send(self.remove_neighbor(neighbor));
                    }
                    Some(SpeakerCommand::SetPrefixes { prefixes, reply }) => {
                        let _ = reply.send(self.set_prefixes(&prefixes));
                    }
                    Some(SpeakerCommand::SoftReset { neighbor, reply }) => {
                        let _ = reply.send(self.soft_reset(neighbor));
                    }
                    Some(SpeakerCommand::Drain { neighbor, interface, drained, reply }) => {
                        let _ = reply.send(self.drain(neighbor, interface.as_deref(), drained));
                    }
                    Some(SpeakerCommand::Advertised { limit, reply }) => {
                        let _ = reply.send(self.advertised(limit));
                    }
                    Some(SpeakerCommand::Explain { prefix, reply }) => {
                        let _ = reply.send(self.explain(prefix));
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::community::PathBandwidth;
    use crate::neighbor::SessionEvent;
    use crate::packet::{update, AsPath, Context, Origin, PathAttributes};

    const PEER_AS: u32 = 65002;

    fn peer_addr(i: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, i))
    }

    fn net(s: &str) -> IpNet {
        s.parse().unwrap_or_else(|_| panic!("bad prefix {s}"))
    }

    /// A RIB task with neighbors 10.0.0.1 and 10.0.0.2 (AS 65002, 100 Gbps links, no
    /// session: nothing is exported), and the receiving end of its events.
    fn task() -> (RibTask, mpsc::Receiver<SpeakerEvent>) {
        let spec = |i: u8| NeighborSpec {
            interface: Some(format!("eth{i}")),
            bandwidth_gbps: Some(100.0),
            passive: true,
            ..NeighborSpec::new(peer_addr(i), PEER_AS)
        };
        let config = SpeakerConfig {
            router_id: Ipv4Addr::new(10, 255, 0, 1),
            asn: 65001,
            port: 179,
            listen: false,
            listen_addresses: vec![],
            hold_time: 0,
            connect_retry: Duration::from_secs(1),
            connect_retry_max: Duration::from_secs(1),
            link_poll: Duration::ZERO,
            policy: Policy::default(),
            group_mode: GroupMode::Spray,
            neighbors: vec![spec(1), spec(2)],
            prefixes: vec![],
            orf_wait: Duration::from_millis(100),
            route_events: false,
            dpf: Dpf::default(),
        };
        let mut peers = FxHashMap::default();
        for spec in &config.neighbors {
            let (commands, _) = mpsc::unbounded_channel();
            let (incoming, _) = mpsc::channel(1);
            peers.insert(
                spec.address,
                Peer {
                    status: Arc::new(Mutex::new(NeighborStatus::new(spec.address, PEER_AS))),
                    commands,
                    incoming,
                    session: None,
                    link_gbps: spec.bandwidth_gbps,
                    link_up: true,
                    orf: HashMap::new(),
                    orf_wait_until: None,
                    via: spec.address.to_string(),
                    drained: false,
                    generation: 0,
                    spec: spec.clone(),
                },
            );
        }
        let (events, rx) = mpsc::channel(16);
        let task = RibTask {
            config,
            rib: Rib::default(),
            peers,
            events,
            color_fib: FxHashMap::default(),
            dirty: Dirty::default(),
            batch: Default::default(),
            unreachable_learned: FxHashSet::default(),
            runtime: Default::default(),
        };
        (task, rx)
    }

    /// An UPDATE from a neighbor of AS 65002 with a Path Bandwidth of `gbps`.
    fn announce(prefixes: &[&str], gbps: f64) -> update::Update {
        let p = Policy::default();
        let attrs = PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence(vec![PEER_AS])),
            next_hop: Some(Ipv4Addr::new(192, 0, 2, 1)),
            ext_communities: vec![PathBandwidth::new(true, Ipv4Addr::new(10, 9, 9, 9), gbps)
                .to_community(p.subtype, p.encoding)],
            ..Default::default()
        };
        let nets: Vec<IpNet> = prefixes.iter().map(|s| net(s)).collect();
        let mut u = update::pack(&attrs, &nets, Context::default());
        assert_eq!(u.len(), 1);
        u.remove(0)
    }

    /// (prefixes, Some((via, weight) of each member)) of each run; None: removal.
    type Runs = Vec<(Vec<IpNet>, Option<Vec<(String, u32)>>)>;

    /// The runs of the one event the flush sent, each install run with one member list.
    async fn flushed(task: &mut RibTask, rx: &mut mpsc::Receiver<SpeakerEvent>) -> Runs {
        task.flush().await;
        let Ok(SpeakerEvent::Groups(runs)) = rx.try_recv() else {
            panic!("no group event");
        };
        assert!(rx.try_recv().is_err(), "one event per flush");
        runs.into_iter()
            .map(|r| match r {
                GroupRun::Install {
                    prefixes, members, ..
                } => {
                    let m = members.iter().map(|m| (m.via.clone(), m.weight)).collect();
                    (prefixes, Some(m))
                }
                GroupRun::Remove(prefixes) => (prefixes, None),
            })
            .collect()
    }

    /// An UPDATE from a neighbor with AS path `path`, a Path Bandwidth of `gbps` and the
    /// DPF colors `colors`.
    fn announce_colored(prefix: &str, path: &[u32], gbps: f64, colors: &[u32]) -> update::Update {
        let p = Policy::default();
        let mut ext = vec![PathBandwidth::new(true, Ipv4Addr::new(10, 9, 9, 9), gbps)
            .to_community(p.subtype, p.encoding)];
        ext.extend(
            colors
                .iter()
                .map(|c| crate::packet::ColorCommunity::new(*c).to_community()),
        );
        let attrs = PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence(path.to_vec())),
            next_hop: Some(Ipv4Addr::new(192, 0, 2, 1)),
            ext_communities: ext,
            ..Default::default()
        };
        let mut u = update::pack(&attrs, &[net(prefix)], Context::default());
        u.remove(0)
    }

    fn active(task: &RibTask, p: IpNet) -> Vec<crate::rib::Path> {
        match task.rib.route(&p) {
            Some(crate::rib::LocRoute::Learned(paths)) => paths.to_vec(),
            other => panic!("{other:?}"),
        }
    }

    /// DPF (draft-wang-idr-dpf §2.2.3): one color active, another only on a backup path;
    /// then both active (per-color groups for the data plane); then back to one, which
    /// drops the per-color groups.
    #[tokio::test]
    async fn colors_of_active_and_backup_paths() {
        let (mut task, mut rx) = task();
        let (a, b) = (peer_addr(1), peer_addr(2));
        let p = net("10.5.0.0/24");
        task.on_update(a, announce_colored("10.5.0.0/24", &[PEER_AS], 100.0, &[1]));
        task.on_update(
            b,
            announce_colored("10.5.0.0/24", &[PEER_AS, 65003], 100.0, &[2]),
        );
        assert!(!flushed(&mut task, &mut rx).await.is_empty());
        let one = active(&task, p);
        assert_eq!(one.iter().map(|x| x.peer).collect::<Vec<_>>(), [a]);
        assert_eq!(task.inactive_colors(p, &one), vec![vec![2]]);
        let view = |color, active, members: Vec<(IpAddr, u32)>| ColorGroupView {
            color,
            active,
            members,
        };
        assert_eq!(
            task.color_groups(p, &one),
            [view(1, true, vec![(a, 1)]), view(2, false, vec![(b, 1)])]
        );
        assert!(
            task.data_plane_colors(p, &one).is_empty(),
            "one active color"
        );
        // Both paths equally good: two active colors, a colored group.
        task.on_update(b, announce_colored("10.5.0.0/24", &[PEER_AS], 100.0, &[2]));
        task.flush().await;
        let Ok(SpeakerEvent::ColoredGroup { group, colors }) = rx.try_recv() else {
            panic!("no colored group");
        };
        assert_eq!(group.members.len(), 2);
        let got: Vec<(u32, bool, Vec<String>)> = colors
            .iter()
            .map(|c| {
                (
                    c.color,
                    c.active,
                    c.members.iter().map(|m| m.via.clone()).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (1, true, vec![a.to_string()]),
                (2, true, vec![b.to_string()])
            ]
        );
        assert!(task.inactive_colors(p, &active(&task, p)).is_empty());
        // Back to one active color: a plain group again, the per-color ones forgotten.
        task.on_update(
            b,
            announce_colored("10.5.0.0/24", &[PEER_AS, 65003], 100.0, &[2]),
        );
        assert_eq!(
            flushed(&mut task, &mut rx).await,
            vec![(vec![p], Some(vec![(a.to_string(), 1)]))]
        );
        assert!(!task.color_fib.contains_key(&p));
        // Both active with one color: a plain group.
        task.on_update(b, announce_colored("10.5.0.0/24", &[PEER_AS], 100.0, &[1]));
        assert_eq!(
            flushed(&mut task, &mut rx).await,
            vec![(vec![p], Some(vec![(a.to_string(), 1), (b.to_string(), 1)]))]
        );
        // Two colors again, then the route gone: its group and per-color state too.
        task.on_update(b, announce_colored("10.5.0.0/24", &[PEER_AS], 100.0, &[2]));
        task.flush().await;
        assert!(matches!(
            rx.try_recv(),
            Ok(SpeakerEvent::ColoredGroup { .. })
        ));
        assert!(task.color_fib.contains_key(&p));
        for peer in [a, b] {
            let mut gone = update::pack_withdraw(&[p]);
            task.on_update(peer, gone.remove(0));
        }
        assert_eq!(flushed(&mut task, &mut rx).await, vec![(vec![p], None)]);
        assert!(!task.color_fib.contains_key(&p));
    }

    /// RFC 10005 Link Bandwidth stands in for a missing Path Bandwidth only from a
    /// neighbor configured to accept it: 40 (accepted) against 10 (Path Bandwidth) is
    /// 4:1; against a neighbor whose Link Bandwidth is not accepted, that path has no
    /// value and the group is plain ECMP.
    #[tokio::test]
    async fn link_bandwidth_only_from_neighbors_that_accept_it() {
        let (mut task, mut rx) = task();
        let (a, b) = (peer_addr(1), peer_addr(2));
        if let Some(peer) = task.peers.get_mut(&a) {
            peer.spec.link_bandwidth = LinkBandwidthMode::Accept;
        }
        let lb = |gbps| {
            crate::packet::link_bandwidth::LinkBandwidth::from_gbps(true, PEER_AS, gbps)
                .to_community()
        };
        let mut from_a = announce(&["10.8.0.0/24"], 1.0);
        from_a.attributes.ext_communities = vec![lb(40.0)];
        task.on_update(a, from_a);
        task.on_update(b, announce(&["10.8.0.0/24"], 10.0));
        let weights = |runs: Runs| {
            runs.into_iter()
                .flat_map(|(_, m)| m.unwrap_or_default())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            weights(flushed(&mut task, &mut rx).await),
            [(a.to_string(), 4), (b.to_string(), 1)]
        );
        let mut from_b = announce(&["10.8.0.0/24"], 1.0);
        from_b.attributes.ext_communities = vec![lb(10.0)];
        task.on_update(b, from_b);
        assert_eq!(
            weights(flushed(&mut task, &mut rx).await),
            [(a.to_string(), 1), (b.to_string(), 1)]
        );
    }

    /// Consecutive removals share one run; route views (with `route_events`) follow the
    /// group changes of their round, one per prefix.
    #[tokio::test]
    async fn removals_share_a_run_and_route_views_follow_the_groups() {
        let (mut task, mut rx) = task();
        task.config.route_events = true;
        let a = peer_addr(1);
        let nets = ["10.3.0.0/24", "10.3.1.0/24"];
        task.on_update(a, announce(&nets, 10.0));
        task.flush().await;
        let Ok(SpeakerEvent::Groups(runs)) = rx.try_recv() else {
            panic!("no group event");
        };
        assert_eq!(runs.len(), 1);
        for n in nets {
            let Ok(SpeakerEvent::Route { prefix, route }) = rx.try_recv() else {
                panic!("no route view for {n}");
            };
            assert_eq!((prefix, route.is_some()), (net(n), true));
        }
        let mut gone = update::pack_withdraw(&[net(nets[0]), net(nets[1])]);
        task.on_update(a, gone.remove(0));
        task.flush().await;
        let Ok(SpeakerEvent::Groups(runs)) = rx.try_recv() else {
            panic!("no group event");
        };
        assert_eq!(
            runs,
            vec![GroupRun::Remove(vec![net(nets[0]), net(nets[1])])]
        );
        for n in nets {
            let Ok(SpeakerEvent::Route { prefix, route }) = rx.try_recv() else {
                panic!("no route view for {n}");
            };
            assert_eq!((prefix, route), (net(n), None));
        }
        assert!(rx.try_recv().is_err());
    }

    /// `n` consecutive /24s in 10/8 announced by `peer`; the prefixes.
    fn announce_many(task: &mut RibTask, peer: IpAddr, n: usize) -> Vec<IpNet> {
        let nets: Vec<IpNet> = (0..n as u32)
            .map(|i| {
                IpNet::V4(ipnet::Ipv4Net::new(Ipv4Addr::from((10 << 24) | (i << 8)), 24).unwrap())
            })
            .collect();
        let attrs = announce(&["10.0.0.0/24"], 10.0).attributes;
        for u in update::pack(&attrs, &nets, Context::default()) {
            task.on_update(peer, u);
        }
        nets
    }

    /// The prefixes of each group event, taken as they come (the task's channel holds
    /// 16 events), until the task is dropped.
    fn batch_sizes(mut rx: mpsc::Receiver<SpeakerEvent>) -> tokio::task::JoinHandle<Vec<usize>> {
        tokio::spawn(async move {
            let mut sizes = vec![];
            while let Some(ev) = rx.recv().await {
                if let SpeakerEvent::Groups(runs) = ev {
                    sizes.push(runs.iter().map(|r| r.prefixes().len()).sum::<usize>());
                }
            }
            sizes
        })
    }

    /// A round of more than MAX_GROUP_BATCH prefixes goes out in batches of that many.
    #[tokio::test]
    async fn a_long_round_is_sent_in_batches_of_max_group_batch() {
        let (mut task, rx) = task();
        let a = peer_addr(1);
        let extra = 100;
        let nets = announce_many(&mut task, a, MAX_GROUP_BATCH + extra);
        let taker = batch_sizes(rx);
        task.flush().await;
        // Withdrawn again: the removals too go out in batches of that many.
        for u in update::pack_withdraw(&nets) {
            task.on_update(a, u);
        }
        task.flush().await;
        drop(task);
        let sizes = vec![MAX_GROUP_BATCH, extra];
        assert_eq!(taker.await.unwrap(), [sizes.clone(), sizes].concat());
    }

    /// With route views, a prefix's group and its view both count toward a batch: a
    /// round of 10,000 prefixes goes out as 8,192 and 1,808.
    #[tokio::test]
    async fn route_views_count_toward_a_batch() {
        let (mut task, rx) = task();
        task.config.route_events = true;
        announce_many(&mut task, peer_addr(1), 10_000);
        let taker = batch_sizes(rx);
        task.flush().await;
        drop(task);
        assert_eq!(
            taker.await.unwrap(),
            vec![MAX_GROUP_BATCH / 2, 10_000 - MAX_GROUP_BATCH / 2]
        );
    }

    /// A colored route is sent again only when it changed: its members, its colors, or
    /// (relabelled) the bandwidth behind unchanged weights; a plain route beside it is
    /// relabelled too.
    #[tokio::test]
    async fn colored_groups_are_sent_again_only_when_they_change() {
        let (mut task, mut rx) = task();
        let (a, b) = (peer_addr(1), peer_addr(2));
        let (colored, plain) = (net("10.5.0.0/24"), net("10.6.0.0/24"));
        task.on_update(a, announce_colored("10.5.0.0/24", &[PEER_AS], 100.0, &[1]));
        task.on_update(b, announce_colored("10.5.0.0/24", &[PEER_AS], 100.0, &[2]));
        task.on_update(a, announce(&["10.6.0.0/24"], 100.0));
        task.flush().await;
        let mut events = vec![];
        while let Ok(ev) = rx.try_recv() {
            events.push(ev);
        }
        assert_eq!(events.len(), 2, "{events:?}");
        // Equal attributes but for MED (not part of the decision): nothing to send.
        let mut again = announce_colored("10.5.0.0/24", &[PEER_AS], 100.0, &[1]);
        again.attributes.med = Some(5);
        task.on_update(a, again);
        task.flush().await;
        assert!(rx.try_recv().is_err(), "unchanged, nothing sent");
        // New weights (2:1), the same one member per color: sent again.
        task.on_update(a, announce_colored("10.5.0.0/24", &[PEER_AS], 50.0, &[1]));
        task.flush().await;
        let Ok(SpeakerEvent::ColoredGroup { group, .. }) = rx.try_recv() else {
            panic!("no colored group after a weight change");
        };
        let w: Vec<u32> = group.members.iter().map(|m| m.weight).collect();
        assert_eq!(w, [1, 2]);
        // A link bandwidth that leaves every weight as it was (a's link 100 -> 60 Gbps: the
        // colored route's path from a stays at its 50, the plain one's drops to 60): both
        // routes are sent again.
        task.set_bandwidth(Some(a), None, Some(60.0));
        task.flush().await;
        let mut colored_again = None;
        let mut plain_again = None;
        while let Ok(ev) = rx.try_recv() {
            match ev {
                SpeakerEvent::ColoredGroup { group, .. } => colored_again = Some(group),
                SpeakerEvent::Groups(runs) => plain_again = Some(runs),
                _ => {}
            }
        }
        let group = colored_again.expect("the colored route relabelled");
        assert_eq!(group.prefix, colored);
        let bw: Vec<f64> = group.members.iter().map(|m| m.bandwidth_gbps).collect();
        assert_eq!(bw, [50.0, 100.0]);
        let runs = plain_again.expect("the plain route relabelled");
        assert_eq!(runs[0].prefixes(), &[plain]);
        let plain_bw: Vec<f64> = runs[0]
            .groups()
            .filter_map(|(_, g)| g)
            .flat_map(|g| g.members.into_iter().map(|m| m.bandwidth_gbps))
            .collect();
        assert_eq!(plain_bw, [60.0]);
    }

    /// `explain`: each path's wire values by kind (transitive, non-transitive), its
    /// weight; nothing for a prefix without a learned route.
    #[tokio::test]
    async fn explain_reads_each_value_of_its_kind() {
        let (mut task, mut rx) = task();
        let (a, b) = (peer_addr(1), peer_addr(2));
        let pol = Policy::default();
        let transitive = PathBandwidth::new(true, Ipv4Addr::new(10, 9, 9, 9), 40.0)
            .to_community(pol.subtype, pol.encoding);
        let link_value = PathBandwidth::new(false, Ipv4Addr::new(10, 9, 9, 9), 80.0)
            .to_community(pol.subtype, pol.encoding);
        let mut u = announce(&["10.6.0.0/24"], 40.0);
        u.attributes.ext_communities = vec![link_value, transitive];
        task.on_update(a, u);
        task.on_update(b, announce(&["10.6.0.0/24"], 20.0));
        flushed(&mut task, &mut rx).await;
        let e = task.explain(net("10.6.0.0/24")).unwrap();
        let bits = |c: &crate::packet::ExtCommunity| Some(u16::from_be_bytes([c.0[6], c.0[7]]));
        let by_peer: Vec<(IpAddr, Option<u16>, Option<u16>, u32)> = e
            .paths
            .iter()
            .map(|x| (x.neighbor, x.wire_bits, x.link_value_bits, x.weight))
            .collect();
        assert_eq!(by_peer[0], (a, bits(&transitive), bits(&link_value), 2));
        assert_eq!(by_peer[1].0, b);
        assert_eq!((by_peer[1].2, by_peer[1].3), (None, 1));
        assert_eq!(task.explain(net("10.7.0.0/24")), None);
    }

    /// One event per flush: consecutive prefixes with the same group share one run (one
    /// member list), a different group starts a new run, removals form their own.
    #[tokio::test]
    async fn group_changes_are_batched_in_runs() {
        let (mut task, mut rx) = task();
        let (a, b) = (peer_addr(1), peer_addr(2));
        task.on_update(
            a,
            announce(&["10.1.0.0/24", "10.1.1.0/24", "10.1.2.0/24"], 10.0),
        );
        task.on_update(a, announce(&["10.2.0.0/24"], 20.0));
        let one = |w| Some(vec![(a.to_string(), w)]);
        assert_eq!(
            flushed(&mut task, &mut rx).await,
            vec![
                (
                    vec![net("10.1.0.0/24"), net("10.1.1.0/24"), net("10.1.2.0/24")],
                    one(1)
                ),
                (vec![net("10.2.0.0/24")], one(1)),
            ]
        );
        // The second neighbor with 30 Gbps for two of them: 10 and 30 -> 1:3. The third
        // prefix is withdrawn by the first neighbor and gone.
        task.on_update(b, announce(&["10.1.0.0/24", "10.1.1.0/24"], 30.0));
        let mut gone = update::pack_withdraw(&[net("10.1.2.0/24")]);
        task.on_update(a, gone.remove(0));
        assert_eq!(
            flushed(&mut task, &mut rx).await,
            vec![
                (
                    vec![net("10.1.0.0/24"), net("10.1.1.0/24")],
                    Some(vec![(a.to_string(), 1), (b.to_string(), 3)])
                ),
                (vec![net("10.1.2.0/24")], None),
            ]
        );
        // A second path of the same bandwidth: 1:1, members as a per-prefix group.
        task.on_update(b, announce(&["10.2.0.0/24"], 20.0));
        task.flush().await;
        let Ok(SpeakerEvent::Groups(runs)) = rx.try_recv() else {
            panic!("no group event");
        };
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].prefixes(), &[net("10.2.0.0/24")]);
        let per_prefix: Vec<(IpNet, Option<Group>)> = runs[0].groups().collect();
        let Some(g) = &per_prefix[0].1 else {
            panic!("removed")
        };
        let w: Vec<(&str, u32, &str)> = g
            .members
            .iter()
            .map(|m| (m.via.as_str(), m.weight, m.interface.as_str()))
            .collect();
        assert_eq!(w, vec![("10.0.0.1", 1, "eth1"), ("10.0.0.2", 1, "eth2")]);
        task.flush().await;
        assert!(rx.try_recv().is_err(), "nothing changed, nothing sent");
    }

    /// A link bandwidth set at run time that leaves every weight as it was still sends
    /// the groups again, with the members' new bandwidths (what `show groups` reports);
    /// the next flush without a change sends nothing.
    #[tokio::test]
    async fn bandwidth_set_with_the_same_weights_sends_the_new_bandwidths() {
        let (mut task, mut rx) = task();
        let a = peer_addr(1);
        task.on_update(a, announce(&["10.1.0.0/24"], 400.0));
        task.flush().await;
        let bandwidths = |rx: &mut mpsc::Receiver<SpeakerEvent>| -> Vec<(u32, f64)> {
            let Ok(SpeakerEvent::Groups(runs)) = rx.try_recv() else {
                return vec![];
            };
            runs.iter()
                .flat_map(|r| r.groups())
                .filter_map(|(_, g)| g)
                .flat_map(|g| g.members.into_iter().map(|m| (m.weight, m.bandwidth_gbps)))
                .collect()
        };
        // One path: min(link 100, received 400).
        assert_eq!(bandwidths(&mut rx), [(1, 100.0)]);
        assert_eq!(
            task.set_bandwidth(Some(a), None, Some(25.0)),
            [(a, Some(25.0))]
        );
        task.flush().await;
        assert_eq!(bandwidths(&mut rx), [(1, 25.0)]);
        task.flush().await;
        assert!(rx.try_recv().is_err(), "nothing changed, nothing sent");
        // The same value again changes nothing.
        task.set_bandwidth(Some(a), None, Some(25.0));
        task.flush().await;
        assert!(rx.try_recv().is_err(), "the same bandwidth, nothing sent");
    }

    /// A neighbor removed at run time takes its paths with it: the groups it was in are
    /// sent again without it; the other neighbor is untouched. Removing it twice fails.
    #[tokio::test]
    async fn removed_neighbor_leaves_the_groups() {
        let (mut task, mut rx) = task();
        let (a, b) = (peer_addr(1), peer_addr(2));
        task.on_update(a, announce(&["10.1.0.0/24"], 10.0));
        task.on_update(b, announce(&["10.1.0.0/24"], 30.0));
        assert_eq!(
            flushed(&mut task, &mut rx).await,
            vec![(
                vec![net("10.1.0.0/24")],
                Some(vec![(a.to_string(), 1), (b.to_string(), 3)])
            )]
        );
        assert!(task.remove_neighbor(b));
        assert!(!task.peers.contains_key(&b));
        assert_eq!(
            flushed(&mut task, &mut rx).await,
            vec![(vec![net("10.1.0.0/24")], Some(vec![(a.to_string(), 1)]))]
        );
        assert!(!task.remove_neighbor(b));
        // Its UPDATEs still in flight are dropped.
        task.on_update(b, announce(&["10.9.0.0/24"], 30.0));
        task.flush().await;
        assert!(rx.try_recv().is_err(), "nothing from a removed neighbor");
    }

    /// Prefixes added at run time are originated (routes shown local), removed ones
    /// withdrawn; the same list again changes nothing.
    #[tokio::test]
    async fn prefixes_set_at_run_time_are_originated_and_withdrawn() {
        let (mut task, mut rx) = task();
        let (p1, p2) = (net("192.0.2.0/24"), net("198.51.100.0/24"));
        assert_eq!(task.set_prefixes(&[p1, p2]), (vec![p1, p2], vec![]));
        task.flush().await;
        assert!(task.view(p1).is_some_and(|v| v.local));
        assert!(task.view(p2).is_some_and(|v| v.local));
        assert_eq!(
            task.set_prefixes(&[net("198.51.100.9/24")]),
            (vec![], vec![p1]),
            "host bits cleared"
        );
        task.flush().await;
        assert!(task.view(p1).is_none(), "withdrawn");
        assert!(task.view(p2).is_some_and(|v| v.local));
        assert_eq!(task.set_prefixes(&[p2]), (vec![], vec![]));
        while rx.try_recv().is_ok() {}
    }

    /// After each flush every neighbor's status holds its Adj-RIB-In size (accepted)
    /// and Adj-RIB-Out size (advertised); a session that goes down advertises nothing.
    #[tokio::test]
    async fn flush_counts_accepted_and_advertised_prefixes() {
        let (mut task, mut rx) = task();
        let (a, b) = (peer_addr(1), peer_addr(2));
        // b in another AS, so routes from AS 65002 go to it (RFC 4271 §9.1.2 loop check).
        if let Some(p) = task.peers.get_mut(&b) {
            p.spec.remote_as = 65003;
        }
        let info = SessionInfo {
            remote_id: Ipv4Addr::new(10, 255, 0, 2),
            remote_as: 65003,
            local_address: peer_addr(9),
            hold_time: 9,
            families: vec![Family::Ipv4Unicast],
            four_octet_as: true,
            route_refresh: false,
            capabilities: vec![],
        };
        task.on_session(SessionEvent::Up { peer: b, info }).await;
        task.on_update(
            a,
            announce(&["10.1.0.0/24", "10.1.1.0/24", "10.1.2.0/24"], 10.0),
        );
        let counts = |task: &RibTask, peer: IpAddr| {
            let s = task.peers[&peer].status.lock().map(|s| s.clone());
            s.map(|s| (s.prefixes_accepted, s.prefixes_advertised))
                .unwrap_or_default()
        };
        task.flush().await;
        assert_eq!((counts(&task, a), counts(&task, b)), ((3, 0), (0, 3)));
        // b is sent each prefix with a Path Bandwidth: a's 10 Gbps, capped by nothing
        // else here (one path, the link to a is 100 Gbps).
        let adv = task.advertised(usize::MAX);
        let seen: Vec<(IpNet, IpAddr)> = adv.iter().map(|x| (x.prefix, x.neighbor)).collect();
        assert_eq!(
            seen,
            [net("10.1.0.0/24"), net("10.1.1.0/24"), net("10.1.2.0/24")].map(|p| (p, b))
        );
        assert!(
            adv.iter().all(|x| x.path_bandwidth_gbps == Some(10.0)),
            "{adv:?}"
        );
        assert_eq!(task.advertised(1).len(), 1);
        let mut gone = update::pack_withdraw(&[net("10.1.2.0/24")]);
        task.on_update(a, gone.remove(0));
        task.flush().await;
        assert_eq!((counts(&task, a), counts(&task, b)), ((2, 0), (0, 2)));
        while rx.try_recv().is_ok() {}
        task.on_session(SessionEvent::Down {
            peer: b,
            reason: "test".into(),
        })
        .await;
        task.flush().await;
        assert_eq!((counts(&task, a), counts(&task, b)), ((2, 0), (0, 0)));
    }

    /// A changed neighbor: a session parameter starts a new task (its events tagged with
    /// a new generation), also for a neighbor whose unchanged MD5 key the listeners
    /// already have; a changed key is refused before anything ends; a policy change keeps
    /// the task.
    #[tokio::test]
    async fn replace_neighbor_resets_only_for_session_parameters() {
        let (mut task, _rx) = task();
        let (sessions, _events) = mpsc::channel(4);
        task.runtime.sessions = Some(sessions);
        let a = peer_addr(1);
        let base = task.peers[&a].spec.clone();
        let keyed = |key: &str, passive: bool| NeighborSpec {
            passive,
            protection: socket::Protection {
                md5_key: Some(key.into()),
                ..Default::default()
            },
            ..base.clone()
        };
        let spec = keyed("k1", true);
        if let Some(p) = task.peers.get_mut(&a) {
            p.spec = spec.clone();
        }
        let generation = |t: &RibTask| t.peers.get(&a).map(|p| p.generation);

        let policy = NeighborSpec {
            summary_only: true,
            ..spec.clone()
        };
        assert_eq!(task.replace_neighbor(policy), Ok(Replaced::Policy));
        assert_eq!(generation(&task), Some(0));

        assert!(task.replace_neighbor(keyed("k2", false)).is_err());
        assert_eq!(generation(&task), Some(0), "refused: the old task stays");

        assert_eq!(
            task.replace_neighbor(keyed("k1", false)),
            Ok(Replaced::Session)
        );
        let new = generation(&task);
        assert!(new.is_some_and(|g| g != 0), "{new:?}");
        assert_eq!(task.peers.get(&a).map(|p| p.spec.passive), Some(false));
    }
}
