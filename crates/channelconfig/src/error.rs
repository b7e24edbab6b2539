//! The one error type of this crate.

use ferrofabric_msp::MspError;

/// Why a policy was not satisfied, could not be built, or why a channel configuration was rejected.
///
/// Evaluation failures (`SignatureSetNotSatisfied`, `ImplicitMetaNotSatisfied`, `NoSuchPolicy`,
/// `UnsupportedPolicyType`) mean "the signature set does not satisfy the policy"; the others come from
/// building policies or parsing a `common.Config`. `path` fields name the place in the config tree,
/// e.g. `/Channel/Orderer/BatchSize` or `/Channel/Application/Org1MSP/MSP`.
///
/// `Clone + Eq` so that cached results and test expectations can be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A signature policy (Fabric `common/cauthdsl`) was evaluated and its rule tree was not satisfied.
    #[error("signature set did not satisfy policy")]
    SignatureSetNotSatisfied,
    /// An implicit meta policy (Fabric `common/policies/implicitmeta.go`) saw too few satisfied sub-policies.
    #[error(
        "implicit meta policy not satisfied: {satisfied} of the '{sub_policy}' sub-policies satisfied, {required} required"
    )]
    ImplicitMetaNotSatisfied {
        /// Name of the sub-policy looked up in every direct sub-group.
        sub_policy: String,
        /// How many sub-policies were satisfied before evaluation stopped.
        satisfied: i64,
        /// The threshold (ANY = 1, ALL = number of sub-groups, MAJORITY = n/2 + 1; 0 with no sub-groups).
        required: i64,
    },
    /// The referenced policy does not exist (Fabric's reject-all placeholder policy).
    #[error("no such policy: '{0}'")]
    NoSuchPolicy(String),
    /// The policy has a type this implementation cannot evaluate (`Policy.type` = MSP (2)).
    #[error("policy {path}: policy type {policy_type} is not supported")]
    UnsupportedPolicyType {
        /// Absolute policy path, e.g. `/Channel/Application/Foo`.
        path: String,
        /// The raw `common.Policy.type` value.
        policy_type: i32,
    },
    /// A policy definition could not be decoded or compiled.
    #[error("invalid policy {path}: {reason}")]
    InvalidPolicy {
        /// Absolute policy path, or `<signature policy>` for a free-standing envelope.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A configuration value, group or envelope is malformed or violates Fabric's channel config rules.
    #[error("invalid channel config at {path}: {reason}")]
    InvalidConfig {
        /// Config path, e.g. `/Channel/Orderer/BatchTimeout`.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// An MSP named in the configuration could not be set up.
    #[error("MSP at {path}: {source}")]
    Msp {
        /// Config path of the `MSP` value.
        path: String,
        /// The MSP crate's error.
        source: MspError,
    },
    /// A Go duration that does not parse, or a negative one where a timeout or interval is expected.
    #[error("invalid duration {input:?}: {reason}")]
    InvalidDuration {
        /// The text given.
        input: String,
        /// What is wrong (`empty`, `missing unit`, `overflow`, `negative`, ...).
        reason: String,
    },
    /// A marshaled `peer.ApplicationPolicy` that does not decode.
    #[error("bad ApplicationPolicy: {0}")]
    BadApplicationPolicy(#[source] prost::DecodeError),
    /// An `ApplicationPolicy` referencing a channel policy that does not exist.
    #[error("channel policy {0} not found")]
    ChannelPolicyNotFound(String),
    /// An `ApplicationPolicy` of neither kind (signature policy, channel policy reference).
    #[error("unsupported policy type")]
    UnsupportedApplicationPolicy,
}

impl PolicyError {
    /// Shorthand for [`PolicyError::InvalidConfig`].
    pub(crate) fn config(path: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        PolicyError::InvalidConfig { path: path.into(), reason: reason.to_string() }
    }

    /// Shorthand for [`PolicyError::InvalidPolicy`].
    pub(crate) fn policy(path: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        PolicyError::InvalidPolicy { path: path.into(), reason: reason.to_string() }
    }
}
