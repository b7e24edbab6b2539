//! Policy evaluation: signature policies (Fabric `common/cauthdsl`), implicit meta policies
//! (`common/policies/implicitmeta.go`) and the placeholder policies of the policy manager.

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_protos::common::{
    msp_principal, policy, signature_policy, Consenter, MspPrincipal, Policy as PolicyProto,
    SignaturePolicy as SignaturePolicyRule, SignaturePolicyEnvelope,
};
use ferrofabric_protos::msp::SerializedIdentity;
use prost::Message;

use crate::error::PolicyError;
use crate::signature_set::SignatureSet;

/// A compiled policy that a [`SignatureSet`] can be checked against.
///
/// Follows Fabric's `policies.Policy.EvaluateSignedData` (`common/policies/policy.go`): `Ok(())` if the
/// set satisfies the policy, otherwise an evaluation error (never a panic). Implementations are
/// immutable and `Send + Sync`, so one `Arc<dyn Policy>` serves all threads.
pub trait Policy: Send + Sync + std::fmt::Debug {
    /// Evaluate against `set`, verifying only the signatures the decision needs (cached in `set`).
    fn evaluate(&self, set: &SignatureSet<'_>) -> Result<(), PolicyError>;
}

/// The quorum of a BFT cluster of `n` consenters (Fabric 3's `policies.ComputeBFTQuorum`, SmartBFT's
/// `computeBFTQuorum`): `Q = ⌈(n + f + 1) / 2⌉` with `f = ⌊(n − 1) / 3⌋` tolerated faults, so that any two quorums
/// share at least `f + 1` consenters. A BFT channel's `BlockValidation` needs `Q` consenter signatures, and the
/// gateway `Q` orderers accepting a transaction.
pub fn bft_quorum(n: usize) -> usize {
    let f = n.saturating_sub(1) / 3;
    (n + f + 1).div_ceil(2)
}

/// The `BlockValidation` policy of a BFT channel with `consenters` (Fabric 3's
/// `policies.EncodeBFTBlockVerificationPolicy`, checked on every config update by SmartBFT's
/// `checkConsentersMatchPolicy`): a `SIGNATURE` policy over each consenter's identity (an `IDENTITY` principal, in
/// consenter order) satisfied by [`bft_quorum`] of them. Deterministic bytes, equal to Go's encoding.
pub fn bft_block_validation_policy(consenters: &[Consenter]) -> PolicyProto {
    let n = consenters.len();
    let identities = consenters
        .iter()
        .map(|c| MspPrincipal {
            principal_classification: msp_principal::Classification::Identity as i32,
            principal: Bytes::from(
                SerializedIdentity { mspid: c.msp_id.clone(), id_bytes: c.identity.clone() }.encode_to_vec(),
            ),
        })
        .collect();
    let rules = (0..n)
        .map(|i| SignaturePolicyRule {
            r#type: Some(signature_policy::Type::SignedBy(i32::try_from(i).unwrap_or(i32::MAX))),
        })
        .collect();
    let quorum = i32::try_from(bft_quorum(n)).unwrap_or(i32::MAX);
    let rule = SignaturePolicyRule {
        r#type: Some(signature_policy::Type::NOutOf(signature_policy::NOutOf { n: quorum, rules })),
    };
    let envelope = SignaturePolicyEnvelope { version: 0, rule: Some(rule), identities };
    PolicyProto { r#type: policy::PolicyType::Signature as i32, value: Bytes::from(envelope.encode_to_vec()) }
}

/// Compile a `SignaturePolicyEnvelope` (e.g. a chaincode's endorsement policy) into a policy.
///
/// Follows Fabric's `cauthdsl.EnvelopeBasedPolicyProvider` (`common/cauthdsl/policy.go`): the envelope
/// `version` is NOT checked here (channel config policies, which Fabric compiles from bytes, are checked
/// by [`crate::ChannelConfig`]). Errors ([`PolicyError::InvalidPolicy`]): missing rule, a rule with no
/// type, `signed_by` index outside `identities`.
pub fn compile_signature_policy(env: &SignaturePolicyEnvelope) -> Result<Arc<dyn Policy>, PolicyError> {
    Ok(Arc::new(CompiledSignaturePolicy::compile("<signature policy>", env)?))
}

/// A node of a compiled signature policy rule tree.
#[derive(Debug)]
enum Rule {
    /// Index into the envelope's principals.
    SignedBy(usize),
    /// Satisfied when at least `n` of `rules` are (Fabric compares `int32`s; `n <= 0` is always true).
    NOutOf { n: i32, rules: Vec<Rule> },
}

/// Fabric's cauthdsl evaluator: a rule tree plus the principals it refers to.
#[derive(Debug)]
pub(crate) struct CompiledSignaturePolicy {
    rule: Rule,
    principals: Vec<MspPrincipal>,
}

impl CompiledSignaturePolicy {
    /// Build from an envelope; `path` only labels errors.
    pub(crate) fn compile(path: &str, env: &SignaturePolicyEnvelope) -> Result<Self, PolicyError> {
        let rule = env.rule.as_ref().ok_or_else(|| PolicyError::policy(path, "empty policy element (no rule)"))?;
        Ok(CompiledSignaturePolicy {
            rule: compile_rule(path, rule, env.identities.len())?,
            principals: env.identities.clone(),
        })
    }

    /// One rule on the shared `used` flags (indexed by item). Same recursion as Fabric's compiled closures.
    fn eval(&self, rule: &Rule, set: &SignatureSet<'_>, used: &mut [bool]) -> bool {
        match rule {
            Rule::SignedBy(p) => {
                let Some(principal) = self.principals.get(*p) else {
                    return false;
                };
                for (i, flag) in used.iter_mut().enumerate() {
                    // Cheap checks first; the signature is verified only for a candidate that would be used.
                    if *flag || set.known_rejected(i) {
                        continue;
                    }
                    let Some(id) = set.identity(i) else {
                        continue;
                    };
                    if set.msp_manager().satisfies_principal(id, principal).is_err() {
                        continue;
                    }
                    if !set.is_accepted(i) {
                        continue;
                    }
                    *flag = true;
                    return true;
                }
                false
            }
            Rule::NOutOf { n, rules } => {
                // Every sub-rule runs (no early exit) on a scratch copy of the flags; only a sub-rule that
                // succeeds gets its consumption of identities committed.
                let mut satisfied: i64 = 0;
                let mut scratch = used.to_vec();
                for sub in rules {
                    scratch.copy_from_slice(used);
                    if self.eval(sub, set, &mut scratch) {
                        satisfied += 1;
                        used.copy_from_slice(&scratch);
                    }
                }
                satisfied >= i64::from(*n)
            }
        }
    }
}

impl Policy for CompiledSignaturePolicy {
    fn evaluate(&self, set: &SignatureSet<'_>) -> Result<(), PolicyError> {
        let mut used = vec![false; set.len()];
        if self.eval(&self.rule, set, &mut used) {
            Ok(())
        } else {
            Err(PolicyError::SignatureSetNotSatisfied)
        }
    }
}

/// Recursively check and convert a proto rule (Fabric `cauthdsl.compile`).
fn compile_rule(path: &str, rule: &SignaturePolicyRule, n_principals: usize) -> Result<Rule, PolicyError> {
    match &rule.r#type {
        Some(signature_policy::Type::SignedBy(idx)) => match usize::try_from(*idx) {
            Ok(i) if i < n_principals => Ok(Rule::SignedBy(i)),
            _ => {
                Err(PolicyError::policy(path, format!("identity index out of range: {idx}, {n_principals} identities")))
            }
        },
        Some(signature_policy::Type::NOutOf(n_out_of)) => Ok(Rule::NOutOf {
            n: n_out_of.n,
            rules: n_out_of.rules.iter().map(|r| compile_rule(path, r, n_principals)).collect::<Result<_, _>>()?,
        }),
        None => Err(PolicyError::policy(path, "signature policy rule has no type")),
    }
}

/// Fabric's `ImplicitMetaPolicy`: satisfied when `threshold` of the same-named policies of the direct
/// sub-groups are. Sub-groups lacking the policy contribute a [`RejectPolicy`].
#[derive(Debug)]
pub(crate) struct ImplicitMetaPolicy {
    pub(crate) sub_policy: String,
    pub(crate) threshold: i64,
    pub(crate) sub_policies: Vec<Arc<dyn Policy>>,
}

impl Policy for ImplicitMetaPolicy {
    fn evaluate(&self, set: &SignatureSet<'_>) -> Result<(), PolicyError> {
        // Count down and stop exactly when the count hits zero, as Fabric does. With threshold 0 and some
        // sub-policies (an unknown rule value) this means: satisfied only if no sub-policy is.
        let mut remaining = self.threshold;
        for policy in &self.sub_policies {
            if policy.evaluate(set).is_ok() {
                remaining -= 1;
                if remaining == 0 {
                    return Ok(());
                }
            }
        }
        if remaining == 0 {
            return Ok(());
        }
        Err(PolicyError::ImplicitMetaNotSatisfied {
            sub_policy: self.sub_policy.clone(),
            satisfied: self.threshold - remaining,
            required: self.threshold,
        })
    }
}

/// Stand-in for a policy name that does not resolve (Fabric's `rejectPolicy`): never satisfied.
#[derive(Debug)]
pub(crate) struct RejectPolicy(pub(crate) String);

impl Policy for RejectPolicy {
    fn evaluate(&self, _set: &SignatureSet<'_>) -> Result<(), PolicyError> {
        Err(PolicyError::NoSuchPolicy(self.0.clone()))
    }
}

/// A config policy of type MSP (2): kept so that the config loads, fails whenever it is evaluated.
#[derive(Debug)]
pub(crate) struct UnsupportedPolicy {
    pub(crate) path: String,
    pub(crate) policy_type: i32,
}

impl Policy for UnsupportedPolicy {
    fn evaluate(&self, _set: &SignatureSet<'_>) -> Result<(), PolicyError> {
        Err(PolicyError::UnsupportedPolicyType { path: self.path.clone(), policy_type: self.policy_type })
    }
}

#[cfg(test)]
mod tests {
    use super::bft_quorum;

    #[test]
    fn bft_quorums_follow_smartbft() {
        let quorums: Vec<usize> = (1..=10).map(bft_quorum).collect();
        assert_eq!(quorums, [1, 2, 2, 3, 4, 4, 5, 6, 6, 7]);
    }
}
