//! The simulation context of one transaction: what a chaincode sees of the ledger and what it may change
//! (Fabric's `TxSimulator` in `core/ledger/kvledger/txmgmt/txmgr/{tx_simulator.go, query_executor.go}` together with
//! the peer's chaincode handler `core/chaincode/handler.go` and the Go shim's key checks).
//!
//! Reads go to the committed state only (Fabric has no read-your-writes) and are recorded with the committed
//! version; writes are recorded, never applied. [`TxContext::finish`] turns the record into the marshaled read/write
//! sets.

use std::collections::BTreeMap;

use bytes::Bytes;
use ferrofabric_protos::common::SignaturePolicyEnvelope;
use ferrofabric_protos::kvrwset::{KvRead, RangeQueryInfo};
use ferrofabric_protos::peer::{ChaincodeCall, ChaincodeEvent, ChaincodeInterest, SignedProposal};
use ferrofabric_protos::queryresult::KeyModification;
use ferrofabric_state::{Height, StateKey, StateView, VersionedValue};
use prost::Message;

use crate::error::ChaincodeError;
use crate::rwset::{range_reads_info, sha256, version, RwSetBuilder};
use crate::{is_system_chaincode, SimError};

/// Results a range query may return in one transaction (Fabric's `ledger.state.totalQueryLimit`, set to 100000 in
/// the fixture network's `core.yaml`): a longer range is cut there and recorded as not exhausted.
pub const TOTAL_QUERY_LIMIT: usize = 100_000;

/// The metadata name of a key-level endorsement policy (Fabric's `MetaDataKeys_VALIDATION_PARAMETER`).
const VALIDATION_PARAMETER: &str = "VALIDATION_PARAMETER";

/// Decides whether the proposal's creator may use a resource such as `_lifecycle/CommitChaincodeDefinition`
/// (Fabric's `aclmgmt.ACLProvider.CheckACL` on the signed proposal). Implemented by the endorser.
pub trait Acl {
    /// `Ok` if allowed.
    ///
    /// Errors: [`ChaincodeError::AccessDenied`] with Fabric's reason.
    fn check(&self, resource: &str) -> Result<(), ChaincodeError>;
}

/// The history of keys (Fabric's history database, `core/ledger/kvledger/history`): every committed write of a
/// public key by a valid transaction. Implemented by the endorser's replica when `ledger.history` is on.
pub trait History: Send + Sync {
    /// The modifications of `key` in `namespace`, newest first (Fabric's `GetHistoryForKey` order): transaction
    /// ID, value (empty for a delete), the transaction's timestamp and whether it was a delete.
    fn for_key(&self, namespace: &str, key: &str) -> Vec<KeyModification>;
}

/// The private values this peer holds (Fabric's private state database): by namespace, collection and key, the
/// value and the version `(block, tx)` at which it was committed. Implemented by the endorser.
pub trait PrivateState: Send + Sync {
    /// The value of `key` and its version, if held.
    fn get(&self, namespace: &str, collection: &str, key: &str) -> Option<(Bytes, (u64, u64))>;
    /// The held keys of `[start, end)` (empty `end`: to the end) with their values, in key order.
    fn range(&self, namespace: &str, collection: &str, start: &str, end: &str) -> Vec<(String, Bytes)>;
}

/// An [`Acl`] that allows everything: for re-simulating already endorsed transactions (whose signed proposals are
/// not in the ledger) and for tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Acl for AllowAll {
    fn check(&self, _resource: &str) -> Result<(), ChaincodeError> {
        Ok(())
    }
}

/// What a simulation produced (Fabric's `TxSimulationResults` plus the chaincode event and the endorser's
/// `ChaincodeInterest`).
#[derive(Debug, Clone, Default)]
pub struct Simulation {
    /// Marshaled public `rwset.TxReadWriteSet` (with the hashes of private writes): `ChaincodeAction.results`.
    pub results: Bytes,
    /// Marshaled `rwset.TxPvtReadWriteSet`, when the transaction wrote private data.
    pub private: Option<Bytes>,
    /// The chaincode event set by the chaincode, with its chaincode ID and transaction ID filled in.
    pub event: Option<ChaincodeEvent>,
    /// Which chaincodes, collections and key policies an endorsement of this result must satisfy (Fabric's
    /// `buildChaincodeInterest` in `core/endorser/endorser.go`), chaincodes and collections in name order.
    pub interest: ChaincodeInterest,
}

