//! A peer's configuration from Fabric's `core.yaml` ([`PeerConfig`]), with Fabric's environment overrides.
//!
//! Fabric's peer reads `core.yaml` through Viper with `AutomaticEnv` and the prefix `CORE`: every key it asks for
//! may be replaced by `CORE_<PATH>` (`CORE_PEER_ADDRESS` for `peer.address`), also a key the file leaves out or
//! comments out (`peer.chaincodeListenAddress` in the sample file). Keys are case-insensitive; relative paths are
//! relative to the directory of the file (Fabric's `config.TranslatePath`). The file's other keys (gossip, BCCSP,
//! handlers, ...) are accepted and not used.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use ferrofabric_comm::{parse_duration, ClientTlsConfig, TlsConfig};
use serde_yaml::{Mapping, Value};

/// The keys of `core.yaml` a peer reads, dotted as in Fabric's sample file. Those missing from the file are added
/// empty before the environment is applied, as Viper's `AutomaticEnv` answers any key asked for.
const KEYS: &[&str] = &[
    "peer.id",
    "peer.listenAddress",
    "peer.address",
    "peer.chaincodeListenAddress",
    "peer.fileSystemPath",
    "peer.mspConfigPath",
    "peer.localMspId",
    "peer.tls.enabled",
    "peer.tls.clientAuthRequired",
    "peer.tls.cert.file",
    "peer.tls.key.file",
    "peer.tls.rootcert.file",
    "peer.tls.clientRootCAs.files",
    "peer.tls.clientCert.file",
    "peer.tls.clientKey.file",
    "peer.authentication.timewindow",
    "peer.gateway.enabled",
    "peer.gateway.endorsementTimeout",
    "peer.gateway.dialTimeout",
    "chaincode.executetimeout",
    "chaincode.startuptimeout",
    "ledger.history.enableHistoryDatabase",
    "operations.listenAddress",
    "operations.tls.enabled",
    "operations.tls.cert.file",
    "operations.tls.key.file",
];

/// One entry of `peer.deliveryclient.addressOverrides`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressOverride {
    /// The endpoint as the channel configuration names it (`host:port`).
    pub from: String,
    /// Where this peer reaches it instead.
    pub to: String,
    /// PEM file of the CA(s) of `to`'s TLS certificate, if any.
    pub ca_certs_file: Option<PathBuf>,
}

/// What a peer reads of `core.yaml` (Fabric's `core/peer/config.go` and the daemon's own keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// `peer.id`: the peer's name in logs.
    pub id: String,
    /// `peer.listenAddress`: where Endorser, Deliver, Gateway, Discovery and ChaincodeSupport are served.
    pub listen_address: String,
    /// `peer.address`: the endpoint other nodes and clients reach this peer at.
    pub address: String,
    /// `peer.chaincodeListenAddress`: a second listener for chaincodes that dial the peer; `None`: the main one only.
    pub chaincode_listen_address: Option<String>,
    /// `peer.fileSystemPath`: the peer's data (channels, installed chaincode packages).
    pub file_system_path: PathBuf,
    /// `peer.mspConfigPath`: the local MSP directory (signcerts/, keystore/, cacerts/, config.yaml).
    pub msp_config_path: PathBuf,
    /// `peer.localMspId`.
    pub local_msp_id: String,
    /// `peer.tls`: the listener's TLS (server certificate and key, client authentication).
    pub tls: TlsConfig,
    /// `peer.tls.rootcert.file`, `clientCert.file`, `clientKey.file`: how the peer reaches orderers as a TLS client
    /// (the orderers' own roots come from the channel configuration).
    pub client_tls: ClientTlsConfig,
    /// `peer.deliveryclient.addressOverrides`: orderer endpoints of channel configurations that this peer reaches
    /// elsewhere (`from` → `to`, with the CA file of `to`'s TLS certificate), as an operator moves orderers
    /// without a configuration update.
    pub address_overrides: Vec<AddressOverride>,
    /// `peer.authentication.timewindow`: how far a request's timestamp may be from this peer's clock.
    pub time_window: Duration,
    /// `peer.gateway.enabled`: whether the Gateway service is served.
    pub gateway_enabled: bool,
    /// `peer.gateway.endorsementTimeout`.
    pub gateway_endorsement_timeout: Duration,
    /// `peer.gateway.dialTimeout`.
    pub gateway_dial_timeout: Duration,
    /// `chaincode.executetimeout`: how long one chaincode transaction may run.
    pub execute_timeout: Duration,
    /// `chaincode.startuptimeout`: how long a chaincode may take to connect.
    pub startup_timeout: Duration,
    /// `ledger.history.enableHistoryDatabase`: keep every key's history for `GetHistoryForKey`.
    pub history_database: bool,
    /// `operations.listenAddress` (`/metrics`, `/healthz`, `/version`); empty disables it.
    pub operations_listen_address: String,
    /// `operations.tls`.
    pub operations_tls: TlsConfig,
}

