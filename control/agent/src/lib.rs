//! `fare agent`: one per fabric node. Loads its configuration, programs the data plane
//! with static groups and (with BGP) computed groups, and serves the management API.
//!
//! # Shape of the runtime
//!
//! ```text
//!  config ──> static groups ─┐
//!  BGP task ── Group ────────┼──> DataplaneHandle ──mpsc──> data plane task ──> Box<dyn Dataplane>
//!  ARN task ── member on/off ┘                                   ^
//!  mgmt server, metrics ── groups() (counters) ──────────────────┘
//!  BGP task ── neighbors, routes ──> SharedState <── mgmt server, metrics (read)
//! ```
//!
//! # The seam protocols plug into
//!
//! A protocol is a task started in [`protocols::spawn`] with a clone of [`AgentContext`]:
//! - `ctx.config`: the loaded configuration (`neighbors`, `prefixes`, `fare.mode`...).
//! - `ctx.state` ([`state::SharedState`]): write neighbor session state
//!   (`ctx.state.write().set_neighbor_state(addr, SessionState::Established, None)`),
//!   counters on [`state::NeighborStatus`], and routes (`set_route`/`remove_route`
//!   with [`state::RouteSource::Bgp`]). Never hold the lock across an `.await`.
//! - `ctx.dataplane` ([`dataplane_task::DataplaneHandle`]): `install(Group)` (replaces
//!   make-before-break), `remove(prefix)`, `set_member_active(prefix, index, active)`
//!   (ARN), `groups()`. Each call returns once the backend has applied it, so the time
//!   of the last `install` is the convergence time. `Member::via` is the neighbor
//!   address for BGP members, the neighbor MAC for static ones.
//! - `ctx.shutdown`: cancelled on SIGTERM/SIGINT; the task must return soon after.
//! - `ctx.events`: publish what changed for `Watch` (`mgmt::views` builds the events),
//!   while holding the state lock so that events follow the state's order.
//! - `ctx.speaker`: the BGP task puts its speaker's command channel there, for run-time
//!   changes ([`set_bandwidth`] from the management API and on SIGHUP, see [`reload`]).
//!
//! On exit the agent leaves the data plane forwarding: nothing is torn down, and the next
//! agent re-attaches to what it finds (`backend::open`) and replaces it make-before-break.

/// The git commit this agent was built from (`FARE_GIT_COMMIT` at build time, else `git
/// rev-parse`, else "unknown"): `fare --version` and `fare_build_info` show it.
pub const BUILD_COMMIT: &str = env!("FARE_GIT_COMMIT");

pub mod actions;
pub mod arn_status;
pub mod arn_task;
pub mod backend;
pub mod bgp_task;
pub mod changes;
mod checks;
pub mod config;
pub mod dataplane_task;
pub mod metrics;
pub mod mgmt;
pub mod protocol_error;
pub mod protocols;
pub mod reload;
pub mod state;
pub mod statics;
pub mod systemd;

use config::AgentConfig;
use dataplane_task::DataplaneHandle;
use state::{AgentState, SharedState};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

/// Everything a protocol task needs; cheap to clone.
#[derive(Clone, Debug)]
pub struct AgentContext {
    pub config: Arc<AgentConfig>,
    pub state: SharedState,
    pub dataplane: DataplaneHandle,
    pub shutdown: CancellationToken,
    pub speaker: SpeakerSlot,
    /// What `Watch` streams: every change is published here (see [`mgmt::watch`]).
    pub events: mgmt::watch::EventHub,
    /// The configuration in force after SIGHUP reloads (`config` is the one started
    /// with): what `fare show config` shows.
    pub running: reload::Running,
    /// Asks the reload task to read the file again (`fare reload`).
    pub reload: reload::Trigger,
}

/// The command channel of the running BGP speaker, once the BGP task has started it.
#[derive(Clone, Debug, Default)]
pub struct SpeakerSlot(Arc<(std::sync::Mutex<Option<SpeakerSender>>, tokio::sync::Notify)>);

type SpeakerSender = tokio::sync::mpsc::Sender<fare_bgp::speaker::SpeakerCommand>;

