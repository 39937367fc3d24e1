//! SIGHUP: the agent reads its configuration file again and applies what can change at
//! run time, each change touching only its own sessions and groups:
//! - the `bandwidth_gbps` of its neighbors (removed means the interface speed again),
//!   through the same path as `fare set bandwidth`;
//! - the originated `prefixes` (added ones advertised, removed ones withdrawn);
//! - neighbors added (their session started), removed (Cease / Peer De-configured, their
//!   routes withdrawn) and changed: a session parameter resets that session only (Cease /
//!   Other Configuration Change); a policy key keeps it and decides the routes again;
//! - the session timers (`bgp.hold_time`, `bgp.connect_retry_ms`,
//!   `bgp.connect_retry_max_ms`), from each session's next OPEN; `fare.group_mode`
//!   (every group installed again);
//! - the `static` groups (added or changed ones installed, removed ones taken out), the
//!   `log` filter, and the ARN monitor's thresholds (the monitor keeps its state).
//!
//! When all of it applied, what is in force is the new file itself.
//!
//! Every other changed key is logged by name and listed by `fare show config`: it takes
//! effect at the next restart.
//! A file that no longer loads is logged and changes nothing.

use super::config::{AgentConfig, BgpConfig, NeighborConfig};
use super::{set_bandwidth, AgentContext, BandwidthTarget};
use std::net::IpAddr;
use std::path::PathBuf;
use tracing::{info, warn};

/// What a reload applies and what it leaves for a restart.
#[derive(Debug, Default, PartialEq)]
pub struct Diff {
    /// Neighbors whose bandwidth changed, with the new value (`None`: interface speed).
    pub bandwidths: Vec<(IpAddr, Option<f64>)>,
    /// Neighbors no longer in the file.
    pub removed: Vec<IpAddr>,
    /// Neighbors new in the file.
    pub added: Vec<NeighborConfig>,
    /// Neighbors with other keys changed: (in force, in the file). Their bandwidth, if it
    /// changed too, goes with them.
    pub changed: Vec<(NeighborConfig, NeighborConfig)>,
    /// The originated prefixes, when the list changed.
    pub prefixes: Option<Vec<ipnet::IpNet>>,
    /// The `bgp` section, when one of its session timers changed.
    pub timers: Option<BgpConfig>,
    /// The new `fare.group_mode`.
    pub group_mode: Option<fare_dataplane::GroupMode>,
    /// The `log` filter, when it changed (`Some(None)`: removed).
    pub log: Option<Option<String>>,
    /// The `static` groups added or changed, and the prefixes of those removed.
    pub statics: Option<StaticChanges>,
    /// The `arn.monitor` interfaces with new thresholds (the same interfaces as before).
    pub arn_thresholds: Option<Vec<fare_arn::config::MonitoredInterface>>,
    /// Other changed keys (`asn`, `bgp.port`, `fare.mode`, ...).
    pub restart_needed: Vec<String>,
}

impl Diff {
    /// Whether the file changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Diff::default()
    }
}

/// Keys of the `bgp` section a running speaker takes (from each session's next OPEN).
const TIMERS: [&str; 3] = ["hold_time", "connect_retry_ms", "connect_retry_max_ms"];

