//! `xdp` data plane backend: loads the fare XDP program (ebpf/fare-xdp) with aya,
//! attaches it to the node's interfaces and keeps its maps in step with the groups.
//!
//! - Group replacement is make-before-break: the new group is written into a free group
//!   id (members, counters, cursor, then the group row), the route is repointed with one
//!   LPM map update, and only then is the old id freed (reused after a grace period).
//! - Maps and links are pinned under `<pin_root>/<node>/` (see [`pins`]); `open` loads
//!   the program against the pinned maps, swaps it into the pinned links atomically and
//!   adopts the groups it finds, so a restarted agent (also after `kill -9`) causes no
//!   forwarding gap. Installing an identical group again is a no-op.
//! - DPF: a route may carry per-color groups (their own group ids) listed in
//!   COLOR_SETS[route group id]; flow rules (FLOW_RULES) give packets a color. See
//!   [`colors`] and `dataplane::dpf`.
//! - Per-member counters survive replacements (carried to the new member with the same
//!   interface and neighbor MAC) and restarts (they live in the pinned maps).

mod adopt;
pub mod arn;
mod attach;
pub mod bpffs;
mod colors;
mod dir4;
mod encode;
mod group_ids;
mod keep;
pub mod kernel;
mod logs;
mod object;
pub mod pins;
pub mod queues;
mod stages;
pub mod steer;
// BPF_PROG_TEST_RUN serves the benchmarks and tests only: the packaged binary is built
// without it. Loading with the verifier's counts is also `fare xdp check`'s.
#[cfg(feature = "bench")]
pub mod testrun;
pub mod verifier;

use async_trait::async_trait;
use attach::{attach_program, attach_tc_egress, configure_queues};
use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::maps::{Array, DevMapHash, MapData, PerCpuArray, PerCpuValues};
use aya::programs::links::{FdLink, PinnedLink};
use aya::programs::tc::SchedClassifierLink;
use aya::programs::xdp::XdpLink;
use aya::programs::{SchedClassifier, TcAttachType, Xdp, XdpMode};
use aya::{Ebpf, EbpfLoader};
use encode::{Egress, Encoded};
use fare_common::{self as fc, map_names, member_id, RouteValue, Stat};
use fare_dataplane::{
    BucketStatus, ColorGroup, ColorStatus, Dataplane, DataplaneError, Dpf, FlowRule, FlowSteering,
    Group, GroupLimits, GroupStatus, MemberStatus, Offers, DEFAULT_FLOWLET_GAP_US,
};
use group_ids::GroupIds;
use ipnet::IpNet;
use pins::PinDir;
use std::collections::BTreeMap;
use std::fmt::Display;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::PathBuf;

#[cfg(feature = "bench")]
pub use testrun::{TestRun, TestRunOptions};

/// True when this binary embeds the XDP program (bpf-linker was there at build time).
pub fn embedded() -> bool {
    object::bytes().is_some()
}

const BACKEND: &str = "xdp";

fn err(what: impl Display) -> DataplaneError {
    DataplaneError::backend(BACKEND, what.to_string())
}

/// Where and on what the backend runs.
#[derive(Clone, Debug)]
pub struct XdpOptions {
    /// Node name: the pin directory `<pin_root>/<node>` (unique per agent on a host).
    pub node: String,
    /// Interfaces that get the XDP program (ingress); members may use any interface.
    pub interfaces: Vec<String>,
    /// bpffs directory for fare's pins (default /sys/fs/bpf/fare).
    pub pin_root: PathBuf,
    /// ARN reception in the program (the agent's `arn:` block); None = off.
    pub arn: Option<arn::ArnFastPath>,
    /// Egress virtual queues (rate, tail-drop limit) per port.
    pub queues: Vec<queues::QueueSpec>,
    /// Interfaces whose egress gets the TC spray program: this host's own packets to a
    /// destination with a spray-mode group go out per packet by weight over its members.
    pub egress_spray: Vec<String>,
    /// An XDP object (ELF) to load instead of the one built into this binary: the
    /// benchmarks measure an earlier build's program with it. Its maps must have this
    /// build's layout. None = the built-in object.
    pub object: Option<Vec<u8>>,
    /// Flowlet-mode groups: the idle gap that starts a new flowlet, in microseconds
    /// (the agent's `fare.flowlet_gap_us`).
    pub flowlet_gap_us: u32,
}

impl XdpOptions {
    pub fn new(node: impl Into<String>, interfaces: Vec<String>) -> XdpOptions {
        XdpOptions {
            node: node.into(),
            interfaces,
            pin_root: PathBuf::from(pins::DEFAULT_ROOT),
            arn: None,
            queues: Vec::new(),
            egress_spray: Vec::new(),
            object: None,
            flowlet_gap_us: DEFAULT_FLOWLET_GAP_US,
        }
    }
}

/// A group as written to the maps.
struct Installed {
    gid: u32,
    group: Group,
    encoded: Encoded,
    /// DPF: the route's active per-color groups.
    colors: Vec<InstalledColor>,
    /// The route entry's `ROUTE_*` flags as written.
    flags: u32,
    /// Flow mode: the bucket table and what its last change moved.
    buckets: Option<BucketStatus>,
}

