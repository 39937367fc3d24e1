//! One BGP neighbor: the I/O task around its state machine ([`super::fsm`]). The task
//! owns the sockets (the session's connection, a colliding or standby one, the outbound
//! attempt), the timers and the capability negotiation; it turns reads, timer expiries,
//! connections and commands into [`Event`]s and carries out the machine's [`Action`]s.
//! All decisions (states, collisions, backoff) are the machine's.
//!
//! The task talks to the rest of the speaker through channels only: it reports
//! [`SessionEvent`]s (up, UPDATE received, down) and sends what it is given as
//! [`Command`]s. Its observable state lives in a shared [`NeighborStatus`].

use super::events::{Action, ConnId, Event, MsgError, PeerOpen, Timer};
use super::fsm::{check_open, Fsm, FsmConfig};
use super::packet::error::code;
use super::packet::{
    frame_len, Capability, Context, Family, Message, MessageError, Open, RouteRefresh, Update,
};
use super::socket::{self, Protection};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

pub use super::fsm::State;

/// What one neighbor needs to run.
#[derive(Clone, Debug)]
pub struct PeerConfig {
    pub address: IpAddr,
    pub remote_as: u32,
    pub local_as: u32,
    pub router_id: Ipv4Addr,
    pub port: u16,
    /// Proposed hold time (seconds); 0 disables keepalives.
    pub hold_time: u16,
    /// First connect-retry delay; doubles on each failure up to `connect_retry_max`.
    pub connect_retry: Duration,
    pub connect_retry_max: Duration,
    /// Only accept connections, never connect.
    pub passive: bool,
    pub local_address: Option<IpAddr>,
    /// The link the session runs over: the zone (scope) of an IPv6 link-local `address`
    /// or `local_address`, which the kernel needs to connect or bind one.
    pub interface: Option<String>,
    pub protection: Protection,
    pub families: Vec<Family>,
    /// DPF session coloring (draft-wang-idr-dpf §2.1).
    pub session_color: super::dpf::SessionColor,
    /// Advertise the ORF capability (receive) and pass received ORFs on.
    pub orf_receive: bool,
    /// Prefixes to ask for with an ORF once Established (empty: no ORF).
    pub orf_send: Vec<ipnet::IpNet>,
}

/// Negotiated session parameters, reported when the session comes up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    pub remote_id: Ipv4Addr,
    pub remote_as: u32,
    pub local_address: IpAddr,
    pub hold_time: u16,
    pub families: Vec<Family>,
    pub four_octet_as: bool,
    pub route_refresh: bool,
    /// Every capability the peer sent (DPF's SESSION-COLOR will be read from here).
    #[serde(skip)]
    pub capabilities: Vec<Capability>,
}

#[derive(Debug)]
pub enum SessionEvent {
    Up {
        peer: IpAddr,
        info: SessionInfo,
    },
    Update {
        peer: IpAddr,
        update: Box<Update>,
    },
    RouteRefresh {
        peer: IpAddr,
        family: Option<Family>,
        /// Outbound Route Filter entries the peer sent with it (RFC 5291).
        orf: Option<super::packet::orf::Orf>,
    },
    Down {
        peer: IpAddr,
        reason: String,
    },
}

#[derive(Debug)]
pub enum Command {
    /// Send these UPDATEs (ignored unless Established).
    Send(Vec<Update>),
    /// Close the session (Cease / administrative reset) and reconnect after the backoff:
    /// the link under it went down.
    Reset,
    /// Retry connecting now (the link came back).
    Kick,
    /// Ask the peer to re-send its routes of these families (RFC 2918 ROUTE-REFRESH);
    /// dropped unless Established with a peer that advertised the capability.
    Refresh(Vec<Family>),
    /// Close the session with Cease / administrative shutdown and stop.
    Shutdown,
    /// The neighbor left the configuration: Cease / Peer De-configured, and stop.
    Deconfigure,
    /// The neighbor's session parameters changed and a new task replaces this one:
    /// Cease / Other Configuration Change, and stop.
    Reconfigure,
    /// The operator's shutdown: Cease / Administrative Shutdown with this shutdown
    /// communication (RFC 8203), then Idle (no connection either way) until `AdminUp`.
    AdminDown(String),
    /// Start again after `AdminDown`.
    AdminUp,
    /// New timers (a configuration reload), used from the next OPEN and connection
    /// attempt on; the running session keeps its negotiated hold time.
    Timers {
        hold_time: u16,
        connect_retry: Duration,
        connect_retry_max: Duration,
    },
}

