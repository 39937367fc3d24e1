//! Writing groups of distinct prefixes in SAI-P4's tables, one phase after another:
//! router interfaces, neighbors, next hops, WCMP groups, routes. Each phase is one Write
//! for all the groups (at most `MAX_BATCH` updates each), sent after the previous one
//! was answered; a group whose update failed in one phase takes no part in the later
//! ones, and the WCMP group of a route that failed is deleted again.

use super::*;

/// A batch on its way through the phases.
struct Batch {
    jobs: Vec<(Group, Vec<bool>)>,
    /// Per job: its members' next hops and their MACs; None once the job failed.
    plans: Vec<Option<Plan>>,
    results: Outcomes,
}

impl Batch {
    /// Job `i` failed in a phase: it takes no part in the later ones.
    fn fail(&mut self, i: usize, why: String) {
        self.plans[i] = None;
        let prefix = self.jobs[i].0.prefix;
        self.results.set(
            i,
            Err(DataplaneError::backend(BACKEND, format!("{prefix}: {why}"))),
        );
    }

    /// Every user of an entity whose update failed fails with `what: why`.
    fn fail_users(&mut self, users: &[usize], what: &str, why: &str) {
        for &i in users {
            self.fail(i, format!("{what}: {why}"));
        }
    }

    fn plans(&self) -> impl Iterator<Item = (usize, &Plan)> {
        self.plans
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.as_ref().map(|p| (i, p)))
    }
}

/// A WCMP group written in phase 4: (job, group id, newly inserted, its entry).
type Written4 = (usize, String, bool, p4::TableEntry);

impl SaiDataplane {
    /// The phases in order; an entity that cannot be built fails every group not yet
    /// decided with its error.
    pub(super) async fn write_phases(
        &mut self,
        jobs: Vec<(Group, Vec<bool>)>,
    ) -> Vec<Result<(), DataplaneError>> {
        let mut b = Batch {
            results: Outcomes::new(BACKEND, jobs.len()),
            plans: Vec::with_capacity(jobs.len()),
            jobs,
        };
        for i in 0..b.jobs.len() {
            match self.plan(&b.jobs[i].0) {
                Ok(plan) => b.plans.push(Some(plan)),
                Err(e) => {
                    b.plans.push(None);
                    b.results.set(i, Err(e));
                }
            }
        }
        let done = async {
            self.write_rifs(&mut b).await?;
            self.write_neighbors(&mut b).await?;
            self.write_nexthops(&mut b).await?;
            let groups = self.write_wcmp_groups(&mut b).await;
            self.write_routes(&mut b, groups).await
        }
        .await;
        match done {
            Ok(()) => b.results.finish(),
            Err(e) => b.results.finish_or(&e.to_string()),
        }
    }

