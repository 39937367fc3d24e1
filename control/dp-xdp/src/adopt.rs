//! Taking over a running program's state after an agent restart: the groups, routes and
//! per-color groups found in its pinned maps become what this agent has installed.

use super::*;

impl XdpDataplane {
    /// Takes the routes and groups left in the pinned maps by an earlier agent: `v4`
    /// is ROUTES_V4 as `open` read it (for the IPv4 table, before attaching), ROUTES_V6
    /// is read here.
    pub(super) fn adopt(
        &mut self,
        v4: Vec<(ipnet::Ipv4Net, RouteValue)>,
    ) -> Result<(), DataplaneError> {
        let v6 = trie_routes(&self.routes_v6, map_names::ROUTES_V6, |a: [u8; 16], len| {
            ipnet::Ipv6Net::new(a.into(), len).ok()
        })?;
        let routes: Vec<(IpNet, u32, u32)> = v4
            .into_iter()
            .map(|(net, value)| (IpNet::V4(net), value))
            .chain(v6.into_iter().map(|(net, value)| (IpNet::V6(net), value)))
            .map(|(prefix, value)| (prefix, value.group, value.flags))
            .collect();
        // Routes whose group cannot be read are removed: their group id is free for the
        // next install, and the route would then send packets to that group.
        let mut unreadable = Vec::new();
        for (prefix, gid, flags) in routes {
            let Some(row) = self.group_of(gid) else {
                unreadable.push(prefix);
                continue;
            };
            let members: Vec<fc::Member> = (0..u32::from(row.n_members))
                .filter_map(|i| self.member_rows.get(&member_id(gid, i), 0).ok())
                .collect();
            let mut name = |ifindex: u32| {
                fare_netdev::links::ifname(ifindex).unwrap_or_else(|_| format!("ifindex{ifindex}"))
            };
            // The counts of a pinned group may predate this agent's version: recount.
            let _ = self.store_active(gid, members.iter().map(|m| m.state));
            match encode::decode(prefix, &row, &members, &mut name) {
                Some(group) => {
                    self.generation = self.generation.max(row.generation);
                    let colors = self.adopt_colors(gid);
                    // What the adopted table's last change moved is not known.
                    let buckets = encode::bucket_status(&group, &row, None);
                    self.installed.insert(
                        prefix,
                        Installed {
                            gid,
                            group,
                            encoded: Encoded {
                                group: row,
                                members,
                            },
                            colors,
                            flags,
                            buckets,
                        },
                    );
                }
                None => unreadable.push(prefix),
            }
        }
        for prefix in unreadable {
            tracing::warn!(%prefix, "xdp: pinned route's group unreadable, route removed");
            self.delete_route(prefix)?;
        }
        let used: std::collections::BTreeSet<u32> = self
            .installed
            .values()
            .flat_map(|i| std::iter::once(i.gid).chain(i.colors.iter().map(|c| c.gid)))
            .collect();
        self.ids = GroupIds::new(fc::MAX_GROUPS, |g| used.contains(&g));
        Ok(())
    }

    /// The per-color groups an earlier agent left for the route group `gid`.
    pub(super) fn adopt_colors(&self, gid: u32) -> Vec<InstalledColor> {
        let Ok(set) = self.color_sets.get(&gid, 0) else {
            return vec![];
        };
        let n = (set.n as usize).min(fc::MAX_COLORS_PER_ROUTE);
        set.entries[..n]
            .iter()
            .filter(|e| e.group < fc::MAX_GROUPS)
            .filter_map(|e| {
                let row = self.group_of(e.group)?;
                let members = (0..u32::from(row.n_members))
                    .filter_map(|i| self.member_rows.get(&member_id(e.group, i), 0).ok())
                    .collect();
                Some(InstalledColor {
                    color: e.color,
                    gid: e.group,
                    encoded: Encoded {
                        group: row,
                        members,
                    },
                })
            })
            .collect()
    }
}
