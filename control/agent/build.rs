//! Compiles the management API (proto/fare.proto) with tonic/prost, and records the
//! commit being built for `fare_build_info`. `protox` parses the .proto in pure Rust, so
//! no `protoc` is needed.

use std::process::Command;

fn main() {
    let proto = "proto/fare.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = match protox::compile([proto], ["proto"]) {
        Ok(fds) => fds,
        Err(e) => panic!("{proto}: {e}"),
    };
    if let Err(e) = tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)
    {
        panic!("generating code for {proto}: {e}");
    }
    commit();
}

/// FARE_GIT_COMMIT: the environment's (a build outside git, e.g. from a source tarball),
/// else `git rev-parse`, else "unknown". Rebuilt when HEAD or the branch it names moves.
/// The one source of the commit: `fare --version` and `fare_build_info` both read it.
fn commit() {
    println!("cargo:rerun-if-env-changed=FARE_GIT_COMMIT");
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
    };
    let commit = std::env::var("FARE_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=FARE_GIT_COMMIT={commit}");
    let watch = |path: String| {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    };
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        watch(format!("{dir}/HEAD"));
    }
    let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]);
    if let Some(common) = common {
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch(format!("{common}/{head}"));
        }
        watch(format!("{common}/packed-refs"));
    }
}