/// The simulation context handed to [`crate::Chaincode::invoke`]: the committed state (one consistent view), the
/// proposal's identity, the read/write set being built and the chaincode event.
pub struct TxContext<'a> {
    view: &'a StateView<'a>,
    channel_id: String,
    tx_id: String,
    namespace: String,
    creator: Bytes,
    acl: &'a dyn Acl,
    rwset: RwSetBuilder,
    event: Option<(String, Bytes)>,
    /// Committed metadata of every written key by (namespace, collection, key): Fabric's `WritesetMetadata`.
    written_metadata: BTreeMap<(String, String, String), Vec<(String, Bytes)>>,
    /// (namespace, collection) pairs whose private values were read.
    private_reads: BTreeMap<(String, String), ()>,
    /// The client's signed proposal, for chaincodes that read it (`GetSignedProposal`, `GetCreator`, transient data).
    proposal: Option<SignedProposal>,
    /// Range iterators opened by a shim chaincode, in the order opened.
    iterators: Vec<RangeIterator>,
    /// The history database, when the peer keeps one.
    history: Option<&'a dyn History>,
    /// The private values the peer holds.
    private: Option<&'a dyn PrivateState>,
}

/// A range iterator of a shim chaincode (Fabric's `resultsItr` in `txmgr/query_executor.go`): the committed
/// results of `[start, end)` at the simulation's view; every result handed out is a recorded read, and the range is
/// recorded in the read/write set when the simulation finishes, exhausted only if the iterator was read to its end.
struct RangeIterator {
    namespace: String,
    start: String,
    end: String,
    results: Vec<(String, VersionedValue)>,
    next: usize,
    /// At most this many results are handed out (a paginated query's page size).
    limit: usize,
    reads: Vec<KvRead>,
    exhausted: bool,
    end_key: String,
}

/// A handle on a range iterator opened with [`TxContext::open_range`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RangeHandle(usize);

impl<'a> TxContext<'a> {
    /// A context for invoking chaincode `namespace` in transaction `tx_id` of `channel_id`, reading `view`.
    /// `creator` is the proposal's marshaled SerializedIdentity; `acl` decides resource access for system chaincodes.
    pub fn new(
        view: &'a StateView<'a>,
        channel_id: &str,
        tx_id: &str,
        namespace: &str,
        creator: Bytes,
        acl: &'a dyn Acl,
    ) -> Self {
        TxContext {
            view,
            channel_id: channel_id.to_owned(),
            tx_id: tx_id.to_owned(),
            namespace: namespace.to_owned(),
            creator,
            acl,
            rwset: RwSetBuilder::default(),
            event: None,
            written_metadata: BTreeMap::new(),
            private_reads: BTreeMap::new(),
            proposal: None,
            iterators: Vec::new(),
            history: None,
            private: None,
        }
    }

    /// The same context reading private values from `private`.
    pub fn with_private_state(mut self, private: &'a dyn PrivateState) -> Self {
        self.private = Some(private);
        self
    }

    /// The value of private `key` in `collection` of the chaincode's namespace (Fabric's `GetPrivateData`): `None`
    /// when the key has no value; the read is recorded as a hashed read with the version.
    ///
    /// Errors (Fabric's text): the peer does not hold the value at the committed hash's version.
    pub fn get_private_data(&mut self, collection: &str, key: &str) -> Result<Option<Bytes>, ChaincodeError> {
        let ns = self.namespace.clone();
        self.get_private_data_in(&ns, collection, key)
    }

