//! Ethernet MAC addresses as they appear in configuration (`"02:00:00:00:00:01"`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid MAC address {0:?} (expected six hex octets like 02:00:00:00:00:01)")]
pub struct MacParseError(String);

impl FromStr for MacAddr {
    type Err = MacParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || MacParseError(s.to_string());
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in out.iter_mut() {
            let p = parts.next().ok_or_else(err)?;
            if p.len() != 2 {
                return Err(err());
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| err())?;
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(MacAddr(out))
    }
}

impl Serialize for MacAddr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let m: MacAddr = "02:00:0A:00:00:01".parse().unwrap();
        assert_eq!(m.0, [2, 0, 0xa, 0, 0, 1]);
        assert_eq!(m.to_string(), "02:00:0a:00:00:01");
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:02",
            "zz:00:00:00:00:01",
            "2:0:0:0:0:1",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
    }

    /// In a configuration file: read and written as the text form.
    #[test]
    fn reads_and_writes_yaml() {
        let m: MacAddr = serde_norway::from_str("\"02:fa:4e:00:00:07\"").unwrap();
        assert_eq!(m.0, [2, 0xfa, 0x4e, 0, 0, 7]);
        assert_eq!(
            serde_norway::to_string(&m).unwrap().trim(),
            "02:fa:4e:00:00:07"
        );
        assert!(serde_norway::from_str::<MacAddr>("\"02:fa\"").is_err());
    }
}
