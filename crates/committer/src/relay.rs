//! The BMac relay beside the orderer (hw/DESIGN.md §7): it follows the channel from the orderers, as the committer
//! does, and sends each block's sections to a card on the network, so that the card receives its blocks from the
//! orderer side as BMac's does. The committer beside the card only reads the card's results
//! (`Accelerator: relayed:HOST:PORT`, a [`ferrofabric_bmac::CardProcessor`] on a
//! [`ferrofabric_bmac_boards::UdpCardReader`]).
//!
//! The sections depend on the ledger (pre-codes, endorsement-policy ids, range-query probes, the identity cache's
//! ids, state syncs for blocks the card does not validate; hw/DESIGN.md §1), so the relay keeps its own copy of the
//! ledger in memory: the host side of [`ferrofabric_bmac::CardProcessor`], which commits each block with the
//! card's verdicts, or in software when the block is the host's. The committer plans every block the same way from
//! its own ledger, so both agree on which blocks the card validates.
//!
//! A card that fails or disagrees with the relay's ledger is reset (`HELLO`) and the relay starts again from block 1,
//! after a pause: the card's state is rebuilt from the chain, and a committer waiting for a result gets it once the
//! replay reaches that block. A relay that restarts does the same. Nothing is stored, so nothing can be lost.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use bytes::Bytes;
use ferrofabric_bmac::{BlockPath, CardProcessor};
use ferrofabric_bmac_boards::{Impairment, LinkStats, UdpCard};
use ferrofabric_comm::{ClientTls, ClientTlsConfig, DeliverApi};
use ferrofabric_deliver::{DeliveryConfig, Fetched, Follower};
use ferrofabric_msp::SigningIdentity;
use prost::Message;
use tokio::sync::{mpsc, watch};

/// What a relay needs: the channel, where its blocks come from, and the card.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// The channel's genesis block (a marshaled `common.Block`).
    pub genesis_block: PathBuf,
    /// The MSP whose identity signs the Deliver requests (it must satisfy the channel's Readers policy).
    pub local_msp_dir: PathBuf,
    /// Its MSP ID.
    pub local_msp_id: String,
    /// Orderer Deliver endpoints, `HOST:PORT`.
    pub orderers: Vec<String>,
    /// TLS to the orderers.
    pub orderer_tls: ClientTlsConfig,
    /// Timeouts and back-off of the Deliver client.
    pub delivery: DeliveryConfig,
    /// The card's UDP address.
    pub card: SocketAddr,
    /// How long the relay waits for the card's result for one block before it resets the card.
    pub deadline: Duration,
    /// A deliberately bad link to the card, for drills and tests (default: none).
    pub impairment: Impairment,
}

/// What a running relay has done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayStatus {
    /// The card's N×M, once it answered.
    pub config: Option<(u32, u32)>,
    /// Height of the relay's ledger (number of blocks, genesis included) in the current session.
    pub height: u64,
    /// Blocks the card validated, over all sessions.
    pub on_card: u64,
    /// Blocks the relay's host validated (config and `_lifecycle` blocks, and blocks of a failed card).
    pub on_host: u64,
    /// Sessions with the card: 1 + the times it was reset.
    pub sessions: u64,
    /// The link to the card in the current session.
    pub link: LinkStats,
}

