//! A running committer: recovery, the commit pipeline, and the listeners ([`start`], [`RunningCommitter`], whose
//! documentation describes the threads and the durability).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use ferrofabric_block_store::BlockStore;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_validator::ValidatorOptions;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use ferrofabric_comm::{parse_addr, parse_duration, ClientTls, DeliverApi, Health, Shutdown, ShutdownTrigger};
use ferrofabric_deliver::{DeliverLedger, DeliverMetrics, Follower, PeerDeliverService};

use crate::checkpoint::StateMirror;
use crate::config::{Accelerator, CommitterConfig};
use crate::metrics::{CardMetrics, CommitMetrics};

use crate::recovery::{open_store, recover, Recovery};
use crate::storing::{Status, StoreStage};
use crate::validating::{Engine, ValidateStage};

/// A running committer: recovery, the commit pipeline, and the listeners. Dropping it does not stop it; call
/// [`RunningCommitter::shutdown`].
///
/// # Threads (FastFabric III-D, Opt P-II/P-III)
/// ```text
/// orderers ──Deliver──▶ follower task ──(≤ BlocksInFlight)──▶ validator thread ──(≤ BlocksInFlight)──▶ store thread
///                          ▲   restart(N) on a refused block ◀──┘   (pipelined validator,            (append, metrics)
///                                                                     rayon pool of ValidationThreads)       │
/// store ──▶ peer Deliver (gRPC) ──▶ SDK event listeners, block-store service, endorser replicas      checkpoint thread
/// ```
/// The validator thread runs [`Validator::commit_blocks`]: while block N's MVCC and commit run, block N+1's
/// stateless checks (orderer signatures included) already run on the pool. The store thread writes each validated
/// block with its TRANSACTIONS_FILTER and COMMIT_HASH (the bytes a Fabric peer stores) and publishes it; consumers
/// read committed blocks from the store through Deliver at their own pace, resuming from their own height, so a
/// slow or restarted consumer neither blocks the committer nor loses a block (FastFabric III-F/III-G).
///
/// # Durability
/// The world state lives in memory. The checkpoint thread keeps its own copy, applying each block's updates once
/// the store thread has appended it; every `CheckpointInterval` blocks it makes the block store durable up to that
/// block (appends go on meanwhile) and writes its copy as a [`Checkpoint`], encoding it at the lowest CPU priority.
/// So no block waits for a checkpoint. The block store is the record of what was committed; blocks are stored as
/// the peer bytes, and re-validating them gives the same results because neither the data hash nor the orderer
/// signatures cover the TRANSACTIONS_FILTER and COMMIT_HASH entries (the validator reads only SIGNATURES).
///
/// On start the committer resumes from the checkpoint when it matches the stored chain (header hash and COMMIT_HASH
/// of its block) and re-validates only the stored blocks after it, or every stored block when there is no usable
/// checkpoint; each re-validated block's filter and commit hash must equal the stored ones. Then it asks the
/// orderers for the blocks from its height on. A `kill -9` at any moment loses at most blocks that were not yet
/// appended; they are fetched again, so the final state and every commit hash equal those of an uninterrupted run.
pub struct RunningCommitter {
    /// Bound address of the peer Deliver listener.
    pub deliver_addr: SocketAddr,
    /// Bound address of the operations listener, if enabled.
    pub operations_addr: Option<SocketAddr>,
    /// The committed blocks.
    pub store: Arc<BlockStore>,
    /// What recovery did at start.
    pub recovery: Recovery,
    status: watch::Receiver<Status>,
    shutdown: ShutdownTrigger,
    follower: JoinHandle<()>,
    pipeline: JoinHandle<anyhow::Result<()>>,
    listeners: Vec<JoinHandle<()>>,
    deliver: PeerDeliverService,
    deliver_ledger: DeliverLedger,
}

impl std::fmt::Debug for RunningCommitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningCommitter")
            .field("deliver_addr", &self.deliver_addr)
            .field("operations_addr", &self.operations_addr)
            .field("status", &*self.status.borrow())
            .finish_non_exhaustive()
    }
}

