//! Groups: members, action-profile groups and group table entries, written
//! make-before-break in dependency order, many groups per Write.
//!
//! A P4Runtime target may apply the updates of one WriteRequest in any order, so entities
//! that reference each other never share a request: each phase below is its own Write
//! (split at [`MAX_BATCH`] updates), sent only after the previous one was answered, and a
//! group whose update failed in one phase takes no part in the later ones:
//!
//! 1. action-profile members and flow mode's member entries;
//! 2. action-profile groups (they name members);
//! 3. flow mode's changed buckets (they name member entries, see `buckets.rs`);
//! 4. member counters zeroed; 5. group table entries (they name profile groups);
//! 6. route entries (they carry group ids); then what was replaced, in reverse:
//! 7. buckets of a group that left flow mode, member entries no bucket names any more;
//! 8. old profile groups; 9. old members. A failed group's own writes are undone in
//!    reverse order too (buckets put back, entry, profile group, members).
//!
//! Independent groups share every phase: installing 1,000 routes is a handful of Writes.

use super::*;
use crate::skeleton::{self, Outcomes};
use fare_dataplane::limits;

/// Most updates in one Write request.
pub(super) const MAX_BATCH: usize = 500;

/// Most writes spent finding a target's group limit after a RESOURCE_EXHAUSTED.
const LIMIT_PROBES: usize = 16;

/// One group to write.
#[derive(Clone, Debug)]
pub(super) struct Job {
    pub group: Group,
    pub active: Vec<bool>,
    /// What is installed for this group now (replaced make-before-break, same group id).
    pub old: Option<Installed>,
    /// Write the route entry (new prefix or a mode change); false for DPF color groups.
    pub route: bool,
}

/// Why a job failed.
#[derive(Debug)]
pub(super) struct Failure {
    pub error: DataplaneError,
    /// The target answered RESOURCE_EXHAUSTED (group above its limit, or tables full).
    pub exhausted: bool,
}

impl From<DataplaneError> for Failure {
    fn from(error: DataplaneError) -> Failure {
        Failure {
            error,
            exhausted: false,
        }
    }
}

/// A job with its ids allocated and its updates built.
struct Plan {
    job: Job,
    inst: Installed,
    members: Vec<p4::Update>,
    profile: Option<p4::Update>,
    zero: Vec<p4::Update>,
    entry: Option<p4::Update>,
    route: Option<p4::Update>,
    bucket: buckets::BucketPlan,
    /// The Buckets phase ran for this plan (a failure then puts the buckets back).
    buckets_tried: bool,
    new_counters: Vec<u16>,
    new_group_id: bool,
    /// The group table entry was written (a new one is deleted again on failure).
    entry_written: bool,
    failure: Option<Failure>,
}

/// Phases of [`P4RuntimeDataplane::write_jobs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Members,
    Profiles,
    Buckets,
    Entries,
    Routes,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Members => "action-profile members",
            Phase::Profiles => "action-profile groups",
            Phase::Buckets => "bucket entries",
            Phase::Entries => "group table entries",
            Phase::Routes => "route entries",
        }
    }
}

/// Splits `updates` into Write requests of at most [`MAX_BATCH`].
pub(super) fn batches<T>(updates: Vec<T>) -> Vec<Vec<T>> {
    let mut out = Vec::with_capacity(updates.len().div_ceil(MAX_BATCH));
    let mut it = updates.into_iter().peekable();
    while it.peek().is_some() {
        out.push(it.by_ref().take(MAX_BATCH).collect());
    }
    out
}

/// Which updates of a failed Write failed, by position, and whether with
/// RESOURCE_EXHAUSTED; every update when the target gave no per-update errors.
pub(super) fn failed_updates(e: &P4rtError, count: usize) -> Vec<(usize, bool, String)> {
    match e {
        P4rtError::Rpc { error, .. } if !error.updates.is_empty() => error
            .updates
            .iter()
            .filter(|u| u.index < count)
            .map(|u| {
                (
                    u.index,
                    u.code == tonic::Code::ResourceExhausted,
                    format!("{:?}: {}", u.code, u.message),
                )
            })
            .collect(),
        P4rtError::Rpc { error, .. } => (0..count)
            .map(|i| {
                (
                    i,
                    error.code == tonic::Code::ResourceExhausted,
                    e.to_string(),
                )
            })
            .collect(),
        _ => (0..count).map(|i| (i, false, e.to_string())).collect(),
    }
}

