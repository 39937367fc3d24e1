//! The P4Runtime session behind the backend: reconnect with backoff, loss and regain of
//! mastership, and the replay of what the agent asked for.
//!
//! The backend keeps what the agent asked for (`Desired`: groups with their colors and
//! member states, flow rules, ARN paths, monitored ports) apart from what it wrote. Then:
//!
//! - **Connection lost** (the switch restarted, or the gRPC channel broke): every call
//!   fails at once with "reconnecting" while a new session is tried with exponential
//!   backoff (100 ms doubling to 5 s), at each call and at each `maintain` tick. Once
//!   connected and primary: when the switch no longer runs our pipeline (a restarted BMv2
//!   has none) it is pushed again and everything is written anew; when it still does, its
//!   state is read back and adopted, and what differs from the agent's wishes is rewritten.
//! - **Mastership lost** (another controller with a higher election id became primary;
//!   the target says so on the stream, or answers a Write with PERMISSION_DENIED): fare
//!   logs it, stands back and writes nothing; calls fail with "not primary" (the agent's
//!   wishes are still recorded). When the target names it primary again (the other
//!   controller left), fare reads the switch back, adopts it and rewrites what differs.

use super::arn::Monitor;
use super::*;
use crate::ColorGroup;
use std::time::Instant;

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Where the session stands.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Session {
    Primary,
    /// Another controller is primary: no writes.
    Backup(String),
    /// No session: the next attempt not before `next_try`.
    Down {
        why: String,
        next_try: Instant,
        backoff: Duration,
    },
}

/// One route group as the agent asked for it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct DesiredGroup {
    pub group: Group,
    /// DPF: Some when installed with `install_colored`.
    pub colors: Option<Vec<ColorGroup>>,
    /// Members switched off by `set_member_active` (by index in `group.members`).
    pub inactive: BTreeSet<usize>,
}

/// Everything the agent asked the backend for, replayed after a reconnect or a regained
/// mastership.
#[derive(Clone, Debug, Default)]
pub(super) struct Desired {
    pub groups: BTreeMap<IpNet, DesiredGroup>,
    pub flow_rules: Vec<FlowRule>,
    pub arn_paths: Vec<(String, Ipv4Addr, Vec<IpNet>)>,
    pub monitors: Vec<Monitor>,
    /// The switch's own addresses (ARNs to them are received).
    pub local_addresses: Vec<IpAddr>,
}

/// The pipeline the backend pushes (kept to push it again to a restarted switch).
#[derive(Clone, Debug)]
pub(super) struct PipelineConfig {
    pub info: P4Info,
    pub device_config: Vec<u8>,
    pub cookie: u64,
}

impl P4rtError {
    /// The connection or stream is gone (as opposed to the target refusing an update).
    fn is_transport(&self) -> bool {
        match self {
            P4rtError::Rpc { error, .. } => matches!(
                error.code,
                tonic::Code::Unavailable | tonic::Code::Cancelled
            ),
            P4rtError::Connect { .. } | P4rtError::StreamClosed | P4rtError::Timeout(_) => true,
            _ => false,
        }
    }

    /// The target refused a write because this session is not the primary.
    fn is_not_primary(&self) -> bool {
        match self {
            P4rtError::Rpc { error, .. } => error.code == tonic::Code::PermissionDenied,
            P4rtError::NotPrimary { .. } => true,
            _ => false,
        }
    }
}

impl P4RuntimeDataplane {
    /// One Write through the session: refused while fare is not the primary; a failure
    /// that shows the session lost (transport) or mastership lost changes the session.
    pub(super) async fn write(&mut self, updates: Vec<p4::Update>) -> Result<(), P4rtError> {
        if updates.is_empty() {
            return Ok(());
        }
        if let Some(why) = self.not_writing() {
            return Err(P4rtError::NotPrimary {
                device_id: self.options.device_id,
                why,
            });
        }
        self.writes += 1;
        let result = self.client.write(updates).await;
        if let Err(e) = &result {
            if e.is_transport() {
                self.session_down(e.to_string());
            } else if e.is_not_primary() {
                self.step_back(e.to_string());
            }
        }
        result
    }

    /// Inserts `updates`; those the target already has (ALREADY_EXISTS) are modified
    /// instead, so writing the same entries twice (a replay) is harmless.
    pub(super) async fn write_upsert(&mut self, updates: Vec<p4::Update>) -> Result<(), P4rtError> {
        let again = updates.clone();
        match self.write(updates).await {
            Ok(()) => Ok(()),
            Err(P4rtError::Rpc { op, error })
                if !error.updates.is_empty()
                    && error
                        .updates
                        .iter()
                        .all(|u| u.code == tonic::Code::AlreadyExists) =>
            {
                let modify: Vec<p4::Update> = error
                    .updates
                    .iter()
                    .filter_map(|u| again.get(u.index).cloned())
                    .map(|u| p4::Update {
                        r#type: p4::update::Type::Modify as i32,
                        ..u
                    })
                    .collect();
                tracing::debug!(
                    op,
                    entries = modify.len(),
                    "entries present already: modified"
                );
                self.write(modify).await
            }
            Err(e) => Err(e),
        }
    }

