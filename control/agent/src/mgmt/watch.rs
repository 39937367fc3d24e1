//! The event stream behind `Watch` (`fare watch`): session, route, group, bandwidth and
//! ARN changes, numbered, with a snapshot for new subscribers.
//!
//! One mutex orders everything: publishing numbers the event, updates the latest-state
//! mirror the snapshots are made of and sends it on the broadcast channel, all under the
//! lock; a subscriber is added to the channel and copies the mirror under the same lock.
//! So a snapshot at `seq = S` holds exactly the events up to S and the subscription
//! delivers S+1, S+2... with nothing missed or repeated. A subscriber that falls more than
//! [`CAPACITY`] events behind gets a new snapshot marked `resync` instead.

use super::pb;
use pb::watch_event::Event;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// Events kept for slow subscribers before they must resync.
pub const CAPACITY: usize = 4096;

/// The shared publisher; cheap to clone.
#[derive(Clone, Debug)]
pub struct EventHub(Arc<Mutex<Hub>>);

#[derive(Debug)]
struct Hub {
    seq: u64,
    tx: broadcast::Sender<pb::WatchEvent>,
    sessions: BTreeMap<String, pb::SessionChange>,
    routes: BTreeMap<(String, String), pb::RouteChange>,
    groups: BTreeMap<String, pb::GroupChange>,
    bandwidths: BTreeMap<String, pb::BandwidthChange>,
    arn: BTreeMap<(String, String), pb::ArnChange>,
}

impl Default for EventHub {
    fn default() -> Self {
        EventHub::with_capacity(CAPACITY)
    }
}

