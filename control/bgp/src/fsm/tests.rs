//! Table-driven tests of the state machine: every state against every event, then the
//! collision rule (RFC 4271 §6.8), the timers and the backoff. Expected states and
//! actions are written out by hand from the RFC text and the rules in `fsm.rs`'s doc.
//!
//! Our BGP Identifier is 10.0.0.2, hold time 9 s, ConnectRetryTime 1 s, ConnectRetryMax
//! 8 s. Connection 1 is the session's; 2 and 3 collide; 9 is an outbound attempt that
//! failed (an id the machine does not hold).

use super::*;
use crate::events::{Action as A, Event as E, Timer as T};
use crate::packet::{RouteRefresh, Update};

const ME: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const LOWER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const HIGHER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
/// Events of the table happen long after the session started (a long session).
const LATER: Duration = Duration::from_secs(100);

fn cfg() -> FsmConfig {
    FsmConfig {
        router_id: ME,
        hold_time: 9,
        connect_retry: Duration::from_secs(1),
        connect_retry_max: Duration::from_secs(8),
        passive: false,
        color_mismatch_subcode: 12,
    }
}

fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn run(mut fsm: Fsm, events: Vec<(Duration, Event)>) -> Fsm {
    for (t, e) in events {
        fsm.handle(t, e);
    }
    fsm
}

fn idle() -> Fsm {
    Fsm::new(cfg())
}
/// An outbound attempt under way.
fn connect() -> Fsm {
    run(idle(), vec![(s(0), E::ManualStart)])
}
/// The attempt failed; the ConnectRetryTimer runs.
fn active() -> Fsm {
    run(
        connect(),
        vec![(s(0), E::TcpConnectionFails(9, "refused".into()))],
    )
}
/// Our connection 1 is up, OPEN sent.
fn open_sent() -> Fsm {
    run(connect(), vec![(s(0), E::TcpCrAcked(1))])
}
fn peer(bgp_id: Ipv4Addr, hold_time: u16) -> PeerOpen {
    PeerOpen { bgp_id, hold_time }
}
/// The peer's OPEN (lower BGP ID, hold 90) in.
fn open_confirm() -> Fsm {
    run(open_sent(), vec![(s(0), E::BgpOpen(peer(LOWER, 90)))])
}
fn established() -> Fsm {
    run(open_confirm(), vec![(s(0), E::KeepAliveMsg)])
}

fn notif(id: ConnId, code: u8, subcode: u8) -> A {
    A::SendNotification(id, Notification::new(code, subcode))
}
fn timer(timer: T, after: Duration) -> A {
    A::StartTimer {
        timer,
        after,
        jitter: false,
    }
}
fn jittered(timer: T, after: Duration) -> A {
    A::StartTimer {
        timer,
        after,
        jitter: true,
    }
}
/// The end of a session on connection 1 (nothing else held), long after its start:
/// the backoff is back to 1 s.
fn down(reason: &str) -> Vec<A> {
    vec![
        A::Close(1),
        A::StopTimer(T::Hold),
        A::StopTimer(T::Keepalive),
        A::StopTimer(T::Standby),
        A::SessionDown(reason.into()),
        jittered(T::ConnectRetry, s(1)),
    ]
}
/// A NOTIFICATION of ours on connection 1, then the end of the session.
fn fail(code: u8, subcode: u8, reason: &str) -> Vec<A> {
    let mut v = vec![notif(1, code, subcode)];
    v.extend(down(reason));
    v
}
const STOP_TIMERS: [A; 4] = [
    A::StopTimer(T::ConnectRetry),
    A::StopTimer(T::Hold),
    A::StopTimer(T::Keepalive),
    A::StopTimer(T::Standby),
];
fn stopped(prefix: Vec<A>) -> Vec<A> {
    let mut v = prefix;
    v.extend(STOP_TIMERS);
    v.push(A::Stop);
    v
}
fn opened(id: ConnId) -> Vec<A> {
    vec![
        A::StopTimer(T::ConnectRetry),
        A::SendOpen(id),
        timer(T::Hold, OPEN_HOLD),
    ]
}
fn msg_err(code: u8, subcode: u8, reason: &str) -> MsgError {
    MsgError::new(code, subcode, reason)
}
fn update() -> Box<Update> {
    Box::new(Update::default())
}
fn refresh() -> RouteRefresh {
    RouteRefresh {
        afi: 1,
        subtype: 0,
        safi: 1,
        orf: None,
    }
}

/// Every event once, as the table uses them.
fn all_events() -> Vec<Event> {
    vec![
        E::ManualStart,
        E::ManualStop,
        E::AutomaticStart,
        E::AutomaticStop,
        E::LinkUp,
        E::ConnectRetryTimerExpires,
        E::HoldTimerExpires,
        E::KeepaliveTimerExpires,
        E::StandbyTimerExpires,
        E::TcpCrAcked(2),
        E::TcpConnectionConfirmed(2),
        E::TcpConnectionFails(1, "connection closed by peer".into()),
        E::BgpOpen(peer(LOWER, 90)),
        E::BgpHeaderErr(msg_err(1, 2, "bad length")),
        E::BgpOpenMsgErr(msg_err(2, 2, "peer AS mismatch")),
        E::OpenCollisionDump(1),
        E::NotifMsgVerErr(Notification::new(2, 1)),
        E::NotifMsg(Notification::new(6, 2)),
        E::KeepAliveMsg,
        E::UpdateMsg(update()),
        E::UpdateMsgErr(msg_err(3, 1, "malformed attribute list")),
        E::RouteRefreshMsg(refresh()),
        E::RouteRefreshMsgErr(msg_err(7, 1, "invalid message length")),
    ]
}

