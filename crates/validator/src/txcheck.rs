//! Per-transaction checks, run in parallel over a block (Fabric's `core/committer/txvalidator/v20/validator.go`
//! `validateTx`, `core/common/validation/msgvalidation.go` `ValidateTransaction`, and the plugin dispatcher
//! `core/committer/txvalidator/v20/plugindispatcher/dispatcher.go`). The codes and the order in which the checks
//! run follow those files, so that a transaction with several defects gets the code Fabric gives it.

use std::collections::{BTreeSet, HashSet};

use ferrofabric_arena::{BlockArena, TxArena};
use ferrofabric_policy::ChannelConfig;
use ferrofabric_protos::common::{ConfigEnvelope, HeaderType};
use ferrofabric_protos::peer::ChaincodeEvent;
use ferrofabric_state::StateView;
use prost::Message;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::{lifecycle, vscc, TxValidationCode as Code};

/// What the parallel stage needs to know about the ledger, shared read-only by all threads.
pub(crate) struct BlockContext<'a> {
    pub config: &'a ChannelConfig,
    pub view: &'a StateView<'a>,
    pub txids: &'a HashSet<String>,
    pub block_number: u64,
    pub policies: &'a vscc::PolicyCache,
}

/// The outcome of the parallel stage for one transaction.
pub(crate) struct Verdict {
    pub code: Code,
    /// The txid of an endorser transaction that passed (for the in-block duplicate check).
    pub txid: Option<String>,
    /// A CONFIG transaction's new configuration.
    pub config: Option<ConfigEnvelope>,
    /// Whether the transaction passed VSCC (key-level validation parameters it writes take effect for later
    /// transactions of the block only then).
    pub passed_vscc: bool,
}

impl Verdict {
    fn code(code: Code) -> Result<Verdict, String> {
        Ok(Verdict { code, txid: None, config: None, passed_vscc: false })
    }
}

/// Validates every transaction of the block on the current rayon pool. `Err` (per transaction): validation could
/// not complete, which fails the whole block.
pub(crate) fn validate_all(ctx: &BlockContext<'_>, arena: &BlockArena) -> Vec<Result<Verdict, String>> {
    arena.txs().par_iter().map(|tx| validate_tx(ctx, tx)).collect()
}

fn validate_tx(ctx: &BlockContext<'_>, tx: &TxArena) -> Result<Verdict, String> {
    if tx.envelope().is_err() {
        return Verdict::code(Code::InvalidOtherReason);
    }
    let (htype, code) = validate_transaction(ctx, tx);
    if code != Code::Valid {
        return Verdict::code(code);
    }
    // `validate_transaction` only passes envelopes whose headers decode.
    let Ok(ch) = tx.channel_header() else { return Verdict::code(Code::InvalidOtherReason) };
    match htype {
        HeaderType::EndorserTransaction => {
            if ctx.txids.contains(&ch.tx_id) {
                return Verdict::code(Code::DuplicateTxid);
            }
            let code = dispatch(ctx, tx)?;
            let passed = code == Code::Valid;
            Ok(Verdict { code, txid: passed.then(|| ch.tx_id.clone()), config: None, passed_vscc: passed })
        }
        HeaderType::Config => {
            let Ok(p) = tx.payload() else { return Verdict::code(Code::InvalidOtherReason) };
            let env = ConfigEnvelope::decode(p.data.clone())
                .map_err(|e| format!("config transaction that passed the header checks does not decode: {e}"))?;
            Ok(Verdict { code: Code::Valid, txid: None, config: Some(env), passed_vscc: false })
        }
        _ => Verdict::code(Code::UnknownTxType),
    }
}

/// Fabric's `ValidateTransaction`: payload, common header, creator signature, then the type-specific checks.
fn validate_transaction(ctx: &BlockContext<'_>, tx: &TxArena) -> (HeaderType, Code) {
    let none = HeaderType::Message;
    let payload = match tx.payload() {
        Ok(p) => p,
        Err(e) if e.layer == "Payload.header" => return (none, Code::BadCommonHeader),
        Err(_) => return (none, Code::BadPayload),
    };
    let (Ok(ch), Ok(sh)) = (tx.channel_header(), tx.signature_header()) else {
        return (none, Code::BadCommonHeader);
    };
    let htype = match HeaderType::try_from(ch.r#type) {
        Ok(t @ (HeaderType::EndorserTransaction | HeaderType::ConfigUpdate | HeaderType::Config)) => t,
        _ => return (none, Code::BadCommonHeader),
    };
    if ch.epoch != 0 || sh.nonce.is_empty() || sh.creator.is_empty() {
        return (htype, Code::BadCommonHeader);
    }

    // checkSignatureFromCreator: the channel's MSPs (a header naming another channel finds none).
    let Ok(env) = tx.envelope() else { return (htype, Code::InvalidOtherReason) };
    if ch.channel_id != ctx.config.channel_id() || env.signature.is_empty() {
        return (htype, Code::BadCreatorSignature);
    }
    let creator_ok = ctx
        .config
        .msp_manager()
        .deserialize_identity(&sh.creator)
        .and_then(|id| id.validate().and_then(|()| id.verify(&env.payload, &env.signature)));
    if creator_ok.is_err() {
        return (htype, Code::BadCreatorSignature);
    }

    match htype {
        HeaderType::EndorserTransaction => {
            if ch.tx_id != compute_txid(&sh.nonce, &sh.creator) {
                return (htype, Code::BadProposalTxid);
            }
            if validate_endorser_transaction(tx).is_err() {
                return (htype, Code::InvalidEndorserTransaction);
            }
            (htype, Code::Valid)
        }
        HeaderType::Config => {
            if payload.data.is_empty() {
                return (htype, Code::InvalidConfigTransaction);
            }
            (htype, Code::Valid)
        }
        _ => (htype, Code::UnsupportedTxPayload),
    }
}

