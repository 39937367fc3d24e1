//! The RIB task's inputs: session events of the neighbor tasks (up, UPDATE, ROUTE-REFRESH
//! and ORF, down) and the speaker's commands (link events, bandwidth, refresh).

use super::mpson::{apply_orf, peer_sends_orf};
use super::{RibTask, SpeakerEvent};
use crate::community::FibSuppress;
use crate::dpf;
use crate::neighbor::{Command, SessionEvent};
use crate::packet::{color, link_bandwidth, nlri, orf, AsPath, PathAttributes, Update};
use crate::rib::EntryId;
use ipnet::IpNet;
use rustc_hash::FxHashSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use tracing::{debug, info, warn};

impl RibTask {
    /// A neighbor task's event, dropped when the task is not the current one of its
    /// address (the neighbor was removed, or replaced after a configuration change).
    pub(super) async fn on_tagged(&mut self, (generation, ev): crate::neighbor::Tagged) {
        let peer = match &ev {
            SessionEvent::Up { peer, .. }
            | SessionEvent::Update { peer, .. }
            | SessionEvent::RouteRefresh { peer, .. }
            | SessionEvent::Down { peer, .. } => *peer,
        };
        if self.peers.get(&peer).map(|p| p.generation) == Some(generation) {
            self.on_session(ev).await;
        } else {
            debug!(%peer, generation, "event of a replaced neighbor task dropped");
        }
    }

