//! Attaching the programs: XDP on the fabric ports (pinned links, so a restarted agent
//! keeps the running program), TC egress spray, and the egress virtual queues' settings.

use super::*;

/// Writes the configured egress virtual queues (their state starts empty) and removes
/// queues of ports no longer configured; returns the ports with a queue.
pub(super) fn configure_queues(
    mut q: queues::Queues,
    specs: &[queues::QueueSpec],
) -> Result<Vec<u32>, DataplaneError> {
    let mut wanted = Vec::new();
    for spec in specs {
        let ifindex = fare_netdev::links::ifindex(&spec.interface)
            .map_err(|e| err(format!("queue on {}: {e}", spec.interface)))?;
        q.configure(ifindex, spec.rate_bytes_per_s(), spec.limit_bytes)
            .map_err(|e| err(format!("queue on {}: {e:#}", spec.interface)))?;
        tracing::info!(interface = %spec.interface, rate_mbps = spec.rate_mbps, limit_bytes = spec.limit_bytes, "xdp: egress virtual queue");
        wanted.push(ifindex);
    }
    for ifindex in q.ifindexes() {
        if !wanted.contains(&ifindex) {
            let _ = q.configure(ifindex, 0, 0);
        }
    }
    Ok(wanted)
}

/// Attaches `program` to `ifname`: through the pinned link when there is one (atomic
/// replacement of the earlier program, no gap), else with a new link that is pinned.
pub(super) fn attach_program(
    program: &mut Xdp,
    pins: &PinDir,
    ifname: &str,
) -> Result<FdLink, DataplaneError> {
    let path = pins.link(ifname);
    if path.exists() {
        let replaced = PinnedLink::from_pin(&path)
            .map_err(|e| e.to_string())
            .and_then(|pinned| XdpLink::try_from(FdLink::from(pinned)).map_err(|e| e.to_string()))
            .and_then(|link| program.attach_to_link(link).map_err(|e| e.to_string()))
            .and_then(|id| program.take_link(id).map_err(|e| e.to_string()))
            .and_then(|link| FdLink::try_from(link).map_err(|e| e.to_string()));
        match replaced {
            Ok(link) => {
                tracing::info!(
                    interface = ifname,
                    "xdp: replaced the program in the pinned link"
                );
                return Ok(link);
            }
            Err(e) => {
                tracing::warn!(
                    interface = ifname,
                    "xdp: pinned link unusable ({e}), attaching anew"
                );
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let ifindex = fare_netdev::links::ifindex(ifname).map_err(|source| DataplaneError::Io {
        backend: BACKEND,
        what: format!("interface {ifname}"),
        source,
    })?;
    let id = program
        .attach_to_if_index(ifindex, XdpMode::Default)
        .map_err(|e| err(format!("attaching to {ifname}: {e}")))?;
    let link = program
        .take_link(id)
        .map_err(|e| err(format!("attaching to {ifname}: {e}")))?;
    let link = FdLink::try_from(link).map_err(|e| {
        err(format!(
            "attaching to {ifname}: no bpf_link (kernel too old to pin XDP links): {e}"
        ))
    })?;
    let pinned = link
        .pin(&path)
        .map_err(|e| err(format!("pinning {}: {e}", path.display())))?;
    Ok(FdLink::from(pinned))
}

/// Attaches the TC spray program to `ifname`'s egress (TCX link, pinned as
/// `links/tc-<ifname>`), replacing the program in an existing pinned link atomically.
pub(super) fn attach_tc_egress(
    program: &mut SchedClassifier,
    pins: &PinDir,
    ifname: &str,
) -> Result<FdLink, DataplaneError> {
    let path = pins.link(&format!("tc-{ifname}"));
    if path.exists() {
        let replaced = PinnedLink::from_pin(&path)
            .map_err(|e| e.to_string())
            .and_then(|p| SchedClassifierLink::try_from(FdLink::from(p)).map_err(|e| e.to_string()))
            .and_then(|link| program.attach_to_link(link).map_err(|e| e.to_string()))
            .and_then(|id| program.take_link(id).map_err(|e| e.to_string()))
            .and_then(|link| FdLink::try_from(link).map_err(|e| e.to_string()));
        match replaced {
            Ok(link) => return Ok(link),
            Err(e) => {
                tracing::warn!(
                    interface = ifname,
                    "xdp: pinned TC link unusable ({e}), attaching anew"
                );
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let id = program
        .attach(ifname, TcAttachType::Egress)
        .map_err(|e| err(format!("TC egress on {ifname}: {e}")))?;
    let link = program
        .take_link(id)
        .map_err(|e| err(format!("TC egress on {ifname}: {e}")))?;
    let link = FdLink::try_from(link).map_err(|e| {
        err(format!(
            "TC egress on {ifname}: no TCX link (kernel before 6.6 cannot pin it): {e}"
        ))
    })?;
    let pinned = link
        .pin(&path)
        .map_err(|e| err(format!("pinning {}: {e}", path.display())))?;
    tracing::info!(interface = ifname, "xdp: TC spray program on egress");
    Ok(FdLink::from(pinned))
}
