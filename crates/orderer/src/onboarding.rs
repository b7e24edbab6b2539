//! On-boarding: joining a channel with a config block other than its genesis block (Fabric
//! `orderer/common/onboarding` and the follower chain's catch-up, `orderer/common/follower`). The node has no
//! ledger yet, so before the channel can run it pulls blocks `0..join` over `AtomicBroadcast/Deliver` from the
//! orderers the join block's configuration names, then stores the join block itself.
//!
//! Trust comes from the join block, which the administrator supplied: every pulled block must carry the data hash
//! of its envelopes and the header hash of the block before it, and the last one's header hash must be the join
//! block's `previous_hash`. A chain that does not lead to the join block is thrown away and pulled again (from the
//! next orderer first).
//!
//! Crash safety: the join block waits in `<FileLedger.Location>/pendingops/join/<channel>.join` (where Fabric
//! keeps it too) until it is stored in the ledger; a node restarted meanwhile resumes the on-boarding from its
//! ledger height.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_block_store::BlockStore;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_comm::ClusterTls;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Block;
use ferrofabric_protos::etcdraft;
use ferrofabric_protoutil::block_header_hash;
use prost::Message;

use crate::blockpuller::{PullSource, Puller, IDLE};

/// How long a failed on-boarding waits before it tries again.
pub(crate) const RETRY: Duration = Duration::from_secs(5);

/// Progress of one channel's on-boarding, for the participation API.
#[derive(Debug, Default)]
pub(crate) struct Onboarding {
    /// Blocks stored so far.
    pub(crate) height: AtomicU64,
    /// Set when the channel is removed while on-boarding: the pull stops.
    pub(crate) cancelled: AtomicBool,
    /// Attempts that failed so far; each next attempt starts with another orderer.
    pub(crate) failures: AtomicU64,
    /// The on-boarded channel could not start.
    pub(crate) failed: AtomicBool,
}

/// Why an on-boarding attempt failed.
#[derive(Debug)]
pub(crate) enum OnboardError {
    /// The blocks could not be pulled or stored; the next attempt goes on from the ledger height.
    Pull(String),
    /// The pulled blocks do not lead to the join block: the ledger must be emptied before the next attempt.
    WrongChain(String),
}

impl std::fmt::Display for OnboardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OnboardError::Pull(e) | OnboardError::WrongChain(e) => f.write_str(e),
        }
    }
}

/// `<ledger_dir>/pendingops/join`.
pub(crate) fn pending_dir(ledger_dir: &Path) -> PathBuf {
    ledger_dir.join("pendingops").join("join")
}

