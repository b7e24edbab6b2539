//! Endorser transactions assembled exactly like a Fabric 2.5 client/peer
//! pair produces them: proposal (fabric `protoutil/proputils.go`),
//! endorsement (`core/handlers/endorsement/builtin`), transaction assembly
//! (`protoutil.CreateSignedTx` in `protoutil/txutils.go`) and read/write set
//! ordering (`core/ledger/kvledger/txmgmt/rwsetutil`).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrofabric_protos::common::{ChannelHeader, Envelope, Header, HeaderType, Payload, SignatureHeader};
use ferrofabric_protos::kvrwset::{
    range_query_info, HashedRwSet, KvMetadataEntry, KvMetadataWrite, KvMetadataWriteHash, KvRead, KvReadHash, KvWrite,
    KvWriteHash, KvrwSet, QueryReads, RangeQueryInfo, Version,
};
use ferrofabric_protos::peer::{
    chaincode_spec, ChaincodeAction, ChaincodeActionPayload, ChaincodeEndorsedAction, ChaincodeEvent,
    ChaincodeHeaderExtension, ChaincodeId, ChaincodeInput, ChaincodeInvocationSpec, ChaincodeProposalPayload,
    ChaincodeSpec, Endorsement, ProposalResponsePayload, Response, Transaction, TransactionAction,
};
use ferrofabric_protos::rwset::{tx_read_write_set, CollectionHashedReadWriteSet, NsReadWriteSet, TxReadWriteSet};
use ferrofabric_protoutil::lifecycle::{field_key, NAMESPACES};
use prost::Message;
use sha2::{Digest, Sha256};

use crate::{Network, SigningIdentity, TestkitError};

/// Namespace of the new lifecycle system chaincode.
pub use ferrofabric_protoutil::lifecycle::LIFECYCLE_NAMESPACE;

/// A built transaction: the marshaled `common.Envelope` (what a client
/// broadcasts and a block's `data.data[i]` holds) and its channel-header
/// transaction ID.
#[derive(Clone, Debug)]
pub struct Built {
    /// Marshaled `common.Envelope`.
    pub envelope: Bytes,
    /// `ChannelHeader.tx_id` as written (normally hex(SHA-256(nonce ‖ creator))).
    pub tx_id: String,
}

fn version(v: Option<(u64, u64)>) -> Option<Version> {
    v.map(|(block_num, tx_num)| Version { block_num, tx_num })
}

/// Private (collection) part of one namespace, keyed by plaintext key so
/// the output order matches Fabric's builder, which sorts by key.
#[derive(Clone, Default)]
struct CollRw {
    reads: BTreeMap<String, Option<Version>>,
    writes: BTreeMap<String, Option<Bytes>>,
    metadata_writes: BTreeMap<String, Vec<KvMetadataEntry>>,
}

#[derive(Clone, Default)]
struct NsRw {
    reads: BTreeMap<String, Option<Version>>,
    range_queries: Vec<RangeQueryInfo>,
    /// `None` value = delete.
    writes: BTreeMap<String, Option<Bytes>>,
    metadata_writes: BTreeMap<String, Vec<KvMetadataEntry>>,
    collections: BTreeMap<String, CollRw>,
}

fn entries(list: &[(&str, &[u8])]) -> Vec<KvMetadataEntry> {
    list.iter()
        .map(|(name, value)| KvMetadataEntry { name: name.to_string(), value: Bytes::copy_from_slice(value) })
        .collect()
}

fn sha256(data: &[u8]) -> Bytes {
    Bytes::copy_from_slice(&Sha256::digest(data))
}

fn flip_last_byte(sig: &mut Bytes) {
    let mut v = sig.to_vec();
    if let Some(last) = v.last_mut() {
        *last ^= 0x01;
    }
    *sig = Bytes::from(v);
}

