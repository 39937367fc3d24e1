//! The lab's UDP traffic generator and sink (`fare lab gen`, run by `fare lab traffic`
//! inside host namespaces). A flow is one UDP socket (its own source port), so flow
//! hashing sees `--flows` distinct 5-tuples; packets are paced to the total rate and
//! shared round-robin between the flows. Each run prints one JSON line of counters.

use super::LabError;
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
}

#[derive(Debug, Default, serde::Serialize)]
pub struct Counters {
    pub packets: u64,
    pub bytes: u64,
    pub errors: u64,
}

pub fn run(a: Args) -> Result<(), LabError> {
    if !(a.duration.is_finite() && a.duration > 0.0 && a.duration < 86_400.0) {
        return Err(LabError::Input(
            "--duration must be between 0 and 86400 seconds".into(),
        ));
    }
    let duration = Duration::from_secs_f64(a.duration);
    let c = if a.sink {
        sink(a.port, duration)?
    } else {
        send(&a, duration)?
    };
    println!(
        "{{\"packets\":{},\"bytes\":{},\"errors\":{}}}",
        c.packets, c.bytes, c.errors
    );
    Ok(())
}

fn sink(port: u16, duration: Duration) -> std::io::Result<Counters> {
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
    let mut buf = vec![0u8; 65_536];
    let end = Instant::now() + duration;
    while Instant::now() < end {
        let mut got = false;
        for s in &sockets {
            while let Ok(n) = s.recv(&mut buf) {
                c.packets += 1;
                c.bytes += n as u64;
                got = true;
            }
        }
        if !got {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
    Ok(c)
}

fn send(a: &Args, duration: Duration) -> Result<Counters, LabError> {
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
    let payload = vec![0x5au8; size];
    let pps = (a.rate_kbit as f64 * 1000.0 / 8.0) / size as f64;
    let mut c = Counters::default();
    let start = Instant::now();
    let mut next = 0usize;
    while start.elapsed() < duration {
        let due = (start.elapsed().as_secs_f64() * pps) as u64;
        // Catch up at most 1000 packets at once after a stall, then pace again.
        let mut burst = 0;
        while c.packets + c.errors < due && burst < 1000 {
            match sockets[next].send(&payload) {
                Ok(n) => {
                    c.packets += 1;
                    c.bytes += n as u64;
                }
                Err(_) => c.errors += 1,
            }
            next = (next + 1) % sockets.len();
            burst += 1;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    Ok(c)
}
