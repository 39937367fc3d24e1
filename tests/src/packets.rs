//! Test frames (Ethernet, optional 802.1Q, IPv4/IPv6, UDP) and a raw sender.

use anyhow::{bail, Result};
use std::net::{Ipv4Addr, Ipv6Addr};

pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86DD;
pub const ETH_P_ARP: u16 = 0x0806;

/// Internet checksum (RFC 1071) of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in data.chunks(2) {
        let word = if chunk.len() == 2 {
            u16::from_be_bytes([chunk[0], chunk[1]])
        } else {
            u16::from_be_bytes([chunk[0], 0])
        };
        sum += u32::from(word);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

pub fn ethernet(dst: [u8; 6], src: [u8; 6], vlan: Option<u16>, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some(vid) = vlan {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + payload.len());
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]); // checksum optional in IPv4; not checked by the router
    u.extend_from_slice(payload);
    u
}

/// IPv4 header (with a correct checksum) followed by `payload`.
pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![
        0x45, 0, 0, 0, // version/IHL, DSCP, total length
        0, 1, 0, 0, // id, flags/fragment offset
        ttl, protocol, 0, 0, // TTL, protocol, checksum
    ];
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    let total = (h.len() + payload.len()) as u16;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.push(next);
    h.push(hop_limit);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(payload);
    h
}

/// A whole UDP/IPv4 frame.
pub fn udp4_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    ttl: u8,
) -> Vec<u8> {
    let mut f = ethernet(dst_mac, src_mac, None, ETH_P_IP);
    f.extend(ipv4(src, dst, 17, ttl, &udp(sport, dport, &[0u8; 18])));
    f
}

/// A whole UDP/IPv6 frame.
pub fn udp6_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    sport: u16,
    dport: u16,
    hop_limit: u8,
) -> Vec<u8> {
    let mut f = ethernet(dst_mac, src_mac, None, ETH_P_IPV6);
    f.extend(ipv6(
        src,
        dst,
        17,
        hop_limit,
        &udp(sport, dport, &[0u8; 18]),
    ));
    f
}

/// An AF_PACKET socket bound to one interface of the calling thread's namespace:
/// sends frames exactly as given.
pub struct RawSender {
    fd: libc::c_int,
}

impl RawSender {
    pub fn new(ifname: &str) -> Result<RawSender> {
        let cname = std::ffi::CString::new(ifname)?;
        // SAFETY: plain syscalls on values we own.
        unsafe {
            let ifindex = libc::if_nametoindex(cname.as_ptr());
            if ifindex == 0 {
                bail!("no interface {ifname}");
            }
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0);
            if fd < 0 {
                bail!("AF_PACKET socket: {}", std::io::Error::last_os_error());
            }
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_ifindex = ifindex as i32;
            addr.sll_protocol = 0;
            let rc = libc::bind(
                fd,
                &addr as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                bail!("bind AF_PACKET to {ifname}: {e}");
            }
            Ok(RawSender { fd })
        }
    }

    /// Sends one frame; retries briefly when the device queue is full.
    pub fn send(&self, frame: &[u8]) -> Result<()> {
        for _ in 0..1000 {
            // SAFETY: frame is a valid buffer of frame.len() bytes.
            let n = unsafe { libc::send(self.fd, frame.as_ptr().cast(), frame.len(), 0) };
            if n == frame.len() as isize {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOBUFS) && e.raw_os_error() != Some(libc::EAGAIN) {
                bail!("send: {e}");
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        bail!("send: device queue stayed full")
    }
}

impl Drop for RawSender {
    fn drop(&mut self) {
        // SAFETY: fd is ours.
        unsafe { libc::close(self.fd) };
    }
}