/// Builder for one `ENDORSER_TRANSACTION` envelope.
///
/// Defaults (from [`TxBuilder::new`]): channel `mychannel`, creator
/// `User1@org1`, endorsers `peer0.org1` and `peer0.org2`, chaincode version
/// `1.0`, random 24-byte nonce, current time, epoch 0, response status 200,
/// no events. The chaincode name has no default: [`TxBuilder::build`] fails
/// without [`TxBuilder::chaincode`].
///
/// The read/write set is emitted as Fabric's simulator does: namespaces,
/// collections, reads, writes and metadata writes sorted by name/key;
/// range queries in call order. The tampering knobs produce the malformed or
/// mis-signed transactions that validator negative tests need.
#[derive(Clone)]
pub struct TxBuilder<'a> {
    channel_id: String,
    header_type: i32,
    epoch: u64,
    timestamp: Option<prost_types::Timestamp>,
    chaincode: Option<(String, String)>,
    args: Vec<Bytes>,
    creator: &'a SigningIdentity,
    endorsers: Vec<&'a SigningIdentity>,
    nonce: Option<Bytes>,
    tx_id: Option<String>,
    namespaces: BTreeMap<String, NsRw>,
    event: Option<(String, Bytes)>,
    response: Response,
    raw_results: Option<Bytes>,
    corrupt_creator: bool,
    corrupt_endorsements: Vec<usize>,
    drop_endorsements: bool,
    payload_data: Option<Bytes>,
    proposal_hash: Option<Bytes>,
}

impl<'a> TxBuilder<'a> {
    /// A builder with the network defaults listed on [`TxBuilder`].
    pub fn new(net: &'a Network) -> Self {
        TxBuilder {
            channel_id: net.channel_id().to_string(),
            header_type: HeaderType::EndorserTransaction as i32,
            epoch: 0,
            timestamp: None,
            chaincode: None,
            args: Vec::new(),
            creator: net.client(0),
            endorsers: vec![net.peer(0), net.peer(1)],
            nonce: None,
            tx_id: None,
            namespaces: BTreeMap::new(),
            event: None,
            response: Response { status: 200, message: String::new(), payload: Bytes::new() },
            raw_results: None,
            corrupt_creator: false,
            corrupt_endorsements: Vec::new(),
            drop_endorsements: false,
            payload_data: None,
            proposal_hash: None,
        }
    }

    /// Invoked chaincode: header extension and invocation spec carry `name`;
    /// the endorsed `ChaincodeAction.chaincode_id` carries `name` and
    /// `version` (the definition's version, e.g. `1.0`).
    pub fn chaincode(mut self, name: &str, version: &str) -> Self {
        self.chaincode = Some((name.to_string(), version.to_string()));
        self
    }

