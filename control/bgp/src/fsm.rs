//! The BGP finite state machine of one neighbor (RFC 4271 §8), without I/O.
//!
//! [`Fsm::handle`] takes an [`Event`] and the time it happened and returns the
//! [`Action`]s the I/O task ([`super::neighbor`]) must carry out; [`transition`] is the
//! same as a function of (state, event). The machine holds up to three connections by
//! id: the session's own, a colliding one while the handshake runs (our OPEN sent on
//! it, decided by RFC 4271 §6.8 once the peer's BGP Identifier is known), and a standby
//! one while Established (see [`STANDBY`]). It also owns the connect backoff.
//!
//! Differences from the RFC's machine, all kept from the speaker's earlier behaviour:
//! - a neighbor that is not Established listens in Connect and Active alike, and after
//!   a session ends it goes to Active with the ConnectRetryTimer set to the backoff
//!   (never to Idle, which is only the state before the start and after a stop);
//! - one machine handles both connections of a collision instead of one per connection;
//! - the backoff (delay before the first connect after a session ended) doubles after
//!   each short session up to ConnectRetryMax and restarts from ConnectRetryTime after a
//!   session that lasted longer than ConnectRetryMax, after a collision, and on
//!   [`Event::LinkUp`]; failed connects are retried after ConnectRetryTime, doubling;
//! - an Established session keeps a colliding connection on standby (RFC 4271 closes
//!   it): if the session ends within [`STANDBY`], the next one starts on it at once.

use super::dpf::SessionColor;
use super::events::{Action, ConnId, Event, MsgError, PeerOpen, Timer};
use super::packet::error::{cease, code, open as open_err};
use super::packet::{Notification, Open};
use serde::Serialize;
use std::net::Ipv4Addr;
use std::time::Duration;

/// How a session-down reason starts when the peer's NOTIFICATION ended it.
const RECEIVED: &str = "received NOTIFICATION";
/// How it starts when a NOTIFICATION of ours ended it.
const SENT: &str = "sent NOTIFICATION";

/// Whether the session-down reason `new` should replace `last` as a neighbor's last
/// error. A connection that ended before Established without a NOTIFICATION either way
/// (closed, reset: a peer that shut the session down refuses the next attempts that way)
/// does not hide the NOTIFICATION the peer sent last, whose RFC 8203 shutdown
/// communication is what the operator needs to read.
pub fn replaces_last_error(last: Option<&str>, new: &str, was_established: bool) -> bool {
    let words = |r: &str| r.starts_with(RECEIVED) || r.starts_with(SENT);
    was_established || words(new) || !last.is_some_and(|l| l.starts_with(RECEIVED))
}

/// RFC 4271 §8.2.2 states (also what the agent reports per neighbor).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum State {
    #[default]
    Idle,
    Connect,
    Active,
    OpenSent,
    OpenConfirm,
    Established,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Idle,
        State::Connect,
        State::Active,
        State::OpenSent,
        State::OpenConfirm,
        State::Established,
    ];
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// After a link-up, how long the end with the lower BGP ID waits for the peer's
/// connection before connecting itself. Both ends see the link come back within
/// milliseconds; if both connect at once the connections cross and one must be closed
/// (RFC 4271 §6.8), which, when one end is already Established on the other connection,
/// takes both down. So the end whose connection would lose (the lower BGP ID, as known
/// from the last session) gives the peer's connection this long to arrive first.
pub const KICK_DEFER: Duration = Duration::from_millis(100);

/// How long an Established session keeps a colliding connection on standby.
pub const STANDBY: Duration = Duration::from_secs(2);

/// RFC 4271 §8.2.2: the "large value" of the HoldTimer while waiting for the OPEN.
pub const OPEN_HOLD: Duration = Duration::from_secs(240);

/// What the machine needs of the neighbor's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsmConfig {
    pub router_id: Ipv4Addr,
    /// Proposed hold time (seconds); 0 disables keepalives.
    pub hold_time: u16,
    /// ConnectRetryTime: first connect-retry delay and backoff.
    pub connect_retry: Duration,
    /// The backoff doubles up to this.
    pub connect_retry_max: Duration,
    /// Only accept connections, never connect.
    pub passive: bool,
    /// The NOTIFICATION (OPEN error, this subcode) that means a session color mismatch.
    pub color_mismatch_subcode: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Conn {
    id: ConnId,
    outbound: bool,
}

