//! The AS numbers and BGP identifiers a speaker may be configured with. Agent
//! configurations and topologies both check theirs here, so the two agree.
//!
//! AS numbers refused: 0 (RFC 7607: never used, a speaker treats it as an error),
//! 23456 (AS_TRANS, RFC 6793: stands in for a 4-octet AS in 2-octet fields, never a
//! speaker's own), 65535 and 4294967295 (RFC 7300: the last 2-octet and 4-octet numbers,
//! reserved) and 65552-131071 (reserved by IANA, never assigned). Accepted: the private
//! ranges 64512-65534 and 4200000000-4294967294 (RFC 6996, what fabrics use, RFC 7938)
//! and the documentation ranges 64496-64511 and 65536-65551 (RFC 5398, used in examples).

use std::net::Ipv4Addr;

/// AS_TRANS (RFC 6793).
pub const AS_TRANS: u32 = 23456;

/// Why `asn` cannot be a speaker's AS number, if it cannot.
pub fn check_asn(asn: u32) -> Result<(), String> {
    let why = match asn {
        0 => "AS 0 is reserved (RFC 7607)",
        AS_TRANS => "AS 23456 is AS_TRANS, reserved for 2-octet fields (RFC 6793)",
        65535 => "AS 65535 is reserved (RFC 7300)",
        4_294_967_295 => "AS 4294967295 is reserved (RFC 7300)",
        65_552..=131_071 => return Err(format!("AS {asn} is in 65552-131071, reserved by IANA")),
        _ => return Ok(()),
    };
    Err(why.to_string())
}

/// Why `id` cannot be a BGP identifier, if it cannot: 0.0.0.0 (RFC 6286 §2.1: a non-zero
/// number; fare's and other speakers' OPEN decoders refuse it), and addresses that are no
/// host address (multicast, 255.255.255.255), which speakers following RFC 4271 §6.2 refuse.
pub fn check_router_id(id: Ipv4Addr) -> Result<(), String> {
    if id.is_unspecified() {
        return Err("0.0.0.0 is not a BGP identifier (RFC 6286: it must be non-zero)".into());
    }
    if id.is_multicast() || id.is_broadcast() {
        return Err(format!(
            "{id} is not a host address, which RFC 4271 §6.2 speakers refuse as a BGP identifier"
        ));
    }
    Ok(())
}

/// The BGP identifier of node `index` (its position in the topology file): the configured
/// one, else 10.255.0.0 + index. The lab configures its speakers with it and the model
/// breaks FRR's best-path ties by it (`bgp bestpath compare-routerid`), so both use this.
pub fn router_id(configured: Option<Ipv4Addr>, index: usize) -> Ipv4Addr {
    configured.unwrap_or_else(|| {
        let base = u32::from(Ipv4Addr::new(10, 255, 0, 0));
        Ipv4Addr::from(base.wrapping_add(index as u32))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_as_numbers() {
        for bad in [0, 23456, 65535, 65552, 100_000, 131_071, 4_294_967_295] {
            assert!(check_asn(bad).is_err(), "{bad}");
        }
        for ok in [
            1,
            64496,
            64512,
            65001,
            65534,
            65536,
            65551,
            131_072,
            4_200_000_000,
            4_294_967_294,
        ] {
            assert_eq!(check_asn(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn default_router_ids_count_from_10_255_0_0() {
        let set: Ipv4Addr = "10.0.0.7".parse().unwrap();
        assert_eq!(router_id(Some(set), 3), set);
        assert_eq!(router_id(None, 0), Ipv4Addr::new(10, 255, 0, 0));
        assert_eq!(router_id(None, 258), Ipv4Addr::new(10, 255, 1, 2));
    }

    #[test]
    fn bgp_identifiers() {
        for bad in ["0.0.0.0", "224.0.0.1", "239.255.255.255", "255.255.255.255"] {
            assert!(check_router_id(bad.parse().unwrap()).is_err(), "{bad}");
        }
        for ok in ["10.0.0.1", "0.0.0.1", "100.64.0.1", "240.0.0.1"] {
            assert_eq!(check_router_id(ok.parse().unwrap()), Ok(()), "{ok}");
        }
    }
}