/// One per-color group of a route as written to the maps.
struct InstalledColor {
    color: u32,
    gid: u32,
    encoded: Encoded,
}

impl Installed {
    fn same_forwarding(&self, base: &Encoded, colors: &[(u32, Encoded)]) -> bool {
        self.encoded.same_forwarding(base)
            && self.colors.len() == colors.len()
            && self
                .colors
                .iter()
                .zip(colors)
                .all(|(a, (color, e))| a.color == *color && a.encoded.same_forwarding(e))
    }
}

pub struct XdpDataplane {
    /// Owns the loaded program (the links below keep it attached).
    ebpf: Ebpf,
    /// The earlier agent's program, kept in the links instead of loading `ebpf`'s.
    kept: Option<Xdp>,
    pins: PinDir,
    links: Vec<(String, FdLink)>,
    routes_v4: LpmTrie<MapData, [u8; 4], RouteValue>,
    routes_v6: LpmTrie<MapData, [u8; 16], RouteValue>,
    /// The fast path's copy of `routes_v4` (None: an object without it).
    dir4: Option<dir4::Dir4Maps>,
    /// Per CPU: the group, the spray cursor and the member counters (`fc::GroupRow`).
    group_rows: PerCpuArray<MapData, fc::GroupRow>,
    member_rows: Array<MapData, fc::Member>,
    stats: PerCpuArray<MapData, u64>,
    egress: DevMapHash<MapData>,
    color_sets: Array<MapData, fc::ColorSet>,
    flow_rules: Array<MapData, fc::FlowRule>,
    /// Members in service per group (the program's ARN receiver keeps the last one).
    group_active: Array<MapData, u32>,
    arn: arn::ArnMaps,
    steer: steer::SteerMaps,
    installed: BTreeMap<IpNet, Installed>,
    /// Egress ports with a virtual queue (routes through them get `ROUTE_QUEUES`).
    queued: Vec<u32>,
    ids: GroupIds,
    generation: u32,
    ncpus: usize,
    /// Written into the rows of flowlet-mode groups (`XdpOptions::flowlet_gap_us`).
    flowlet_gap_us: u32,
    log_task: Option<tokio::task::JoinHandle<()>>,
}

/// The routes in an LPM trie named `name` (an earlier agent's, when the pins were
/// there); `prefix` makes the prefix of a key's address and length.
fn trie_routes<K: aya::Pod, P>(
    trie: &LpmTrie<MapData, K, RouteValue>,
    name: &str,
    prefix: impl Fn(K, u8) -> Option<P>,
) -> Result<Vec<(P, RouteValue)>, DataplaneError> {
    let read = |e| err(format!("reading {name}: {e}"));
    let mut out = Vec::new();
    for key in trie.keys() {
        let key = key.map_err(read)?;
        let value = trie.get(&key, 0).map_err(read)?;
        if let Some(p) = prefix(key.data(), key.prefix_len() as u8) {
            out.push((p, value));
        }
    }
    Ok(out)
}

fn v4_key(n: ipnet::Ipv4Net) -> Key<[u8; 4]> {
    Key::new(u32::from(n.prefix_len()), n.network().octets())
}

fn v6_key(n: ipnet::Ipv6Net) -> Key<[u8; 16]> {
    Key::new(u32::from(n.prefix_len()), n.network().octets())
}

fn take_map<T>(ebpf: &mut Ebpf, name: &str) -> Result<T, DataplaneError>
where
    T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>,
{
    let map = ebpf
        .take_map(name)
        .ok_or_else(|| err(format!("map {name} missing from the XDP object")))?;
    T::try_from(map).map_err(|e| err(format!("map {name}: {e}")))
}

/// The XDP object `object`, or the one built into this binary.
fn object_bytes(object: Option<&[u8]>) -> Result<&[u8], DataplaneError> {
    match object {
        Some(bytes) => Ok(bytes),
        None => object::bytes().ok_or_else(|| err(object::MISSING)),
    }
}

/// Mounts bpffs where needed and creates the node's pin directories.
fn prepare_pins(pins: &PinDir, root: &std::path::Path) -> Result<(), DataplaneError> {
    pins.prepare(root).map_err(|source| DataplaneError::Io {
        backend: BACKEND,
        what: format!("preparing pin directory {}", pins.node.display()),
        source,
    })
}

/// Loads the program (the verifier runs) and attaches it to every interface, then pins
/// it under `id` for the next agent (see [`keep`]).
fn load_and_attach(
    ebpf: &mut Ebpf,
    pins: &PinDir,
    interfaces: &[String],
    id: &str,
) -> Result<Vec<(String, FdLink)>, DataplaneError> {
    // The stages first: the entry hands packets to them as soon as it is attached.
    stages::load(ebpf)?;
    let program: &mut Xdp = ebpf
        .program_mut(fc::PROGRAM_NAME)
        .ok_or_else(|| err("program fare_xdp missing from the object"))?
        .try_into()
        .map_err(|e| err(format!("program fare_xdp: {e}")))?;
    verifier::load_logged(fc::PROGRAM_NAME, || program.load())?;
    keep::forget(pins);
    let mut links = Vec::new();
    for ifname in interfaces {
        let link = attach_program(program, pins, ifname)?;
        links.push((ifname.clone(), link));
    }
    keep::remember(pins, ebpf, id);
    Ok(links)
}

