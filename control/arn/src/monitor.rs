//! ARN generation: a congestion and link monitor for egress interfaces.
//!
//! A dedicated thread samples, every `interval` (down to 100 µs), the backlog of each
//! watched interface's root qdisc (RTM_GETQDISC for parent TC_H_ROOT, `TCA_STATS2` queue
//! stats: for a tbf root that is the bytes waiting to be shaped) and, at most every
//! millisecond, the interface's carrier (the driver's link state, as the BGP link watcher
//! reads it; IFF_RUNNING via RTM_GETLINK where the driver cannot tell). Thresholds have
//! hysteresis: backlog >= `high_bytes` -> Type 1 (Metric = 255 * backlog / limit);
//! backlog <= `low_bytes` afterwards (and for `clear_ms` without a break) -> Type 2. A link that stops running -> Type 3, unless
//! another watched interface toward the same far-end node is still running (local repair
//! absorbs it, as the draft asks); running again -> Type 4. While a condition lasts, its
//! Type 1/3 is repeated every `refresh` so receivers' hold timers do not expire.
//!
//! The monitor thread sends each ARN itself (blocking UDP, no async runtime in the way),
//! then hands the event to a channel; [`report_sent`] logs and counts it.

use super::codec::{ArnMessage, ArnType};
use super::config::{MonitorConfig, MonitoredInterface};
use super::transport;
use netlink_packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_ECHO, NLM_F_REQUEST};
use netlink_packet_route::link::{LinkFlags, LinkMessage};
use netlink_packet_route::tc::{TcHandle, TcMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr as NlAddr};
use serde::Serialize;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;
use tracing::{debug, info};

/// One sample of a root qdisc.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QdiscSample {
    pub kind: String,
    pub backlog_bytes: u32,
    pub qlen: u32,
    pub drops: u32,
}

/// Synchronous rtnetlink queries (one socket, one request at a time): fast enough to
/// sample every 100 µs without an async runtime in the loop.
pub struct QueueReader {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl QueueReader {
    pub fn new() -> io::Result<QueueReader> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&NlAddr::new(0, 0))?;
        // Never block the sampling loop for long, whatever the kernel does.
        nix::sys::socket::setsockopt(
            &socket,
            nix::sys::socket::sockopt::ReceiveTimeout,
            &nix::sys::time::TimeVal::new(1, 0),
        )
        .map_err(io::Error::from)?;
        Ok(QueueReader {
            socket,
            seq: 0,
            buf: Vec::with_capacity(64 * 1024),
        })
    }

    /// Sends `message` with `flags` under the next sequence number.
    fn send(&mut self, message: RouteNetlinkMessage, flags: u16) -> io::Result<()> {
        let mut m = NetlinkMessage::from(message);
        self.seq = self.seq.wrapping_add(1);
        m.header.flags = flags;
        m.header.sequence_number = self.seq;
        m.finalize();
        let mut out = vec![0u8; m.buffer_len()];
        m.serialize(&mut out);
        self.socket.send(&out, 0)?;
        Ok(())
    }

    fn request(
        &mut self,
        message: RouteNetlinkMessage,
        extra_flags: u16,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        // With an ACK every request ends in a known message: a GET for a built-in qdisc
        // (noqueue) has no reply of its own.
        self.send(message, NLM_F_REQUEST | NLM_F_ACK | extra_flags)?;
        let mut replies = Vec::new();
        loop {
            self.buf.clear();
            let n = self.socket.recv(&mut self.buf, 0)?;
            let mut offset = 0;
            while offset < n {
                let reply =
                    NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[offset..n])
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let len = reply.header.length as usize;
                if reply.header.sequence_number == self.seq {
                    match reply.payload {
                        NetlinkPayload::InnerMessage(inner) => replies.push(inner),
                        NetlinkPayload::Error(e) => {
                            if let Some(code) = e.code {
                                return Err(io::Error::from_raw_os_error(-code.get()));
                            }
                            return Ok(replies);
                        }
                        NetlinkPayload::Done(_) => return Ok(replies),
                        _ => {}
                    }
                }
                if len == 0 {
                    break;
                }
                offset += len;
            }
        }
    }

    /// Statistics of the root qdisc of `ifindex`. The kernel answers a qdisc GET through
    /// its notification path, which reaches the requester only with NLM_F_ECHO.
    ///
    /// This runs every sampling interval for every watched port, so the replies are read
    /// in place ([`scan_qdisc_replies`]) rather than decoded into owned messages: a full
    /// decode of every attribute (the tbf options included) cost an idle debug-build agent
    /// of 8 ports ~19% of a core at 1 ms.
    pub fn root_qdisc(&mut self, ifindex: u32) -> io::Result<QdiscSample> {
        let mut tc = TcMessage::with_index(ifindex as i32);
        tc.header.parent = TcHandle::ROOT;
        self.send(
            RouteNetlinkMessage::GetQueueDiscipline(tc),
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_ECHO,
        )?;
        let mut sample = None;
        loop {
            self.buf.clear();
            let n = self.socket.recv(&mut self.buf, 0)?;
            let seq = self.seq;
            let done = scan_qdiscs(&self.buf[..n], seq, &mut |_, _, s| {
                sample.get_or_insert(s);
            })?;
            if done {
                break;
            }
        }
        // A built-in qdisc (noqueue, noop) is not reported: nothing is ever queued there.
        Ok(sample.unwrap_or_else(|| QdiscSample {
            kind: "noqueue".into(),
            ..Default::default()
        }))
    }

    /// Statistics of the root qdiscs of this namespace's interfaces, by ifindex, from one
    /// dump: one request per sample for all watched ports. Interfaces with a built-in
    /// qdisc (noqueue) are absent.
    pub fn root_qdiscs(&mut self) -> io::Result<std::collections::HashMap<u32, QdiscSample>> {
        self.send(
            RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
            NLM_F_REQUEST | netlink_packet_core::NLM_F_DUMP,
        )?;
        let mut roots = std::collections::HashMap::new();
        loop {
            self.buf.clear();
            let n = self.socket.recv(&mut self.buf, 0)?;
            let seq = self.seq;
            let done = scan_qdiscs(&self.buf[..n], seq, &mut |ifindex, parent, s| {
                if parent == TC_H_ROOT {
                    roots.insert(ifindex, s);
                }
            })?;
            if done {
                return Ok(roots);
            }
        }
    }

    /// True when the interface is up with carrier (IFF_RUNNING).
    pub fn link_running(&mut self, ifindex: u32) -> io::Result<bool> {
        let mut link = LinkMessage::default();
        link.header.index = ifindex;
        let replies = self.request(RouteNetlinkMessage::GetLink(link), 0)?;
        for reply in replies {
            if let RouteNetlinkMessage::NewLink(m) = reply {
                return Ok(m.header.flags.contains(LinkFlags::Running));
            }
        }
        Err(io::Error::other("no link in the reply"))
    }
}