type Row = (fn() -> Fsm, Event, State, Vec<A>);

/// Every state against every event: the next state and the actions.
fn table() -> Vec<Row> {
    use State::*;
    let ignored = |f: fn() -> Fsm, st: State, events: Vec<Event>| -> Vec<Row> {
        events.into_iter().map(|e| (f, e, st, vec![])).collect()
    };
    let mut t: Vec<Row> = vec![
        // ---- Idle: only a start leaves it; connections are refused.
        (idle, E::ManualStart, Connect, vec![A::Connect]),
        (idle, E::AutomaticStart, Connect, vec![A::Connect]),
        (idle, E::ManualStop, Idle, stopped(vec![])),
        (idle, E::TcpCrAcked(2), Idle, vec![A::Close(2)]),
        (idle, E::TcpConnectionConfirmed(2), Idle, vec![A::Close(2)]),
        // ---- Connect: the attempt is under way.
        (connect, E::ManualStop, Idle, stopped(vec![A::AbortConnect])),
        (
            connect,
            E::LinkUp,
            Connect,
            vec![A::AbortConnect, A::StopTimer(T::ConnectRetry), A::Connect],
        ),
        (connect, E::TcpCrAcked(2), OpenSent, opened(2)),
        (connect, E::TcpConnectionConfirmed(2), OpenSent, opened(2)),
        (
            connect,
            E::TcpConnectionFails(9, "refused".into()),
            Active,
            vec![jittered(T::ConnectRetry, s(1))],
        ),
        // ---- Active: waiting for the ConnectRetryTimer, listening.
        (active, E::ManualStop, Idle, stopped(vec![])),
        (active, E::ConnectRetryTimerExpires, Connect, vec![A::Connect]),
        (
            active,
            E::LinkUp,
            Connect,
            vec![A::StopTimer(T::ConnectRetry), A::Connect],
        ),
        (active, E::TcpCrAcked(2), OpenSent, opened(2)),
        (active, E::TcpConnectionConfirmed(2), OpenSent, opened(2)),
        (
            active,
            E::TcpConnectionFails(9, "refused".into()),
            Active,
            vec![],
        ),
        // ---- OpenSent.
        (
            open_sent,
            E::ManualStop,
            Idle,
            stopped(vec![notif(1, 6, 2), A::Close(1)]),
        ),
        (
            open_sent,
            E::HoldTimerExpires,
            Active,
            fail(
                4,
                0,
                "sent NOTIFICATION hold timer expired (4/0): hold timer expired",
            ),
        ),
        // A colliding connection: our OPEN on it too, decided when the peer's comes.
        (open_sent, E::TcpCrAcked(2), OpenSent, vec![A::SendOpen(2)]),
        (
            open_sent,
            E::TcpConnectionConfirmed(2),
            OpenSent,
            vec![A::SendOpen(2)],
        ),
        (
            open_sent,
            E::BgpOpen(peer(LOWER, 90)),
            OpenConfirm,
            vec![
                A::SendKeepalive(1),
                timer(T::Hold, s(9)),
                timer(T::Keepalive, s(3)),
            ],
        ),
        (
            open_sent,
            E::KeepAliveMsg,
            Active,
            fail(
                5,
                1,
                "sent NOTIFICATION finite state machine error (5/1): not an OPEN",
            ),
        ),
        (
            open_sent,
            E::UpdateMsg(update()),
            Active,
            fail(
                5,
                1,
                "sent NOTIFICATION finite state machine error (5/1): not an OPEN",
            ),
        ),
        (
            open_sent,
            E::RouteRefreshMsg(refresh()),
            Active,
            fail(
                5,
                1,
                "sent NOTIFICATION finite state machine error (5/1): not an OPEN",
            ),
        ),
        // ---- OpenConfirm (peer 10.0.0.1: our connections win collisions).
        (
            open_confirm,
            E::ManualStop,
            Idle,
            stopped(vec![notif(1, 6, 2), A::Close(1)]),
        ),
        (
            open_confirm,
            E::HoldTimerExpires,
            Active,
            fail(
                4,
                0,
                "sent NOTIFICATION hold timer expired (4/0): hold timer expired",
            ),
        ),
        (
            open_confirm,
            E::KeepaliveTimerExpires,
            OpenConfirm,
            vec![A::SendKeepalive(1), timer(T::Keepalive, s(3))],
        ),
        // Ours again (same direction): the newer one stays, the session moves to it.
        (
            open_confirm,
            E::TcpCrAcked(2),
            OpenSent,
            vec![
                A::SendOpen(2),
                notif(1, 6, 7),
                A::Close(1),
                A::StopTimer(T::Keepalive),
                timer(T::Hold, OPEN_HOLD),
            ],
        ),
        // The peer's, lower BGP ID: ours stays.
        (
            open_confirm,
            E::TcpConnectionConfirmed(2),
            OpenConfirm,
            vec![A::SendOpen(2), notif(2, 6, 7), A::Close(2)],
        ),
        (
            open_confirm,
            E::BgpOpen(peer(LOWER, 90)),
            Active,
            fail(
                5,
                2,
                "sent NOTIFICATION finite state machine error (5/2): unexpected message in OpenConfirm",
            ),
        ),
        (
            open_confirm,
            E::KeepAliveMsg,
            Established,
            vec![timer(T::Hold, s(9)), A::SessionUp(1)],
        ),
        (
            open_confirm,
            E::UpdateMsg(update()),
            Active,
            fail(
                5,
                2,
                "sent NOTIFICATION finite state machine error (5/2): unexpected message in OpenConfirm",
            ),
        ),
        (
            open_confirm,
            E::RouteRefreshMsg(refresh()),
            Active,
            fail(
                5,
                2,
                "sent NOTIFICATION finite state machine error (5/2): unexpected message in OpenConfirm",
            ),
        ),
        // ---- Established.
        (
            established,
            E::ManualStop,
            Idle,
            stopped(vec![notif(1, 6, 2), A::Close(1)]),
        ),
        (
            established,
            E::HoldTimerExpires,
            Active,
            fail(
                4,
                0,
                "sent NOTIFICATION hold timer expired (4/0): hold timer expired",
            ),
        ),
        (
            established,
            E::KeepaliveTimerExpires,
            Established,
            vec![A::SendKeepalive(1), timer(T::Keepalive, s(3))],
        ),
        // A colliding connection goes on standby; a KEEPALIVE probes the session.
        (
            established,
            E::TcpCrAcked(2),
            Established,
            vec![timer(T::Standby, STANDBY), A::SendKeepalive(1)],
        ),
        (
            established,
            E::TcpConnectionConfirmed(2),
            Established,
            vec![timer(T::Standby, STANDBY), A::SendKeepalive(1)],
        ),
        (
            established,
            E::BgpOpen(peer(LOWER, 90)),
            Active,
            fail(
                5,
                3,
                "sent NOTIFICATION finite state machine error (5/3): OPEN while Established",
            ),
        ),
        (
            established,
            E::KeepAliveMsg,
            Established,
            vec![timer(T::Hold, s(9))],
        ),
        (
            established,
            E::UpdateMsg(update()),
            Established,
            vec![timer(T::Hold, s(9)), A::DeliverUpdate(update())],
        ),
        (
            established,
            E::RouteRefreshMsg(refresh()),
            Established,
            vec![timer(T::Hold, s(9)), A::DeliverRouteRefresh(refresh())],
        ),
    ];
    // What OpenSent, OpenConfirm and Established do alike: a link down, the connection
    // lost, a malformed message, a collision lost, a NOTIFICATION received.
    for f in [open_sent as fn() -> Fsm, open_confirm, established] {
        let session_errors: Vec<Row> = vec![
            (f, E::AutomaticStop, Active, fail(6, 4, "link down")),
            (
                f,
                E::TcpConnectionFails(1, "connection closed by peer".into()),
                Active,
                down("connection closed by peer"),
            ),
            (
                f,
                E::BgpHeaderErr(msg_err(1, 2, "bad length")),
                Active,
                fail(
                    1,
                    2,
                    "sent NOTIFICATION message header error (1/2): bad length",
                ),
            ),
            (
                f,
                E::BgpOpenMsgErr(msg_err(2, 2, "peer AS mismatch")),
                Active,
                fail(
                    2,
                    2,
                    "sent NOTIFICATION OPEN message error (2/2): peer AS mismatch",
                ),
            ),
            (
                f,
                E::OpenCollisionDump(1),
                Active,
                fail(6, 7, "sent NOTIFICATION cease (6/7): connection collision"),
            ),
            (
                f,
                E::NotifMsgVerErr(Notification::new(2, 1)),
                Active,
                down("received NOTIFICATION OPEN message error (2/1)"),
            ),
            (
                f,
                E::NotifMsg(Notification::new(6, 2)),
                Active,
                down("received NOTIFICATION cease (6/2)"),
            ),
            (
                f,
                E::UpdateMsgErr(msg_err(3, 1, "malformed attribute list")),
                Active,
                fail(
                    3,
                    1,
                    "sent NOTIFICATION UPDATE message error (3/1): malformed attribute list",
                ),
            ),
            (
                f,
                E::RouteRefreshMsgErr(msg_err(7, 1, "invalid message length")),
                Active,
                fail(
                    7,
                    1,
                    "sent NOTIFICATION ROUTE-REFRESH message error (7/1): invalid message length",
                ),
            ),
        ];
        t.extend(session_errors);
    }
    // Events a state has nothing to do with.
    let rest = |f: fn() -> Fsm, t: &Vec<Row>| -> Vec<Event> {
        let here = f().state();
        all_events()
            .into_iter()
            .filter(|e| {
                !t.iter().any(|(g, ev, _, _)| {
                    g().state() == here && std::mem::discriminant(ev) == std::mem::discriminant(e)
                })
            })
            .collect()
    };
    for (f, st) in [
        (idle as fn() -> Fsm, Idle),
        (connect, Connect),
        (active, Active),
        (open_sent, OpenSent),
        (open_confirm, OpenConfirm),
        (established, Established),
    ] {
        let events = rest(f, &t);
        t.extend(ignored(f, st, events));
    }
    t
}

