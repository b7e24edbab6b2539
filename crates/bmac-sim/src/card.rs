//! The co-simulated BMac card: the simulated card with its driver ([`Card`]), a [`CardLink`] for the host, and the
//! input's AXI-Stream beats ([`offer_beat`]).

use std::any::Any;
use std::collections::VecDeque;

use bytes::Bytes;
use ferrofabric_bmac::wire::Section;
use ferrofabric_bmac::{
    read_block_result, regs, CardLink, CardProcessor, CardResult, CardStats, LinkError, ProcessError, Registers,
    STICKY_ERRORS,
};

use crate::sim::{Port, Sim, SimError};

impl Registers for Sim {
    type Error = SimError;
    fn read_reg(&mut self, addr: u16) -> Result<u32, SimError> {
        Sim::read_reg(self, addr)
    }
    fn write_reg(&mut self, addr: u16, value: u32) -> Result<(), SimError> {
        Sim::write_reg(self, addr, value)
    }
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

impl CardLink for Card {
    fn kind(&self) -> &'static str {
        "verilator"
    }

    fn config(&self) -> (u32, u32) {
        self.sim.config()
    }

    fn send_section(&mut self, section: &Section) -> Result<(), LinkError> {
        self.send(&section.to_frame()?).map_err(LinkError::new)
    }

    fn result_of(&mut self, _number: u64) -> Result<Option<CardResult>, LinkError> {
        self.next_result().map(Some).map_err(LinkError::new)
    }

    fn cycles(&mut self) -> Option<u64> {
        Some(self.sim.cycles())
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The BMac peer with a fresh N×M co-simulated card in this process: joins the channel from its genesis block (a
/// marshaled `common.Block`).
///
/// Errors: [`ProcessError::Link`] with [`SimError::NotBuilt`] if the N×M model is not built, or
/// [`ProcessError::Validator`] if the genesis block is unusable.
pub fn cosim_processor(genesis: Bytes, n: u32, m: u32) -> Result<CardProcessor, ProcessError> {
    let card = Card::new(n, m).map_err(LinkError::new)?;
    CardProcessor::new(genesis, Box::new(card))
}
