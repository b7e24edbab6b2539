//! Simulation rules and `_lifecycle` behaviour not covered by the fixture ledger: range queries beyond the Merkle
//! threshold, no read-your-writes, deletes, endorsement interest with key-level policies, and the lifecycle's
//! sequence, approval and redefinition rules (Fabric's messages).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_chaincode::{
    endorsement_info, AllowAll, Chaincode, Installed, Kv, Lifecycle, Simulation, Transfer, TxContext, MAX_DEGREE,
};
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::{Block, SignaturePolicyEnvelope};
use ferrofabric_protos::kvrwset::{range_query_info::ReadsInfo, HashedRwSet, KvRead, KvrwSet, QueryReads, Version};
use ferrofabric_protos::lifecycle::{
    chaincode_source, ApproveChaincodeDefinitionForMyOrgArgs, ChaincodeSource, CheckCommitReadinessArgs,
    CheckCommitReadinessResult, CommitChaincodeDefinitionArgs, QueryChaincodeDefinitionArgs,
};
use ferrofabric_protos::peer::Response;
use ferrofabric_protos::rwset::TxReadWriteSet;
use ferrofabric_state::{Height, StateKey, Update, UpdateBatch, VersionedValue, WorldState};
use ferrofabric_testkit::Network;
use prost::Message;
use sha2::{Digest, Sha256};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn args(list: &[&[u8]]) -> Vec<Bytes> {
    list.iter().map(|a| Bytes::copy_from_slice(a)).collect()
}

fn run(state: &WorldState, ns: &str, cc: &dyn Chaincode, a: &[Bytes]) -> (Response, Simulation) {
    let view = state.view();
    let acl = AllowAll;
    let mut ctx = TxContext::new(&view, "mychannel", "tx", ns, Bytes::new(), &acl);
    let r = cc.invoke(&mut ctx, a);
    (r, ctx.finish())
}

fn kv_of(sim: &Simulation, ns: &str) -> KvrwSet {
    let tx = TxReadWriteSet::decode(sim.results.clone()).unwrap();
    let n = tx.ns_rwset.iter().find(|n| n.namespace == ns).expect("namespace in rwset");
    KvrwSet::decode(n.rwset.clone()).unwrap()
}

fn put(state: &WorldState, block: u64, entries: &[(&str, &str, &str)]) {
    let mut batch = UpdateBatch::new();
    for (i, (ns, k, v)) in entries.iter().enumerate() {
        batch.put(
            StateKey::public(ns, b(k)),
            Update::Put(VersionedValue { value: b(v), metadata: Vec::new(), version: Height::new(block, i as u64) }),
        );
    }
    state.apply(block, &batch);
}

#[test]
fn range_beyond_max_degree_results_is_recorded_as_a_merkle_summary() {
    let state = WorldState::new();
    let keys: Vec<String> = (0..60).map(|i| format!("k{i:03}")).collect();
    let entries: Vec<(&str, &str, &str)> = keys.iter().map(|k| ("kv", k.as_str(), "v")).collect();
    put(&state, 1, &entries);
    let (r, sim) = run(&state, "kv", &Kv, &args(&[b"range", b"", b""]));
    assert_eq!(r.status, 200);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&r.payload).unwrap().as_array().unwrap().len(), 60);
    let kv = kv_of(&sim, "kv");
    assert!(kv.reads.is_empty());
    let rq = &kv.range_queries_info[0];
    // The Go shim substitutes "\x01" for an empty start key; an exhausted range records the requested end key.
    assert_eq!((rq.start_key.as_str(), rq.end_key.as_str(), rq.itr_exhausted), ("\u{1}", "", true));
    let reads: Vec<KvRead> = (0..60)
        .map(|i| KvRead { key: keys[i].clone(), version: Some(Version { block_num: 1, tx_num: i as u64 }) })
        .collect();
    let leaf =
        |r: &[KvRead]| Bytes::copy_from_slice(&Sha256::digest(QueryReads { kv_reads: r.to_vec() }.encode_to_vec()));
    match &rq.reads_info {
        Some(ReadsInfo::ReadsMerkleHashes(m)) => {
            assert_eq!((m.max_degree, m.max_level), (MAX_DEGREE as u32, 1));
            assert_eq!(m.max_level_hashes, vec![leaf(&reads[..51]), leaf(&reads[51..])]);
        }
        other => panic!("expected a Merkle summary, got {other:?}"),
    }
}

