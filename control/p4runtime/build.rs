//! Compiles the P4Runtime v1 and P4Info protobufs (proto/p4/, written for fare and
//! trimmed to what it uses) with tonic/prost. `protox` parses them in pure Rust, so no
//! `protoc` is needed. The file descriptor set is also written to OUT_DIR so the client can
//! parse P4Info in protobuf text format (p4c's `.txtpb` output) with prost-reflect.

use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "proto/p4/v1/p4runtime.proto",
    "proto/p4/v1/p4data.proto",
    "proto/p4/config/v1/p4info.proto",
    "proto/p4/config/v1/p4types.proto",
    "proto/google/rpc/status.proto",
];

fn main() {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    let fds = match protox::compile(PROTOS, ["proto"]) {
        Ok(fds) => fds,
        Err(e) => panic!("P4Runtime protos: {e}"),
    };
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let bytes = prost::Message::encode_to_vec(&fds);
    if let Err(e) = std::fs::write(out.join("p4runtime_fds.bin"), bytes) {
        panic!("writing the P4Runtime descriptor set: {e}");
    }
    if let Err(e) = tonic_prost_build::configure()
        .build_client(true)
        // The server side serves the in-memory target (`fake`) of the profiles' unit tests.
        .build_server(true)
        .compile_fds(fds)
    {
        panic!("generating code for the P4Runtime protos: {e}");
    }
}
