//! A raw BGP peer for tests that must send what no real speaker would: messages written
//! byte by byte here (RFC 4271 §4), not by fare's codec, over a TCP connection opened from
//! inside a namespace, with a reader thread that hands every message the agent sends to a
//! channel.

use crate::bgp::read_message;
use crate::Netns;
use anyhow::{bail, ensure, Context, Result};
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

pub const OPEN: u8 = 1;
pub const UPDATE: u8 = 2;
pub const NOTIFICATION: u8 = 3;
pub const KEEPALIVE: u8 = 4;
pub const ROUTE_REFRESH: u8 = 5;

/// A message with its 19-octet header; the length field says `body`'s real length.
pub fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![0xff; 16];
    m.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
    m.push(kind);
    m.extend_from_slice(body);
    m
}

/// OPEN with hold time 9 s and the capabilities MP IPv4 unicast and 4-octet AS.
pub fn open(asn: u32, id: [u8; 4]) -> Vec<u8> {
    let caps: Vec<u8> = [vec![1, 4, 0, 1, 0, 1], {
        let mut c = vec![65, 4];
        c.extend_from_slice(&asn.to_be_bytes());
        c
    }]
    .concat();
    let mut param = vec![2, caps.len() as u8];
    param.extend_from_slice(&caps);
    let mut b = vec![4];
    let my_as = u16::try_from(asn).unwrap_or(23456);
    b.extend_from_slice(&my_as.to_be_bytes());
    b.extend_from_slice(&9u16.to_be_bytes());
    b.extend_from_slice(&id);
    b.push(param.len() as u8);
    b.extend_from_slice(&param);
    message(OPEN, &b)
}

pub fn keepalive() -> Vec<u8> {
    message(KEEPALIVE, &[])
}

/// A path attribute; the extended-length flag (0x10) is set when the value needs it.
pub fn attr(flags: u8, kind: u8, value: &[u8]) -> Vec<u8> {
    if value.len() > 255 || flags & 0x10 != 0 {
        let mut a = vec![flags | 0x10, kind];
        a.extend_from_slice(&(value.len() as u16).to_be_bytes());
        a.extend_from_slice(value);
        return a;
    }
    let mut a = vec![flags, kind, value.len() as u8];
    a.extend_from_slice(value);
    a
}

pub fn origin(v: u8) -> Vec<u8> {
    attr(0x40, 1, &[v])
}

/// AS_PATH of one AS_SEQUENCE of 4-octet ASNs (both sides sent the capability).
pub fn as_path(asns: &[u32]) -> Vec<u8> {
    let mut v = vec![2, asns.len() as u8];
    for a in asns {
        v.extend_from_slice(&a.to_be_bytes());
    }
    attr(0x40, 2, &v)
}

pub fn next_hop(a: [u8; 4]) -> Vec<u8> {
    attr(0x40, 3, &a)
}

/// NLRI / withdrawn routes field for IPv4 prefixes (address, length).
pub fn prefixes(list: &[([u8; 4], u8)]) -> Vec<u8> {
    let mut v = Vec::new();
    for (a, len) in list {
        v.push(*len);
        v.extend_from_slice(&a[..usize::from(*len).div_ceil(8)]);
    }
    v
}

pub fn update(withdrawn: &[u8], attrs: &[Vec<u8>], nlri: &[u8]) -> Vec<u8> {
    let attrs = attrs.concat();
    let mut b = (withdrawn.len() as u16).to_be_bytes().to_vec();
    b.extend_from_slice(withdrawn);
    b.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
    b.extend_from_slice(&attrs);
    b.extend_from_slice(nlri);
    message(UPDATE, &b)
}

/// One message as read from the agent: (type, body).
pub type Msg = (u8, Vec<u8>);

/// A TCP connection to the agent's BGP port from inside a namespace.
pub struct RawPeer {
    pub stream: TcpStream,
    pub rx: mpsc::Receiver<Msg>,
    stop: Arc<AtomicBool>,
    pub asn: u32,
    pub next_hop: [u8; 4],
}

