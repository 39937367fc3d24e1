//! Adoption: a switch that already runs this pipeline may hold an earlier fare's entries
//! (a restarted agent, a lost connection): they are read back and adopted, so that
//! re-installing the same group writes nothing and forwarding is not interrupted.
//! Router interfaces, neighbors, next hops and WCMP groups are fare's by their ids
//! (`fare-`), routes by fare's VRF. What cannot be adopted (a route whose group is not
//! fare's or names a port missing from `ports`, a group without a route, an entry that
//! does not parse) is deleted, routes first. The switch-wide entries are written where
//! missing or different.

use super::*;

/// Entries not adopted, by table, deleted in dependency order at the end.
#[derive(Default)]
struct Stale {
    routes: Vec<p4::TableEntry>,
    groups: Vec<p4::TableEntry>,
    nexthops: Vec<p4::TableEntry>,
    neighbors: Vec<p4::TableEntry>,
    rifs: Vec<p4::TableEntry>,
}

/// WCMP groups read back: id -> ([(next hop, weight)], the entry).
type Wcmp = BTreeMap<String, (Vec<(Hop, i32)>, p4::TableEntry)>;

fn rows(found: Vec<p4::Entity>) -> Vec<p4::TableEntry> {
    found
        .into_iter()
        .filter_map(|e| match e.entity {
            Some(p4::entity::Entity::TableEntry(t)) => Some(t),
            _ => None,
        })
        .collect()
}

/// The id in field `f` of `e` when it is one of fare's of `kind` (`fare-rif-`, ...).
fn ours(f: SaiField, e: &p4::TableEntry, kind: &str) -> Option<String> {
    exact_of(e, f.id)
        .and_then(|b| read_id(f, b))
        .filter(|id| id.starts_with(kind))
}

fn deletes(entries: &[p4::TableEntry]) -> Vec<p4::Update> {
    entries
        .iter()
        .map(|e| update(p4::update::Type::Delete, entity_table(key_of(e))))
        .collect()
}

impl SaiDataplane {
    /// Every row of `table`.
    async fn read_rows(&mut self, table: u32) -> Result<Vec<p4::TableEntry>, P4rtError> {
        let read = fare_p4runtime::entities::whole_table(table);
        Ok(rows(self.session.client().read(vec![read]).await?))
    }

    pub(super) async fn adopt(&mut self) -> Result<(), P4rtError> {
        let mut stale = Stale::default();
        let rif_port = self.adopt_rifs(&mut stale).await?;
        self.adopt_neighbors(&rif_port, &mut stale).await?;
        let nexthop_hop = self.adopt_nexthops(&rif_port, &mut stale).await?;
        let mut wcmp = self.read_wcmp_groups(&nexthop_hop, &mut stale).await?;
        self.adopt_routes(&mut wcmp, &mut stale).await?;
        stale.groups.extend(wcmp.into_values().map(|(_, e)| e));
        self.delete_stale(stale).await?;
        self.write_base_where_missing().await
    }

    /// Router interfaces: id -> port. A router MAC changed since: the router interfaces
    /// are modified in place.
    async fn adopt_rifs(&mut self, stale: &mut Stale) -> Result<BTreeMap<String, u32>, P4rtError> {
        let p = self.program.clone();
        let mut rif_port = BTreeMap::new();
        let mut fix = Vec::new();
        for e in self.read_rows(p.rif).await? {
            let Some(id) = ours(p.rif_id, &e, "fare-rif-") else {
                continue;
            };
            let port = param_bytes(&e, p.set_port_and_src_mac, p.rif_port.id)
                .and_then(|b| read_number(p.rif_port, b))
                .and_then(|v| u32::try_from(v).ok())
                .filter(|port| rif_id(*port) == id);
            let Some(port) = port else {
                stale.rifs.push(e);
                continue;
            };
            let want = p.rif_entry(&id, port, self.options.router_mac)?;
            if canon(&e) != canon(&want) {
                fix.push(update(p4::update::Type::Modify, entity_table(want)));
            }
            rif_port.insert(id.clone(), port);
            self.written.rifs.insert(port, id);
        }
        self.write(fix).await?;
        Ok(rif_port)
    }

