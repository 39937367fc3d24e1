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
