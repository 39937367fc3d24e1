//! OPEN (RFC 4271 §4.2) with capabilities (RFC 5492): multiprotocol (RFC 4760), route
//! refresh (RFC 2918), 4-octet AS (RFC 6793). Unknown capabilities are kept as received
//! (DPF's SESSION-COLOR capability will be one more variant).

use super::error::{code, open, MessageError};
use super::{Family, Reader};
use std::net::Ipv4Addr;

/// 2-octet stand-in for a 4-octet AS number (RFC 6793).
pub const AS_TRANS: u16 = 23456;

pub mod cap_code {
    pub const MULTIPROTOCOL: u8 = 1;
    pub const ROUTE_REFRESH: u8 = 2;
    pub const FOUR_OCTET_AS: u8 = 65;
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Capability {
    /// AFI, SAFI (any value: families we do not carry are simply not negotiated).
    Multiprotocol {
        afi: u16,
        safi: u8,
    },
    RouteRefresh,
    /// Outbound Route Filtering (RFC 5291): per family, the ORF types and send/receive.
    Orf(Vec<super::orf::OrfFamily>),
    FourOctetAs(u32),
    Unknown {
        code: u8,
        value: Vec<u8>,
    },
}

impl Capability {
    pub fn family(&self) -> Option<Family> {
        match self {
            Capability::Multiprotocol { afi, safi } => Family::from_afi_safi(*afi, *safi),
            _ => None,
        }
    }

