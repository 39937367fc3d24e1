//! Next-hop MAC resolution from the kernel's neighbor table (ARP / NDP), for members that
//! give only `next_hop` (e.g. BGP routes): the XDP program rewrites the destination MAC
//! itself, so it needs the neighbor's MAC, which the kernel already keeps. The p4runtime
//! backend uses the same resolution (its switch ports are the node's interfaces in the lab).
//!
//! A missing entry is provoked the usual way — one UDP datagram to the discard port,
//! sent out of the member's interface, makes the kernel resolve the address — and the
//! table is polled until the entry is usable or the time is up.

use futures::TryStreamExt;
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourState};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// How long [`resolve`] waits for the kernel to resolve a missing neighbor.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a next hop's MAC is not known.
#[derive(Debug, thiserror::Error)]
pub enum NeighborError {
    #[error("netlink: {0}")]
    Netlink(#[source] std::io::Error),
    #[error("reading the neighbor table: {0}")]
    Table(#[source] rtnetlink::Error),
    #[error("asking the kernel to resolve {addr}: {source}")]
    Provoke {
        addr: IpAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("next hop {addr} on {ifname} not resolved within {timeout:?} (no ARP/NDP answer)")]
    Unresolved {
        addr: IpAddr,
        ifname: String,
        timeout: Duration,
    },
}

/// The MAC of `addr` on interface `ifindex`, when the kernel has a usable entry.
pub async fn lookup(ifindex: u32, addr: IpAddr) -> Result<Option<[u8; 6]>, NeighborError> {
    let (conn, handle, _) = rtnetlink::new_connection().map_err(NeighborError::Netlink)?;
    let task = tokio::spawn(conn);
    let family = match addr {
        IpAddr::V4(_) => netlink_packet_route::AddressFamily::Inet,
        IpAddr::V6(_) => netlink_packet_route::AddressFamily::Inet6,
    };
    let mut found = None;
    let mut entries = handle
        .neighbours()
        .get()
        .set_address_family(family)
        .execute();
    let result = loop {
        match entries.try_next().await {
            Ok(Some(msg)) => {
                let usable = matches!(
                    msg.header.state,
                    NeighbourState::Reachable
                        | NeighbourState::Stale
                        | NeighbourState::Delay
                        | NeighbourState::Probe
                        | NeighbourState::Permanent
                        | NeighbourState::Noarp
                );
                if msg.header.ifindex != ifindex || !usable {
                    continue;
                }
                let mut dst = None;
                let mut mac = None;
                for a in &msg.attributes {
                    match a {
                        NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                            dst = Some(IpAddr::V4(*v4))
                        }
                        NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                            dst = Some(IpAddr::V6(*v6))
                        }
                        NeighbourAttribute::LinkLayerAddress(l) => {
                            mac = <[u8; 6]>::try_from(l.as_slice()).ok()
                        }
                        _ => {}
                    }
                }
                if dst == Some(addr) && mac.is_some() {
                    found = mac;
                }
            }
            Ok(None) => break Ok(found),
            Err(e) => break Err(NeighborError::Table(e)),
        }
    };
    task.abort();
    result
}

/// Makes the kernel resolve `addr` on `ifname`: one empty datagram to the discard port.
fn provoke(ifname: &str, addr: IpAddr) -> std::io::Result<()> {
    let bind: SocketAddr = match addr {
        IpAddr::V4(_) => "0.0.0.0:0".parse().map_err(std::io::Error::other)?,
        IpAddr::V6(_) => "[::]:0".parse().map_err(std::io::Error::other)?,
    };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(bind),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    socket.bind_device(Some(ifname.as_bytes()))?;
    socket.bind(&bind.into())?;
    socket.send_to(&[], &SocketAddr::new(addr, 9).into())?;
    Ok(())
}

/// The MAC of next hop `addr` on `ifname` (`ifindex`): from the table, else after asking
/// the kernel to resolve it, waiting at most `timeout`.
pub async fn resolve(
    ifname: &str,
    ifindex: u32,
    addr: IpAddr,
    timeout: Duration,
) -> Result<[u8; 6], NeighborError> {
    if let Some(mac) = lookup(ifindex, addr).await? {
        return Ok(mac);
    }
    provoke(ifname, addr).map_err(|source| NeighborError::Provoke { addr, source })?;
    let start = Instant::now();
    while start.elapsed() < timeout {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Some(mac) = lookup(ifindex, addr).await? {
            return Ok(mac);
        }
    }
    Err(NeighborError::Unresolved {
        addr,
        ifname: ifname.to_string(),
        timeout,
    })
}
