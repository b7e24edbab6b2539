//! VSCC: Fabric 2.x's built-in validation plugin with key-level (state-based) endorsement
//! (`core/handlers/validation/builtin/v20`, `core/common/validation/statebased/{validator_keylevel.go, v20.go}`).
//!
//! For one namespace of one transaction: every written key (public writes and metadata writes, then each
//! collection's hashed writes and hashed metadata writes) is checked against its key-level validation parameter when
//! the committed state has one; otherwise the collection's policy (once per collection) or the chaincode's policy
//! (once). If no policy was evaluated at all (a read-only invocation), the chaincode's policy is.
//!
//! The signature set is built once per transaction and verifies lazily, so a signature is checked only when a
//! policy actually needs it, and at most once however many policies are evaluated.

use std::collections::HashSet;

use bytes::Bytes;
use ferrofabric_arena::TxArena;
use ferrofabric_channelconfig::{SignatureSet, SignedData};
use ferrofabric_protos::common::SignaturePolicyEnvelope;
use ferrofabric_protos::peer::{application_policy, ApplicationPolicy};
use ferrofabric_state::StateKey;
use prost::Message;

use crate::context::BlockContext;
use crate::lifecycle::{self, Definition};

/// The metadata entry that holds a key's own endorsement policy (Fabric's `MetaDataKeys_VALIDATION_PARAMETER`).
pub const VALIDATION_PARAMETER: &str = "VALIDATION_PARAMETER";

/// Why VSCC rejected (or could not evaluate) a namespace.
pub(crate) enum VsccError {
    /// ENDORSEMENT_POLICY_FAILURE.
    Policy(String),
    /// Validation could not run (Fabric's execution failure): fails the block.
    Execution(String),
}

/// The endorsements as a lazily verified signature set: each endorser signed `proposal_response_payload ‖ endorser`.
/// `None`: the transaction has no endorsed action (cannot happen after the dispatcher's checks). With `presumed`
/// the signatures count as valid without being verified (a trusted verifier checked them).
pub(crate) fn endorsement_set<'a>(ctx: &BlockContext<'a>, tx: &TxArena, presumed: bool) -> Option<SignatureSet<'a>> {
    let act = tx.action().ok()?;
    let endorsed = act.payload.action.as_ref()?;
    let prp = &endorsed.proposal_response_payload;
    let items = endorsed
        .endorsements
        .iter()
        .map(|e| {
            let mut data = Vec::with_capacity(prp.len() + e.endorser.len());
            data.extend_from_slice(prp);
            data.extend_from_slice(&e.endorser);
            SignedData { data: Bytes::from(data), identity: e.endorser.clone(), signature: e.signature.clone() }
        })
        .collect();
    let msps = ctx.config.msp_manager().as_ref();
    Some(if presumed { SignatureSet::presumed_valid(items, msps) } else { SignatureSet::new(items, msps) })
}

/// Evaluates a marshaled `ApplicationPolicy` on a signature set (Fabric's `ApplicationPolicyEvaluator`).
pub(crate) fn evaluate(ctx: &BlockContext<'_>, policy: &Bytes, set: &SignatureSet<'_>) -> Result<(), String> {
    let compiled = ctx
        .policies
        .compiled
        .entry(policy.clone())
        .or_insert_with(|| ctx.config.application_policy(policy).map_err(|e| e.to_string()))
        .value()
        .clone();
    compiled?.evaluate(set).map_err(|e| e.to_string())
}

/// VSCC for namespace `ns` of `tx` (Fabric's `baseEvaluator.Evaluate`).
pub(crate) fn validate_namespace(
    ctx: &BlockContext<'_>,
    tx: &TxArena,
    ns: &str,
    def: &Definition,
    set: &SignatureSet<'_>,
) -> Result<(), VsccError> {
    let rwset = tx.rwset().map_err(|e| VsccError::Policy(e.to_string()))?;
    let mut ev = Evaluator { ctx, ns, def, set, checked: HashSet::new(), some_checked: false };
    for nsrw in rwset.iter().filter(|n| n.namespace == ns) {
        for w in &nsrw.kv.writes {
            ev.check_key("", w.key.as_bytes())?;
        }
        for w in &nsrw.kv.metadata_writes {
            ev.check_key("", w.key.as_bytes())?;
        }
        for c in &nsrw.collections {
            for w in &c.hashed.hashed_writes {
                ev.check_key(&c.collection, &w.key_hash)?;
            }
        }
        for c in &nsrw.collections {
            for w in &c.hashed.metadata_writes {
                ev.check_key(&c.collection, &w.key_hash)?;
            }
        }
    }
    if !ev.some_checked {
        ev.check_chaincode_policy()?;
    }
    Ok(())
}

