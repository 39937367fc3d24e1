//! Prometheus metrics on an opt-in HTTP listener (`management.metrics: ADDR`), `/metrics`
//! only (404 elsewhere).
//!
//! Every scrape builds a `prometheus-client` registry from what the agent knows at that
//! moment (shared state, data plane groups, ARN counters, the speaker's Adj-RIBs-Out,
//! /proc/self), so nothing has to be kept in sync with the protocols. The body is
//! OpenMetrics when the scraper asks for it (Prometheus does), else the Prometheus text
//! format 0.0.4 (what `curl` and `promtool check metrics` read). Families and labels are
//! listed in docs/agent.md.

mod process;

use super::state::{AgentState, SessionState};
use super::AgentContext;
use fare_bgp::speaker::{Advertised, SpeakerCommand};
use fare_common::Stat;
use fare_dataplane::GroupStatus;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry, Unit};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use tokio::net::TcpListener;
use tracing::debug;

pub use process::ProcessStats;

/// At most this many series in each family labelled by prefix (the five per-member
/// families, path bandwidth received and advertised) per scrape: those grow with
/// prefixes x members, 512 x 64 would be 32,768 each. The members shown are the first
/// ones in prefix order, the same in each member family; `fare_metrics_series_capped`
/// says which families reached the cap (docs/agent.md).
pub const MAX_PREFIX_SERIES: usize = 2_048;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds `addr` and serves until `ctx.shutdown` is cancelled.
pub async fn serve(
    addr: SocketAddr,
    ctx: AgentContext,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    Ok(tokio::spawn(async move {
        loop {
            let (stream, peer) = tokio::select! {
                _ = ctx.shutdown.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => { debug!("metrics accept: {e}"); continue; }
                },
            };
            let ctx = ctx.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let ctx = ctx.clone();
                        async move { Ok::<_, Infallible>(respond(&ctx, &req).await) }
                    });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    debug!(%peer, "metrics connection: {e}");
                }
            });
        }
    }))
}

type Body = http_body_util::Full<Bytes>;

/// GET /metrics: the exposition in the format the `Accept` header prefers.
async fn respond<B>(ctx: &AgentContext, req: &Request<B>) -> Response<Body> {
    if req.uri().path() != "/metrics" {
        let mut r = Response::new(Body::from("not found: metrics are on /metrics\n"));
        *r.status_mut() = StatusCode::NOT_FOUND;
        return r;
    }
    let openmetrics = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    let registry = scrape(ctx).await;
    let (body, content_type) = encode(&registry, openmetrics);
    let mut r = Response::new(Body::from(body));
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

/// The registry as OpenMetrics or as the Prometheus text format, with its content type.
pub fn encode(registry: &Registry, openmetrics: bool) -> (String, &'static str) {
    let mut out = String::new();
    // Writing to a String cannot fail; an encoder error would be a bug in a family.
    let result = if openmetrics {
        text::encode(&mut out, registry)
    } else {
        prometheus_text::encode(&mut out, registry)
    };
    if let Err(e) = result {
        debug!("metrics encoding: {e}");
    }
    let content_type = if openmetrics {
        OPENMETRICS
    } else {
        prometheus_text::CONTENT_TYPE
    };
    (out, content_type)
}

/// Everything one scrape reads, gathered before the registry is built.
#[derive(Default)]
pub struct Snapshot<'a> {
    pub groups: &'a [GroupStatus],
    /// Data plane operations by kind: (op, succeeded, failed).
    pub ops: &'a [(&'static str, u64, u64)],
    pub advertised: &'a [Advertised],
    /// The XDP program's counters (empty for other backends).
    pub packets: &'a [(&'static str, u64)],
    pub process: Option<ProcessStats>,
}

