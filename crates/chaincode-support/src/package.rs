//! Chaincode install packages (Fabric's `core/chaincode/persistence/chaincode_package.go`): a gzipped tar holding
//! `metadata.json` (`{"type", "label", "path"}`) and `code.tar.gz`; a package's ID is
//! `<label>:<hex SHA-256 of the package bytes>`. A package of type `ccaas` (Fabric's bundled `ccaas_builder`) holds
//! `connection.json` in its code archive: the address of the chaincode's gRPC server and how to reach it.

use std::io::Read;
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Largest entry read from a package (metadata, code archive, connection.json): 100 MiB, Fabric's default
/// `peer.limits` for a proposal are far below it.
const MAX_ENTRY: u64 = 100 << 20;

/// Why a package was refused; the texts are Fabric's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackageError {
    /// Not a gzipped tar, or an entry could not be read.
    #[error("{0}")]
    Malformed(String),
    /// `metadata.json` is missing or invalid.
    #[error("{0}")]
    Metadata(String),
    /// The label breaks Fabric's rule (`^[[:alnum:]][[:alnum:]_.+-]*$`).
    #[error("invalid label '{0}'. Label must be non-empty, can only consist of alphanumerics, symbols from '.+-_', and can only begin with alphanumerics")]
    Label(String),
    /// A `ccaas` package without a usable `connection.json`.
    #[error("{0}")]
    Connection(String),
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    label: String,
    #[serde(default)]
    path: String,
}

/// A parsed chaincode install package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChaincodePackage {
    /// `metadata.json` `label`.
    pub label: String,
    /// `metadata.json` `type` (`ccaas`, `node`, `golang`, `java`, ...).
    pub kind: String,
    /// `metadata.json` `path`.
    pub path: String,
    /// The code archive (`code.tar.gz`) as stored in the package.
    pub code: Bytes,
}

impl ChaincodePackage {
    /// Parses a package (Fabric's `ChaincodePackageParser.Parse`).
    ///
    /// Errors: [`PackageError`] — not a gzipped tar, no or bad `metadata.json`, a bad label, no `code.tar.gz`.
    pub fn parse(bytes: &[u8]) -> Result<ChaincodePackage, PackageError> {
        let entries = tar_gz_entries(bytes)?;
        let mut metadata = None;
        let mut code = None;
        for (name, data) in entries {
            match name.as_str() {
                "metadata.json" => metadata = Some(data),
                "code.tar.gz" => code = Some(data),
                _ => {}
            }
        }
        let metadata = metadata.ok_or_else(|| PackageError::Metadata("metadata.json not found".into()))?;
        let m: Metadata = serde_json::from_slice(&metadata)
            .map_err(|e| PackageError::Metadata(format!("could not unmarshal metadata.json as json: {e}")))?;
        validate_label(&m.label)?;
        let code = code.ok_or_else(|| PackageError::Malformed("code.tar.gz not found".into()))?;
        Ok(ChaincodePackage { label: m.label, kind: m.kind, path: m.path, code: Bytes::from(code) })
    }

    /// The `connection.json` of a `ccaas` package.
    ///
    /// Errors: [`PackageError::Connection`] when the package is not of type `ccaas` or its code archive holds no
    /// valid `connection.json`.
    pub fn connection(&self) -> Result<Connection, PackageError> {
        if self.kind != "ccaas" {
            return Err(PackageError::Connection(format!(
                "chaincode packages of type '{}' are not run by this peer: only chaincode as a service (type 'ccaas') and chaincodes that connect to the peer",
                self.kind
            )));
        }
        let entries = tar_gz_entries(&self.code).map_err(|e| PackageError::Connection(e.to_string()))?;
        let json = entries
            .into_iter()
            .find(|(n, _)| n == "connection.json")
            .map(|(_, d)| d)
            .ok_or_else(|| PackageError::Connection("connection.json not found in code.tar.gz".into()))?;
        Connection::from_json(&json)
    }
}

/// Fabric's package ID: `label:hex(SHA-256(package))`.
pub fn package_id(label: &str, package: &[u8]) -> String {
    format!("{label}:{}", hex::encode(Sha256::digest(package)))
}

/// A `ccaas` install package as `peer lifecycle chaincode package --lang ccaas` holds it ([`install_package`] of
/// type `ccaas`), its code archive holding `connection.json` that names the chaincode server at `address` (plain
/// text, 10 s dial timeout). One label and address always give one package ID.
pub fn ccaas_package(label: &str, address: &str) -> Vec<u8> {
    let connection = serde_json::json!({"address": address, "dial_timeout": "10s", "tls_required": false});
    install_package("ccaas", label, &[("connection.json", connection.to_string().into_bytes())])
}

/// An install package as `peer lifecycle chaincode package --lang <kind>` writes it: a gzipped tar of
/// `metadata.json` (`{"type":kind,"label":label,"path":""}`) and `code.tar.gz` holding `code` (name, bytes).
/// The bytes are deterministic (no timestamps, mode 0644).
pub fn install_package(kind: &str, label: &str, code: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let metadata = serde_json::json!({"type": kind, "label": label, "path": ""});
    tar_gz(&[("metadata.json", metadata.to_string().into_bytes()), ("code.tar.gz", tar_gz(code))])
}

/// A gzipped tar of regular files (mode 0644, time 0).
fn tar_gz(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()));
    for (name, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        // Writing into a Vec cannot fail; a name too long for a tar header is a caller's constant.
        let _ = tar.append_data(&mut header, name, data.as_slice());
    }
    tar.into_inner().and_then(|gz| gz.finish()).unwrap_or_default()
}

