//! `fare agent --check` and `fare topo` on hand-written bad files, as a user runs them: the
//! exact one-line error (file, line, problem) and exit code 2. The rules: docs/configuration.md
//! ("What a configuration may not say"). No root needed.

mod common;

use common::Scratch;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fare(args: &[&str]) -> Output {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    Command::new(env!("CARGO_BIN_EXE_fare"))
        .args(args)
        .current_dir(root)
        .output()
        .expect("run fare")
}

/// Runs `fare ARGS` and returns its standard error, after checking exit code 2 and that
/// nothing went to standard output.
fn refused(args: &[&str]) -> String {
    let out = fare(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
    err
}

const AGENT: &str = "name: l1
router_id: 10.0.0.1
asn: 65001
bgp: {hold_time: 9}
dataplane: {kind: kernel, interfaces: [eth1, eth2]}
neighbors:
  - address: 10.1.0.2
    remote_as: 65100
    interface: eth1
    bandwidth_gbps: 100
  - address: 10.1.0.6
    remote_as: 65100
    interface: eth2
prefixes: [192.0.2.0/24, 198.51.100.0/24]
";

const RANGE: &str = "is outside what the Path Bandwidth community carries \
                     (0.00048828125 to 524032 Gbps, binary16 GB/s)";

#[test]
fn agent_check_refuses_what_no_speaker_may_run() {
    let dir = Scratch::new("check");
    let good = dir.write("good.yaml", AGENT);
    let out = fare(&["agent", "--config", &good, "--check"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // (replace, with, line, problem): each bad file is AGENT with one edit.
    let cases: [(&str, &str, usize, String); 11] = [
        (
            "asn: 65001",
            "asn: 0",
            3,
            "asn: AS 0 is reserved (RFC 7607)".into(),
        ),
        (
            "asn: 65001",
            "asn: 23456",
            3,
            "asn: AS 23456 is AS_TRANS, reserved for 2-octet fields (RFC 6793)".into(),
        ),
        (
            "asn: 65001",
            "asn: 4294967295",
            3,
            "asn: AS 4294967295 is reserved (RFC 7300)".into(),
        ),
        (
            "router_id: 10.0.0.1",
            "router_id: 0.0.0.0",
            2,
            "router_id: 0.0.0.0 is not a BGP identifier (RFC 6286: it must be non-zero)".into(),
        ),
        (
            "hold_time: 9",
            "hold_time: 1",
            4,
            "bgp.hold_time: 1 s; a hold time is 0 or at least 3 seconds (RFC 4271 §4.2)".into(),
        ),
        (
            "10.1.0.6",
            "10.1.0.2",
            11,
            "neighbor 10.1.0.2 is listed twice (first at line 7)".into(),
        ),
        (
            "remote_as: 65100\n    interface: eth2",
            "remote_as: 65001\n    interface: eth2",
            12,
            "neighbor 10.1.0.6: remote_as 65001 is this node's own AS; iBGP is not supported, \
             every session is eBGP"
                .into(),
        ),
        (
            "bandwidth_gbps: 100",
            "bandwidth_gbps: 1e300",
            10,
            format!("neighbor 10.1.0.2: bandwidth_gbps: 1e300 Gbps {RANGE}"),
        ),
        (
            "198.51.100.0/24",
            "192.0.2.0/24",
            14,
            "prefix 192.0.2.0/24 is given twice".into(),
        ),
        (
            "[eth1, eth2]",
            "[eth1, eth1]",
            5,
            "dataplane.interfaces: interface eth1 is given twice".into(),
        ),
        (
            "bgp: {hold_time: 9}",
            "bgp: {hold_time: 9}\nlog: 'fare=[bogus'",
            5,
            "log: `fare=[bogus` is not a log filter: error parsing level filter: expected one \
             of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", or a number 0-5"
                .into(),
        ),
    ];
    for (i, (from, to, line, problem)) in cases.iter().enumerate() {
        assert!(AGENT.contains(from), "{from}");
        let bad = dir.write(&format!("bad{i}.yaml"), &AGENT.replacen(from, to, 1));
        let err = refused(&["agent", "--config", &bad, "--check"]);
        assert_eq!(err, format!("fare: {bad}:{line}: {problem}\n"), "{to}");
    }
}

/// What `--check` used to accept and the agent then ran silently wrong (a session that
/// never came up, another route advertised): refused at `--check` with its line.
#[test]
fn agent_check_refuses_what_would_fail_silently_at_run_time() {
    let dir = Scratch::new("check-silent");
    let v6 = AGENT.replace("address: 10.1.0.2", "address: 2001:db8:1::2");
    let cases: [(String, usize, &str); 5] = [
        (
            v6.replace(
                "interface: eth1\n",
                "interface: eth1\n    local_address: 10.1.0.1\n",
            ),
            10,
            "neighbor 2001:db8:1::2: local_address 10.1.0.1 is IPv4, the neighbor IPv6; both \
             ends of a session are of one address family",
        ),
        (
            AGENT
                .replace("address: 10.1.0.6", "address: fe80::6")
                .replace(
                    "remote_as: 65100\n    interface: eth2\n",
                    "remote_as: 65100\n",
                ),
            11,
            "neighbor fe80::6: a link-local address needs `interface`, the link it is on (its \
             scope)",
        ),
        (
            AGENT.replace("[192.0.2.0/24", "[192.0.2.1/24"),
            14,
            "prefix 192.0.2.1/24 has host bits set (the network is 192.0.2.0/24)",
        ),
        (
            AGENT.replace("198.51.100.0/24]", "2001:db8::1/48]"),
            14,
            "prefix 2001:db8::1/48 has host bits set (the network is 2001:db8::/48)",
        ),
        (
            AGENT.replace(
                "bandwidth_gbps: 100\n",
                "bandwidth_gbps: 100\n    upa_hosts: [10.9.9.9/24]\n",
            ),
            11,
            "neighbor 10.1.0.2: upa_hosts: prefix 10.9.9.9/24 has host bits set (the network \
             is 10.9.9.0/24)",
        ),
    ];
    for (i, (text, line, problem)) in cases.iter().enumerate() {
        let bad = dir.write(&format!("bad{i}.yaml"), text);
        let err = refused(&["agent", "--config", &bad, "--check"]);
        assert_eq!(err, format!("fare: {bad}:{line}: {problem}\n"), "{text}");
    }
    // The same neighbors written right pass.
    let ok = dir.write(
        "ok.yaml",
        &v6.replace(
            "interface: eth1\n",
            "interface: eth1\n    local_address: 2001:db8:1::1\n",
        )
        .replace("address: 10.1.0.6", "address: fe80::6"),
    );
    let out = fare(&["agent", "--config", &ok, "--check"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A log filter that does not parse, and the API clients' options given to the agent, are
/// refused (exit 2) instead of quietly ignored.
#[test]
fn agent_refuses_bad_log_filter_and_client_options() {
    let dir = Scratch::new("check-flags");
    let good = dir.write("good.yaml", AGENT);
    let err = refused(&[
        "--log",
        "fare=[bogus",
        "agent",
        "--config",
        &good,
        "--check",
    ]);
    assert!(
        err.starts_with("fare: --log (or FARE_LOG) `fare=[bogus`: "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_fare"))
        .args(["agent", "--config", &good, "--check"])
        .env("FARE_LOG", "info,[[")
        .output()
        .expect("run fare");
    assert_eq!(out.status.code(), Some(2), "FARE_LOG is checked like --log");
    for flag in ["--address", "--tls-ca"] {
        let err = refused(&["agent", "--config", &good, "--check", flag, "x"]);
        assert!(
            err.starts_with(&format!(
                "fare: fare agent: {flag} is an option of the management \
                 API's clients"
            )),
            "{err}"
        );
    }
    // Filters that parse still work.
    let out = fare(&[
        "--log",
        "fare=debug,warn",
        "agent",
        "--config",
        &good,
        "--check",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The kernel data plane with an interface this namespace does not have: the agent does
/// not start (exit 1) and says which interface of which neighbor is missing. The check
/// runs before anything needs privileges.
#[test]
fn agent_kernel_with_missing_interface_does_not_start() {
    let dir = Scratch::new("kernel-missing");
    let sock = dir.0.join("a.sock");
    let text = format!(
        "{}management: {{socket: {}}}\n",
        AGENT
            .replace("interfaces: [eth1, eth2]", "interfaces: [lo]")
            .replace("interface: eth1\n", "interface: lo\n")
            .replace("interface: eth2\n", "interface: fare-nosuch9\n"),
        sock.display()
    );
    let path = dir.write("k.yaml", &text);
    let out = fare(&["agent", "--config", &path]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert_eq!(
        last,
        "fare: data plane: kernel: neighbor 10.1.0.6: interface fare-nosuch9 does not exist in \
         this network namespace"
    );
    assert!(!sock.exists(), "the API was served");
    let missing = dir.write(
        "k2.yaml",
        &text.replace("interfaces: [lo]", "interfaces: [lo, fare-nosuch8]"),
    );
    let out = fare(&["agent", "--config", &missing]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.lines().last().unwrap_or(""),
        "fare: data plane: kernel: dataplane.interfaces: interface fare-nosuch8 does not exist \
         in this network namespace"
    );
}

#[test]
fn topologies_refused_with_their_line() {
    let dir = Scratch::new("topo-check");
    let base = "name: t\nnodes:\n  - {name: L1, role: leaf, asn: 65001}\n  - {name: S1, role: spine, asn: 65100}\nlinks:\n  - {a: L1, b: S1, gbps: 100}\n";
    let huge = dir.write("huge.yaml", &base.replace("gbps: 100", "gbps: 1e300"));
    let err = refused(&["topo", "check", &huge]);
    assert_eq!(
        err,
        format!("fare: {huge}:6: link L1-S1: gbps: 1e300 Gbps {RANGE}\n")
    );
    let empty = dir.write("empty.yaml", "name: t\nnodes: []\n");
    let err = refused(&["topo", "check", &empty]);
    assert_eq!(
        err,
        format!("fare: {empty}:2: a fabric needs at least one node\n")
    );
    let trans = dir.write("trans.yaml", &base.replace("asn: 65100", "asn: 23456"));
    let err = refused(&["weights", &trans]);
    assert_eq!(
        err,
        format!("fare: {trans}:4: node `S1`: asn: AS 23456 is AS_TRANS, reserved for 2-octet fields (RFC 6793)\n")
    );
}

#[test]
fn topo_gen_refuses_before_writing() {
    let dir = Scratch::new("topo-gen");
    let out = dir.0.join("g.yaml");
    let o = out.to_str().unwrap();
    let err = refused(&["topo", "gen", "clos3", "--gbps", "0", "-o", o]);
    assert_eq!(err, format!("fare: link S1-L1: 0 Gbps {RANGE}\n"));
    assert!(!Path::new(o).exists(), "a refused fabric was written");
    // 35 planes would give the super-spines of plane 35 AS 65535.
    let err = refused(&[
        "topo", "gen", "clos5", "--pods", "1", "--planes", "35", "-o", o,
    ]);
    assert_eq!(
        err,
        "fare: node `SS1@Plane35`: AS 65535 is reserved (RFC 7300)\n"
    );
    assert!(!Path::new(o).exists());
    let err = refused(&["topo", "gen", "clos3", "-o", "/nonexistent/x"]);
    assert!(
        err.starts_with("fare: /nonexistent/x: cannot write: "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn weights_prefix_that_nothing_originates() {
    let err = refused(&[
        "weights",
        "topologies/whitepaper-asymmetric.yaml",
        "--prefix",
        "203.0.113.0/24",
    ]);
    assert_eq!(
        err,
        "fare: topologies/whitepaper-asymmetric.yaml: --prefix: no node originates 203.0.113.0/24\n"
    );
}
