//! Block processors: the software reference ([`SoftwareProcessor`], `ferrofabric-validator`) and the BMac peer
//! ([`CardProcessor`]): the host side of [`crate::session`] with a card behind any [`CardLink`] (the co-simulated
//! RTL of `hw/rtl`, a card on the network, an Alveo board).
//!
//! Both return Fabric's TRANSACTIONS_FILTER codes for each block. The card processor also returns the cycles the
//! card needed. Codes of hardware-path blocks come from the card's registers (hw/DESIGN.md §4). Host-path blocks
//! are validated by the host in software.

use bytes::Bytes;
use ferrofabric_validator::{BlockResult, TxValidationCode, Validator, ValidatorError, ValidatorOptions};

use crate::link::{CardLink, CardResult, LinkError};
use crate::session::{HostSession, Route};
use crate::wire::Section;

/// Which way a block went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockPath {
    /// Validated by the software validator (the reference processor).
    Software,
    /// Validated by the (simulated) hardware.
    Hardware,
    /// A host-path block of the BMac peer, for this reason (hw/DESIGN.md §1.1).
    Host(String),
}

/// One processed block.
#[derive(Clone, Debug)]
pub struct Processed {
    /// Block number.
    pub number: u64,
    /// One code per transaction (TRANSACTIONS_FILTER).
    pub codes: Vec<TxValidationCode>,
    /// Fabric's commit hash after the block (computed by the host's ledger).
    pub commit_hash: Option<[u8; 32]>,
    /// Software, hardware or host path.
    pub path: BlockPath,
    /// Card cycles from the first datagram of the block to its result (hardware path).
    pub cycles: Option<u64>,
    /// For a hardware-path block, the codes the host's own ledger computed. If they differ from `codes`, the
    /// host's state no longer matches the card's.
    pub host_codes: Option<Vec<TxValidationCode>>,
}

