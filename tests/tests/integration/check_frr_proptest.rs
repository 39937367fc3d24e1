//! Property: what `fare agent --check` accepts runs, and what it refuses no speaker could
//! run. Generated session configurations — the neighbor's address family (IPv4, IPv6,
//! IPv6 link-local), `local_address` (none, same family, other family), `interface` (none,
//! the real veth, a name that does not exist), an originated prefix with or without host
//! bits, the hold time, 2-octet, 4-octet and reserved AS numbers — go through `--check`.
//!
//! - Accepted (exit 0): a fresh namespace pair runs FRR's bgpd with the mirrored
//!   configuration on one side and the agent on the other; both must report the session
//!   Established (`fare show neighbors --json`, `show bgp neighbors json`). The one
//!   host-dependent exception: a link-local address whose `interface` (its zone) does not
//!   exist passes `--check`, which cannot know the host, and the agent's start refuses it.
//! - Refused (exit 2, one line `FILE:LINE: problem`): the rules the case breaks are worked
//!   out here from the generated values, not from fare's code; there is at least one, the
//!   line fare names is one of the broken fields', and each broken rule is judged as
//!   [`RULES`] says: FRR refuses the mirrored line (and takes the valid one), FRR rewrites
//!   the prefix into another, or the kernel refuses the socket; the RFC is named there.
//!
//! iBGP (`remote_as` = `asn`) is left out: fare refuses it as a limitation of its own, not
//! as a rule of BGP. Fixed cases cover every value once, then 64 generated ones (shrunk on
//! failure, with bounded shrinking); every wait is bounded.

use fare_integration::agent::{run_refused, TempDir};
use fare_integration::bgp::{have_frr, pair, wait_for, Frr};
use fare_integration::{fare_bin, Netns};
use ipnet::IpNet;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The agent's end of the veth ([`pair`]) and FRR's.
const FARE_IF: &str = "pa0";
const FRR_IF: &str = "pb0";
/// An interface name Linux allows that no namespace of the test has.
const MISSING_IF: &str = "nosuch0";
/// The AS of the judge bgpd that refusals are tried on.
const JUDGE_AS: u32 = 65002;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Family {
    V4,
    V6,
    LinkLocal,
}

impl Family {
    /// FRR's address on the link (the agent's neighbor).
    fn peer(self) -> IpAddr {
        ip(match self {
            Family::V4 => "10.0.0.2",
            Family::V6 => "fd00::2",
            Family::LinkLocal => "fe80::2",
        })
    }

    /// The agent's address of this family (FRR's neighbor).
    fn own(self) -> IpAddr {
        ip(match self {
            Family::V4 => "10.0.0.1",
            Family::V6 => "fd00::1",
            Family::LinkLocal => "fe80::1",
        })
    }

    /// The agent's address of the other family.
    fn other(self) -> IpAddr {
        ip(match self {
            Family::V4 => "fd00::1",
            _ => "10.0.0.1",
        })
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("a literal address")
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Local {
    None,
    Same,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Iface {
    None,
    Veth,
    Missing,
}

/// One generated session configuration of the agent.
#[derive(Clone, Debug)]
struct Case {
    family: Family,
    local: Local,
    iface: Iface,
    /// The originated prefix as written (perhaps with host bits).
    prefix: IpNet,
    hold_time: u16,
    asn: u32,
    remote_as: u32,
}

/// A field of the generated file (its line is where fare must point).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Field {
    Asn,
    HoldTime,
    Address,
    RemoteAs,
    LocalAddress,
    Prefix,
}

/// A rule of BGP, TCP or IPv6 addressing a case can break.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rule {
    HoldTime(u16),
    LocalAs(u32),
    RemoteAs(u32),
    MixedFamily,
    LinkLocalNeighbor,
    LinkLocalSource,
    HostBits,
}

/// Who says a broken rule makes the session impossible.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Judge {
    /// FRR refuses the mirrored configuration line (and takes a valid one in its place).
    FrrRefuses,
    /// FRR takes the line but keeps another prefix: the route announced is not the one
    /// written.
    FrrRewrites,
    /// The kernel refuses the session's socket.
    Kernel,
    /// FRR takes the value; the RFC forbids it.
    Rfc,
}

