//! The lab's UDP traffic generator and sink (`fare lab gen`, run by `fare lab traffic`
//! inside host namespaces). A flow is one UDP socket (its own source port), so flow
//! hashing sees `--flows` distinct 5-tuples; packets are paced to the total rate and
//! shared round-robin between the flows. Each run prints one JSON line of counters.
//!
//! With `--buckets-ms N` every packet carries its send time (unix ms, after a magic
//! word) and its flow's sequence number, and both ends also count packets per N ms slice
//! of that send time, so that a soak can place lost packets in time (sent - received per
//! slice; the two ends share the machine's clock). The sink also names the flows that
//! lost them ([`gaps`](super::gaps)); the sender names the times it fell behind its pace
//! (a stalled process sends its backlog in a burst).

use super::gaps::{Gap, Tracker};
use super::LabError;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Receive instead of send: count what arrives on --port.
    #[arg(long)]
    pub sink: bool,
    /// Destination address (repeatable); flows are spread over them round-robin.
    #[arg(long)]
    pub to: Vec<IpAddr>,
    #[arg(long, default_value_t = 5201)]
    pub port: u16,
    /// Number of flows (distinct source ports).
    #[arg(long, default_value_t = 64)]
    pub flows: usize,
    /// Total rate of all flows, kbit/s of UDP payload.
    #[arg(long, default_value_t = 10_000)]
    pub rate_kbit: u64,
    /// UDP payload bytes per packet.
    #[arg(long, default_value_t = 1000)]
    pub size: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Stamp packets with their send time and count them per slice of this many ms.
    #[arg(long)]
    pub buckets_ms: Option<u64>,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct Counters {
    pub packets: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Slice (send time in unix ms / `--buckets-ms`) -> packets, with `--buckets-ms`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub buckets: BTreeMap<u64, u64>,
    /// Sink, with `--buckets-ms`: runs of packets a flow lost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<Gap>,
    /// Sender: (unix ms, packets behind the pace) whenever it was [`STALL`] or more behind.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<(u64, u64)>,
    /// Sender: packets a stall left unsent (never sent, so never counted as lost).
    #[serde(skip_serializing_if = "is_zero")]
    pub skipped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Packets behind its pace that make a sender stalled (20 ms at 1000 packets/s): it
/// skips them rather than send them in one burst. A burst of a starved process's
/// backlog (up to seconds of traffic at once on a loaded machine) is load the fabric
/// was never offered: it overflows the queue of a shaper or a software switch, and the
/// drops it causes say nothing about the fabric's faults.
pub const STALL: u64 = 20;

/// First bytes of a stamped payload; the send time (unix ms) and the flow's sequence
/// number follow, big endian.
const MAGIC: [u8; 4] = *b"FRSQ";
/// Magic + send time + sequence number.
const STAMP_LEN: usize = 16;

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The send time and sequence number a stamped payload carries (None: not stamped).
fn stamp_of(payload: &[u8]) -> Option<(u64, u32)> {
    let (magic, rest) = payload.split_first_chunk::<4>()?;
    let (ms, rest) = rest.split_first_chunk::<8>()?;
    let (seq, _) = rest.split_first_chunk::<4>()?;
    (*magic == MAGIC).then(|| (u64::from_be_bytes(*ms), u32::from_be_bytes(*seq)))
}

pub fn run(a: Args) -> Result<(), LabError> {
    if !(a.duration.is_finite() && a.duration > 0.0 && a.duration < 86_400.0) {
        return Err(LabError::Input(
            "--duration must be between 0 and 86400 seconds".into(),
        ));
    }
    let duration = Duration::from_secs_f64(a.duration);
    let buckets = a.buckets_ms.filter(|b| *b > 0);
    let c = if a.sink {
        sink(a.port, duration, buckets)?
    } else {
        send(&a, duration, buckets)?
    };
    outln!("{}", serde_json::to_string(&c).unwrap_or_default())?;
    Ok(())
}

fn sink(port: u16, duration: Duration, buckets: Option<u64>) -> std::io::Result<Counters> {
    let mut sockets = Vec::new();
    for addr in [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
    ] {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::DGRAM,
            None,
        )?;
        if addr.is_ipv6() {
            s.set_only_v6(true)?;
        }
        let _ = s.set_recv_buffer_size(4 << 20);
        // No IPv6 in the namespace is not an error for an IPv4 sink.
        if s.bind(&addr.into()).is_ok() {
            let u: UdpSocket = s.into();
            u.set_nonblocking(true)?;
            sockets.push(u);
        }
    }
    let mut c = Counters::default();
    let mut flows = Tracker::default();
    let mut buf = vec![0u8; 65_536];
    let end = Instant::now() + duration;
    while Instant::now() < end {
        let mut got = false;
        for s in &sockets {
            while let Ok((n, from)) = s.recv_from(&mut buf) {
                c.packets += 1;
                c.bytes += n as u64;
                got = true;
                if let (Some(b), Some((ms, seq))) = (buckets, stamp_of(&buf[..n])) {
                    *c.buckets.entry(ms / b).or_insert(0) += 1;
                    flows.packet(from, seq, ms);
                }
            }
        }
        if !got {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
    c.gaps = flows.finish();
    Ok(c)
}

fn send(a: &Args, duration: Duration, buckets: Option<u64>) -> Result<Counters, LabError> {
    if a.to.is_empty() {
        return Err(LabError::Input("--to: at least one destination".into()));
    }
    let flows = a.flows.clamp(1, 4096);
    let size = a.size.clamp(18, 8972);
    let mut sockets = Vec::with_capacity(flows);
    for i in 0..flows {
        let dst = SocketAddr::new(a.to[i % a.to.len()], a.port);
        let bind: SocketAddr = if dst.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let s = UdpSocket::bind(bind)?;
        s.connect(dst)?;
        s.set_nonblocking(true)?;
        sockets.push(s);
    }
    let mut payload = vec![0x5au8; size.max(STAMP_LEN)];
    if buckets.is_some() {
        payload[..4].copy_from_slice(&MAGIC);
    }
    let pps = (a.rate_kbit as f64 * 1000.0 / 8.0) / size as f64;
    let mut c = Counters::default();
    let mut seqs = vec![0u32; sockets.len()];
    let start = Instant::now();
    let mut next = 0usize;
    while start.elapsed() < duration {
        let due = (start.elapsed().as_secs_f64() * pps) as u64;
        let behind = due.saturating_sub(c.packets + c.errors + c.skipped);
        if behind >= STALL {
            if c.stalls.len() < 10_000 {
                c.stalls.push((unix_ms(), behind));
            }
            c.skipped += behind - 1;
        }
        while c.packets + c.errors + c.skipped < due {
            let ms = unix_ms();
            if buckets.is_some() {
                payload[4..12].copy_from_slice(&ms.to_be_bytes());
                payload[12..STAMP_LEN].copy_from_slice(&seqs[next].to_be_bytes());
            }
            // Only packets counted as sent use a number: the sink's gaps are lost packets.
            match sockets[next].send(&payload) {
                Ok(n) => {
                    seqs[next] = seqs[next].wrapping_add(1);
                    c.packets += 1;
                    c.bytes += n as u64;
                    if let Some(b) = buckets {
                        *c.buckets.entry(ms / b).or_insert(0) += 1;
                    }
                }
                Err(_) => c.errors += 1,
            }
            next = (next + 1) % sockets.len();
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_unstamped_payloads_have_none() {
        let mut p = vec![0x5au8; 18];
        p[..4].copy_from_slice(&MAGIC);
        p[4..12].copy_from_slice(&1_700_000_000_123u64.to_be_bytes());
        p[12..STAMP_LEN].copy_from_slice(&7u32.to_be_bytes());
        assert_eq!(stamp_of(&p), Some((1_700_000_000_123, 7)));
        assert_eq!(stamp_of(&[0x5a; 18]), None);
        assert_eq!(stamp_of(&p[..14]), None);
    }
}
