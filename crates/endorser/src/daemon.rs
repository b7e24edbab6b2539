//! Running an endorser: [`EndorserConfig`] (from a small YAML file, [`EndorserFile`]) and [`start`]. The
//! `ferrofabric endorser` command loads the file, applies its flags and calls [`start`]. The file's keys:
//!
//! ```yaml
//! listen: 127.0.0.1:7051          # gRPC listen address (protos.Endorser)
//! msp_dir: crypto/peerOrganizations/org1.example.com/peers/peer0.org1.example.com/msp
//! msp_id: Org1MSP
//! genesis: channel-artifacts/mychannel.block   # the channel's config block 0
//! committer: http://127.0.0.1:7052             # peer Deliver endpoint to follow (optional)
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use ferrofabric_chaincode::Registry;
use ferrofabric_msp::SigningIdentity;
use tokio::sync::watch;

use crate::{bind, follow, serve, Endorser, Replica};

/// The resolved configuration of an endorser.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct EndorserConfig {
    /// gRPC listen address.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The peer's MSP directory.
    pub msp_dir: PathBuf,
    /// The peer's MSP ID.
    pub msp_id: String,
    /// The channel's genesis block file.
    pub genesis: PathBuf,
    /// Peer Deliver endpoint to follow.
    #[serde(default)]
    pub committer: Option<String>,
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
        Ok(EndorserFile { msp_dir: f.msp_dir.map(rel), genesis: f.genesis.map(rel), ..f })
    }
}

/// A started endorser (see [`start`]).
pub struct RunningEndorser {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The endorser (its replica can be fed directly by an in-process committer).
    pub endorser: Endorser,
    shutdown: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningEndorser {
    /// Stops serving and following, and waits for both.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Starts an endorser in the current Tokio runtime: loads the genesis block and the signing identity, binds the
/// listener, serves, and follows the committer if one is configured.
///
/// Errors: unreadable genesis or MSP directory, unusable genesis block, address in use.
pub async fn start(config: &EndorserConfig) -> anyhow::Result<RunningEndorser> {
    let genesis = std::fs::read(&config.genesis).with_context(|| format!("reading {}", config.genesis.display()))?;
    let replica = Arc::new(Replica::from_genesis(Bytes::from(genesis)).context("loading the genesis block")?);
    let signer = SigningIdentity::from_msp_dir(&config.msp_id, &config.msp_dir)
        .with_context(|| format!("loading the signing identity from {}", config.msp_dir.display()))?;
    let addr: SocketAddr = config.listen.parse().with_context(|| format!("listen address '{}'", config.listen))?;
    let (listener, addr) = bind(addr).await.with_context(|| format!("binding {}", config.listen))?;
    let follower_signer = Arc::new(signer.clone());
    let endorser = Endorser::new(replica.clone(), signer, Registry::builtin());
    let (tx, rx) = watch::channel(false);
    let mut tasks = Vec::new();
    let mut srx = rx.clone();
    let e = endorser.clone();
    tasks.push(tokio::spawn(async move {
        let stop = async move {
            let _ = srx.wait_for(|s| *s).await;
        };
        if let Err(err) = serve(e, listener, stop).await {
            tracing::error!(error = %err, "endorser gRPC server");
        }
    }));
    if let Some(url) = &config.committer {
        tasks.push(tokio::spawn(follow(replica, url.clone(), follower_signer, rx)));
    }
    Ok(RunningEndorser { addr, endorser, shutdown: tx, tasks })
}
