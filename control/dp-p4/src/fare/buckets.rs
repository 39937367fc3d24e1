//! Flow mode as a resilient bucket table (fare.p4's wcmp_bucket and wcmp_member): the
//! bucket -> member assignment comes from `fare_model::resilient`, the same function the
//! XDP backend uses, re-assigned from the table installed before so that a weight change
//! moves only the buckets the new weights require. Only changed buckets are written.
//!
//! Make-before-break: a member's wcmp_member entry is written (phase Members) before any
//! bucket points at it (phase Buckets), buckets before the group's route, and the entries
//! of members that left are deleted only after the buckets moved off them.

use super::groups::{self, Job};
use super::*;
use fare_model::resilient;

/// A group's bucket-table writes, built with its other updates (see `groups.rs`).
#[derive(Debug, Default)]
pub(super) struct BucketPlan {
    /// wcmp_member inserts / modifies (phase Members).
    pub members: Vec<p4::Update>,
    /// Changed wcmp_bucket entries (phase Buckets).
    pub buckets: Vec<p4::Update>,
    /// What puts the changed buckets back, if the group fails after they were written.
    pub undo: Vec<p4::Update>,
    /// The table written: bucket -> member index (counter); None without a bucket table.
    pub table: Option<Vec<u16>>,
    /// Member indices with a wcmp_member entry after this plan.
    pub member_entries: Vec<u16>,
    /// Buckets whose member changed (all of a fresh table).
    pub moved: usize,
}

/// The flowlet gap until `set_flowlet_gap` (the agent's `fare.flowlet_gap_us` default).
pub(super) const DEFAULT_FLOWLET_GAP_US: u32 = 500;

/// Whether `mode` uses the bucket table (flowlet mode: for a new flowlet's member).
pub(super) fn uses_buckets(mode: GroupMode) -> bool {
    matches!(mode, GroupMode::Flow | GroupMode::Flowlet)
}

impl P4RuntimeDataplane {
    /// Flowlet mode's idle gap for the groups installed from now on (the agent's
    /// `fare.flowlet_gap_us`; at least 1 us, at most u32::MAX us).
    pub fn set_flowlet_gap(&mut self, gap: Duration) {
        self.flowlet_gap_us = u32::try_from(gap.as_micros()).unwrap_or(u32::MAX).max(1);
    }

    /// The route's flowlet gap for `group` (0: not flowlet mode).
    pub(super) fn flowlet_gap_us(&self, group: &Group) -> u32 {
        if group.mode == GroupMode::Flowlet {
            self.flowlet_gap_us
        } else {
            0
        }
    }

    /// The bucket-table writes of `job` (member `i` on `ports[i]`, `macs[i]`, counter
    /// `counters[i]`, ARN slot `slots[i]`) in group `group_id`; nothing when the program
    /// has no bucket table or the group is not in flow mode.
    pub(super) fn bucket_plan(
        &self,
        job: &Job,
        nexthops: &[(u32, MacAddr, u16, u16)],
        group_id: u16,
    ) -> Result<BucketPlan, DataplaneError> {
        let prog = &self.program;
        let Some(bt) = prog.buckets.as_ref() else {
            return Ok(BucketPlan::default());
        };
        if !uses_buckets(job.group.mode) {
            return Ok(BucketPlan::default());
        }
        let old = job.old.as_ref();
        let old_entries: &[u16] = old.map_or(&[], |o| &o.member_entries);
        let active = |i: usize| job.active.get(i).copied().unwrap_or(true);
        let mut plan = BucketPlan::default();
        for (i, &(port, mac, slot, counter)) in nexthops.iter().enumerate() {
            if !active(i) {
                continue;
            }
            let action = prog
                .nexthop(port, mac, self.options.router_mac, slot, counter)
                .map_err(err)?;
            let entry = bt.member_entry(counter, Some(action)).map_err(err)?;
            let kind = if !old_entries.contains(&counter) {
                Some(p4::update::Type::Insert)
            } else {
                // Kept members have the same port and MAC; only the ARN slot may change.
                let before = old.and_then(|o| o.members.iter().find(|m| m.counter == counter));
                before
                    .is_none_or(|m| m.arn_slot != slot)
                    .then_some(p4::update::Type::Modify)
            };
            if let Some(kind) = kind {
                plan.members
                    .push(update(kind, fare_p4runtime::entities::entity_table(entry)));
            }
            plan.member_entries.push(counter);
        }
        // The installed table in this group's member numbering (gone members: usize::MAX).
        let counters: Vec<u16> = nexthops.iter().map(|n| n.3).collect();
        let previous: Option<Vec<usize>> = old.and_then(|o| o.buckets.as_ref()).map(|t| {
            t.iter()
                .map(|c| {
                    counters
                        .iter()
                        .position(|x| x == c)
                        .filter(|&i| active(i))
                        .unwrap_or(usize::MAX)
                })
                .collect()
        });
        let weights: Vec<u32> = job
            .group
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| if active(i) { m.weight } else { 0 })
            .collect();
        let assignment = resilient::reassign(previous.as_deref(), &weights, bt.buckets);
        if assignment.table.is_empty() {
            return Ok(plan);
        }
        let table: Vec<u16> = assignment.table.iter().map(|&m| counters[m]).collect();
        let before = old.and_then(|o| o.buckets.as_ref());
        for (bucket, &member) in table.iter().enumerate() {
            let was = before.and_then(|t| t.get(bucket)).copied();
            if was == Some(member) {
                continue;
            }
            let entry = bt
                .bucket_entry(group_id, bucket, Some(member))
                .map_err(err)?;
            let (kind, undo) = match was {
                Some(w) => (
                    p4::update::Type::Modify,
                    update(
                        p4::update::Type::Modify,
                        fare_p4runtime::entities::entity_table(
                            bt.bucket_entry(group_id, bucket, Some(w)).map_err(err)?,
                        ),
                    ),
                ),
                None => (
                    p4::update::Type::Insert,
                    update(
                        p4::update::Type::Delete,
                        fare_p4runtime::entities::entity_table(
                            bt.bucket_entry(group_id, bucket, None).map_err(err)?,
                        ),
                    ),
                ),
            };
            plan.buckets
                .push(update(kind, fare_p4runtime::entities::entity_table(entry)));
            plan.undo.push(undo);
        }
        plan.moved = plan.buckets.len();
        plan.table = Some(table);
        Ok(plan)
    }

    /// Deletes `group_id`'s bucket entries (`table`) and then the wcmp_member entries
    /// `members` (best effort: what failed stays, unused).
    pub(super) async fn drop_buckets(
        &mut self,
        group_id: u16,
        table: Option<&[u16]>,
        members: &[u16],
    ) {
        let Some(bt) = self.program.buckets.clone() else {
            return;
        };
        let delete = |e: Result<p4::TableEntry, P4rtError>| {
            e.ok().map(|e| {
                update(
                    p4::update::Type::Delete,
                    fare_p4runtime::entities::entity_table(e),
                )
            })
        };
        let buckets: Vec<p4::Update> = (0..table.map_or(0, <[u16]>::len))
            .filter_map(|b| delete(bt.bucket_entry(group_id, b, None)))
            .collect();
        let entries: Vec<p4::Update> = members
            .iter()
            .filter_map(|m| delete(bt.member_entry(*m, None)))
            .collect();
        for phase in [buckets, entries] {
            for chunk in groups::batches(phase) {
                if let Err(e) = self.write(chunk).await {
                    tracing::debug!(error = %e, group = group_id, "bucket entries not deleted");
                }
            }
        }
    }
}