    /// [`Self::get_private_data`] in namespace `ns` (`_lifecycle`'s reads of an organisation's approvals).
    pub(crate) fn get_private_data_in(
        &mut self,
        ns: &str,
        collection: &str,
        key: &str,
    ) -> Result<Option<Bytes>, ChaincodeError> {
        let ns = ns.to_owned();
        let hashed = self.view.get(&StateKey::hashed(&ns, collection, sha256(key.as_bytes()))).map(|v| v.version);
        let held = self.private.and_then(|p| p.get(&ns, collection, key));
        let held_version = held.as_ref().map(|(_, (b, t))| Height::new(*b, *t));
        if hashed != held_version {
            let show = |h: Option<Height>| match h {
                Some(h) => format!("{{BlockNum: {}, TxNum: {}}}", h.block_num, h.tx_num),
                None => "<nil>".to_owned(),
            };
            return Err(ChaincodeError::PrivateDataUnavailable { public: show(hashed), private: show(held_version) });
        }
        self.private_reads.insert((ns.clone(), collection.to_owned()), ());
        self.rwset.add_hashed_read(&ns, collection, key, hashed);
        Ok(held.map(|(v, _)| v))
    }

    /// The held private keys of `collection` in `[start, end)` with their values (Fabric's
    /// `GetPrivateDataByRange`, which records nothing in the read/write set).
    pub fn get_private_data_by_range(&mut self, collection: &str, start: &str, end: &str) -> Vec<(String, Bytes)> {
        let ns = self.namespace.clone();
        self.private.map(|p| p.range(&ns, collection, start, end)).unwrap_or_default()
    }

    /// The same context answering history queries from `history`.
    pub fn with_history(mut self, history: &'a dyn History) -> Self {
        self.history = Some(history);
        self
    }

    /// The modifications of `key` in the chaincode's namespace, newest first (not a recorded read: Fabric's history
    /// queries are not part of the read/write set); `None` when the peer keeps no history.
    pub fn history(&self, key: &str) -> Option<Vec<KeyModification>> {
        self.history.map(|h| h.for_key(&self.namespace, key))
    }

    /// The same context carrying the client's signed proposal (sent to shim chaincodes with the transaction).
    pub fn with_proposal(mut self, proposal: SignedProposal) -> Self {
        self.proposal = Some(proposal);
        self
    }

    /// The client's signed proposal, when the endorser gave it.
    pub fn proposal(&self) -> Option<&SignedProposal> {
        self.proposal.as_ref()
    }

    /// Runs `f` with the unqualified state functions pointed at namespace `ns` (a chaincode called by another on
    /// the same channel shares its caller's simulation, Fabric's `INVOKE_CHAINCODE`), then restores the namespace.
    pub fn in_namespace<R>(&mut self, ns: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        let saved = std::mem::replace(&mut self.namespace, ns.to_owned());
        let r = f(self);
        self.namespace = saved;
        r
    }

    /// The committed value and key-level metadata of `key` in the chaincode's namespace, recording the read
    /// (Fabric's `GetState` together with `GetStateMetadata`: both read the same versioned value).
    pub fn get_state_metadata(&mut self, key: &str) -> Vec<(String, Bytes)> {
        let ns = self.namespace.clone();
        let v = self.view.get(&StateKey::public(&ns, Bytes::copy_from_slice(key.as_bytes())));
        self.rwset.add_read(&ns, key, v.as_ref().map(|v| v.version));
        v.map(|v| v.metadata).unwrap_or_default()
    }

    /// The committed hash of private `key` in `collection` of the chaincode's namespace, recording a hashed read
    /// (Fabric's `GetPrivateDataHash`).
    pub fn get_private_data_hash(&mut self, collection: &str, key: &str) -> Option<Bytes> {
        let ns = self.namespace.clone();
        self.get_private_data_hash_in(&ns, collection, key)
    }