impl PeerConfig {
    /// Parses `core.yaml`'s text, applying the overrides among `vars` (`CORE_*`); relative paths are resolved against
    /// `base_dir`.
    ///
    /// Errors: malformed YAML, a value of the wrong type, a malformed duration, or a missing `peer.localMspId`.
    pub fn from_yaml_with_env(
        text: &str,
        base_dir: &Path,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<PeerConfig> {
        let mut doc: Value = serde_yaml::from_str(text).context("parsing core.yaml")?;
        if !doc.is_mapping() {
            doc = Value::Mapping(Mapping::new());
        }
        for key in KEYS {
            insert_missing(&mut doc, key);
        }
        for key in ferrofabric_comm::apply_env_overrides(&mut doc, "CORE", vars) {
            tracing::info!(key, "peer configuration value from the environment");
        }
        let r = Reader { doc: &doc, base: base_dir };
        let tls_enabled = r.bool("peer.tls.enabled", false)?;
        let client_auth = r.bool("peer.tls.clientAuthRequired", false)?;
        let cert = r.path("peer.tls.cert.file")?;
        let key = r.path("peer.tls.key.file")?;
        let root = r.path("peer.tls.rootcert.file")?;
        let client_cert = r.path("peer.tls.clientCert.file")?.or_else(|| cert.clone());
        let client_key = r.path("peer.tls.clientKey.file")?.or_else(|| key.clone());
        let local_msp_id = r.string("peer.localMspId")?.unwrap_or_default();
        if local_msp_id.is_empty() {
            bail!("core.yaml: peer.localMspId is required");
        }
        let listen_address = r.string("peer.listenAddress")?.unwrap_or_else(|| "0.0.0.0:7051".into());
        Ok(PeerConfig {
            id: r.string("peer.id")?.unwrap_or_else(|| "peer".into()),
            address: r.string("peer.address")?.filter(|a| !a.is_empty()).unwrap_or_else(|| listen_address.clone()),
            listen_address,
            chaincode_listen_address: r.string("peer.chaincodeListenAddress")?.filter(|a| !a.is_empty()),
            file_system_path: r.path("peer.fileSystemPath")?.unwrap_or_else(|| "/var/hyperledger/production".into()),
            msp_config_path: r.path("peer.mspConfigPath")?.unwrap_or_else(|| base_dir.join("msp")),
            local_msp_id,
            tls: TlsConfig {
                enabled: tls_enabled,
                private_key: key,
                certificate: cert,
                root_cas: root.iter().cloned().collect(),
                client_auth_required: client_auth,
                client_root_cas: r.paths("peer.tls.clientRootCAs.files")?,
            },
            client_tls: ClientTlsConfig {
                enabled: tls_enabled,
                root_cas: root.into_iter().collect(),
                server_name_override: None,
                client_certificate: client_cert,
                client_key,
            },
            address_overrides: r.address_overrides()?,
            time_window: r.duration("peer.authentication.timewindow", "15m")?,
            gateway_enabled: r.bool("peer.gateway.enabled", true)?,
            gateway_endorsement_timeout: r.duration("peer.gateway.endorsementTimeout", "30s")?,
            gateway_dial_timeout: r.duration("peer.gateway.dialTimeout", "2m")?,
            execute_timeout: r.duration("chaincode.executetimeout", "30s")?,
            startup_timeout: r.duration("chaincode.startuptimeout", "300s")?,
            history_database: r.bool("ledger.history.enableHistoryDatabase", true)?,
            operations_listen_address: r.string("operations.listenAddress")?.unwrap_or_default(),
            operations_tls: TlsConfig {
                enabled: r.bool("operations.tls.enabled", false)?,
                certificate: r.path("operations.tls.cert.file")?,
                private_key: r.path("operations.tls.key.file")?,
                ..TlsConfig::default()
            },
        })
    }

    /// Reads `path` with the process's `CORE_*` overrides, as Fabric's peer reads `core.yaml`.
    ///
    /// Errors: unreadable file, or those of [`PeerConfig::from_yaml_with_env`].
    pub fn load(path: &Path) -> anyhow::Result<PeerConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        Self::from_yaml_with_env(&text, base, std::env::vars()).with_context(|| format!("in {}", path.display()))
    }
}

