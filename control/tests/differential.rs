//! The live speaker against the model, without root: every node of a fabric runs the real
//! BGP speaker (`fare::bgp::speaker`), each on its own loopback addresses (one pair per
//! link, so parallel links are separate sessions), and every group the speakers hand to
//! their data planes must equal `fare::sim`'s (what `fare weights` prints).
//!
//! - `hand_computed_*`: small fabrics whose groups are worked out by hand from the drafts'
//!   text (no shared code), checked against the live speakers.
//! - `generated_*`: proptest over random 3- and 5-stage fabrics (asymmetric capacities,
//!   parallel links of unequal capacities, multi-homed prefixes) and multi-plane fabrics
//!   of RNICs, x random failures and degradations x both modes x the three
//!   parallel-links settings (x the draft's optional 5-stage behaviours);
//!   a failing case shrinks and is printed as topology YAML. FARE_DIFF_CASES sets the
//!   number of cases per generator (default 100).

use fare::bandwidth::{DraftOptions, Encoding, Mode};
use fare::bgp::fare::Policy;
use fare::bgp::neighbor::State;
use fare::bgp::speaker::{self, NeighborSpec, SpeakerCommand, SpeakerConfig, SpeakerEvent};
use fare::forwarding::Group;
use fare::parallel::ParallelLinks;
use fare::sim::{self, Change};
use fare::topology::{Node, Role, Topology};
use ipnet::IpNet;
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// (node, prefix) -> sorted (link name, weight).
type Groups = BTreeMap<(String, IpNet), Vec<(String, u32)>>;

/// How a case is run.
#[derive(Clone, Debug)]
struct Case {
    mode: Mode,
    draft: DraftOptions,
    encoding: Encoding,
    /// Per node or per session over parallel links.
    parallel: ParallelLinks,
    /// Applied before the speakers start (the converged state after them).
    changes: Vec<Change>,
    /// Leaves tag the routes of their RNICs with FIB-Suppress (mpson §4.2), and the live
    /// groups are returned as they are (the model knows no suppression).
    fib_suppress: bool,
}

impl Case {
    fn new(mode: Mode) -> Case {
        Case {
            mode,
            draft: DraftOptions::default(),
            encoding: Encoding::default(),
            parallel: ParallelLinks::default(),
            changes: vec![],
            fib_suppress: false,
        }
    }
}

/// A /16 of 127/8 per fabric, so cases running at once never share an address.
fn next_block() -> u8 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::process::id() % 97;
    (1 + (base + NEXT.fetch_add(1, Ordering::Relaxed)) % 250) as u8
}

const PORT: u16 = 17_179;

/// The model's groups, keyed like the live ones.
fn model(topo: &Topology, case: &Case) -> Groups {
    let options = sim::Options {
        mode: case.mode,
        draft: case.draft,
        encoding: case.encoding,
        parallel: case.parallel,
        threads: 1,
        ..Default::default()
    };
    sim::solve(topo, &options)
        .route_groups()
        .into_iter()
        .map(|g| {
            let mut m: Vec<(String, u32)> =
                g.members.into_iter().map(|m| (m.link, m.weight)).collect();
            m.sort();
            ((g.node, g.prefix), m)
        })
        .collect()
}

fn asn(topo: &Topology, i: usize) -> u32 {
    topo.nodes[i].asn.unwrap_or(4_200_000_000 + i as u32)
}

/// Runs every node's speaker on loopback and waits until the groups equal the model.
/// Err: what differed. Ok: the live groups.
fn run(topo: &Topology, case: &Case) -> Result<Groups, String> {
    let mut topo = topo.clone();
    for c in &case.changes {
        c.apply(&mut topo).map_err(|e| e.to_string())?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let result = rt.block_on(run_async(&topo, case));
    rt.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn run_async(topo: &Topology, case: &Case) -> Result<Groups, String> {
    let block = next_block();
    // Link k: a side 127.block.(k / 127).(2 (k % 127) + 1), b side + 1.
    let addr = |k: usize, b_side: bool| {
        IpAddr::V4(Ipv4Addr::new(
            127,
            block,
            (k / 127) as u8,
            (2 * (k % 127) + 1 + usize::from(b_side)) as u8,
        ))
    };
    // Peer address (as the speaker names members) -> link name, per node.
    let mut link_of: Vec<HashMap<String, String>> = vec![HashMap::new(); topo.nodes.len()];
    let mut configs: Vec<SpeakerConfig> = Vec::new();
    for (i, n) in topo.nodes.iter().enumerate() {
        let mut neighbors = Vec::new();
        let mut listen = Vec::new();
        for (k, l) in topo.links.iter().enumerate() {
            if l.a != i && l.b != i {
                continue;
            }
            let here_b = l.b == i;
            let other = l.other(i);
            let (local, remote) = (addr(k, here_b), addr(k, !here_b));
            listen.push(local);
            link_of[i].insert(remote.to_string(), l.name.clone());
            neighbors.push(NeighborSpec {
                bandwidth_gbps: Some(l.gbps),
                // One side connects, the other listens: no collisions to resolve here.
                passive: i > other,
                local_address: Some(local),
                role: Some(topo.nodes[other].role),
                fib_suppress: case.fib_suppress
                    && n.role == Role::Leaf
                    && topo.nodes[other].role == Role::Rnic,
                ..NeighborSpec::new(remote, asn(topo, other))
            });
        }
        configs.push(SpeakerConfig {
            router_id: n
                .router_id
                .unwrap_or(Ipv4Addr::from(0x0aff_0000 + i as u32)),
            asn: asn(topo, i),
            port: PORT,
            listen: true,
            listen_addresses: listen,
            hold_time: 30,
            connect_retry: Duration::from_millis(30),
            connect_retry_max: Duration::from_millis(300),
            link_poll: Duration::ZERO,
            policy: Policy {
                mode: case.mode,
                role: n.role,
                draft: case.draft,
                encoding: case.encoding,
                parallel: case.parallel,
                ..Policy::default()
            },
            group_mode: fare::dataplane::GroupMode::Spray,
            neighbors,
            prefixes: n.prefixes.clone(),
            orf_wait: Duration::from_millis(100),
            route_events: false,
            dpf: Default::default(),
        });
    }
    let live: Arc<Mutex<Groups>> = Arc::default();
    let mut handles = Vec::new();
    for (i, config) in configs.into_iter().enumerate() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
        let handle = speaker::start(config, tx)
            .await
            .map_err(|e| format!("{}: speaker start: {e}", topo.nodes[i].name))?;
        handles.push(handle);
        let name = topo.nodes[i].name.clone();
        let links = link_of[i].clone();
        let live = live.clone();
        tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                let changes: Vec<(IpNet, Option<Group>)> = match ev {
                    SpeakerEvent::Groups(runs) => runs.iter().flat_map(|r| r.groups()).collect(),
                    SpeakerEvent::ColoredGroup { group, .. } => vec![(group.prefix, Some(group))],
                    _ => continue,
                };
                let mut live = live.lock().unwrap_or_else(|e| e.into_inner());
                for (prefix, group) in changes {
                    match group {
                        Some(g) => {
                            let mut m: Vec<(String, u32)> = g
                                .members
                                .iter()
                                .map(|m| {
                                    let link = links.get(&m.via).cloned().unwrap_or(m.via.clone());
                                    (link, m.weight)
                                })
                                .collect();
                            m.sort();
                            live.insert((name.clone(), prefix), m);
                        }
                        None => {
                            live.remove(&(name.clone(), prefix));
                        }
                    }
                }
            }
        });
    }
    let expected = if case.fib_suppress {
        None
    } else {
        Some(model(topo, case))
    };
    let result = converge(&handles, &live, expected.as_ref(), topo, "start").await;
    for h in &handles {
        let _ = h.commands.send(SpeakerCommand::Shutdown).await;
    }
    result
}