#[test]
fn reads_see_the_committed_state_not_the_transactions_own_writes() {
    let state = WorldState::new();
    put(&state, 1, &[("transfer", "a", "10")]);
    let view = state.view();
    let acl = AllowAll;
    let mut ctx = TxContext::new(&view, "mychannel", "tx", "transfer", Bytes::new(), &acl);
    ctx.put_state("b", "5").unwrap();
    assert_eq!(ctx.get_state("b"), None);
    ctx.del_state("a").unwrap();
    assert_eq!(ctx.get_state("a"), Some(b("10")));
    assert!(ctx.put_state("", "x").is_err());
    let sim = ctx.finish();
    let kv = kv_of(&sim, "transfer");
    assert_eq!(
        kv.reads.iter().map(|r| (r.key.as_str(), r.version)).collect::<Vec<_>>(),
        vec![("a", Some(Version { block_num: 1, tx_num: 0 })), ("b", None)]
    );
    assert!(kv.writes[0].is_delete && kv.writes[0].key == "a");
    assert_eq!((kv.writes[1].key.as_str(), kv.writes[1].value.as_ref()), ("b", b"5".as_slice()));
}

#[test]
fn transfer_refuses_what_it_cannot_do_and_records_nothing_written() {
    let state = WorldState::new();
    put(&state, 1, &[("transfer", "a", "10"), ("transfer", "b", "0")]);
    let (r, sim) = run(&state, "transfer", &Transfer, &args(&[b"transfer", b"a", b"b", b"11"]));
    assert_eq!(r.status, 500);
    assert!(r.message.contains("insufficient funds"), "{}", r.message);
    assert!(kv_of(&sim, "transfer").writes.is_empty());
    let (r, _) = run(&state, "transfer", &Transfer, &args(&[b"open", b"a", b"1"]));
    assert_eq!((r.status, r.message.as_str()), (500, "account a already exists"));
    let (r, _) = run(&state, "transfer", &Transfer, &args(&[b"nosuch"]));
    assert_eq!(r.status, 500);
}

#[test]
fn interest_carries_key_level_policies_of_written_keys() {
    let state = WorldState::new();
    let policy = SignaturePolicyEnvelope { version: 7, ..Default::default() };
    let mut batch = UpdateBatch::new();
    batch.put(
        StateKey::public("kv", b("guarded")),
        Update::Put(VersionedValue {
            value: b("1"),
            metadata: vec![("VALIDATION_PARAMETER".into(), Bytes::from(policy.encode_to_vec()))],
            version: Height::new(1, 0),
        }),
    );
    state.apply(1, &batch);
    let (_, sim) = run(&state, "kv", &Kv, &args(&[b"put", b"guarded", b"2"]));
    let calls = sim.interest.chaincodes;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "kv");
    assert_eq!(calls[0].key_policies, vec![policy]);
    assert!(calls[0].disregard_namespace_policy);
    let (_, sim) = run(&state, "kv", &Kv, &args(&[b"put", b"free", b"2"]));
    let calls = sim.interest.chaincodes;
    assert_eq!((calls.len(), calls[0].key_policies.len(), calls[0].disregard_namespace_policy), (1, 0, false));
}

// ---- _lifecycle -------------------------------------------------------------------------------------------------

struct Channel {
    config: Arc<ChannelConfig>,
    state: WorldState,
    height: u64,
}

impl Channel {
    fn new() -> Channel {
        let net = Network::generate(11).unwrap();
        let block = Block::decode(net.genesis_block()).unwrap();
        let config = Arc::new(ChannelConfig::from_config_block(&block).unwrap());
        let state = WorldState::new();
        state.apply(0, &UpdateBatch::new());
        Channel { config, state, height: 0 }
    }

    /// Runs a `_lifecycle` function as a peer of `org`.
    fn invoke(&self, org: &str, function: &str, input: Vec<u8>) -> (Response, Simulation) {
        let lc = Lifecycle::new(org, self.config.clone());
        run(&self.state, "_lifecycle", &lc, &[b(function), Bytes::from(input)])
    }

