//! A traffic generator and a counting sink for benchmarks. The generator: the object's `fare_gen` program run with
//! `BPF_PROG_TEST_RUN` in live-frames mode redirects each frame out of one interface,
//! so the next hop receives `xdp_frame`s directly (an skb-based generator would hide
//! XDP's advantage: veth then converts every skb back into an XDP buffer).

use super::{err, netdev, object, testrun, BACKEND};
use crate::DataplaneError;
use aya::maps::{Array, DevMap};
use aya::programs::Xdp;
use aya::{Ebpf, EbpfLoader};
use fare_common as fc;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

pub struct Generator {
    ebpf: Ebpf,
    /// The object's forwarding maps are pinned by name; they go here and are removed.
    pin_dir: PathBuf,
}

impl Generator {
    /// Loads the generator sending `frame` (exactly `GEN_FRAME_LEN` bytes) out of
    /// `ifname` (of the calling thread's namespace).
    pub fn open(
        pin_root: &Path,
        name: &str,
        ifname: &str,
        frame: &[u8],
    ) -> Result<Generator, DataplaneError> {
        let template: [u8; fc::GEN_FRAME_LEN] = frame
            .try_into()
            .map_err(|_| err(format!("generator frames are {} bytes", fc::GEN_FRAME_LEN)))?;
        let bytes = object::bytes().ok_or_else(|| err(object::MISSING))?;
        let pin_dir = pin_root.join(name);
        std::fs::create_dir_all(&pin_dir).map_err(|source| DataplaneError::Io {
            backend: BACKEND,
            what: format!("creating {}", pin_dir.display()),
            source,
        })?;
        let mut ebpf = EbpfLoader::new()
            .default_map_pin_directory(&pin_dir)
            .load(bytes)
            .map_err(|e| err(format!("loading the XDP object: {e}")))?;
        let ifindex = netdev::ifindex(ifname).map_err(|source| DataplaneError::Io {
            backend: BACKEND,
            what: format!("interface {ifname}"),
            source,
        })?;
        let map = ebpf
            .map_mut(fc::GENERATOR_MAP)
            .ok_or_else(|| err("GEN_TX missing from the object"))?;
        let mut tx: DevMap<_> = DevMap::try_from(map).map_err(|e| err(format!("GEN_TX: {e}")))?;
        tx.set(0, ifindex, None, 0)
            .map_err(|e| err(format!("GEN_TX: {e}")))?;
        let map = ebpf
            .map_mut(fc::GENERATOR_TEMPLATE)
            .ok_or_else(|| err("GEN_TEMPLATE missing from the object"))?;
        let mut t: Array<_, [u8; fc::GEN_FRAME_LEN]> =
            Array::try_from(map).map_err(|e| err(format!("GEN_TEMPLATE: {e}")))?;
        t.set(0, template, 0)
            .map_err(|e| err(format!("GEN_TEMPLATE: {e}")))?;
        let program: &mut Xdp = ebpf
            .program_mut(fc::GENERATOR_NAME)
            .ok_or_else(|| err("fare_gen missing from the object"))?
            .try_into()
            .map_err(|e| err(format!("fare_gen: {e}")))?;
        program
            .load()
            .map_err(|e| err(format!("loading fare_gen: {e:?}")))?;
        Ok(Generator { ebpf, pin_dir })
    }

    /// Sends `count` copies of the frame (one kernel call; returns when all are sent).
    pub fn send(&self, count: u32) -> Result<(), DataplaneError> {
        let frame = [0u8; fc::GEN_FRAME_LEN];
        let program: &Xdp = self
            .ebpf
            .program(fc::GENERATOR_NAME)
            .ok_or_else(|| err("fare_gen missing"))?
            .try_into()
            .map_err(|e| err(format!("{e}")))?;
        let fd = program.fd().map_err(|e| err(format!("{e}")))?;
        testrun::run(
            fd.as_fd().as_raw_fd(),
            &frame,
            testrun::TestRunOptions {
                repeat: count,
                live: true,
                ..Default::default()
            },
        )
        .map_err(|source| DataplaneError::Io {
            backend: BACKEND,
            what: "live-frames BPF_PROG_TEST_RUN".into(),
            source,
        })?;
        Ok(())
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.pin_dir);
    }
}

/// Counts and drops every frame arriving on the given interfaces (`fare_sink`).
pub struct Sink {
    ebpf: Ebpf,
    pin_dir: PathBuf,
}

impl Sink {
    /// Attaches the sink to `ifnames` (of the calling thread's namespace); it detaches
    /// when dropped.
    pub fn open(pin_root: &Path, name: &str, ifnames: &[&str]) -> Result<Sink, DataplaneError> {
        let bytes = object::bytes().ok_or_else(|| err(object::MISSING))?;
        let pin_dir = pin_root.join(name);
        std::fs::create_dir_all(&pin_dir).map_err(|source| DataplaneError::Io {
            backend: BACKEND,
            what: format!("creating {}", pin_dir.display()),
            source,
        })?;
        let mut ebpf = EbpfLoader::new()
            .default_map_pin_directory(&pin_dir)
            .load(bytes)
            .map_err(|e| err(format!("loading the XDP object: {e}")))?;
        let program: &mut Xdp = ebpf
            .program_mut(fc::SINK_NAME)
            .ok_or_else(|| err("fare_sink missing from the object"))?
            .try_into()
            .map_err(|e| err(format!("fare_sink: {e}")))?;
        program
            .load()
            .map_err(|e| err(format!("loading fare_sink: {e:?}")))?;
        for ifname in ifnames {
            program
                .attach(ifname, aya::programs::XdpMode::Default)
                .map_err(|e| err(format!("attaching fare_sink to {ifname}: {e}")))?;
        }
        Ok(Sink { ebpf, pin_dir })
    }

    /// Frames counted so far (all CPUs).
    pub fn received(&self) -> Result<u64, DataplaneError> {
        let map = self
            .ebpf
            .map(fc::SINK_MAP)
            .ok_or_else(|| err("SINK_RX missing"))?;
        let counts: aya::maps::PerCpuArray<_, u64> =
            aya::maps::PerCpuArray::try_from(map).map_err(|e| err(format!("SINK_RX: {e}")))?;
        let values = counts
            .get(&0, 0)
            .map_err(|e| err(format!("SINK_RX: {e}")))?;
        Ok(values.iter().sum())
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.pin_dir);
    }
}