    /// Neighbors: (port, neighbor id) -> MAC.
    async fn adopt_neighbors(
        &mut self,
        rif_port: &BTreeMap<String, u32>,
        stale: &mut Stale,
    ) -> Result<(), P4rtError> {
        let p = self.program.clone();
        for e in self.read_rows(p.neighbor).await? {
            let Some(rif) = ours(p.neighbor_rif, &e, "fare-rif-") else {
                continue;
            };
            let nid = exact_of(&e, p.neighbor_id.id).map(|b| Ipv6Addr::from(value_of(b)));
            let mac = param_bytes(&e, p.set_dst_mac, p.set_dst_mac_mac.id).map(mac_of);
            match (rif_port.get(&rif), nid, mac) {
                (Some(port), Some(nid), Some(mac)) => {
                    self.written.neighbors.insert((*port, nid), mac);
                }
                _ => stale.neighbors.push(e),
            }
        }
        Ok(())
    }

    /// Next hops: id -> (port, neighbor id).
    async fn adopt_nexthops(
        &mut self,
        rif_port: &BTreeMap<String, u32>,
        stale: &mut Stale,
    ) -> Result<BTreeMap<String, Hop>, P4rtError> {
        let p = self.program.clone();
        let mut nexthop_hop = BTreeMap::new();
        for e in self.read_rows(p.nexthop).await? {
            let Some(id) = ours(p.nexthop_id, &e, "fare-nh-") else {
                continue;
            };
            let rif = param_bytes(&e, p.set_ip_nexthop, p.set_ip_nexthop_rif.id)
                .and_then(|b| read_id(p.set_ip_nexthop_rif, b));
            let nid = param_bytes(&e, p.set_ip_nexthop, p.set_ip_nexthop_neighbor.id)
                .map(|b| Ipv6Addr::from(value_of(b)));
            let hop = match (rif.and_then(|r| rif_port.get(&r).copied()), nid) {
                (Some(port), Some(nid)) if self.written.neighbors.contains_key(&(port, nid)) => {
                    (port, nid)
                }
                _ => {
                    stale.nexthops.push(e);
                    continue;
                }
            };
            if let Some(n) = number_after(&id, "fare-nh-") {
                self.next_nexthop = self.next_nexthop.max(n + 1);
            }
            nexthop_hop.insert(id.clone(), hop);
            self.written.nexthops.insert(hop, id);
        }
        Ok(nexthop_hop)
    }

    /// WCMP groups: id -> [(next hop, weight)]; one naming a next hop not adopted is stale.
    async fn read_wcmp_groups(
        &mut self,
        nexthop_hop: &BTreeMap<String, Hop>,
        stale: &mut Stale,
    ) -> Result<Wcmp, P4rtError> {
        let p = self.program.clone();
        let mut wcmp = Wcmp::new();
        for e in self.read_rows(p.wcmp_group).await? {
            let Some(id) = ours(p.wcmp_group_id, &e, "fare-g-") else {
                continue;
            };
            if let Some(n) = number_after(&id, "fare-g-") {
                self.next_group = self.next_group.max(n + 1);
            }
            let set = match e.action.as_ref().and_then(|a| a.r#type.as_ref()) {
                Some(p4::table_action::Type::ActionProfileActionSet(set)) => set.clone(),
                _ => {
                    stale.groups.push(e);
                    continue;
                }
            };
            let actions: Option<Vec<(Hop, i32)>> = set
                .action_profile_actions
                .iter()
                .map(|a| {
                    let act = a.action.as_ref()?;
                    let nh = act
                        .params
                        .iter()
                        .find(|x| x.param_id == p.set_nexthop_id_nexthop.id)
                        .and_then(|x| read_id(p.set_nexthop_id_nexthop, &x.value))?;
                    Some((*nexthop_hop.get(&nh)?, a.weight))
                })
                .collect();
            match actions {
                Some(actions) if !actions.is_empty() => {
                    wcmp.insert(id, (actions, e));
                }
                _ => stale.groups.push(e),
            }
        }
        Ok(wcmp)
    }

