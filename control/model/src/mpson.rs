//! Routes stored per RNIC, leaf and spine of a multi-plane fabric under each route-table
//! suppression technique of draft-xu-idr-fare-in-mpson §4, against the draft's baseline of
//! 400,000 routes per RNIC (100,000 host routes in each of 4 planes).
//!
//! Model (converged eBGP, as in `sim`): every RNIC originates its loopback /32 into every
//! plane it is connected to; the leaf of its block in that plane originates the block
//! aggregate. A disconnected (RNIC, plane) link removes the RNIC from that plane. Per node we
//! count three things:
//! - `rib`: distinct prefixes in the Loc-RIB,
//! - `paths`: routes stored in Adj-RIBs-In (one per prefix and neighbor it came from; for an
//!   RNIC one per prefix and plane, the quantity behind the draft's 400,000),
//! - `fib`: forwarding entries installed.
//!
//! Techniques:
//! - `None`: host routes everywhere.
//! - `Aggregation` (§4.1): leaves advertise only aggregates (to RNICs and into the plane);
//!   a leaf whose RNIC is disconnected advertises that RNIC's unreachability in the plane;
//!   switches do not install unreachable routes; an RNIC installs a host route (aggregate's
//!   planes minus the plane that reported it) for every RNIC unreachable via one of its planes.
//! - `PrefixOrf` (§4.2): host routes in the plane; every RNIC sends one Prefix-ORF entry per
//!   remote RNIC it talks to, and its leaf sends it only those.
//! - `OrfFibSuppress` (§4.2 + §4.2.1): as `PrefixOrf`, and leaves tag RNIC host routes with
//!   FIB-Suppress: switches install the block aggregates and the leaf its own RNICs only.
//!
//! The counts are exact for the model: each node's numbers come from set sizes of the
//! plane's reachable RNICs (the unit test checks them against explicit propagation on a
//! small fabric). Which RNICs talk to which is a workload parameter: an all-to-all group of
//! `group` RNICs spread over the fabric (expert parallelism) plus the two neighbors of a ring.

use crate::topology::{NodeId, Role, Topology};
use rustc_hash::FxHashSet;

/// A route-table suppression technique (draft-xu-idr-fare-in-mpson §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Technique {
    None,
    Aggregation,
    PrefixOrf,
    OrfFibSuppress,
}

impl Technique {
    pub const ALL: [Technique; 4] = [
        Technique::None,
        Technique::Aggregation,
        Technique::PrefixOrf,
        Technique::OrfFibSuppress,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Technique::None => "no suppression (host routes)",
            Technique::Aggregation => "aggregation + unreachable host routes (§4.1)",
            Technique::PrefixOrf => "Prefix-ORF (§4.2)",
            Technique::OrfFibSuppress => "Prefix-ORF + FIB-Suppress (§4.2.1)",
        }
    }
}

/// Route counts of one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub rib: u64,
    pub paths: u64,
    pub fib: u64,
}

/// Min / mean / max of one count over the nodes of a role.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    pub min: u64,
    pub max: u64,
    pub mean: f64,
}

/// Counts over all nodes of one role.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RoleCounts {
    pub nodes: u64,
    pub rib: Spread,
    pub paths: Spread,
    pub fib: Spread,
    /// Sum of `paths` over the nodes (fabric-wide storage).
    pub total_paths: u64,
}

#[derive(Default)]
struct Acc {
    n: u64,
    min: [u64; 3],
    max: [u64; 3],
    sum: [u128; 3],
}

impl Acc {
    fn add(&mut self, c: Counts) {
        let v = [c.rib, c.paths, c.fib];
        for (i, x) in v.into_iter().enumerate() {
            self.min[i] = if self.n == 0 { x } else { self.min[i].min(x) };
            self.max[i] = self.max[i].max(x);
            self.sum[i] += x as u128;
        }
        self.n += 1;
    }

    fn finish(&self) -> RoleCounts {
        let spread = |i: usize| Spread {
            min: self.min[i],
            max: self.max[i],
            mean: if self.n == 0 {
                0.0
            } else {
                self.sum[i] as f64 / self.n as f64
            },
        };
        RoleCounts {
            nodes: self.n,
            rib: spread(0),
            paths: spread(1),
            fib: spread(2),
            total_paths: self.sum[1] as u64,
        }
    }
}

