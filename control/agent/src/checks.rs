//! The rules a BGP speaker applies to its own configuration, checked when a file is
//! loaded (`fare agent --check`, start-up and SIGHUP): reserved AS numbers, BGP
//! identifiers, hold times, neighbors (listed twice, iBGP), bandwidths the Path Bandwidth
//! community cannot carry, prefixes and interfaces given twice, prefixes with host bits,
//! session addresses of two families or link-local without a link. Each error names the line.

use crate::config::{AgentConfig, DataplaneConfig};
use fare_model::bandwidth;
use fare_model::bgp_ids;
use fare_model::yamlfile::{self, FileError};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

/// Linux interface names hold at most 15 bytes (IFNAMSIZ 16 with the NUL).
const IFNAME_MAX: usize = 15;

/// Where in the file a problem is: the text, and lines found in it.
struct Lines<'a> {
    path: &'a Path,
    text: &'a str,
    neighbors: Vec<usize>,
}

impl Lines<'_> {
    fn error(&self, line: Option<usize>, problem: String) -> FileError {
        FileError::new(self.path, line, problem)
    }

    /// The line of a top-level `key:`.
    fn key(&self, key: &str) -> Option<usize> {
        let needle = format!("{key}:");
        self.text
            .lines()
            .position(|l| l.starts_with(&needle))
            .map(|i| i + 1)
    }

    /// The line of `field:` in the `i`-th neighbor, else the line of its `nth`
    /// occurrence of `address` (flow-style lists), else `neighbors:`.
    fn neighbor(&self, i: usize, field: &str, address: &IpAddr, nth: usize) -> Option<usize> {
        if !self.neighbors.is_empty() {
            return yamlfile::item_field_line(self.text, &self.neighbors, i, field);
        }
        occurrence_line(self.text, &address.to_string(), 1, nth).or_else(|| self.key("neighbors"))
    }
}

/// The line of the `nth` (1-based) occurrence of `needle` at or after `from_line`, where
/// occurrences are whole words (not part of a longer name or address).
fn occurrence_line(text: &str, needle: &str, from_line: usize, nth: usize) -> Option<usize> {
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '/' | '_' | '-');
    text.lines()
        .enumerate()
        .skip(from_line.saturating_sub(1))
        .flat_map(|(i, l)| {
            l.match_indices(needle)
                .filter(move |(pos, _)| {
                    let before = l[..*pos].chars().next_back();
                    let after = l[pos + needle.len()..].chars().next();
                    !before.is_some_and(word) && !after.is_some_and(word)
                })
                .map(move |_| i + 1)
        })
        .nth(nth.saturating_sub(1))
}

/// Why `name` cannot be a Linux interface name, if it cannot.
fn check_ifname(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > IFNAME_MAX {
        return Err(format!(
            "interface name `{name}` must be 1 to {IFNAME_MAX} bytes long"
        ));
    }
    if name == "."
        || name == ".."
        || name.contains(['/', ':'])
        || name.contains(char::is_whitespace)
    {
        return Err(format!("`{name}` is not a valid interface name"));
    }
    Ok(())
}