    /// Routes in fare's VRF: each one whose group was read back becomes an installed
    /// group (taken out of `wcmp`; what is left there has no route).
    async fn adopt_routes(&mut self, wcmp: &mut Wcmp, stale: &mut Stale) -> Result<(), P4rtError> {
        let p = self.program.clone();
        let mut routed = Vec::new();
        for table in [&p.ipv4, &p.ipv6] {
            for e in self.read_rows(table.table).await? {
                let vrf = exact_of(&e, table.vrf.id).and_then(|b| read_id(table.vrf, b));
                if vrf.as_deref() != Some(VRF) {
                    continue;
                }
                let prefix = route_prefix(&e, table);
                let gid = param_bytes(&e, p.set_wcmp_group_id, p.set_wcmp_group_id_group.id)
                    .and_then(|b| read_id(p.set_wcmp_group_id_group, b));
                let adopted = match (prefix, gid) {
                    (Some(prefix), Some(gid)) => wcmp
                        .get(&gid)
                        .and_then(|(actions, _)| self.adopted_group(prefix, actions))
                        .map(|(group, hops)| (prefix, gid, group, hops)),
                    _ => None,
                };
                let Some((prefix, gid, group, hops)) = adopted else {
                    stale.routes.push(e);
                    continue;
                };
                let active = vec![true; group.members.len()];
                routed.push(gid.clone());
                self.groups.insert(
                    prefix,
                    Installed {
                        group,
                        id: gid,
                        hops,
                        active,
                    },
                );
            }
        }
        for gid in routed {
            wcmp.remove(&gid);
        }
        Ok(())
    }

    /// Deletes what was not adopted: routes, groups, then (unused) next hops, neighbors
    /// and router interfaces.
    async fn delete_stale(&mut self, stale: Stale) -> Result<(), P4rtError> {
        let dropped = stale.routes.len()
            + stale.groups.len()
            + stale.nexthops.len()
            + stale.neighbors.len()
            + stale.rifs.len();
        self.write(deletes(&stale.routes)).await?;
        self.write(deletes(&stale.groups)).await?;
        self.collect().await?;
        for entries in [&stale.nexthops, &stale.neighbors, &stale.rifs] {
            self.write(deletes(entries)).await?;
        }
        tracing::info!(
            groups = self.groups.len(),
            dropped,
            "sai: an earlier fare's entries adopted"
        );
        Ok(())
    }

    /// The switch-wide entries: written where missing or different (the first two, then
    /// the one that refers to them).
    async fn write_base_where_missing(&mut self) -> Result<(), P4rtError> {
        let base = self.base_entries()?;
        let mut upserts = Vec::with_capacity(base.len());
        for e in &base {
            let found = self.read_rows(e.table_id).await?;
            let present = found
                .into_iter()
                .find(|x| canon(&key_of(x)) == canon(&key_of(e)));
            upserts.push(match present {
                None => Some(update(p4::update::Type::Insert, entity_table(e.clone()))),
                Some(x) if canon(&x) != canon(e) => {
                    Some(update(p4::update::Type::Modify, entity_table(e.clone())))
                }
                Some(_) => None,
            });
        }
        let second: Vec<p4::Update> = upserts.drain(2.min(upserts.len())..).flatten().collect();
        let first: Vec<p4::Update> = upserts.into_iter().flatten().collect();
        self.write(first).await?;
        self.write(second).await
    }
}
