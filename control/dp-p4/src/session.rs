//! The P4Runtime session a P4 profile (fare.p4's backend, the SAI-P4 profile) keeps with
//! its switch: the pipeline it pushes, the Writes it sends, and what happens when the
//! connection or the mastership is lost. One rule for both profiles:
//!
//! - **Connection lost** (the switch restarted, or the gRPC channel broke): every call
//!   fails at once with "reconnecting" while a new session is tried with exponential
//!   backoff (100 ms doubling to 5 s), at each call and at each `maintain` tick. Once
//!   connected and primary, the pipeline is pushed again when the switch no longer runs it
//!   (a restarted BMv2 has none) and the profile writes everything anew; when it still
//!   does, the profile reads the switch back, adopts it and rewrites what differs.
//! - **Mastership lost** (another controller with a higher election id became primary;
//!   the target says so on the stream, or answers a Write with PERMISSION_DENIED): fare
//!   logs it, stands back and writes nothing; calls fail with "standing back" (the agent's
//!   wishes are still recorded by the profile). When the target names fare primary again
//!   (the other controller left), the profile reads the switch back and rewrites what
//!   differs.
//!
//! The profile asks [`Session::refresh`] before writing; `Some(fresh)` tells it to write
//! its state again (onto empty tables when `fresh`).

use fare_dataplane::DataplaneError;
use fare_p4runtime::client::{Arbitration, Client, P4rtError};
use fare_p4runtime::p4info::P4Info;
use fare_p4runtime::proto::p4::v1 as p4;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// First and largest wait between two reconnection attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The pipeline a profile pushes on connect (and again to a switch that lost it).
#[derive(Clone, Debug)]
pub(crate) struct Pipeline {
    pub info: P4Info,
    pub device_config: Vec<u8>,
    /// Tells whether the switch runs these files (FNV-1a over both, [`cookie_of`]).
    pub cookie: u64,
}

impl Pipeline {
    /// Reads the P4Info (text format) and the target's device config.
    pub fn load(
        p4info: &Path,
        config: &Path,
        backend: &'static str,
    ) -> Result<Pipeline, DataplaneError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| DataplaneError::Io {
                backend,
                what: format!("reading {}", p.display()),
                source,
            })
        };
        let text = read(p4info)?;
        let device_config = read(config)?;
        let info = P4Info::load(p4info)
            .map_err(|e| DataplaneError::backend(backend, P4rtError::from(e).to_string()))?;
        Ok(Pipeline {
            cookie: cookie_of(&[&text, &device_config]),
            info,
            device_config,
        })
    }

    /// Pushes the pipeline unless the switch already runs it (same cookie). True when it
    /// was pushed: the switch's tables are empty then.
    async fn push_unless_running(&self, client: &mut Client) -> Result<bool, P4rtError> {
        if client.pipeline_cookie().await? == Some(self.cookie) {
            return Ok(false);
        }
        client
            .set_pipeline(&self.info, self.device_config.clone(), self.cookie)
            .await?;
        tracing::info!(cookie = self.cookie, "pipeline pushed (VERIFY_AND_COMMIT)");
        Ok(true)
    }
}

/// FNV-1a over the pipeline files: the cookie that tells whether the switch runs them.
pub(crate) fn cookie_of(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}

/// Where the session stands.
#[derive(Clone, Debug, PartialEq)]
enum State {
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

/// Where to reach the switch and as whom.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub address: String,
    pub device_id: u64,
    pub election_id: u64,
}

impl Target {
    pub fn of(address: &str, device_id: u64, election_id: u64) -> Target {
        Target {
            address: address.to_string(),
            device_id,
            election_id,
        }
    }
}

/// A profile's session with its switch.
pub(crate) struct Session {
    client: Client,
    state: State,
    target: Target,
    /// The pipeline pushed on connect; None: the profile uses what the switch runs.
    pipeline: Option<Pipeline>,
    /// The profile's name in errors (`p4runtime`, `p4runtime (sai)`).
    backend: &'static str,
    /// Write RPCs sent.
    writes: u64,
}

impl Session {
    /// Connects, becomes primary and pushes the pipeline in `pipeline_files` (P4Info,
    /// device config) unless the switch already runs it. Returns the session, the P4Info
    /// the switch runs, and whether its tables are fresh (the pipeline was just pushed).
    pub async fn connect(
        target: Target,
        pipeline_files: Option<&(PathBuf, PathBuf)>,
        backend: &'static str,
    ) -> Result<(Session, P4Info, bool), DataplaneError> {
        let err = |e: P4rtError| DataplaneError::backend(backend, e.to_string());
        let pipeline = match pipeline_files {
            Some((p4info, config)) => Some(Pipeline::load(p4info, config, backend)?),
            None => None,
        };
        let mut client = Client::connect(&target.address, target.device_id, target.election_id)
            .await
            .map_err(err)?;
        let (info, fresh) = match &pipeline {
            Some(p) => {
                let fresh = p.push_unless_running(&mut client).await.map_err(err)?;
                if !fresh {
                    tracing::info!(cookie = p.cookie, "switch already runs this pipeline");
                }
                (p.info.clone(), fresh)
            }
            None => (client.pipeline_p4info().await.map_err(err)?, false),
        };
        let session = Session {
            client,
            state: State::Primary,
            target,
            pipeline,
            backend,
            writes: 0,
        };
        Ok((session, info, fresh))
    }

    /// The P4Runtime client: reads, packet I/O, tests. Writes go through [`Session::write`].
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Write RPCs sent so far (benchmarks, tests).
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// The session as a line for logs and tests: `primary`, `backup: ...`, `down: ...`.
    pub fn state_line(&self) -> String {
        match &self.state {
            State::Primary => "primary".into(),
            State::Backup(why) => format!("backup: {why}"),
            State::Down { why, .. } => format!("down: {why}"),
        }
    }

