//! The embeddable Fabric 2.5 and 3 validator: give it a channel's config block, then blocks; it returns what a Fabric
//! peer would decide for each block — every transaction's [`TxValidationCode`], the TRANSACTIONS_FILTER bytes, the
//! state updates and the COMMIT_HASH — and keeps the world state in memory.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use ferrofabric_validator::{Validator, ValidatorOptions};
//! let genesis = bytes::Bytes::from(std::fs::read("genesis.block")?);
//! let mut validator = Validator::new(genesis, ValidatorOptions::default())?;
//! # let next_block_bytes = bytes::Bytes::new();
//! let result = validator.commit_block(next_block_bytes)?;
//! println!("block {}: {:?} commit hash {:?}", result.number, result.codes, result.commit_hash.map(hex::encode));
//! # Ok(()) }
//! ```
//!
//! # Pipeline (Fabric's `core/committer/txvalidator/v20` + `core/ledger/kvledger`)
//! 1. **Block checks** ([`Validator::commit_block`]): number, previous hash, data hash and the orderer signatures
//!    against `/Channel/Orderer/BlockValidation` — on BFT channels (V3_0 capability) signatures that name their
//!    consenter by id. A block that fails is refused as a whole ([`ValidatorError`]).
//! 2. **Per transaction, in parallel** on a rayon pool (`txcheck`): headers, creator MSP validity and signature, txid,
//!    proposal hash, the ledger's txids, chaincode definitions from `_lifecycle`, and VSCC — the endorsement policy,
//!    collection policies and key-level (state-based) policies, evaluated lazily (a signature is verified only when a
//!    policy needs it).
//! 3. **In order** (`mvcc`): key-level policy updates made earlier in the block, duplicate txids in the block, then
//!    MVCC (MVCC_READ_CONFLICT, PHANTOM_READ_CONFLICT) against the committed state plus the updates of earlier valid
//!    transactions, write-set application at height (block, tx) — a valid CONFIG transaction writes its
//!    `ConfigEnvelope` under [`CHANNEL_CONFIG_KEY`] — and the commit hash.
//!
//! # With a trusted signature verifier
//! [`Validator::commit_block_attested`] runs the same pipeline with the signature verdicts of a verifier the caller
//! trusts (the BMac card, `ferrofabric-bmac`): no ECDSA signature is verified, every other check and MVCC are, and the
//! block commits only if the codes reached are the verifier's.
//!
//! # Not supported (yet)
//! * Private data: only the hashed read/write sets are validated and kept (as Fabric's hashed state is); the private
//!   data store, its dissemination and private-data purges are not kept.
//! * Idemix MSPs (the MSP crate refuses them), legacy (pre-2.0, `lscc`) chaincode definitions, and validation plugins
//!   other than the built-in `vscc`.
//! * Nothing else is left out of MVCC: range queries summarised as Merkle hashes (more than 50 results) are
//!   re-hashed and compared as Fabric does ([`summarize_query_reads`]).
//!
//! # Shared rules
//! Validators that must decide exactly as this one (the BMac host in `ferrofabric-bmac`) call its rules instead of
//! copying them: the transaction checks ([`check_common_header`], [`check_creator`], [`check_payload`],
//! [`check_endorser_transaction`], [`check_txid`], [`check_structure`]) and the chaincode definitions of
//! [`chaincode_definition`], all on the arena's decoded transaction.

mod context;
mod lifecycle;
mod mvcc;
mod rangequery;
mod signatures;
mod txcheck;
mod txids;
mod vscc;

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_channelconfig::{verify_block_signatures, BlockSignatureError, ChannelConfig};
use ferrofabric_protos::common::{BlockMetadataIndex, ConfigEnvelope, HeaderType};
use ferrofabric_protoutil::block_header_hash;
use ferrofabric_state::{UpdateBatch, WorldState};
use prost::Message;