/// An exact match field's value in `t`.
fn exact_value(t: &p4::TableEntry, field: u32) -> Option<u128> {
    t.r#match
        .iter()
        .find(|m| m.field_id == field)
        .and_then(|m| match m.field_match_type.as_ref() {
            Some(p4::field_match::FieldMatchType::Exact(e)) => {
                Some(fare_p4runtime::entities::value_of(&e.value))
            }
            _ => None,
        })
}

impl P4RuntimeDataplane {
    /// Adoption: reads the bucket and member tables back; a flow-mode group whose table is
    /// complete (every bucket names one of its members' entries) keeps it, so the next
    /// change moves only what it must. Every other entry is deleted: the group falls back
    /// to the selector until it is written again.
    pub(super) async fn adopt_buckets(&mut self) -> Result<(), P4rtError> {
        let Some(bt) = self.program.buckets.clone() else {
            return Ok(());
        };
        let read = vec![
            fare_p4runtime::entities::whole_table(bt.bucket_table),
            fare_p4runtime::entities::whole_table(bt.member_table),
        ];
        let entities = self.session.client().read(read).await?;
        let mut tables: BTreeMap<u16, BTreeMap<usize, u16>> = BTreeMap::new();
        let mut entries: BTreeSet<u16> = BTreeSet::new();
        for e in entities {
            let Some(p4::entity::Entity::TableEntry(t)) = e.entity else {
                continue;
            };
            if t.table_id == bt.member_table {
                if let Some(Ok(m)) = exact_value(&t, bt.member_index.id).map(u16::try_from) {
                    entries.insert(m);
                }
                continue;
            }
            let (Some(g), Some(b)) = (
                exact_value(&t, bt.group_id.id),
                exact_value(&t, bt.bucket.id),
            ) else {
                continue;
            };
            let Some(p4::table_action::Type::Action(a)) = t.action.and_then(|a| a.r#type) else {
                continue;
            };
            let m = adoption::param_value(&a, bt.bucket_member.id);
            if let (Ok(g), Ok(b), Ok(m)) = (u16::try_from(g), usize::try_from(b), u16::try_from(m))
            {
                tables.entry(g).or_default().insert(b, m);
            }
        }
        let mut kept_entries = BTreeSet::new();
        for inst in self.groups.values_mut() {
            let Some(table) = tables.get(&inst.group_id) else {
                continue;
            };
            let counters: Vec<u16> = inst.members.iter().map(|m| m.counter).collect();
            let complete = uses_buckets(inst.group.mode)
                && table.len() == bt.buckets
                && table.keys().copied().eq(0..bt.buckets)
                && table
                    .values()
                    .all(|m| counters.contains(m) && entries.contains(m));
            if complete {
                inst.buckets = Some(table.values().copied().collect());
                inst.member_entries = counters
                    .iter()
                    .filter(|c| entries.contains(c))
                    .copied()
                    .collect();
                kept_entries.extend(inst.member_entries.iter().copied());
                tables.remove(&inst.group_id);
            }
        }
        for (group, table) in tables {
            let t = vec![0u16; table.keys().max().map_or(0, |b| b + 1)];
            self.drop_buckets(group, Some(&t), &[]).await;
        }
        let stale: Vec<u16> = entries.difference(&kept_entries).copied().collect();
        self.drop_buckets(0, None, &stale).await;
        Ok(())
    }
}
