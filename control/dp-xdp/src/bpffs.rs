//! The bpf filesystem that holds fare's pins: found, or mounted once on /sys/fs/bpf.
//!
//! systemd mounts bpffs on /sys/fs/bpf at boot; a container, a minimal VM or a machine
//! without systemd may have none. Then the first agent mounts it, and every agent that
//! starts at the same moment (the lab starts a dozen) must see that one mount instead of
//! stacking its own on top: a pin made in a bpffs that a later mount hides is lost to
//! everyone else. So the check and the mount happen under an exclusive `flock` of the
//! /sys/fs/bpf directory, and the check is repeated once the lock is held.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Where bpffs lives on a systemd host, and where fare mounts it when it is missing.
pub const SYS_FS_BPF: &str = "/sys/fs/bpf";
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// What [`ensure`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `root` was on a bpffs already.
    Present,
    /// This process mounted bpffs on /sys/fs/bpf; `found` says what was there before.
    Mounted { found: String },
}

/// Makes sure the directory `root` (or, if it does not exist yet, its nearest existing
/// parent) is on a bpffs. When it is not and `root` is under /sys/fs/bpf, mounts one
/// there, at most once however many processes call this at the same time.
pub fn ensure(root: &Path) -> io::Result<Outcome> {
    if is_bpffs(&existing_ancestor(root)) {
        return Ok(Outcome::Present);
    }
    let sys = Path::new(SYS_FS_BPF);
    if !root.starts_with(sys) {
        return Err(io::Error::other(format!(
            "{} is not on a bpf filesystem (mount one: mount -t bpf bpf DIR)",
            root.display()
        )));
    }
    let dir = std::fs::File::open(sys).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{SYS_FS_BPF}: {e} (a kernel without CONFIG_BPF_SYSCALL, or no sysfs?)"),
        )
    })?;
    // Held until `dir` closes. Whoever opened the directory before a concurrent mount
    // locks the directory under it, whoever opens it after locks the new bpffs root:
    // either way the check below, by path, sees the mount once the lock is held.
    // SAFETY: flock on an open descriptor.
    if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if is_bpffs(sys) {
        return Ok(Outcome::Present);
    }
    let found = describe(&read_mountinfo(), SYS_FS_BPF);
    // SAFETY: constant NUL-terminated strings.
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
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("mounting bpffs on {SYS_FS_BPF} ({found}): {e}"),
        ));
    }
    Ok(Outcome::Mounted { found })
}

/// [`ensure`], then one log line saying what was found and done (nothing when bpffs
/// was there).
pub fn ensure_logged(root: &Path) -> io::Result<()> {
    if let Outcome::Mounted { found } = ensure(root)? {
        if private_mount_namespace() {
            tracing::warn!(
                "mounted bpffs on {SYS_FS_BPF} ({found}); this process has a mount namespace \
                 of its own, so pinned XDP state lasts only as long as that namespace \
                 (start the agent with `nsenter --net=/run/netns/NAME`, not `ip netns exec`, \
                 to keep the host's)"
            );
        } else {
            tracing::info!("mounted bpffs on {SYS_FS_BPF} ({found}), as systemd does at boot");
        }
    }
    Ok(())
}

fn existing_ancestor(path: &Path) -> PathBuf {
    let mut probe = path.to_path_buf();
    while !probe.exists() && probe.pop() {}
    probe
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

/// True when this process's mount namespace is not PID 1's (`ip netns exec`, `unshare
/// -m`, a container whose PID 1 we cannot read counts as not private).
fn private_mount_namespace() -> bool {
    match (
        std::fs::read_link("/proc/self/ns/mnt"),
        std::fs::read_link("/proc/1/ns/mnt"),
    ) {
        (Ok(me), Ok(init)) => me != init,
        _ => false,
    }
}

fn read_mountinfo() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default()
}

/// One line of /proc/self/mountinfo: where, and which filesystem type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub point: PathBuf,
    pub fstype: String,
}

/// The mounts of a mountinfo text in mount order (proc(5): the mount point is field 5,
/// octal-escaped; the type follows the ` - ` separator). Lines that do not parse are
/// skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let point = before.split(' ').nth(4)?;
            let fstype = after.split(' ').next()?;
            Some(Mount {
                point: PathBuf::from(unescape(point)),
                fstype: fstype.to_string(),
            })
        })
        .collect()
}

/// Undoes mountinfo's `\ooo` escapes (space, tab, newline, backslash).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What holds `point` according to mountinfo, for the log: the filesystem of the
/// mount a lookup reaches, and a bpffs on it that a later mount above hides.
pub fn describe(mountinfo: &str, point: &str) -> String {
    let mounts = parse_mountinfo(mountinfo);
    let point = Path::new(point);
    // The last mount at or above `point` is the one a lookup reaches: a later mount
    // on a parent hides whatever was mounted below it before.
    let holder = mounts
        .iter()
        .enumerate()
        .rfind(|(_, m)| point.starts_with(&m.point));
    let Some((at, holder)) = holder else {
        return "no mount holds it".to_string();
    };
    let mut found = if holder.point == point {
        format!("{} mounted on it", holder.fstype)
    } else {
        format!(
            "no mount on it; it is on {} mounted on {}",
            holder.fstype,
            holder.point.display()
        )
    };
    let hidden = mounts[..at]
        .iter()
        .any(|m| m.point == point && m.fstype == "bpf");
    if hidden && holder.fstype != "bpf" {
        found.push_str(
            "; an earlier bpffs there is hidden by that later mount (as `ip netns exec` \
             remounts /sys)",
        );
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as a Debian 12 host prints them (proc(5) layout), trimmed to what matters.
    const SYSFS: &str =
        "22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw";
    const BPF: &str =
        "41 22 0:36 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:16 - bpf bpf rw,mode=700";
    const SYSFS_AGAIN: &str = "300 280 0:70 / /sys rw,relatime - sysfs sysfs rw";

    #[test]
    fn parses_point_and_type_and_unescapes() {
        let text = format!("{SYSFS}\n{BPF}\n77 1 0:5 / /mnt/a\\040b rw - tmpfs x rw\ngarbage\n");
        let m = parse_mountinfo(&text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].point, Path::new("/sys/fs/bpf"));
        assert_eq!(m[1].fstype, "bpf");
        assert_eq!(m[2].point, Path::new("/mnt/a b"));
    }

    #[test]
    fn describes_a_new_machine_a_stack_and_a_hidden_bpffs() {
        assert_eq!(
            describe(SYSFS, SYS_FS_BPF),
            "no mount on it; it is on sysfs mounted on /sys"
        );
        assert_eq!(
            describe(&format!("{SYSFS}\n{BPF}"), SYS_FS_BPF),
            "bpf mounted on it"
        );
        let hidden = describe(&format!("{SYSFS}\n{BPF}\n{SYSFS_AGAIN}"), SYS_FS_BPF);
        assert!(
            hidden.starts_with("no mount on it; it is on sysfs mounted on /sys; an earlier bpffs")
        );
        assert_eq!(describe("", SYS_FS_BPF), "no mount holds it");
    }

    #[test]
    fn unescape_leaves_plain_text_and_short_escapes() {
        assert_eq!(unescape("/a/b"), "/a/b");
        assert_eq!(unescape("/a\\011b\\134"), "/a\tb\\");
        assert_eq!(unescape("/x\\04"), "/x\\04");
    }
}