/// Counters and state shown by `fare show neighbors`.
#[derive(Clone, Debug, Serialize)]
pub struct NeighborStatus {
    pub address: IpAddr,
    pub remote_as: u32,
    pub state: State,
    pub remote_id: Option<Ipv4Addr>,
    /// Seconds since the UNIX epoch when the session last reached Established.
    pub established_at: Option<u64>,
    pub updates_received: u64,
    pub updates_sent: u64,
    /// Prefixes announced in the UPDATEs received (a counter: re-announcements count).
    pub prefixes_received: u64,
    /// Prefixes in the Adj-RIB-In from this neighbor now (accepted by the import rules).
    pub prefixes_accepted: u64,
    /// Prefixes advertised to this neighbor now (its Adj-RIB-Out).
    pub prefixes_advertised: u64,
    pub notifications_received: u64,
    pub notifications_sent: u64,
    /// UPDATEs with a malformed attribute handled per RFC 7606 (discard / treat-as-withdraw).
    pub malformed_updates: u64,
    /// Transitions out of Established.
    pub flaps: u64,
    pub last_error: Option<String>,
    /// Routes refused because their Color mismatched the session color (DPF §2.1.2).
    pub color_mismatched_routes: u64,
    /// Link Bandwidth communities (RFC 10005) from this neighbor ignored for an unusable
    /// value (NaN, infinite, negative); counted where the session accepts them.
    pub link_bandwidth_ignored: u64,
    /// ROUTE-REFRESH messages (RFC 2918) sent to and received from the peer.
    pub route_refresh_sent: u64,
    pub route_refresh_received: u64,
    /// The peer advertised the route refresh capability in this session.
    pub peer_route_refresh: bool,
}

impl NeighborStatus {
    pub fn new(address: IpAddr, remote_as: u32) -> Self {
        NeighborStatus {
            address,
            remote_as,
            state: State::Idle,
            remote_id: None,
            established_at: None,
            updates_received: 0,
            updates_sent: 0,
            prefixes_received: 0,
            prefixes_accepted: 0,
            prefixes_advertised: 0,
            notifications_received: 0,
            notifications_sent: 0,
            malformed_updates: 0,
            flaps: 0,
            last_error: None,
            color_mismatched_routes: 0,
            link_bandwidth_ignored: 0,
            route_refresh_sent: 0,
            route_refresh_received: 0,
            peer_route_refresh: false,
        }
    }
}

pub type SharedStatus = Arc<Mutex<NeighborStatus>>;

pub use super::fsm::{KICK_DEFER, STANDBY};

/// A neighbor task's event with the task's generation: a neighbor whose configuration
/// changed is removed and added again as a new task, and the speaker drops what the old
/// task still had queued instead of taking it for the new session's.
pub type Tagged = (u64, SessionEvent);

pub struct Neighbor {
    pub config: PeerConfig,
    pub status: SharedStatus,
    pub incoming: mpsc::Receiver<TcpStream>,
    pub events: mpsc::Sender<Tagged>,
    /// Tags every event (see [`Tagged`]).
    pub generation: u64,
    pub commands: mpsc::UnboundedReceiver<Command>,
}

/// One TCP connection of the neighbor, split for reading and writing.
struct Link {
    reader: Reader,
    writer: OwnedWriteHalf,
    local: Option<IpAddr>,
}

impl Link {
    fn new(stream: TcpStream) -> Link {
        let local = stream.local_addr().ok().map(|a| a.ip().to_canonical());
        let (rd, wr) = stream.into_split();
        Link {
            reader: Reader::new(rd),
            writer: wr,
            local,
        }
    }
}

/// One outbound connection attempt, polled in place (its SYN leaves in the poll that
/// creates it); dropping it closes its socket.
type Attempt =
    std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<TcpStream>> + Send>>;

/// The attempt's outcome; pending forever without an attempt.
async fn connected(
    attempt: &mut Option<(ConnId, Attempt)>,
) -> (ConnId, std::io::Result<TcpStream>) {
    let Some((id, a)) = attempt.as_mut() else {
        return std::future::pending().await;
    };
    let result = a.as_mut().await;
    let id = *id;
    *attempt = None;
    (id, result)
}