/// Compares the configuration in force with the file's.
pub fn diff(old: &AgentConfig, new: &AgentConfig) -> Diff {
    let mut d = Diff::default();
    let find = |list: &[NeighborConfig], a: IpAddr| list.iter().find(|n| n.address == a).cloned();
    for n in &new.neighbors {
        match find(&old.neighbors, n.address) {
            None => d.added.push(n.clone()),
            Some(o) if !changed_keys(&o, n, &["bandwidth_gbps"]).is_empty() => {
                d.changed.push((o, n.clone()))
            }
            Some(o) if o.bandwidth_gbps != n.bandwidth_gbps => {
                d.bandwidths.push((n.address, n.bandwidth_gbps))
            }
            Some(_) => {}
        }
    }
    for o in &old.neighbors {
        if find(&new.neighbors, o.address).is_none() {
            d.removed.push(o.address);
        }
    }
    if old.prefixes != new.prefixes {
        d.prefixes = Some(new.prefixes.clone());
    }
    for key in changed_keys(&old.bgp, &new.bgp, &[]) {
        if TIMERS.contains(&key.as_str()) {
            d.timers = Some(new.bgp.clone());
        } else {
            d.restart_needed.push(format!("bgp.{key}"));
        }
    }
    for key in changed_keys(&old.fare, &new.fare, &[]) {
        if key == "group_mode" {
            d.group_mode = Some(new.fare.group_mode);
        } else {
            d.restart_needed.push(format!("fare.{key}"));
        }
    }
    if old.log != new.log {
        d.log = Some(new.log.clone());
    }
    if old.static_groups != new.static_groups {
        d.statics = Some(StaticChanges::between(
            &old.static_groups,
            &new.static_groups,
        ));
    }
    match arn_thresholds(old.arn.as_ref(), new.arn.as_ref()) {
        Some(list) => d.arn_thresholds = Some(list),
        None if old.arn != new.arn => d
            .restart_needed
            .extend(arn_keys(old.arn.as_ref(), new.arn.as_ref())),
        None => {}
    }
    // `static_from` is applied through the groups it expands to.
    let applied = [
        "neighbors",
        "prefixes",
        "bgp",
        "fare",
        "log",
        "static",
        "static_from",
        "arn",
    ];
    d.restart_needed.extend(changed_keys(old, new, &applied));
    d
}

/// The `static` groups a reload installs (added or changed: make-before-break) and removes.
#[derive(Debug, Default, PartialEq)]
pub struct StaticChanges {
    pub install: Vec<super::config::StaticGroup>,
    pub remove: Vec<ipnet::IpNet>,
}

impl StaticChanges {
    fn between(
        old: &[super::config::StaticGroup],
        new: &[super::config::StaticGroup],
    ) -> StaticChanges {
        let install = new.iter().filter(|g| !old.contains(g)).cloned().collect();
        let remove = old
            .iter()
            .filter(|o| !new.iter().any(|g| g.prefix == o.prefix))
            .map(|o| o.prefix)
            .collect();
        StaticChanges { install, remove }
    }
}

/// The new monitor thresholds when they are all that changed in `arn` (the same
/// interfaces, in the same order, with the same path and notify lists); else None.
fn arn_thresholds(
    old: Option<&fare_arn::ArnConfig>,
    new: Option<&fare_arn::ArnConfig>,
) -> Option<Vec<fare_arn::config::MonitoredInterface>> {
    let (old, new) = (old?, new?);
    let (om, nm) = (old.monitor.as_ref()?, new.monitor.as_ref()?);
    let without = |c: &fare_arn::ArnConfig| {
        let mut c = c.clone();
        if let Some(m) = c.monitor.as_mut() {
            for i in &mut m.interfaces {
                (i.high_bytes, i.low_bytes, i.limit_bytes, i.clear_ms) = (0, 0, None, 0);
            }
        }
        c
    };
    (om != nm && without(old) == without(new)).then(|| nm.interfaces.clone())
}

/// `arn.KEY` for every key of the `arn` block that differs (`arn` when it came or went).
fn arn_keys(old: Option<&fare_arn::ArnConfig>, new: Option<&fare_arn::ArnConfig>) -> Vec<String> {
    match (old, new) {
        (Some(o), Some(n)) => changed_keys(o, n, &[])
            .into_iter()
            .map(|k| format!("arn.{k}"))
            .collect(),
        _ => vec!["arn".into()],
    }
}