    /// Why nothing is written now (None while primary).
    fn not_writing(&self) -> Option<String> {
        match &self.session {
            Session::Primary => None,
            Session::Backup(why) => Some(format!(
                "standing back, another controller is primary ({why})"
            )),
            Session::Down { why, .. } => Some(format!(
                "switch unreachable ({why}); reconnecting, the agent's groups are written again then"
            )),
        }
    }

    fn session_down(&mut self, why: String) {
        if !matches!(self.session, Session::Down { .. }) {
            tracing::warn!(address = %self.options.address, "P4Runtime session lost: {why}; reconnecting");
            self.session = Session::Down {
                why,
                next_try: Instant::now(),
                backoff: BACKOFF_MIN,
            };
        }
    }

    fn step_back(&mut self, why: String) {
        if self.session == Session::Primary {
            tracing::warn!(
                device_id = self.options.device_id,
                election_id = self.options.election_id,
                "lost mastership: {why}; another controller is primary, fare stands back and \
                 writes nothing until the switch names it primary again"
            );
        }
        self.session = Session::Backup(why);
    }

    /// The periodic check (`Dataplane::maintain`): a cheap RPC (Capabilities) shows a dead
    /// switch even before the stream's end has been read, then the session is brought up
    /// to date.
    pub(super) async fn probe(&mut self) -> Result<(), DataplaneError> {
        if !matches!(self.session, Session::Down { .. }) {
            if let Err(e) = self.client.capabilities().await {
                if e.is_transport() {
                    self.session_down(e.to_string());
                }
            }
        }
        self.ensure_session().await
    }

