//! TCP sockets for BGP sessions: connect and listen with the session protections users
//! expect on fabric links — GTSM (RFC 5082: send with TTL 255, accept only TTL >= 254 via
//! IP_MINTTL / IPV6_MINHOPCOUNT) and TCP MD5 signatures (RFC 2385, TCP_MD5SIG).

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use tokio::net::{TcpListener, TcpStream};

/// Session protections of one neighbor. Its `Debug` hides the MD5 key (logs).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Protection {
    /// RFC 5082 for single-hop eBGP.
    pub gtsm: bool,
    /// RFC 2385 key (at most 80 octets).
    pub md5_key: Option<String>,
}

impl std::fmt::Debug for Protection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Protection")
            .field("gtsm", &self.gtsm)
            .field("md5_key", &self.md5_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
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

/// `addr` with the zone (scope id) of `interface` when it is an IPv6 link-local address
/// (fe80::/10): the kernel refuses to connect to or bind one without it (EINVAL). Other
/// addresses come back as they are; so does a link-local one when `interface` is `None`
/// or does not exist (the kernel's refusal is then the error reported).
pub fn zoned(addr: SocketAddr, interface: Option<&str>) -> SocketAddr {
    let SocketAddr::V6(mut v6) = addr else {
        return addr;
    };
    let Some(name) = interface.filter(|_| v6.ip().is_unicast_link_local()) else {
        return addr;
    };
    let Ok(name) = std::ffi::CString::new(name) else {
        return addr;
    };
    // SAFETY: if_nametoindex reads the NUL-terminated string `name` owns.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    v6.set_scope_id(index);
    SocketAddr::V6(v6)
}

/// Connects to `peer` (from `local`, when given), with the protections applied before the
/// SYN leaves. Link-local addresses must carry their zone ([`zoned`]).
pub async fn connect(
    peer: SocketAddr,
    local: Option<SocketAddr>,
    protection: &Protection,
) -> io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(peer), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_nonblocking(true)?;
    socket.set_tcp_nodelay(true)?;
    if let Some(local) = local {
        socket.bind(&local.into())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_addresses_take_their_interface_as_zone() {
        let at = |s: &str| -> SocketAddr { s.parse().expect("address") };
        // `lo` is interface 1 in every network namespace.
        assert_eq!(
            zoned(at("[fe80::2]:179"), Some("lo")),
            at("[fe80::2%1]:179")
        );
        assert_eq!(zoned(at("[fe80::2]:179"), None), at("[fe80::2]:179"));
        assert_eq!(
            zoned(at("[fe80::2]:179"), Some("nosuch0")),
            at("[fe80::2]:179")
        );
        assert_eq!(zoned(at("[fd00::2]:179"), Some("lo")), at("[fd00::2]:179"));
        assert_eq!(zoned(at("10.0.0.2:179"), Some("lo")), at("10.0.0.2:179"));
    }
}
