//! TCP sockets for BGP sessions: connect and listen with the session protections users
//! expect on fabric links — GTSM (RFC 5082: send with TTL 255, accept only TTL >= 254 via
//! IP_MINTTL / IPV6_MINHOPCOUNT) and TCP MD5 signatures (RFC 2385, TCP_MD5SIG).

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use tokio::net::{TcpListener, TcpStream};

/// Session protections of one neighbor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Protection {
    /// RFC 5082 for single-hop eBGP.
    pub gtsm: bool,
    /// RFC 2385 key (at most 80 octets).
    pub md5_key: Option<String>,
}

/// Linux `struct tcp_md5sig` (include/uapi/linux/tcp.h).
#[repr(C)]
struct TcpMd5Sig {
    addr: libc::sockaddr_storage,
    flags: u8,
    prefixlen: u8,
    keylen: u16,
    ifindex: i32,
    key: [u8; 80],
}

fn setsockopt<T>(fd: i32, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live T of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Installs (or with `None` removes) the MD5 key for `peer` on `socket`.
pub fn set_md5(socket: &impl AsRawFd, peer: IpAddr, key: Option<&str>) -> io::Result<()> {
    let key = key.unwrap_or("").as_bytes();
    if key.len() > 80 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "TCP MD5 key longer than 80 octets",
        ));
    }
    let sa = SockAddr::from(SocketAddr::new(peer, 0));
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut sig: TcpMd5Sig = unsafe { std::mem::zeroed() };
    // SAFETY: `sa` holds at most a sockaddr_storage worth of bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(
            sa.as_ptr() as *const u8,
            &mut sig.addr as *mut _ as *mut u8,
            sa.len() as usize,
        );
    }
    sig.keylen = key.len() as u16;
    sig.key[..key.len()].copy_from_slice(key);
    setsockopt(
        socket.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_MD5SIG,
        &sig,
    )
}

/// Sends with TTL/hop limit 255 and drops received segments below 254 (RFC 5082).
pub fn set_gtsm(socket: &impl AsRawFd, v6: bool) -> io::Result<()> {
    let fd = socket.as_raw_fd();
    let ttl: libc::c_int = 255;
    let min: libc::c_int = 254;
    if v6 {
        setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS, &ttl)?;
        setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_MINHOPCOUNT, &min)
    } else {
        setsockopt(fd, libc::IPPROTO_IP, libc::IP_TTL, &ttl)?;
        setsockopt(fd, libc::IPPROTO_IP, libc::IP_MINTTL, &min)
    }
}

/// Connects to `peer`, with the protections applied before the SYN leaves.
pub async fn connect(
    peer: SocketAddr,
    local: Option<IpAddr>,
    protection: &Protection,
) -> io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(peer), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_nonblocking(true)?;
    socket.set_tcp_nodelay(true)?;
    if let Some(local) = local {
        socket.bind(&SocketAddr::new(local, 0).into())?;
    }
    if protection.gtsm {
        set_gtsm(&socket, peer.is_ipv6())?;
    }
    if let Some(key) = &protection.md5_key {
        set_md5(&socket, peer.ip(), Some(key))?;
    }
    let std_stream: std::net::TcpStream = socket.into();
    let stream = tokio::net::TcpSocket::from_std_stream(std_stream);
    stream.connect(peer).await
}

/// Listens on `addr` (IPv6 sockets are IPv6-only; run one listener per family).
pub fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(128)?;
    TcpListener::from_std(socket.into())
}
