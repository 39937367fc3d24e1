//! P4Runtime v1 client over tonic: arbitration (primary election), pipeline config,
//! Write/Read, packet-in/out on the stream channel, and gRPC errors decoded into the
//! per-update `p4.v1.Error`s the target put in the status details.

use crate::p4info::P4Info;
use crate::proto::google::rpc;
use crate::proto::p4::v1 as p4;
use crate::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use prost::Message;
use std::fmt;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::Channel;

/// Why a P4Runtime call failed, with the target's per-update errors when it gave them.
#[derive(Debug, thiserror::Error)]
pub enum P4rtError {
    #[error("P4Runtime target {addr}: {what}")]
    Connect { addr: String, what: String },
    #[error("P4Runtime {op}: {error}")]
    Rpc { op: &'static str, error: RpcError },
    #[error("not primary for device {device_id}: {why}")]
    NotPrimary { device_id: u64, why: String },
    #[error("P4Runtime stream channel closed")]
    StreamClosed,
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    #[error(transparent)]
    P4Info(#[from] crate::p4info::P4InfoError),
    #[error("value {value:#x} does not fit {bits} bits ({what})")]
    Width {
        what: String,
        value: u128,
        bits: i32,
    },
    #[error("{0}")]
    Invalid(String),
}

/// How long [`Client::connect`] retries an election id the target still sees as taken.
const ELECTION_ID_RETRY: Duration = Duration::from_secs(10);

impl P4rtError {
    /// The target refused the stream because a session with the same election id is still
    /// open (P4Runtime spec: INVALID_ARGUMENT for a duplicate election id).
    fn is_election_id_taken(&self) -> bool {
        match self {
            P4rtError::Rpc { op, error } => {
                *op == "StreamChannel"
                    && error.code == tonic::Code::InvalidArgument
                    && error.message.to_ascii_lowercase().contains("election id")
            }
            P4rtError::NotPrimary { why, .. } => {
                why.to_ascii_lowercase().contains("election id already")
            }
            _ => false,
        }
    }
}

/// A failed RPC: gRPC code and message, plus one entry per failed update of a Write.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: tonic::Code,
    pub message: String,
    pub updates: Vec<UpdateError>,
}

/// One update of a batch that the target rejected (`p4.v1.Error` in the status details).
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateError {
    /// Position of the update in the WriteRequest.
    pub index: usize,
    pub code: tonic::Code,
    pub message: String,
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)?;
        for u in &self.updates {
            write!(f, "; update #{}: {:?}: {}", u.index, u.code, u.message)?;
        }
        Ok(())
    }
}

impl RpcError {
    /// Decodes a gRPC status, including `grpc-status-details-bin` (a google.rpc.Status
    /// whose details are `p4.v1.Error`s, one per update, OK for those that succeeded).
    pub fn from_status(status: &tonic::Status) -> RpcError {
        let mut updates = Vec::new();
        if let Ok(details) = rpc::Status::decode(status.details()) {
            for (index, any) in details.details.iter().enumerate() {
                if !any.type_url.ends_with("p4.v1.Error") {
                    continue;
                }
                let Ok(e) = p4::Error::decode(any.value.as_slice()) else {
                    continue;
                };
                if e.canonical_code != 0 {
                    updates.push(UpdateError {
                        index,
                        code: tonic::Code::from_i32(e.canonical_code),
                        message: e.message,
                    });
                }
            }
        }
        RpcError {
            code: status.code(),
            message: status.message().to_string(),
            updates,
        }
    }
}

fn rpc_error(op: &'static str) -> impl Fn(tonic::Status) -> P4rtError {
    move |status| P4rtError::Rpc {
        op,
        error: RpcError::from_status(&status),
    }
}

/// A packet the switch sent to the controller, with its metadata by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn {
    pub payload: Vec<u8>,
    pub metadata: Vec<(u32, Vec<u8>)>,
}

/// Arbitration state as last reported by the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arbitration {
    Pending,
    Primary,
    /// Another controller (higher election id) is primary; the target's message.
    Backup(String),
    /// The stream channel ended (switch gone or restarted, connection lost).
    Closed(String),
}

