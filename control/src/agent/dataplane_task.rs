//! The one task that owns the `Box<dyn Dataplane>`.
//!
//! Every writer (static configuration, BGP, ARN) and every reader (management API,
//! metrics) talks to the backend through a cloneable [`DataplaneHandle`]; the task
//! applies commands one at a time, in arrival order, so backends need no locking and
//! changes to one prefix are never interleaved.
//!
//! Members switched off with `set_member_active(false)` (ARN) stay off when their group is
//! re-installed (BGP recomputed it): right after the install, in the same command, the task
//! switches off again every such member that is still in the group (same `via` and
//! interface); members that left the group are forgotten. Then it notifies
//! [`DataplaneHandle::groups_changed`] so the ARN receiver can reconcile its own state.

use crate::dataplane::{
    ColorGroup, Dataplane, DataplaneError, FlowRule, Group, GroupStatus, Member,
};
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Notify};
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
    /// ARN per-flow mode: flows matching `flow` avoid `interface` (or no longer do).
    SteerFlow {
        flow: crate::arn::codec::FlowId,
        interface: String,
        avoid: bool,
        reply: oneshot::Sender<Result<bool, DataplaneError>>,
    },
    /// DPF: install `group` with the per-color groups of its prefix.
    InstallColored {
        group: Group,
        colors: Vec<ColorGroup>,
        reply: oneshot::Sender<Result<(), DataplaneError>>,
    },
    /// DPF: replace the flow -> color rules.
    SetFlowRules {
        rules: Vec<FlowRule>,
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
    changed: Arc<Notify>,
}

impl DataplaneHandle {
    /// Backend name (`xdp`, `kernel`, `p4runtime`, `none`).
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    pub fn stats(&self) -> &DataplaneStats {
        &self.stats
    }

