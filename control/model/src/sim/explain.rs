//! Why a group has its weights: one propagation of [`super::solve`]'s code with a trace
//! switched on, so every number shown is the one the model computed, never a second
//! implementation of the rules.
//!
//! Per member of the explained group: the paths toward the origin; per node on them, the
//! routes it received (link, value as sent, the 16 wire bits and their decoded value,
//! the bandwidth it took), the rule it applied (min/sum, super-spine pass-through, the
//! remote spine's link value, averaged sum / N) and what it advertised; then the
//! group's ratio reduction within the encoding's tolerance and the data plane limit's
//! reduction with its oversubscription.

use super::{group_weights, Context, Options, Worker, ORIGIN};
use crate::bandwidth::{Advertised, Encoding, Mode, Received, Rule, Spread};
use crate::parallel::{ParallelLinks, Share};
use crate::topology::{LinkId, NodeId, Topology};
use ipnet::IpNet;
use serde::Serialize;

/// One route as a node received it, recorded while the model computes.
#[derive(Clone, Debug)]
pub(crate) struct RouteTrace {
    via: NodeId,
    link: LinkId,
    /// The value the advertiser computed, before the wire encoding.
    sent: Option<f64>,
    link_value_sent: Option<f64>,
    received: Option<Received>,
    bandwidth: f64,
    /// How the parallel-links rule gave the route its bandwidth.
    share: Option<Share>,
}

/// A node's record: its routes, rule and advertisement.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeTrace {
    routes: Vec<RouteTrace>,
    rule: Option<Rule>,
    ecmp: bool,
    /// Draft: the values advertised, before the wire.
    advertised: Advertised,
    /// Averaged: (PathBWsum, N, PathBWsum / N).
    pub(super) averaged: Option<(f64, usize, f64)>,
}

/// Called by the model for each route `n` takes from `m` over link `l`; `path` is what
/// `m` holds (draft: already through the wire; averaged: PathBWsum / N).
pub(super) fn record_route(
    trace: &mut [Option<NodeTrace>],
    n: NodeId,
    (m, l): (NodeId, LinkId),
    path: Option<f64>,
    mode: Mode,
    link: f64,
) {
    let from = trace[m].as_ref().map(|t| t.advertised);
    let (sent, link_value_sent) = match (mode, from) {
        (Mode::Averaged, _) => (path.map(|v| v.min(link)), None),
        (Mode::Draft, Some(a)) => (a.path_gbps, a.link_value_gbps),
        // An originator: the maximum value, not rounded.
        (Mode::Draft, None) => (path, None),
    };
    trace[n]
        .get_or_insert_with(NodeTrace::default)
        .routes
        .push(RouteTrace {
            via: m,
            link: l,
            sent,
            link_value_sent,
            received: None,
            bandwidth: f64::NAN,
            share: None,
        });
}

/// Called by the model once `n`'s routes are decided.
pub(super) fn record_group(
    trace: &mut [Option<NodeTrace>],
    n: NodeId,
    rule: Rule,
    routes: &[Received],
    spread: &Spread,
    shares: Option<&[Share]>,
    advertised: Advertised,
) {
    let t = trace[n].get_or_insert_with(NodeTrace::default);
    for (i, (r, received)) in t.routes.iter_mut().zip(routes).enumerate() {
        r.received = Some(*received);
        r.bandwidth = spread.bandwidth(i, routes);
        r.share = shares.and_then(|s| s.get(i)).copied();
    }
    t.rule = Some(rule);
    t.ecmp = *spread == Spread::Equal;
    t.advertised = advertised;
}

/// A value as it crossed the wire in the Path Bandwidth community.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WireValue {
    /// What the sender computed (Gbps), before the encoding; infinite for an originator's
    /// maximum value (serialized as null).
    pub sent_gbps: f64,
    /// The 16 bits of the community's local administrator.
    pub bits: u16,
    /// What those bits decode to (Gbps).
    pub decoded_gbps: f64,
    /// decoded - sent (Gbps): the encoding's rounding.
    pub rounding_gbps: f64,
}