impl RawPeer {
    /// Opens the connection from `ns` to `agent`:179; no message sent yet.
    pub fn connect_tcp(ns: &Netns, agent: &str, asn: u32, nh: [u8; 4]) -> Result<RawPeer> {
        let path = format!("/var/run/netns/{}", ns.name);
        let addr = format!("{agent}:179");
        let stream = std::thread::spawn(move || -> Result<TcpStream> {
            let f = std::fs::File::open(&path)?;
            // SAFETY: plain syscall on a valid fd; only this thread's namespace changes.
            let rc =
                unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
            ensure!(rc == 0, "setns: {}", std::io::Error::last_os_error());
            let sa = addr.parse()?;
            Ok(TcpStream::connect_timeout(&sa, Duration::from_secs(3))?)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("connect thread panicked"))??;
        stream.set_nodelay(true)?;
        let (tx, rx) = mpsc::channel();
        let mut reader = stream.try_clone()?;
        std::thread::spawn(move || {
            while let Some(m) = read_message(&mut reader) {
                if tx.send(m).is_err() {
                    break;
                }
            }
        });
        Ok(RawPeer {
            stream,
            rx,
            stop: Arc::new(AtomicBool::new(false)),
            asn,
            next_hop: nh,
        })
    }

    /// Connects and completes OPEN / KEEPALIVE; a keepalive thread runs until drop.
    pub fn connect(ns: &Netns, agent: &str, asn: u32, id: [u8; 4], nh: [u8; 4]) -> Result<RawPeer> {
        let mut peer = RawPeer::connect_tcp(ns, agent, asn, nh)?;
        peer.send(&open(asn, id))?;
        let mut got_open = false;
        loop {
            match peer.rx.recv_timeout(Duration::from_secs(10)) {
                Ok((OPEN, _)) => got_open = true,
                Ok((KEEPALIVE, _)) if got_open => break,
                Ok((NOTIFICATION, n)) => {
                    bail!("agent sent NOTIFICATION {n:?} during the handshake")
                }
                Ok(_) => {}
                Err(_) => bail!("no OPEN + KEEPALIVE from the agent"),
            }
        }
        peer.send(&keepalive())?;
        let mut ka = peer.stream.try_clone()?;
        let stop = peer.stop.clone();
        std::thread::spawn(move || {
            for _ in 0..600 {
                if stop.load(Ordering::Relaxed) || ka.write_all(&keepalive()).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Ok(peer)
    }

    /// Connects with a few retries (a passive neighbor accepts again once its previous
    /// session is torn down).
    pub fn reconnect(
        ns: &Netns,
        agent: &str,
        asn: u32,
        id: [u8; 4],
        nh: [u8; 4],
    ) -> Result<RawPeer> {
        let mut last = None;
        for _ in 0..40 {
            match RawPeer::connect(ns, agent, asn, id, nh) {
                Ok(p) => return Ok(p),
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(last
            .unwrap_or_else(|| anyhow::anyhow!("no attempt"))
            .context("reconnecting"))
    }

    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).context("write to agent")
    }

    /// The mandatory attributes of a valid UPDATE from this peer.
    pub fn good_attrs(&self) -> Vec<Vec<u8>> {
        vec![origin(0), as_path(&[self.asn]), next_hop(self.next_hop)]
    }

    pub fn announce(&mut self, prefix: [u8; 3]) -> Result<()> {
        let u = update(
            &[],
            &self.good_attrs(),
            &prefixes(&[([prefix[0], prefix[1], prefix[2], 0], 24)]),
        );
        self.send(&u)
    }

    /// Waits (up to `limit`) for a NOTIFICATION: (code, subcode, data).
    pub fn notification_within(&self, limit: Duration) -> Option<(u8, u8, Vec<u8>)> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            match self.rx.recv_timeout(left) {
                Ok((NOTIFICATION, n)) if n.len() >= 2 => {
                    return Some((n[0], n[1], n[2..].to_vec()))
                }
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// Waits for a NOTIFICATION (code, subcode), at most 10 s.
    pub fn notification(&self) -> Option<(u8, u8)> {
        self.notification_within(Duration::from_secs(10))
            .map(|(c, s, _)| (c, s))
    }

    /// True once the agent closed the connection (the reader saw the end), within `limit`.
    pub fn closed_within(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else {
                return false;
            };
            match self.rx.recv_timeout(left) {
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }
}

impl Drop for RawPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}
