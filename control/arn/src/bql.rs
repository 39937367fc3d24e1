//! A real transmit backlog where the driver has one: Byte Queue Limits (BQL).
//!
//! A driver that uses BQL accounts every byte it hands to the NIC and every byte the NIC
//! reports sent; the difference, the bytes in the hardware transmit ring, is
//! `/sys/class/net/DEV/queues/tx-N/byte_queue_limits/inflight`. The monitor adds it (summed
//! over the device's transmit queues) to the qdisc backlog, so the congestion signal of a
//! real port is what waits to leave it: in the qdisc and in the ring. Devices without BQL
//! (veth, which has no transmit ring; the kernel creates no `byte_queue_limits` there)
//! keep the qdisc backlog, or with XDP the program's virtual queue, and the monitor says so
//! (log line "ARN monitor: congestion signal", `fare show arn`).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Where network devices are in sysfs.
pub const SYS_CLASS_NET: &str = "/sys/class/net";

/// An `inflight` file that does not hold a byte count (its trimmed text).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("inflight: `{0}` is not a byte count")]
pub struct InflightError(pub String);

/// One `inflight` file's value: a decimal byte count (sysfs prints it with a newline).
pub fn parse_inflight(text: &str) -> Result<u64, InflightError> {
    let t = text.trim();
    t.parse::<u64>().map_err(|_| InflightError(t.to_string()))
}

/// The `inflight` files of `dev`'s transmit queues under `root` (normally
/// [`SYS_CLASS_NET`]), sorted; empty when the driver has no BQL.
pub fn inflight_files(root: &Path, dev: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join(dev).join("queues")) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("tx-"))
        .map(|e| e.path().join("byte_queue_limits").join("inflight"))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

/// The open `inflight` files of one device, read at every monitor sample.
#[derive(Debug)]
pub struct Bql {
    files: Vec<File>,
    buf: String,
}

impl Bql {
    /// None when `dev` has no BQL (no transmit queue with an `inflight` file).
    pub fn open(root: &Path, dev: &str) -> Option<Bql> {
        let files: Vec<File> = inflight_files(root, dev)
            .into_iter()
            .filter_map(|p| File::open(p).ok())
            .collect();
        (!files.is_empty()).then(|| Bql {
            files,
            buf: String::with_capacity(32),
        })
    }

    /// Bytes in the device's transmit rings now (summed over its queues).
    pub fn inflight(&mut self) -> io::Result<u64> {
        let mut sum = 0u64;
        for f in &mut self.files {
            f.seek(SeekFrom::Start(0))?;
            self.buf.clear();
            f.read_to_string(&mut self.buf)?;
            sum = sum.saturating_add(
                parse_inflight(&self.buf)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
            );
        }
        Ok(sum)
    }

    pub fn queues(&self) -> usize {
        self.files.len()
    }
}

/// Where a watched port's congestion signal comes from (logs, `fare show arn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// The XDP program's virtual queue (frames XDP redirects reach no qdisc; veth has no
    /// transmit ring to read).
    VirtualQueue,
    /// Root qdisc backlog plus BQL `inflight` (a driver with a transmit ring).
    QdiscAndBql,
    /// Root qdisc backlog only (the driver has no BQL, e.g. veth).
    Qdisc,
}

impl Signal {
    pub fn describe(self) -> &'static str {
        match self {
            Signal::VirtualQueue => "XDP virtual queue (no transmit queue state to read)",
            Signal::QdiscAndBql => "qdisc backlog + BQL inflight",
            Signal::Qdisc => "qdisc backlog (the driver has no BQL)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bql")
    }

    #[test]
    fn inflight_values_parse() {
        assert_eq!(parse_inflight("1514\n"), Ok(1514));
        assert_eq!(parse_inflight("0"), Ok(0));
        assert_eq!(
            parse_inflight("lots\n").unwrap_err().to_string(),
            "inflight: `lots` is not a byte count"
        );
        assert!(parse_inflight("-1").is_err());
        assert!(parse_inflight("").is_err());
    }

    /// eth9 has two transmit queues with BQL (1514 + 3028 bytes in flight) and a receive
    /// queue (ignored); veth9's transmit queue has no byte_queue_limits; bad9's file is
    /// not a number.
    #[test]
    fn device_queues_are_found_and_summed() {
        let root = fixtures();
        let files = inflight_files(&root, "eth9");
        assert_eq!(files.len(), 2);
        assert!(files[0].ends_with("tx-0/byte_queue_limits/inflight"));
        let mut eth9 = Bql::open(&root, "eth9").expect("eth9 has BQL");
        assert_eq!(eth9.queues(), 2);
        assert_eq!(eth9.inflight().unwrap(), 4542);
        // Read again from the start (the files stay open between samples).
        assert_eq!(eth9.inflight().unwrap(), 4542);
        assert!(Bql::open(&root, "veth9").is_none());
        assert!(Bql::open(&root, "nosuch9").is_none());
        let mut bad = Bql::open(&root, "bad9").expect("bad9 has the file");
        assert_eq!(
            bad.inflight().unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }
}
