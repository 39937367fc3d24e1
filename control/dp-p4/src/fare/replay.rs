//! What the agent asked the backend for, kept apart from what was written, and its replay
//! onto the switch after a reconnect or a regained mastership (the session rules:
//! `crate::session`). A switch that lost the pipeline gets everything written anew; one
//! that kept it is read back and adopted first, and what differs is rewritten.

use super::arn::Monitor;
use super::*;
use fare_dataplane::ColorGroup;

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

impl P4RuntimeDataplane {
    /// One Write through the session (refused while fare is not the primary).
    pub(super) async fn write(&mut self, updates: Vec<p4::Update>) -> Result<(), P4rtError> {
        self.session.write(updates).await
    }

    /// Inserts `updates`, modifying those the switch has already (a replay is harmless).
    pub(super) async fn write_upsert(&mut self, updates: Vec<p4::Update>) -> Result<(), P4rtError> {
        self.session.write_upsert(updates).await
    }

    /// Forgets what was written (ids, entries) and writes the agent's state again: onto
    /// empty tables (`fresh`), or over what the switch has, read back and adopted first.
    pub(super) async fn replay(&mut self, fresh: bool) -> Result<(), DataplaneError> {
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
            match fare_dataplane::neighbors::fill_macs(&d.group, BACKEND).await {
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
        self.session.state_line()
    }

    /// Write RPCs sent so far (benchmarks, tests).
    pub fn writes(&self) -> u64 {
        self.session.writes()
    }
}