/// The keys whose values differ between `a` and `b` (present in one only included),
/// except `skip`, in order.
fn changed_keys<T: serde::Serialize>(a: &T, b: &T, skip: &[&str]) -> Vec<String> {
    let (a, b) = (to_map(a), to_map(b));
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| !skip.contains(&k.as_str()) && a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

fn to_map<T: serde::Serialize>(v: &T) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// The configuration in force (`fare show config`): the file as loaded at start, then as
/// each SIGHUP applied it, with the keys of the file that wait for a restart.
#[derive(Clone, Debug)]
pub struct Running(std::sync::Arc<std::sync::RwLock<(std::sync::Arc<AgentConfig>, Vec<String>)>>);

impl Running {
    pub fn new(config: std::sync::Arc<AgentConfig>) -> Running {
        Running(std::sync::Arc::new(std::sync::RwLock::new((
            config,
            Vec::new(),
        ))))
    }

    /// The configuration in force.
    pub fn config(&self) -> std::sync::Arc<AgentConfig> {
        match self.0.read() {
            Ok(r) => r.0.clone(),
            Err(p) => p.into_inner().0.clone(),
        }
    }

    /// Keys the file changed that take effect at the next restart.
    pub fn pending(&self) -> Vec<String> {
        match self.0.read() {
            Ok(r) => r.1.clone(),
            Err(p) => p.into_inner().1.clone(),
        }
    }

    fn set(&self, config: AgentConfig, pending: Vec<String>) {
        let value = (std::sync::Arc::new(config), pending);
        match self.0.write() {
            Ok(mut w) => *w = value,
            Err(p) => *p.into_inner() = value,
        }
    }
}

/// Where the running configuration came from: its file, and what the command line put in
/// place of the file's values (`fare agent --socket`), kept on every reload.
#[derive(Clone, Debug)]
pub struct Source {
    pub path: PathBuf,
    /// `management.socket` given on the command line.
    pub socket: Option<PathBuf>,
    /// How the file's `log` filter reaches the process's logger (absent: not at all).
    pub log: Option<LogControl>,
}

/// The file's `log` key and the process's logger: the filter `--log`/FARE_LOG gave, if
/// they were given (then the file's key is not used), else the one to return to when the
/// key is removed, and the function that replaces the running filter.
#[derive(Clone)]
pub struct LogControl {
    pub command_line: Option<String>,
    pub default: String,
    pub set: SetFilter,
}

/// Replaces the process's log filter (env-filter syntax), or says why it could not.
pub type SetFilter = std::sync::Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

impl std::fmt::Debug for LogControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogControl")
            .field("command_line", &self.command_line)
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

impl LogControl {
    /// Puts the file's filter (or the default without one) in force, unless the command
    /// line chose the filter. Checked at load: it parses.
    pub fn apply(&self, file: Option<&str>) {
        if let Some(cli) = &self.command_line {
            if file.is_some() {
                info!(filter = %cli, "log: the file's `log` is not used: --log or FARE_LOG set the filter");
            }
            return;
        }
        let filter = file.unwrap_or(&self.default);
        match (self.set)(filter) {
            Ok(()) => info!(%filter, "log filter in force"),
            Err(e) => warn!(%filter, "log filter not changed: {e}"),
        }
    }
}

impl Source {
    /// Loads the file, with the command line's values in place of the file's.
    pub fn load(&self) -> Result<AgentConfig, fare_model::yamlfile::FileError> {
        let mut c = AgentConfig::load(&self.path)?;
        if let Some(s) = &self.socket {
            c.management.socket = s.clone();
        }
        Ok(c)
    }
}

/// What one reload did: whether the file differed, and the keys waiting for a restart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub changed: bool,
    pub pending: Vec<String>,
}

/// Why a reload asked for through the API did nothing.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum ReloadError {
    #[error("this agent was not started from a configuration file")]
    NoFile,
    /// The file does not load (FILE:LINE: problem); nothing changed.
    #[error("{0}; nothing changed")]
    Invalid(String),
}

type Request = tokio::sync::oneshot::Sender<Result<Outcome, ReloadError>>;

/// Asks the reload task for a reload and waits for what it did (`fare reload`).
#[derive(Clone, Debug)]
pub struct Trigger(tokio::sync::mpsc::Sender<Request>);

/// The reload task's end of [`Trigger`].
pub struct Requests(tokio::sync::mpsc::Receiver<Request>);

impl Trigger {
    pub fn new() -> (Trigger, Requests) {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        (Trigger(tx), Requests(rx))
    }

