//! Neighbors started at run time (a configuration reload adds or removes one) as at start:
//! the neighbor task, the listeners' table of who may connect, the link watch, the status
//! list the agent reads. What the running listeners cannot take (an MD5 key, a family
//! without a listener, a listener that requires GTSM) is refused with the reason.

use super::{NeighborSpec, Peer, RibTask, SpeakerCommand, SpeakerConfig};
use crate::neighbor::{Neighbor, NeighborStatus, PeerConfig, SharedStatus, Tagged};
use crate::packet::Family;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::mpsc;
use tracing::info;

/// Who the listeners hand an accepted connection to, and who gets GTSM on it.
#[derive(Default)]
pub(super) struct AcceptTable {
    pub peers: HashMap<IpAddr, mpsc::Sender<tokio::net::TcpStream>>,
    pub gtsm: HashSet<IpAddr>,
}

pub(super) type SharedAccept = Arc<RwLock<AcceptTable>>;

/// What a neighbor added at run time needs of the running speaker (empty in unit tests:
/// nothing can be added there).
#[derive(Default)]
pub(super) struct Runtime {
    pub sessions: Option<mpsc::Sender<Tagged>>,
    pub accept: SharedAccept,
    /// The listeners opened at start: (IPv6, GTSM required of every connection).
    pub listening: Vec<(bool, bool)>,
    /// Interfaces whose link events reach the speaker.
    pub watched: HashSet<String>,
    pub commands: Option<mpsc::WeakSender<SpeakerCommand>>,
    pub statuses: Arc<Mutex<Vec<SharedStatus>>>,
}

/// Starts the task of neighbor `spec`; its events go to `sessions`.
pub(super) fn spawn_neighbor(
    config: &SpeakerConfig,
    spec: &NeighborSpec,
    sessions: &mpsc::Sender<Tagged>,
) -> Peer {
    static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let generation = GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let status = Arc::new(Mutex::new(NeighborStatus::new(
        spec.address,
        spec.remote_as,
    )));
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (in_tx, in_rx) = mpsc::channel(4);
    let neighbor = Neighbor {
        config: PeerConfig {
            address: spec.address,
            remote_as: spec.remote_as,
            local_as: config.asn,
            router_id: config.router_id,
            port: config.port,
            hold_time: config.hold_time,
            connect_retry: config.connect_retry,
            connect_retry_max: config.connect_retry_max,
            passive: spec.passive,
            local_address: spec.local_address,
            interface: spec.interface.clone(),
            protection: spec.protection.clone(),
            families: vec![Family::Ipv4Unicast, Family::Ipv6Unicast],
            session_color: config.dpf.session(spec.color),
            orf_receive: spec.orf_receive,
            orf_send: spec.orf_send.clone(),
        },
        status: status.clone(),
        incoming: in_rx,
        events: sessions.clone(),
        generation,
        commands: cmd_rx,
    };
    tokio::spawn(neighbor.run());
    Peer {
        spec: spec.clone(),
        status,
        commands: cmd_tx,
        incoming: in_tx,
        session: None,
        link_gbps: spec.link_gbps(),
        link_up: true,
        orf: HashMap::new(),
        orf_wait_until: None,
        via: spec.address.to_string(),
        drained: false,
        generation,
    }
}

impl RibTask {
    /// [`SpeakerCommand::AddNeighbor`].
    pub(super) fn add_neighbor(&mut self, spec: NeighborSpec) -> Result<(), String> {
        let a = spec.address;
        if self.peers.contains_key(&a) {
            return Err(format!("neighbor {a} is already configured"));
        }
        let Some(sessions) = self.runtime.sessions.clone() else {
            return Err("this speaker cannot start neighbors".into());
        };
        self.can_listen_for(&spec)?;
        self.start_neighbor(spec, &sessions);
        Ok(())
    }

    /// Starts a neighbor the checks of [`Self::add_neighbor`] (or of
    /// [`Self::replace_neighbor`]) let through: its task, its entries in the listeners'
    /// table and the status list, and the watch of its interface.
    fn start_neighbor(&mut self, spec: NeighborSpec, sessions: &mpsc::Sender<Tagged>) {
        let a = spec.address;
        let peer = spawn_neighbor(&self.config, &spec, sessions);
        if let Ok(mut t) = self.runtime.accept.write() {
            t.peers.insert(a, peer.incoming.clone());
            if spec.protection.gtsm {
                t.gtsm.insert(a);
            }
        }
        if let Ok(mut l) = self.runtime.statuses.lock() {
            l.push(peer.status.clone());
        }
        if let Some(i) = &spec.interface {
            let tx = self.runtime.commands.as_ref().and_then(|w| w.upgrade());
            if let Some(tx) = tx.filter(|_| self.runtime.watched.insert(i.clone())) {
                let one = HashSet::from([i.clone()]);
                tokio::spawn(super::watch_links(one, self.config.link_poll, tx));
            }
        }
        info!(peer = %a, remote_as = spec.remote_as, "neighbor added to the configuration");
        self.config.neighbors.push(spec);
        self.peers.insert(a, peer);
    }