    /// The committed version `(block, tx)` of the hash of private `key` in `collection`, recording the hashed read a
    /// `GetPrivateData` makes (and counting it as a private read); `None` when the key has no value.
    pub fn read_private_version(&mut self, collection: &str, key: &str) -> Option<(u64, u64)> {
        let ns = self.namespace.clone();
        self.private_reads.insert((ns.clone(), collection.to_owned()), ());
        let v = self.view.get(&StateKey::hashed(&ns, collection, sha256(key.as_bytes())));
        self.rwset.add_hashed_read(&ns, collection, key, v.as_ref().map(|v| v.version));
        v.map(|v| (v.version.block_num, v.version.tx_num))
    }

    /// Records a private write (or, with an empty value, a delete) of `key` in `collection` of the chaincode's
    /// namespace: the value into the private write set, its hashes into the public one (Fabric's `PutPrivateData`).
    ///
    /// Errors: [`SimError::InvalidKey`] for an empty key.
    pub fn put_private_data(&mut self, collection: &str, key: &str, value: impl Into<Bytes>) -> Result<(), SimError> {
        check_key(key)?;
        let ns = self.namespace.clone();
        self.put_private_data_in(&ns, collection, key, value.into());
        Ok(())
    }

    /// Records a purge of private `key` in `collection` of the chaincode's namespace (Fabric 2.5's
    /// `PurgePrivateData`: the value and its history are removed at commit).
    ///
    /// Errors: [`SimError::InvalidKey`] for an empty key.
    pub fn purge_private_data(&mut self, collection: &str, key: &str) -> Result<(), SimError> {
        check_key(key)?;
        let ns = self.namespace.clone();
        self.rwset.add_private_purge(&ns, collection, key);
        self.note_written(&ns, collection, key);
        Ok(())
    }

    /// Opens a range iterator over the committed keys of the chaincode's namespace in `[start, end)` (an empty
    /// `end`: to the end of the namespace), handing out at most `limit` results. Keys are taken as given: the shim
    /// has already checked them and substituted an empty start.
    pub fn open_range(&mut self, start: &str, end: &str, limit: usize) -> RangeHandle {
        let ns = self.namespace.clone();
        let results = self
            .view
            .range(&ns, start.as_bytes(), end.as_bytes())
            .into_iter()
            .map(|(k, v)| (String::from_utf8_lossy(&k.key).into_owned(), v))
            .collect();
        self.iterators.push(RangeIterator {
            namespace: ns,
            start: start.to_owned(),
            end: end.to_owned(),
            results,
            next: 0,
            limit,
            reads: Vec::new(),
            exhausted: false,
            end_key: String::new(),
        });
        RangeHandle(self.iterators.len() - 1)
    }

    /// The next result of a range iterator, recorded as a read; `None` at its end (which marks the range exhausted)
    /// or once it handed out its limit (which does not).
    pub fn range_next(&mut self, handle: RangeHandle) -> Option<(String, Bytes)> {
        let it = self.iterators.get_mut(handle.0)?;
        if it.reads.len() >= it.limit {
            return None;
        }
        match it.results.get(it.next) {
            Some((key, v)) => {
                it.next += 1;
                it.reads.push(KvRead { key: key.clone(), version: version(Some(v.version)) });
                it.end_key = key.clone();
                Some((key.clone(), v.value.clone()))
            }
            None => {
                it.exhausted = true;
                it.end_key = it.end.clone();
                None
            }
        }
    }

    /// Whether a range iterator handed out its limit.
    pub fn range_at_limit(&self, handle: RangeHandle) -> bool {
        self.iterators.get(handle.0).is_some_and(|it| it.reads.len() >= it.limit)
    }

    /// The key a next page would start at (the first result not handed out), empty when there is none (Fabric's
    /// `GetBookmarkAndClose`); not a recorded read.
    pub fn range_bookmark(&self, handle: RangeHandle) -> String {
        self.iterators.get(handle.0).and_then(|it| it.results.get(it.next)).map(|(k, _)| k.clone()).unwrap_or_default()
    }

    /// The channel the transaction is for.
    pub fn channel_id(&self) -> &str {
        &self.channel_id
    }

    /// The transaction ID (hex of SHA-256(nonce ‖ creator)).
    pub fn tx_id(&self) -> &str {
        &self.tx_id
    }

