//! Backends one after another, in the sense of FRR's data plane providers: a primary
//! whose answer is the data plane's answer, then followers that take what it took.
//!
//! The one chain fare builds today: XDP forwards what the host receives, but what the
//! host itself sends is routed by the kernel before any program sees it. An RNIC whose
//! planes spray per packet (TC egress, `egress_spray`) therefore also needs a kernel route
//! for every group, so that its packets reach a plane interface at all: the XDP backend
//! is the primary and the kernel backend follows with each group as a weighted nexthop
//! group (per flow by itself; the TC program then re-spreads per packet).
//!
//! Every method of the trait is written out here, none left to its default: a default
//! would answer for the primary without asking it (its `maintain`, which refills the XDP
//! program's IPv4 table, or its batched installs). `forwards_every_method` checks it.

use crate::{
    ColorGroup, Dataplane, DataplaneError, Dpf, FlowRule, FlowSteering, Group, GroupLimits,
    GroupStatus,
};
use async_trait::async_trait;
use ipnet::IpNet;
use tracing::warn;

pub struct Chain<P> {
    primary: P,
    /// Take each group the primary took (the kernel's routes), in order.
    followers: Vec<Box<dyn Dataplane>>,
}

impl<P: Dataplane> Chain<P> {
    pub fn new(primary: P) -> Chain<P> {
        Chain {
            primary,
            followers: Vec::new(),
        }
    }

    /// `follower` takes every group after the primary (and the followers before it).
    pub fn then(mut self, follower: Box<dyn Dataplane>) -> Chain<P> {
        self.followers.push(follower);
        self
    }

    /// The primary, for what only it offers (tests, diagnostics).
    pub fn primary(&self) -> &P {
        &self.primary
    }

    /// The primary, the followers dropped.
    pub fn into_primary(self) -> P {
        self.primary
    }