    /// Commits a simulation's public and hashed writes as the next block (tx 0).
    fn commit(&mut self, sim: &Simulation) {
        self.height += 1;
        let h = Height::new(self.height, 0);
        let mut batch = UpdateBatch::new();
        let tx = TxReadWriteSet::decode(sim.results.clone()).unwrap();
        for ns in tx.ns_rwset {
            let kv = KvrwSet::decode(ns.rwset.clone()).unwrap();
            for w in kv.writes {
                let key = StateKey::public(&ns.namespace, b(&w.key));
                let u = if w.is_delete {
                    Update::Delete(h)
                } else {
                    Update::Put(VersionedValue { value: w.value, metadata: Vec::new(), version: h })
                };
                batch.put(key, u);
            }
            for c in ns.collection_hashed_rwset {
                let hashed = HashedRwSet::decode(c.hashed_rwset).unwrap();
                for w in hashed.hashed_writes {
                    let key = StateKey::hashed(&ns.namespace, &c.collection_name, w.key_hash);
                    batch.put(
                        key,
                        Update::Put(VersionedValue { value: w.value_hash, metadata: Vec::new(), version: h }),
                    );
                }
            }
        }
        self.state.apply(self.height, &batch);
    }
}

fn approve(seq: i64, version: &str) -> Vec<u8> {
    ApproveChaincodeDefinitionForMyOrgArgs {
        sequence: seq,
        name: "cc".into(),
        version: version.into(),
        source: Some(ChaincodeSource {
            r#type: Some(chaincode_source::Type::LocalPackage(chaincode_source::Local { package_id: "cc:1".into() })),
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

fn commit_args(seq: i64, version: &str) -> Vec<u8> {
    CommitChaincodeDefinitionArgs { sequence: seq, name: "cc".into(), version: version.into(), ..Default::default() }
        .encode_to_vec()
}

fn hashed_writes(sim: &Simulation) -> usize {
    let tx = TxReadWriteSet::decode(sim.results.clone()).unwrap();
    tx.ns_rwset
        .iter()
        .flat_map(|n| n.collection_hashed_rwset.iter())
        .map(|c| HashedRwSet::decode(c.hashed_rwset.clone()).unwrap().hashed_writes.len())
        .sum()
}

#[test]
fn lifecycle_enforces_sequences_approvals_and_redefinition_rules() {
    let mut ch = Channel::new();
    let fail = |r: &Response| format!("{} {}", r.status, r.message);

    let (r, _) = ch.invoke("Org1MSP", "ApproveChaincodeDefinitionForMyOrg", approve(2, "1.0"));
    assert_eq!(fail(&r), "500 failed to invoke backing implementation of 'ApproveChaincodeDefinitionForMyOrg': requested sequence 2 is larger than the next available sequence number 1");
    let (r, _) = ch.invoke("Org1MSP", "ApproveChaincodeDefinitionForMyOrg", {
        let mut a = ApproveChaincodeDefinitionForMyOrgArgs::decode(approve(1, "1.0").as_slice()).unwrap();
        a.name = "a--b".into();
        a.encode_to_vec()
    });
    assert!(
        r.message.contains("error validating chaincode definition: invalid chaincode name 'a--b'"),
        "{}",
        r.message
    );
    let (r, _) = ch.invoke("Org1MSP", "NoSuchFunction", Vec::new());
    assert_eq!(fail(&r), "500 failed to invoke backing implementation of 'NoSuchFunction': receiver *lifecycle.Invocation.NoSuchFunction does not exist");

    // Org1 approves: 6 private writes (3 parameter fields, their metadata, package ID, its metadata).
    let (r, sim) = ch.invoke("Org1MSP", "ApproveChaincodeDefinitionForMyOrg", approve(1, "1.0"));
    assert_eq!(r.status, 200, "{}", r.message);
    assert_eq!(hashed_writes(&sim), 6);
    assert!(sim.private.is_some());
    ch.commit(&sim);

    // The same approval again is refused; a changed one rewrites only the changed field.
    let (r, _) = ch.invoke("Org1MSP", "ApproveChaincodeDefinitionForMyOrg", approve(1, "1.0"));
    assert_eq!(fail(&r), "500 failed to invoke backing implementation of 'ApproveChaincodeDefinitionForMyOrg': attempted to redefine uncommitted sequence (1) for namespace cc with unchanged content");
    let (r, sim) = ch.invoke("Org1MSP", "ApproveChaincodeDefinitionForMyOrg", approve(1, "1.1"));
    assert_eq!(r.status, 200, "{}", r.message);
    assert_eq!(hashed_writes(&sim), 1);
    ch.commit(&sim);

    // Readiness reflects approvals by hash; a wrong sequence is refused.
    let check = |seq: i64, version: &str| {
        CheckCommitReadinessArgs { sequence: seq, name: "cc".into(), version: version.into(), ..Default::default() }
            .encode_to_vec()
    };
    let (r, _) = ch.invoke("Org2MSP", "CheckCommitReadiness", check(1, "1.1"));
    let approvals = CheckCommitReadinessResult::decode(r.payload).unwrap().approvals;
    assert_eq!((approvals["Org1MSP"], approvals["Org2MSP"]), (true, false));
    let (r, _) = ch.invoke("Org2MSP", "CheckCommitReadiness", check(1, "1.0"));
    let approvals = CheckCommitReadinessResult::decode(r.payload).unwrap().approvals;
    assert!(!approvals["Org1MSP"]);
    let (r, _) = ch.invoke("Org1MSP", "CheckCommitReadiness", check(3, "1.1"));
    assert!(r.message.ends_with("requested sequence is 3, but new definition must be sequence 1"), "{}", r.message);

    // Org2's peer will not endorse a commit its org did not approve.
    let (r, _) = ch.invoke("Org2MSP", "CommitChaincodeDefinition", commit_args(1, "1.1"));
    assert!(r.message.ends_with("chaincode definition not agreed to by this org (Org2MSP)"), "{}", r.message);
    let (r, sim) = ch.invoke("Org1MSP", "CommitChaincodeDefinition", commit_args(1, "1.1"));
    assert_eq!(r.status, 200, "{}", r.message);
    assert_eq!(kv_of(&sim, "_lifecycle").writes.len(), 5);
    ch.commit(&sim);

    // Endorsement info: defined and approved by Org1; Org2 never approved.
    let view = ch.state.view();
    let acl = AllowAll;
    let mut ctx = TxContext::new(&view, "mychannel", "tx", "cc", Bytes::new(), &acl);
    let info = endorsement_info(&mut ctx, &ch.config, "Org1MSP", "cc", Installed::Builtin(true)).unwrap();
    assert_eq!((info.version.as_str(), info.endorsement_plugin.as_str()), ("1.1", "escc"));
    let e = endorsement_info(&mut ctx, &ch.config, "Org1MSP", "cc", Installed::Builtin(false)).unwrap_err();
    assert_eq!(e.to_string(), "chaincode definition for 'cc' exists, but chaincode is not installed");
    let e = endorsement_info(&mut ctx, &ch.config, "Org2MSP", "cc", Installed::Builtin(true)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "chaincode definition for 'cc' at sequence 1 on channel 'mychannel' has not yet been approved by this org"
    );
    let e = endorsement_info(&mut ctx, &ch.config, "Org1MSP", "other", Installed::Builtin(true)).unwrap_err();
    assert_eq!(e.to_string(), "chaincode other not found");
    let sim = ctx.finish();
    // The definition's sequence and the legacy lookup were read through the simulation, as Fabric records them.
    let reads: BTreeMap<String, Option<Version>> =
        kv_of(&sim, "_lifecycle").reads.into_iter().map(|r| (r.key, r.version)).collect();
    assert_eq!(reads["namespaces/fields/cc/Sequence"], Some(Version { block_num: 3, tx_num: 0 }));
    assert_eq!(kv_of(&sim, "lscc").reads[0].key, "other");
    drop(view);

    // Querying: the definition with approvals; an unknown name is a 404.
    let q = |name: &str| QueryChaincodeDefinitionArgs { name: name.into() }.encode_to_vec();
    let (r, _) = ch.invoke("Org2MSP", "QueryChaincodeDefinition", q("cc"));
    assert_eq!(r.status, 200);
    let (r, _) = ch.invoke("Org2MSP", "QueryChaincodeDefinition", q("nosuch"));
    assert_eq!(fail(&r), "404 namespace nosuch is not defined");

    // Sequence 2 with a new version: Org1 approves, commit rewrites only the fields that changed.
    let (r, sim) = ch.invoke("Org1MSP", "ApproveChaincodeDefinitionForMyOrg", approve(2, "2.0"));
    assert_eq!(r.status, 200, "{}", r.message);
    ch.commit(&sim);
    let (r, sim) = ch.invoke("Org1MSP", "CommitChaincodeDefinition", commit_args(2, "2.0"));
    assert_eq!(r.status, 200, "{}", r.message);
    let written: Vec<String> = kv_of(&sim, "_lifecycle").writes.into_iter().map(|w| w.key).collect();
    assert_eq!(written, ["namespaces/fields/cc/EndorsementInfo", "namespaces/fields/cc/Sequence"]);
}
