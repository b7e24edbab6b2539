//! TxBuilder / define_chaincode output compared byte-for-byte with the
//! transactions a real Fabric 2.5.16 client and peers produced (fixture
//! ledger), plus signature checks.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support::*;
use bytes::Bytes;
use ferrofabric_protos::common::{ChannelHeader, Envelope, Payload, SignatureHeader};
use ferrofabric_protos::kvrwset::{range_query_info, KvrwSet};
use ferrofabric_protos::msp::SerializedIdentity;
use ferrofabric_protos::peer::{
    ChaincodeAction, ChaincodeActionPayload, ChaincodeInvocationSpec, ChaincodeProposalPayload,
    ProposalResponsePayload, Transaction,
};
use ferrofabric_protos::rwset::TxReadWriteSet;
use ferrofabric_testkit::fabric_fixture;
use ferrofabric_testkit::{
    channel_policy_reference, commit_definition, define_chaincode, ChaincodeDefinition, SigningIdentity, TxBuilder,
    DEFAULT_ENDORSEMENT_POLICY,
};
use p256::ecdsa::signature::Verifier;
use prost::Message;
use sha2::{Digest, Sha256};

/// Every layer of an endorser transaction envelope.
struct Decoded {
    envelope: Envelope,
    payload: Payload,
    ch: ChannelHeader,
    sh: SignatureHeader,
    tx: Transaction,
    cap: ChaincodeActionPayload,
    prp: ProposalResponsePayload,
    action: ChaincodeAction,
}

fn decode(env: &Bytes) -> Option<Decoded> {
    let envelope = Envelope::decode(env.clone()).ok()?;
    let payload = Payload::decode(envelope.payload.clone()).ok()?;
    let h = payload.header.clone()?;
    let ch = ChannelHeader::decode(h.channel_header).ok()?;
    let sh = SignatureHeader::decode(h.signature_header).ok()?;
    let tx = Transaction::decode(payload.data.clone()).ok()?;
    let cap = ChaincodeActionPayload::decode(tx.actions.first()?.payload.clone()).ok()?;
    let prp = ProposalResponsePayload::decode(cap.action.as_ref()?.proposal_response_payload.clone()).ok()?;
    let action = ChaincodeAction::decode(prp.extension.clone()).ok()?;
    Some(Decoded { envelope, payload, ch, sh, tx, cap, prp, action })
}

fn verify(identity: &Bytes, msg: &[u8], sig: &[u8]) -> bool {
    let sid = SerializedIdentity::decode(identity.clone()).unwrap();
    let cert = <x509_cert::Certificate as der::DecodePem>::from_pem(&sid.id_bytes).unwrap();
    let point = cert.tbs_certificate.subject_public_key_info.subject_public_key.raw_bytes().to_vec();
    let vk = p256::ecdsa::VerifyingKey::from_sec1_bytes(&point).unwrap();
    let Ok(sig) = p256::ecdsa::Signature::from_der(sig) else {
        return false;
    };
    vk.verify(msg, &sig).is_ok()
}