/// A table of ids ran out.
pub(super) fn exhausted(what: &str) -> DataplaneError {
    DataplaneError::backend(BACKEND, format!("out of {what}"))
}

impl P4RuntimeDataplane {
    /// The ARN removal slot for (port, prefix), 0 when no ARN path maps to it.
    pub(super) fn slot_for(&self, prefix: IpNet, port: u32) -> u16 {
        self.prefix_slots.get(&(prefix, port)).copied().unwrap_or(0)
    }

    /// The job that writes `group` with `active` members over what is installed for its
    /// prefix (its route too when there is none, or the mode changes).
    fn replacing(&self, group: Group, active: Vec<bool>) -> Job {
        let old = self.groups.get(&group.prefix).cloned();
        let route = old.as_ref().is_none_or(|o| o.group.mode != group.mode);
        Job {
            group,
            active,
            old,
            route,
        }
    }

    /// Writes one job and records what it installed.
    async fn write_installed(&mut self, job: Job) -> Result<(), Failure> {
        let prefix = job.group.prefix;
        let inst = skeleton::only(BACKEND, self.write_jobs(vec![job]).await)?;
        self.groups.insert(prefix, inst);
        Ok(())
    }

    /// Writes `group` with `active` members make-before-break over whatever is installed.
    pub(super) async fn write_group(
        &mut self,
        group: &Group,
        active: &[bool],
    ) -> Result<(), DataplaneError> {
        let job = self.replacing(group.clone(), active.to_vec());
        self.write_installed(job).await.map_err(|f| f.error)
    }

    /// Installs `groups` (validated, MACs resolved, all active) together: one batch per
    /// phase for all of them. A group the target refuses with RESOURCE_EXHAUSTED is
    /// reduced to the largest size the target takes (see [`Self::install_reduced`]).
    pub(super) async fn install_groups(
        &mut self,
        groups: Vec<Group>,
    ) -> Vec<Result<(), DataplaneError>> {
        let mut results = Outcomes::new(BACKEND, groups.len());
        let mut jobs = Vec::new();
        let mut slots = Vec::new();
        for (slot, group) in groups.into_iter().enumerate() {
            // A limit learned from the target applies before writing.
            let group = match self.learned_limit {
                Some(l) => Group {
                    members: limits::fit(&group.members, &GroupLimits::size(l)).0,
                    ..group
                },
                None => group,
            };
            // Adopted or unchanged: keep the switch as it is.
            let unchanged = self.groups.get_mut(&group.prefix).is_some_and(|inst| {
                let all_active = inst.members.iter().all(|m| m.active);
                skeleton::refresh_if_unchanged(
                    &mut inst.group,
                    all_active,
                    &group,
                    skeleton::NextHop::NotWritten,
                )
            });
            if unchanged {
                results.set(slot, Ok(()));
                continue;
            }
            slots.push(slot);
            let active = vec![true; group.members.len()];
            jobs.push(self.replacing(group, active));
        }
        let outcomes = self.write_jobs(jobs.clone()).await;
        for ((slot, job), outcome) in slots.into_iter().zip(jobs).zip(outcomes) {
            let result = match outcome {
                Ok(inst) => {
                    self.groups.insert(job.group.prefix, inst);
                    Ok(())
                }
                Err(f) if f.exhausted => self.install_reduced(&job.group, f.error).await,
                Err(f) => Err(f.error),
            };
            results.set(slot, result);
        }
        results.finish()
    }

