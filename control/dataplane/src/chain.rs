//! A forwarding data plane plus kernel routes for this host's own traffic.
//!
//! XDP forwards what the host receives; what the host itself sends is routed by the
//! kernel before any program sees it. An RNIC whose planes spray per packet (TC egress,
//! `egress_spray`) therefore also needs a kernel route for every group, so that its
//! packets reach a plane interface at all: this wrapper installs each group in the
//! primary data plane and, as a weighted nexthop group, in the kernel (per flow by
//! itself; the TC program then re-spreads per packet). The primary's answer is the
//! data plane's answer; the kernel follows it.
//!
//! Every method of the trait is written out here, none left to its default: a default
//! would answer for the primary without asking it (its `maintain`, which refills the XDP
//! program's IPv4 table, or its batched installs). `forwards_every_method` checks it.

use crate::{ColorGroup, Dataplane, DataplaneError, FlowRule, Group, GroupLimits, GroupStatus};
use async_trait::async_trait;
use ipnet::IpNet;
use tracing::warn;

pub struct WithHostRoutes {
    primary: Box<dyn Dataplane>,
    /// The kernel's routes (`KernelDataplane`), or a stand-in in tests.
    kernel: Box<dyn Dataplane>,
}

impl WithHostRoutes {
    pub fn new(primary: Box<dyn Dataplane>, kernel: Box<dyn Dataplane>) -> WithHostRoutes {
        WithHostRoutes { primary, kernel }
    }
}

#[async_trait]
impl Dataplane for WithHostRoutes {
    fn name(&self) -> &'static str {
        self.primary.name()
    }

    /// Every group goes to both: the tighter of their limits.
    fn limits(&self) -> GroupLimits {
        self.primary.limits().min(self.kernel.limits())
    }

    async fn install(&mut self, group: &Group) -> Result<(), DataplaneError> {
        self.primary.install(group).await?;
        self.kernel.install(group).await
    }

    /// The primary's batch as one (P4Runtime writes it in one request); the kernel
    /// follows for the groups the primary took.
    async fn install_batch(&mut self, groups: &[Group]) -> Vec<Result<(), DataplaneError>> {
        let mut out = self.primary.install_batch(groups).await;
        for (g, r) in groups.iter().zip(out.iter_mut()) {
            if r.is_ok() {
                *r = self.kernel.install(g).await;
            }
        }
        out
    }

    /// Both: the primary's upkeep is its own (the XDP IPv4 table's refill), the kernel's
    /// too.
    async fn maintain(&mut self) -> Result<(), DataplaneError> {
        let primary = self.primary.maintain().await;
        let kernel = self.kernel.maintain().await;
        primary.and(kernel)
    }

    async fn install_colored(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError> {
        self.primary.install_colored(group, colors).await?;
        self.kernel.install(group).await
    }

    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        self.primary.remove(prefix).await?;
        match self.kernel.remove(prefix).await {
            Err(DataplaneError::NoSuchGroup(_)) | Ok(()) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
        self.primary.groups().await
    }

    async fn packet_counters(
        &mut self,
    ) -> Result<std::collections::BTreeMap<&'static str, u64>, DataplaneError> {
        self.primary.packet_counters().await
    }

    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError> {
        self.primary
            .set_member_active(prefix, index, active)
            .await?;
        if let Err(e) = self.kernel.set_member_active(prefix, index, active).await {
            warn!(%prefix, index, active, "host route not updated: {e}");
        }
        Ok(())
    }

    async fn steer_flow(
        &mut self,
        flow: &fare_arn::codec::FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, DataplaneError> {
        self.primary.steer_flow(flow, interface, avoid).await
    }

    async fn set_flow_rules(&mut self, rules: &[FlowRule]) -> Result<(), DataplaneError> {
        self.primary.set_flow_rules(rules).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A data plane that records each call by name.
    struct Recording(&'static str, Arc<Mutex<Vec<String>>>);

    impl Recording {
        fn note(&self, call: &str) {
            self.1.lock().unwrap().push(format!("{} {call}", self.0));
        }
    }

    #[async_trait]
    impl Dataplane for Recording {
        fn name(&self) -> &'static str {
            self.0
        }
        async fn install(&mut self, _: &Group) -> Result<(), DataplaneError> {
            self.note("install");
            Ok(())
        }
        async fn install_batch(&mut self, groups: &[Group]) -> Vec<Result<(), DataplaneError>> {
            self.note("install_batch");
            groups.iter().map(|_| Ok(())).collect()
        }
        async fn remove(&mut self, _: IpNet) -> Result<(), DataplaneError> {
            self.note("remove");
            Ok(())
        }
        async fn maintain(&mut self) -> Result<(), DataplaneError> {
            self.note("maintain");
            Ok(())
        }
        async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
            self.note("groups");
            Ok(vec![])
        }
        async fn packet_counters(
            &mut self,
        ) -> Result<std::collections::BTreeMap<&'static str, u64>, DataplaneError> {
            self.note("packet_counters");
            Ok(Default::default())
        }
        async fn set_member_active(
            &mut self,
            _: IpNet,
            _: usize,
            _: bool,
        ) -> Result<(), DataplaneError> {
            self.note("set_member_active");
            Ok(())
        }
        async fn steer_flow(
            &mut self,
            _: &fare_arn::codec::FlowId,
            _: &str,
            _: bool,
        ) -> Result<bool, DataplaneError> {
            self.note("steer_flow");
            Ok(true)
        }
        async fn install_colored(
            &mut self,
            _: &Group,
            _: &[ColorGroup],
        ) -> Result<(), DataplaneError> {
            self.note("install_colored");
            Ok(())
        }
        async fn set_flow_rules(&mut self, _: &[FlowRule]) -> Result<(), DataplaneError> {
            self.note("set_flow_rules");
            Ok(())
        }
    }

    /// Each method reaches the primary as itself (never through a default), and the
    /// kernel where host routes need it.
    #[tokio::test]
    async fn forwards_every_method() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut d = WithHostRoutes::new(
            Box::new(Recording("xdp", calls.clone())),
            Box::new(Recording("kernel", calls.clone())),
        );
        let prefix: IpNet = "198.18.0.0/16".parse().unwrap();
        let group = Group {
            prefix,
            mode: Default::default(),
            members: vec![],
        };
        let flow = fare_arn::codec::FlowId::default();
        d.install(&group).await.unwrap();
        let _ = d.install_batch(std::slice::from_ref(&group)).await;
        d.install_colored(&group, &[]).await.unwrap();
        d.maintain().await.unwrap();
        d.set_member_active(prefix, 0, false).await.unwrap();
        d.steer_flow(&flow, "eth1", true).await.unwrap();
        d.set_flow_rules(&[]).await.unwrap();
        d.groups().await.unwrap();
        d.packet_counters().await.unwrap();
        d.remove(prefix).await.unwrap();
        let calls = calls.lock().unwrap().clone();
        assert_eq!(
            calls,
            [
                "xdp install",
                "kernel install",
                "xdp install_batch",
                "kernel install",
                "xdp install_colored",
                "kernel install",
                "xdp maintain",
                "kernel maintain",
                "xdp set_member_active",
                "kernel set_member_active",
                "xdp steer_flow",
                "xdp set_flow_rules",
                "xdp groups",
                "xdp packet_counters",
                "xdp remove",
                "kernel remove",
            ]
        );
    }
}