    fn decode(code: u8, value: &[u8]) -> Result<Capability, MessageError> {
        let bad = || {
            MessageError::new(
                super::error::code::OPEN,
                0,
                vec![],
                "malformed capability value",
            )
        };
        Ok(match code {
            cap_code::MULTIPROTOCOL => {
                let [a0, a1, _, safi] = <[u8; 4]>::try_from(value).map_err(|_| bad())?;
                Capability::Multiprotocol {
                    afi: u16::from_be_bytes([a0, a1]),
                    safi,
                }
            }
            cap_code::ROUTE_REFRESH if value.is_empty() => Capability::RouteRefresh,
            super::orf::CAPABILITY => {
                Capability::Orf(super::orf::decode_capability(value).ok_or_else(bad)?)
            }
            cap_code::FOUR_OCTET_AS => {
                let b = <[u8; 4]>::try_from(value).map_err(|_| bad())?;
                Capability::FourOctetAs(u32::from_be_bytes(b))
            }
            _ => Capability::Unknown {
                code,
                value: value.to_vec(),
            },
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let (code, value): (u8, Vec<u8>) = match self {
            Capability::Multiprotocol { afi, safi } => {
                let a = afi.to_be_bytes();
                (cap_code::MULTIPROTOCOL, vec![a[0], a[1], 0, *safi])
            }
            Capability::RouteRefresh => (cap_code::ROUTE_REFRESH, vec![]),
            Capability::Orf(families) => (
                super::orf::CAPABILITY,
                super::orf::encode_capability(families),
            ),
            Capability::FourOctetAs(asn) => (cap_code::FOUR_OCTET_AS, asn.to_be_bytes().to_vec()),
            Capability::Unknown { code, value } => (*code, value.clone()),
        };
        out.push(code);
        out.push(value.len().min(255) as u8);
        out.extend_from_slice(&value[..value.len().min(255)]);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Open {
    pub version: u8,
    /// The 2-octet "My Autonomous System" field (AS_TRANS for 4-octet ASNs).
    pub my_as: u16,
    pub hold_time: u16,
    pub bgp_id: Ipv4Addr,
    /// Capabilities in the order received; each one its own capability parameter.
    pub capabilities: Vec<Capability>,
}

impl Open {
    /// The OPEN fare sends: version 4, AS_TRANS for large ASNs, the given capabilities.
    pub fn new(asn: u32, hold_time: u16, bgp_id: Ipv4Addr, capabilities: Vec<Capability>) -> Open {
        Open {
            version: 4,
            my_as: u16::try_from(asn).unwrap_or(AS_TRANS),
            hold_time,
            bgp_id,
            capabilities,
        }
    }

    /// The sender's AS: from the 4-octet AS capability when present (RFC 6793).
    pub fn asn(&self) -> u32 {
        self.capabilities
            .iter()
            .find_map(|c| match c {
                Capability::FourOctetAs(asn) => Some(*asn),
                _ => None,
            })
            .unwrap_or(self.my_as as u32)
    }

    pub fn families(&self) -> Vec<Family> {
        self.capabilities
            .iter()
            .filter_map(Capability::family)
            .collect()
    }

    pub fn has(&self, wanted: &Capability) -> bool {
        self.capabilities.contains(wanted)
    }

    pub(super) fn decode(body: &[u8]) -> Result<Open, MessageError> {
        let length_err = || {
            MessageError::new(
                code::HEADER,
                super::error::header::BAD_MESSAGE_LENGTH,
                vec![],
                "OPEN shorter than its fields",
            )
        };
        let mut r = Reader::new(body);
        let version = r.u8().ok_or_else(length_err)?;
        if version != 4 {
            return Err(MessageError::new(
                code::OPEN,
                open::UNSUPPORTED_VERSION,
                4u16.to_be_bytes().to_vec(),
                "unsupported BGP version",
            ));
        }
        let my_as = r.u16().ok_or_else(length_err)?;
        let hold_time = r.u16().ok_or_else(length_err)?;
        let bgp_id = Ipv4Addr::from(r.u32().ok_or_else(length_err)?);
        let params_len = r.u8().ok_or_else(length_err)? as usize;
        if params_len != r.remaining() {
            return Err(MessageError::new(
                code::OPEN,
                0,
                vec![],
                "optional parameters length does not match the message",
            ));
        }
        if hold_time == 1 || hold_time == 2 {
            return Err(MessageError::new(
                code::OPEN,
                open::UNACCEPTABLE_HOLD_TIME,
                vec![],
                "hold time of 1 or 2 seconds",
            ));
        }
        if bgp_id.is_unspecified() {
            return Err(MessageError::new(
                code::OPEN,
                open::BAD_BGP_IDENTIFIER,
                vec![],
                "BGP identifier 0.0.0.0",
            ));
        }
        let mut capabilities = Vec::new();
        let param_err = || MessageError::new(code::OPEN, 0, vec![], "malformed optional parameter");
        while !r.is_empty() {
            let kind = r.u8().ok_or_else(param_err)?;
            let len = r.u8().ok_or_else(param_err)? as usize;
            let value = r.take(len).ok_or_else(param_err)?;
            if kind != 2 {
                return Err(MessageError::new(
                    code::OPEN,
                    open::UNSUPPORTED_OPTIONAL_PARAMETER,
                    vec![],
                    "optional parameter other than capabilities",
                ));
            }
            let mut caps = Reader::new(value);
            while !caps.is_empty() {
                let c = caps.u8().ok_or_else(param_err)?;
                let l = caps.u8().ok_or_else(param_err)? as usize;
                let v = caps.take(l).ok_or_else(param_err)?;
                capabilities.push(Capability::decode(c, v)?);
            }
        }
        Ok(Open {
            version,
            my_as,
            hold_time,
            bgp_id,
            capabilities,
        })
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.version);
        out.extend_from_slice(&self.my_as.to_be_bytes());
        out.extend_from_slice(&self.hold_time.to_be_bytes());
        out.extend_from_slice(&self.bgp_id.octets());
        // One capability per parameter (as most speakers send them); all in one parameter
        // when that would not fit the 255-octet parameters length.
        let mut params = Vec::new();
        for cap in &self.capabilities {
            let mut c = Vec::new();
            cap.encode(&mut c);
            params.push(2);
            params.push(c.len() as u8);
            params.extend_from_slice(&c);
        }
        if params.len() > 255 {
            let mut caps = Vec::new();
            for cap in &self.capabilities {
                cap.encode(&mut caps);
            }
            caps.truncate(255 - 2);
            params = vec![2, caps.len() as u8];
            params.extend_from_slice(&caps);
        }
        out.push(params.len().min(255) as u8);
        out.extend_from_slice(&params);
    }
}

#[cfg(test)]
mod tests {
    use super::super::orf::OrfFamily;
    use super::*;

    /// RFC 5291 §5: the ORF capability (code 3) is AFI, a reserved octet, SAFI, the
    /// number of ORF types, then (type, send/receive) pairs: IPv4 unicast, Address Prefix
    /// ORF (64), both directions (3).
    #[test]
    fn orf_capability_decodes_as_orf() {
        let value = [0x00, 0x01, 0x00, 0x01, 0x01, 0x40, 0x03];
        assert_eq!(
            Capability::decode(3, &value),
            Ok(Capability::Orf(vec![OrfFamily {
                afi: 1,
                safi: 1,
                types: vec![(64, 3)],
            }]))
        );
    }

    /// RFC 2918 §2: the Route Refresh capability (code 2) has length 0; one with a value
    /// is not understood and kept as received.
    #[test]
    fn route_refresh_capability_has_no_value() {
        assert_eq!(Capability::decode(2, &[]), Ok(Capability::RouteRefresh));
        assert_eq!(
            Capability::decode(2, &[0]),
            Ok(Capability::Unknown {
                code: 2,
                value: vec![0],
            })
        );
    }

    #[test]
    fn has_is_membership() {
        let open = Open::new(
            65001,
            90,
            Ipv4Addr::new(10, 0, 0, 1),
            vec![Capability::RouteRefresh, Capability::FourOctetAs(65001)],
        );
        assert!(open.has(&Capability::RouteRefresh));
        assert!(open.has(&Capability::FourOctetAs(65001)));
        assert!(!open.has(&Capability::FourOctetAs(65002)));
        assert!(!open.has(&Capability::Multiprotocol { afi: 1, safi: 1 }));
    }
}
