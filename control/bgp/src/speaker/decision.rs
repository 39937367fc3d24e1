//! The FARE decision of a prefix: the inputs of its paths (link and Path Bandwidth),
//! the weights, per-color groups (DPF), the views of `fare show routes` and the groups
//! sent to the data plane.

use super::{
    ColorGroupView, GroupRun, PathView, RibTask, RouteView, SpeakerEvent, MAX_GROUP_BATCH,
};
use crate::fare::Decision;
use crate::packet::{color, link_bandwidth, ColorCommunity};
use crate::rib::{LocRoute, Path};
use fare_model::bandwidth::{Encoding, Received};
use fare_model::forwarding::{ColorGroup, Group, Member};
use fare_model::topology::Role;
use ipnet::IpNet;
use std::net::IpAddr;
use std::sync::Arc;

impl RibTask {
    pub(super) fn decide(&self, paths: &[Path]) -> (Vec<Received>, Decision) {
        let policy = &self.config.policy;
        let inputs = received(
            paths,
            |peer| self.link_gbps(peer),
            |peer| self.accepts_link_bandwidth(peer),
            policy.subtype,
            policy.encoding,
        );
        let roles: Vec<Option<Role>> = paths
            .iter()
            .map(|p| self.peers.get(&p.peer).and_then(|x| x.spec.role))
            .collect();
        let nodes: Vec<u64> = paths.iter().map(|p| self.neighbor_node(&p.peer)).collect();
        let d = policy.decide(&inputs, &nodes, from_above(&roles, &inputs));
        (inputs, d)
    }

    /// Which node a path came from, for the parallel-links rule: the neighbor's BGP
    /// Identifier (the same on every session with that switch); a neighbor without an
    /// established session counts as a node of its own.
    fn neighbor_node(&self, peer: &IpAddr) -> u64 {
        let id = self.peers.get(peer).and_then(|p| p.session.as_ref());
        match (id, peer) {
            (Some(s), _) => u64::from(u32::from(s.remote_id)),
            (None, IpAddr::V4(a)) => 1 << 32 | u64::from(u32::from(*a)),
            (None, IpAddr::V6(a)) => 2 << 32 | (u128::from(*a) as u64 & 0xffff_ffff),
        }
    }

    /// [`SpeakerCommand::Explain`](super::SpeakerCommand::Explain): the multipath set
    /// of `prefix` through [`Self::decide`], the decision the data plane got.
    pub(super) fn explain(&self, prefix: IpNet) -> Option<super::RouteExplain> {
        let LocRoute::Learned(paths) = self.rib.route(&prefix)? else {
            return None;
        };
        let policy = &self.config.policy;
        let (inputs, d) = self.decide(&paths);
        let tolerance = policy.encoding.ratio_tolerance();
        let ratio = fare_model::wcmp::weights_within(&d.bandwidths_gbps, None, tolerance);
        let bits = |p: &Path, transitive: bool| {
            p.attrs
                .ext_communities
                .iter()
                .find(|c| c.is_path_bandwidth(policy.subtype) && c.is_transitive() == transitive)
                .map(|c| u16::from_be_bytes([c.0[6], c.0[7]]))
        };
        let paths = paths
            .iter()
            .zip(&inputs)
            .enumerate()
            .map(|(i, (p, input))| super::PathExplain {
                neighbor: p.peer,
                as_path: p
                    .attrs
                    .as_path
                    .iter()
                    .flat_map(|a| a.segments.iter().flat_map(|s| s.asns.clone()))
                    .collect(),
                wire_bits: bits(p, true),
                link_value_bits: bits(p, false),
                link_gbps: input.link_gbps,
                path_gbps: input.path_gbps,
                link_value_gbps: input.link_value_gbps,
                bandwidth_gbps: d.bandwidths_gbps[i],
                weight: d.weights[i],
            })
            .collect();
        // Draft: the value re-advertised (averaged mode's depends on each outgoing link).
        let advertised = match policy.mode {
            fare_model::bandwidth::Mode::Draft => {
                policy.readvertise(&inputs, &d, None, 1).path_gbps
            }
            fare_model::bandwidth::Mode::Averaged => None,
        };
        Some(super::RouteExplain {
            prefix,
            mode: policy.mode,
            encoding: policy.encoding,
            parallel_links: policy.parallel,
            rule: rule_name(policy.mode, d.rule),
            weighted: d.weighted(),
            paths,
            tolerance,
            ratio: if d.weighted() {
                ratio.weights
            } else {
                d.weights.clone()
            },
            ratio_delta: if d.weighted() { ratio.delta } else { 1.0 },
            max_group_size: policy.max_group_size,
            advertised_gbps: advertised,
        })
    }

