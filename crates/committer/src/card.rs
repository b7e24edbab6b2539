//! The BMac card at start-up: the link the configuration names (co-simulated, UDP, Alveo, relayed), joined to the
//! channel and brought up to the stored height.

use anyhow::{anyhow, bail, Context};
use ferrofabric_block_store::BlockStore;

use ferrofabric_bmac::{CardLink, CardProcessor};
use ferrofabric_bmac_boards::{UdpCard, UdpCardReader, XdmaCard};

use crate::config::Accelerator;

use crate::metadata::stored_peer_metadata;

/// The BMac card and its host, brought to the stored chain's height: block 0 joins the channel, and every stored
/// block after it is committed again through the card (so that the card's KV store and identity cache hold the
/// ledger's state) and must give its stored TRANSACTIONS_FILTER and COMMIT_HASH.
///
/// Errors: the configuration is not built into this binary, a stored block is unreadable or refused, or its
/// re-validation disagrees with what is stored.
pub(crate) fn start_card(store: &BlockStore, accelerator: Accelerator) -> anyhow::Result<CardProcessor> {
    let block0 = store.block(0)?.ok_or_else(|| anyhow!("block 0 vanished from the store"))?;
    let link: Box<dyn CardLink> = match accelerator {
        Accelerator::Sim { n, m } => sim_card(n, m)?,
        Accelerator::Udp(addr) => Box::new(
            UdpCard::connect(addr, CARD_DEADLINE).map_err(|e| anyhow!("connecting to the BMac card at {addr}: {e}"))?,
        ),
        Accelerator::Alveo(device) => Box::new(
            XdmaCard::open(&device, CARD_DEADLINE)
                .map_err(|e| anyhow!("opening the BMac card at {}: {e}", device.display()))?,
        ),
        Accelerator::Relayed(addr) => Box::new(
            UdpCardReader::connect(addr, CARD_DEADLINE)
                .map_err(|e| anyhow!("reaching the relayed BMac card at {addr}: {e}"))?,
        ),
    };
    let mut card = CardProcessor::new(block0, link).map_err(|e| anyhow!("joining the channel with the card: {e}"))?;
    for stored in store.blocks(1..store.height()) {
        let stored = stored.context("reading a stored block")?;
        let c =
            card.commit(stored.clone()).map_err(|e| anyhow!("a stored block is refused by the card's host: {e}"))?;
        let (filter, hash) = stored_peer_metadata(&stored)?;
        if filter.as_deref() != Some(c.result.transactions_filter().as_slice()) || hash != c.result.commit_hash {
            bail!("block {}: the card's result differs from the stored block", c.result.number);
        }
    }
    Ok(card)
}

/// The co-simulated N×M card in this process (`ferrofabric-bmac-sim`, the `bmac-sim` feature).
///
/// Errors: the N×M model is not built (no Verilator at build time, or not in `FERROFABRIC_HW_CONFIGS`).
#[cfg(feature = "bmac-sim")]
pub(crate) fn sim_card(n: u32, m: u32) -> anyhow::Result<Box<dyn CardLink>> {
    let card = ferrofabric_bmac_sim::Card::new(n, m).map_err(|e| anyhow!("starting the {n}x{m} BMac card: {e}"))?;
    Ok(Box::new(card))
}

/// The co-simulated card is not built into this binary: the error says how to get it.
///
/// Errors: always.
#[cfg(not(feature = "bmac-sim"))]
pub(crate) fn sim_card(n: u32, m: u32) -> anyhow::Result<Box<dyn CardLink>> {
    bail!(
        "the co-simulated {n}x{m} BMac card is not built into this binary: build with the `bmac-sim` feature \
         (ferrofabric-committer/bmac-sim, or the cli's ferrofabric/bmac-sim), or use udp:, alveo: or relayed:"
    )
}

/// How long the host waits for a networked card's result for one block before it validates the block itself. A
/// co-simulated card takes seconds of wall-clock time per block; a real one, microseconds.
pub(crate) const CARD_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);