/// One neighbor's machine: the state and the session variables.
#[derive(Clone, Debug, PartialEq)]
pub struct Fsm {
    cfg: FsmConfig,
    state: State,
    /// The session's connection (OpenSent and later).
    conn: Option<Conn>,
    /// A colliding connection during OpenSent, our OPEN sent on it.
    other: Option<Conn>,
    /// A colliding connection kept while Established (no OPEN sent on it yet).
    standby: Option<Conn>,
    /// An outbound connection attempt is under way.
    attempt: bool,
    /// Delay before the first connect after the next session ends.
    backoff: Duration,
    /// Delay before the next connect after a failed one.
    retry: Duration,
    /// The peer's OPEN in this session (OpenConfirm, Established).
    peer: Option<PeerOpen>,
    /// The peer's BGP Identifier of the last Established session.
    last_peer_id: Option<Ipv4Addr>,
    /// This session saw a colliding connection or ended with a collision Cease.
    collided: bool,
    /// When this session's connection was taken.
    started: Duration,
    /// Negotiated hold time (seconds).
    hold: u16,
}

/// The transition function: the machine after `event` at time `now` (any monotonic
/// clock), and the actions to carry out.
pub fn transition(mut fsm: Fsm, now: Duration, event: Event) -> (Fsm, Vec<Action>) {
    let actions = fsm.handle(now, event);
    (fsm, actions)
}

/// RFC 4271 §6.8 between the connection in hand and another one: the connection opened
/// by the speaker with the higher BGP ID stays (`keep_ours`: that is us). Two
/// connections opened by the same side: the newer stays (its opener gave up the older).
pub fn current_stays(current_outbound: bool, other_outbound: bool, keep_ours: bool) -> bool {
    current_outbound != other_outbound && current_outbound == keep_ours
}

/// The checks of a received OPEN that refuse the session (RFC 4271 §6.2, DPF strict
/// session coloring): the answer is a `BGPOpenMsgErr`.
pub fn check_open(
    open: &Open,
    remote_as: u32,
    router_id: Ipv4Addr,
    color: &SessionColor,
) -> Result<PeerOpen, MsgError> {
    if open.asn() != remote_as {
        return Err(MsgError {
            notification: Notification {
                code: code::OPEN,
                subcode: open_err::BAD_PEER_AS,
                data: open.my_as.to_be_bytes().to_vec(),
            },
            reason: "peer AS mismatch".into(),
        });
    }
    if open.bgp_id == router_id {
        return Err(MsgError::new(
            code::OPEN,
            open_err::BAD_BGP_IDENTIFIER,
            "peer uses our BGP identifier",
        ));
    }
    // DPF strict mode (draft-wang-idr-dpf §2.1.1): Color Mismatch NOTIFICATION.
    if let Err(why) = color.check(&open.capabilities) {
        return Err(MsgError::new(
            code::OPEN,
            color.mismatch_subcode,
            why.to_string(),
        ));
    }
    Ok(PeerOpen {
        bgp_id: open.bgp_id,
        hold_time: open.hold_time,
    })
}

fn collision() -> Notification {
    Notification::new(code::CEASE, cease::CONNECTION_COLLISION)
}

fn secs(s: u16) -> Duration {
    Duration::from_secs(s as u64)
}

fn start(timer: Timer, after: Duration) -> Action {
    Action::StartTimer {
        timer,
        after,
        jitter: false,
    }
}