/// Opens the object against the maps pinned in `pins` (created the first time), with
/// the kernel log level and the load-time ARN reception flag set; nothing loaded yet.
fn load_object(bytes: &[u8], pins: &PinDir, arn_receiver: bool) -> Result<Ebpf, DataplaneError> {
    let level = logs::kernel_level();
    EbpfLoader::new()
        .default_map_pin_directory(pins.maps())
        .override_global("AYA_LOG_LEVEL", &level, false)
        .override_global(fc::ARN_RECEIVER_GLOBAL, &u8::from(arn_receiver), false)
        .load(bytes)
        .map_err(|e| err(format!("loading the XDP object: {e}")))
}

impl XdpDataplane {
    /// DPF: yes; flow steering: yes.
    pub const OFFERS: Offers = Offers {
        dpf: true,
        flow_steering: true,
    };
    /// Loads the program against the pinned maps (creating them the first time),
    /// attaches it to every interface (atomically replacing a pinned earlier instance)
    /// and adopts the groups already in the maps.
    pub fn open(opts: &XdpOptions) -> Result<XdpDataplane, DataplaneError> {
        let bytes = object_bytes(opts.object.as_deref())?;
        kernel::check().map_err(err)?;
        let pins = PinDir::new(&opts.pin_root, &opts.node);
        // A node's first open that fails leaves no pins behind (a pinned link would keep
        // the program attached with no agent); an earlier instance's pins are kept, they
        // still forward.
        let first = !pins.node.exists();
        prepare_pins(&pins, &opts.pin_root)?;
        let opened = Self::open_pinned(opts, bytes, pins);
        if opened.is_err() && first {
            let pins = PinDir::new(&opts.pin_root, &opts.node);
            if let Err(e) = pins.remove_all() {
                tracing::warn!(node = %opts.node, "xdp: pins of the failed open not removed: {e}");
            }
        }
        opened
    }

    fn open_pinned(
        opts: &XdpOptions,
        bytes: &[u8],
        pins: PinDir,
    ) -> Result<XdpDataplane, DataplaneError> {
        // ARN reception is compiled out of the loaded program unless configured (the
        // program's FARE_ARN_RECEIVER, read-only: the verifier drops the dead code).
        let mut ebpf = load_object(bytes, &pins, opts.arn.is_some())?;
        let log_task = logs::spawn(&mut ebpf);
        // The fast path reads the IPv4 table as soon as the program is attached: bring
        // it to the trie's routes first (it may be an earlier agent's, or from before
        // routes changed under an agent of a build without it).
        let routes_v4: LpmTrie<MapData, [u8; 4], RouteValue> =
            take_map(&mut ebpf, map_names::ROUTES_V4)?;
        let v4_routes = trie_routes(&routes_v4, map_names::ROUTES_V4, |a: [u8; 4], len| {
            ipnet::Ipv4Net::new(a.into(), len).ok()
        })?;
        let mut dir4 = dir4::Dir4Maps::take(&mut ebpf)?;
        if let Some(table) = &mut dir4 {
            table.adopt(v4_routes.iter().copied());
        }
        let id = keep::identity(bytes, logs::kernel_level(), opts.arn.is_some());
        let (kept, mut links) = match keep::reuse(&pins, &opts.interfaces, &id) {
            Some((program, links)) => {
                tracing::info!(node = %opts.node, "xdp: kept the verified program of the pinned links");
                (Some(program), links)
            }
            None => (
                None,
                load_and_attach(&mut ebpf, &pins, &opts.interfaces, &id)?,
            ),
        };
        if !opts.egress_spray.is_empty() {
            let tc: &mut SchedClassifier = ebpf
                .program_mut(fc::TC_SPRAY_NAME)
                .ok_or_else(|| err("program fare_tc_spray missing from the object"))?
                .try_into()
                .map_err(|e| err(format!("program fare_tc_spray: {e}")))?;
            verifier::load_logged(fc::TC_SPRAY_NAME, || tc.load())?;
            for ifname in &opts.egress_spray {
                let link = attach_tc_egress(tc, &pins, ifname)?;
                links.push((format!("tc-{ifname}"), link));
            }
        }
        let queued = configure_queues(
            queues::Queues::new(take_map(&mut ebpf, fc::QUEUES)?),
            &opts.queues,
        )?;
        let ncpus = aya::util::nr_cpus().map_err(|(what, e)| err(format!("{what}: {e}")))?;
        let mut dp = XdpDataplane {
            routes_v4,
            routes_v6: take_map(&mut ebpf, map_names::ROUTES_V6)?,
            dir4,
            group_rows: take_map(&mut ebpf, map_names::GROUP_ROWS)?,
            member_rows: take_map(&mut ebpf, map_names::MEMBERS)?,
            stats: take_map(&mut ebpf, map_names::STATS)?,
            egress: take_map(&mut ebpf, map_names::EGRESS)?,
            color_sets: take_map(&mut ebpf, map_names::COLOR_SETS)?,
            flow_rules: take_map(&mut ebpf, map_names::FLOW_RULES)?,
            group_active: take_map(&mut ebpf, fc::GROUP_ACTIVE)?,
            arn: arn::ArnMaps::take(&mut ebpf)?,
            steer: steer::SteerMaps::take(&mut ebpf)?,
            ebpf,
            kept,
            pins,
            links,
            installed: BTreeMap::new(),
            queued,
            ids: GroupIds::new(0, |_| false),
            generation: 0,
            ncpus,
            flowlet_gap_us: opts.flowlet_gap_us,
            log_task,
        };
        dp.adopt(v4_routes)?;
        dp.arn.configure(opts.arn.clone())?;
        dp.sync_arn();
        tracing::info!(
            node = %opts.node,
            interfaces = ?opts.interfaces,
            adopted = dp.installed.len(),
            "xdp: program attached"
        );
        Ok(dp)
    }

