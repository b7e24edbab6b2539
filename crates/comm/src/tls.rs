//! TLS with rustls (ring provider), as Fabric's `comm.SecureOptions` offers it: server TLS with optional or
//! required client certificates for gRPC listeners (through tonic) and HTTP listeners (through tokio-rustls), and
//! the YAML settings of listeners ([`TlsConfig`], Fabric's `localconfig.TLS`) and of outgoing connections
//! ([`ClientTlsConfig`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::CommError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

/// TLS settings of one listener (Fabric `localconfig.TLS`, `peer.tls`). Paths are PEM files; keys are Fabric's
/// PascalCase (`Enabled`, `PrivateKey`, `Certificate`, `RootCAs`, `ClientAuthRequired`, `ClientRootCAs`), a `null`
/// list reads as empty.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct TlsConfig {
    /// Whether the listener speaks TLS.
    pub enabled: bool,
    /// The server's private key (PKCS#8 or SEC1 PEM).
    pub private_key: Option<PathBuf>,
    /// The server's certificate (PEM).
    pub certificate: Option<PathBuf>,
    /// CA certificates a client uses to check this server (kept for cluster use; a server does not need them).
    #[serde(rename = "RootCAs", deserialize_with = "nullable_vec")]
    pub root_cas: Vec<PathBuf>,
    /// Require a client certificate signed by one of [`TlsConfig::client_root_cas`].
    pub client_auth_required: bool,
    /// CA certificates accepted for client certificates.
    #[serde(rename = "ClientRootCAs", deserialize_with = "nullable_vec")]
    pub client_root_cas: Vec<PathBuf>,
}

impl TlsConfig {
    /// Makes every relative path absolute under `base` (configuration files resolve paths against their own
    /// directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        for p in [&mut self.private_key, &mut self.certificate].into_iter().flatten() {
            resolve(p, base);
        }
        for p in self.root_cas.iter_mut().chain(self.client_root_cas.iter_mut()) {
            resolve(p, base);
        }
    }
}

/// TLS of an outgoing connection (to the orderers, or to a committer), in configuration files.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct ClientTlsConfig {
    /// Whether to speak TLS.
    pub enabled: bool,
    /// PEM files of the CAs that sign the servers' certificates.
    #[serde(rename = "RootCAs", deserialize_with = "nullable_vec")]
    pub root_cas: Vec<PathBuf>,
    /// Host name to check the server certificate against instead of the address's host (Fabric's
    /// `ssl-target-name-override`).
    pub server_name_override: Option<String>,
    /// Client certificate PEM for mutual TLS.
    pub client_certificate: Option<PathBuf>,
    /// Its private key PEM.
    pub client_key: Option<PathBuf>,
}

impl ClientTlsConfig {
    /// Makes every relative path absolute under `base`.
    pub fn resolve_paths(&mut self, base: &Path) {
        self.root_cas.iter_mut().for_each(|p| resolve(p, base));
        for p in [&mut self.client_certificate, &mut self.client_key].into_iter().flatten() {
            resolve(p, base);
        }
    }
}

fn resolve(p: &mut PathBuf, base: &Path) {
    if p.is_relative() {
        *p = base.join(&*p);
    }
}

fn nullable_vec<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
    Ok(Option::<Vec<PathBuf>>::deserialize(d)?.unwrap_or_default())
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, CommError> {
    std::fs::read(path).map_err(|source| CommError::ReadTls { what: what.to_owned(), path: path.to_owned(), source })
}

fn required<'a>(p: &'a Option<PathBuf>, what: &'static str) -> Result<&'a Path, CommError> {
    p.as_deref().ok_or(CommError::TlsFileMissing(what))
}

/// The DER of the first certificate in `pem`, if it holds one.
pub fn pem_cert_der(pem: &[u8]) -> Option<Vec<u8>> {
    CertificateDer::pem_slice_iter(pem).next()?.ok().map(|c| c.as_ref().to_vec())
}

