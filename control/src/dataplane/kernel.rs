//! `kernel` data plane backend: Linux weighted nexthop groups (to be implemented).

use super::{Dataplane, DataplaneError, Group, GroupStatus};
use async_trait::async_trait;
use ipnet::IpNet;

pub struct KernelDataplane {}

impl KernelDataplane {
    pub async fn open(_interfaces: &[String]) -> Result<KernelDataplane, DataplaneError> {
        Err(DataplaneError::backend("kernel", "not implemented yet"))
    }
}

#[async_trait]
impl Dataplane for KernelDataplane {
    fn name(&self) -> &'static str {
        "kernel"
    }
    async fn install(&mut self, _group: &Group) -> Result<(), DataplaneError> {
        Err(DataplaneError::backend("kernel", "not implemented yet"))
    }
    async fn remove(&mut self, _prefix: IpNet) -> Result<(), DataplaneError> {
        Err(DataplaneError::backend("kernel", "not implemented yet"))
    }
    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
        Ok(Vec::new())
    }
    async fn set_member_active(
        &mut self,
        _prefix: IpNet,
        _index: usize,
        _active: bool,
    ) -> Result<(), DataplaneError> {
        Err(DataplaneError::backend("kernel", "not implemented yet"))
    }
}