#[test]
fn every_state_and_event() {
    let table = table();
    for (i, (f, event, state, actions)) in table.into_iter().enumerate() {
        let before = f();
        let from = before.state();
        let (after, got) = transition(before, LATER, event.clone());
        assert_eq!(
            (after.state(), &got),
            (state, &actions),
            "row {i}: {from:?} + {event:?}"
        );
    }
}

/// The ignored rows above are what is left over; this says what that is, so that a
/// transition added to the machine without a row fails here.
#[test]
fn ignored_events_are_the_expected_ones() {
    let kinds = |st: State| -> Vec<String> {
        table()
            .into_iter()
            .filter(|(f, _, _, a)| f().state() == st && a.is_empty())
            .map(|(_, e, _, _)| format!("{e:?}").split('(').next().unwrap_or("").to_string())
            .collect()
    };
    let timers_and_starts = [
        "ManualStart",
        "AutomaticStart",
        "LinkUp",
        "ConnectRetryTimerExpires",
    ];
    assert_eq!(kinds(State::Idle).len(), all_events().len() - 5);
    // Connect: the attempt is under way, nothing but connections and stops matter.
    assert_eq!(kinds(State::Connect).len(), all_events().len() - 5);
    assert_eq!(kinds(State::Active).len(), all_events().len() - 5);
    let confirm = kinds(State::OpenConfirm);
    assert_eq!(
        confirm,
        timers_and_starts
            .iter()
            .chain(&["StandbyTimerExpires"])
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
    );
    let sent = kinds(State::OpenSent);
    assert_eq!(
        sent,
        timers_and_starts
            .iter()
            .chain(&["KeepaliveTimerExpires", "StandbyTimerExpires"])
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
    );
    let est = kinds(State::Established);
    assert_eq!(
        est,
        timers_and_starts
            .iter()
            .chain(&["StandbyTimerExpires"])
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
    );
}

