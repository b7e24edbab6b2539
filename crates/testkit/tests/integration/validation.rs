//! Generated network + built transactions/blocks checked with the real
//! ferrofabric MSP and policy implementations against the re-keyed channel
//! configuration.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support::*;
use bytes::Bytes;
use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_msp::{Msp, MspManager, SigningIdentity};
use ferrofabric_protos::common::{
    msp_principal, msp_role, Block, ChannelHeader, Envelope, Metadata, MspPrincipal, MspRole, Payload, SignatureHeader,
};
use ferrofabric_protos::peer::{ChaincodeActionPayload, Transaction};
use ferrofabric_protoutil::block_header_bytes;
use ferrofabric_testkit::{
    channel_policy_reference, define_chaincode, BlockBuilder, Chain, Network, TxBuilder, Workload,
    DEFAULT_ENDORSEMENT_POLICY, ORDERER_ORG, SIGNATURES,
};
use prost::Message;

fn channel_config(net: &Network) -> ChannelConfig {
    ChannelConfig::from_config_block(&Block::decode(net.genesis_block()).unwrap()).unwrap()
}

/// The creator's signed item and the endorsements' signed items of an envelope.
fn signed_items(envelope: &Bytes) -> (SignedData, Vec<SignedData>) {
    let env = Envelope::decode(envelope.clone()).unwrap();
    let payload = Payload::decode(env.payload.clone()).unwrap();
    let sh = SignatureHeader::decode(payload.header.as_ref().unwrap().signature_header.clone()).unwrap();
    let creator = SignedData { data: env.payload.clone(), identity: sh.creator, signature: env.signature };
    let tx = Transaction::decode(payload.data).unwrap();
    let cap = ChaincodeActionPayload::decode(tx.actions[0].payload.clone()).unwrap();
    let action = cap.action.unwrap();
    let endorsements = action
        .endorsements
        .iter()
        .map(|e| SignedData {
            data: Bytes::from([action.proposal_response_payload.as_ref(), e.endorser.as_ref()].concat()),
            identity: e.endorser.clone(),
            signature: e.signature.clone(),
        })
        .collect();
    (creator, endorsements)
}

fn satisfies(cfg: &ChannelConfig, path: &str, items: Vec<SignedData>) -> bool {
    let policy = cfg.policy(path).unwrap_or_else(|| panic!("no policy {path}"));
    policy.evaluate(&SignatureSet::new(items, cfg.msp_manager())).is_ok()
}

fn role(mspid: &str, role: msp_role::MspRoleType) -> MspPrincipal {
    MspPrincipal {
        principal_classification: msp_principal::Classification::Role as i32,
        principal: Bytes::from(MspRole { msp_identifier: mspid.to_string(), role: role as i32 }.encode_to_vec()),
    }
}

#[test]
fn patched_genesis_loads_and_every_identity_validates_with_its_node_ou() {
    use msp_role::MspRoleType::{Admin, Client, Orderer, Peer};
    let net = network();
    let cfg = channel_config(net);
    assert_eq!(cfg.channel_id(), "mychannel");
    let msps = cfg.msp_manager();
    let cases = [
        (net.peer(0), Peer),
        (net.peer(1), Peer),
        (net.client(0), Client),
        (net.client(1), Client),
        (net.admin(0), Admin),
        (net.admin(1), Admin),
        (net.admin(ORDERER_ORG), Admin),
        (net.orderer(), Orderer),
    ];
    for (signer, expected) in cases {
        let id = msps.deserialize_identity(signer.serialized()).unwrap();
        id.validate().unwrap_or_else(|e| panic!("{}: {e}", signer.mspid()));
        id.verify(b"hello", &signer.sign(b"hello")).unwrap();
        for r in [Peer, Client, Admin, Orderer] {
            let ok = msps.satisfies_principal(&id, &role(signer.mspid(), r)).is_ok();
            assert_eq!(ok, r == expected, "{} as {r:?}", signer.mspid());
        }
        // A member of one org is nobody in another.
        let other = if signer.mspid() == "Org1MSP" { "Org2MSP" } else { "Org1MSP" };
        assert!(msps.satisfies_principal(&id, &role(other, msp_role::MspRoleType::Member)).is_err());
    }
}

#[test]
fn endorsement_policy_needs_both_peers() {
    let net = network();
    let cfg = channel_config(net);
    const ENDORSEMENT: &str = "/Channel/Application/Endorsement";
    let tx = |b: TxBuilder| b.chaincode("transfer", "1.0").write("transfer", "k", "v").build().unwrap();

    let (creator, both) = signed_items(&tx(TxBuilder::new(net)).envelope);
    assert!(satisfies(&cfg, ENDORSEMENT, both.clone()));
    assert!(satisfies(&cfg, "/Channel/Application/Writers", vec![creator.clone()]));
    assert!(satisfies(&cfg, "/Channel/Writers", vec![creator]));
    assert!(!satisfies(&cfg, ENDORSEMENT, both[..1].to_vec()));
    assert!(!satisfies(&cfg, ENDORSEMENT, both[1..].to_vec()));

    let (_, same_org) = signed_items(&tx(TxBuilder::new(net).endorsers(&[net.peer(0), net.peer(0)])).envelope);
    assert!(!satisfies(&cfg, ENDORSEMENT, same_org));

    let (_, clients) = signed_items(&tx(TxBuilder::new(net).endorsers(&[net.client(0), net.client(1)])).envelope);
    assert!(!satisfies(&cfg, ENDORSEMENT, clients));

    let (creator, corrupted) = signed_items(&tx(TxBuilder::new(net).corrupt_endorsement(1)).envelope);
    assert!(!satisfies(&cfg, ENDORSEMENT, corrupted));
    let msps = cfg.msp_manager();
    let id = msps.deserialize_identity(&creator.identity).unwrap();
    id.verify(&creator.data, &creator.signature).unwrap();

    let (bad_creator, _) = signed_items(&tx(TxBuilder::new(net).corrupt_creator_signature()).envelope);
    assert!(!satisfies(&cfg, "/Channel/Application/Writers", vec![bad_creator]));

    // Peers may not write (Writers = admin or client).
    let (peer_creator, _) = signed_items(&tx(TxBuilder::new(net).creator(net.peer(0))).envelope);
    assert!(!satisfies(&cfg, "/Channel/Application/Writers", vec![peer_creator]));
}

