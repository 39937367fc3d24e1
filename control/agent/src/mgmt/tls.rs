//! The management API on TCP: TLS with a required client certificate signed by the
//! configured CA (`management.tls`). The handshake is done here rather than inside tonic
//! so that every refused client (no certificate, another CA, not TLS) is logged.

use super::MgmtError;
use crate::config::ManagementTls;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// A client gets this long to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn pem_error(path: &Path, e: impl std::fmt::Display) -> MgmtError {
    MgmtError::Tls(format!("{}: {e}", path.display()))
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, MgmtError> {
    let list = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if list.is_empty() {
        return Err(pem_error(path, "no PEM certificate"));
    }
    Ok(list)
}

/// The rustls server configuration: our chain and key, clients verified against the CA.
pub fn server_config(tls: &ManagementTls) -> Result<rustls::ServerConfig, MgmtError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for c in certs(&tls.client_ca)? {
        roots.add(c).map_err(|e| pem_error(&tls.client_ca, e))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| pem_error(&tls.client_ca, e))?;
    let chain = certs(&tls.cert)?;
    if super::tls_client::x509_version(&chain[0]) == Some(1) {
        return Err(pem_error(
            &tls.cert,
            "an X.509 version 1 certificate: clients accept version 3 only",
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&tls.key).map_err(|e| pem_error(&tls.key, e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| MgmtError::Tls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| pem_error(&tls.cert, e))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// Binds `addr` and yields the connections whose handshake succeeded; refusals are
/// logged with the client's address and the reason.
pub async fn incoming(
    addr: SocketAddr,
    tls: &ManagementTls,
    stop: CancellationToken,
) -> Result<tokio::sync::mpsc::Receiver<std::io::Result<TlsStream<TcpStream>>>, MgmtError> {
    let acceptor = TlsAcceptor::from(Arc::new(server_config(tls)?));
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| MgmtError::Io {
            what: "binding",
            path: addr.to_string().into(),
            source,
        })?;
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let (stream, peer) = tokio::select! {
                a = listener.accept() => match a {
                    Ok(a) => a,
                    Err(e) => {
                        warn!("management API: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = stop.cancelled() => return,
            };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => {
                        info!(%peer, "management API: TLS client accepted");
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => {
                        warn!(%peer, reason = %refusal(&e), "management API: client refused")
                    }
                    Err(_) => {
                        warn!(%peer, reason = "handshake timed out", "management API: client refused")
                    }
                }
            });
        }
    });
    Ok(rx)
}

/// Why a client's handshake failed, for the log: rustls's words, except for an X.509
/// version 1 certificate (openssl's `x509 -req` without extensions), which rustls reports
/// as an unnamed error.
fn refusal(e: &std::io::Error) -> String {
    use rustls::{CertificateError, Error};
    match e.get_ref().and_then(|r| r.downcast_ref::<Error>()) {
        Some(Error::InvalidCertificate(CertificateError::Other(o)))
            if format!("{o:?}").contains("UnsupportedCertVersion") =>
        {
            "an X.509 version 1 client certificate: only version 3 is accepted".into()
        }
        _ => e.to_string(),
    }
}