/// What woke the task up.
enum Input {
    /// The peer's connection, accepted by the speaker.
    Incoming(TcpStream),
    /// Our connection attempt succeeded.
    Connected(ConnId, TcpStream),
    /// A read on the session's connection.
    Message(Box<Result<Message, ReadError>>),
    Event(Event),
    Command(Option<Command>),
    /// The hold timer ran out: an event unless messages are waiting unread.
    HoldExpired,
}

/// The I/O state of the task around the machine.
struct Io {
    links: HashMap<ConnId, Link>,
    next_id: ConnId,
    attempt: Option<(ConnId, Attempt)>,
    /// A connect the machine asked for, started once no connection of the peer's is
    /// waiting (then there is nothing to cross).
    dial: Option<ConnId>,
    timers: HashMap<Timer, tokio::time::Instant>,
    /// The peer's OPEN on the session's connection (OpenConfirm, Established).
    peer_open: Option<Open>,
    /// What the session negotiated, once Established.
    session: Option<SessionInfo>,
    /// Events raised while carrying out actions (a failed write).
    queue: VecDeque<Event>,
}

impl Io {
    fn add(&mut self, stream: TcpStream) -> ConnId {
        let id = self.next_id;
        self.next_id += 1;
        self.links.insert(id, Link::new(stream));
        id
    }

    fn ctx(&self) -> Context {
        Context::negotiated(self.peer_open.as_ref())
    }

    /// Writes on connection `id`; a failure on the session's connection `primary` is a
    /// TcpConnectionFails event, elsewhere it shows when that connection is used.
    async fn write(&mut self, id: ConnId, primary: Option<ConnId>, bytes: &[u8]) -> bool {
        let Some(link) = self.links.get_mut(&id) else {
            return false;
        };
        match link.writer.write_all(bytes).await {
            Ok(()) => true,
            Err(e) => {
                if Some(id) == primary {
                    self.queue
                        .push_back(Event::TcpConnectionFails(id, format!("write: {e}")));
                }
                false
            }
        }
    }
}

impl Neighbor {
    /// Sends `event` to the speaker, tagged with this task's generation.
    async fn emit(&self, event: SessionEvent) -> Result<(), ()> {
        self.events
            .send((self.generation, event))
            .await
            .map_err(|_| ())
    }

    fn set_state(&self, state: State) {
        if let Ok(mut s) = self.status.lock() {
            if s.state != state {
                debug!(peer = %self.config.address, from = ?s.state, to = ?state, "fsm");
            }
            s.state = state;
        }
    }

    fn count(&self, f: impl FnOnce(&mut NeighborStatus)) {
        if let Ok(mut s) = self.status.lock() {
            f(&mut s);
        }
    }

    fn fsm_config(&self) -> FsmConfig {
        let cfg = &self.config;
        FsmConfig {
            router_id: cfg.router_id,
            hold_time: cfg.hold_time,
            connect_retry: cfg.connect_retry,
            connect_retry_max: cfg.connect_retry_max,
            passive: cfg.passive,
            color_mismatch_subcode: cfg.session_color.mismatch_subcode,
        }
    }

