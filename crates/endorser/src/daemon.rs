//! Running an endorser: [`EndorserConfig`] (from a small YAML file, [`EndorserFile`]) and [`start`]. The
//! `ferrofabric endorser` command loads the file, applies its flags and calls [`start`]. The file's keys:
//!
//! ```yaml
//! listen: 127.0.0.1:7051          # gRPC listen address (protos.Endorser; gateway.Gateway and discovery.Discovery
//!                                 # too with a gateway section)
//! msp_dir: crypto/peerOrganizations/org1.example.com/peers/peer0.org1.example.com/msp
//! msp_id: Org1MSP
//! genesis: channel-artifacts/mychannel.block   # the channel's config block 0
//! committer: 127.0.0.1:7052                    # peer Deliver endpoint to follow (optional)
//! tls: {Enabled: true, Certificate: tls/server.crt, PrivateKey: tls/server.key}   # the listener's TLS
//! committer_tls: {Enabled: true, RootCAs: [tls/ca.crt]}                         # towards the committer
//! operations_listen: 127.0.0.1:9445            # /metrics, /healthz, /version (optional)
//! file_system_path: /var/ferrofabric/peer0     # installed chaincode packages under lifecycle/chaincodes (optional)
//! chaincode_listen: 127.0.0.1:7052             # where chaincodes that dial the peer register (optional)
//! history_database: true                       # keep every key's history for GetHistoryForKey (default false)
//! gateway:                                     # optional: the Gateway and discovery services on this port
//!   peers:                                     # every endorsing peer of the channel, this one included
//!     - {msp_id: Org1MSP, address: 127.0.0.1:7051, msp_dir: .../peer0.org1.example.com/msp}
//!     - {msp_id: Org2MSP, address: 127.0.0.1:9051, msp_dir: .../peer0.org2.example.com/msp}
//!   orderers: [127.0.0.1:7050]                 # empty: the channel configuration's
//!   block_store: 127.0.0.1:7053                # where committed blocks are read (a block-store service)
//!   client_tls: {Enabled: true, RootCAs: [tls-ca.pem]}   # towards peers, orderers and the block store
//! ```
//!
//! A gateway peer whose MSP directory holds its key signs its gossip messages in discovery answers; the others'
//! are passed on unsigned.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use ferrofabric_chaincode::Registry;
use ferrofabric_chaincode_support::{ChaincodeSupport, Timeouts};
use ferrofabric_comm::{ClientTls, ClientTlsConfig, Shutdown, ShutdownTrigger, TlsConfig};
use ferrofabric_gateway::{EndorserEndpoint, Gateway, GatewayConfig, GossipSigner};
use ferrofabric_msp::SigningIdentity;

use crate::gateway::{BlockSource, DaemonLedger, RecentBlocks};
use crate::{follow_with, grpc_service, Endorser, Replica};

/// The resolved configuration of an endorser.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndorserConfig {
    /// gRPC listen address.
    pub listen: String,
    /// The peer's MSP directory.
    pub msp_dir: PathBuf,
    /// The peer's MSP ID.
    pub msp_id: String,
    /// The channel's genesis block file.
    pub genesis: PathBuf,
    /// Peer Deliver endpoint to follow (`host:port`; an `http://` or `https://` prefix is ignored: `committer_tls`
    /// decides).
    pub committer: Option<String>,
    /// TLS of the gRPC listener.
    pub tls: TlsConfig,
    /// TLS towards the committer.
    pub committer_tls: ClientTlsConfig,
    /// Operations listen address (`/metrics`, `/healthz`, `/version`); `None` or empty: none.
    pub operations_listen: Option<String>,
    /// The Gateway and discovery services on the same port, when given.
    pub gateway: Option<GatewaySection>,
    /// The peer's file system path (`peer.fileSystemPath`): installed chaincode packages live in
    /// `lifecycle/chaincodes` under it. `None`: only the built-in chaincodes run.
    pub file_system_path: Option<PathBuf>,
    /// Where chaincodes that dial the peer register (`peer.chaincodeListenAddress`); they may also use the main
    /// listener. Needs `file_system_path`.
    pub chaincode_listen: Option<String>,
    /// Keep the history of every key for chaincodes' `GetHistoryForKey` (`ledger.history.enableHistoryDatabase`).
    pub history_database: bool,
}

/// The `gateway` section of an endorser's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewaySection {
    /// Every endorsing peer of the channel, this one included.
    pub peers: Vec<GatewayPeer>,
    /// The orderers to submit to (`host:port`); empty: the endpoints of the channel configuration.
    #[serde(default)]
    pub orderers: Vec<String>,
    /// The block-store service (`host:port`) that holds the peer's committed blocks, for commit statuses and
    /// chaincode events older than the blocks this endorser keeps.
    #[serde(default)]
    pub block_store: Option<String>,
    /// TLS of the gateway's connections to peers, orderers and the block store.
    #[serde(default)]
    pub client_tls: ClientTlsConfig,
}

