//! Deterministic Path Forwarding in the data plane (draft-wang-idr-dpf §2.2.3): flow
//! rules that give packets a color, and per-color groups of one prefix.
//!
//! A route whose paths carry several colors gets, besides its own group (every active
//! path), one group per active color. A packet whose first matching flow rule names one
//! of those colors is forwarded by that color's group; any other packet by the route's
//! group. Backup colors (paths outside the active set, e.g. the backup of a
//! primary/backup route) are listed too but do not forward: when the primary fails, BGP
//! makes the backups the route's active set.

use super::Member;
use ipnet::IpNet;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// The group of one color of a prefix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColorGroup {
    pub color: u32,
    /// True: the color's paths are in the route's active set (flows of this color use
    /// them). False: a backup color.
    pub active: bool,
    pub members: Vec<Member>,
}

/// An inclusive range of values, written `N` or `LO-HI` in the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub lo: u32,
    pub hi: u32,
}

impl Range {
    pub fn contains(&self, v: u32) -> bool {
        self.lo <= v && v <= self.hi
    }
}

/// Why a [`Range`] could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("`{0}` is not a number")]
    NotANumber(String),
    #[error("range {text}: {lo} > {hi}")]
    Reversed { text: String, lo: u32, hi: u32 },
}

impl FromStr for Range {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Range, RangeError> {
        let num = |t: &str| {
            let t = t.trim();
            let r = match t.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16),
                None => t.parse(),
            };
            r.map_err(|_| RangeError::NotANumber(t.to_string()))
        };
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let v = num(s)?;
                (v, v)
            }
        };
        if lo > hi {
            return Err(RangeError::Reversed {
                text: s.to_string(),
                lo,
                hi,
            });
        }
        Ok(Range { lo, hi })
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

impl<'de> Deserialize<'de> for Range {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Range, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(u32),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Num(v) => Ok(Range { lo: v, hi: v }),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for Range {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// IP protocol of a rule: a name or a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocol(pub u8);

impl<'de> Deserialize<'de> for Protocol {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Protocol, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(u8),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Num(v) => Ok(Protocol(v)),
            Raw::Text(t) => match t.to_ascii_lowercase().as_str() {
                "tcp" => Ok(Protocol(6)),
                "udp" => Ok(Protocol(17)),
                "sctp" => Ok(Protocol(132)),
                _ => Err(serde::de::Error::custom(format!(
                    "protocol `{t}`: use tcp, udp, sctp or a number"
                ))),
            },
        }
    }
}

impl Serialize for Protocol {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.0)
    }
}

/// One entry of `dpf.flows`: every field given must match; the first matching rule
/// gives the packet its color.
///
/// ```yaml
/// dpf:
///   flows:
///     - {color: 1, dscp: [26, 34]}                    # DSCP AF31/AF41 -> color 1
///     - {color: 2, protocol: udp, dst_port: 4791, qp: 0x100-0x1ff}  # RoCEv2 dest QP
///     - {color: 1, src: 10.1.0.0/16, dst_port: 5000-5999}
/// ```
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlowRule {
    /// The color (RFC 9012 Color Value) flows matching this rule use; not 0.
    pub color: u32,
    /// DSCP values (0..=63).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dscp: Vec<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpNet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpNet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_port: Option<Range>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<Range>,
    /// RoCEv2 destination QP (24 bits, from the BTH of UDP packets to port 4791).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp: Option<Range>,
}

/// RoCEv2's UDP destination port (IANA).
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// What is wrong with a [`FlowRule`] ([`FlowRule::check`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FlowRuleError {
    #[error("flow rule: color 0 is not a color")]
    ColorZero,
    #[error("flow rule: DSCP {0} is above 63")]
    Dscp(u8),
    #[error("flow rule: {field} {range} is above 65535")]
    Port { field: &'static str, range: Range },
    #[error("flow rule: qp {0} is above 0xffffff (24 bits)")]
    Qp(Range),
    #[error("flow rule: qp (RoCEv2) needs protocol udp")]
    QpNeedsUdp,
    #[error("flow rule: src and dst are of different address families")]
    MixedFamilies,
}

impl FlowRule {
    /// What is wrong with the rule, if anything.
    pub fn check(&self) -> Result<(), FlowRuleError> {
        if self.color == 0 {
            return Err(FlowRuleError::ColorZero);
        }
        if let Some(d) = self.dscp.iter().find(|d| **d > 63) {
            return Err(FlowRuleError::Dscp(*d));
        }
        for (field, r) in [("src_port", self.src_port), ("dst_port", self.dst_port)] {
            if let Some(range) = r {
                if range.hi > u32::from(u16::MAX) {
                    return Err(FlowRuleError::Port { field, range });
                }
            }
        }
        if let Some(q) = self.qp {
            if q.hi > 0x00ff_ffff {
                return Err(FlowRuleError::Qp(q));
            }
            if self.protocol.is_some_and(|p| p.0 != 17) {
                return Err(FlowRuleError::QpNeedsUdp);
            }
        }
        if let (Some(IpNet::V4(_)), Some(IpNet::V6(_))) | (Some(IpNet::V6(_)), Some(IpNet::V4(_))) =
            (self.src, self.dst)
        {
            return Err(FlowRuleError::MixedFamilies);
        }
        Ok(())
    }

