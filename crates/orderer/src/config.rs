//! The orderer's local configuration, [`OrdererConfig`]: a YAML file in the shape of Fabric's `orderer.yaml`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::OrdererError;
use ferrofabric_comm::{parse_addr, parse_duration, TlsConfig};
use serde::Deserialize;

/// `General.Keepalive`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct KeepaliveConfig {
    /// `ServerMinInterval`: the shortest time between client pings Fabric's server permits (default 60s); a
    /// grpc-go server answers pings that come sooner with GOAWAY `too_many_pings`. Read and checked as a
    /// duration, not enforced: hyper's HTTP/2 server answers every ping, so a client that pings sooner keeps its
    /// connection here where Fabric's server would close it.
    pub server_min_interval: Option<String>,
    /// `ServerInterval`: how often the server pings an idle client (Go duration; default 2h).
    pub server_interval: Option<String>,
    /// `ServerTimeout`: how long to wait for the ping's answer (default 20s).
    pub server_timeout: Option<String>,
}

/// `General.Cluster`: only the certificate that names this node among a channel's consenters is read here.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct ClusterConfig {
    /// TLS client certificate this node presents to other consenters; it is how a channel's consenter list
    /// identifies the node. The key is not needed to tell which consenter this node is.
    pub client_certificate: Option<PathBuf>,
    /// Its private key (unused until a cluster consensus needs it).
    pub client_private_key: Option<PathBuf>,
}

/// `General.Authentication`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct AuthenticationConfig {
    /// `TimeWindow`: how far a Deliver request's timestamp may be from the server's clock (default 15m).
    pub time_window: Option<String>,
    /// `NoExpirationChecks`: skip the broadcast creator-certificate expiry check.
    pub no_expiration_checks: bool,
}

/// The `General` section.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct GeneralConfig {
    /// IP address or host name of the gRPC (AtomicBroadcast) listener.
    pub listen_address: String,
    /// Its TCP port (0 picks a free port).
    pub listen_port: u16,
    /// TLS of the gRPC listener.
    #[serde(rename = "TLS")]
    pub tls: TlsConfig,
    /// gRPC keepalive.
    pub keepalive: KeepaliveConfig,
    /// Largest gRPC message accepted, bytes (default 100 MiB).
    pub max_recv_msg_size: Option<u64>,
    /// Largest gRPC message sent, bytes (default 100 MiB).
    pub max_send_msg_size: Option<u64>,
    /// Cluster settings.
    pub cluster: ClusterConfig,
    /// The local MSP directory in cryptogen's layout (`signcerts/`, `keystore/`).
    #[serde(rename = "LocalMSPDir")]
    pub local_msp_dir: Option<PathBuf>,
    /// The local MSP ID, e.g. `OrdererMSP`.
    #[serde(rename = "LocalMSPID")]
    pub local_msp_id: Option<String>,
    /// Client authentication settings.
    pub authentication: AuthenticationConfig,
}

impl Default for GeneralConfig {
    fn default() -> Self {
        GeneralConfig {
            listen_address: "127.0.0.1".into(),
            listen_port: 7050,
            tls: TlsConfig::default(),
            keepalive: KeepaliveConfig::default(),
            max_recv_msg_size: None,
            max_send_msg_size: None,
            cluster: ClusterConfig::default(),
            local_msp_dir: None,
            local_msp_id: None,
            authentication: AuthenticationConfig::default(),
        }
    }
}

/// `FileLedger`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct FileLedgerConfig {
    /// Directory of the channels' ledgers (`<Location>/chains/<channel>`).
    pub location: Option<PathBuf>,
}

/// An HTTP listener: `Admin` (channel participation) or `Operations` (health, metrics).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct HttpListenerConfig {
    /// `host:port`; empty disables the listener.
    pub listen_address: String,
    /// Its TLS settings.
    #[serde(rename = "TLS")]
    pub tls: TlsConfig,
}

/// `ChannelParticipation`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct ChannelParticipationConfig {
    /// Whether the API answers (Fabric answers 503 when disabled).
    pub enabled: bool,
    /// Largest join request body, e.g. `"1 MB"`.
    pub max_request_body_size: Option<serde_yaml::Value>,
}

impl Default for ChannelParticipationConfig {
    fn default() -> Self {
        ChannelParticipationConfig { enabled: true, max_request_body_size: None }
    }
}

