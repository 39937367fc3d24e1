//! The client's side of the management API on TCP: the TLS handshake is done here, not
//! inside tonic, so that an agent refusing this client's certificate is reported in one
//! line ("the server refused this client's certificate: unknown issuer") rather than as a
//! transport error of the first request.
//!
//! With TLS 1.3 the client's handshake ends before the server has checked the client's
//! certificate: the server's verdict is its first record, an alert (refused) or data (the
//! HTTP/2 settings the server sends first). [`connect`] waits for that record and hands
//! the data on with the stream.

use super::MgmtError;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{self, AlertDescription, RootCertStore};

/// Connecting, handshake and the server's first record each get this long.
const TIMEOUT: Duration = Duration::from_secs(10);

/// PEM contents for a TLS connection to `management.address`.
#[derive(Clone, Debug, Default)]
pub struct ClientTls {
    /// CA that signed the agent's certificate.
    pub ca: Vec<u8>,
    /// Our certificate chain and key (the agent refuses clients without one).
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

fn tls_error(e: impl std::fmt::Display) -> MgmtError {
    MgmtError::Tls(e.to_string())
}

fn pem_certs(what: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, MgmtError> {
    use rustls::pki_types::pem::PemObject;
    let list = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_error(format!("{what}: {e}")))?;
    if list.is_empty() {
        return Err(tls_error(format!("{what}: no PEM certificate")));
    }
    Ok(list)
}

/// The rustls client configuration: the agent verified against `tls.ca`, our identity.
pub fn client_config(tls: &ClientTls) -> Result<rustls::ClientConfig, MgmtError> {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for c in pem_certs("the CA certificate", &tls.ca)? {
        roots
            .add(c)
            .map_err(|e| tls_error(format!("the CA certificate: {e}")))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_root_certificates(roots);
    let mut config = match &tls.identity {
        Some((cert, key)) => {
            let chain = pem_certs("the client certificate", cert)?;
            if x509_version(&chain[0]) == Some(1) {
                return Err(tls_error(
                    "the client certificate is X.509 version 1; the agent accepts version 3 \
                     only (sign it with extensions, e.g. `openssl x509 -req ... -extfile`)",
                ));
            }
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| tls_error(format!("the client key: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| tls_error(format!("the client certificate and key: {e}")))?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The version (1, 2 or 3) of a DER X.509 certificate; `None` when it does not parse.
pub fn x509_version(der: &[u8]) -> Option<u8> {
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] EXPLICIT Version OPTIONAL, ..
    let tbs = der_inner(der, 0x30)?;
    let fields = der_inner(tbs, 0x30)?;
    if fields.first() != Some(&0xa0) {
        return Some(1);
    }
    let version = der_inner(der_inner(fields, 0xa0)?, 0x02)?;
    match version {
        [v @ 0..=2] => Some(v + 1),
        _ => None,
    }
}

/// The contents of the DER element at the start of `der`, when its tag is `tag`.
fn der_inner(der: &[u8], tag: u8) -> Option<&[u8]> {
    let (&t, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    if t != tag {
        return None;
    }
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |a, &b| (a << 8) | usize::from(b));
        (len, &rest[n..])
    };
    rest.get(..len)
}

/// What an alert from the agent means for this client, in one line.
fn refusal(alert: AlertDescription, with_identity: bool) -> String {
    let why = match alert {
        AlertDescription::UnknownCA => "unknown issuer",
        AlertDescription::CertificateExpired => "expired or not yet valid",
        AlertDescription::CertificateRevoked => "revoked",
        AlertDescription::BadCertificate => "bad certificate",
        AlertDescription::UnsupportedCertificate => "not for client authentication",
        AlertDescription::CertificateUnknown => {
            "not accepted (the agent's log says why; an X.509 v1 certificate, say)"
        }
        AlertDescription::CertificateRequired => {
            return "the server refused this client: it requires a client certificate \
                    (--tls-cert and --tls-key)"
                .into()
        }
        other => return format!("the server refused this client: TLS alert {other:?}"),
    };
    if with_identity {
        format!("the server refused this client's certificate: {why}")
    } else {
        format!("the server refused this client: {why}")
    }
}

/// An error of the handshake or of the first read, in one line.
fn failure(e: &io::Error, with_identity: bool) -> MgmtError {
    let rustls_error = e.get_ref().and_then(|r| r.downcast_ref::<rustls::Error>());
    match rustls_error {
        Some(rustls::Error::AlertReceived(alert)) => {
            MgmtError::Refused(refusal(*alert, with_identity))
        }
        Some(rustls::Error::InvalidCertificate(c)) => {
            let why = match c {
                rustls::CertificateError::UnknownIssuer => {
                    "unknown issuer (not signed by --tls-ca)".to_string()
                }
                other => format!("{other:?}"),
            };
            MgmtError::Refused(format!("the agent's certificate is not accepted: {why}"))
        }
        Some(other) => tls_error(other),
        None if matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::UnexpectedEof
        ) =>
        {
            MgmtError::Refused(
                "the server closed the connection during the TLS handshake (does it serve \
                 TLS? does it accept this client?)"
                    .into(),
            )
        }
        None => tls_error(e),
    }
}

/// Connects to `address` (`HOST:PORT`), completes the TLS handshake and waits for the
/// agent's first record: an agent that refuses this client fails here, in one line.
pub async fn connect(
    address: &str,
    config: Arc<rustls::ClientConfig>,
) -> Result<Checked, MgmtError> {
    let host = address
        .rsplit_once(':')
        .map_or(address, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name =
        ServerName::try_from(host.to_string()).map_err(|e| tls_error(format!("{host}: {e}")))?;
    let with_identity = config.client_auth_cert_resolver.has_certs();
    let timed_out = |what: &str| tls_error(format!("{what} timed out after {TIMEOUT:?}"));
    let tcp = tokio::time::timeout(TIMEOUT, TcpStream::connect(address))
        .await
        .map_err(|_| timed_out("connecting"))?
        .map_err(|e| tls_error(format!("connecting: {e}")))?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let mut stream = tokio::time::timeout(TIMEOUT, connector.connect(name, tcp))
        .await
        .map_err(|_| timed_out("the TLS handshake"))?
        .map_err(|e| failure(&e, with_identity))?;
    let mut first = vec![0u8; 16 * 1024];
    let n = tokio::time::timeout(TIMEOUT, stream.read(&mut first))
        .await
        .map_err(|_| timed_out("waiting for the agent"))?
        .map_err(|e| failure(&e, with_identity))?;
    if n == 0 {
        return Err(failure(
            &io::Error::from(io::ErrorKind::UnexpectedEof),
            with_identity,
        ));
    }
    first.truncate(n);
    Ok(Checked {
        first,
        at: 0,
        inner: stream,
    })
}

/// A TLS stream whose first bytes were read by [`connect`]: they are read again first.
pub struct Checked {
    first: Vec<u8>,
    at: usize,
    inner: TlsStream<TcpStream>,
}

impl AsyncRead for Checked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.first.len() {
            let n = buf.remaining().min(this.first.len() - this.at);
            buf.put_slice(&this.first[this.at..this.at + n]);
            this.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Checked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-built DER: a v3 certificate has `[0] { INTEGER 2 }` first in its
    /// tbsCertificate; a v1 certificate starts with the serial number.
    #[test]
    fn version_of_v1_and_v3_certificates() {
        // SEQUENCE { SEQUENCE { [0] { INTEGER 2 }, INTEGER 1 } }
        let v3 = [
            0x30, 0x0a, 0x30, 0x08, 0xa0, 0x03, 0x02, 0x01, 0x02, 0x02, 0x01, 0x01,
        ];
        assert_eq!(x509_version(&v3), Some(3));
        // SEQUENCE { SEQUENCE { INTEGER 1 } }
        let v1 = [0x30, 0x05, 0x30, 0x03, 0x02, 0x01, 0x01];
        assert_eq!(x509_version(&v1), Some(1));
        // Long-form length (0x81 0x05).
        let long = [0x30, 0x81, 0x05, 0x30, 0x03, 0x02, 0x01, 0x01];
        assert_eq!(x509_version(&long), Some(1));
        assert_eq!(x509_version(&[0x04, 0x00]), None);
        assert_eq!(x509_version(&[0x30, 0x05, 0x30]), None);
    }

    #[test]
    fn refusals_in_one_line() {
        assert_eq!(
            refusal(AlertDescription::UnknownCA, true),
            "the server refused this client's certificate: unknown issuer"
        );
        assert!(refusal(AlertDescription::CertificateRequired, false).contains("--tls-cert"));
    }
}