/// A running relay: a Deliver client and the thread that feeds the card.
#[derive(Debug)]
pub struct RunningRelay {
    /// What the relay has done so far.
    pub status: watch::Receiver<RelayStatus>,
    stop: watch::Sender<bool>,
    follower: tokio::task::JoinHandle<()>,
    sender: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// How long the relay waits before it resets a card that failed.
const RESET_PAUSE: Duration = Duration::from_secs(1);

/// Starts a relay: loads the identity and the genesis block, then follows the channel from block 1 and feeds the
/// card.
///
/// Errors: the MSP or the genesis block cannot be loaded, or the Deliver settings are malformed. A card that does
/// not answer is not an error: the relay keeps trying.
pub async fn start_relay(config: RelayConfig) -> anyhow::Result<RunningRelay> {
    config.delivery.validate()?;
    let signer =
        Arc::new(SigningIdentity::from_msp_dir(&config.local_msp_id, &config.local_msp_dir).with_context(|| {
            format!("loading the local MSP {} from {}", config.local_msp_id, config.local_msp_dir.display())
        })?);
    let genesis = Bytes::from(
        std::fs::read(&config.genesis_block).with_context(|| format!("reading {}", config.genesis_block.display()))?,
    );
    let block = ferrofabric_protos::common::Block::decode(genesis.clone()).context("decoding the genesis block")?;
    let channel = ferrofabric_channelconfig::ChannelConfig::from_config_block(&block)
        .map_err(|e| anyhow!("the genesis block's channel configuration: {e}"))?;
    let follow = config.delivery.follow_config(
        config.orderers.clone(),
        DeliverApi::Orderer,
        channel.channel_id().to_owned(),
        ClientTls::from_config(&config.orderer_tls)?,
    )?;
    let (blocks_tx, blocks_rx) = mpsc::channel(16);
    let (restart_tx, restart_rx) = mpsc::channel(4);
    let follower = tokio::spawn(Follower::new(follow, signer).run(1, blocks_tx, Some(restart_rx)));
    let (status_tx, status) = watch::channel(RelayStatus::default());
    let (stop, stop_rx) = watch::channel(false);
    let feeder = Feeder { config, genesis, blocks: blocks_rx, restart: restart_tx, status: status_tx, stop: stop_rx };
    let sender = tokio::task::spawn_blocking(move || feeder.run());
    Ok(RunningRelay { status, stop, follower, sender })
}

impl RunningRelay {
    /// Stops following and feeding; the card keeps what it has.
    ///
    /// Errors: the feeding thread failed.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.stop.send_replace(true);
        self.follower.abort();
        self.sender.await.map_err(|_| anyhow!("the relay's sender panicked"))?
    }
}

/// The thread that feeds the card: one session per card reset.
struct Feeder {
    config: RelayConfig,
    genesis: Bytes,
    blocks: mpsc::Receiver<Fetched>,
    restart: mpsc::Sender<u64>,
    status: watch::Sender<RelayStatus>,
    stop: watch::Receiver<bool>,
}

impl Feeder {
    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    fn run(mut self) -> anyhow::Result<()> {
        let mut first = true;
        while !self.stopped() {
            if !first {
                std::thread::sleep(RESET_PAUSE);
            }
            first = false;
            let mut link = match UdpCard::connect(self.config.card, self.config.deadline) {
                Ok(link) => link,
                Err(e) => {
                    tracing::warn!(card = %self.config.card, error = %e, "the card does not answer; trying again");
                    continue;
                }
            };
            link.set_impairment(self.config.impairment);
            let config = Some(link.config());
            let mut card = CardProcessor::new(self.genesis.clone(), Box::new(link))
                .map_err(|e| anyhow!("joining the channel from the genesis block: {e}"))?;
            self.status.send_modify(|s| {
                s.config = config;
                s.height = 1;
                s.sessions += 1;
                s.link = LinkStats::default();
            });
            // Every session starts from block 1: the card was just reset.
            if self.status.borrow().sessions > 1 && self.restart.blocking_send(1).is_err() {
                return Ok(());
            }
            if let Some(why) = self.session(&mut card)? {
                tracing::error!(card = %self.config.card, reason = %why, "the card failed; resetting it and sending the chain again");
            }
        }
        Ok(())
    }

    /// Feeds blocks to the card until it fails (`Some(why)`) or the relay stops (`None`).
    ///
    /// Errors: the follower is gone.
    fn session(&mut self, card: &mut CardProcessor) -> anyhow::Result<Option<String>> {
        let handle = tokio::runtime::Handle::current();
        let mut next = 1;
        while !self.stopped() {
            let fetched = match handle.block_on(tokio::time::timeout(Duration::from_millis(100), self.blocks.recv())) {
                Err(_) => continue,
                Ok(None) => return Err(anyhow!("the relay's Deliver client stopped")),
                Ok(Some(f)) => f,
            };
            if fetched.number != next {
                continue; // queued before a restart
            }
            match card.commit(fetched.bytes) {
                Ok(c) => {
                    next += 1;
                    let link = card.link_mut::<UdpCard>().map(|l| l.stats()).unwrap_or_default();
                    self.status.send_modify(|s| {
                        s.height = next;
                        s.link = link;
                        match c.path {
                            BlockPath::Hardware => s.on_card += 1,
                            BlockPath::Host(_) | BlockPath::Software => s.on_host += 1,
                        }
                    });
                }
                Err(e) => {
                    // Refused as a peer would refuse it (e.g. a bad orderer signature): ask another orderer.
                    tracing::warn!(block = next, error = %e, "block refused; fetching it again");
                    if self.restart.blocking_send(next).is_err() {
                        return Err(anyhow!("the relay's Deliver client stopped"));
                    }
                }
            }
            if let Some(why) = card.card_off() {
                return Ok(Some(why.to_owned()));
            }
        }
        Ok(None)
    }
}
