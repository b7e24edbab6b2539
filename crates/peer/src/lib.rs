//! Ferrofabric's peer: one daemon that is a Fabric peer to everything outside it (`ferrofabric peer node start`),
//! composed of the committer, endorser, gateway and chaincode-support crates.
//!
//! * [`PeerConfig`] reads Fabric's `core.yaml` with its `CORE_*` environment overrides.
//! * [`start`] serves, on `peer.listenAddress`, Fabric's Endorser, Deliver (with DeliverFiltered and
//!   DeliverWithPrivateData), Gateway, Discovery and ChaincodeSupport for every channel the peer has joined. A new
//!   peer has joined none: an administrator joins it with `cscc` JoinChain (`peer channel join -b <block>`), after
//!   which it pulls the channel's blocks from the orderers its configuration names (the BFT deliverer on a BFT
//!   channel), and it resumes every joined channel when it restarts. Chaincode is installed with `_lifecycle`
//!   (`peer lifecycle chaincode install`) and runs as a service or dials the peer (the `chaincode-support` crate).
//!
//! Each channel has its own committer (validation, block store, state checkpoint), whose internal Deliver listener
//! its endorser's replica follows (FastFabric §III-G: endorsement beside, not inside, the commit path).

mod channels;
mod config;
mod services;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{anyhow, Context};
use ferrofabric_chaincode_support::{ChaincodeSupport, Timeouts};
use ferrofabric_comm::{Shutdown, ShutdownTrigger};
use ferrofabric_deliver::PeerDeliverService;
use ferrofabric_endorser::{PeerEndorser, MAX_MESSAGE_SIZE};
use ferrofabric_msp::{Msp, MspManager, SigningIdentity};
use ferrofabric_protos::discovery::discovery_server::DiscoveryServer;
use ferrofabric_protos::gateway::gateway_server::GatewayServer;
use ferrofabric_protos::peer::endorser_server::EndorserServer;
use tokio::task::JoinHandle;

pub use config::{AddressOverride, PeerConfig};

use crate::channels::{Channels, Context as ChannelContext};
use crate::services::{PeerDiscovery, PeerGateway};

/// A running peer. Dropping it does not stop it; call [`RunningPeer::shutdown`].
pub struct RunningPeer {
    /// The bound `peer.listenAddress`.
    pub addr: SocketAddr,
    /// The bound `peer.chaincodeListenAddress`, if configured.
    pub chaincode_addr: Option<SocketAddr>,
    /// The bound `operations.listenAddress`, if enabled.
    pub operations_addr: Option<SocketAddr>,
    channels: Arc<Channels>,
    trigger: ShutdownTrigger,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for RunningPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningPeer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl RunningPeer {
    /// The height (number of blocks) of every joined channel's committed chain, by channel ID.
    pub fn heights(&self) -> BTreeMap<String, u64> {
        self.channels.heights()
    }

    /// Stops the listeners (open streams are cut after 2 s), then every channel's committer, each leaving a final
    /// checkpoint.
    ///
    /// Errors: a committer's pipeline had failed.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.trigger.fire();
        let aborts: Vec<_> = self.tasks.iter().map(JoinHandle::abort_handle).collect();
        if tokio::time::timeout(std::time::Duration::from_secs(2), futures::future::join_all(self.tasks)).await.is_err()
        {
            aborts.iter().for_each(|a| a.abort());
        }
        self.channels.shutdown().await
    }
}

/// The address this peer's gateway reaches its own Endorser at: `peer.address`, whose port 0 (a test's free port)
/// becomes the bound one.
fn own_address(configured: &str, bound: SocketAddr) -> String {
    match configured.rsplit_once(':') {
        Some((host, "0")) => format!("{host}:{}", bound.port()),
        _ => configured.to_owned(),
    }
}