    /// Writes a route: its color groups, its group, its COLOR_SETS row, then the route
    /// itself (the one update that switches packets over). Counters of the same next hop
    /// (and color) carry over from `old`. Returns the route entry's flags: colors when it
    /// has some, queues when a member of its groups leaves through a port with a virtual
    /// queue (steering is flagged by `sync_steered_copies` once copies exist).
    fn write_route(
        &mut self,
        prefix: IpNet,
        gid: u32,
        encoded: &mut Encoded,
        colors: &mut [(u32, u32, Encoded)],
        old: Option<&Installed>,
    ) -> Result<u32, DataplaneError> {
        for (color, cgid, enc) in colors.iter_mut() {
            let prev = old
                .and_then(|o| o.colors.iter().find(|c| c.color == *color))
                .map(|c| (c.gid, &c.encoded));
            self.write_group(*cgid, enc, prev)?;
        }
        self.write_group(gid, encoded, old.map(|o| (o.gid, &o.encoded)))?;
        let entries: Vec<(u32, u32, bool)> =
            colors.iter().map(|(c, g, _)| (*c, *g, true)).collect();
        self.color_sets
            .set(gid, colors::color_set(&entries), 0)
            .map_err(|e| err(format!("COLOR_SETS[{gid}]: {e}")))?;
        let mut flags = 0;
        if !colors.is_empty() {
            flags |= fc::ROUTE_COLORS;
        }
        let queued = std::iter::once(&*encoded)
            .chain(colors.iter().map(|(_, _, e)| e))
            .flat_map(|e| &e.members)
            .any(|m| self.queued.contains(&m.ifindex));
        if queued {
            flags |= fc::ROUTE_QUEUES;
        }
        self.set_route(prefix, gid, flags)?;
        Ok(flags)
    }

    /// The route the fast path's IPv4 table gives `addr` as the maps hold it (None: the
    /// fast path asks the trie, or the object has no table). For tests and diagnostics.
    pub fn ipv4_table_route(&self, addr: std::net::Ipv4Addr) -> Option<RouteValue> {
        self.dir4.as_ref()?.lookup(addr)
    }