/// The table: each rule, who judges it and the RFC (or the reason) behind it.
const RULES: &[(&str, Judge, &str)] = &[
    (
        "hold time 1 or 2",
        Judge::FrrRefuses,
        "RFC 4271 §4.2: the Hold Time is zero or at least three seconds",
    ),
    (
        "AS 0",
        Judge::FrrRefuses,
        "RFC 7607 §2: AS 0 is never a speaker's AS; an OPEN carrying it is refused",
    ),
    (
        "AS 23456",
        Judge::Rfc,
        "RFC 6793: AS_TRANS stands in for a 4-octet AS in 2-octet fields, it is no AS of its own",
    ),
    (
        "AS 65535 or 4294967295",
        Judge::Rfc,
        "RFC 7300: the last 2-octet and 4-octet AS numbers are reserved, not to be used",
    ),
    (
        "AS 65552-131071",
        Judge::Rfc,
        "the IANA Autonomous System Numbers registry: reserved, never assigned",
    ),
    (
        "local_address of the other family",
        Judge::Kernel,
        "the two ends of a TCP connection are addresses of one IP version: a socket of the \
         neighbor's family cannot bind the other family's address",
    ),
    (
        "link-local neighbor without interface",
        Judge::Kernel,
        "RFC 4007 §6 and RFC 4291 §2.5.6: a link-local address means something only with its \
         zone (the link); the kernel refuses to connect to one without it",
    ),
    (
        "link-local local_address without interface",
        Judge::Kernel,
        "RFC 4007 §6: as above; the kernel refuses to bind one without its zone",
    ),
    (
        "prefix with host bits",
        Judge::FrrRewrites,
        "RFC 4271 §4.3: the NLRI carries only the prefix's first Length bits, so the host \
         bits cannot be announced; FRR announces the network instead",
    ),
];

impl Rule {
    /// The row of [`RULES`] for this rule.
    fn row(self) -> &'static (&'static str, Judge, &'static str) {
        let key = match self {
            Rule::HoldTime(_) => "hold time 1 or 2",
            Rule::LocalAs(0) | Rule::RemoteAs(0) => "AS 0",
            Rule::LocalAs(23456) | Rule::RemoteAs(23456) => "AS 23456",
            Rule::LocalAs(65535 | 4_294_967_295) | Rule::RemoteAs(65535 | 4_294_967_295) => {
                "AS 65535 or 4294967295"
            }
            Rule::LocalAs(_) | Rule::RemoteAs(_) => "AS 65552-131071",
            Rule::MixedFamily => "local_address of the other family",
            Rule::LinkLocalNeighbor => "link-local neighbor without interface",
            Rule::LinkLocalSource => "link-local local_address without interface",
            Rule::HostBits => "prefix with host bits",
        };
        RULES
            .iter()
            .find(|r| r.0 == key)
            .expect("every rule has a row")
    }

    fn field(self) -> Field {
        match self {
            Rule::HoldTime(_) => Field::HoldTime,
            Rule::LocalAs(_) => Field::Asn,
            Rule::RemoteAs(_) => Field::RemoteAs,
            Rule::MixedFamily | Rule::LinkLocalSource => Field::LocalAddress,
            Rule::LinkLocalNeighbor => Field::Address,
            Rule::HostBits => Field::Prefix,
        }
    }
}

/// Reserved AS numbers (RFC 7607, RFC 6793, RFC 7300, the IANA registry).
fn reserved_as(asn: u32) -> bool {
    matches!(asn, 0 | 23456 | 65535 | 4_294_967_295 | 65_552..=131_071)
}

fn link_local(a: IpAddr) -> bool {
    matches!(a, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80)
}

impl Case {
    fn neighbor(&self) -> IpAddr {
        self.family.peer()
    }

    fn local_address(&self) -> Option<IpAddr> {
        match self.local {
            Local::None => None,
            Local::Same => Some(self.family.own()),
            Local::Other => Some(self.family.other()),
        }
    }

