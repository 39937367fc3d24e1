//! `bgp:`: the speaker's port, timers, ORF wait and link polling.

use super::*;

/// BGP session parameters shared by every neighbor.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BgpConfig {
    #[serde(default = "default_bgp_port")]
    pub port: u16,
    /// Accept incoming sessions.
    #[serde(default = "yes")]
    pub listen: bool,
    /// Proposed hold time in seconds (keepalives every third of it); 0 = none.
    #[serde(default = "default_hold")]
    pub hold_time: u16,
    /// First connect-retry delay; doubles per failure up to `connect_retry_max_ms`.
    #[serde(default = "default_retry")]
    pub connect_retry_ms: u64,
    #[serde(default = "default_retry_max")]
    pub connect_retry_max_ms: u64,
    /// How often neighbor interfaces' carrier is read, in ms (0 = netlink events only,
    /// which the kernel may deliver up to a second late).
    #[serde(default = "default_link_poll")]
    pub link_poll_ms: u64,
    /// How long a neighbor with `orf_receive` that can send ORFs gets to send its first
    /// ORF before this node sends it the full table anyway (RFC 5291 §5), in ms.
    #[serde(default = "default_orf_wait")]
    pub orf_wait_ms: u64,
}

/// Default wait for a neighbor's first ORF (RFC 5291 leaves the time to the implementation).
pub const DEFAULT_ORF_WAIT_MS: u64 = 3000;

pub(super) fn default_orf_wait() -> u64 {
    DEFAULT_ORF_WAIT_MS
}

/// Carrier poll interval: fast enough for the 20 ms convergence target.
pub const DEFAULT_LINK_POLL_MS: u64 = 5;

pub(super) fn default_link_poll() -> u64 {
    DEFAULT_LINK_POLL_MS
}

impl Default for BgpConfig {
    fn default() -> Self {
        BgpConfig {
            port: default_bgp_port(),
            listen: true,
            hold_time: default_hold(),
            connect_retry_ms: default_retry(),
            connect_retry_max_ms: default_retry_max(),
            link_poll_ms: default_link_poll(),
            orf_wait_ms: default_orf_wait(),
        }
    }
}

pub(super) fn default_bgp_port() -> u16 {
    179
}
pub(super) fn yes() -> bool {
    true
}
pub(super) fn default_hold() -> u16 {
    9
}
pub(super) fn default_retry() -> u64 {
    500
}
pub(super) fn default_retry_max() -> u64 {
    30_000
}
