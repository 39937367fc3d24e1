//! Protocol numbers and header sizes the parsers use.

pub const ETH_HLEN: usize = 14;
pub const VLAN_HLEN: usize = 4;
pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86DD;
/// 802.1Q customer tag and 802.1ad service tag: one tag is understood.
pub const ETH_P_8021Q: u16 = 0x8100;
pub const ETH_P_8021AD: u16 = 0x88A8;

pub const IPV4_MIN_HLEN: usize = 20;
pub const IPV6_HLEN: usize = 40;

pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_SCTP: u8 = 132;

/// IPv4 flags/fragment offset: "more fragments" bit and the offset field.
pub const IPV4_MF: u16 = 0x2000;
pub const IPV4_OFFSET_MASK: u16 = 0x1fff;