impl SpeakerSlot {
    pub fn set(&self, commands: SpeakerSender) {
        if let Ok(mut s) = self.0 .0.lock() {
            *s = Some(commands);
        }
        self.0 .1.notify_waiters();
    }

    pub fn get(&self) -> Option<SpeakerSender> {
        self.0 .0.lock().ok().and_then(|s| s.clone())
    }

    /// Waits until the speaker has started (its listener bound, its sessions configured).
    pub async fn started(&self) {
        loop {
            let notified = self.0 .1.notified();
            tokio::pin!(notified);
            // Registered before the check, so a `set` in between is not missed.
            notified.as_mut().enable();
            if self.get().is_some() {
                return;
            }
            notified.await;
        }
    }
}

/// Which links [`set_bandwidth`] changes.
#[derive(Clone, Debug, PartialEq)]
pub enum BandwidthTarget {
    Neighbor(std::net::IpAddr),
    /// Every neighbor whose `interface` is this one.
    Interface(String),
}

impl std::fmt::Display for BandwidthTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BandwidthTarget::Neighbor(a) => write!(f, "neighbor {a}"),
            BandwidthTarget::Interface(i) => write!(f, "interface {i}"),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SetBandwidthError {
    /// The bandwidth is outside what the Path Bandwidth community carries (the message).
    #[error("bandwidth: {0}")]
    Invalid(String),
    #[error("no configured neighbor matches {0}")]
    NoMatch(BandwidthTarget),
    #[error("this agent runs no BGP speaker (no neighbors configured)")]
    NoSpeaker,
    #[error("the BGP speaker stopped")]
    Stopped,
}

