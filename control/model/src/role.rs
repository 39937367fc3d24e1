//! A node's role in the Clos, which places it in a stage: what the topology, the
//! bandwidth rules (`bandwidth::Rule::for_node`) and the BGP speaker all read.

/// Where a node sits in the Clos: routes go up the stages and then down (valley-free).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// A RoCE NIC: a stub BGP speaker per plane (draft-xu-idr-fare-in-mpson).
    Rnic,
    /// A server that only originates and receives routes.
    Host,
    Leaf,
    Spine,
    SuperSpine,
}

impl Role {
    /// Clos stage: 0 for end points, 1 leaf, 2 spine, 3 super-spine.
    pub fn stage(self) -> u8 {
        match self {
            Role::Rnic | Role::Host => 0,
            Role::Leaf => 1,
            Role::Spine => 2,
            Role::SuperSpine => 3,
        }
    }

    /// Stubs originate and receive routes but never re-advertise them.
    pub fn is_stub(self) -> bool {
        self.stage() == 0
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Rnic => "rnic",
            Role::Host => "host",
            Role::Leaf => "leaf",
            Role::Spine => "spine",
            Role::SuperSpine => "super-spine",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stages and names of every role, as the topology files spell them (kebab-case).
    #[test]
    fn every_roles_stage_stub_and_name() {
        let all = [
            (Role::Rnic, 0, true, "rnic"),
            (Role::Host, 0, true, "host"),
            (Role::Leaf, 1, false, "leaf"),
            (Role::Spine, 2, false, "spine"),
            (Role::SuperSpine, 3, false, "super-spine"),
        ];
        for (role, stage, stub, name) in all {
            assert_eq!(
                (role.stage(), role.is_stub(), role.as_str()),
                (stage, stub, name)
            );
            let read: Role = serde_norway::from_str(name).unwrap();
            assert_eq!(read, role);
        }
    }
}
