//! The seam between the receiver and a data plane: what it asks, and why that can fail.

use crate::codec::FlowId;
use async_trait::async_trait;
use fare_model::forwarding::{GroupStatus, MemberError, MemberRef};

/// A failure reported by the data plane side of the seam.
/// Why the data plane did not do what the receiver asked.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The member is the last one forwarding for its prefix (the rule is
    /// [`fare_model::forwarding::keep_last_active`]): kept, and counted as such.
    #[error(transparent)]
    LastActiveMember(MemberError),
    /// Anything else (a backend failure, the data plane task gone).
    #[error("{0}")]
    Failed(String),
}

impl From<MemberError> for ControlError {
    fn from(e: MemberError) -> Self {
        match e {
            e @ MemberError::LastActiveMember { .. } => ControlError::LastActiveMember(e),
            e => ControlError::Failed(e.to_string()),
        }
    }
}

/// What the receiver needs from the data plane: the installed groups and the per-member
/// on/off switch. Every data plane provides it (`fare-dataplane`: `dyn Dataplane`); the
/// agent plugs in its handle.
#[async_trait]
pub trait MemberControl: Send {
    async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError>;
    /// Switches `member` — the member whose `via` it names, wherever it is in the group
    /// installed now (refused with `NoSuchMember` when it left).
    async fn set_member_active(
        &mut self,
        member: MemberRef<'_>,
        active: bool,
    ) -> Result<(), ControlError>;
    /// ARN per-flow mode: flows matching `flow` avoid `interface` (or may use it again).
    /// Ok(false): the data plane cannot steer single flows.
    async fn steer_flow(
        &mut self,
        flow: &FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, ControlError> {
        let _ = (flow, interface, avoid);
        Ok(false)
    }
    /// Congestion shift (`arn::shift`): the member whose `via` `member` names keeps `share`
    /// (0 < share <= 1) of its weight, the others keep theirs. Ok(false): this path to the
    /// data plane cannot re-weight a group (the receiver removes the member instead). The
    /// agent's data plane task can, for every backend.
    async fn set_member_share(
        &mut self,
        member: MemberRef<'_>,
        share: f64,
    ) -> Result<bool, ControlError> {
        let _ = (member, share);
        Ok(false)
    }
}
