//! The one task that owns the `Box<dyn Dataplane>`.
//!
//! Every writer (static configuration, BGP, ARN) and every reader (management API,
//! metrics) talks to the backend through a cloneable [`DataplaneHandle`]; the task
//! applies commands one at a time, in arrival order, so backends need no locking and
//! changes to one prefix are never interleaved.

use crate::dataplane::{Dataplane, DataplaneError, Group, GroupStatus};
use ipnet::IpNet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

/// Queue depth between the protocols and the data plane task. Senders wait when it is
/// full, which slows a flood of BGP updates down to what the backend can program.
const QUEUE: usize = 1024;

/// A request to the data plane task. Each carries a reply channel; the handle's
/// methods wrap them, so most code never builds these directly.
#[derive(Debug)]
pub enum DataplaneCommand {
    /// Install or replace (make-before-break) the group of `group.prefix`.
    Install {
        group: Group,
        reply: oneshot::Sender<Result<(), DataplaneError>>,
    },
    /// Remove the group and route of `prefix`.
    Remove {
        prefix: IpNet,
        reply: oneshot::Sender<Result<(), DataplaneError>>,
    },
    /// Mark member `index` of `prefix` inactive (ARN) or active again.
    SetMemberActive {
        prefix: IpNet,
        index: usize,
        active: bool,
        reply: oneshot::Sender<Result<(), DataplaneError>>,
    },
    /// Read every group with its per-member counters.
    Groups {
        reply: oneshot::Sender<Result<Vec<GroupStatus>, DataplaneError>>,
    },
}

/// Counters of what the task did (exported as metrics).
#[derive(Debug, Default)]
pub struct DataplaneStats {
    pub installs: AtomicU64,
    pub removes: AtomicU64,
    pub member_changes: AtomicU64,
    pub errors: AtomicU64,
}

/// The error a caller sees: the backend's, or the task being gone (agent stopping).
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    #[error(transparent)]
    Dataplane(#[from] DataplaneError),
    #[error("the data plane task has stopped")]
    Stopped,
}

/// Cloneable access to the data plane task.
#[derive(Clone, Debug)]
pub struct DataplaneHandle {
    tx: mpsc::Sender<DataplaneCommand>,
    backend: &'static str,
    stats: Arc<DataplaneStats>,
}

impl DataplaneHandle {
    /// Backend name (`xdp`, `kernel`, `p4runtime`, `none`).
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    pub fn stats(&self) -> &DataplaneStats {
        &self.stats
    }

    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, DataplaneError>>) -> DataplaneCommand,
    ) -> Result<T, HandleError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| HandleError::Stopped)?;
        Ok(rx.await.map_err(|_| HandleError::Stopped)??)
    }

    /// Installs or replaces the group of `group.prefix`; returns once it is in the
    /// data plane.
    pub async fn install(&self, group: Group) -> Result<(), HandleError> {
        self.call(|reply| DataplaneCommand::Install { group, reply })
            .await
    }

    pub async fn remove(&self, prefix: IpNet) -> Result<(), HandleError> {
        self.call(|reply| DataplaneCommand::Remove { prefix, reply })
            .await
    }

    pub async fn set_member_active(
        &self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), HandleError> {
        self.call(|reply| DataplaneCommand::SetMemberActive {
            prefix,
            index,
            active,
            reply,
        })
        .await
    }

    pub async fn groups(&self) -> Result<Vec<GroupStatus>, HandleError> {
        self.call(|reply| DataplaneCommand::Groups { reply }).await
    }
}

/// Starts the task. It runs until every handle is dropped, then returns the backend
/// (without tearing anything down: forwarding state outlives the agent).
pub fn spawn(
    backend: Box<dyn Dataplane>,
) -> (DataplaneHandle, tokio::task::JoinHandle<Box<dyn Dataplane>>) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let stats = Arc::new(DataplaneStats::default());
    let handle = DataplaneHandle {
        tx,
        backend: backend.name(),
        stats: stats.clone(),
    };
    let task = tokio::spawn(run(backend, rx, stats));
    (handle, task)
}