    pub(super) fn link_gbps(&self, peer: &IpAddr) -> Option<f64> {
        self.peers.get(peer).and_then(|x| x.link_gbps)
    }

    /// True when paths from `peer` may take their bandwidth from the Link Bandwidth
    /// community (a neighbor that does not speak FARE).
    fn accepts_link_bandwidth(&self, peer: &IpAddr) -> bool {
        self.peers
            .get(peer)
            .is_some_and(|x| x.spec.link_bandwidth.accepts())
    }

    /// Colors of every path of `prefix` outside its multipath set.
    pub(super) fn inactive_colors(&self, prefix: IpNet, active: &[Path]) -> Vec<Vec<u32>> {
        self.rib
            .paths(&prefix)
            .iter()
            .filter(|p| !active.iter().any(|x| x.peer == p.peer))
            .map(|p| color::route_colors(&p.attrs.ext_communities))
            .filter(|c| !c.is_empty())
            .collect()
    }

    /// Per-color WCMP groups (draft §2.2.3): the active set split by color, then the
    /// colors only inactive (backup) paths carry.
    pub(super) fn color_groups(&self, prefix: IpNet, active: &[Path]) -> Vec<ColorGroupView> {
        self.color_paths(prefix, active)
            .into_iter()
            .map(|(color, is_active, subset, d)| ColorGroupView {
                color,
                active: is_active,
                members: subset.iter().map(|x| x.peer).zip(d.weights).collect(),
            })
            .collect()
    }

    /// (color, active, its paths, their decision) per color, active colors first.
    pub(super) fn color_paths(&self, prefix: IpNet, active: &[Path]) -> Vec<ColorSet> {
        let mut backups: Vec<Path> = self.rib.paths(&prefix);
        backups.retain(|p| !active.iter().any(|x| x.peer == p.peer));
        backups.sort_by_key(|x| x.peer);
        by_color(active, &backups, |subset| self.decide(subset).1)
    }

    /// The per-color groups the data plane gets with the group of `prefix`: only when
    /// the active paths carry two or more colors (with one, every flow already stays on
    /// that color's paths).
    pub(super) fn data_plane_colors(&self, prefix: IpNet, active: &[Path]) -> Vec<ColorGroup> {
        if !two_colors(active) {
            return vec![];
        }
        self.color_paths(prefix, active)
            .into_iter()
            .map(|(color, is_active, subset, d)| ColorGroup {
                color,
                active: is_active,
                members: subset
                    .iter()
                    .enumerate()
                    .map(|(i, p)| self.member(p, d.weights[i], d.bandwidths_gbps[i]))
                    .collect(),
            })
            .collect()
    }

    /// The next hop of a path: the first MP_REACH next hop, else NEXT_HOP, else the
    /// neighbor's address.
    pub(super) fn next_hop(p: &Path, peer: &IpAddr) -> IpAddr {
        if let Some(m) = &p.attrs.mp_reach {
            if let Some(nh) = m.next_hops.first() {
                return *nh;
            }
        }
        p.attrs.next_hop.map(IpAddr::V4).unwrap_or(*peer)
    }