    /// The invoked chaincode, whose namespace the unqualified state functions use.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The proposal creator's marshaled `msp.SerializedIdentity`.
    pub fn creator(&self) -> &Bytes {
        &self.creator
    }

    /// Checks access to an ACL resource (e.g. `_lifecycle/CommitChaincodeDefinition`).
    ///
    /// Errors: the reason access was denied.
    pub fn check_acl(&self, resource: &str) -> Result<(), ChaincodeError> {
        self.acl.check(resource)
    }

    /// The committed value of `key` in the chaincode's namespace (`None` if absent); the read is recorded with the
    /// committed version (Fabric's `GetState`).
    pub fn get_state(&mut self, key: &str) -> Option<Bytes> {
        let ns = self.namespace.clone();
        self.get_state_in(&ns, key)
    }

    /// A recorded read of `key` in another namespace (what the peer itself reads through the transaction's
    /// simulator, e.g. `_lifecycle` definitions or `lscc` entries).
    pub(crate) fn get_state_in(&mut self, ns: &str, key: &str) -> Option<Bytes> {
        let v = self.view.get(&StateKey::public(ns, Bytes::copy_from_slice(key.as_bytes())));
        self.rwset.add_read(ns, key, v.as_ref().map(|v| v.version));
        v.map(|v| v.value)
    }

    /// The committed value of a key without recording a read (what the peer's own caches see).
    pub(crate) fn committed(&self, ns: &str, key: &str) -> Option<Bytes> {
        self.view.get(&StateKey::public(ns, Bytes::copy_from_slice(key.as_bytes()))).map(|v| v.value)
    }

    /// Records a write of `value` to `key` in the chaincode's namespace (Fabric's `PutState`; an empty value is
    /// recorded as a delete, as Fabric's builder does).
    ///
    /// Errors: [`SimError::InvalidKey`] for an empty key.
    pub fn put_state(&mut self, key: &str, value: impl Into<Bytes>) -> Result<(), SimError> {
        check_key(key)?;
        let ns = self.namespace.clone();
        self.put_state_in(&ns, key, value.into());
        Ok(())
    }

    pub(crate) fn put_state_in(&mut self, ns: &str, key: &str, value: Bytes) {
        self.rwset.add_write(ns, key, value);
        self.note_written(ns, "", key);
    }

    /// Records a delete of `key` in the chaincode's namespace (Fabric's `DelState`).
    ///
    /// Errors: [`SimError::InvalidKey`] for an empty key.
    pub fn del_state(&mut self, key: &str) -> Result<(), SimError> {
        self.put_state(key, Bytes::new())
    }

    /// Records a write of key-level metadata (e.g. `VALIDATION_PARAMETER` = a marshaled SignaturePolicyEnvelope) for
    /// `key` (Fabric's `SetStateMetadata`); an empty map deletes the metadata.
    ///
    /// Errors: [`SimError::InvalidKey`] for an empty key.
    pub fn set_state_metadata(&mut self, key: &str, metadata: &BTreeMap<String, Bytes>) -> Result<(), SimError> {
        check_key(key)?;
        let ns = self.namespace.clone();
        self.rwset.add_metadata_write(&ns, key, metadata);
        self.note_written(&ns, "", key);
        Ok(())
    }

    /// All committed keys of the chaincode's namespace in `[start, end)` with their values, in key order, as a Go
    /// chaincode that iterates `GetStateByRange(start, end)` to its end sees them (an empty `start` is the shim's
    /// `"\x01"`, an empty `end` means "to the end of the namespace"). The range query is recorded the way the peer
    /// records it: every result read with its version, exhausted unless [`TOTAL_QUERY_LIMIT`] cut it (then only the
    /// first `TOTAL_QUERY_LIMIT` results are returned and the recorded end key is the last one read).
    ///
    /// Errors: [`SimError::InvalidKey`] if a key starts with `\0` (composite-key namespace).
    pub fn get_state_by_range(&mut self, start: &str, end: &str) -> Result<Vec<(String, Bytes)>, SimError> {
        let ns = self.namespace.clone();
        self.get_state_by_range_in(&ns, start, end)
    }