pub use ferrofabric_protos::peer::TxValidationCode;
pub use lifecycle::{
    defined_chaincodes, definition as chaincode_definition, Definition as ChaincodeDefinition, LIFECYCLE,
};
pub use mvcc::{apply_write_set, CHANNEL_CONFIG_KEY};
pub use rangequery::{summarize as summarize_query_reads, MAX_DEGREE as MAX_DEGREE_QUERY_READS_HASHING};
pub use txcheck::{
    check_common_header, check_creator, check_endorser_transaction, check_payload, check_structure, check_txid,
};
pub use txids::TxIds;
pub use vscc::VALIDATION_PARAMETER;

use signatures::Signatures;

/// Tuning of a [`Validator`].
#[derive(Clone, Debug, Default)]
pub struct ValidatorOptions {
    /// Threads of the transaction-validation pool (FastFabric Fig. 7's "validation threads"); 0 = one per core.
    pub threads: usize,
}

/// Why a block was refused as a whole (nothing of it is committed; the validator stays at the previous block).
#[derive(Debug, thiserror::Error)]
pub enum ValidatorError {
    /// The bytes are not a Block.
    #[error("block does not decode: {0}")]
    Decode(#[from] ferrofabric_arena::DecodeError),
    /// The block does not continue the chain (number or previous hash) or its data hash is wrong.
    #[error("block {number}: {reason}")]
    BadBlock {
        /// The block's number (as it claims).
        number: u64,
        /// What is wrong.
        reason: String,
    },
    /// The orderer signatures do not satisfy /Channel/Orderer/BlockValidation.
    #[error("block {number}: orderer signature check failed: {reason}")]
    BadSignature {
        /// The block's number.
        number: u64,
        /// Why the policy was not satisfied.
        reason: String,
    },
    /// The genesis/config block does not hold a usable channel configuration.
    #[error("channel configuration: {0}")]
    Config(#[from] ferrofabric_channelconfig::PolicyError),
    /// The codes a trusted signature verifier attested ([`Validator::commit_block_attested`]) differ from the ones
    /// this validator reaches with its verdicts: the verifier is wrong or the two ledgers diverged. Nothing is
    /// committed; validating the block with [`Validator::commit_block`] decides it.
    #[error("block {number}: attested codes disputed: {reason}")]
    Disputed {
        /// The block's number.
        number: u64,
        /// The first transaction whose codes differ.
        reason: String,
    },
    /// Validation could not run to completion (Fabric's "VSCC execution failure"): e.g. an unsupported validation
    /// plugin or an unreadable chaincode definition. Fabric stops committing in this case too.
    #[error("block {number}: validation could not complete: {reason}")]
    Execution {
        /// The block's number.
        number: u64,
        /// What failed.
        reason: String,
    },
}

/// The outcome of one committed block.
#[derive(Debug)]
pub struct BlockResult {
    /// Block number.
    pub number: u64,
    /// One code per transaction, in block order.
    pub codes: Vec<TxValidationCode>,
    /// The commit hash (Fabric's `kvLedger.addBlockCommitHash`), `None` for the genesis block.
    pub commit_hash: Option<[u8; 32]>,
    /// The state updates applied (public and hashed).
    pub updates: UpdateBatch,
    /// The channel configuration the block's valid CONFIG transaction put in force, if it carried one: the
    /// configuration parsed once, by the validator, for whoever follows the channel's config.
    pub new_config: Option<Arc<ChannelConfig>>,
}

impl BlockResult {
    /// The TRANSACTIONS_FILTER metadata bytes: one byte per transaction, its code.
    pub fn transactions_filter(&self) -> Vec<u8> {
        self.codes.iter().map(|c| *c as i32 as u8).collect()
    }
}

/// Where a [`Validator`] resumes after a restart: the world state of a checkpoint taken after block `N` (FastFabric's
/// in-memory state, Opt P-I, made durable) plus the committed blocks `0..=N` as the peer stored them, from which the
/// ledger's transaction ids and the channel configuration in force after `N` are taken. Only the blocks after `N`
/// then need validating again.
///
/// Build it with [`ResumePoint::new`], add the stored blocks in order with [`ResumePoint::add_committed_block`],
/// then call [`Validator::resume`].
pub struct ResumePoint {
    state: WorldState,
    commit_hash: Option<[u8; 32]>,
    header_hash: [u8; 32],
    txids: TxIds,
    /// Number and header hash of the last block added.
    last: Option<(u64, [u8; 32])>,
    /// The last CONFIG block whose transaction was committed VALID.
    config_block: Option<BlockArena>,
}

impl ResumePoint {
    /// A resume point from a checkpoint: `state` is the world state after block `N` (its last block must be `N`),
    /// `commit_hash` the commit hash after `N` (`None` only for `N = 0`) and `header_hash` the SHA-256 of block
    /// `N`'s header ([`ferrofabric_protoutil::block_header_hash`]), which ties the checkpoint to one chain.
    pub fn new(state: WorldState, commit_hash: Option<[u8; 32]>, header_hash: [u8; 32]) -> ResumePoint {
        ResumePoint { state, commit_hash, header_hash, txids: TxIds::default(), last: None, config_block: None }
    }

    /// Adds the next committed block (`0`, then `1`, ...) as the peer stored it, with its TRANSACTIONS_FILTER: its
    /// transaction ids join the ledger's set and, if it is a CONFIG block whose transaction is flagged VALID, its
    /// configuration becomes the one in force. Signatures are not verified again: the block was validated when it
    /// was committed.
    ///
    /// Errors: the block does not decode, does not follow the last one added (number, previous hash), or a CONFIG
    /// block has no TRANSACTIONS_FILTER.
    pub fn add_committed_block(&mut self, raw: Bytes) -> Result<(), ValidatorError> {
        let arena = BlockArena::decode(raw)?;
        let number = arena.number();
        match self.last {
            None if number != 0 => return Err(bad(number, "the stored blocks must start at block 0")),
            Some((n, _)) if number != n + 1 => return Err(bad(number, format!("expected block {}", n + 1))),
            Some((_, hash)) if arena.header().previous_hash.as_ref() != hash => {
                return Err(bad(number, "previous hash does not match the hash of the block before"))
            }
            _ => {}
        }
        let is_config = arena.txs().len() == 1
            && arena.txs()[0].channel_header().is_ok_and(|ch| ch.r#type == HeaderType::Config as i32);
        let config_in_force = is_config
            && match arena.metadata().metadata.get(BlockMetadataIndex::TransactionsFilter as usize) {
                Some(f) if !f.is_empty() => f[0] == TxValidationCode::Valid as i32 as u8,
                // Block 0 is stored before any validation; its configuration is the channel's by definition.
                _ if number == 0 => true,
                _ => return Err(bad(number, "a stored CONFIG block has no TRANSACTIONS_FILTER")),
            };
        record_txids(&arena, &mut self.txids);
        self.last = Some((number, block_header_hash(arena.header())));
        if config_in_force {
            self.config_block = Some(arena);
        }
        Ok(())
    }
}

/// A channel's validator and in-memory ledger state. See the crate docs.
pub struct Validator {
    config: Arc<ChannelConfig>,
    state: Arc<WorldState>,
    txids: TxIds,
    last_number: u64,
    last_hash: [u8; 32],
    commit_hash: Option<[u8; 32]>,
    pool: Arc<rayon::ThreadPool>,
    policies: context::PolicyCache,
}

impl Validator {
    /// Starts a channel from its genesis (config) block: the block is checked for a CONFIG transaction, the channel
    /// configuration is loaded from it and it becomes block 0 of the ledger.
    ///
    /// Errors: the block does not decode, is not block 0, or holds no valid channel configuration.
    pub fn new(genesis: Bytes, options: ValidatorOptions) -> Result<Validator, ValidatorError> {
        let arena = BlockArena::decode(genesis)?;
        if arena.number() != 0 {
            return Err(bad(arena.number(), "a genesis block must be block 0"));
        }
        let (config, envelope) = config_from_block(&arena)?;
        let mut txids = TxIds::default();
        record_txids(&arena, &mut txids);
        let state = Arc::new(WorldState::new());
        // The peer writes the genesis configuration into its state when it creates the ledger.
        let mut genesis_writes = UpdateBatch::new();
        mvcc::put_channel_config(&mut genesis_writes, envelope, ferrofabric_state::Height::new(0, 0));
        state.apply(0, &genesis_writes);
        Ok(Validator {
            config: Arc::new(config),
            state,
            txids,
            last_number: 0,
            last_hash: block_header_hash(arena.header()),
            commit_hash: None,
            pool: validation_pool(&options)?,
            policies: context::PolicyCache::default(),
        })
    }

    /// Resumes a channel from a [`ResumePoint`] (a state checkpoint plus the stored blocks up to it) instead of
    /// re-validating the chain from block 0; the next block to commit is `point`'s last block + 1.
    ///
    /// Errors: no block was added to `point`, the blocks added do not form a chain from block 0, the checkpoint's
    /// header hash is not the last block's, or the last valid configuration does not load.
    pub fn resume(point: ResumePoint, options: ValidatorOptions) -> Result<Validator, ValidatorError> {
        let ResumePoint { state, commit_hash, header_hash, txids, last, config_block } = point;
        let (number, last_hash) = last.ok_or_else(|| bad(0, "a resume point needs the stored blocks up to it"))?;
        if last_hash != header_hash {
            return Err(bad(number, "the checkpoint does not belong to this chain (header hash differs)"));
        }
        let state_block = state.view().last_block();
        if state_block != Some(number) {
            return Err(bad(number, format!("the checkpoint state is at block {state_block:?}")));
        }
        if number > 0 && commit_hash.is_none() {
            return Err(bad(number, "a checkpoint after block 0 must carry the commit hash"));
        }
        let config_block = config_block.ok_or_else(|| bad(number, "no configuration block among the stored blocks"))?;
        Ok(Validator {
            config: Arc::new(config_from_block(&config_block)?.0),
            state: Arc::new(state),
            txids,
            last_number: number,
            last_hash,
            commit_hash,
            pool: validation_pool(&options)?,
            policies: context::PolicyCache::default(),
        })
    }

    /// The current channel configuration (replaced by each valid CONFIG block).
    pub fn channel_config(&self) -> &Arc<ChannelConfig> {
        &self.config
    }

    /// The world state after the last committed block.
    pub fn state(&self) -> &Arc<WorldState> {
        &self.state
    }

    /// Number of the last committed block.
    pub fn last_block_number(&self) -> u64 {
        self.last_number
    }

    /// The commit hash after the last committed block (`None` until block 1 is committed).
    pub fn commit_hash(&self) -> Option<[u8; 32]> {
        self.commit_hash
    }

    /// The SHA-256 of the last committed block's header: the `previous_hash` the next block must carry.
    pub fn last_header_hash(&self) -> [u8; 32] {
        self.last_hash
    }

    /// The transaction ids of every committed block, valid or not (a later transaction with one of them is a
    /// DUPLICATE_TXID).
    pub fn txids(&self) -> &TxIds {
        &self.txids
    }

    /// [`Validator::commit_block`] of a block its caller has decoded already: the BMac host decodes each block once,
    /// to plan it for the card, and commits that decoding.
    ///
    /// Errors: as [`Validator::commit_block`].
    pub fn commit_decoded(&mut self, arena: BlockArena) -> Result<BlockResult, ValidatorError> {
        self.commit_one(arena.raw().clone(), Some(arena), Signatures::Verify)
    }

    /// [`Validator::commit_block_attested`] of a block its caller has decoded already.
    ///
    /// Errors: as [`Validator::commit_block_attested`].
    pub fn commit_decoded_attested(
        &mut self,
        arena: BlockArena,
        attested: &[TxValidationCode],
    ) -> Result<BlockResult, ValidatorError> {
        self.commit_one(arena.raw().clone(), Some(arena), Signatures::Attested(attested))
    }

    /// Checks, validates and commits the next block (the marshaled `common.Block` as the orderer delivered it).
    ///
    /// Errors ([`ValidatorError`]) refuse the whole block; an invalid *transaction* is not an error but a code.
    pub fn commit_block(&mut self, raw: Bytes) -> Result<BlockResult, ValidatorError> {
        self.commit_one(raw, None, Signatures::Verify)
    }

    /// Commits the next block with the signature verdicts of a trusted verifier (BMac's split, hw/DESIGN.md §1: the
    /// card verifies every ECDSA signature, the host commits). `attested` is the verifier's TRANSACTIONS_FILTER, one
    /// code per transaction, given only for a block whose orderer signatures the verifier accepted.
    ///
    /// No signature is verified here. Every other check runs as in [`Validator::commit_block`], with each signature
    /// taken as valid except where `attested` says otherwise: a transaction attested BAD_CREATOR_SIGNATURE has a bad
    /// creator signature, one attested ENDORSEMENT_POLICY_FAILURE endorsements that satisfy nothing. MVCC then runs
    /// on this validator's own state, and the block is committed only if the codes reached equal `attested`: a
    /// verifier that is wrong about anything but the signatures themselves is caught.
    ///
    /// Errors: [`ValidatorError::Disputed`] when the codes differ (nothing committed), otherwise as
    /// [`Validator::commit_block`].
    pub fn commit_block_attested(
        &mut self,
        raw: Bytes,
        attested: &[TxValidationCode],
    ) -> Result<BlockResult, ValidatorError> {
        self.commit_one(raw, None, Signatures::Attested(attested))
    }

    /// One block through both stages: decoded here unless the caller has (`arena`), then committed.
    fn commit_one(
        &mut self,
        raw: Bytes,
        arena: Option<BlockArena>,
        signatures: Signatures<'_>,
    ) -> Result<BlockResult, ValidatorError> {
        let config = self.config.clone();
        let prepared = self.pool.install(|| match arena {
            Some(arena) => prepare_decoded(&config, raw, Ok(arena), signatures),
            None => prepare(&config, raw, signatures),
        });
        self.finish_block(prepared, signatures)
    }

    /// Commits a stream of blocks, pipelined (FastFabric §III-D, "Opt P-II"): while block N's state-dependent checks,
    /// MVCC and commit run, block N+1's stateless checks (decoding, orderer and creator signatures, txids, proposal
    /// hashes) already run on the same pool, so both cores stay busy. Results are passed to `sink` in block order; it
    /// returns `false` to stop. Stops at the first refused block (after passing its error to `sink`).
    ///
    /// The outcome is identical to calling [`Validator::commit_block`] for each block: a block validated ahead with a
    /// configuration that a CONFIG block then replaced is validated again.
    pub fn commit_blocks<I, F>(&mut self, blocks: I, mut sink: F)
    where
        I: IntoIterator<Item = Bytes>,
        I::IntoIter: Send,
        F: FnMut(Result<BlockResult, ValidatorError>) -> bool,
    {
        let mut blocks = blocks.into_iter();
        let Some(first) = blocks.next() else { return };
        let config = self.config.clone();
        let mut current = self.pool.install(|| prepare(&config, first, Signatures::Verify));
        loop {
            let config = self.config.clone();
            let next_raw = blocks.next();
            let pool = self.pool.clone();
            let (next, result) = pool.install(|| {
                let me = &mut *self;
                rayon::join(
                    move || next_raw.map(|raw| prepare(&config, raw, Signatures::Verify)),
                    move || me.finish_block(current, Signatures::Verify),
                )
            });
            let failed = result.is_err();
            if !sink(result) || failed {
                return;
            }
            current = match next {
                // Prepared under a configuration that the block just committed replaced: prepare again.
                Some(p) if !Arc::ptr_eq(&p.config, &self.config) => {
                    let config = self.config.clone();
                    self.pool.install(|| prepare(&config, p.raw, Signatures::Verify))
                }
                Some(p) => p,
                None => return,
            };
        }
    }

    /// The state-dependent stage, MVCC and commit of a prepared block.
    fn finish_block(&mut self, prepared: Prepared, signatures: Signatures<'_>) -> Result<BlockResult, ValidatorError> {
        let Prepared { raw: _, config, checked } = prepared;
        let Checked { arena, signatures: block_signatures, prechecked } = checked?;
        self.check_chain(&arena)?;
        block_signatures?;
        let number = arena.number();

        let view = self.state.view();
        let ctx = context::BlockContext {
            config: &config,
            view: &view,
            txids: &self.txids,
            block_number: number,
            policies: &self.policies,
            signatures,
        };
        let verdicts = self.pool.install(|| txcheck::finish_all(&ctx, &arena, prechecked));
        let mut verdicts = verdicts
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|reason| ValidatorError::Execution { number, reason })?;
        mvcc::apply_key_level_dependencies(&arena, &mut verdicts);
        mvcc::mark_duplicate_txids(&mut verdicts);
        let (codes, updates) = mvcc::validate_and_prepare(&view, &arena, &verdicts);
        drop(view);
        if let Signatures::Attested(attested) = signatures {
            check_attested(number, &codes, attested)?;
        }

        // A valid CONFIG transaction replaces the configuration for the blocks that follow.
        let mut new_config = None;
        for (v, code) in verdicts.iter().zip(&codes) {
            if let (Some(env), TxValidationCode::Valid) = (&v.config, code) {
                new_config = Some(config_from_envelope(self.config.channel_id(), env)?);
            }
        }

        let filter: Vec<u8> = codes.iter().map(|c| *c as i32 as u8).collect();
        let commit_hash = if number == 1 || self.commit_hash.is_some() {
            Some(mvcc::commit_hash(&filter, &updates, self.commit_hash.as_ref()))
        } else {
            None
        };

        self.state.apply(number, &updates);
        record_txids(&arena, &mut self.txids);
        let new_config = new_config.map(Arc::new);
        if let Some(c) = &new_config {
            self.config = c.clone();
        }
        self.last_number = number;
        self.last_hash = block_header_hash(arena.header());
        self.commit_hash = commit_hash;
        Ok(BlockResult { number, codes, commit_hash, updates, new_config })
    }

    /// The chain checks: the next number and the previous block's hash.
    fn check_chain(&self, arena: &BlockArena) -> Result<(), ValidatorError> {
        let number = arena.number();
        if number != self.last_number + 1 {
            return Err(bad(number, format!("expected block {}", self.last_number + 1)));
        }
        if arena.header().previous_hash.as_ref() != self.last_hash {
            return Err(bad(number, "previous hash does not match the hash of the last committed block"));
        }
        Ok(())
    }
}

/// The codes reached with attested signature verdicts must be the attested ones.
fn check_attested(
    number: u64,
    codes: &[TxValidationCode],
    attested: &[TxValidationCode],
) -> Result<(), ValidatorError> {
    let disputed = |reason: String| ValidatorError::Disputed { number, reason };
    if codes.len() != attested.len() {
        return Err(disputed(format!("{} codes attested for {} transactions", attested.len(), codes.len())));
    }
    match codes.iter().zip(attested).position(|(ours, theirs)| ours != theirs) {
        Some(i) => Err(disputed(format!("transaction {i}: attested {:?}, validated {:?}", attested[i], codes[i]))),
        None => Ok(()),
    }
}

/// A block after the stateless stage (decoded, data hash and orderer signatures checked, transactions prechecked),
/// waiting for the commit of its predecessor.
struct Prepared {
    raw: Bytes,
    config: Arc<ChannelConfig>,
    checked: Result<Checked, ValidatorError>,
}

/// The stateless results of a block that decoded.
struct Checked {
    arena: BlockArena,
    signatures: Result<(), ValidatorError>,
    prechecked: Vec<txcheck::Prechecked>,
}

/// The stateless stage of a block, on the current rayon pool: the block's own checks and the transactions' prechecks
/// run side by side.
fn prepare(config: &Arc<ChannelConfig>, raw: Bytes, sigs: Signatures<'_>) -> Prepared {
    let arena = BlockArena::decode(raw.clone()).map_err(ValidatorError::from);
    prepare_decoded(config, raw, arena, sigs)
}

/// [`prepare`] of a block already decoded (or refused by the decoder).
fn prepare_decoded(
    config: &Arc<ChannelConfig>,
    raw: Bytes,
    arena: Result<BlockArena, ValidatorError>,
    sigs: Signatures<'_>,
) -> Prepared {
    let checked = arena.map(|arena| {
        let presumed = matches!(sigs, Signatures::Attested(_));
        let (signatures, prechecked) =
            rayon::join(|| check_block(config, &arena, presumed), || txcheck::precheck_all(config, &arena, sigs));
        Checked { arena, signatures, prechecked }
    });
    Prepared { raw, config: config.clone(), checked }
}

/// The block's own stateless checks: data hash and orderer signatures (Fabric's `mcs.VerifyBlock`).
/// With `presumed`, the orderer signatures count as valid (their signers must still satisfy the policy).
fn check_block(config: &ChannelConfig, arena: &BlockArena, presumed: bool) -> Result<(), ValidatorError> {
    if arena.header().data_hash.as_ref() != arena.computed_data_hash() {
        return Err(bad(arena.number(), "data hash does not match the block's data"));
    }
    verify_block_signatures(config, arena.header(), arena.metadata(), presumed).map_err(|e| match e {
        BlockSignatureError::NotSatisfied { number, reason } => ValidatorError::BadSignature { number, reason },
        BlockSignatureError::Decode(reason) => ValidatorError::BadBlock { number: arena.number(), reason },
    })
}

/// The pool of validation threads ([`ValidatorOptions::threads`]).
fn validation_pool(options: &ValidatorOptions) -> Result<Arc<rayon::ThreadPool>, ValidatorError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads)
        .thread_name(|i| format!("validate-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| ValidatorError::Execution { number: 0, reason: format!("thread pool: {e}") })
}

/// Adds the block's transaction ids to the ledger's set: every transaction's, valid or not, as Fabric's block index
/// keeps them (a later transaction with the same id is a DUPLICATE_TXID).
fn record_txids(arena: &BlockArena, txids: &mut TxIds) {
    for tx in arena.txs() {
        if let Ok(ch) = tx.channel_header() {
            if !ch.tx_id.is_empty() {
                txids.insert(&ch.tx_id);
            }
        }
    }
}

fn bad(number: u64, reason: impl Into<String>) -> ValidatorError {
    ValidatorError::BadBlock { number, reason: reason.into() }
}

/// The channel configuration carried by a config block's single CONFIG envelope, with the marshaled
/// `ConfigEnvelope` it came from.
fn config_from_block(arena: &BlockArena) -> Result<(ChannelConfig, Bytes), ValidatorError> {
    let number = arena.number();
    let tx = arena.txs().first().ok_or_else(|| bad(number, "config block has no transaction"))?;
    let payload = tx.payload().map_err(|e| bad(number, e.to_string()))?;
    let env = ConfigEnvelope::decode(payload.data.clone()).map_err(|e| bad(number, format!("ConfigEnvelope: {e}")))?;
    let channel = tx.channel_header().map_err(|e| bad(number, e.to_string()))?;
    Ok((config_from_envelope(&channel.channel_id, &env)?, payload.data.clone()))
}

/// A channel configuration from a CONFIG transaction's `ConfigEnvelope`; the channel is named by the transaction's
/// channel header (a genesis config carries no `last_update` to name it).
fn config_from_envelope(channel_id: &str, env: &ConfigEnvelope) -> Result<ChannelConfig, ValidatorError> {
    let config = env.config.as_ref().ok_or_else(|| {
        ValidatorError::Config(ferrofabric_channelconfig::PolicyError::InvalidConfig {
            path: "ConfigEnvelope.config".into(),
            reason: "absent".into(),
        })
    })?;
    Ok(ChannelConfig::from_config(channel_id, config)?)
}