    pub(super) fn view(&self, prefix: IpNet) -> Option<RouteView> {
        let route = self.rib.route(&prefix)?;
        Some(match &route {
            LocRoute::Local | LocRoute::Unreachable => RouteView {
                prefix,
                local: true,
                unreachable: matches!(route, LocRoute::Unreachable),
                weighted: false,
                paths: vec![],
                color_groups: vec![],
            },
            LocRoute::Learned(paths) => {
                let (inputs, d) = self.decide(paths);
                RouteView {
                    prefix,
                    local: false,
                    unreachable: false,
                    weighted: d.weighted(),
                    paths: paths
                        .iter()
                        .enumerate()
                        .map(|(i, p)| PathView {
                            neighbor: p.peer,
                            next_hop: Some(Self::next_hop(p, &p.peer)),
                            as_path: p
                                .attrs
                                .as_path
                                .iter()
                                .flat_map(|a| a.segments.iter().flat_map(|s| s.asns.clone()))
                                .collect(),
                            path_bandwidth_gbps: d.weighted().then(|| d.bandwidths_gbps[i]),
                            received_gbps: inputs.get(i).and_then(|x| x.path_gbps),
                            weight: d.weights[i],
                            ext_communities: p
                                .attrs
                                .ext_communities
                                .iter()
                                .map(|c| c.0.iter().map(|b| format!("{b:02x}")).collect())
                                .collect(),
                            colors: color::route_colors(&p.attrs.ext_communities),
                            aigp: p.attrs.aigp.as_ref().map(|a| a.metric),
                        })
                        .collect(),
                    color_groups: self.color_groups(prefix, paths),
                }
            }
        })
    }

    /// The data plane member for path `p`.
    pub(super) fn member(&self, p: &Path, weight: u32, bandwidth_gbps: f64) -> Member {
        let peer = self.peers.get(&p.peer);
        Member {
            via: peer.map_or_else(|| p.peer.to_string(), |x| x.via.clone()),
            interface: peer
                .and_then(|x| x.spec.interface.clone())
                .unwrap_or_default(),
            next_hop: Some(Self::next_hop(p, &p.peer)),
            neighbor_mac: None,
            weight,
            bandwidth_gbps,
        }
    }

    pub(super) async fn program(&mut self, prefix: IpNet, paths: &[Path], d: &Decision) {
        // Per-color groups only when the active paths carry two or more colors; a route
        // that had some gets them replaced (or dropped) here.
        if !two_colors(paths)
            && (self.color_fib.is_empty() || !self.color_fib.contains_key(&prefix))
        {
            let members = paths.iter().map(|p| p.peer).zip(d.weights.iter().copied());
            if self.rib.swap_fib(prefix, members) || self.batch.relabel {
                self.batch_install(prefix, paths, d);
            }
            return;
        }
        let colors = self.data_plane_colors(prefix, paths);
        let color_key: Vec<ColorGroupView> = colors
            .iter()
            .map(|c| ColorGroupView {
                color: c.color,
                active: c.active,
                members: c
                    .members
                    .iter()
                    .filter_map(|m| m.via.parse().ok().map(|a| (a, m.weight)))
                    .collect(),
            })
            .collect();
        let same_colors = self
            .color_fib
            .get(&prefix)
            .map_or(color_key.is_empty(), |k| *k == color_key);
        let members = paths.iter().map(|p| p.peer).zip(d.weights.iter().copied());
        // Relabelled (a bandwidth changed, weights did not): sent again, as a plain group is.
        if !self.rib.swap_fib(prefix, members) && same_colors && !self.batch.relabel {
            return;
        }
        if colors.is_empty() {
            self.color_fib.remove(&prefix);
            self.batch_install(prefix, paths, d);
            return;
        }
        let members = paths
            .iter()
            .enumerate()
            .map(|(i, p)| self.member(p, d.weights[i], d.bandwidths_gbps[i]))
            .collect();
        let group = Group {
            prefix,
            mode: self.config.group_mode,
            members,
        };
        self.color_fib.insert(prefix, color_key);
        // Keep the order decided: what is batched goes first.
        self.send_groups().await;
        self.emit(SpeakerEvent::ColoredGroup { group, colors })
            .await;
    }