    /// [`SpeakerCommand::ReplaceNeighbor`]: the neighbor's configuration changed. A
    /// change of a session parameter ends its session (Cease / Other Configuration Change)
    /// and starts a new task with the new one; any other change (what is advertised to
    /// it, how its routes are read) keeps the session and decides every prefix again, so
    /// only UPDATEs that differ go out. Other sessions are not touched.
    pub(super) fn replace_neighbor(&mut self, spec: NeighborSpec) -> Result<Replaced, String> {
        let a = spec.address;
        let Some(old) = self.peers.get(&a).map(|p| p.spec.clone()) else {
            return Err(format!("neighbor {a} is not configured"));
        };
        if session_changed(&old, &spec) {
            // Every check before the old session ends: a refusal leaves it running. An
            // unchanged MD5 key is already on the listeners for this address.
            if old.protection.md5_key != spec.protection.md5_key {
                return Err("its MD5 key is set on the listening sockets at start".into());
            }
            let Some(sessions) = self.runtime.sessions.clone() else {
                return Err("this speaker cannot start neighbors".into());
            };
            let mut check = spec.clone();
            check.protection.md5_key = None;
            self.can_listen_for(&check)?;
            self.end_neighbor(a, crate::neighbor::Command::Reconfigure);
            self.start_neighbor(spec, &sessions);
            return Ok(Replaced::Session);
        }
        let refresh = old.fib_suppress != spec.fib_suppress;
        if let Some(p) = self.peers.get_mut(&a) {
            // A bandwidth that changed with it relabels every group, as `set_bandwidth` does.
            let gbps = spec.link_gbps();
            self.batch.relabel |= p.link_gbps != gbps;
            p.link_gbps = gbps;
            p.spec = spec.clone();
        }
        if let Some(n) = self.config.neighbors.iter_mut().find(|n| n.address == a) {
            *n = spec;
        }
        info!(peer = %a, "neighbor's policy changed");
        self.dirty.extend(self.rib.prefixes());
        if refresh {
            // FIB-Suppress tags routes as they are received: have them sent again.
            self.request_refresh(Some(a));
        }
        Ok(Replaced::Policy)
    }

    /// Whether the listeners opened at start can take `spec`'s connections.
    fn can_listen_for(&self, spec: &NeighborSpec) -> Result<(), String> {
        if spec.protection.md5_key.is_some() {
            return Err("its MD5 key is set on the listening sockets at start".into());
        }
        if !self.config.listen {
            return Ok(());
        }
        let v6 = spec.address.is_ipv6();
        match self.runtime.listening.iter().find(|l| l.0 == v6) {
            None => Err(format!(
                "no {} listener was opened at start (no such neighbor then)",
                if v6 { "IPv6" } else { "IPv4" }
            )),
            Some(&(_, true)) if !spec.protection.gtsm => {
                Err("the listener requires GTSM (every neighbor of its family had it)".into())
            }
            Some(_) => Ok(()),
        }
    }

    /// Forgets a removed neighbor in the listeners' table and the status list.
    pub(super) fn forget_neighbor(&mut self, a: IpAddr) {
        if let Ok(mut t) = self.runtime.accept.write() {
            t.peers.remove(&a);
            t.gtsm.remove(&a);
        }
        if let Ok(mut l) = self.runtime.statuses.lock() {
            l.retain(|s| s.lock().map(|s| s.address != a).unwrap_or(true));
        }
        self.config.neighbors.retain(|n| n.address != a);
    }
}

/// What a changed neighbor configuration did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replaced {
    /// A session parameter changed: the session was reset with the new ones.
    Session,
    /// Only policy changed: the session kept, the routes decided again.
    Policy,
}

/// Whether `new` differs from `old` in what the session itself is made of (OPEN, TCP,
/// the interface it runs over); the rest is policy, applied to the running session.
fn session_changed(old: &NeighborSpec, new: &NeighborSpec) -> bool {
    old.remote_as != new.remote_as
        || old.interface != new.interface
        || old.passive != new.passive
        || old.local_address != new.local_address
        || old.protection != new.protection
        || old.color != new.color
        || old.orf_receive != new.orf_receive
        || old.orf_send != new.orf_send
}