/// Sets (`Some`) or clears (`None`: the interface speed again) the link bandwidth of the
/// target's neighbors in the running speaker, which decides every prefix again and
/// re-advertises at once. Returns each neighbor with the bandwidth now used for it.
pub async fn set_bandwidth(
    ctx: &AgentContext,
    target: &BandwidthTarget,
    gbps: Option<f64>,
) -> Result<Vec<(std::net::IpAddr, Option<f64>)>, SetBandwidthError> {
    if let Some(g) = gbps {
        fare_model::bandwidth::check_gbps(g).map_err(SetBandwidthError::Invalid)?;
    }
    let commands = ctx.speaker.get().ok_or(SetBandwidthError::NoSpeaker)?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    let (neighbor, interface) = match target {
        BandwidthTarget::Neighbor(a) => (Some(*a), None),
        BandwidthTarget::Interface(i) => (None, Some(i.clone())),
    };
    commands
        .send(fare_bgp::speaker::SpeakerCommand::SetBandwidth {
            neighbor,
            interface,
            gbps,
            reply,
        })
        .await
        .map_err(|_| SetBandwidthError::Stopped)?;
    let set = answer.await.map_err(|_| SetBandwidthError::Stopped)?;
    if set.is_empty() {
        return Err(SetBandwidthError::NoMatch(target.clone()));
    }
    let mut state = ctx.state.write();
    for (addr, now) in &set {
        if let Some(n) = state.neighbors.get_mut(addr) {
            n.bandwidth_gbps = *now;
        }
        ctx.events.publish(changes::Change::Bandwidth {
            neighbor: *addr,
            gbps: *now,
        });
    }
    info!(%target, ?gbps, "link bandwidth changed at run time");
    Ok(set)
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    // No `#[source]` where the message holds the cause: `{:#}` would print it twice.
    #[error("data plane: {0}")]
    Dataplane(fare_dataplane::DataplaneError),
    #[error("static group {prefix}: {source}")]
    StaticGroup {
        prefix: ipnet::IpNet,
        #[source]
        source: dataplane_task::HandleError,
    },
    #[error("management API: {0}")]
    Mgmt(mgmt::MgmtError),
    #[error("metrics listener on {addr}: {source}")]
    Metrics {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// Something the configuration needs from the host is not there (checked at start).
    #[error("{0}")]
    Host(String),
    #[error("signal handler: {0}")]
    Signal(#[source] std::io::Error),
    #[error("{task} stopped: {source}")]
    Protocol {
        task: &'static str,
        #[source]
        source: protocols::ProtocolError,
    },
    #[error("protocol task: {0}")]
    TaskPanicked(#[source] tokio::task::JoinError),
    #[error("dpf flow rules: {0}")]
    FlowRules(#[source] dataplane_task::HandleError),
}

impl From<fare_dataplane::DataplaneError> for AgentError {
    fn from(e: fare_dataplane::DataplaneError) -> Self {
        AgentError::Dataplane(e)
    }
}

impl From<mgmt::MgmtError> for AgentError {
    fn from(e: mgmt::MgmtError) -> Self {
        AgentError::Mgmt(e)
    }
}

/// How long tasks get to finish after SIGTERM/SIGINT before the agent exits anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Runs the agent until SIGTERM or SIGINT (or until a protocol task fails). With the
/// source of its configuration, SIGHUP reloads it ([`reload`]).
pub async fn run(config: AgentConfig, source: Option<reload::Source>) -> Result<(), AgentError> {
    let config = Arc::new(config);
    backend::check_link_local_zones(&config).map_err(AgentError::Host)?;
    // Before any data plane object is touched: another agent serving this socket (the
    // same node) owns them. The socket itself is bound once the data plane is
    // programmed: its appearance tells clients (and tests) the agent is ready.
    mgmt::server::refuse_if_served(&config.management.socket).await?;
    let backend = backend::open(&config).await?;
    info!(
        name = %config.name,
        router_id = %config.router_id,
        asn = config.asn,
        backend = backend.name(),
        "agent starting"
    );
    let limits = backend::group_limits(&config, backend.as_ref());
    let (dataplane, dataplane_task) = dataplane_task::spawn_with_limits(backend, limits);
    let state = SharedState::new(AgentState::from_config(&config, dataplane.backend()));
    let shutdown = CancellationToken::new();
    let (reload_trigger, reload_requests) = reload::Trigger::new();
    let ctx = AgentContext {
        config: config.clone(),
        state,
        dataplane,
        shutdown: shutdown.clone(),
        speaker: SpeakerSlot::default(),
        events: mgmt::watch::EventHub::default(),
        running: reload::Running::new(config.clone()),
        reload: reload_trigger,
    };
    // What the state holds from the start (sessions Idle, originated prefixes) is in
    // every watch snapshot.
    {
        let state = ctx.state.read();
        for r in state.routes.values() {
            ctx.events.publish(changes::Change::Route(r.clone()));
        }
    }
    changes::publish_sessions(&ctx);
    let signals = signals(shutdown.clone())?;
    let hangup = match source {
        Some(source) => Some(
            reload::on_sighup(ctx.clone(), source, reload_requests).map_err(AgentError::Signal)?,
        ),
        None => None,
    };

    install_static_groups(&ctx).await?;
    // DPF flow rules; an empty list also clears rules an earlier agent left pinned.
    let flows = config
        .dpf
        .as_ref()
        .map(|d| d.flows.clone())
        .unwrap_or_default();
    ctx.dataplane
        .set_flow_rules(flows)
        .await
        .map_err(AgentError::FlowRules)?;

    let servers = Servers::start(&ctx).await?;

    let mut tasks = JoinSet::new();
    let runs_bgp = protocols::spawn(&ctx, &mut tasks);
    // READY once the sessions are configured (the speaker started); the data plane was
    // programmed above.
    let speaker = ctx.speaker.clone();
    let sessions = async move {
        if runs_bgp {
            speaker.started().await;
        }
    };

    let failure = supervise(&mut tasks, &shutdown, sessions, &config).await;

    systemd::stopping();
    info!("agent stopping; data plane state is left in place");
    let drain = async {
        while tasks.join_next().await.is_some() {}
        servers.stopped().await;
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        warn!("tasks did not stop within {SHUTDOWN_GRACE:?}; exiting anyway");
    }
    signals.abort();
    if let Some(h) = hangup {
        h.abort();
    }
    let _ = std::fs::remove_file(&config.management.socket);
    drop(ctx);
    // The backend comes back once every handle is gone; dropping it must not tear down.
    if let Ok(Ok(backend)) = tokio::time::timeout(SHUTDOWN_GRACE, dataplane_task).await {
        drop(backend);
    }
    info!("agent stopped");
    failure.map_or(Ok(()), Err)
}

/// The management API (Unix socket, and TCP with TLS when configured) and the metrics
/// endpoint, serving until shutdown.
struct Servers {
    mgmt: tokio::task::JoinHandle<()>,
    tcp: Option<tokio::task::JoinHandle<()>>,
    metrics: Option<tokio::task::JoinHandle<()>>,
}

impl Servers {
    async fn start(ctx: &AgentContext) -> Result<Servers, AgentError> {
        let m = &ctx.config.management;
        let socket = mgmt::server::bind(&m.socket).await?;
        let mgmt = mgmt::server::serve(socket, ctx.clone()).await?;
        info!(socket = %m.socket.display(), "management API listening");
        let tcp = match (m.address, &m.tls) {
            (Some(addr), Some(tls)) => {
                let task = mgmt::server::serve_tcp(addr, tls, ctx.clone()).await?;
                info!(%addr, "management API listening on TCP (TLS, client certificates)");
                Some(task)
            }
            _ => None,
        };
        let metrics = match m.metrics {
            Some(addr) => {
                let task = metrics::serve(addr, ctx.clone())
                    .await
                    .map_err(|source| AgentError::Metrics { addr, source })?;
                info!(%addr, "metrics listening");
                Some(task)
            }
            None => None,
        };
        Ok(Servers { mgmt, tcp, metrics })
    }

    async fn stopped(self) {
        let _ = self.mgmt.await;
        for task in [self.tcp, self.metrics].into_iter().flatten() {
            let _ = task.await;
        }
    }
}

/// Runs until shutdown or the first task that fails (which starts the shutdown); READY
/// once `sessions` are configured. The failure, if one ended it.
async fn supervise(
    tasks: &mut JoinSet<(&'static str, protocols::ProtocolResult)>,
    shutdown: &CancellationToken,
    sessions: impl std::future::Future<Output = ()>,
    config: &AgentConfig,
) -> Option<AgentError> {
    tokio::pin!(sessions);
    let mut ready = false;
    loop {
        tokio::select! {
            _ = &mut sessions, if !ready => {
                ready = true;
                systemd::ready(&ready_status(config));
            }
            _ = shutdown.cancelled() => return None,
            Some(done) = tasks.join_next() => match done {
                Ok((name, Ok(()))) => info!(task = name, "task finished"),
                Ok((name, Err(e))) => {
                    error!(task = name, "task failed: {e}");
                    shutdown.cancel();
                    return Some(AgentError::Protocol { task: name, source: e });
                }
                Err(e) => {
                    error!("task panicked: {e}");
                    shutdown.cancel();
                    return Some(AgentError::TaskPanicked(e));
                }
            },
        }
    }
}

/// The status line sent with READY=1.
fn ready_status(config: &AgentConfig) -> String {
    format!(
        "{}: {} neighbors configured, {} static groups, data plane {}",
        config.name,
        config.neighbors.len(),
        config.static_groups.len(),
        config.dataplane.kind()
    )
}

/// Installs every `static:` group (including those from `static_from`) and records
/// them as routes.
async fn install_static_groups(ctx: &AgentContext) -> Result<(), AgentError> {
    for config in &ctx.config.static_groups {
        actions::install_static(ctx, config)
            .await
            .map_err(|source| AgentError::StaticGroup {
                prefix: config.prefix,
                source,
            })?;
    }
    Ok(())
}

/// Cancels `shutdown` on the first SIGTERM or SIGINT.
fn signals(shutdown: CancellationToken) -> Result<tokio::task::JoinHandle<()>, AgentError> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(AgentError::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(AgentError::Signal)?;
    Ok(tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => info!("SIGTERM received"),
            _ = int.recv() => info!("SIGINT received"),
        }
        shutdown.cancel();
    }))
}