/// A key's validation parameter, a marshaled `SignaturePolicyEnvelope` (what the shim's
/// `SetStateValidationParameter` stores), as the `ApplicationPolicy` wrapping it (Fabric's
/// `toApplicationPolicyTranslator`, `core/handlers/validation/builtin/v20/validation_logic.go`). A parameter that
/// does not decode is an execution failure in Fabric (the peer stops committing), so it is an `Err` here.
fn key_level_policy(vp: &Bytes) -> Result<Bytes, String> {
    let env = SignaturePolicyEnvelope::decode(vp.clone())
        .map_err(|e| format!("key-level validation parameter is not a signature policy envelope: {e}"))?;
    Ok(Bytes::from(ApplicationPolicy { r#type: Some(application_policy::Type::SignaturePolicy(env)) }.encode_to_vec()))
}

struct Evaluator<'c, 'a> {
    ctx: &'c BlockContext<'a>,
    ns: &'c str,
    def: &'c Definition,
    set: &'c SignatureSet<'a>,
    /// Collections (and "" for the chaincode itself) whose policy already passed.
    checked: HashSet<String>,
    some_checked: bool,
}

impl Evaluator<'_, '_> {
    /// Fabric's `checkSBAndCCEP`: the key's validation parameter if it has one, else the collection/chaincode policy.
    fn check_key(&mut self, coll: &str, key: &[u8]) -> Result<(), VsccError> {
        let skey = if coll.is_empty() {
            StateKey::public(self.ns, Bytes::copy_from_slice(key))
        } else {
            StateKey::hashed(self.ns, coll, Bytes::copy_from_slice(key))
        };
        let vp = self
            .ctx
            .view
            .get(&skey)
            .and_then(|v| v.metadata.iter().find(|(k, _)| k == VALIDATION_PARAMETER).map(|(_, p)| p.clone()));
        match vp {
            Some(vp) if !vp.is_empty() => {
                let vp = key_level_policy(&vp).map_err(VsccError::Execution)?;
                evaluate(self.ctx, &vp, self.set).map_err(|e| {
                    VsccError::Policy(format!(
                        "validation of key {} in namespace {} failed: {e}",
                        String::from_utf8_lossy(key),
                        self.ns
                    ))
                })?;
                self.some_checked = true;
                Ok(())
            }
            _ => self.check_collection_or_chaincode(coll),
        }
    }

    /// Fabric's `CheckCCEPIfNotChecked`.
    fn check_collection_or_chaincode(&mut self, coll: &str) -> Result<(), VsccError> {
        if !coll.is_empty() {
            if self.checked.contains(coll) {
                return Ok(());
            }
            let policy = lifecycle::collection_policy(self.ctx.config, self.def, coll).map_err(VsccError::Policy)?;
            if !policy.is_empty() {
                evaluate(self.ctx, &policy, self.set).map_err(|e| {
                    VsccError::Policy(format!("endorsement policy of collection {coll} of {}: {e}", self.ns))
                })?;
                self.checked.insert(coll.to_owned());
                self.some_checked = true;
                return Ok(());
            }
        }
        if self.checked.contains("") {
            return Ok(());
        }
        self.check_chaincode_policy()
    }

    fn check_chaincode_policy(&mut self) -> Result<(), VsccError> {
        evaluate(self.ctx, &self.def.policy, self.set)
            .map_err(|e| VsccError::Policy(format!("endorsement policy of chaincode {}: {e}", self.ns)))?;
        self.checked.insert(String::new());
        self.some_checked = true;
        Ok(())
    }
}