    /// `group` was refused with RESOURCE_EXHAUSTED: the target's limit on a group is below
    /// its size and the P4Info does not say where. Bisects the limit L between what is
    /// known taken and known refused: each probe writes (make-before-break) the group
    /// reduced to L with the optimal WCMP reduction, unless the reduced size is already
    /// known taken (at most the largest size the target took) or refused (at least the
    /// smallest it refused). Installs the reduction at the largest L taken, and from then
    /// on reduces every group to one less than the smallest size refused.
    pub(super) async fn install_reduced(
        &mut self,
        group: &Group,
        first: DataplaneError,
    ) -> Result<(), DataplaneError> {
        let size = |members: &[Member]| -> u32 {
            u32::try_from(members.iter().map(|m| u64::from(m.weight)).sum::<u64>())
                .unwrap_or(u32::MAX)
        };
        let reduced = |limit: u32| limits::fit(&group.members, &GroupLimits::size(limit)).0;
        let requested = size(&group.members);
        self.refused(requested);
        let (mut lo, mut hi) = (0u32, requested);
        // The limit whose reduction is on the switch now.
        let mut installed: Option<u32> = None;
        for _ in 0..LIMIT_PROBES {
            if hi - lo <= 1 {
                break;
            }
            let mid = lo + (hi - lo) / 2;
            let members = reduced(mid);
            let s = size(&members);
            if s <= self.target_taken {
                lo = mid;
                continue;
            }
            if self.target_refused.is_some_and(|r| s >= r) {
                hi = mid;
                continue;
            }
            match self.write_reduced(group, members).await {
                Ok(()) => {
                    lo = mid;
                    installed = Some(mid);
                    self.target_taken = self.target_taken.max(s);
                }
                Err(f) if f.exhausted => {
                    hi = mid;
                    self.refused(s);
                }
                Err(f) => return Err(f.error),
            }
        }
        if lo == 0 {
            return Err(first);
        }
        if installed != Some(lo) {
            self.write_reduced(group, reduced(lo))
                .await
                .map_err(|f| f.error)?;
        }
        tracing::warn!(
            prefix = %group.prefix,
            requested,
            installed = size(&reduced(lo)),
            largest_taken = self.target_taken,
            smallest_refused = ?self.target_refused,
            "p4runtime: the target refused the group (RESOURCE_EXHAUSTED); installed it \
             reduced, and later groups are reduced below the smallest size refused"
        );
        Ok(())
    }

    /// The target refused a group of `size`: later groups are reduced below it.
    fn refused(&mut self, size: u32) {
        let r = self.target_refused.map_or(size, |r| r.min(size));
        self.target_refused = Some(r);
        let limit = r.saturating_sub(1).max(1);
        self.learned_limit = Some(limit);
        self.limits = self.limits.min(GroupLimits::size(limit));
    }

    /// One make-before-break write of `group` with `members` in place of its own.
    async fn write_reduced(&mut self, group: &Group, members: Vec<Member>) -> Result<(), Failure> {
        let try_group = Group {
            members,
            ..group.clone()
        };
        let active = vec![true; try_group.members.len()];
        let job = self.replacing(try_group, active);
        self.write_installed(job).await
    }

    /// Writes the members, profile group and group table entry of `group` make-before-break
    /// over `old` (same group id), and returns what is installed. Routes are the caller's.
    pub(super) async fn write_profile(
        &mut self,
        group: &Group,
        active: &[bool],
        old: Option<&Installed>,
    ) -> Result<Installed, DataplaneError> {
        let job = Job {
            group: group.clone(),
            active: active.to_vec(),
            old: old.cloned(),
            route: false,
        };
        skeleton::only(BACKEND, self.write_jobs(vec![job]).await).map_err(|f: Failure| f.error)
    }