    /// Program counters (`received`, `forwarded`, `malformed`, ...) summed over CPUs.
    /// `received` is the sum of the outcomes (the program counts each packet once, by
    /// its outcome).
    pub fn stats(&self) -> Result<BTreeMap<&'static str, u64>, DataplaneError> {
        let mut out = BTreeMap::new();
        for stat in Stat::ALL {
            if stat == Stat::Received {
                continue;
            }
            let values = self
                .stats
                .get(&(stat as u32), 0)
                .map_err(|e| err(format!("reading STATS: {e}")))?;
            out.insert(stat.name(), values.iter().sum());
        }
        let received = Stat::OUTCOMES.iter().map(|s| out[s.name()]).sum();
        out.insert(Stat::Received.name(), received);
        Ok(out)
    }

    /// The flowlet gap of flowlet-mode groups written from now on, in microseconds (0:
    /// every packet starts a flowlet). Groups already written keep theirs until their
    /// next change.
    pub fn set_flowlet_gap_us(&mut self, gap_us: u32) {
        self.flowlet_gap_us = gap_us;
    }

    /// File descriptor of the attached program (for `BPF_PROG_TEST_RUN`).
    pub fn program_fd(&self) -> Result<RawFd, DataplaneError> {
        if let Some(kept) = &self.kept {
            let fd = kept.fd().map_err(|e| err(format!("{e}")))?;
            return Ok(fd.as_fd().as_raw_fd());
        }
        let program: &Xdp = self
            .ebpf
            .program(fc::PROGRAM_NAME)
            .ok_or_else(|| err("program missing"))?
            .try_into()
            .map_err(|e| err(format!("{e}")))?;
        let fd = program.fd().map_err(|e| err(format!("{e}")))?;
        Ok(fd.as_fd().as_raw_fd())
    }

    /// Runs the program on `frame` with `BPF_PROG_TEST_RUN` (see [`testrun`]).
    #[cfg(feature = "bench")]
    pub fn test_run(&self, frame: &[u8], opts: TestRunOptions) -> Result<TestRun, DataplaneError> {
        testrun::run(self.program_fd()?, frame, opts).map_err(|source| DataplaneError::Io {
            backend: BACKEND,
            what: "BPF_PROG_TEST_RUN".into(),
            source,
        })
    }

    /// Interfaces with the program attached.
    pub fn interfaces(&self) -> impl Iterator<Item = &str> {
        self.links.iter().map(|(name, _)| name.as_str())
    }

    /// Detaches from every interface and removes all pins of this node (forwarding
    /// stops). A plain drop leaves everything attached and pinned instead.
    pub fn destroy(mut self) -> Result<(), DataplaneError> {
        self.links.clear();
        self.pins.remove_all().map_err(|source| DataplaneError::Io {
            backend: BACKEND,
            what: format!("removing {}", self.pins.node.display()),
            source,
        })
    }

    /// Counters and state of members `0..n` of group `gid`, summed over CPUs (the
    /// group's per-CPU rows read once for all of them).
    fn member_statuses(&self, gid: u32, n: usize) -> Result<Vec<MemberStatus>, DataplaneError> {
        let rows = self
            .group_rows
            .get(&gid, 0)
            .map_err(|e| err(format!("GROUP_ROWS[{gid}]: {e}")))?;
        (0..n)
            .map(|i| {
                let index = i % fc::MAX_MEMBERS_PER_GROUP as usize;
                Ok(MemberStatus {
                    packets: rows.iter().map(|r| r.counters[index].packets).sum(),
                    bytes: rows.iter().map(|r| r.counters[index].bytes).sum(),
                    active: self.member_row(gid, i)?.active(),
                })
            })
            .collect()
    }

    /// The group written at `gid` (every CPU holds the same copy; CPU 0's is read).
    fn group_of(&self, gid: u32) -> Option<fc::Group> {
        let rows = self.group_rows.get(&gid, 0).ok()?;
        rows.iter().next().map(|r| r.group)
    }

    fn egress(&mut self, name: &str) -> Result<Egress, DataplaneError> {
        let io = |what: String| {
            move |source| DataplaneError::Io {
                backend: BACKEND,
                what,
                source,
            }
        };
        let ifindex = fare_netdev::links::ifindex(name).map_err(io(format!("interface {name}")))?;
        let mac = fare_netdev::links::mac(name).map_err(io(format!("MAC address of {name}")))?;
        if self.egress.get(ifindex, 0).is_err() {
            self.egress
                .insert(ifindex, ifindex, None, 0)
                .map_err(|e| err(format!("adding {name} to EGRESS: {e}")))?;
        }
        Ok(Egress { ifindex, mac })
    }

    /// Writes the members, then the group's per-CPU rows of `gid` (the group, cursor 0,
    /// and each member's counters carried from the same next hop in `old`, CPU by CPU).
    fn write_group(
        &mut self,
        gid: u32,
        encoded: &mut Encoded,
        old: Option<(u32, &Encoded)>,
    ) -> Result<(), DataplaneError> {
        for (i, m) in encoded.members.iter().enumerate() {
            let id = member_id(gid, i as u32);
            self.member_rows
                .set(id, m, 0)
                .map_err(|e| err(format!("MEMBERS[{id}]: {e}")))?;
        }
        self.store_active(gid, encoded.members.iter().map(|m| m.state))?;
        self.generation = self.generation.wrapping_add(1);
        encoded.group.generation = self.generation;
        // Carry the counters of the same next hop in the group being replaced.
        let old_rows = old.and_then(|(old_gid, old_enc)| {
            let rows = self.group_rows.get(&old_gid, 0).ok()?;
            Some((rows, old_enc))
        });
        let mut rows = vec![
            fc::GroupRow {
                group: encoded.group,
                flowlet_gap_us: if encoded.group.mode == fc::MODE_FLOWLET {
                    self.flowlet_gap_us
                } else {
                    0
                },
                ..fc::GroupRow::default()
            };
            self.ncpus
        ];
        if let Some((old_rows, old_enc)) = &old_rows {
            for (i, m) in encoded.members.iter().enumerate() {
                let Some(j) = old_enc
                    .members
                    .iter()
                    .position(|o| o.ifindex == m.ifindex && o.dst_mac == m.dst_mac)
                else {
                    continue;
                };
                let (i, j) = (i % rows[0].counters.len(), j % rows[0].counters.len());
                for (row, old_row) in rows.iter_mut().zip(old_rows.iter()) {
                    row.counters[i] = old_row.counters[j];
                }
            }
        }
        let rows = PerCpuValues::try_from(rows).map_err(|e| err(format!("{e}")))?;
        self.group_rows
            .set(gid, rows, 0)
            .map_err(|e| err(format!("GROUP_ROWS[{gid}]: {e}")))
    }

    fn set_route(&mut self, prefix: IpNet, gid: u32, flags: u32) -> Result<(), DataplaneError> {
        let value = RouteValue { group: gid, flags };
        let fail = |e| err(format!("route {prefix}: {e}"));
        match prefix.trunc() {
            IpNet::V4(n) => {
                self.routes_v4.insert(&v4_key(n), value, 0).map_err(fail)?;
                // The trie first: a packet the table sends to the trie finds it there.
                if let Some(table) = &mut self.dir4 {
                    table.set(n, value);
                }
                Ok(())
            }
            IpNet::V6(n) => self.routes_v6.insert(&v6_key(n), value, 0).map_err(fail),
        }
    }

    fn delete_route(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        let fail = |e| err(format!("route {prefix}: {e}"));
        match prefix.trunc() {
            IpNet::V4(n) => {
                // The table first: while the trie still has the route, a packet the
                // table sends there finds the route it had.
                let Some(table) = &mut self.dir4 else {
                    return self.routes_v4.remove(&v4_key(n)).map_err(fail);
                };
                let had = table.lookup_exact(n);
                table.remove(n);
                let removed = self.routes_v4.remove(&v4_key(n)).map_err(fail);
                if let (Err(_), Some(route)) = (&removed, had) {
                    // The route stays (the caller keeps it installed): so does its entry.
                    table.set(n, route);
                }
                removed
            }
            IpNet::V6(n) => self.routes_v6.remove(&v6_key(n)).map_err(fail),
        }
    }

    /// GROUP_ACTIVE[gid]: how many of `states` are in service (0).
    fn store_active(
        &mut self,
        gid: u32,
        states: impl Iterator<Item = u32>,
    ) -> Result<(), DataplaneError> {
        let active = states.filter(|s| *s == 0).count() as u32;
        self.group_active
            .set(gid, active, 0)
            .map_err(|e| err(format!("GROUP_ACTIVE[{gid}]: {e}")))
    }

    fn member_states(&self, gid: u32, n: usize) -> Result<Vec<u32>, DataplaneError> {
        (0..n).map(|i| Ok(self.member_row(gid, i)?.state)).collect()
    }

    /// The encoded group installed as `gid`.
    fn encoded_of(&self, gid: u32) -> Option<Encoded> {
        let inst = self.installed.values().find(|i| i.gid == gid)?;
        Some(inst.encoded.clone())
    }

    /// Rewrites the member states of `gid`'s steered copies after a member of it changed
    /// (`states`: the group's member states now).
    fn refresh_copies_of(&mut self, gid: u32, states: &[u32]) -> Result<(), DataplaneError> {
        let copies: Vec<(u32, u32)> = self
            .steer
            .copies
            .iter()
            .filter(|((g, _), _)| *g == gid)
            .map(|((_, port), copy)| (*port, *copy))
            .collect();
        if copies.is_empty() {
            return Ok(());
        }
        let Some(group) = self.encoded_of(gid) else {
            return Ok(());
        };
        for (port, copy) in copies {
            let rows = steer::steered_copy(&group, states, port).members;
            for (i, row) in rows.iter().enumerate() {
                let id = member_id(copy, i as u32);
                self.member_rows
                    .set(id, row, 0)
                    .map_err(|e| err(format!("MEMBERS[{id}]: {e}")))?;
            }
            self.store_active(copy, rows.iter().map(|m| m.state))?;
        }
        Ok(())
    }

    /// Makes STEER_GROUPS hold a steered copy of every installed group for every port a
    /// steered flow avoids (plus `extra`), and drops the rest.
    async fn sync_steered_copies(&mut self, extra: Option<u32>) -> Result<(), DataplaneError> {
        let mut ports = self.steer.ports();
        ports.extend(extra);
        if ports.is_empty() && self.steer.copies.is_empty() {
            return Ok(());
        }
        let mut wanted: Vec<(u32, u32)> = Vec::new();
        for inst in self.installed.values() {
            for &port in &ports {
                if steer::needs_copy(&inst.encoded, port) {
                    wanted.push((inst.gid, port));
                }
            }
        }
        for &(gid, port) in &wanted {
            if self.steer.copies.contains_key(&(gid, port)) {
                continue;
            }
            let Some(group) = self.encoded_of(gid) else {
                continue;
            };
            let Some((cgid, wait)) = self.ids.take() else {
                return Err(err("all group ids in use: no steered copy"));
            };
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            // Members switched off in the group stay off in the copy.
            let states = self.member_states(gid, group.members.len())?;
            let mut copy = steer::steered_copy(&group, &states, port);
            self.arn.clear_group(cgid);
            self.write_group(cgid, &mut copy, None)?;
            self.steer.set_copy(gid, port, cgid)?;
        }
        let stale: Vec<(u32, u32)> = self
            .steer
            .copies
            .keys()
            .filter(|key| !wanted.contains(key))
            .copied()
            .collect();
        for (gid, port) in stale {
            if let Some(copy) = self.steer.drop_copy(gid, port) {
                self.ids.release(copy);
            }
        }
        self.flag_steered_routes()
    }

    /// Sets `ROUTE_STEERED` on the routes whose group has steered copies now and clears
    /// it on the others: only packets of flagged routes look for a steered flow.
    fn flag_steered_routes(&mut self) -> Result<(), DataplaneError> {
        let changed: Vec<(IpNet, u32, u32)> = self
            .installed
            .iter()
            .filter_map(|(prefix, inst)| {
                let want = self.steer.copies.keys().any(|(g, _)| *g == inst.gid);
                let has = inst.flags & fc::ROUTE_STEERED != 0;
                (want != has).then_some((*prefix, inst.gid, inst.flags ^ fc::ROUTE_STEERED))
            })
            .collect();
        for (prefix, gid, flags) in changed {
            self.set_route(prefix, gid, flags)?;
            if let Some(inst) = self.installed.get_mut(&prefix) {
                inst.flags = flags;
            }
        }
        Ok(())
    }

    /// Rewrites the program's (sender, Path ID) -> members table for the installed groups.
    fn sync_arn(&mut self) {
        let groups = self.installed.values().map(|i| (i.gid, &i.group));
        if let Err(e) = self.arn.sync(groups) {
            tracing::warn!("xdp: ARN table not updated: {e}");
        }
    }

    /// The program's ARN reception counters (accepted, malformed, spoofed, ...).
    pub fn arn_stats(&self) -> Result<BTreeMap<&'static str, u64>, DataplaneError> {
        self.arn.stats()
    }

    fn member_row(&self, gid: u32, index: usize) -> Result<fc::Member, DataplaneError> {
        let id = member_id(gid, index as u32);
        self.member_rows
            .get(&id, 0)
            .map_err(|e| err(format!("MEMBERS[{id}]: {e}")))
    }
}