    /// Adds `prefix` with the group of `paths` weighted by `d` to the batch: to the run
    /// of the prefix before when its members are the same (compared by neighbor, next
    /// hop, weight and bandwidth, which are all a member is made of here), else as a new
    /// run with its own member list.
    fn batch_install(&mut self, prefix: IpNet, paths: &[Path], d: &Decision) {
        let key = paths.iter().enumerate().map(|(i, p)| {
            (
                p.peer,
                Self::next_hop(p, &p.peer),
                d.weights[i],
                d.bandwidths_gbps[i].to_bits(),
            )
        });
        let same = matches!(self.batch.runs.last(), Some(GroupRun::Install { .. }))
            && key.clone().eq(self.batch.key.iter().copied());
        if same {
            if let Some(GroupRun::Install { prefixes, .. }) = self.batch.runs.last_mut() {
                prefixes.push(prefix);
            }
        } else {
            self.batch.key.clear();
            self.batch.key.extend(key);
            let members: Arc<[Member]> = paths
                .iter()
                .enumerate()
                .map(|(i, p)| self.member(p, d.weights[i], d.bandwidths_gbps[i]))
                .collect();
            self.batch.runs.push(GroupRun::Install {
                prefixes: vec![prefix],
                mode: self.config.group_mode,
                members,
            });
        }
        self.batch.prefixes += 1;
    }

    /// Adds the removal of the group of `prefix` to the batch.
    fn batch_remove(&mut self, prefix: IpNet) {
        match self.batch.runs.last_mut() {
            Some(GroupRun::Remove(prefixes)) => prefixes.push(prefix),
            _ => self.batch.runs.push(GroupRun::Remove(vec![prefix])),
        }
        self.batch.prefixes += 1;
    }

    /// Adds a route view to send after the batched group changes.
    pub(super) fn batch_route(&mut self, event: SpeakerEvent) {
        self.batch.routes.push(event);
        self.batch.prefixes += 1;
    }

    /// Sends the batched group changes as one event, if any, then the batched route
    /// views.
    pub(super) async fn send_groups(&mut self) {
        self.batch.prefixes = 0;
        if !self.batch.runs.is_empty() {
            let runs = std::mem::take(&mut self.batch.runs);
            self.emit(SpeakerEvent::Groups(runs)).await;
            // Let the receiver take it before the next batch is made: the channel holds
            // events, not prefixes, so a receiver on this thread that runs only when
            // this task waits would otherwise find all of a long feed's batches queued
            // (tens of MiB for a million prefixes).
            tokio::task::yield_now().await;
        }
        for r in std::mem::take(&mut self.batch.routes) {
            let _ = self.events.send(r).await;
        }
    }

    /// Sends the batch once it holds [`MAX_GROUP_BATCH`] prefixes.
    pub(super) async fn send_full_batch(&mut self) {
        if self.batch.prefixes >= MAX_GROUP_BATCH {
            self.send_groups().await;
        }
    }

    /// Sends an event: without the await machinery while the channel has room, waiting
    /// for room when it has none.
    pub(super) async fn emit(&self, event: SpeakerEvent) {
        use tokio::sync::mpsc::error::TrySendError;
        if let Err(TrySendError::Full(event)) = self.events.try_send(event) {
            let _ = self.events.send(event).await;
        }
    }

    pub(super) async fn program_none(&mut self, prefix: IpNet) {
        if !self.color_fib.is_empty() {
            self.color_fib.remove(&prefix);
        }
        if self.rib.take_fib(&prefix) {
            self.batch_remove(prefix);
        }
    }
}

/// Group changes decided but not sent yet (see [`SpeakerEvent::Groups`]).
#[derive(Default)]
pub(super) struct GroupBatch {
    runs: Vec<GroupRun>,
    /// Route views ([`SpeakerEvent::Route`]) to send after `runs`.
    routes: Vec<SpeakerEvent>,
    /// Prefixes in `runs` and `routes`.
    prefixes: usize,
    /// (neighbor, next hop, weight, bandwidth bits) of each member of the last run when
    /// it installs.
    key: Vec<(IpAddr, IpAddr, u32, u64)>,
    /// A link bandwidth changed (set at run time, or the interface speed): this round
    /// sends every group again, also those whose weights stay, so that the members'
    /// bandwidths shown are the new ones (the data plane writes only changed weights).
    pub(super) relabel: bool,
}

/// True when `paths` carry two or more distinct DPF colors (no allocation).
fn two_colors(paths: &[Path]) -> bool {
    let mut seen = None;
    for c in paths
        .iter()
        .flat_map(|p| p.attrs.ext_communities.iter())
        .filter_map(ColorCommunity::from_community)
    {
        match seen {
            None => seen = Some(c.color),
            Some(s) if s != c.color => return true,
            Some(_) => {}
        }
    }
    false
}

