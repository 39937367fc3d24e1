//! `fare arn decode` and `fare arn send`: operator tools for Adaptive Routing Notifications.

use crate::cli::InputError;
use anyhow::{bail, Context, Result};
use fare_arn::codec::{ArnJson, ArnMessage, ArnType, Family, FlowId};
use fare_arn::transport::{self, ArnSocket};
use pcap_file::pcapng::Block;
use pcap_file::DataLink;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Print every field of ARN messages.
    ///
    /// Input is either HEX, the ARN message itself starting at its Type octet (spaces,
    /// colons and a leading 0x are ignored), or --pcap FILE, a capture (pcap or pcapng;
    /// Ethernet, Linux cooked or raw IP) of whole packets: every UDP datagram to the ARN
    /// port is decoded, everything else is skipped.
    ///
    /// A malformed message prints one line naming the byte offset (from the Type octet)
    /// and the field, and the command exits with status 2.
    #[command(verbatim_doc_comment)]
    Decode(DecodeArgs),
    /// Send one ARN by hand (UDP, TTL 255, DSCP CS6), or print it as hex with --hex.
    Send(SendArgs),
    /// Watch egress queues and links; send Types 1-4 to upstream neighbors (no agent needed).
    ///
    /// Samples the root qdisc backlog of each --interface every --interval-us; crossing
    /// --high-bytes sends Type 1 (Metric = 255 * backlog / limit), falling to --low-bytes
    /// sends Type 2; the link stopping sends Type 3 and coming back Type 4. Prints one
    /// line (JSON with --json) per event until interrupted or --duration-ms passes.
    #[command(verbatim_doc_comment)]
    Monitor(MonitorArgs),
    /// Receive ARN and print what the receiver decides (accept / drop reason), one line per
    /// datagram, and the counters at the end (no agent, no data plane changes).
    Listen(ListenArgs),
}

#[derive(clap::Args, Debug)]
pub struct MonitorArgs {
    /// Interface to watch, `IF=PATH_ID` (PATH_ID: router ID of the node at the far end).
    #[arg(long = "interface", required = true, value_parser = parse_interface)]
    pub interfaces: Vec<(String, Ipv4Addr)>,
    /// Backlog in bytes at or above which the queue is congested.
    #[arg(long)]
    pub high_bytes: u32,
    /// Backlog in bytes at or below which congestion has ended.
    #[arg(long)]
    pub low_bytes: u32,
    /// Backlog that maps to Metric 255 (default 2 x high).
    #[arg(long)]
    pub limit_bytes: Option<u32>,
    /// Send Type 2 only after the backlog stayed at or below --low-bytes this long.
    #[arg(long, default_value_t = 0)]
    pub clear_ms: u64,
    /// Sampling period in microseconds (>= 100).
    #[arg(long, default_value_t = 1000)]
    pub interval_us: u64,
    /// Upstream neighbor to notify (repeat for several).
    #[arg(long)]
    pub notify: Vec<IpAddr>,
    /// ARN UDP port.
    #[arg(long, default_value_t = transport::DEFAULT_PORT)]
    pub port: u16,
    /// Repeat Types 1/3 this often while the condition lasts.
    #[arg(long, default_value_t = 250)]
    pub refresh_ms: u64,
    /// Stop after this long (default: run until interrupted).
    #[arg(long)]
    pub duration_ms: Option<u64>,
    /// Print one JSON object per line.
    #[arg(long)]
    pub json: bool,
}

fn parse_interface(s: &str) -> Result<(String, Ipv4Addr), String> {
    let (name, id) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected IF=PATH_ID, e.g. eth1=10.0.0.2"))?;
    let id = parse_path_id(id)?;
    Ok((name.to_string(), Ipv4Addr::from(id)))
}

