//! Where the XDP state lives in bpffs, per node:
//! ```text
//! <root>/<node>/maps/<MAP>      every map of the program (pinned by name)
//! <root>/<node>/links/<ifname>  the XDP link of each interface
//! <root>/<node>/program-<id>    the program in those links, by identity (see `keep`)
//! ```
//! A link pinned there keeps the program attached after the agent exits (also after
//! `kill -9`); a restarted agent loads the program against the same maps and swaps it
//! into the links atomically, so forwarding never stops.

use std::io;
use std::path::{Path, PathBuf};

/// Default bpffs root of fare's pins.
pub const DEFAULT_ROOT: &str = "/sys/fs/bpf/fare";
const PROGRAM_PREFIX: &str = "program-";
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

#[derive(Clone, Debug)]
pub struct PinDir {
    pub node: PathBuf,
}

impl PinDir {
    pub fn new(root: &Path, node: &str) -> PinDir {
        PinDir {
            node: root.join(node),
        }
    }

    pub fn maps(&self) -> PathBuf {
        self.node.join("maps")
    }

    pub fn link(&self, ifname: &str) -> PathBuf {
        self.node.join("links").join(ifname)
    }

    /// The pinned program of identity `id` (bpffs holds no regular files, so the
    /// identity is the pin's name).
    pub fn program(&self, id: &str) -> PathBuf {
        self.node.join(format!("{PROGRAM_PREFIX}{id}"))
    }

    /// Every pinned program of the node, whatever its identity.
    pub fn programs(&self) -> Vec<PathBuf> {
        let Ok(dir) = std::fs::read_dir(&self.node) else {
            return Vec::new();
        };
        dir.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(PROGRAM_PREFIX))
            .map(|e| e.path())
            .collect()
    }

    /// Makes sure bpffs is mounted under `root` and creates the directories.
    pub fn prepare(&self, root: &Path) -> io::Result<()> {
        ensure_bpffs(root)?;
        std::fs::create_dir_all(self.maps())?;
        std::fs::create_dir_all(self.node.join("links"))?;
        Ok(())
    }

    /// Removes every pin of the node (the program detaches once nothing holds it).
    pub fn remove_all(&self) -> io::Result<()> {
        match std::fs::remove_dir_all(&self.node) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

fn is_bpffs(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills `st`; c is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    rc == 0 && st.f_type as i64 == BPF_FS_MAGIC
}

/// bpffs must hold `root`: when neither it nor /sys/fs/bpf is bpffs, mount it on
/// /sys/fs/bpf (the usual place; systemd normally does this).
fn ensure_bpffs(root: &Path) -> io::Result<()> {
    let mut probe = root.to_path_buf();
    while !probe.exists() {
        if !probe.pop() {
            break;
        }
    }
    if is_bpffs(&probe) {
        return Ok(());
    }
    let sys = Path::new("/sys/fs/bpf");
    if root.starts_with(sys) && !is_bpffs(sys) {
        // Typical under `ip netns exec`, which mounts a fresh sysfs over /sys in a private
        // mount namespace: a bpffs mounted here dies with this process, so nothing
        // survives a restart. `nsenter --net=...` keeps the host's /sys/fs/bpf.
        tracing::warn!(
            "/sys/fs/bpf is not a bpf filesystem here (started with `ip netns exec`?): \
             mounting a private one; pinned XDP state will not survive this process \
             (start the agent with `nsenter --net=/run/netns/NAME` to keep it)"
        );
        std::fs::create_dir_all(sys)?;
        let rc = unsafe {
            libc::mount(
                c"bpf".as_ptr(),
                c"/sys/fs/bpf".as_ptr(),
                c"bpf".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(());
    }
    if root.starts_with(sys) {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "{} is not on a bpf filesystem",
        root.display()
    )))
}
