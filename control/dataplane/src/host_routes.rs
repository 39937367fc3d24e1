//! A forwarding data plane plus kernel routes for this host's own traffic.
//!
//! XDP forwards what the host receives; what the host itself sends is routed by the
//! kernel before any program sees it. An RNIC whose planes spray per packet (TC egress,
//! `egress_spray`) therefore also needs a kernel route for every group, so that its
//! packets reach a plane interface at all: this wrapper installs each group in the
//! primary data plane and, as a weighted nexthop group, in the kernel (per flow by
//! itself; the TC program then re-spreads per packet). The primary's answer is the
//! data plane's answer; the kernel follows it.

use super::kernel::KernelDataplane;
use super::{ColorGroup, Dataplane, DataplaneError, FlowRule, Group, GroupLimits, GroupStatus};
use async_trait::async_trait;
use ipnet::IpNet;
use tracing::warn;

pub struct WithHostRoutes {
    primary: Box<dyn Dataplane>,
    kernel: KernelDataplane,
}

impl WithHostRoutes {
    pub fn new(primary: Box<dyn Dataplane>, kernel: KernelDataplane) -> WithHostRoutes {
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