// ---- Collisions (RFC 4271 §6.8).

/// OpenSent with two connections: 1 first, 2 colliding. The peer's OPEN decides: the
/// connection opened by the higher BGP ID stays; two of the same side: the newer.
#[test]
fn collision_in_open_sent() {
    struct Case {
        first: Event,
        second: Event,
        peer: Ipv4Addr,
        /// The connection that stays.
        stays: ConnId,
    }
    let cases = [
        // Peer's connection first, then ours completes.
        Case {
            first: E::TcpConnectionConfirmed(1),
            second: E::TcpCrAcked(2),
            peer: LOWER,
            stays: 2,
        },
        Case {
            first: E::TcpConnectionConfirmed(1),
            second: E::TcpCrAcked(2),
            peer: HIGHER,
            stays: 1,
        },
        // Ours first, then the peer's.
        Case {
            first: E::TcpCrAcked(1),
            second: E::TcpConnectionConfirmed(2),
            peer: LOWER,
            stays: 1,
        },
        Case {
            first: E::TcpCrAcked(1),
            second: E::TcpConnectionConfirmed(2),
            peer: HIGHER,
            stays: 2,
        },
        // Both the peer's: the newer, whatever the IDs.
        Case {
            first: E::TcpConnectionConfirmed(1),
            second: E::TcpConnectionConfirmed(2),
            peer: LOWER,
            stays: 2,
        },
        Case {
            first: E::TcpConnectionConfirmed(1),
            second: E::TcpConnectionConfirmed(2),
            peer: HIGHER,
            stays: 2,
        },
    ];
    for (i, c) in cases.into_iter().enumerate() {
        let fsm = run(connect(), vec![(s(0), c.first)]);
        let (fsm, a) = transition(fsm, s(0), c.second);
        assert_eq!((fsm.state(), a), (State::OpenSent, vec![A::SendOpen(2)]));
        let (fsm, a) = transition(fsm, s(0), E::BgpOpen(peer(c.peer, 90)));
        let accepted = vec![
            A::SendKeepalive(c.stays),
            timer(T::Hold, s(9)),
            timer(T::Keepalive, s(3)),
        ];
        if c.stays == 1 {
            let mut want = vec![notif(2, 6, 7), A::Close(2)];
            want.extend(accepted);
            assert_eq!((fsm.state(), a), (State::OpenConfirm, want), "case {i}");
            assert_eq!(fsm.connection(), Some(1));
        } else {
            // Cease on 1; the OPEN of 2 is awaited under the large hold timer.
            let want = vec![
                notif(1, 6, 7),
                A::Close(1),
                A::StopTimer(T::Keepalive),
                timer(T::Hold, OPEN_HOLD),
            ];
            assert_eq!((fsm.state(), a), (State::OpenSent, want), "case {i}");
            assert_eq!(fsm.connection(), Some(2));
            let (fsm, a) = transition(fsm, s(0), E::BgpOpen(peer(c.peer, 90)));
            assert_eq!((fsm.state(), a), (State::OpenConfirm, accepted), "case {i}");
        }
    }
}

