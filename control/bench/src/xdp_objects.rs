//! The benchmark-only eBPF object (ebpf/fare-bench-xdp, built by control/build/ebpf.rs)
//! and its three programs, loaded by the XDP benchmarks only (the agent never loads it):
//!
//! - [`MinForwarder`]: the minimal forwarder fare's program is measured against
//!   (Ethernet + IPv4 parse, one LPM lookup, MAC rewrite, redirect).
//! - [`Generator`]: `fare_gen` run with live-frames `BPF_PROG_TEST_RUN` redirects each
//!   frame out of one interface, so the next hop receives `xdp_frame`s directly (an
//!   skb-based generator would hide XDP's advantage: veth then converts every skb back
//!   into an XDP buffer).
//! - [`Sink`]: `fare_sink` counts and drops every frame arriving on some interfaces.
//!
//! Nothing of it is pinned; each instance loads its own copy of the object.

use anyhow::{anyhow, Context};
use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::maps::{Array, DevMap, DevMapHash, MapData, PerCpuArray};
use aya::programs::{Xdp, XdpMode};
use aya::Ebpf;
use fare_common::bench as fb;
use fare_dp_xdp::{testrun, TestRun, TestRunOptions};
use fare_netdev::links as netdev;
use std::os::fd::{AsFd, AsRawFd};

/// The object's bytes, or why this binary has none.
fn bytes() -> anyhow::Result<&'static [u8]> {
    #[cfg(fare_bench_xdp_embedded)]
    {
        Ok(aya::include_bytes_aligned!(concat!(
            env!("OUT_DIR"),
            "/fare-bench-xdp.o"
        )))
    }
    #[cfg(not(fare_bench_xdp_embedded))]
    {
        anyhow::bail!(
            "this fare binary was built without the benchmark eBPF object (bpf-linker was \
             missing at build time): run scripts/setup, then rebuild"
        )
    }
}

fn load() -> anyhow::Result<Ebpf> {
    Ebpf::load(bytes()?).context("loading the benchmark eBPF object")
}

fn xdp_program<'a>(ebpf: &'a mut Ebpf, name: &str) -> anyhow::Result<&'a mut Xdp> {
    let program: &mut Xdp = ebpf
        .program_mut(name)
        .ok_or_else(|| anyhow!("{name} missing from the benchmark object"))?
        .try_into()
        .with_context(|| name.to_string())?;
    program
        .load()
        .map_err(|e| anyhow!("the kernel refused {name}: {e:?}"))?;
    Ok(program)
}

fn program_fd(ebpf: &Ebpf, name: &str) -> anyhow::Result<i32> {
    let program: &Xdp = ebpf
        .program(name)
        .ok_or_else(|| anyhow!("{name} missing"))?
        .try_into()?;
    Ok(program.fd()?.as_fd().as_raw_fd())
}

fn ifindex(ifname: &str) -> anyhow::Result<u32> {
    netdev::ifindex(ifname).with_context(|| format!("interface {ifname}"))
}

/// The minimal forwarder, loaded, with its route table.
pub struct MinForwarder {
    ebpf: Ebpf,
}

impl MinForwarder {
    pub fn open() -> anyhow::Result<MinForwarder> {
        let mut ebpf = load()?;
        xdp_program(&mut ebpf, fb::MIN_FWD_NAME)?;
        Ok(MinForwarder { ebpf })
    }

    /// Routes `prefix/len` out of `ifname` (of the calling thread's namespace) with the
    /// given MACs.
    pub fn route(
        &mut self,
        prefix: [u8; 4],
        len: u32,
        ifname: &str,
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
    ) -> anyhow::Result<()> {
        let ifindex = ifindex(ifname)?;
        let mut egress: DevMapHash<&mut MapData> = DevMapHash::try_from(
            self.ebpf
                .map_mut(fb::MIN_FWD_EGRESS)
                .ok_or_else(|| anyhow!("{} missing", fb::MIN_FWD_EGRESS))?,
        )?;
        egress.insert(ifindex, ifindex, None, 0)?;
        let mut routes: LpmTrie<&mut MapData, [u8; 4], fb::MinNextHop> = LpmTrie::try_from(
            self.ebpf
                .map_mut(fb::MIN_FWD_ROUTES)
                .ok_or_else(|| anyhow!("{} missing", fb::MIN_FWD_ROUTES))?,
        )?;
        let hop = fb::MinNextHop {
            ifindex,
            src_mac,
            dst_mac,
        };
        routes.insert(&Key::new(len, prefix), hop, 0)?;
        Ok(())
    }

