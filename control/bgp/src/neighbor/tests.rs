//! Two neighbor tasks over loopback TCP (127.0.0.0/8, an unprivileged port), each with
//! a listener feeding its `incoming` channel the way the speaker's accept loop does.
//! The connect-retry delay is long (20 s) so that a session a race knocked down cannot
//! come back by a retry inside the wait of a test: every session must come up through
//! the collision handling alone.
use super::*;
use tokio::task::JoinHandle;

const RETRY: Duration = Duration::from_secs(20);
/// Far longer than a handshake on loopback, far shorter than RETRY.
const WAIT: Duration = Duration::from_secs(8);

struct Side {
    status: SharedStatus,
    events: mpsc::Receiver<super::Tagged>,
    commands: mpsc::UnboundedSender<Command>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Side {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Side {
    fn state(&self) -> State {
        self.status.lock().map(|s| s.state).unwrap_or(State::Idle)
    }
    /// Down events reported so far (each a session that ended).
    fn downs(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok((_, ev)) = self.events.try_recv() {
            if let SessionEvent::Down { reason, .. } = ev {
                out.push(reason);
            }
        }
        out
    }
}

/// Listens on `local:port` (retrying while an aborted listener of a previous run of
/// this side still holds it) and starts the neighbor task toward `peer`.
async fn side(local: Ipv4Addr, peer: Ipv4Addr, port: u16, id: u8) -> Side {
    let mut listener = None;
    for _ in 0..100 {
        match socket::listen(SocketAddr::new(local.into(), port)) {
            Ok(l) => {
                listener = Some(l);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let listener = listener.expect("listener on loopback");
    let (in_tx, in_rx) = mpsc::channel(4);
    let accept = tokio::spawn(async move {
        loop {
            let Ok((stream, from)) = listener.accept().await else {
                continue;
            };
            if from.ip() == IpAddr::V4(peer) {
                let _ = stream.set_nodelay(true);
                let _ = in_tx.try_send(stream);
            }
        }
    });
    let status = Arc::new(Mutex::new(NeighborStatus::new(peer.into(), 65000)));
    let (ev_tx, ev_rx) = mpsc::channel(64);
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let neighbor = Neighbor {
        config: PeerConfig {
            address: peer.into(),
            remote_as: 65000,
            local_as: 65000,
            router_id: Ipv4Addr::new(10, 0, 0, id),
            port,
            hold_time: 9,
            connect_retry: RETRY,
            connect_retry_max: RETRY * 2,
            passive: false,
            local_address: Some(local.into()),
            interface: None,
            protection: Protection::default(),
            families: vec![Family::Ipv4Unicast],
            session_color: Default::default(),
            orf_receive: false,
            orf_send: vec![],
        },
        status: status.clone(),
        incoming: in_rx,
        events: ev_tx,
        generation: 0,
        commands: cmd_rx,
    };
    let run = tokio::spawn(neighbor.run());
    Side {
        status,
        events: ev_rx,
        commands: cmd_tx,
        tasks: vec![accept, run],
    }
}

/// A free port on `a` (the pair's other address is distinct, so it is free there too
/// unless something listens on the wildcard address).
fn free_port(a: Ipv4Addr) -> u16 {
    std::net::TcpListener::bind((a, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Loopback addresses of pair `i` of a test (`block` keeps tests apart).
fn pair(block: u8, i: u8) -> (Ipv4Addr, Ipv4Addr) {
    (
        Ipv4Addr::new(127, block, i, 1),
        Ipv4Addr::new(127, block, i, 2),
    )
}

/// Waits (at most WAIT) until every side is Established; the sides that are not.
async fn wait_established(sides: &[&Side]) -> Vec<usize> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let down: Vec<usize> = (0..sides.len())
            .filter(|&i| sides[i].state() != State::Established)
            .collect();
        if down.is_empty() || tokio::time::Instant::now() > deadline {
            return down;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `n` pairs of sides (addresses from `pair(block, i)`) started at the same instant, the
/// higher and lower BGP ID alternating between the two ends.
async fn crossed_pairs(block: u8, n: u8) -> Vec<Side> {
    let mut sides = Vec::new();
    for i in 0..n {
        let (a, b) = pair(block, i);
        let port = free_port(a);
        let (ia, ib) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
        let (x, y) = tokio::join!(side(a, b, port, ia), side(b, a, port, ib));
        sides.push(x);
        sides.push(y);
    }
    sides
}

/// Pairs whose two sides connect at the same instant: the SYNs cross, each side may
/// take the peer's connection or its own first. Whatever the interleaving, RFC 4271
/// §6.8 must leave one connection up, at once. (Before the fix 4 of 24 pairs here
/// lost both connections, some sat in OpenSent on a socket nobody read.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_connecting_at_once_come_up() {
    let mut sides = crossed_pairs(61, 24).await;
    let refs: Vec<&Side> = sides.iter().collect();
    let down = wait_established(&refs).await;
    let ended: Vec<String> = sides.iter_mut().flat_map(|s| s.downs()).collect();
    assert!(
        down.is_empty(),
        "sides not Established: {down:?}; sessions that ended: {ended:?}"
    );
}

/// A link flap seen by both ends: both reset the session, then both are kicked at the
/// same instant (link up) and connect at once. Every round must bring every session
/// back without another failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_up_on_both_ends_at_once_comes_up() {
    let mut sides = crossed_pairs(62, 8).await;
    let refs: Vec<&Side> = sides.iter().collect();
    assert_eq!(wait_established(&refs).await, Vec::<usize>::new());
    for round in 0..6 {
        for s in &mut sides {
            s.downs();
            let _ = s.commands.send(Command::Reset);
        }
        // Both ends down before the link comes back.
        let deadline = tokio::time::Instant::now() + WAIT;
        while sides.iter().any(|s| s.state() == State::Established)
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for s in &sides {
            let _ = s.commands.send(Command::Kick);
        }
        let refs: Vec<&Side> = sides.iter().collect();
        let down = wait_established(&refs).await;
        // The reset ends each side's session once (its own Reset, or the peer's
        // NOTIFICATION first); more is a collision that took a connection down (the
        // session came back on the standby connection), shown if the round fails.
        let ended: Vec<Vec<String>> = sides
            .iter_mut()
            .map(|s| s.downs())
            .filter(|d| d.len() > 1)
            .collect();
        assert!(
            down.is_empty(),
            "round {round}: sides not Established: {down:?}; sessions that ended: {ended:?}"
        );
    }
}

/// One side starts while the other's listener is not there yet (its connects are
/// refused and back off); when the other side starts, it connects at once and the
/// session comes up without waiting for the first side's retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_whose_listener_appears_late() {
    let (a, b) = pair(63, 0);
    let port = free_port(a);
    let mut early = side(a, b, port, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_ne!(early.state(), State::Established);
    let mut late = side(b, a, port, 2).await;
    assert_eq!(
        wait_established(&[&early, &late]).await,
        Vec::<usize>::new()
    );
    // Each side reported the session once, with what the peer's OPEN said.
    for (side, peer_id) in [(&mut early, 2), (&mut late, 1)] {
        let mut ups = Vec::new();
        while let Ok((_, ev)) = side.events.try_recv() {
            match ev {
                SessionEvent::Up { info, .. } => ups.push((info.remote_id, info.hold_time)),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(ups, vec![(Ipv4Addr::new(10, 0, 0, peer_id), 9)]);
    }
}

/// One side restarts (its task and listener go away, a new one starts at once): the
/// other side sees its session end and takes the new side's connection right away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_of_one_side() {
    let (a, b) = pair(64, 0);
    let port = free_port(a);
    let stays = side(a, b, port, 1).await;
    let mut restarting = side(b, a, port, 2).await;
    assert_eq!(
        wait_established(&[&stays, &restarting]).await,
        Vec::<usize>::new()
    );
    for round in 0..3 {
        // Shutdown as an agent does on SIGTERM, then a new process.
        let _ = restarting.commands.send(Command::Shutdown);
        let deadline = tokio::time::Instant::now() + WAIT;
        while stays.state() == State::Established && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(restarting);
        restarting = side(b, a, port, 2).await;
        let down = wait_established(&[&stays, &restarting]).await;
        assert!(down.is_empty(), "round {round}: not Established: {down:?}");
    }
    // Each round ended one Established session of the side that stayed: one flap each.
    let flaps = stays.status.lock().map(|s| s.flaps).unwrap_or_default();
    assert_eq!(flaps, 3);
}

/// A peer that completes the handshake (hold time 3 s) and then says nothing: the
/// neighbor sends KEEPALIVEs every second meanwhile, then the hold timer ends the
/// session with NOTIFICATION 4/0 and a Down event saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_peer_is_dropped_by_the_hold_timer() {
    let (a, b) = pair(65, 0);
    let port = free_port(a);
    let listener = socket::listen(SocketAddr::new(b.into(), port)).expect("listener");
    let mut side = side(a, b, port, 1).await;
    let (mut peer, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .expect("the neighbor connects")
        .expect("accept");
    let open = Open::new(65000, 3, Ipv4Addr::new(10, 0, 0, 2), vec![]);
    let mut out = Message::Open(open).encode(Context::default());
    out.extend(Message::Keepalive.encode(Context::default()));
    peer.write_all(&out).await.expect("write");
    // Read what the neighbor sends until it closes: OPEN, KEEPALIVEs, NOTIFICATION.
    let mut buf = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT * 2;
    loop {
        match tokio::time::timeout_at(deadline, peer.read_buf(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(_)) => {}
            Err(_) => panic!("the session did not end within {:?}", WAIT * 2),
        }
    }
    let mut msgs = Vec::new();
    let mut rest = &buf[..];
    while let Ok(Some(len)) = frame_len(rest) {
        msgs.push(Message::decode(&rest[..len], Context::default()).expect("decode"));
        rest = &rest[len..];
    }
    assert!(matches!(msgs.first(), Some(Message::Open(_))), "{msgs:?}");
    let keepalives = msgs
        .iter()
        .filter(|m| matches!(m, Message::Keepalive))
        .count();
    // One answering the OPEN, then one per second for about 3 s.
    assert!(keepalives >= 2, "{msgs:?}");
    match msgs.last() {
        Some(Message::Notification(n)) => assert_eq!((n.code, n.subcode), (4, 0)),
        other => panic!("last message {other:?}"),
    }
    // The Down event follows the close the peer saw.
    let reason = loop {
        match tokio::time::timeout(WAIT, side.events.recv()).await {
            Ok(Some((_, SessionEvent::Down { reason, .. }))) => break reason,
            Ok(Some(_)) => {}
            other => panic!("no Down event: {other:?}"),
        }
    };
    assert_eq!(
        reason,
        "sent NOTIFICATION hold timer expired (4/0): hold timer expired"
    );
}
