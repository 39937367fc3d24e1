//! Builds the data plane backend named by `dataplane.kind`.
//!
//! One `match` arm per backend.

use super::config::{AgentConfig, DataplaneConfig};
use fare_dataplane::chain::Chain;
use fare_dataplane::{Dataplane, DataplaneError, GroupLimits, NullDataplane};
use fare_dp_kernel::KernelDataplane;
use fare_dp_xdp::{XdpDataplane, XdpOptions};

/// The limits the agent reduces every group to: the backend's own (XDP slots, P4Info
/// selector sizes and `dataplane.max_group_size`, kernel nexthop entries), tightened by
/// `fare.max_group_size` when that is set.
pub fn group_limits(config: &AgentConfig, backend: &dyn Dataplane) -> GroupLimits {
    backend
        .limits()
        .min(GroupLimits::size(config.fare.max_group_size.unwrap_or(0)))
}

/// The kernel backend's interfaces (`dataplane.interfaces`, each neighbor's `interface`)
/// exist in this network namespace: routes through a missing one cannot be installed and
/// its session would stay down without a word, so the agent refuses to start.
fn check_interfaces_exist(config: &AgentConfig) -> Result<(), DataplaneError> {
    let DataplaneConfig::Kernel { interfaces } = &config.dataplane else {
        return Ok(());
    };
    let named = interfaces
        .iter()
        .map(|i| (i, "dataplane.interfaces".to_string()))
        .chain(config.neighbors.iter().filter_map(|n| {
            let i = n.interface.as_ref()?;
            Some((i, format!("neighbor {}", n.address)))
        }));
    for (name, whose) in named {
        if fare_netdev::links::ifindex(name).is_err() {
            return Err(DataplaneError::backend(
                "kernel",
                format!("{whose}: interface {name} does not exist in this network namespace"),
            ));
        }
    }
    Ok(())
}

/// Each IPv6 link-local neighbor `address` or `local_address` (fe80::/10) names, with
/// `interface`, the link that is its zone: that interface must exist in this network
/// namespace whatever the data plane, or the session could never be opened (the kernel
/// needs the zone to connect or bind). `--check` cannot know the host; the start does.
pub fn check_link_local_zones(config: &AgentConfig) -> Result<(), String> {
    config
        .neighbors
        .iter()
        .find_map(missing_link_local_zone)
        .map_or(Ok(()), Err)
}

/// Why `n`'s session cannot run here: its address (or local address) is link-local and
/// the interface that scopes it does not exist in this namespace. At start that stops the
/// agent; a reload does not add or change such a neighbor.
pub fn missing_link_local_zone(n: &crate::config::NeighborConfig) -> Option<String> {
    let link_local =
        |a: std::net::IpAddr| matches!(a, std::net::IpAddr::V6(v6) if v6.is_unicast_link_local());
    if !(link_local(n.address) || n.local_address.is_some_and(link_local)) {
        return None;
    }
    let name = n.interface.as_ref()?;
    fare_netdev::links::ifindex(name).is_err().then(|| {
        format!(
            "neighbor {}: interface {name} does not exist in this network namespace; \
             it is the link of the link-local address",
            n.address
        )
    })
}

/// Opens (or re-attaches to) the data plane of this node. Backends must keep any state
/// they find (pinned maps, kernel routes, switch tables) so a restarted agent does not
/// interrupt forwarding; `install` then replaces it make-before-break.
pub async fn open(config: &AgentConfig) -> Result<Box<dyn Dataplane>, DataplaneError> {
    match &config.dataplane {
        DataplaneConfig::None => Ok(Box::new(NullDataplane::default())),
        DataplaneConfig::Kernel { interfaces } => {
            check_interfaces_exist(config)?;
            Ok(Box::new(KernelDataplane::open(interfaces).await?))
        }
        DataplaneConfig::Xdp {
            interfaces,
            pin_name,
            queues,
            egress_spray,
        } => {
            // Pins live under /sys/fs/bpf/fare/<pin name, else name>: a restarted agent
            // with the same one re-attaches to them without a forwarding gap.
            let pins = pin_name.clone().unwrap_or_else(|| config.name.clone());
            let mut options = XdpOptions::new(pins, interfaces.clone());
            options.queues = queues.clone();
            options.egress_spray = egress_spray.clone();
            options.flowlet_gap_us = config.fare.flowlet_gap_us;
            options.arn = config.arn.as_ref().map(|arn| {
                let bgp = crate::arn_task::bgp_neighbors_of(config);
                fare_dp_xdp::arn::ArnFastPath::from_config(arn, &bgp)
            });
            let xdp = XdpDataplane::open(&options)?;
            if egress_spray.is_empty() {
                return Ok(Box::new(xdp));
            }
            // The host's own packets need kernel routes to reach a sprayed egress.
            let kernel = KernelDataplane::open(interfaces).await?;
            Ok(Box::new(Chain::new(xdp).then(Box::new(kernel))))
        }
        DataplaneConfig::P4runtime(p4) if p4.profile == fare_dp_p4::config::P4Profile::Sai => {
            if config.arn.is_some() {
                tracing::warn!(
                    "dataplane.profile sai: SAI-P4 has no ARN tables; ARN runs in the agent \
                     only (a member is removed by rewriting its group)"
                );
            }
            Ok(Box::new(fare_dp_p4::sai::SaiDataplane::open(p4).await?))
        }
        DataplaneConfig::P4runtime(p4) => {
            let mut dp = fare_dp_p4::P4RuntimeDataplane::open(p4).await?;
            dp.set_flowlet_gap(std::time::Duration::from_micros(u64::from(
                config.fare.flowlet_gap_us,
            )));
            if let Some(arn) = &config.arn {
                use fare_dp_p4::arn_setup;
                let bgp = crate::arn_task::bgp_neighbors_of(config);
                let setup = arn_setup::plan(arn, &bgp, &p4.ports);
                let written = arn_setup::apply(&mut dp, &setup).await;
                tracing::info!(
                    written,
                    paths = setup.paths.len(),
                    monitors = setup.monitors.len(),
                    "p4: ARN tables programmed from the arn: block"
                );
            }
            Ok(Box::new(dp))
        }
    }
}