#[derive(clap::Args, Debug)]
pub struct ListenArgs {
    /// Accepted sender, `ADDRESS@INTERFACE` (repeat for several).
    #[arg(long = "neighbor", value_parser = parse_neighbor)]
    pub neighbors: Vec<fare_arn::config::ArnNeighbor>,
    /// Address to listen on (0.0.0.0 or ::). Not `--address`: that global option names
    /// an agent's management API.
    #[arg(long = "bind", id = "bind", default_value = "0.0.0.0")]
    pub bind: IpAddr,
    /// ARN UDP port.
    #[arg(long, default_value_t = transport::DEFAULT_PORT)]
    pub port: u16,
    /// Stop after this many datagrams.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this long.
    #[arg(long)]
    pub duration_ms: Option<u64>,
    /// Print one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Also receive ARNs sent to this multicast group (joined on the neighbors'
    /// interfaces, as the agent's `arn.multicast`); ARNs to other groups are dropped.
    #[arg(long)]
    pub group: Option<IpAddr>,
}

fn parse_neighbor(s: &str) -> Result<fare_arn::config::ArnNeighbor, String> {
    let (a, i) = s
        .split_once('@')
        .ok_or_else(|| format!("`{s}`: expected ADDRESS@INTERFACE, e.g. 10.1.0.2@eth1"))?;
    Ok(fare_arn::config::ArnNeighbor {
        address: a
            .parse()
            .map_err(|_| format!("`{a}` is not an IP address"))?,
        interface: i.to_string(),
    })
}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["hex", "pcap"])))]
pub struct DecodeArgs {
    /// The ARN message in hex, from its Type octet, e.g. `0100 2a40 0a000002`.
    pub hex: Vec<String>,
    /// Read whole packets from a pcap/pcapng capture instead.
    #[arg(long, value_name = "FILE", conflicts_with = "hex")]
    pub pcap: Option<PathBuf>,
    /// UDP destination port that carries ARN in the capture.
    #[arg(long, default_value_t = transport::DEFAULT_PORT)]
    pub port: u16,
    /// Print JSON: one object `{type, version, metric, para_type, flow?, path_id?}` per
    /// message (one line per message for --pcap).
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct SendArgs {
    /// Destination (an upstream neighbor's address); required unless --hex.
    #[arg(long, required_unless_present = "hex")]
    pub to: Option<IpAddr>,
    /// Destination UDP port.
    #[arg(long, default_value_t = transport::DEFAULT_PORT)]
    pub port: u16,
    /// Source address to send from (default: chosen by the routing table).
    #[arg(long)]
    pub from: Option<IpAddr>,
    /// Send through this interface (SO_BINDTODEVICE), e.g. for link-local or multicast.
    #[arg(long)]
    pub device: Option<String>,
    /// Type: 1 or congestion, 2 or congestion-end, 3 or failure, 4 or failure-end.
    #[arg(long = "type", default_value = "1", value_parser = parse_type)]
    pub kind: ArnType,
    /// Metric octet (e.g. the congestion level).
    #[arg(long, default_value_t = 0)]
    pub metric: u8,
    /// Path ID: the router ID of the node at the far end of the affected link, as an IPv4
    /// address (10.0.0.2) or a number (167772162, 0x0a000002).
    #[arg(long, value_parser = parse_path_id)]
    pub path_id: Option<u32>,
    /// Flow identifier: protocol number (sets the Protocol Mask bit).
    #[arg(long)]
    pub protocol: Option<u8>,
    /// Flow identifier: source address.
    #[arg(long)]
    pub src: Option<IpAddr>,
    /// Flow identifier: destination address.
    #[arg(long)]
    pub dst: Option<IpAddr>,
    /// Flow identifier: source port.
    #[arg(long)]
    pub src_port: Option<u16>,
    /// Flow identifier: destination port.
    #[arg(long)]
    pub dst_port: Option<u16>,
    /// Flow identifier family when no address is given.
    #[arg(long)]
    pub ipv6_flow: bool,
    /// Repeat the message this many times.
    #[arg(long, default_value_t = 1)]
    pub count: u32,
    /// Print JSON: `{"hex"}` with --hex, else `{"to", "count", "octets", "hex"}`.
    #[arg(long)]
    pub json: bool,
    /// Print the encoded message as hex instead of sending it.
    #[arg(long)]
    pub hex: bool,
    /// Send these bytes (hex) instead of an encoded message, e.g. to test receivers with
    /// malformed input.
    #[arg(long, value_name = "HEX", conflicts_with = "hex")]
    pub raw: Option<String>,
    /// TTL / hop limit to send with (receivers accept only 255; other values are for tests).
    #[arg(long, default_value_t = transport::TTL)]
    pub ttl: u8,
}

fn parse_type(s: &str) -> Result<ArnType, String> {
    let t = match s {
        "1" | "congestion" => 1,
        "2" | "congestion-end" => 2,
        "3" | "failure" => 3,
        "4" | "failure-end" => 4,
        _ => return Err("expected 1-4, congestion, congestion-end, failure or failure-end".into()),
    };
    ArnType::from_u8(t).ok_or_else(|| "bad type".into())
}

/// Parses a Path ID written as an IPv4 address, decimal or 0x-hex number.
pub fn parse_path_id(s: &str) -> Result<u32, String> {
    if let Ok(a) = s.parse::<Ipv4Addr>() {
        return Ok(u32::from(a));
    }
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse::<u32>(),
    };
    parsed.map_err(|_| format!("`{s}` is not an IPv4 address or a 32-bit number"))
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Decode(a) => decode(a),
        Command::Send(a) => send(a),
        Command::Monitor(a) => monitor(a),
        Command::Listen(a) => listen(a),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

async fn stop_after(duration_ms: Option<u64>) {
    match duration_ms {
        Some(ms) => {
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(ms)) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn monitor(args: MonitorArgs) -> Result<()> {
    use fare_arn::config::{MonitorConfig, MonitoredInterface};
    use fare_arn::monitor;
    if args.low_bytes >= args.high_bytes {
        bail!(InputError("--low-bytes must be below --high-bytes".into()));
    }
    let config = MonitorConfig {
        interval_us: args.interval_us,
        realtime_priority: 0,
        interfaces: args
            .interfaces
            .iter()
            .map(|(name, path_id)| MonitoredInterface {
                interface: name.clone(),
                path_id: *path_id,
                high_bytes: args.high_bytes,
                low_bytes: args.low_bytes,
                limit_bytes: args.limit_bytes,
                clear_ms: args.clear_ms,
                notify: Vec::new(),
            })
            .collect(),
    };
    for (name, _) in &args.interfaces {
        if transport::ifindex(name) == 0 {
            bail!(InputError(format!("--interface {name}: no such interface")));
        }
    }
    runtime()?.block_on(async {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (sent_tx, mut sent_rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = monitor::spawn(
            config,
            args.notify.clone(),
            std::time::Duration::from_millis(args.refresh_ms),
            args.port,
            tx,
            stop.clone(),
            monitor::MonitorExtras::default(),
        )
        .context("starting the queue monitor (rtnetlink)")?;
        let sender = tokio::spawn(monitor::report_sent(rx, Some(sent_tx)));
        let printer = async {
            while let Some(e) = sent_rx.recv().await {
                if args.json {
                    crate::outln!("{}", serde_json::to_string(&e).unwrap_or_default())?;
                } else {
                    crate::outln!(
                        "{:>10} us {} {}{} backlog {} B",
                        e.t_us,
                        e.interface,
                        e.message,
                        if e.refresh { " (refresh)" } else { "" },
                        e.backlog_bytes
                    )?;
                }
            }
            Ok::<(), super::OutputError>(())
        };
        let printed = tokio::select! {
            _ = stop_after(args.duration_ms) => Ok(()),
            r = printer => r,
        };
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = thread.join();
        sender.abort();
        Ok(printed?)
    })
}

fn listen(args: ListenArgs) -> Result<()> {
    use fare_arn::receiver::{self, Receiver};
    let config = fare_arn::ArnConfig {
        udp_port: args.port,
        neighbors: args.neighbors.clone(),
        multicast: args.group.map(|group| crate::arn::config::MulticastConfig {
            group,
            interfaces: Vec::new(),
        }),
        ..Default::default()
    };
    runtime()?.block_on(async {
        let socket = ArnSocket::bind(SocketAddr::new(args.bind, args.port), None)?;
        if let Some(m) = &config.multicast {
            let interfaces = m.resolved_interfaces(&config.neighbors);
            ArnSocket::join_group(std::slice::from_ref(&socket), m.group, &interfaces)
                .with_context(|| format!("joining {}", m.group))?;
        }
        let receiver = Receiver::new(&config, &[]);
        let counters = receiver.counters();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<receiver::ReceiverEvent>();
        // No data plane: the receiver still admits, decodes and counts.
        let mut dataplane = fare_dataplane::NullDataplane::default();
        let notify = std::sync::Arc::new(tokio::sync::Notify::new());
        let count = args.count;
        let json = args.json;
        let printer = async move {
            let mut n = 0u64;
            while let Some(e) = rx.recv().await {
                if json {
                    crate::outln!("{}", serde_json::to_string(&e).unwrap_or_default())?;
                } else {
                    match (&e.message, &e.dropped) {
                        (Some(m), _) => crate::outln!(
                            "from {} ttl {:?}: accepted {}",
                            e.from,
                            e.ttl,
                            serde_json::to_string(m).unwrap_or_default()
                        )?,
                        (None, Some(why)) => {
                            crate::outln!("from {} ttl {:?}: dropped: {why}", e.from, e.ttl)?
                        }
                        _ => {}
                    }
                }
                n += 1;
                if count.is_some_and(|c| n >= c) {
                    break;
                }
            }
            Ok::<(), super::OutputError>(())
        };
        // A closed or full standard output stops the receiver like --count does.
        let mut printed = Ok(());
        let stop = async {
            tokio::select! {
                _ = stop_after(args.duration_ms) => {}
                r = printer => printed = r,
            }
        };
        receiver::run(
            receiver,
            vec![socket],
            &mut dataplane as &mut dyn fare_dataplane::Dataplane,
            notify,
            Some(tx),
            stop,
        )
        .await;
        printed?;
        let snapshot = counters.snapshot();
        if args.json {
            crate::outln!("{}", serde_json::json!({ "counters": snapshot }))?;
        } else {
            crate::outln!("counters: {}", serde_json::to_string(&snapshot)?)?;
        }
        Ok(())
    })
}

/// Parses hex text; the error names the offending character position.
pub fn parse_hex(words: &[String]) -> Result<Vec<u8>, InputError> {
    let joined = words.join("");
    let text = joined
        .strip_prefix("0x")
        .or_else(|| joined.strip_prefix("0X"))
        .unwrap_or(&joined);
    let digits: Vec<(usize, char)> = text
        .char_indices()
        .filter(|(_, c)| !c.is_whitespace() && *c != ':' && *c != '-' && *c != '_')
        .collect();
    if let Some((i, c)) = digits.iter().find(|(_, c)| !c.is_ascii_hexdigit()) {
        return Err(InputError(format!(
            "hex input: character {} `{c}` is not a hex digit",
            i + 1
        )));
    }
    if !digits.len().is_multiple_of(2) {
        return Err(InputError(format!(
            "hex input: odd number of hex digits ({}); byte {} is incomplete",
            digits.len(),
            digits.len() / 2
        )));
    }
    Ok(digits
        .chunks(2)
        .map(|p| {
            let hi = p[0].1.to_digit(16).unwrap_or(0);
            let lo = p[1].1.to_digit(16).unwrap_or(0);
            (hi * 16 + lo) as u8
        })
        .collect())
}

fn print(msg: &ArnMessage, json: bool) -> Result<()> {
    if json {
        crate::outln!("{}", serde_json::to_string(&ArnJson::from(msg))?)?;
    } else {
        crate::outln!("{msg}")?;
    }
    Ok(())
}

fn decode(args: DecodeArgs) -> Result<()> {
    if let Some(path) = &args.pcap {
        return decode_pcap(path, args.port, args.json);
    }
    let bytes = parse_hex(&args.hex)?;
    let msg = ArnMessage::decode(&bytes).map_err(|e| InputError(format!("malformed ARN: {e}")))?;
    print(&msg, args.json)
}

/// One ARN datagram found in a capture.
pub struct CapturedArn {
    /// 1-based packet number in the capture.
    pub packet: usize,
    pub source: IpAddr,
    pub payload: Vec<u8>,
}

fn decode_pcap(path: &Path, port: u16, json: bool) -> Result<()> {
    let found = read_pcap(path, port)?;
    let mut first_error = None;
    for arn in &found {
        match ArnMessage::decode(&arn.payload) {
            Ok(msg) => {
                if json {
                    print(&msg, true)?;
                } else {
                    crate::outln!("packet {} from {}: {msg}", arn.packet, arn.source)?;
                }
            }
            Err(e) => {
                let line = format!(
                    "{}: packet {} from {}: malformed ARN: {e}",
                    path.display(),
                    arn.packet,
                    arn.source
                );
                eprintln!("fare: {line}");
                first_error.get_or_insert(line);
            }
        }
    }
    if let Some(line) = first_error {
        return Err(InputError(line).into());
    }
    if found.is_empty() {
        tracing::warn!("{}: no UDP datagram to port {port}", path.display());
    }
    Ok(())
}

/// Extracts the payloads of UDP datagrams to `port` from a pcap or pcapng file.
pub fn read_pcap(path: &Path, port: u16) -> Result<Vec<CapturedArn>> {
    let bad = |why: String| InputError(format!("{}: {why}", path.display()));
    let mut data = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut data))
        .map_err(|e| bad(format!("cannot read: {e}")))?;
    let mut frames: Vec<(DataLink, Vec<u8>)> = Vec::new();
    // pcapng starts with a Section Header Block (0x0a0d0d0a); anything else is tried as pcap.
    if data.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
        let mut reader = pcap_file::pcapng::PcapNgReader::new(&data[..])
            .map_err(|e| bad(format!("not a pcapng file: {e}")))?;
        let mut links = Vec::new();
        while let Some(block) = reader.next_block() {
            match block.map_err(|e| bad(format!("pcapng block {}: {e}", frames.len() + 1)))? {
                Block::InterfaceDescription(idb) => links.push(idb.linktype),
                Block::EnhancedPacket(epb) => {
                    let link = links
                        .get(epb.interface_id as usize)
                        .copied()
                        .unwrap_or(DataLink::ETHERNET);
                    frames.push((link, epb.data.into_owned()));
                }
                Block::SimplePacket(spb) => {
                    let link = links.first().copied().unwrap_or(DataLink::ETHERNET);
                    frames.push((link, spb.data.into_owned()));
                }
                _ => {}
            }
        }
    } else {
        let mut reader = pcap_file::pcap::PcapReader::new(&data[..])
            .map_err(|e| bad(format!("not a pcap or pcapng file: {e}")))?;
        let link = reader.header().datalink;
        while let Some(packet) = reader.next_packet() {
            let packet =
                packet.map_err(|e| bad(format!("pcap packet {}: {e}", frames.len() + 1)))?;
            frames.push((link, packet.data.into_owned()));
        }
    }
    let mut out = Vec::new();
    for (i, (link, frame)) in frames.iter().enumerate() {
        if let Some((source, payload)) = udp_payload(*link, frame, port) {
            out.push(CapturedArn {
                packet: i + 1,
                source,
                payload,
            });
        }
    }
    Ok(out)
}

/// Source address and payload of a UDP datagram to `port` in one captured frame.
fn udp_payload(link: DataLink, frame: &[u8], port: u16) -> Option<(IpAddr, Vec<u8>)> {
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    let sliced = match link {
        DataLink::ETHERNET => SlicedPacket::from_ethernet(frame).ok()?,
        DataLink::LINUX_SLL => SlicedPacket::from_linux_sll(frame).ok()?,
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => SlicedPacket::from_ip(frame).ok()?,
        _ => return None,
    };
    let source = match sliced.net? {
        NetSlice::Ipv4(ip) => IpAddr::V4(ip.header().source_addr()),
        NetSlice::Ipv6(ip) => IpAddr::V6(ip.header().source_addr()),
        _ => return None,
    };
    match sliced.transport? {
        TransportSlice::Udp(udp) if udp.destination_port() == port => {
            Some((source, udp.payload().to_vec()))
        }
        _ => None,
    }
}

fn send(args: SendArgs) -> Result<()> {
    let has_flow = args.protocol.is_some()
        || args.src.is_some()
        || args.dst.is_some()
        || args.src_port.is_some()
        || args.dst_port.is_some()
        || args.ipv6_flow;
    let family = match (args.src.or(args.dst), args.ipv6_flow) {
        (Some(a), _) => Family::of(&a),
        (None, true) => Family::Ipv6,
        (None, false) => Family::Ipv4,
    };
    let msg = ArnMessage {
        kind: args.kind,
        metric: args.metric,
        flow: has_flow.then_some(FlowId {
            family,
            protocol: args.protocol,
            src: args.src,
            dst: args.dst,
            src_port: args.src_port,
            dst_port: args.dst_port,
        }),
        path_id: args.path_id,
    };
    let bytes = msg.encode().map_err(|e| {
        InputError(format!(
            "cannot encode: {e} (--src and --dst must be the same family)"
        ))
    })?;
    if args.hex {
        if args.json {
            crate::outln!("{}", serde_json::json!({"hex": to_hex(&bytes)}))?;
        } else {
            crate::outln!("{}", to_hex(&bytes))?;
        }
        return Ok(());
    }
    let bytes = match &args.raw {
        Some(raw) => parse_hex(std::slice::from_ref(raw))?,
        None => bytes,
    };
    let Some(to) = args.to else {
        bail!(InputError("--to is required".into()));
    };
    let to = SocketAddr::new(to, args.port);
    let local = match (args.from, to) {
        (Some(a), _) => SocketAddr::new(a, 0),
        (None, SocketAddr::V4(_)) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        (None, SocketAddr::V6(_)) => SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
    };
    runtime()?.block_on(async {
        let socket = ArnSocket::bind(local, args.device.as_deref())?;
        if args.ttl != transport::TTL {
            socket.set_ttl(args.ttl)?;
        }
        for _ in 0..args.count {
            socket
                .send_to(&bytes, to)
                .await
                .with_context(|| format!("sending ARN to {to}"))?;
        }
        if args.json {
            let v = serde_json::json!({"to": to.to_string(), "count": args.count,
                "octets": bytes.len(), "hex": to_hex(&bytes)});
            crate::outln!("{v}")?;
        } else if args.raw.is_some() {
            crate::outln!("sent {} x {} raw octets to {to}", args.count, bytes.len())?;
        } else {
            crate::outln!("sent {} x {msg} to {to}", args.count)?;
        }
        Ok(())
    })
}

pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_parsing() {
        assert_eq!(
            parse_hex(&["0x0100".into(), "2a:40".into()]).unwrap(),
            vec![1, 0, 0x2a, 0x40]
        );
        assert!(parse_hex(&["01z0".into()])
            .unwrap_err()
            .0
            .contains("character 3"));
        assert!(parse_hex(&["010".into()]).is_err());
    }

    #[test]
    fn path_id_forms() {
        assert_eq!(parse_path_id("10.0.0.2"), Ok(0x0a00_0002));
        assert_eq!(parse_path_id("0x0a000002"), Ok(0x0a00_0002));
        assert_eq!(parse_path_id("167772162"), Ok(0x0a00_0002));
        assert!(parse_path_id("x").is_err());
    }
}
