//! Link facts from the kernel: interface speed (the link bandwidth when none is
//! configured), link state notifications, and a fast carrier poll.
//!
//! Why a poll beside netlink: the kernel reports carrier changes of most devices
//! (physical NICs, and veths whose peer has the same ifindex in its namespace) through
//! its "linkwatch" work, which runs at most once per second. A carrier loss can thus
//! reach RTM_NEWLINK listeners up to a second late, and a down/up flap inside that
//! second is folded into no event at all. The driver's own link state (ETHTOOL_GLINK)
//! changes at once, so reading it every few milliseconds finds a failure the far end of
//! a link caused long before linkwatch reports it. The ARN monitor reads it the same way.

/// Speed of `interface` in Gbps from sysfs; `None` when unknown (down, or a virtual
/// interface that reports -1).
pub fn interface_speed_gbps(interface: &str) -> Option<f64> {
    if interface.contains('/') || interface.is_empty() {
        return None;
    }
    let text = std::fs::read_to_string(format!("/sys/class/net/{interface}/speed")).ok()?;
    let mbps: i64 = text.trim().parse().ok()?;
    (mbps > 0).then(|| mbps as f64 / 1000.0)
}

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use tokio::io::unix::AsyncFd;

/// One interface state change from the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkEvent {
    pub interface: String,
    /// Administratively up and carrier present (IFF_UP and IFF_LOWER_UP).
    pub up: bool,
}

/// A netlink socket subscribed to link notifications (RTMGRP_LINK).
pub struct LinkWatcher {
    fd: AsyncFd<OwnedFd>,
    buf: Vec<u8>,
}

const IFF_UP: u32 = 0x1;
const IFF_LOWER_UP: u32 = 0x10000;
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const IFLA_IFNAME: u16 = 3;

impl LinkWatcher {
    /// Opens the socket in the caller's network namespace.
    pub fn open() -> io::Result<LinkWatcher> {
        // SAFETY: plain syscalls; the fd is owned right after creation.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: all-zero sockaddr_nl is valid; we set family and groups.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        addr.nl_groups = libc::RTMGRP_LINK as u32;
        // SAFETY: `addr` is a valid sockaddr_nl of the given size.
        let rc = unsafe {
            libc::bind(
                owned.as_raw_fd(),
                &addr as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `owned` keeps the descriptor open for as long as the AsyncFd holds it.
        let fd = unsafe { AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE) }
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(LinkWatcher {
            fd,
            buf: vec![0; 1 << 16],
        })
    }

    /// The link events of the next datagram (possibly none).
    pub async fn next(&mut self) -> io::Result<Vec<LinkEvent>> {
        loop {
            let mut guard = self.fd.readable().await?;
            let buf = &mut self.buf;
            let res = guard.try_io(|fd| {
                // SAFETY: `buf` is writable for its length.
                let n = unsafe {
                    libc::recv(
                        fd.as_raw_fd(),
                        buf.as_mut_ptr() as *mut libc::c_void,
                        buf.len(),
                        0,
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match res {
                Ok(Ok(n)) => return Ok(parse(&self.buf[..n])),
                // ENOBUFS: the kernel dropped notifications; the caller rescans.
                Ok(Err(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => return Ok(vec![]),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }
}

/// Reads whether `interface` is running with carrier, with one ETHTOOL_GLINK ioctl on a
/// datagram socket of the caller's namespace (the driver's link state: immediate, unlike
/// IFF_RUNNING and the operstate, which linkwatch updates late).
pub struct CarrierProbe {
    socket: OwnedFd,
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GLINK: u32 = 0x0000_000a;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

impl CarrierProbe {
    pub fn open() -> io::Result<CarrierProbe> {
        // SAFETY: plain syscall; the fd is owned right after creation.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(CarrierProbe {
            socket: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// `Some(up)`; `None` when the interface does not exist or its driver cannot tell.
    pub fn is_up(&self, interface: &str) -> Option<bool> {
        let name = interface.as_bytes();
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
            return None;
        }
        let mut value = EthtoolValue {
            cmd: ETHTOOL_GLINK,
            data: 0,
        };
        // SAFETY: an all-zero ifreq is valid; its name is NUL-terminated (length checked
        // above) and its data pointer refers to `value`, which outlives the call.
        let rc = unsafe {
            let mut req: libc::ifreq = std::mem::zeroed();
            for (d, s) in req.ifr_name.iter_mut().zip(name) {
                *d = *s as libc::c_char;
            }
            req.ifr_ifru.ifru_data = &mut value as *mut EthtoolValue as *mut libc::c_char;
            libc::ioctl(self.socket.as_raw_fd(), SIOCETHTOOL as _, &mut req)
        };
        (rc == 0).then_some(value.data != 0)
    }
}

/// Parses RTM_NEWLINK/RTM_DELLINK messages; anything malformed is skipped.
pub fn parse(mut buf: &[u8]) -> Vec<LinkEvent> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < 16 || len > buf.len() {
            break;
        }
        let msg = &buf[16..len];
        if (kind == RTM_NEWLINK || kind == RTM_DELLINK) && msg.len() >= 16 {
            let flags = u32::from_ne_bytes([msg[8], msg[9], msg[10], msg[11]]);
            let mut attrs = &msg[16..];
            let mut name = None;
            while attrs.len() >= 4 {
                let alen = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
                let atype = u16::from_ne_bytes([attrs[2], attrs[3]]);
                if alen < 4 || alen > attrs.len() {
                    break;
                }
                if atype == IFLA_IFNAME {
                    let raw = &attrs[4..alen];
                    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                    name = Some(String::from_utf8_lossy(&raw[..end]).into_owned());
                }
                attrs = &attrs[alen.next_multiple_of(4).min(attrs.len())..];
            }
            if let Some(interface) = name {
                out.push(LinkEvent {
                    interface,
                    up: kind == RTM_NEWLINK && flags & IFF_UP != 0 && flags & IFF_LOWER_UP != 0,
                });
            }
        }
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_newlink_with_name() {
        let mut m = Vec::new();
        m.extend_from_slice(&40u32.to_ne_bytes()); // nlmsg_len
        m.extend_from_slice(&RTM_NEWLINK.to_ne_bytes()); // nlmsg_type
        m.extend_from_slice(&[0; 10]); // flags, seq, pid
        m.extend_from_slice(&[0, 0, 1, 0]); // family, pad, type
        m.extend_from_slice(&7i32.to_ne_bytes()); // index
        m.extend_from_slice(&(IFF_UP | IFF_LOWER_UP).to_ne_bytes()); // flags
        m.extend_from_slice(&0u32.to_ne_bytes()); // change
        m.extend_from_slice(&8u16.to_ne_bytes()); // rta_len
        m.extend_from_slice(&IFLA_IFNAME.to_ne_bytes());
        m.extend_from_slice(b"e1\0\0");
        assert_eq!(
            parse(&m),
            [LinkEvent {
                interface: "e1".into(),
                up: true
            }]
        );
        assert_eq!(parse(&m[..20]), []);
    }
}
