//! `management:`: the API's Unix socket, TCP with TLS and client certificates, metrics.

use super::*;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Management {
    /// Unix socket of the gRPC management API (`fare show --socket PATH`).
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    /// Opt-in Prometheus metrics listener, e.g. `127.0.0.1:9100`.
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
    /// Also serve the management API on this TCP address (requires `tls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
    /// TLS of the TCP listener: clients must present a certificate signed by `client_ca`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ManagementTls>,
}

/// PEM files of the management API's TLS listener.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ManagementTls {
    /// The server's certificate chain.
    pub cert: PathBuf,
    /// The server's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates that sign the clients' certificates (a client certificate is required).
    pub client_ca: PathBuf,
}

pub(super) fn default_socket() -> PathBuf {
    PathBuf::from("/run/fare/fare.sock")
}

impl Default for Management {
    fn default() -> Self {
        Management {
            socket: default_socket(),
            metrics: None,
            address: None,
            tls: None,
        }
    }
}

impl AgentConfig {
    /// TCP only with TLS and client certificates; the PEM files must be readable.
    pub(super) fn validate_management(&self, path: &Path, text: &str) -> Result<(), FileError> {
        let m = &self.management;
        let at = |needle: &str, problem: String| {
            FileError::new(path, yamlfile::find_line(text, needle, 1), problem)
        };
        match (&m.address, &m.tls) {
            (Some(_), None) => Err(at(
                "address",
                "management.address needs management.tls (the API is served on TCP only with \
                 TLS and client certificates)"
                    .into(),
            )),
            (None, Some(_)) => Err(at("tls", "management.tls needs management.address".into())),
            (Some(_), Some(tls)) => {
                for (key, file) in [
                    ("cert", &tls.cert),
                    ("key", &tls.key),
                    ("client_ca", &tls.client_ca),
                ] {
                    if let Err(e) = std::fs::metadata(file) {
                        return Err(at(
                            key,
                            format!("management.tls.{key}: {}: {e}", file.display()),
                        ));
                    }
                }
                Ok(())
            }
            (None, None) => Ok(()),
        }
    }

    pub(crate) fn validate(&self, path: &Path, text: &str) -> Result<(), FileError> {
        let at = |needle: &str, problem: String| {
            FileError::new(path, yamlfile::find_line(text, needle, 1), problem)
        };
        self.check_speaker_rules(path, text)?;
        if let Some(filter) = &self.log {
            if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(filter) {
                return Err(at(
                    "log:",
                    format!("log: `{filter}` is not a log filter: {e}"),
                ));
            }
        }
        if let DataplaneConfig::Xdp { queues, .. } = &self.dataplane {
            for q in queues {
                if !(q.rate_mbps.is_finite() && q.rate_mbps > 0.0) {
                    return Err(at(
                        &q.interface,
                        format!(
                            "dataplane.queues: {}: rate_mbps must be a positive number of Mbit/s",
                            q.interface
                        ),
                    ));
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for group in &self.static_groups {
            let p = group.prefix.to_string();
            if !seen.insert(group.prefix) {
                return Err(at(&p, format!("static group {p} is given twice")));
            }
            if group.members.is_empty() {
                return Err(at(&p, format!("static group {p}: no members")));
            }
            if let Some(m) = group.members.iter().find(|m| m.interface.is_empty()) {
                return Err(at(
                    &p,
                    format!(
                        "static group {p}: member {} has no interface",
                        m.neighbor_mac
                    ),
                ));
            }
            if let Some(m) = group.members.iter().find(|m| m.weight == 0) {
                // Point at the member's own line when it can be found after the prefix.
                let start = yamlfile::find_line(text, &p, 1).unwrap_or(1);
                let line = yamlfile::find_line(text, &m.neighbor_mac.to_string(), start)
                    .or_else(|| yamlfile::find_line(text, &p, 1));
                return Err(FileError::new(
                    path,
                    line,
                    format!("static group {p}: member on {} has weight 0", m.interface),
                ));
            }
        }
        self.validate_dpf(path, text)?;
        self.validate_sai(path, text)?;
        self.validate_flowlets(path, text)?;
        if let Some(arn) = &self.arn {
            if let Err((needle, problem)) = arn.check() {
                return Err(at(&needle, format!("arn: {problem}")));
            }
        }
        Ok(())
    }
}