    /// [`Self::get_state_by_range`] in namespace `ns` (the `_lifecycle` chaincode's own range queries).
    pub(crate) fn get_state_by_range_in(
        &mut self,
        ns: &str,
        start: &str,
        end: &str,
    ) -> Result<Vec<(String, Bytes)>, SimError> {
        let start = if start.is_empty() { "\u{1}" } else { start };
        for k in [start, end] {
            if k.starts_with('\0') {
                return Err(SimError::InvalidKey(format!(
                    "first character of the key [{k}] contains a null character which is not allowed"
                )));
            }
        }
        let committed = self.view.range(ns, start.as_bytes(), end.as_bytes());
        let exhausted = committed.len() < TOTAL_QUERY_LIMIT;
        let mut out = Vec::with_capacity(committed.len().min(TOTAL_QUERY_LIMIT));
        let mut reads = Vec::with_capacity(out.capacity());
        for (k, v) in committed.into_iter().take(TOTAL_QUERY_LIMIT) {
            // Keys written by chaincodes are strings; a non-UTF-8 key cannot have come from one.
            let key = String::from_utf8_lossy(&k.key).into_owned();
            reads.push(KvRead { key: key.clone(), version: version(Some(v.version)) });
            out.push((key, v.value));
        }
        let end_key = if exhausted { end.to_owned() } else { reads.last().map(|r| r.key.clone()).unwrap_or_default() };
        let info = RangeQueryInfo {
            start_key: start.to_owned(),
            end_key,
            itr_exhausted: exhausted,
            reads_info: range_reads_info(reads),
        };
        self.rwset.add_range_query(ns, info);
        Ok(out)
    }

    /// The committed hash of a private key without recording a read.
    pub(crate) fn committed_hashed(&self, ns: &str, collection: &str, key: &str) -> Option<Bytes> {
        self.view.get(&StateKey::hashed(ns, collection, sha256(key.as_bytes()))).map(|v| v.value)
    }

    /// The committed hash of a private key (SHA-256 of its value) of `collection` in namespace `ns`, recording a
    /// hashed read with its version (Fabric's `GetPrivateDataHash`; also what a `GetPrivateData` records).
    pub(crate) fn get_private_data_hash_in(&mut self, ns: &str, collection: &str, key: &str) -> Option<Bytes> {
        let v = self.view.get(&StateKey::hashed(ns, collection, sha256(key.as_bytes())));
        self.rwset.add_hashed_read(ns, collection, key, v.as_ref().map(|v| v.version));
        v.map(|v| v.value)
    }

    /// As [`Self::get_private_data_hash_in`], for a read of the private value itself (it also counts as a private
    /// read for the endorsement interest).
    pub(crate) fn read_private_in(&mut self, ns: &str, collection: &str, key: &str) -> Option<Bytes> {
        self.private_reads.insert((ns.to_owned(), collection.to_owned()), ());
        self.get_private_data_hash_in(ns, collection, key)
    }

    /// Records a private write (Fabric's `PutPrivateData`: plaintext into the private set, hashes into the public).
    pub(crate) fn put_private_data_in(&mut self, ns: &str, collection: &str, key: &str, value: Bytes) {
        self.rwset.add_private_write(ns, collection, key, value);
        self.note_written(ns, collection, key);
    }

    /// Sets the transaction's chaincode event (Fabric's `SetEvent`; a later call replaces an earlier one).
    ///
    /// Errors: [`SimError::InvalidEvent`] for an empty name.
    pub fn set_event(&mut self, name: &str, payload: impl Into<Bytes>) -> Result<(), SimError> {
        if name.is_empty() {
            return Err(SimError::InvalidEvent("event name can not be empty string".into()));
        }
        self.event = Some((name.to_owned(), payload.into()));
        Ok(())
    }