/// Adds the dotted `key` to `doc` with an empty value where it (compared case-insensitively) is missing.
fn insert_missing(doc: &mut Value, key: &str) {
    let mut node = doc;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let Value::Mapping(map) = node else { return };
        let existing = map.keys().find(|k| k.as_str().is_some_and(|k| k.eq_ignore_ascii_case(part))).cloned();
        let k = existing.unwrap_or_else(|| {
            let fresh = if i + 1 == parts.len() { Value::Null } else { Value::Mapping(Mapping::new()) };
            map.insert(Value::String((*part).to_owned()), fresh);
            Value::String((*part).to_owned())
        });
        let Some(next) = map.get_mut(&k) else { return };
        if i + 1 < parts.len() && next.is_null() {
            *next = Value::Mapping(Mapping::new());
        }
        node = next;
    }
}

/// Typed, case-insensitive reads of the document.
struct Reader<'a> {
    doc: &'a Value,
    base: &'a Path,
}

impl Reader<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        let mut node = self.doc;
        for part in key.split('.') {
            let Value::Mapping(map) = node else { return None };
            node = map.iter().find(|(k, _)| k.as_str().is_some_and(|k| k.eq_ignore_ascii_case(part)))?.1;
        }
        (!node.is_null()).then_some(node)
    }

    fn string(&self, key: &str) -> anyhow::Result<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::Bool(b)) => Ok(Some(b.to_string())),
            Some(other) => bail!("core.yaml: {key} must be a string, not {other:?}"),
        }
    }

    fn bool(&self, key: &str, default: bool) -> anyhow::Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "t" => Ok(true),
                "false" | "0" | "f" | "" => Ok(false),
                _ => bail!("core.yaml: {key} must be true or false, not {s:?}"),
            },
            Some(other) => bail!("core.yaml: {key} must be true or false, not {other:?}"),
        }
    }

    fn duration(&self, key: &str, default: &str) -> anyhow::Result<Duration> {
        let text = self.string(key)?.filter(|s| !s.is_empty()).unwrap_or_else(|| default.to_owned());
        parse_duration(&text).with_context(|| format!("core.yaml: {key}"))
    }

    fn path(&self, key: &str) -> anyhow::Result<Option<PathBuf>> {
        Ok(self.string(key)?.filter(|s| !s.is_empty()).map(|s| self.resolve(&s)))
    }

    fn paths(&self, key: &str) -> anyhow::Result<Vec<PathBuf>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Sequence(items)) => Ok(items
                .iter()
                .filter_map(|v| v.as_str())
                .filter(|s| !s.trim().is_empty())
                .map(|s| self.resolve(s.trim()))
                .collect()),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(Vec::new()),
            Some(Value::String(s)) => Ok(vec![self.resolve(s.trim())]),
            Some(other) => bail!("core.yaml: {key} must be a list of files, not {other:?}"),
        }
    }

    fn address_overrides(&self) -> anyhow::Result<Vec<AddressOverride>> {
        let key = "peer.deliveryclient.addressOverrides";
        let items = match self.get(key) {
            None => return Ok(Vec::new()),
            Some(Value::Sequence(items)) => items,
            Some(other) => bail!("core.yaml: {key} must be a list of {{from, to, caCertsFile}}, not {other:?}"),
        };
        let mut out = Vec::new();
        for item in items.iter().filter(|i| !i.is_null()) {
            let field = |name: &str| {
                item.as_mapping()
                    .and_then(|m| m.iter().find(|(k, _)| k.as_str().is_some_and(|k| k.eq_ignore_ascii_case(name))))
                    .and_then(|(_, v)| v.as_str())
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty())
            };
            let (Some(from), Some(to)) = (field("from"), field("to")) else {
                bail!("core.yaml: every entry of {key} needs `from` and `to`");
            };
            out.push(AddressOverride { from, to, ca_certs_file: field("caCertsFile").map(|f| self.resolve(&f)) });
        }
        Ok(out)
    }

    fn resolve(&self, p: &str) -> PathBuf {
        let p = PathBuf::from(p);
        if p.is_relative() {
            self.base.join(p)
        } else {
            p
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample() -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fabric/2.5.16/config/core.yaml");
        std::fs::read_to_string(path).unwrap()
    }

    fn vars(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
    }

    #[test]
    fn fabric_sample_core_yaml_gives_fabric_defaults() {
        let c = PeerConfig::from_yaml_with_env(&sample(), Path::new("/etc/hyperledger/fabric"), vars(&[])).unwrap();
        assert_eq!(c.id, "jdoe");
        assert_eq!(c.listen_address, "0.0.0.0:7051");
        assert_eq!(c.address, "0.0.0.0:7051");
        assert_eq!(c.chaincode_listen_address, None);
        assert_eq!(c.file_system_path, PathBuf::from("/var/hyperledger/production"));
        assert_eq!(c.msp_config_path, PathBuf::from("/etc/hyperledger/fabric/msp"));
        assert_eq!(c.local_msp_id, "SampleOrg");
        assert!(!c.tls.enabled && !c.tls.client_auth_required);
        assert_eq!(c.tls.certificate, Some(PathBuf::from("/etc/hyperledger/fabric/tls/server.crt")));
        assert_eq!(c.tls.client_root_cas, vec![PathBuf::from("/etc/hyperledger/fabric/tls/ca.crt")]);
        assert_eq!(c.time_window, Duration::from_secs(15 * 60));
        assert_eq!(c.execute_timeout, Duration::from_secs(30));
        assert_eq!(c.startup_timeout, Duration::from_secs(300));
        assert!(c.history_database && c.gateway_enabled);
        assert_eq!(c.operations_listen_address, "127.0.0.1:9443");
        assert!(c.address_overrides.is_empty());
    }

    #[test]
    fn delivery_address_overrides_are_read_with_their_ca_files_relative_to_the_file() {
        let text = "peer:\n  localMspId: Org1MSP\n  deliveryclient:\n    addressOverrides:\n      - from: orderer.example.com:7050\n        to: 127.0.0.1:17050\n        caCertsFile: tls/ca.crt\n";
        let c = PeerConfig::from_yaml_with_env(text, Path::new("/cfg"), vars(&[])).unwrap();
        assert_eq!(
            c.address_overrides,
            vec![AddressOverride {
                from: "orderer.example.com:7050".into(),
                to: "127.0.0.1:17050".into(),
                ca_certs_file: Some(PathBuf::from("/cfg/tls/ca.crt")),
            }]
        );
        let bad = "peer:\n  localMspId: Org1MSP\n  deliveryclient:\n    addressOverrides:\n      - from: a:1\n";
        assert!(PeerConfig::from_yaml_with_env(bad, Path::new("."), vars(&[])).is_err());
    }

    #[test]
    fn core_environment_overrides_replace_keys_also_those_the_file_comments_out() {
        let env = vars(&[
            ("CORE_PEER_ADDRESS", "peer0.org1.example.com:7051"),
            ("CORE_PEER_LISTENADDRESS", "127.0.0.1:17051"),
            ("CORE_PEER_CHAINCODELISTENADDRESS", "127.0.0.1:17052"),
            ("CORE_PEER_LOCALMSPID", "Org1MSP"),
            ("CORE_PEER_MSPCONFIGPATH", "/crypto/msp"),
            ("CORE_PEER_TLS_ENABLED", "true"),
            ("CORE_PEER_TLS_CERT_FILE", "/crypto/tls/server.crt"),
            ("CORE_PEER_TLS_CLIENTROOTCAS_FILES", "[/a.crt, /b.crt]"),
            ("CORE_PEER_FILESYSTEMPATH", "data"),
            ("CORE_OPERATIONS_LISTENADDRESS", "127.0.0.1:19443"),
            ("CORE_LEDGER_HISTORY_ENABLEHISTORYDATABASE", "false"),
            ("CORE_CHAINCODE_EXECUTETIMEOUT", "5s"),
            ("CORE_NOT_A_KEY", "ignored"),
        ]);
        let c = PeerConfig::from_yaml_with_env(&sample(), Path::new("/cfg"), env).unwrap();
        assert_eq!(c.address, "peer0.org1.example.com:7051");
        assert_eq!(c.listen_address, "127.0.0.1:17051");
        assert_eq!(c.chaincode_listen_address.as_deref(), Some("127.0.0.1:17052"));
        assert_eq!(c.local_msp_id, "Org1MSP");
        assert_eq!(c.msp_config_path, PathBuf::from("/crypto/msp"));
        assert!(c.tls.enabled && c.client_tls.enabled);
        assert_eq!(c.tls.certificate, Some(PathBuf::from("/crypto/tls/server.crt")));
        assert_eq!(c.client_tls.client_certificate, c.tls.certificate, "the server pair is the client pair by default");
        assert_eq!(c.tls.client_root_cas, vec![PathBuf::from("/a.crt"), PathBuf::from("/b.crt")]);
        assert_eq!(c.file_system_path, PathBuf::from("/cfg/data"), "relative to the file's directory");
        assert_eq!(c.operations_listen_address, "127.0.0.1:19443");
        assert!(!c.history_database);
        assert_eq!(c.execute_timeout, Duration::from_secs(5));
    }

    #[test]
    fn a_peer_without_an_msp_id_or_with_a_bad_value_is_refused_with_the_key() {
        let err = PeerConfig::from_yaml_with_env("peer: {}\n", Path::new("."), vars(&[])).unwrap_err();
        assert!(err.to_string().contains("peer.localMspId"), "{err}");
        let err = PeerConfig::from_yaml_with_env(
            "peer: {localMspId: Org1MSP}\n",
            Path::new("."),
            vars(&[("CORE_PEER_TLS_ENABLED", "maybe")]),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("peer.tls.enabled"), "{err:#}");
    }
}
