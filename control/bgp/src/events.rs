//! Inputs and outputs of the BGP finite state machine ([`super::fsm`]).
//!
//! [`Event`]s carry the RFC 4271 §8.1 names (in Rust case: `Tcp_CR_Acked` is
//! [`Event::TcpCrAcked`], `BGPOpen` is [`Event::BgpOpen`] ...), plus three this
//! implementation adds (documented on each variant). [`Action`]s are what the I/O task
//! around the machine ([`super::neighbor`]) must do: send a message on a connection,
//! close one, start or stop a timer, connect, report to the speaker.

use super::packet::{Notification, RouteRefresh, Update};
use std::net::Ipv4Addr;
use std::time::Duration;

/// A TCP connection, numbered by the I/O task (inbound and outbound alike) when it is
/// made. Message events always concern the session's current connection.
pub type ConnId = u64;

/// What the peer's OPEN says that the state machine needs (the I/O task has checked the
/// rest, see [`super::fsm::check_open`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerOpen {
    pub bgp_id: Ipv4Addr,
    pub hold_time: u16,
}

/// A message that must be answered with `notification`; `reason` is for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MsgError {
    pub notification: Notification,
    pub reason: String,
}

impl MsgError {
    pub fn new(code: u8, subcode: u8, reason: impl Into<String>) -> Self {
        MsgError {
            notification: Notification::new(code, subcode),
            reason: reason.into(),
        }
    }
}

/// RFC 4271 §8.1 events (number in brackets), as the I/O task feeds them.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// (1) The neighbor task starts.
    ManualStart,
    /// (2) Stop for good: Cease / Administrative Shutdown on the connection, if any.
    ManualStop,
    /// (2) as the operator's shutdown: Cease / Administrative Shutdown carrying this
    /// data (the RFC 8203 shutdown communication), then Idle until `ManualStart`.
    AdminShutdown(Vec<u8>),
    /// (2) Stop for good: the neighbor left the configuration, Cease / Peer De-configured
    /// (RFC 4486) on the connection, if any.
    Deconfigured,
    /// (2) Stop for good: the neighbor's configuration changed and a new task takes its
    /// place, Cease / Other Configuration Change (RFC 4486) on the connection, if any.
    Reconfigured,
    /// (3) Same as `ManualStart` (Idle only).
    AutomaticStart,
    /// (8) The link under the session went down: Cease / Administrative Reset, then the
    /// automatic restart after the backoff.
    AutomaticStop,
    /// Not in RFC 4271: the link under the session came back. While no session is up,
    /// the connect backoff restarts from ConnectRetryTime and a connection is attempted
    /// at once (after [`super::fsm::KICK_DEFER`] at the end with the lower BGP ID).
    LinkUp,
    /// (9)
    ConnectRetryTimerExpires,
    /// (10)
    HoldTimerExpires,
    /// (11)
    KeepaliveTimerExpires,
    /// Not in RFC 4271: the standby time of a colliding connection kept while Established
    /// is over (see [`super::fsm::STANDBY`]).
    StandbyTimerExpires,
    /// (16) `Tcp_CR_Acked`: our outbound connection attempt succeeded.
    TcpCrAcked(ConnId),
    /// (17) The peer's connection was accepted.
    TcpConnectionConfirmed(ConnId),
    /// (18) A connection failed (read or write error, closed by the peer), or the
    /// outbound attempt failed (an id the machine does not hold).
    TcpConnectionFails(ConnId, String),
    /// (19) `BGPOpen`: a valid OPEN arrived.
    BgpOpen(PeerOpen),
    /// (21) `BGPHeaderErr`.
    BgpHeaderErr(MsgError),
    /// (22) `BGPOpenMsgErr`: a malformed OPEN, or one that is refused (peer AS, BGP
    /// Identifier, session color).
    BgpOpenMsgErr(MsgError),
    /// (23) This connection loses a collision (RFC 4271 §6.8); the machine raises it
    /// for itself when it resolves one.
    OpenCollisionDump(ConnId),
    /// (24) `NotifMsgVerErr`: a NOTIFICATION with an OPEN version error.
    NotifMsgVerErr(Notification),
    /// (25) `NotifMsg`: any other NOTIFICATION.
    NotifMsg(Notification),
    /// (26) `KeepAliveMsg`.
    KeepAliveMsg,
    /// (27) `UpdateMsg`.
    UpdateMsg(Box<Update>),
    /// (28) `UpdateMsgErr`.
    UpdateMsgErr(MsgError),
    /// RFC 2918: a ROUTE-REFRESH message (handled like an UPDATE by the machine).
    RouteRefreshMsg(RouteRefresh),
    /// RFC 7313 §5: a malformed ROUTE-REFRESH.
    RouteRefreshMsgErr(MsgError),
}

/// The timers the I/O task runs for the machine; each expiry is the matching event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timer {
    ConnectRetry,
    Hold,
    Keepalive,
    Standby,
}

/// What the I/O task must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Start an outbound connection attempt; its outcome is `TcpCrAcked` or
    /// `TcpConnectionFails` with the id the task gives it.
    Connect,
    /// Drop the outbound attempt under way.
    AbortConnect,
    SendOpen(ConnId),
    SendKeepalive(ConnId),
    SendNotification(ConnId, Notification),
    /// Close the connection (after what was sent on it) and forget it.
    Close(ConnId),
    /// Start (or restart) a timer; `jitter`: RFC 4271 §10, x0.75..1.0.
    StartTimer {
        timer: Timer,
        after: Duration,
        jitter: bool,
    },
    StopTimer(Timer),
    /// The session on this connection is Established: report it, send the ORF request.
    SessionUp(ConnId),
    /// Give the UPDATE to the RIB.
    DeliverUpdate(Box<Update>),
    /// Give the ROUTE-REFRESH to the speaker.
    DeliverRouteRefresh(RouteRefresh),
    /// The session ended (report the reason; the RIB drops the peer's routes).
    SessionDown(String),
    /// The neighbor stops (the task ends).
    Stop,
}
