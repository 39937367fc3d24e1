//! Which kernels run fare's XDP program, and the one-line refusal of any other.
//!
//! The program needs kernel features that arrived one release at a time, and then a
//! verifier that accepts it: the oldest kernel whose verifier the test command runs it on
//! and passes on (a guest of Debian 12's own kernel, docs/xdp.md "Kernels") is the
//! minimum. An older
//! kernel is refused before anything is loaded, naming what it lacks, instead of with a
//! verifier dump.

use std::fmt;

/// The oldest kernel fare's XDP and TC programs are verified and tested on.
pub const MINIMUM: Release = Release(6, 1, 0);

/// Set to 1 to load on a kernel older than [`MINIMUM`] anyway (untested: its verifier
/// may refuse the program; the refusal is then one line too).
pub const ANY_KERNEL_ENV: &str = "FARE_XDP_ANY_KERNEL";

/// The kernel features the program uses, with the release that brought each.
const FEATURES: &[(Release, &str)] = &[
    (
        Release(5, 2, 0),
        "read-only global data (the program's load-time flags)",
    ),
    (Release(5, 3, 0), "bounded loops"),
    (Release(5, 4, 0), "DEVMAP_HASH"),
    (Release(5, 8, 0), "the BPF ring buffer (the program's log)"),
    (
        Release(5, 9, 0),
        "XDP links (pinned attachments that outlive the agent)",
    ),
    (
        Release(6, 1, 0),
        "fare's forwarding tests passing (6.1 is the oldest kernel they pass on)",
    ),
];

/// A kernel release `major.minor.patch` as `uname -r` starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release(pub u32, pub u32, pub u32);

impl Release {
    /// The leading `major.minor[.patch]` of a release string (`6.1.0-57-amd64`,
    /// `5.15.0-91-generic`, `6.18.44-fc`); None when it does not start so.
    pub fn parse(text: &str) -> Option<Release> {
        let mut parts = text.split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        Some(Release(major, minor, patch))
    }

    /// The running kernel's release (`uname -r`), and its text.
    pub fn running() -> Option<(Release, String)> {
        // SAFETY: uname fills the struct; release is NUL-terminated.
        let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
        if unsafe { libc::uname(&mut uts) } != 0 {
            return None;
        }
        let text = unsafe { std::ffi::CStr::from_ptr(uts.release.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Some((Release::parse(&text)?, text))
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// What a kernel of release `release` lacks, oldest first (empty from [`MINIMUM`] on).
pub fn missing(release: Release) -> Vec<&'static str> {
    FEATURES
        .iter()
        .filter(|(since, _)| release < *since)
        .map(|(_, what)| *what)
        .collect()
}

/// Ok on a supported kernel (or an unknown release, or with [`ANY_KERNEL_ENV`] set);
/// otherwise the one-line reason.
pub fn check() -> Result<(), String> {
    let Some((release, text)) = Release::running() else {
        return Ok(());
    };
    let lacks = missing(release);
    if lacks.is_empty() || std::env::var(ANY_KERNEL_ENV).is_ok_and(|v| v == "1") {
        return Ok(());
    }
    Err(refusal(&text, &lacks))
}

fn refusal(text: &str, lacks: &[&str]) -> String {
    format!(
        "Linux {text} is older than {MINIMUM}, the oldest kernel fare's XDP program runs on; \
         it lacks: {} ({ANY_KERNEL_ENV}=1 tries anyway)",
        lacks.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_distribution_releases() {
        assert_eq!(Release::parse("6.1.0-57-amd64"), Some(Release(6, 1, 0)));
        assert_eq!(Release::parse("5.15.0-91-generic"), Some(Release(5, 15, 0)));
        assert_eq!(
            Release::parse("5.14.0-427.13.1.el9_4.x86_64"),
            Some(Release(5, 14, 0))
        );
        assert_eq!(Release::parse("6.18.44-fc-v1272"), Some(Release(6, 18, 44)));
        assert_eq!(Release::parse("6.8"), Some(Release(6, 8, 0)));
        assert_eq!(Release::parse("linux"), None);
        assert_eq!(Release::parse("6"), None);
    }

    #[test]
    fn names_what_each_distribution_kernel_lacks() {
        // Debian 12, Ubuntu 24.04, the host: nothing.
        for r in [(6, 1), (6, 8), (6, 18)] {
            assert!(missing(Release(r.0, r.1, 0)).is_empty(), "{r:?}");
        }
        // Debian 11, RHEL 9 and Ubuntu 22.04 have every feature, not the tests' pass.
        for r in [(5, 10), (5, 14), (5, 15)] {
            assert_eq!(missing(Release(r.0, r.1, 0)).len(), 1, "{r:?}");
        }
        // Debian 10 (4.19): everything from global data on.
        assert_eq!(missing(Release(4, 19, 0)).len(), FEATURES.len());
        // 5.4 has DEVMAP_HASH, not the ring buffer.
        let lacks = missing(Release(5, 4, 0));
        assert!(lacks[0].starts_with("the BPF ring buffer"), "{lacks:?}");
    }

    #[test]
    fn the_refusal_is_one_line_with_the_release() {
        let line = refusal("5.4.0-150-generic", &missing(Release(5, 4, 0)));
        assert!(!line.contains('\n'));
        assert!(line.starts_with("Linux 5.4.0-150-generic is older than 6.1,"));
    }
}