/// Errors of the fabric model.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    #[error("node {0}: a leaf or spine without a plane")]
    NoPlane(String),
    #[error("the fabric has no RNIC")]
    NoRnic,
}

/// The multi-plane structure of a topology that the counts need.
#[derive(Clone, Debug)]
pub struct Fabric {
    pub planes: usize,
    /// RNIC r's leaf index in plane k: `rnic_leaf[r * planes + k]`, `u32::MAX` if none.
    rnic_leaf: Vec<u32>,
    pub leaves: Vec<Leaf>,
    /// Per spine: (plane, leaves it links to).
    pub spines: Vec<(usize, u32)>,
    /// Block aggregates originated per plane.
    pub aggregates: Vec<u32>,
}

#[derive(Clone, Debug)]
pub struct Leaf {
    pub plane: usize,
    pub spines: u32,
    pub rnics: Vec<u32>,
    pub originates_aggregate: bool,
}

const NONE: u32 = u32::MAX;

impl Fabric {
    /// Reads planes, leaves, spines and RNIC attachments from a topology (e.g. one from
    /// `topology::gen::multiplane`). Planes are numbered by the `plane` of the leaves.
    pub fn from_topology(t: &Topology) -> Result<Fabric, ScaleError> {
        let mut plane_ids: Vec<u32> = Vec::new();
        for n in &t.nodes {
            if matches!(n.role, Role::Leaf | Role::Spine) {
                let p = n.plane.ok_or_else(|| ScaleError::NoPlane(n.name.clone()))?;
                if !plane_ids.contains(&p) {
                    plane_ids.push(p);
                }
            }
        }
        plane_ids.sort_unstable();
        let plane_of = |id: NodeId| {
            t.nodes[id]
                .plane
                .and_then(|p| plane_ids.iter().position(|&q| q == p))
                .unwrap_or(0)
        };
        let planes = plane_ids.len().max(1);
        let mut index = vec![NONE; t.nodes.len()];
        let mut rnics = 0u32;
        let mut leaves = Vec::new();
        let mut spines = Vec::new();
        for (id, n) in t.nodes.iter().enumerate() {
            match n.role {
                Role::Rnic => {
                    index[id] = rnics;
                    rnics += 1;
                }
                Role::Leaf => {
                    index[id] = leaves.len() as u32;
                    leaves.push(Leaf {
                        plane: plane_of(id),
                        spines: 0,
                        rnics: Vec::new(),
                        originates_aggregate: !n.prefixes.is_empty(),
                    });
                }
                Role::Spine => {
                    index[id] = spines.len() as u32;
                    spines.push((plane_of(id), 0));
                }
                _ => {}
            }
        }
        if rnics == 0 {
            return Err(ScaleError::NoRnic);
        }
        let mut rnic_leaf = vec![NONE; rnics as usize * planes];
        let mut seen = FxHashSet::default();
        for l in &t.links {
            let (a, b) = if t.nodes[l.a].role.stage() <= t.nodes[l.b].role.stage() {
                (l.a, l.b)
            } else {
                (l.b, l.a)
            };
            // Parallel links carry the same routes: count each neighbor once.
            if !seen.insert((a, b)) {
                continue;
            }
            match (t.nodes[a].role, t.nodes[b].role) {
                (Role::Rnic, Role::Leaf) => {
                    let (r, leaf) = (index[a], index[b] as usize);
                    rnic_leaf[r as usize * planes + leaves[leaf].plane] = leaf as u32;
                    leaves[leaf].rnics.push(r);
                }
                (Role::Leaf, Role::Spine) => {
                    leaves[index[a] as usize].spines += 1;
                    spines[index[b] as usize].1 += 1;
                }
                _ => {}
            }
        }
        let mut aggregates = vec![0u32; planes];
        for l in &leaves {
            aggregates[l.plane] += l.originates_aggregate as u32;
        }
        Ok(Fabric {
            planes,
            rnic_leaf,
            leaves,
            spines,
            aggregates,
        })
    }

    pub fn rnics(&self) -> usize {
        self.rnic_leaf.len() / self.planes
    }

    /// RNIC r's leaf in plane k.
    pub fn leaf_of(&self, r: u32, k: usize) -> Option<u32> {
        let l = self.rnic_leaf[r as usize * self.planes + k];
        (l != NONE).then_some(l)
    }
}