/// OpenConfirm: the peer's BGP ID is known, a colliding connection is decided at once.
#[test]
fn collision_in_open_confirm() {
    // (peer ID, colliding connection is ours) -> the session moves to it.
    for (id, ours, moves) in [
        (LOWER, true, true),   // both ours: the newer
        (LOWER, false, false), // ours (higher ID) against the peer's: ours stays
        (HIGHER, false, true), // the peer's wins with its higher ID
        (HIGHER, true, true),  // both ours: the newer
    ] {
        let fsm = run(open_sent(), vec![(s(0), E::BgpOpen(peer(id, 90)))]);
        let ev = if ours {
            E::TcpCrAcked(2)
        } else {
            E::TcpConnectionConfirmed(2)
        };
        let (fsm, a) = transition(fsm, s(0), ev);
        if moves {
            assert_eq!(fsm.state(), State::OpenSent);
            assert_eq!(fsm.connection(), Some(2));
            assert_eq!(&a[..3], &[A::SendOpen(2), notif(1, 6, 7), A::Close(1)]);
        } else {
            assert_eq!(fsm.state(), State::OpenConfirm);
            assert_eq!(a, vec![A::SendOpen(2), notif(2, 6, 7), A::Close(2)]);
        }
    }
}

/// A third connection while one collides in OpenSent replaces it (closed, no Cease).
#[test]
fn third_connection_in_open_sent_replaces_the_second() {
    let fsm = run(open_sent(), vec![(s(0), E::TcpConnectionConfirmed(2))]);
    let (fsm, a) = transition(fsm, s(0), E::TcpConnectionConfirmed(3));
    assert_eq!(a, vec![A::Close(2), A::SendOpen(3)]);
    // A lower peer: our connection 1 stays, 3 is ceased.
    let (_, a) = transition(fsm, s(0), E::BgpOpen(peer(LOWER, 90)));
    assert_eq!(a[..2], [notif(3, 6, 7), A::Close(3)]);
}

/// Established keeps a colliding connection on standby for STANDBY: closed with a
/// Cease when that is over, or the next session starts on it at once.
#[test]
fn standby_connection_while_established() {
    let standby = run(established(), vec![(s(0), E::TcpConnectionConfirmed(2))]);
    // Expiry: Cease on it.
    let (fsm, a) = transition(standby.clone(), s(2), E::StandbyTimerExpires);
    assert_eq!(
        (fsm.state(), a),
        (State::Established, vec![notif(2, 6, 7), A::Close(2)])
    );
    // Another one replaces it.
    let (_, a) = transition(standby.clone(), s(1), E::TcpConnectionConfirmed(3));
    assert_eq!(
        a,
        vec![
            notif(2, 6, 7),
            A::Close(2),
            timer(T::Standby, STANDBY),
            A::SendKeepalive(1)
        ]
    );
    // The peer chose the other connection: its Cease ends this session, the next one
    // starts on the standby at once (OPEN, OpenSent), no connect.
    let (fsm, a) = transition(standby.clone(), s(1), E::NotifMsg(Notification::new(6, 7)));
    assert_eq!(fsm.state(), State::OpenSent);
    assert_eq!(fsm.connection(), Some(2));
    assert_eq!(
        a,
        vec![
            A::Close(1),
            A::StopTimer(T::Hold),
            A::StopTimer(T::Keepalive),
            A::StopTimer(T::Standby),
            A::SessionDown("received NOTIFICATION cease (6/7)".into()),
            A::StopTimer(T::ConnectRetry),
            A::SendOpen(2),
            timer(T::Hold, OPEN_HOLD),
        ]
    );
    // A link down drops the standby too.
    let (fsm, a) = transition(standby.clone(), s(1), E::AutomaticStop);
    assert_eq!(fsm.state(), State::Active);
    assert_eq!(a[..2], [notif(1, 6, 4), A::Close(2)]);
    // So does a stop.
    let (_, a) = transition(standby, s(1), E::ManualStop);
    assert_eq!(a[..3], [notif(1, 6, 2), A::Close(1), A::Close(2)]);
}

/// An outbound attempt under way when the peer's connection is taken goes on; its
/// completion collides, its failure is forgotten, and a session end aborts it.
#[test]
fn attempt_under_way_during_the_session() {
    let fsm = run(connect(), vec![(s(0), E::TcpConnectionConfirmed(1))]);
    let (_, a) = transition(fsm.clone(), s(0), E::TcpCrAcked(2));
    assert_eq!(a, vec![A::SendOpen(2)]);
    let (f2, a) = transition(
        fsm.clone(),
        s(0),
        E::TcpConnectionFails(9, "refused".into()),
    );
    assert_eq!((f2.state(), a), (State::OpenSent, vec![]));
    let (_, a) = transition(fsm, LATER, E::NotifMsg(Notification::new(6, 2)));
    assert_eq!(
        a,
        vec![
            A::Close(1),
            A::AbortConnect,
            A::StopTimer(T::Hold),
            A::StopTimer(T::Keepalive),
            A::StopTimer(T::Standby),
            A::SessionDown("received NOTIFICATION cease (6/2)".into()),
            jittered(T::ConnectRetry, s(1)),
        ]
    );
}