impl EventHub {
    pub fn with_capacity(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        EventHub(Arc::new(Mutex::new(Hub {
            seq: 0,
            tx,
            sessions: BTreeMap::new(),
            routes: BTreeMap::new(),
            groups: BTreeMap::new(),
            bandwidths: BTreeMap::new(),
            arn: BTreeMap::new(),
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Hub> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Numbers and sends `event` unless it changes nothing the mirror holds (a session
    /// polled again in the same state). Returns its number.
    /// Publishes `change` to every subscriber (None: it changed nothing, dropped).
    pub fn publish(&self, change: crate::changes::Change) -> Option<u64> {
        self.publish_event(super::views::event_of(&change))
    }

    fn publish_event(&self, event: Event) -> Option<u64> {
        let mut hub = self.lock();
        if !hub.apply(&event) {
            return None;
        }
        hub.seq += 1;
        let seq = hub.seq;
        // No subscriber is not an error: the mirror still moves on.
        let _ = hub.tx.send(pb::WatchEvent {
            seq,
            event: Some(event),
        });
        Some(seq)
    }

    /// A snapshot of the current state and the subscription that continues it.
    pub fn subscribe(&self, resync: bool) -> (pb::WatchEvent, broadcast::Receiver<pb::WatchEvent>) {
        let hub = self.lock();
        let rx = hub.tx.subscribe();
        let snapshot = pb::Snapshot {
            resync,
            sessions: hub.sessions.values().cloned().collect(),
            routes: hub.routes.values().cloned().collect(),
            groups: hub.groups.values().cloned().collect(),
            bandwidths: hub.bandwidths.values().cloned().collect(),
            arn: hub.arn.values().cloned().collect(),
        };
        let first = pb::WatchEvent {
            seq: hub.seq,
            event: Some(Event::Snapshot(snapshot)),
        };
        (first, rx)
    }
}

/// Puts `new` at `key` unless it is there already; false when nothing changed.
fn put<K: Ord, V: PartialEq>(map: &mut BTreeMap<K, V>, key: K, new: V) -> bool {
    if map.get(&key) == Some(&new) {
        return false;
    }
    map.insert(key, new);
    true
}

impl Hub {
    /// Updates the mirror; false when the event changes nothing.
    fn apply(&mut self, event: &Event) -> bool {
        match event {
            Event::Snapshot(_) => false,
            Event::Session(s) => put(&mut self.sessions, s.neighbor.clone(), s.clone()),
            Event::Route(r) => {
                let route = r.route.clone().unwrap_or_default();
                let key = (route.prefix.clone(), route.source.clone());
                if r.withdrawn {
                    self.routes.remove(&key).is_some()
                } else {
                    put(&mut self.routes, key, r.clone())
                }
            }
            Event::Group(g) => {
                let prefix = g
                    .group
                    .as_ref()
                    .map(|g| g.prefix.clone())
                    .unwrap_or_default();
                if g.removed {
                    self.groups.remove(&prefix).is_some()
                } else {
                    put(&mut self.groups, prefix, g.clone())
                }
            }
            Event::Bandwidth(b) => put(&mut self.bandwidths, b.neighbor.clone(), b.clone()),
            Event::Arn(a) => {
                let key = (a.prefix.clone(), a.via.clone());
                if a.removed || a.share.is_some() {
                    put(&mut self.arn, key, a.clone())
                } else {
                    // Back in: the snapshot lists only members an ARN holds out.
                    self.arn.remove(&key).is_some()
                }
            }
        }
    }
}

/// Streams the snapshot then every event to `tx` until the client goes away or
/// `stop` fires; a lagging client gets a new snapshot (`resync`).
pub async fn serve(
    hub: EventHub,
    tx: tokio::sync::mpsc::Sender<Result<pb::WatchEvent, tonic::Status>>,
    stop: tokio_util::sync::CancellationToken,
) {
    let (mut first, mut rx) = hub.subscribe(false);
    loop {
        if tx.send(Ok(first)).await.is_err() {
            return;
        }
        loop {
            let next = tokio::select! {
                n = rx.recv() => n,
                _ = stop.cancelled() => return,
            };
            match next {
                Ok(ev) => {
                    if tx.send(Ok(ev)).await.is_err() {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(
                        skipped = n,
                        "watch client fell behind: sending a new snapshot"
                    );
                    (first, rx) = hub.subscribe(true);
                    break;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(n: &str, state: &str) -> Event {
        Event::Session(pb::SessionChange {
            neighbor: n.into(),
            state: state.into(),
            ..Default::default()
        })
    }

    fn route(prefix: &str, withdrawn: bool) -> Event {
        Event::Route(pb::RouteChange {
            route: Some(pb::Route {
                prefix: prefix.into(),
                source: "bgp".into(),
                paths: vec![],
            }),
            withdrawn,
        })
    }

    /// Sequence numbers follow publication order, one per change; repeating a state
    /// publishes nothing; a subscriber's snapshot holds what was published before it and
    /// its stream starts right after.
    #[tokio::test]
    async fn snapshot_then_every_later_event_in_order() {
        let hub = EventHub::default();
        assert_eq!(
            hub.publish_event(session("10.0.0.1", "Established")),
            Some(1)
        );
        assert_eq!(hub.publish_event(session("10.0.0.1", "Established")), None);
        assert_eq!(hub.publish_event(route("192.0.2.0/24", false)), Some(2));
        let (first, mut rx) = hub.subscribe(false);
        assert_eq!(first.seq, 2);
        let Some(Event::Snapshot(s)) = first.event else {
            panic!("no snapshot first")
        };
        assert!(!s.resync);
        assert_eq!(s.sessions.len(), 1);
        assert_eq!(s.routes.len(), 1);
        assert_eq!(hub.publish_event(route("192.0.2.0/24", true)), Some(3));
        assert_eq!(
            hub.publish_event(route("192.0.2.0/24", true)),
            None,
            "already gone"
        );
        assert_eq!(hub.publish_event(session("10.0.0.1", "Idle")), Some(4));
        let seqs: Vec<u64> = (0..2)
            .filter_map(|_| rx.try_recv().ok())
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, vec![3, 4]);
        let (again, _) = hub.subscribe(false);
        let Some(Event::Snapshot(s)) = again.event else {
            panic!()
        };
        assert!(s.routes.is_empty(), "the withdrawn route left the mirror");
        assert_eq!(s.sessions[0].state, "Idle");
    }

    /// Publishers on other threads while clients subscribe at random points: every
    /// client's snapshot plus its stream is exactly events 1..=N, each once, in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_subscribers_miss_nothing() {
        const N: u64 = 2000;
        let hub = EventHub::default();
        let publisher = {
            let hub = hub.clone();
            std::thread::spawn(move || {
                for i in 0..N {
                    hub.publish_event(session("10.0.0.1", &format!("s{i}")));
                }
            })
        };
        let mut clients = Vec::new();
        for _ in 0..8 {
            clients.push(hub.subscribe(false));
            tokio::task::yield_now().await;
        }
        publisher.join().expect("publisher");
        for (first, mut rx) in clients {
            let mut next = first.seq + 1;
            while let Ok(ev) = rx.try_recv() {
                assert_eq!(ev.seq, next);
                let Some(Event::Session(s)) = ev.event else {
                    panic!()
                };
                assert_eq!(s.state, format!("s{}", next - 1));
                next += 1;
            }
            assert_eq!(next, N + 1, "the stream ends at the last event");
        }
    }

    /// A client slower than the channel's capacity gets a resync snapshot with the
    /// latest state, then the events after it.
    #[tokio::test]
    async fn a_lagging_client_gets_a_resync_snapshot() {
        let hub = EventHub::with_capacity(4);
        let (tx, mut out) = tokio::sync::mpsc::channel(1);
        let stop = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(serve(hub.clone(), tx, stop.clone()));
        let first = out.recv().await.expect("snapshot").expect("ok");
        assert_eq!(first.seq, 0);
        // The client reads nothing while 10 events go by (more than 4 + 1 buffered).
        for i in 0..10 {
            hub.publish_event(session("10.0.0.1", &format!("s{i}")));
        }
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while let Ok(Some(Ok(ev))) = tokio::time::timeout_at(deadline, out.recv()).await {
            let resync = matches!(&ev.event, Some(Event::Snapshot(s)) if s.resync);
            seen.push((ev.seq, resync));
            if resync {
                break;
            }
        }
        let (seq, resync) = *seen.last().expect("events");
        assert!(resync, "no resync in {seen:?}");
        assert_eq!(seq, 10, "the resync snapshot is at the latest event");
        stop.cancel();
        let _ = task.await;
    }
}