    /// Invocation arguments (`ChaincodeInput.args`), function name first.
    pub fn args<I, T>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        self.args = args.into_iter().map(|a| Bytes::copy_from_slice(a.as_ref())).collect();
        self
    }

    /// Transaction creator: signs the envelope and is the SignatureHeader's
    /// `creator`.
    pub fn creator(mut self, creator: &'a SigningIdentity) -> Self {
        self.creator = creator;
        self
    }

    /// Endorsing peers, in endorsement order. Duplicates are kept (Fabric's
    /// client would drop them), so duplicate-endorser cases can be built.
    pub fn endorsers(mut self, endorsers: &[&'a SigningIdentity]) -> Self {
        self.endorsers = endorsers.to_vec();
        self
    }

    fn ns(&mut self, ns: &str) -> &mut NsRw {
        self.namespaces.entry(ns.to_string()).or_default()
    }

    fn coll(&mut self, ns: &str, coll: &str) -> &mut CollRw {
        self.ns(ns).collections.entry(coll.to_string()).or_default()
    }

    /// Public read of `key` in namespace `ns` at version `(block, tx)`;
    /// `None` records a read of an absent key.
    pub fn read(mut self, ns: &str, key: &str, version_: Option<(u64, u64)>) -> Self {
        self.ns(ns).reads.insert(key.to_string(), version(version_));
        self
    }

    /// The `_lifecycle` read of `namespaces/fields/<chaincode>/Sequence`
    /// that Fabric 2.x adds to every user-chaincode invocation (the version is
    /// that of the chaincode definition's commit). Call after
    /// [`TxBuilder::chaincode`]; without a chaincode this is a no-op.
    pub fn lifecycle_read(self, definition_version: Option<(u64, u64)>) -> Self {
        match self.chaincode.clone() {
            Some((name, _)) => {
                self.read(LIFECYCLE_NAMESPACE, &field_key(NAMESPACES, &name, "Sequence"), definition_version)
            }
            None => self,
        }
    }

    /// Public write of `value` to `key`.
    pub fn write(mut self, ns: &str, key: &str, value: impl AsRef<[u8]>) -> Self {
        let v = Bytes::copy_from_slice(value.as_ref());
        self.ns(ns).writes.insert(key.to_string(), Some(v));
        self
    }

    /// Public delete of `key` (`KVWrite{is_delete: true}`).
    pub fn delete(mut self, ns: &str, key: &str) -> Self {
        self.ns(ns).writes.insert(key.to_string(), None);
        self
    }

    /// A range query `[start, end)` with its raw reads (key, version) in
    /// iteration order and whether the iterator was exhausted.
    pub fn range_query(
        mut self,
        ns: &str,
        start: &str,
        end: &str,
        itr_exhausted: bool,
        reads: &[(&str, Option<(u64, u64)>)],
    ) -> Self {
        let kv_reads = reads.iter().map(|(k, v)| KvRead { key: k.to_string(), version: version(*v) }).collect();
        self.ns(ns).range_queries.push(RangeQueryInfo {
            start_key: start.to_string(),
            end_key: end.to_string(),
            itr_exhausted,
            reads_info: Some(range_query_info::ReadsInfo::RawReads(QueryReads { kv_reads })),
        });
        self
    }

    /// Key metadata write (e.g. entry `VALIDATION_PARAMETER` = marshaled
    /// SignaturePolicyEnvelope for key-level endorsement).
    pub fn metadata_write(mut self, ns: &str, key: &str, metadata: &[(&str, &[u8])]) -> Self {
        self.ns(ns).metadata_writes.insert(key.to_string(), entries(metadata));
        self
    }

    /// Hashed read of private `key` in collection `coll` (key hash = SHA-256).
    pub fn hashed_read(mut self, ns: &str, coll: &str, key: &str, version_: Option<(u64, u64)>) -> Self {
        self.coll(ns, coll).reads.insert(key.to_string(), version(version_));
        self
    }

    /// Hashed write of private `key` (key and value hashes; the collection's
    /// `pvt_rwset_hash` covers the private write set).
    pub fn hashed_write(mut self, ns: &str, coll: &str, key: &str, value: impl AsRef<[u8]>) -> Self {
        let v = Bytes::copy_from_slice(value.as_ref());
        self.coll(ns, coll).writes.insert(key.to_string(), Some(v));
        self
    }

    /// Hashed delete of private `key`.
    pub fn hashed_delete(mut self, ns: &str, coll: &str, key: &str) -> Self {
        self.coll(ns, coll).writes.insert(key.to_string(), None);
        self
    }

    /// Hashed metadata write for private `key`.
    pub fn hashed_metadata_write(mut self, ns: &str, coll: &str, key: &str, metadata: &[(&str, &[u8])]) -> Self {
        self.coll(ns, coll).metadata_writes.insert(key.to_string(), entries(metadata));
        self
    }

    /// Chaincode event carried in `ChaincodeAction.events` (its
    /// `chaincode_id` and `tx_id` are filled in at build time).
    pub fn chaincode_event(mut self, name: &str, payload: impl AsRef<[u8]>) -> Self {
        self.event = Some((name.to_string(), Bytes::copy_from_slice(payload.as_ref())));
        self
    }

    /// Chaincode response in the endorsed action (default status 200).
    pub fn response(mut self, status: i32, message: &str, payload: impl AsRef<[u8]>) -> Self {
        self.response =
            Response { status, message: message.to_string(), payload: Bytes::copy_from_slice(payload.as_ref()) };
        self
    }

    /// SignatureHeader nonce (default: 24 random bytes).
    pub fn nonce(mut self, nonce: impl Into<Bytes>) -> Self {
        self.nonce = Some(nonce.into());
        self
    }

    /// Channel-header timestamp (default: now).
    pub fn timestamp(mut self, seconds: i64, nanos: i32) -> Self {
        self.timestamp = Some(prost_types::Timestamp { seconds, nanos });
        self
    }

    /// Replaces `ChaincodeAction.results` with raw bytes (e.g. an
    /// unparseable read/write set); the rw-set methods are then ignored.
    pub fn raw_results(mut self, results: impl Into<Bytes>) -> Self {
        self.raw_results = Some(results.into());
        self
    }

    /// Tamper: flip one bit of the creator's envelope signature.
    pub fn corrupt_creator_signature(mut self) -> Self {
        self.corrupt_creator = true;
        self
    }

    /// Tamper: flip one bit of endorsement `i`'s signature (ignored if out
    /// of range).
    pub fn corrupt_endorsement(mut self, i: usize) -> Self {
        self.corrupt_endorsements.push(i);
        self
    }

    /// Tamper: emit the endorsed action with no endorsements at all.
    pub fn drop_endorsements(mut self) -> Self {
        self.drop_endorsements = true;
        self
    }

    /// Tamper: channel-header `tx_id` (default hex(SHA-256(nonce ‖ creator))).
    pub fn tx_id(mut self, tx_id: impl Into<String>) -> Self {
        self.tx_id = Some(tx_id.into());
        self
    }

    /// Tamper: channel-header `epoch` (Fabric requires 0).
    pub fn epoch(mut self, epoch: u64) -> Self {
        self.epoch = epoch;
        self
    }

    /// Tamper: channel-header `type` (default `ENDORSER_TRANSACTION` = 3).
    pub fn header_type(mut self, header_type: i32) -> Self {
        self.header_type = header_type;
        self
    }

    /// Channel ID written in the channel header.
    pub fn channel(mut self, channel_id: impl Into<String>) -> Self {
        self.channel_id = channel_id.into();
        self
    }

    /// Tamper: `Payload.data` replaced by these raw bytes (e.g. not a
    /// Transaction); the envelope is still correctly signed by the creator.
    pub fn payload_data(mut self, data: impl Into<Bytes>) -> Self {
        self.payload_data = Some(data.into());
        self
    }

    /// Tamper: `ProposalResponsePayload.proposal_hash` (default: SHA-256 of
    /// channel header ‖ signature header ‖ proposal payload).
    pub fn proposal_hash(mut self, hash: impl Into<Bytes>) -> Self {
        self.proposal_hash = Some(hash.into());
        self
    }

    fn results_bytes(&self) -> Bytes {
        if let Some(raw) = &self.raw_results {
            return raw.clone();
        }
        let ns_rwset = self
            .namespaces
            .iter()
            .map(|(ns, rw)| NsReadWriteSet {
                namespace: ns.clone(),
                rwset: Bytes::from(
                    KvrwSet {
                        reads: rw.reads.iter().map(|(k, v)| KvRead { key: k.clone(), version: *v }).collect(),
                        range_queries_info: rw.range_queries.clone(),
                        writes: rw.writes.iter().map(|(k, v)| kv_write(k, v)).collect(),
                        metadata_writes: rw
                            .metadata_writes
                            .iter()
                            .map(|(k, e)| KvMetadataWrite { key: k.clone(), entries: e.clone() })
                            .collect(),
                    }
                    .encode_to_vec(),
                ),
                collection_hashed_rwset: rw.collections.iter().map(|(name, c)| hashed_collection(name, c)).collect(),
            })
            .collect();
        Bytes::from(TxReadWriteSet { data_model: tx_read_write_set::DataModel::Kv as i32, ns_rwset }.encode_to_vec())
    }

    /// Assembles and signs the envelope.
    ///
    /// Errors: [`TestkitError::Builder`] if no chaincode was set.
    pub fn build(&self) -> Result<Built, TestkitError> {
        let (cc_name, cc_version) =
            self.chaincode.clone().ok_or_else(|| TestkitError::Builder("chaincode name not set".into()))?;
        let creator = self.creator.serialized().clone();
        let nonce = match &self.nonce {
            Some(n) => n.clone(),
            None => ferrofabric_protoutil::new_nonce(),
        };
        let tx_id = self.tx_id.clone().unwrap_or_else(|| ferrofabric_protoutil::compute_txid(&nonce, &creator));
        let timestamp = self.timestamp.or_else(|| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
            Some(prost_types::Timestamp {
                seconds: i64::try_from(now.as_secs()).ok()?,
                nanos: i32::try_from(now.subsec_nanos()).ok()?,
            })
        });

        // Proposal (protoutil.CreateChaincodeProposalWithTxIDNonceAndTransient).
        let header_cc_id = ChaincodeId { name: cc_name.clone(), ..Default::default() };
        let channel_header = Bytes::from(
            ChannelHeader {
                r#type: self.header_type,
                version: 0,
                timestamp,
                channel_id: self.channel_id.clone(),
                tx_id: tx_id.clone(),
                epoch: self.epoch,
                extension: Bytes::from(
                    ChaincodeHeaderExtension { chaincode_id: Some(header_cc_id.clone()) }.encode_to_vec(),
                ),
                tls_cert_hash: Bytes::new(),
            }
            .encode_to_vec(),
        );
        let signature_header = Bytes::from(SignatureHeader { creator: creator.clone(), nonce }.encode_to_vec());
        // System chaincodes are invoked with an UNDEFINED spec type by the
        // peer CLI; user chaincodes are GOLANG in the fixture.
        let spec_type =
            if cc_name == LIFECYCLE_NAMESPACE { chaincode_spec::Type::Undefined } else { chaincode_spec::Type::Golang };
        let invocation = ChaincodeInvocationSpec {
            chaincode_spec: Some(ChaincodeSpec {
                r#type: spec_type as i32,
                chaincode_id: Some(header_cc_id),
                input: Some(ChaincodeInput { args: self.args.clone(), ..Default::default() }),
                timeout: 0,
            }),
        };
        // No transient map, so this is also the payload that goes into the tx.
        let proposal_payload = Bytes::from(
            ChaincodeProposalPayload { input: Bytes::from(invocation.encode_to_vec()), ..Default::default() }
                .encode_to_vec(),
        );
        // protoutil.GetProposalHash1/2 (equal without transient data).
        let proposal_hash = self.proposal_hash.clone().unwrap_or_else(|| {
            let mut h = Sha256::new();
            h.update(&channel_header);
            h.update(&signature_header);
            h.update(&proposal_payload);
            Bytes::copy_from_slice(&h.finalize())
        });

        // Endorsement: every endorser simulates identically and signs
        // ProposalResponsePayload ‖ its own serialized identity.
        let events = match &self.event {
            Some((name, payload)) => Bytes::from(
                ChaincodeEvent {
                    chaincode_id: cc_name.clone(),
                    tx_id: tx_id.clone(),
                    event_name: name.clone(),
                    payload: payload.clone(),
                }
                .encode_to_vec(),
            ),
            None => Bytes::new(),
        };
        let action = ChaincodeAction {
            results: self.results_bytes(),
            events,
            response: Some(self.response.clone()),
            chaincode_id: Some(ChaincodeId { name: cc_name, version: cc_version, ..Default::default() }),
        };
        let prp = Bytes::from(
            ProposalResponsePayload { proposal_hash, extension: Bytes::from(action.encode_to_vec()) }.encode_to_vec(),
        );
        let mut endorsements = Vec::with_capacity(self.endorsers.len());
        if !self.drop_endorsements {
            for (i, e) in self.endorsers.iter().enumerate() {
                let endorser = e.serialized().clone();
                let mut msg = Vec::with_capacity(prp.len() + endorser.len());
                msg.extend_from_slice(&prp);
                msg.extend_from_slice(&endorser);
                let mut signature = Bytes::from(e.sign_deterministic(&msg));
                if self.corrupt_endorsements.contains(&i) {
                    flip_last_byte(&mut signature);
                }
                endorsements.push(Endorsement { endorser, signature });
            }
        }

        // Transaction assembly (protoutil.CreateSignedTx).
        let data = match &self.payload_data {
            Some(d) => d.clone(),
            None => {
                let cap = ChaincodeActionPayload {
                    chaincode_proposal_payload: proposal_payload,
                    action: Some(ChaincodeEndorsedAction { proposal_response_payload: prp, endorsements }),
                };
                Bytes::from(
                    Transaction {
                        actions: vec![TransactionAction {
                            header: signature_header.clone(),
                            payload: Bytes::from(cap.encode_to_vec()),
                        }],
                    }
                    .encode_to_vec(),
                )
            }
        };
        let payload =
            Bytes::from(Payload { header: Some(Header { channel_header, signature_header }), data }.encode_to_vec());
        let mut signature = Bytes::from(self.creator.sign_deterministic(&payload));
        if self.corrupt_creator {
            flip_last_byte(&mut signature);
        }
        let envelope = Bytes::from(Envelope { payload, signature }.encode_to_vec());
        Ok(Built { envelope, tx_id })
    }
}