    /// Runs the state machine until a `Shutdown` command or until the speaker drops its
    /// command sender: socket reads, timers and commands become events, the machine's
    /// actions are carried out here.
    pub async fn run(mut self) {
        let mut fsm = Fsm::new(self.fsm_config());
        let epoch = Instant::now();
        let mut our_open = our_open_of(&self.config);
        let mut io = Io {
            links: HashMap::new(),
            next_id: 1,
            attempt: None,
            dial: None,
            timers: HashMap::new(),
            peer_open: None,
            session: None,
            queue: VecDeque::from([Event::ManualStart]),
        };
        loop {
            while let Some(event) = io.queue.pop_front() {
                let actions = fsm.handle(epoch.elapsed(), event);
                self.set_state(fsm.state());
                for action in actions {
                    if self.act(action, &fsm, &mut io, &our_open).await {
                        return;
                    }
                }
            }
            if let Some(id) = io.dial.take() {
                if let Ok(stream) = self.incoming.try_recv() {
                    let peers = io.add(stream);
                    io.queue.push_back(Event::TcpConnectionConfirmed(peers));
                    let why = "not started: the peer's connection was waiting";
                    io.queue
                        .push_back(Event::TcpConnectionFails(id, why.into()));
                    continue;
                }
                let cfg = &self.config;
                let zone = cfg.interface.as_deref();
                let addr = socket::zoned(SocketAddr::new(cfg.address, cfg.port), zone);
                let local = cfg
                    .local_address
                    .map(|l| socket::zoned(SocketAddr::new(l, 0), zone));
                let protection = cfg.protection.clone();
                io.attempt = Some((
                    id,
                    Box::pin(async move { socket::connect(addr, local, &protection).await }),
                ));
            }
            let primary = fsm.connection();
            let ctx = match fsm.state() {
                State::OpenConfirm | State::Established => io.ctx(),
                _ => Context::default(),
            };
            let next_timer = io
                .timers
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(t, at)| (*t, *at));
            let Io { links, attempt, .. } = &mut io;
            // Biased: a colliding connection already there is taken in before the next
            // message is read, so that the collision decision sees it (the peer decides
            // on the same two connections). Reads and timers are not biased so that a
            // flood of UPDATEs does not hold back the keepalives.
            let input = tokio::select! {
                biased;
                Some(stream) = self.incoming.recv() => Input::Incoming(stream),
                (id, result) = connected(attempt) => match result {
                    Ok(stream) => Input::Connected(id, stream),
                    Err(e) => {
                        debug!(peer = %self.config.address, "connect: {e}");
                        Input::Event(Event::TcpConnectionFails(id, format!("connect: {e}")))
                    }
                },
                cmd = self.commands.recv() => Input::Command(cmd),
                input = async {
                    tokio::select! {
                        m = async {
                            match primary.and_then(|id| links.get_mut(&id)) {
                                Some(link) => link.reader.next(ctx).await,
                                None => std::future::pending().await,
                            }
                        } => Input::Message(Box::new(m)),
                        t = async {
                            match next_timer {
                                Some((t, at)) => {
                                    tokio::time::sleep_until(at).await;
                                    t
                                }
                                None => std::future::pending().await,
                            }
                        } => match t {
                            Timer::ConnectRetry => Input::Event(Event::ConnectRetryTimerExpires),
                            Timer::Hold => Input::HoldExpired,
                            Timer::Keepalive => Input::Event(Event::KeepaliveTimerExpires),
                            Timer::Standby => Input::Event(Event::StandbyTimerExpires),
                        },
                    }
                } => input,
            };
            match input {
                Input::Incoming(stream) => {
                    let _ = stream.set_nodelay(true);
                    let id = io.add(stream);
                    io.queue.push_back(Event::TcpConnectionConfirmed(id));
                }
                Input::Connected(id, stream) => {
                    io.links.insert(id, Link::new(stream));
                    io.queue.push_back(Event::TcpCrAcked(id));
                }
                Input::Message(m) => {
                    let event = message_event(*m, primary, &fsm, &self.config, &mut io);
                    if let Event::NotifMsg(_) | Event::NotifMsgVerErr(_) = event {
                        self.count(|s| s.notifications_received += 1);
                    }
                    io.queue.push_back(event);
                }
                Input::Event(event) => {
                    if let Some(timer) = expired(&event) {
                        io.timers.remove(&timer);
                    }
                    io.queue.push_back(event);
                }
                Input::HoldExpired => {
                    // The hold timer measures the peer's silence, not this task's: a
                    // message already here (the task was busy) restarts it when read.
                    let waiting = primary
                        .and_then(|id| io.links.get_mut(&id))
                        .is_some_and(|l| l.reader.has_news());
                    if waiting {
                        io.timers.insert(
                            Timer::Hold,
                            tokio::time::Instant::now() + Duration::from_millis(100),
                        );
                    } else {
                        io.timers.remove(&Timer::Hold);
                        io.queue.push_back(Event::HoldTimerExpires);
                    }
                }
                Input::Command(Some(Command::Timers {
                    hold_time,
                    connect_retry,
                    connect_retry_max,
                })) => {
                    info!(peer = %self.config.address, hold_time, "timers changed (from the next session)");
                    self.config.hold_time = hold_time;
                    self.config.connect_retry = connect_retry;
                    self.config.connect_retry_max = connect_retry_max;
                    fsm.set_timers(hold_time, connect_retry, connect_retry_max);
                    our_open = our_open_of(&self.config);
                }
                Input::Command(cmd) => self.command(cmd, &fsm, &mut io).await,
            }
        }
    }

    /// A command of the speaker: stops and link changes are events; UPDATEs and
    /// ROUTE-REFRESH requests go out while Established and are dropped otherwise (the
    /// speaker sends the whole table when the session comes up).
    async fn command(&self, cmd: Option<Command>, fsm: &Fsm, io: &mut Io) {
        let established = fsm.state() == State::Established;
        let primary = fsm.connection();
        match cmd {
            Some(Command::Send(updates)) if established => {
                let Some(id) = primary else { return };
                let ctx = io.ctx();
                let families = io
                    .session
                    .as_ref()
                    .map(|s| s.families.clone())
                    .unwrap_or_default();
                let n = updates.len() as u64;
                let mut buf = Vec::new();
                for u in updates {
                    let fam_ok = u
                        .announced()
                        .chain(u.withdrawn_all())
                        .all(|p| families.contains(&super::packet::nlri::family_of(&p)));
                    if fam_ok {
                        buf.extend_from_slice(&Message::Update(u).encode(ctx));
                    }
                }
                if io.write(id, primary, &buf).await {
                    self.count(|s| s.updates_sent += n);
                }
            }
            Some(Command::Refresh(wanted)) if established => {
                let Some(id) = primary else { return };
                let Some(info) = io.session.as_ref() else {
                    return;
                };
                if !info.route_refresh {
                    debug!(peer = %self.config.address, "no ROUTE-REFRESH: the peer did not advertise the capability");
                    return;
                }
                let ctx = io.ctx();
                let mut buf = Vec::new();
                let mut sent = 0;
                for f in wanted.iter().filter(|f| info.families.contains(f)) {
                    let (afi, safi) = f.afi_safi();
                    let rr = RouteRefresh {
                        afi,
                        subtype: 0,
                        safi,
                        orf: None,
                    };
                    buf.extend_from_slice(&Message::RouteRefresh(rr).encode(ctx));
                    sent += 1;
                }
                info!(peer = %self.config.address, families = ?wanted, "ROUTE-REFRESH sent");
                self.count(|s| s.route_refresh_sent += sent);
                io.write(id, primary, &buf).await;
            }
            Some(Command::Send(_)) | Some(Command::Refresh(_)) => {}
            Some(Command::Reset) => io.queue.push_back(Event::AutomaticStop),
            Some(Command::Kick) => io.queue.push_back(Event::LinkUp),
            Some(Command::Shutdown) | None => io.queue.push_back(Event::ManualStop),
            Some(Command::Deconfigure) => io.queue.push_back(Event::Deconfigured),
            Some(Command::Reconfigure) => io.queue.push_back(Event::Reconfigured),
            Some(Command::AdminDown(message)) => {
                info!(peer = %self.config.address, %message, "administrative shutdown");
                let data = super::packet::Notification::admin_shutdown(&message).data;
                io.queue.push_back(Event::AdminShutdown(data));
            }
            Some(Command::AdminUp) => io.queue.push_back(Event::ManualStart),
            // Taken by the run loop.
            Some(Command::Timers { .. }) => {}
        }
    }

    /// Carries out one action of the machine; true when the task must end.
    async fn act(&self, action: Action, fsm: &Fsm, io: &mut Io, our_open: &Open) -> bool {
        let cfg = &self.config;
        let primary = fsm.connection();
        match action {
            Action::Connect => {
                io.dial = Some(io.next_id);
                io.next_id += 1;
            }
            Action::AbortConnect => {
                io.dial = None;
                io.attempt = None;
            }
            Action::SendOpen(id) => {
                let bytes = Message::Open(our_open.clone()).encode(Context::default());
                io.write(id, primary, &bytes).await;
            }
            Action::SendKeepalive(id) => {
                let bytes = Message::Keepalive.encode(io.ctx());
                io.write(id, primary, &bytes).await;
            }
            Action::SendNotification(id, n) => {
                if Some(id) == primary {
                    warn!(peer = %cfg.address, "sending NOTIFICATION {n}");
                }
                let bytes = Message::Notification(n).encode(Context::default());
                if io.write(id, None, &bytes).await {
                    self.count(|s| s.notifications_sent += 1);
                }
            }
            Action::Close(id) => {
                io.links.remove(&id);
            }
            Action::StartTimer {
                timer,
                after,
                jitter: j,
            } => {
                let after = if j { jitter(after) } else { after };
                io.timers.insert(timer, tokio::time::Instant::now() + after);
            }
            Action::StopTimer(timer) => {
                io.timers.remove(&timer);
            }
            Action::SessionUp(id) => return self.session_up(id, fsm, io).await,
            Action::DeliverUpdate(u) => {
                let prefixes = u.announced().count() as u64;
                let malformed = !u.errors.is_empty();
                for e in &u.errors {
                    warn!(peer = %cfg.address, "malformed UPDATE: {e}");
                }
                self.count(|s| {
                    s.updates_received += 1;
                    s.prefixes_received += prefixes;
                    s.malformed_updates += malformed as u64;
                });
                let event = SessionEvent::Update {
                    peer: cfg.address,
                    update: u,
                };
                if self.emit(event).await.is_err() {
                    io.queue.push_back(Event::ManualStop);
                }
            }
            Action::DeliverRouteRefresh(RouteRefresh {
                afi,
                safi,
                subtype,
                orf,
            }) => {
                // RFC 2918 §4: a family not negotiated is ignored; RFC 7313's BoRR/EoRR
                // markers (subtype 1/2) are not requests.
                self.count(|s| s.route_refresh_received += 1);
                let families = io.session.as_ref().map(|s| &s.families);
                match Family::from_afi_safi(afi, safi) {
                    Some(family)
                        if subtype == 0 && families.is_some_and(|f| f.contains(&family)) =>
                    {
                        let event = SessionEvent::RouteRefresh {
                            peer: cfg.address,
                            family: Some(family),
                            orf: orf.filter(|_| cfg.orf_receive),
                        };
                        let _ = self.emit(event).await;
                    }
                    _ => debug!(peer = %cfg.address, afi, safi, subtype, "ROUTE-REFRESH ignored"),
                }
            }
            Action::SessionDown(reason) => {
                // A flap is the end of an Established session (not a failed attempt).
                let was_established = io.session.take().is_some();
                io.peer_open = None;
                info!(event = "session_down", peer = %cfg.address, %reason, "session down");
                self.count(|s| {
                    let last = s.last_error.as_deref();
                    if crate::fsm::replaces_last_error(last, &reason, was_established) {
                        s.last_error = Some(reason.clone());
                    }
                    s.flaps += u64::from(was_established);
                });
                let _ = self
                    .emit(SessionEvent::Down {
                        peer: cfg.address,
                        reason,
                    })
                    .await;
            }
            Action::Stop => return true,
        }
        false
    }

    /// Established on connection `id`: report the session, then send the ORF request.
    async fn session_up(&self, id: ConnId, fsm: &Fsm, io: &mut Io) -> bool {
        let cfg = &self.config;
        let Some(open) = io.peer_open.clone() else {
            return false;
        };
        let local = io
            .links
            .get(&id)
            .and_then(|l| l.local)
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let info = session_info(cfg, &open, local, fsm.hold_time());
        info!(event = "session_up", peer = %cfg.address, remote_id = %info.remote_id, families = ?info.families, "session established");
        self.count(|s| {
            s.remote_id = Some(info.remote_id);
            s.established_at = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs());
            s.peer_route_refresh = info.route_refresh;
        });
        let orf = orf_request(&cfg.orf_send, &info.families, &info.capabilities);
        io.session = Some(info.clone());
        let up = SessionEvent::Up {
            peer: cfg.address,
            info,
        };
        if self.emit(up).await.is_err() {
            io.queue.push_back(Event::ManualStop);
            return false;
        }
        if !orf.is_empty() {
            let ctx = io.ctx();
            let mut buf = Vec::new();
            for rr in orf {
                buf.extend_from_slice(&Message::RouteRefresh(rr).encode(ctx));
                self.count(|s| s.route_refresh_sent += 1);
            }
            info!(peer = %cfg.address, prefixes = cfg.orf_send.len(), "ORF sent");
            io.write(id, Some(id), &buf).await;
        }
        false
    }
}