    /// Each follower installs `group` the primary took; the first error is the answer.
    async fn follow(&mut self, group: &Group) -> Result<(), DataplaneError> {
        for f in &mut self.followers {
            f.install(group).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl<P: Dataplane> Dataplane for Chain<P> {
    fn name(&self) -> &'static str {
        self.primary.name()
    }

    /// Every group goes to all: the tightest of their limits.
    fn limits(&self) -> GroupLimits {
        self.followers
            .iter()
            .fold(self.primary.limits(), |l, f| l.min(f.limits()))
    }

    async fn install(&mut self, group: &Group) -> Result<(), DataplaneError> {
        self.primary.install(group).await?;
        self.follow(group).await
    }

    /// The primary's batch as one (P4Runtime writes it in one request); the followers
    /// take the groups the primary took.
    async fn install_batch(&mut self, groups: &[Group]) -> Vec<Result<(), DataplaneError>> {
        let mut out = self.primary.install_batch(groups).await;
        for (g, r) in groups.iter().zip(out.iter_mut()) {
            if r.is_ok() {
                *r = self.follow(g).await;
            }
        }
        out
    }

    /// Each one's upkeep is its own (the XDP IPv4 table's refill); all run, the first
    /// error is the answer.
    async fn maintain(&mut self) -> Result<(), DataplaneError> {
        let mut result = self.primary.maintain().await;
        for f in &mut self.followers {
            let r = f.maintain().await;
            result = result.and(r);
        }
        result
    }

    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        self.primary.remove(prefix).await?;
        for f in &mut self.followers {
            match f.remove(prefix).await {
                Err(DataplaneError::NoSuchGroup(_)) | Ok(()) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
        self.primary.groups().await
    }

    /// The chain offers what its primary offers.
    fn dpf(&mut self) -> Option<&mut dyn Dpf> {
        self.primary.dpf()?;
        Some(self)
    }

    fn flow_steering(&mut self) -> Option<&mut dyn FlowSteering> {
        self.primary.flow_steering()?;
        Some(self)
    }

    async fn packet_counters(
        &mut self,
    ) -> Result<std::collections::BTreeMap<&'static str, u64>, DataplaneError> {
        self.primary.packet_counters().await
    }

    /// The primary decides; a follower that cannot follow is logged, not an error.
    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError> {
        self.primary
            .set_member_active(prefix, index, active)
            .await?;
        for f in &mut self.followers {
            if let Err(e) = f.set_member_active(prefix, index, active).await {
                warn!(%prefix, index, active, follower = f.name(), "member not updated: {e}");
            }
        }
        Ok(())
    }
}

/// DPF when the primary has it: per-color groups are the primary's; the followers route
/// the prefix by its group.
#[async_trait]
impl<P: Dataplane> Dpf for Chain<P> {
    async fn install_colored(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError> {
        let Some(dpf) = self.primary.dpf() else {
            return Err(DataplaneError::backend(self.primary.name(), "no DPF"));
        };
        dpf.install_colored(group, colors).await?;
        self.follow(group).await
    }

    async fn set_flow_rules(&mut self, rules: &[FlowRule]) -> Result<(), DataplaneError> {
        match self.primary.dpf() {
            Some(dpf) => dpf.set_flow_rules(rules).await,
            None => Err(DataplaneError::backend(self.primary.name(), "no DPF")),
        }
    }
}

/// Flow steering is the primary's (the kernel's routes carry no single flows).
#[async_trait]
impl<P: Dataplane> FlowSteering for Chain<P> {
    async fn steer_flow(
        &mut self,
        flow: &fare_arn::codec::FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, DataplaneError> {
        match self.primary.flow_steering() {
            Some(s) => s.steer_flow(flow, interface, avoid).await,
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Offers;
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
        fn dpf(&mut self) -> Option<&mut dyn Dpf> {
            Some(self)
        }
        fn flow_steering(&mut self) -> Option<&mut dyn FlowSteering> {
            Some(self)
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
    }

    #[async_trait]
    impl Dpf for Recording {
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

    #[async_trait]
    impl FlowSteering for Recording {
        async fn steer_flow(
            &mut self,
            _: &fare_arn::codec::FlowId,
            _: &str,
            _: bool,
        ) -> Result<bool, DataplaneError> {
            self.note("steer_flow");
            Ok(true)
        }
    }

    /// The chain offers what its primary offers, none more.
    #[test]
    fn offers_its_primarys() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut with = Chain::new(Recording("xdp", calls.clone()))
            .then(Box::new(crate::NullDataplane::default()));
        let all = Offers {
            dpf: true,
            flow_steering: true,
        };
        assert_eq!(Offers::of(&mut with), all);
        let mut without =
            Chain::new(crate::NullDataplane::default()).then(Box::new(Recording("kernel", calls)));
        assert_eq!(Offers::of(&mut without), crate::NullDataplane::OFFERS);
    }

    /// Each method reaches the primary as itself (never through a default), and the
    /// kernel where host routes need it.
    #[tokio::test]
    async fn forwards_every_method() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut d = Chain::new(Recording("xdp", calls.clone()))
            .then(Box::new(Recording("kernel", calls.clone())));
        let prefix: IpNet = "198.18.0.0/16".parse().unwrap();
        let group = Group {
            prefix,
            mode: Default::default(),
            members: vec![],
        };
        let flow = fare_arn::codec::FlowId::default();
        d.install(&group).await.unwrap();
        let _ = d.install_batch(std::slice::from_ref(&group)).await;
        d.dpf().unwrap().install_colored(&group, &[]).await.unwrap();
        d.maintain().await.unwrap();
        d.set_member_active(prefix, 0, false).await.unwrap();
        d.flow_steering()
            .unwrap()
            .steer_flow(&flow, "eth1", true)
            .await
            .unwrap();
        d.dpf().unwrap().set_flow_rules(&[]).await.unwrap();
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
