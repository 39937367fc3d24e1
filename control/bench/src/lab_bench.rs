//! What the lab benchmarks share: a `fare lab` fabric that is always taken down (also on
//! error), quantiles, and the XDP program's pinned maps of a lab node.

use anyhow::Context;
use aya::maps::{Array, HashMap, Map, MapData};
use fare_common::{self as fc, ArnPathKey, ArnTargets};
use fare_lab::plan;
use fare_lab::state::StateDir;
use fare_lab::{down, up};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A lab built for a benchmark, taken down when dropped.
pub struct BenchLab {
    pub name: String,
    pub dir: StateDir,
}

impl BenchLab {
    /// `fare lab up TOPOLOGY` (relative to the repository root) as lab `name`.
    pub fn up(topology: &str, name: String, options: plan::Options) -> anyhow::Result<BenchLab> {
        let topology_path = PathBuf::from(topology);
        let topology = fare_model::topology::load(&topology_path)
            .map_err(|e| anyhow::anyhow!("{e} (run from the repository root)"))?;
        let req = up::UpRequest {
            topology_path,
            topology,
            lab: name.clone(),
            options,
            mode: fare_model::bandwidth::Mode::Draft,
            max_group_size: None,
            agents: true,
            agent_timeout: Duration::from_secs(60),
            converge_timeout: Duration::from_secs(60),
            fare: up::fare_binary(),
            progress: true,
        };
        BenchLab::start(&req).map(|(lab, _)| lab)
    }

    /// `fare lab up` as `req` asks; the lab with what `up` reported.
    pub fn start(req: &up::UpRequest) -> anyhow::Result<(BenchLab, up::UpReport)> {
        let report = up::up(req).map_err(|e| anyhow::anyhow!("lab up {}: {e}", req.lab))?;
        let lab = BenchLab {
            dir: StateDir::new(&req.lab),
            name: req.lab.clone(),
        };
        Ok((lab, report))
    }
}

impl Drop for BenchLab {
    fn drop(&mut self) {
        let _ = down::down_lab(&self.name, false);
    }
}

/// The `q` quantile (nearest rank) of `v`; NaN when empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[(((s.len() - 1) as f64 * q).round() as usize).min(s.len() - 1)]
}

/// The first field of /proc/loadavg.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

/// The maps the ARN benchmarks read from a lab node's XDP program (pinned under the
/// node's namespace name).
pub struct XdpMaps {
    pub arn_paths: HashMap<MapData, ArnPathKey, ArnTargets>,
    pub arn_removed: Array<MapData, u64>,
    pub members: Array<MapData, fc::Member>,
}

fn pinned(dir: &Path, name: &str) -> anyhow::Result<MapData> {
    MapData::from_pin(dir.join(name)).with_context(|| format!("pinned map {name}"))
}

impl XdpMaps {
    pub fn open(ns: &str) -> anyhow::Result<XdpMaps> {
        let maps = PathBuf::from(fare_dp_xdp::pins::DEFAULT_ROOT)
            .join(ns)
            .join("maps");
        Ok(XdpMaps {
            arn_paths: HashMap::try_from(Map::HashMap(pinned(&maps, fc::ARN_PATHS)?))?,
            arn_removed: Array::try_from(Map::Array(pinned(&maps, fc::ARN_REMOVED)?))?,
            members: Array::try_from(Map::Array(pinned(&maps, fc::map_names::MEMBERS)?))?,
        })
    }

    /// The member slots the program removes for an ARN from `sender` with `path_id`,
    /// once the agent has listed any (waits up to `timeout`).
    pub fn wait_targets(
        &self,
        sender: std::net::IpAddr,
        path_id: u32,
        timeout: Duration,
    ) -> Option<Vec<u32>> {
        let key = ArnPathKey {
            sender: fare_dp_xdp::arn::sender_key(sender),
            path_id,
        };
        let start = std::time::Instant::now();
        while start.elapsed() < timeout {
            if let Ok(t) = self.arn_paths.get(&key, 0) {
                if t.n > 0 {
                    return Some(t.ids[..(t.n as usize).min(t.ids.len())].to_vec());
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// The earliest removal stamp (bpf_ktime ns) among `ids`, if any is removed.
    pub fn removed_at(&self, ids: &[u32]) -> Option<u64> {
        ids.iter()
            .filter_map(|i| self.arn_removed.get(i, 0).ok())
            .filter(|t| *t != 0)
            .min()
    }
}