impl RunningCommitter {
    /// A receiver of the progress (height, commit hash, failure).
    pub fn status(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// Another handle on the peer Deliver service this committer serves (same ledger, configuration and metrics),
    /// for a process that serves it on further listeners: `ferrofabric node` puts it next to `protos.Endorser` on
    /// each peer port, as a Fabric peer address serves both.
    pub fn deliver_service(&self) -> PeerDeliverService {
        self.deliver.clone()
    }

    /// What the peer Deliver service reads of this committer (its block store and channel configuration), for a
    /// Deliver service that serves several channels.
    pub fn deliver_ledger(&self) -> DeliverLedger {
        self.deliver_ledger.clone()
    }

    /// Waits until the chain has `height` blocks or the pipeline fails.
    ///
    /// Errors: the pipeline failed first.
    pub async fn wait_for_height(&self, height: u64) -> anyhow::Result<()> {
        let mut rx = self.status.clone();
        let s = rx.wait_for(|s| s.height >= height || s.failed.is_some()).await?;
        match &s.failed {
            Some(reason) => Err(anyhow!("committer failed: {reason}")),
            None => Ok(()),
        }
    }

    /// Runs until the pipeline fails (returning its error) or `stop` completes (then shuts down cleanly).
    ///
    /// Errors: the pipeline's error.
    pub async fn run_until(mut self, stop: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
        let mut status = self.status.clone();
        tokio::select! {
            _ = stop => {}
            _ = status.wait_for(|s| s.failed.is_some()) => {}
        }
        let failed = self.status.borrow().failed.clone();
        self.stop().await?;
        match failed {
            Some(reason) => Err(anyhow!(reason)),
            None => Ok(()),
        }
    }

    /// Stops following the orderers, lets the pipeline store what it has validated, writes a final checkpoint and
    /// closes the listeners.
    ///
    /// Errors: the pipeline had failed.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        self.stop().await
    }

    async fn stop(&mut self) -> anyhow::Result<()> {
        self.follower.abort();
        let _ = (&mut self.follower).await;
        let result = match (&mut self.pipeline).await {
            Ok(r) => r,
            Err(e) => Err(anyhow!("pipeline task: {e}")),
        };
        self.shutdown.fire();
        for l in self.listeners.drain(..) {
            let _ = l.await;
        }
        result
    }
}