// ---- Timers.

/// The hold time is the smaller of the two; keepalives every third of it; 0: neither.
#[test]
fn hold_time_negotiation() {
    for (theirs, hold, keepalive) in [(90, 9, 3), (3, 3, 1), (9, 9, 3)] {
        let (fsm, a) = transition(open_sent(), s(0), E::BgpOpen(peer(LOWER, theirs)));
        assert_eq!(
            a,
            vec![
                A::SendKeepalive(1),
                timer(T::Hold, s(hold)),
                timer(T::Keepalive, s(keepalive))
            ]
        );
        assert_eq!(fsm.hold_time(), hold as u16);
    }
    let (fsm, a) = transition(open_sent(), s(0), E::BgpOpen(peer(LOWER, 0)));
    assert_eq!(a, vec![A::SendKeepalive(1), A::StopTimer(T::Hold)]);
    let (fsm, a) = transition(fsm, s(0), E::KeepAliveMsg);
    assert_eq!(
        (fsm.state(), a),
        (State::Established, vec![A::SessionUp(1)])
    );
    let (_, a) = transition(fsm, s(0), E::KeepAliveMsg);
    assert_eq!(a, vec![]);
}

/// Failed connects are retried after 1, 2, 4, 8, 8 s (ConnectRetryTime doubling up to
/// ConnectRetryMax, jittered by the I/O task).
#[test]
fn connect_retry_doubles_up_to_the_maximum() {
    let mut fsm = connect();
    for want in [1, 2, 4, 8, 8] {
        let a = fsm.handle(s(0), E::TcpConnectionFails(9, "refused".into()));
        assert_eq!(
            (fsm.state(), a),
            (State::Active, vec![jittered(T::ConnectRetry, s(want))])
        );
        let a = fsm.handle(s(0), E::ConnectRetryTimerExpires);
        assert_eq!((fsm.state(), a), (State::Connect, vec![A::Connect]));
    }
}

/// Sessions that end soon after they started push the next connect out: 2, 4, 8, 8 s;
/// a session that lasted longer than ConnectRetryMax, a collision, or a link-up bring
/// it back to ConnectRetryTime.
#[test]
fn backoff_after_short_sessions() {
    let mut fsm = connect();
    let mut t = 0;
    let mut id = 1;
    fn session(fsm: &mut Fsm, start: u64, end: u64, id: ConnId) -> Vec<A> {
        let a = fsm.handle(s(start), E::TcpCrAcked(id));
        assert_eq!(a, opened(id));
        fsm.handle(s(end), E::NotifMsg(Notification::new(6, 2)))
    }
    for want in [2, 4, 8, 8] {
        let a = session(&mut fsm, t, t + 1, id);
        assert_eq!(a.last(), Some(&jittered(T::ConnectRetry, s(want))));
        assert_eq!(
            fsm.handle(s(t + 1 + want), E::ConnectRetryTimerExpires),
            vec![A::Connect]
        );
        t += 1 + want;
        id += 1;
    }
    // Longer than ConnectRetryMax (8 s).
    let a = session(&mut fsm, t, t + 9, id);
    assert_eq!(a.last(), Some(&jittered(T::ConnectRetry, s(1))));
    // Short again: doubles from 1.
    fsm.handle(s(t + 10), E::ConnectRetryTimerExpires);
    let a = session(&mut fsm, t + 10, t + 11, id + 1);
    assert_eq!(a.last(), Some(&jittered(T::ConnectRetry, s(2))));
    // A short session that saw a collision: back to 1 s.
    fsm.handle(s(t + 13), E::ConnectRetryTimerExpires);
    fsm.handle(s(t + 13), E::TcpCrAcked(50));
    fsm.handle(s(t + 13), E::TcpConnectionConfirmed(51));
    let a = fsm.handle(s(t + 14), E::NotifMsg(Notification::new(6, 2)));
    assert_eq!(a.last(), Some(&jittered(T::ConnectRetry, s(1))));
    // A short session ended by the peer's collision Cease: 1 s too.
    fsm.handle(s(t + 15), E::ConnectRetryTimerExpires);
    fsm.handle(s(t + 15), E::TcpCrAcked(52));
    let a = fsm.handle(s(t + 16), E::NotifMsg(Notification::new(6, 7)));
    assert_eq!(a.last(), Some(&jittered(T::ConnectRetry, s(1))));
    assert_eq!(fsm.backoff(), s(1));
}

