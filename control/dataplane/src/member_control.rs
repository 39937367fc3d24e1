//! The ARN receiver (`fare-arn`) switches members through its `MemberControl` trait; every
//! data plane provides it here, with the shared rule of which member a switch means
//! (`member_now`) and the last-member rule its backend applies.

use crate::{Dataplane, DataplaneError};
use async_trait::async_trait;
use fare_arn::codec::FlowId;
use fare_arn::receiver::{ControlError, MemberControl};
use fare_model::forwarding::{GroupStatus, MemberRef};

impl From<DataplaneError> for ControlError {
    fn from(e: DataplaneError) -> Self {
        match e {
            DataplaneError::Member(m) => m.into(),
            e => ControlError::Failed(e.to_string()),
        }
    }
}

#[async_trait]
impl MemberControl for dyn Dataplane + '_ {
    async fn steer_flow(
        &mut self,
        flow: &FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, ControlError> {
        match self.flow_steering() {
            Some(s) => s
                .steer_flow(flow, interface, avoid)
                .await
                .map_err(ControlError::from),
            None => Ok(false),
        }
    }
    async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError> {
        Dataplane::groups(self).await.map_err(ControlError::from)
    }
    async fn set_member_active(
        &mut self,
        member: MemberRef<'_>,
        active: bool,
    ) -> Result<(), ControlError> {
        let MemberRef { prefix, index, via } = member;
        let groups = Dataplane::groups(self).await?;
        let members = groups
            .iter()
            .find(|g| g.group.prefix == prefix)
            .map(|g| g.group.members.iter().map(|m| m.via.as_str()));
        let index = crate::member_now(prefix, index, Some(via), members)?;
        Dataplane::set_member_active(self, prefix, index, active)
            .await
            .map_err(ControlError::from)
    }
}
