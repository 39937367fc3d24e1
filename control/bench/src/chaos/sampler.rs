//! Samples every agent's RSS (`/proc/PID/status` VmRSS) and open file descriptors
//! (`/proc/PID/fd`) once a second while the soak runs. The pids come from the lab's state
//! file each time, so a restarted agent starts a new series.

use super::checks::Series;
use fare_lab::state::StateDir;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Series>>,
}

impl Sampler {
    pub fn start(lab: &str) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let dir = StateDir::new(lab);
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut series: Vec<Series> = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                sample(&dir, &mut series);
                std::thread::sleep(Duration::from_secs(1));
            }
            series
        });
        Sampler { stop, thread }
    }

    /// Every series, in the order the agents were first seen.
    pub fn finish(self) -> Vec<Series> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

fn sample(dir: &StateDir, series: &mut Vec<Series>) {
    let Ok(state) = dir.load() else { return };
    for (node, pid) in &state.agents {
        let rss = super::super::proc_status_kb(&pid.to_string(), "VmRSS:");
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count() as u64);
        let (Some(rss), Ok(fds)) = (rss, fds) else {
            continue; // between a kill and the restart
        };
        let i = match series.iter().position(|s| s.pid == *pid && s.node == *node) {
            Some(i) => i,
            None => {
                series.push(Series {
                    node: node.clone(),
                    pid: *pid,
                    ..Series::default()
                });
                series.len() - 1
            }
        };
        series[i].rss_kb.push(rss);
        series[i].fds.push(fds);
    }
}