/// Why a block could not be processed.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The software refused the block (as a Fabric peer would).
    #[error(transparent)]
    Validator(#[from] ValidatorError),
    /// The link to the card failed (timeout, socket, device file, simulation).
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The card reported something impossible (wrong block, overflow, protocol error, disagreement on the block
    /// signature).
    #[error("hardware: {0}")]
    Hardware(String),
}

/// Validates and commits blocks in order.
pub trait BlockProcessor {
    /// A short description, e.g. `software`, `verilator 8x2` or `card on udp 8x2`.
    fn name(&self) -> String;
    /// Validates and commits the next block (a marshaled `common.Block`).
    ///
    /// Errors: [`ProcessError`]; a refused block is not committed.
    fn process(&mut self, raw: Bytes) -> Result<Processed, ProcessError>;
}

/// The software reference: `ferrofabric_validator::Validator`, which matches a Fabric 2.5 peer.
pub struct SoftwareProcessor {
    validator: Validator,
}

impl SoftwareProcessor {
    /// Starts from the channel's genesis block.
    ///
    /// Errors: as [`Validator::new`].
    pub fn new(genesis: Bytes) -> Result<Self, ValidatorError> {
        Ok(SoftwareProcessor { validator: Validator::new(genesis, ValidatorOptions::default())? })
    }
}

impl BlockProcessor for SoftwareProcessor {
    fn name(&self) -> String {
        "software".into()
    }

    fn process(&mut self, raw: Bytes) -> Result<Processed, ProcessError> {
        let r = self.validator.commit_block(raw)?;
        Ok(Processed {
            number: r.number,
            codes: r.codes,
            commit_hash: r.commit_hash,
            path: BlockPath::Software,
            cycles: None,
            host_codes: None,
        })
    }
}

fn codes_of(bytes: &[u8]) -> Vec<TxValidationCode> {
    bytes
        .iter()
        .map(|c| TxValidationCode::try_from(i32::from(*c)).unwrap_or(TxValidationCode::InvalidOtherReason))
        .collect()
}

/// The BMac peer: host session + card, behind a [`CardLink`] (see the module docs).
pub struct CardProcessor {
    host: HostSession,
    card: Box<dyn CardLink>,
    config: (u32, u32),
    /// Why the card was switched off ([`CardProcessor::commit`]); `None` while it validates.
    card_off: Option<String>,
}

/// A block committed by [`CardProcessor::commit`].
#[derive(Debug)]
pub struct Committed {
    /// The host ledger's result: codes, the state updates to store, the commit hash.
    pub result: BlockResult,
    /// Which way the block went.
    pub path: BlockPath,
    /// Card cycles from the block's first datagram to its result (hardware path).
    pub cycles: Option<u64>,
}

impl CardProcessor {
    /// Joins the channel from its genesis block with the card behind `link`, which must be fresh (just reset, or fed
    /// by a relay that plans blocks as this host does); the host loads the card's policy table as blocks need it.
    ///
    /// Errors: the genesis block is unusable.
    pub fn new(genesis: Bytes, link: Box<dyn CardLink>) -> Result<Self, ProcessError> {
        Ok(CardProcessor { host: HostSession::new(genesis)?, config: link.config(), card: link, card_off: None })
    }

    /// The link as its concrete back end `L` (e.g. the co-simulated card, for its statistics and cycle counter, or
    /// the UDP link, for its statistics); `None` if the link is another kind.
    pub fn link_mut<L: CardLink + 'static>(&mut self) -> Option<&mut L> {
        self.card.as_any_mut().downcast_mut::<L>()
    }

    /// Number of the last committed block.
    pub fn last_block_number(&self) -> u64 {
        self.host.validator().last_block_number()
    }

    /// Fabric's commit hash after the last committed block.
    pub fn commit_hash(&self) -> Option<[u8; 32]> {
        self.host.validator().commit_hash()
    }

    /// Why the card was switched off, if it was: the host then validates every block in software.
    pub fn card_off(&self) -> Option<&str> {
        self.card_off.as_deref()
    }

    /// Sends a hardware-path block's sections and reads its result, with the cycles it took; `None` when a relayed card
    /// keeps no result for the block ([`CardLink::result_of`]). Fault points (fail-rs)
    /// make the card misbehave here: `bmac-card-fault` fails, as a card that stops answering would;
    /// `bmac-card-wrong-code` reports the block's first code wrong (VALID as MVCC_READ_CONFLICT, any other as VALID).
    fn on_card(
        &mut self,
        sections: &[Section],
        number: u64,
        tx_count: usize,
    ) -> Result<Option<(CardResult, u64)>, ProcessError> {
        if let Some(why) = fail::eval("bmac-card-fault", |arg| arg.unwrap_or_else(|| "fault point".into())) {
            return Err(ProcessError::Hardware(format!("the card stopped answering ({why})")));
        }
        let t0 = self.card.cycles();
        for s in sections {
            self.card.send_section(s)?;
        }
        let Some(mut r) = self.card.result_of(number)? else { return Ok(None) };
        if fail::eval("bmac-card-wrong-code", |_| ()).is_some() {
            if let Some(c) = r.codes.first_mut() {
                let valid = TxValidationCode::Valid as i32 as u8;
                *c = if *c == valid { TxValidationCode::MvccReadConflict as i32 as u8 } else { valid };
            }
        }
        if r.number != number || r.codes.len() != tx_count {
            return Err(ProcessError::Hardware(format!(
                "result for block {} with {} codes, expected block {number} with {tx_count}",
                r.number,
                r.codes.len(),
            )));
        }
        // A card on the network counts its own cycles: its LATENCY register (HEADER to result) stands for them.
        let cycles = t0.map_or(u64::from(r.latency), |t0| r.at_cycle - t0);
        Ok(Some((r, cycles)))
    }

    /// Validates and commits the next block as a BMac peer does (hw/DESIGN.md §1): on the card when the block can
    /// take the hardware path, by the host in software otherwise. For a hardware-path block the host commits with
    /// the card's signature verdicts and verifies no signature itself; it runs the other checks and MVCC on its own
    /// ledger, so a card whose codes differ from those is caught ([`HostSession::commit_attested`]).
    ///
    /// A card that fails (stops answering, reports an impossible result, disagrees with the host, or cannot take a
    /// state sync) is switched off ([`CardProcessor::card_off`]): that block and every later one are validated
    /// by the host in software. No block is lost or committed twice: the host commits each block once, whatever the
    /// card did. A relayed card that keeps no result for the block, because its relay has moved past it, has not
    /// failed: the host validates that block and the card stays on.
    ///
    /// Errors: the host refuses the block (as a Fabric peer would); nothing of it is committed.
    pub fn commit(&mut self, raw: Bytes) -> Result<Committed, ValidatorError> {
        if let Some(why) = &self.card_off {
            let path = BlockPath::Host(format!("the card is off: {why}"));
            // Not host-path for the card: it is off, so no state sync is made for it.
            let (result, _) = self.host.commit(raw, false)?;
            return Ok(Committed { result, path, cycles: None });
        }
        let prepared = self.host.prepare(&raw)?;
        let sections = match prepared.route {
            Route::Hardware(sections) => sections,
            Route::Host(reason) => {
                let (result, sync) = self.host.commit(raw, true)?;
                for s in &sync {
                    if let Err(e) = self.card.send_section(s) {
                        self.card_off = Some(format!("block {}: state sync: {e}", result.number));
                        break;
                    }
                }
                return Ok(Committed { result, path: BlockPath::Host(reason), cycles: None });
            }
        };
        let number = prepared.number;
        let card = match self.on_card(&sections, number, prepared.tx_count) {
            Ok(Some(r)) => Ok(r),
            Ok(None) => {
                // A relayed card that moved past this block: not the card's fault, the host takes this one.
                let (result, _) = self.host.commit(raw, false)?;
                let path = BlockPath::Host(format!("the card keeps no result for block {number}"));
                return Ok(Committed { result, path, cycles: None });
            }
            Err(e) => Err(e),
        };
        let attested = match &card {
            Ok((r, _)) if r.block_valid => Some(self.host.commit_attested(raw.clone(), &codes_of(&r.codes))),
            _ => None,
        };
        // Anything but an attested commit: the host validates the block in full, and decides whether the card failed.
        let (fault, host) = match (card, attested) {
            (Ok((_, cycles)), Some(Ok(result))) => {
                return Ok(Committed { result, path: BlockPath::Hardware, cycles: Some(cycles) })
            }
            (Ok(_), Some(Err(e))) => {
                let host = self.host.commit(raw, false);
                let why = match (&e, &host) {
                    (ValidatorError::Disputed { .. }, _) => format!("the card's codes differ from the host's: {e}"),
                    (_, Err(_)) => format!("block {number}: the card accepted a block the host refused"),
                    (_, Ok(_)) => format!("block {number}: {e}"),
                };
                (Some(why), host)
            }
            (Ok(_), None) => {
                let host = self.host.commit(raw, false);
                let why = host
                    .is_ok()
                    .then(|| format!("block {number}: the card refused an orderer signature the host accepted"));
                (why, host)
            }
            (Err(e), _) => (Some(format!("block {number}: {e}")), self.host.commit(raw, false)),
        };
        if let Some(why) = &fault {
            self.card_off = Some(why.clone());
        }
        let (result, _) = host?;
        let why = fault.unwrap_or_default();
        Ok(Committed { result, path: BlockPath::Host(format!("the card failed: {why}")), cycles: None })
    }

    /// The host session.
    pub fn host(&self) -> &HostSession {
        &self.host
    }
}