impl AgentConfig {
    /// The speaker's rules (module comment); the first problem found comes back.
    pub(crate) fn check_speaker_rules(&self, path: &Path, text: &str) -> Result<(), FileError> {
        let at = Lines {
            path,
            text,
            neighbors: yamlfile::sequence_item_lines(text, "neighbors"),
        };
        bgp_ids::check_asn(self.asn).map_err(|e| at.error(at.key("asn"), format!("asn: {e}")))?;
        bgp_ids::check_router_id(self.router_id)
            .map_err(|e| at.error(at.key("router_id"), format!("router_id: {e}")))?;
        if matches!(self.bgp.hold_time, 1 | 2) {
            let bgp = at.key("bgp").unwrap_or(1);
            return Err(at.error(
                yamlfile::find_line(text, "hold_time", bgp),
                format!(
                    "bgp.hold_time: {} s; a hold time is 0 or at least 3 seconds (RFC 4271 §4.2)",
                    self.bgp.hold_time
                ),
            ));
        }
        if self.bgp.connect_retry_ms == 0
            || self.bgp.connect_retry_max_ms < self.bgp.connect_retry_ms
        {
            let bgp = at.key("bgp").unwrap_or(1);
            return Err(at.error(
                yamlfile::find_line(text, "connect_retry", bgp),
                "bgp: connect_retry_ms must be positive and at most connect_retry_max_ms".into(),
            ));
        }
        self.check_neighbors(&at)?;
        check_twice(
            &at,
            "prefixes",
            1,
            self.prefixes.iter().map(|p| p.to_string()),
            "prefix",
        )?;
        self.check_interfaces(&at)?;
        self.check_prefix_bits(&at)?;
        for g in &self.static_groups {
            for m in &g.members {
                if let Some(bw) = m.bandwidth_gbps {
                    bandwidth::check_gbps(bw).map_err(|e| {
                        let p = g.prefix.to_string();
                        at.error(
                            yamlfile::find_line(text, &p, 1),
                            format!(
                                "static group {p}: member on {}: bandwidth_gbps: {e}",
                                m.interface
                            ),
                        )
                    })?;
                }
            }
        }
        Ok(())
    }

    fn check_neighbors(&self, at: &Lines) -> Result<(), FileError> {
        let mut first: BTreeMap<IpAddr, usize> = BTreeMap::new();
        for (i, n) in self.neighbors.iter().enumerate() {
            let a = n.address;
            let seen = first.get(&a).copied();
            let nth = if seen.is_some() { 2 } else { 1 };
            let line = |field: &str| at.neighbor(i, field, &a, nth);
            if let Some(j) = seen {
                let first_line = at
                    .neighbors
                    .get(j)
                    .copied()
                    .or_else(|| occurrence_line(at.text, &a.to_string(), 1, 1))
                    .map(|l| format!(" (first at line {l})"))
                    .unwrap_or_default();
                return Err(at.error(
                    line("address"),
                    format!("neighbor {a} is listed twice{first_line}"),
                ));
            }
            first.insert(a, i);
            if a.is_unspecified()
                || a.is_multicast()
                || matches!(a, IpAddr::V4(v4) if v4.is_broadcast())
            {
                return Err(at.error(
                    line("address"),
                    format!("neighbor {a}: not a unicast address"),
                ));
            }
            if n.remote_as == self.asn {
                return Err(at.error(
                    line("remote_as"),
                    format!(
                        "neighbor {a}: remote_as {} is this node's own AS; iBGP is not supported, \
                         every session is eBGP",
                        n.remote_as
                    ),
                ));
            }
            bgp_ids::check_asn(n.remote_as).map_err(|e| {
                at.error(line("remote_as"), format!("neighbor {a}: remote_as: {e}"))
            })?;
            if let Some(bw) = n.bandwidth_gbps {
                bandwidth::check_gbps(bw).map_err(|e| {
                    at.error(
                        line("bandwidth_gbps"),
                        format!("neighbor {a}: bandwidth_gbps: {e}"),
                    )
                })?;
            }
            if let Some(name) = &n.interface {
                check_ifname(name)
                    .map_err(|e| at.error(line("interface"), format!("neighbor {a}: {e}")))?;
            }
            check_session_addresses(n).map_err(|(field, e)| at.error(line(field), e))?;
            for (field, list) in [("orf_send", &n.orf_send), ("upa_hosts", &n.upa_hosts)] {
                if let Some(e) = list.iter().find_map(|p| host_bits(p).err()) {
                    return Err(at.error(line(field), format!("neighbor {a}: {field}: {e}")));
                }
            }
            if n.md5_password
                .as_ref()
                .is_some_and(|k| k.is_empty() || k.len() > 80)
            {
                return Err(at.error(
                    line("md5_password"),
                    format!("neighbor {a}: md5_password must be 1 to 80 octets (RFC 2385)"),
                ));
            }
        }
        Ok(())
    }

