//! NLRI prefixes (RFC 4271 §4.3, RFC 4760 §5): length in bits, then the significant octets.

use super::Family;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Decodes a run of prefixes of one family. `None` when a length exceeds the family's
/// maximum or the bytes end inside a prefix (the caller picks the RFC 7606 reaction).
/// Host bits beyond the length are cleared.
pub fn decode(mut buf: &[u8], family: Family) -> Option<Vec<IpNet>> {
    let max = match family {
        Family::Ipv4Unicast => 32,
        Family::Ipv6Unicast => 128,
    };
    let mut out = Vec::new();
    while let Some((&len, rest)) = buf.split_first() {
        if len > max {
            return None;
        }
        let n = (len as usize).div_ceil(8);
        let bytes = rest.get(..n)?;
        buf = &rest[n..];
        let net = match family {
            Family::Ipv4Unicast => {
                let mut a = [0u8; 4];
                a[..n].copy_from_slice(bytes);
                IpNet::V4(Ipv4Net::new(Ipv4Addr::from(a), len).ok()?.trunc())
            }
            Family::Ipv6Unicast => {
                let mut a = [0u8; 16];
                a[..n].copy_from_slice(bytes);
                IpNet::V6(Ipv6Net::new(Ipv6Addr::from(a), len).ok()?.trunc())
            }
        };
        out.push(net);
    }
    Some(out)
}

/// Encoded size of one prefix.
pub fn encoded_len(net: &IpNet) -> usize {
    1 + (net.prefix_len() as usize).div_ceil(8)
}

pub fn encode_one(net: &IpNet, out: &mut Vec<u8>) {
    let len = net.prefix_len();
    let n = (len as usize).div_ceil(8);
    out.push(len);
    match net.trunc() {
        IpNet::V4(v4) => out.extend_from_slice(&v4.addr().octets()[..n]),
        IpNet::V6(v6) => out.extend_from_slice(&v6.addr().octets()[..n]),
    }
}

pub fn encode(nets: &[IpNet], out: &mut Vec<u8>) {
    for net in nets {
        encode_one(net, out);
    }
}

pub fn family_of(net: &IpNet) -> Family {
    match net {
        IpNet::V4(_) => Family::Ipv4Unicast,
        IpNet::V6(_) => Family::Ipv6Unicast,
    }
}