const NLMSG_HDR_LEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWQDISC: u16 = 36;
/// struct tcmsg.
const TCMSG_LEN: usize = 20;
const TCA_KIND: u16 = 1;
const TCA_STATS: u16 = 3;
const TCA_STATS2: u16 = 7;
const TCA_STATS_QUEUE: u16 = 3;
/// Parent handle of a root qdisc.
const TC_H_ROOT: u32 = 0xffff_ffff;

fn ne_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn ne_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Netlink attributes in `b`: (type without flag bits, payload).
fn attributes(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(ne_u16(b, 0)?);
        let kind = ne_u16(b, 2)? & 0x3fff;
        let payload = b.get(4..len)?;
        b = b.get(len.next_multiple_of(4)..).unwrap_or_default();
        Some((kind, payload))
    })
}

/// Reads the netlink messages in `buf` that answer request `seq`: each RTM_NEWQDISC goes
/// to `found` with its ifindex and parent handle. True once the exchange has ended (the
/// ACK, or DONE); a kernel error is returned as such.
fn scan_qdiscs(
    buf: &[u8],
    seq: u32,
    found: &mut dyn FnMut(u32, u32, QdiscSample),
) -> io::Result<bool> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "truncated netlink message");
    let mut at = 0;
    while at + NLMSG_HDR_LEN <= buf.len() {
        let len = ne_u32(buf, at).ok_or_else(bad)? as usize;
        if len < NLMSG_HDR_LEN || at + len > buf.len() {
            return Err(bad());
        }
        let msg = &buf[at..at + len];
        at += len.next_multiple_of(4);
        if ne_u32(msg, 8) != Some(seq) {
            continue;
        }
        match ne_u16(msg, 4).ok_or_else(bad)? {
            NLMSG_ERROR => {
                let code = ne_u32(msg, NLMSG_HDR_LEN).ok_or_else(bad)? as i32;
                return if code == 0 {
                    Ok(true)
                } else {
                    Err(io::Error::from_raw_os_error(-code))
                };
            }
            NLMSG_DONE => return Ok(true),
            RTM_NEWQDISC => {
                let mut s = QdiscSample::default();
                // struct tcmsg: ifindex at 4, parent at 12.
                let ifindex = ne_u32(msg, NLMSG_HDR_LEN + 4).ok_or_else(bad)?;
                let parent = ne_u32(msg, NLMSG_HDR_LEN + 12).ok_or_else(bad)?;
                let attrs = msg.get(NLMSG_HDR_LEN + TCMSG_LEN..).unwrap_or_default();
                for (kind, payload) in attributes(attrs) {
                    match kind {
                        TCA_KIND => {
                            let name = payload.split(|c| *c == 0).next().unwrap_or_default();
                            s.kind = String::from_utf8_lossy(name).into_owned();
                        }
                        // struct tc_stats: drops at 12, qlen at 28, backlog at 32.
                        TCA_STATS => {
                            s.drops = ne_u32(payload, 12).unwrap_or(s.drops);
                            s.qlen = ne_u32(payload, 28).unwrap_or(s.qlen);
                            s.backlog_bytes = ne_u32(payload, 32).unwrap_or(s.backlog_bytes);
                        }
                        TCA_STATS2 => {
                            for (k, q) in attributes(payload) {
                                // struct gnet_stats_queue: qlen, backlog, drops.
                                if k == TCA_STATS_QUEUE {
                                    s.qlen = ne_u32(q, 0).unwrap_or(s.qlen);
                                    s.backlog_bytes = ne_u32(q, 4).unwrap_or(s.backlog_bytes);
                                    s.drops = ne_u32(q, 8).unwrap_or(s.drops);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                found(ifindex, parent, s);
            }
            _ => {}
        }
    }
    Ok(false)
}

/// Threshold crossing with hysteresis, in bytes (high/low) and in time (`clear`: the
/// backlog must stay at or below `low` that long before congestion counts as over).
#[derive(Clone, Debug)]
pub struct Hysteresis {
    pub high: u32,
    pub low: u32,
    pub limit: u32,
    pub clear: Duration,
    pub congested: bool,
    below_since: Option<Instant>,
}

/// An edge of the congestion state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    /// Crossed up: congestion with this Metric.
    Up(u8),
    /// Crossed down: congestion over.
    Down,
}

impl Hysteresis {
    pub fn new(high: u32, low: u32, limit: u32) -> Hysteresis {
        let mut h = Hysteresis {
            high: 0,
            low: 0,
            limit: 1,
            clear: Duration::ZERO,
            congested: false,
            below_since: None,
        };
        h.retune(high, low, limit);
        h
    }

    pub fn with_clear(mut self, clear: Duration) -> Hysteresis {
        self.clear = clear;
        self
    }

    /// New thresholds with the congested state kept: `low` below `high`, `limit` at least 1
    /// (the one place these bounds are applied, at start too).
    pub fn retune(&mut self, high: u32, low: u32, limit: u32) {
        self.high = high;
        self.low = low.min(high.saturating_sub(1));
        self.limit = limit.max(1);
    }

    /// Leaves the congested state without an edge (the link went down).
    pub fn reset(&mut self) {
        self.congested = false;
        self.below_since = None;
    }

    /// The congestion level as an ARN Metric: 255 * backlog / limit, 1..=255.
    pub fn metric(&self, backlog: u32) -> u8 {
        let m = u64::from(backlog) * 255 / u64::from(self.limit);
        m.clamp(1, 255) as u8
    }

    pub fn sample(&mut self, backlog: u32) -> Option<Edge> {
        self.sample_at(backlog, Instant::now())
    }

    pub fn sample_at(&mut self, backlog: u32, now: Instant) -> Option<Edge> {
        if !self.congested {
            if backlog < self.high {
                return None;
            }
            self.congested = true;
            self.below_since = None;
            return Some(Edge::Up(self.metric(backlog)));
        }
        if backlog > self.low {
            self.below_since = None;
            return None;
        }
        let since = *self.below_since.get_or_insert(now);
        if now.saturating_duration_since(since) >= self.clear {
            self.reset();
            Some(Edge::Down)
        } else {
            None
        }
    }
}

/// One ARN the monitor wants sent.
#[derive(Clone, Debug, Serialize)]
pub struct MonitorEvent {
    pub interface: String,
    #[serde(skip)]
    pub message: ArnMessage,
    #[serde(rename = "type")]
    pub kind: u8,
    pub metric: u8,
    pub path_id: u32,
    pub backlog_bytes: u32,
    /// A repetition of a condition already announced.
    pub refresh: bool,
    #[serde(skip)]
    pub notify: Vec<IpAddr>,
    /// Microseconds since the monitor started (for logs and benchmarks).
    pub t_us: u64,
    /// Microseconds from detection until the last datagram went out.
    pub queued_us: u64,
    /// XDP virtual queue: when the program saw the threshold crossed (CLOCK_MONOTONIC
    /// ns; 0 = detected by sampling).
    #[serde(skip_serializing_if = "is_zero")]
    pub crossed_ns: u64,
    #[serde(skip)]
    pub at: Option<Instant>,
}

struct Watched {
    cfg: MonitoredInterface,
    ifindex: u32,
    hysteresis: Hysteresis,
    running: Option<bool>,
    /// A Type 3 went out and no Type 4 yet.
    failed: bool,
    /// The backlog comes from the XDP program's virtual queue, not the qdisc.
    virtual_queue: bool,
    /// The driver's BQL `inflight` files (added to the qdisc backlog).
    bql: Option<super::bql::Bql>,
    last_backlog: u32,
    last_sent: Instant,
}

impl Watched {
    /// One sample of this port: a failed port refreshes its Type 3; otherwise its
    /// backlog (virtual queue, or qdisc plus the driver's BQL rings) goes through the
    /// hysteresis: Type 1 on a rising edge (and as a refresh while congested), Type 2 on
    /// a falling one.
    fn sample(
        &mut self,
        queues: Option<&(dyn QueueSource + 'static)>,
        roots: &io::Result<std::collections::HashMap<u32, QdiscSample>>,
        s: &Sample,
    ) -> Option<MonitorEvent> {
        let (now, start) = (s.now, s.start);
        if self.running == Some(false) {
            if self.failed && now.duration_since(self.last_sent) >= s.refresh {
                self.last_sent = now;
                return Some(self.event(ArnType::FailureDetected, 255, true, now, start));
            }
            return None;
        }
        let backlog = if self.virtual_queue {
            queues?.backlog_now(self.ifindex)?.min(u32::MAX as u64) as u32
        } else {
            let qdisc = match roots {
                Ok(r) => {
                    r.get(&self.ifindex)
                        .cloned()
                        .unwrap_or_default()
                        .backlog_bytes
                }
                Err(_) => return None,
            };
            // Plus the bytes in the driver's transmit rings, where it has BQL.
            let ring = self
                .bql
                .as_mut()
                .and_then(|b| b.inflight().ok())
                .unwrap_or(0);
            qdisc.saturating_add(ring.min(u64::from(u32::MAX)) as u32)
        };
        self.last_backlog = backlog;
        match self.hysteresis.sample_at(backlog, now) {
            Some(Edge::Up(metric)) => {
                self.last_sent = now;
                Some(self.event(ArnType::CongestionDetected, metric, false, now, start))
            }
            Some(Edge::Down) => {
                self.last_sent = now;
                Some(self.event(ArnType::CongestionEliminated, 0, false, now, start))
            }
            None if self.hysteresis.congested
                && now.duration_since(self.last_sent) >= s.refresh =>
            {
                self.last_sent = now;
                let metric = self.hysteresis.metric(backlog);
                Some(self.event(ArnType::CongestionDetected, metric, true, now, start))
            }
            None => None,
        }
    }

    fn event(
        &self,
        kind: ArnType,
        metric: u8,
        refresh: bool,
        now: Instant,
        start: Instant,
    ) -> MonitorEvent {
        MonitorEvent {
            interface: self.cfg.interface.clone(),
            message: ArnMessage::path(kind, metric, u32::from(self.cfg.path_id)),
            kind: kind.code(),
            metric,
            path_id: u32::from(self.cfg.path_id),
            backlog_bytes: self.last_backlog,
            refresh,
            notify: self.cfg.notify.clone(),
            t_us: now.duration_since(start).as_micros() as u64,
            queued_us: 0,
            crossed_ns: 0,
            at: Some(now),
        }
    }
}

/// Sends `event` from the monitor thread itself and notes how long it took since
/// detection (`queued_us`).
fn send_event(sender: &transport::BlockingSender, event: &mut MonitorEvent) {
    sender.send(&event.message, &event.notify);
    sender.send_group(&event.message, &event.interface);
    event.queued_us = if event.crossed_ns != 0 {
        // From the program's own crossing stamp (same clock).
        monotonic_ns().saturating_sub(event.crossed_ns) / 1000
    } else {
        event.at.map_or(0, |a| a.elapsed().as_micros() as u64)
    };
}

/// Applies new thresholds to the watched interfaces of the same name (others are left as
/// they are): the hysteresis keeps whether the queue is congested, so a reload sends no
/// ARN by itself; the next sample is judged by the new values. A virtual queue in the
/// program is armed again with them.
fn retune(
    watched: &mut [Watched],
    mut queues: Option<&mut (dyn QueueSource + 'static)>,
    list: &[MonitoredInterface],
) {
    for w in watched.iter_mut() {
        let Some(c) = list.iter().find(|c| c.interface == w.cfg.interface) else {
            continue;
        };
        w.cfg.high_bytes = c.high_bytes;
        w.cfg.low_bytes = c.low_bytes;
        w.cfg.limit_bytes = c.limit_bytes;
        w.cfg.clear_ms = c.clear_ms;
        w.hysteresis.retune(c.high_bytes, c.low_bytes, c.limit());
        w.hysteresis.clear = Duration::from_millis(c.clear_ms);
        if w.virtual_queue {
            if let Some(q) = queues.as_deref_mut() {
                q.set_thresholds(w.ifindex, c.high_bytes, c.low_bytes);
            }
        }
        info!(
            interface = %w.cfg.interface,
            high_bytes = c.high_bytes,
            low_bytes = c.low_bytes,
            limit_bytes = c.limit(),
            clear_ms = c.clear_ms,
            "ARN monitor: thresholds changed"
        );
    }
}

/// A data plane's own egress queues standing in for the qdiscs (the XDP program's virtual
/// queues: frames XDP redirects never reach a qdisc). The data plane provides it
/// (`fare_dp_xdp::queues::VirtualQueues`); the monitor only reads.
pub trait QueueSource: Send {
    /// Arms the ARN thresholds of `ifindex`'s queue; false when the port has none.
    fn set_thresholds(&mut self, ifindex: u32, high_bytes: u32, low_bytes: u32) -> bool;
    /// The backlog now, if `ifindex` has a queue.
    fn backlog_now(&self, ifindex: u32) -> Option<u64>;
    /// The queues' threshold crossings within `timeout` (possibly none).
    fn wait(&mut self, timeout: Duration) -> Vec<QueueCrossing>;
}

/// One threshold crossing a [`QueueSource`] reports.
#[derive(Clone, Copy, Debug)]
pub struct QueueCrossing {
    pub ifindex: u32,
    pub backlog: u64,
    /// CLOCK_MONOTONIC ns of the crossing ([`monotonic_ns`]).
    pub t_ns: u64,
}

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns, which stamps crossings.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What the monitor may use besides the qdiscs, and where it reports its signals.
#[derive(Default)]
pub struct MonitorExtras {
    /// The data plane's own egress queues standing in for the qdiscs (XDP).
    pub queues: Option<Box<dyn QueueSource>>,
    /// `arn.multicast`: also send to this group out of these interfaces.
    pub multicast: Option<(IpAddr, Vec<String>)>,
    /// Filled with one `INTERFACE: SIGNAL` line per watched port once the thread knows
    /// its congestion signal (`fare show arn`).
    pub signals: Option<Arc<std::sync::RwLock<Vec<String>>>>,
    /// New thresholds for the watched interfaces (a reload): applied between two samples,
    /// each interface's congestion state kept (see [`retune`]).
    pub thresholds: Option<std::sync::mpsc::Receiver<Vec<MonitoredInterface>>>,
}

/// Runs the monitor on a thread of its own until `stop` is set. The thread sends every
/// ARN itself (to UDP `port` of the event's `notify` list) and then passes the event on
/// to `events` (see [`report_sent`]).
///
/// With `queues`, a watched port that has a virtual queue in the program is read from it:
/// the program's threshold-crossing events wake the thread at once (Type 1 goes out
/// without waiting for the next sample); the periodic samples compute the drained backlog
/// for Type 2 and refreshes.
pub fn spawn(
    config: MonitorConfig,
    default_notify: Vec<IpAddr>,
    refresh: Duration,
    port: u16,
    events: UnboundedSender<MonitorEvent>,
    stop: Arc<AtomicBool>,
    extras: MonitorExtras,
) -> io::Result<std::thread::JoinHandle<()>> {
    let MonitorExtras {
        mut queues,
        multicast,
        signals,
        thresholds,
    } = extras;
    let mut reader = QueueReader::new()?;
    // The driver's carrier, read at once (IFF_RUNNING follows it only when the kernel's
    // linkwatch runs, up to a second later); IFF_RUNNING where the driver cannot tell.
    let carrier = fare_netdev::carrier::CarrierProbe::open()?;
    let mut sender =
        transport::BlockingSender::new(port).map_err(|e| io::Error::other(e.to_string()))?;
    if let Some((group, interfaces)) = &multicast {
        sender = sender
            .with_multicast(*group, interfaces)
            .map_err(|e| io::Error::other(e.to_string()))?;
    }
    std::thread::Builder::new()
        .name("arn-monitor".into())
        .spawn(move || {
            realtime(config.realtime_priority);
            let interval = config.interval();
            let link_every = (1_000u64 / interval.as_micros().max(1) as u64).max(1);
            let start = Instant::now();
            let mut watched = Vec::with_capacity(config.interfaces.len());
            for c in &config.interfaces {
                let signals = signals.as_deref();
                watched.push(watch(
                    c,
                    &default_notify,
                    queues.as_deref_mut(),
                    signals,
                    start,
                ));
            }
            let any_qdisc = watched.iter().any(|w| !w.virtual_queue);
            let deliver = |out: Vec<MonitorEvent>| -> bool {
                for mut e in out {
                    send_event(&sender, &mut e);
                    if events.send(e).is_err() {
                        return false;
                    }
                }
                true
            };
            let mut tick: u64 = 0;
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                if let Some(list) = thresholds.as_ref().and_then(|rx| rx.try_iter().last()) {
                    retune(&mut watched, queues.as_deref_mut(), &list);
                }
                let now = Instant::now();
                let mut out: Vec<MonitorEvent> = Vec::new();
                // Link state (at most every millisecond).
                if tick.is_multiple_of(link_every) {
                    let states: Vec<Option<bool>> = watched
                        .iter_mut()
                        .map(|w| {
                            if w.ifindex == 0 {
                                w.ifindex = transport::ifindex(&w.cfg.interface);
                            }
                            carrier
                                .is_up(&w.cfg.interface)
                                .or_else(|| reader.link_running(w.ifindex).ok())
                        })
                        .collect();
                    out.extend(link_events(&mut watched, &states, now, start));
                }
                // Queue backlog: one dump for every watched qdisc; virtual queues from
                // the program's map.
                let roots = if any_qdisc {
                    reader.root_qdiscs()
                } else {
                    Ok(Default::default())
                };
                let sample = Sample {
                    now,
                    start,
                    refresh,
                };
                for w in watched.iter_mut() {
                    out.extend(w.sample(queues.as_deref(), &roots, &sample));
                }
                if !deliver(out) {
                    return;
                }
                tick += 1;
                next += interval;
                // Until the next sample: sleep, or wake on the program's crossings.
                loop {
                    let now = Instant::now();
                    if next <= now {
                        next = now.max(next); // fell behind: do not burst
                        break;
                    }
                    let Some(ring) = queues.as_mut() else {
                        std::thread::sleep(next - now);
                        continue;
                    };
                    let out = crossings(&mut watched, ring.wait(next - now), start);
                    if !deliver(out) {
                        return;
                    }
                }
            }
        })
}

/// A watched port from its configuration: its congestion signal (the program's virtual
/// queue where there is one, else the qdisc and BQL, else the qdisc), published in
/// `signals`.
fn watch(
    c: &MonitoredInterface,
    default_notify: &[IpAddr],
    queues: Option<&mut (dyn QueueSource + 'static)>,
    signals: Option<&std::sync::RwLock<Vec<String>>>,
    start: Instant,
) -> Watched {
    let mut cfg = c.clone();
    if cfg.notify.is_empty() {
        cfg.notify = default_notify.to_vec();
    }
    let ifindex = transport::ifindex(&cfg.interface);
    let virtual_queue =
        queues.is_some_and(|q| q.set_thresholds(ifindex, cfg.high_bytes, cfg.low_bytes));
    let bql = if virtual_queue {
        None
    } else {
        super::bql::Bql::open(
            std::path::Path::new(super::bql::SYS_CLASS_NET),
            &cfg.interface,
        )
    };
    let signal = match (virtual_queue, &bql) {
        (true, _) => super::bql::Signal::VirtualQueue,
        (false, Some(_)) => super::bql::Signal::QdiscAndBql,
        (false, None) => super::bql::Signal::Qdisc,
    };
    info!(interface = %cfg.interface, signal = signal.describe(), "ARN monitor: congestion signal");
    if let Some(s) = signals {
        let mut s = s.write().unwrap_or_else(|e| e.into_inner());
        let line = format!("{}: {}", cfg.interface, signal.describe());
        match s
            .iter_mut()
            .find(|l| l.split(':').next() == Some(cfg.interface.as_str()))
        {
            Some(l) => *l = line,
            None => s.push(line),
        }
    }
    Watched {
        bql,
        ifindex,
        hysteresis: Hysteresis::new(cfg.high_bytes, cfg.low_bytes, cfg.limit())
            .with_clear(Duration::from_millis(cfg.clear_ms)),
        cfg,
        running: None,
        failed: false,
        virtual_queue,
        last_backlog: 0,
        last_sent: start,
    }
}

/// Failure ARNs from the ports' link states (`states[i]` of `watched[i]`, None when
/// unknown): a port that went down sends Type 3 unless a parallel link to the same node
/// (same Path ID) is still up; one that came back after a failure sends Type 4.
fn link_events(
    watched: &mut [Watched],
    states: &[Option<bool>],
    now: Instant,
    start: Instant,
) -> Vec<MonitorEvent> {
    let mut out = Vec::new();
    for i in 0..watched.len() {
        let Some(up) = states[i] else { continue };
        let was = watched[i].running.replace(up);
        if was == Some(true) && !up {
            let path = watched[i].cfg.path_id;
            let alternative = watched
                .iter()
                .enumerate()
                .any(|(j, o)| j != i && o.cfg.path_id == path && states[j] == Some(true));
            watched[i].hysteresis.reset();
            if alternative {
                info!(interface = %watched[i].cfg.interface, "link down; a parallel link to the same node remains: no ARN");
            } else {
                watched[i].failed = true;
                watched[i].last_sent = now;
                out.push(watched[i].event(ArnType::FailureDetected, 255, false, now, start));
            }
        } else if up && was == Some(false) && watched[i].failed {
            watched[i].failed = false;
            watched[i].last_sent = now;
            out.push(watched[i].event(ArnType::FailureEliminated, 0, false, now, start));
        }
    }
    out
}

/// The clock of one sample of every port.
struct Sample {
    now: Instant,
    start: Instant,
    /// How often a standing condition is sent again.
    refresh: Duration,
}

/// The congestion ARNs of the program's threshold crossings (virtual queues), between
/// two samples: only a rising edge goes out at once, stamped with the crossing's time.
fn crossings(
    watched: &mut [Watched],
    crossed: Vec<QueueCrossing>,
    start: Instant,
) -> Vec<MonitorEvent> {
    let mut out = Vec::new();
    for e in crossed {
        let now = Instant::now();
        let Some(w) = watched
            .iter_mut()
            .find(|w| w.virtual_queue && w.ifindex == e.ifindex)
        else {
            continue;
        };
        let backlog = e.backlog.min(u32::MAX as u64) as u32;
        w.last_backlog = backlog;
        if let Some(Edge::Up(metric)) = w.hysteresis.sample_at(backlog, now) {
            w.last_sent = now;
            let mut ev = w.event(ArnType::CongestionDetected, metric, false, now, start);
            ev.crossed_ns = e.t_ns;
            out.push(ev);
        }
    }
    out
}

/// SCHED_FIFO at `priority` for the calling thread (0: leave it alone); without the
/// privilege it stays a normal thread (logged).
fn realtime(priority: u8) {
    if priority == 0 {
        return;
    }
    let param = libc::sched_param {
        sched_priority: i32::from(priority.min(99)),
    };
    // SAFETY: a valid sched_param for this thread (pid 0).
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        debug!(priority, "ARN monitor thread runs under SCHED_FIFO");
    } else {
        info!(error = %io::Error::last_os_error(), "ARN monitor thread keeps normal scheduling");
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Logs every event the monitor thread sent ("ARN sent", refreshes only at debug level)
/// and passes it on to `sent` (counters, `fare arn monitor` output).
pub async fn report_sent(
    mut events: tokio::sync::mpsc::UnboundedReceiver<MonitorEvent>,
    sent: Option<UnboundedSender<MonitorEvent>>,
) {
    while let Some(event) = events.recv().await {
        if event.refresh {
            debug!(interface = %event.interface, message = %event.message, "ARN refreshed");
        } else {
            // Typed fields (`event`, `arn_type`, `metric`, `path_id`) for readers of JSON logs.
            info!(
                event = "arn_sent",
                interface = %event.interface,
                arn_type = event.kind,
                metric = event.metric,
                path_id = %std::net::Ipv4Addr::from(event.path_id),
                message = %event.message,
                backlog = event.backlog_bytes,
                queued_us = event.queued_us,
                "ARN sent"
            );
        }
        if let Some(tx) = &sent {
            let _ = tx.send(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hysteresis_emits_one_edge_per_crossing() {
        let mut h = Hysteresis::new(30_000, 10_000, 60_000);
        let edges: Vec<Option<Edge>> = [
            0, 29_999, 30_000, 50_000, 20_000, 10_001, 10_000, 5_000, 31_000,
        ]
        .into_iter()
        .map(|b| h.sample(b))
        .collect();
        assert_eq!(
            edges,
            vec![
                None,
                None,
                Some(Edge::Up(127)),
                None,
                None,
                None,
                Some(Edge::Down),
                None,
                Some(Edge::Up(131))
            ]
        );
        assert_eq!(h.metric(1_000_000), 255);
        assert_eq!(h.metric(0), 1);
    }

    /// A reload's new thresholds keep the state: congested stays congested (no new Type 1,
    /// no Type 2 by itself), and the next crossings are judged by the new values.
    #[test]
    fn retuned_hysteresis_keeps_its_state_and_uses_the_new_values() {
        let mut h = Hysteresis::new(30_000, 10_000, 60_000);
        assert_eq!(h.sample(40_000), Some(Edge::Up(170)));
        h.retune(50_000, 20_000, 100_000);
        // Below the old high, above the new low: still congested, no edge.
        assert_eq!(h.sample(25_000), None);
        assert!(h.congested);
        // At the new low: down. Then the old high no longer counts; the new one does.
        assert_eq!(h.sample(20_000), Some(Edge::Down));
        assert_eq!(h.sample(40_000), None);
        // 255 * 50,000 / 100,000 = 127.5 -> 127.
        assert_eq!(h.sample(50_000), Some(Edge::Up(127)));
        // A low at or above the high is kept below it, as at start.
        h.retune(1_000, 5_000, 0);
        assert_eq!((h.high, h.low, h.limit), (1_000, 999, 1));
    }

    #[test]
    fn clear_time_delays_the_down_edge_until_the_queue_stays_low() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut h = Hysteresis::new(30_000, 10_000, 60_000).with_clear(Duration::from_millis(100));
        assert_eq!(h.sample_at(40_000, ms(0)), Some(Edge::Up(170)));
        assert_eq!(h.sample_at(0, ms(10)), None);
        assert_eq!(h.sample_at(20_000, ms(50)), None); // above low: the clock restarts
        assert_eq!(h.sample_at(0, ms(60)), None);
        assert_eq!(h.sample_at(0, ms(150)), None);
        assert_eq!(h.sample_at(0, ms(160)), Some(Edge::Down));
        assert_eq!(h.sample_at(0, ms(400)), None);
    }

    /// A netlink message: header (type, seq) and payload, padded to 4.
    fn nlmsg(kind: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let len = (NLMSG_HDR_LEN + payload.len()) as u32;
        let mut m = Vec::new();
        m.extend_from_slice(&len.to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(payload);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    fn nla(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(payload);
        while a.len() % 4 != 0 {
            a.push(0);
        }
        a
    }

    #[test]
    fn qdisc_replies_are_read_in_place() {
        let queue: Vec<u8> = [7u32, 3000, 5, 0, 0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        // struct tcmsg: ifindex 3, parent = root.
        let mut payload = vec![0u8; TCMSG_LEN];
        payload[4..8].copy_from_slice(&3u32.to_ne_bytes());
        payload[12..16].copy_from_slice(&TC_H_ROOT.to_ne_bytes());
        payload.extend(nla(TCA_KIND, b"tbf\0"));
        payload.extend(nla(TCA_STATS2 | 0x8000, &nla(TCA_STATS_QUEUE, &queue)));
        let mut buf = nlmsg(RTM_NEWQDISC, 9, &payload);
        // Another request's message in between is skipped; the ACK ends the exchange.
        buf.extend(nlmsg(RTM_NEWQDISC, 8, &[0u8; TCMSG_LEN]));
        buf.extend(nlmsg(NLMSG_ERROR, 9, &0i32.to_ne_bytes()));
        let mut seen = Vec::new();
        let mut keep = |i, p, s| seen.push((i, p, s));
        assert!(scan_qdiscs(&buf, 9, &mut keep).unwrap());
        assert_eq!(
            seen,
            [(
                3,
                TC_H_ROOT,
                QdiscSample {
                    kind: "tbf".into(),
                    backlog_bytes: 3000,
                    qlen: 7,
                    drops: 5,
                }
            )]
        );
        // A kernel error is an error; a truncated buffer too; no end yet is `false`.
        let mut ignore = |_, _, _| {};
        let err = nlmsg(NLMSG_ERROR, 9, &(-19i32).to_ne_bytes());
        assert!(scan_qdiscs(&err, 9, &mut ignore).is_err());
        assert!(scan_qdiscs(&buf[..20], 9, &mut ignore).is_err());
        assert!(!scan_qdiscs(&buf[..buf.len() - 20], 9, &mut ignore).unwrap());
    }

    #[test]
    fn loopback_qdisc_and_link_can_be_read() {
        let Ok(mut r) = QueueReader::new() else {
            return;
        };
        let lo = transport::ifindex("lo");
        assert!(r.link_running(lo).unwrap());
        let s = r.root_qdisc(lo).unwrap();
        assert!(!s.kind.is_empty(), "{s:?}");
    }
}
