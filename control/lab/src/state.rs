//! The state directory of a running lab, `/run/fare/lab/<lab>/` (or `$FARE_LAB_DIR/<lab>/`):
//! `state.json` (the plan, the topology file, agent pids, link changes made since),
//! `agents/<node>.yaml`, `logs/<node>.log`, `<node>.sock`, `events.jsonl`.
//! It is written before anything is created, so `fare lab down` can always clean up.

use super::plan::Plan;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a lab state file: {problem}")]
    Parse { path: PathBuf, problem: String },
    #[error("no lab is up (nothing under {0})")]
    NoLab(PathBuf),
    #[error("several labs are up ({0}): name one")]
    Ambiguous(String),
    #[error("lab `{0}` is not up")]
    NotUp(String),
}

/// A link change made with `fare lab fail|degrade|congest`, kept so that `show`, the
/// ideal split and `restore` know the current state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum LinkChange {
    Fail { a: String, b: String },
    Degrade { a: String, b: String, gbps: f64 },
    Congest { a: String, b: String, percent: f64 },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    pub plan: Plan,
    pub topology: PathBuf,
    /// Propagation rule given to the agents and to the ideal split.
    pub mode: fare_model::bandwidth::Mode,
    /// node -> agent pid.
    #[serde(default)]
    pub agents: Vec<(String, u32)>,
    #[serde(default)]
    pub changes: Vec<LinkChange>,
    /// Unix time (s) when `lab up` finished.
    #[serde(default)]
    pub up_at: f64,
    /// The Mininet process that owns the nodes (`--backend mininet`).
    #[serde(default)]
    pub mininet_pid: Option<u32>,
    /// node -> `simple_switch_grpc` pid (`target: bmv2` nodes).
    #[serde(default)]
    pub switches: Vec<(String, u32)>,
}

pub fn root() -> PathBuf {
    std::env::var_os("FARE_LAB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/fare/lab"))
}

#[derive(Clone, Debug)]
pub struct StateDir {
    pub path: PathBuf,
}

impl StateDir {
    pub fn new(lab: &str) -> StateDir {
        StateDir {
            path: root().join(lab),
        }
    }

    /// The lab named, or the only lab that is up.
    pub fn find(lab: Option<&str>) -> Result<StateDir, StateError> {
        if let Some(lab) = lab {
            let d = StateDir::new(lab);
            return if d.state_file().exists() {
                Ok(d)
            } else {
                Err(StateError::NotUp(lab.to_string()))
            };
        }
        let labs = list();
        match labs.len() {
            0 => Err(StateError::NoLab(root())),
            1 => Ok(StateDir::new(&labs[0])),
            _ => Err(StateError::Ambiguous(labs.join(", "))),
        }
    }

    pub fn state_file(&self) -> PathBuf {
        self.path.join("state.json")
    }
    pub fn config(&self, node: &str) -> PathBuf {
        self.path.join("agents").join(format!("{node}.yaml"))
    }
    pub fn log(&self, node: &str) -> PathBuf {
        self.path.join("logs").join(format!("{node}.log"))
    }
    pub fn socket(&self, node: &str) -> PathBuf {
        self.path.join(format!("{node}.sock"))
    }
    pub fn events(&self) -> PathBuf {
        self.path.join("events.jsonl")
    }

    pub fn create(&self) -> Result<(), StateError> {
        for d in [self.path.join("agents"), self.path.join("logs")] {
            std::fs::create_dir_all(&d).map_err(|source| StateError::Io { path: d, source })?;
        }
        Ok(())
    }

    pub fn save(&self, state: &LabState) -> Result<(), StateError> {
        let path = self.state_file();
        let text = serde_json::to_string_pretty(state).map_err(|e| StateError::Parse {
            path: path.clone(),
            problem: e.to_string(),
        })?;
        // Write then rename: a crash never leaves half a state file.
        let tmp = self.path.join("state.json.tmp");
        std::fs::write(&tmp, text).map_err(|source| StateError::Io {
            path: tmp.clone(),
            source,
        })?;
        std::fs::rename(&tmp, &path).map_err(|source| StateError::Io { path, source })
    }

    pub fn load(&self) -> Result<LabState, StateError> {
        let path = self.state_file();
        let text = std::fs::read_to_string(&path).map_err(|source| StateError::Io {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| StateError::Parse {
            path,
            problem: e.to_string(),
        })
    }

    /// Appends one JSON event line (convergence, ARN, link changes) for `show` and reports.
    pub fn event(&self, event: &serde_json::Value) {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.events())
        {
            let _ = writeln!(f, "{event}");
        }
    }

    pub fn events_list(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.events())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn remove(&self) -> Result<(), StateError> {
        match std::fs::remove_dir_all(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StateError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }
}

/// Names of the labs with a state directory.
pub fn list() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root())
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().join("state.json").exists() || e.path().is_dir())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