    fn interface(&self) -> Option<&'static str> {
        match self.iface {
            Iface::None => None,
            Iface::Veth => Some(FARE_IF),
            Iface::Missing => Some(MISSING_IF),
        }
    }

    /// A link-local address (neighbor or source) on an interface the host does not have.
    fn zone_missing(&self) -> bool {
        let ll = link_local(self.neighbor()) || self.local_address().is_some_and(link_local);
        ll && self.iface == Iface::Missing
    }

    /// The rules this case breaks, from its values.
    fn broken(&self) -> Vec<Rule> {
        let mut rules = Vec::new();
        if matches!(self.hold_time, 1 | 2) {
            rules.push(Rule::HoldTime(self.hold_time));
        }
        if reserved_as(self.asn) {
            rules.push(Rule::LocalAs(self.asn));
        }
        if reserved_as(self.remote_as) {
            rules.push(Rule::RemoteAs(self.remote_as));
        }
        let local = self.local_address();
        if local.is_some_and(|l| l.is_ipv4() != self.neighbor().is_ipv4()) {
            rules.push(Rule::MixedFamily);
        }
        if self.interface().is_none() {
            if link_local(self.neighbor()) {
                rules.push(Rule::LinkLocalNeighbor);
            }
            if local.is_some_and(link_local) {
                rules.push(Rule::LinkLocalSource);
            }
        }
        if self.prefix != self.prefix.trunc() {
            rules.push(Rule::HostBits);
        }
        rules
    }

    /// The agent's configuration file, and the line of each field in it.
    fn yaml(&self, socket: &str) -> (String, BTreeMap<Field, usize>) {
        let mut lines: Vec<String> = vec![
            "name: prop".into(),
            "router_id: 10.0.0.1".into(),
            format!("asn: {}", self.asn),
            format!("management: {{socket: {socket}}}"),
            "dataplane: {kind: none}".into(),
            "bgp:".into(),
            format!("  hold_time: {}", self.hold_time),
            "  connect_retry_ms: 200".into(),
            "  connect_retry_max_ms: 1000".into(),
            "neighbors:".into(),
            format!("  - address: {}", self.neighbor()),
            format!("    remote_as: {}", self.remote_as),
            "    bandwidth_gbps: 100".into(),
        ];
        let mut at = BTreeMap::from([
            (Field::Asn, 3),
            (Field::HoldTime, 7),
            (Field::Address, 11),
            (Field::RemoteAs, 12),
        ]);
        if let Some(l) = self.local_address() {
            lines.push(format!("    local_address: {l}"));
            at.insert(Field::LocalAddress, lines.len());
        }
        if let Some(i) = self.interface() {
            lines.push(format!("    interface: {i}"));
        }
        lines.push("prefixes:".into());
        lines.push(format!("  - {}", self.prefix));
        at.insert(Field::Prefix, lines.len());
        (lines.join("\n") + "\n", at)
    }

    /// FRR's side of the session: the mirror of the agent's.
    fn frr_conf(&self) -> String {
        let own = self.family.own();
        let h = self.hold_time;
        let (af, scope) = match self.family {
            Family::V4 => ("ipv4", String::new()),
            Family::V6 => ("ipv6", String::new()),
            Family::LinkLocal => ("ipv6", format!(" neighbor {own} interface {FRR_IF}\n")),
        };
        format!(
            "frr defaults datacenter
hostname p
router bgp {remote}
 bgp router-id 10.0.0.2
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 timers bgp {k} {h}
 neighbor {own} remote-as {asn}
{scope} neighbor {own} timers connect 1
 address-family {af} unicast
  neighbor {own} activate
 exit-address-family
",
            remote = self.remote_as,
            asn = self.asn,
            k = h / 3,
        )
    }
}

fn cases() -> impl Strategy<Value = Case> {
    let family = prop_oneof![
        2 => Just(Family::V4),
        2 => Just(Family::V6),
        1 => Just(Family::LinkLocal),
    ];
    let local = prop_oneof![
        2 => Just(Local::None),
        2 => Just(Local::Same),
        1 => Just(Local::Other),
    ];
    let iface = prop_oneof![
        1 => Just(Iface::None),
        2 => Just(Iface::Veth),
        1 => Just(Iface::Missing),
    ];
    let prefix = prop_oneof![
        3 => Just("192.0.2.0/24".to_string()),
        3 => Just("2001:db8:a::/48".to_string()),
        1 => (1u8..=255).prop_map(|h| format!("192.0.2.{h}/24")),
        1 => (1u16..=0xffff).prop_map(|h| format!("2001:db8:a:{h:x}::/48")),
    ]
    .prop_map(|p| p.parse::<IpNet>().expect("a generated prefix"));
    let hold = prop_oneof![
        1 => Just(0u16),
        1 => 1u16..=2,
        1 => Just(3u16),
        2 => Just(9u16),
        1 => Just(90u16),
        1 => Just(65535u16),
    ];
    let asn = || {
        prop_oneof![
            3 => 64512u32..=65534,
            2 => 131_072u32..=4_294_967_294,
            1 => prop::sample::select(vec![0u32, 23456, 65535, 4_294_967_295, 70000]),
        ]
    };
    (family, local, iface, prefix, hold, asn(), asn())
        .prop_map(
            |(family, local, iface, prefix, hold_time, asn, remote_as)| Case {
                family,
                local,
                iface,
                prefix,
                hold_time,
                asn,
                remote_as,
            },
        )
        .prop_filter("eBGP: two ASes", |c| c.asn != c.remote_as)
}

