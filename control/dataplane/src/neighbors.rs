//! Next-hop MACs for the backends that rewrite the destination MAC themselves (XDP, P4):
//! a member that gives only `next_hop` (a BGP route) gets its MAC from the kernel's
//! neighbor table (`fare_netdev::neighbor`).

use crate::{DataplaneError, Group, MacAddr};
use fare_netdev::neighbor;

/// `group` with the MAC of every member that gives only `next_hop` filled in from the
/// kernel's neighbor table (None when every member already has one). `backend` names the
/// data plane in errors.
pub async fn fill_macs(
    group: &Group,
    backend: &'static str,
) -> Result<Option<Group>, DataplaneError> {
    if group
        .members
        .iter()
        .all(|m| m.neighbor_mac.is_some() || m.next_hop.is_none())
    {
        return Ok(None);
    }
    let mut out = group.clone();
    for m in out.members.iter_mut() {
        let (None, Some(addr)) = (m.neighbor_mac, m.next_hop) else {
            continue;
        };
        let ifindex =
            fare_netdev::links::ifindex(&m.interface).map_err(|source| DataplaneError::Io {
                backend,
                what: format!("interface {}", m.interface),
                source,
            })?;
        let mac = neighbor::resolve(&m.interface, ifindex, addr, neighbor::RESOLVE_TIMEOUT)
            .await
            .map_err(|e| DataplaneError::InvalidGroup {
                prefix: group.prefix,
                why: e.to_string(),
            })?;
        tracing::debug!(next_hop = %addr, interface = %m.interface, mac = %MacAddr(mac), "{backend}: next hop resolved");
        m.neighbor_mac = Some(MacAddr(mac));
    }
    Ok(Some(out))
}