    /// Writes `jobs` phase by phase (see the module doc) and returns what is installed for
    /// each, in order. The caller records successes in `groups` / `colors`.
    pub(super) async fn write_jobs(&mut self, jobs: Vec<Job>) -> Vec<Result<Installed, Failure>> {
        let mut plans: Vec<Result<Plan, Failure>> = Vec::with_capacity(jobs.len());
        for job in jobs {
            plans.push(self.plan(job).map_err(Failure::from));
        }
        for phase in [
            Phase::Members,
            Phase::Profiles,
            Phase::Buckets,
            Phase::Entries,
            Phase::Routes,
        ] {
            if phase == Phase::Entries {
                // Zero the counters of newly allocated indices (they may have been used
                // before); best effort.
                let zero: Vec<p4::Update> = plans
                    .iter_mut()
                    .filter_map(|p| p.as_mut().ok())
                    .filter(|p| p.failure.is_none())
                    .flat_map(|p| std::mem::take(&mut p.zero))
                    .collect();
                for chunk in batches(zero) {
                    if let Err(e) = self.write(chunk).await {
                        tracing::debug!(error = %e, "could not zero new member counters");
                    }
                }
            }
            self.run_phase(&mut plans, phase).await;
        }
        // Failed groups: undo their own writes in reverse order.
        let mut entries = Vec::new();
        let mut member_entries = Vec::new();
        let mut undo_groups = Vec::new();
        let mut undo_members = Vec::new();
        for plan in plans.iter_mut().filter_map(|p| p.as_mut().ok()) {
            if plan.failure.is_none() {
                continue;
            }
            if plan.buckets_tried {
                entries.append(&mut plan.bucket.undo);
            }
            let had = plan.job.old.as_ref().map_or(&[][..], |o| &o.member_entries);
            member_entries.extend(
                plan.bucket
                    .member_entries
                    .iter()
                    .filter(|c| !had.contains(c))
                    .copied(),
            );
            if plan.entry_written && plan.new_group_id {
                if let Ok(key) = self.program.group_key(plan.inst.group_id) {
                    entries.push(update(
                        p4::update::Type::Delete,
                        fare_p4runtime::entities::entity_table(key),
                    ));
                }
            }
            undo_groups.push(plan.inst.profile_group);
            undo_members.extend(plan.inst.members.iter().flat_map(|m| m.member_ids.clone()));
        }
        for chunk in batches(entries) {
            if let Err(e) = self.write(chunk).await {
                tracing::debug!(error = %e, "group entries of failed groups not deleted");
            }
        }
        self.drop_buckets(0, None, &member_entries).await;
        self.undo_many(&undo_groups, &undo_members).await;
        // Replaced state of the groups that made it: old profile groups, then old members.
        let mut old_groups = Vec::new();
        let mut old_members = Vec::new();
        let mut out = Vec::with_capacity(plans.len());
        for plan in plans {
            let plan = match plan {
                Ok(p) => p,
                Err(f) => {
                    out.push(Err(f));
                    continue;
                }
            };
            if let Some(f) = plan.failure {
                for c in plan.new_counters {
                    self.counters.free(u32::from(c));
                }
                if plan.new_group_id {
                    self.group_ids.free(u32::from(plan.inst.group_id));
                }
                out.push(Err(f));
                continue;
            }
            if let Some(o) = &plan.job.old {
                // Buckets of a group that left flow mode; entries of members that left.
                let table = o.buckets.as_deref().filter(|_| plan.inst.buckets.is_none());
                let gone: Vec<u16> = o
                    .member_entries
                    .iter()
                    .filter(|c| !plan.inst.member_entries.contains(c))
                    .copied()
                    .collect();
                if table.is_some() || !gone.is_empty() {
                    self.drop_buckets(o.group_id, table, &gone).await;
                }
                old_groups.push(o.profile_group);
                old_members.extend(o.members.iter().flat_map(|m| m.member_ids.clone()));
                let keep: Vec<u16> = plan.inst.members.iter().map(|m| m.counter).collect();
                for m in &o.members {
                    if !keep.contains(&m.counter) {
                        self.counters.free(u32::from(m.counter));
                    }
                }
            }
            out.push(Ok(plan.inst));
        }
        self.undo_many(&old_groups, &old_members).await;
        out
    }