async fn run(
    mut backend: Box<dyn Dataplane>,
    mut rx: mpsc::Receiver<DataplaneCommand>,
    stats: Arc<DataplaneStats>,
) -> Box<dyn Dataplane> {
    let name = backend.name();
    while let Some(command) = rx.recv().await {
        match command {
            DataplaneCommand::Install { group, reply } => {
                let result = backend.install(&group).await;
                count(&stats, &stats.installs, &result);
                match &result {
                    Ok(()) => info!(
                        backend = name,
                        prefix = %group.prefix,
                        mode = ?group.mode,
                        members = %describe(&group),
                        "group installed"
                    ),
                    Err(e) => warn!(backend = name, prefix = %group.prefix, "install failed: {e}"),
                }
                let _ = reply.send(result);
            }
            DataplaneCommand::Remove { prefix, reply } => {
                let result = backend.remove(prefix).await;
                count(&stats, &stats.removes, &result);
                match &result {
                    Ok(()) => info!(backend = name, %prefix, "group removed"),
                    Err(e) => warn!(backend = name, %prefix, "remove failed: {e}"),
                }
                let _ = reply.send(result);
            }
            DataplaneCommand::SetMemberActive {
                prefix,
                index,
                active,
                reply,
            } => {
                let result = backend.set_member_active(prefix, index, active).await;
                count(&stats, &stats.member_changes, &result);
                match &result {
                    Ok(()) => info!(backend = name, %prefix, index, active, "member state set"),
                    Err(e) => {
                        warn!(backend = name, %prefix, index, active, "member state failed: {e}")
                    }
                }
                let _ = reply.send(result);
            }
            DataplaneCommand::Groups { reply } => {
                let result = backend.groups().await;
                if let Err(e) = &result {
                    debug!(backend = name, "reading groups failed: {e}");
                }
                let _ = reply.send(result);
            }
        }
    }
    backend
}

fn count<T>(stats: &DataplaneStats, ok: &AtomicU64, result: &Result<T, DataplaneError>) {
    match result {
        Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
        Err(_) => stats.errors.fetch_add(1, Ordering::Relaxed),
    };
}

/// `eth1:3 eth2:4` for logs.
fn describe(group: &Group) -> String {
    group
        .members
        .iter()
        .map(|m| format!("{}:{}", m.interface, m.weight))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::{GroupMode, Member, NullDataplane};

    fn group(prefix: &str, weights: &[u32]) -> Group {
        Group {
            prefix: prefix.parse().unwrap(),
            mode: GroupMode::Spray,
            members: weights
                .iter()
                .enumerate()
                .map(|(i, &weight)| Member {
                    via: format!("m{i}"),
                    interface: format!("eth{i}"),
                    next_hop: None,
                    neighbor_mac: None,
                    weight,
                    bandwidth_gbps: 0.0,
                })
                .collect(),
        }
    }

    #[tokio::test]
    async fn commands_reach_the_backend_in_order() {
        let (handle, task) = spawn(Box::new(NullDataplane::default()));
        handle.install(group("10.0.0.0/24", &[1, 2])).await.unwrap();
        handle.install(group("10.0.0.0/24", &[3, 4])).await.unwrap();
        handle.install(group("10.0.1.0/24", &[1])).await.unwrap();
        assert!(handle.install(group("10.0.2.0/24", &[0])).await.is_err());
        handle
            .set_member_active("10.0.0.0/24".parse().unwrap(), 0, false)
            .await
            .unwrap();
        let groups = handle.groups().await.unwrap();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].group.members[1].weight, 4);
        assert!(!groups[0].members[0].active);
        handle.remove("10.0.1.0/24".parse().unwrap()).await.unwrap();
        assert_eq!(handle.groups().await.unwrap().len(), 1);
        assert_eq!(handle.stats().installs.load(Ordering::Relaxed), 3);
        assert_eq!(handle.stats().errors.load(Ordering::Relaxed), 1);
        drop(handle);
        let backend = task.await.unwrap();
        assert_eq!(backend.name(), "none");
    }
}
