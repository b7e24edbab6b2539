//! The channels a peer has joined ([`Channels`]): for each, a committer pulling the channel's blocks from its
//! orderers, an endorser whose replica follows that committer, and the channel's Gateway and discovery services.
//!
//! On disk, a channel is `<peer.fileSystemPath>/channels/<channel ID>/`: `genesis.block`, the block it was joined
//! with (written atomically before anything starts, so a peer that crashes while joining rejoins on restart), and
//! `committer/`, the committer's block store and state checkpoint (docs/FORMATS.md).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use bytes::Bytes;
use ferrofabric_block_store::BlockStore;
use ferrofabric_chaincode_support::ChaincodeSupport;
use ferrofabric_comm::{ClientTls, Shutdown};
use ferrofabric_committer::{CommitterConfig, RunningCommitter};
use ferrofabric_deliver::{Chain, ChainManager, DeliverLedger};
use ferrofabric_endorser::{DaemonLedger, Endorser, PeerChannels, RecentBlocks, Replica};
use ferrofabric_gateway::{EndorserEndpoint, Gateway, GatewayConfig, GatewayOptions, GossipSigner, Membership};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Block;
use prost::Message;

use crate::PeerConfig;

/// How long a proposal waits for its channel's endorser to apply every block the peer has committed.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a channel's gateway asks the anchor peers for the channel's peers again (Fabric's gossip announces a
/// peer every `peer.gossip.aliveTimeInterval`, 5 s by default).
const MEMBERSHIP_REFRESH: Duration = Duration::from_secs(5);

/// What every channel of the peer shares.
pub(crate) struct Context {
    pub config: PeerConfig,
    pub signer: Arc<SigningIdentity>,
    pub chaincodes: Arc<ChaincodeSupport>,
    pub shutdown: Shutdown,
    /// Where this peer's own Endorser is reached (its gateway endorses there).
    pub address: String,
}

/// One joined channel.
pub(crate) struct Channel {
    pub endorser: Endorser,
    pub gateway: Gateway<DaemonLedger>,
    committed: Arc<BlockStore>,
    deliver: DeliverLedger,
    committer: tokio::sync::Mutex<Option<RunningCommitter>>,
}

/// The joined channels, by ID; see the module docs.
pub(crate) struct Channels {
    ctx: Context,
    joined: RwLock<BTreeMap<String, Arc<Channel>>>,
    /// One JoinChain at a time: the check that a channel is new and its creation are one step.
    joining: tokio::sync::Mutex<()>,
}

/// Fabric's channel name rule (`configtx.ValidateChannelID`): lower-case letters, digits, `.` and `-`, starting
/// with a letter, fewer than 250 characters. It also keeps the name safe as a directory name.
fn validate_channel_id(id: &str) -> Result<(), String> {
    let mut chars = id.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    if id.is_empty() || id.len() > 249 || !first_ok || !rest_ok {
        return Err(format!(
            "channel ID '{id}' contains illegal characters; allowed characters are lower case letters, digits, '.' \
             and '-', starting with a letter, fewer than 250 characters"
        ));
    }
    Ok(())
}

impl Channels {
    pub(crate) fn new(ctx: Context) -> Channels {
        Channels { ctx, joined: RwLock::default(), joining: tokio::sync::Mutex::new(()) }
    }

    fn dir(&self) -> PathBuf {
        self.ctx.config.file_system_path.join("channels")
    }