/// `Consensus` (etcdraft's WAL and snapshot directories, used by the Raft backend).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct ConsensusDirs {
    /// Write-ahead log directory.
    #[serde(rename = "WALDir")]
    pub wal_dir: Option<PathBuf>,
    /// Snapshot directory.
    pub snap_dir: Option<PathBuf>,
}

/// `Kafka`: how this orderer reaches the Kafka cluster of `kafka` channels (Fabric 1.4 `localconfig.Kafka`; the
/// brokers themselves come from the channel's `KafkaBrokers` value). Fabric's `Retry`, `Verbose` and `Version`
/// keys are accepted and ignored: the client (librdkafka) retries and negotiates versions itself.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct KafkaConfig {
    /// TLS to the brokers: `Enabled`, `Certificate` and `PrivateKey` (client authentication, optional), `RootCAs`.
    #[serde(rename = "TLS")]
    pub tls: TlsConfig,
    /// SASL/PLAIN credentials.
    #[serde(rename = "SASLPlain")]
    pub sasl_plain: KafkaSaslPlain,
    /// Settings of the topics this orderer creates.
    pub topic: KafkaTopic,
    /// Ferrofabric: `aside` (default; FastFabric Opt O-I: envelopes go to the channel's payload topic and only a
    /// reference through the ordered partition) or `inline` (Fabric 1.4: whole envelopes through the partition).
    pub payloads: String,
    /// Ferrofabric: partitions of a channel's payload topic when this orderer creates it (default 1: on few brokers,
    /// fewer and larger produce requests beat spreading the payloads).
    pub payload_partitions: i32,
    /// Ferrofabric: brokers to use instead of the channel's `KafkaBrokers` (e.g. when the channel lists names that
    /// do not resolve here); empty keeps the channel's.
    pub brokers: Vec<String>,
    /// Ferrofabric: librdkafka properties passed through unchanged (e.g. `security.protocol`,
    /// `ssl.endpoint.identification.algorithm`, `linger.ms`); they override what the other keys set.
    pub properties: std::collections::BTreeMap<String, String>,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            tls: TlsConfig::default(),
            sasl_plain: KafkaSaslPlain::default(),
            topic: KafkaTopic::default(),
            payloads: "aside".into(),
            payload_partitions: 1,
            brokers: Vec::new(),
            properties: Default::default(),
        }
    }
}

/// `Kafka.SASLPlain`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct KafkaSaslPlain {
    /// Whether to authenticate with SASL/PLAIN.
    pub enabled: bool,
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
}

/// `Kafka.Topic`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct KafkaTopic {
    /// Replication factor of the topics this orderer creates (Fabric's default 3). `min.insync.replicas` is set
    /// to `min(2, ReplicationFactor)`, so an acknowledged record survives the loss of one broker.
    pub replication_factor: i32,
}

impl Default for KafkaTopic {
    fn default() -> Self {
        KafkaTopic { replication_factor: 3 }
    }
}

/// Ferrofabric's tuning (`Ferrofabric:` section; not in Fabric's file).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct TuningConfig {
    /// FastFabric Opt O-II: check the messages of one Broadcast stream in parallel (responses stay in order).
    pub parallel_checks: bool,
    /// How many messages of one stream may be in checking at once when `parallel_checks` is on.
    pub broadcast_window: usize,
    /// Capacity of each channel's consensus queue (messages). A full queue makes Broadcast wait. Kept near ten
    /// blocks' worth (1,000): at saturation envelopes should wait in front of their check, where the client feels
    /// the back-pressure, not behind it, where they only add block latency.
    pub queue_size: usize,
    /// How long Broadcast waits for room in a full consensus queue before answering SERVICE_UNAVAILABLE.
    pub queue_timeout: Option<String>,
    /// Threads checking signatures and signing blocks; 0 = one per core.
    pub crypto_threads: usize,
    /// Blocks signed in parallel ahead of the one being appended.
    pub signing_window: usize,
    /// `fsync` every appended block (`true`, default) or leave it to the OS.
    pub sync_every_block: bool,
}

impl Default for TuningConfig {
    fn default() -> Self {
        TuningConfig {
            parallel_checks: true,
            broadcast_window: 64,
            queue_size: 1_000,
            queue_timeout: None,
            crypto_threads: 0,
            signing_window: 8,
            sync_every_block: true,
        }
    }
}