    /// Attaches it to `ifname` (of the calling thread's namespace) until dropped.
    pub fn attach(&mut self, ifname: &str) -> anyhow::Result<()> {
        let program: &mut Xdp = self
            .ebpf
            .program_mut(fb::MIN_FWD_NAME)
            .ok_or_else(|| anyhow!("{} missing", fb::MIN_FWD_NAME))?
            .try_into()?;
        program
            .attach(ifname, XdpMode::Default)
            .with_context(|| format!("attaching {} to {ifname}", fb::MIN_FWD_NAME))?;
        Ok(())
    }

    /// `BPF_PROG_TEST_RUN` of the minimal forwarder on `frame`.
    pub fn test_run(&self, frame: &[u8], opts: TestRunOptions) -> anyhow::Result<TestRun> {
        testrun::run(program_fd(&self.ebpf, fb::MIN_FWD_NAME)?, frame, opts)
            .context("BPF_PROG_TEST_RUN of the minimal forwarder")
    }
}

pub struct Generator {
    ebpf: Ebpf,
}

impl Generator {
    /// Loads the generator sending `frames` in turn (1 to `GEN_TEMPLATES`, each exactly
    /// `GEN_FRAME_LEN` bytes; fewer are repeated) out of `ifname` (of the calling
    /// thread's namespace).
    pub fn open(ifname: &str, frames: &[Vec<u8>]) -> anyhow::Result<Generator> {
        anyhow::ensure!(
            (1..=fb::GEN_TEMPLATES as usize).contains(&frames.len()),
            "the generator takes 1 to {} frames",
            fb::GEN_TEMPLATES
        );
        let templates = frames
            .iter()
            .map(|f| {
                <[u8; fb::GEN_FRAME_LEN]>::try_from(f.as_slice())
                    .map_err(|_| anyhow!("generator frames are {} bytes", fb::GEN_FRAME_LEN))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut ebpf = load()?;
        let ifindex = ifindex(ifname)?;
        let map = ebpf
            .map_mut(fb::GENERATOR_MAP)
            .ok_or_else(|| anyhow!("GEN_TX missing from the object"))?;
        let mut tx: DevMap<_> = DevMap::try_from(map)?;
        tx.set(0, ifindex, None, 0).context("GEN_TX")?;
        let map = ebpf
            .map_mut(fb::GENERATOR_TEMPLATE)
            .ok_or_else(|| anyhow!("GEN_TEMPLATE missing from the object"))?;
        let mut t: Array<_, [u8; fb::GEN_FRAME_LEN]> = Array::try_from(map)?;
        for i in 0..fb::GEN_TEMPLATES {
            let template = templates[i as usize % templates.len()];
            t.set(i, template, 0).context("GEN_TEMPLATE")?;
        }
        xdp_program(&mut ebpf, fb::GENERATOR_NAME)?;
        Ok(Generator { ebpf })
    }

    /// Sends `count` frames (one kernel call; returns when all are sent).
    pub fn send(&self, count: u32) -> anyhow::Result<()> {
        let frame = [0u8; fb::GEN_FRAME_LEN];
        testrun::run(
            program_fd(&self.ebpf, fb::GENERATOR_NAME)?,
            &frame,
            TestRunOptions {
                repeat: count,
                live: true,
                ..Default::default()
            },
        )
        .context("live-frames BPF_PROG_TEST_RUN")?;
        Ok(())
    }
}

/// Counts and drops every frame arriving on the given interfaces (`fare_sink`).
pub struct Sink {
    ebpf: Ebpf,
}

impl Sink {
    /// Attaches the sink to `ifnames` (of the calling thread's namespace); it detaches
    /// when dropped.
    pub fn open(ifnames: &[&str]) -> anyhow::Result<Sink> {
        let mut ebpf = load()?;
        let program = xdp_program(&mut ebpf, fb::SINK_NAME)?;
        for ifname in ifnames {
            program
                .attach(ifname, XdpMode::Default)
                .with_context(|| format!("attaching fare_sink to {ifname}"))?;
        }
        Ok(Sink { ebpf })
    }

    /// Frames counted so far (all CPUs).
    pub fn received(&self) -> anyhow::Result<u64> {
        let map = self
            .ebpf
            .map(fb::SINK_MAP)
            .ok_or_else(|| anyhow!("SINK_RX missing"))?;
        let counts: PerCpuArray<_, u64> = PerCpuArray::try_from(map)?;
        Ok(counts.get(&0, 0)?.iter().sum())
    }
}
