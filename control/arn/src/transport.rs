//! ARN transport (docs/CODEPOINTS.md): the message is the payload of a UDP datagram to port
//! 9961 (configurable), over IPv4 or IPv6, sent with DSCP CS6 and TTL / hop limit 255.
//! A receiver learns the TTL (or hop limit), the arrival interface and the destination
//! address of every datagram from ancillary data, so it can apply the GTSM-style check
//! (RFC 5082): only a directly connected neighbor can make a packet arrive with TTL 255.

use nix::sys::socket::{self, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Default UDP destination port of ARN datagrams (`arn: {udp_port: N}`).
pub const DEFAULT_PORT: u16 = fare_common::arn_wire::DEFAULT_UDP_PORT;
/// DSCP CS6 (network control) = 48; the TOS / traffic class octet is DSCP << 2.
pub const DSCP_CS6: u8 = 48;
pub const TOS_CS6: u8 = DSCP_CS6 << 2;
/// Every ARN leaves with this TTL / hop limit, and receivers accept only this value.
pub const TTL: u8 = 255;

#[derive(Debug, thiserror::Error)]
#[error("ARN socket {what} ({addr}): {source}")]
pub struct TransportError {
    pub what: &'static str,
    pub addr: SocketAddr,
    #[source]
    pub source: io::Error,
}

/// One received datagram with what the kernel told about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub len: usize,
    pub from: SocketAddr,
    /// IPv4 TTL or IPv6 hop limit of the arriving packet.
    pub ttl: Option<u8>,
    /// Interface index the packet arrived on.
    pub ifindex: Option<u32>,
    /// Destination address of the packet (to tell unicast from multicast).
    pub dst: Option<IpAddr>,
}

/// A UDP socket for sending and receiving ARN, with TTL 255 and DSCP CS6 set on everything
/// it sends and TTL / interface reporting on everything it receives.
pub struct ArnSocket {
    socket: UdpSocket,
    local: SocketAddr,
}

impl ArnSocket {
    /// Binds `addr` (e.g. `0.0.0.0:9961`, `[::]:9961`, or port 0 for a send-only socket).
    /// An IPv6 socket is IPv6-only: run one socket per family. `device` binds the socket to
    /// one interface (needed for link-local multicast; optional otherwise).
    pub fn bind(addr: SocketAddr, device: Option<&str>) -> Result<ArnSocket, TransportError> {
        let err = |what| move |source| TransportError { what, addr, source };
        let s = configured(addr)?;
        if let Some(dev) = device {
            s.bind_device(Some(dev.as_bytes()))
                .map_err(err("SO_BINDTODEVICE"))?;
        }
        s.set_nonblocking(true).map_err(err("O_NONBLOCK"))?;
        s.bind(&addr.into()).map_err(err("bind"))?;
        let local = s
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .unwrap_or(addr);
        let socket = UdpSocket::from_std(s.into()).map_err(err("register"))?;
        Ok(ArnSocket { socket, local })
    }