/// One color's group of a prefix: (color, active, its paths, their decision).
pub(super) type ColorSet = (u32, bool, Vec<Path>, Decision);

/// The inputs of the FARE decision for `paths`: the bandwidth of the link each came over
/// (unknown: +inf, the community alone decides) and its first transitive and first
/// non-transitive Path Bandwidth value; where the path has no transitive one and its
/// neighbor is `accepted`, the lowest Link Bandwidth (RFC 10005) it carries instead.
pub(super) fn received(
    paths: &[Path],
    link_gbps: impl Fn(&IpAddr) -> Option<f64>,
    accepted: impl Fn(&IpAddr) -> bool,
    subtype: u8,
    encoding: Encoding,
) -> Vec<Received> {
    paths
        .iter()
        .map(|p| {
            let mut input = Received {
                link_gbps: link_gbps(&p.peer).unwrap_or(f64::INFINITY),
                path_gbps: None,
                link_value_gbps: None,
            };
            for c in &p.attrs.ext_communities {
                if let Some(pb) = c.path_bandwidth(subtype, encoding) {
                    if pb.transitive {
                        input.path_gbps.get_or_insert(pb.gbps());
                    } else {
                        input.link_value_gbps.get_or_insert(pb.gbps());
                    }
                }
            }
            input.path_gbps = fare_model::link_bandwidth::path_value(
                input.path_gbps,
                link_bandwidth::lowest_gbps(&p.attrs.ext_communities),
                accepted(&p.peer),
            );
            input
        })
        .collect()
}

/// The rule's name as `fare explain` shows it (`sim::explain::HopRule`).
fn rule_name(mode: fare_model::bandwidth::Mode, rule: fare_model::bandwidth::Rule) -> &'static str {
    use fare_model::bandwidth::{Mode, Rule};
    match (mode, rule) {
        (Mode::Averaged, _) => "sum-over-n",
        (Mode::Draft, Rule::SuperSpine) => "super-spine-pass-through",
        (Mode::Draft, Rule::RemoteSpine) => "remote-spine",
        (Mode::Draft, Rule::Normal) => "min-sum",
    }
}

/// Whether a set was learned from super-spines (draft §4.2): by the neighbors'
/// configured roles when all are known, else by every path carrying the non-transitive
/// value only super-spines attach.
pub(super) fn from_above(roles: &[Option<Role>], inputs: &[Received]) -> bool {
    if roles.iter().all(Option::is_some) {
        roles.iter().all(|r| *r == Some(Role::SuperSpine))
    } else {
        inputs.iter().all(|r| r.link_value_gbps.is_some())
    }
}

/// The distinct DPF colors of `paths`, ascending.
pub(super) fn colors_of(paths: &[Path]) -> Vec<u32> {
    let mut colors: Vec<u32> = paths
        .iter()
        .flat_map(|x| color::route_colors(&x.attrs.ext_communities))
        .collect();
    colors.sort();
    colors.dedup();
    colors
}