/// A connected P4Runtime session with one device.
pub struct Client {
    grpc: P4RuntimeClient<Channel>,
    pub device_id: u64,
    election_id: p4::Uint128,
    stream_tx: mpsc::Sender<p4::StreamMessageRequest>,
    arbitration: watch::Receiver<Arbitration>,
    packets: mpsc::Receiver<PacketIn>,
}

impl Client {
    /// Connects to `addr` (`host:port`), opens the stream channel and becomes primary with
    /// `election_id` (errors if another controller holds a higher one).
    ///
    /// A restarted controller reconnects with its old election id; until the target has
    /// noticed that the old stream is gone it refuses the id as taken, so that refusal is
    /// retried for a few seconds.
    pub async fn connect(
        addr: &str,
        device_id: u64,
        election_id: u64,
    ) -> Result<Client, P4rtError> {
        let client = Self::open(addr, device_id, election_id, ELECTION_ID_RETRY).await?;
        match client.arbitration() {
            Arbitration::Primary => Ok(client),
            Arbitration::Backup(why) | Arbitration::Closed(why) => Err(P4rtError::NotPrimary {
                device_id: client.device_id,
                why,
            }),
            Arbitration::Pending => Err(P4rtError::Timeout("arbitration")),
        }
    }

    /// Connects and opens the stream channel with `election_id`, and returns once the
    /// target answered the arbitration, primary or not: a backup keeps its stream open and
    /// learns from [`Client::arbitration`] when it becomes primary (the target tells every
    /// controller when the primary changes). An election id the target still sees as taken
    /// is retried for up to `retry_taken`.
    pub async fn open(
        addr: &str,
        device_id: u64,
        election_id: u64,
        retry_taken: Duration,
    ) -> Result<Client, P4rtError> {
        let deadline = tokio::time::Instant::now() + retry_taken;
        loop {
            match Self::connect_once(addr, device_id, election_id).await {
                Err(e) if e.is_election_id_taken() && tokio::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "election id still held by a closing session");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => return other,
            }
        }
    }

    async fn connect_once(
        addr: &str,
        device_id: u64,
        election_id: u64,
    ) -> Result<Client, P4rtError> {
        let connect_err = |what: String| P4rtError::Connect {
            addr: addr.to_string(),
            what,
        };
        let endpoint = Channel::from_shared(format!("http://{addr}"))
            .map_err(|e| connect_err(e.to_string()))?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true);
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| connect_err(e.to_string()))?;
        let mut grpc = P4RuntimeClient::new(channel)
            .max_decoding_message_size(256 << 20)
            .max_encoding_message_size(256 << 20);

        let (stream_tx, stream_rx) = mpsc::channel(1024);
        let election_id = p4::Uint128 {
            high: 0,
            low: election_id,
        };
        stream_tx
            .send(p4::StreamMessageRequest {
                update: Some(p4::stream_message_request::Update::Arbitration(
                    p4::MasterArbitrationUpdate {
                        device_id,
                        role: None,
                        election_id: Some(election_id),
                        status: None,
                    },
                )),
            })
            .await
            .map_err(|_| P4rtError::StreamClosed)?;
        let inbound = grpc
            .stream_channel(ReceiverStream::new(stream_rx))
            .await
            .map_err(rpc_error("StreamChannel"))?
            .into_inner();

        let (arb_tx, arbitration) = watch::channel(Arbitration::Pending);
        let (packet_tx, packets) = mpsc::channel(4096);
        tokio::spawn(read_stream(inbound, arb_tx, packet_tx));

        let mut client = Client {
            grpc,
            device_id,
            election_id,
            stream_tx,
            arbitration,
            packets,
        };
        client.wait_answer(Duration::from_secs(5)).await?;
        Ok(client)
    }

    /// The arbitration state as the target last reported it (Closed once the stream ended).
    pub fn arbitration(&self) -> Arbitration {
        self.arbitration.borrow().clone()
    }

    /// Waits until the arbitration state differs from what was last seen (or `limit`).
    pub async fn arbitration_changed(&mut self, limit: Duration) -> Arbitration {
        let _ = tokio::time::timeout(limit, self.arbitration.changed()).await;
        self.arbitration.borrow_and_update().clone()
    }

    /// Waits for the target's first arbitration answer (primary or backup).
    async fn wait_answer(&mut self, limit: Duration) -> Result<(), P4rtError> {
        let wait = async {
            loop {
                match &*self.arbitration.borrow_and_update() {
                    Arbitration::Pending => {}
                    Arbitration::Closed(why) => {
                        return Err(P4rtError::NotPrimary {
                            device_id: self.device_id,
                            why: why.clone(),
                        })
                    }
                    _ => return Ok(()),
                }
                if self.arbitration.changed().await.is_err() {
                    return Err(P4rtError::StreamClosed);
                }
            }
        };
        tokio::time::timeout(limit, wait)
            .await
            .map_err(|_| P4rtError::Timeout("arbitration"))?
    }

    /// `Capabilities`: the P4Runtime API version the target speaks.
    pub async fn capabilities(&mut self) -> Result<String, P4rtError> {
        let r = self
            .grpc
            .capabilities(p4::CapabilitiesRequest {})
            .await
            .map_err(rpc_error("Capabilities"))?;
        Ok(r.into_inner().p4runtime_api_version)
    }

    /// Pushes a pipeline with VERIFY_AND_COMMIT (the switch verifies, then replaces the
    /// running program and clears its state). `cookie` identifies this config for
    /// [`Client::pipeline_cookie`].
    pub async fn set_pipeline(
        &mut self,
        p4info: &P4Info,
        device_config: Vec<u8>,
        cookie: u64,
    ) -> Result<(), P4rtError> {
        let request = set_pipeline_request(
            self.device_id,
            self.election_id,
            p4info,
            device_config,
            cookie,
        );
        self.grpc
            .set_forwarding_pipeline_config(request)
            .await
            .map_err(rpc_error("SetForwardingPipelineConfig"))?;
        Ok(())
    }

    /// The cookie of the running pipeline, or None when the switch has none.
    pub async fn pipeline_cookie(&mut self) -> Result<Option<u64>, P4rtError> {
        let request = p4::GetForwardingPipelineConfigRequest {
            device_id: self.device_id,
            response_type: p4::get_forwarding_pipeline_config_request::ResponseType::CookieOnly
                as i32,
        };
        match self.grpc.get_forwarding_pipeline_config(request).await {
            Ok(r) => Ok(r
                .into_inner()
                .config
                .and_then(|c| c.cookie)
                .map(|c| c.cookie)),
            // No pipeline yet.
            Err(s) if s.code() == tonic::Code::FailedPrecondition => Ok(None),
            Err(s) => Err(rpc_error("GetForwardingPipelineConfig")(s)),
        }
    }

    /// The P4Info of the running pipeline (when the agent pushes none itself).
    pub async fn pipeline_p4info(&mut self) -> Result<P4Info, P4rtError> {
        let request = p4::GetForwardingPipelineConfigRequest {
            device_id: self.device_id,
            response_type: p4::get_forwarding_pipeline_config_request::ResponseType::P4infoAndCookie
                as i32,
        };
        let r = self
            .grpc
            .get_forwarding_pipeline_config(request)
            .await
            .map_err(rpc_error("GetForwardingPipelineConfig"))?;
        r.into_inner()
            .config
            .and_then(|c| c.p4info)
            .map(|info| P4Info { info })
            .ok_or_else(|| P4rtError::Invalid("the switch runs no pipeline".into()))
    }

    /// One Write RPC with the given updates (applied in order; CONTINUE_ON_ERROR, the only
    /// atomicity every target supports).
    pub async fn write(&mut self, updates: Vec<p4::Update>) -> Result<(), P4rtError> {
        if updates.is_empty() {
            return Ok(());
        }
        let request = write_request(self.device_id, self.election_id, updates);
        self.grpc.write(request).await.map_err(rpc_error("Write"))?;
        Ok(())
    }

    /// One Read RPC; collects every entity of the response stream.
    pub async fn read(&mut self, entities: Vec<p4::Entity>) -> Result<Vec<p4::Entity>, P4rtError> {
        let request = p4::ReadRequest {
            device_id: self.device_id,
            entities,
            role: String::new(),
        };
        let mut stream = self
            .grpc
            .read(request)
            .await
            .map_err(rpc_error("Read"))?
            .into_inner();
        let mut out = Vec::new();
        while let Some(response) = stream.next().await {
            out.extend(response.map_err(rpc_error("Read"))?.entities);
        }
        Ok(out)
    }

    /// Sends a packet out through the switch (metadata by id, values as bytes).
    pub async fn packet_out(
        &mut self,
        payload: Vec<u8>,
        metadata: Vec<(u32, Vec<u8>)>,
    ) -> Result<(), P4rtError> {
        self.packet_sender().send(payload, metadata).await
    }

    /// A handle that sends packet-outs on this session's stream from another task; it
    /// fails with `StreamClosed` once the session is gone.
    pub fn packet_sender(&self) -> PacketSender {
        PacketSender(self.stream_tx.clone())
    }

    /// Next packet-in, waiting at most `limit`.
    pub async fn packet_in(&mut self, limit: Duration) -> Result<PacketIn, P4rtError> {
        match tokio::time::timeout(limit, self.packets.recv()).await {
            Ok(Some(p)) => Ok(p),
            Ok(None) => Err(P4rtError::StreamClosed),
            Err(_) => Err(P4rtError::Timeout("packet-in")),
        }
    }
}

