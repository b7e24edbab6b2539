//! The co-simulated BMac card and what every card shares: the simulated card with its driver ([`Card`]), a block
//! result ([`CardResult`]) and the statistics ([`CardStats`]) read from the card's registers, the registers
//! however they are reached ([`Registers`]), and the input's AXI-Stream beats ([`offer_beat`]).

use std::collections::VecDeque;

use crate::regs;
use crate::sim::{Port, Sim, SimError};

/// A block result read from the card's registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CardResult {
    /// Block number.
    pub number: u64,
    /// Whether the orderer signature passed BlockValidation.
    pub block_valid: bool,
    /// TRANSACTIONS_FILTER bytes.
    pub codes: Vec<u8>,
    /// LATENCY register: cycles from the HEADER section to the result.
    pub latency: u32,
    /// Simulated cycle at which the result was read.
    pub at_cycle: u64,
}

/// The card's statistics registers (hw/DESIGN.md §4).
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
pub(crate) const STICKY_ERRORS: u32 = regs::STATUS_KV_OVERFLOW_MASK | regs::STATUS_PROTO_ERROR_MASK;

/// The card's AXI-Lite registers (hw/DESIGN.md §4), however they are reached: the simulator's ports, or the XDMA
/// driver's `_user` device file.
pub(crate) trait Registers {
    /// Why an access failed.
    type Error;
    /// Reads the 32-bit register at byte address `addr`.
    fn read_reg(&mut self, addr: u16) -> Result<u32, Self::Error>;
    /// Writes the 32-bit register at byte address `addr`.
    fn write_reg(&mut self, addr: u16, value: u32) -> Result<(), Self::Error>;
}

impl Registers for Sim {
    type Error = SimError;
    fn read_reg(&mut self, addr: u16) -> Result<u32, SimError> {
        Sim::read_reg(self, addr)
    }
    fn write_reg(&mut self, addr: u16, value: u32) -> Result<(), SimError> {
        Sim::write_reg(self, addr, value)
    }
}

