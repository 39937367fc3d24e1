//! Property: a generated agent configuration that `fare agent --check` accepts starts an
//! agent that reaches Established with a real peer (FRR bgpd in a second namespace), and
//! `--check`'s verdict is the one the RFC rules give, worked out here independently of
//! fare's code (reserved AS numbers, BGP identifier, hold time, iBGP, neighbors twice,
//! bandwidths binary16 GB/s cannot carry). A bad file sent with SIGHUP leaves the running
//! configuration in force. 16 generated cases plus one fixed one; every wait is bounded.

use fare_integration::bgp::{have_frr, wait_for, Daemon, Frr, TempFile};
use fare_integration::{fare_bin, link, Netns};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::net::Ipv4Addr;
use std::process::Stdio;
use std::time::Duration;

const PEER_AS: u32 = 65100;
const PEER_ID: &str = "10.255.0.100";

/// FRR takes any eBGP AS from the agent, so one bgpd serves every case.
const FRR_CONF: &str = "frr defaults datacenter
hostname p
router bgp 65100
 bgp router-id 10.255.0.100
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.0.1.1 remote-as external
";

/// One generated configuration.
#[derive(Clone, Debug)]
struct Gen {
    asn: u32,
    router_id: Ipv4Addr,
    hold_time: u16,
    bandwidth_gbps: f64,
    neighbor_twice: bool,
}

impl Gen {
    /// Whether a BGP speaker may run it, from the RFCs (not from fare's code).
    fn valid(&self) -> bool {
        let asn_ok = !matches!(
            self.asn,
            0 | 23456 | 65535 | 4_294_967_295 | 65_552..=131_071
        );
        let id = self.router_id;
        let id_ok = !(id.is_unspecified() || id.is_multicast() || id.is_broadcast());
        // binary16 GB/s: smallest normal 2^-14, largest finite 65504; x8 for Gbps.
        let bw_ok = (8.0 * 2f64.powi(-14)..=8.0 * 65504.0).contains(&self.bandwidth_gbps);
        asn_ok
            && id_ok
            && !matches!(self.hold_time, 1 | 2)
            && self.asn != PEER_AS
            && bw_ok
            && !self.neighbor_twice
    }

    fn yaml(&self, socket: &str) -> String {
        let bw = match self.bandwidth_gbps {
            b if b.is_nan() => ".nan".to_string(),
            b if b.is_infinite() => if b > 0.0 { ".inf" } else { "-.inf" }.to_string(),
            b => format!("{b:?}"),
        };
        let neighbor = format!(
            "  - {{address: 10.0.1.2, remote_as: {PEER_AS}, interface: e1, bandwidth_gbps: {bw}}}\n"
        );
        format!(
            "name: prop\nrouter_id: {}\nasn: {}\nmanagement: {{socket: {socket}}}\n\
             dataplane: {{kind: none}}\nbgp: {{hold_time: {}, connect_retry_ms: 200, \
             connect_retry_max_ms: 1000}}\nneighbors:\n{neighbor}{}prefixes: [192.0.2.0/24]\n",
            self.router_id,
            self.asn,
            self.hold_time,
            if self.neighbor_twice {
                neighbor.as_str()
            } else {
                ""
            }
        )
    }
}

fn configs() -> impl Strategy<Value = Gen> {
    let asn = prop_oneof![
        3 => 64512u32..65535,
        2 => 4_200_000_000u32..4_294_967_295,
        1 => 1u32..23456,
        1 => prop::sample::select(vec![0, 23456, 65535, 4_294_967_295, 65552, 131_071, PEER_AS]),
    ];
    let router_id = prop_oneof![
        6 => (0x0100_0000u32..0xe000_0000).prop_map(Ipv4Addr::from),
        1 => prop::sample::select(vec![
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::new(224, 0, 0, 5),
            Ipv4Addr::BROADCAST,
        ]),
    ]
    .prop_filter("not the peer's id", |id| id.to_string() != PEER_ID);
    let bandwidth = prop_oneof![
        6 => 0.001f64..2000.0,
        1 => prop::sample::select(vec![0.0, -1.0, 1e300, f64::NAN, f64::INFINITY, 0.0001, 524_033.0, 524_032.0, 0.00048828125]),
    ];
    (
        asn,
        router_id,
        0u16..=12,
        bandwidth,
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(asn, router_id, hold_time, bandwidth_gbps, neighbor_twice)| Gen {
                asn,
                router_id,
                hold_time,
                bandwidth_gbps,
                neighbor_twice,
            },
        )
}

/// The agent's neighbors as `fare show neighbors --json` gives them.
fn neighbors(a: &Netns, socket: &str) -> serde_json::Value {
    let out = a
        .fare(&["show", "--socket", socket, "neighbors", "--json"])
        .ok();
    out.and_then(|o| serde_json::from_slice(&o.stdout).ok())
        .unwrap_or(serde_json::Value::Null)
}

fn established(v: &serde_json::Value) -> bool {
    v.as_array()
        .is_some_and(|n| n.len() == 1 && n[0]["state"] == "Established")
}