    pub(super) async fn on_session(&mut self, ev: SessionEvent) {
        match ev {
            SessionEvent::Up { peer, info } => {
                if let Some(p) = self.peers.get_mut(&peer) {
                    // RFC 5291 §5: a neighbor that will send an ORF gets no UPDATE before
                    // it (or before the wait ends).
                    p.orf_wait_until = (p.spec.orf_receive && peer_sends_orf(&info))
                        .then(|| tokio::time::Instant::now() + self.config.orf_wait);
                    p.session = Some(info);
                    self.rib.adj_out.remove(&peer);
                    self.dirty.extend(self.rib.prefixes());
                    self.neighbor_event(peer).await;
                }
            }
            SessionEvent::Down { peer, .. } => {
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.session = None;
                    // ORFs live as long as the session that carried them (RFC 5291 §5).
                    p.orf.clear();
                    p.orf_wait_until = None;
                }
                let gone = self.rib.forget_peer(peer);
                self.dirty.extend(gone);
                self.neighbor_event(peer).await;
            }
            SessionEvent::RouteRefresh {
                peer,
                family: Some(family),
                orf: Some(filter),
            } => {
                // New filter entries: re-evaluate what the neighbor gets (routes it no longer
                // permits are withdrawn), now or at the next plain refresh (DEFER).
                let Some(p) = self.peers.get_mut(&peer) else {
                    return;
                };
                let list = p.orf.entry(family).or_default();
                apply_orf(list, &filter.entries);
                info!(%peer, ?family, entries = list.len(), when = ?filter.when, "ORF received");
                if filter.when == orf::When::Immediate && p.orf_wait_until.take().is_some() {
                    // The first ORF: now the initial UPDATEs, filtered.
                    self.dirty.extend(self.rib.prefixes());
                } else if filter.when == orf::When::Immediate {
                    self.dirty
                        .extend(self.rib.prefixes().filter(|p| nlri::family_of(p) == family));
                }
            }
            SessionEvent::RouteRefresh { peer, family, .. } => {
                // Re-send this family's Adj-RIB-Out (RFC 2918 §4): forget what was sent.
                // A neighbor we wait for asks for its routes now (its ORF entries, if
                // any, came deferred): the wait is over.
                if let Some(p) = self.peers.get_mut(&peer) {
                    if p.orf_wait_until.take().is_some() {
                        self.dirty.extend(self.rib.prefixes());
                    }
                }
                let of_family = |p: &IpNet| family.is_none_or(|f| nlri::family_of(p) == f);
                if let Some(t) = self.rib.adj_out.get_mut(&peer) {
                    t.retain(|p, _| !of_family(p));
                }
                self.dirty
                    .extend(self.rib.prefixes().filter(|p| of_family(p)));
            }
            SessionEvent::Update { peer, update } => {
                // Malformed UPDATEs are rare: refresh the neighbor's counters in the views.
                let malformed = !update.errors.is_empty();
                self.on_update(peer, *update);
                if malformed {
                    self.neighbor_event(peer).await;
                }
            }
        }
    }

    /// Reports `peer`'s session down for `reason` before the routes it carried go, so
    /// that watchers see the cause before its effects; the neighbor task's own report
    /// (counters, the state it settles in) follows.
    async fn session_lost(&self, peer: IpAddr, reason: &str) {
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        let status = p.status.lock().ok().map(|s| s.clone());
        if let Some(mut s) = status.filter(|s| s.state == crate::fsm::State::Established) {
            s.state = crate::fsm::State::Active;
            s.last_error = Some(reason.to_string());
            let _ = self.events.send(SpeakerEvent::Neighbor(s)).await;
        }
    }

    pub(super) async fn neighbor_event(&self, peer: IpAddr) {
        if let Some(p) = self.peers.get(&peer) {
            let status = p.status.lock().ok().map(|s| s.clone());
            if let Some(s) = status {
                let _ = self.events.send(SpeakerEvent::Neighbor(s)).await;
            }
        }
    }

    /// Sends ROUTE-REFRESH for every negotiated family to `neighbor` (or to all), when
    /// Established and the peer advertised the capability; returns who was asked.
    pub(super) fn request_refresh(&self, neighbor: Option<IpAddr>) -> Vec<IpAddr> {
        let mut asked: Vec<IpAddr> = self
            .peers
            .iter()
            .filter(|(a, _)| neighbor.is_none_or(|n| n == **a))
            .filter_map(|(a, p)| {
                let info = p.session.as_ref().filter(|i| i.route_refresh)?;
                p.commands
                    .send(Command::Refresh(info.families.clone()))
                    .ok()
                    .map(|_| *a)
            })
            .collect();
        asked.sort();
        asked
    }

    /// Lists a prefix whose paths changed for the next flush (once).
    fn queue(&mut self, prefix: IpNet, entry: EntryId) {
        if self.rib.queue(entry) {
            self.dirty.push(prefix, entry);
        }
    }

    pub(super) fn on_update(&mut self, peer: IpAddr, u: Update) {
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        let remote_as = p.spec.remote_as;
        let session_color = p.spec.color;
        let tag_fib_suppress = p.spec.fib_suppress;
        let accept_link_bandwidth = p.spec.link_bandwidth.accepts();
        for prefix in u.withdrawn_all().collect::<Vec<_>>() {
            if let Some(entry) = self.rib.forget_at(peer, prefix) {
                self.queue(prefix, entry);
            }
        }
        let announced: Vec<IpNet> = u.announced().collect();
        if announced.is_empty() {
            return;
        }
        let rules = Import {
            local_as: self.config.asn,
            router_id: self.config.router_id,
            remote_as,
            session_color,
            fib_suppress: tag_fib_suppress.then_some(self.config.policy.fib_suppress_subtype),
        };
        let withdraw = u.treat_as_withdraw();
        let attrs = match rules.apply(u.attributes, withdraw) {
            Ok(a) => a,
            Err(why) => {
                match why {
                    Refused::FirstAs => {
                        warn!(%peer, "first AS of AS_PATH is not the neighbor's: treat-as-withdraw")
                    }
                    Refused::Color => {
                        debug!(%peer, "route color mismatches the session color: refused");
                        if let Some(p) = self.peers.get(&peer) {
                            if let Ok(mut st) = p.status.lock() {
                                st.color_mismatched_routes += announced.len() as u64;
                            }
                        }
                    }
                    Refused::TreatAsWithdraw | Refused::Loop => {}
                }
                for prefix in announced {
                    if let Some(entry) = self.rib.forget_at(peer, prefix) {
                        self.queue(prefix, entry);
                    }
                }
                return;
            }
        };
        let mut attrs = attrs;
        if accept_link_bandwidth {
            self.drop_unusable_link_bandwidth(peer, &mut attrs);
        }
        let attrs = Arc::new(attrs);
        for prefix in announced {
            if let Some(entry) = self.rib.learn_at(peer, prefix, attrs.clone()) {
                self.queue(prefix, entry);
            }
        }
    }

    /// RFC 10005 values that are NaN, infinite or negative: the community is ignored
    /// (dropped, so it reaches neither the decision nor other neighbors) and counted.
    fn drop_unusable_link_bandwidth(&self, peer: IpAddr, attrs: &mut PathAttributes) {
        let bad = link_bandwidth::invalid_count(&attrs.ext_communities);
        if bad == 0 {
            return;
        }
        attrs
            .ext_communities
            .retain(|c| link_bandwidth::read(c) != link_bandwidth::Read::Invalid);
        debug!(%peer, bad, "Link Bandwidth community with an unusable value ignored");
        if let Some(p) = self.peers.get(&peer) {
            if let Ok(mut st) = p.status.lock() {
                st.link_bandwidth_ignored += bad as u64;
            }
        }
    }

    pub(super) async fn on_link(&mut self, interface: &str, up: bool, speed_gbps: Option<f64>) {
        let mut changed = false;
        let mut down = Vec::new();
        for (addr, p) in self.peers.iter_mut() {
            if p.spec.interface.as_deref() != Some(interface) {
                continue;
            }
            if p.spec.bandwidth_gbps.is_none() && speed_gbps.is_some() && p.link_gbps != speed_gbps
            {
                p.link_gbps = speed_gbps;
                changed = true;
            }
            if p.link_up != up {
                info!(peer = %addr, %interface, up, "link event");
                p.link_up = up;
                changed = true;
                let _ = p
                    .commands
                    .send(if up { Command::Kick } else { Command::Reset });
                if !up {
                    p.session = None;
                    p.orf_wait_until = None;
                    down.push(*addr);
                }
            }
        }
        for addr in down {
            self.session_lost(addr, "link down").await;
            let gone = self.rib.forget_peer(addr);
            self.dirty.extend(gone);
        }
        if changed {
            // A link's bandwidth feeds every weight and every advertised value.
            self.dirty.extend(self.rib.prefixes());
            self.batch.relabel = true;
        }
    }

    /// [`super::SpeakerCommand::AdminState`]: the neighbor task sends the Cease and
    /// reports the session down (its routes go then), or starts again.
    pub(super) fn admin_state(&mut self, neighbor: IpAddr, down: Option<String>) -> bool {
        let Some(p) = self.peers.get(&neighbor) else {
            return false;
        };
        info!(peer = %neighbor, down = down.is_some(), "administrative state set");
        let cmd = match down {
            Some(message) => Command::AdminDown(message),
            None => Command::AdminUp,
        };
        p.commands.send(cmd).is_ok()
    }

    /// [`super::SpeakerCommand::SoftReset`]: ROUTE-REFRESH to the neighbor, and what it
    /// was sent is forgotten so that the next flush sends every route again.
    pub(super) fn soft_reset(&mut self, neighbor: IpAddr) -> bool {
        if !self.peers.contains_key(&neighbor) {
            return false;
        }
        let asked = self.request_refresh(Some(neighbor));
        info!(peer = %neighbor, refresh = !asked.is_empty(), "soft reset");
        self.rib.adj_out.remove(&neighbor);
        self.dirty.extend(self.rib.prefixes());
        true
    }

    /// [`super::SpeakerCommand::Drain`]: every weight and advertised value may use the
    /// links whose state changed, so every prefix is decided again.
    pub(super) fn drain(
        &mut self,
        neighbor: Option<IpAddr>,
        interface: Option<&str>,
        drained: bool,
    ) -> Vec<IpAddr> {
        let mut matched = Vec::new();
        for (addr, p) in self.peers.iter_mut() {
            let hit = neighbor == Some(*addr)
                || (interface.is_some() && p.spec.interface.as_deref() == interface);
            if !hit {
                continue;
            }
            if p.drained != drained {
                info!(peer = %addr, drained, "link drain changed");
                p.drained = drained;
                self.dirty.extend(self.rib.prefixes());
            }
            matched.push(*addr);
        }
        matched.sort();
        matched
    }

    /// [`SpeakerCommand::RemoveNeighbor`]: Cease / Peer De-configured to the neighbor, its
    /// task stopped, its routes withdrawn (the prefixes they reached decided again). A
    /// connection from its address is refused from then on (nothing takes it).
    pub(super) fn remove_neighbor(&mut self, neighbor: IpAddr) -> bool {
        self.end_neighbor(neighbor, Command::Deconfigure)
    }

    /// Stops the neighbor's task with `last` (its NOTIFICATION) and forgets the neighbor
    /// and its routes.
    pub(super) fn end_neighbor(&mut self, neighbor: IpAddr, last: Command) -> bool {
        let Some(p) = self.peers.remove(&neighbor) else {
            return false;
        };
        info!(peer = %neighbor, "neighbor removed from the configuration");
        let _ = p.commands.send(last);
        self.forget_neighbor(neighbor);
        let gone = self.rib.forget_peer(neighbor);
        self.dirty.extend(gone);
        true
    }

    /// [`SpeakerCommand::SetPrefixes`]: the prefixes originated from now on; only the
    /// prefixes added or removed are decided again (and, toward `summary_only`
    /// neighbors, whatever an aggregate added or removed covers).
    pub(super) fn set_prefixes(&mut self, prefixes: &[IpNet]) -> (Vec<IpNet>, Vec<IpNet>) {
        let new: FxHashSet<IpNet> = prefixes.iter().map(|p| p.trunc()).collect();
        let mut added: Vec<IpNet> = new.difference(&self.rib.local).copied().collect();
        let mut removed: Vec<IpNet> = self.rib.local.difference(&new).copied().collect();
        added.sort();
        removed.sort();
        if added.is_empty() && removed.is_empty() {
            return (added, removed);
        }
        info!(?added, ?removed, "originated prefixes changed");
        self.rib.local = new;
        self.config.prefixes = prefixes.to_vec();
        self.dirty.extend(added.iter().chain(&removed).copied());
        if self.peers.values().any(|p| p.spec.summary_only) {
            self.dirty.extend(self.rib.prefixes());
        }
        (added, removed)
    }

    /// [`SpeakerCommand::SetBandwidth`]: the new value becomes the neighbor's configured
    /// one (link events no longer change it); `None` goes back to the interface speed.
    pub(super) fn set_bandwidth(
        &mut self,
        neighbor: Option<IpAddr>,
        interface: Option<&str>,
        gbps: Option<f64>,
    ) -> Vec<(IpAddr, Option<f64>)> {
        let mut matched = Vec::new();
        for (addr, p) in self.peers.iter_mut() {
            let hit = neighbor == Some(*addr)
                || (interface.is_some() && p.spec.interface.as_deref() == interface);
            if !hit {
                continue;
            }
            p.spec.bandwidth_gbps = gbps;
            let now = p.spec.link_gbps();
            if p.link_gbps != now {
                info!(peer = %addr, from = ?p.link_gbps, to = ?now, "link bandwidth set");
                p.link_gbps = now;
                // Every weight and advertised value may use this link.
                self.dirty.extend(self.rib.prefixes());
                self.batch.relabel = true;
            }
            matched.push((*addr, now));
        }
        matched.sort_by_key(|m| m.0);
        matched
    }
}