/// A throughput run: blocks fed back to back ([`CardProcessor::run_pipelined`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelinedRun {
    /// Blocks fed.
    pub blocks: usize,
    /// Their transactions.
    pub txs: usize,
    /// Cycles from the first datagram to the last result.
    pub cycles: u64,
    /// Cycles from the first result to the last (the steady state, for two or more blocks).
    pub steady_cycles: u64,
    /// Transactions of every block but the first.
    pub steady_txs: usize,
    /// The LATENCY register of each block (HEADER section to result).
    pub latencies: Vec<u32>,
}

impl CardProcessor {
    /// Feeds hardware-path blocks back to back, the way a host that keeps up would, and measures the card.
    /// The host prepares and commits each block first. Its plans depend on the committed state, and the
    /// software ledger gives that state without waiting for the card. The card's codes must then equal the
    /// host's.
    ///
    /// Errors: a block that is not hardware-path, a disagreement, or the simulation failing.
    pub fn run_pipelined(&mut self, blocks: &[Bytes]) -> Result<PipelinedRun, ProcessError> {
        let mut work = Vec::with_capacity(blocks.len());
        for raw in blocks {
            let p = self.host.prepare(raw)?;
            let Route::Hardware(sections) = p.route else {
                return Err(ProcessError::Hardware(format!("block {} is not hardware-path", p.number)));
            };
            let (res, _) = self.host.commit(raw.clone(), false)?;
            work.push((p.number, res.transactions_filter(), sections));
        }
        let Some(t0) = self.card.cycles() else {
            return Err(ProcessError::Hardware("a pipelined run needs the card in this process".into()));
        };
        for (_, _, sections) in &work {
            for s in sections {
                self.card.send_section(s)?;
            }
        }
        let mut results = Vec::with_capacity(work.len());
        for (number, _, _) in &work {
            let r = self.card.result_of(*number)?;
            results.push(r.ok_or_else(|| ProcessError::Hardware(format!("block {number}: no result")))?);
        }
        for ((number, codes, _), r) in work.iter().zip(&results) {
            if r.number != *number || r.codes != *codes || !r.block_valid {
                return Err(ProcessError::Hardware(format!("block {number}: the card's codes differ from the host's")));
            }
        }
        let last = results.last().map(|r| r.at_cycle).unwrap_or(t0);
        let first = results.first().map(|r| r.at_cycle).unwrap_or(t0);
        Ok(PipelinedRun {
            blocks: work.len(),
            txs: work.iter().map(|w| w.1.len()).sum(),
            cycles: last - t0,
            steady_cycles: last - first,
            steady_txs: work.iter().skip(1).map(|w| w.1.len()).sum(),
            latencies: results.iter().map(|r| r.latency).collect(),
        })
    }
}

