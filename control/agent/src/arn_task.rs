//! ARN inside `fare agent` (the `arn:` block): the receiver on the agent's data plane, and
//! the queue/link monitor with its sender.
//!
//! - Receiver: UDP `arn.udp_port` (IPv4, and IPv6 when available); accepted senders are
//!   `arn.neighbors` plus every BGP neighbor that names an interface. Type 1/3 switch off the
//!   members toward the sender (`DataplaneHandle::set_member_active`), Type 2/4 or the hold
//!   timer switch them on again. After every group install the data plane task keeps them
//!   off (see `agent::dataplane_task`) and the receiver reconciles (drops removals of paths
//!   the new groups no longer have).
//! - Monitor (`arn.monitor`): a thread samples the watched interfaces' qdisc backlog and link
//!   state; its ARNs go to the interface's `notify` list, else `arn.notify`, else every ARN/BGP
//!   neighbor that is not on the watched interface itself (the node across the affected link
//!   must not take itself out of its own paths).
//! - State for `fare show arn`: [`ArnStatus`](crate::arn_status::ArnStatus) in the agent's
//!   shared state.

use crate::arn_status::ArnStatus;
use crate::dataplane_task::DataplaneHandle;
use crate::protocol_error::{ProtocolError, ProtocolResult};
use crate::AgentContext;
use async_trait::async_trait;
use fare_arn::config::ArnNeighbor;
use fare_arn::monitor::{self, MonitorEvent};
use fare_arn::receiver::{self, ControlError, MemberControl, Receiver};
use fare_arn::transport::ArnSocket;
use fare_dataplane::GroupStatus;
use fare_model::forwarding::MemberRef;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use tracing::info;

impl From<crate::dataplane_task::HandleError> for ControlError {
    fn from(e: crate::dataplane_task::HandleError) -> Self {
        match e {
            crate::dataplane_task::HandleError::Dataplane(e) => e.into(),
            e => ControlError::Failed(e.to_string()),
        }
    }
}