/// Per-color groups (draft-wang-idr-dpf §2.2.3): each color of the active paths with
/// the active paths of that color, then each color only `backups` carry, with those.
pub(super) fn by_color(
    active: &[Path],
    backups: &[Path],
    decide: impl Fn(&[Path]) -> Decision,
) -> Vec<ColorSet> {
    let mut out: Vec<ColorSet> = Vec::new();
    for (paths, is_active) in [(active, true), (backups, false)] {
        for c in colors_of(paths) {
            if out.iter().any(|g| g.0 == c) {
                continue;
            }
            let subset: Vec<Path> = paths
                .iter()
                .filter(|x| color::route_colors(&x.attrs.ext_communities).contains(&c))
                .cloned()
                .collect();
            let d = decide(&subset);
            out.push((c, is_active, subset, d));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::community::PathBandwidth;
    use crate::fare::Policy;
    use crate::packet::ExtCommunity;
    use crate::packet::{ColorCommunity, Family, MpReach, PathAttributes};
    use std::net::Ipv4Addr;
    use std::sync::Arc;

    const ID: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

    fn addr(i: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 1, 0, i))
    }

    fn path(i: u8, communities: Vec<ExtCommunity>) -> Path {
        Path {
            peer: addr(i),
            attrs: Arc::new(PathAttributes {
                ext_communities: communities,
                ..Default::default()
            }),
        }
    }

    fn pb(transitive: bool, gbps: f64) -> ExtCommunity {
        let p = Policy::default();
        PathBandwidth::new(transitive, ID, gbps).to_community(p.subtype, p.encoding)
    }

    fn colored(i: u8, colors: &[u32]) -> Path {
        path(
            i,
            colors
                .iter()
                .map(|c| ColorCommunity::new(*c).to_community())
                .collect(),
        )
    }

    #[test]
    fn received_takes_the_link_and_the_first_value_of_each_kind() {
        let p = Policy::default();
        let paths = [
            path(1, vec![pb(true, 25.0), pb(false, 100.0), pb(true, 50.0)]),
            path(2, vec![]),
            path(3, vec![pb(false, 40.0)]),
        ];
        let links = |a: &IpAddr| (*a == addr(1)).then_some(100.0);
        let got = received(&paths, links, |_| false, p.subtype, p.encoding);
        let want = vec![
            Received {
                link_gbps: 100.0,
                path_gbps: Some(25.0),
                link_value_gbps: Some(100.0),
            },
            // No link speed known: +inf, the community alone decides.
            Received {
                link_gbps: f64::INFINITY,
                path_gbps: None,
                link_value_gbps: None,
            },
            Received {
                link_gbps: f64::INFINITY,
                path_gbps: None,
                link_value_gbps: Some(40.0),
            },
        ];
        assert_eq!(got, want);
        // Another subtype is not a Path Bandwidth community.
        let other = received(
            &paths[..1],
            links,
            |_| false,
            p.subtype.wrapping_add(1),
            p.encoding,
        );
        assert_eq!((other[0].path_gbps, other[0].link_value_gbps), (None, None));
    }

    #[test]
    fn from_above_by_roles_else_by_link_values() {
        let with = |v: Option<f64>| Received {
            link_gbps: 100.0,
            path_gbps: Some(10.0),
            link_value_gbps: v,
        };
        let both = [with(Some(1.0)), with(Some(1.0))];
        let one = [with(Some(1.0)), with(None)];
        let ss = Some(Role::SuperSpine);
        // Roles known: they decide, whatever the communities say.
        assert!(from_above(&[ss, ss], &one));
        assert!(!from_above(&[ss, Some(Role::Spine)], &both));
        // A role unknown: every path must carry the non-transitive value.
        assert!(from_above(&[ss, None], &both));
        assert!(!from_above(&[None, None], &one));
    }

    /// Two paths with 10 and 30 Gbps over 100 Gbps links: weights 1:3 (draft mode).
    #[test]
    fn decision_weights_from_path_bandwidth() {
        let p = Policy::default();
        let paths = [path(1, vec![pb(true, 10.0)]), path(2, vec![pb(true, 30.0)])];
        let inputs = received(&paths, |_| Some(100.0), |_| false, p.subtype, p.encoding);
        let d = p.decide(&inputs, &[0, 1], from_above(&[None, None], &inputs));
        assert!(d.weighted());
        assert_eq!(d.weights, vec![1, 3]);
        // One path without the community: ECMP.
        let paths = [path(1, vec![pb(true, 10.0)]), path(2, vec![])];
        let inputs = received(&paths, |_| Some(100.0), |_| false, p.subtype, p.encoding);
        let d = p.decide(
            &inputs,
            &(0..inputs.len() as u64).collect::<Vec<_>>(),
            false,
        );
        assert!(!d.weighted());
        assert_eq!(d.weights, vec![1, 1]);
    }

    /// A neighbor accepted for Link Bandwidth: its lowest value (bytes/s -> Gbps) is the
    /// path's bandwidth unless a Path Bandwidth community is present; from any other
    /// neighbor it is ignored. 2.5e9 and 1.25e9 bytes/s over 100 Gbps links: 20:10, 2:1.
    #[test]
    fn link_bandwidth_stands_in_for_path_bandwidth_where_accepted() {
        use crate::packet::LinkBandwidth;
        let p = Policy::default();
        let lb = |g: f64| LinkBandwidth::from_gbps(true, 65100, g).to_community();
        let paths = [
            path(1, vec![lb(40.0), lb(20.0)]),
            path(2, vec![lb(10.0)]),
            path(3, vec![lb(10.0), pb(true, 30.0)]),
        ];
        let accepted = |a: &IpAddr| *a != addr(4);
        let inputs = received(&paths, |_| Some(100.0), accepted, p.subtype, p.encoding);
        let got: Vec<Option<f64>> = inputs.iter().map(|r| r.path_gbps).collect();
        assert_eq!(got, [Some(20.0), Some(10.0), Some(30.0)]);
        assert_eq!(p.decide(&inputs[..2], &[0, 1], false).weights, [2, 1]);
        let refused = received(
            &paths[..2],
            |_| Some(100.0),
            |_| false,
            p.subtype,
            p.encoding,
        );
        assert!(refused.iter().all(|r| r.path_gbps.is_none()));
    }

    #[test]
    fn next_hop_prefers_mp_reach_then_next_hop_then_the_neighbor() {
        let v6: IpAddr = "2001:db8::1".parse().unwrap_or(addr(0));
        let mut a = PathAttributes {
            next_hop: Some(Ipv4Addr::new(192, 0, 2, 1)),
            mp_reach: Some(MpReach {
                family: Family::Ipv6Unicast,
                next_hops: vec![v6],
                nlri: vec![],
            }),
            ..Default::default()
        };
        let p = |a: &PathAttributes| Path {
            peer: addr(7),
            attrs: Arc::new(a.clone()),
        };
        assert_eq!(RibTask::next_hop(&p(&a), &addr(7)), v6);
        a.mp_reach = None;
        assert_eq!(
            RibTask::next_hop(&p(&a), &addr(7)),
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))
        );
        a.next_hop = None;
        assert_eq!(RibTask::next_hop(&p(&a), &addr(7)), addr(7));
    }

    /// The rule names `fare explain` prints (docs/weights.md, `RouteExplain::rule`).
    #[test]
    fn rule_names_as_fare_explain_prints_them() {
        use fare_model::bandwidth::{Mode, Rule};
        let all = [
            (Mode::Draft, Rule::Normal, "min-sum"),
            (Mode::Draft, Rule::SuperSpine, "super-spine-pass-through"),
            (Mode::Draft, Rule::RemoteSpine, "remote-spine"),
            (Mode::Averaged, Rule::Normal, "sum-over-n"),
            (Mode::Averaged, Rule::SuperSpine, "sum-over-n"),
        ];
        for (mode, rule, name) in all {
            assert_eq!(rule_name(mode, rule), name, "{mode:?} {rule:?}");
        }
    }

    /// Active colors first, each with the active paths of that color; then the colors
    /// only backups carry. A backup of an active color adds nothing.
    #[test]
    fn groups_by_color() {
        let active = [colored(1, &[1]), colored(2, &[1, 2])];
        let backups = [colored(3, &[3]), colored(4, &[2]), colored(5, &[])];
        // The decision here: one weight per path, its peer's last octet.
        let decide = |s: &[Path]| Decision {
            weights: s
                .iter()
                .map(|p| match p.peer {
                    IpAddr::V4(v4) => v4.octets()[3] as u32,
                    IpAddr::V6(_) => 0,
                })
                .collect(),
            ..Policy::default().decide(&[], &[], false)
        };
        let got: Vec<(u32, bool, Vec<IpAddr>, Vec<u32>)> = by_color(&active, &backups, decide)
            .into_iter()
            .map(|(c, a, s, d)| (c, a, s.iter().map(|p| p.peer).collect(), d.weights))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, true, vec![addr(1), addr(2)], vec![1, 2]),
                (2, true, vec![addr(2)], vec![2]),
                (3, false, vec![addr(3)], vec![3]),
            ]
        );
        assert_eq!(colors_of(&active), vec![1, 2]);
        assert_eq!(colors_of(&backups[2..]), Vec::<u32>::new());
    }
}
