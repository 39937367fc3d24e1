//! A P4Runtime target in memory, for the backend's unit tests: arbitration among several
//! controllers (the highest election id is primary, every change of primary announced on
//! each stream), Write with the checks a real target makes on references, Read, pipeline
//! config with a cookie, a group size limit it does not state in the P4Info
//! (RESOURCE_EXHAUSTED), and a restart that loses everything.
//!
//! The updates of one Write are applied in REVERSE order: the P4Runtime specification lets
//! a target apply them in any order, so a client that puts an entity and what it
//! references in one batch fails here, as it may on a real switch.

use crate::proto::google::rpc;
use crate::proto::p4::v1 as p4;
use crate::proto::p4::v1::p4_runtime_server::{P4Runtime, P4RuntimeServer};
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

type Responses = mpsc::Sender<Result<p4::StreamMessageResponse, Status>>;

struct Connection {
    id: u64,
    election_id: u64,
    tx: Responses,
}

/// What the fake target holds.
#[derive(Default)]
pub struct State {
    connections: Vec<Connection>,
    next_connection: u64,
    pub pipeline: Option<(p4::ForwardingPipelineConfig, u64)>,
    pub members: BTreeMap<u32, p4::ActionProfileMember>,
    pub groups: BTreeMap<u32, p4::ActionProfileGroup>,
    /// (table id, encoded match + priority) -> entry.
    pub tables: BTreeMap<(u32, Vec<u8>), p4::TableEntry>,
    pub clone_sessions: BTreeSet<u32>,
    /// Largest sum of weights of a group; not in the P4Info.
    pub max_group_size: Option<i32>,
    /// Down: every RPC answers UNAVAILABLE.
    pub down: bool,
    /// Updates per Write, in order.
    pub batches: Vec<usize>,
    pub pipeline_pushes: usize,
}

impl State {
    fn primary(&self) -> Option<u64> {
        self.connections.iter().map(|c| c.election_id).max()
    }

    /// Tells every controller who is primary (or only `only`).
    fn announce(&self, only: Option<u64>) {
        let primary = self.primary().unwrap_or(0);
        for c in &self.connections {
            if only.is_some_and(|id| id != c.id) {
                continue;
            }
            let (code, message) = if c.election_id == primary {
                (0, "Is primary")
            } else {
                (tonic::Code::AlreadyExists as i32, "Is backup")
            };
            let _ = c.tx.try_send(Ok(p4::StreamMessageResponse {
                update: Some(p4::stream_message_response::Update::Arbitration(
                    p4::MasterArbitrationUpdate {
                        device_id: 1,
                        role: None,
                        election_id: Some(p4::Uint128 {
                            high: 0,
                            low: primary,
                        }),
                        status: Some(rpc::Status {
                            code,
                            message: message.into(),
                            details: vec![],
                        }),
                    },
                )),
            }));
        }
    }

    fn clear(&mut self) {
        self.members.clear();
        self.groups.clear();
        self.tables.clear();
        self.clone_sessions.clear();
    }