impl WireValue {
    pub fn new(encoding: Encoding, sent_gbps: f64) -> Self {
        let bits = encoding.encode(sent_gbps);
        let decoded_gbps = encoding.decode(bits);
        let rounding_gbps = if sent_gbps.is_finite() {
            decoded_gbps - sent_gbps
        } else {
            0.0
        };
        WireValue {
            sent_gbps,
            bits,
            decoded_gbps,
            rounding_gbps,
        }
    }
}

/// The rule a node applied (draft-xu-idr-fare §4, white paper §2.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HopRule {
    /// Originates the prefix: the maximum value (draft) or its line rate (averaged).
    Origin,
    /// min(link, received) per route, advertises the sum (draft §4.1).
    MinSum,
    /// Super-spine (draft §4.2): the transitive value passes unchanged; optionally a
    /// non-transitive value with its link bandwidth toward the advertising spine.
    SuperSpinePassThrough,
    /// Spine that learned the route from super-spines (draft §4.2): min(link,
    /// non-transitive value) per route; the transitive value passes unchanged.
    RemoteSpine,
    /// Averaged (white paper): min(link, received) per route, advertises sum / N.
    SumOverN,
}

impl HopRule {
    pub fn describe(self) -> &'static str {
        match self {
            HopRule::Origin => "origin",
            HopRule::MinSum => "min(link, received) per route, advertises the sum",
            HopRule::SuperSpinePassThrough => {
                "super-spine: passes the transitive value unchanged, adds its link bandwidth (non-transitive)"
            }
            HopRule::RemoteSpine => {
                "remote spine: min(link, non-transitive value) per route, passes the transitive value"
            }
            HopRule::SumOverN => "min(link, received) per route, advertises sum / N",
        }
    }
}

/// One route a node received.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HopRoute {
    pub via: String,
    pub link: String,
    pub link_gbps: f64,
    /// The transitive value as sent and decoded (absent: the route carried none).
    pub wire: Option<WireValue>,
    /// The value the node used (averaged mode: min'ed with the link).
    pub received_gbps: Option<f64>,
    /// The non-transitive value a super-spine attached.
    pub link_value: Option<WireValue>,
    /// The bandwidth the node gave the route (its weight before rounding).
    pub bandwidth_gbps: f64,
    /// Where the route is one of several parallel links to its neighbor (and the rule is
    /// per node): the links' aggregate, the value the neighbor advertised, the node's
    /// path bandwidth min(aggregate, advertised) and this link's allocation.
    pub parallel: Option<Share>,
}

/// One node on the paths of the explained group, and the one explained.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hop {
    pub node: String,
    /// Hops from the nearest origin.
    pub distance: u32,
    pub rule: HopRule,
    pub routes: Vec<HopRoute>,
    /// Plain ECMP: some route lacked the community the rule needs.
    pub ecmp: bool,
    /// The transitive value it advertises, before the wire (draft; averaged: sum / N,
    /// each link then takes its min with it). Absent: none (ECMP) or an originator.
    pub advertised_gbps: Option<f64>,
    /// The non-transitive value (super-spine).
    pub link_value_gbps: Option<f64>,
    /// Averaged: PathBWsum and N.
    pub path_sum_gbps: Option<f64>,
    pub outgoing: Option<usize>,
}

/// One member of the explained group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberPaths {
    pub via: String,
    pub link: String,
    pub bandwidth_gbps: f64,
    /// Node names from the member's neighbor to an origin (at most [`MAX_PATHS`]).
    pub paths: Vec<Vec<String>>,
}

