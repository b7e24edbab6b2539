//! Per-transaction checks, run in parallel over a block (Fabric's `core/committer/txvalidator/v20/validator.go`
//! `validateTx`, `core/common/validation/msgvalidation.go` `ValidateTransaction`, and the plugin dispatcher
//! `core/committer/txvalidator/v20/plugindispatcher/dispatcher.go`). The codes and the order in which the checks
//! run follow those files, so that a transaction with several defects gets the code Fabric gives it.

use std::collections::{BTreeSet, HashSet};

use ferrofabric_arena::{BlockArena, TxArena};
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::{ConfigEnvelope, HeaderType};
use ferrofabric_protos::peer::{ChaincodeEvent, TxValidationCode as Code};
use ferrofabric_protoutil::compute_txid;
use prost::Message;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::context::BlockContext;
use crate::signatures::Signatures;
use crate::{lifecycle, vscc};

/// The outcome of the stateless stage for one transaction: everything that depends only on the transaction's bytes
/// and the channel's MSPs (headers, creator signature, txid, proposal hash, the structure the dispatcher checks).
/// It can run ahead of the commit of the previous block.
pub(crate) enum Prechecked {
    /// Already decided (an invalid transaction).
    Final(Code),
    /// A CONFIG transaction, with its new configuration.
    Config(ConfigEnvelope),
    /// An endorser transaction: its txid, and either the namespaces VSCC must check or the code the dispatcher's
    /// structural checks gave (reported only if the txid is not a duplicate, as in Fabric).
    Endorser { txid: String, namespaces: Result<Vec<String>, Code> },
}

/// The outcome of both stages for one transaction.
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
    fn code(code: Code) -> Verdict {
        Verdict { code, txid: None, config: None, passed_vscc: false }
    }
}

/// Creator signatures verified together, sharing one scalar inversion: about a third of a 100-transaction
/// block per batch, so that both cores still get work.
const SIGNATURE_BATCH: usize = 32;

/// A creator signature left for the block-wide batch: the creator, the signed payload bytes and the signature.
struct CreatorSignature<'a> {
    creator: std::sync::Arc<ferrofabric_msp::Identity>,
    payload: &'a [u8],
    signature: &'a [u8],
}

/// The stateless stage over a block, on the current rayon pool. The creator signatures are verified after the
/// other checks, in batches ([`ferrofabric_msp::verify_batch`]); a transaction whose signature fails gets
/// BAD_CREATOR_SIGNATURE whatever its later checks said, as Fabric, which checks the signature first, gives it.
///
/// With attested signatures ([`Signatures::Attested`]) nothing is verified: each creator signature is as attested.
pub(crate) fn precheck_all(config: &ChannelConfig, arena: &BlockArena, sigs: Signatures<'_>) -> Vec<Prechecked> {
    let staged: Vec<(Prechecked, Option<CreatorSignature<'_>>)> =
        arena.txs().par_iter().map(|tx| precheck(config, tx)).collect();
    if let Signatures::Attested(_) = sigs {
        return staged
            .into_iter()
            .enumerate()
            .map(|(i, (pre, sig))| match sig {
                Some(_) if sigs.creator(i) == Some(false) => Prechecked::Final(Code::BadCreatorSignature),
                _ => pre,
            })
            .collect();
    }
    let pending: Vec<&CreatorSignature<'_>> = staged.iter().filter_map(|(_, sig)| sig.as_ref()).collect();
    let verdicts: Vec<bool> = pending
        .par_chunks(SIGNATURE_BATCH)
        .flat_map_iter(|chunk| {
            let items: Vec<_> = chunk.iter().map(|c| (c.creator.public_key(), c.payload, c.signature)).collect();
            ferrofabric_msp::verify_batch(&items)
        })
        .collect();
    let mut verdicts = verdicts.into_iter();
    staged
        .into_iter()
        .map(|(pre, sig)| match sig {
            Some(_) if !verdicts.next().unwrap_or(false) => Prechecked::Final(Code::BadCreatorSignature),
            _ => pre,
        })
        .collect()
}

/// The state-dependent stage over a block, on the current rayon pool. `Err` (per transaction): validation could
/// not complete, which fails the whole block.
pub(crate) fn finish_all(
    ctx: &BlockContext<'_>,
    arena: &BlockArena,
    prechecked: Vec<Prechecked>,
) -> Vec<Result<Verdict, String>> {
    arena.txs().par_iter().zip(prechecked).enumerate().map(|(i, (tx, pre))| finish(ctx, i, tx, pre)).collect()
}

/// The stateless checks of one transaction, its creator's signature left to the caller (`Some` when every check up
/// to it passed).
fn precheck<'a>(config: &ChannelConfig, tx: &'a TxArena) -> (Prechecked, Option<CreatorSignature<'a>>) {
    let (htype, code) = check_common_header(tx);
    if code != Code::Valid {
        return (Prechecked::Final(code), None);
    }
    let signature = match creator(config, tx) {
        Ok(sig) => sig,
        Err(code) => return (Prechecked::Final(code), None),
    };
    let code = check_payload(tx, htype);
    if code != Code::Valid {
        return (Prechecked::Final(code), Some(signature));
    }
    (precheck_valid(tx, htype), Some(signature))
}