    /// One Write: refused while fare is not the primary; a failure that shows the session
    /// lost (transport) or the mastership lost changes the session.
    pub async fn write(&mut self, updates: Vec<p4::Update>) -> Result<(), P4rtError> {
        if updates.is_empty() {
            return Ok(());
        }
        if let Some(why) = self.not_writing() {
            return Err(P4rtError::NotPrimary {
                device_id: self.target.device_id,
                why,
            });
        }
        self.writes += 1;
        let result = self.client.write(updates).await;
        if let Err(e) = &result {
            if e.is_transport() {
                self.down(e.to_string());
            } else if e.is_not_primary() {
                self.step_back(e.to_string());
            }
        }
        result
    }

    /// Inserts `updates`; those the target already has (ALREADY_EXISTS) are modified
    /// instead, so writing the same entries twice (a replay) is harmless.
    pub async fn write_upsert(&mut self, updates: Vec<p4::Update>) -> Result<(), P4rtError> {
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
    pub fn not_writing(&self) -> Option<String> {
        match &self.state {
            State::Primary => None,
            State::Backup(why) => Some(format!(
                "standing back, another controller is primary ({why})"
            )),
            State::Down { why, .. } => Some(format!(
                "switch unreachable ({why}); reconnecting, the agent's groups are written again then"
            )),
        }
    }

    /// Ok while fare is the primary; else why not, as the profile's error.
    pub fn writable(&self) -> Result<(), DataplaneError> {
        match self.not_writing() {
            None => Ok(()),
            Some(why) => Err(DataplaneError::backend(self.backend, why)),
        }
    }

    fn down(&mut self, why: String) {
        if !matches!(self.state, State::Down { .. }) {
            tracing::warn!(
                address = %self.target.address,
                "{}: P4Runtime session lost: {why}; reconnecting",
                self.backend
            );
            self.state = State::Down {
                why,
                next_try: Instant::now(),
                backoff: BACKOFF_MIN,
            };
        }
    }

    fn retry_later(&mut self, why: String, backoff: Duration) {
        self.state = State::Down {
            why,
            next_try: Instant::now() + backoff,
            backoff: (backoff * 2).min(BACKOFF_MAX),
        };
    }

    fn step_back(&mut self, why: String) {
        if self.state == State::Primary {
            tracing::warn!(
                device_id = self.target.device_id,
                election_id = self.target.election_id,
                "{}: lost mastership: {why}; another controller is primary, fare stands back \
                 and writes nothing until the switch names it primary again",
                self.backend
            );
        }
        self.state = State::Backup(why);
    }

    /// The periodic check (`Dataplane::maintain`): a cheap RPC (Capabilities) shows a dead
    /// switch even before the stream's end has been read.
    pub async fn probe(&mut self) {
        if !matches!(self.state, State::Down { .. }) {
            if let Err(e) = self.client.capabilities().await {
                if e.is_transport() {
                    self.down(e.to_string());
                }
            }
        }
    }

    /// Brings the session up to date: notices a closed stream or a change of primary
    /// reported by the target, and reconnects when the backoff allows (pushing the
    /// pipeline again to a switch that lost it). `Some(fresh)` when the profile must write
    /// its state again: after a new session (onto empty tables when `fresh`) or a regained
    /// mastership. Whether fare may write afterwards: [`Session::writable`].
    pub async fn refresh(&mut self) -> Option<bool> {
        match (self.client.arbitration(), &self.state) {
            (Arbitration::Closed(why), State::Primary | State::Backup(_)) => self.down(why),
            (Arbitration::Backup(why), State::Primary) => self.step_back(why),
            (Arbitration::Primary, State::Backup(_)) => {
                tracing::info!(
                    election_id = self.target.election_id,
                    "{}: primary again: reading the switch back and writing what differs",
                    self.backend
                );
                self.state = State::Primary;
                return Some(false);
            }
            _ => {}
        }
        let State::Down {
            next_try, backoff, ..
        } = self.state.clone()
        else {
            return None;
        };
        if Instant::now() < next_try {
            return None;
        }
        let t = &self.target;
        let client =
            match Client::open(&t.address, t.device_id, t.election_id, Duration::ZERO).await {
                Ok(client) => client,
                Err(e) => {
                    tracing::debug!(error = %e, ?backoff, "reconnect failed");
                    self.retry_later(e.to_string(), backoff);
                    return None;
                }
            };
        self.client = client;
        match self.client.arbitration() {
            Arbitration::Primary => {}
            Arbitration::Backup(why) => {
                tracing::warn!(
                    "{}: P4Runtime session re-established as backup: {why}",
                    self.backend
                );
                self.state = State::Backup(why);
                return None;
            }
            other => {
                self.retry_later(format!("{other:?}"), backoff);
                return None;
            }
        }
        let fresh = match &self.pipeline {
            Some(p) => match p.push_unless_running(&mut self.client).await {
                Ok(fresh) => fresh,
                Err(e) => {
                    self.retry_later(format!("pipeline not pushed: {e}"), backoff);
                    return None;
                }
            },
            None => false,
        };
        tracing::info!(
            address = %self.target.address,
            fresh,
            "{}: P4Runtime session re-established; primary",
            self.backend
        );
        self.state = State::Primary;
        Some(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_changes_with_either_file() {
        assert_ne!(cookie_of(&[b"a", b"b"]), cookie_of(&[b"a", b"c"]));
        assert_eq!(cookie_of(&[b"ab"]), cookie_of(&[b"a", b"b"]));
    }
}