    /// Overrides the TTL / hop limit of what this socket sends (tests of receivers only).
    pub fn set_ttl(&self, ttl: u8) -> io::Result<()> {
        let s = socket2::SockRef::from(&self.socket);
        match self.local {
            SocketAddr::V4(_) => s.set_ttl_v4(u32::from(ttl)),
            SocketAddr::V6(_) => s.set_unicast_hops_v6(u32::from(ttl)),
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Joins a multicast group on interface `ifindex` (0 = any) for optional multicast ARN.
    pub fn join_multicast(&self, group: IpAddr, ifindex: u32) -> io::Result<()> {
        match group {
            IpAddr::V4(g) => socket2::SockRef::from(&self.socket)
                .join_multicast_v4_n(&g, &socket2::InterfaceIndexOrAddress::Index(ifindex)),
            IpAddr::V6(g) => self.socket.join_multicast_v6(&g, ifindex),
        }
    }

    /// `arn.multicast`: joins `group` on every interface of `interfaces` with the socket of
    /// the group's family (the others are left alone). Returns the interfaces joined; an
    /// interface that does not exist or refuses is an error naming it.
    pub fn join_group(
        sockets: &[ArnSocket],
        group: IpAddr,
        interfaces: &[String],
    ) -> io::Result<Vec<String>> {
        let Some(socket) = sockets
            .iter()
            .find(|s| s.local.is_ipv4() == group.is_ipv4())
        else {
            return Err(io::Error::other(format!("no socket of {group}'s family")));
        };
        let mut joined = Vec::new();
        for name in interfaces {
            let index = ifindex(name);
            if index == 0 {
                return Err(io::Error::other(format!("no interface {name}")));
            }
            socket
                .join_multicast(group, index)
                .map_err(|e| io::Error::other(format!("joining {group} on {name}: {e}")))?;
            joined.push(name.clone());
        }
        Ok(joined)
    }

    /// Sends one encoded message.
    pub async fn send_to(&self, message: &[u8], to: SocketAddr) -> io::Result<()> {
        let n = self.socket.send_to(message, to).await?;
        if n != message.len() {
            return Err(io::Error::other(format!(
                "short send: {n} of {} octets",
                message.len()
            )));
        }
        Ok(())
    }

    /// Waits for the next datagram; `buf` receives its payload (longer payloads are cut and
    /// reported with their full length, so the caller can count them as malformed).
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<Datagram> {
        loop {
            self.socket.readable().await?;
            match self.socket.try_io(Interest::READABLE, || {
                recv_with_ancillary(&self.socket, buf)
            }) {
                Ok(d) => return Ok(d),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

fn recv_with_ancillary(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<Datagram> {
    let mut cmsg = nix::cmsg_space!(libc_int, nix::libc::in6_pktinfo, libc_int);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = socket::recvmsg::<SockaddrStorage>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_TRUNC,
    )
    .map_err(io::Error::from)?;
    let from = msg
        .address
        .and_then(|a| {
            if let Some(v4) = a.as_sockaddr_in() {
                Some(SocketAddr::new(IpAddr::V4(v4.ip()), v4.port()))
            } else {
                a.as_sockaddr_in6()
                    .map(|v6| SocketAddr::new(IpAddr::V6(v6.ip()), v6.port()))
            }
        })
        .ok_or_else(|| io::Error::other("datagram without a source address"))?;
    let mut d = Datagram {
        len: msg.bytes,
        from,
        ttl: None,
        ifindex: None,
        dst: None,
    };
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            match c {
                ControlMessageOwned::Ipv4Ttl(t) => d.ttl = u8::try_from(t).ok(),
                ControlMessageOwned::Ipv6HopLimit(t) => d.ttl = u8::try_from(t).ok(),
                ControlMessageOwned::Ipv4PacketInfo(p) => {
                    d.ifindex = u32::try_from(p.ipi_ifindex).ok();
                    d.dst = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(p.ipi_addr.s_addr))));
                }
                ControlMessageOwned::Ipv6PacketInfo(p) => {
                    d.ifindex = Some(p.ipi6_ifindex);
                    d.dst = Some(IpAddr::V6(Ipv6Addr::from(p.ipi6_addr.s6_addr)));
                }
                _ => {}
            }
        }
    }
    Ok(d)
}

#[allow(non_camel_case_types)]
type libc_int = nix::libc::c_int;

/// A UDP socket of `addr`'s family with the ARN options: TTL / hop limit 255, DSCP CS6,
/// and TTL + arrival interface reported on receive. Not bound yet.
fn configured(addr: SocketAddr) -> Result<Socket, TransportError> {
    let err = |what| move |source| TransportError { what, addr, source };
    let domain = Domain::for_address(addr);
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP)).map_err(err("create"))?;
    s.set_reuse_address(true).map_err(err("SO_REUSEADDR"))?;
    match addr {
        SocketAddr::V4(_) => {
            s.set_ttl_v4(u32::from(TTL)).map_err(err("IP_TTL"))?;
            s.set_multicast_ttl_v4(u32::from(TTL))
                .map_err(err("IP_MULTICAST_TTL"))?;
            s.set_tos_v4(u32::from(TOS_CS6)).map_err(err("IP_TOS"))?;
            socket::setsockopt(&s, sockopt::Ipv4RecvTtl, &true)
                .map_err(|e| err("IP_RECVTTL")(io::Error::from(e)))?;
            socket::setsockopt(&s, sockopt::Ipv4PacketInfo, &true)
                .map_err(|e| err("IP_PKTINFO")(io::Error::from(e)))?;
        }
        SocketAddr::V6(_) => {
            s.set_only_v6(true).map_err(err("IPV6_V6ONLY"))?;
            s.set_unicast_hops_v6(u32::from(TTL))
                .map_err(err("IPV6_UNICAST_HOPS"))?;
            s.set_multicast_hops_v6(u32::from(TTL))
                .map_err(err("IPV6_MULTICAST_HOPS"))?;
            s.set_tclass_v6(u32::from(TOS_CS6))
                .map_err(err("IPV6_TCLASS"))?;
            socket::setsockopt(&s, sockopt::Ipv6RecvHopLimit, &true)
                .map_err(|e| err("IPV6_RECVHOPLIMIT")(io::Error::from(e)))?;
            socket::setsockopt(&s, sockopt::Ipv6RecvPacketInfo, &true)
                .map_err(|e| err("IPV6_RECVPKTINFO")(io::Error::from(e)))?;
        }
    }
    Ok(s)
}

/// A blocking send-only ARN socket of `addr`'s family (port 0 = any), for threads outside
/// the async runtime: the queue monitor sends from its own thread, so a busy runtime
/// (BGP reacting to the same event) cannot delay the notification.
pub fn blocking_sender(addr: SocketAddr) -> Result<std::net::UdpSocket, TransportError> {
    let s = configured(addr)?;
    s.bind(&addr.into()).map_err(|source| TransportError {
        what: "bind",
        addr,
        source,
    })?;
    Ok(s.into())
}