/// The whole file (Fabric `localconfig.TopLevel`, the parts used here).
///
/// The orderer's local configuration: a YAML file in the shape of Fabric's `orderer.yaml`
/// (`orderer/common/localconfig/config.go`), of which the sections an ordering node needs are read, plus
/// Ferrofabric's own tuning section.
///
/// Keys are Fabric's (PascalCase); unknown keys (BCCSP, Metrics, ...) are accepted and ignored, so a
/// Fabric `orderer.yaml` loads unchanged. Relative paths are resolved against the directory of the file (as
/// Fabric resolves them against `FABRIC_CFG_PATH`). Durations use Go syntax (`"2s"`, `"15m"`), sizes Fabric's
/// (`"1 MB"`, `"512 KB"`, or a plain byte count).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct OrdererConfig {
    /// `General`.
    pub general: GeneralConfig,
    /// `FileLedger`.
    pub file_ledger: FileLedgerConfig,
    /// `Operations` listener.
    pub operations: HttpListenerConfig,
    /// `Admin` listener (channel participation).
    pub admin: HttpListenerConfig,
    /// `ChannelParticipation`.
    pub channel_participation: ChannelParticipationConfig,
    /// `Consensus`.
    pub consensus: ConsensusDirs,
    /// `Kafka`.
    pub kafka: KafkaConfig,
    /// `Ferrofabric` tuning.
    pub ferrofabric: TuningConfig,
}

impl OrdererConfig {
    /// Defaults of a node started without a file: gRPC on 127.0.0.1:7050, admin on 127.0.0.1:7053,
    /// operations on 127.0.0.1:8443, no TLS.
    pub fn defaults() -> Self {
        OrdererConfig {
            admin: HttpListenerConfig { listen_address: "127.0.0.1:7053".into(), tls: TlsConfig::default() },
            operations: HttpListenerConfig { listen_address: "127.0.0.1:8443".into(), tls: TlsConfig::default() },
            ..OrdererConfig::default()
        }
    }

    /// Parses YAML text; relative paths are resolved against `base_dir`.
    ///
    /// Errors: YAML syntax or type errors (with serde's location).
    pub fn from_yaml(text: &str, base_dir: &Path) -> Result<Self, OrdererError> {
        Self::from_yaml_with_env(text, base_dir, std::iter::empty())
    }