/// The concatenated PEM files `paths` (what a list of `RootCAs` / `ClientRootCAs` holds).
///
/// Errors: an unreadable file.
pub(crate) fn read_pems(paths: &[PathBuf], what: &str) -> Result<Vec<u8>, CommError> {
    let mut out = Vec::new();
    for p in paths {
        out.extend(read(p, what)?);
        out.push(b'\n');
    }
    Ok(out)
}

/// tonic's server TLS settings for `tls` (certificate, key, and client CA roots when client certificates are
/// configured; `ClientAuthRequired` false makes them optional).
///
/// Errors: missing or unreadable files; client authentication required without client root CAs.
pub(crate) fn grpc_server_tls(tls: &TlsConfig) -> Result<tonic::transport::ServerTlsConfig, CommError> {
    let cert = read(required(&tls.certificate, "certificate")?, "certificate")?;
    let key = read(required(&tls.private_key, "private key")?, "private key")?;
    let mut config = tonic::transport::ServerTlsConfig::new().identity(tonic::transport::Identity::from_pem(cert, key));
    if tls.client_auth_required && tls.client_root_cas.is_empty() {
        return Err(CommError::NoClientRootCas);
    }
    if !tls.client_root_cas.is_empty() {
        config = config
            .client_ca_root(tonic::transport::Certificate::from_pem(read_pems(&tls.client_root_cas, "client root CA")?))
            .client_auth_optional(!tls.client_auth_required);
    }
    Ok(config)
}

/// A rustls server configuration for an HTTP listener (admin, operations), ALPN `http/1.1`.
///
/// Errors: missing or unreadable files, no certificate or key in them, a key that does not match, bad roots;
/// client authentication required without client root CAs.
pub fn http_server_tls(tls: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, CommError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert_path = required(&tls.certificate, "certificate")?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(cert_path, "certificate")?)
        .collect::<Result<_, _>>()
        .map_err(|source| CommError::BadPem { what: "certificate", path: Some(cert_path.to_owned()), source })?;
    if certs.is_empty() {
        return Err(CommError::NoCertificate(cert_path.to_owned()));
    }
    let key_path = required(&tls.private_key, "private key")?;
    let key = PrivateKeyDer::from_pem_slice(&read(key_path, "private key")?).map_err(|source| CommError::BadPem {
        what: "private key",
        path: Some(key_path.to_owned()),
        source,
    })?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|source| CommError::Rustls { what: "TLS protocol versions", source })?;
    let builder = if tls.client_root_cas.is_empty() {
        if tls.client_auth_required {
            return Err(CommError::NoClientRootCas);
        }
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&read_pems(&tls.client_root_cas, "client root CA")?) {
            let c = c.map_err(|source| CommError::BadPem { what: "client root CA", path: None, source })?;
            roots.add(c).map_err(|source| CommError::Rustls { what: "adding a client root CA", source })?;
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let verifier = if tls.client_auth_required { verifier } else { verifier.allow_unauthenticated() };
        builder.with_client_cert_verifier(verifier.build().map_err(CommError::ClientVerifier)?)
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|source| CommError::Rustls { what: "server certificate and key", source })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn yaml_keys_are_fabrics_and_null_lists_are_empty() {
        let t: TlsConfig = serde_yaml::from_str(
            "Enabled: true\nCertificate: c.pem\nPrivateKey: k.pem\nRootCAs: null\nClientRootCAs: [ca.pem]\n\
             ClientAuthRequired: true\n",
        )
        .unwrap();
        assert!(t.enabled && t.client_auth_required);
        assert!(t.root_cas.is_empty());
        assert_eq!(t.client_root_cas, vec![PathBuf::from("ca.pem")]);
        let mut t = t;
        t.resolve_paths(Path::new("/etc"));
        assert_eq!(t.certificate.as_deref(), Some(Path::new("/etc/c.pem")));
        assert_eq!(t.client_root_cas, vec![PathBuf::from("/etc/ca.pem")]);
    }

    #[test]
    fn required_client_auth_needs_roots() {
        let t = TlsConfig { enabled: true, client_auth_required: true, ..TlsConfig::default() };
        assert!(grpc_server_tls(&t).is_err());
        assert!(http_server_tls(&t).is_err());
    }
}