/// Sends ARNs with blocking sockets (one per family, the IPv6 one when the host has
/// IPv6): the monitor thread's Types 1-4 and the receiver's propagated ARNs.
pub struct BlockingSender {
    port: u16,
    v4: std::net::UdpSocket,
    v6: Option<std::net::UdpSocket>,
    /// `arn.multicast`: the group and one socket bound to each of its interfaces.
    multicast: Option<(IpAddr, Vec<(String, std::net::UdpSocket)>)>,
}

impl BlockingSender {
    /// Sockets that send to UDP `port` of each destination.
    pub fn new(port: u16) -> Result<BlockingSender, TransportError> {
        let v4 = blocking_sender(SocketAddr::from(([0, 0, 0, 0], 0)))?;
        let v6 = blocking_sender(SocketAddr::from(([0u16; 8], 0))).ok();
        Ok(BlockingSender {
            port,
            v4,
            v6,
            multicast: None,
        })
    }

    /// Also sends every ARN to multicast `group` out of each of `interfaces` (a socket
    /// bound to the interface, TTL / hop limit 255 like any ARN).
    pub fn with_multicast(
        mut self,
        group: IpAddr,
        interfaces: &[String],
    ) -> Result<BlockingSender, TransportError> {
        let any = if group.is_ipv4() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            SocketAddr::from(([0u16; 8], 0))
        };
        let mut out = Vec::new();
        for name in interfaces {
            let s = configured(any)?;
            let err = |what| {
                move |source| TransportError {
                    what,
                    addr: any,
                    source,
                }
            };
            s.bind_device(Some(name.as_bytes()))
                .map_err(err("SO_BINDTODEVICE"))?;
            if group.is_ipv6() {
                s.set_multicast_if_v6(ifindex(name))
                    .map_err(err("IPV6_MULTICAST_IF"))?;
            }
            s.bind(&any.into()).map_err(err("bind"))?;
            out.push((name.clone(), s.into()));
        }
        self.multicast = Some((group, out));
        Ok(self)
    }

    /// `message` to the multicast group (if any) out of every interface but `except`
    /// (the link the condition is on: the node across it must not avoid itself).
    pub fn send_group(&self, message: &super::codec::ArnMessage, except: &str) {
        let Some((group, sockets)) = &self.multicast else {
            return;
        };
        let Ok(bytes) = message.encode() else {
            return;
        };
        for (name, socket) in sockets.iter().filter(|(n, _)| n != except) {
            if let Err(e) = socket.send_to(&bytes, SocketAddr::new(*group, self.port)) {
                tracing::warn!(%group, interface = %name, error = %e, "sending ARN to the group failed");
            }
        }
    }

    /// `message` to every address of `to` (failures logged, the others still sent).
    pub fn send(&self, message: &super::codec::ArnMessage, to: &[IpAddr]) {
        let Ok(bytes) = message.encode() else {
            return;
        };
        for to in to {
            let socket = match to {
                IpAddr::V4(_) => Some(&self.v4),
                IpAddr::V6(_) => self.v6.as_ref(),
            };
            let Some(socket) = socket else { continue };
            if let Err(e) = socket.send_to(&bytes, SocketAddr::new(*to, self.port)) {
                tracing::warn!(%to, error = %e, "sending ARN failed");
            }
        }
    }
}

/// Interface index of `name` (0 when unknown).
pub fn ifindex(name: &str) -> u32 {
    nix::net::if_::if_nametoindex(name).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn loopback_datagram_reports_ttl_and_interface() {
        let rx = ArnSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
        let tx = ArnSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
        tx.send_to(&[1, 0, 5, 0], rx.local_addr()).await.unwrap();
        let mut buf = [0u8; 64];
        let d = rx.recv(&mut buf).await.unwrap();
        assert_eq!(d.len, 4);
        assert_eq!(&buf[..4], &[1, 0, 5, 0]);
        assert_eq!(d.ttl, Some(255));
        assert_eq!(d.from, tx.local_addr());
        assert_eq!(d.ifindex, Some(ifindex("lo")));
        assert_eq!(d.dst, Some("127.0.0.1".parse().unwrap()));
    }

    #[tokio::test]
    async fn ipv6_loopback_reports_hop_limit() {
        let Ok(rx) = ArnSocket::bind("[::1]:0".parse().unwrap(), None) else {
            return; // no IPv6 on this host
        };
        let tx = ArnSocket::bind("[::1]:0".parse().unwrap(), None).unwrap();
        tx.send_to(&[2, 0, 0, 0], rx.local_addr()).await.unwrap();
        let mut buf = [0u8; 64];
        let d = rx.recv(&mut buf).await.unwrap();
        assert_eq!(d.ttl, Some(255));
        assert_eq!(d.dst, Some("::1".parse().unwrap()));
    }
}