/// The rest of the stateless stage for a transaction that passed Fabric's `ValidateTransaction`.
fn precheck_valid(tx: &TxArena, htype: HeaderType) -> Prechecked {
    // `check_common_header` only passes envelopes whose headers decode.
    let Ok(ch) = tx.channel_header() else { return Prechecked::Final(Code::InvalidOtherReason) };
    match htype {
        HeaderType::EndorserTransaction => {
            Prechecked::Endorser { txid: ch.tx_id.clone(), namespaces: check_structure(tx) }
        }
        HeaderType::Config => {
            let Ok(p) = tx.payload() else { return Prechecked::Final(Code::InvalidOtherReason) };
            match ConfigEnvelope::decode(p.data.clone()) {
                Ok(env) => Prechecked::Config(env),
                // Fabric stops the commit here ("config which passed initial validity checks" does not unmarshal);
                // the finishing stage reports it as a block error.
                Err(_) => Prechecked::Final(Code::NotValidated),
            }
        }
        _ => Prechecked::Final(Code::UnknownTxType),
    }
}

fn finish(ctx: &BlockContext<'_>, i: usize, tx: &TxArena, pre: Prechecked) -> Result<Verdict, String> {
    match pre {
        Prechecked::Final(Code::NotValidated) => {
            Err("a config transaction that passed the header checks does not decode".to_owned())
        }
        Prechecked::Final(code) => Ok(Verdict::code(code)),
        Prechecked::Config(env) => Ok(Verdict { code: Code::Valid, txid: None, config: Some(env), passed_vscc: false }),
        Prechecked::Endorser { txid, namespaces } => {
            if ctx.txids.contains(&txid) {
                return Ok(Verdict::code(Code::DuplicateTxid));
            }
            let code = match namespaces {
                Ok(ns) => dispatch_vscc(ctx, i, tx, &ns)?,
                Err(code) => code,
            };
            let passed = code == Code::Valid;
            Ok(Verdict { code, txid: passed.then_some(txid), config: None, passed_vscc: passed })
        }
    }
}