/// The timer whose expiry this event is (it no longer runs).
fn expired(event: &Event) -> Option<Timer> {
    match event {
        Event::ConnectRetryTimerExpires => Some(Timer::ConnectRetry),
        Event::KeepaliveTimerExpires => Some(Timer::Keepalive),
        Event::StandbyTimerExpires => Some(Timer::Standby),
        Event::HoldTimerExpires => Some(Timer::Hold),
        _ => None,
    }
}

/// The event a read on the session's connection is. An OPEN in OpenSent is checked
/// here ([`check_open`]) and kept for the session's parameters; anywhere else it is an
/// error of the machine's.
fn message_event(
    m: Result<Message, ReadError>,
    primary: Option<ConnId>,
    fsm: &Fsm,
    cfg: &PeerConfig,
    io: &mut Io,
) -> Event {
    match m {
        Ok(Message::Open(o)) => {
            let peer = PeerOpen {
                bgp_id: o.bgp_id,
                hold_time: o.hold_time,
            };
            if fsm.state() != State::OpenSent {
                return Event::BgpOpen(peer);
            }
            match check_open(&o, cfg.remote_as, cfg.router_id, &cfg.session_color) {
                Ok(peer) => {
                    io.peer_open = Some(o);
                    Event::BgpOpen(peer)
                }
                Err(e) => Event::BgpOpenMsgErr(e),
            }
        }
        Ok(Message::Keepalive) => Event::KeepAliveMsg,
        Ok(Message::Update(u)) => Event::UpdateMsg(Box::new(u)),
        Ok(Message::RouteRefresh(r)) => Event::RouteRefreshMsg(r),
        Ok(Message::Notification(n)) => {
            if n.code == code::OPEN && n.subcode == super::packet::error::open::UNSUPPORTED_VERSION
            {
                Event::NotifMsgVerErr(n)
            } else {
                Event::NotifMsg(n)
            }
        }
        Err(ReadError::Message(e)) => {
            let err = MsgError {
                notification: e.notification,
                reason: e.reason.to_string(),
            };
            match err.notification.code {
                code::OPEN => Event::BgpOpenMsgErr(err),
                code::UPDATE => Event::UpdateMsgErr(err),
                code::ROUTE_REFRESH => Event::RouteRefreshMsgErr(err),
                _ => Event::BgpHeaderErr(err),
            }
        }
        Err(ReadError::Io(e)) => Event::TcpConnectionFails(primary.unwrap_or(0), e),
    }
}