    /// Brings the session up to date: notices a closed stream or a change of primary
    /// reported by the target, reconnects when the backoff allows, and replays the agent's
    /// state after a reconnect or a regained mastership. Err while fare cannot write.
    pub(super) async fn ensure_session(&mut self) -> Result<(), DataplaneError> {
        use super::super::client::Arbitration;
        match (self.client.arbitration(), &self.session) {
            (Arbitration::Closed(why), Session::Primary | Session::Backup(_)) => {
                self.session_down(why)
            }
            (Arbitration::Backup(why), Session::Primary) => self.step_back(why),
            (Arbitration::Primary, Session::Backup(_)) => {
                tracing::info!(
                    election_id = self.options.election_id,
                    "primary again: reading the switch back and writing what differs"
                );
                self.session = Session::Primary;
                self.resync(false).await?;
            }
            _ => {}
        }
        if let Session::Down {
            why,
            next_try,
            backoff,
        } = self.session.clone()
        {
            if Instant::now() < next_try {
                return Err(DataplaneError::backend(
                    BACKEND,
                    self.not_writing().unwrap_or(why),
                ));
            }
            let opened = Client::open(
                &self.options.address,
                self.options.device_id,
                self.options.election_id,
                Duration::ZERO,
            )
            .await;
            match opened {
                Ok(client) => {
                    self.client = client;
                    match self.client.arbitration() {
                        Arbitration::Primary => {
                            tracing::info!(address = %self.options.address, "P4Runtime session re-established; primary");
                            self.session = Session::Primary;
                            let fresh = self.ensure_pipeline().await.map_err(err)?;
                            self.resync(fresh).await?;
                        }
                        Arbitration::Backup(why) => {
                            tracing::warn!("P4Runtime session re-established as backup: {why}");
                            self.session = Session::Backup(why);
                        }
                        other => {
                            self.session = Session::Down {
                                why: format!("{other:?}"),
                                next_try: Instant::now() + backoff,
                                backoff: (backoff * 2).min(BACKOFF_MAX),
                            };
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, ?backoff, "reconnect failed");
                    self.session = Session::Down {
                        why: e.to_string(),
                        next_try: Instant::now() + backoff,
                        backoff: (backoff * 2).min(BACKOFF_MAX),
                    };
                }
            }
        }
        match self.not_writing() {
            None => Ok(()),
            Some(why) => Err(DataplaneError::backend(BACKEND, why)),
        }
    }

    /// After a new session: pushes our pipeline unless the switch runs it (same cookie).
    /// True when it was pushed (the switch's tables are empty then).
    pub(super) async fn ensure_pipeline(&mut self) -> Result<bool, P4rtError> {
        let Some(p) = self.pipeline.clone() else {
            return Ok(false);
        };
        let running = self.client.pipeline_cookie().await?;
        if running == Some(p.cookie) {
            return Ok(false);
        }
        self.client
            .set_pipeline(&p.info, p.device_config, p.cookie)
            .await?;
        tracing::info!(
            cookie = p.cookie,
            "switch runs no or another pipeline: pushed ours again (VERIFY_AND_COMMIT)"
        );
        Ok(true)
    }

    /// Forgets what was written (ids, entries) and writes the agent's state again: onto
    /// empty tables (`fresh`), or over what the switch has, read back and adopted first.
    pub(super) async fn resync(&mut self, fresh: bool) -> Result<(), DataplaneError> {
        self.reset_written();
        if !fresh {
            self.reconcile().await.map_err(err)?;
        }
        let desired = self.desired.clone();
        let mut failures = Vec::new();
        if !fresh {
            // The hold travels with every path entry; adopted ones may carry another.
            if let Err(e) = self.set_arn_hold_inner().await {
                failures.push(e.to_string());
            }
        }
        for (interface, path_id, prefixes) in &desired.arn_paths {
            if let Err(e) = self.map_arn_path_inner(interface, *path_id, prefixes).await {
                failures.push(e.to_string());
            }
        }
        if let Err(e) = self
            .set_local_addresses_inner(&desired.local_addresses)
            .await
        {
            failures.push(e.to_string());
        }
        for m in &desired.monitors {
            if let Err(e) = self.monitor_port_inner(m).await {
                failures.push(e.to_string());
            }
        }
        // The probes go out on the new session's stream.
        self.restart_probes();
        // Adopted groups the agent no longer wants.
        let stale: Vec<IpNet> = self
            .groups
            .keys()
            .filter(|p| !desired.groups.contains_key(p))
            .copied()
            .collect();
        for prefix in stale {
            if let Err(e) = self.remove_inner(prefix).await {
                failures.push(e.to_string());
            }
        }
        let mut plain = Vec::new();
        for d in desired.groups.values().filter(|d| d.colors.is_none()) {
            // As on install: members that name only a next hop get its MAC.
            match crate::xdp::neighbor::fill_macs(&d.group, BACKEND).await {
                Ok(resolved) => plain.push(resolved.unwrap_or_else(|| d.group.clone())),
                Err(e) => failures.push(e.to_string()),
            }
        }
        for r in self.install_groups(plain).await {
            if let Err(e) = r {
                failures.push(e.to_string());
            }
        }
        for d in desired.groups.values() {
            if let Some(colors) = &d.colors {
                if let Err(e) = self.install_colored_inner(&d.group, colors).await {
                    failures.push(e.to_string());
                }
            }
            for index in &d.inactive {
                if let Err(e) = self
                    .set_member_active_inner(d.group.prefix, *index, false)
                    .await
                {
                    failures.push(e.to_string());
                }
            }
        }
        if !desired.flow_rules.is_empty() {
            if let Err(e) = self.set_flow_rules_inner(&desired.flow_rules).await {
                failures.push(e.to_string());
            }
        }
        tracing::info!(
            groups = desired.groups.len(),
            arn_paths = desired.arn_paths.len(),
            monitors = desired.monitors.len(),
            fresh,
            failures = failures.len(),
            "switch state written again"
        );
        match failures.first() {
            None => Ok(()),
            Some(first) => Err(DataplaneError::backend(
                BACKEND,
                format!(
                    "{} writes failed while re-syncing the switch; first: {first}",
                    failures.len()
                ),
            )),
        }
    }

    /// Forgets every id and entry written (the switch lost them, or they are read back).
    fn reset_written(&mut self) {
        self.groups.clear();
        self.group_ids = Ids::new(u32::from(GROUP_IDS));
        self.profile_groups = Ids::new(u32::MAX);
        self.member_ids = Ids::new(u32::MAX);
        self.counters = Ids::new(u32::from(COUNTERS));
        self.slots = Ids::new(u32::from(ARN_SLOTS));
        self.arn_paths.clear();
        self.local_written.clear();
        self.prefix_slots.clear();
        self.colors.clear();
        self.fallbacks.clear();
        self.flow_entries.clear();
    }

    /// The session as a line for logs and tests: `primary`, `backup: ...`, `down: ...`.
    pub fn session_state(&self) -> String {
        match &self.session {
            Session::Primary => "primary".into(),
            Session::Backup(why) => format!("backup: {why}"),
            Session::Down { why, .. } => format!("down: {why}"),
        }
    }

    /// Write RPCs sent so far (benchmarks, tests).
    pub fn writes(&self) -> u64 {
        self.writes
    }
}