fn fixture_user1() -> SigningIdentity {
    let msp = fabric_fixture("crypto/peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
    let cert = std::fs::read(msp.join("signcerts/User1@org1.example.com-cert.pem")).unwrap();
    let key = std::fs::read(msp.join("keystore/priv_sk")).unwrap();
    SigningIdentity::from_pem("Org1MSP", &cert, &key).unwrap()
}

fn ver(v: &Option<ferrofabric_protos::kvrwset::Version>) -> Option<(u64, u64)> {
    v.map(|v| (v.block_num, v.tx_num))
}

/// Re-creates a fixture transaction through TxBuilder from its decoded
/// contents (creator = the fixture's own User1 key) and checks that channel
/// header, signature header, proposal payload and proposal response payload
/// are byte-identical, i.e. that the builder assembles and orders everything
/// as Fabric's client and peers do. Covers every parseable User1 transaction
/// of the ledger (smallbank and transfer: reads, writes, deletes, range
/// queries, absent-key reads, crafted txid/epoch/header-type variants).
#[test]
fn builder_reproduces_every_fixture_user1_transaction() {
    let net = network();
    let user1 = fixture_user1();
    let mut compared = 0;
    let mut crafted = 0;
    for block in fixture_blocks().iter().skip(1) {
        for env in &block.data.as_ref().unwrap().data {
            let Some(d) = decode(env) else { continue };
            if d.sh.creator != *user1.serialized() {
                continue;
            }
            let cis = ChaincodeInvocationSpec::decode(
                ChaincodeProposalPayload::decode(d.cap.chaincode_proposal_payload.clone()).unwrap().input,
            )
            .unwrap();
            let spec = cis.chaincode_spec.unwrap();
            let cc = d.action.chaincode_id.clone().unwrap();
            let ts = d.ch.timestamp.unwrap();
            let mut b = TxBuilder::new(net)
                .creator(&user1)
                .chaincode(&cc.name, &cc.version)
                .args(spec.input.unwrap().args)
                .nonce(d.sh.nonce.clone())
                .timestamp(ts.seconds, ts.nanos)
                .tx_id(d.ch.tx_id.clone())
                .epoch(d.ch.epoch)
                .header_type(d.ch.r#type)
                .channel(d.ch.channel_id.clone());
            let resp = d.action.response.clone().unwrap();
            b = b.response(resp.status, &resp.message, &resp.payload);
            if !d.action.events.is_empty() {
                let ev = ferrofabric_protos::peer::ChaincodeEvent::decode(d.action.events.clone()).unwrap();
                b = b.chaincode_event(&ev.event_name, &ev.payload);
            }
            // The crafted envelopes of block 18 had their channel header edited
            // after endorsement, so their proposal hash is the original one.
            let h = d.payload.header.as_ref().unwrap();
            let honest = Sha256::digest(
                [h.channel_header.as_ref(), h.signature_header.as_ref(), d.cap.chaincode_proposal_payload.as_ref()]
                    .concat(),
            );
            if d.prp.proposal_hash.as_ref() != honest.as_slice() {
                b = b.proposal_hash(d.prp.proposal_hash.clone());
                crafted += 1;
            }
            let rws = TxReadWriteSet::decode(d.action.results.clone()).unwrap();
            for ns in &rws.ns_rwset {
                assert!(ns.collection_hashed_rwset.is_empty());
                let kv = KvrwSet::decode(ns.rwset.clone()).unwrap();
                for r in &kv.reads {
                    b = b.read(&ns.namespace, &r.key, ver(&r.version));
                }
                for w in &kv.writes {
                    b = if w.is_delete {
                        b.delete(&ns.namespace, &w.key)
                    } else {
                        b.write(&ns.namespace, &w.key, &w.value)
                    };
                }
                for q in &kv.range_queries_info {
                    let Some(range_query_info::ReadsInfo::RawReads(raw)) = &q.reads_info else {
                        panic!("merkle summary in fixture")
                    };
                    let reads: Vec<_> = raw.kv_reads.iter().map(|r| (r.key.as_str(), ver(&r.version))).collect();
                    b = b.range_query(&ns.namespace, &q.start_key, &q.end_key, q.itr_exhausted, &reads);
                }
                assert!(kv.metadata_writes.is_empty());
            }
            let built = decode(&b.build().unwrap().envelope).unwrap();
            let h = d.payload.header.as_ref().unwrap();
            let bh = built.payload.header.as_ref().unwrap();
            assert_eq!(bh.channel_header, h.channel_header, "tx {}", d.ch.tx_id);
            assert_eq!(bh.signature_header, h.signature_header, "tx {}", d.ch.tx_id);
            assert_eq!(built.tx.actions[0].header, d.tx.actions[0].header);
            assert_eq!(built.cap.chaincode_proposal_payload, d.cap.chaincode_proposal_payload, "tx {}", d.ch.tx_id);
            assert_eq!(
                built.cap.action.as_ref().unwrap().proposal_response_payload,
                d.cap.action.as_ref().unwrap().proposal_response_payload,
                "tx {}",
                d.ch.tx_id
            );
            compared += 1;
        }
    }
    // 735 txs minus the lifecycle/CLI ones and the unparseable one.
    assert!(compared > 700, "only {compared} fixture transactions compared");
    // Bad txid, epoch 1, type MESSAGE (the duplicate re-broadcasts reuse one of them).
    assert!((3..=5).contains(&crafted), "{crafted} crafted transactions");
}

/// Fabric's txid rule, proposal hash rule, envelope and endorsement
/// signatures, on a freshly built transaction.
#[test]
fn built_tx_has_fabric_txid_hash_and_valid_signatures() {
    let net = network();
    let built = TxBuilder::new(net)
        .chaincode("transfer", "1.0")
        .args(["transfer", "a", "b", "1"])
        .read("transfer", "a", Some((4, 2)))
        .read("transfer", "b", None)
        .write("transfer", "a", "9")
        .write("transfer", "b", "1")
        .build()
        .unwrap();
    let d = decode(&built.envelope).unwrap();
    assert_eq!(d.sh.nonce.len(), 24);
    assert_eq!(d.sh.creator, *net.client(0).serialized());
    let expected_txid = hex::encode(Sha256::digest([d.sh.nonce.as_ref(), d.sh.creator.as_ref()].concat()));
    assert_eq!(d.ch.tx_id, expected_txid);
    assert_eq!(built.tx_id, expected_txid);
    assert_eq!(ferrofabric_protoutil::compute_txid(&d.sh.nonce, &d.sh.creator), expected_txid);
    assert_eq!((d.ch.r#type, d.ch.version, d.ch.epoch), (3, 0, 0));
    assert_eq!(d.ch.channel_id, "mychannel");

    let h = d.payload.header.as_ref().unwrap();
    let hash = Sha256::digest(
        [h.channel_header.as_ref(), h.signature_header.as_ref(), d.cap.chaincode_proposal_payload.as_ref()].concat(),
    );
    assert_eq!(d.prp.proposal_hash.as_ref(), hash.as_slice());
    assert_eq!(d.action.response.as_ref().unwrap().status, 200);

    assert!(verify(&d.sh.creator, &d.envelope.payload, &d.envelope.signature));
    let action = d.cap.action.as_ref().unwrap();
    assert_eq!(action.endorsements.len(), 2);
    for (e, peer) in action.endorsements.iter().zip([net.peer(0), net.peer(1)]) {
        assert_eq!(e.endorser, *peer.serialized());
        let msg = [action.proposal_response_payload.as_ref(), e.endorser.as_ref()].concat();
        assert!(verify(&e.endorser, &msg, &e.signature));
    }
}

#[test]
fn tampering_knobs_break_exactly_what_they_name() {
    let net = network();
    let base = || {
        TxBuilder::new(net)
            .chaincode("transfer", "1.0")
            .write("transfer", "k", "v")
            .nonce(vec![7u8; 24])
            .timestamp(1, 2)
    };
    let good = decode(&base().build().unwrap().envelope).unwrap();

    let d = decode(&base().corrupt_creator_signature().build().unwrap().envelope).unwrap();
    assert!(!verify(&d.sh.creator, &d.envelope.payload, &d.envelope.signature));
    assert_eq!(d.envelope.payload, good.envelope.payload);

    let d = decode(&base().corrupt_endorsement(1).build().unwrap().envelope).unwrap();
    let a = d.cap.action.as_ref().unwrap();
    let ok = |i: usize| {
        let e = &a.endorsements[i];
        verify(&e.endorser, &[a.proposal_response_payload.as_ref(), e.endorser.as_ref()].concat(), &e.signature)
    };
    assert!(ok(0));
    assert!(!ok(1));
    assert!(verify(&d.sh.creator, &d.envelope.payload, &d.envelope.signature));

    let d = decode(&base().drop_endorsements().build().unwrap().envelope).unwrap();
    assert!(d.cap.action.as_ref().unwrap().endorsements.is_empty());

    let d = decode(&base().endorsers(&[net.peer(1)]).build().unwrap().envelope).unwrap();
    assert_eq!(d.cap.action.as_ref().unwrap().endorsements.len(), 1);

    let b = base().tx_id("not-the-hash").build().unwrap();
    assert_eq!(b.tx_id, "not-the-hash");
    assert_eq!(decode(&b.envelope).unwrap().ch.tx_id, "not-the-hash");

    let d = decode(&base().epoch(1).header_type(0).channel("other").build().unwrap().envelope).unwrap();
    assert_eq!((d.ch.epoch, d.ch.r#type, d.ch.channel_id.as_str()), (1, 0, "other"));

    let d = decode(&base().proposal_hash(vec![1u8; 32]).build().unwrap().envelope).unwrap();
    assert_eq!(d.prp.proposal_hash.as_ref(), &[1u8; 32]);

    let raw = base().payload_data(vec![0xff, 0xff]).build().unwrap();
    let env = Envelope::decode(raw.envelope).unwrap();
    let payload = Payload::decode(env.payload.clone()).unwrap();
    assert_eq!(payload.data.as_ref(), &[0xff, 0xff]);
    assert!(Transaction::decode(payload.data).is_err());
    let creator = SignatureHeader::decode(payload.header.unwrap().signature_header).unwrap().creator;
    assert!(verify(&creator, &env.payload, &env.signature));

    assert!(TxBuilder::new(net).build().is_err(), "no chaincode set");
}

#[test]
fn private_data_metadata_and_events_are_encoded() {
    let net = network();
    let b = TxBuilder::new(net)
        .chaincode("cc", "2.0")
        .hashed_read("cc", "collB", "p1", Some((2, 3)))
        .hashed_write("cc", "collA", "p2", "secret")
        .hashed_delete("cc", "collA", "p0")
        .metadata_write("cc", "k", &[("VALIDATION_PARAMETER", b"pol")])
        .chaincode_event("evt", "data")
        .response(201, "created", "ok")
        .build()
        .unwrap();
    let d = decode(&b.envelope).unwrap();
    let rws = TxReadWriteSet::decode(d.action.results.clone()).unwrap();
    assert_eq!(rws.ns_rwset.len(), 1);
    let ns = &rws.ns_rwset[0];
    let kv = KvrwSet::decode(ns.rwset.clone()).unwrap();
    assert_eq!(kv.metadata_writes[0].key, "k");
    assert_eq!(kv.metadata_writes[0].entries[0].name, "VALIDATION_PARAMETER");
    let names: Vec<_> = ns.collection_hashed_rwset.iter().map(|c| c.collection_name.as_str()).collect();
    assert_eq!(names, ["collA", "collB"]);
    let a =
        ferrofabric_protos::kvrwset::HashedRwSet::decode(ns.collection_hashed_rwset[0].hashed_rwset.clone()).unwrap();
    assert_eq!(a.hashed_writes.len(), 2);
    // Sorted by plaintext key: p0 (delete) before p2.
    assert_eq!(a.hashed_writes[0].key_hash.as_ref(), Sha256::digest(b"p0").as_slice());
    assert!(a.hashed_writes[0].is_delete && a.hashed_writes[0].value_hash.is_empty());
    assert_eq!(a.hashed_writes[1].value_hash.as_ref(), Sha256::digest(b"secret").as_slice());
    assert_eq!(ns.collection_hashed_rwset[0].pvt_rwset_hash.len(), 32);
    let coll_b = &ns.collection_hashed_rwset[1];
    assert!(coll_b.pvt_rwset_hash.is_empty());
    let bh = ferrofabric_protos::kvrwset::HashedRwSet::decode(coll_b.hashed_rwset.clone()).unwrap();
    assert_eq!(bh.hashed_reads[0].key_hash.as_ref(), Sha256::digest(b"p1").as_slice());
    let ev = ferrofabric_protos::peer::ChaincodeEvent::decode(d.action.events.clone()).unwrap();
    assert_eq!((ev.chaincode_id.as_str(), ev.event_name.as_str(), ev.tx_id.as_str()), ("cc", "evt", b.tx_id.as_str()));
    let resp = d.action.response.unwrap();
    assert_eq!((resp.status, resp.message.as_str(), resp.payload.as_ref()), (201, "created", b"ok".as_ref()));
}

/// The fixture commits `smallbank` in block 3 (approvals by Org1 in block
/// 1 and Org2 in block 2): our commit's ChaincodeAction (rw-set, response,
/// chaincode id) and invocation args are byte-identical to Fabric's.
#[test]
fn define_chaincode_matches_fixture_lifecycle_commit() {
    let net = network();
    let blocks = fixture_blocks();
    let fixture = decode(&blocks[3].data.as_ref().unwrap().data[0]).unwrap();
    let mut def = ChaincodeDefinition::new("smallbank", 1, channel_policy_reference(DEFAULT_ENDORSEMENT_POLICY));
    def.approvals = vec![("Org1MSP".into(), (1, 0)), ("Org2MSP".into(), (2, 0))];
    let ours = decode(&commit_definition(net, &def).unwrap().envelope).unwrap();
    assert_eq!(ours.prp.extension, fixture.prp.extension);
    assert_eq!(ours.ch.extension, fixture.ch.extension);
    assert_eq!(ours.cap.chaincode_proposal_payload, fixture.cap.chaincode_proposal_payload);

    // Shorthand: same writes, no approval reads; creator Org1 admin, both peers endorse.
    let short = decode(
        &define_chaincode(net, "smallbank", 1, channel_policy_reference(DEFAULT_ENDORSEMENT_POLICY)).unwrap().envelope,
    )
    .unwrap();
    let rws = TxReadWriteSet::decode(short.action.results.clone()).unwrap();
    let fix_rws = TxReadWriteSet::decode(fixture.action.results.clone()).unwrap();
    assert_eq!(rws.ns_rwset[0].rwset, fix_rws.ns_rwset[0].rwset);
    assert!(rws.ns_rwset[0].collection_hashed_rwset.is_empty());
    assert_eq!(rws.ns_rwset[1], fix_rws.ns_rwset[1]);
    assert_eq!(short.sh.creator, *net.admin(0).serialized());
    let endorsers: Vec<_> = short.cap.action.unwrap().endorsements.into_iter().map(|e| e.endorser).collect();
    assert_eq!(endorsers, vec![net.peer(0).serialized().clone(), net.peer(1).serialized().clone()]);
}