    /// [`Self::from_yaml`] with Fabric's `ORDERER_*` environment overrides among `vars` applied first
    /// ([`ferrofabric_comm::apply_env_overrides`]: `ORDERER_GENERAL_LISTENPORT` replaces `General.ListenPort`).
    ///
    /// Errors: YAML syntax or type errors (with serde's location), also of an overridden value.
    pub fn from_yaml_with_env(
        text: &str,
        base_dir: &Path,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, OrdererError> {
        let mut doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(OrdererError::ParseConfig)?;
        let replaced = ferrofabric_comm::apply_env_overrides(&mut doc, "ORDERER", vars);
        for key in &replaced {
            tracing::info!(key, "orderer configuration value from the environment");
        }
        // The file's text is parsed as written (an empty value reads as an empty string where one is expected); with
        // overrides, the document is written back with its nulls empty again.
        let text = if replaced.is_empty() {
            text.to_owned()
        } else {
            let written = serde_yaml::to_string(&doc).map_err(OrdererError::WriteConfig)?;
            written.lines().map(|l| l.strip_suffix(" null").unwrap_or(l)).collect::<Vec<_>>().join("\n")
        };
        let mut config: OrdererConfig = serde_yaml::from_str(&text).map_err(OrdererError::ParseConfig)?;
        config.resolve_paths(base_dir);
        Ok(config)
    }

    /// Reads and parses the file at `path` with the process's `ORDERER_*` environment overrides
    /// ([`Self::from_yaml_with_env`] with the file's directory as base), as Fabric's orderer reads `orderer.yaml`.
    pub fn load(path: &Path) -> Result<Self, OrdererError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| OrdererError::ReadConfig { path: path.to_owned(), source })?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        Self::from_yaml_with_env(&text, base, std::env::vars())
    }

    fn resolve_paths(&mut self, base: &Path) {
        let fix = |p: &mut Option<PathBuf>| {
            if let Some(path) = p {
                if path.is_relative() {
                    *path = base.join(&*path);
                }
            }
        };
        self.general.tls.resolve_paths(base);
        self.admin.tls.resolve_paths(base);
        self.operations.tls.resolve_paths(base);
        fix(&mut self.general.cluster.client_certificate);
        fix(&mut self.general.cluster.client_private_key);
        fix(&mut self.general.local_msp_dir);
        fix(&mut self.file_ledger.location);
        fix(&mut self.consensus.wal_dir);
        fix(&mut self.consensus.snap_dir);
        self.kafka.tls.resolve_paths(base);
    }

    /// The gRPC listen address (`ListenAddress:ListenPort`).
    ///
    /// Errors: the pair is not a socket address (host names other than `localhost` are not resolved).
    pub fn listen_addr(&self) -> Result<SocketAddr, OrdererError> {
        let host = match self.general.listen_address.as_str() {
            "localhost" => "127.0.0.1",
            h => h,
        };
        Ok(parse_addr(&format!("{host}:{}", self.general.listen_port))?)
    }

    /// The TLS material this node dials other consenters with: client certificate and key from
    /// `General.Cluster.ClientCertificate` / `ClientPrivateKey`, else `General.TLS.Certificate` / `PrivateKey` when
    /// TLS is enabled; root CAs from `General.TLS.RootCAs`. `None` when neither is configured (a cluster consensus
    /// then refuses channels with more than one consenter).
    ///
    /// Errors: configured files that cannot be read.
    pub fn cluster_tls(&self) -> Result<Option<ferrofabric_comm::ClusterTls>, OrdererError> {
        let g = &self.general;
        let (cert, key) = match (&g.cluster.client_certificate, &g.cluster.client_private_key) {
            (Some(c), Some(k)) => (Some(c.clone()), Some(k.clone())),
            _ if g.tls.enabled => (g.tls.certificate.clone(), g.tls.private_key.clone()),
            _ => (None, None),
        };
        let read = |path: &Path, what: &str| {
            std::fs::read(path).map_err(|source| OrdererError::ReadFile {
                what: format!("the cluster {what} "),
                path: path.to_owned(),
                source,
            })
        };
        match (cert, key) {
            (Some(cert), Some(key)) => Ok(Some(ferrofabric_comm::ClusterTls {
                certificate_pem: read(&cert, "client certificate")?,
                private_key_pem: read(&key, "client key")?,
                root_cas_pem: g.tls.root_cas.iter().map(|p| read(p, "root CA")).collect::<Result<_, _>>()?,
            })),
            _ => Ok(None),
        }
    }

    /// The largest node-to-node message, bytes: the larger of `General.MaxRecvMsgSize` and `MaxSendMsgSize`
    /// (default 100 MiB each).
    pub fn cluster_max_message(&self) -> usize {
        let g = &self.general;
        let max = g.max_recv_msg_size.unwrap_or(100 << 20).max(g.max_send_msg_size.unwrap_or(100 << 20));
        usize::try_from(max).unwrap_or(usize::MAX)
    }

    /// `General.Authentication.TimeWindow`, default 15 minutes.
    pub fn time_window(&self) -> Result<Duration, OrdererError> {
        opt_duration(self.general.authentication.time_window.as_deref(), Duration::from_secs(15 * 60))
    }

    /// `Ferrofabric.QueueTimeout`, default 10 s.
    pub fn queue_timeout(&self) -> Result<Duration, OrdererError> {
        opt_duration(self.ferrofabric.queue_timeout.as_deref(), Duration::from_secs(10))
    }

    /// `ChannelParticipation.MaxRequestBodySize` in bytes, default 1 MiB (Fabric's default "1 MB").
    pub fn max_request_body_size(&self) -> Result<usize, OrdererError> {
        match &self.channel_participation.max_request_body_size {
            None | Some(serde_yaml::Value::Null) => Ok(1 << 20),
            Some(serde_yaml::Value::Number(n)) => n
                .as_u64()
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| OrdererError::BadSize(format!("bad MaxRequestBodySize {n}"))),
            Some(serde_yaml::Value::String(s)) => parse_size(s),
            Some(other) => Err(OrdererError::BadSize(format!("bad MaxRequestBodySize {other:?}"))),
        }
    }
}

fn opt_duration(s: Option<&str>, default: Duration) -> Result<Duration, OrdererError> {
    match s {
        None | Some("") => Ok(default),
        Some(s) => Ok(parse_duration(s)?),
    }
}