    fn note_written(&mut self, ns: &str, collection: &str, key: &str) {
        let metadata = if collection.is_empty() {
            self.view.get(&StateKey::public(ns, Bytes::copy_from_slice(key.as_bytes()))).map(|v| v.metadata)
        } else {
            self.view.get(&StateKey::hashed(ns, collection, sha256(key.as_bytes()))).map(|v| v.metadata)
        };
        self.written_metadata
            .insert((ns.to_owned(), collection.to_owned(), key.to_owned()), metadata.unwrap_or_default());
    }

    /// Ends the simulation: the marshaled read/write sets, the event and the endorsement interest.
    pub fn finish(mut self) -> Simulation {
        for it in std::mem::take(&mut self.iterators) {
            let info = RangeQueryInfo {
                start_key: it.start,
                end_key: it.end_key,
                itr_exhausted: it.exhausted,
                reads_info: range_reads_info(it.reads),
            };
            self.rwset.add_range_query(&it.namespace, info);
        }
        let (results, private) = self.rwset.build();
        let interest = self.interest();
        let event = self.event.map(|(event_name, payload)| ChaincodeEvent {
            chaincode_id: self.namespace.clone(),
            tx_id: self.tx_id.clone(),
            event_name,
            payload,
        });
        Simulation { results, private, event, interest }
    }

    /// Fabric's `buildChaincodeInterest`: per written key, a key-level policy (if the key carries one) or the need for
    /// the chaincode's (or collection's) own policy; every user-chaincode namespace of the read/write set needs its
    /// chaincode policy unless all its written keys carry key-level policies; system chaincodes are left out.
    fn interest(&self) -> ChaincodeInterest {
        // namespace -> collection ("" = public) -> policy required
        let mut required: BTreeMap<String, BTreeMap<String, bool>> = BTreeMap::new();
        let mut key_policies: BTreeMap<String, Vec<SignaturePolicyEnvelope>> = BTreeMap::new();
        for ((ns, coll, _), metadata) in &self.written_metadata {
            let entry = required.entry(ns.clone()).or_default();
            entry.entry(String::new()).or_insert(false);
            match metadata.iter().find(|(name, _)| name == VALIDATION_PARAMETER) {
                Some((_, policy)) => {
                    if let Ok(p) = SignaturePolicyEnvelope::decode(policy.clone()) {
                        key_policies.entry(ns.clone()).or_default().push(p);
                    }
                }
                None => {
                    entry.insert(coll.clone(), true);
                }
            }
        }
        for ns in self.rwset.namespaces() {
            if !is_system_chaincode(ns) && !required.contains_key(ns) {
                required.entry(ns.to_owned()).or_default().insert(String::new(), true);
            }
        }
        for (ns, coll) in self.private_reads.keys() {
            required.entry(ns.clone()).or_default().insert(coll.clone(), true);
        }
        let mut chaincodes = Vec::new();
        for (ns, colls) in &required {
            if is_system_chaincode(ns) {
                continue;
            }
            let ns_policy = colls.get("").copied().unwrap_or(false);
            for (coll, _) in colls.iter().filter(|(c, r)| c.is_empty() || **r) {
                let mut call = ChaincodeCall { name: ns.clone(), ..Default::default() };
                if coll.is_empty() {
                    match key_policies.get(ns) {
                        Some(kp) if !kp.is_empty() => {
                            call.key_policies = kp.clone();
                            call.disregard_namespace_policy = !ns_policy;
                        }
                        _ if !ns_policy => continue,
                        _ => {}
                    }
                } else {
                    call.collection_names = vec![coll.clone()];
                    call.no_private_reads = !self.private_reads.contains_key(&(ns.clone(), coll.clone()));
                }
                chaincodes.push(call);
            }
        }
        ChaincodeInterest { chaincodes }
    }
}

/// The Go shim's `PutState`/`GetState` key check.
fn check_key(key: &str) -> Result<(), SimError> {
    if key.is_empty() {
        return Err(SimError::InvalidKey("key must not be an empty string".into()));
    }
    Ok(())
}
