//! `ferrofabric endorser`: an endorsing peer of one channel. Configuration is a small YAML file whose keys mirror
//! the flags; flags override the file:
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

use crate::{bind, follow::follow, serve, Endorser, Replica};

/// Arguments of `ferrofabric endorser`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EndorserArgs {
    /// Configuration file (YAML, keys as the flags below with `_` for `-`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// gRPC listen address `host:port` (default 127.0.0.1:7051).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The peer's MSP directory in cryptogen's layout (signcerts/, keystore/).
    #[arg(long, value_name = "DIR")]
    pub msp_dir: Option<PathBuf>,
    /// The peer's MSP ID (e.g. Org1MSP).
    #[arg(long, value_name = "ID")]
    pub msp_id: Option<String>,
    /// The channel's genesis (config) block.
    #[arg(long, value_name = "FILE", alias = "channel-config")]
    pub genesis: Option<PathBuf>,
    /// The committer's peer Deliver endpoint to follow (`http://host:port`); without it the state stays at genesis.
    #[arg(long, value_name = "URL")]
    pub committer: Option<String>,
}

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

fn default_listen() -> String {
    "127.0.0.1:7051".into()
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    msp_dir: Option<PathBuf>,
    msp_id: Option<String>,
    genesis: Option<PathBuf>,
    committer: Option<String>,
}

impl EndorserArgs {
    /// The configuration: the file (if any) with the flags applied; relative paths in the file are relative to it.
    ///
    /// Errors: unreadable or malformed file, or `msp_dir`, `msp_id` or `genesis` missing from both.
    pub fn to_config(&self) -> anyhow::Result<EndorserConfig> {
        let (file, base) = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                let f: FileConfig =
                    serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
                (f, path.parent().map(Path::to_path_buf).unwrap_or_default())
            }
            None => (FileConfig::default(), PathBuf::new()),
        };
        let rel = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
        Ok(EndorserConfig {
            listen: self.listen.clone().or(file.listen).unwrap_or_else(default_listen),
            msp_dir: self.msp_dir.clone().or(file.msp_dir.map(rel)).context("msp_dir is required")?,
            msp_id: self.msp_id.clone().or(file.msp_id).context("msp_id is required")?,
            genesis: self.genesis.clone().or(file.genesis.map(rel)).context("genesis is required")?,
            committer: self.committer.clone().or(file.committer),
        })
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

/// Runs `ferrofabric endorser` until Ctrl-C or SIGTERM. Builds its own multi-threaded Tokio runtime, so it must not
/// be called from within one.
///
/// Errors: configuration or start-up errors (see [`start`]).
pub fn run(args: EndorserArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("endorser")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let running = start(&config).await?;
        println!(
            "endorser {} listening on {} (channel {}, following {})",
            config.msp_id,
            running.addr,
            running.endorser.replica().channel_id(),
            config.committer.as_deref().unwrap_or("-")
        );
        ferrofabric_comm::shutdown::wait_for_signal().await;
        running.shutdown().await;
        Ok(())
    })
}