const DEADLINE: Duration = Duration::from_secs(20);

async fn converge(
    handles: &[speaker::SpeakerHandle],
    live: &Arc<Mutex<Groups>>,
    expected: Option<&Groups>,
    topo: &Topology,
    when: &str,
) -> Result<Groups, String> {
    let start = Instant::now();
    loop {
        let down: Vec<String> = handles
            .iter()
            .enumerate()
            .flat_map(|(i, h)| {
                let list = h.neighbors.lock().map(|l| l.clone()).unwrap_or_default();
                list.into_iter().filter_map(move |s| {
                    let s = s.lock().ok()?;
                    (s.state != State::Established)
                        .then(|| format!("{}->{} {:?}", topo.nodes[i].name, s.address, s.state))
                })
            })
            .collect();
        if down.is_empty() {
            return converge_groups(live, expected, when).await;
        }
        if start.elapsed() > DEADLINE {
            return Err(format!(
                "{when}: sessions not up after {DEADLINE:?}: {down:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the live groups equal `expected` (or, without one, stop changing) for
/// 100 ms, polling every 20 ms.
async fn converge_groups(
    live: &Arc<Mutex<Groups>>,
    expected: Option<&Groups>,
    when: &str,
) -> Result<Groups, String> {
    let start = Instant::now();
    let mut equal_since: Option<Instant> = None;
    let mut last = Groups::new();
    let mut changed_at = Instant::now();
    loop {
        let now = live.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let settled = match expected {
            Some(e) => &now == e,
            None => now == last,
        };
        if settled {
            match equal_since {
                Some(t) if t.elapsed() >= Duration::from_millis(100) => return Ok(now),
                None => equal_since = Some(Instant::now()),
                _ => {}
            }
        } else {
            if now != last {
                last = now.clone();
                changed_at = Instant::now();
            }
            equal_since = None;
            // A fabric whose groups stopped changing (sessions are up) has converged:
            // to something else than the model.
            let stuck = expected.is_some() && changed_at.elapsed() > Duration::from_secs(3);
            if start.elapsed() > DEADLINE || stuck {
                let e = expected.cloned().unwrap_or_default();
                return Err(format!("{when}: {}", diff(&now, &e)));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn diff(live: &Groups, expected: &Groups) -> String {
    let mut out = Vec::new();
    for (k, v) in expected {
        match live.get(k) {
            None => out.push(format!("{} {}: missing, model {v:?}", k.0, k.1)),
            Some(l) if l != v => out.push(format!("{} {}: live {l:?}, model {v:?}", k.0, k.1)),
            _ => {}
        }
    }
    for (k, v) in live {
        if !expected.contains_key(k) {
            out.push(format!("{} {}: live {v:?}, not in the model", k.0, k.1));
        }
    }
    let n = out.len();
    out.truncate(12);
    format!("{n} groups differ: {}", out.join("; "))
}

// ---------------------------------------------------------------------------------------
// Hand-computed expectations: the drafts' rules applied by hand to small fabrics.

fn topo(text: &str) -> Topology {
    fare::topology::parse(std::path::Path::new("case.yaml"), text).expect("topology")
}

/// Live groups of a converged fabric (equal to the model's: `run` checks).
fn live_groups(t: &Topology, case: &Case) -> Groups {
    match run(t, case) {
        Ok(g) => g,
        Err(e) => panic!("live fabric differs from the model: {e}\n{}", t.to_yaml()),
    }
}

fn weights(g: &Groups, node: &str, prefix: &str) -> Vec<u32> {
    let p: IpNet = prefix.parse().expect("prefix");
    g.get(&(node.to_string(), p))
        .unwrap_or_else(|| panic!("{node} has no group for {prefix}"))
        .iter()
        .map(|m| m.1)
        .collect()
}

const FIG1: &str = "
nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: S3, role: spine, asn: 65100}
  - {name: S4, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.1.0/24, 10.100.0.0/24]}
  - {name: L2, role: leaf, asn: 65002, prefixes: [10.0.2.0/24, 10.100.0.0/24]}
  - {name: L3, role: leaf, asn: 65003, prefixes: [10.0.3.0/24]}
  - {name: L4, role: leaf, asn: 65004, prefixes: [10.0.4.0/24]}
links:
  - {a: S1, b: L1, gbps: 100, name: S1-L1}
  - {a: S1, b: L2, gbps: 100, name: S1-L2}
  - {a: S1, b: L3, gbps: 100, name: S1-L3}
  - {a: S1, b: L4, gbps: 100, name: S1-L4}
  - {a: S2, b: L1, gbps: 100, name: S2-L1}
  - {a: S2, b: L2, gbps: 100, name: S2-L2}
  - {a: S2, b: L3, gbps: 100, name: S2-L3}
  - {a: S2, b: L4, gbps: 100, name: S2-L4}
  - {a: S3, b: L1, gbps: 100, name: S3-L1}
  - {a: S3, b: L2, gbps: 100, name: S3-L2}
  - {a: S3, b: L3, gbps: 100, name: S3-L3}
  - {a: S3, b: L4, gbps: 100, name: S3-L4}
  - {a: S4, b: L1, gbps: 100, name: S4-L1}
  - {a: S4, b: L2, gbps: 100, name: S4-L2}
  - {a: S4, b: L3, gbps: 100, name: S4-L3}
  - {a: S4, b: L4, gbps: 100, name: S4-L4}
";

fn degrade(a: &str, b: &str, gbps: f64) -> Change {
    Change::Degrade(a.into(), b.into(), gbps)
}

/// Draft §4.1 on Figure 1 with S1-L1 at 75G: S1's route to L1's prefix carries
/// min(75, max) = 75, the others 100; L3 weighs its spines 75:100:100:100 = 3:4:4:4.
/// The multi-homed prefix (L1 and L2): S1 sums min(75, max) + min(100, max) = 175, the
/// others 200, and L3 takes the min with its 100G links: 1:1:1:1.
#[test]
fn hand_computed_draft_fig1_lane_failure() {
    let mut case = Case::new(Mode::Draft);
    case.changes = vec![degrade("S1", "L1", 75.0)];
    let g = live_groups(&topo(FIG1), &case);
    assert_eq!(weights(&g, "L3", "10.0.1.0/24"), [3, 4, 4, 4]);
    assert_eq!(weights(&g, "L3", "10.100.0.0/24"), [1, 1, 1, 1]);
    assert_eq!(weights(&g, "L3", "10.0.2.0/24"), [1, 1, 1, 1]);
    // S1 itself: the multi-homed prefix over 75G to L1 and 100G to L2.
    assert_eq!(weights(&g, "S1", "10.100.0.0/24"), [3, 4]);
}

/// L1 and L2 in one AS (RFC 7938 §5.2.4 numbering): the speakers drop each other's
/// routes as AS-path loops, and the spines leave L2 out of N when advertising L1's prefix.
/// Averaged, worked by hand: S1 sends L1's 100 to L3 only (N = 1): 100; S2 to L3 and L4
/// (N = 2): 50; L3 weighs 100 : 50 = 2:1 (without the loop rule N = 2 and 3: 3:2).
/// Draft: 100 : 100 = 1:1.
#[test]
fn hand_computed_same_as_leaves() {
    let t = topo(
        "
nodes:
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.1.0/24]}
  - {name: L2, role: leaf, asn: 65001, prefixes: [10.0.2.0/24]}
  - {name: L3, role: leaf, asn: 65003, prefixes: [10.0.3.0/24]}
  - {name: L4, role: leaf, asn: 65004}
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
links:
  - {a: L1, b: S1, gbps: 100}
  - {a: L1, b: S2, gbps: 100}
  - {a: L2, b: S1, gbps: 100}
  - {a: L2, b: S2, gbps: 100}
  - {a: L3, b: S1, gbps: 100}
  - {a: L3, b: S2, gbps: 100}
  - {a: L4, b: S2, gbps: 100}
",
    );
    let averaged = live_groups(&t, &Case::new(Mode::Averaged));
    assert_eq!(weights(&averaged, "L3", "10.0.1.0/24"), [2, 1]);
    let draft = live_groups(&t, &Case::new(Mode::Draft));
    assert_eq!(weights(&draft, "L3", "10.0.1.0/24"), [1, 1]);
    for g in [&averaged, &draft] {
        for (node, prefix) in [("L2", "10.0.1.0/24"), ("L1", "10.0.2.0/24")] {
            let p: IpNet = prefix.parse().expect("prefix");
            assert!(
                !g.contains_key(&(node.to_string(), p)),
                "{node} has a route to {prefix}"
            );
        }
    }
    // L3's own prefix reaches L1 (not a loop): averaged, S1 sends 100 / 2 (L1, L2), S2
    // 100 / 3 (L1, L2, L4): 3:2; draft, 100 : 100.
    assert_eq!(weights(&averaged, "L1", "10.0.3.0/24"), [3, 2]);
    assert_eq!(weights(&draft, "L1", "10.0.3.0/24"), [1, 1]);
}

/// White paper §2.2.1 (averaged) on Figure 1 with S1-L1 at 75G. L1 advertises its line
/// rate: 75 to S1, 100 to the others. A spine divides by its N = 3 other leaves: S1 sends
/// 25 for L1's prefix, the others 33.3: 3:4:4:4 at L3. Multi-homed prefix at S1: (75 +
/// 100) / 2 other leaves = 87.5, the others 200 / 2 = 100 (min with the 100G link): 7:8:8:8.
#[test]
fn hand_computed_averaged_fig1_lane_failure() {
    let mut case = Case::new(Mode::Averaged);
    case.changes = vec![degrade("S1", "L1", 75.0)];
    let g = live_groups(&topo(FIG1), &case);
    assert_eq!(weights(&g, "L3", "10.0.1.0/24"), [3, 4, 4, 4]);
    assert_eq!(weights(&g, "L3", "10.100.0.0/24"), [7, 8, 8, 8]);
    assert_eq!(weights(&g, "S1", "10.100.0.0/24"), [3, 4]);
}

/// Averaged, S1-L1 at 50G (the README's multi-homed example): S1 sends (50 + 100) / 2 =
/// 75 for the multi-homed prefix, the others 100: 3:4:4:4.
#[test]
fn hand_computed_averaged_fig1_multihomed() {
    let mut case = Case::new(Mode::Averaged);
    case.changes = vec![degrade("S1", "L1", 50.0)];
    let g = live_groups(&topo(FIG1), &case);
    assert_eq!(weights(&g, "L3", "10.100.0.0/24"), [3, 4, 4, 4]);
    assert_eq!(weights(&g, "L3", "10.0.1.0/24"), [1, 2, 2, 2]);
}

/// A value that does not survive the wire exactly: 75/7 Gbps. Averaged, 8 leaves, S1-L1
/// at 75G: S1 sends 75 / 7 other leaves = 10.714, the others 100 / 7 = 14.286; 3:4:4:4.
#[test]
fn hand_computed_averaged_sevenths() {
    let mut text = String::from("nodes:\n");
    for s in 1..=4 {
        text += &format!("  - {{name: S{s}, role: spine, asn: 65100}}\n");
    }
    for l in 1..=8 {
        text += &format!(
            "  - {{name: L{l}, role: leaf, asn: {}, prefixes: [10.0.{l}.0/24]}}\n",
            65000 + l
        );
    }
    text += "links:\n";
    for s in 1..=4 {
        for l in 1..=8 {
            text += &format!("  - {{a: S{s}, b: L{l}, gbps: 100}}\n");
        }
    }
    for encoding in [Encoding::Binary16, Encoding::Float32Upper16] {
        let mut case = Case::new(Mode::Averaged);
        case.encoding = encoding;
        case.changes = vec![degrade("S1", "L1", 75.0)];
        let g = live_groups(&topo(&text), &case);
        assert_eq!(
            weights(&g, "L8", "10.0.1.0/24"),
            [3, 4, 4, 4],
            "{encoding:?}"
        );
    }
}

/// Draft §4.2, 5-stage: 2 PoDs, one spine each per plane, 2 planes of 2 super-spines,
/// 400G everywhere except S1@PoD2-SS1@P1 at 100G. The remote spine S1@PoD2 weighs its
/// super-spines by the non-transitive link value each attaches (the link toward S1@PoD1:
/// 400) min its own link: min(100, 400) : min(400, 400) = 1:4. Its leaves see the
/// transitive value unchanged (S1@PoD1's sum) from both spines: 1:1.
#[test]
fn hand_computed_five_stage_remote_spine() {
    let text = "
nodes:
  - {name: SS1@P1, role: super-spine, asn: 65501}
  - {name: SS2@P1, role: super-spine, asn: 65501}
  - {name: SS1@P2, role: super-spine, asn: 65502}
  - {name: SS2@P2, role: super-spine, asn: 65502}
  - {name: S1@PoD1, role: spine, asn: 65301}
  - {name: S2@PoD1, role: spine, asn: 65301}
  - {name: S1@PoD2, role: spine, asn: 65302}
  - {name: S2@PoD2, role: spine, asn: 65302}
  - {name: L1@PoD1, role: leaf, asn: 65011, prefixes: [10.1.1.0/24]}
  - {name: L1@PoD2, role: leaf, asn: 65021, prefixes: [10.2.1.0/24]}
links:
  - {a: SS1@P1, b: S1@PoD1, gbps: 400}
  - {a: SS2@P1, b: S1@PoD1, gbps: 400}
  - {a: SS1@P2, b: S2@PoD1, gbps: 400}
  - {a: SS2@P2, b: S2@PoD1, gbps: 400}
  - {a: SS1@P1, b: S1@PoD2, gbps: 100}
  - {a: SS2@P1, b: S1@PoD2, gbps: 400}
  - {a: SS1@P2, b: S2@PoD2, gbps: 400}
  - {a: SS2@P2, b: S2@PoD2, gbps: 400}
  - {a: S1@PoD1, b: L1@PoD1, gbps: 400}
  - {a: S2@PoD1, b: L1@PoD1, gbps: 400}
  - {a: S1@PoD2, b: L1@PoD2, gbps: 400}
  - {a: S2@PoD2, b: L1@PoD2, gbps: 400}
";
    let case = Case::new(Mode::Draft);
    let g = live_groups(&topo(text), &case);
    assert_eq!(weights(&g, "S1@PoD2", "10.1.1.0/24"), [1, 4]);
    assert_eq!(weights(&g, "S2@PoD2", "10.1.1.0/24"), [1, 1]);
    assert_eq!(weights(&g, "L1@PoD2", "10.1.1.0/24"), [1, 1]);
    // Without the optional link community the remote spine falls back to ECMP.
    let mut case = Case::new(Mode::Draft);
    case.draft.link_community = false;
    let g = live_groups(&topo(text), &case);
    assert_eq!(weights(&g, "S1@PoD2", "10.1.1.0/24"), [1, 1]);
    // With the optional update, S1@PoD2 lowers the transitive value (400 from S1@PoD1)
    // to its total toward the next-next hop, 100 + 400 = 500: no change (500 > 400); a
    // 200G leaf link at PoD1 makes S1@PoD1 send 200 and the leaf of PoD2 weigh 1:2.
    let mut case = Case::new(Mode::Draft);
    case.draft.remote_spine_update = true;
    case.changes = vec![degrade("S1@PoD1", "L1@PoD1", 200.0)];
    let g = live_groups(&topo(text), &case);
    assert_eq!(weights(&g, "L1@PoD2", "10.1.1.0/24"), [1, 2]);
}

/// Prefixes originated by super-spines. SS1 and SS2 (two planes) both originate one:
/// each attaches its link's capacity as the non-transitive value, so S1, learning only
/// from above, weighs them 100:40 = 5:2 and passes the transitive maximum on (L1: one
/// route). Anycast from SS1 and from L1 under S2: S2 hears it from above and below at
/// once, so min-sum: min(max, 100) : min(max, 40) = 5:2.
#[test]
fn hand_computed_originating_super_spines() {
    let text = "
nodes:
  - {name: SS1, role: super-spine, asn: 65501, prefixes: [10.9.0.0/24, 10.8.0.0/24]}
  - {name: SS2, role: super-spine, asn: 65502, prefixes: [10.9.0.0/24]}
  - {name: S1, role: spine, asn: 65101}
  - {name: S2, role: spine, asn: 65102}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.8.0.0/24]}
links:
  - {a: SS1, b: S1, gbps: 100}
  - {a: SS2, b: S1, gbps: 40}
  - {a: S1, b: L1, gbps: 400}
  - {a: SS1, b: S2, gbps: 100}
  - {a: L1, b: S2, gbps: 40}
";
    let g = live_groups(&topo(text), &Case::new(Mode::Draft));
    let members = |node: &str, prefix: &str| {
        let p: IpNet = prefix.parse().expect("prefix");
        let mut m = g[&(node.to_string(), p)].clone();
        m.sort();
        m
    };
    let by = |pairs: &[(&str, u32)]| -> Vec<(String, u32)> {
        pairs.iter().map(|&(n, w)| (n.to_string(), w)).collect()
    };
    assert_eq!(
        members("S1", "10.9.0.0/24"),
        by(&[("SS1-S1", 5), ("SS2-S1", 2)])
    );
    assert_eq!(
        members("S2", "10.8.0.0/24"),
        by(&[("L1-S2", 2), ("SS1-S2", 5)])
    );
}

/// Averaged mode, a host's prefix (the leaves above it do not originate it): H1 sends
/// its line rate, 100, to L1 and L3; each leaf advertises 100 / 2 (both spines) = 50;
/// S1 and S2 sum 50 + 50 = 100 over N = 1 (L2): 100. L2: min(100, 100) : min(100, 40)
/// = 5:2.
#[test]
fn hand_computed_averaged_host_prefix() {
    let text = "
nodes:
  - {name: H1, role: host, asn: 65201, prefixes: [10.7.0.0/24]}
  - {name: L1, role: leaf, asn: 65001}
  - {name: L2, role: leaf, asn: 65002}
  - {name: L3, role: leaf, asn: 65003}
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
links:
  - {a: H1, b: L1, gbps: 100}
  - {a: H1, b: L3, gbps: 100}
  - {a: L1, b: S1, gbps: 100}
  - {a: L3, b: S1, gbps: 50}
  - {a: L1, b: S2, gbps: 100}
  - {a: L3, b: S2, gbps: 100}
  - {a: L2, b: S1, gbps: 100}
  - {a: L2, b: S2, gbps: 40}
";
    let g = live_groups(&topo(text), &Case::new(Mode::Averaged));
    assert_eq!(weights(&g, "S1", "10.7.0.0/24"), [1, 1]);
    assert_eq!(weights(&g, "L2", "10.7.0.0/24"), [5, 2]);
}

/// Parallel links are separate members: two 100G links and one 50G from a spine.
#[test]
fn hand_computed_parallel_links() {
    let text = "
nodes:
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
  - {name: L1, role: leaf, asn: 65001, prefixes: [10.0.1.0/24]}
  - {name: L2, role: leaf, asn: 65002}
links:
  - {a: S1, b: L1, gbps: 100, name: a1}
  - {a: S1, b: L1, gbps: 50, name: a2}
  - {a: S2, b: L1, gbps: 100, name: a3}
  - {a: S1, b: L2, gbps: 400, name: b1}
  - {a: S1, b: L2, gbps: 400, name: b2}
  - {a: S2, b: L2, gbps: 400, name: b3}
";
    // Draft, per session (draft-xu-idr-fare-04): S1 sums 100 + 50 = 150 and sends it on
    // both links to L2, S2 sends 100; L2 takes the min with each 400G link:
    // 150:150:100 -> 3:3:2.
    let mut session = Case::new(Mode::Draft);
    session.parallel = ParallelLinks::Session;
    let g = live_groups(&topo(text), &session);
    assert_eq!(weights(&g, "S1", "10.0.1.0/24"), [2, 1]);
    assert_eq!(weights(&g, "L2", "10.0.1.0/24"), [3, 3, 2]);
    // Draft, per node (-05, the default): S1 counts once toward L2, min(800, 150) = 150
    // over two links, 75 + 75, beside S2's min(400, 100): 3:3:4. S1 itself: min(150,
    // max) split in proportion to 100 and 50: 2:1 (evenly: 75 + 75, 1:1).
    let g = live_groups(&topo(text), &Case::new(Mode::Draft));
    assert_eq!(weights(&g, "S1", "10.0.1.0/24"), [2, 1]);
    assert_eq!(weights(&g, "L2", "10.0.1.0/24"), [3, 3, 4]);
    let mut even = Case::new(Mode::Draft);
    even.parallel = ParallelLinks::NodeEven;
    let g = live_groups(&topo(text), &even);
    assert_eq!(weights(&g, "S1", "10.0.1.0/24"), [1, 1]);
    assert_eq!(weights(&g, "L2", "10.0.1.0/24"), [3, 3, 4]);
    // Averaged: S1 sends 150 / 2 other links = 75 on each, S2 100 / 1 = 100: 3:3:4 (per
    // node 75 + 75 = 150 over 800, split again 75 + 75).
    for parallel in [ParallelLinks::Session, ParallelLinks::NodeProportional] {
        let mut case = Case::new(Mode::Averaged);
        case.parallel = parallel;
        let g = live_groups(&topo(text), &case);
        assert_eq!(weights(&g, "L2", "10.0.1.0/24"), [3, 3, 4]);
    }
}

/// The white paper's asymmetric fabric in draft mode (draft-xu-idr-fare-05): Spine 1
/// advertises min(50 + 100, max) = 150, Spine 2 200. Leaf 2 per node: min(200, 150) ->
/// 75 + 75, min(200, 200) -> 100 + 100: 3:3:4:4. Per session: 1:1:1:1.
#[test]
fn hand_computed_white_paper_draft_per_node() {
    let text = include_str!("../../topologies/whitepaper-asymmetric.yaml");
    for parallel in [ParallelLinks::NodeEven, ParallelLinks::NodeProportional] {
        let mut case = Case::new(Mode::Draft);
        case.parallel = parallel;
        let g = live_groups(&topo(text), &case);
        assert_eq!(
            weights(&g, "Leaf2", "192.0.2.0/24"),
            [3, 3, 4, 4],
            "{parallel:?}"
        );
    }
    let mut case = Case::new(Mode::Draft);
    case.parallel = ParallelLinks::Session;
    let g = live_groups(&topo(text), &case);
    assert_eq!(weights(&g, "Leaf2", "192.0.2.0/24"), [1, 1, 1, 1]);
}

/// 100G (A) + 40G (B) from Leaf 2 to Spine 1, 100G (C) to Spine 2, each spine one 100G
/// link to Leaf 1 (so each advertises 100). Per node: Spine 1 min(140, 100) = 100; even
/// 50 + 50 beside 100: 1:1:2; proportional 71.43 + 28.57 beside 100: 5:2:7. Per
/// session: 100, 40, 100: 5:2:5. With B degraded to 10G: even still 1:1:2,
/// proportional 90.91 + 9.09 beside 100: 10:1:11, per session 10:1:10.
#[test]
fn hand_computed_unequal_parallel_links() {
    let text = "
nodes:
  - {name: Leaf1, role: leaf, asn: 65001, prefixes: [192.0.2.0/24]}
  - {name: Leaf2, role: leaf, asn: 65002}
  - {name: Spine1, role: spine, asn: 65100}
  - {name: Spine2, role: spine, asn: 65100}
links:
  - {a: Leaf1, b: Spine1, gbps: 100, name: U1}
  - {a: Leaf1, b: Spine2, gbps: 100, name: U2}
  - {a: Spine1, b: Leaf2, gbps: 100, name: A}
  - {a: Spine1, b: Leaf2, gbps: 40, name: B}
  - {a: Spine2, b: Leaf2, gbps: 100, name: C}
";
    let p = "192.0.2.0/24";
    let degraded = text.replace("gbps: 40, name: B", "gbps: 10, name: B");
    for (parallel, want, want_degraded) in [
        (ParallelLinks::NodeEven, [1, 1, 2], [1, 1, 2]),
        (ParallelLinks::NodeProportional, [5, 2, 7], [10, 1, 11]),
        (ParallelLinks::Session, [5, 2, 5], [10, 1, 10]),
    ] {
        let mut case = Case::new(Mode::Draft);
        case.parallel = parallel;
        let g = live_groups(&topo(text), &case);
        assert_eq!(weights(&g, "Leaf2", p), want, "{parallel:?}");
        let g = live_groups(&topo(&degraded), &case);
        assert_eq!(weights(&g, "Leaf2", p), want_degraded, "{parallel:?}");
    }
}

/// 5-stage, parallel links at two stages: L1-S1 100G + 40G (PoD 1), SS1-S2 2 x 100G
/// (toward PoD 2). S1: even 70 + 70 (1:1), proportional 100 + 40 (5:2); it advertises
/// 140. SS1 and SS2 each have one 100G link to S1: link value 100. S2 (remote spine):
/// per node SS1 min(200, 100) -> 50 + 50 beside SS2's 100: 1:1:2; per session 1:1:1.
#[test]
fn hand_computed_five_stage_parallel_links() {
    let text = "
nodes:
  - {name: L1, role: leaf, asn: 65001, pod: 1, prefixes: [10.1.0.0/24]}
  - {name: L2, role: leaf, asn: 65002, pod: 2}
  - {name: S1, role: spine, asn: 65301, pod: 1, plane: 1}
  - {name: S2, role: spine, asn: 65302, pod: 2, plane: 1}
  - {name: SS1, role: super-spine, asn: 65501, plane: 1}
  - {name: SS2, role: super-spine, asn: 65501, plane: 1}
links:
  - {a: L1, b: S1, gbps: 100, name: A1}
  - {a: L1, b: S1, gbps: 40, name: A2}
  - {a: S1, b: SS1, gbps: 100, name: B1}
  - {a: S1, b: SS2, gbps: 100, name: B2}
  - {a: SS1, b: S2, gbps: 100, name: C1}
  - {a: SS1, b: S2, gbps: 100, name: C2}
  - {a: SS2, b: S2, gbps: 100, name: C3}
  - {a: S2, b: L2, gbps: 100, name: D1}
";
    let p = "10.1.0.0/24";
    for (parallel, s1, s2) in [
        (ParallelLinks::NodeEven, [1, 1], [1, 1, 2]),
        (ParallelLinks::NodeProportional, [5, 2], [1, 1, 2]),
        (ParallelLinks::Session, [5, 2], [1, 1, 1]),
    ] {
        let mut case = Case::new(Mode::Draft);
        case.parallel = parallel;
        let g = live_groups(&topo(text), &case);
        assert_eq!(weights(&g, "S1", p), s1, "{parallel:?}");
        assert_eq!(weights(&g, "S2", p), s2, "{parallel:?}");
        assert_eq!(weights(&g, "L2", p), [1], "{parallel:?}");
    }
}

/// mpson §4.2: leaves tag their RNICs' host routes with FIB-Suppress. Switches keep them
/// out of the FIB (except the leaf that tagged them); an RNIC installs them — it asked
/// for them (by Prefix-ORF in a real plane) to forward by their path bandwidth.
#[test]
fn fib_suppress_switches_suppress_rnics_install() {
    let text = "
nodes:
  - {name: R1, role: rnic, asn: 4200000001, prefixes: [10.9.0.1/32]}
  - {name: R2, role: rnic, asn: 4200000002, prefixes: [10.9.0.2/32]}
  - {name: L1, role: leaf, asn: 65001}
  - {name: L2, role: leaf, asn: 65002}
  - {name: S1, role: spine, asn: 65100}
  - {name: S2, role: spine, asn: 65100}
links:
  - {a: R1, b: L1, gbps: 400}
  - {a: R2, b: L2, gbps: 400}
  - {a: L1, b: S1, gbps: 400}
  - {a: L1, b: S2, gbps: 200}
  - {a: L2, b: S1, gbps: 400}
  - {a: L2, b: S2, gbps: 400}
";
    let t = topo(text);
    let mut case = Case::new(Mode::Draft);
    case.fib_suppress = true;
    let g = run(&t, &case).unwrap_or_else(|e| panic!("{e}"));
    let has = |node: &str, p: &str| g.contains_key(&(node.to_string(), p.parse().unwrap()));
    // The tagging leaf installs its RNIC's route; the others do not.
    assert!(has("L1", "10.9.0.1/32"), "{g:?}");
    for n in ["S1", "S2", "L2"] {
        assert!(
            !has(n, "10.9.0.1/32"),
            "{n} installed a suppressed route: {g:?}"
        );
    }
    // The remote RNIC installs it, weighted by path bandwidth: L2 hears 400 via S1 and
    // min(400, 200) = 200 via S2 and sends 600 to R2 (one member, over its one link).
    assert_eq!(weights(&g, "R2", "10.9.0.1/32"), [1]);
    assert_eq!(weights(&g, "R1", "10.9.0.2/32"), [1]);
    // Without suppression every switch installs them: the same as the model.
    let all = live_groups(&t, &Case::new(Mode::Draft));
    assert!(all.contains_key(&("S1".to_string(), "10.9.0.1/32".parse().unwrap())));
}

// ---------------------------------------------------------------------------------------
// Generated fabrics.

#[derive(Clone, Debug)]
struct Fabric {
    topo: Topology,
    case: Case,
}

impl Fabric {
    /// A generated fabric in either mode and parallel-links setting (0: node-even, 1:
    /// node-proportional, 2: session), with its picked failures and degradations.
    fn new(topo: Topology, averaged: bool, parallel: usize, picks: &[(usize, u32, u32)]) -> Fabric {
        let mut case = Case::new(if averaged {
            Mode::Averaged
        } else {
            Mode::Draft
        });
        case.parallel = PARALLEL[parallel % PARALLEL.len()];
        case.changes = changes_for(&topo, picks);
        Fabric { topo, case }
    }
}

fn node(name: String, role: Role, asn: u32, prefixes: Vec<IpNet>) -> Node {
    Node {
        asn: Some(asn),
        prefixes,
        ..Node::new(name, role)
    }
}

const SPEEDS: [f64; 6] = [100.0, 100.0, 100.0, 400.0, 50.0, 25.0];

const PARALLEL: [ParallelLinks; 3] = [
    ParallelLinks::NodeEven,
    ParallelLinks::NodeProportional,
    ParallelLinks::Session,
];

/// A random 3-stage fabric: 2-4 spines, 2-5 leaves, 1-2 links per pair, capacities from
/// SPEEDS, leaf 0 and 1 multi-homing a shared prefix and perhaps sharing one AS (then
/// neither gets the other's routes: AS-path loops); then failures and degradations
/// that leave the fabric connected.
fn clos3() -> impl Strategy<Value = Fabric> {
    (
        2usize..=4,
        2usize..=5,
        prop::collection::vec((1usize..=2, 0usize..SPEEDS.len()), 20),
        prop::collection::vec((0usize..20, 0u32..4, 1u32..=100), 0..3),
        (any::<bool>(), 0usize..3),
        (any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(spines, leaves, links, changes, (averaged, parallel), (multihomed, same_as))| {
                let mut t = Topology::new("gen3");
                let s: Vec<usize> = (0..spines)
                    .map(|i| t.add_node(node(format!("S{}", i + 1), Role::Spine, 65100, vec![])))
                    .collect();
                for l in 0..leaves {
                    let mut p: Vec<IpNet> = vec![format!("10.0.{}.0/24", l + 1).parse().unwrap()];
                    if multihomed && l < 2 {
                        p.push("10.100.0.0/24".parse().unwrap());
                    }
                    // Same AS: L1 and L2 (both multi-homing, so every route of the shared
                    // prefix carries the one AS and the model's choice is the speakers').
                    let asn = if same_as && l == 1 {
                        65001
                    } else {
                        65001 + l as u32
                    };
                    let id = t.add_node(node(format!("L{}", l + 1), Role::Leaf, asn, p));
                    for &sp in &s {
                        let (count, speed) = links[(sp * leaves + l) % links.len()];
                        // A second parallel link of another speed (unequal capacities).
                        for k in 0..count {
                            t.add_link(sp, id, SPEEDS[(speed + 3 * k) % SPEEDS.len()], None);
                        }
                    }
                }
                Fabric::new(t, averaged, parallel, &changes)
            },
        )
}

/// A random 5-stage fabric: 2 PoDs, 1-2 planes (one spine per PoD and plane), 1-2
/// super-spines per plane, 1-3 leaves per PoD, 1-2 links (of random speeds) per linked
/// pair at both stages, leaf l of both PoDs perhaps in one AS.
fn clos5() -> impl Strategy<Value = Fabric> {
    (
        1u32..=2,
        1u32..=2,
        1u32..=3,
        prop::collection::vec(0usize..SPEEDS.len(), 40),
        prop::collection::vec((0usize..40, 0u32..4, 1u32..=100), 0..3),
        (
            any::<bool>(),
            0usize..3,
            prop::collection::vec(1usize..=2, 24),
        ),
        (any::<bool>(), any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(
                planes,
                ss,
                leaves,
                speeds,
                changes,
                (averaged, parallel, counts),
                (lc, rsu, same_as),
            )| {
                let mut t = Topology::new("gen5");
                let mut speed = speeds.iter().cycle().map(|&i| SPEEDS[i]);
                let mut count = counts.iter().cycle().copied();
                let supers: Vec<Vec<usize>> = (1..=planes)
                    .map(|k| {
                        (1..=ss)
                            .map(|j| {
                                t.add_node(node(
                                    format!("SS{j}@P{k}"),
                                    Role::SuperSpine,
                                    65500 + k,
                                    vec![],
                                ))
                            })
                            .collect()
                    })
                    .collect();
                for p in 1..=2u32 {
                    let spines: Vec<usize> = (1..=planes)
                        .map(|k| {
                            let id = t.add_node(node(
                                format!("S{k}@PoD{p}"),
                                Role::Spine,
                                65300 + p,
                                vec![],
                            ));
                            for &x in &supers[(k - 1) as usize] {
                                for _ in 0..count.next().unwrap_or(1) {
                                    t.add_link(x, id, speed.next().unwrap_or(100.0), None);
                                }
                            }
                            id
                        })
                        .collect();
                    for l in 1..=leaves {
                        let prefix: IpNet = format!("10.{p}.{l}.0/24").parse().unwrap();
                        let id = t.add_node(node(
                            format!("L{l}@PoD{p}"),
                            Role::Leaf,
                            // Same AS: leaf l of PoD 2 numbered like leaf l of PoD 1.
                            65000 + if same_as { 10 } else { p * 10 } + l,
                            vec![prefix],
                        ));
                        for &s in &spines {
                            for _ in 0..count.next().unwrap_or(1) {
                                t.add_link(s, id, speed.next().unwrap_or(100.0), None);
                            }
                        }
                    }
                }
                let mut f = Fabric::new(t, averaged, parallel, &changes);
                f.case.draft = DraftOptions {
                    link_community: lc,
                    remote_spine_update: rsu,
                };
                f
            },
        )
}

/// A random multi-plane fabric (draft-xu-idr-fare-in-mpson): 1-3 planes, each 2 leaves
/// and 1-2 spines (1-2 links of random speeds per spine-leaf pair); 2-4 RNICs, each
/// linked to one leaf of every plane and originating its host route; RNICs are stub
/// speakers.
fn multiplane() -> impl Strategy<Value = Fabric> {
    (
        1u32..=3,
        1u32..=2,
        2u32..=4,
        prop::collection::vec(0usize..SPEEDS.len(), 40),
        prop::collection::vec((0usize..40, 0u32..4, 1u32..=100), 0..3),
        (
            any::<bool>(),
            0usize..3,
            prop::collection::vec(1usize..=2, 12),
        ),
    )
        .prop_map(
            |(planes, spines, rnics, speeds, changes, (averaged, parallel, counts))| {
                let mut t = Topology::new("genmp");
                let mut speed = speeds.iter().cycle().map(|&i| SPEEDS[i]);
                let mut count = counts.iter().cycle().copied();
                let mut leaves: Vec<Vec<usize>> = Vec::new();
                for p in 1..=planes {
                    let s: Vec<usize> = (1..=spines)
                        .map(|k| {
                            t.add_node(node(format!("S{k}@P{p}"), Role::Spine, 65100 + p, vec![]))
                        })
                        .collect();
                    let l: Vec<usize> = (1..=2u32)
                        .map(|k| {
                            let id = t.add_node(node(
                                format!("L{k}@P{p}"),
                                Role::Leaf,
                                65000 + p * 10 + k,
                                vec![],
                            ));
                            for &x in &s {
                                for _ in 0..count.next().unwrap_or(1) {
                                    t.add_link(x, id, speed.next().unwrap_or(100.0), None);
                                }
                            }
                            id
                        })
                        .collect();
                    leaves.push(l);
                }
                for r in 1..=rnics {
                    let prefix: IpNet = format!("10.9.0.{r}/32").parse().unwrap();
                    let id = t.add_node(node(
                        format!("R{r}"),
                        Role::Rnic,
                        4_200_000_000 + r,
                        vec![prefix],
                    ));
                    for plane in &leaves {
                        t.add_link(
                            plane[(r as usize) % 2],
                            id,
                            speed.next().unwrap_or(100.0),
                            None,
                        );
                    }
                }
                Fabric::new(t, averaged, parallel, &changes)
            },
        )
}

/// Turns (link index, kind, percent) picks into failures (kind 0) and degradations to a
/// percentage of the link (kinds 1-3), skipping failures that would cut a node off.
fn changes_for(t: &Topology, picks: &[(usize, u32, u32)]) -> Vec<Change> {
    let mut out = Vec::new();
    let mut probe = t.clone();
    for &(i, kind, pct) in picks {
        let l = &t.links[i % t.links.len()];
        let (a, b) = (t.nodes[l.a].name.clone(), t.nodes[l.b].name.clone());
        if kind == 0 {
            let mut after = probe.clone();
            if after.fail(&a, &b).is_ok() && connected(&after) {
                probe = after;
                out.push(Change::Fail(a, b));
            }
        } else if probe.links_between(l.a, l.b).next().is_some() {
            let g = (l.gbps * f64::from(pct) / 100.0).max(1.0);
            let _ = probe.degrade(&a, &b, g);
            out.push(Change::Degrade(a, b, g));
        }
    }
    out
}

/// Every node keeps at least one link (a spine or leaf cut off is a different test).
fn connected(t: &Topology) -> bool {
    let adj = t.adjacency();
    adj.iter().all(|l| !l.is_empty())
}

fn check(f: &Fabric) -> Result<(), TestCaseError> {
    run(&f.topo, &f.case).map(|_| ()).map_err(|e| {
        eprintln!("case failed (shrinking follows): {e}");
        TestCaseError::fail(format!(
            "{e}\ncase: {:?} {:?} {:?} {:?}\n{}",
            f.case.mode,
            f.case.parallel,
            f.case.draft,
            f.case.changes,
            f.topo.to_yaml()
        ))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    fn generated_three_stage_fabrics_match_the_model(f in clos3()) {
        check(&f)?;
    }

    #[test]
    fn generated_five_stage_fabrics_match_the_model(f in clos5()) {
        check(&f)?;
    }

    #[test]
    fn generated_multiplane_fabrics_match_the_model(f in multiplane()) {
        check(&f)?;
    }
}

/// Cases per generated test: FARE_DIFF_CASES, default 40 (each is a whole fabric).
fn cases() -> u32 {
    std::env::var("FARE_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}
