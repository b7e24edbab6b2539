//! The BMac host: it keeps the ledger (Fabric's block store and world state, here `ferrofabric-validator`),
//! checks the block chain, plans each block ([`crate::host`]) and encodes it for the hardware
//! ([`crate::encoder`]). Host-path blocks are validated in software and their writes are sent to the hardware KV
//! store as `STATE_SYNC` sections (hw/DESIGN.md §1.1).

use std::collections::HashSet;

use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_protoutil::block_header_hash;
use ferrofabric_validator::{BlockResult, TxValidationCode, Validator, ValidatorError, ValidatorOptions};

use crate::encoder::Encoder;
use crate::host::{plan_block, BlockPlan, HostContext};
use crate::policy::{resolve_channel_policy, Expr as PolicyExpr, PolicyTable};
use crate::wire::Section;

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
    txids: HashSet<String>,
    last_number: u64,
    last_hash: [u8; 32],
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
        let arena = BlockArena::decode(genesis.clone())?;
        let validator = Validator::new(genesis, ValidatorOptions { threads: 1 })?;
        let encoder = Encoder::new(validator.channel_config().clone());
        let mut txids = HashSet::new();
        add_txids(&mut txids, &arena);
        let mut s = HostSession {
            validator,
            encoder,
            policies: PolicyTable::new(),
            txids,
            last_number: 0,
            last_hash: block_header_hash(arena.header()),
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
        Ok(Prepared { number, tx_count, route })
    }

    fn route(&mut self, arena: &BlockArena) -> Route {
        let h = arena.header();
        if arena.number() != self.last_number + 1
            || h.previous_hash.as_ref() != self.last_hash
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
            let ctx = HostContext { config: &config, view: &view, txids: &self.txids, mspids: &mspids, root };
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
        let arena = BlockArena::decode(raw.clone())?;
        if !host_path {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        let result = self.validator.commit_block(raw)?;
        let sync = self.committed(&arena, &result, host_path)?;
        Ok((result, sync))
    }

    /// Commits a hardware-path block with the card's codes as BMac's host does: the card's signature verdicts are
    /// taken, the host verifies no signature and runs the other checks and MVCC on its own ledger
    /// ([`Validator::commit_block_attested`]). For a block whose orderer signatures the card accepted.
    ///
    /// Errors: the host reaches other codes ([`ValidatorError::Disputed`]) or refuses the block; then nothing is
    /// committed and the block is still in flight: commit it with [`HostSession::commit`].
    pub fn commit_attested(&mut self, raw: Bytes, codes: &[TxValidationCode]) -> Result<BlockResult, ValidatorError> {
        let arena = BlockArena::decode(raw.clone())?;
        let result = self.validator.commit_block_attested(raw, codes)?;
        self.in_flight = self.in_flight.saturating_sub(1);
        self.committed(&arena, &result, false)?;
        Ok(result)
    }

    /// The host's own books after a block is committed: txids, chain position, configuration; for a host-path block
    /// its `STATE_SYNC` sections.
    fn committed(
        &mut self,
        arena: &BlockArena,
        result: &BlockResult,
        host_path: bool,
    ) -> Result<Vec<Section>, ValidatorError> {
        add_txids(&mut self.txids, arena);
        self.last_number = result.number;
        self.last_hash = block_header_hash(arena.header());
        let mut sync = Vec::new();
        if result.config_updated {
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

fn add_txids(set: &mut HashSet<String>, arena: &BlockArena) {
    for tx in arena.txs() {
        if let Ok(ch) = tx.channel_header() {
            if !ch.tx_id.is_empty() {
                set.insert(ch.tx_id.clone());
            }
        }
    }
}