impl BlockProcessor for CardProcessor {
    fn name(&self) -> String {
        format!("{} {}x{}", self.card.kind(), self.config.0, self.config.1)
    }

    fn process(&mut self, raw: Bytes) -> Result<Processed, ProcessError> {
        let prepared = self.host.prepare(&raw)?;
        match prepared.route {
            Route::Hardware(sections) => {
                let Some((r, cycles)) = self.on_card(&sections, prepared.number, prepared.tx_count)? else {
                    let (res, _) = self.host.commit(raw, false)?;
                    let path = BlockPath::Host(format!("the card keeps no result for block {}", res.number));
                    return Ok(Processed {
                        number: res.number,
                        codes: res.codes,
                        commit_hash: res.commit_hash,
                        path,
                        cycles: None,
                        host_codes: None,
                    });
                };
                let sw = self.host.commit(raw, false);
                match (r.block_valid, sw) {
                    (true, Ok((res, _))) => Ok(Processed {
                        number: r.number,
                        codes: codes_of(&r.codes),
                        commit_hash: res.commit_hash,
                        path: BlockPath::Hardware,
                        cycles: Some(cycles),
                        host_codes: Some(res.codes),
                    }),
                    (false, Err(e)) => Err(e.into()),
                    (true, Err(e)) => {
                        Err(ProcessError::Hardware(format!("the card accepted a block the host refused: {e}")))
                    }
                    (false, Ok(_)) => Err(ProcessError::Hardware(format!(
                        "the card refused the orderer signature of block {} that the host accepted",
                        r.number
                    ))),
                }
            }
            Route::Host(reason) => {
                let (res, sync) = self.host.commit(raw, true)?;
                for s in &sync {
                    self.card.send_section(s)?;
                }
                Ok(Processed {
                    number: res.number,
                    codes: res.codes,
                    commit_hash: res.commit_hash,
                    path: BlockPath::Host(reason),
                    cycles: None,
                    host_codes: None,
                })
            }
        }
    }
}