impl Drop for XdpDataplane {
    fn drop(&mut self) {
        if let Some(task) = self.log_task.take() {
            task.abort();
        }
    }
}

/// What one XDP group holds (`fare_common`'s map layout, shared with the program).
pub fn xdp_limits() -> GroupLimits {
    GroupLimits {
        max_size: Some(fc::MAX_SLOTS as u32),
        max_members: Some(fc::MAX_MEMBERS_PER_GROUP),
        max_member_weight: None,
    }
}

#[async_trait]
impl Dataplane for XdpDataplane {
    fn dpf(&mut self) -> Option<&mut dyn Dpf> {
        Some(self)
    }

    fn flow_steering(&mut self) -> Option<&mut dyn FlowSteering> {
        Some(self)
    }

    fn name(&self) -> &'static str {
        BACKEND
    }

    /// The program's map layout: `MAX_SLOTS` replicated-member slots and
    /// `MAX_MEMBERS_PER_GROUP` members per group (route groups and color groups alike).
    fn limits(&self) -> GroupLimits {
        xdp_limits()
    }

    async fn install(&mut self, group: &Group) -> Result<(), DataplaneError> {
        self.install_colored(group, &[]).await
    }

    async fn maintain(&mut self) -> Result<(), DataplaneError> {
        if let Some(table) = &mut self.dir4 {
            table.maintain();
        }
        Ok(())
    }

    async fn remove(&mut self, prefix: IpNet) -> Result<(), DataplaneError> {
        let old = self
            .installed
            .remove(&prefix)
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        if let Err(e) = self.delete_route(prefix) {
            self.installed.insert(prefix, old);
            return Err(e);
        }
        self.ids.release(old.gid);
        for c in old.colors {
            self.ids.release(c.gid);
        }
        self.sync_arn();
        self.sync_steered_copies(None).await
    }

    async fn packet_counters(&mut self) -> Result<BTreeMap<&'static str, u64>, DataplaneError> {
        self.stats()
    }

    async fn groups(&mut self) -> Result<Vec<GroupStatus>, DataplaneError> {
        let mut out = Vec::with_capacity(self.installed.len());
        for inst in self.installed.values() {
            let members = self.member_statuses(inst.gid, inst.group.members.len())?;
            let mut colors = Vec::with_capacity(inst.colors.len());
            for c in &inst.colors {
                // The color group as its rows hold it (via = neighbor MAC, weight = slots).
                let mut ifname = |ifindex| {
                    fare_netdev::links::ifname(ifindex)
                        .unwrap_or_else(|_| format!("ifindex{ifindex}"))
                };
                let Some(group) = encode::decode(
                    inst.group.prefix,
                    &c.encoded.group,
                    &c.encoded.members,
                    &mut ifname,
                ) else {
                    continue;
                };
                let status = self.member_statuses(c.gid, group.members.len())?;
                colors.push(ColorStatus {
                    color: c.color,
                    members: group.members,
                    status,
                    fit: None,
                });
            }
            out.push(GroupStatus {
                group: inst.group.clone(),
                members,
                colors,
                fit: None,
                buckets: inst.buckets.clone(),
            });
        }
        Ok(out)
    }

    async fn set_member_active(
        &mut self,
        prefix: IpNet,
        index: usize,
        active: bool,
    ) -> Result<(), DataplaneError> {
        let inst = self
            .installed
            .get(&prefix)
            .ok_or(DataplaneError::NoSuchGroup(prefix))?;
        let gid = inst.gid;
        let mut states = self.member_states(gid, inst.group.members.len())?;
        let forwarding: Vec<bool> = states.iter().map(|s| *s == 0).collect();
        fare_dataplane::keep_last_active(prefix, &forwarding, index, active)?;
        let mut row = self.member_row(gid, index)?;
        row.state = if active {
            0
        } else {
            row.state | fc::MEMBER_ADMIN_DOWN
        };
        let id = member_id(gid, index as u32);
        self.member_rows
            .set(id, row, 0)
            .map_err(|e| err(format!("MEMBERS[{id}]: {e}")))?;
        states[index] = row.state;
        self.store_active(gid, states.iter().copied())?;
        self.refresh_copies_of(gid, &states)
    }
}