    /// Reference semantics (what the XDP program implements), for tests and models.
    pub fn matches(&self, p: &FlowFields) -> bool {
        let in_net = |net: &Option<IpNet>, a: std::net::IpAddr| net.is_none_or(|n| n.contains(&a));
        (self.dscp.is_empty() || self.dscp.contains(&p.dscp))
            && self.protocol.is_none_or(|x| x.0 == p.protocol)
            && in_net(&self.src, p.src)
            && in_net(&self.dst, p.dst)
            && self
                .src_port
                .is_none_or(|r| p.ports.is_some_and(|(s, _)| r.contains(u32::from(s))))
            && self
                .dst_port
                .is_none_or(|r| p.ports.is_some_and(|(_, d)| r.contains(u32::from(d))))
            && self
                .qp
                .is_none_or(|r| p.dest_qp.is_some_and(|q| r.contains(q)))
    }
}

/// The packet fields flow rules look at.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowFields {
    pub dscp: u8,
    pub protocol: u8,
    pub src: std::net::IpAddr,
    pub dst: std::net::IpAddr,
    /// (source, destination) port; None for protocols without ports or fragments.
    pub ports: Option<(u16, u16)>,
    /// RoCEv2 destination QP (UDP to 4791 with a BTH), else None.
    pub dest_qp: Option<u32>,
}

/// The color of the first rule that matches, if any.
pub fn classify(rules: &[FlowRule], p: &FlowFields) -> Option<u32> {
    rules.iter().find(|r| r.matches(p)).map(|r| r.color)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(dscp: u8, dport: u16, qp: Option<u32>) -> FlowFields {
        FlowFields {
            dscp,
            protocol: 17,
            src: "10.1.0.1".parse().unwrap(),
            dst: "198.51.100.7".parse().unwrap(),
            ports: Some((50000, dport)),
            dest_qp: qp,
        }
    }

    fn rules(yaml: &str) -> Vec<FlowRule> {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn first_matching_rule_wins() {
        let r = rules(
            "- {color: 1, dscp: [26]}\n- {color: 2, protocol: udp, dst_port: 4791, qp: 0x100-0x1ff}\n- {color: 3, src: 10.1.0.0/16}\n",
        );
        for rule in &r {
            rule.check().unwrap();
        }
        assert_eq!(classify(&r, &fields(26, 4791, Some(0x150))), Some(1));
        assert_eq!(classify(&r, &fields(0, 4791, Some(0x150))), Some(2));
        assert_eq!(classify(&r, &fields(0, 4791, Some(0x200))), Some(3));
        let mut other = fields(0, 4791, Some(0x200));
        other.src = "10.2.0.1".parse().unwrap();
        assert_eq!(classify(&r, &other), None);
    }

    #[test]
    fn ranges_parse_in_both_forms() {
        let r = rules("- {color: 1, dst_port: 5000-5999, src_port: 7}\n");
        assert_eq!(r[0].dst_port, Some(Range { lo: 5000, hi: 5999 }));
        assert_eq!(r[0].src_port, Some(Range { lo: 7, hi: 7 }));
        assert!("9-3".parse::<Range>().is_err());
        assert!("x".parse::<Range>().is_err());
    }

    /// The limits themselves are allowed: DSCP 63, port 65535, QP 2^24 - 1, a range of one
    /// value (written back as one number), protocols by name.
    #[test]
    fn values_at_their_limits_are_accepted() {
        let r = rules(
            "- {color: 1, dscp: [63], src_port: 65535, dst_port: 0-65535, protocol: udp, qp: 0xffffff}\n",
        );
        assert!(r[0].check().is_ok());
        assert_eq!(
            "5-5".parse::<Range>().map(|r| r.to_string()).ok(),
            Some("5".into())
        );
        assert_eq!(Range { lo: 5, hi: 6 }.to_string(), "5-6");
        let protocols: Vec<Protocol> = serde_norway::from_str("[tcp, UDP, sctp, 47]").unwrap();
        assert_eq!(
            protocols,
            [Protocol(6), Protocol(17), Protocol(132), Protocol(47)]
        );
    }

    #[test]
    fn bad_rules_are_named() {
        let bad = [
            ("- {color: 0}\n", "color 0"),
            ("- {color: 1, dscp: [64]}\n", "DSCP 64"),
            ("- {color: 1, dst_port: 70000}\n", "above 65535"),
            ("- {color: 1, qp: 0x1000000}\n", "24 bits"),
            ("- {color: 1, protocol: tcp, qp: 5}\n", "needs protocol udp"),
            (
                "- {color: 1, src: 10.0.0.0/8, dst: '2001:db8::/32'}\n",
                "families",
            ),
        ];
        for (yaml, want) in bad {
            let e = rules(yaml)[0].check().unwrap_err().to_string();
            assert!(e.contains(want), "{yaml}: {e}");
        }
        assert!(
            serde_norway::from_str::<Vec<FlowRule>>("- {color: 1, protocol: icmpx}\n").is_err()
        );
    }
}
