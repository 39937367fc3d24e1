//! Compiles the management API (proto/fare.proto) with tonic/prost.
//! `protox` parses the .proto in pure Rust, so no `protoc` is needed.

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
}
