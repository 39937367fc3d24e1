//! The `fare show` side of the management API: a tonic channel over the unix socket.

use super::{pb, MgmtError};
use hyper_util::rt::TokioIo;
use pb::management_client::ManagementClient;
use std::path::{Path, PathBuf};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

pub type Client = ManagementClient<Channel>;

/// Connects to the agent serving `path`. A missing socket or a refused connection
/// says "is the agent running?".
pub async fn connect(path: &Path) -> Result<Client, MgmtError> {
    if !path.exists() {
        return Err(MgmtError::NoSocket(path.to_path_buf()));
    }
    // Fail early with a clear error instead of tonic's generic transport error.
    UnixStream::connect(path)
        .await
        .map_err(|source| MgmtError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
    let socket: PathBuf = path.to_path_buf();
    // The URI is required by tonic but unused: the connector below dials the socket.
    let channel = Endpoint::from_static("http://fare.agent")
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await?;
    Ok(ManagementClient::new(channel))
}

/// PEM contents for a TLS connection to `management.address`.
#[derive(Clone, Debug, Default)]
pub struct ClientTls {
    /// CA that signed the agent's certificate.
    pub ca: Vec<u8>,
    /// Our certificate chain and key (the agent refuses clients without one).
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// Connects to an agent serving the API on TCP (`HOST:PORT`) with TLS.
pub async fn connect_tcp(address: &str, tls: &ClientTls) -> Result<Client, MgmtError> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&tls.ca));
    if let Some((cert, key)) = &tls.identity {
        config = config.identity(Identity::from_pem(cert, key));
    }
    let channel = Endpoint::from_shared(format!("https://{address}"))?
        .tls_config(config)?
        .connect_timeout(std::time::Duration::from_secs(10))
        .connect()
        .await?;
    Ok(ManagementClient::new(channel))
}
