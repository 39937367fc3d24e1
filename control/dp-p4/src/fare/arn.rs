//! ARN tables (reception paths, the switch's own addresses, queue monitors, hold time),
//! the queue probes, and packet I/O.
use super::*;
use fare_p4runtime::client::PacketSender;
use program::QueueThresholds;

/// A monitored port as the agent asked for it (kept to write it again after a reconnect).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Monitor {
    pub interface: String,
    pub thresholds: QueueThresholds,
    pub neighbor_router_id: Ipv4Addr,
    pub targets: Vec<(String, MacAddr, Ipv4Addr, Ipv4Addr)>,
}

/// The task sending queue probes; aborted when dropped (a new session, a new monitor, the
/// backend gone).
pub(super) struct ProbeTask(tokio::task::JoinHandle<()>);

impl Drop for ProbeTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A probe's frame: it never leaves the switch (the pipeline drops it after the ARN
/// monitor), so only its size matters: a minimal Ethernet frame, EtherType 0x88b5 (local
/// experimental).
fn probe_frame(router_mac: MacAddr) -> Vec<u8> {
    let mut frame = Vec::with_capacity(60);
    frame.extend_from_slice(&router_mac.0);
    frame.extend_from_slice(&router_mac.0);
    frame.extend_from_slice(&[0x88, 0xb5]);
    frame.resize(60, 0);
    frame
}

/// Every `every`, one probe to each of `ports` (packet-out metadata), until the session's
/// stream is gone.
async fn send_probes(
    sender: PacketSender,
    frame: Vec<u8>,
    ports: Vec<Vec<(u32, Vec<u8>)>>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for meta in &ports {
            if sender.send(frame.clone(), meta.clone()).await.is_err() {
                tracing::debug!("p4: queue probes stopped: the session's stream is closed");
                return;
            }
        }
    }
}

impl P4RuntimeDataplane {
    /// Maps ARNs arriving on `interface` with `path_id` to the members of `prefixes` that
    /// leave through `interface`: such an ARN removes (Types 1, 3) or restores (2, 4) them
    /// in the data plane at once. Rewrites affected installed groups.
    pub async fn map_arn_path(
        &mut self,
        interface: &str,
        path_id: Ipv4Addr,
        prefixes: &[IpNet],
    ) -> Result<u16, DataplaneError> {
        self.desired
            .arn_paths
            .push((interface.to_string(), path_id, prefixes.to_vec()));
        crate::skeleton::ensure_session(self).await?;
        self.map_arn_path_inner(interface, path_id, prefixes).await
    }

    pub(super) async fn map_arn_path_inner(
        &mut self,
        interface: &str,
        path_id: Ipv4Addr,
        prefixes: &[IpNet],
    ) -> Result<u16, DataplaneError> {
        let port = self.port(interface)?;
        let slot = match self.arn_paths.get(&(port, path_id)) {
            Some(s) => *s,
            None => {
                let s = self
                    .slots
                    .take()
                    .ok_or_else(|| super::groups::exhausted("ARN slots"))?
                    as u16;
                let entry = self
                    .program
                    .arn_rx_entry(port, path_id, s, self.options.arn_hold_us())
                    .map_err(err)?;
                self.write_upsert(vec![update(
                    p4::update::Type::Insert,
                    fare_p4runtime::entities::entity_table(entry),
                )])
                .await
                .map_err(err)?;
                self.arn_paths.insert((port, path_id), s);
                s
            }
        };
        for prefix in prefixes {
            self.prefix_slots.insert((*prefix, port), slot);
            if let Some(inst) = self.groups.get(prefix).cloned() {
                let active: Vec<bool> = inst.members.iter().map(|m| m.active).collect();
                self.write_group(&inst.group, &active).await?;
            }
            // DPF color groups of the prefix carry the same slots.
            if let Some(mut colors) = self.colors.remove(prefix) {
                let mut result = Ok(());
                for c in &mut colors {
                    let active: Vec<bool> = c.inst.members.iter().map(|m| m.active).collect();
                    match self
                        .write_profile(&c.inst.group, &active, Some(&c.inst))
                        .await
                    {
                        Ok(i) => c.inst = i,
                        Err(e) => result = Err(e),
                    }
                }
                self.colors.insert(*prefix, colors);
                result?;
            }
        }
        Ok(slot)
    }