/// The header checks at the start of Fabric's `ValidateTransaction` (`msgvalidation.go`: envelope and payload
/// decoding, `validateCommonHeader`): the envelope and `Payload` decode, the channel and signature headers decode,
/// the header type is ENDORSER_TRANSACTION, CONFIG_UPDATE or CONFIG, the epoch is 0 and the signature header has a
/// nonce and a creator.
///
/// Returns the header type (`HeaderType::Message` when the checks stop before the type is known) and
/// `Code::Valid` or the code Fabric gives: `INVALID_OTHER_REASON` (no envelope), `BAD_PAYLOAD`,
/// `BAD_COMMON_HEADER`.
pub fn check_common_header(tx: &TxArena) -> (HeaderType, Code) {
    let none = HeaderType::Message;
    if tx.envelope().is_err() {
        return (none, Code::InvalidOtherReason);
    }
    match tx.payload() {
        Ok(_) => {}
        Err(e) if e.layer == "Payload.header" => return (none, Code::BadCommonHeader),
        Err(_) => return (none, Code::BadPayload),
    }
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
    (htype, Code::Valid)
}

/// Fabric's `checkSignatureFromCreator` (`msgvalidation.go`), run after [`check_common_header`]: the header names
/// this channel (another channel's MSPs are not found), the envelope carries a signature, and the creator
/// deserializes with the channel's MSPs and is a valid identity. With `verify_signature`, the creator's signature over
/// the payload is verified too; without it (a caller that verifies the signature elsewhere, e.g. in hardware) only
/// the identity is checked.
///
/// Returns `Code::Valid` or `BAD_CREATOR_SIGNATURE` (`INVALID_OTHER_REASON` if the envelope or headers do not decode,
/// which [`check_common_header`] has already ruled out).
pub fn check_creator(config: &ChannelConfig, tx: &TxArena, verify_signature: bool) -> Code {
    match creator(config, tx) {
        Err(code) => code,
        Ok(sig) if verify_signature && sig.creator.verify(sig.payload, sig.signature).is_err() => {
            Code::BadCreatorSignature
        }
        Ok(_) => Code::Valid,
    }
}

/// [`check_creator`] up to the signature, which it returns unverified.
fn creator<'a>(config: &ChannelConfig, tx: &'a TxArena) -> Result<CreatorSignature<'a>, Code> {
    let (Ok(env), Ok(ch), Ok(sh)) = (tx.envelope(), tx.channel_header(), tx.signature_header()) else {
        return Err(Code::InvalidOtherReason);
    };
    if ch.channel_id != config.channel_id() || env.signature.is_empty() {
        return Err(Code::BadCreatorSignature);
    }
    let creator = config.msp_manager().deserialize_identity(&sh.creator).map_err(|_| Code::BadCreatorSignature)?;
    creator.validate().map_err(|_| Code::BadCreatorSignature)?;
    Ok(CreatorSignature { creator, payload: &env.payload, signature: &env.signature })
}

/// The type-specific end of Fabric's `ValidateTransaction`, run after [`check_creator`] with the header type
/// [`check_common_header`] returned: an endorser transaction passes [`check_endorser_transaction`]; a CONFIG
/// transaction has a non-empty payload (`INVALID_CONFIG_TRANSACTION`); any other type is
/// `UNSUPPORTED_TX_PAYLOAD`. Returns `Code::Valid` or that code.
pub fn check_payload(tx: &TxArena, htype: HeaderType) -> Code {
    match htype {
        HeaderType::EndorserTransaction => check_endorser_transaction(tx),
        HeaderType::Config => match tx.payload() {
            Ok(p) if !p.data.is_empty() => Code::Valid,
            Ok(_) => Code::InvalidConfigTransaction,
            Err(_) => Code::InvalidOtherReason,
        },
        _ => Code::UnsupportedTxPayload,
    }
}

/// An endorser transaction's own checks in Fabric's `ValidateTransaction`: the txid ([`check_txid`],
/// `BAD_PROPOSAL_TXID`), then `validateEndorserTransaction` (one action, a valid action signature header, decodable
/// payloads, the proposal hash the endorsers signed; `INVALID_ENDORSER_TRANSACTION`). Returns `Code::Valid` or that
/// code.
pub fn check_endorser_transaction(tx: &TxArena) -> Code {
    if !check_txid(tx) {
        return Code::BadProposalTxid;
    }
    if validate_endorser_transaction(tx).is_err() {
        return Code::InvalidEndorserTransaction;
    }
    Code::Valid
}