/// One endorsing peer of a [`GatewaySection`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayPeer {
    /// Its organisation's MSP ID.
    pub msp_id: String,
    /// Its `host:port`.
    pub address: String,
    /// Its MSP directory: `signcerts/` names it; with `keystore/`, its gossip messages are signed.
    pub msp_dir: PathBuf,
}

/// The default listen address, `127.0.0.1:7051`.
pub fn default_listen() -> String {
    "127.0.0.1:7051".into()
}

/// The configuration file: every key optional (flags may supply them), paths as written. The file's keys:
///
/// ```yaml
/// listen: 127.0.0.1:7051          # gRPC listen address (protos.Endorser)
/// msp_dir: crypto/peerOrganizations/org1.example.com/peers/peer0.org1.example.com/msp
/// msp_id: Org1MSP
/// genesis: channel-artifacts/mychannel.block   # the channel's config block 0
/// committer: http://127.0.0.1:7052             # peer Deliver endpoint to follow (optional)
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndorserFile {
    /// gRPC listen address.
    pub listen: Option<String>,
    /// The peer's MSP directory.
    pub msp_dir: Option<PathBuf>,
    /// The peer's MSP ID.
    pub msp_id: Option<String>,
    /// The channel's genesis block file.
    pub genesis: Option<PathBuf>,
    /// Peer Deliver endpoint to follow.
    pub committer: Option<String>,
    /// TLS of the gRPC listener.
    pub tls: Option<TlsConfig>,
    /// TLS towards the committer.
    pub committer_tls: Option<ClientTlsConfig>,
    /// Operations listen address.
    pub operations_listen: Option<String>,
    /// The Gateway and discovery services.
    pub gateway: Option<GatewaySection>,
    /// The peer's file system path (installed chaincode packages).
    pub file_system_path: Option<PathBuf>,
    /// The chaincode listener.
    pub chaincode_listen: Option<String>,
    /// Keep the history of every key (default off).
    pub history_database: Option<bool>,
}

impl EndorserFile {
    /// Reads `path`; relative `msp_dir` and `genesis` are made relative to the file's directory.
    ///
    /// Errors: unreadable file, malformed YAML or unknown keys.
    pub fn load(path: &Path) -> anyhow::Result<EndorserFile> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let f: EndorserFile = serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let rel = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
        let mut f = EndorserFile {
            msp_dir: f.msp_dir.map(rel),
            genesis: f.genesis.map(rel),
            file_system_path: f.file_system_path.map(rel),
            ..f
        };
        if let Some(t) = &mut f.tls {
            t.resolve_paths(&base);
        }
        if let Some(t) = &mut f.committer_tls {
            t.resolve_paths(&base);
        }
        if let Some(g) = &mut f.gateway {
            g.client_tls.resolve_paths(&base);
            for p in &mut g.peers {
                p.msp_dir = rel(std::mem::take(&mut p.msp_dir));
            }
        }
        Ok(f)
    }
}