/// Writes `raw` as the pending join block of `channel` (synced), before the on-boarding starts.
///
/// Errors: file system errors, as text.
pub(crate) fn save_join_block(ledger_dir: &Path, channel: &str, raw: &Bytes) -> Result<(), String> {
    let dir = pending_dir(ledger_dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = dir.join(format!("{channel}.join"));
    let tmp = dir.join(format!("{channel}.join.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, raw)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(&dir)?.sync_all()
    };
    write().map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The pending join blocks (channel, block bytes) left by on-boardings that did not finish.
pub(crate) fn pending_join_blocks(ledger_dir: &Path) -> Vec<(String, Bytes)> {
    let Ok(entries) = std::fs::read_dir(pending_dir(ledger_dir)) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(channel) = name.strip_suffix(".join") {
            match std::fs::read(entry.path()) {
                Ok(raw) => out.push((channel.to_owned(), Bytes::from(raw))),
                Err(e) => tracing::warn!(channel, error = %e, "unreadable pending join block"),
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The `host:port` of each etcdraft consenter of `config` (none for other consensus types or undecodable
/// metadata): etcdraft keeps its consenters in the `ConsensusType` metadata, not in the channel configuration's
/// consenter mapping. Only the endpoints are read here; the consenter rules live in `ferrofabric-consensus-etcdraft`.
fn raft_consenter_endpoints(config: &ChannelConfig) -> Vec<String> {
    let Some(orderer) = config.orderer().filter(|o| o.consensus_type() == "etcdraft") else { return Vec::new() };
    etcdraft::ConfigMetadata::decode(orderer.consensus_metadata().clone())
        .map(|md| md.consenters.iter().map(|c| format!("{}:{}", c.host, c.port)).collect())
        .unwrap_or_default()
}

/// Deletes `channel`'s pending join block (its on-boarding finished or the channel was removed).
pub(crate) fn forget_join_block(ledger_dir: &Path, channel: &str) {
    let _ = std::fs::remove_file(pending_dir(ledger_dir).join(format!("{channel}.join")));
}

/// The orderers to pull from: every orderer endpoint of `config` (the orderer organizations' `Endpoints`, the
/// global `OrdererAddresses`, then the consenters' own endpoints of BFT and etcdraft channels), as `host:port`,
/// but this node's own (`own_port` on a loopback or unspecified host: a node cannot pull from itself what it
/// lacks).
pub(crate) fn sources(config: &ChannelConfig, own_port: u16) -> Vec<PullSource> {
    let mut endpoints: Vec<String> = Vec::new();
    if let Some(orderer) = config.orderer() {
        for org in orderer.organizations().values() {
            endpoints.extend(org.endpoints().iter().cloned());
        }
        endpoints.extend(orderer.consenters().iter().map(|c| format!("{}:{}", c.host, c.port)));
    }
    endpoints.extend(config.orderer_addresses().iter().cloned());
    endpoints.extend(raft_consenter_endpoints(config));
    let mut seen = std::collections::HashSet::new();
    endpoints.retain(|e| seen.insert(e.clone()));
    let local = |host: &str| matches!(host, "127.0.0.1" | "localhost" | "::1" | "[::1]" | "0.0.0.0");
    endpoints
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let (host, port) = e.rsplit_once(':')?;
            let port: u16 = port.parse().ok()?;
            (own_port == 0 || port != own_port || !local(host)).then(|| PullSource {
                id: i as u64,
                host: host.to_owned(),
                port,
            })
        })
        .collect()
}

/// What an on-boarding needs of the node.
pub(crate) struct Node<'a> {
    pub(crate) signer: &'a SigningIdentity,
    pub(crate) tls: &'a ClusterTls,
    /// This node's gRPC port (0: unknown), left out of the sources.
    pub(crate) port: u16,
}

/// Pulls the blocks before `join` into `store` (which may hold some already) and appends the join block `raw`.
/// Returns when the ledger ends with the join block.
///
/// Errors: [`OnboardError::Pull`] (no orderer served the blocks, the store failed) or
/// [`OnboardError::WrongChain`].
pub(crate) async fn onboard(
    node: &Node<'_>,
    channel: &str,
    store: &Arc<BlockStore>,
    raw: &Bytes,
    join: &Block,
    progress: &Onboarding,
) -> Result<(), OnboardError> {
    let pull = OnboardError::Pull;
    let header = join.header.clone().ok_or_else(|| pull("the join block has no header".into()))?;
    let config = ChannelConfig::from_config_block(join).map_err(|e| pull(format!("join block: {e}")))?;
    let tip = match store.height() {
        0 => None,
        h => {
            let raw =
                store.block(h - 1).map_err(|e| pull(e.to_string()))?.ok_or_else(|| pull("no ledger tip".into()))?;
            let block = Block::decode(raw).map_err(|e| OnboardError::WrongChain(format!("ledger tip: {e}")))?;
            Some(block.header.ok_or_else(|| OnboardError::WrongChain("ledger tip without header".into()))?)
        }
    };
    let previous = Arc::new(Mutex::new(tip.as_ref().map(block_header_hash)));
    let from = store.height();
    progress.height.store(from, Ordering::Relaxed);
    if from < header.number {
        let mut sources = sources(&config, node.port);
        // Start with another orderer after each failed attempt.
        let shift = (progress.failures.load(Ordering::Relaxed) as usize) % sources.len().max(1);
        sources.rotate_left(shift);
        let roots = config.orderer_tls_roots();
        let puller = Puller { channel, signer: node.signer, tls: node.tls, extra_roots: &roots, idle: IDLE };
        tracing::info!(channel, from, to = header.number - 1, sources = sources.len(), "on-boarding: pulling blocks");
        let (store2, previous2) = (store.clone(), previous.clone());
        let (cancelled, height) = (&progress.cancelled, &progress.height);
        if cancelled.load(Ordering::Relaxed) {
            return Err(pull("the channel was removed".into()));
        }
        puller
            .pull(&sources, from, header.number - 1, move |raw, block| {
                let (store, previous) = (store2.clone(), previous2.clone());
                let result = (|| {
                    let h = block.header.as_ref().ok_or("pulled block without header")?;
                    let mut prev = previous.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(p) = *prev {
                        if h.previous_hash.as_ref() != p {
                            return Err(format!("pulled block {} does not continue the chain", h.number));
                        }
                    }
                    store.append(raw).map_err(|e| format!("storing block {}: {e}", h.number))?;
                    *prev = Some(block_header_hash(h));
                    Ok(false)
                })();
                Box::pin(async move { result })
            })
            .await
            .map_err(
                |e| if e.contains("does not continue the chain") { OnboardError::WrongChain(e) } else { pull(e) },
            )?;
        height.store(store.height(), Ordering::Relaxed);
    }
    let last = *previous.lock().unwrap_or_else(|e| e.into_inner());
    if last.as_ref().map(|h| h.as_slice()) != Some(header.previous_hash.as_ref()) {
        return Err(OnboardError::WrongChain(format!(
            "the pulled blocks do not lead to the join block {} (its previous hash differs)",
            header.number
        )));
    }
    store.append(raw.clone()).map_err(|e| pull(format!("storing the join block: {e}")))?;
    progress.height.store(store.height(), Ordering::Relaxed);
    Ok(())
}
