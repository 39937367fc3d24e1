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
