//! TLS for the orderer's listeners with rustls (ring provider): the gRPC listener through tonic, the admin and
//! operations HTTP listeners through tokio-rustls. Server TLS with optional or required client certificates,
//! as Fabric's `comm.ServerConfig` offers.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::TlsConfig;

fn read(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading TLS {what} {}", path.display()))
}

fn required<'a>(p: &'a Option<std::path::PathBuf>, what: &str) -> anyhow::Result<&'a Path> {
    p.as_deref().ok_or_else(|| anyhow!("TLS is enabled but no {what} is configured"))
}

/// The DER of the first certificate in `pem`, if it holds one.
pub fn pem_cert_der(pem: &[u8]) -> Option<Vec<u8>> {
    CertificateDer::pem_slice_iter(pem).next()?.ok().map(|c| c.as_ref().to_vec())
}

/// The concatenated client root CA PEMs of `tls`.
fn client_roots_pem(tls: &TlsConfig) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    for p in &tls.client_root_cas {
        out.extend(read(p, "client root CA")?);
        out.push(b'\n');
    }
    Ok(out)
}

/// tonic's server TLS settings for `tls` (certificate, key, and client CA roots when client certificates are
/// configured; `ClientAuthRequired` false makes them optional).
///
/// Errors: missing or unreadable files; client auth required without client root CAs.
pub fn grpc_server_tls(tls: &TlsConfig) -> anyhow::Result<tonic::transport::ServerTlsConfig> {
    let cert = read(required(&tls.certificate, "certificate")?, "certificate")?;
    let key = read(required(&tls.private_key, "private key")?, "private key")?;
    let mut config = tonic::transport::ServerTlsConfig::new().identity(tonic::transport::Identity::from_pem(cert, key));
    if tls.client_auth_required && tls.client_root_cas.is_empty() {
        anyhow::bail!("TLS client authentication is required but no ClientRootCAs are configured");
    }
    if !tls.client_root_cas.is_empty() {
        config = config
            .client_ca_root(tonic::transport::Certificate::from_pem(client_roots_pem(tls)?))
            .client_auth_optional(!tls.client_auth_required);
    }
    Ok(config)
}

/// A rustls server configuration for an HTTP listener (admin, operations), ALPN `http/1.1`.
///
/// Errors: missing or unreadable files, no certificate or key in them, a key that does not match, bad roots.
pub fn http_server_tls(tls: &TlsConfig) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert_path = required(&tls.certificate, "certificate")?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(cert_path, "certificate")?)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("bad certificate PEM {}: {e:?}", cert_path.display()))?;
    anyhow::ensure!(!certs.is_empty(), "no certificate in {}", cert_path.display());
    let key_path = required(&tls.private_key, "private key")?;
    let key = PrivateKeyDer::from_pem_slice(&read(key_path, "private key")?)
        .map_err(|e| anyhow!("bad private key PEM {}: {e:?}", key_path.display()))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = if tls.client_root_cas.is_empty() {
        anyhow::ensure!(
            !tls.client_auth_required,
            "TLS client authentication is required but no ClientRootCAs are configured"
        );
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&client_roots_pem(tls)?) {
            let c = c.map_err(|e| anyhow!("bad client root CA PEM: {e:?}"))?;
            roots.add(c).context("adding a client root CA")?;
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let verifier = if tls.client_auth_required { verifier } else { verifier.allow_unauthenticated() };
        builder.with_client_cert_verifier(verifier.build().context("client certificate verifier")?)
    };
    let mut config = builder.with_single_cert(certs, key).context("server certificate and key")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