/// A link-up restarts the backoff and connects at once; the end with the lower BGP ID
/// (from the last session) waits KICK_DEFER for the peer's connection first.
#[test]
fn link_up_connects_now_or_after_kick_defer() {
    for (peer_id, want) in [
        (LOWER, vec![A::StopTimer(T::ConnectRetry), A::Connect]),
        (HIGHER, vec![timer(T::ConnectRetry, KICK_DEFER)]),
    ] {
        // Established with this peer, a short session (backoff 2 s), link down.
        let mut fsm = run(
            open_sent(),
            vec![
                (s(0), E::BgpOpen(peer(peer_id, 90))),
                (s(0), E::KeepAliveMsg),
                (s(1), E::AutomaticStop),
            ],
        );
        assert_eq!(fsm.backoff(), s(2));
        let a = fsm.handle(s(2), E::LinkUp);
        assert_eq!(a, want, "peer {peer_id}");
        assert_eq!(fsm.backoff(), s(1));
        if peer_id == HIGHER {
            assert_eq!(fsm.state(), State::Active);
            assert_eq!(
                fsm.handle(s(2), E::ConnectRetryTimerExpires),
                vec![A::Connect]
            );
        }
        assert_eq!(fsm.state(), State::Connect);
    }
    // ConnectRetryTime shorter than KICK_DEFER bounds the wait.
    let mut c = cfg();
    c.connect_retry = Duration::from_millis(30);
    let mut fsm = run(
        Fsm::new(c),
        vec![
            (s(0), E::ManualStart),
            (s(0), E::TcpCrAcked(1)),
            (s(0), E::BgpOpen(peer(HIGHER, 90))),
            (s(0), E::KeepAliveMsg),
            (s(0), E::AutomaticStop),
        ],
    );
    assert_eq!(
        fsm.handle(s(1), E::LinkUp),
        vec![timer(T::ConnectRetry, Duration::from_millis(30))]
    );
}

/// A passive neighbor never connects: Active after start and after a session, no
/// ConnectRetryTimer; a link-up only restarts the backoff.
#[test]
fn passive_never_connects() {
    let mut c = cfg();
    c.passive = true;
    let mut fsm = Fsm::new(c);
    assert_eq!(fsm.handle(s(0), E::ManualStart), vec![]);
    assert_eq!(fsm.state(), State::Active);
    assert_eq!(fsm.handle(s(0), E::ConnectRetryTimerExpires), vec![]);
    assert_eq!(fsm.handle(s(0), E::LinkUp), vec![]);
    assert_eq!(fsm.handle(s(0), E::TcpConnectionConfirmed(1)), opened(1));
    let a = fsm.handle(LATER, E::NotifMsg(Notification::new(6, 2)));
    assert_eq!(a, down("received NOTIFICATION cease (6/2)")[..5].to_vec());
    assert_eq!(fsm.state(), State::Active);
}

/// The Color Mismatch NOTIFICATION is named in the reason.
#[test]
fn color_mismatch_notification_reason() {
    let (_, a) = transition(open_sent(), s(0), E::NotifMsg(Notification::new(2, 12)));
    assert_eq!(
        a[4],
        A::SessionDown(
            "received NOTIFICATION OPEN message error (2/12): session color mismatch".into()
        )
    );
}

#[test]
fn current_stays_rule() {
    // (current outbound, other outbound, our ID higher) -> the current connection stays
    for (cur, other, ours, stays) in [
        (true, false, true, true),
        (true, false, false, false),
        (false, true, true, false),
        (false, true, false, true),
        (true, true, true, false),
        (false, false, false, false),
    ] {
        assert_eq!(
            current_stays(cur, other, ours),
            stays,
            "{cur} {other} {ours}"
        );
    }
}

#[test]
fn open_checks() {
    let color = SessionColor::default();
    let ok = Open::new(65001, 90, LOWER, vec![]);
    assert_eq!(
        check_open(&ok, 65001, ME, &color),
        Ok(PeerOpen {
            bgp_id: LOWER,
            hold_time: 90
        })
    );
    let e = check_open(&ok, 65002, ME, &color).unwrap_err();
    assert_eq!(
        (
            e.notification.code,
            e.notification.subcode,
            e.notification.data
        ),
        (2, 2, vec![0xfd, 0xe9])
    );
    let same = Open::new(65001, 90, ME, vec![]);
    let e = check_open(&same, 65001, ME, &color).unwrap_err();
    assert_eq!((e.notification.code, e.notification.subcode), (2, 3));
}

/// The operator's shutdown from Established: one Cease / Administrative Shutdown with the
/// shutdown communication (RFC 8203: length octet, UTF-8), everything released, the
/// session reported down, no Stop (the task stays) and no reconnect timer; Idle refuses
/// the peer's connection; ManualStart (enable) connects again.
#[test]
fn admin_shutdown_keeps_the_task_idle_until_enabled() {
    let mut fsm = established();
    let data = vec![4, b'm', b'a', b'i', b'n'];
    let out = fsm.handle(LATER, E::AdminShutdown(data.clone()));
    let mut cease = Notification::new(6, 2);
    cease.data = data;
    let mut want = vec![A::SendNotification(1, cease), A::Close(1)];
    want.extend(STOP_TIMERS);
    want.push(A::SessionDown("administratively shut down".into()));
    assert_eq!(out, want);
    assert_eq!(fsm.state(), State::Idle);
    assert_eq!(
        fsm.handle(LATER, E::TcpConnectionConfirmed(2)),
        vec![A::Close(2)]
    );
    assert_eq!(fsm.handle(LATER, E::ConnectRetryTimerExpires), vec![]);
    assert_eq!(fsm.state(), State::Idle);
    fsm.handle(LATER, E::ManualStart);
    assert_eq!(fsm.state(), State::Connect);
    // Without a session there is nothing to send or report.
    let mut fsm = active();
    let out = fsm.handle(LATER, E::AdminShutdown(vec![]));
    assert!(out.iter().all(|a| matches!(a, A::StopTimer(_))), "{out:?}");
    assert_eq!(fsm.state(), State::Idle);
}