/// Runs one configuration: --check, then (when accepted) the agent until Established.
/// Returns the running agent for further steps.
fn run_case(
    a: &Netns,
    g: &Gen,
    tag: usize,
) -> Result<Option<(Daemon, TempFile, String)>, TestCaseError> {
    let socket = std::env::temp_dir()
        .join(format!("fare-prop-{}-{tag}.sock", std::process::id()))
        .to_string_lossy()
        .into_owned();
    let file = TempFile::new(&format!("prop-{tag}.yaml"), &g.yaml(&socket))
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let bin = fare_bin().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let check = std::process::Command::new(&bin)
        .args(["agent", "--config", file.path(), "--check"])
        .output()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let err = String::from_utf8_lossy(&check.stderr);
    if !g.valid() {
        prop_assert_eq!(check.status.code(), Some(2), "{:?} accepted", g);
        prop_assert_eq!(err.lines().count(), 1, "{}", err);
        let prefix = format!("fare: {}:", file.path());
        prop_assert!(err.starts_with(&prefix), "{}", err);
        return Ok(None);
    }
    prop_assert!(check.status.success(), "{:?} refused: {}", g, err);
    let agent = Daemon(
        a.command(bin.to_str().unwrap_or("fare"))
            .args(["agent", "--config", file.path()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| TestCaseError::fail(e.to_string()))?,
    );
    let up = wait_for(Duration::from_secs(30), || {
        let v = neighbors(a, &socket);
        established(&v).then_some(v)
    });
    prop_assert!(
        up.is_some(),
        "{:?}: not Established: {}",
        g,
        neighbors(a, &socket)
    );
    Ok(Some((agent, file, socket)))
}

/// SIGHUP with a file no speaker may run (hold time 1) that would also change the
/// bandwidth: nothing changes and the session stays up; then a good file's bandwidth is
/// applied (so the first reload was refused, not ignored).
fn bad_reload_keeps_running_config(a: &Netns, agent: &Daemon, file: &TempFile, socket: &str) {
    let good = Gen {
        asn: 65001,
        router_id: Ipv4Addr::new(10, 255, 0, 1),
        hold_time: 9,
        bandwidth_gbps: 100.0,
        neighbor_twice: false,
    };
    let bw = |v: &serde_json::Value| v[0]["bandwidth_gbps"].as_f64();
    let pid = agent.0.id() as i32;
    let bad = Gen {
        hold_time: 1,
        bandwidth_gbps: 40.0,
        ..good.clone()
    };
    std::fs::write(&file.0, bad.yaml(socket)).expect("write bad file");
    // SAFETY: a plain kill(2) to the agent this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    std::thread::sleep(Duration::from_secs(2));
    let v = neighbors(a, socket);
    assert!(established(&v), "after a bad SIGHUP: {v}");
    assert_eq!(
        bw(&v),
        Some(100.0),
        "a refused file changed the bandwidth: {v}"
    );
    let better = Gen {
        bandwidth_gbps: 40.0,
        ..good
    };
    std::fs::write(&file.0, better.yaml(socket)).expect("write good file");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    let applied = wait_for(Duration::from_secs(10), || {
        let v = neighbors(a, socket);
        (bw(&v) == Some(40.0)).then_some(v)
    });
    assert!(
        applied.is_some(),
        "good SIGHUP not applied: {}",
        neighbors(a, socket)
    );
}

#[test]
fn agent_config_that_passes_check_reaches_established() {
    let test = "agent_config_that_passes_check_reaches_established";
    if !have_frr(test) {
        return;
    }
    let a = Netns::new("cfa").expect("netns");
    let b = Netns::new("cfb").expect("netns");
    link(&a, "e1", "10.0.1.1/30", &b, "p1", "10.0.1.2/30").expect("link");
    let _frr = Frr::start(&b, FRR_CONF).expect("FRR");

    // A fixed valid case first (also the SIGHUP check), then the generated ones.
    let fixed = Gen {
        asn: 65001,
        router_id: Ipv4Addr::new(10, 255, 0, 1),
        hold_time: 9,
        bandwidth_gbps: 100.0,
        neighbor_twice: false,
    };
    let (agent, file, socket) = run_case(&a, &fixed, 0)
        .expect("fixed case")
        .expect("the fixed case is valid");
    bad_reload_keeps_running_config(&a, &agent, &file, &socket);
    drop(agent);
    let _ = std::fs::remove_file(&socket);

    let mut runner = TestRunner::new(Config {
        cases: 16,
        max_shrink_iters: 8,
        failure_persistence: None,
        ..Config::default()
    });
    let tag = std::sync::atomic::AtomicUsize::new(1);
    let accepted = std::sync::atomic::AtomicUsize::new(0);
    let result = runner.run(&configs(), |g| {
        let tag = tag.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some((agent, _file, socket)) = run_case(&a, &g, tag)? {
            accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            drop(agent);
            let _ = std::fs::remove_file(&socket);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!(
        "{test}: {} generated configurations, {} accepted and Established",
        tag.into_inner() - 1,
        accepted.into_inner()
    );
}
