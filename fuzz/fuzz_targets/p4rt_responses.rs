#![no_main]

//! What the P4Runtime client parses from a switch, as protobuf bytes: read answers that
//! adoption interprets against fare.p4's committed P4Info, stream messages (arbitration,
//! packet-in metadata), a failed RPC's status details, and the P4Info a switch reports.
//! The first byte picks the response. Invariants: nothing panics; adoption takes at most
//! one item per entity read; a packet-in's ingress port comes from its metadata; the
//! per-update errors of a status are those with a non-OK code, each at its position.

use fare_p4runtime::client::Incoming;
use fare_p4runtime::p4info::P4Info;
use fare_dp_p4::program::FareProgram;
use fare_dp_p4::responses;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const COMMITTED: &str = include_str!("../../p4/build/fare.p4info.txtpb");

fn program() -> &'static FareProgram {
    static PROGRAM: OnceLock<FareProgram> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let info = P4Info::from_text(COMMITTED).expect("the committed P4Info parses");
        FareProgram::resolve(&info).expect("fare.p4 resolves")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok((read, taken)) = responses::read_response(program(), rest) {
                assert!(taken <= read, "adopted {taken} items from {read} entities");
            }
        }
        1 => {
            if let Ok((message, meta)) = responses::stream_response(program(), rest) {
                if meta.is_some() {
                    assert!(matches!(message, Incoming::Packet(_)));
                }
            }
        }
        2 => {
            let Some((code, details)) = rest.split_first() else {
                return;
            };
            let error = responses::rpc_status(i32::from(*code), "fuzz", details);
            let mut last = None;
            for u in &error.updates {
                assert_ne!(u.code, tonic::Code::Ok);
                assert!(last.is_none_or(|l| u.index > l), "updates out of order");
                last = Some(u.index);
            }
        }
        _ => {
            let _ = responses::pipeline_config(rest);
        }
    }
});