#[async_trait]
impl Dpf for XdpDataplane {
    async fn install_colored(
        &mut self,
        group: &Group,
        colors: &[ColorGroup],
    ) -> Result<(), DataplaneError> {
        let resolved = fare_dataplane::neighbors::fill_macs(group, BACKEND).await?;
        let group = resolved.as_ref().unwrap_or(group);
        // A flow-mode table changes from the installed one as little as the weights allow.
        let previous = self
            .installed
            .get(&group.prefix)
            .map(|i| (i.group.clone(), i.encoded.group));
        let previous = previous.as_ref().map(|(g, row)| (g, row));
        let mut encoded = encode::encode(group, previous, &mut |name| self.egress(name))?;
        // Only active colors forward (see dataplane::dpf); each is a group of its own.
        let mut color_rows: Vec<(u32, Encoded)> = Vec::new();
        for c in colors.iter().filter(|c| c.active) {
            if color_rows.len() == fc::MAX_COLORS_PER_ROUTE {
                tracing::warn!(prefix = %group.prefix, color = c.color, "xdp: too many colors, ignored");
                break;
            }
            let as_group = Group {
                prefix: group.prefix,
                mode: group.mode,
                members: c.members.clone(),
            };
            let resolved = fare_dataplane::neighbors::fill_macs(&as_group, BACKEND).await?;
            let g = resolved.as_ref().unwrap_or(&as_group);
            color_rows.push((
                c.color,
                encode::encode(g, None, &mut |name| self.egress(name))?,
            ));
        }
        if let Some(cur) = self.installed.get_mut(&group.prefix) {
            if cur.same_forwarding(&encoded, &color_rows) {
                cur.group = group.clone();
                self.sync_arn();
                return Ok(());
            }
        }
        let mut gids = Vec::with_capacity(1 + color_rows.len());
        for _ in 0..=color_rows.len() {
            let Some((gid, wait)) = self.ids.take() else {
                for g in gids {
                    self.ids.release(g);
                }
                return Err(err(format!(
                    "all {} group ids in use: cannot install {}",
                    fc::MAX_GROUPS,
                    group.prefix
                )));
            };
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            gids.push(gid);
        }
        let gid = gids[0];
        for g in &gids {
            self.arn.clear_group(*g);
        }
        let mut color_rows: Vec<(u32, u32, Encoded)> = color_rows
            .into_iter()
            .zip(&gids[1..])
            .map(|((c, e), g)| (c, *g, e))
            .collect();
        let old = self.installed.remove(&group.prefix);
        let buckets = encode::bucket_status(
            group,
            &encoded.group,
            old.as_ref().map(|o| (&o.group, &o.encoded.group)),
        );
        let flags = match self.write_route(
            group.prefix,
            gid,
            &mut encoded,
            &mut color_rows,
            old.as_ref(),
        ) {
            Ok(flags) => flags,
            Err(e) => {
                for g in gids {
                    self.ids.release(g);
                }
                if let Some(old) = old {
                    self.installed.insert(group.prefix, old);
                }
                return Err(e);
            }
        };
        if let Some(old) = old {
            self.ids.release(old.gid);
            for c in old.colors {
                self.ids.release(c.gid);
            }
        }
        let colors = color_rows
            .into_iter()
            .map(|(color, gid, encoded)| InstalledColor {
                color,
                gid,
                encoded,
            })
            .collect::<Vec<_>>();
        tracing::debug!(prefix = %group.prefix, gid, colors = colors.len(), "xdp: group installed");
        self.installed.insert(
            group.prefix,
            Installed {
                gid,
                group: group.clone(),
                encoded,
                colors,
                flags,
                buckets,
            },
        );
        self.sync_arn();
        self.sync_steered_copies(None).await
    }