/// Starts a committer from `config` on the current (multi-threaded) Tokio runtime: recovery, then the pipeline,
/// the peer Deliver listener and the operations listener.
///
/// Errors: invalid configuration, unreadable MSP, genesis block or TLS files, recovery failures (see [`recover`]),
/// listeners that cannot bind.
pub async fn start(config: CommitterConfig) -> anyhow::Result<RunningCommitter> {
    config.validate()?;
    let data_dir = config.data_dir.clone().ok_or_else(|| anyhow!("DataDir is not set"))?;
    std::fs::create_dir_all(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    let (msp_dir, msp_id) = match (&config.local_msp_dir, &config.local_msp_id) {
        (Some(d), Some(id)) => (d.clone(), id.clone()),
        _ => bail!("LocalMSPDir and LocalMSPID must be set"),
    };
    let signer = Arc::new(
        SigningIdentity::from_msp_dir(&msp_id, &msp_dir)
            .with_context(|| format!("loading the local MSP {msp_id} from {}", msp_dir.display()))?,
    );
    let genesis = match &config.genesis_block {
        Some(p) => Some(Bytes::from(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?)),
        None => None,
    };
    let store = Arc::new(open_store(&data_dir, config.sync_every_block)?);
    let options = ValidatorOptions { threads: config.pipeline.validation_threads };
    let (validator, recovery) = {
        let (store, dir) = (store.clone(), data_dir.clone());
        tokio::task::spawn_blocking(move || recover(&store, &dir, genesis, options)).await??
    };
    let channel_config = validator.channel_config().clone();
    let channel_id = channel_config.channel_id().to_owned();
    if let Some(c) = &config.channel {
        if *c != channel_id {
            bail!("Channel is {c:?} but the genesis block is of channel {channel_id:?}");
        }
    }
    tracing::info!(
        channel = %channel_id,
        height = store.height(),
        replayed = recovery.replayed,
        elapsed = ?recovery.elapsed,
        checkpoint = ?recovery.checkpoint.map(|c| c.0),
        "recovered"
    );

    let registry = Arc::new(prometheus::Registry::new());
    let metrics = CommitMetrics::register(&registry, &channel_id)?;
    metrics.set_height(store.height());
    let deliver_metrics = DeliverMetrics::register(&registry)?;
    let (config_tx, config_rx) = watch::channel(Some(channel_config.clone()));
    let attestation_config = config_rx.clone();
    let (status_tx, status_rx) =
        watch::channel(Status { height: store.height(), commit_hash: validator.commit_hash(), failed: None });
    let (shutdown_tx, shutdown_rx) = Shutdown::new();

    // Listeners first, so that a bad address fails the start before anything runs.
    let mut listeners = Vec::new();
    let ledger = DeliverLedger { channel_id: channel_id.clone(), store: store.clone(), config: config_rx };
    let service = PeerDeliverService::with_shutdown(
        ledger.clone(),
        parse_duration(&config.time_window)?,
        Some(deliver_metrics),
        shutdown_rx.clone(),
    );
    let (deliver_addr, task) =
        ferrofabric_comm::grpc_listener(&config.listen_address, &config.tls, shutdown_rx.clone(), |b| {
            b.add_service(ferrofabric_comm::StreamService(service.clone()))
        })?;
    listeners.push(task);
    let mut operations_addr = None;
    if !config.operations_listen_address.is_empty() {
        let health = health_from_status(status_rx.clone());
        let router = ferrofabric_comm::operations_router(registry.clone(), health, "committer");
        let (addr, task) = ferrofabric_comm::serve_operations(
            parse_addr(&config.operations_listen_address)?,
            router,
            shutdown_rx.clone(),
        )
        .await?;
        operations_addr = Some(addr);
        listeners.push(task);
    }

    // The pipeline.
    let in_flight = config.pipeline.blocks_in_flight;
    let (blocks_tx, blocks_rx) = mpsc::channel(in_flight);
    let (restart_tx, restart_rx) = mpsc::channel(4);
    let (jobs_tx, jobs_rx) = std::sync::mpsc::sync_channel(in_flight);
    let mirror = StateMirror::new(validator.state());
    let engine = match &config.accelerator {
        None => Engine::Software(validator),
        Some(spec) => {
            tracing::info!(accelerator = %spec, "blocks are validated by the BMac card");
            Engine::Card {
                accelerator: Accelerator::parse(spec)?,
                store: store.clone(),
                last_block: validator.last_block_number(),
                commit_hash: validator.commit_hash(),
                metrics: CardMetrics::register(&registry, &channel_id)?,
            }
        }
    };
    let store_stage = StoreStage {
        store: store.clone(),
        data_dir: data_dir.clone(),
        config_tx,
        metrics,
        status: status_tx.clone(),
        mirror,
    };
    let validate_stage = ValidateStage {
        engine,
        blocks: blocks_rx,
        restart: restart_tx,
        jobs: jobs_tx,
        checkpoint_interval: config.checkpoint_interval,
    };
    let store_thread =
        std::thread::Builder::new().name("committer-store".into()).spawn(move || store_stage.run(jobs_rx))?;
    let validate_thread =
        std::thread::Builder::new().name("committer-validate".into()).spawn(move || validate_stage.run())?;
    let status_for_pipeline = status_tx;
    let pipeline = tokio::task::spawn_blocking(move || {
        let validated = validate_thread.join().map_err(|_| anyhow!("the validator thread panicked")).and_then(|r| r);
        let stored = store_thread.join().map_err(|_| anyhow!("the store thread panicked")).and_then(|r| r);
        let result = validated.and(stored);
        if let Err(e) = &result {
            tracing::error!(error = format!("{e:#}"), "the commit pipeline stopped");
            status_for_pipeline.send_modify(|s| s.failed = Some(format!("{e:#}")));
        }
        result
    });

    let mut follow = config.delivery.follow_config(
        config.orderers.clone(),
        DeliverApi::Orderer,
        channel_id.clone(),
        ClientTls::from_config(&config.orderer_tls)?,
    )?;
    if channel_config.orderer().is_some_and(|o| o.consensus_type() == "BFT") {
        // Fabric 3's BFT deliverer: blocks from one orderer, attestations from the others.
        let verifier = Arc::new(ConfigAttestations(attestation_config));
        follow.bft = Some(config.delivery.bft_follow(verifier)?);
    }
    let follower = tokio::spawn(Follower::new(follow, signer).run(store.height(), blocks_tx, Some(restart_rx)));

    Ok(RunningCommitter {
        deliver_addr,
        operations_addr,
        store,
        recovery,
        status: status_rx,
        shutdown: shutdown_tx,
        follower,
        pipeline,
        listeners,
        deliver: service,
        deliver_ledger: ledger,
    })
}

/// `/healthz` failure reason from the pipeline status.
fn health_from_status(mut status: watch::Receiver<Status>) -> Health {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        while status.changed().await.is_ok() {
            let failed = status.borrow().failed.clone();
            if failed.is_some() {
                tx.send_replace(failed);
                return;
            }
        }
    });
    rx
}

/// Checks the BFT deliverer's attestations under the channel configuration in force (the last committed config
/// block's), as Fabric's peer does with its channel's block verifier.
struct ConfigAttestations(watch::Receiver<Option<Arc<ChannelConfig>>>);

impl ferrofabric_deliver::AttestationVerifier for ConfigAttestations {
    fn verify(&self, block: &Bytes) -> Result<u64, ferrofabric_deliver::AttestationError> {
        let config = self.0.borrow().clone().ok_or(ferrofabric_deliver::AttestationError::NoConfig)?;
        Ok(ferrofabric_channelconfig::verify_block_attestation(&config, block.clone())?)
    }
}