/// How the bandwidths became integer weights.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reduction {
    pub bandwidths_gbps: Vec<f64>,
    /// Ratios within 1 + this count as exact (the encoding's tolerance).
    pub tolerance: f64,
    /// The ratio reduced without a group-size limit, and its oversubscription.
    pub ratio: Vec<u32>,
    pub ratio_delta: f64,
    /// The data plane's limit (sum of weights), if any.
    pub limit: Option<u32>,
    /// The installed weights (the ratio again without a limit) and their delta.
    pub weights: Vec<u32>,
    pub delta: f64,
}

/// Why `node`'s group for `prefix` is what it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Explanation {
    pub node: String,
    pub prefix: IpNet,
    pub mode: Mode,
    pub encoding: Encoding,
    /// Per node or per session over parallel links ([`crate::parallel`]).
    pub parallel_links: ParallelLinks,
    pub origins: Vec<String>,
    pub members: Vec<MemberPaths>,
    /// Every node on the members' paths, nearest the origins first; the explained node last.
    pub hops: Vec<Hop>,
    pub reduction: Reduction,
}

/// Paths listed per member at most (a member of a large fabric has many).
pub const MAX_PATHS: usize = 16;

/// Why `explain` has nothing to say.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ExplainError {
    #[error("unknown node `{0}`")]
    UnknownNode(String),
    #[error("no node originates {0}")]
    UnknownPrefix(IpNet),
    #[error("{0} originates {1} itself")]
    Originates(String, IpNet),
    #[error("{0} has no route to {1}")]
    NoRoute(String, IpNet),
}

/// Explains `node`'s group for `prefix` under `options` (the model `solve` computes).
pub fn explain(
    topo: &Topology,
    options: &Options,
    node: &str,
    prefix: IpNet,
) -> Result<Explanation, ExplainError> {
    let id = topo
        .node_id(node)
        .ok_or_else(|| ExplainError::UnknownNode(node.to_string()))?;
    let set = super::origin_sets(topo)
        .into_iter()
        .find(|s| s.prefixes.contains(&prefix))
        .ok_or(ExplainError::UnknownPrefix(prefix))?;
    if set.origins.contains(&id) {
        return Err(ExplainError::Originates(node.to_string(), prefix));
    }
    let adjacency = topo.adjacency();
    let shared = super::aspath::SharedAs::new(topo);
    let (unit_of, units, stub_classes) = super::units(topo, &adjacency, &shared, false);
    let ctx = Context::new(
        topo,
        &adjacency,
        options,
        &unit_of,
        &stub_classes,
        units,
        shared,
    );
    let mut worker = Worker::new(&ctx);
    worker.trace = Some(vec![None; topo.nodes.len()]);
    worker.propagate(&set.origins, &mut Vec::new());
    let trace = worker.trace.take().unwrap_or_default();
    let Some(own) = trace[id].as_ref().filter(|t| t.rule.is_some()) else {
        return Err(ExplainError::NoRoute(node.to_string(), prefix));
    };
    let is_origin = |n: NodeId| worker.flags[n] & ORIGIN != 0;
    let name = |n: NodeId| topo.nodes[n].name.clone();
    let members = own
        .routes
        .iter()
        .map(|r| MemberPaths {
            via: name(r.via),
            link: topo.links[r.link].name.clone(),
            bandwidth_gbps: r.bandwidth,
            paths: paths_from(r.via, &trace, &is_origin)
                .into_iter()
                .map(|p| p.into_iter().map(name).collect())
                .collect(),
        })
        .collect();
    let mut on_paths = vec![id];
    collect(id, &trace, &mut on_paths);
    on_paths.sort_by_key(|&n| (worker.dist[n], n));
    let hops = on_paths
        .iter()
        .map(|&n| hop(topo, options, n, worker.dist[n], trace[n].as_ref()))
        .collect();
    let bandwidths: Vec<f64> = if own.ecmp {
        vec![1.0; own.routes.len()]
    } else {
        own.routes.iter().map(|r| r.bandwidth).collect()
    };
    let ratio = group_weights(&bandwidths, options, None);
    let installed = group_weights(&bandwidths, options, options.max_group_size);
    Ok(Explanation {
        node: node.to_string(),
        prefix,
        mode: options.mode,
        encoding: options.encoding,
        parallel_links: options.parallel,
        origins: set.origins.iter().map(|&o| name(o)).collect(),
        members,
        hops,
        reduction: Reduction {
            bandwidths_gbps: own.routes.iter().map(|r| r.bandwidth).collect(),
            tolerance: options.encoding.ratio_tolerance(),
            ratio: ratio.weights,
            ratio_delta: ratio.delta,
            limit: options.max_group_size,
            weights: installed.weights,
            delta: installed.delta,
        },
    })
}