/// Why an UPDATE's routes are not accepted (they are withdrawn from the neighbor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// RFC 7606: an attribute error that asks for treat-as-withdraw.
    TreatAsWithdraw,
    /// RFC 4271 §9.1.2: our AS is on the AS_PATH.
    Loop,
    /// RFC 4271 §6.3: the first AS is not the neighbor's (treat-as-withdraw, RFC 7606).
    FirstAs,
    /// DPF §2.1.2: the route's color mismatches the session color.
    Color,
}

/// The import rules of one neighbor.
pub(super) struct Import {
    pub local_as: u32,
    pub router_id: Ipv4Addr,
    pub remote_as: u32,
    /// DPF session color of the neighbor.
    pub session_color: Option<u32>,
    /// Tag the routes with FIB-Suppress (this subtype) unless they carry one.
    pub fib_suppress: Option<u8>,
}

impl Import {
    /// The attributes the routes of an UPDATE are stored with, or why they are refused.
    pub(super) fn apply(
        &self,
        mut a: PathAttributes,
        treat_as_withdraw: bool,
    ) -> Result<PathAttributes, Refused> {
        if treat_as_withdraw {
            return Err(Refused::TreatAsWithdraw);
        }
        if a.as_path
            .as_ref()
            .is_some_and(|p| p.contains(self.local_as))
        {
            return Err(Refused::Loop);
        }
        if a.as_path.as_ref().and_then(AsPath::first_as) != Some(self.remote_as) {
            return Err(Refused::FirstAs);
        }
        // AIGP only over DPF-colored sessions (RFC 7311 §3: off on eBGP unless enabled).
        if self.session_color.is_none() {
            a.aigp = None;
        }
        if !dpf::accepts(self.session_color, &color::route_colors(&a.ext_communities)) {
            return Err(Refused::Color);
        }
        if let Some(subtype) = self.fib_suppress {
            if !a
                .ext_communities
                .iter()
                .any(|c| c.fib_suppress(subtype).is_some())
            {
                let tag = FibSuppress::new(self.local_as, self.router_id);
                a.ext_communities.push(tag.to_community(subtype));
            }
        }
        // LOCAL_PREF from an external neighbor is ignored (RFC 4271 §5.1.5).
        a.local_pref = None;
        a.mp_unreach = None;
        if let Some(m) = a.mp_reach.as_mut() {
            m.nlri.clear();
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fare::Policy;
    use crate::packet::{Aigp, ColorCommunity, Origin};

    const ME: u32 = 65001;
    const PEER: u32 = 65002;

    fn rules() -> Import {
        Import {
            local_as: ME,
            router_id: Ipv4Addr::new(10, 0, 0, 1),
            remote_as: PEER,
            session_color: None,
            fib_suppress: None,
        }
    }

    fn attrs(path: Vec<u32>) -> PathAttributes {
        PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence(path)),
            local_pref: Some(200),
            aigp: Some(Aigp::new(5)),
            ..Default::default()
        }
    }