    /// Reloads as SIGHUP does and returns what it did.
    pub async fn reload(&self) -> Result<Outcome, ReloadError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.0.send(reply).await.map_err(|_| ReloadError::NoFile)?;
        answer.await.map_err(|_| ReloadError::NoFile)?
    }
}

/// Starts the task that reloads `source` on every SIGHUP and every [`Trigger::reload`]
/// until the agent stops.
pub fn on_sighup(
    ctx: AgentContext,
    source: Source,
    mut requests: Requests,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        // What is in force: the loaded file, with the bandwidths applied since.
        let mut current = (*ctx.config).clone();
        loop {
            let reply = tokio::select! {
                _ = ctx.shutdown.cancelled() => return,
                r = hup.recv() => match r {
                    Some(()) => None,
                    None => return,
                },
                r = requests.0.recv() => match r {
                    Some(reply) => Some(reply),
                    None => return,
                },
            };
            let outcome = reload_once(&ctx, &source, &mut current).await;
            if let Some(reply) = reply {
                let _ = reply.send(outcome);
            }
        }
    }))
}

/// One reload: reads the file, applies what changed, records what is in force.
async fn reload_once(
    ctx: &AgentContext,
    source: &Source,
    current: &mut AgentConfig,
) -> Result<Outcome, ReloadError> {
    info!(config = %source.path.display(), "reloading the configuration (SIGHUP or fare reload)");
    crate::systemd::reloading();
    let new = match source.load() {
        Ok(c) => c,
        Err(e) => {
            warn!("reload: {e}; nothing changed");
            crate::systemd::reloaded();
            return Err(ReloadError::Invalid(e.to_string()));
        }
    };
    let d = diff(current, &new);
    let mut pending = apply(ctx, current, &d).await;
    if d.statics.is_some() {
        current.static_from = new.static_from.clone();
    }
    if let Some(log) = &d.log {
        match &source.log {
            Some(control) => {
                control.apply(log.as_deref());
                current.log = log.clone();
            }
            None => pending.push("log".into()),
        }
    }
    // Everything applied: what is in force is the file, in its order (`fare show config`
    // equals a fresh start's).
    if pending.is_empty() {
        *current = new;
    }
    if !pending.is_empty() {
        warn!(
            "reload: changed {} (these take effect after a restart)",
            pending.join(", ")
        );
    }
    if d.is_empty() {
        info!("reload: the configuration is unchanged");
    }
    ctx.running.set(current.clone(), pending.clone());
    crate::systemd::reloaded();
    Ok(Outcome {
        changed: !d.is_empty(),
        pending,
    })
}

