//! Ferrofabric's built-in chaincodes and the simulation context they run in.
//!
//! A [`Chaincode`] is invoked with a [`TxContext`] over one consistent view of the committed world state; every read
//! is recorded with its committed version, every write is recorded (never applied), and [`TxContext::finish`]
//! produces the marshaled read/write set exactly as a Fabric 2.5 peer builds it (`ChaincodeAction.results`,
//! see `rwset`), so that endorsements made here are byte-identical to a Fabric peer's for the same state.
//!
//! Built-ins ([`Registry::builtin`]):
//! * [`Smallbank`] — Caliper's smallbank (`create_account`, `transact_savings`, `deposit_checking`, `send_payment`,
//!   `write_check`, `amalgamate`, `query`);
//! * [`Transfer`] — the two-account transfer workload of FastFabric and of the fixture ledger (`open`, `transfer`,
//!   `put`, `query`, `delete`, `range`);
//! * [`Kv`] — a plain key/value store (`put`, `get`, `delete`, `range`);
//! * [`Lifecycle`] — the `_lifecycle` functions that define chaincodes on a channel
//!   (`ApproveChaincodeDefinitionForMyOrg`, `CheckCommitReadiness`, `CommitChaincodeDefinition`,
//!   `QueryChaincodeDefinition`) with Fabric's state layout, so validators find each definition's endorsement policy.
//!
//! [`endorsement_info`] is what the endorser asks before invoking a user chaincode: the committed definition's
//! version and plugin, with Fabric's recorded read of `namespaces/fields/<name>/Sequence`.

mod context;
mod error;
mod gojson;
mod kv;
mod lifecycle;
mod rwset;
mod smallbank;
mod transfer;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
pub use ferrofabric_protos::peer::Response;

pub use context::{Acl, AllowAll, History, PrivateState, RangeHandle, Simulation, TxContext, TOTAL_QUERY_LIMIT};
pub use error::ChaincodeError;
pub use kv::Kv;
pub use lifecycle::{
    check_collection, endorsement_info, invoke_local, is_collection_member, ChaincodeInstaller, EndorsementInfo,
    Installed, InstalledChaincode, Lifecycle, PackageReference, LIFECYCLE,
};
pub use rwset::MAX_DEGREE;
pub use smallbank::{account_key, Smallbank, SMALLBANK_PREFIX};
pub use transfer::Transfer;

/// Response status of success (Fabric's `shim.OK`).
pub const OK: i32 = 200;
/// Response status from which a chaincode response is a failure and is not endorsed (Fabric's
/// `shim.ERRORTHRESHOLD`).
pub const ERROR_THRESHOLD: i32 = 400;
/// Response status of a chaincode error (Fabric's `shim.ERROR`).
pub const ERROR: i32 = 500;

/// A chaincode: given the invocation arguments (`ChaincodeInput.args`, the function name first), it reads and
/// writes through the context and answers with a [`Response`] (status 200 = success; 400 and above = failure, which
/// the endorser does not endorse). Implementations must be deterministic functions of the state and the arguments:
/// every endorser of a transaction must produce the same read/write set.
pub trait Chaincode: Send + Sync {
    /// Runs one invocation.
    fn invoke(&self, ctx: &mut TxContext<'_>, args: &[Bytes]) -> Response;
}

/// Why a state operation of a chaincode was refused (what the Go shim or the peer would answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The key cannot be stored (empty, or in the composite-key namespace where a simple key was expected).
    #[error("{0}")]
    InvalidKey(String),
    /// The chaincode event is malformed (empty name).
    #[error("{0}")]
    InvalidEvent(String),
}

/// Fabric's `shim.Success(payload)`: status 200.
pub fn success(payload: impl Into<Bytes>) -> Response {
    Response { status: OK, message: String::new(), payload: payload.into() }
}

/// Fabric's `shim.Error(message)`: status 500, no payload.
pub fn error(message: impl Into<String>) -> Response {
    Response { status: ERROR, message: message.into(), payload: Bytes::new() }
}

/// Whether `name` is one of Fabric's system chaincodes (`_lifecycle`, `lscc`, `cscc`, `qscc`): their namespaces
/// are left out of the endorsement interest and they are not subject to the endorser's `peer/Propose` ACL.
pub fn is_system_chaincode(name: &str) -> bool {
    matches!(name, "_lifecycle" | "lscc" | "cscc" | "qscc")
}

/// The user chaincodes an endorser can run, by name (the "installed" chaincodes; `_lifecycle` is separate, see
/// [`Lifecycle`]).
#[derive(Clone, Default)]
pub struct Registry {
    chaincodes: HashMap<String, Arc<dyn Chaincode>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// `smallbank`, `transfer` and `kv`.
    pub fn builtin() -> Self {
        let mut r = Registry::new();
        r.register("smallbank", Arc::new(Smallbank));
        r.register("transfer", Arc::new(Transfer));
        r.register("kv", Arc::new(Kv));
        r
    }

    /// Installs `chaincode` under `name`, replacing an earlier one.
    pub fn register(&mut self, name: &str, chaincode: Arc<dyn Chaincode>) {
        self.chaincodes.insert(name.to_owned(), chaincode);
    }

    /// The chaincode installed as `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Chaincode>> {
        self.chaincodes.get(name)
    }

    /// Installed names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.chaincodes.keys().cloned().collect();
        v.sort();
        v
    }
}

/// Splits `args` into Fabric's `GetFunctionAndParameters`: the function name (lossy UTF-8, empty without args) and
/// the remaining arguments.
pub(crate) fn function_and_parameters(args: &[Bytes]) -> (String, &[Bytes]) {
    match args.split_first() {
        Some((f, rest)) => (String::from_utf8_lossy(f).into_owned(), rest),
        None => (String::new(), &[]),
    }
}