/// Link state and workload of one analysis.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// RNICs that cannot be reached through plane k (`down[k]`): disconnected from it.
    pub down: Vec<FxHashSet<u32>>,
    /// Size of the all-to-all communication group of every RNIC.
    pub group: u32,
}

impl Scenario {
    /// `disconnected` distinct (RNIC, plane) links down, drawn with a fixed seed.
    pub fn random(f: &Fabric, disconnected: u32, group: u32, seed: u64) -> Scenario {
        let mut down = vec![FxHashSet::default(); f.planes];
        let mut rng = crate::rng::Rng::new(seed);
        // An RNIC not attached to a plane at all is unreachable through it too.
        let mut attached = 0u64;
        for (k, set) in down.iter_mut().enumerate() {
            for r in 0..f.rnics() as u32 {
                match f.leaf_of(r, k) {
                    Some(_) => attached += 1,
                    None => {
                        set.insert(r);
                    }
                }
            }
        }
        let want = (disconnected as u64).min(attached);
        let mut have = 0;
        while have < want {
            let r = rng.below(f.rnics() as u64) as u32;
            let k = rng.below(f.planes as u64) as usize;
            if f.leaf_of(r, k).is_some() && down[k].insert(r) {
                have += 1;
            }
        }
        Scenario { down, group }
    }

    /// The remote RNICs RNIC r talks to: its all-to-all group (RNICs r' with the same
    /// r' mod (N / group), so the members sit on different leaves) and its two ring
    /// neighbors. Sorted, without r.
    pub fn peers(&self, n: u32, r: u32) -> Vec<u32> {
        let group = self.group.clamp(1, n);
        let stride = (n / group).max(1);
        let base = r % stride;
        let mut p: Vec<u32> = (0..group)
            .map(|i| base + i * stride)
            .filter(|&x| x < n)
            .collect();
        p.push((r + 1) % n);
        p.push((r + n - 1) % n);
        p.sort_unstable();
        p.dedup();
        p.retain(|&x| x != r);
        p
    }

    fn reachable(&self, n: u64, k: usize) -> u64 {
        n - self.down[k].len() as u64
    }
}

/// Results of one technique.
#[derive(Clone, Debug)]
pub struct Report {
    pub technique: Technique,
    pub rnic: RoleCounts,
    pub leaf: RoleCounts,
    pub spine: RoleCounts,
}

/// Counts every node of the fabric under `technique`.
pub fn analyse(f: &Fabric, s: &Scenario, technique: Technique) -> Report {
    let n = f.rnics() as u64;
    let (mut rnic, mut leaf, mut spine) = (Acc::default(), Acc::default(), Acc::default());
    let blocks = f.aggregates.iter().copied().max().unwrap_or(0) as u64;
    for r in 0..n as u32 {
        let planes: Vec<usize> = (0..f.planes)
            .filter(|&k| f.leaf_of(r, k).is_some() && !s.down[k].contains(&r))
            .collect();
        let c = match technique {
            Technique::None => {
                let paths = planes.iter().map(|&k| s.reachable(n, k) - 1).sum();
                // Remote RNICs down in every plane r uses are the only ones missing.
                let missing = down_in_all(s, &planes, r);
                let rib = if planes.is_empty() {
                    0
                } else {
                    n - 1 - missing
                };
                Counts {
                    rib,
                    paths,
                    fib: rib,
                }
            }
            Technique::Aggregation => {
                let paths = planes
                    .iter()
                    .map(|&k| f.aggregates[k] as u64 + s.down[k].len() as u64)
                    .sum();
                let mut hosts = FxHashSet::default();
                for &k in &planes {
                    hosts.extend(s.down[k].iter().copied().filter(|&x| x != r));
                }
                let rib = if planes.is_empty() {
                    0
                } else {
                    blocks + hosts.len() as u64
                };
                Counts {
                    rib,
                    paths,
                    fib: rib,
                }
            }
            Technique::PrefixOrf | Technique::OrfFibSuppress => {
                let (mut paths, mut rib) = (0, 0);
                for p in s.peers(n as u32, r) {
                    let via = planes.iter().filter(|&&k| !s.down[k].contains(&p)).count();
                    paths += via as u64;
                    rib += (via > 0) as u64;
                }
                Counts {
                    rib,
                    paths,
                    fib: rib,
                }
            }
        };
        rnic.add(c);
    }
    for l in &f.leaves {
        let k = l.plane;
        let reach = s.reachable(n, k);
        let local: u64 = l.rnics.iter().filter(|r| !s.down[k].contains(r)).count() as u64;
        let local_down = l.rnics.len() as u64 - local;
        let d = s.down[k].len() as u64;
        let b = f.aggregates[k] as u64;
        let own = l.originates_aggregate as u64;
        let sp = l.spines as u64;
        let c = match technique {
            Technique::None | Technique::PrefixOrf => Counts {
                rib: reach,
                paths: local + sp * (reach - local),
                fib: reach,
            },
            Technique::Aggregation => Counts {
                rib: local + b + d,
                paths: local + own + sp * (b - own) + local_down + sp * (d - local_down),
                fib: local + b,
            },
            Technique::OrfFibSuppress => Counts {
                rib: reach + b,
                paths: local + own + sp * (reach - local) + sp * (b - own),
                fib: local + b,
            },
        };
        leaf.add(c);
    }
    for &(k, _leaves) in &f.spines {
        let reach = s.reachable(n, k);
        let b = f.aggregates[k] as u64;
        let d = s.down[k].len() as u64;
        let c = match technique {
            Technique::None | Technique::PrefixOrf => Counts {
                rib: reach,
                paths: reach,
                fib: reach,
            },
            Technique::Aggregation => Counts {
                rib: b + d,
                paths: b + d,
                fib: b,
            },
            Technique::OrfFibSuppress => Counts {
                rib: reach + b,
                paths: reach + b,
                fib: b,
            },
        };
        spine.add(c);
    }
    Report {
        technique,
        rnic: rnic.finish(),
        leaf: leaf.finish(),
        spine: spine.finish(),
    }
}