/// Fabric's `ValidateLabel`.
fn validate_label(label: &str) -> Result<(), PackageError> {
    let mut chars = label.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-'));
    if ok {
        Ok(())
    } else {
        Err(PackageError::Label(label.to_owned()))
    }
}

/// The regular files of a gzipped tar, by name (a leading `./` dropped), each at most [`MAX_ENTRY`] bytes.
fn tar_gz_entries(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, PackageError> {
    let malformed = |e: std::io::Error| PackageError::Malformed(format!("error reading as gzip: {e}"));
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut out = Vec::new();
    for entry in archive.entries().map_err(malformed)? {
        let entry = entry.map_err(malformed)?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry.path().map_err(malformed)?.to_string_lossy().trim_start_matches("./").to_owned();
        let mut data = Vec::new();
        entry.take(MAX_ENTRY).read_to_end(&mut data).map_err(malformed)?;
        out.push((name, data));
    }
    Ok(out)
}

/// A chaincode server's `connection.json` (Fabric's `ccaas_builder` and `externalbuilder.ChaincodeServerUserData`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Connection {
    /// `host:port` of the chaincode's gRPC server.
    pub address: String,
    /// How long a dial may take (`dial_timeout`, a Go duration such as `10s`; default 3 s).
    pub dial_timeout: Duration,
    /// Whether the server speaks TLS (`tls_required`).
    pub tls_required: bool,
    /// Whether the server wants the peer's client certificate (`client_auth_required`).
    pub client_auth_required: bool,
    /// PEM of the peer's client key (`client_key`).
    pub client_key: String,
    /// PEM of the peer's client certificate (`client_cert`).
    pub client_cert: String,
    /// PEM of the CA that signed the server's certificate (`root_cert`).
    pub root_cert: String,
}

#[derive(Deserialize)]
struct ConnectionJson {
    #[serde(default)]
    address: String,
    #[serde(default)]
    dial_timeout: String,
    #[serde(default)]
    tls_required: bool,
    #[serde(default)]
    client_auth_required: bool,
    #[serde(default)]
    client_key: String,
    #[serde(default)]
    client_cert: String,
    #[serde(default)]
    root_cert: String,
}

impl Connection {
    /// Parses `connection.json`.
    ///
    /// Errors: [`PackageError::Connection`] — invalid JSON, no address, a bad duration, TLS without its root
    /// certificate, client authentication without key and certificate.
    pub fn from_json(json: &[u8]) -> Result<Connection, PackageError> {
        let bad = |m: String| PackageError::Connection(m);
        let c: ConnectionJson =
            serde_json::from_slice(json).map_err(|e| bad(format!("could not unmarshal connection.json: {e}")))?;
        if c.address.is_empty() {
            return Err(bad("chaincode address not provided".into()));
        }
        let dial_timeout = if c.dial_timeout.is_empty() {
            Duration::from_secs(3)
        } else {
            ferrofabric_comm::parse_duration(&c.dial_timeout)
                .map_err(|e| bad(format!("invalid dial_timeout '{}': {e}", c.dial_timeout)))?
        };
        if c.tls_required && c.root_cert.is_empty() {
            return Err(bad("root_cert is required when tls_required is true".into()));
        }
        if c.client_auth_required && (c.client_key.is_empty() || c.client_cert.is_empty()) {
            return Err(bad("client_key and client_cert are required when client_auth_required is true".into()));
        }
        Ok(Connection {
            address: c.address,
            dial_timeout,
            tls_required: c.tls_required,
            client_auth_required: c.client_auth_required,
            client_key: c.client_key,
            client_cert: c.client_cert,
            root_cert: c.root_cert,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_ccaas_package_parses_back_to_its_label_and_address_and_is_deterministic() {
        let bytes = ccaas_package("assets_1.0", "127.0.0.1:9999");
        assert_eq!(bytes, ccaas_package("assets_1.0", "127.0.0.1:9999"));
        let package = ChaincodePackage::parse(&bytes).expect("a built package parses");
        assert_eq!((package.label.as_str(), package.kind.as_str()), ("assets_1.0", "ccaas"));
        let connection = package.connection().expect("its connection.json");
        assert_eq!(connection.address, "127.0.0.1:9999");
        assert_eq!(connection.dial_timeout, Duration::from_secs(10));
        assert!(!connection.tls_required);
    }

    #[test]
    fn labels_follow_fabrics_rule() {
        for ok in ["mycc_1.0", "a", "A+b-c.d_e", "0x"] {
            assert!(validate_label(ok).is_ok(), "{ok}");
        }
        for bad in ["", "_a", ".a", "a b", "a:b", "é"] {
            assert!(validate_label(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn connection_json_fields_are_read() {
        let c = Connection::from_json(br#"{"address":"127.0.0.1:9999","dial_timeout":"10s","tls_required":false}"#)
            .expect("valid");
        assert_eq!(c.address, "127.0.0.1:9999");
        assert_eq!(c.dial_timeout, Duration::from_secs(10));
        assert!(Connection::from_json(br#"{"address":"a:1","dial_timeout":"10"}"#).is_err());
        assert!(Connection::from_json(br#"{"address":"a:1","tls_required":true}"#).is_err());
    }

    #[test]
    fn garbage_is_refused_without_panicking() {
        assert!(ChaincodePackage::parse(b"").is_err());
        assert!(ChaincodePackage::parse(b"\x1f\x8b\x08\x00garbage").is_err());
        assert!(Connection::from_json(b"{}").is_err());
        assert!(Connection::from_json(b"not json").is_err());
    }
}