/// Every node whose route `n`'s group depends on, transitively.
fn collect(n: NodeId, trace: &[Option<NodeTrace>], out: &mut Vec<NodeId>) {
    let Some(t) = &trace[n] else { return };
    for r in &t.routes {
        if !out.contains(&r.via) {
            out.push(r.via);
            collect(r.via, trace, out);
        }
    }
}

/// Paths from `from` down to an origin, following each node's routes (at most MAX_PATHS).
fn paths_from(
    from: NodeId,
    trace: &[Option<NodeTrace>],
    is_origin: &dyn Fn(NodeId) -> bool,
) -> Vec<Vec<NodeId>> {
    let mut done = Vec::new();
    let mut stack = vec![vec![from]];
    while let Some(path) = stack.pop() {
        if done.len() >= MAX_PATHS {
            break;
        }
        let last = path[path.len() - 1];
        let routes = trace[last].as_ref().map_or(&[][..], |t| &t.routes[..]);
        if is_origin(last) || routes.is_empty() {
            done.push(path);
            continue;
        }
        // Reversed so the first route's paths come out first.
        for r in routes.iter().rev() {
            let mut next = path.clone();
            next.push(r.via);
            stack.push(next);
        }
    }
    done
}

/// The record of node `n` as shown.
fn hop(topo: &Topology, options: &Options, n: NodeId, distance: u32, t: Option<&NodeTrace>) -> Hop {
    let enc = options.encoding;
    let Some(t) = t.filter(|t| t.rule.is_some()) else {
        return Hop {
            node: topo.nodes[n].name.clone(),
            distance,
            rule: HopRule::Origin,
            routes: Vec::new(),
            ecmp: false,
            advertised_gbps: None,
            link_value_gbps: None,
            path_sum_gbps: None,
            outgoing: None,
        };
    };
    let rule = match (options.mode, t.rule) {
        (Mode::Averaged, _) => HopRule::SumOverN,
        (Mode::Draft, Some(Rule::SuperSpine)) => HopRule::SuperSpinePassThrough,
        (Mode::Draft, Some(Rule::RemoteSpine)) => HopRule::RemoteSpine,
        (Mode::Draft, _) => HopRule::MinSum,
    };
    let routes = t
        .routes
        .iter()
        .map(|r| {
            let received = r.received.as_ref();
            HopRoute {
                via: topo.nodes[r.via].name.clone(),
                link: topo.links[r.link].name.clone(),
                link_gbps: topo.links[r.link].gbps,
                wire: r.sent.map(|v| WireValue::new(enc, v)),
                received_gbps: received.and_then(|x| x.path_gbps),
                link_value: r.link_value_sent.map(|v| WireValue::new(enc, v)),
                bandwidth_gbps: r.bandwidth,
                parallel: r
                    .share
                    .filter(|s| s.links > 1 && options.parallel != ParallelLinks::Session),
            }
        })
        .collect();
    let stub = topo.nodes[n].role.is_stub();
    let (advertised, sum, outgoing) = match (options.mode, t.averaged) {
        (Mode::Averaged, Some((sum, n, value))) => (Some(value), Some(sum), Some(n)),
        (Mode::Averaged, None) => (None, None, None),
        (Mode::Draft, _) => (t.advertised.path_gbps, None, None),
    };
    Hop {
        node: topo.nodes[n].name.clone(),
        distance,
        rule,
        routes,
        ecmp: t.ecmp,
        advertised_gbps: advertised.filter(|_| !stub),
        link_value_gbps: t.advertised.link_value_gbps.filter(|_| !stub),
        path_sum_gbps: sum,
        outgoing,
    }
}