/// Packet-outs on one session's stream channel (see [`Client::packet_sender`]).
#[derive(Clone)]
pub struct PacketSender(mpsc::Sender<p4::StreamMessageRequest>);

impl PacketSender {
    pub async fn send(
        &self,
        payload: Vec<u8>,
        metadata: Vec<(u32, Vec<u8>)>,
    ) -> Result<(), P4rtError> {
        let packet = p4::PacketOut {
            payload,
            metadata: metadata
                .into_iter()
                .map(|(metadata_id, value)| p4::PacketMetadata { metadata_id, value })
                .collect(),
        };
        self.0
            .send(p4::StreamMessageRequest {
                update: Some(p4::stream_message_request::Update::Packet(packet)),
            })
            .await
            .map_err(|_| P4rtError::StreamClosed)
    }
}

async fn read_stream(
    mut inbound: tonic::Streaming<p4::StreamMessageResponse>,
    arbitration: watch::Sender<Arbitration>,
    packets: mpsc::Sender<PacketIn>,
) {
    while let Some(message) = inbound.next().await {
        let message = match message {
            Ok(m) => m,
            Err(status) => {
                let error = RpcError::from_status(&status);
                tracing::warn!(%error, "P4Runtime stream ended");
                let _ = arbitration.send(Arbitration::Closed(error.to_string()));
                return;
            }
        };
        match incoming(message) {
            Incoming::Arbitration(state) => {
                let _ = arbitration.send(state);
            }
            Incoming::Packet(packet) => {
                if packets.try_send(packet).is_err() {
                    tracing::debug!("packet-in queue full or closed; dropping one");
                }
            }
            Incoming::Error { code, message } => {
                tracing::warn!(code, message = %message, "P4Runtime stream error");
            }
            Incoming::Nothing => {}
        }
    }
    let _ = arbitration.send(Arbitration::Closed("stream closed".into()));
}