    /// Configures ARN generation: when `interface`'s queue reaches `thresholds.high`
    /// packets, an ARN Type 1 with Path ID `neighbor_router_id` goes to every `targets`
    /// port, again every `thresholds.refresh` while it stays at or above `low`; Type 2
    /// below `low`. The port is probed every `refresh` so that a queue drained without
    /// traffic is seen. `targets`: (interface, neighbor MAC, our address, neighbor address).
    pub async fn monitor_port(
        &mut self,
        interface: &str,
        thresholds: QueueThresholds,
        neighbor_router_id: Ipv4Addr,
        targets: &[(String, MacAddr, Ipv4Addr, Ipv4Addr)],
    ) -> Result<(), DataplaneError> {
        let monitor = Monitor {
            interface: interface.to_string(),
            thresholds,
            neighbor_router_id,
            targets: targets.to_vec(),
        };
        self.desired
            .monitors
            .retain(|m| m.interface != monitor.interface);
        self.desired.monitors.push(monitor.clone());
        crate::skeleton::ensure_session(self).await?;
        self.monitor_port_inner(&monitor).await?;
        self.restart_probes();
        Ok(())
    }

    /// (Re)starts the probe task on the current session: every monitored port gets a
    /// probe at the shortest refresh interval of them all.
    pub(super) fn restart_probes(&mut self) {
        self.probes = None;
        let Some(every) = self
            .desired
            .monitors
            .iter()
            .map(|m| m.thresholds.refresh)
            .min()
        else {
            return;
        };
        let mut ports = Vec::new();
        for m in &self.desired.monitors {
            let meta = self
                .port(&m.interface)
                .and_then(|port| self.program.packet_out_metadata(port, true).map_err(err));
            match meta {
                Ok(meta) => ports.push(meta),
                Err(e) => tracing::warn!(interface = %m.interface, "p4: port not probed: {e}"),
            }
        }
        let sender = self.session.client().packet_sender();
        let frame = probe_frame(self.options.router_mac);
        let every = every.max(Duration::from_millis(1));
        tracing::debug!(ports = ports.len(), ?every, "p4: queue probes started");
        self.probes = Some(ProbeTask(tokio::spawn(send_probes(
            sender, frame, ports, every,
        ))));
    }

    /// The switch's own addresses: an ARN sent to one of them is received by the pipeline;
    /// an ARN to any other address is forwarded like any packet. Replaces the earlier set.
    pub async fn set_local_addresses(
        &mut self,
        addresses: &[IpAddr],
    ) -> Result<(), DataplaneError> {
        self.desired.local_addresses = addresses.to_vec();
        crate::skeleton::ensure_session(self).await?;
        self.set_local_addresses_inner(addresses).await
    }

    pub(super) async fn set_local_addresses_inner(
        &mut self,
        addresses: &[IpAddr],
    ) -> Result<(), DataplaneError> {
        let wanted: BTreeSet<IpAddr> = addresses.iter().copied().collect();
        let mut inserts = Vec::new();
        for a in wanted.difference(&self.local_written) {
            let entry = self.program.arn_local_entry(*a).map_err(err)?;
            inserts.push(update(
                p4::update::Type::Insert,
                fare_p4runtime::entities::entity_table(entry),
            ));
        }
        if !inserts.is_empty() {
            self.write_upsert(inserts).await.map_err(err)?;
        }
        let mut deletes = Vec::new();
        for a in self.local_written.difference(&wanted) {
            let entry = self.program.arn_local_entry(*a).map_err(err)?;
            deletes.push(update(
                p4::update::Type::Delete,
                fare_p4runtime::entities::entity_table(entry),
            ));
        }
        if !deletes.is_empty() {
            self.write(deletes).await.map_err(err)?;
        }
        self.local_written = wanted;
        Ok(())
    }