#[async_trait]
impl MemberControl for DataplaneHandle {
    async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError> {
        DataplaneHandle::groups(self)
            .await
            .map_err(ControlError::from)
    }
    async fn set_member_active(
        &mut self,
        member: MemberRef<'_>,
        active: bool,
    ) -> Result<(), ControlError> {
        DataplaneHandle::set_member_active_via(self, member, active)
            .await
            .map_err(ControlError::from)
    }
    async fn steer_flow(
        &mut self,
        flow: &fare_arn::codec::FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, ControlError> {
        DataplaneHandle::steer_flow(self, flow.clone(), interface.to_string(), avoid)
            .await
            .map_err(ControlError::from)
    }
    async fn set_member_share(
        &mut self,
        member: MemberRef<'_>,
        share: f64,
    ) -> Result<bool, ControlError> {
        DataplaneHandle::set_member_share(self, member.prefix, member.via, share)
            .await
            .map_err(ControlError::from)?;
        Ok(true)
    }
}

/// The data plane as the ARN receiver drives it, publishing each member change for
/// `Watch`.
struct Watched {
    dataplane: DataplaneHandle,
    events: crate::mgmt::watch::EventHub,
}

impl Watched {
    fn publish(&self, member: &MemberRef<'_>, removed: bool, share: Option<f64>) {
        self.events.publish(crate::changes::Change::Arn {
            prefix: member.prefix,
            via: member.via.to_string(),
            removed,
            share,
        });
    }
}

#[async_trait]
impl MemberControl for Watched {
    async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError> {
        MemberControl::groups(&mut self.dataplane).await
    }
    async fn set_member_active(
        &mut self,
        member: MemberRef<'_>,
        active: bool,
    ) -> Result<(), ControlError> {
        let ev = MemberRef { ..member };
        MemberControl::set_member_active(&mut self.dataplane, member, active).await?;
        self.publish(&ev, !active, None);
        Ok(())
    }
    async fn steer_flow(
        &mut self,
        flow: &fare_arn::codec::FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, ControlError> {
        MemberControl::steer_flow(&mut self.dataplane, flow, interface, avoid).await
    }
    async fn set_member_share(
        &mut self,
        member: MemberRef<'_>,
        share: f64,
    ) -> Result<bool, ControlError> {
        let ev = MemberRef { ..member };
        let done = MemberControl::set_member_share(&mut self.dataplane, member, share).await?;
        if done {
            let full = share >= 1.0;
            self.publish(&ev, false, (!full).then_some(share));
        }
        Ok(done)
    }
}

/// The senders this agent accepts besides `arn.neighbors`: BGP neighbors with an interface.
pub fn bgp_neighbors(ctx: &AgentContext) -> Vec<ArnNeighbor> {
    bgp_neighbors_of(&ctx.config)
}

/// [`bgp_neighbors`] from the agent configuration alone (the XDP data plane uses it).
pub fn bgp_neighbors_of(config: &crate::config::AgentConfig) -> Vec<ArnNeighbor> {
    config
        .neighbors
        .iter()
        .filter_map(|n| {
            n.interface.as_ref().map(|i| ArnNeighbor {
                address: n.address,
                interface: i.clone(),
            })
        })
        .collect()
}

/// With the XDP data plane the monitor reads the program's egress virtual queues (see
/// `fare_dp_xdp::queues`) for the ports that have one.
fn xdp_queue_source(
    config: &crate::config::AgentConfig,
) -> Result<Option<Box<dyn monitor::QueueSource>>, ProtocolError> {
    match &config.dataplane {
        crate::config::DataplaneConfig::Xdp { pin_name, .. } => {
            let node = pin_name.clone().unwrap_or_else(|| config.name.clone());
            let root = std::path::Path::new(fare_dp_xdp::pins::DEFAULT_ROOT);
            fare_dp_xdp::queues::VirtualQueues::open(root, &node)
                .map(|q| Some(Box::new(q) as Box<dyn monitor::QueueSource>))
                .map_err(ProtocolError::ArnQueues)
        }
        _ => Ok(None),
    }
}

/// The ARN protocol task of the agent; returns when `ctx.shutdown` is cancelled.
pub async fn run(ctx: AgentContext) -> ProtocolResult {
    let mut config = ctx.config.arn.clone().unwrap_or_default();
    let extra = bgp_neighbors(&ctx);
    config.resolve_notify(&extra);
    let receiver = Receiver::new(&config, &extra);
    let mut sockets = vec![ArnSocket::bind(
        SocketAddr::from(([0, 0, 0, 0], config.udp_port)),
        None,
    )?];
    match ArnSocket::bind(SocketAddr::from(([0u16; 8], config.udp_port)), None) {
        Ok(s) => sockets.push(s),
        Err(e) => info!("ARN: no IPv6 socket ({e}); IPv4 only"),
    }
    // Multicast transport: join the group on its interfaces; the monitor sends there too.
    let multicast = match &config.multicast {
        None => None,
        Some(m) => {
            let interfaces = m.resolved_interfaces(&config.accepted_neighbors(&extra));
            let joined = ArnSocket::join_group(&sockets, m.group, &interfaces)
                .map_err(ProtocolError::ArnMulticast)?;
            info!(group = %m.group, interfaces = ?joined, "ARN: receiving on the multicast group");
            Some((m.group, joined))
        }
    };
    let status = ArnStatus {
        udp_port: config.udp_port,
        counters: receiver.counters(),
        removed: receiver.published(),
        sent: Arc::default(),
        monitored: Arc::new(RwLock::new(
            config
                .monitor
                .iter()
                .flat_map(|m| m.interfaces.iter().map(|i| i.interface.clone()))
                .collect(),
        )),
        thresholds: None,
    };
    let (thresholds_tx, thresholds_rx) = std::sync::mpsc::channel();
    let status = ArnStatus {
        thresholds: config.monitor.is_some().then_some(thresholds_tx),
        ..status
    };
    ctx.state.write().arn = Some(status.clone());

    let stop = Arc::new(AtomicBool::new(false));
    let mut monitor_thread = None;
    let mut sender_task = None;
    if let Some(m) = config.monitor.clone() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<MonitorEvent>();
        monitor_thread = Some(
            monitor::spawn(
                m,
                config.notify.clone(),
                config.refresh(),
                config.udp_port,
                tx,
                stop.clone(),
                monitor::MonitorExtras {
                    queues: xdp_queue_source(&ctx.config)?,
                    multicast: multicast.clone(),
                    signals: Some(status.monitored.clone()),
                    thresholds: Some(thresholds_rx),
                },
            )
            .map_err(ProtocolError::ArnMonitor)?,
        );
        let (sent_tx, mut sent_rx) = tokio::sync::mpsc::unbounded_channel::<MonitorEvent>();
        sender_task = Some(tokio::spawn(monitor::report_sent(rx, Some(sent_tx))));
        let sent = status.sent.clone();
        tokio::spawn(async move {
            while let Some(e) = sent_rx.recv().await {
                if let Some(c) = usize::from(e.kind)
                    .checked_sub(1)
                    .and_then(|i| sent.by_type.get(i))
                {
                    c.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        info!(interfaces = ?status.monitored(), "ARN monitor started");
    }
    info!(port = config.udp_port, "ARN receiver listening");

    let mut control = Watched {
        dataplane: ctx.dataplane.clone(),
        events: ctx.events.clone(),
    };
    let shutdown = ctx.shutdown.clone();
    receiver::run(
        receiver,
        sockets,
        &mut control,
        ctx.dataplane.groups_changed(),
        None,
        shutdown.cancelled_owned(),
    )
    .await;

    stop.store(true, Ordering::Relaxed);
    if let Some(t) = sender_task {
        t.abort();
    }
    if let Some(t) = monitor_thread {
        let _ = tokio::task::spawn_blocking(move || t.join()).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use fare_arn::config::{ArnConfig, ArnNeighbor};
    use fare_arn::config::{MonitorConfig, MonitoredInterface};
    use fare_arn::receiver::Receiver;
    use fare_model::forwarding::GroupStatus;
    use std::net::IpAddr;

    fn neighbor(a: &str, i: &str) -> ArnNeighbor {
        ArnNeighbor {
            address: a.parse().unwrap(),
            interface: i.into(),
        }
    }

    #[test]
    fn default_notify_skips_the_watched_link() {
        let mut c = ArnConfig {
            monitor: Some(MonitorConfig {
                interval_us: 100,
                realtime_priority: 0,
                interfaces: vec![
                    MonitoredInterface {
                        interface: "s1-l2".into(),
                        path_id: "10.0.0.2".parse().unwrap(),
                        high_bytes: 10,
                        low_bytes: 1,
                        limit_bytes: None,
                        clear_ms: 0,
                        notify: vec![],
                    },
                    MonitoredInterface {
                        interface: "s1-l1".into(),
                        path_id: "10.0.0.1".parse().unwrap(),
                        high_bytes: 10,
                        low_bytes: 1,
                        limit_bytes: None,
                        clear_ms: 0,
                        notify: vec!["10.9.9.9".parse().unwrap()],
                    },
                ],
            }),
            ..ArnConfig::default()
        };
        let bgp = [neighbor("10.1.0.1", "s1-l1"), neighbor("10.1.1.1", "s1-l2")];
        c.resolve_notify(&bgp);
        let m = c.monitor.as_ref().unwrap();
        assert_eq!(
            m.interfaces[0].notify,
            vec!["10.1.0.1".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(
            m.interfaces[1].notify,
            vec!["10.9.9.9".parse::<IpAddr>().unwrap()]
        );
        // a global list wins over the default
        c.notify = vec!["10.8.8.8".parse().unwrap()];
        c.monitor.as_mut().unwrap().interfaces[0].notify.clear();
        c.resolve_notify(&bgp);
        assert_eq!(
            c.monitor.unwrap().interfaces[0].notify,
            vec!["10.8.8.8".parse::<IpAddr>().unwrap()]
        );
    }

    /// Two members of weight 1 on `lo` toward `vias` (the ARN senders), for 192.0.2.0/24.
    fn group(vias: &[&str]) -> fare_dataplane::Group {
        fare_dataplane::Group {
            prefix: "192.0.2.0/24".parse().unwrap(),
            mode: fare_dataplane::GroupMode::Spray,
            members: vias
                .iter()
                .map(|via| fare_dataplane::Member {
                    via: via.to_string(),
                    interface: "lo".into(),
                    next_hop: Some(via.parse().unwrap()),
                    neighbor_mac: None,
                    weight: 1,
                    bandwidth_gbps: 100.0,
                })
                .collect(),
        }
    }

    /// The agent's data plane task over the `none` data plane, with `group(vias)`
    /// installed, and the ARN neighbors 10.1.0.2 and 10.1.1.2 on `lo`.
    async fn handle_with(
        vias: &[&str],
    ) -> (
        crate::dataplane_task::DataplaneHandle,
        tokio::task::JoinHandle<Box<dyn fare_dataplane::Dataplane>>,
        Vec<ArnNeighbor>,
    ) {
        let none = Box::new(fare_dataplane::NullDataplane::default());
        let (handle, task) = crate::dataplane_task::spawn(none);
        handle.install(group(vias)).await.unwrap();
        let neighbors = vec![neighbor("10.1.0.2", "lo"), neighbor("10.1.1.2", "lo")];
        (handle, task, neighbors)
    }

    /// The congestion shift through the agent's data plane task, weights by hand
    /// (`arn::shift`: 16 x weight x share, the others 16 x weight): Type 1 with Metric 255
    /// halves the member toward 10.1.0.2 (1:1 -> 8:16), a refresh 250 ms later with the
    /// queue as full halves it again (4:16), one 100 ms after that is damped; a BGP
    /// re-install keeps the share; Type 2 gives 1/8 back per 250 ms (6:16, then 7:16 =
    /// the ceiling 0.9 x 0.5 = 0.45 -> round(7.2) = 7); Type 3 takes the member out
    /// (failure is not congestion) and Type 4 brings it back, still at its share.
    #[tokio::test]
    async fn congestion_shifts_the_share_through_the_handle() {
        use fare_arn::{ArnMessage, ArnType};
        use std::time::{Duration, Instant};
        let (mut handle, _task, neighbors) = handle_with(&["10.1.0.2", "10.1.1.2"]).await;
        let config = ArnConfig {
            neighbors,
            hold_ms: 60_000,
            ..ArnConfig::default()
        };
        let mut r = Receiver::new(&config, &[]);
        let s1: IpAddr = "10.1.0.2".parse().unwrap();
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let state = |g: Vec<GroupStatus>| -> (Vec<u32>, Vec<bool>) {
            (
                g[0].group.members.iter().map(|m| m.weight).collect(),
                g[0].members.iter().map(|m| m.active).collect(),
            )
        };
        let full = ArnMessage::path(ArnType::CongestionDetected, 255, 0);
        let changes = r.apply(&mut handle, s1, &full, ms(0)).await;
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].share_permille, Some(500));
        assert!(changes[0].active);
        assert_eq!(state(handle.groups().await.unwrap()).0, vec![8, 16]);
        r.apply(&mut handle, s1, &full, ms(250)).await;
        assert_eq!(state(handle.groups().await.unwrap()).0, vec![4, 16]);
        assert!(r.apply(&mut handle, s1, &full, ms(350)).await.is_empty());
        let shown = r.removed_members();
        assert_eq!(shown[0].share_permille, Some(250));
        assert!(
            shown[0].reason().contains("share 25.0 %"),
            "{}",
            shown[0].reason()
        );
        // BGP installs the same group again: the share stays.
        handle
            .install(group(&["10.1.0.2", "10.1.1.2"]))
            .await
            .unwrap();
        r.reconcile(&mut handle).await;
        assert_eq!(state(handle.groups().await.unwrap()).0, vec![4, 16]);
        // Type 2: steps of 1/8 every 250 ms up to the ceiling (0.9 x 0.5).
        let clear = ArnMessage::path(ArnType::CongestionEliminated, 0, 0);
        r.apply(&mut handle, s1, &clear, ms(400)).await;
        assert!(r.expire(&mut handle, ms(500)).await.is_empty());
        assert_eq!(r.expire(&mut handle, ms(650)).await.len(), 1);
        assert_eq!(state(handle.groups().await.unwrap()).0, vec![6, 16]);
        r.expire(&mut handle, ms(900)).await;
        assert_eq!(state(handle.groups().await.unwrap()).0, vec![7, 16]);
        assert!(r.expire(&mut handle, ms(1150)).await.is_empty());
        // Failure: the whole member goes, and comes back at its share.
        let fail = ArnMessage::path(ArnType::FailureDetected, 255, 0);
        r.apply(&mut handle, s1, &fail, ms(1200)).await;
        assert_eq!(
            state(handle.groups().await.unwrap()),
            (vec![7, 16], vec![false, true])
        );
        let back = ArnMessage::path(ArnType::FailureEliminated, 0, 0);
        r.apply(&mut handle, s1, &back, ms(1300)).await;
        assert_eq!(
            state(handle.groups().await.unwrap()),
            (vec![7, 16], vec![true, true])
        );
        let c = r.counters().snapshot();
        assert_eq!((c.shares_cut, c.shares_restored), (2, 2));
        assert_eq!((c.members_removed, c.members_restored), (1, 1));
    }

    /// `congestion: {mode: remove}` keeps the whole-member removal for Type 1.
    #[tokio::test]
    async fn remove_mode_takes_the_whole_member_out() {
        use fare_arn::shift::{CongestionMode, ShiftConfig};
        use fare_arn::{ArnMessage, ArnType};
        use std::time::Instant;
        let (mut handle, _task, neighbors) = handle_with(&["10.1.0.2", "10.1.1.2"]).await;
        let config = ArnConfig {
            neighbors,
            congestion: ShiftConfig {
                mode: CongestionMode::Remove,
                ..ShiftConfig::default()
            },
            ..ArnConfig::default()
        };
        let mut r = Receiver::new(&config, &[]);
        let m = ArnMessage::path(ArnType::CongestionDetected, 255, 0);
        r.apply(&mut handle, "10.1.0.2".parse().unwrap(), &m, Instant::now())
            .await;
        let g = handle.groups().await.unwrap();
        assert_eq!(g[0].group.members[0].weight, 1);
        assert!(!g[0].members[0].active);
    }

    #[tokio::test]
    async fn removal_survives_reinstall_through_the_handle_until_the_path_goes() {
        use fare_arn::{ArnMessage, ArnType};
        use std::time::Instant;
        let (mut handle, _task, neighbors) = handle_with(&["10.1.0.2", "10.1.1.2"]).await;
        let config = ArnConfig {
            neighbors,
            ..ArnConfig::default()
        };
        let mut r = Receiver::new(&config, &[]);
        let m = ArnMessage::path(ArnType::FailureDetected, 9, 0x0a00_0002);
        let changes = r
            .apply(&mut handle, "10.1.0.2".parse().unwrap(), &m, Instant::now())
            .await;
        assert_eq!(changes.len(), 1);
        let active =
            |g: Vec<GroupStatus>| -> Vec<bool> { g[0].members.iter().map(|m| m.active).collect() };
        // BGP re-installs with another order: the member toward 10.1.0.2 stays out.
        handle
            .install(group(&["10.1.1.2", "10.1.0.2"]))
            .await
            .unwrap();
        r.reconcile(&mut handle).await;
        assert_eq!(active(handle.groups().await.unwrap()), vec![true, false]);
        assert_eq!(r.removed_members()[0].index, 1);
        assert!(r.removed_members()[0].reason().contains("failure"));
        // The path is gone from the group: the removal is dropped.
        handle.install(group(&["10.1.1.2"])).await.unwrap();
        r.reconcile(&mut handle).await;
        assert!(r.removed_members().is_empty());
        assert_eq!(r.counters().snapshot().stale_dropped, 1);
    }
}
