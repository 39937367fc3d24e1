//! The client's parsers of what a switch sends back, from wire bytes: read answers
//! (adoption), stream messages (arbitration, packet-in), the error details of a failed
//! RPC, and the pipeline a switch reports. The client receives these typed from tonic;
//! these entry points take bytes so that the `p4rt_responses` fuzz target reaches the same
//! code with any input.

use crate::fare::adoptable;
use crate::program::FareProgram;
use fare_p4runtime::client::{incoming, Incoming, P4rtError, RpcError};
use fare_p4runtime::p4info::P4Info;
use fare_p4runtime::proto::p4::v1 as p4;
use prost::Message;

/// A ReadResponse: (entities read, how many of them adoption takes).
pub fn read_response(
    prog: &FareProgram,
    bytes: &[u8],
) -> Result<(usize, usize), prost::DecodeError> {
    let response = p4::ReadResponse::decode(bytes)?;
    let read = response.entities.len();
    Ok((read, adoptable(prog, response.entities)))
}

/// A StreamMessageResponse, and a packet-in's (ingress port, reason) when it has them.
pub fn stream_response(
    prog: &FareProgram,
    bytes: &[u8],
) -> Result<(Incoming, Option<(u32, u8)>), prost::DecodeError> {
    let message = incoming(p4::StreamMessageResponse::decode(bytes)?);
    let meta = match &message {
        Incoming::Packet(p) => prog.packet_in_meta(&p.metadata),
        _ => None,
    };
    Ok((message, meta))
}

/// A failed RPC's status with its `grpc-status-details-bin` bytes.
pub fn rpc_status(code: i32, message: &str, details: &[u8]) -> RpcError {
    let status = tonic::Status::with_details(
        tonic::Code::from_i32(code),
        message,
        details.to_vec().into(),
    );
    RpcError::from_status(&status)
}

/// A GetForwardingPipelineConfigResponse: fare.p4's objects resolved in the P4Info the
/// switch reports (outer error: not a message; inner: not fare.p4's pipeline).
pub fn pipeline_config(bytes: &[u8]) -> Result<Result<FareProgram, P4rtError>, prost::DecodeError> {
    let response = p4::GetForwardingPipelineConfigResponse::decode(bytes)?;
    Ok(match response.config.and_then(|c| c.p4info) {
        Some(info) => FareProgram::resolve(&P4Info { info }),
        None => Err(P4rtError::Invalid("the switch runs no pipeline".into())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fare_dataplane::MacAddr;
    use fare_p4runtime::entities::{entity_table, GroupMember};
    use std::net::Ipv4Addr;

    fn committed() -> FareProgram {
        let text = include_str!("../../../p4/build/fare.p4info.txtpb");
        FareProgram::resolve(&P4Info::from_text(text).unwrap()).unwrap()
    }

    /// With `FARE_FUZZ_SEEDS=DIR` (the repository's fuzz/seeds), writes `bytes` as a seed
    /// of the `p4rt_responses` fuzz target (first byte: which response).
    fn seed(name: &str, which: u8, bytes: &[u8]) {
        let Some(dir) = std::env::var_os("FARE_FUZZ_SEEDS") else {
            return;
        };
        let dir = std::path::Path::new(&dir).join("p4rt_responses");
        std::fs::create_dir_all(&dir).unwrap();
        let mut v = vec![which];
        v.extend_from_slice(bytes);
        std::fs::write(dir.join(name), v).unwrap();
    }

    fn entity(e: p4::entity::Entity) -> p4::Entity {
        p4::Entity { entity: Some(e) }
    }

    /// What fare writes, read back: adoption takes every entity (two routes, the group
    /// entry, its profile group, two members, one ARN path).
    #[test]
    fn written_entities_are_adopted() {
        use p4::entity::Entity as E;
        let prog = committed();
        let mac = |last| MacAddr([2, 0, 0, 0, 0, last]);
        let member = |id, port| prog.member(id, port, mac(1), mac(2), 0, 1).unwrap();
        let members = [701, 702].map(|member_id| GroupMember {
            member_id,
            weight: 3,
            watch_port: None,
        });
        let entities = vec![
            entity_table(
                prog.route("10.1.0.0/24".parse().unwrap(), 7, false, 0)
                    .unwrap(),
            ),
            entity_table(
                prog.route("2001:db8:1::/48".parse().unwrap(), 7, true, 0)
                    .unwrap(),
            ),
            entity_table(prog.group_entry(7, 70).unwrap()),
            entity(E::ActionProfileGroup(
                prog.profile_group(70, &members, 9).unwrap(),
            )),
            entity(E::ActionProfileMember(member(701, 1))),
            entity(E::ActionProfileMember(member(702, 2))),
            entity_table(
                prog.arn_rx_entry(1, Ipv4Addr::new(10, 0, 0, 9), 3, 1000)
                    .unwrap(),
            ),
        ];
        let bytes = p4::ReadResponse { entities }.encode_to_vec();
        assert_eq!(read_response(&prog, &bytes), Ok((7, 7)));
        seed("read-written", 0, &bytes);
    }

    /// A packet-in with fare.p4's metadata gives its ingress port and reason; an
    /// arbitration answer with a non-OK status is a backup role.
    #[test]
    fn stream_messages() {
        use p4::stream_message_response::Update;
        let prog = committed();
        let packet = p4::StreamMessageResponse {
            update: Some(Update::Packet(p4::PacketIn {
                payload: vec![0xaa; 20],
                metadata: vec![
                    p4::PacketMetadata {
                        metadata_id: prog.packet_in_port.id,
                        value: vec![0, 5],
                    },
                    p4::PacketMetadata {
                        metadata_id: prog.packet_in_reason.id,
                        value: vec![2],
                    },
                ],
            })),
        }
        .encode_to_vec();
        let (message, meta) = stream_response(&prog, &packet).unwrap();
        assert!(matches!(message, Incoming::Packet(_)));
        assert_eq!(meta, Some((5, 2)));
        seed("stream-packet-in", 1, &packet);
        let backup = p4::StreamMessageResponse {
            update: Some(Update::Arbitration(p4::MasterArbitrationUpdate {
                device_id: 1,
                status: Some(fare_p4runtime::proto::google::rpc::Status {
                    code: 6,
                    message: "not primary".into(),
                    details: vec![],
                }),
                ..Default::default()
            })),
        }
        .encode_to_vec();
        let (message, _) = stream_response(&prog, &backup).unwrap();
        assert!(matches!(
            message,
            Incoming::Arbitration(fare_p4runtime::client::Arbitration::Backup(_))
        ));
        seed("stream-arbitration", 1, &backup);
    }

    /// The committed P4Info as a switch reports it resolves to the same program.
    #[test]
    fn pipeline_config_of_the_committed_p4info() {
        let text = include_str!("../../../p4/build/fare.p4info.txtpb");
        let info = P4Info::from_text(text).unwrap().info;
        let bytes = p4::GetForwardingPipelineConfigResponse {
            config: Some(p4::ForwardingPipelineConfig {
                p4info: Some(info),
                ..Default::default()
            }),
        }
        .encode_to_vec();
        let prog = pipeline_config(&bytes).unwrap().unwrap();
        assert_eq!(prog.route_v4.table, committed().route_v4.table);
        seed("pipeline-committed", 3, &bytes);
    }
}