    /// Writes a monitored port's entries: the encapsulation entries and the clone session
    /// it names, then the monitor entry that names the session (separate Writes, in that
    /// order). Entries already there are modified (a replay after a reconnect).
    pub(super) async fn monitor_port_inner(
        &mut self,
        monitor: &Monitor,
    ) -> Result<(), DataplaneError> {
        let Monitor {
            interface,
            thresholds,
            neighbor_router_id,
            targets,
        } = monitor;
        let neighbor_router_id = *neighbor_router_id;
        let port = self.port(interface)?;
        // One clone session per monitored port (ids start at 1; 0 is not a valid session).
        let session = port + 1;
        let mut updates = Vec::new();
        let mut target_ports = Vec::new();
        for (iface, mac, src, dst) in targets {
            let p = self.port(iface)?;
            // The pipeline encapsulates by egress port (one `arn_encap` entry a port) and a
            // clone session takes a port once (BMv2 refuses a duplicate replica, and the
            // whole session with it): one target a port, the first named.
            if target_ports.contains(&p) {
                tracing::debug!(interface = %iface, target = %dst, monitored = %interface, "p4: ARN target skipped: another target already takes this port (one ARN encapsulation per port)");
                continue;
            }
            target_ports.push(p);
            let entry = self
                .program
                .arn_encap_entry(p, *mac, self.options.router_mac, *src, *dst)
                .map_err(err)?;
            updates.push(update(
                p4::update::Type::Insert,
                fare_p4runtime::entities::entity_table(entry),
            ));
        }
        updates.push(update(
            p4::update::Type::Insert,
            self.program.clone_session(session, &target_ports),
        ));
        self.write_upsert(updates).await.map_err(err)?;
        let monitor = self
            .program
            .arn_monitor_entry(port, thresholds, neighbor_router_id, session)
            .map_err(err)?;
        self.write_upsert(vec![update(
            p4::update::Type::Insert,
            fare_p4runtime::entities::entity_table(monitor),
        )])
        .await
        .map_err(err)
    }

    /// Lifetime of a data-plane removal that no Type 2/4 revokes: rewrites every ARN
    /// path entry (the hold travels with the entry; BMv2 refuses register writes).
    pub async fn set_arn_hold(&mut self, hold: Duration) -> Result<(), DataplaneError> {
        self.options.arn_hold = hold;
        crate::skeleton::ensure_session(self).await?;
        self.set_arn_hold_inner().await
    }

    pub(super) async fn set_arn_hold_inner(&mut self) -> Result<(), DataplaneError> {
        let hold_us = self.options.arn_hold_us();
        let mut updates = Vec::new();
        for ((port, path_id), slot) in &self.arn_paths {
            let entry = self
                .program
                .arn_rx_entry(*port, *path_id, *slot, hold_us)
                .map_err(err)?;
            updates.push(update(
                p4::update::Type::Modify,
                fare_p4runtime::entities::entity_table(entry),
            ));
        }
        for chunk in groups::batches(updates) {
            self.write(chunk).await.map_err(err)?;
        }
        Ok(())
    }

    /// Sends a complete Ethernet frame out of `interface` (ARN Types 3/4 on link failure).
    pub async fn packet_out(
        &mut self,
        interface: &str,
        frame: Vec<u8>,
    ) -> Result<(), DataplaneError> {
        let port = self.port(interface)?;
        let meta = self.program.packet_out_metadata(port, false).map_err(err)?;
        crate::skeleton::ensure_session(self).await?;
        self.session
            .client()
            .packet_out(frame, meta)
            .await
            .map_err(err)
    }

    /// Next packet sent to the controller: (arrival interface, reason, frame).
    pub async fn packet_in(
        &mut self,
        limit: Duration,
    ) -> Result<(String, u8, Vec<u8>), DataplaneError> {
        let PacketIn { payload, metadata } =
            self.session.client().packet_in(limit).await.map_err(err)?;
        let (port, reason) = self
            .program
            .packet_in_meta(&metadata)
            .ok_or_else(|| DataplaneError::backend(BACKEND, "packet-in without fare metadata"))?;
        Ok((self.interface_of(port), reason, payload))
    }
}