/// Applies `d` to the running agent and to `current` (what is in force); returns the
/// keys that wait for a restart. Each change touches only its own sessions and groups.
async fn apply(ctx: &AgentContext, current: &mut AgentConfig, d: &Diff) -> Vec<String> {
    let mut pending = d.restart_needed.clone();
    for (addr, gbps) in &d.bandwidths {
        match set_bandwidth(ctx, &BandwidthTarget::Neighbor(*addr), *gbps).await {
            Ok(_) => {
                if let Some(n) = current.neighbors.iter_mut().find(|n| n.address == *addr) {
                    n.bandwidth_gbps = *gbps;
                }
            }
            Err(e) => {
                warn!(neighbor = %addr, "reload: bandwidth not applied: {e}");
                pending.push(format!(
                    "neighbors[{addr}].bandwidth_gbps (not applied: {e})"
                ));
            }
        }
    }
    for addr in &d.removed {
        match crate::actions::remove_neighbor(ctx, *addr).await {
            Ok(()) => current.neighbors.retain(|n| n.address != *addr),
            Err(e) => {
                warn!(neighbor = %addr, "reload: not removed: {e}");
                pending.push(format!("neighbors[{addr}] (not removed: {e})"));
            }
        }
    }
    for (old, n) in &d.changed {
        match crate::actions::replace_neighbor(ctx, old, n).await {
            Ok(how) => {
                info!(neighbor = %n.address, ?how, "reload: neighbor changed");
                if let Some(c) = current
                    .neighbors
                    .iter_mut()
                    .find(|c| c.address == n.address)
                {
                    *c = n.clone();
                }
            }
            Err(why) => {
                warn!(neighbor = %n.address, "reload: not changed ({why}): restart");
                pending.push(format!("neighbors[{}] (changed: {why})", n.address));
            }
        }
    }
    for n in &d.added {
        match crate::actions::add_neighbor(ctx, n).await {
            Ok(()) => current.neighbors.push(n.clone()),
            Err(why) => {
                warn!(neighbor = %n.address, "reload: not added ({why}): restart");
                pending.push(format!("neighbors[{}] (added: {why})", n.address));
            }
        }
    }
    if let Some(prefixes) = &d.prefixes {
        match crate::actions::set_prefixes(ctx, &current.prefixes, prefixes).await {
            Ok(_) => current.prefixes = prefixes.clone(),
            Err(e) => {
                warn!("reload: prefixes not applied: {e}");
                pending.push(format!("prefixes (not applied: {e})"));
            }
        }
    }
    apply_globals(ctx, current, d, &mut pending).await;
    if let Some(statics) = &d.statics {
        apply_statics(ctx, current, statics, &mut pending).await;
    }
    if let Some(list) = &d.arn_thresholds {
        match apply_thresholds(ctx, list) {
            Ok(()) => {
                if let Some(m) = current.arn.as_mut().and_then(|a| a.monitor.as_mut()) {
                    m.interfaces = list.clone();
                }
            }
            Err(why) => {
                warn!("reload: ARN thresholds not applied ({why}): restart");
                pending.push(format!("arn.monitor ({why})"));
            }
        }
    }
    pending
}

/// The `static` groups: removed ones first, then added and changed ones, each on its own
/// (one that fails is logged and stays as it was in `current`).
async fn apply_statics(
    ctx: &AgentContext,
    current: &mut AgentConfig,
    c: &StaticChanges,
    pending: &mut Vec<String>,
) {
    for prefix in &c.remove {
        match crate::actions::remove_static(ctx, *prefix).await {
            Ok(()) => {
                info!(%prefix, "reload: static group removed");
                current.static_groups.retain(|g| g.prefix != *prefix);
            }
            Err(e) => {
                warn!(%prefix, "reload: static group not removed: {e}");
                pending.push(format!("static[{prefix}] (not removed: {e})"));
            }
        }
    }
    for g in &c.install {
        match crate::actions::install_static(ctx, g).await {
            Ok(()) => {
                info!(prefix = %g.prefix, "reload: static group installed");
                match current
                    .static_groups
                    .iter_mut()
                    .find(|o| o.prefix == g.prefix)
                {
                    Some(o) => *o = g.clone(),
                    None => current.static_groups.push(g.clone()),
                }
            }
            Err(e) => {
                warn!(prefix = %g.prefix, "reload: static group not installed: {e}");
                pending.push(format!("static[{}] (not installed: {e})", g.prefix));
            }
        }
    }
}

/// Hands new thresholds to the running ARN monitor. A P4 switch's queues were armed at
/// start by the data plane itself: those wait for a restart.
fn apply_thresholds(
    ctx: &AgentContext,
    list: &[fare_arn::config::MonitoredInterface],
) -> Result<(), &'static str> {
    if matches!(
        ctx.config.dataplane,
        super::config::DataplaneConfig::P4runtime(_)
    ) {
        return Err("the switch's queue thresholds are written at start");
    }
    let sender = ctx
        .state
        .read()
        .arn
        .as_ref()
        .and_then(|a| a.thresholds.clone());
    let sender = sender.ok_or("the ARN monitor is not running")?;
    sender
        .send(list.to_vec())
        .map_err(|_| "the ARN monitor stopped")?;
    info!(
        interfaces = list.len(),
        "reload: ARN monitor thresholds changed"
    );
    Ok(())
}