    #[test]
    fn refused_routes() {
        let r = rules();
        assert_eq!(
            r.apply(attrs(vec![PEER]), true),
            Err(Refused::TreatAsWithdraw)
        );
        assert_eq!(
            r.apply(attrs(vec![PEER, ME, 65003]), false),
            Err(Refused::Loop)
        );
        assert_eq!(
            r.apply(attrs(vec![65003, PEER]), false),
            Err(Refused::FirstAs)
        );
        assert_eq!(
            r.apply(PathAttributes::default(), false),
            Err(Refused::FirstAs)
        );
        // DPF §2.1.2: over a session of color 2, a route of color 1 is refused; one of
        // color 2 or without color is accepted. An uncolored session takes any color.
        let mut red = attrs(vec![PEER]);
        red.ext_communities
            .push(ColorCommunity::new(1).to_community());
        let blue = Import {
            session_color: Some(2),
            ..rules()
        };
        assert_eq!(blue.apply(red.clone(), false), Err(Refused::Color));
        let mut both = red.clone();
        both.ext_communities
            .push(ColorCommunity::new(2).to_community());
        assert!(blue.apply(both, false).is_ok());
        assert!(blue.apply(attrs(vec![PEER]), false).is_ok());
        assert!(r.apply(red, false).is_ok());
    }

