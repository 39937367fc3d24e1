//! Build facts for `fare --version`: the git commit (FARE_GIT_COMMIT from the
//! environment wins, for builds from a source tarball; "unknown" outside a checkout)
//! and the cargo features this build enabled.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_string())
}

/// Files whose change means another commit: HEAD, the branch it names, packed refs.
fn git_files(manifest_dir: &Path) -> Vec<PathBuf> {
    let mut names = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["rev-parse", "--symbolic-full-name", "HEAD"]) {
        names.push(branch);
    }
    names
        .iter()
        .filter_map(|n| git(&["rev-parse", "--git-path", n]))
        .map(|p| manifest_dir.join(p))
        .filter(|p| p.exists())
        .collect()
}

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo:rerun-if-env-changed=FARE_GIT_COMMIT");
    let commit = std::env::var("FARE_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    for file in git_files(&manifest_dir) {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    println!("cargo:rustc-env=FARE_GIT_COMMIT={commit}");

    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_lowercase))
        .filter(|f| f != "default")
        .map(|f| f.replace('_', "-"))
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    println!("cargo:rustc-env=FARE_FEATURES={features}");
}