/// Our OPEN: the families, ROUTE-REFRESH, 4-octet AS, DPF session color and ORF.
fn our_open_of(cfg: &PeerConfig) -> Open {
    let mut caps: Vec<Capability> = cfg
        .families
        .iter()
        .map(|f| {
            let (afi, safi) = f.afi_safi();
            Capability::Multiprotocol { afi, safi }
        })
        .collect();
    caps.push(Capability::RouteRefresh);
    caps.push(Capability::FourOctetAs(cfg.local_as));
    caps.extend(cfg.session_color.capability());
    if cfg.orf_receive || !cfg.orf_send.is_empty() {
        use super::packet::orf;
        // RFC 5291 §4: receive to accept the neighbor's filters, send to give ours
        // (the neighbor may then wait for it before its first UPDATE).
        let mut sr = 0;
        if cfg.orf_receive {
            sr |= orf::RECEIVE;
        }
        if !cfg.orf_send.is_empty() {
            sr |= orf::SEND;
        }
        let families = cfg
            .families
            .iter()
            .map(|f| {
                let (afi, safi) = f.afi_safi();
                // Standard and pre-standard types: FRR sends whichever we accept.
                orf::OrfFamily {
                    afi,
                    safi,
                    types: vec![(orf::ADDRESS_PREFIX, sr)],
                }
            })
            .collect();
        caps.push(Capability::Orf(families));
    }
    Open::new(cfg.local_as, cfg.hold_time, cfg.router_id, caps)
}