/// The peer was killed (kill -9: its kernel closes the connection) after short sessions
/// had doubled the backoff to the maximum: this end waits the backoff before dialing,
/// but takes the restarted peer's connection at once (Active listens), whatever the
/// backoff. So a restarted peer's session comes back as soon as it dials.
#[test]
fn restarted_peer_is_accepted_during_a_long_backoff() {
    let mut fsm = connect();
    let mut t = 0;
    for id in 1..=4 {
        fsm.handle(s(t), E::TcpCrAcked(id));
        fsm.handle(s(t + 1), E::NotifMsg(Notification::new(6, 2)));
        t += 1;
        fsm.handle(s(t), E::ConnectRetryTimerExpires);
    }
    assert_eq!(fsm.backoff(), s(8));
    // Established on connection 5, then the peer's kernel closes it.
    fsm.handle(s(t), E::TcpCrAcked(5));
    fsm.handle(s(t), E::BgpOpen(peer(LOWER, 9)));
    fsm.handle(s(t), E::KeepAliveMsg);
    assert_eq!(fsm.state(), State::Established);
    let a = fsm.handle(
        s(t + 1),
        E::TcpConnectionFails(5, "connection closed by peer".into()),
    );
    assert_eq!(a.last(), Some(&jittered(T::ConnectRetry, s(8))));
    assert_eq!(fsm.state(), State::Active);
    // The restarted peer dials 1 s later: taken at once, OPEN sent.
    assert_eq!(
        fsm.handle(s(t + 2), E::TcpConnectionConfirmed(6)),
        opened(6)
    );
    assert_eq!(fsm.state(), State::OpenSent);
}

/// The peer's shutdown communication stays the last error while later attempts end
/// without a NOTIFICATION; a NOTIFICATION either way, or the end of an Established
/// session, replaces it.
#[test]
fn a_closed_attempt_keeps_the_peers_notification_as_last_error() {
    let shut = "received NOTIFICATION Cease/Administrative Shutdown: \"maintenance 42\"";
    let closed = "connection closed by peer";
    assert!(!super::replaces_last_error(Some(shut), closed, false));
    assert!(super::replaces_last_error(Some(shut), closed, true));
    assert!(super::replaces_last_error(
        Some(shut),
        "sent NOTIFICATION 2/2: bad peer AS",
        false
    ));
    assert!(super::replaces_last_error(
        Some(shut),
        "received NOTIFICATION 6/4",
        false
    ));
    assert!(super::replaces_last_error(
        Some(closed),
        "connection reset",
        false
    ));
    assert!(super::replaces_last_error(None, closed, false));
}

/// The states under RFC 4271 §8.2.2's names, as the agent reports them per neighbor.
#[test]
fn state_names_are_the_rfc_names() {
    let names: Vec<String> = State::ALL.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        names,
        [
            "Idle",
            "Connect",
            "Active",
            "OpenSent",
            "OpenConfirm",
            "Established"
        ]
    );
}

/// A configuration reload's timers (RFC 4271 §10: HoldTime and ConnectRetryTime are
/// configured) apply from the next attempt on: the retries under way keep doubling from
/// where they are, now up to the new ConnectRetryMax of 12 s (1, 2, 4, 8, 12, 12); a
/// link-up restarts them from the new ConnectRetryTime, 3 s; the next OPEN negotiates
/// min(30, 90) = 30 s with a peer proposing 90.
#[test]
fn reloaded_timers_apply_to_the_next_attempt() {
    let mut fsm = connect();
    fsm.set_timers(30, s(3), s(12));
    for want in [1, 2, 4, 8, 12, 12] {
        let a = fsm.handle(s(0), E::TcpConnectionFails(9, "refused".into()));
        assert_eq!(a, vec![jittered(T::ConnectRetry, s(want))]);
        fsm.handle(s(0), E::ConnectRetryTimerExpires);
    }
    fsm.handle(s(0), E::LinkUp);
    let a = fsm.handle(s(0), E::TcpConnectionFails(9, "refused".into()));
    assert_eq!(a, vec![jittered(T::ConnectRetry, s(3))]);
    fsm.handle(s(0), E::ConnectRetryTimerExpires);
    fsm.handle(s(0), E::TcpCrAcked(1));
    fsm.handle(s(0), E::BgpOpen(peer(LOWER, 90)));
    assert_eq!(fsm.hold_time(), 30);
}

/// A session that lasted exactly ConnectRetryMax (8 s) is still short: the backoff
/// doubles, to 2 s; only a longer one restarts it.
#[test]
fn session_of_exactly_connect_retry_max_is_short() {
    let mut fsm = connect();
    fsm.handle(s(0), E::TcpCrAcked(1));
    let a = fsm.handle(s(8), E::NotifMsg(Notification::new(6, 2)));
    assert_eq!(a.last(), Some(&jittered(T::ConnectRetry, s(2))));
}