/// Cases that together take every generated value at least once.
fn fixed() -> Vec<Case> {
    let base = Case {
        family: Family::V4,
        local: Local::None,
        iface: Iface::Veth,
        prefix: "192.0.2.0/24".parse().expect("prefix"),
        hold_time: 9,
        asn: 65001,
        remote_as: 65100,
    };
    vec![
        base.clone(),
        Case {
            family: Family::LinkLocal,
            local: Local::Same,
            hold_time: 3,
            asn: 4_200_000_001,
            ..base.clone()
        },
        Case {
            family: Family::LinkLocal,
            iface: Iface::Missing,
            hold_time: 0,
            ..base.clone()
        },
        Case {
            family: Family::V6,
            local: Local::Same,
            iface: Iface::None,
            prefix: "2001:db8:a::/48".parse().expect("prefix"),
            hold_time: 65535,
            remote_as: 4_200_000_100,
            ..base.clone()
        },
        Case {
            iface: Iface::Missing,
            local: Local::Same,
            hold_time: 90,
            ..base.clone()
        },
        Case {
            local: Local::Other,
            hold_time: 1,
            ..base.clone()
        },
        Case {
            family: Family::LinkLocal,
            local: Local::Same,
            iface: Iface::None,
            asn: 0,
            ..base.clone()
        },
        Case {
            family: Family::V6,
            local: Local::Other,
            prefix: "2001:db8:a:1::/48".parse().expect("prefix"),
            hold_time: 2,
            remote_as: 23456,
            ..base.clone()
        },
        Case {
            prefix: "192.0.2.1/24".parse().expect("prefix"),
            asn: 65535,
            remote_as: 0,
            ..base.clone()
        },
        Case {
            asn: 4_294_967_295,
            remote_as: 70000,
            ..base
        },
    ]
}

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

/// What `fare agent --config FILE --check` said: exit code and stderr.
fn check(file: &std::path::Path) -> Result<(Option<i32>, String), TestCaseError> {
    let out = std::process::Command::new(fare_bin().map_err(fail)?)
        .arg("agent")
        .arg("--config")
        .arg(file)
        .arg("--check")
        .output()
        .map_err(fail)?;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    Ok((out.status.code(), err))
}

/// Counts of what the cases did, printed at the end.
#[derive(Default)]
struct Tally {
    established: usize,
    refused: usize,
    refused_at_start: usize,
}

/// One case: `--check`, then the session or the judges.
fn run_case(judge: &Frr, c: &Case, tally: &mut Tally) -> Result<(), TestCaseError> {
    let dir = TempDir::new("cfp").map_err(fail)?;
    let socket = dir.0.join("agent.sock");
    let (text, lines) = c.yaml(&socket.to_string_lossy());
    let file = dir.write("agent.yaml", &text).map_err(fail)?;
    let (code, err) = check(&file)?;
    let broken = c.broken();
    if broken.is_empty() {
        prop_assert_eq!(code, Some(0), "{:?} refused: {}", c, err);
        if c.zone_missing() {
            refused_at_start(c, &file)?;
            tally.refused_at_start += 1;
        } else {
            established(c, &dir, &text)?;
            tally.established += 1;
        }
        return Ok(());
    }
    prop_assert_eq!(
        code,
        Some(2),
        "{:?} breaks {:?} but --check took it",
        c,
        broken
    );
    // One line: `fare: FILE:LINE: problem`, LINE one of the broken fields'.
    prop_assert_eq!(err.lines().count(), 1, "{}", err);
    let prefix = format!("fare: {}:", file.display());
    let line = err
        .strip_prefix(&prefix)
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse::<usize>().ok());
    let fields: Vec<usize> = broken.iter().map(|r| lines[&r.field()]).collect();
    prop_assert!(
        line.is_some_and(|l| fields.contains(&l)),
        "{:?}: fare names line {:?}, the broken fields are on {:?}: {}",
        c,
        line,
        fields,
        err
    );
    for rule in broken {
        judged(judge, c, rule)?;
    }
    tally.refused += 1;
    Ok(())
}

