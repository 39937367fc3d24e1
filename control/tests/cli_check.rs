//! `fare agent --check` and `fare topo` on hand-written bad files, as a user runs them: the
//! exact one-line error (file, line, problem) and exit code 2. The rules: docs/configuration.md
//! ("What a configuration may not say"). No root needed.

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

/// A scratch directory removed at the end of the test (also when it fails).
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("fare-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).expect("write");
        p.to_str().expect("utf-8 path").to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
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
    let cases: [(&str, &str, usize, String); 10] = [
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
    ];
    for (i, (from, to, line, problem)) in cases.iter().enumerate() {
        assert!(AGENT.contains(from), "{from}");
        let bad = dir.write(&format!("bad{i}.yaml"), &AGENT.replacen(from, to, 1));
        let err = refused(&["agent", "--config", &bad, "--check"]);
        assert_eq!(err, format!("fare: {bad}:{line}: {problem}\n"), "{to}");
    }
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
