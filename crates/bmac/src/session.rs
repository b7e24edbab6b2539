//! The BMac host: it keeps the ledger (Fabric's block store and world state, here `ferrofabric-validator`),
//! checks the block chain, plans each block ([`crate::host`]) and encodes it for the hardware
//! ([`crate::encoder`]). Host-path blocks are validated in software and their writes are sent to the hardware KV
//! store as `STATE_SYNC` sections (hw/DESIGN.md §1.1).

use std::collections::VecDeque;

use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_validator::{BlockResult, TxValidationCode, Validator, ValidatorError, ValidatorOptions};

use crate::encoder::Encoder;
use crate::host::{plan_block, BlockPlan, HostContext};
use crate::policy::{resolve_channel_policy, Expr as PolicyExpr, PolicyTable};
use crate::wire::Section;

/// Prepared blocks whose decoding is kept for their commit: the card's pipeline holds a few at a time.
const MAX_DECODED: usize = 8;

/// Where a block goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Through the hardware: these sections, in order.
    Hardware(Vec<Section>),
    /// Validated by the host in software, for this reason.
    Host(String),
}

/// A block ready for the block processor.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// Block number (as the block claims).
    pub number: u64,
    /// Number of transactions.
    pub tx_count: usize,
    /// Hardware or host path.
    pub route: Route,
}

/// The host side of a BMac peer for one channel.
pub struct HostSession {
    validator: Validator,
    encoder: Encoder,
    policies: PolicyTable,
    /// Blocks prepared and not yet committed, decoded once by [`HostSession::prepare`] and committed from that
    /// decoding (at most [`MAX_DECODED`], oldest first).
    decoded: VecDeque<BlockArena>,
    /// The channel's BlockValidation policy, normalised; `None` when it cannot run on the card.
    block_policy: Option<PolicyExpr>,
    /// Hardware-path blocks prepared and not yet committed: the policy table is cleared only when there are none.
    in_flight: usize,
}

impl HostSession {
    /// Joins the channel from its genesis block, for a card that was just reset (empty caches and policy table).
    ///
    /// Errors: as [`Validator::new`].
    pub fn new(genesis: Bytes) -> Result<Self, ValidatorError> {
        let validator = Validator::new(genesis, ValidatorOptions { threads: 1 })?;
        let encoder = Encoder::new(validator.channel_config().clone());
        let mut s = HostSession {
            validator,
            encoder,
            policies: PolicyTable::new(),
            decoded: VecDeque::new(),
            block_policy: None,
            in_flight: 0,
        };
        s.block_policy = s.compute_block_policy();
        Ok(s)
    }

    /// The channel's BlockValidation policy, normalised; `None` when it cannot be.
    fn compute_block_policy(&self) -> Option<PolicyExpr> {
        let cfg = self.validator.channel_config();
        let root = cfg.config().channel_group.as_ref()?;
        resolve_channel_policy(root, "/Channel/Orderer/BlockValidation", self.encoder.mspids()).ok()
    }

    /// The host's software validator (ledger and world state).
    pub fn validator(&self) -> &Validator {
        &self.validator
    }

    /// The sender (identity and namespace ids).
    pub fn encoder_mut(&mut self) -> &mut Encoder {
        &mut self.encoder
    }

    /// Decides the route of the next block and encodes it for the hardware if it takes the hardware path.
    /// A block that fails the host's chain checks (number, previous hash, data hash) takes the host path,
    /// where the software refuses it.
    ///
    /// Errors: the bytes are not a block.
    pub fn prepare(&mut self, raw: &Bytes) -> Result<Prepared, ValidatorError> {
        let arena = BlockArena::decode(raw.clone())?;
        let number = arena.number();
        let tx_count = arena.txs().len();
        let route = self.route(&arena);
        if matches!(route, Route::Hardware(_)) {
            self.in_flight += 1;
        }
        if self.decoded.len() == MAX_DECODED {
            self.decoded.pop_front();
        }
        self.decoded.push_back(arena);
        Ok(Prepared { number, tx_count, route })
    }

    /// The decoding of `raw` that [`HostSession::prepare`] made, taken out, or a new one.
    fn decoding_of(&mut self, raw: Bytes) -> Result<BlockArena, ValidatorError> {
        // The same bytes, not merely equal ones: the caller hands back the block it prepared.
        let same = |a: &BlockArena| a.raw().as_ptr() == raw.as_ptr() && a.raw().len() == raw.len();
        match self.decoded.iter().position(same) {
            Some(i) => Ok(self.decoded.remove(i).unwrap_or_else(|| unreachable!("position found above"))),
            None => Ok(BlockArena::decode(raw)?),
        }
    }