    /// Phase 1: router interfaces, one per new egress port.
    async fn write_rifs(&mut self, b: &mut Batch) -> Result<(), P4rtError> {
        let mut ports: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, (hops, _)) in b.plans() {
            for (port, _) in hops {
                if !self.written.rifs.contains_key(port) {
                    ports.entry(*port).or_default().push(i);
                }
            }
        }
        let mut updates = Vec::new();
        for port in ports.keys() {
            let e = self
                .program
                .rif_entry(&rif_id(*port), *port, self.options.router_mac)?;
            updates.push(update(p4::update::Type::Insert, entity_table(e)));
        }
        let failed = self.write_phase(updates).await;
        for ((port, users), outcome) in ports.iter().zip(failed) {
            match outcome {
                None => {
                    self.written.rifs.insert(*port, rif_id(*port));
                }
                Some(why) => b.fail_users(users, "router interface", &why),
            }
        }
        Ok(())
    }

    /// Phase 2: neighbors: new ones inserted, a known one whose MAC changed modified.
    async fn write_neighbors(&mut self, b: &mut Batch) -> Result<(), P4rtError> {
        let mut neighbors: BTreeMap<Hop, (MacAddr, Vec<usize>)> = BTreeMap::new();
        for (i, (_, macs)) in b.plans() {
            for (hop, mac) in macs {
                if self.written.neighbors.get(hop) != Some(mac) {
                    neighbors
                        .entry(*hop)
                        .or_insert((*mac, Vec::new()))
                        .1
                        .push(i);
                }
            }
        }
        let mut updates = Vec::new();
        for (hop, (mac, _)) in &neighbors {
            let kind = if self.written.neighbors.contains_key(hop) {
                p4::update::Type::Modify
            } else {
                p4::update::Type::Insert
            };
            let e = self.program.neighbor_entry(&rif_id(hop.0), hop.1, *mac)?;
            updates.push(update(kind, entity_table(e)));
        }
        let failed = self.write_phase(updates).await;
        for ((hop, (mac, users)), outcome) in neighbors.iter().zip(failed) {
            match outcome {
                None => {
                    self.written.neighbors.insert(*hop, *mac);
                }
                Some(why) => b.fail_users(users, "neighbor", &why),
            }
        }
        Ok(())
    }

    /// Phase 3: next hops, one per new (port, neighbor).
    async fn write_nexthops(&mut self, b: &mut Batch) -> Result<(), P4rtError> {
        let mut hops: BTreeMap<Hop, Vec<usize>> = BTreeMap::new();
        for (i, (_, macs)) in b.plans() {
            for hop in macs.keys() {
                if !self.written.nexthops.contains_key(hop) {
                    hops.entry(*hop).or_default().push(i);
                }
            }
        }
        let mut updates = Vec::new();
        let mut ids = Vec::new();
        for hop in hops.keys() {
            let id = format!("fare-nh-{}", self.next_nexthop);
            self.next_nexthop += 1;
            let e = self.program.nexthop_entry(&id, &rif_id(hop.0), hop.1)?;
            updates.push(update(p4::update::Type::Insert, entity_table(e)));
            ids.push(id);
        }
        let failed = self.write_phase(updates).await;
        for (((hop, users), id), outcome) in hops.iter().zip(ids).zip(failed) {
            match outcome {
                None => {
                    self.written.nexthops.insert(*hop, id);
                }
                Some(why) => b.fail_users(users, "next hop", &why),
            }
        }
        Ok(())
    }

    /// Phase 4: the WCMP groups: one action per next hop (members to the same next hop merged,
    /// their weights added), inactive members left out; INSERT, or one MODIFY of a
    /// replaced group's action set. Returns the groups written.
    async fn write_wcmp_groups(&mut self, b: &mut Batch) -> Vec<Written4> {
        let mut written = Vec::new();
        let mut updates = Vec::new();
        for i in 0..b.jobs.len() {
            let Some((member_hops, _)) = &b.plans[i] else {
                continue;
            };
            let (group, active) = &b.jobs[i];
            let built = self
                .actions(group, member_hops, active)
                .map_err(|e| e.to_string())
                .and_then(|actions| {
                    let (id, kind) = self.group_id(group.prefix);
                    let e = self.program.wcmp_group_entry(&id, &actions);
                    Ok((id, kind, e.map_err(|e| e.to_string())?))
                });
            match built {
                Ok((id, kind, e)) => {
                    updates.push(update(kind, entity_table(e.clone())));
                    written.push((i, id, kind == p4::update::Type::Insert, e));
                }
                Err(why) => b.fail(i, why),
            }
        }
        let failed = self.write_phase(updates).await;
        let mut routed = Vec::new();
        for (w, outcome) in written.into_iter().zip(failed) {
            match outcome {
                None => routed.push(w),
                Some(why) => b.fail(w.0, format!("WCMP group: {why}")),
            }
        }
        routed
    }

    /// The id of the WCMP group of `prefix`: the installed one's (modified in place),
    /// or a new one (inserted).
    fn group_id(&mut self, prefix: IpNet) -> (String, p4::update::Type) {
        match self.groups.get(&prefix) {
            Some(inst) => (inst.id.clone(), p4::update::Type::Modify),
            None => {
                let id = format!("fare-g-{}", self.next_group);
                self.next_group += 1;
                (id, p4::update::Type::Insert)
            }
        }
    }

    /// Phase 5: routes, for new groups only (a replaced group keeps its id); the groups of
    /// routes that failed are deleted again; the rest are installed.
    async fn write_routes(
        &mut self,
        b: &mut Batch,
        routed: Vec<Written4>,
    ) -> Result<(), P4rtError> {
        let mut updates = Vec::new();
        let mut new_routes = Vec::new();
        for (n, (i, id, new, _)) in routed.iter().enumerate() {
            if *new {
                let e = self.program.route_entry(VRF, b.jobs[*i].0.prefix, id)?;
                updates.push(update(p4::update::Type::Insert, entity_table(e)));
                new_routes.push(n);
            }
        }
        let failed = self.write_phase(updates).await;
        let mut unrouted = BTreeSet::new();
        for (n, outcome) in new_routes.into_iter().zip(failed) {
            if let Some(why) = outcome {
                b.fail(routed[n].0, format!("route: {why}"));
                unrouted.insert(n);
            }
        }
        let undo: Vec<p4::Update> = unrouted
            .iter()
            .map(|n| {
                update(
                    p4::update::Type::Delete,
                    entity_table(key_of(&routed[*n].3)),
                )
            })
            .collect();
        for outcome in self.write_phase(undo).await.into_iter().flatten() {
            tracing::warn!(error = %outcome, "sai: WCMP group of a failed route not deleted");
        }
        for (n, (i, id, _, _)) in routed.into_iter().enumerate() {
            let Some((member_hops, _)) = b.plans[i].take() else {
                continue;
            };
            if unrouted.contains(&n) {
                continue;
            }
            let (group, active) = &b.jobs[i];
            self.groups.insert(
                group.prefix,
                Installed {
                    group: group.clone(),
                    id,
                    hops: member_hops,
                    active: active.clone(),
                },
            );
            b.results.set(i, Ok(()));
            tracing::debug!(prefix = %group.prefix, "sai: group written");
        }
        Ok(())
    }
}