/// A link-local session whose interface (its zone) does not exist: `--check` cannot know
/// the host, the agent's start refuses it (exit 1, one line), and `ip link` in the agent's
/// namespace confirms there is no such link.
fn refused_at_start(c: &Case, file: &std::path::Path) -> Result<(), TestCaseError> {
    let ns = Netns::new("cz").map_err(fail)?;
    let (code, err) = run_refused(Some(&ns), file).map_err(fail)?;
    prop_assert_eq!(code, Some(1), "{:?}: the agent started: {}", c, err);
    prop_assert_eq!(err.lines().count(), 1, "{}", err);
    let link = ns.exec("ip", &["link", "show", MISSING_IF]);
    prop_assert!(link.is_err(), "{} exists in {}", MISSING_IF, ns.name);
    Ok(())
}

/// Runs an accepted case: FRR with the mirrored configuration and the agent in a fresh
/// namespace pair, both reporting the session Established.
fn established(c: &Case, dir: &TempDir, text: &str) -> Result<(), TestCaseError> {
    let (a, b) = pair("cp").map_err(fail)?;
    a.sh(&format!("ip addr add fe80::1/64 dev {FARE_IF} nodad"))
        .map_err(fail)?;
    b.sh(&format!("ip addr add fe80::2/64 dev {FRR_IF} nodad"))
        .map_err(fail)?;
    // bgpd learns interfaces (the zone of a link-local neighbor) from zebra only.
    let frr = if c.family == Family::LinkLocal {
        Frr::start_with_zebra(&b, &c.frr_conf())
    } else {
        Frr::start(&b, &c.frr_conf())
    }
    .map_err(fail)?;
    let agent = dir.start_agent(&a, "agent", text).map_err(fail)?;
    let fare_up = |v: &serde_json::Value| {
        v.as_array().is_some_and(|n| {
            n.len() == 1
                && n[0]["state"] == "Established"
                && n[0]["address"] == c.neighbor().to_string()
        })
    };
    let frr_up = |v: &serde_json::Value| {
        v.as_object()
            .is_some_and(|n| n.len() == 1 && n.values().all(|x| x["bgpState"] == "Established"))
    };
    let up = wait_for(Duration::from_secs(30), || {
        let ours = agent.show("neighbors").ok()?;
        let theirs = frr.json("show bgp neighbors json");
        (fare_up(&ours) && frr_up(&theirs)).then_some(())
    });
    prop_assert!(
        up.is_some(),
        "{:?} passed --check but did not reach Established\nfare: {}\nFRR: {}\nagent log: {}",
        c,
        agent
            .show("neighbors")
            .map(|v| v.to_string())
            .unwrap_or_else(|e| e.to_string()),
        frr.vtysh("show bgp summary"),
        agent.log_text()
    );
    drop(agent);
    drop(frr);
    drop((a, b));
    Ok(())
}

/// Asserts that `rule`'s judge (the [`RULES`] table) says no: FRR, the kernel, or (for the
/// values FRR takes) the RFC named there.
fn judged(judge: &Frr, c: &Case, rule: Rule) -> Result<(), TestCaseError> {
    let (what, who, why) = rule.row();
    match who {
        Judge::FrrRefuses => frr_refuses(judge, rule),
        Judge::FrrRewrites => frr_rewrites(judge, c.prefix),
        Judge::Kernel => kernel_refuses(c, rule),
        Judge::Rfc => {
            eprintln!("{what}: FRR takes it; refused after {why}");
            Ok(())
        }
    }
}

/// FRR takes the valid line and refuses the mirror of the broken one.
fn frr_refuses(judge: &Frr, rule: Rule) -> Result<(), TestCaseError> {
    let router = format!("router bgp {JUDGE_AS}");
    let (valid, mirrored) = match rule {
        Rule::HoldTime(h) => (
            vec![router.clone(), "timers bgp 1 3".into()],
            vec![router, format!("timers bgp 0 {h}")],
        ),
        Rule::RemoteAs(asn) => (
            vec![router.clone(), "neighbor 10.0.0.1 remote-as 65001".into()],
            vec![router, format!("neighbor 10.0.0.1 remote-as {asn}")],
        ),
        // The judge runs one instance: its own AS is the valid line.
        Rule::LocalAs(asn) => (vec![router], vec![format!("router bgp {asn}")]),
        other => return Err(fail(format!("{other:?} has no FRR mirror"))),
    };
    let take = |lines: &[String]| {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        judge.configure(&refs).map_err(fail)
    };
    prop_assert!(take(&valid)?, "FRR refused the valid {:?}", valid);
    prop_assert!(!take(&mirrored)?, "FRR took {:?} ({:?})", mirrored, rule);
    Ok(())
}