    fn route(&mut self, arena: &BlockArena) -> Route {
        let h = arena.header();
        if arena.number() != self.validator.last_block_number() + 1
            || h.previous_hash.as_ref() != self.validator.last_header_hash()
            || h.data_hash.as_ref() != arena.computed_data_hash()
        {
            return Route::Host("the block fails the chain checks".into());
        }
        let Some(block_expr) = self.block_policy.clone() else {
            return Route::Host("the BlockValidation policy cannot run on the card".into());
        };
        match self.plan_and_encode(arena, &block_expr) {
            // A full policy table is cleared when no block is in flight, and the block planned again: its policies
            // are then the first of the new table.
            Route::Host(_) if self.policies.is_full() && self.in_flight == 0 => {
                self.policies.clear();
                self.plan_and_encode(arena, &block_expr)
            }
            route => route,
        }
    }

    fn plan_and_encode(&mut self, arena: &BlockArena, block_expr: &PolicyExpr) -> Route {
        let block_policy = match self.policies.load(block_expr) {
            Ok(id) => id,
            Err(e) => return Route::Host(format!("BlockValidation policy {block_expr}: {e}")),
        };
        let config = self.validator.channel_config().clone();
        let Some(root) = config.config().channel_group.as_ref() else {
            return Route::Host("no channel group".into());
        };
        let mspids = self.encoder.mspids().to_vec();
        let plan = {
            let view = self.validator.state().view();
            let txids = self.validator.txids();
            let ctx = HostContext { config: &config, view: &view, txids, mspids: &mspids, root };
            plan_block(&ctx, &mut self.policies, arena)
        };
        match plan {
            BlockPlan::Host(reason) => Route::Host(reason),
            BlockPlan::Hardware(txs) => match self.encoder.encode_block(arena, &txs, block_policy) {
                // Policies loaded for this block (or for an earlier host-path one) go first: the card's table must
                // hold them before the block's METADATA and TX sections are validated.
                Ok(sections) => {
                    let mut out = self.policies.take_pending_syncs();
                    out.extend(sections);
                    Route::Hardware(out)
                }
                Err(e) => Route::Host(e.0),
            },
        }
    }

    /// Commits the block to the host's ledger (the software validator), after the hardware (or instead of it).
    /// For a host-path block the returned sections are its `STATE_SYNC` for the hardware KV store.
    ///
    /// Errors: the software refuses the block ([`ValidatorError`]).
    pub fn commit(&mut self, raw: Bytes, host_path: bool) -> Result<(BlockResult, Vec<Section>), ValidatorError> {
        let arena = self.decoding_of(raw)?;
        if !host_path {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        let result = self.validator.commit_decoded(arena)?;
        let sync = self.committed(&result, host_path)?;
        Ok((result, sync))
    }

    /// Commits a hardware-path block with the card's codes as BMac's host does: the card's signature verdicts are
    /// taken, the host verifies no signature and runs the other checks and MVCC on its own ledger
    /// ([`Validator::commit_block_attested`]). For a block whose orderer signatures the card accepted.
    ///
    /// Errors: the host reaches other codes ([`ValidatorError::Disputed`]) or refuses the block; then nothing is
    /// committed and the block is still in flight: commit it with [`HostSession::commit`].
    pub fn commit_attested(&mut self, raw: Bytes, codes: &[TxValidationCode]) -> Result<BlockResult, ValidatorError> {
        // A refused block stays in flight; its commit then decodes it again, which only a dispute costs.
        let arena = self.decoding_of(raw)?;
        let result = self.validator.commit_decoded_attested(arena, codes)?;
        self.in_flight = self.in_flight.saturating_sub(1);
        self.committed(&result, false)?;
        Ok(result)
    }

    /// The host's own books after a block is committed (the ledger's txids and chain position are the validator's):
    /// the configuration; for a host-path block its `STATE_SYNC` sections.
    fn committed(&mut self, result: &BlockResult, host_path: bool) -> Result<Vec<Section>, ValidatorError> {
        let mut sync = Vec::new();
        if result.new_config.is_some() {
            self.encoder.set_config(self.validator.channel_config().clone());
            self.block_policy = self.compute_block_policy();
        }
        if host_path {
            sync = self
                .encoder
                .encode_state_sync(result.number, &result.updates)
                .map_err(|e| ValidatorError::Execution { number: result.number, reason: e.0 })?;
        }
        Ok(sync)
    }
}