/// A started endorser (see [`start`]).
pub struct RunningEndorser {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The operations listener's address, if it has one.
    pub operations_addr: Option<SocketAddr>,
    /// The endorser (its replica can be fed directly by an in-process committer).
    pub endorser: Endorser,
    trigger: ShutdownTrigger,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningEndorser {
    /// Stops serving and following, and waits for both.
    pub async fn shutdown(self) {
        self.trigger.fire();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// `address` without an `http://` or `https://` prefix.
fn host_port(address: &str) -> &str {
    address.trim_start_matches("http://").trim_start_matches("https://")
}

/// The gateway's view of the channel's peers: each peer's identity from its MSP directory's `signcerts/`, and a
/// gossip signer for those whose `keystore/` is there too.
///
/// Errors: a peer whose MSP directory has no readable certificate.
fn gateway_peers(peers: &[GatewayPeer]) -> anyhow::Result<(Vec<EndorserEndpoint>, HashMap<String, GossipSigner>)> {
    let mut endpoints = Vec::with_capacity(peers.len());
    let mut signers = HashMap::new();
    for p in peers {
        let identity = match SigningIdentity::from_msp_dir(&p.msp_id, &p.msp_dir) {
            Ok(signer) => {
                let identity = signer.serialized().clone();
                signers.insert(p.address.clone(), GossipSigner(Arc::new(move |m: &[u8]| signer.sign(m))));
                identity
            }
            Err(_) => {
                let certs = p.msp_dir.join("signcerts");
                let cert = std::fs::read_dir(&certs)
                    .with_context(|| format!("reading {}", certs.display()))?
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .find(|path| path.is_file())
                    .with_context(|| format!("no certificate in {}", certs.display()))?;
                let pem = std::fs::read(&cert).with_context(|| format!("reading {}", cert.display()))?;
                let sid = ferrofabric_protos::msp::SerializedIdentity { mspid: p.msp_id.clone(), id_bytes: pem.into() };
                Bytes::from(prost::Message::encode_to_vec(&sid))
            }
        };
        endpoints.push(EndorserEndpoint { mspid: p.msp_id.clone(), address: p.address.clone(), identity });
    }
    Ok((endpoints, signers))
}

/// Starts an endorser in the current Tokio runtime: loads the genesis block and the signing identity, binds the
/// listener (TLS as configured), serves Endorser (and Gateway and discovery with a gateway section), follows the
/// committer if one is configured, and serves the operations endpoints if asked.
///
/// Errors: unreadable genesis, MSP directory or TLS files, unusable genesis block, address in use.
pub async fn start(config: &EndorserConfig) -> anyhow::Result<RunningEndorser> {
    let genesis = std::fs::read(&config.genesis).with_context(|| format!("reading {}", config.genesis.display()))?;
    let mut replica = Replica::from_genesis(Bytes::from(genesis)).context("loading the genesis block")?;
    if config.history_database {
        replica = replica.with_history();
    }
    let replica = Arc::new(replica);
    let signer = SigningIdentity::from_msp_dir(&config.msp_id, &config.msp_dir)
        .with_context(|| format!("loading the signing identity from {}", config.msp_dir.display()))?;
    let addr: SocketAddr = config.listen.parse().with_context(|| format!("listen address '{}'", config.listen))?;
    let (incoming, addr) = ferrofabric_comm::bind_grpc(addr).with_context(|| format!("binding {}", config.listen))?;
    let follower_signer = Arc::new(signer.clone());
    let (trigger, shutdown) = Shutdown::new();
    let recent = Arc::new(RecentBlocks::new(replica.height()));
    let gateway_tls = match &config.gateway {
        Some(g) => ClientTls::from_config(&g.client_tls).context("the gateway's client TLS")?,
        None => None,
    };
    // The committed blocks qscc, cscc and the gateway read: the follower's window, then the block store.
    let source = config
        .gateway
        .as_ref()
        .and_then(|g| g.block_store.as_ref())
        .map(|a| BlockSource { address: host_port(a).to_owned(), tls: gateway_tls.clone() });
    let ledger = Arc::new(DaemonLedger::new(replica.clone(), recent.clone(), source));
    let mut endorser = Endorser::new(replica.clone(), signer, Registry::builtin()).with_ledger(ledger.clone());
    let mut tasks = Vec::new();
    let chaincodes = match &config.file_system_path {
        Some(dir) => {
            let packages = dir.join("lifecycle").join("chaincodes");
            let support = ChaincodeSupport::new(&packages, Timeouts::default())
                .with_context(|| format!("opening the chaincode package store {}", packages.display()))?;
            endorser = endorser.with_chaincode_support(support.clone());
            Some(support)
        }
        None => None,
    };

    let mut builder = ferrofabric_comm::grpc_server_builder(&config.tls)?;
    let mut router = builder.add_service(grpc_service(endorser.clone()));
    if let Some(c) = &chaincodes {
        router = router.add_service(c.register_service());
        if let Some(listen) = config.chaincode_listen.as_deref().filter(|a| !a.is_empty()) {
            let listen = ferrofabric_comm::parse_addr(listen)?;
            let (cc_incoming, _) =
                ferrofabric_comm::bind_grpc(listen).with_context(|| format!("binding chaincode listener {listen}"))?;
            let cc_router = ferrofabric_comm::grpc_server_builder(&config.tls)?.add_service(c.register_service());
            tasks.push(ferrofabric_comm::spawn_grpc_server(cc_router, cc_incoming, shutdown.clone()));
        }
    }
    if let Some(g) = &config.gateway {
        let tls = gateway_tls;
        let (endorsers, signers) = gateway_peers(&g.peers)?;
        let gateway = Gateway::new(
            GatewayConfig {
                local_mspid: config.msp_id.clone(),
                endorsers,
                orderers: g.orderers.iter().map(|o| host_port(o).to_owned()).collect(),
                tls,
                signers,
                ..GatewayConfig::default()
            },
            ledger,
            shutdown.clone(),
        );
        router = router.add_service(gateway.discovery_service()).add_service(gateway.into_service());
    }
    tasks.push(ferrofabric_comm::spawn_grpc_server(router, incoming, shutdown.clone()));

    let operations_addr = match config.operations_listen.as_deref().filter(|a| !a.is_empty()) {
        Some(listen) => {
            let listen = ferrofabric_comm::parse_addr(listen)?;
            let (_, health) = tokio::sync::watch::channel(None);
            let router = ferrofabric_comm::operations_router(Arc::new(prometheus::Registry::new()), health, "endorser");
            let (bound, task) = ferrofabric_comm::serve_operations(listen, router, shutdown.clone()).await?;
            tasks.push(task);
            Some(bound)
        }
        None => None,
    };
    if let Some(url) = &config.committer {
        let tls = ClientTls::from_config(&config.committer_tls).context("TLS towards the committer")?;
        tasks.push(tokio::spawn(follow_with(
            replica,
            host_port(url).to_owned(),
            tls,
            follower_signer,
            Some(recent),
            shutdown.watch(),
        )));
    }
    Ok(RunningEndorser { addr, operations_addr, endorser, trigger, tasks })
}