    /// Notified (one stored permit) after every install or remove that succeeded. One
    /// consumer: the ARN receiver.
    pub fn groups_changed(&self) -> Arc<Notify> {
        self.changed.clone()
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

    /// ARN per-flow mode (see `Dataplane::steer_flow`).
    pub async fn steer_flow(
        &self,
        flow: crate::arn::codec::FlowId,
        interface: String,
        avoid: bool,
    ) -> Result<bool, HandleError> {
        self.call(|reply| DataplaneCommand::SteerFlow {
            flow,
            interface,
            avoid,
            reply,
        })
        .await
    }

    /// DPF: installs `group` together with its per-color groups.
    pub async fn install_colored(
        &self,
        group: Group,
        colors: Vec<ColorGroup>,
    ) -> Result<(), HandleError> {
        self.call(|reply| DataplaneCommand::InstallColored {
            group,
            colors,
            reply,
        })
        .await
    }

    /// DPF: replaces the flow -> color rules.
    pub async fn set_flow_rules(&self, rules: Vec<FlowRule>) -> Result<(), HandleError> {
        self.call(|reply| DataplaneCommand::SetFlowRules { rules, reply })
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
    let changed = Arc::new(Notify::new());
    let handle = DataplaneHandle {
        tx,
        backend: backend.name(),
        stats: stats.clone(),
        changed: changed.clone(),
    };
    let task = tokio::spawn(run(backend, rx, stats, changed));
    (handle, task)
}

/// What identifies a member across re-installs of its group.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct MemberKey {
    via: String,
    interface: String,
}

impl MemberKey {
    fn of(m: &Member) -> MemberKey {
        MemberKey {
            via: m.via.clone(),
            interface: m.interface.clone(),
        }
    }
}

/// Members switched off, per prefix (kept across re-installs).
type HeldOut = BTreeMap<IpNet, BTreeSet<MemberKey>>;

async fn run(
    mut backend: Box<dyn Dataplane>,
    mut rx: mpsc::Receiver<DataplaneCommand>,
    stats: Arc<DataplaneStats>,
    changed: Arc<Notify>,
) -> Box<dyn Dataplane> {
    let name = backend.name();
    let mut held: HeldOut = BTreeMap::new();
    // The installed groups' members, to name the member of a set_member_active.
    let mut installed: BTreeMap<IpNet, Vec<MemberKey>> = BTreeMap::new();
    while let Some(command) = rx.recv().await {
        match command {
            DataplaneCommand::Install { .. } | DataplaneCommand::InstallColored { .. } => {
                let (group, colors, reply) = match command {
                    DataplaneCommand::Install { group, reply } => (group, vec![], reply),
                    DataplaneCommand::InstallColored {
                        group,
                        colors,
                        reply,
                    } => (group, colors, reply),
                    _ => unreachable!("matched above"),
                };
                let result = if colors.is_empty() {
                    backend.install(&group).await
                } else {
                    backend.install_colored(&group, &colors).await
                };
                count(&stats, &stats.installs, &result);
                match &result {
                    Ok(()) => {
                        info!(
                            backend = name,
                            prefix = %group.prefix,
                            mode = ?group.mode,
                            members = %describe(&group),
                            colors = colors.len(),
                            "group installed"
                        );
                        installed.insert(
                            group.prefix,
                            group.members.iter().map(MemberKey::of).collect(),
                        );
                        keep_held_out(backend.as_mut(), &group, &mut held).await;
                    }
                    Err(e) => warn!(backend = name, prefix = %group.prefix, "install failed: {e}"),
                }
                let ok = result.is_ok();
                let _ = reply.send(result);
                if ok {
                    changed.notify_one();
                }
            }
            DataplaneCommand::Remove { prefix, reply } => {
                let result = backend.remove(prefix).await;
                count(&stats, &stats.removes, &result);
                match &result {
                    Ok(()) => {
                        info!(backend = name, %prefix, "group removed");
                        installed.remove(&prefix);
                        held.remove(&prefix);
                    }
                    Err(e) => warn!(backend = name, %prefix, "remove failed: {e}"),
                }
                let ok = result.is_ok();
                let _ = reply.send(result);
                if ok {
                    changed.notify_one();
                }
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
                    Ok(()) => {
                        info!(backend = name, %prefix, index, active, "member state set");
                        if let Some(key) = installed.get(&prefix).and_then(|m| m.get(index)) {
                            let set = held.entry(prefix).or_default();
                            if active {
                                set.remove(key);
                            } else {
                                set.insert(key.clone());
                            }
                        }
                    }
                    Err(e) => {
                        warn!(backend = name, %prefix, index, active, "member state failed: {e}")
                    }
                }
                let _ = reply.send(result);
            }
            DataplaneCommand::SteerFlow {
                flow,
                interface,
                avoid,
                reply,
            } => {
                let result = backend.steer_flow(&flow, &interface, avoid).await;
                match &result {
                    Ok(true) => info!(backend = name, %interface, avoid, "flow steering set"),
                    Ok(false) => debug!(backend = name, "flow steering not available"),
                    Err(e) => warn!(backend = name, %interface, avoid, "flow steering failed: {e}"),
                }
                let _ = reply.send(result);
            }
            DataplaneCommand::SetFlowRules { rules, reply } => {
                let result = backend.set_flow_rules(&rules).await;
                match &result {
                    Ok(()) => info!(backend = name, rules = rules.len(), "DPF flow rules set"),
                    Err(e) => warn!(backend = name, "DPF flow rules refused: {e}"),
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

/// After `group` was installed: switches off again the members of it that were off before
/// (a fresh install has every member active), forgets the ones no longer in it.
async fn keep_held_out(backend: &mut dyn Dataplane, group: &Group, held: &mut HeldOut) {
    let Some(set) = held.get_mut(&group.prefix) else {
        return;
    };
    let keys: Vec<MemberKey> = set.iter().cloned().collect();
    let states = match backend.groups().await {
        Ok(g) => g
            .into_iter()
            .find(|g| g.group.prefix == group.prefix)
            .map(|g| g.members),
        Err(_) => None,
    };
    for key in keys {
        let Some(index) = group.members.iter().position(|m| MemberKey::of(m) == key) else {
            set.remove(&key);
            continue;
        };
        let active = states
            .as_ref()
            .and_then(|s| s.get(index))
            .is_none_or(|s| s.active);
        if !active {
            continue; // the backend kept it off (identical group re-installed)
        }
        if let Err(e) = backend.set_member_active(group.prefix, index, false).await {
            info!(prefix = %group.prefix, via = %key.via, "member no longer held out after re-install: {e}");
            set.remove(&key);
        }
    }
    if set.is_empty() {
        held.remove(&group.prefix);
    }
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

    #[tokio::test]
    async fn members_switched_off_stay_off_across_reinstalls() {
        let (handle, _task) = spawn(Box::new(NullDataplane::default()));
        let changed = handle.groups_changed();
        let p: IpNet = "10.0.0.0/24".parse().unwrap();
        handle
            .install(group("10.0.0.0/24", &[1, 2, 3]))
            .await
            .unwrap();
        changed.notified().await; // the permit of the install
        handle.set_member_active(p, 1, false).await.unwrap();
        let active =
            |g: Vec<GroupStatus>| -> Vec<bool> { g[0].members.iter().map(|m| m.active).collect() };
        // New weights, same members: m1 stays off.
        handle
            .install(group("10.0.0.0/24", &[3, 2, 1]))
            .await
            .unwrap();
        assert_eq!(
            active(handle.groups().await.unwrap()),
            vec![true, false, true]
        );
        changed.notified().await;
        // m1 moves to index 0 (m0 left): still off.
        let mut g = group("10.0.0.0/24", &[2, 2, 2]);
        g.members.remove(0);
        handle.install(g).await.unwrap();
        assert_eq!(active(handle.groups().await.unwrap()), vec![false, true]);
        // Switched on again: a later install keeps it on.
        handle.set_member_active(p, 0, true).await.unwrap();
        handle
            .install(group("10.0.0.0/24", &[1, 1, 1]))
            .await
            .unwrap();
        assert_eq!(
            active(handle.groups().await.unwrap()),
            vec![true, true, true]
        );
        // A member that left the group is forgotten.
        handle.set_member_active(p, 2, false).await.unwrap();
        handle.install(group("10.0.0.0/24", &[1, 1])).await.unwrap();
        handle
            .install(group("10.0.0.0/24", &[1, 1, 1]))
            .await
            .unwrap();
        assert_eq!(
            active(handle.groups().await.unwrap()),
            vec![true, true, true]
        );
    }
}