/// One scrape: state, data plane groups, the speaker's advertised values, /proc/self.
pub async fn scrape(ctx: &AgentContext) -> Registry {
    let groups = ctx.dataplane.groups().await.unwrap_or_default();
    let packets: Vec<(&'static str, u64)> = ctx
        .dataplane
        .packet_counters()
        .await
        .map_err(|e| debug!("data plane packet counters: {e}"))
        .unwrap_or_default()
        .into_iter()
        .collect();
    let advertised = advertised(ctx).await;
    let stats = ctx.dataplane.stats();
    let op = |name, c: &crate::dataplane_task::OpCounts| {
        let (ok, failed) = c.load();
        (name, ok, failed)
    };
    let ops = [
        op("install", &stats.installs),
        op("remove", &stats.removes),
        op("member_state", &stats.member_changes),
    ];
    let snapshot = Snapshot {
        groups: &groups,
        ops: &ops,
        advertised: &advertised,
        packets: &packets,
        process: process::read().map_err(|e| debug!("/proc/self: {e}")).ok(),
    };
    let state = ctx.state.read();
    registry(&state, &snapshot)
}

/// What the speaker advertises (empty without a speaker, or if it does not answer soon).
async fn advertised(ctx: &AgentContext) -> Vec<Advertised> {
    let Some(commands) = ctx.speaker.get() else {
        return Vec::new();
    };
    let ask = async {
        let (reply, rx) = tokio::sync::oneshot::channel();
        let cmd = SpeakerCommand::Advertised {
            // One more than shown: the scrape knows whether the cap was reached.
            limit: MAX_PREFIX_SERIES + 1,
            reply,
        };
        commands.send(cmd).await.ok()?;
        rx.await.ok()
    };
    // A busy speaker (a full table arriving) must not hold the scrape up.
    tokio::time::timeout(Duration::from_secs(2), ask)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

type Labels = Vec<(&'static str, String)>;
type GaugeF = Gauge<f64, AtomicU64>;

/// The base unit a family's name ends with, and the name without it: the encoders add
/// the unit back to the name, and OpenMetrics declares it (`# UNIT`).
fn unit(name: &str) -> Option<(&str, Unit)> {
    [
        ("_bytes_per_second", Unit::Other("bytes_per_second".into())),
        ("_bytes", Unit::Bytes),
        ("_seconds", Unit::Seconds),
    ]
    .into_iter()
    .find_map(|(suffix, unit)| Some((name.strip_suffix(suffix)?, unit)))
}

/// Registers families filled from values read at scrape time, and keeps their names
/// as queries see them (`_total` on counters) whether or not they have samples.
#[derive(Default)]
struct Builder {
    registry: Registry,
    names: Vec<String>,
}

impl Builder {
    fn register(&mut self, name: &str, help: &str, metric: impl Metric) {
        match unit(name) {
            Some((stem, unit)) => self.registry.register_with_unit(stem, help, unit, metric),
            None => self.registry.register(name, help, metric),
        }
    }

    fn gauge(&mut self, name: &str, help: &str, samples: impl IntoIterator<Item = (Labels, f64)>) {
        let family = Family::<Labels, GaugeF>::default();
        for (labels, v) in samples {
            family.get_or_create(&labels).set(v);
        }
        self.register(name, help, family);
        self.names.push(name.to_string());
    }

    /// One unlabelled counter with a fractional value (CPU seconds).
    fn counter_f64(&mut self, name: &str, help: &str, value: f64) {
        let counter = Counter::<f64, AtomicU64>::default();
        counter.inc_by(value);
        self.register(name, help, counter);
        self.names.push(format!("{name}_total"));
    }

    /// `name` without `_total` (the encoders add it).
    fn counter(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels, u64)>,
    ) {
        let family = Family::<Labels, Counter>::default();
        for (labels, v) in samples {
            family.get_or_create(&labels).inc_by(v);
        }
        self.register(name, help, family);
        self.names.push(format!("{name}_total"));
    }
}

/// Gbps in bytes per second: Prometheus' base unit for data is the byte (promtool
/// rejects `_bits`); a dashboard multiplies by 8 to show bits. None for a value that is
/// no number of bytes: a prefix this node originates is advertised with an unlimited
/// (infinite) bandwidth, and `+Inf` in a gauge breaks every sum over it.
/// One sample per BGP path of every route: `value` of the path, in bytes/s.
fn path_samples<'a>(
    state: &'a AgentState,
    value: impl Fn(&crate::state::RoutePath) -> Option<f64> + Copy + 'a,
) -> impl Iterator<Item = (Vec<(&'static str, String)>, f64)> + 'a {
    state.routes.values().flat_map(move |r| {
        r.paths.iter().filter_map(move |p| {
            let labels = vec![
                ("prefix", r.prefix.to_string()),
                ("neighbor", p.neighbor?.to_string()),
            ];
            Some((labels, bytes_per_second(value(p)?)?))
        })
    })
}

fn bytes_per_second(gbps: f64) -> Option<f64> {
    (gbps.is_finite() && gbps >= 0.0).then(|| gbps * 1e9 / 8.0)
}

/// The registry of one scrape (apart from I/O, so it is unit-tested).
pub fn registry(state: &AgentState, s: &Snapshot) -> Registry {
    build(state, s).registry
}

fn build(state: &AgentState, s: &Snapshot) -> Builder {
    let mut b = Builder::default();
    identity(&mut b, state);
    if let Some(p) = &s.process {
        process::register(&mut b, p);
    }
    neighbors(&mut b, state);
    let mut capped = routes(&mut b, state, s.advertised);
    capped.extend(groups(&mut b, s.groups));
    b.gauge(
        "fare_metrics_series_capped",
        "1 when the family reached its cap on series in this scrape (some of its series \
         are left out), else 0",
        capped
            .into_iter()
            .map(|(f, c)| (vec![("family", f.to_string())], f64::from(u8::from(c)))),
    );
    b.counter(
        "fare_dataplane_operations",
        "Data plane operations by kind and outcome (ok, error)",
        s.ops.iter().flat_map(|(op, ok, failed)| {
            [("ok", *ok), ("error", *failed)]
                .map(|(outcome, n)| (vec![("op", op.to_string()), ("outcome", outcome.into())], n))
        }),
    );
    xdp(&mut b, s.packets);
    arn(&mut b, state);
    b
}

/// The XDP program's counters: each packet in exactly one outcome (so a sum over the
/// outcomes is the packets received), and two counts beside them.
fn xdp(b: &mut Builder, packets: &[(&'static str, u64)]) {
    let value = |stat: Stat| {
        packets
            .iter()
            .find(|(name, _)| *name == stat.name())
            .map(|(_, n)| *n)
    };
    b.counter(
        "fare_xdp_packets",
        "Packets the XDP program handled, by outcome (each packet in one: the sum is every \
         packet received; malformed, redirect_failed and queue_dropped are drops)",
        Stat::OUTCOMES
            .into_iter()
            .filter_map(|s| Some((vec![("outcome", s.name().to_string())], value(s)?))),
    );
    b.counter(
        "fare_xdp_dpf_colored_packets",
        "Packets forwarded by the group of the DPF color a flow rule gave them (also \
         counted in outcome forwarded)",
        value(Stat::DpfColored).map(|n| (Labels::new(), n)),
    );
    b.counter(
        "fare_xdp_arn_kept_last_member",
        "ARNs the XDP program did not apply because they would take out a group's last \
         active member",
        value(Stat::ArnKeptLast).map(|n| (Labels::new(), n)),
    );
}

fn identity(b: &mut Builder, state: &AgentState) {
    b.gauge(
        "fare_build_info",
        "Version and commit of the running build (value 1)",
        [(
            vec![
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                ("commit", crate::BUILD_COMMIT.to_string()),
            ],
            1.0,
        )],
    );
    b.gauge(
        "fare_agent_info",
        "Identity of this agent (value 1)",
        [(
            vec![
                ("name", state.name.clone()),
                ("router_id", state.router_id.to_string()),
                ("asn", state.asn.to_string()),
                ("dataplane", state.dataplane.to_string()),
            ],
            1.0,
        )],
    );
}

type Count = fn(&super::state::NeighborStatus) -> u64;

/// Per-neighbor families: (name, proto field whose comment in fare.proto is the help
/// text, value). A test holds each help text equal to the proto's.
pub(crate) const NEIGHBOR_COUNTERS: [(&str, &str, &str, Count); 8] = [
    (
        "fare_bgp_neighbor_flaps",
        "flaps",
        "Transitions out of Established (an Established session that ended)",
        |n| n.flaps,
    ),
    (
        "fare_bgp_neighbor_prefixes_received",
        "prefixes_received",
        "Prefixes announced in the UPDATEs received (re-announcements count again)",
        |n| n.prefixes_received,
    ),
    (
        "fare_bgp_neighbor_updates_received",
        "updates_received",
        "UPDATE messages received",
        |n| n.updates_received,
    ),
    (
        "fare_bgp_neighbor_updates_sent",
        "updates_sent",
        "UPDATE messages sent",
        |n| n.updates_sent,
    ),
    (
        "fare_bgp_neighbor_notifications_received",
        "notifications_received",
        "NOTIFICATION messages received",
        |n| n.notifications_received,
    ),
    (
        "fare_bgp_neighbor_notifications_sent",
        "notifications_sent",
        "NOTIFICATION messages sent",
        |n| n.notifications_sent,
    ),
    (
        "fare_bgp_neighbor_malformed_updates",
        "malformed_updates",
        "UPDATEs with a malformed attribute handled per RFC 7606 (attribute discard, \
         treat-as-withdraw)",
        |n| n.malformed_updates,
    ),
    (
        "fare_bgp_neighbor_link_bandwidth_ignored",
        "link_bandwidth_ignored",
        "Link Bandwidth communities (RFC 10005) ignored for a NaN, infinite or negative value",
        |n| n.link_bandwidth_ignored,
    ),
];

/// The per-neighbor gauges, as `NEIGHBOR_COUNTERS`.
pub(crate) const NEIGHBOR_GAUGES: [(&str, &str, &str, Count); 2] = [
    (
        "fare_bgp_neighbor_prefixes_accepted",
        "prefixes_accepted",
        "Prefixes from the neighbor in the Adj-RIB-In now (accepted by the import rules)",
        |n| n.prefixes_accepted,
    ),
    (
        "fare_bgp_neighbor_prefixes_advertised",
        "prefixes_advertised",
        "Prefixes advertised to the neighbor now (its Adj-RIB-Out)",
        |n| n.prefixes_advertised,
    ),
];

fn neighbors(b: &mut Builder, state: &AgentState) {
    let nbs = || state.neighbors.values();
    let by = |n: &super::state::NeighborStatus| vec![("neighbor", n.address.to_string())];
    b.gauge(
        "fare_bgp_neighbor_state",
        "BGP session state (RFC 4271 8.2.2): 1 for the current state, 0 for the others",
        nbs().flat_map(|n| {
            SessionState::ALL.into_iter().map(move |st| {
                let mut l = by(n);
                l.push(("state", st.to_string()));
                (l, f64::from(u8::from(n.state == st)))
            })
        }),
    );
    b.gauge(
        "fare_bgp_neighbor_established_timestamp_seconds",
        "When the session reached Established, UNIX seconds (only while Established: \
         uptime is time() minus this)",
        nbs().filter_map(|n| {
            let at = n
                .established_at
                .filter(|_| n.state == SessionState::Established)?;
            Some((by(n), at as f64))
        }),
    );
    for (name, _, help, value) in NEIGHBOR_COUNTERS {
        b.counter(name, help, nbs().map(|n| (by(n), value(n))));
    }
    for (name, _, help, value) in NEIGHBOR_GAUGES {
        b.gauge(name, help, nbs().map(|n| (by(n), value(n) as f64)));
    }
}

/// At most `MAX_PREFIX_SERIES` of `samples`, and whether some were left out.
fn capped<T>(samples: impl Iterator<Item = T>) -> (Vec<T>, bool) {
    let mut out: Vec<T> = samples.take(MAX_PREFIX_SERIES + 1).collect();
    let over = out.len() > MAX_PREFIX_SERIES;
    out.truncate(MAX_PREFIX_SERIES);
    (out, over)
}

/// The route families; returns the capped families and whether each reached its cap.
fn routes(
    b: &mut Builder,
    state: &AgentState,
    advertised: &[Advertised],
) -> Vec<(&'static str, bool)> {
    let mut per_source: BTreeMap<String, f64> = ["bgp", "static", "local"]
        .into_iter()
        .map(|s| (s.to_string(), 0.0))
        .collect();
    for (_, source) in state.routes.keys() {
        *per_source.entry(source.to_string()).or_default() += 1.0;
    }
    b.gauge(
        "fare_routes",
        "Routes known, per source",
        per_source
            .into_iter()
            .map(|(s, n)| (vec![("source", s)], n)),
    );
    let received = "fare_bgp_path_bandwidth_received_bytes_per_second";
    let (samples, received_capped) = capped(path_samples(state, |p| p.received_gbps));
    b.gauge(
        received,
        "Path Bandwidth of each BGP path of a prefix, as the route carried it (bytes/s; \
         none for \"max\")",
        samples,
    );
    let used = "fare_bgp_path_bandwidth_used_bytes_per_second";
    let (samples, used_capped) = capped(path_samples(state, |p| p.path_bandwidth_gbps));
    b.gauge(
        used,
        "Bandwidth the FARE decision used for each BGP path of a prefix: the received \
         value capped by the link (bytes/s)",
        samples,
    );
    let sent = "fare_bgp_path_bandwidth_advertised_bytes_per_second";
    // The speaker answers with one entry more than the cap when it has more.
    let (samples, _) = capped(advertised.iter().filter_map(|a| {
        let labels = vec![
            ("prefix", a.prefix.to_string()),
            ("neighbor", a.neighbor.to_string()),
        ];
        Some((labels, bytes_per_second(a.path_bandwidth_gbps?)?))
    }));
    b.gauge(
        sent,
        "Path Bandwidth advertised for a prefix to a neighbor (bytes/s; none for an \
         unlimited bandwidth)",
        samples,
    );
    vec![
        (received, received_capped),
        (used, used_capped),
        (sent, advertised.len() > MAX_PREFIX_SERIES),
    ]
}

/// The group families; returns the per-member families and whether they reached the cap.
fn groups(b: &mut Builder, groups: &[GroupStatus]) -> Vec<(&'static str, bool)> {
    b.gauge(
        "fare_groups",
        "WCMP groups installed in the data plane",
        [(Labels::new(), groups.len() as f64)],
    );
    let all = groups.iter().map(|g| g.group.members.len()).sum::<usize>();
    b.gauge(
        "fare_group_members",
        "Members of the WCMP groups installed in the data plane",
        [(Labels::new(), all as f64)],
    );
    let (members, over) = capped(groups.iter().flat_map(|g| {
        g.group.members.iter().zip(&g.members).map(move |(m, s)| {
            let labels = vec![
                ("prefix", g.group.prefix.to_string()),
                ("via", m.via.clone()),
                ("interface", m.interface.clone()),
            ];
            (labels, m, s)
        })
    }));
    let members = || members.iter().map(|(l, m, s)| (l.clone(), m, s));
    let mut names = Vec::new();
    let mut gauge = |b: &mut Builder, name, help, samples: Vec<(Labels, f64)>| {
        b.gauge(name, help, samples);
        names.push((name, over));
    };
    gauge(
        b,
        "fare_group_member_weight",
        "Weight of the member in its group (as installed)",
        members()
            .map(|(l, m, _)| (l, f64::from(m.weight)))
            .collect(),
    );
    gauge(
        b,
        "fare_group_member_path_bandwidth_bytes_per_second",
        "Path bandwidth the member's weight came from (bytes/s)",
        members()
            .filter_map(|(l, m, _)| Some((l, bytes_per_second(m.bandwidth_gbps)?)))
            .collect(),
    );
    gauge(
        b,
        "fare_group_member_active",
        "1 unless the member is taken out (ARN, port down)",
        members()
            .map(|(l, _, s)| (l, f64::from(u8::from(s.active))))
            .collect(),
    );
    b.counter(
        "fare_group_member_packets",
        "Packets forwarded through the member (backends that count them: XDP, P4)",
        members().map(|(l, _, s)| (l, s.packets)),
    );
    b.counter(
        "fare_group_member_bytes",
        "Bytes forwarded through the member (backends that count them: XDP, P4)",
        members().map(|(l, _, s)| (l, s.bytes)),
    );
    names.push(("fare_group_member_packets_total", over));
    names.push(("fare_group_member_bytes_total", over));
    names
}

/// ARN counters (without `arn:` the families are there, empty).
fn arn(b: &mut Builder, state: &AgentState) {
    let arn = state.arn.as_ref();
    let c = arn.map(|a| a.counters.snapshot()).unwrap_or_default();
    let by_type = |name: &str, help: &str, v: [u64; 4], b: &mut Builder| {
        b.counter(
            name,
            help,
            (1..=4).map(|t| (vec![("type", t.to_string())], v[t - 1])),
        );
    };
    let sent = arn.map_or([0; 4], |a| [1, 2, 3, 4].map(|t| a.sent.get(t)));
    by_type("fare_arn_sent", "ARNs sent, by Type", sent, b);
    let received = [c.type1, c.type2, c.type3, c.type4];
    by_type("fare_arn_received", "ARNs accepted, by Type", received, b);
    let labelled = |key: &'static str, v: &[(&str, u64)]| {
        v.iter()
            .map(move |(k, n)| (vec![(key, k.to_string())], *n))
            .collect::<Vec<_>>()
    };
    b.counter(
        "fare_arn_applied",
        "Changes made because of ARNs, by action",
        labelled(
            "action",
            &[
                ("member_removed", c.members_removed),
                ("member_restored", c.members_restored),
                ("member_expired", c.expired),
                ("flow_steered", c.flows_steered),
                ("flow_released", c.flows_released),
                ("share_cut", c.shares_cut),
                ("share_restored", c.shares_restored),
                ("propagated", c.propagated),
            ],
        ),
    );
    b.counter(
        "fare_arn_dropped",
        "ARN datagrams rejected, or ARNs not applied, by reason",
        labelled(
            "reason",
            &[
                ("not_neighbor", c.dropped_not_neighbor),
                ("wrong_interface", c.dropped_wrong_interface),
                ("ttl", c.dropped_ttl),
                ("rate_limit", c.dropped_rate),
                ("malformed", c.malformed),
                ("other_group", c.dropped_other_group),
                ("unmatched", c.unmatched),
                ("last_member", c.refused_last_member),
                ("backend_error", c.backend_errors),
                ("stale", c.stale_dropped),
            ],
        ),
    );
    b.gauge(
        "fare_arn_members_removed",
        "Members held out by ARN now",
        [(Labels::new(), arn.map_or(0, |a| a.removed().len()) as f64)],
    );
}

/// Every family name a query can use (`_total` on counters), as the code registers
/// them: the dashboard test checks its queries against this list.
pub fn family_names() -> Vec<String> {
    let state = AgentState {
        name: String::new(),
        router_id: std::net::Ipv4Addr::UNSPECIFIED,
        asn: 0,
        dataplane: "none",
        started: std::time::Instant::now(),
        neighbors: BTreeMap::new(),
        routes: BTreeMap::new(),
        arn: None,
    };
    let snapshot = Snapshot {
        process: Some(ProcessStats {
            max_fds: Some(0),
            ..Default::default()
        }),
        ..Default::default()
    };
    build(&state, &snapshot).names
}

#[cfg(test)]
mod tests;