/// Remote RNICs (not r) that are down in every plane of `planes`.
fn down_in_all(s: &Scenario, planes: &[usize], r: u32) -> u64 {
    let Some((&first, rest)) = planes.split_first() else {
        return 0;
    };
    s.down[first]
        .iter()
        .filter(|&&x| x != r && rest.iter().all(|&k| s.down[k].contains(&x)))
        .count() as u64
}

/// One stored path as a compact RNIC table would hold it: IPv4 prefix and length, plane,
/// flags (unreachable, FIB-Suppress) and path bandwidth. Used to turn counts into bytes.
#[allow(dead_code)]
#[repr(C)]
pub struct StoredPath {
    pub prefix: u32,
    pub len: u8,
    pub plane: u8,
    pub flags: u16,
    pub bandwidth: f32,
}

pub const STORED_PATH_BYTES: usize = std::mem::size_of::<StoredPath>();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::gen::{multiplane, MultiPlane};

    /// 8 RNICs, 2 planes, 2 RNICs per leaf (4 leaves and 2 spines per plane).
    fn small() -> Fabric {
        let t = multiplane(&MultiPlane {
            gpus: 8,
            planes: 2,
            rnics_per_leaf: 2,
            spines_per_plane: 2,
            ..Default::default()
        });
        Fabric::from_topology(&t).unwrap()
    }

    fn degraded(f: &Fabric) -> Scenario {
        let mut s = Scenario::random(f, 0, 2, 1);
        s.down[0].insert(5);
        s
    }

    #[test]
    fn structure() {
        let f = small();
        assert_eq!(
            (f.planes, f.rnics(), f.leaves.len(), f.spines.len()),
            (2, 8, 8, 4)
        );
        assert_eq!(f.aggregates, vec![4, 4]);
        assert!(f.leaves.iter().all(|l| l.spines == 2 && l.rnics.len() == 2));
        assert_ne!(f.leaf_of(0, 0), f.leaf_of(0, 1));
    }

    #[test]
    fn no_suppression_is_planes_times_hosts() {
        let f = small();
        let r = analyse(&f, &Scenario::random(&f, 0, 2, 1), Technique::None);
        // Every RNIC: 7 remote host routes from each of 2 planes.
        assert_eq!(
            (r.rnic.paths.min, r.rnic.paths.max, r.rnic.fib.max),
            (14, 14, 7)
        );
        // Leaf: 8 host routes; 2 local paths + 6 remote from each of 2 spines.
        assert_eq!(
            (r.leaf.rib.max, r.leaf.paths.max, r.leaf.fib.max),
            (8, 14, 8)
        );
        assert_eq!(r.spine.fib.max, 8);
    }

    #[test]
    fn aggregation_adds_one_host_route_per_unreachable_rnic() {
        let f = small();
        let s = degraded(&f);
        let r = analyse(&f, &s, Technique::Aggregation);
        // RNICs on both planes: 4 aggregates per plane + 1 unreachable route in plane 0;
        // FIB: 4 aggregates + host route for RNIC 5. RNIC 5 itself uses plane 1 only.
        assert_eq!((r.rnic.paths.max, r.rnic.fib.max), (9, 5));
        assert_eq!((r.rnic.paths.min, r.rnic.fib.min), (4, 4));
        // Spines of plane 0 store the unreachable route but install aggregates only.
        assert_eq!((r.spine.rib.max, r.spine.fib.max), (5, 4));
    }

    #[test]
    fn orf_stores_only_peers() {
        let f = small();
        let s = Scenario::random(&f, 0, 2, 1);
        for r in 0..8 {
            let p = s.peers(8, r);
            assert!(!p.contains(&r) && p.len() <= 3, "{r}: {p:?}");
        }
        let a = analyse(&f, &s, Technique::PrefixOrf);
        let b = analyse(&f, &s, Technique::OrfFibSuppress);
        assert_eq!(a.rnic, b.rnic);
        assert!(a.rnic.paths.max <= 6);
        // FIB-Suppress: a leaf installs its 2 RNICs and the 4 aggregates.
        assert_eq!((a.leaf.fib.max, b.leaf.fib.max), (8, 6));
    }

    /// By hand: plane ids 9 and 3 (index 0 is plane 3), three leaves, RNIC 2 not in
    /// plane 3, a parallel RNIC link, one leaf without an aggregate.
    fn uneven() -> Fabric {
        let mut t = Topology::new("uneven");
        let mut add = |name: &str, role: Role, plane: Option<u32>, prefix: Option<&str>| {
            let mut n = crate::topology::Node::new(name, role);
            n.plane = plane;
            n.prefixes
                .extend(prefix.map(|p| p.parse::<ipnet::IpNet>().unwrap()));
            t.add_node(n)
        };
        let s1 = add("S1", Role::Spine, Some(9), None);
        let la = add("La", Role::Leaf, Some(9), Some("10.0.0.0/24"));
        let s2 = add("S2", Role::Spine, Some(3), None);
        let lb = add("Lb", Role::Leaf, Some(3), Some("10.0.1.0/24"));
        let lc = add("Lc", Role::Leaf, Some(3), Some("10.0.2.0/24"));
        let r: Vec<NodeId> = (1..=3)
            .map(|i| add(&format!("R{i}"), Role::Rnic, None, None))
            .collect();
        for (a, b) in [
            (s1, la),
            (s2, lb),
            (lc, s2),
            (la, r[0]),
            (r[0], la),
            (la, r[1]),
            (la, r[2]),
            (lb, r[0]),
            (r[1], lc),
        ] {
            t.add_link(a, b, 100.0, None);
        }
        Fabric::from_topology(&t).unwrap()
    }

    #[test]
    fn planes_leaves_and_attachments_by_hand() {
        let f = uneven();
        assert_eq!((f.planes, f.rnics()), (2, 3));
        // Leaves in node order: La (plane 9 = index 1), Lb, Lc (plane 3 = index 0).
        let leaves: Vec<(usize, u32, Vec<u32>)> = f
            .leaves
            .iter()
            .map(|l| (l.plane, l.spines, l.rnics.clone()))
            .collect();
        assert_eq!(
            leaves,
            vec![(1, 1, vec![0, 1, 2]), (0, 1, vec![0]), (0, 1, vec![1])]
        );
        assert_eq!(f.spines, vec![(1, 1), (0, 2)]);
        assert_eq!(f.aggregates, vec![2, 1]);
        let attached: Vec<[Option<u32>; 2]> =
            (0..3).map(|r| [f.leaf_of(r, 0), f.leaf_of(r, 1)]).collect();
        assert_eq!(
            attached,
            vec![[Some(1), Some(0)], [Some(2), Some(0)], [None, Some(0)]]
        );
    }

    #[test]
    fn random_scenario_takes_only_attached_links_and_stops_at_all_of_them() {
        let f = uneven();
        // RNIC 2 is not in plane index 0: unreachable there from the start.
        let none = Scenario::random(&f, 0, 2, 7);
        assert_eq!(none.down[0], FxHashSet::from_iter([2]));
        assert!(none.down[1].is_empty());
        for seed in 0..20 {
            let s = Scenario::random(&f, 2, 2, seed);
            assert_eq!(s.down[0].len() + s.down[1].len(), 3, "seed {seed}");
            assert!(s.down[0].contains(&2));
        }
        // 5 attached links: asking for 100 takes them all, and ends.
        let all = Scenario::random(&f, 100, 2, 1);
        assert_eq!(all.down[0], FxHashSet::from_iter([0, 1, 2]));
        assert_eq!(all.down[1], FxHashSet::from_iter([0, 1, 2]));
        assert_eq!(all.group, 2);
    }

    #[test]
    fn peers_by_hand() {
        let s = Scenario {
            down: vec![],
            group: 4,
        };
        // 16 RNICs in groups of 4: stride 4; RNIC 5's group 1, 5, 9, 13, ring 4 and 6.
        assert_eq!(s.peers(16, 5), vec![1, 4, 6, 9, 13]);
        assert_eq!(s.peers(16, 0), vec![1, 4, 8, 12, 15]);
        assert_eq!(s.peers(16, 15), vec![0, 3, 7, 11, 14]);
        // 10 RNICs in groups of 4: stride 2; RNIC 9: 1, 3, 5, 7 and ring 8, 0.
        assert_eq!(s.peers(10, 9), vec![0, 1, 3, 5, 7, 8]);
        // A group larger than the fabric is all of it; a group of 0 is the RNIC alone.
        let all = Scenario {
            down: vec![],
            group: 9,
        };
        assert_eq!(all.peers(5, 3), vec![0, 1, 2, 4]);
        let alone = Scenario {
            down: vec![],
            group: 0,
        };
        assert_eq!(alone.peers(10, 3), vec![2, 4]);
    }

    #[test]
    fn role_counts_min_mean_max_by_hand() {
        let mut acc = Acc::default();
        assert_eq!(acc.finish(), RoleCounts::default());
        for (rib, paths, fib) in [(1, 2, 3), (3, 4, 5), (2, 0, 7)] {
            acc.add(Counts { rib, paths, fib });
        }
        let c = acc.finish();
        assert_eq!(c.nodes, 3);
        let spread = |s: Spread| (s.min, s.max, s.mean);
        assert_eq!(spread(c.rib), (1, 3, 2.0));
        assert_eq!(spread(c.paths), (0, 4, 2.0));
        assert_eq!(spread(c.fib), (3, 7, 5.0));
        assert_eq!(c.total_paths, 6);
    }

    #[test]
    fn each_technique_names_its_section_of_the_draft() {
        let labels: Vec<&str> = Technique::ALL.iter().map(|t| t.label()).collect();
        let sections: Vec<Option<&str>> = labels
            .iter()
            .map(|l| l.split('§').nth(1).map(|s| s.trim_end_matches(')')))
            .collect();
        assert_eq!(
            sections,
            vec![None, Some("4.1"), Some("4.2"), Some("4.2.1")]
        );
        assert!(labels[0].starts_with("no suppression"), "{}", labels[0]);
    }

    /// Every count of both ORF techniques by hand on `small()` with RNIC 5 down in plane 0
    /// (group 2: stride 4, so RNIC r talks to r +- 4 and its ring neighbors).
    #[test]
    fn orf_counts_by_hand() {
        let f = small();
        let s = degraded(&f);
        let spread = |c: Spread| (c.min, c.max, c.mean);
        let a = analyse(&f, &s, Technique::PrefixOrf);
        // Peers via both planes count 2, RNIC 5 via plane 1 only; RNIC 5 itself has one
        // plane. Paths per RNIC 0..7: 6 5 6 6 5 3 5 6.
        assert_eq!(spread(a.rnic.paths), (3, 6, 42.0 / 8.0));
        assert_eq!(spread(a.rnic.rib), (3, 3, 3.0));
        assert_eq!(a.rnic.total_paths, 42);
        // Leaves: plane 0 reaches 7 RNICs (its leaf of RNICs 4, 5 has one of them local),
        // plane 1 all 8; paths = local + 2 spines x (reachable - local).
        assert_eq!(spread(a.leaf.rib), (7, 8, 7.5));
        assert_eq!(
            spread(a.leaf.paths),
            (12, 14, (13.0 + 3.0 * 12.0 + 4.0 * 14.0) / 8.0)
        );
        assert_eq!(spread(a.spine.fib), (7, 8, 7.5));
        let b = analyse(&f, &s, Technique::OrfFibSuppress);
        assert_eq!(b.rnic, a.rnic);
        // Leaves add the 4 block aggregates (1 their own, 3 from each of 2 spines) and
        // install their local RNICs and the aggregates: plane 0: 20 paths at the leaf of
        // RNIC 5, 19 elsewhere; plane 1: 21.
        assert_eq!(spread(b.leaf.rib), (11, 12, 11.5));
        assert_eq!(spread(b.leaf.paths), (19, 21, 161.0 / 8.0));
        assert_eq!(b.leaf.total_paths, 161);
        assert_eq!(spread(b.leaf.fib), (5, 6, 47.0 / 8.0));
        assert_eq!(spread(b.spine.rib), (11, 12, 11.5));
        assert_eq!(spread(b.spine.paths), (11, 12, 11.5));
        assert_eq!(spread(b.spine.fib), (4, 4, 4.0));
    }

    /// Host routes and aggregation by hand on `small()` with RNICs 3 and 5 down in plane 0
    /// and RNICs 2 and 5 in plane 1: RNIC 5 is reachable nowhere, 2 and 3 through one
    /// plane each.
    #[test]
    fn host_routes_and_aggregation_counts_by_hand() {
        let f = small();
        let mut s = Scenario::random(&f, 0, 2, 1);
        s.down[0].extend([3, 5]);
        s.down[1].extend([2, 5]);
        let spread = |c: Spread| (c.min, c.max, c.mean);
        let none = analyse(&f, &s, Technique::None);
        // RNICs 0 1 4 6 7: 5 + 5 paths, all but itself and 5 in the RIB (6); RNICs 2 and
        // 3: 5 paths through their one plane, 5 in the RIB (the other two down there are
        // missing); RNIC 5: nothing.
        assert_eq!(spread(none.rnic.paths), (0, 10, 60.0 / 8.0));
        assert_eq!(spread(none.rnic.rib), (0, 6, 40.0 / 8.0));
        assert_eq!(none.rnic.fib, none.rnic.rib);
        let agg = analyse(&f, &s, Technique::Aggregation);
        // Per usable plane 4 aggregates + 2 unreachable routes; RIB: 4 blocks + the host
        // routes of the RNICs unreachable in its planes ({2, 3, 5}, {3, 5} or {2, 5}).
        assert_eq!(spread(agg.rnic.paths), (0, 12, 72.0 / 8.0));
        assert_eq!(spread(agg.rnic.rib), (0, 7, 47.0 / 8.0));
        // A leaf with both RNICs up: rib 2 + 4 + 2, paths 2 local + 1 own aggregate +
        // 2 spines x 3 aggregates + 2 spines x 2 unreachable = 13, fib 6; with one RNIC
        // down: 7, 1 + 1 + 6 + 1 (its own unreachable) + 2 x 1 = 11, 5. Two of each per plane.
        assert_eq!(spread(agg.leaf.rib), (7, 8, 7.5));
        assert_eq!(spread(agg.leaf.paths), (11, 13, 12.0));
        assert_eq!(agg.leaf.total_paths, 96);
        assert_eq!(spread(agg.leaf.fib), (5, 6, 5.5));
        assert_eq!(spread(agg.spine.rib), (6, 6, 6.0));
        assert_eq!(spread(agg.spine.paths), (6, 6, 6.0));
        assert_eq!(spread(agg.spine.fib), (4, 4, 4.0));
        // Prefix-ORF: a peer down in every plane of the RNIC is not in its RIB. Peers
        // (stride 4 and the ring) reachable per RNIC 0..7: 3 2 2 2 2 0 2 3; paths (one
        // per usable plane): 6 3 2 2 3 0 3 5.
        let orf = analyse(&f, &s, Technique::PrefixOrf);
        assert_eq!(spread(orf.rnic.rib), (0, 3, 2.0));
        assert_eq!(spread(orf.rnic.paths), (0, 6, 3.0));
    }
}