    /// One phase: the live plans' updates of that phase, in Writes of at most MAX_BATCH;
    /// a plan with a failed update fails.
    async fn run_phase(&mut self, plans: &mut [Result<Plan, Failure>], phase: Phase) {
        let mut tagged: Vec<(usize, p4::Update)> = Vec::new();
        for (i, plan) in plans.iter_mut().enumerate() {
            let Ok(plan) = plan else { continue };
            if plan.failure.is_some() {
                continue;
            }
            match phase {
                Phase::Members => tagged.extend(
                    std::mem::take(&mut plan.members)
                        .into_iter()
                        .chain(std::mem::take(&mut plan.bucket.members))
                        .map(|u| (i, u)),
                ),
                Phase::Buckets => {
                    plan.buckets_tried = true;
                    tagged.extend(
                        std::mem::take(&mut plan.bucket.buckets)
                            .into_iter()
                            .map(|u| (i, u)),
                    )
                }
                Phase::Profiles => tagged.extend(plan.profile.take().map(|u| (i, u))),
                Phase::Entries => tagged.extend(plan.entry.take().map(|u| (i, u))),
                Phase::Routes => tagged.extend(plan.route.take().map(|u| (i, u))),
            }
        }
        for chunk in batches(tagged) {
            let owners: Vec<usize> = chunk.iter().map(|(i, _)| *i).collect();
            let updates = chunk.into_iter().map(|(_, u)| u).collect::<Vec<_>>();
            let count = updates.len();
            let failed = match self.write(updates).await {
                Ok(()) => Vec::new(),
                Err(e) => failed_updates(&e, count),
            };
            let mut bad: BTreeMap<usize, (bool, String)> = BTreeMap::new();
            for (index, exhausted, why) in failed {
                let entry = bad.entry(owners[index]).or_insert((false, why));
                entry.0 |= exhausted;
            }
            for (i, plan) in plans.iter_mut().enumerate() {
                let Ok(plan) = plan else { continue };
                if !owners.contains(&i) || plan.failure.is_some() {
                    continue;
                }
                match bad.get(&i) {
                    None => {
                        if phase == Phase::Entries {
                            plan.entry_written = true;
                        }
                    }
                    Some((exhausted, why)) if phase == Phase::Routes && !plan.new_group_id => {
                        // The group entry already moved to the new profile group; the mode
                        // change did not take: keep the group, with the mode it has.
                        tracing::warn!(prefix = %plan.inst.group.prefix, exhausted, "route mode not changed: {why}");
                        if let Some(o) = &plan.job.old {
                            plan.inst.group.mode = o.group.mode;
                        }
                    }
                    Some((exhausted, why)) => {
                        plan.failure = Some(Failure {
                            error: DataplaneError::backend(
                                BACKEND,
                                format!(
                                    "{}: writing {} failed: {why}",
                                    plan.inst.group.prefix,
                                    phase.name()
                                ),
                            ),
                            exhausted: *exhausted,
                        });
                    }
                }
            }
        }
    }

    /// Allocates the ids of `job` and builds its updates.
    fn plan(&mut self, job: Job) -> Result<Plan, DataplaneError> {
        let group = &job.group;
        let ports = group
            .members
            .iter()
            .map(|m| self.port(&m.interface))
            .collect::<Result<Vec<u32>, _>>()?;
        let macs = group
            .members
            .iter()
            .map(|m| {
                m.neighbor_mac.ok_or_else(|| DataplaneError::InvalidGroup {
                    prefix: group.prefix,
                    why: format!(
                        "member via {} has no neighbor MAC and no next hop to resolve one from",
                        m.via
                    ),
                })
            })
            .collect::<Result<Vec<MacAddr>, _>>()?;
        let mut taken = Taken::default();
        match self.build(&job, &ports, &macs, &mut taken) {
            Ok(plan) => Ok(plan),
            Err(e) => {
                self.release(&taken);
                Err(e)
            }
        }
    }