/// One stream message from the switch, as the client acts on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    Arbitration(Arbitration),
    Packet(PacketIn),
    Error { code: i32, message: String },
    Nothing,
}

/// What a StreamMessageResponse means to the client (the stream reader's one decision).
pub fn incoming(message: p4::StreamMessageResponse) -> Incoming {
    use p4::stream_message_response::Update;
    match message.update {
        Some(Update::Arbitration(a)) => Incoming::Arbitration(match a.status {
            Some(s) if s.code != 0 => Arbitration::Backup(format!(
                "{:?}: {}",
                tonic::Code::from_i32(s.code),
                s.message
            )),
            _ => Arbitration::Primary,
        }),
        Some(Update::Packet(p)) => Incoming::Packet(PacketIn {
            payload: p.payload,
            metadata: p
                .metadata
                .into_iter()
                .map(|m| (m.metadata_id, m.value))
                .collect(),
        }),
        Some(Update::Error(e)) => Incoming::Error {
            code: e.canonical_code,
            message: e.message,
        },
        None => Incoming::Nothing,
    }
}

/// The WriteRequest for `updates` (exposed for tests and benchmarks).
pub fn write_request(
    device_id: u64,
    election_id: p4::Uint128,
    updates: Vec<p4::Update>,
) -> p4::WriteRequest {
    p4::WriteRequest {
        device_id,
        election_id: Some(election_id),
        updates,
        atomicity: p4::write_request::Atomicity::ContinueOnError as i32,
        role: String::new(),
    }
}