    /// Interface names valid and none given twice in one list of the data plane.
    fn check_interfaces(&self, at: &Lines) -> Result<(), FileError> {
        let from = at.key("dataplane").unwrap_or(1);
        let (lists, queues): (Vec<(&str, &Vec<String>)>, Vec<String>) = match &self.dataplane {
            DataplaneConfig::Xdp {
                interfaces,
                egress_spray,
                queues,
                ..
            } => (
                vec![("interfaces", interfaces), ("egress_spray", egress_spray)],
                queues.iter().map(|q| q.interface.clone()).collect(),
            ),
            DataplaneConfig::Kernel { interfaces } => (vec![("interfaces", interfaces)], vec![]),
            _ => (vec![], vec![]),
        };
        for (key, names) in lists.iter().copied().chain([("queues", &queues)]) {
            let key_line = yamlfile::find_line(at.text, &format!("{key}:"), from).or(Some(from));
            if let Some(bad) = names.iter().find_map(|n| check_ifname(n).err()) {
                return Err(at.error(key_line, format!("dataplane.{key}: {bad}")));
            }
            check_twice(at, key, from, names.iter().cloned(), "interface").map_err(|e| {
                FileError {
                    problem: format!("dataplane.{key}: {}", e.problem),
                    ..e
                }
            })?;
        }
        Ok(())
    }
}

/// A prefix's address must be its network's (`192.0.2.0/24`, not `192.0.2.1/24`): the NLRI
/// carries only the prefix's bits (RFC 4271 §4.3), so the route sent would be another (FRR
/// 8.4 takes `network 192.0.2.1/24` and announces 192.0.2.0/24; BIRD refuses it).
fn host_bits(p: &ipnet::IpNet) -> Result<(), String> {
    if *p == p.trunc() {
        return Ok(());
    }
    Err(format!(
        "prefix {p} has host bits set (the network is {})",
        p.trunc()
    ))
}

/// The session's addresses usable as given: `local_address` of the neighbor's family, and
/// an IPv6 link-local neighbor (fe80::/10) with the `interface` whose link it is on (its
/// scope). The error names the field.
fn check_session_addresses(
    n: &crate::config::NeighborConfig,
) -> Result<(), (&'static str, String)> {
    let a = n.address;
    if let Some(l) = n.local_address {
        if l.is_ipv4() != a.is_ipv4() {
            let family = |x: IpAddr| if x.is_ipv4() { "IPv4" } else { "IPv6" };
            return Err((
                "local_address",
                format!(
                    "neighbor {a}: local_address {l} is {}, the neighbor {}; both ends of a \
                     session are of one address family",
                    family(l),
                    family(a)
                ),
            ));
        }
    }
    let link_local = |x: IpAddr| matches!(x, IpAddr::V6(v6) if v6.is_unicast_link_local());
    if n.interface.is_none() {
        if link_local(a) {
            return Err((
                "address",
                format!(
                    "neighbor {a}: a link-local address needs `interface`, the link it is on \
                     (its scope)"
                ),
            ));
        }
        if let Some(l) = n.local_address.filter(|l| link_local(*l)) {
            return Err((
                "local_address",
                format!(
                    "neighbor {a}: local_address {l} is link-local and needs `interface`, \
                     the link it is on (its scope)"
                ),
            ));
        }
    }
    Ok(())
}

impl AgentConfig {
    /// Prefixes originated and static groups' prefixes without host bits.
    fn check_prefix_bits(&self, at: &Lines) -> Result<(), FileError> {
        let from = at.key("prefixes").unwrap_or(1);
        if let Some(p) = self.prefixes.iter().find(|p| host_bits(p).is_err()) {
            let line = occurrence_line(at.text, &p.to_string(), from, 1).or(Some(from));
            return Err(at.error(line, host_bits(p).err().unwrap_or_default()));
        }
        let from = at.key("static").unwrap_or(1);
        if let Some(g) = self
            .static_groups
            .iter()
            .find(|g| host_bits(&g.prefix).is_err())
        {
            let p = g.prefix.to_string();
            let line = occurrence_line(at.text, &p, from, 1).or(Some(from));
            let e = host_bits(&g.prefix).err().unwrap_or_default();
            return Err(at.error(line, format!("static group {p}: {e}")));
        }
        Ok(())
    }
}