    fn build(
        &mut self,
        job: &Job,
        ports: &[u32],
        macs: &[MacAddr],
        taken: &mut Taken,
    ) -> Result<Plan, DataplaneError> {
        let group = &job.group;
        let old = job.old.as_ref();
        let prog = self.program.clone();
        let port_bits = prog.set_nexthop.port.bits;
        let counters = self.member_counters(job, ports, taken)?;
        let (installed_members, member_updates, group_members) =
            self.members(job, ports, macs, &counters, taken)?;
        let (pg, group_id) = self.group_ids_for(old, taken)?;
        let profile = prog
            .profile_group(pg, &group_members, port_bits)
            .map_err(err)?;
        let zero = taken
            .counters
            .iter()
            .map(|c| {
                update(
                    p4::update::Type::Modify,
                    prog.counter_entry(prog.member_packets, Some(i64::from(*c)))
                        .with_data(),
                )
            })
            .collect();
        let entry_kind = if old.is_some() {
            p4::update::Type::Modify
        } else {
            p4::update::Type::Insert
        };
        let entry = update(
            entry_kind,
            fare_p4runtime::entities::entity_table(prog.group_entry(group_id, pg).map_err(err)?),
        );
        let route = if job.route {
            let kind = if old.is_some() {
                p4::update::Type::Modify
            } else {
                p4::update::Type::Insert
            };
            let spray = group.mode == GroupMode::Spray;
            let entry = prog
                .route(group.prefix, group_id, spray, self.flowlet_gap_us(group))
                .map_err(err)?;
            Some(update(kind, fare_p4runtime::entities::entity_table(entry)))
        } else {
            None
        };
        let nexthops: Vec<(u32, MacAddr, u16, u16)> = installed_members
            .iter()
            .zip(macs)
            .map(|(m, mac)| (m.port, *mac, m.arn_slot, m.counter))
            .collect();
        let bucket = self.bucket_plan(job, &nexthops, group_id)?;
        Ok(Plan {
            inst: Installed {
                group: group.clone(),
                group_id,
                profile_group: pg,
                members: installed_members,
                buckets: bucket.table.clone(),
                member_entries: bucket.member_entries.clone(),
            },
            members: member_updates,
            profile: Some(update_of(
                p4::update::Type::Insert,
                p4::entity::Entity::ActionProfileGroup(profile),
            )),
            zero,
            entry: Some(entry),
            route,
            bucket,
            buckets_tried: false,
            new_counters: taken.counters.clone(),
            new_group_id: old.is_none(),
            entry_written: false,
            failure: None,
            job: job.clone(),
        })
    }

    /// The counter index of each member: a member that survives (same port and MAC) keeps
    /// its own, the others take new ones.
    fn member_counters(
        &mut self,
        job: &Job,
        ports: &[u32],
        taken: &mut Taken,
    ) -> Result<Vec<u16>, DataplaneError> {
        let group = &job.group;
        let old = job.old.as_ref();
        let mut counters = Vec::with_capacity(group.members.len());
        for (m, port) in group.members.iter().zip(ports) {
            let kept = old.and_then(|o| {
                o.group
                    .members
                    .iter()
                    .zip(&o.members)
                    .find(|(om, im)| im.port == *port && om.neighbor_mac == m.neighbor_mac)
                    .map(|(_, im)| im.counter)
            });
            let c = match kept {
                Some(c) if !counters.contains(&c) => c,
                _ => {
                    let c = self
                        .counters
                        .take()
                        .ok_or_else(|| exhausted("member counters"))?
                        as u16;
                    taken.counters.push(c);
                    c
                }
            };
            counters.push(c);
        }

        Ok(counters)
    }