/// What the session negotiated, from the peer's OPEN.
fn session_info(
    cfg: &PeerConfig,
    open: &Open,
    local_address: IpAddr,
    hold_time: u16,
) -> SessionInfo {
    let peer_families = open.families();
    let families: Vec<Family> = if open
        .capabilities
        .iter()
        .any(|c| matches!(c, Capability::Multiprotocol { .. }))
    {
        cfg.families
            .iter()
            .copied()
            .filter(|f| peer_families.contains(f))
            .collect()
    } else {
        // RFC 4760 §8: no MP capability means IPv4 unicast only.
        cfg.families
            .iter()
            .copied()
            .filter(|f| *f == Family::Ipv4Unicast)
            .collect()
    };
    SessionInfo {
        remote_id: open.bgp_id,
        remote_as: open.asn(),
        local_address,
        hold_time,
        families,
        four_octet_as: open
            .capabilities
            .iter()
            .any(|c| matches!(c, Capability::FourOctetAs(_))),
        route_refresh: open.has(&Capability::RouteRefresh),
        capabilities: open.capabilities.clone(),
    }
}

/// RFC 4271 §10: timer values are jittered (x0.75..1.0), so that two speakers that lost
/// a session together do not keep colliding on every retry.
fn jitter(d: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|t| t.as_nanos())
            .unwrap_or(0),
    );
    let fraction = 0.75 + 0.25 * (h.finish() >> 11) as f64 / (1u64 << 53) as f64;
    d.mul_f64(fraction)
}