    async fn set_flow_rules(&mut self, rules: &[FlowRule]) -> Result<(), DataplaneError> {
        let rows = colors::encode_rules(rules)?;
        for i in 0..fc::MAX_FLOW_RULES {
            let row = rows.get(i as usize).copied().unwrap_or_default();
            self.flow_rules
                .set(i, row, 0)
                .map_err(|e| err(format!("FLOW_RULES[{i}]: {e}")))?;
        }
        tracing::info!(rules = rows.len(), "xdp: DPF flow rules set");
        Ok(())
    }
}

#[async_trait]
impl FlowSteering for XdpDataplane {
    async fn steer_flow(
        &mut self,
        flow: &fare_arn::codec::FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, DataplaneError> {
        let key = steer::key_of(flow);
        if !avoid {
            if self.steer.remove(&key) {
                self.sync_steered_copies(None).await?;
            }
            return Ok(true);
        }
        let port =
            fare_netdev::links::ifindex(interface).map_err(|e| err(format!("{interface}: {e}")))?;
        // The copies first, then the flow entry that sends packets to them.
        self.sync_steered_copies(Some(port)).await?;
        if !self.steer.add(key, port)? {
            self.sync_steered_copies(None).await?;
            return Ok(false);
        }
        tracing::info!(%interface, flows = self.steer.steered.len(), copies = self.steer.copies.len(), "xdp: flow steered off a port (ARN per-flow mode)");
        Ok(true)
    }
}
