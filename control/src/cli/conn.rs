//! How a command reaches a running agent's management API: its unix socket (default), or
//! its TCP address with TLS. Global options: accepted before or after any subcommand.

use super::InputError;
use anyhow::Context;
use fare_agent::mgmt::client::{self, Client, ClientTls};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug, Clone)]
pub struct Conn {
    /// Management socket of the agent (`management.socket` in its configuration).
    #[arg(
        long,
        global = true,
        env = "FARE_SOCKET",
        default_value = "/run/fare/fare.sock"
    )]
    pub socket: PathBuf,
    /// Reach the agent on TCP instead, HOST:PORT (`management.address`); needs --tls-ca.
    #[arg(long, global = true, env = "FARE_ADDRESS")]
    pub address: Option<String>,
    /// With --address: this client's certificate (PEM), signed by the agent's
    /// `management.tls.client_ca`.
    #[arg(long, global = true, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// With --address: the private key of --tls-cert (PEM).
    #[arg(long, global = true, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With --address: the CA certificate (PEM) that signed the agent's certificate.
    #[arg(long, global = true)]
    pub tls_ca: Option<PathBuf>,
}

fn read(flag: &str, path: &Path) -> Result<Vec<u8>, InputError> {
    std::fs::read(path).map_err(|e| InputError(format!("{flag} {}: {e}", path.display())))
}

impl Conn {
    /// Connects as the options say; unreadable TLS files are input errors (exit 2).
    pub async fn connect(&self) -> anyhow::Result<Client> {
        let Some(address) = &self.address else {
            return Ok(client::connect(&self.socket).await?);
        };
        let ca = self
            .tls_ca
            .as_ref()
            .ok_or_else(|| InputError("--address needs --tls-ca (the API is TLS only)".into()))?;
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => Some((read("--tls-cert", c)?, read("--tls-key", k)?)),
            _ => None,
        };
        let tls = ClientTls {
            ca: read("--tls-ca", ca)?,
            identity,
        };
        client::connect_tcp(address, &tls)
            .await
            .with_context(|| format!("connecting to {address}"))
    }

    /// Runs `f` with a connected client on a one-thread runtime.
    pub fn run<T>(&self, f: impl AsyncFnOnce(Client) -> anyhow::Result<T>) -> anyhow::Result<T> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        runtime.block_on(async {
            let c = self.connect().await?;
            f(c).await
        })
    }
}

/// A refusal of the agent's that is the user's input (bad address, unknown neighbor)
/// exits 2; anything else is a runtime failure.
pub fn status_error(s: tonic::Status) -> anyhow::Error {
    match s.code() {
        tonic::Code::InvalidArgument | tonic::Code::NotFound => {
            InputError(s.message().to_string()).into()
        }
        _ => fare_agent::mgmt::MgmtError::Status(s).into(),
    }
}

/// JSON, pretty, with a final newline.
pub fn print_json(v: &serde_json::Value) -> anyhow::Result<()> {
    crate::outln!("{}", serde_json::to_string_pretty(v)?)?;
    Ok(())
}
