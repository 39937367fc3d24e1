//! DPF: the per-color groups of a route, their `color_group` and `group_fallback` entries.
use super::*;

impl P4RuntimeDataplane {
    /// Writes the per-color groups of `group.prefix` (whose route group is installed),
    /// their `color_group` and `group_fallback` entries, and deletes colors that are gone.
    pub(super) async fn write_colors(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError> {
        let prefix = group.prefix;
        let route_gid = self
            .groups
            .get(&prefix)
            .map(|i| i.group_id)
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        let old: Vec<InstalledColor> = self.colors.remove(&prefix).unwrap_or_default();
        let (new, mut result) = self.write_color_groups(group, colors, &old).await;
        let mut updates = self.color_entries(route_gid, &old, &new)?;
        updates.extend(self.fallback_entries(prefix, route_gid, &old, &new)?);
        if !updates.is_empty() {
            if let Err(e) = self.write(updates).await {
                result = Err(err(e));
            }
        }
        // Colors that are gone: their entries are already deleted above.
        for o in old {
            if !new.iter().any(|n| n.color == o.color) {
                self.drop_profile(&o.inst).await;
            }
        }
        if !new.is_empty() {
            self.colors.insert(prefix, new);
        }
        result
    }

    /// The per-color groups, each written make-before-break unless the installed one
    /// forwards the same way; a color that fails is left out (the last error returned).
    async fn write_color_groups(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
        old: &[InstalledColor],
    ) -> (Vec<InstalledColor>, Result<(), DataplaneError>) {
        let prefix = group.prefix;
        let mut new: Vec<InstalledColor> = Vec::with_capacity(colors.len());
        let mut result = Ok(());
        for c in colors {
            if c.members.is_empty() || new.iter().any(|n| n.color == c.color) {
                continue;
            }
            let as_group = Group {
                prefix,
                mode: group.mode,
                members: c.members.clone(),
            };
            let resolved = fare_dataplane::neighbors::fill_macs(&as_group, BACKEND).await;
            let cg = match resolved {
                Ok(r) => r.unwrap_or(as_group),
                Err(e) => {
                    result = Err(e);
                    continue;
                }
            };
            let prev = old.iter().find(|o| o.color == c.color).map(|o| &o.inst);
            let inst = match prev {
                Some(p)
                    if skeleton::same_forwarding(&p.group, &cg, skeleton::NextHop::NotWritten)
                        && p.members.iter().all(|m| m.active) =>
                {
                    Installed {
                        group: cg,
                        ..p.clone()
                    }
                }
                _ => {
                    let active = vec![true; cg.members.len()];
                    match self.write_profile(&cg, &active, prev).await {
                        Ok(i) => i,
                        Err(e) => {
                            result = Err(e);
                            continue;
                        }
                    }
                }
            };
            new.push(InstalledColor {
                color: c.color,
                active: c.active,
                inst,
            });
        }
        (new, result)
    }

    /// `color_group`: one entry per active color (inserted, repointed, or deleted when the
    /// color went inactive or away).
    fn color_entries(
        &self,
        route_gid: u16,
        old: &[InstalledColor],
        new: &[InstalledColor],
    ) -> Result<Vec<p4::Update>, DataplaneError> {
        let d = &self.program.dpf;
        let mut updates = Vec::new();
        for n in new {
            let was = old.iter().find(|o| o.color == n.color);
            let was_active = was.is_some_and(|o| o.active);
            let same_gid = was.is_some_and(|o| o.inst.group_id == n.inst.group_id);
            let entry = fare_p4runtime::entities::entity_table(
                d.color_entry(route_gid, n.color, Some(n.inst.group_id))
                    .map_err(err)?,
            );
            match (n.active, was_active) {
                (true, false) => updates.push(update(p4::update::Type::Insert, entry)),
                (true, true) if !same_gid => updates.push(update(p4::update::Type::Modify, entry)),
                (false, true) => updates.push(update(
                    p4::update::Type::Delete,
                    fare_p4runtime::entities::entity_table(
                        d.color_entry(route_gid, n.color, None).map_err(err)?,
                    ),
                )),
                _ => {}
            }
        }
        for o in old.iter().filter(|o| o.active) {
            if !new.iter().any(|n| n.color == o.color) {
                updates.push(update(
                    p4::update::Type::Delete,
                    fare_p4runtime::entities::entity_table(
                        d.color_entry(route_gid, o.color, None).map_err(err)?,
                    ),
                ));
            }
        }
        Ok(updates)
    }

    /// `group_fallback`: the route's group -> its first backup color; an active color ->
    /// the route's group when that has other members, else the first backup color.
    /// Records what it asks for in `self.fallbacks`.
    fn fallback_entries(
        &mut self,
        prefix: IpNet,
        route_gid: u16,
        old: &[InstalledColor],
        new: &[InstalledColor],
    ) -> Result<Vec<p4::Update>, DataplaneError> {
        let d = self.program.dpf.clone();
        let mut updates = Vec::new();
        let backup = new.iter().find(|n| !n.active).map(|n| n.inst.group_id);
        let route_members: Vec<(String, Option<MacAddr>)> = self
            .groups
            .get(&prefix)
            .map(|i| {
                i.group
                    .members
                    .iter()
                    .map(|m| (m.interface.clone(), m.neighbor_mac))
                    .collect()
            })
            .unwrap_or_default();
        let mut wanted: BTreeMap<u16, u16> = BTreeMap::new();
        if let Some(b) = backup {
            wanted.insert(route_gid, b);
        }
        for n in new.iter().filter(|n| n.active) {
            let others = route_members.iter().any(|(i, mac)| {
                !n.inst
                    .group
                    .members
                    .iter()
                    .any(|m| &m.interface == i && m.neighbor_mac == *mac)
            });
            let target = if others { Some(route_gid) } else { backup };
            if let Some(t) = target {
                wanted.insert(n.inst.group_id, t);
            }
        }
        let mine: BTreeSet<u16> = std::iter::once(route_gid)
            .chain(old.iter().map(|o| o.inst.group_id))
            .chain(new.iter().map(|n| n.inst.group_id))
            .collect();
        for gid in &mine {
            let have = self.fallbacks.get(gid).copied();
            let want = wanted.get(gid).copied();
            let kind = match (have, want) {
                (None, Some(_)) => p4::update::Type::Insert,
                (Some(h), Some(w)) if h != w => p4::update::Type::Modify,
                (Some(_), None) => p4::update::Type::Delete,
                _ => continue,
            };
            updates.push(update(
                kind,
                fare_p4runtime::entities::entity_table(d.fallback_entry(*gid, want).map_err(err)?),
            ));
            match want {
                Some(w) => self.fallbacks.insert(*gid, w),
                None => self.fallbacks.remove(gid),
            };
        }
        Ok(updates)
    }
}
