# Sourced by scripts/setup and scripts/test: puts a directory of prebuilt P4 tools to use.
#
# The P4 tests (BMv2 `simple_switch_grpc`, p4c, the SAI-P4 middleblock program, the PINS
# P4Infos) use what is on PATH. A directory laid out as
#   bin/{simple_switch_grpc,p4c,p4c-bm2-ss,...}  lib/*.so*  share/p4c/  share/sai-p4/
# (a prefix where BMv2, PI and p4c were installed; with p4c's Tofino back end too,
# bin/{p4c-barefoot,bfas,p4c-build-logs}, `make -C p4 check` compiles the TNA program) is
# used when $FARE_P4TOOLS names it, or when it sits at /opt/p4tools. Nothing here
# downloads or builds anything.
P4TOOLS_DIR="${FARE_P4TOOLS:-/opt/p4tools}"

# Debian bookworm libraries BMv2 (with PI, gRPC, Thrift, nanomsg) and p4c link against.
P4TOOLS_RUNTIME_PACKAGES=(
  libabsl20220623 libboost-program-options1.74.0 libboost-iostreams1.74.0 libbz2-1.0
  libc-ares2 libgmp10 libgrpc++1.51 libgrpc29 libjsoncpp25 liblz4-1 libnanomsg5
  libpcap0.8 libprotobuf32 libre2-9 libssl3 libthrift-0.17.0 libxxhash0 libzstd1 python3
  # the p4c driver preprocesses with `cc -E` for the Tofino targets
  gcc
)

p4tools_present() { [ -x "$P4TOOLS_DIR/bin/simple_switch_grpc" ]; }

# Exports PATH, LD_LIBRARY_PATH and the SAI-P4 locations the tests read (unless already set).
p4tools_env() {
  p4tools_present || return 0
  case ":$PATH:" in *":$P4TOOLS_DIR/bin:"*) ;; *) export PATH="$P4TOOLS_DIR/bin:$PATH" ;; esac
  export LD_LIBRARY_PATH="$P4TOOLS_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local sai="$P4TOOLS_DIR/share/sai-p4"
  if [ -z "${FARE_SAI_P4_DIR:-}" ] && [ -f "$sai/middleblock.json" ]; then
    export FARE_SAI_P4_DIR="$sai"
  fi
  if [ -z "${FARE_SAI_PINS_P4INFO:-}" ] && [ -d "$sai/pins" ]; then
    export FARE_SAI_PINS_P4INFO="$sai/pins"
  fi
}
