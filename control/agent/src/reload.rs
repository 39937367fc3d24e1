//! SIGHUP: the agent reads its configuration file again and applies what can change at
//! run time — the `bandwidth_gbps` of its neighbors (added, changed or removed: removed
//! means the interface speed again) — through the same path as `fare set bandwidth`.
//! Every other changed key is logged by name: it takes effect at the next restart.
//! A file that no longer loads is logged and changes nothing.

use super::config::{AgentConfig, NeighborConfig};
use super::{set_bandwidth, AgentContext, BandwidthTarget};
use std::net::IpAddr;
use std::path::PathBuf;
use tracing::{info, warn};

/// What a reload applies and what it leaves for a restart.
#[derive(Debug, Default, PartialEq)]
pub struct Diff {
    /// Neighbors whose bandwidth changed, with the new value (`None`: interface speed).
    pub bandwidths: Vec<(IpAddr, Option<f64>)>,
    /// Other changed keys (`neighbors[10.0.0.1].interface`, `fare`, ...).
    pub restart_needed: Vec<String>,
}

/// Compares the configuration in force with the file's.
pub fn diff(old: &AgentConfig, new: &AgentConfig) -> Diff {
    let mut d = Diff::default();
    let find = |list: &[NeighborConfig], a: IpAddr| list.iter().find(|n| n.address == a).cloned();
    for n in &new.neighbors {
        match find(&old.neighbors, n.address) {
            None => d
                .restart_needed
                .push(format!("neighbors[{}] (added)", n.address)),
            Some(o) => {
                if o.bandwidth_gbps != n.bandwidth_gbps {
                    d.bandwidths.push((n.address, n.bandwidth_gbps));
                }
                let (a, b) = (to_map(&o), to_map(n));
                for (key, value) in &b {
                    if key != "bandwidth_gbps" && a.get(key) != Some(value) {
                        d.restart_needed
                            .push(format!("neighbors[{}].{key}", n.address));
                    }
                }
                for key in a.keys().filter(|k| !b.contains_key(*k)) {
                    d.restart_needed
                        .push(format!("neighbors[{}].{key}", n.address));
                }
            }
        }
    }
    for o in &old.neighbors {
        if find(&new.neighbors, o.address).is_none() {
            d.restart_needed
                .push(format!("neighbors[{}] (removed)", o.address));
        }
    }
    let (a, b) = (to_map(old), to_map(new));
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        if key != "neighbors" && a.get(key) != b.get(key) {
            d.restart_needed.push(key.clone());
        }
    }
    d
}

fn to_map<T: serde::Serialize>(v: &T) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// Starts the task that reloads `path` on every SIGHUP until the agent stops.
pub fn on_sighup(ctx: AgentContext, path: PathBuf) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        // What is in force: the loaded file, with the bandwidths applied since.
        let mut current = (*ctx.config).clone();
        loop {
            tokio::select! {
                _ = ctx.shutdown.cancelled() => return,
                r = hup.recv() => if r.is_none() { return },
            }
            info!(config = %path.display(), "SIGHUP: reloading the configuration");
            crate::systemd::reloading();
            let new = match AgentConfig::load(&path) {
                Ok(c) => c,
                Err(e) => {
                    warn!("SIGHUP: {e}; nothing changed");
                    crate::systemd::reloaded();
                    continue;
                }
            };
            let d = diff(&current, &new);
            for (addr, gbps) in &d.bandwidths {
                match set_bandwidth(&ctx, &BandwidthTarget::Neighbor(*addr), *gbps).await {
                    Ok(_) => {
                        if let Some(n) = current.neighbors.iter_mut().find(|n| n.address == *addr) {
                            n.bandwidth_gbps = *gbps;
                        }
                    }
                    Err(e) => warn!(neighbor = %addr, "SIGHUP: bandwidth not applied: {e}"),
                }
            }
            if !d.restart_needed.is_empty() {
                warn!(
                    "SIGHUP: changed {} (these take effect after a restart)",
                    d.restart_needed.join(", ")
                );
            }
            if d.bandwidths.is_empty() && d.restart_needed.is_empty() {
                info!("SIGHUP: the configuration is unchanged");
            }
            crate::systemd::reloaded();
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> AgentConfig {
        let dir =
            std::env::temp_dir().join(format!("fare-reload-{}-{}", std::process::id(), text.len()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agent.yaml");
        std::fs::write(&path, text).unwrap();
        let c = AgentConfig::load(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        c
    }

    const BASE: &str = "name: l1\nrouter_id: 10.0.0.1\nasn: 65001\n\
        dataplane: {kind: none}\n\
        neighbors:\n\
        - {address: 172.16.0.1, remote_as: 65100, interface: eth1, bandwidth_gbps: 400}\n\
        - {address: 172.16.0.3, remote_as: 65100, interface: eth2}\n";

    #[test]
    fn bandwidth_changes_apply_the_rest_needs_a_restart() {
        let old = config(BASE);
        assert_eq!(diff(&old, &old), Diff::default());
        // 400 -> 300 on one neighbor, none -> 100 on the other: both apply at run time.
        let new = config(
            &BASE
                .replace("bandwidth_gbps: 400", "bandwidth_gbps: 300")
                .replace("interface: eth2}", "interface: eth2, bandwidth_gbps: 100}"),
        );
        let d = diff(&old, &new);
        assert_eq!(
            d.bandwidths,
            [
                ("172.16.0.1".parse().unwrap(), Some(300.0)),
                ("172.16.0.3".parse().unwrap(), Some(100.0))
            ]
        );
        assert!(d.restart_needed.is_empty(), "{:?}", d.restart_needed);
        // Removing the value goes back to the interface speed.
        let d = diff(&new, &old);
        assert_eq!(d.bandwidths[1], ("172.16.0.3".parse().unwrap(), None));
        // A new ASN and another interface are named, not applied.
        let other = config(
            &BASE
                .replace("asn: 65001", "asn: 65002")
                .replace("interface: eth1", "interface: eth9"),
        );
        let d = diff(&old, &other);
        assert!(d.bandwidths.is_empty());
        assert_eq!(d.restart_needed, ["neighbors[172.16.0.1].interface", "asn"]);
    }
}
