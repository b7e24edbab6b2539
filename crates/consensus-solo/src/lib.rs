//! Solo: single-node ordering (Fabric 2.x `orderer/consensus/solo/consensus.go`, removed in Fabric 3).
//!
//! `order`/`configure` put the message on a bounded queue (back-pressure: a full queue makes the caller wait,
//! up to the queue timeout, then SERVICE_UNAVAILABLE). One task takes messages in queue order, re-validates
//! those checked under an older config sequence, runs the [`BlockCutter`], and writes blocks through the
//! support's signing pipeline; the batch timer cuts what is pending `BatchTimeout` after its first message.
//! Config messages cut the pending batch and go alone into their own block.
//!
//! A backend of the orderer core (`ferrofabric-orderer`): [`register`] adds it to a node's
//! [`ConsensusRegistry`] under `solo`. [`SingleRaftNodeFactory`] runs the same loop for an `etcdraft` channel of
//! one consenter; whoever composes the node's backends decides where it serves (`ferrofabric-consensus` hands it
//! the single-consenter channels of a node without Raft WAL directories).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_protos::etcdraft;
use futures::future::BoxFuture;
use futures::FutureExt;
use prost::Message;
use tokio::sync::{mpsc, watch};

use ferrofabric_orderer::BlockCutter;
use ferrofabric_orderer::{
    ChainSupport, ChannelStatus, Consensus, ConsensusContext, ConsensusError, ConsensusFactory, ConsensusRegistry,
    ConsensusRelation, Submission,
};

/// How many queued messages the loop takes per wake-up.
const RECV_BATCH: usize = 512;

enum Msg {
    Normal(Submission),
    Config(Submission),
}

/// A running solo instance for one channel.
pub struct Solo {
    tx: mpsc::Sender<Msg>,
    queue_timeout: Duration,
    halt: watch::Sender<bool>,
    halted: AtomicBool,
    relation: ConsensusRelation,
}

impl std::fmt::Debug for Solo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Solo").field("relation", &self.relation).finish_non_exhaustive()
    }
}

impl Solo {
    /// Starts the ordering loop for `support` on the current Tokio runtime; consenter metadata is empty, as
    /// Fabric's solo writes it.
    pub fn start(support: Arc<ChainSupport>, ctx: &ConsensusContext, relation: ConsensusRelation) -> Arc<Solo> {
        let (tx, rx) = mpsc::channel(ctx.queue_size.max(1));
        let (halt, halt_rx) = watch::channel(false);
        tokio::spawn(run(support, rx, halt_rx));
        Arc::new(Solo { tx, queue_timeout: ctx.queue_timeout, halt, halted: AtomicBool::new(false), relation })
    }

    async fn enqueue(&self, msg: Msg) -> Result<(), ConsensusError> {
        if self.halted.load(Ordering::Relaxed) {
            return Err(ConsensusError("the chain is halted".into()));
        }
        match self.tx.try_send(msg) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(ConsensusError("the chain is halted".into())),
            Err(mpsc::error::TrySendError::Full(msg)) => match self.tx.send_timeout(msg, self.queue_timeout).await {
                Ok(()) => Ok(()),
                Err(mpsc::error::SendTimeoutError::Timeout(_)) => Err(ConsensusError(format!(
                    "the consensus queue stayed full for {:?}; try again later",
                    self.queue_timeout
                ))),
                Err(mpsc::error::SendTimeoutError::Closed(_)) => Err(ConsensusError("the chain is halted".into())),
            },
        }
    }
}

impl Consensus for Solo {
    fn order(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        self.enqueue(Msg::Normal(msg)).boxed()
    }

    fn configure(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        self.enqueue(Msg::Config(msg)).boxed()
    }

    fn relation(&self) -> (ConsensusRelation, ChannelStatus) {
        let status = if self.halted.load(Ordering::Relaxed) { ChannelStatus::Inactive } else { ChannelStatus::Active };
        (self.relation, status)
    }

    fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
        self.halt.send_replace(true);
    }
}

async fn run(support: Arc<ChainSupport>, mut rx: mpsc::Receiver<Msg>, mut halt: watch::Receiver<bool>) {
    let mut cutter = BlockCutter::new();
    let mut buf = Vec::with_capacity(RECV_BATCH);
    let channel = support.channel_id().to_owned();
    loop {
        let (_, timeout) = support.batch_limits();
        let deadline = cutter.deadline(timeout);
        let wake =
            tokio::time::Instant::from_std(deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600)));
        let result = tokio::select! {
            biased;
            _ = halt.changed() => break,
            n = rx.recv_many(&mut buf, RECV_BATCH) => {
                if n == 0 {
                    break;
                }
                let mut r = Ok(());
                for msg in buf.drain(..) {
                    r = handle(&support, &mut cutter, msg).await;
                    if r.is_err() {
                        break;
                    }
                }
                r
            }
            _ = tokio::time::sleep_until(wake), if deadline.is_some() => {
                let batch = cutter.cut();
                if batch.is_empty() {
                    Ok(())
                } else {
                    let block = support.create_next_block(batch);
                    support.write_block(block, Bytes::new()).await
                }
            }
        };
        if let Err(e) = result {
            tracing::error!(%channel, error = %e, "solo chain stops");
            break;
        }
    }
    tracing::debug!(%channel, "solo chain exited");
}