/// Parses a byte size as Fabric's config does: a plain number of bytes or a number with a unit
/// `B`, `KB`, `MB`, `GB` (powers of 1024, as Fabric's `StringToBytesHookFunc`), spaces allowed.
///
/// Errors: malformed number or unknown unit.
pub(crate) fn parse_size(s: &str) -> Result<usize, OrdererError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: usize = t[..split].parse().map_err(|e| OrdererError::BadSize(format!("bad size {s:?}: {e}")))?;
    let mult: usize = match t[split..].trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" => 1 << 10,
        "M" | "MB" => 1 << 20,
        "G" | "GB" => 1 << 30,
        u => return Err(OrdererError::BadSize(format!("bad size {s:?}: unknown unit {u:?}"))),
    };
    n.checked_mul(mult).ok_or_else(|| OrdererError::BadSize(format!("size {s:?} overflows")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fabric_fixture_orderer_yaml_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/fabric-2.5/orderer.yaml");
        let c = OrdererConfig::load(&path).unwrap();
        let base = path.parent().unwrap();
        assert_eq!(c.listen_addr().unwrap(), "127.0.0.1:7050".parse().unwrap());
        assert!(c.general.tls.enabled);
        assert!(!c.general.tls.client_auth_required);
        assert!(c.general.tls.client_root_cas.is_empty());
        assert_eq!(c.general.local_msp_id.as_deref(), Some("OrdererMSP"));
        assert_eq!(
            c.general.local_msp_dir.as_deref(),
            Some(
                base.join("organizations/ordererOrganizations/example.com/orderers/orderer.example.com/msp").as_path()
            )
        );
        assert_eq!(c.file_ledger.location.as_deref(), Some(base.join("orderer/data").as_path()));
        assert_eq!(c.admin.listen_address, "127.0.0.1:7053");
        assert!(c.admin.tls.client_auth_required);
        assert_eq!(c.admin.tls.client_root_cas.len(), 1);
        assert_eq!(c.operations.listen_address, "127.0.0.1:8443");
        assert_eq!(c.max_request_body_size().unwrap(), 1 << 20);
        assert_eq!(c.time_window().unwrap(), Duration::from_secs(900));
        assert!(c.consensus.wal_dir.unwrap().ends_with("orderer/data/etcdraft/wal"));
        assert_eq!(c.ferrofabric, TuningConfig::default());
    }

    #[test]
    fn fabrics_sample_orderer_yaml_takes_docker_compose_environment_overrides() {
        for version in ["2.5.16", "3.1.5"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("../../../shared/fabric/{version}/config/orderer.yaml"));
            let text = std::fs::read_to_string(&path).unwrap();
            let vars = [
                ("ORDERER_GENERAL_LISTENADDRESS", "0.0.0.0"),
                ("ORDERER_GENERAL_LISTENPORT", "7055"),
                ("ORDERER_GENERAL_LOCALMSPID", "Org9MSP"),
                ("ORDERER_GENERAL_LOCALMSPDIR", "/var/hyperledger/orderer/msp"),
                ("ORDERER_GENERAL_TLS_ENABLED", "true"),
                ("ORDERER_GENERAL_TLS_ROOTCAS", "[/var/hyperledger/orderer/tls/ca.crt]"),
                ("ORDERER_ADMIN_LISTENADDRESS", "0.0.0.0:7053"),
                ("ORDERER_FILELEDGER_LOCATION", "/var/hyperledger/production/orderer"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()));
            let c = OrdererConfig::from_yaml_with_env(&text, Path::new("/cfg"), vars).unwrap();
            assert_eq!(c.listen_addr().unwrap(), "0.0.0.0:7055".parse().unwrap(), "{version}");
            assert_eq!(c.general.local_msp_id.as_deref(), Some("Org9MSP"));
            assert_eq!(c.general.local_msp_dir.as_deref(), Some(Path::new("/var/hyperledger/orderer/msp")));
            assert!(c.general.tls.enabled);
            assert_eq!(c.general.tls.root_cas, vec![PathBuf::from("/var/hyperledger/orderer/tls/ca.crt")]);
            assert_eq!(c.admin.listen_address, "0.0.0.0:7053");
            assert_eq!(c.file_ledger.location.as_deref(), Some(Path::new("/var/hyperledger/production/orderer")));
        }
    }

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(parse_size("1 MB").unwrap(), 1 << 20);
        assert_eq!(parse_size("512 KB").unwrap(), 512 << 10);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("1 XB").is_err());
        assert_eq!(parse_addr("localhost:7050").unwrap(), "127.0.0.1:7050".parse().unwrap());
        assert!(parse_addr("nohost").is_err());
    }
}