impl Fsm {
    pub fn new(cfg: FsmConfig) -> Fsm {
        Fsm {
            backoff: cfg.connect_retry,
            retry: cfg.connect_retry,
            cfg,
            state: State::Idle,
            conn: None,
            other: None,
            standby: None,
            attempt: false,
            peer: None,
            last_peer_id: None,
            collided: false,
            started: Duration::ZERO,
            hold: 0,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// The session's connection, the one whose messages are events.
    pub fn connection(&self) -> Option<ConnId> {
        self.conn.map(|c| c.id)
    }

    /// The negotiated hold time (seconds), once the peer's OPEN is in.
    pub fn hold_time(&self) -> u16 {
        self.hold
    }

    /// New timers (a configuration reload): the hold time proposed in the next OPEN and
    /// the connect-retry delays of the next attempts; a running session keeps what it
    /// negotiated.
    pub fn set_timers(
        &mut self,
        hold_time: u16,
        connect_retry: Duration,
        connect_retry_max: Duration,
    ) {
        self.cfg.hold_time = hold_time;
        self.cfg.connect_retry = connect_retry;
        self.cfg.connect_retry_max = connect_retry_max;
    }

    /// The delay before the first connect after the next session ends.
    pub fn backoff(&self) -> Duration {
        self.backoff
    }

    /// One event: the state changes in place, the actions are returned.
    pub fn handle(&mut self, now: Duration, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        self.step(now, event, &mut out);
        out
    }

    fn step(&mut self, now: Duration, event: Event, out: &mut Vec<Action>) {
        use Event as E;
        use State as S;
        match (self.state, event) {
            (_, E::ManualStop) => self.stop(cease::ADMINISTRATIVE_SHUTDOWN, out),
            (_, E::Deconfigured) => self.stop(cease::PEER_DECONFIGURED, out),
            (_, E::Reconfigured) => self.stop(cease::OTHER_CONFIGURATION_CHANGE, out),
            (_, E::AdminShutdown(data)) => self.admin_shutdown(data, out),
            (S::Idle, E::ManualStart | E::AutomaticStart) => {
                if self.cfg.passive {
                    self.state = S::Active;
                } else {
                    self.connect(out);
                }
            }
            // Idle refuses connections (RFC 4271 §8.2.2).
            (S::Idle, E::TcpConnectionConfirmed(id) | E::TcpCrAcked(id)) => {
                out.push(Action::Close(id))
            }
            (S::Idle, _) => {}

            // ---- Connect / Active: no session; listening, and connecting unless passive.
            (S::Connect | S::Active, E::ConnectRetryTimerExpires) => {
                if !self.cfg.passive && !self.attempt {
                    self.connect(out);
                }
            }
            (S::Connect | S::Active, E::LinkUp) => {
                // The link came back: whatever failed before it went down says nothing
                // about the next attempt (one under way may be stuck retransmitting its
                // SYN into a link that was down).
                self.backoff = self.cfg.connect_retry;
                self.retry = self.cfg.connect_retry;
                if self.cfg.passive {
                    return;
                }
                if self.attempt {
                    self.attempt = false;
                    out.push(Action::AbortConnect);
                }
                let delay = self.kick_delay();
                if delay.is_zero() {
                    out.push(Action::StopTimer(Timer::ConnectRetry));
                    self.connect(out);
                } else {
                    out.push(start(Timer::ConnectRetry, delay));
                    self.state = S::Active;
                }
            }
            (S::Connect | S::Active, E::TcpConnectionConfirmed(id)) => self.begin(
                now,
                Conn {
                    id,
                    outbound: false,
                },
                out,
            ),
            (S::Connect | S::Active, E::TcpCrAcked(id)) => {
                self.attempt = false;
                self.begin(now, Conn { id, outbound: true }, out)
            }
            (S::Connect | S::Active, E::TcpConnectionFails(_, _)) => {
                // The outbound attempt failed: retry after the retry delay (doubling).
                if self.attempt {
                    self.attempt = false;
                    out.push(Action::StartTimer {
                        timer: Timer::ConnectRetry,
                        after: self.retry,
                        jitter: true,
                    });
                    self.retry = (self.retry * 2).min(self.cfg.connect_retry_max);
                    self.state = S::Active;
                }
            }
            (S::Connect | S::Active, _) => {}

            // ---- A connection: OpenSent, OpenConfirm, Established.
            (_, E::AutomaticStart | E::ManualStart | E::LinkUp | E::ConnectRetryTimerExpires) => {}
            (_, E::AutomaticStop) => {
                self.send_notification(
                    Notification::new(code::CEASE, cease::ADMINISTRATIVE_RESET),
                    out,
                );
                if let Some(s) = self.standby.take() {
                    out.push(Action::Close(s.id));
                }
                self.end(now, "link down".into(), out);
            }
            (_, E::TcpConnectionConfirmed(id)) => self.collide(
                now,
                Conn {
                    id,
                    outbound: false,
                },
                out,
            ),
            (_, E::TcpCrAcked(id)) => {
                self.attempt = false;
                self.collide(now, Conn { id, outbound: true }, out)
            }
            (_, E::TcpConnectionFails(id, reason)) => {
                if self.conn.map(|c| c.id) == Some(id) {
                    self.end(now, reason, out);
                } else if self.other.map(|c| c.id) == Some(id) {
                    self.other = None;
                    out.push(Action::Close(id));
                } else if self.standby.map(|c| c.id) == Some(id) {
                    self.standby = None;
                    out.push(Action::StopTimer(Timer::Standby));
                    out.push(Action::Close(id));
                } else {
                    self.attempt = false;
                }
            }
            (_, E::OpenCollisionDump(id)) => self.dump(now, id, out),
            (_, E::NotifMsg(n) | E::NotifMsgVerErr(n)) => {
                if (n.code, n.subcode) == (code::CEASE, cease::CONNECTION_COLLISION) {
                    self.collided = true;
                }
                let reason = if n.code == code::OPEN && n.subcode == self.cfg.color_mismatch_subcode
                {
                    format!("{RECEIVED} {n}: session color mismatch")
                } else {
                    format!("{RECEIVED} {n}")
                };
                self.end(now, reason, out);
            }
            (
                _,
                E::BgpHeaderErr(e)
                | E::BgpOpenMsgErr(e)
                | E::UpdateMsgErr(e)
                | E::RouteRefreshMsgErr(e),
            ) => self.fail(now, e, out),
            (_, E::HoldTimerExpires) => self.fail(
                now,
                MsgError::new(code::HOLD_TIMER_EXPIRED, 0, "hold timer expired"),
                out,
            ),
            (S::OpenSent, E::KeepaliveTimerExpires | E::StandbyTimerExpires) => {}
            (S::OpenSent, E::BgpOpen(peer)) => self.open_received(now, peer, out),
            (S::OpenSent, E::KeepAliveMsg | E::UpdateMsg(_) | E::RouteRefreshMsg(_)) => {
                self.fail(now, MsgError::new(code::FSM, 1, "not an OPEN"), out)
            }
            (S::OpenConfirm | S::Established, E::KeepaliveTimerExpires) => {
                if let Some(c) = self.conn {
                    out.push(Action::SendKeepalive(c.id));
                    out.push(start(Timer::Keepalive, secs(self.hold) / 3));
                }
            }
            (S::OpenConfirm, E::StandbyTimerExpires) => {}
            (S::OpenConfirm, E::KeepAliveMsg) => {
                if self.hold > 0 {
                    out.push(start(Timer::Hold, secs(self.hold)));
                }
                if let Some(c) = self.conn {
                    out.push(Action::SessionUp(c.id));
                }
                self.last_peer_id = self.peer.map(|p| p.bgp_id);
                self.state = S::Established;
            }
            (S::OpenConfirm, E::BgpOpen(_) | E::UpdateMsg(_) | E::RouteRefreshMsg(_)) => self.fail(
                now,
                MsgError::new(code::FSM, 2, "unexpected message in OpenConfirm"),
                out,
            ),
            (S::Established, E::StandbyTimerExpires) => {
                if let Some(s) = self.standby.take() {
                    out.push(Action::SendNotification(s.id, collision()));
                    out.push(Action::Close(s.id));
                }
            }
            (S::Established, E::KeepAliveMsg) => self.restart_hold(out),
            (S::Established, E::UpdateMsg(u)) => {
                self.restart_hold(out);
                out.push(Action::DeliverUpdate(u));
            }
            (S::Established, E::RouteRefreshMsg(r)) => {
                self.restart_hold(out);
                out.push(Action::DeliverRouteRefresh(r));
            }
            (S::Established, E::BgpOpen(_)) => self.fail(
                now,
                MsgError::new(code::FSM, 3, "OPEN while Established"),
                out,
            ),
        }
    }

    /// How long after a link-up to connect (see [`KICK_DEFER`]).
    fn kick_delay(&self) -> Duration {
        match self.last_peer_id {
            Some(r) if u32::from(self.cfg.router_id) < u32::from(r) => {
                KICK_DEFER.min(self.cfg.connect_retry)
            }
            _ => Duration::ZERO,
        }
    }

    fn connect(&mut self, out: &mut Vec<Action>) {
        self.attempt = true;
        out.push(Action::Connect);
        self.state = State::Connect;
    }

    /// A session starts on `c`: OPEN, the large hold timer, OpenSent. An outbound
    /// attempt under way goes on: the peer may already have accepted it and picked it
    /// in its own collision check.
    fn begin(&mut self, now: Duration, c: Conn, out: &mut Vec<Action>) {
        self.conn = Some(c);
        self.started = now;
        self.collided = false;
        self.peer = None;
        self.hold = 0;
        out.push(Action::StopTimer(Timer::ConnectRetry));
        out.push(Action::SendOpen(c.id));
        out.push(start(Timer::Hold, OPEN_HOLD));
        self.state = State::OpenSent;
    }

    /// Another connection while one is in hand (RFC 4271 §6.8).
    fn collide(&mut self, now: Duration, c: Conn, out: &mut Vec<Action>) {
        let Some(current) = self.conn else {
            out.push(Action::Close(c.id));
            return;
        };
        match self.state {
            State::OpenSent => {
                // Answer with our OPEN there too; decide once the peer's OPEN tells its
                // BGP ID (the peer decides on the same two connections).
                self.collided = true;
                if let Some(old) = self.other.replace(c) {
                    out.push(Action::Close(old.id));
                }
                out.push(Action::SendOpen(c.id));
            }
            State::OpenConfirm => {
                // The peer's BGP ID is known: decide at once.
                self.collided = true;
                out.push(Action::SendOpen(c.id));
                if current_stays(current.outbound, c.outbound, self.keep_ours()) {
                    out.push(Action::SendNotification(c.id, collision()));
                    out.push(Action::Close(c.id));
                } else {
                    self.other = Some(c);
                    self.step(now, Event::OpenCollisionDump(current.id), out);
                }
            }
            State::Established => {
                // RFC 4271 §6.8: an Established session wins any collision, and the new
                // connection is closed. It is kept on standby for STANDBY instead: the
                // peer may have chosen it while this end was completing the handshake on
                // this one (then a Cease comes here next), or may have lost this
                // connection without us noticing (a link flap: the KEEPALIVE sent now
                // draws its RST at once instead of after the hold time). Either way this
                // session ends and the next starts on the standby at once.
                if let Some(old) = self.standby.replace(c) {
                    out.push(Action::SendNotification(old.id, collision()));
                    out.push(Action::Close(old.id));
                }
                out.push(start(Timer::Standby, STANDBY));
                out.push(Action::SendKeepalive(current.id));
            }
            _ => out.push(Action::Close(c.id)),
        }
    }

    fn keep_ours(&self) -> bool {
        self.peer
            .is_some_and(|p| u32::from(self.cfg.router_id) > u32::from(p.bgp_id))
    }

    /// The session's connection loses a collision: Cease on it, and the handshake goes
    /// on over the other connection (our OPEN is already there).
    fn dump(&mut self, now: Duration, id: ConnId, out: &mut Vec<Action>) {
        if self.other.map(|c| c.id) == Some(id) {
            self.other = None;
            out.push(Action::SendNotification(id, collision()));
            out.push(Action::Close(id));
            return;
        }
        if self.standby.map(|c| c.id) == Some(id) {
            self.standby = None;
            out.push(Action::StopTimer(Timer::Standby));
            out.push(Action::SendNotification(id, collision()));
            out.push(Action::Close(id));
            return;
        }
        if self.conn.map(|c| c.id) != Some(id) {
            return;
        }
        self.collided = true;
        match self.other.take() {
            Some(other) if self.state != State::Established => {
                out.push(Action::SendNotification(id, collision()));
                out.push(Action::Close(id));
                self.conn = Some(other);
                self.peer = None;
                self.hold = 0;
                out.push(Action::StopTimer(Timer::Keepalive));
                out.push(start(Timer::Hold, OPEN_HOLD));
                self.state = State::OpenSent;
            }
            other => {
                self.other = other;
                self.fail(
                    now,
                    MsgError {
                        notification: collision(),
                        reason: "connection collision".into(),
                    },
                    out,
                );
            }
        }
    }

    /// The peer's OPEN in OpenSent: resolve a pending collision, then OpenConfirm.
    fn open_received(&mut self, now: Duration, peer: PeerOpen, out: &mut Vec<Action>) {
        let Some(current) = self.conn else { return };
        self.peer = Some(peer);
        if let Some(other) = self.other {
            if current_stays(current.outbound, other.outbound, self.keep_ours()) {
                self.step(now, Event::OpenCollisionDump(other.id), out);
            } else {
                self.step(now, Event::OpenCollisionDump(current.id), out);
                return;
            }
        }
        self.hold = self.cfg.hold_time.min(peer.hold_time);
        out.push(Action::SendKeepalive(current.id));
        if self.hold > 0 {
            out.push(start(Timer::Hold, secs(self.hold)));
            out.push(start(Timer::Keepalive, secs(self.hold) / 3));
        } else {
            out.push(Action::StopTimer(Timer::Hold));
        }
        self.state = State::OpenConfirm;
    }

    fn restart_hold(&self, out: &mut Vec<Action>) {
        if self.hold > 0 {
            out.push(start(Timer::Hold, secs(self.hold)));
        }
    }

    fn send_notification(&self, n: Notification, out: &mut Vec<Action>) {
        if let Some(c) = self.conn {
            out.push(Action::SendNotification(c.id, n));
        }
    }

    /// Ends the session with a NOTIFICATION of ours.
    fn fail(&mut self, now: Duration, e: MsgError, out: &mut Vec<Action>) {
        let reason = format!("{SENT} {}: {}", e.notification, e.reason);
        self.send_notification(e.notification, out);
        self.end(now, reason, out);
    }

    /// The session ended: release it, report, and restart after the backoff (at once
    /// on a standby connection).
    fn end(&mut self, now: Duration, reason: String, out: &mut Vec<Action>) {
        if let Some(c) = self.conn.take() {
            out.push(Action::Close(c.id));
        }
        if let Some(c) = self.other.take() {
            out.push(Action::Close(c.id));
        }
        if self.attempt {
            self.attempt = false;
            out.push(Action::AbortConnect);
        }
        out.push(Action::StopTimer(Timer::Hold));
        out.push(Action::StopTimer(Timer::Keepalive));
        out.push(Action::StopTimer(Timer::Standby));
        out.push(Action::SessionDown(reason));
        // A session that stayed up a while restarts the backoff. So does a collision
        // (RFC 4271 §6.8): the two ends raced (a crossing SYN, or one end Established
        // while the other still chose), which says nothing about the peer.
        self.backoff =
            if self.collided || now.saturating_sub(self.started) > self.cfg.connect_retry_max {
                self.cfg.connect_retry
            } else {
                (self.backoff * 2).min(self.cfg.connect_retry_max)
            };
        self.retry = self.cfg.connect_retry;
        self.peer = None;
        self.hold = 0;
        if let Some(s) = self.standby.take() {
            self.begin(now, s, out);
            return;
        }
        self.state = State::Active;
        if !self.cfg.passive {
            out.push(Action::StartTimer {
                timer: Timer::ConnectRetry,
                after: self.backoff,
                jitter: true,
            });
        }
    }

    /// The operator's shutdown: like ManualStop, with the shutdown communication in the
    /// Cease, a SessionDown when a connection was up, and the task stays (Idle refuses
    /// connections until ManualStart).
    fn admin_shutdown(&mut self, data: Vec<u8>, out: &mut Vec<Action>) {
        let had_connection = self.conn.is_some();
        let mut n = Notification::new(code::CEASE, cease::ADMINISTRATIVE_SHUTDOWN);
        n.data = data;
        self.send_notification(n, out);
        self.release(out);
        if had_connection {
            out.push(Action::SessionDown("administratively shut down".into()));
        }
        self.backoff = self.cfg.connect_retry;
        self.retry = self.cfg.connect_retry;
        self.peer = None;
        self.hold = 0;
    }

    /// ManualStop (Cease / Administrative Shutdown), Deconfigured (Cease / Peer
    /// De-configured) or Reconfigured (Cease / Other Configuration Change): release
    /// everything, Idle, the task ends.
    fn stop(&mut self, subcode: u8, out: &mut Vec<Action>) {
        self.send_notification(Notification::new(code::CEASE, subcode), out);
        self.release(out);
        out.push(Action::Stop);
    }

    /// Closes every connection, aborts the attempt, stops every timer: Idle.
    fn release(&mut self, out: &mut Vec<Action>) {
        for c in [self.conn.take(), self.other.take(), self.standby.take()]
            .into_iter()
            .flatten()
        {
            out.push(Action::Close(c.id));
        }
        if self.attempt {
            self.attempt = false;
            out.push(Action::AbortConnect);
        }
        for t in [
            Timer::ConnectRetry,
            Timer::Hold,
            Timer::Keepalive,
            Timer::Standby,
        ] {
            out.push(Action::StopTimer(t));
        }
        self.state = State::Idle;
    }
}

#[cfg(test)]
mod tests;
