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

pub use super::tls_client::ClientTls;

/// Connects to an agent serving the API on TCP (`HOST:PORT`) with TLS. A refusal of
/// this client's certificate is an error here, before any request.
pub async fn connect_tcp(address: &str, tls: &ClientTls) -> Result<Client, MgmtError> {
    use super::tls_client;
    let config = std::sync::Arc::new(tls_client::client_config(tls)?);
    // The first connection is checked here; a reconnection made later by the channel
    // goes through the same steps.
    let first = tls_client::connect(address, config.clone()).await?;
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(first)));
    let address = address.to_string();
    let channel = Endpoint::from_static("http://fare.agent")
        .connect_with_connector(tower::service_fn(move |_| {
            let (slot, address, config) = (slot.clone(), address.clone(), config.clone());
            async move {
                let taken = slot.lock().ok().and_then(|mut s| s.take());
                let stream = match taken {
                    Some(s) => s,
                    None => tls_client::connect(&address, config)
                        .await
                        .map_err(std::io::Error::other)?,
                };
                Ok::<_, std::io::Error>(TokioIo::new(stream))
            }
        }))
        .await?;
    Ok(ManagementClient::new(channel))
}