#[cfg(test)]
mod tests {
    //! Expectations worked out by hand from the drafts' text (draft-xu-idr-fare §4.1,
    //! §4.2, the white paper §2.2.1) and IEEE 754 binary16 (1 GB/s = 8 Gbps).
    use super::*;
    use crate::sim::{solve, Change};
    use crate::topology::{gen, load};

    fn figure1_degraded() -> Topology {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../topologies/draft-fig1.yaml"
        );
        let mut t = load(path.as_ref()).unwrap();
        Change::Degrade("S4".into(), "L1".into(), 75.0)
            .apply(&mut t)
            .unwrap();
        t
    }

    fn hop<'e>(e: &'e Explanation, node: &str) -> &'e Hop {
        e.hops.iter().find(|h| h.node == node).unwrap()
    }

    /// Figure 1, S4-L1 at 75G, draft: each spine takes min(link, the originator's
    /// maximum value) and advertises the sum: S1-S3 100, S4 75. On the wire 100 Gbps =
    /// 12.5 GB/s = 1.5625 x 2^3: binary16 exponent 3 + 15 = 18, fraction 0.5625 x 1024 =
    /// 576, bits 18 x 1024 + 576 = 0x4A40; 75 Gbps = 9.375 GB/s = 1.171875 x 2^3, fraction
    /// 176: 0x48B0. Both exact. L8: 100:100:100:75 = 4:4:4:3, 15 entries, delta 1.
    #[test]
    fn every_rule_has_its_own_description() {
        let all = [
            HopRule::Origin,
            HopRule::MinSum,
            HopRule::SuperSpinePassThrough,
            HopRule::RemoteSpine,
            HopRule::SumOverN,
        ];
        let texts: std::collections::HashSet<&str> = all.iter().map(|r| r.describe()).collect();
        assert_eq!(texts.len(), all.len());
        assert!(texts.iter().all(|t| t.len() > 5), "{texts:?}");
    }

    #[test]
    fn figure1_draft_asymmetric() {
        let t = figure1_degraded();
        let p: IpNet = "10.0.1.0/24".parse().unwrap();
        let e = explain(&t, &Options::default(), "L8", p).unwrap();
        assert_eq!(e.origins, ["L1"]);
        let names: Vec<&str> = e.hops.iter().map(|h| h.node.as_str()).collect();
        assert_eq!(names, ["L1", "S1", "S2", "S3", "S4", "L8"]);
        assert_eq!(hop(&e, "L1").rule, HopRule::Origin);
        let s4 = hop(&e, "S4");
        assert_eq!((s4.rule, s4.distance), (HopRule::MinSum, 1));
        // The originator's maximum value: binary16 +infinity, no rounding.
        let w = s4.routes[0].wire.unwrap();
        assert_eq!((w.bits, w.rounding_gbps), (0x7c00, 0.0));
        assert!(w.sent_gbps.is_infinite());
        assert_eq!(s4.routes[0].bandwidth_gbps, 75.0);
        assert_eq!(s4.advertised_gbps, Some(75.0));
        let l8 = hop(&e, "L8");
        let bits: Vec<u16> = l8.routes.iter().map(|r| r.wire.unwrap().bits).collect();
        assert_eq!(bits, [0x4A40, 0x4A40, 0x4A40, 0x48B0]);
        assert!(l8
            .routes
            .iter()
            .all(|r| r.wire.unwrap().rounding_gbps == 0.0));
        let bw: Vec<f64> = e.members.iter().map(|m| m.bandwidth_gbps).collect();
        assert_eq!(bw, [100.0, 100.0, 100.0, 75.0]);
        assert_eq!(e.members[3].paths, [["S4", "L1"]]);
        assert_eq!(e.members[3].link, "S4-L8");
        assert_eq!(e.reduction.ratio, [4, 4, 4, 3]);
        assert_eq!((e.reduction.ratio_delta, e.reduction.delta), (1.0, 1.0));
        assert_eq!(e.reduction.tolerance, 4.0 / 2048.0);
        // The same weights as `solve`.
        let g = solve(&t, &Options::default()).group("L8", p).unwrap();
        let weights: Vec<u32> = g.members.iter().map(|m| m.weight).collect();
        assert_eq!(weights, e.reduction.weights);
    }

    /// The same with a data plane limit of 8 entries (WCMP, EuroSys 2014): sizes 4..8 of
    /// the ideal 1 : 1 : 1 : 0.75 (sum 3.75) give deltas 1.25 (1,1,1,1), 1.5 (2,1,1,1),
    /// 1.25 (2,2,1,1), 15/14 (2,2,2,1), 1.25 (2,2,2,2): 2:2:2:1, delta 15/14.
    #[test]
    fn figure1_limit_reduction() {
        let t = figure1_degraded();
        let p: IpNet = "10.0.1.0/24".parse().unwrap();
        let opts = Options {
            max_group_size: Some(8),
            ..Default::default()
        };
        let e = explain(&t, &opts, "L8", p).unwrap();
        assert_eq!(e.reduction.ratio, [4, 4, 4, 3]);
        assert_eq!(e.reduction.limit, Some(8));
        assert_eq!(e.reduction.weights, [2, 2, 2, 1]);
        assert!((e.reduction.delta - 15.0 / 14.0).abs() < 1e-9);
        let g = solve(&t, &opts).group("L8", p).unwrap();
        assert_eq!(
            g.members.iter().map(|m| m.weight).collect::<Vec<_>>(),
            [2, 2, 2, 1]
        );
    }

    /// Averaged mode: each spine advertises PathBWsum / N with N = 7 (its 8 leaf links
    /// but the incoming one): S1-S3 100/7, S4 75/7 Gbps. 100/7 / 8 = 1.785714 GB/s:
    /// exponent 0 (biased 15), fraction 0.785714 x 1024 = 804.57 -> 805: bits 15 x 1024 +
    /// 805 = 0x3F25, decoded (1 + 805/1024) x 8 = 14.2890625. 75/7 / 8 = 1.339286 GB/s:
    /// fraction 347.43 -> 347: 0x3D5B, 10.7109375. Ratio 0.749590, within 4 x 2^-11 of
    /// 3:4 (delta (3 / 0.749590) x 3.749590 / 15 = 1.00044): 4:4:4:3.
    #[test]
    fn figure1_averaged_wire_rounding() {
        let t = figure1_degraded();
        let p: IpNet = "10.0.1.0/24".parse().unwrap();
        let opts = Options {
            mode: Mode::Averaged,
            ..Default::default()
        };
        let e = explain(&t, &opts, "L8", p).unwrap();
        let s4 = hop(&e, "S4");
        assert_eq!(s4.rule, HopRule::SumOverN);
        assert_eq!((s4.path_sum_gbps, s4.outgoing), (Some(75.0), Some(7)));
        assert_eq!(s4.advertised_gbps, Some(75.0 / 7.0));
        let l8 = hop(&e, "L8");
        let wire: Vec<WireValue> = l8.routes.iter().map(|r| r.wire.unwrap()).collect();
        assert_eq!(
            wire.iter().map(|w| w.bits).collect::<Vec<_>>(),
            [0x3F25, 0x3F25, 0x3F25, 0x3D5B]
        );
        assert_eq!(wire[0].decoded_gbps, 14.2890625);
        assert_eq!(wire[3].decoded_gbps, 10.7109375);
        assert!((wire[0].rounding_gbps - (14.2890625 - 100.0 / 7.0)).abs() < 1e-12);
        assert!((wire[3].rounding_gbps - (10.7109375 - 75.0 / 7.0)).abs() < 1e-12);
        assert!(wire[3].rounding_gbps < 0.0 && wire[0].rounding_gbps > 0.0);
        assert_eq!(e.reduction.ratio, [4, 4, 4, 3]);
        let x = 10.7109375 / 14.2890625;
        let delta = (3.0 / x) * (3.0 + x) / 15.0;
        assert!((e.reduction.ratio_delta - delta).abs() < 1e-12);
        assert!(e.reduction.ratio_delta > 1.0 && e.reduction.ratio_delta < 1.0 + 4.0 / 2048.0);
    }

    /// 5-stage (draft §4.2), 2 PoDs x 2 leaves, 2 planes of 2 super-spines, SS1@Plane1 -
    /// S1@PoD1 at 50G. S1@PoD1 advertises 100 (min/sum over its one leaf link). Each
    /// super-spine passes 100 unchanged and attaches its link toward S1@PoD1: SS1 50
    /// (6.25 GB/s = 1.5625 x 2^2: 0x4640), SS2 100. S1@PoD2 weighs min(link 100, link
    /// value): 50 : 100 = 1:2 and passes 100 on; L1@PoD2 sees 100 per plane: 1:1.
    #[test]
    fn five_stage_pass_through_and_remote_spine() {
        let mut t = gen::clos5(2, 2, 2, 2, 100.0);
        Change::Degrade("SS1@Plane1".into(), "S1@PoD1".into(), 50.0)
            .apply(&mut t)
            .unwrap();
        let p = gen::block_prefix(0);
        let e = explain(&t, &Options::default(), "L1@PoD2", p).unwrap();
        assert_eq!(e.origins, ["L1@PoD1"]);
        let ss1 = hop(&e, "SS1@Plane1");
        assert_eq!(ss1.rule, HopRule::SuperSpinePassThrough);
        assert_eq!(ss1.routes[0].wire.unwrap().bits, 0x4A40);
        assert_eq!(ss1.advertised_gbps, Some(100.0));
        assert_eq!(ss1.link_value_gbps, Some(50.0));
        let remote = hop(&e, "S1@PoD2");
        assert_eq!(remote.rule, HopRule::RemoteSpine);
        let lv: Vec<u16> = remote
            .routes
            .iter()
            .map(|r| r.link_value.unwrap().bits)
            .collect();
        assert_eq!(lv, [0x4640, 0x4A40]);
        let bw: Vec<f64> = remote.routes.iter().map(|r| r.bandwidth_gbps).collect();
        assert_eq!(bw, [50.0, 100.0]);
        assert_eq!(remote.advertised_gbps, Some(100.0));
        assert_eq!(e.reduction.ratio, [1, 1]);
        assert_eq!(
            e.members[0].paths,
            [
                ["S1@PoD2", "SS1@Plane1", "S1@PoD1", "L1@PoD1"],
                ["S1@PoD2", "SS2@Plane1", "S1@PoD1", "L1@PoD1"]
            ]
        );
        let e = explain(&t, &Options::default(), "S1@PoD2", p).unwrap();
        assert_eq!(e.reduction.ratio, [1, 2]);
    }

    #[test]
    fn errors_name_the_problem() {
        let t = figure1_degraded();
        let p: IpNet = "10.0.1.0/24".parse().unwrap();
        let o = Options::default();
        assert_eq!(
            explain(&t, &o, "X", p),
            Err(ExplainError::UnknownNode("X".into()))
        );
        assert_eq!(
            explain(&t, &o, "L1", p),
            Err(ExplainError::Originates("L1".into(), p))
        );
        let q: IpNet = "192.0.2.0/24".parse().unwrap();
        assert_eq!(
            explain(&t, &o, "L8", q),
            Err(ExplainError::UnknownPrefix(q))
        );
    }
}