enum ReadError {
    /// The peer sent something we must answer with this NOTIFICATION.
    Message(MessageError),
    /// The connection failed.
    Io(String),
}

/// Reads whole messages from the socket.
struct Reader {
    half: OwnedReadHalf,
    buf: Vec<u8>,
    start: usize,
}

impl Reader {
    fn new(half: OwnedReadHalf) -> Self {
        Reader {
            half,
            buf: Vec::with_capacity(1 << 16),
            start: 0,
        }
    }

    /// The next message. Cancel safe: what was read stays in the buffer.
    async fn next(&mut self, ctx: Context) -> Result<Message, ReadError> {
        loop {
            let avail = &self.buf[self.start..];
            if let Some(len) = frame_len(avail).map_err(ReadError::Message)? {
                if avail.len() >= len {
                    let msg = Message::decode(&avail[..len], ctx).map_err(ReadError::Message);
                    self.start += len;
                    return msg;
                }
            }
            if self.start > 0 && self.start * 2 >= self.buf.len() {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            if self.buf.capacity() - self.buf.len() < 8192 {
                self.buf.reserve(1 << 16);
            }
            // `read_buf` is cancel safe: nothing is lost if another select arm wins.
            match self.half.read_buf(&mut self.buf).await {
                Ok(0) => return Err(ReadError::Io("connection closed by peer".into())),
                Ok(_) => {}
                Err(e) => return Err(ReadError::Io(format!("read: {e}"))),
            }
        }
    }

    /// A whole message is buffered, or bytes arrived that were not read yet (without
    /// waiting).
    fn has_news(&mut self) -> bool {
        let avail = &self.buf[self.start..];
        if let Ok(Some(len)) = frame_len(avail) {
            if avail.len() >= len {
                return true;
            }
        }
        if self.buf.capacity() - self.buf.len() < 8192 {
            self.buf.reserve(1 << 16);
        }
        matches!(self.half.try_read_buf(&mut self.buf), Ok(n) if n > 0)
    }
}

/// The ROUTE-REFRESH messages that ask the peer for exactly `wanted` (RFC 5291/5292: per
/// family, IMMEDIATE, REMOVE-ALL then one exact PERMIT entry per prefix), for the families
/// both sides carry and the peer accepts Address Prefix ORFs for.
fn orf_request(
    wanted: &[ipnet::IpNet],
    families: &[Family],
    peer_caps: &[Capability],
) -> Vec<RouteRefresh> {
    use super::packet::orf;
    let accepts = |afi: u16, safi: u8| {
        peer_caps.iter().any(|c| match c {
            Capability::Orf(list) => list.iter().any(|f| {
                (f.afi, f.safi) == (afi, safi)
                    && f.types
                        .iter()
                        .any(|(t, sr)| *t == orf::ADDRESS_PREFIX && sr & orf::RECEIVE != 0)
            }),
            _ => false,
        })
    };
    let mut out = Vec::new();
    for f in families {
        let (afi, safi) = f.afi_safi();
        let mine: Vec<&ipnet::IpNet> = wanted
            .iter()
            .filter(|p| super::packet::nlri::family_of(p) == *f)
            .collect();
        if mine.is_empty() || !accepts(afi, safi) {
            continue;
        }
        let mut entries = vec![orf::OrfEntry {
            action: orf::Action::RemoveAll,
            deny: false,
            prefix: None,
        }];
        entries.extend(mine.iter().enumerate().map(|(i, p)| orf::OrfEntry {
            action: orf::Action::Add,
            deny: false,
            prefix: Some(orf::PrefixEntry {
                sequence: 10 * (i as u32 + 1),
                min_len: 0,
                max_len: 0,
                prefix: **p,
            }),
        }));
        out.push(RouteRefresh {
            afi,
            subtype: 0,
            safi,
            orf: Some(orf::Orf {
                when: orf::When::Immediate,
                orf_type: orf::ADDRESS_PREFIX,
                entries,
                raw: vec![],
            }),
        });
    }
    out
}

#[cfg(test)]
mod tests;
