//! The one error type of this crate.

use ferrofabric_channelconfig::PolicyError;
use ferrofabric_protos::common::Status;

/// Why a config update (or a proposed CONFIG transaction) was refused.
///
/// `element` fields name a config element the way Fabric's config map does (`common/configtx/configmap.go`):
/// a kind tag padded to one width and the absolute path, e.g. `[Group]  /Channel/Application/Org1MSP` or
/// `[Value]  /Channel/Application/Org1MSP/AnchorPeers`. The messages of the checks of an update are Fabric's
/// (`common/configtx/update.go`, `validator.go`), wrapped as Fabric wraps them, because clients see them in the
/// Broadcast answer.
///
/// Classes: [`ConfigTxError::is_forbidden`] marks authorization failures (a `mod_policy` the signatures do not
/// satisfy); everything else is a malformed or inconsistent request. [`ConfigTxError::status`] gives the
/// status Fabric 2.5's Broadcast answers for the error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigTxError {
    /// A message in the envelope chain could not be decoded or a required part is missing
    /// (`what` names it, e.g. `Envelope.payload`, `ConfigUpdateEnvelope.signatures[1].signature_header`).
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// The message or field.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// The envelope is not of the expected header type (CONFIG_UPDATE = 2 for a proposal).
    #[error("envelope has header type {found}, expected {expected}")]
    WrongHeaderType {
        /// Type found in the channel header.
        found: i32,
        /// Type required.
        expected: i32,
    },
    /// `ConfigUpdate.channel_id` is not the channel the validator guards.
    #[error("error authorizing update: ConfigUpdate for channel '{update}' but envelope for channel '{channel}'")]
    WrongChannel {
        /// Channel named by the update.
        update: String,
        /// The validator's channel.
        channel: String,
    },
    /// A group, value or policy name (or the channel ID) breaks Fabric's naming rules
    /// (`[a-zA-Z0-9.-]`, 1..=249 characters, not `.`/`..`; channel IDs `[a-z][a-z0-9.-]*`).
    #[error("illegal name in {set}: {name:?}: {reason}")]
    IllegalName {
        /// Where the name was found: `read set`, `write set`, `current config` or `channel ID`.
        set: &'static str,
        /// The offending name.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The read set names an element the current config does not have.
    #[error(
        "error authorizing update: error validating ReadSet: existing config does not contain element for {element} \
         but was in the read set"
    )]
    ReadSetUnknown {
        /// The element.
        element: String,
    },
    /// The read set was computed against another version of an element (a stale update).
    #[error(
        "error authorizing update: error validating ReadSet: proposed update requires that key {element} be at \
         version {required}, but it is currently at version {current}"
    )]
    ReadSetVersion {
        /// The element.
        element: String,
        /// Version in the read set.
        required: u64,
        /// Version in the current config.
        current: u64,
    },
    /// The write set changes nothing (every element has its read-set version).
    #[error("error authorizing update: error validating DeltaSet: delta set was empty -- update would have no effect")]
    EmptyDelta,
    /// A changed element carries an empty or malformed `mod_policy`.
    #[error("error authorizing update: error validating DeltaSet: invalid mod_policy for element {element}: {reason}")]
    InvalidModPolicy {
        /// The element.
        element: String,
        /// The proposed mod_policy.
        mod_policy: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A new element (absent from the current config) must start at version 0.
    #[error(
        "error authorizing update: error validating DeltaSet: attempted to set key {element} to version {version}, \
         but key does not exist"
    )]
    NewElementVersion {
        /// The element.
        element: String,
        /// The proposed version.
        version: u64,
    },
    /// A changed element must have exactly its current version + 1.
    #[error(
        "error authorizing update: error validating DeltaSet: attempt to set key {element} to version {proposed}, \
         but key is at version {current}"
    )]
    VersionNotIncremented {
        /// The element.
        element: String,
        /// Version in the write set.
        proposed: u64,
        /// Version in the current config.
        current: u64,
    },
    /// The current `mod_policy` of a changed element does not resolve to a policy, so nobody may change it.
    #[error("error authorizing update: error validating DeltaSet: unexpected missing policy {mod_policy} for item {element}")]
    MissingModPolicy {
        /// The element.
        element: String,
        /// Its current mod_policy.
        mod_policy: String,
    },
    /// The signatures of the update do not satisfy the current `mod_policy` of a changed element.
    #[error("error authorizing update: error validating DeltaSet: policy for {element} not satisfied: {source}")]
    PolicyNotSatisfied {
        /// The element.
        element: String,
        /// The absolute policy path evaluated, e.g. `/Channel/Application/Org1MSP/Admins`.
        policy: String,
        /// The policy evaluation failure.
        source: PolicyError,
    },
    /// Rebuilding the config tree from the updated config map failed (an element a group lists is missing).
    #[error("cannot rebuild the config: {0}")]
    Rebuild(String),
    /// The updated config is not a valid channel config (Fabric `channelconfig.NewBundle` fails).
    #[error("the updated config is invalid: {0}")]
    InvalidConfig(PolicyError),
    /// The updated config is valid on its own but not as a successor of the current one
    /// (Fabric `Bundle.ValidateNew`, orderer `checkResources`): e.g. a changed MSP ID, a dropped section,
    /// a consensus type change, an unsupported capability.
    #[error("the updated config is not compatible with the current one: {0}")]
    Incompatible(String),
    /// A CONFIG envelope's config has the wrong sequence ([`crate::ConfigTxValidator::validate`]).
    #[error("config is at sequence {current}, a CONFIG transaction must carry sequence {expected}, found {found}")]
    WrongSequence {
        /// Sequence of the current config.
        current: u64,
        /// `current + 1`.
        expected: u64,
        /// Sequence in the proposed config.
        found: u64,
    },
    /// A CONFIG envelope's config is not what its `last_update` produces ([`crate::ConfigTxValidator::validate`]).
    #[error("the config does not match the result of applying its last_update")]
    ResultMismatch,
    /// [`crate::compute_update`] found no difference between the two configs.
    #[error("no differences between the original and the updated config")]
    NoDifferences,
    /// A tool helper was asked for an organization or group the config does not have.
    #[error("the config has no {0}")]
    NotFound(String),
}

impl ConfigTxError {
    /// Whether the update was refused because its signatures do not authorize it (the `mod_policy` of a changed
    /// element is not satisfied, or cannot be satisfied by anyone). All other errors are bad requests.
    ///
    /// Note: Fabric 2.5's Broadcast still answers BAD_REQUEST for these (see [`Self::status`]); FORBIDDEN there is
    /// reserved for the envelope-signature filter (`/Channel/Writers`), which the orderer applies before this crate.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, ConfigTxError::PolicyNotSatisfied { .. } | ConfigTxError::MissingModPolicy { .. })
    }

    /// The Broadcast status Fabric 2.5 returns for this error: always BAD_REQUEST, because
    /// `orderer/common/broadcast` `ClassifyError` maps only the msgprocessor sentinels (permission denied,
    /// channel not found, maintenance) to other statuses and config-update processing yields none of them.
    pub fn status(&self) -> Status {
        Status::BadRequest
    }

    pub(crate) fn malformed(what: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        ConfigTxError::Malformed { what: what.into(), reason: reason.to_string() }
    }
}