/// Starts a peer on the current (multi-threaded) Tokio runtime: loads the local MSP and signing identity, opens
/// the chaincode package store, binds the listeners, resumes every channel joined before, and serves.
///
/// Errors: unreadable MSP or TLS files, an address in use, a joined channel that cannot be resumed.
pub async fn start(config: PeerConfig) -> anyhow::Result<RunningPeer> {
    let mspid = config.local_msp_id.clone();
    let msp_dir = config.msp_config_path.clone();
    let signer = Arc::new(
        SigningIdentity::from_msp_dir(&mspid, &msp_dir)
            .with_context(|| format!("loading the signing identity of {mspid} from {}", msp_dir.display()))?,
    );
    let local = Msp::from_msp_dir(&mspid, &msp_dir)
        .with_context(|| format!("loading the local MSP {mspid} from {}", msp_dir.display()))?;
    let local = Arc::new(MspManager::new(vec![local]));
    let packages = config.file_system_path.join("lifecycle").join("chaincodes");
    let timeouts = Timeouts { execute: config.execute_timeout, startup: config.startup_timeout };
    let chaincodes = ChaincodeSupport::new(&packages, timeouts)
        .map_err(|e| anyhow!("the chaincode package store {}: {e}", packages.display()))?;

    let listen = ferrofabric_comm::parse_addr(&config.listen_address)?;
    let (incoming, addr) =
        ferrofabric_comm::bind_grpc(listen).with_context(|| format!("binding {}", config.listen_address))?;
    let (trigger, shutdown) = Shutdown::new();
    let channels = Arc::new(Channels::new(ChannelContext {
        config: config.clone(),
        signer: signer.clone(),
        chaincodes: chaincodes.clone(),
        shutdown: shutdown.clone(),
        address: own_address(&config.address, addr),
    }));
    channels.resume().await?;

    let mut tasks = Vec::new();
    let endorser = PeerEndorser::new(local, signer, Some(chaincodes.clone()), channels.clone());
    let deliver = PeerDeliverService::over(channels.clone(), config.time_window, None, shutdown.clone());
    let mut router = ferrofabric_comm::grpc_server_builder(&config.tls)?
        .add_service(
            EndorserServer::new(endorser)
                .max_decoding_message_size(MAX_MESSAGE_SIZE)
                .max_encoding_message_size(MAX_MESSAGE_SIZE),
        )
        .add_service(ferrofabric_comm::StreamService(deliver))
        .add_service(
            DiscoveryServer::new(PeerDiscovery(channels.clone()))
                .max_decoding_message_size(MAX_MESSAGE_SIZE)
                .max_encoding_message_size(MAX_MESSAGE_SIZE),
        )
        .add_service(chaincodes.register_service());
    if config.gateway_enabled {
        router = router.add_service(
            GatewayServer::new(PeerGateway(channels.clone()))
                .max_decoding_message_size(MAX_MESSAGE_SIZE)
                .max_encoding_message_size(MAX_MESSAGE_SIZE),
        );
    }
    tasks.push(ferrofabric_comm::spawn_grpc_server(router, incoming, shutdown.clone()));

    let chaincode_addr = match &config.chaincode_listen_address {
        Some(listen) => {
            let listen = ferrofabric_comm::parse_addr(listen)?;
            let (cc_incoming, bound) = ferrofabric_comm::bind_grpc(listen)
                .with_context(|| format!("binding the chaincode listener {listen}"))?;
            let cc_router =
                ferrofabric_comm::grpc_server_builder(&config.tls)?.add_service(chaincodes.register_service());
            tasks.push(ferrofabric_comm::spawn_grpc_server(cc_router, cc_incoming, shutdown.clone()));
            Some(bound)
        }
        None => None,
    };

    let operations_addr = match config.operations_listen_address.as_str() {
        "" => None,
        listen => {
            let listen = ferrofabric_comm::parse_addr(listen)?;
            let (_, health) = tokio::sync::watch::channel(None);
            let router = ferrofabric_comm::operations_router(Arc::new(prometheus::Registry::new()), health, "peer");
            let tls = match config.operations_tls.enabled {
                true => Some(ferrofabric_comm::http_server_tls(&config.operations_tls)?),
                false => None,
            };
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("binding the operations listener {listen}"))?;
            let bound = listener.local_addr()?;
            tasks.push(tokio::spawn(ferrofabric_comm::serve_http(listener, router, tls, shutdown.clone())));
            Some(bound)
        }
    };
    Ok(RunningPeer { addr, chaincode_addr, operations_addr, channels, trigger, tasks })
}