#[test]
fn lifecycle_commit_satisfies_lifecycle_endorsement() {
    let net = network();
    let cfg = channel_config(net);
    let built = define_chaincode(net, "transfer", 1, channel_policy_reference(DEFAULT_ENDORSEMENT_POLICY)).unwrap();
    let (creator, endorsements) = signed_items(&built.envelope);
    assert!(satisfies(&cfg, "/Channel/Application/LifecycleEndorsement", endorsements.clone()));
    assert!(!satisfies(&cfg, "/Channel/Application/LifecycleEndorsement", endorsements[..1].to_vec()));
    assert!(satisfies(&cfg, "/Channel/Application/Writers", vec![creator]));
}

fn block_signatures(block: &Block) -> Vec<SignedData> {
    let meta = Metadata::decode(block.metadata.as_ref().unwrap().metadata[SIGNATURES].clone()).unwrap();
    let header = block_header_bytes(block.header.as_ref().unwrap());
    meta.signatures
        .iter()
        .map(|s| SignedData {
            data: Bytes::from([meta.value.as_ref(), s.signature_header.as_ref(), &header].concat()),
            identity: SignatureHeader::decode(s.signature_header.clone()).unwrap().creator,
            signature: s.signature.clone(),
        })
        .collect()
}

#[test]
fn block_signature_satisfies_block_validation() {
    let net = network();
    let cfg = channel_config(net);
    const BLOCK_VALIDATION: &str = "/Channel/Orderer/BlockValidation";
    let w = Workload::new(net, 3).definition_version((1, 0));
    let mut chain = Chain::new(net).unwrap();
    let txs: Vec<Bytes> = w.transfer_txs(3, 8, |_| Some((1, 0))).unwrap().into_iter().map(|b| b.envelope).collect();
    let block = chain.append(&txs).clone();
    assert!(satisfies(&cfg, BLOCK_VALIDATION, block_signatures(&block)));

    let prev = block.header.as_ref();
    let corrupted = BlockBuilder::new(net.orderer(), prev).corrupt_signature().build(&txs);
    assert!(!satisfies(&cfg, BLOCK_VALIDATION, block_signatures(&corrupted)));
    let by_peer = BlockBuilder::new(net.peer(0), prev).build(&txs);
    assert!(!satisfies(&cfg, BLOCK_VALIDATION, block_signatures(&by_peer)));
    // Changing the header after signing breaks the signature.
    let mut moved = BlockBuilder::new(net.orderer(), prev).build(&txs);
    moved.header.as_mut().unwrap().number += 1;
    assert!(!satisfies(&cfg, BLOCK_VALIDATION, block_signatures(&moved)));

    // Transactions in the block verify too.
    for env in &txs {
        let (creator, endorsements) = signed_items(env);
        assert!(satisfies(&cfg, "/Channel/Application/Endorsement", endorsements));
        assert!(satisfies(&cfg, "/Channel/Application/Writers", vec![creator]));
        let ch = ChannelHeader::decode(
            Payload::decode(Envelope::decode(env.clone()).unwrap().payload).unwrap().header.unwrap().channel_header,
        )
        .unwrap();
        assert_eq!(ch.channel_id, "mychannel");
    }
}

/// The directories written for daemons load with the MSP crate and give
/// the same identities as the in-memory network.
#[test]
fn msp_dirs_load_with_msp_crate() {
    let net = network();
    let dir = std::env::temp_dir().join(format!("ferrofabric-testkit-val-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    net.write_msp_dirs(&dir).unwrap();
    let peer_org = dir.join("peerOrganizations/org1.example.com");
    let peer = SigningIdentity::from_msp_dir("Org1MSP", &peer_org.join("peers/peer0.org1.example.com/msp")).unwrap();
    assert_eq!(peer.serialized(), net.peer(0).serialized());
    assert_eq!(peer.sign_deterministic(b"x"), net.peer(0).sign_deterministic(b"x"));
    let orderer = SigningIdentity::from_msp_dir(
        "OrdererMSP",
        &dir.join("ordererOrganizations/example.com/orderers/orderer.example.com/msp"),
    )
    .unwrap();
    assert_eq!(orderer.serialized(), net.orderer().serialized());

    let msps = MspManager::new(vec![
        Msp::from_msp_dir("Org1MSP", &peer_org.join("msp")).unwrap(),
        Msp::from_msp_dir("Org2MSP", &dir.join("peerOrganizations/org2.example.com/msp")).unwrap(),
    ]);
    for signer in [net.peer(0), net.client(1), net.admin(0)] {
        msps.deserialize_identity(signer.serialized()).unwrap().validate().unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