/// Refuses a value given twice in the list under `key` (searched from `from` on): the
/// error points at the second occurrence.
fn check_twice(
    at: &Lines,
    key: &str,
    from: usize,
    values: impl Iterator<Item = String>,
    what: &str,
) -> Result<(), FileError> {
    let mut seen = std::collections::BTreeSet::new();
    for v in values {
        if !seen.insert(v.clone()) {
            let key_line = yamlfile::find_line(at.text, &format!("{key}:"), from).unwrap_or(from);
            let line = occurrence_line(at.text, &v, key_line, 2)
                .or_else(|| occurrence_line(at.text, &v, key_line, 1))
                .or(Some(key_line));
            return Err(at.error(line, format!("{what} {v} is given twice")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "name: l1
router_id: 10.0.0.1
asn: 65001
bgp: {hold_time: 9}
dataplane: {kind: xdp, interfaces: [eth1, eth2], egress_spray: [eth1]}
neighbors:
  - address: 10.1.0.2
    remote_as: 65100
    interface: eth1
    bandwidth_gbps: 100
  - {address: 10.1.0.6, remote_as: 65100, interface: eth2}
prefixes: [192.0.2.0/24, 198.51.100.0/24]
";

    /// The error `BASE` with `from` replaced by `to` gives, as the user sees it.
    fn error(from: &str, to: &str) -> String {
        assert!(BASE.contains(from), "{from}");
        let text = BASE.replacen(from, to, 1);
        let path = Path::new("c.yaml");
        let c: AgentConfig = yamlfile::parse(path, &text).expect("parses");
        c.validate(path, &text).expect_err(to).to_string()
    }

    fn passes(text: &str) {
        let c: AgentConfig = yamlfile::parse(Path::new("c.yaml"), text).expect("parses");
        c.validate(Path::new("c.yaml"), text).expect("valid");
    }

    #[test]
    fn the_base_file_passes() {
        passes(BASE);
        for ok in ["hold_time: 0", "hold_time: 3", "hold_time: 65535"] {
            passes(&BASE.replace("hold_time: 9", ok));
        }
    }

    #[test]
    fn reserved_as_numbers_and_identifiers() {
        assert_eq!(
            error("asn: 65001", "asn: 0"),
            "c.yaml:3: asn: AS 0 is reserved (RFC 7607)"
        );
        assert_eq!(
            error("asn: 65001", "asn: 23456"),
            "c.yaml:3: asn: AS 23456 is AS_TRANS, reserved for 2-octet fields (RFC 6793)"
        );
        assert_eq!(
            error("asn: 65001", "asn: 65535"),
            "c.yaml:3: asn: AS 65535 is reserved (RFC 7300)"
        );
        assert_eq!(
            error("asn: 65001", "asn: 4294967295"),
            "c.yaml:3: asn: AS 4294967295 is reserved (RFC 7300)"
        );
        assert_eq!(
            error("asn: 65001", "asn: 70000"),
            "c.yaml:3: asn: AS 70000 is in 65552-131071, reserved by IANA"
        );
        assert_eq!(
            error("remote_as: 65100\n", "remote_as: 0\n"),
            "c.yaml:8: neighbor 10.1.0.2: remote_as: AS 0 is reserved (RFC 7607)"
        );
        assert_eq!(
            error("router_id: 10.0.0.1", "router_id: 0.0.0.0"),
            "c.yaml:2: router_id: 0.0.0.0 is not a BGP identifier (RFC 6286: it must be non-zero)"
        );
        assert_eq!(
            error("router_id: 10.0.0.1", "router_id: 224.0.0.5"),
            "c.yaml:2: router_id: 224.0.0.5 is not a host address, which RFC 4271 §6.2 \
             speakers refuse as a BGP identifier"
        );
        // Private (RFC 6996) and documentation (RFC 5398) numbers are fine.
        for ok in [
            "asn: 64512",
            "asn: 65534",
            "asn: 64496",
            "asn: 4200000000",
            "asn: 4294967294",
        ] {
            passes(&BASE.replace("asn: 65001", ok));
        }
    }

    #[test]
    fn hold_time_of_1_or_2() {
        for h in [1, 2] {
            assert_eq!(
                error("hold_time: 9", &format!("hold_time: {h}")),
                format!(
                    "c.yaml:4: bgp.hold_time: {h} s; a hold time is 0 or at least 3 seconds \
                     (RFC 4271 §4.2)"
                )
            );
        }
    }

    #[test]
    fn neighbors_twice_and_ibgp() {
        assert_eq!(
            error("address: 10.1.0.6", "address: 10.1.0.2"),
            "c.yaml:11: neighbor 10.1.0.2 is listed twice (first at line 7)"
        );
        assert_eq!(
            error("remote_as: 65100\n", "remote_as: 65001\n"),
            "c.yaml:8: neighbor 10.1.0.2: remote_as 65001 is this node's own AS; iBGP is not \
             supported, every session is eBGP"
        );
        assert!(error(
            "remote_as: 65100, interface: eth2",
            "remote_as: 65001, interface: eth2"
        )
        .starts_with("c.yaml:11: neighbor 10.1.0.6: remote_as 65001 is this node's own AS"));
        // A flow-style list: the line of the second occurrence of the address.
        let flow = "neighbors: [{address: 10.1.0.2, remote_as: 65100}, \
                    {address: 10.1.0.20, remote_as: 65100}]\n";
        let block = &BASE[BASE.find("neighbors:").unwrap()..BASE.find("prefixes:").unwrap()];
        let text = BASE.replace(block, flow).replace("10.1.0.20", "10.1.0.2");
        let c: AgentConfig = yamlfile::parse(Path::new("c.yaml"), &text).unwrap();
        let e = c
            .validate(Path::new("c.yaml"), &text)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "c.yaml:6: neighbor 10.1.0.2 is listed twice (first at line 6)"
        );
        assert_eq!(
            error("address: 10.1.0.6", "address: 0.0.0.0"),
            "c.yaml:11: neighbor 0.0.0.0: not a unicast address"
        );
    }

    #[test]
    fn bandwidths_the_community_cannot_carry() {
        let range = "is outside what the Path Bandwidth community carries \
                     (0.00048828125 to 524032 Gbps, binary16 GB/s)";
        for (bad, shown) in [
            ("1e300", "1e300"),
            ("0", "0"),
            ("-5", "-5"),
            (".nan", "NaN"),
            (".inf", "inf"),
            ("524033", "524033"),
            ("0.0001", "0.0001"),
            ("1e-9", "1e-9"),
        ] {
            assert_eq!(
                error("bandwidth_gbps: 100", &format!("bandwidth_gbps: {bad}")),
                format!("c.yaml:10: neighbor 10.1.0.2: bandwidth_gbps: {shown} Gbps {range}")
            );
        }
        // The bounds themselves are carried.
        for ok in ["524032", "0.00048828125"] {
            passes(&BASE.replace("bandwidth_gbps: 100", &format!("bandwidth_gbps: {ok}")));
        }
    }

    #[test]
    fn prefixes_and_interfaces_twice() {
        assert_eq!(
            error("198.51.100.0/24]", "192.0.2.0/24]"),
            "c.yaml:12: prefix 192.0.2.0/24 is given twice"
        );
        assert_eq!(
            error("interfaces: [eth1, eth2]", "interfaces: [eth1, eth1]"),
            "c.yaml:5: dataplane.interfaces: interface eth1 is given twice"
        );
        assert_eq!(
            error("egress_spray: [eth1]", "egress_spray: [eth1, eth1]"),
            "c.yaml:5: dataplane.egress_spray: interface eth1 is given twice"
        );
        assert_eq!(
            error("interfaces: [eth1, eth2]", "interfaces: [eth1, a-name-of-16-byte]"),
            "c.yaml:5: dataplane.interfaces: interface name `a-name-of-16-byte` must be 1 to 15 bytes long"
        );
        assert_eq!(
            error("interface: eth1", "interface: eth/1"),
            "c.yaml:9: neighbor 10.1.0.2: `eth/1` is not a valid interface name"
        );
    }

    #[test]
    fn session_addresses_a_speaker_cannot_use() {
        passes(&BASE.replace(
            "interface: eth1\n",
            "interface: eth1\n    local_address: 10.1.0.1\n",
        ));
        let v6 = BASE.replace("address: 10.1.0.2", "address: 2001:db8::2");
        passes(&v6.replace(
            "interface: eth1\n",
            "interface: eth1\n    local_address: 2001:db8::1\n",
        ));
        let text = v6.replace(
            "interface: eth1\n",
            "interface: eth1\n    local_address: 10.1.0.1\n",
        );
        assert_eq!(
            refused(&text),
            "c.yaml:10: neighbor 2001:db8::2: local_address 10.1.0.1 is IPv4, the neighbor \
             IPv6; both ends of a session are of one address family"
        );
        assert_eq!(
            error(
                "interface: eth1\n",
                "interface: eth1\n    local_address: 2001:db8::1\n"
            ),
            "c.yaml:10: neighbor 10.1.0.2: local_address 2001:db8::1 is IPv6, the neighbor \
             IPv4; both ends of a session are of one address family"
        );
        // fe80::/10 is scoped to a link: the interface says which.
        let ll = BASE.replace("address: 10.1.0.2", "address: fe80::2");
        passes(&ll);
        assert_eq!(
            refused(&ll.replace("    interface: eth1\n", "")),
            "c.yaml:7: neighbor fe80::2: a link-local address needs `interface`, the link it \
             is on (its scope)"
        );
        assert_eq!(
            refused(&v6.replace("    interface: eth1\n", "    local_address: fe80::1\n")),
            "c.yaml:9: neighbor 2001:db8::2: local_address fe80::1 is link-local and needs \
             `interface`, the link it is on (its scope)"
        );
        // fec0:: (site-local, deprecated) and IPv4 link-local are not scoped this way.
        passes(&BASE.replace("address: 10.1.0.6", "address: 169.254.0.6"));
    }

    #[test]
    fn prefixes_with_host_bits() {
        assert_eq!(
            error("prefixes: [192.0.2.0/24", "prefixes: [192.0.2.1/24"),
            "c.yaml:12: prefix 192.0.2.1/24 has host bits set (the network is 192.0.2.0/24)"
        );
        passes(&BASE.replace("192.0.2.0/24", "192.0.2.1/32"));
        let v6 = BASE.replace("198.51.100.0/24]", "2001:db8::1/64]");
        assert_eq!(
            refused(&v6),
            "c.yaml:12: prefix 2001:db8::1/64 has host bits set (the network is 2001:db8::/64)"
        );
        assert_eq!(
            error(
                "interface: eth1\n",
                "interface: eth1\n    orf_send: [10.9.0.1/16]\n"
            ),
            "c.yaml:10: neighbor 10.1.0.2: orf_send: prefix 10.9.0.1/16 has host bits set \
             (the network is 10.9.0.0/16)"
        );
        let statics = format!(
            "{BASE}static:\n  - prefix: 198.18.3.4/16\n    members: [{{interface: eth1, \
             neighbor_mac: \"02:00:00:00:00:01\", weight: 1}}]\n"
        );
        assert_eq!(
            refused(&statics),
            "c.yaml:14: static group 198.18.3.4/16: prefix 198.18.3.4/16 has host bits set \
             (the network is 198.18.0.0/16)"
        );
    }

    fn refused(text: &str) -> String {
        let path = Path::new("c.yaml");
        let c: AgentConfig = yamlfile::parse(path, text).expect("parses");
        c.validate(path, text).expect_err("refused").to_string()
    }
}