/// FRR takes `network PREFIX` but its table holds the network, not the prefix written.
fn frr_rewrites(judge: &Frr, prefix: IpNet) -> Result<(), TestCaseError> {
    let af = if matches!(prefix, IpNet::V4(_)) {
        "ipv4"
    } else {
        "ipv6"
    };
    let router = format!("router bgp {JUDGE_AS}");
    let family = format!("address-family {af} unicast");
    let taken = judge
        .configure(&[&router, &family, &format!("network {prefix}")])
        .map_err(fail)?;
    prop_assert!(taken, "FRR refused network {}", prefix);
    let table = judge.json(&format!("show bgp {af} unicast json"));
    let routes = table["routes"].as_object().cloned().unwrap_or_default();
    let network = prefix.trunc().to_string();
    let _ = judge.configure(&[&router, &family, &format!("no network {network}")]);
    prop_assert!(
        routes.contains_key(&network) && !routes.contains_key(&prefix.to_string()),
        "FRR's table for network {}: {:?}",
        prefix,
        routes.keys().collect::<Vec<_>>()
    );
    Ok(())
}

/// The kernel refuses the socket the session would need.
fn kernel_refuses(c: &Case, rule: Rule) -> Result<(), TestCaseError> {
    let socket = |v6: bool| {
        if v6 {
            tokio::net::TcpSocket::new_v6()
        } else {
            tokio::net::TcpSocket::new_v4()
        }
    };
    let neighbor = c.neighbor();
    let result = match (rule, c.local_address()) {
        // A socket of the neighbor's family bound to the other family's address.
        (Rule::MixedFamily, Some(l)) => socket(neighbor.is_ipv6())
            .map_err(fail)?
            .bind(SocketAddr::new(l, 0)),
        // A link-local source without its zone (scope id 0).
        (Rule::LinkLocalSource, Some(l)) => socket(true).map_err(fail)?.bind(SocketAddr::new(l, 0)),
        // A link-local destination without its zone.
        (Rule::LinkLocalNeighbor, _) => std::net::TcpStream::connect_timeout(
            &SocketAddr::new(neighbor, 179),
            Duration::from_secs(2),
        )
        .map(|_| ()),
        (other, _) => return Err(fail(format!("{other:?} has no kernel judge"))),
    };
    let e = result.err();
    prop_assert!(
        e.as_ref()
            .and_then(|e| e.raw_os_error())
            .is_some_and(|n| n == libc::EINVAL || n == libc::EAFNOSUPPORT),
        "{:?}: the kernel did not refuse the socket ({:?})",
        rule,
        e
    );
    Ok(())
}

#[test]
fn check_accepts_what_runs_against_frr_and_refuses_what_cannot() {
    let test = "check_accepts_what_runs_against_frr_and_refuses_what_cannot";
    if !have_frr(test) {
        return;
    }
    // The judge of refusals: one bgpd alone in its namespace, no sessions.
    let jns = Netns::new("cfj").expect("netns");
    let judge = Frr::start(
        &jns,
        &format!(
            "frr defaults datacenter\nhostname judge\nrouter bgp {JUDGE_AS}\n \
             bgp router-id 10.255.0.2\n no bgp network import-check\n"
        ),
    )
    .expect("FRR");
    let mut tally = Tally::default();
    let ready = wait_for(Duration::from_secs(10), || {
        judge
            .json("show bgp summary json")
            .is_object()
            .then_some(())
    });
    assert!(ready.is_some(), "the judge bgpd did not answer");

    for c in fixed() {
        if let Err(e) = run_case(&judge, &c, &mut tally) {
            panic!("fixed case {c:?}: {e}");
        }
    }
    let mut runner = TestRunner::new(Config {
        cases: 64,
        max_shrink_iters: 16,
        max_shrink_time: 120_000,
        failure_persistence: None,
        ..Config::default()
    });
    let tally = std::sync::Mutex::new(tally);
    let result = runner.run(&cases(), |c| {
        let mut t = tally.lock().map_err(fail)?;
        run_case(&judge, &c, &mut t)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let t = tally.lock().expect("tally");
    eprintln!(
        "{test}: {} sessions Established, {} refusals judged, {} refused at start",
        t.established, t.refused, t.refused_at_start
    );
    assert!(t.established >= 4 && t.refused >= 5, "too few of each kind");
}