/// Reads the block result on display (STATUS bit READY is set) and releases it with CONTROL.RELEASE; returns it
/// with the STATUS it was read with. `at_cycle` is left 0 for the caller.
pub(crate) fn read_block_result<R: Registers>(r: &mut R) -> Result<(CardResult, u32), R::Error> {
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

/// Offers one AXI-Stream beat of a frame (up to 8 bytes, first byte in `tdata[7:0]`) on the card's input: `tvalid`
/// high until the caller has seen `tready` and run the clock.
pub(crate) fn offer_beat(sim: &mut Sim, chunk: &[u8], last: bool) {
    let mut word = 0u64;
    for (k, b) in chunk.iter().enumerate() {
        word |= u64::from(*b) << (8 * k);
    }
    sim.poke(Port::Tdata, word);
    sim.poke(Port::Tkeep, (1u64 << chunk.len()) - 1);
    sim.poke(Port::Tlast, u64::from(last));
    sim.poke(Port::Tvalid, 1);
}

/// Cycle budget per datagram and per block result.
const BUDGET: u64 = 400_000_000;

/// The simulated card with a driver: it sends datagrams and collects results. A result that is ready while a
/// datagram waits for the input is read out, so the card never stalls on the host.
pub struct Card {
    sim: Sim,
    results: VecDeque<CardResult>,
}

impl Card {
    /// A fresh N×M card.
    ///
    /// Errors: [`SimError::NotBuilt`].
    pub fn new(n: u32, m: u32) -> Result<Card, SimError> {
        Ok(Card { sim: Sim::new(n, m)?, results: VecDeque::new() })
    }

    /// The simulator.
    pub fn sim(&mut self) -> &mut Sim {
        &mut self.sim
    }

    /// Sends one frame beat by beat, reading out results while the input waits.
    ///
    /// Errors: [`SimError::Timeout`] if nothing moves for `BUDGET` cycles.
    pub fn send(&mut self, frame: &[u8]) -> Result<(), SimError> {
        for (i, chunk) in frame.chunks(8).enumerate() {
            offer_beat(&mut self.sim, chunk, (i + 1) * 8 >= frame.len());
            let mut waited = 0u64;
            loop {
                if self.sim.peek(Port::Tready) == 1 {
                    self.sim.step(1);
                    break;
                }
                if self.sim.peek(Port::Irq) == 1 {
                    // The register reads run the clock: hold the beat back so it is not taken meanwhile.
                    self.sim.poke(Port::Tvalid, 0);
                    self.read_result()?;
                    self.sim.poke(Port::Tvalid, 1);
                    continue;
                }
                // Nothing to do but wait: run a burst in the shim until tready or irq.
                let n = self.step_until_ready_or_irq(4096);
                waited += n.max(1);
                if waited > BUDGET {
                    return Err(SimError::Timeout(waited, "AXI-Stream input stalled"));
                }
            }
        }
        self.sim.poke(Port::Tvalid, 0);
        Ok(())
    }

    fn step_until_ready_or_irq(&mut self, max: u64) -> u64 {
        // tready and irq both come from registers; stepping until either is set keeps the FFI calls few.
        let mut n = 0;
        while n < max {
            if self.sim.peek(Port::Tready) == 1 || self.sim.peek(Port::Irq) == 1 {
                break;
            }
            let chunk = self.sim.step_until(Port::Tready, 1, 64, "tready").unwrap_or(64);
            n += chunk.max(1);
        }
        n
    }

    /// Reads the result on display and releases it.
    ///
    /// Errors: [`SimError::Timeout`] on an AXI-Lite hang.
    fn read_result(&mut self) -> Result<(), SimError> {
        let (mut result, status) = read_block_result(&mut self.sim)?;
        result.at_cycle = self.sim.cycles();
        self.results.push_back(result);
        // Overflow and protocol errors are sticky; report them with the result that follows them.
        if status & STICKY_ERRORS != 0 {
            return Err(SimError::Status(status));
        }
        Ok(())
    }

    /// Waits for the next block result.
    ///
    /// Errors: [`SimError::Timeout`] after `BUDGET` cycles.
    pub fn next_result(&mut self) -> Result<CardResult, SimError> {
        loop {
            if let Some(r) = self.results.pop_front() {
                return Ok(r);
            }
            self.sim.step_until(Port::Irq, 1, BUDGET, "block result")?;
            self.read_result()?;
        }
    }

    /// Runs the card until a block result is out or `cycles` have passed, and returns the oldest result read (by
    /// this call or while [`Card::send`] waited), if any.
    ///
    /// Errors: [`SimError::Status`] on a sticky STATUS error (the result that came with it stays queued:
    /// [`Card::take_result`]), [`SimError::Timeout`] on an AXI-Lite hang.
    pub fn poll_result(&mut self, cycles: u64) -> Result<Option<CardResult>, SimError> {
        if self.results.is_empty() {
            match self.sim.step_until(Port::Irq, 1, cycles, "block result") {
                Ok(_) => self.read_result()?,
                Err(SimError::Timeout(..)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.results.pop_front())
    }

    /// The oldest result already read and not yet taken, without running the card.
    pub fn take_result(&mut self) -> Option<CardResult> {
        self.results.pop_front()
    }

    /// Lets the card run for `cycles` (e.g. to let a state sync drain).
    pub fn idle(&mut self, cycles: u64) {
        self.sim.step(cycles);
    }

    /// The statistics registers.
    ///
    /// Errors: [`SimError::Timeout`] on an AXI-Lite hang.
    pub fn stats(&mut self) -> Result<CardStats, SimError> {
        Ok(CardStats {
            blocks: self.sim.read_reg(regs::REG_STAT_BLOCKS)?,
            txs: self.sim.read_reg(regs::REG_STAT_TXS)?,
            valid: self.sim.read_reg(regs::REG_STAT_VALID)?,
            ecdsa: self.sim.read_reg(regs::REG_STAT_ECDSA)?,
            ends_skipped: self.sim.read_reg(regs::REG_STAT_ENDS_SKIPPED)?,
            mvcc_fail: self.sim.read_reg(regs::REG_STAT_MVCC_FAIL)?,
        })
    }
}