    fn apply(&mut self, u: &p4::Update) -> Result<(), (tonic::Code, String)> {
        use p4::entity::Entity as E;
        use p4::update::Type as T;
        use tonic::Code as C;
        let kind = T::try_from(u.r#type).unwrap_or(T::Unspecified);
        let entity = u.entity.as_ref().and_then(|e| e.entity.as_ref());
        match entity {
            Some(E::ActionProfileMember(m)) => match kind {
                T::Insert if self.members.contains_key(&m.member_id) => {
                    Err((C::AlreadyExists, format!("member {}", m.member_id)))
                }
                T::Insert => {
                    self.members.insert(m.member_id, m.clone());
                    Ok(())
                }
                T::Delete if !self.members.contains_key(&m.member_id) => {
                    Err((C::NotFound, format!("member {}", m.member_id)))
                }
                T::Delete
                    if self
                        .groups
                        .values()
                        .any(|g| g.members.iter().any(|x| x.member_id == m.member_id)) =>
                {
                    Err((
                        C::FailedPrecondition,
                        format!("member {} is in a group", m.member_id),
                    ))
                }
                T::Delete => {
                    self.members.remove(&m.member_id);
                    Ok(())
                }
                _ => Err((C::Unimplemented, "member modify".into())),
            },
            Some(E::ActionProfileGroup(g)) => match kind {
                T::Insert if self.groups.contains_key(&g.group_id) => {
                    Err((C::AlreadyExists, format!("group {}", g.group_id)))
                }
                T::Insert => {
                    if let Some(m) = g
                        .members
                        .iter()
                        .find(|m| !self.members.contains_key(&m.member_id))
                    {
                        return Err((C::NotFound, format!("member {} not found", m.member_id)));
                    }
                    let sum: i32 = g.members.iter().map(|m| m.weight).sum();
                    if self.max_group_size.is_some_and(|l| sum > l) {
                        return Err((
                            C::ResourceExhausted,
                            "Sum of member weights exceeds maximum group size".into(),
                        ));
                    }
                    self.groups.insert(g.group_id, g.clone());
                    Ok(())
                }
                T::Delete if !self.groups.contains_key(&g.group_id) => {
                    Err((C::NotFound, format!("group {}", g.group_id)))
                }
                T::Delete
                    if self
                        .tables
                        .values()
                        .any(|t| points_at(t) == Some(g.group_id)) =>
                {
                    Err((
                        C::FailedPrecondition,
                        format!("group {} is used by a table entry", g.group_id),
                    ))
                }
                T::Delete => {
                    self.groups.remove(&g.group_id);
                    Ok(())
                }
                _ => Err((C::Unimplemented, "group modify".into())),
            },
            Some(E::TableEntry(t)) => {
                let key = (t.table_id, table_key(t));
                if matches!(kind, T::Insert | T::Modify) {
                    if let Some(g) = points_at(t) {
                        if !self.groups.contains_key(&g) {
                            return Err((C::NotFound, format!("group {g} not found")));
                        }
                    }
                }
                match kind {
                    T::Insert if self.tables.contains_key(&key) => {
                        Err((C::AlreadyExists, "entry exists".into()))
                    }
                    T::Modify | T::Delete if !self.tables.contains_key(&key) => {
                        Err((C::NotFound, "no such entry".into()))
                    }
                    T::Insert | T::Modify => {
                        self.tables.insert(key, t.clone());
                        Ok(())
                    }
                    T::Delete => {
                        self.tables.remove(&key);
                        Ok(())
                    }
                    T::Unspecified => Err((C::InvalidArgument, "no update type".into())),
                }
            }
            Some(E::PacketReplicationEngineEntry(p)) => {
                use p4::packet_replication_engine_entry::Type as P;
                let Some(P::CloneSessionEntry(c)) = &p.r#type else {
                    return Err((C::Unimplemented, "multicast".into()));
                };
                // Like BMv2: a port listed twice makes the whole session invalid.
                let mut replicas: Vec<(&Option<p4::replica::PortKind>, u32)> = Vec::new();
                let unique = c.replicas.iter().all(|r| {
                    let key = (&r.port_kind, r.instance);
                    let fresh = !replicas.contains(&key);
                    replicas.push(key);
                    fresh
                });
                if !unique {
                    return Err((
                        C::InvalidArgument,
                        "duplicate replica in clone session".into(),
                    ));
                }
                match kind {
                    T::Insert if !self.clone_sessions.insert(c.session_id) => {
                        Err((C::AlreadyExists, "clone session".into()))
                    }
                    _ => Ok(()),
                }
            }
            Some(_) => Ok(()), // counters, registers: accepted, not kept
            None => Err((C::InvalidArgument, "empty update".into())),
        }
    }
}

fn table_key(t: &p4::TableEntry) -> Vec<u8> {
    let mut k = Vec::new();
    for m in &t.r#match {
        m.encode(&mut k).ok();
    }
    k.extend_from_slice(&t.priority.to_be_bytes());
    k
}

fn points_at(t: &p4::TableEntry) -> Option<u32> {
    match t.action.as_ref().and_then(|a| a.r#type.as_ref()) {
        Some(p4::table_action::Type::ActionProfileGroupId(g)) => Some(*g),
        _ => None,
    }
}

/// A running fake target.
#[derive(Clone)]
pub struct FakeTarget {
    pub state: Arc<Mutex<State>>,
    pub address: String,
}