/// Whether the channel header's txid is [`compute_txid`] of the signature header's nonce and creator (Fabric's
/// `protoutil.CheckTxID`). `false` also when the headers do not decode.
pub fn check_txid(tx: &TxArena) -> bool {
    match (tx.channel_header(), tx.signature_header()) {
        (Ok(ch), Ok(sh)) => ch.tx_id == compute_txid(&sh.nonce, &sh.creator),
        _ => false,
    }
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

/// The structural half of Fabric's plugin dispatcher (`plugindispatcher/dispatcher.go` `Dispatch`, before any
/// chaincode definition is read), for an endorser transaction that passed [`check_endorser_transaction`]: the header
/// extension, response payload and read/write set decode, the header and the response name the same chaincode with a
/// version, a chaincode event belongs to that chaincode, and no namespace appears twice in the read/write set.
///
/// Returns the namespaces whose chaincode definitions and endorsement policies VSCC must then check: the invoked
/// chaincode and every namespace the transaction writes to (public, metadata or collection writes), sorted (Fabric
/// walks a Go map here, in random order; sorted, a transaction failing in two namespaces gets a reproducible code).
/// Errors: the code Fabric gives (`BAD_HEADER_EXTENSION`, `BAD_RESPONSE_PAYLOAD`, `BAD_RWSET`, `INVALID_CHAINCODE`,
/// `ILLEGAL_WRITESET`, `INVALID_OTHER_REASON`); Fabric reports it only if the txid is not a duplicate.
pub fn check_structure(tx: &TxArena) -> Result<Vec<String>, Code> {
    let ext = tx.header_extension().map_err(|_| Code::BadHeaderExtension)?;
    let cca = tx.chaincode_action().map_err(|_| Code::BadResponsePayload)?;
    let rwset = tx.rwset().map_err(|_| Code::BadRwset)?;
    let (Some(hdr_cc), Some(resp_cc)) = (&ext.chaincode_id, &cca.chaincode_id) else {
        return Err(Code::InvalidOtherReason);
    };
    let cc = hdr_cc.name.as_str();
    if cc.is_empty() || cc != resp_cc.name || resp_cc.version.is_empty() {
        return Err(Code::InvalidChaincode);
    }
    if !cca.events.is_empty() {
        match ChaincodeEvent::decode(cca.events.clone()) {
            Ok(ev) if ev.chaincode_id == cc => {}
            _ => return Err(Code::InvalidOtherReason),
        }
    }
    let mut written = BTreeSet::new();
    written.insert(cc);
    let mut seen = HashSet::new();
    for ns in rwset {
        if !seen.insert(ns.namespace.as_str()) {
            return Err(Code::IllegalWriteset);
        }
        let writes_coll =
            ns.collections.iter().any(|c| !c.hashed.hashed_writes.is_empty() || !c.hashed.metadata_writes.is_empty());
        if !ns.kv.writes.is_empty() || !ns.kv.metadata_writes.is_empty() || writes_coll {
            written.insert(ns.namespace.as_str());
        }
    }
    Ok(written.into_iter().map(str::to_owned).collect())
}

/// The state-dependent half of the dispatcher: each namespace's chaincode definition, then VSCC.
/// `Err`: validation could not complete (fails the block).
fn dispatch_vscc(ctx: &BlockContext<'_>, i: usize, tx: &TxArena, namespaces: &[String]) -> Result<Code, String> {
    // Endorsements attested to satisfy no policy are as good as none.
    let sigset = match ctx.signatures.endorsements(i) {
        Some(false) => None,
        presumed => vscc::endorsement_set(ctx, tx, presumed == Some(true)),
    };
    for ns in namespaces {
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