    /// The action-profile members of `job` (one per member, or one per unit of weight in
    /// the replicated form; inactive members none), their inserts, and the group's view of
    /// them.
    #[allow(clippy::type_complexity)]
    fn members(
        &mut self,
        job: &Job,
        ports: &[u32],
        macs: &[MacAddr],
        counters: &[u16],
        taken: &mut Taken,
    ) -> Result<(Vec<InstalledMember>, Vec<p4::Update>, Vec<GroupMember>), DataplaneError> {
        let group = &job.group;
        let prog = self.program.clone();
        // The anchor port never gets a watch port, so the group can never be all-inactive.
        let anchor = group
            .members
            .iter()
            .zip(ports)
            .zip(&job.active)
            .filter(|(_, a)| **a)
            .max_by_key(|((m, _), _)| m.weight)
            .map(|((_, p), _)| *p);

        let mut installed_members = Vec::with_capacity(group.members.len());
        let mut member_updates = Vec::new();
        let mut group_members = Vec::new();
        for (i, (m, port)) in group.members.iter().zip(ports).enumerate() {
            let slot = self.slot_for(group.prefix, *port);
            let mut ids = Vec::new();
            if job.active.get(i).copied().unwrap_or(true) {
                let copies = match self.options.form {
                    GroupForm::Weighted => 1,
                    GroupForm::Replicated => m.weight,
                };
                for _ in 0..copies {
                    let id = self
                        .member_ids
                        .take()
                        .ok_or_else(|| exhausted("member ids"))?;
                    taken.members.push(id);
                    ids.push(id);
                    let entity = prog
                        .member(
                            id,
                            *port,
                            macs[i],
                            self.options.router_mac,
                            slot,
                            counters[i],
                        )
                        .map_err(err)?;
                    member_updates.push(update_of(
                        p4::update::Type::Insert,
                        p4::entity::Entity::ActionProfileMember(entity),
                    ));
                    let weight = match self.options.form {
                        GroupForm::Weighted => i32::try_from(m.weight).unwrap_or(i32::MAX),
                        GroupForm::Replicated => 1,
                    };
                    group_members.push(GroupMember {
                        member_id: id,
                        weight,
                        watch_port: (self.options.watch_ports && Some(*port) != anchor)
                            .then_some(*port),
                    });
                }
            }
            installed_members.push(InstalledMember {
                port: *port,
                member_ids: ids,
                counter: counters[i],
                arn_slot: slot,
                active: job.active.get(i).copied().unwrap_or(true),
            });
        }

        Ok((installed_members, member_updates, group_members))
    }

    /// A new profile group id, and the group id: the replaced group's, or a new one.
    fn group_ids_for(
        &mut self,
        old: Option<&Installed>,
        taken: &mut Taken,
    ) -> Result<(u32, u16), DataplaneError> {
        let pg = self
            .profile_groups
            .take()
            .ok_or_else(|| exhausted("profile group ids"))?;
        taken.profile_group = Some(pg);
        let group_id = match old {
            Some(o) => o.group_id,
            None => {
                let g = self
                    .group_ids
                    .take()
                    .ok_or_else(|| exhausted("group ids"))? as u16;
                taken.group_id = Some(g);
                g
            }
        };
        Ok((pg, group_id))
    }

    /// Frees ids a plan took before it failed to build.
    fn release(&mut self, taken: &Taken) {
        for c in &taken.counters {
            self.counters.free(u32::from(*c));
        }
        for id in &taken.members {
            self.member_ids.free(*id);
        }
        if let Some(pg) = taken.profile_group {
            self.profile_groups.free(pg);
        }
        if let Some(g) = taken.group_id {
            self.group_ids.free(u32::from(g));
        }
    }

    /// Deletes a group table entry with its profile group and members, and frees its ids.
    pub(super) async fn drop_profile(&mut self, inst: &Installed) {
        self.drop_buckets(inst.group_id, inst.buckets.as_deref(), &inst.member_entries)
            .await;
        if let Ok(key) = self.program.group_key(inst.group_id) {
            if let Err(e) = self
                .write(vec![update(
                    p4::update::Type::Delete,
                    fare_p4runtime::entities::entity_table(key),
                )])
                .await
            {
                tracing::debug!(error = %e, group = inst.group_id, "group entry not deleted");
            }
        }
        let ids: Vec<u32> = inst
            .members
            .iter()
            .flat_map(|m| m.member_ids.clone())
            .collect();
        self.undo(inst.profile_group, &ids).await;
        for m in &inst.members {
            self.counters.free(u32::from(m.counter));
        }
        self.group_ids.free(u32::from(inst.group_id));
    }