impl FakeTarget {
    /// Serves on 127.0.0.1 (a free port) until the test's runtime ends.
    pub async fn start() -> FakeTarget {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let state = Arc::new(Mutex::new(State::default()));
        let svc = Service {
            state: state.clone(),
        };
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(P4RuntimeServer::new(svc))
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        FakeTarget { state, address }
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Like a killed switch: streams end, every call fails until [`Self::restart`].
    pub fn kill(&self) {
        let mut s = self.lock();
        s.down = true;
        for c in &s.connections {
            let _ = c.tx.try_send(Err(Status::unavailable("target killed")));
        }
        s.connections.clear();
    }

    /// Up again with nothing: no pipeline, no entries.
    pub fn restart(&self) {
        let mut s = self.lock();
        s.down = false;
        s.pipeline = None;
        s.clear();
    }
}

struct Service {
    state: Arc<Mutex<State>>,
}

impl Service {
    fn lock(&self) -> Result<MutexGuard<'_, State>, Status> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.down {
            return Err(Status::unavailable("target down"));
        }
        Ok(s)
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl P4Runtime for Service {
    async fn write(
        &self,
        request: Request<p4::WriteRequest>,
    ) -> Result<Response<p4::WriteResponse>, Status> {
        let r = request.into_inner();
        let mut s = self.lock()?;
        let election = r.election_id.map_or(0, |e| e.low);
        if s.primary() != Some(election) {
            return Err(Status::permission_denied("Not primary"));
        }
        s.batches.push(r.updates.len());
        let mut errors = vec![None; r.updates.len()];
        for (i, u) in r.updates.iter().enumerate().rev() {
            if let Err(e) = s.apply(u) {
                errors[i] = Some(e);
            }
        }
        if errors.iter().all(Option::is_none) {
            return Ok(Response::new(p4::WriteResponse {}));
        }
        let details = errors
            .iter()
            .map(|e| {
                let (code, message) = e.clone().unwrap_or((tonic::Code::Ok, String::new()));
                prost_types::Any {
                    type_url: "type.googleapis.com/p4.v1.Error".into(),
                    value: p4::Error {
                        canonical_code: code as i32,
                        message,
                        ..Default::default()
                    }
                    .encode_to_vec(),
                }
            })
            .collect();
        let status = rpc::Status {
            code: tonic::Code::Unknown as i32,
            message: "Write failure.".into(),
            details,
        };
        Err(Status::with_details(
            tonic::Code::Unknown,
            "Write failure.",
            status.encode_to_vec().into(),
        ))
    }

    type ReadStream = BoxStream<p4::ReadResponse>;

    async fn read(
        &self,
        request: Request<p4::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        use p4::entity::Entity as E;
        let r = request.into_inner();
        let s = self.lock()?;
        let mut out = Vec::new();
        for e in r.entities {
            match e.entity {
                Some(E::TableEntry(t)) => out.extend(
                    s.tables
                        .values()
                        .filter(|x| t.table_id == 0 || x.table_id == t.table_id)
                        .map(|x| p4::Entity {
                            entity: Some(E::TableEntry(x.clone())),
                        }),
                ),
                Some(E::ActionProfileMember(_)) => {
                    out.extend(s.members.values().map(|m| p4::Entity {
                        entity: Some(E::ActionProfileMember(m.clone())),
                    }))
                }
                Some(E::ActionProfileGroup(_)) => {
                    out.extend(s.groups.values().map(|g| p4::Entity {
                        entity: Some(E::ActionProfileGroup(g.clone())),
                    }))
                }
                _ => {}
            }
        }
        let stream = tokio_stream::once(Ok(p4::ReadResponse { entities: out }));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<p4::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::SetForwardingPipelineConfigResponse>, Status> {
        let r = request.into_inner();
        let mut s = self.lock()?;
        let config = r
            .config
            .ok_or_else(|| Status::invalid_argument("no config"))?;
        let cookie = config.cookie.map_or(0, |c| c.cookie);
        s.clear();
        s.pipeline = Some((config, cookie));
        s.pipeline_pushes += 1;
        Ok(Response::new(p4::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        _request: Request<p4::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::GetForwardingPipelineConfigResponse>, Status> {
        let s = self.lock()?;
        match &s.pipeline {
            None => Err(Status::failed_precondition("No forwarding pipeline config")),
            Some((config, _)) => Ok(Response::new(p4::GetForwardingPipelineConfigResponse {
                config: Some(config.clone()),
            })),
        }
    }

    type StreamChannelStream = BoxStream<p4::StreamMessageResponse>;

    async fn stream_channel(
        &self,
        request: Request<tonic::Streaming<p4::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        drop(self.lock()?);
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let state = self.state.clone();
        tokio::spawn(async move {
            let mut me: Option<u64> = None;
            while let Some(Ok(m)) = inbound.next().await {
                let Some(p4::stream_message_request::Update::Arbitration(a)) = m.update else {
                    continue;
                };
                let election_id = a.election_id.map_or(0, |e| e.low);
                let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
                if me.is_some() {
                    continue;
                }
                if s.connections.iter().any(|c| c.election_id == election_id) {
                    let _ =
                        tx.try_send(Err(Status::invalid_argument("Election id already exists")));
                    return;
                }
                let id = s.next_connection;
                s.next_connection += 1;
                let was = s.primary();
                s.connections.push(Connection {
                    id,
                    election_id,
                    tx: tx.clone(),
                });
                me = Some(id);
                if s.primary() != was {
                    s.announce(None);
                } else {
                    s.announce(Some(id));
                }
            }
            // The controller left: if it was primary, the next one is told.
            if let Some(id) = me {
                let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
                let was = s.primary();
                s.connections.retain(|c| c.id != id);
                if s.primary() != was {
                    s.announce(None);
                }
            }
        });
        let stream = ReceiverStream::new(rx);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn capabilities(
        &self,
        _request: Request<p4::CapabilitiesRequest>,
    ) -> Result<Response<p4::CapabilitiesResponse>, Status> {
        Ok(Response::new(p4::CapabilitiesResponse {
            p4runtime_api_version: "1.3.0".into(),
        }))
    }
}