fn kv_write(key: &str, value: &Option<Bytes>) -> KvWrite {
    match value {
        Some(v) => KvWrite { key: key.to_string(), is_delete: false, value: v.clone() },
        None => KvWrite { key: key.to_string(), is_delete: true, value: Bytes::new() },
    }
}

/// Hashed view of one collection (`rwsetutil` hashes keys and values with
/// SHA-256); `pvt_rwset_hash` is the hash of the private KVRWSet holding the
/// plaintext writes, empty when the collection was only read.
fn hashed_collection(name: &str, c: &CollRw) -> CollectionHashedReadWriteSet {
    let hashed = HashedRwSet {
        hashed_reads: c.reads.iter().map(|(k, v)| KvReadHash { key_hash: sha256(k.as_bytes()), version: *v }).collect(),
        hashed_writes: c
            .writes
            .iter()
            .map(|(k, v)| KvWriteHash {
                key_hash: sha256(k.as_bytes()),
                is_delete: v.is_none(),
                value_hash: v.as_deref().map(sha256).unwrap_or_default(),
                is_purge: false,
            })
            .collect(),
        metadata_writes: c
            .metadata_writes
            .iter()
            .map(|(k, e)| KvMetadataWriteHash { key_hash: sha256(k.as_bytes()), entries: e.clone() })
            .collect(),
    };
    let pvt_rwset_hash = if c.writes.is_empty() && c.metadata_writes.is_empty() {
        Bytes::new()
    } else {
        let pvt = KvrwSet {
            writes: c.writes.iter().map(|(k, v)| kv_write(k, v)).collect(),
            metadata_writes: c
                .metadata_writes
                .iter()
                .map(|(k, e)| KvMetadataWrite { key: k.clone(), entries: e.clone() })
                .collect(),
            ..Default::default()
        };
        sha256(&pvt.encode_to_vec())
    };
    CollectionHashedReadWriteSet {
        collection_name: name.to_string(),
        hashed_rwset: Bytes::from(hashed.encode_to_vec()),
        pvt_rwset_hash,
    }
}
