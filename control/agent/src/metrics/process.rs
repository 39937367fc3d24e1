//! The standard `process_*` families (as Prometheus' own client libraries name them),
//! read from /proc/self with `procfs`: prometheus-client has no process collector.

use super::{Builder, Labels};

/// One reading of /proc/self.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessStats {
    /// User + system CPU time.
    pub cpu_seconds: f64,
    pub resident_memory_bytes: u64,
    pub virtual_memory_bytes: u64,
    pub open_fds: u64,
    /// Soft limit on open files (None: unlimited).
    pub max_fds: Option<u64>,
    /// Seconds since the UNIX epoch when the process started: uptime is
    /// `time() - process_start_time_seconds`, not a gauge that ticks.
    pub start_time_seconds: f64,
}

pub fn read() -> procfs::ProcResult<ProcessStats> {
    let me = procfs::process::Process::myself()?;
    let stat = me.stat()?;
    let ticks = procfs::ticks_per_second() as f64;
    let max_fds = match me.limits()?.max_open_files.soft_limit {
        procfs::process::LimitValue::Value(v) => Some(v),
        procfs::process::LimitValue::Unlimited => None,
    };
    Ok(ProcessStats {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        resident_memory_bytes: stat.rss * procfs::page_size(),
        virtual_memory_bytes: stat.vsize,
        open_fds: me.fd_count()? as u64,
        max_fds,
        start_time_seconds: procfs::boot_time_secs()? as f64 + stat.starttime as f64 / ticks,
    })
}

pub(super) fn register(b: &mut Builder, p: &ProcessStats) {
    let one = |v: f64| [(Labels::new(), v)];
    // A float counter, as in every client library (whole seconds would lose the fraction).
    b.counter_f64(
        "process_cpu_seconds",
        "Total user and system CPU time spent in seconds",
        p.cpu_seconds,
    );
    b.gauge(
        "process_resident_memory_bytes",
        "Resident memory size in bytes",
        one(p.resident_memory_bytes as f64),
    );
    b.gauge(
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes",
        one(p.virtual_memory_bytes as f64),
    );
    b.gauge(
        "process_open_fds",
        "Number of open file descriptors",
        one(p.open_fds as f64),
    );
    if let Some(max) = p.max_fds {
        b.gauge(
            "process_max_fds",
            "Maximum number of open file descriptors",
            one(max as f64),
        );
    }
    b.gauge(
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds",
        one(p.start_time_seconds),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plausible values of this test process: it started before now, after boot, uses
    /// memory, has stdin/stdout/stderr open at least... and the clock moved forward.
    #[test]
    fn reads_this_process() {
        let p = read().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let boot = procfs::boot_time_secs().unwrap() as f64;
        assert!(
            p.start_time_seconds >= boot && p.start_time_seconds <= now + 1.0,
            "{p:?}"
        );
        assert!(p.resident_memory_bytes > 0 && p.virtual_memory_bytes >= p.resident_memory_bytes);
        assert!(p.open_fds >= 3, "{p:?}");
        assert!(p.max_fds.is_none_or(|m| m >= p.open_fds));
        assert!(p.cpu_seconds >= 0.0);
    }
}
