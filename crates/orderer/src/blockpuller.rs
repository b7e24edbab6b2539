//! Catching up with the cluster: blocks a consenter is missing (a Raft snapshot or a gap in the log says so, or
//! BFT consenters decide heights beyond this node's ledger) are pulled over `AtomicBroadcast/Deliver` from the
//! other consenters, as Fabric's cluster block puller does (`orderer/common/cluster/deliver.go`).
//!
//! The request is a SeekInfo from the ledger height to the last missing block, signed by this node's
//! identity (the channel's Readers policy must admit it — an orderer organization member is a Reader in
//! configtxgen's profiles) and sent over mutual TLS. Every pulled block must carry the data hash of its
//! envelopes, and [`ChainSupport::append_block`] checks that it continues the chain, so a block from a
//! faulty peer cannot be stored; the next peer is then tried.

use std::time::Duration;

use bytes::Bytes;
use ferrofabric_protos::common::Block;
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use futures::StreamExt;
use prost::Message;

use crate::ChainSupport;
use ferrofabric_comm::{cluster_endpoint, deliver, seek_envelope, seek_range, ClusterTls, DeliverItem};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protoutil::block_data_hash;

/// How long a Deliver stream may stay silent before the next source is tried.
pub(crate) const IDLE: Duration = Duration::from_secs(10);

/// Where blocks can be pulled from: a consenter's cluster endpoint.
#[derive(Debug, Clone)]
pub struct PullSource {
    /// The consenter's ID (Raft ID, BFT consenter id), for logs and ordering.
    pub id: u64,
    /// Its host.
    pub host: String,
    /// Its port.
    pub port: u16,
}

/// Checks a pulled block: it decodes and its header's data hash matches its envelopes.
///
/// Errors: a message naming the defect.
pub fn check_pulled(raw: &Bytes) -> Result<Block, crate::error::OrdererError> {
    let block = Block::decode(raw.clone()).map_err(crate::error::OrdererError::PulledUndecodable)?;
    let header = block.header.as_ref().ok_or(crate::error::OrdererError::PulledWithoutHeader)?;
    let data = block.data.as_ref().map(|d| d.data.as_slice()).unwrap_or_default();
    if header.data_hash.as_ref() != block_data_hash(data) {
        return Err(crate::error::OrdererError::PulledDataHash(header.number));
    }
    Ok(block)
}

/// Pulls blocks `from..=to` of `support`'s channel from one of `sources` (tried in order) and hands each
/// one, in order, to `apply`, which appends it. Returns once block `to` was applied.
///
/// Errors: every source failed (the last failure is reported); `apply` failed.
pub async fn pull_blocks<F>(
    support: &ChainSupport,
    tls: &ClusterTls,
    extra_roots: &[Vec<u8>],
    sources: &[PullSource],
    from: u64,
    to: u64,
    mut apply: F,
) -> Result<(), crate::error::OrdererError>
where
    F: FnMut(Bytes, Block) -> futures::future::BoxFuture<'static, Result<(), String>>,
{
    pull_blocks_until(support, tls, extra_roots, sources, from, to, move |raw, block| {
        let applied = apply(raw, block);
        Box::pin(async move { applied.await.map(|()| false) })
    })
    .await
}

/// As [`pull_blocks`], but `apply` may end the pull early by answering `Ok(true)` after a block (e.g. a
/// joining node that pulled the config block naming it a consenter); `to` may then be `u64::MAX`.
///
/// Errors: every source failed (the last failure is reported); `apply` failed.
pub async fn pull_blocks_until<F>(
    support: &ChainSupport,
    tls: &ClusterTls,
    extra_roots: &[Vec<u8>],
    sources: &[PullSource],
    from: u64,
    to: u64,
    apply: F,
) -> Result<(), crate::error::OrdererError>
where
    F: FnMut(Bytes, Block) -> futures::future::BoxFuture<'static, Result<bool, String>>,
{
    let puller = Puller { channel: support.channel_id(), signer: support.signer(), tls, extra_roots, idle: IDLE };
    puller.pull(sources, from, to, apply).await.map_err(crate::error::OrdererError::Pull)
}

/// What a pull needs to know of the node: the channel, the identity that signs the Deliver requests and the TLS
/// to dial with. [`pull_blocks`] makes one from a running channel; on-boarding, before the channel runs, makes
/// its own.
pub(crate) struct Puller<'a> {
    pub(crate) channel: &'a str,
    pub(crate) signer: &'a SigningIdentity,
    pub(crate) tls: &'a ClusterTls,
    pub(crate) extra_roots: &'a [Vec<u8>],
    /// How long a Deliver stream may stay silent (connecting included) before the next source is tried.
    pub(crate) idle: Duration,
}

impl Puller<'_> {
    /// [`pull_blocks_until`]' work.
    pub(crate) async fn pull<F>(&self, sources: &[PullSource], from: u64, to: u64, mut apply: F) -> Result<(), String>
    where
        F: FnMut(Bytes, Block) -> futures::future::BoxFuture<'static, Result<bool, String>>,
    {
        let mut next = from;
        let mut last_error = "no other orderer to pull from".to_owned();
        for source in sources {
            if next > to {
                break;
            }
            match self.pull_from(source, &mut next, to, &mut apply).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(channel = %self.channel, source = source.id, error = %e, "pulling blocks failed");
                    last_error = e;
                }
            }
        }
        if next > to {
            Ok(())
        } else {
            Err(last_error)
        }
    }

    async fn pull_from<F>(&self, source: &PullSource, next: &mut u64, to: u64, apply: &mut F) -> Result<(), String>
    where
        F: FnMut(Bytes, Block) -> futures::future::BoxFuture<'static, Result<bool, String>>,
    {
        let ep = cluster_endpoint(&source.host, source.port, self.tls, self.extra_roots)
            .map_err(|e| format!("endpoint: {e}"))?;
        let idle = self.idle;
        let channel = tokio::time::timeout(idle, ep.connect())
            .await
            .map_err(|_| "connect timed out".to_owned())?
            .map_err(|e| format!("connect: {e}"))?;
        let signer = self.signer;
        let seek = seek_range(*next, Some(to), SeekBehavior::BlockUntilReady);
        let env = seek_envelope(self.channel, signer.serialized(), |m| signer.sign(m), &seek);
        let requests = futures::stream::iter(vec![env]).chain(futures::stream::pending());
        let mut stream = deliver(channel, requests).await.map_err(|e| format!("Deliver: {e}"))?;
        while *next <= to {
            let item = tokio::time::timeout(idle, stream.next())
                .await
                .map_err(|_| format!("no block {} within {idle:?}", *next))?;
            match item {
                Some(Ok(DeliverItem::Block(raw))) => {
                    let block = check_pulled(&raw).map_err(|e| e.to_string())?;
                    let number = block.header.as_ref().map(|h| h.number).unwrap_or_default();
                    if number != *next {
                        return Err(format!("expected block {} but got block {number}", *next));
                    }
                    let stop = apply(raw, block).await?;
                    *next += 1;
                    if stop {
                        return Ok(());
                    }
                }
                Some(Ok(DeliverItem::Status(s))) => return Err(format!("Deliver ended with status {s}")),
                Some(Err(e)) => return Err(format!("Deliver stream: {e}")),
                None => return Err("Deliver stream ended".into()),
            }
        }
        Ok(())
    }
}