    /// Deletes a profile group and then its members (best effort: a failed insert may have
    /// left some of them behind) and frees their ids.
    pub(super) async fn undo(&mut self, profile_group: u32, member_ids: &[u32]) {
        self.undo_many(&[profile_group], member_ids).await;
    }

    /// Deletes profile groups, then (once they are gone) members; frees their ids.
    pub(super) async fn undo_many(&mut self, profile_groups: &[u32], member_ids: &[u32]) {
        let delete = |key| update_of(p4::update::Type::Delete, key);
        let prog = &self.program;
        let group_deletes: Vec<p4::Update> = profile_groups
            .iter()
            .map(|g| delete(prog.profile_group_key(*g)))
            .collect();
        let member_deletes: Vec<p4::Update> = member_ids
            .iter()
            .map(|id| delete(prog.member_key(*id)))
            .collect();
        for phase in [group_deletes, member_deletes] {
            for chunk in batches(phase) {
                if let Err(e) = self.write(chunk).await {
                    tracing::debug!(error = %e, "cleanup of replaced groups incomplete");
                }
            }
        }
        for g in profile_groups {
            self.profile_groups.free(*g);
        }
        for id in member_ids {
            self.member_ids.free(*id);
        }
    }
}

/// Ids a plan took (freed again when it fails).
#[derive(Default)]
struct Taken {
    counters: Vec<u16>,
    members: Vec<u32>,
    profile_group: Option<u32>,
    group_id: Option<u16>,
}

/// A counter entity with zeroed data (for MODIFY).
trait WithData {
    fn with_data(self) -> p4::Entity;
}

impl WithData for p4::Entity {
    fn with_data(self) -> p4::Entity {
        match self.entity {
            Some(p4::entity::Entity::CounterEntry(c)) => p4::Entity {
                entity: Some(p4::entity::Entity::CounterEntry(p4::CounterEntry {
                    data: Some(p4::CounterData::default()),
                    ..c
                })),
            },
            other => p4::Entity { entity: other },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_bounded_and_keep_order() {
        let v: Vec<usize> = (0..1201).collect();
        let b = batches(v);
        assert_eq!(
            b.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![500, 500, 201]
        );
        assert_eq!(b[1][0], 500);
        assert!(batches(Vec::<u8>::new()).is_empty());
    }

    #[test]
    fn per_update_errors_name_the_failed_updates() {
        use fare_p4runtime::client::{RpcError, UpdateError};
        let e = P4rtError::Rpc {
            op: "Write",
            error: RpcError {
                code: tonic::Code::Unknown,
                message: "write failed".into(),
                updates: vec![
                    UpdateError {
                        index: 1,
                        code: tonic::Code::ResourceExhausted,
                        message: "full".into(),
                    },
                    UpdateError {
                        index: 3,
                        code: tonic::Code::InvalidArgument,
                        message: "bad".into(),
                    },
                    UpdateError {
                        index: 9,
                        code: tonic::Code::InvalidArgument,
                        message: "beyond the batch".into(),
                    },
                ],
            },
        };
        let f = failed_updates(&e, 4);
        assert_eq!(
            f.iter().map(|(i, x, _)| (*i, *x)).collect::<Vec<_>>(),
            vec![(1, true), (3, false)]
        );
        // Without per-update details every update of the request failed.
        let whole = P4rtError::Rpc {
            op: "Write",
            error: RpcError {
                code: tonic::Code::ResourceExhausted,
                message: "no room".into(),
                updates: vec![],
            },
        };
        let f = failed_updates(&whole, 3);
        assert_eq!(
            f.iter().map(|(i, x, _)| (*i, *x)).collect::<Vec<_>>(),
            vec![(0, true), (1, true), (2, true)]
        );
        assert_eq!(failed_updates(&P4rtError::StreamClosed, 2).len(), 2);
    }
}