    /// Starts every channel found on disk (a restart).
    ///
    /// Errors: a channel directory that cannot be started (named in the error).
    pub(crate) async fn resume(&self) -> anyhow::Result<()> {
        let dir = self.dir();
        let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(()) };
        let mut found: Vec<PathBuf> =
            entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.join("genesis.block").is_file()).collect();
        found.sort();
        for path in found {
            let channel = self.start_channel(&path).await.with_context(|| format!("resuming {}", path.display()))?;
            tracing::info!(channel = %channel.0, height = channel.1.committed.height(), "channel resumed");
            self.joined.write().unwrap_or_else(PoisonError::into_inner).insert(channel.0, channel.1);
        }
        Ok(())
    }

    fn get(&self, channel: &str) -> Option<Arc<Channel>> {
        self.joined.read().unwrap_or_else(PoisonError::into_inner).get(channel).cloned()
    }

    /// Every joined channel's gateway, by channel ID.
    pub(crate) fn gateway(&self, channel: &str) -> Option<Gateway<DaemonLedger>> {
        self.get(channel).map(|c| c.gateway.clone())
    }

    /// Some joined channel's gateway (to answer a request for a channel the peer has not joined as a gateway does).
    pub(crate) fn any_gateway(&self) -> Option<Gateway<DaemonLedger>> {
        self.joined.read().unwrap_or_else(PoisonError::into_inner).values().next().map(|c| c.gateway.clone())
    }

    /// The height of every joined channel's committed chain.
    pub(crate) fn heights(&self) -> BTreeMap<String, u64> {
        let joined = self.joined.read().unwrap_or_else(PoisonError::into_inner);
        joined.iter().map(|(id, c)| (id.clone(), c.committed.height())).collect()
    }

    /// Stops every channel's committer (each leaves a final checkpoint).
    ///
    /// Errors: the first committer whose pipeline had failed.
    pub(crate) async fn shutdown(&self) -> anyhow::Result<()> {
        let channels: Vec<_> =
            std::mem::take(&mut *self.joined.write().unwrap_or_else(PoisonError::into_inner)).into_iter().collect();
        let mut first_error = None;
        for (id, channel) in channels {
            if let Some(committer) = channel.committer.lock().await.take() {
                if let Err(e) = committer.shutdown().await {
                    first_error.get_or_insert(e.context(format!("the committer of channel {id}")));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Starts the channel whose directory is `dir` (holding `genesis.block`); returns its ID and parts.
    async fn start_channel(&self, dir: &Path) -> anyhow::Result<(String, Arc<Channel>)> {
        let ctx = &self.ctx;
        let genesis_path = dir.join("genesis.block");
        let genesis = std::fs::read(&genesis_path).with_context(|| format!("reading {}", genesis_path.display()))?;
        let mut replica = Replica::from_genesis(Bytes::from(genesis)).map_err(|e| anyhow!("the genesis block: {e}"))?;
        if ctx.config.history_database {
            replica = replica.with_history();
        }
        let replica = Arc::new(replica);
        let channel_id = replica.channel_id().to_owned();
        let config = replica.config();
        let overrides = &ctx.config.address_overrides;
        let orderers: Vec<String> = config
            .orderer_endpoints()
            .into_iter()
            .map(|(a, _)| overrides.iter().find(|o| o.from == a).map_or(a, |o| o.to.clone()))
            .collect();
        if orderers.is_empty() {
            bail!("the configuration of channel {channel_id} names no orderer endpoint");
        }
        // The orderers' TLS roots come from the channel configuration (and the overrides' CA files), beside the
        // peer's own root.
        let mut orderer_tls = ctx.config.client_tls.clone();
        orderer_tls.root_cas.extend(overrides.iter().filter_map(|o| o.ca_certs_file.clone()));
        let roots = config.orderer_tls_roots().concat();
        if orderer_tls.enabled && !roots.is_empty() {
            let path = dir.join("orderer-tls-roots.pem");
            write_atomically(&path, &roots)?;
            orderer_tls.root_cas.push(path);
        }
        let committer = ferrofabric_committer::start(CommitterConfig {
            channel: Some(channel_id.clone()),
            genesis_block: Some(genesis_path),
            data_dir: Some(dir.join("committer")),
            local_msp_dir: Some(ctx.config.msp_config_path.clone()),
            local_msp_id: Some(ctx.config.local_msp_id.clone()),
            orderers,
            orderer_tls: orderer_tls.clone(),
            // Internal: the replica follows the committer here.
            listen_address: "127.0.0.1:0".into(),
            operations_listen_address: String::new(),
            time_window: format!("{}s", ctx.config.time_window.as_secs()),
            ..CommitterConfig::default()
        })
        .await
        .with_context(|| format!("starting the committer of channel {channel_id}"))?;

        let recent = Arc::new(RecentBlocks::new(replica.height()));
        tokio::spawn(ferrofabric_endorser::follow_with(
            replica.clone(),
            committer.deliver_addr.to_string(),
            None,
            ctx.signer.clone(),
            Some(recent.clone()),
            ctx.shutdown.watch(),
        ));
        let ledger = Arc::new(DaemonLedger::with_store(replica.clone(), recent, committer.store.clone()));
        // A Fabric peer runs the chaincodes installed on it, none compiled in.
        let endorser = Endorser::new(replica, (*ctx.signer).clone(), ferrofabric_chaincode::Registry::new())
            .with_ledger(ledger.clone())
            .with_chaincode_support(ctx.chaincodes.clone());
        // The gateway dials the orderers and the other organisations' peers.
        let mut client_tls = ClientTls::from_config(&orderer_tls)?;
        if let Some(tls) = &mut client_tls {
            tls.ca_pem.extend_from_slice(&roots);
            tls.ca_pem.extend_from_slice(&config.application_tls_roots().concat());
        }
        let signer = ctx.signer.clone();
        let gateway = Gateway::new(
            GatewayConfig {
                local_mspid: ctx.config.local_msp_id.clone(),
                endorsers: vec![EndorserEndpoint {
                    mspid: ctx.config.local_msp_id.clone(),
                    address: ctx.address.clone(),
                    identity: ctx.signer.serialized().clone(),
                }],
                orderers: Vec::new(),
                orderer_overrides: overrides.iter().map(|o| (o.from.clone(), o.to.clone())).collect(),
                tls: client_tls,
                options: GatewayOptions {
                    endorsement_timeout: ctx.config.gateway_endorsement_timeout,
                    dial_timeout: ctx.config.gateway_dial_timeout,
                    ..GatewayOptions::default()
                },
                signers: HashMap::from([(ctx.address.clone(), GossipSigner(Arc::new(move |m: &[u8]| signer.sign(m))))]),
            },
            ledger,
            ctx.shutdown.clone(),
        );
        let signer = ctx.signer.clone();
        let membership = Membership {
            identity: ctx.signer.serialized().clone(),
            signer: GossipSigner(Arc::new(move |m: &[u8]| signer.sign(m))),
            refresh: MEMBERSHIP_REFRESH,
        };
        tokio::spawn(gateway.clone().follow_membership(membership));
        let channel = Channel {
            endorser,
            gateway,
            committed: committer.store.clone(),
            deliver: committer.deliver_ledger(),
            committer: tokio::sync::Mutex::new(Some(committer)),
        };
        Ok((channel_id, Arc::new(channel)))
    }
}

#[tonic::async_trait]
impl PeerChannels for Channels {
    fn channel_ids(&self) -> Vec<String> {
        self.joined.read().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect()
    }

    async fn endorser(&self, channel: &str) -> Option<Endorser> {
        let c = self.get(channel)?;
        let target = c.committed.height();
        let deadline = Instant::now() + CATCH_UP_TIMEOUT;
        while c.endorser.replica().height() < target && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Some(c.endorser.clone())
    }

    async fn join(&self, channel: &str, block: Block) -> Result<(), String> {
        validate_channel_id(channel)?;
        let _one_at_a_time = self.joining.lock().await;
        if self.get(channel).is_some() {
            return Err(format!(
                "cannot create ledger from genesis block: ledger [{channel}] already exists with state [ACTIVE]"
            ));
        }
        let number = block.header.as_ref().map_or(0, |h| h.number);
        if number != 0 {
            // Joining from a later config block needs a snapshot of the state (Fabric's JoinChainBySnapshot).
            return Err(format!(
                "cannot create ledger from genesis block: block [{number}] of channel [{channel}] is not a genesis \
                 block; this peer joins a channel from its block 0"
            ));
        }
        let dir = self.dir().join(channel);
        let started = async {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            write_atomically(&dir.join("genesis.block"), &block.encode_to_vec())?;
            self.start_channel(&dir).await
        }
        .await;
        match started {
            Ok((id, c)) => {
                tracing::info!(channel = %id, "joined channel");
                self.joined.write().unwrap_or_else(PoisonError::into_inner).insert(id, c);
                Ok(())
            }
            Err(e) => {
                // Nothing of the channel is left behind: a later JoinChain starts afresh.
                let _ = std::fs::remove_dir_all(&dir);
                Err(format!("cannot create ledger from genesis block: {e:#}"))
            }
        }
    }
}

impl ChainManager for Channels {
    fn chain(&self, channel_id: &str) -> Option<Arc<dyn Chain>> {
        self.get(channel_id).map(|c| Arc::new(c.deliver.clone()) as Arc<dyn Chain>)
    }
}

/// Writes `bytes` to `path` through a synced temporary file and a rename, so that a crash leaves the old file or
/// the new one.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(bytes).and_then(|()| f.sync_all()).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent).and_then(|d| d.sync_all()).ok();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids_follow_fabrics_rule_and_cannot_name_another_directory() {
        for ok in ["mychannel", "a", "ch-1.test"] {
            assert!(validate_channel_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "MyChannel", "1ch", "../etc", "a/b", "ch_1", &"a".repeat(250)] {
            assert!(validate_channel_id(bad).is_err(), "{bad}");
        }
    }
}