async fn handle(support: &ChainSupport, cutter: &mut BlockCutter<Bytes>, msg: Msg) -> Result<(), ConsensusError> {
    match msg {
        Msg::Normal(sub) => {
            if sub.config_seq < support.sequence() {
                if let Err(r) = support.revalidate(&sub.envelope) {
                    tracing::warn!(channel = %support.channel_id(), tx_id = %sub.tx_id, %r, "discarding bad normal message");
                    return Ok(());
                }
            }
            let (limits, _) = support.batch_limits();
            let (batches, _pending) = cutter.ordered(sub.envelope, sub.size, limits, Instant::now());
            for batch in batches {
                let block = support.create_next_block(batch);
                support.write_block(block, Bytes::new()).await?;
            }
            Ok(())
        }
        Msg::Config(sub) => {
            let mut envelope = sub.envelope;
            if sub.config_seq < support.sequence() {
                match support.reprocess_config(&envelope) {
                    Ok((env, _)) => envelope = env,
                    Err(r) => {
                        tracing::warn!(channel = %support.channel_id(), %r, "discarding bad config message");
                        return Ok(());
                    }
                }
            }
            let batch = cutter.cut();
            if !batch.is_empty() {
                let block = support.create_next_block(batch);
                support.write_block(block, Bytes::new()).await?;
            }
            let block = support.create_next_block(vec![envelope]);
            support.write_config_block(block, Bytes::new()).await
        }
    }
}

/// Registers solo in `registry`: [`SoloFactory`] under `solo` (replacing what was there).
pub fn register(registry: &mut ConsensusRegistry) {
    registry.register("solo", Arc::new(SoloFactory));
}

/// Starts [`Solo`] for channels of consensus type `solo` (relation "other").
#[derive(Debug, Clone, Copy, Default)]
pub struct SoloFactory;

impl ConsensusFactory for SoloFactory {
    fn start(&self, support: Arc<ChainSupport>, ctx: &ConsensusContext) -> Result<Arc<dyn Consensus>, ConsensusError> {
        Ok(Solo::start(support, ctx, ConsensusRelation::Other))
    }
}

/// Serves an `etcdraft` channel whose consenter set is exactly one node with the solo loop: with one voter,
/// Raft commits every proposal at once, so the order of blocks is the same. For nodes that cannot run Raft (no
/// WAL directories); channels with more consenters are refused. If this node's TLS certificate is known and
/// is not the consenter's, the channel is refused too (following is not implemented).
#[derive(Debug, Clone, Copy, Default)]
pub struct SingleRaftNodeFactory;

impl ConsensusFactory for SingleRaftNodeFactory {
    fn start(&self, support: Arc<ChainSupport>, ctx: &ConsensusContext) -> Result<Arc<dyn Consensus>, ConsensusError> {
        let config = support.config();
        let metadata = config.orderer().map(|o| o.consensus_metadata().clone()).unwrap_or_default();
        let md = etcdraft::ConfigMetadata::decode(metadata)
            .map_err(|e| ConsensusError(format!("bad etcdraft consensus metadata: {e}")))?;
        if md.consenters.len() != 1 {
            return Err(ConsensusError(format!(
                "etcdraft channel {} has {} consenters; only single-consenter etcdraft channels can be served \
                 until the Raft backend is available",
                support.channel_id(),
                md.consenters.len()
            )));
        }
        if let Some(ours) = support.node_certificate() {
            let theirs = &md.consenters[0];
            let named = [&theirs.client_tls_cert, &theirs.server_tls_cert]
                .iter()
                .any(|pem| ferrofabric_comm::pem_cert_der(pem).is_some_and(|der| der == ours));
            if !named {
                return Err(ConsensusError(format!(
                    "this orderer's TLS certificate is not the consenter of etcdraft channel {} ({}:{}); \
                     following a channel is not implemented",
                    support.channel_id(),
                    theirs.host,
                    theirs.port
                )));
            }
        }
        Ok(Solo::start(support, ctx, ConsensusRelation::Consenter))
    }
}
