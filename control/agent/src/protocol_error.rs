//! Why a protocol task (BGP, ARN) stopped the agent: the tasks return it, `protocols`
//! starts them and the agent's main loop reports it. Its own module so that the tasks
//! depend on it and not on the module that starts them.

/// What a protocol task returns: `Err` is logged and stops the agent (exit code 1).
pub type ProtocolResult = Result<(), ProtocolError>;

/// Why a protocol task stopped the agent.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("BGP listener on port {port}: {source}")]
    BgpListener {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("speaker stopped")]
    SpeakerStopped,
    #[error(transparent)]
    ArnSocket(#[from] fare_arn::transport::TransportError),
    #[error("ARN multicast: {0}")]
    ArnMulticast(#[source] std::io::Error),
    #[error("ARN monitor: the XDP program's queues: {0:#}")]
    ArnQueues(#[source] anyhow::Error),
    #[error("ARN monitor: {0}")]
    ArnMonitor(#[source] std::io::Error),
}
