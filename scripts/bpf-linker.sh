# shellcheck shell=bash
# Installs bpf-linker (links the XDP program for the BPF target) built against the
# LLVM that ships inside the pinned Rust toolchain, so both always agree on the LLVM
# version. Sourced by scripts/setup; also runnable on its own. Idempotent: returns
# at once when a bpf-linker built for this toolchain's LLVM is already installed.
#
# No LLVM of the toolchain's version is packaged for Debian, but the toolchain has its
# own as a shared library (`$(rustc --print sysroot)/lib/libLLVM-<ver>-rust-<rustc>-stable.so`):
# bpf-linker is built with `no-llvm-linking` and linked to that library explicitly.

bpf_linker_install() {
  local sysroot libdir lib llvm_major stamp_dir stamp want
  sysroot="$(rustc --print sysroot)" || return 1
  libdir="$sysroot/lib"
  lib="$(cd "$libdir" && ls libLLVM-*-rust-*.so 2>/dev/null | head -n1)"
  if [ -z "$lib" ]; then
    echo "bpf-linker: no libLLVM shared library in $libdir" >&2
    return 1
  fi
  llvm_major="$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')"
  want="$lib"
  stamp_dir="${CARGO_HOME:-$HOME/.cargo}"
  stamp="$stamp_dir/.fare-bpf-linker"
  if command -v bpf-linker >/dev/null 2>&1 && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "setup: bpf-linker present (LLVM $llvm_major)" >&2
    return 0
  fi
  echo "setup: building bpf-linker against $lib (LLVM $llvm_major), about a minute" >&2
    RUSTFLAGS="-L native=$libdir -l dylib=$(basename "${lib#lib}" .so) -C link-arg=-Wl,-rpath,$libdir" \
    nice -n 19 cargo install --locked --force bpf-linker \
    --no-default-features --features "llvm-$llvm_major,no-llvm-linking" || return 1
  mkdir -p "$stamp_dir" && printf '%s' "$want" >"$stamp"
}

# A failed build must not stop the rest of the setup: the host build works without
# bpf-linker (it embeds no XDP program and the xdp backend says to run scripts/setup).
bpf_linker_install || echo "setup: WARNING: bpf-linker could not be built; the XDP program will not be embedded" >&2