    #[test]
    fn accepted_routes_lose_local_pref_and_aigp_off_colored_sessions() {
        let a = rules().apply(attrs(vec![PEER, 65003]), false);
        let a = a.unwrap_or_default();
        assert_eq!((a.local_pref, a.aigp.is_none()), (None, true));
        assert_eq!(a.as_path, Some(AsPath::sequence(vec![PEER, 65003])));
        // A colored session keeps AIGP (DPF primary-color paths).
        let colored = Import {
            session_color: Some(1),
            ..rules()
        };
        let mut red = attrs(vec![PEER]);
        red.ext_communities
            .push(ColorCommunity::new(1).to_community());
        let a = colored.apply(red, false).unwrap_or_default();
        assert_eq!(a.aigp, Some(Aigp::new(5)));
    }

    #[test]
    fn fib_suppress_tag_added_once() {
        let subtype = Policy::default().fib_suppress_subtype;
        let tagging = Import {
            fib_suppress: Some(subtype),
            ..rules()
        };
        let a = tagging.apply(attrs(vec![PEER]), false).unwrap_or_default();
        let tags: Vec<_> = a
            .ext_communities
            .iter()
            .filter_map(|c| c.fib_suppress(subtype))
            .collect();
        assert_eq!(tags.len(), 1);
        assert_eq!(tags[0].router_id, Ipv4Addr::new(10, 0, 0, 1));
        // Already tagged by the leaf before us: kept as is, no second tag.
        let again = tagging.apply(a.clone(), false).unwrap_or_default();
        assert_eq!(again.ext_communities, a.ext_communities);
    }
}
