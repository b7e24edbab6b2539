//! The error of the chaincode context's and `_lifecycle`'s public checks. Each variant renders Fabric's text, which
//! reaches the client in the chaincode response or the endorsement error.

/// Why a call, a read or a chaincode invocation is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChaincodeError {
    /// The ACL provider denied access to a resource; its reason.
    #[error("{0}")]
    AccessDenied(String),
    /// The peer does not hold the private value at the committed hash's version.
    #[error(
        "private data matching public hash version is not available. Public hash version = {public}, Private data version = {private}"
    )]
    PrivateDataUnavailable {
        /// The committed hash's version, as Fabric prints it (`{BlockNum: b, TxNum: t}` or `<nil>`).
        public: String,
        /// The held value's version, printed alike.
        private: String,
    },
    /// An INIT call of a chaincode that needs no initialisation.
    #[error("chaincode '{0}' does not require initialization but called as init")]
    InitNotRequired(String),
    /// A plain call of a chaincode not initialised for its version.
    #[error("chaincode '{0}' has not been initialized for this version, must call as init first")]
    NotInitialized(String),
    /// A system chaincode other than `_lifecycle`.
    #[error("system chaincode {0} is not supported by Ferrofabric")]
    SystemChaincode(String),
    /// A channel without the V2_0 lifecycle.
    #[error("legacy (lscc) chaincode {0} is not supported: the channel lacks the V2_0 lifecycle")]
    NoV20Lifecycle(String),
    /// The chaincode's sequence cannot be read.
    #[error("could not get current sequence for chaincode '{name}' on channel '{channel}': {detail}")]
    Sequence {
        /// The chaincode.
        name: String,
        /// The channel.
        channel: String,
        /// Why the read failed.
        detail: String,
    },
    /// No definition, neither in `_lifecycle` nor in `lscc`.
    #[error("chaincode {0} not found")]
    NotFound(String),
    /// A chaincode deployed with the legacy lifecycle.
    #[error("legacy (lscc) chaincode {0} is not supported by Ferrofabric")]
    LegacyChaincode(String),
    /// A sequence without a definition.
    #[error("could not get approved chaincode info from cache: unknown chaincode '{name}' for channel '{channel}'")]
    UnknownDefinition {
        /// The chaincode.
        name: String,
        /// The channel.
        channel: String,
    },
    /// The committed definition cannot be read.
    #[error("could not get approved chaincode info from cache: {0}")]
    Definition(String),
    /// The definition changed between the two reads of an invoke.
    #[error(
        "chaincode cache at sequence {cached} but current sequence is {current}, chaincode definition for '{name}' changed during invoke"
    )]
    SequenceChanged {
        /// The definition's sequence.
        cached: i64,
        /// The committed sequence.
        current: i64,
        /// The chaincode.
        name: String,
    },
    /// This peer's organisation has not approved the committed definition.
    #[error(
        "chaincode definition for '{name}' at sequence {sequence} on channel '{channel}' has not yet been approved by this org"
    )]
    NotApproved {
        /// The chaincode.
        name: String,
        /// The definition's sequence.
        sequence: i64,
        /// The channel.
        channel: String,
    },
    /// The chaincode is defined but not installed on this peer.
    #[error("chaincode definition for '{0}' exists, but chaincode is not installed")]
    NotInstalled(String),
    /// A private-data call naming a collection that the chaincode's definition does not have.
    #[error("collection {channel}/{namespace}/{collection} could not be found")]
    CollectionNotFound {
        /// The channel.
        channel: String,
        /// The chaincode.
        namespace: String,
        /// The collection.
        collection: String,
    },
    /// The definition of a namespace cannot be read; why.
    #[error("{0}")]
    UnreadableDefinition(String),
}
