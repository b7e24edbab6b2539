//! The seam between the host and a BMac card, whatever carries the sections: [`CardLink`], a block result
//! ([`CardResult`]) and the statistics ([`CardStats`]) read from the card's registers, the registers however they
//! are reached ([`Registers`], [`read_block_result`]), and a link's failure ([`LinkError`]).
//!
//! The back ends live elsewhere: the card on the network and the Alveo board in `ferrofabric-bmac-boards`, the
//! co-simulated card in `ferrofabric-bmac-sim`.

use std::any::Any;

use crate::regs;
use crate::wire::{Section, WireError};

/// A block result read from the card's registers (hw/DESIGN.md §4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CardResult {
    /// Block number.
    pub number: u64,
    /// Whether the orderer signature passed BlockValidation.
    pub block_valid: bool,
    /// TRANSACTIONS_FILTER bytes, one per transaction (Fabric's `TxValidationCode` values).
    pub codes: Vec<u8>,
    /// LATENCY register: cycles from the HEADER section to the result.
    pub latency: u32,
    /// Card cycle at which the result was read (a co-simulated card's clock; 0 where the host cannot see it).
    pub at_cycle: u64,
}

/// The card's statistics registers (hw/DESIGN.md §4), each a 32-bit counter since the card's reset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CardStats {
    /// Blocks completed.
    pub blocks: u32,
    /// Transactions completed.
    pub txs: u32,
    /// VALID transactions.
    pub valid: u32,
    /// ECDSA verifications started.
    pub ecdsa: u32,
    /// Endorsements not verified because the policy was already satisfied.
    pub ends_skipped: u32,
    /// Transactions failed by MVCC.
    pub mvcc_fail: u32,
}

/// STATUS bits that stay set once an error happened: KV-store overflow and protocol error (hw/DESIGN.md §4).
pub const STICKY_ERRORS: u32 = regs::STATUS_KV_OVERFLOW_MASK | regs::STATUS_PROTO_ERROR_MASK;

/// The card's AXI-Lite registers (hw/DESIGN.md §4), however they are reached: the simulator's ports, or the XDMA
/// driver's `_user` device file.
pub trait Registers {
    /// Why an access failed.
    type Error;
    /// Reads the 32-bit register at byte address `addr`.
    ///
    /// Errors: the access failed (the back end's error).
    fn read_reg(&mut self, addr: u16) -> Result<u32, Self::Error>;
    /// Writes the 32-bit register at byte address `addr`.
    ///
    /// Errors: the access failed (the back end's error).
    fn write_reg(&mut self, addr: u16, value: u32) -> Result<(), Self::Error>;
}

/// Reads the block result on display (STATUS bit READY is set) and releases it with CONTROL.RELEASE; returns it
/// with the STATUS it was read with. `at_cycle` is left 0 for the caller.
///
/// Errors: a register access failed.
pub fn read_block_result<R: Registers>(r: &mut R) -> Result<(CardResult, u32), R::Error> {
    let status = r.read_reg(regs::REG_STATUS)?;
    let lo = r.read_reg(regs::REG_BLOCK_LO)?;
    let hi = r.read_reg(regs::REG_BLOCK_HI)?;
    let n = r.read_reg(regs::REG_TX_COUNT)? as usize;
    let latency = r.read_reg(regs::REG_LATENCY)?;
    let mut codes = Vec::with_capacity(n);
    for w in 0..n.div_ceil(regs::REG_CODES_PER_WORD as usize) {
        let word = r.read_reg(regs::REG_CODES + 4 * w as u16)?;
        codes.extend_from_slice(&word.to_le_bytes());
    }
    codes.truncate(n);
    r.write_reg(regs::REG_CONTROL, regs::CONTROL_RELEASE_MASK)?;
    let result = CardResult {
        number: (u64::from(hi) << 32) | u64::from(lo),
        block_valid: status & regs::STATUS_BLOCK_VALID_MASK != 0,
        codes,
        latency,
        at_cycle: 0,
    };
    Ok((result, status))
}

/// Why a link to the card failed: the back end's own error (socket, device file, simulation, a section that does
/// not fit a frame), kept as the source.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct LinkError(Box<dyn std::error::Error + Send + Sync>);

impl LinkError {
    /// Wraps a back end's error.
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> LinkError {
        LinkError(e.into())
    }
}

impl From<WireError> for LinkError {
    fn from(e: WireError) -> LinkError {
        LinkError::new(e)
    }
}

/// How the host reaches its card (hw/DESIGN.md §1, §7, §8): a card in this process, on the network, on an Alveo
/// board, or on the network fed by a relay. [`crate::CardProcessor`] drives any of them.
pub trait CardLink {
    /// A short name of the link for reports, e.g. `verilator`, `card on udp`, `alveo`.
    fn kind(&self) -> &'static str;

    /// The card's N×M: N transaction validators with M VSCC engines each.
    fn config(&self) -> (u32, u32);

    /// Sends one section to the card (as a frame, §2.1, or a datagram, §7). A link whose card another host feeds
    /// (a relay) sends nothing.
    ///
    /// Errors: the section does not fit a frame, or the back end failed.
    fn send_section(&mut self, section: &Section) -> Result<(), LinkError>;

    /// The result of block `number`, the block whose sections were sent last (or, for a relayed card, the one the
    /// relay sent); `None` when the card will not have it (a relayed card that has moved past it).
    ///
    /// Errors: no result within the link's deadline, the card reported a failure, or the back end failed.
    fn result_of(&mut self, number: u64) -> Result<Option<CardResult>, LinkError>;

    /// The card's cycle counter, for a card whose clock the host sees (the co-simulated card in this process);
    /// `None` otherwise, and the card's LATENCY register stands for the cycles.
    fn cycles(&mut self) -> Option<u64> {
        None
    }

    /// The link as [`Any`], so that [`crate::CardProcessor::link_mut`] can hand out the concrete back end.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}
