//! aya-log records of the XDP program -> the `log` facade -> `tracing` (the
//! subscriber installed by `cli::init_logging` also captures `log` records).

use aya::Ebpf;
use aya_log::EbpfLogger;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::task::JoinHandle;

/// In-kernel log level for aya-log (1 error .. 5 trace), from tracing's current filter,
/// so that disabled levels cost nothing per packet.
pub fn kernel_level() -> u8 {
    use tracing::level_filters::LevelFilter;
    match LevelFilter::current() {
        LevelFilter::OFF => 0,
        LevelFilter::ERROR => 1,
        LevelFilter::WARN => 2,
        LevelFilter::INFO => 3,
        LevelFilter::DEBUG => 4,
        _ => 5,
    }
}

/// Starts forwarding the program's log records; None outside a tokio runtime or when
/// the object has no log map.
pub fn spawn(ebpf: &mut Ebpf) -> Option<JoinHandle<()>> {
    let handle = tokio::runtime::Handle::try_current().ok()?;
    let logger = match EbpfLogger::init(ebpf) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("xdp: program logs unavailable: {e}");
            return None;
        }
    };
    let _enter = handle.enter();
    // SAFETY: the logger owns its ring buffer fd for as long as the AsyncFd lives.
    let registered = unsafe { AsyncFd::register_with_interest(logger, Interest::READABLE) };
    let mut fd = match registered {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!("xdp: program logs unavailable: {e}");
            return None;
        }
    };
    Some(handle.spawn(async move {
        loop {
            let Ok(mut ready) = fd.readable_mut().await else {
                return;
            };
            ready.get_inner_mut().flush();
            ready.clear_ready();
        }
    }))
}