/// The SetForwardingPipelineConfigRequest (VERIFY_AND_COMMIT) for a program.
pub fn set_pipeline_request(
    device_id: u64,
    election_id: p4::Uint128,
    p4info: &P4Info,
    device_config: Vec<u8>,
    cookie: u64,
) -> p4::SetForwardingPipelineConfigRequest {
    p4::SetForwardingPipelineConfigRequest {
        device_id,
        election_id: Some(election_id),
        action: p4::set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
        config: Some(p4::ForwardingPipelineConfig {
            p4info: Some(p4info.info.clone()),
            p4_device_config: device_config,
            cookie: Some(p4::forwarding_pipeline_config::Cookie { cookie }),
        }),
        role: String::new(),
    }
}

impl P4rtError {
    /// The connection or stream is gone (as opposed to the target refusing an update).
    pub fn is_transport(&self) -> bool {
        match self {
            P4rtError::Rpc { error, .. } => matches!(
                error.code,
                tonic::Code::Unavailable | tonic::Code::Cancelled
            ),
            P4rtError::Connect { .. } | P4rtError::StreamClosed | P4rtError::Timeout(_) => true,
            _ => false,
        }
    }

    /// The target refused a write because this session is not the primary.
    pub fn is_not_primary(&self) -> bool {
        match self {
            P4rtError::Rpc { error, .. } => error.code == tonic::Code::PermissionDenied,
            P4rtError::NotPrimary { .. } => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_election_id_is_retried_other_errors_are_not() {
        let rpc = |op, code, message: &str| P4rtError::Rpc {
            op,
            error: RpcError {
                code,
                message: message.into(),
                updates: vec![],
            },
        };
        let taken = rpc(
            "StreamChannel",
            tonic::Code::InvalidArgument,
            "Election id already exists",
        );
        assert!(taken.is_election_id_taken());
        assert!(!rpc(
            "StreamChannel",
            tonic::Code::Unavailable,
            "connection refused"
        )
        .is_election_id_taken());
        assert!(!rpc(
            "Write",
            tonic::Code::InvalidArgument,
            "Election id already exists"
        )
        .is_election_id_taken());
        assert!(!P4rtError::StreamClosed.is_election_id_taken());
    }

    #[test]
    fn status_details_become_per_update_errors() {
        let ok = p4::Error {
            canonical_code: 0,
            ..Default::default()
        };
        let bad = p4::Error {
            canonical_code: tonic::Code::ResourceExhausted as i32,
            message: "group full".into(),
            ..Default::default()
        };
        let any = |e: &p4::Error| prost_types::Any {
            type_url: "type.googleapis.com/p4.v1.Error".into(),
            value: e.encode_to_vec(),
        };
        let details = rpc::Status {
            code: tonic::Code::Unknown as i32,
            message: "write failed".into(),
            details: vec![any(&ok), any(&bad)],
        };
        let status = tonic::Status::with_details(
            tonic::Code::Unknown,
            "write failed",
            details.encode_to_vec().into(),
        );
        let e = RpcError::from_status(&status);
        assert_eq!(
            e.updates,
            vec![UpdateError {
                index: 1,
                code: tonic::Code::ResourceExhausted,
                message: "group full".into()
            }]
        );
        assert_eq!(
            e.to_string(),
            "Unknown: write failed; update #1: ResourceExhausted: group full"
        );
    }

    #[test]
    fn garbage_details_do_not_panic() {
        let status =
            tonic::Status::with_details(tonic::Code::Internal, "x", vec![0xff, 0x01, 0x02].into());
        let e = RpcError::from_status(&status);
        assert!(e.updates.is_empty());
    }
}