/// The session timers and the group mode.
async fn apply_globals(
    ctx: &AgentContext,
    current: &mut AgentConfig,
    d: &Diff,
    pending: &mut Vec<String>,
) {
    if let Some(bgp) = &d.timers {
        match crate::actions::set_timers(ctx, bgp).await {
            Ok(()) => {
                current.bgp.hold_time = bgp.hold_time;
                current.bgp.connect_retry_ms = bgp.connect_retry_ms;
                current.bgp.connect_retry_max_ms = bgp.connect_retry_max_ms;
            }
            Err(e) => {
                warn!("reload: timers not applied: {e}");
                pending.push(format!("bgp timers (not applied: {e})"));
            }
        }
    }
    if let Some(mode) = d.group_mode {
        match crate::actions::set_group_mode(ctx, mode).await {
            Ok(()) => current.fare.group_mode = mode,
            Err(e) => {
                warn!("reload: group mode not applied: {e}");
                pending.push(format!("fare.group_mode (not applied: {e})"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> AgentConfig {
        // One directory per call: tests run in parallel and remove theirs.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("fare-reload-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agent.yaml");
        std::fs::write(&path, text).unwrap();
        let c = AgentConfig::load(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        c
    }

    const BASE: &str = "name: l1\nrouter_id: 10.0.0.1\nasn: 65001\n\
        dataplane: {kind: none}\n\
        neighbors:\n\
        - {address: 172.16.0.1, remote_as: 65100, interface: eth1, bandwidth_gbps: 400}\n\
        - {address: 172.16.0.3, remote_as: 65100, interface: eth2}\n";

    #[test]
    fn bandwidth_changes_apply_the_rest_needs_a_restart() {
        let old = config(BASE);
        assert_eq!(diff(&old, &old), Diff::default());
        // 400 -> 300 on one neighbor, none -> 100 on the other: both apply at run time.
        let new = config(
            &BASE
                .replace("bandwidth_gbps: 400", "bandwidth_gbps: 300")
                .replace("interface: eth2}", "interface: eth2, bandwidth_gbps: 100}"),
        );
        let d = diff(&old, &new);
        assert_eq!(
            d.bandwidths,
            [
                ("172.16.0.1".parse().unwrap(), Some(300.0)),
                ("172.16.0.3".parse().unwrap(), Some(100.0))
            ]
        );
        assert!(d.restart_needed.is_empty(), "{:?}", d.restart_needed);
        // Removing the value goes back to the interface speed.
        let d = diff(&new, &old);
        assert_eq!(d.bandwidths[1], ("172.16.0.3".parse().unwrap(), None));
        // A new ASN is named, not applied; another interface changes that neighbor.
        let other = config(
            &BASE
                .replace("asn: 65001", "asn: 65002")
                .replace("interface: eth1", "interface: eth9"),
        );
        let d = diff(&old, &other);
        assert!(d.bandwidths.is_empty());
        assert_eq!(d.restart_needed, ["asn"]);
        assert_eq!(
            d.changed,
            [(old.neighbors[0].clone(), other.neighbors[0].clone())]
        );
    }

    /// A neighbor with a key besides its bandwidth changed is one change (its bandwidth
    /// goes with it); the session timers and the group mode apply, the other keys of
    /// their sections wait for a restart, each named.
    #[test]
    fn changed_neighbors_timers_and_group_mode_apply_at_run_time() {
        let old = config(BASE);
        let new = config(&BASE.replace(
            "interface: eth1, bandwidth_gbps: 400}",
            "interface: eth1, bandwidth_gbps: 300, passive: true}",
        ));
        let d = diff(&old, &new);
        assert!(d.bandwidths.is_empty(), "{:?}", d.bandwidths);
        assert_eq!(d.changed.len(), 1);
        assert_eq!(d.changed[0].1.bandwidth_gbps, Some(300.0));
        assert!(d.restart_needed.is_empty(), "{:?}", d.restart_needed);

        let new = config(&format!(
            "{BASE}bgp: {{hold_time: 30, port: 1790}}\nfare: {{group_mode: flow, mode: averaged}}\n"
        ));
        let d = diff(&old, &new);
        assert_eq!(d.timers.as_ref().map(|b| b.hold_time), Some(30));
        assert_eq!(d.group_mode, Some(fare_dataplane::GroupMode::Flow));
        assert_eq!(d.restart_needed, ["bgp.port", "fare.mode"]);
        assert!(d.changed.is_empty() && !d.is_empty());
        assert!(diff(&new, &new).is_empty());
    }

    #[test]
    fn prefixes_apply_at_run_time() {
        let old = config(BASE);
        let new = config(&format!("{BASE}prefixes: [192.0.2.0/24]\n"));
        let d = diff(&old, &new);
        assert_eq!(d.prefixes, Some(vec!["192.0.2.0/24".parse().unwrap()]));
        assert!(d.restart_needed.is_empty(), "{:?}", d.restart_needed);
        assert_eq!(diff(&new, &old).prefixes, Some(vec![]));
        assert_eq!(diff(&new, &new), Diff::default());
    }

    #[test]
    fn neighbors_added_and_removed_apply_at_run_time() {
        let old = config(BASE);
        let one = config(&BASE.replace(
            "- {address: 172.16.0.3, remote_as: 65100, interface: eth2}\n",
            "",
        ));
        let d = diff(&old, &one);
        assert_eq!(d.removed, ["172.16.0.3".parse::<IpAddr>().unwrap()]);
        assert!(d.restart_needed.is_empty(), "{:?}", d.restart_needed);
        let d = diff(&one, &old);
        assert!(d.removed.is_empty() && d.restart_needed.is_empty());
        assert_eq!(d.added, [old.neighbors[1].clone()]);
    }

    /// The log filter, static groups and ARN thresholds apply at run time; another
    /// `arn` key is named for a restart.
    #[test]
    fn log_statics_and_arn_thresholds_apply_at_run_time() {
        let member = "members: [{interface: eth1, neighbor_mac: '02:00:00:00:00:01', weight: 1}]";
        let statics = format!(
            "static:\n  - prefix: 10.9.0.0/24\n    {member}\n  - prefix: 10.9.1.0/24\n    {member}\n"
        );
        let arn = "arn:\n  monitor:\n    interfaces:\n      \
            - {interface: eth1, path_id: 10.0.0.2, high_bytes: 30000, low_bytes: 10000}\n";
        let old = config(&format!("{BASE}{statics}{arn}"));
        let new = config(&format!(
            "{BASE}log: warn,fare_bgp=debug\n{}{}",
            statics
                .replacen("weight: 1", "weight: 3", 1)
                .replace("10.9.1.0/24", "10.9.2.0/24"),
            arn.replace("high_bytes: 30000", "high_bytes: 40000"),
        ));
        let d = diff(&old, &new);
        assert!(d.restart_needed.is_empty(), "{:?}", d.restart_needed);
        assert_eq!(d.log, Some(Some("warn,fare_bgp=debug".into())));
        let c = d.statics.expect("static groups changed");
        let prefixes: Vec<String> = c.install.iter().map(|g| g.prefix.to_string()).collect();
        assert_eq!(prefixes, ["10.9.0.0/24", "10.9.2.0/24"]);
        assert_eq!(c.install[0].members[0].weight, 3);
        assert_eq!(c.remove, ["10.9.1.0/24".parse::<ipnet::IpNet>().unwrap()]);
        let t = d.arn_thresholds.expect("thresholds changed");
        assert_eq!((t[0].high_bytes, t[0].low_bytes), (40000, 10000));
        // Another ARN key, or another watched interface: a restart, each key named.
        let other = config(&format!(
            "{BASE}{}",
            arn.replace("eth1", "eth2")
                .replace("monitor:", "hold_ms: 500\n  monitor:")
        ));
        let d = diff(&old, &other);
        assert_eq!(d.arn_thresholds, None);
        assert_eq!(d.restart_needed, ["arn.hold_ms", "arn.monitor"]);
        // The key removed: back to the default filter.
        assert_eq!(diff(&new, &old).log, Some(None));
    }
}
