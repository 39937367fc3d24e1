//! Aggregation with unreachable host routes (draft-xu-idr-fare-in-mpson §4.1), the policy
//! half: which configured RNIC host routes a leaf announces unreachable, which members an
//! RNIC's host route keeps, and what a summary-only neighbor is not sent. The wire half
//! (the UPA community of draft-krierhorn-idr-upa) is [`super::packet::upa`]; the speaker
//! applies both.

use super::rib::{LocRoute, Path, Rib};
use ipnet::IpNet;
use rustc_hash::FxHashSet;
use std::net::IpAddr;

/// True when every path announces the prefix unreachable.
pub fn all_unreachable(paths: &[Path], subtype: u8) -> bool {
    !paths.is_empty() && paths.iter().all(|p| p.is_unreachable(subtype))
}

/// The configured host routes (`(neighbor, upa_hosts)`) none of whose neighbors gave us a
/// route covering them: the RNIC is disconnected from this node (session or link down),
/// so this node announces the host unreachable.
pub fn unreachable_hosts<'a>(
    configured: impl IntoIterator<Item = (IpAddr, &'a [IpNet])>,
    rib: &Rib,
    subtype: u8,
) -> FxHashSet<IpNet> {
    let mut hosts = FxHashSet::default();
    let mut reachable = FxHashSet::default();
    for (neighbor, list) in configured {
        for host in list.iter().map(IpNet::trunc) {
            hosts.insert(host);
            if rib.reaches(neighbor, host, subtype) {
                reachable.insert(host);
            }
        }
    }
    hosts.difference(&reachable).copied().collect()
}

/// The paths of `prefix`'s longest-matching aggregate in `loc` (a shorter learned prefix
/// that some path reaches) without those through `avoid` — the members of an RNIC's
/// host route for a prefix its neighbors in `avoid` announced unreachable. Empty when no
/// aggregate covers it or only avoided paths do.
pub fn avoiding<'a>(
    loc: impl IntoIterator<Item = (&'a IpNet, &'a LocRoute)>,
    prefix: IpNet,
    avoid: &[IpAddr],
    subtype: u8,
) -> Vec<Path> {
    loc.into_iter()
        .filter(|(q, _)| **q != prefix && q.contains(&prefix))
        .filter_map(|(q, r)| match r {
            LocRoute::Learned(ps) if !all_unreachable(ps, subtype) => Some((q.prefix_len(), ps)),
            _ => None,
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, ps)| {
            ps.iter()
                .filter(|p| !avoid.contains(&p.peer))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// True when `prefix` lies inside one of `aggregates` (and is not one of them): a
/// summary-only neighbor is not sent it.
pub fn covered(aggregates: &FxHashSet<IpNet>, prefix: &IpNet) -> bool {
    aggregates.iter().any(|a| a != prefix && a.contains(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::upa::{Upa, DEFAULT_UPA_SUBTYPE as ST};
    use crate::packet::{AsPath, Origin, PathAttributes};
    use rustc_hash::FxHashMap;
    use std::sync::Arc;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn route(unreachable: bool) -> Arc<PathAttributes> {
        let mut a = PathAttributes {
            origin: Some(Origin::Igp),
            as_path: Some(AsPath::sequence(vec![65011])),
            ..Default::default()
        };
        if unreachable {
            a.ext_communities
                .push(Upa::new("10.1.0.1".parse().unwrap()).to_community(ST));
        }
        Arc::new(a)
    }

    fn path(peer: &str, unreachable: bool) -> Path {
        Path {
            peer: ip(peer),
            attrs: route(unreachable),
        }
    }

    #[test]
    fn a_host_is_unreachable_while_no_neighbor_it_is_configured_on_reaches_it() {
        let r3 = ip("10.1.13.2");
        let r4 = ip("10.1.14.2");
        let h3 = [net("10.200.0.3/32")];
        let h4 = [net("10.200.0.4/32")];
        let configured = || [(r3, &h3[..]), (r4, &h4[..])];
        let mut rib = Rib::default();
        // Nothing learned yet: both unreachable.
        let u = unreachable_hosts(configured(), &rib, ST);
        assert_eq!(u, [h3[0], h4[0]].into_iter().collect());
        // R3's /32 arrives; R4 sends only a UPA (it does not reach its own host).
        rib.learn(r3, h3[0], route(false));
        rib.learn(r4, h4[0], route(true));
        assert_eq!(
            unreachable_hosts(configured(), &rib, ST),
            [h4[0]].into_iter().collect()
        );
        // A covering route counts (the RNIC may advertise a shorter prefix).
        rib.learn(r4, net("10.200.0.4/31"), route(false));
        assert!(unreachable_hosts(configured(), &rib, ST).is_empty());
        // A host configured on two sessions is reachable while one of them reaches it.
        let both = [(r3, &h3[..]), (r4, &h3[..])];
        assert!(unreachable_hosts(both, &rib, ST).is_empty());
        rib.forget_peer(r3);
        let both = [(r3, &h3[..]), (r4, &h3[..])];
        assert_eq!(
            unreachable_hosts(both, &rib, ST),
            [h3[0]].into_iter().collect()
        );
    }

    #[test]
    fn host_route_members_are_the_longest_aggregate_minus_the_announcing_plane() {
        let plane1 = "10.1.11.1";
        let plane2 = "10.2.11.1";
        let plane3 = "10.3.11.1";
        let mut loc = FxHashMap::default();
        loc.insert(
            net("10.0.0.0/8"),
            LocRoute::Learned(Arc::new([path(plane1, false), path(plane2, false)])),
        );
        loc.insert(
            net("10.200.0.0/16"),
            LocRoute::Learned(Arc::new([
                path(plane1, false),
                path(plane2, false),
                path(plane3, false),
            ])),
        );
        // A UPA for another host is no aggregate.
        loc.insert(
            net("10.200.0.0/24"),
            LocRoute::Learned(Arc::new([path(plane2, true)])),
        );
        let host = net("10.200.0.3/32");
        loc.insert(host, LocRoute::Learned(Arc::new([path(plane1, true)])));
        let peers = |ps: Vec<Path>| ps.iter().map(|p| p.peer).collect::<Vec<_>>();
        assert_eq!(
            peers(avoiding(&loc, host, &[ip(plane1)], ST)),
            [ip(plane2), ip(plane3)]
        );
        // Unreachable through two planes: one left.
        assert_eq!(
            peers(avoiding(&loc, host, &[ip(plane1), ip(plane3)], ST)),
            [ip(plane2)]
        );
        // Unreachable everywhere, or no aggregate: nothing to install.
        let all = [ip(plane1), ip(plane2), ip(plane3)];
        assert!(avoiding(&loc, host, &all, ST).is_empty());
        assert!(avoiding(&loc, net("192.0.2.1/32"), &[ip(plane1)], ST).is_empty());
    }

    #[test]
    fn summary_only_keeps_covered_routes_back() {
        let aggregates: FxHashSet<IpNet> = [net("10.200.0.0/16")].into_iter().collect();
        assert!(covered(&aggregates, &net("10.200.0.3/32")));
        assert!(
            !covered(&aggregates, &net("10.200.0.0/16")),
            "the aggregate goes"
        );
        assert!(!covered(&aggregates, &net("192.0.2.0/24")));
        assert!(all_unreachable(&[path("10.1.11.1", true)], ST));
        assert!(!all_unreachable(
            &[path("10.1.11.1", true), path("10.2.11.1", false)],
            ST
        ));
        assert!(!all_unreachable(&[], ST));
    }
}
