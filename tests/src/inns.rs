//! Running code inside a test's network namespace from the test process: a thread
//! joins the namespace (`setns` only moves the calling thread) and runs the closure.
//! Sockets, netlink and ifindex lookups made there belong to that namespace.

use anyhow::{bail, Context, Result};
use std::os::fd::AsRawFd;

/// Moves the current thread into the namespace `/run/netns/<name>`.
pub fn enter(name: &str) -> Result<()> {
    let file = std::fs::File::open(format!("/run/netns/{name}"))
        .with_context(|| format!("opening netns {name}"))?;
    // SAFETY: setns on a valid namespace fd affects only this thread.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        bail!("setns {name}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `f` on a new (scoped) thread inside the namespace and returns its result; `f`
/// may borrow from the caller.
pub fn run<T: Send>(name: &str, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                enter(name)?;
                f()
            })
            .join()
            .map_err(|_| anyhow::anyhow!("thread in netns panicked"))?
    })
}

/// Spawns a thread that joins the namespace and runs the future `f` builds on a
/// single-threaded tokio runtime, so every socket the future opens lives in that namespace.
pub fn spawn_async<T, F, Fut>(name: &str, f: F) -> std::thread::JoinHandle<Result<T>>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T>>,
{
    let name = name.to_string();
    std::thread::spawn(move || {
        enter(&name)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(f())
    })
}

/// Pins the current thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity(0) affects this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            bail!("sched_setaffinity: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}
