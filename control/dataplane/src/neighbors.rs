//! Next-hop MACs for the backends that rewrite the destination MAC themselves (XDP, P4):
//! a member that gives only `next_hop` (a BGP route) gets its MAC from the kernel's
//! neighbor table (`fare_netdev::neighbor`).

use crate::{DataplaneError, Group, MacAddr};
use fare_netdev::host::{Host, Kernel};
use fare_netdev::neighbor;

/// `group` with the MAC of every member that gives only `next_hop` filled in from the
/// kernel's neighbor table (None when every member already has one). `backend` names the
/// data plane in errors.
pub async fn fill_macs(
    group: &Group,
    backend: &'static str,
) -> Result<Option<Group>, DataplaneError> {
    fill_macs_from(&Kernel, group, backend).await
}

/// [`fill_macs`] asking `host`.
pub async fn fill_macs_from(
    host: &dyn Host,
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
        let ifindex = host
            .ifindex(&m.interface)
            .map_err(|source| DataplaneError::Io {
                backend,
                what: format!("interface {}", m.interface),
                source,
            })?;
        let mac = host
            .resolve(&m.interface, ifindex, addr, neighbor::RESOLVE_TIMEOUT)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GroupMode, Member};
    use fare_netdev::host::fake::FakeHost;

    fn member(interface: &str, next_hop: &str, mac: Option<u8>) -> Member {
        Member {
            via: next_hop.into(),
            interface: interface.into(),
            next_hop: Some(next_hop.parse().unwrap()),
            neighbor_mac: mac.map(|m| MacAddr([2, 0, 0, 0, 0, m])),
            weight: 1,
            bandwidth_gbps: 0.0,
        }
    }

    fn group(members: Vec<Member>) -> Group {
        Group {
            prefix: "10.9.0.0/16".parse().unwrap(),
            mode: GroupMode::Flow,
            members,
        }
    }

    /// Only members without a MAC are asked about, each on its own interface; a group
    /// that needs nothing is answered without asking.
    #[tokio::test]
    async fn asks_only_for_members_without_a_mac() {
        let host = FakeHost::default()
            .interface("e1", 4)
            .interface("e2", 5)
            .neighbor(5, "10.1.2.2".parse().unwrap(), [2, 0, 0, 0, 0, 0x22]);
        let g = group(vec![
            member("e1", "10.1.1.2", Some(0x11)),
            member("e2", "10.1.2.2", None),
        ]);
        let filled = fill_macs_from(&host, &g, "test").await.unwrap().unwrap();
        assert_eq!(
            filled.members[0].neighbor_mac,
            Some(MacAddr([2, 0, 0, 0, 0, 0x11]))
        );
        assert_eq!(
            filled.members[1].neighbor_mac,
            Some(MacAddr([2, 0, 0, 0, 0, 0x22]))
        );
        assert_eq!(host.asked.lock().unwrap().len(), 1);
        assert_eq!(fill_macs_from(&host, &filled, "test").await.unwrap(), None);
        assert_eq!(host.asked.lock().unwrap().len(), 1);
    }

    /// An unresolved next hop refuses the group, naming its prefix; a missing interface
    /// is an I/O error naming the interface.
    #[tokio::test]
    async fn unresolved_and_missing_are_errors() {
        let host = FakeHost::default().interface("e1", 4);
        let e = fill_macs_from(&host, &group(vec![member("e1", "10.1.1.2", None)]), "test")
            .await
            .unwrap_err();
        assert!(
            matches!(e, DataplaneError::InvalidGroup { prefix, .. } if prefix.to_string() == "10.9.0.0/16"),
            "{e}"
        );
        let e = fill_macs_from(&host, &group(vec![member("e9", "10.1.1.2", None)]), "test")
            .await
            .unwrap_err();
        assert!(
            matches!(&e, DataplaneError::Io { what, .. } if what == "interface e9"),
            "{e}"
        );
    }
}