/// Fabric's transaction id: hex(SHA-256(nonce ‖ creator)) (`protoutil.ComputeTxID`).
pub(crate) fn compute_txid(nonce: &[u8], creator: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(nonce);
    h.update(creator);
    hex::encode(h.finalize())
}

/// Fabric's `validateEndorserTransaction`: exactly one action, a valid action signature header, decodable payloads
/// and a proposal hash over (channel header ‖ action signature header ‖ chaincode proposal payload) equal to the one
/// the endorsers signed.
fn validate_endorser_transaction(tx: &TxArena) -> Result<(), String> {
    let t = tx.transaction().map_err(|e| e.to_string())?;
    if t.actions.len() != 1 {
        return Err(format!("only one action per transaction is supported, tx contains {}", t.actions.len()));
    }
    let act = tx.action().map_err(|e| e.to_string())?;
    if act.signature_header.nonce.is_empty() || act.signature_header.creator.is_empty() {
        return Err("invalid action signature header".into());
    }
    let prp = tx.response_payload().map_err(|e| e.to_string())?;
    let (ch_bytes, _) = tx.header_bytes().map_err(|e| e.to_string())?;
    let cpp = &act.payload.chaincode_proposal_payload;
    if ch_bytes.is_empty() || act.signature_header_bytes.is_empty() || cpp.is_empty() {
        return Err("nil arguments to the proposal hash".into());
    }
    let mut h = Sha256::new();
    h.update(ch_bytes);
    h.update(&act.signature_header_bytes);
    h.update(cpp);
    if h.finalize().as_slice() != prp.proposal_hash.as_ref() {
        return Err("proposal hash does not match".into());
    }
    Ok(())
}

/// Fabric's plugin dispatcher: chaincode identity checks, the namespaces written, their definitions, then VSCC for
/// each. `Err`: validation could not complete (fails the block).
fn dispatch(ctx: &BlockContext<'_>, tx: &TxArena) -> Result<Code, String> {
    let Ok(ext) = tx.header_extension() else { return Ok(Code::BadHeaderExtension) };
    let Ok(cca) = tx.chaincode_action() else { return Ok(Code::BadResponsePayload) };
    let Ok(rwset) = tx.rwset() else { return Ok(Code::BadRwset) };
    let (Some(hdr_cc), Some(resp_cc)) = (&ext.chaincode_id, &cca.chaincode_id) else {
        return Ok(Code::InvalidOtherReason);
    };
    let cc = hdr_cc.name.as_str();
    if cc.is_empty() || cc != resp_cc.name || resp_cc.version.is_empty() {
        return Ok(Code::InvalidChaincode);
    }
    if !cca.events.is_empty() {
        match ChaincodeEvent::decode(cca.events.clone()) {
            Ok(ev) if ev.chaincode_id == cc => {}
            _ => return Ok(Code::InvalidOtherReason),
        }
    }
    // Namespaces to validate: the invoked chaincode, plus every namespace the transaction writes to. Fabric walks a
    // Go map here (random order); we walk them sorted so that a transaction failing in two namespaces gets a
    // reproducible code.
    let mut written = BTreeSet::new();
    written.insert(cc);
    let mut seen = HashSet::new();
    for ns in rwset {
        if !seen.insert(ns.namespace.as_str()) {
            return Ok(Code::IllegalWriteset);
        }
        let writes_coll =
            ns.collections.iter().any(|c| !c.hashed.hashed_writes.is_empty() || !c.hashed.metadata_writes.is_empty());
        if !ns.kv.writes.is_empty() || !ns.kv.metadata_writes.is_empty() || writes_coll {
            written.insert(ns.namespace.as_str());
        }
    }
    let sigset = vscc::endorsement_set(ctx, tx);
    for ns in written {
        let def = match lifecycle::definition(ctx.config, ctx.view, ns)? {
            Some(d) if !d.plugin.is_empty() && !d.policy.is_empty() => d,
            _ => return Ok(Code::InvalidChaincode),
        };
        if def.plugin != "vscc" {
            return Err(format!("chaincode {ns}: validation plugin '{}' is not supported", def.plugin));
        }
        let Some(sigset) = &sigset else { return Ok(Code::EndorsementPolicyFailure) };
        match vscc::validate_namespace(ctx, tx, ns, &def, sigset) {
            Ok(()) => {}
            Err(vscc::VsccError::Policy(reason)) => {
                tracing::debug!(block = ctx.block_number, txid = %tx_id(tx), %reason, "ENDORSEMENT_POLICY_FAILURE");
                return Ok(Code::EndorsementPolicyFailure);
            }
            Err(vscc::VsccError::Execution(e)) => return Err(e),
        }
    }
    Ok(Code::Valid)
}

fn tx_id(tx: &TxArena) -> &str {
    tx.channel_header().map(|c| c.tx_id.as_str()).unwrap_or("")
}
