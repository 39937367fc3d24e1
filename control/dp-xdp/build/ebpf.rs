//! Builds an eBPF crate of ebpf/ for `bpfel-unknown-none` and hands the object to the
//! crate being built: `OUT_DIR/<name>.o` plus `--cfg <cfg>`. fare-dp-xdp embeds the XDP
//! program (ebpf/fare-xdp, `fare_xdp_embedded`); fare-bench includes this file from its
//! own build script for the benchmark-only programs (ebpf/fare-bench-xdp: minimal
//! forwarder, traffic generator, sink; `fare_bench_xdp_embedded`).
//!
//! The eBPF crate needs `RUSTC_BOOTSTRAP=1 -Z build-std=core` (on the pinned stable
//! toolchain, with rust-src) and `bpf-linker`; both come from scripts/setup. When
//! bpf-linker is missing the host build still succeeds: a cargo warning says so, no
//! object is embedded, and the xdp backend reports that scripts/setup must be run.
//! `FARE_SKIP_EBPF=1` skips the step on purpose.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "bpfel-unknown-none";

/// The production XDP program (fare-dp-xdp's build script).
#[allow(dead_code)]
pub fn build() {
    build_crate("fare-xdp", "fare_xdp_embedded");
}

/// Builds ebpf/`name` and embeds it under `cfg` (see the module documentation).
pub fn build_crate(name: &str, cfg: &str) {
    println!("cargo::rustc-check-cfg=cfg({cfg})");
    println!("cargo::rerun-if-env-changed=FARE_SKIP_EBPF");
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    // control/<crate> -> the repository root.
    let root = manifest
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let program = root.join("ebpf").join(name);
    for input in ["src", "Cargo.toml", "Cargo.lock"] {
        println!("cargo::rerun-if-changed={}", program.join(input).display());
    }
    for input in ["ebpf/fare-common/src", "ebpf/fare-common/Cargo.toml"] {
        println!("cargo::rerun-if-changed={}", root.join(input).display());
    }
    if env::var_os("FARE_SKIP_EBPF").is_some_and(|v| v != "0") {
        println!("cargo::warning=FARE_SKIP_EBPF set: the XDP program is not built or embedded");
        return;
    }
    let cargo_bin = cargo_home().join("bin");
    let Some(linker) = find_bpf_linker(&cargo_bin) else {
        // Watching the path it will be installed to rebuilds us once it appears.
        println!(
            "cargo::rerun-if-changed={}",
            cargo_bin.join("bpf-linker").display()
        );
        println!(
            "cargo::warning=bpf-linker not found: the XDP program is not embedded \
             (the xdp data plane will refuse to start); run scripts/setup to install it"
        );
        return;
    };
    println!("cargo::rerun-if-changed={}", linker.display());
    if !rust_src_installed() {
        println!(
            "cargo::warning=the rust-src component is missing: the XDP program is not embedded; \
             run scripts/setup (rustup component add rust-src)"
        );
        return;
    }

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default());
    let target_dir = out_dir.join("ebpf-target");
    let path = env::join_paths(
        std::iter::once(cargo_bin.clone())
            .chain(env::var_os("PATH").iter().flat_map(env::split_paths)),
    )
    .unwrap_or_default();
    let mut cmd = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(&program)
        .args([
            "build",
            "--release",
            "--target",
            TARGET,
            "-Z",
            "build-std=core",
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("PATH", path)
        // The host build's flags and wrappers (clippy, coverage) are not for this target.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET");
    let output = match cmd.output() {
        Ok(o) => o,
        Err(e) => {
            println!("cargo::warning=could not run cargo for ebpf/{name}: {e}");
            return;
        }
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        for line in stderr.lines().filter(|l| !l.trim().is_empty()).take(40) {
            println!("cargo::warning={name}: {line}");
        }
        // A broken eBPF program is a bug, not a missing tool: fail loudly.
        panic!("building the eBPF object ebpf/{name} failed; see the warnings above");
    }
    let object = target_dir.join(TARGET).join("release").join(name);
    let embedded = out_dir.join(format!("{name}.o"));
    if let Err(e) = std::fs::copy(&object, &embedded) {
        panic!("copying {} failed: {e}", object.display());
    }
    println!("cargo::rustc-cfg={cfg}");
}

fn cargo_home() -> PathBuf {
    env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from(".cargo"))
}

fn find_bpf_linker(cargo_bin: &Path) -> Option<PathBuf> {
    std::iter::once(cargo_bin.to_path_buf())
        .chain(env::var_os("PATH").iter().flat_map(env::split_paths))
        .map(|dir| dir.join("bpf-linker"))
        .find(|p| p.is_file())
}

/// `-Z build-std=core` needs the standard library sources of the active toolchain.
fn rust_src_installed() -> bool {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    sysroot
        .join("lib/rustlib/src/rust/library/core/Cargo.toml")
        .is_file()
}
