//! The endorser over real gRPC on 127.0.0.1: two endorsers (peer0 of Org1 and of Org2, identities loaded from
//! cryptogen-layout MSP directories), proposals signed like a Fabric client's, transactions assembled from their
//! responses as `protoutil.CreateSignedTx` does, ordered into orderer-signed blocks and validated by
//! `ferrofabric-validator`; the validated blocks are fed back to the endorsers' replicas.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_endorser::{assemble_transaction, bind, create_proposal, serve, ClientProposal, Endorser, Replica};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{Block, BlockMetadataIndex};
use ferrofabric_protos::lifecycle::{
    chaincode_source, ApproveChaincodeDefinitionForMyOrgArgs, ChaincodeSource, CheckCommitReadinessArgs,
    CheckCommitReadinessResult, CommitChaincodeDefinitionArgs, QueryChaincodeDefinitionArgs,
    QueryChaincodeDefinitionResult,
};
use ferrofabric_protos::peer::endorser_client::EndorserClient;
use ferrofabric_protos::peer::{ChaincodeAction, ProposalResponse, ProposalResponsePayload, SignedProposal};
use ferrofabric_testkit::{BlockBuilder, Chain, Network};
use ferrofabric_validator::{TxValidationCode as Code, Validator, ValidatorOptions};
use prost::Message;
use tokio::sync::oneshot;
use tonic::transport::Channel;

const CHANNEL: &str = "mychannel";

/// Two endorsers serving on loopback, plus the ordering/validation side of the network.
struct Harness {
    net: Network,
    chain_blocks: Vec<Block>,
    validator: Validator,
    replicas: Vec<Arc<Replica>>,
    peers: Vec<SigningIdentity>,
    clients: Vec<EndorserClient<Channel>>,
    stops: Vec<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Harness {
    async fn start() -> Harness {
        let net = Network::generate(4242).unwrap();
        let dir = tempfile::tempdir().unwrap();
        net.write_msp_dirs(dir.path()).unwrap();
        let mut replicas = Vec::new();
        let mut peers = Vec::new();
        let mut clients = Vec::new();
        let mut stops = Vec::new();
        for org in 1..=2 {
            let msp =
                dir.path().join(format!("peerOrganizations/org{org}.example.com/peers/peer0.org{org}.example.com/msp"));
            let signer = SigningIdentity::from_msp_dir(&format!("Org{org}MSP"), &msp).unwrap();
            let replica = Arc::new(Replica::from_genesis(net.genesis_block()).unwrap());
            let endorser = Endorser::new(replica.clone(), signer.clone(), ferrofabric_chaincode::Registry::builtin());
            let (listener, addr) = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
            let (tx, rx) = oneshot::channel::<()>();
            tokio::spawn(serve(endorser, listener, async move {
                let _ = rx.await;
            }));
            clients.push(EndorserClient::connect(format!("http://{addr}")).await.unwrap());
            replicas.push(replica);
            peers.push(signer);
            stops.push(tx);
        }
        let validator = Validator::new(net.genesis_block(), ValidatorOptions { threads: 2 }).unwrap();
        let chain_blocks = Chain::new(&net).unwrap().into_blocks();
        Harness { net, chain_blocks, validator, replicas, peers, clients, stops, _dir: dir }
    }

    /// Orders `envelopes` into the next block, validates it and feeds the validated block to both replicas.
    fn commit(&mut self, envelopes: &[Bytes]) -> Vec<Code> {
        let prev = self.chain_blocks.last().unwrap().header.clone().unwrap();
        let block = BlockBuilder::new(self.net.orderer(), Some(&prev)).build(envelopes);
        let raw = Bytes::from(block.encode_to_vec());
        let result = self.validator.commit_block(raw).unwrap();
        let mut validated = block.clone();
        let md = &mut validated.metadata.as_mut().unwrap().metadata;
        md[BlockMetadataIndex::TransactionsFilter as usize] = Bytes::from(result.transactions_filter());
        let validated = Bytes::from(validated.encode_to_vec());
        for r in &self.replicas {
            r.apply_block(validated.clone()).unwrap();
        }
        self.chain_blocks.push(block);
        result.codes
    }

    async fn send(&mut self, peer: usize, signed: &SignedProposal) -> Result<ProposalResponse, tonic::Status> {
        self.clients[peer].process_proposal(signed.clone()).await.map(|r| r.into_inner())
    }

    /// Proposes to the given peers, requires every response to be endorsed, and returns the proposal and responses.
    async fn endorse(
        &mut self,
        peers: &[usize],
        creator: &SigningIdentity,
        chaincode: &str,
        args: &[&[u8]],
    ) -> (ClientProposal, Vec<ProposalResponse>) {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        let p = create_proposal(creator, CHANNEL, chaincode, &args);
        let mut responses = Vec::new();
        for &i in peers {
            let r = self.send(i, &p.signed).await.unwrap();
            let status = r.response.as_ref().unwrap();
            assert_eq!(status.status, 200, "peer {i}: {}", status.message);
            check_endorsement(&self.replicas[i], &self.peers[i], &r);
            responses.push(r);
        }
        (p, responses)
    }

    /// Endorses at `peers`, assembles the transaction and commits it alone in a block; returns its code.
    async fn submit(&mut self, peers: &[usize], creator: &SigningIdentity, chaincode: &str, args: &[&[u8]]) -> Code {
        let (p, responses) = self.endorse(peers, creator, chaincode, args).await;
        let env = assemble_transaction(&p.proposal, &responses, creator).unwrap();
        self.commit(&[env])[0]
    }

    /// A query: one peer's response payload (no transaction).
    async fn query(&mut self, peer: usize, creator: &SigningIdentity, chaincode: &str, args: &[&[u8]]) -> Bytes {
        let (_, r) = self.endorse(&[peer], creator, chaincode, args).await;
        r[0].response.as_ref().unwrap().payload.clone()
    }

    fn stop(self) {
        for s in self.stops {
            let _ = s.send(());
        }
    }
}

/// The endorsement is by `peer` and its signature over payload ‖ endorser verifies with the channel's MSPs.
fn check_endorsement(replica: &Replica, peer: &SigningIdentity, r: &ProposalResponse) {
    assert_eq!(r.version, 1);
    let e = r.endorsement.as_ref().expect("endorsed");
    assert_eq!(&e.endorser, peer.serialized());
    let id = replica.config().msp_manager().deserialize_identity(&e.endorser).unwrap();
    let mut msg = r.payload.to_vec();
    msg.extend_from_slice(&e.endorser);
    id.verify(&msg, &e.signature).unwrap();
}

fn approve_args(name: &str) -> Vec<u8> {
    ApproveChaincodeDefinitionForMyOrgArgs {
        sequence: 1,
        name: name.into(),
        version: "1.0".into(),
        source: Some(ChaincodeSource {
            r#type: Some(chaincode_source::Type::LocalPackage(chaincode_source::Local {
                package_id: format!("{name}_1.0:builtin"),
            })),
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

/// Defines `name` (sequence 1, version 1.0, default policy) the Fabric way: both orgs approve, then Org1's admin
/// commits with both peers' endorsements.
async fn define(h: &mut Harness, name: &str) {
    let admin1 = h.net.admin(0).clone();
    let admin2 = h.net.admin(1).clone();
    assert_eq!(
        h.submit(&[0], &admin1, "_lifecycle", &[b"ApproveChaincodeDefinitionForMyOrg", &approve_args(name)]).await,
        Code::Valid
    );
    let readiness =
        CheckCommitReadinessArgs { sequence: 1, name: name.into(), version: "1.0".into(), ..Default::default() };
    let out = h.query(0, &admin1, "_lifecycle", &[b"CheckCommitReadiness", &readiness.encode_to_vec()]).await;
    let approvals = CheckCommitReadinessResult::decode(out).unwrap().approvals;
    assert_eq!(approvals.get("Org1MSP"), Some(&true));
    assert_eq!(approvals.get("Org2MSP"), Some(&false));
    assert_eq!(
        h.submit(&[1], &admin2, "_lifecycle", &[b"ApproveChaincodeDefinitionForMyOrg", &approve_args(name)]).await,
        Code::Valid
    );
    let commit =
        CommitChaincodeDefinitionArgs { sequence: 1, name: name.into(), version: "1.0".into(), ..Default::default() };
    assert_eq!(
        h.submit(&[0, 1], &admin1, "_lifecycle", &[b"CommitChaincodeDefinition", &commit.encode_to_vec()]).await,
        Code::Valid
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaincodes_defined_through_lifecycle_then_endorsed_transactions_commit_valid() {
    let mut h = Harness::start().await;
    let user = h.net.client(0).clone();

    // Before the definition the chaincode is unknown to the endorsers.
    let p = create_proposal(&user, CHANNEL, "smallbank", &[Bytes::from_static(b"query"), Bytes::from_static(b"1")]);
    let r = h.send(0, &p.signed).await.unwrap();
    assert_eq!(r.response.as_ref().unwrap().status, 500);
    assert!(r.endorsement.is_none());

    define(&mut h, "smallbank").await;
    let q = QueryChaincodeDefinitionArgs { name: "smallbank".into() }.encode_to_vec();
    let out = h.query(1, &user, "_lifecycle", &[b"QueryChaincodeDefinition", &q]).await;
    let def = QueryChaincodeDefinitionResult::decode(out).unwrap();
    assert_eq!((def.sequence, def.version.as_str(), def.endorsement_plugin.as_str()), (1, "1.0", "escc"));
    assert_eq!(def.approvals.get("Org1MSP"), Some(&true));
    assert_eq!(def.approvals.get("Org2MSP"), Some(&true));

    // Smallbank transactions endorsed by both orgs commit VALID and change the replicated state.
    for (id, checking, savings) in [("a", "100", "1000"), ("b", "200", "2000")] {
        let code = h
            .submit(
                &[0, 1],
                &user,
                "smallbank",
                &[b"create_account", id.as_bytes(), b"cust", checking.as_bytes(), savings.as_bytes()],
            )
            .await;
        assert_eq!(code, Code::Valid);
    }
    assert_eq!(h.submit(&[1, 0], &user, "smallbank", &[b"send_payment", b"30", b"b", b"a"]).await, Code::Valid);
    assert_eq!(h.submit(&[0, 1], &user, "smallbank", &[b"amalgamate", b"a", b"b"]).await, Code::Valid);
    let a = h.query(1, &user, "smallbank", &[b"query", b"a"]).await;
    assert_eq!(
        a,
        Bytes::from_static(br#"{"CustomId":"a","CustomName":"cust","SavingsBalance":1000,"CheckingBalance":2070}"#)
    );
    let b = h.query(0, &user, "smallbank", &[b"query", b"b"]).await;
    assert_eq!(
        b,
        Bytes::from_static(br#"{"CustomId":"b","CustomName":"cust","SavingsBalance":0,"CheckingBalance":230}"#)
    );

    // The response carries the chaincode action Fabric's validator checks: our read of the definition's sequence
    // and the chaincode's read/write set, with chaincode ID smallbank/1.0.
    let (_, r) = h.endorse(&[0], &user, "smallbank", &[b"deposit_checking", b"5", b"a"]).await;
    let prp = ProposalResponsePayload::decode(r[0].payload.clone()).unwrap();
    let action = ChaincodeAction::decode(prp.extension).unwrap();
    let cc = action.chaincode_id.unwrap();
    assert_eq!((cc.name.as_str(), cc.version.as_str()), ("smallbank", "1.0"));
    assert_eq!(r[0].interest.as_ref().unwrap().chaincodes.len(), 1);

    // One org's endorsement does not satisfy MAJORITY Endorsement.
    assert_eq!(
        h.submit(&[0], &user, "smallbank", &[b"deposit_checking", b"5", b"a"]).await,
        Code::EndorsementPolicyFailure
    );
    // Two transactions endorsed against the same state: the second is an MVCC conflict.
    let (p1, r1) = h.endorse(&[0, 1], &user, "smallbank", &[b"write_check", b"1", b"a"]).await;
    let (p2, r2) = h.endorse(&[0, 1], &user, "smallbank", &[b"write_check", b"2", b"a"]).await;
    let e1 = assemble_transaction(&p1.proposal, &r1, &user).unwrap();
    let e2 = assemble_transaction(&p2.proposal, &r2, &user).unwrap();
    assert_eq!(h.commit(&[e1, e2]), vec![Code::Valid, Code::MvccReadConflict]);

    // transfer and kv too.
    define(&mut h, "transfer").await;
    assert_eq!(h.submit(&[0, 1], &user, "transfer", &[b"open", b"k1", b"100"]).await, Code::Valid);
    assert_eq!(h.submit(&[0, 1], &user, "transfer", &[b"open", b"k2", b"0"]).await, Code::Valid);
    assert_eq!(h.submit(&[0, 1], &user, "transfer", &[b"transfer", b"k1", b"k2", b"40"]).await, Code::Valid);
    assert_eq!(
        h.query(0, &user, "transfer", &[b"range", b"k", b""]).await,
        Bytes::from_static(br#"[{"key":"k1","value":"60"},{"key":"k2","value":"40"}]"#)
    );
    define(&mut h, "kv").await;
    assert_eq!(h.submit(&[0, 1], &user, "kv", &[b"put", b"x", b"1"]).await, Code::Valid);
    assert_eq!(h.query(1, &user, "kv", &[b"get", b"x"]).await, Bytes::from_static(b"1"));
    h.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_proposals_get_fabric_errors_and_change_nothing() {
    let mut h = Harness::start().await;
    define(&mut h, "kv").await;
    let user = h.net.client(0).clone();
    let put = [Bytes::from_static(b"put"), Bytes::from_static(b"k"), Bytes::from_static(b"v")];
    let committed = create_proposal(&user, CHANNEL, "kv", &put);
    let responses = vec![h.send(0, &committed.signed).await.unwrap(), h.send(1, &committed.signed).await.unwrap()];
    let env = assemble_transaction(&committed.proposal, &responses, &user).unwrap();
    assert_eq!(h.commit(&[env]), vec![Code::Valid]);
    let height = h.replicas[0].height();
    let entries = h.replicas[0].view().entries();

    // Forged: the signature does not match the proposal.
    let mut forged = create_proposal(&user, CHANNEL, "kv", &put).signed;
    let mut sig = forged.signature.to_vec();
    *sig.last_mut().unwrap() ^= 1;
    forged.signature = Bytes::from(sig);
    let err = h.send(0, &forged).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert_eq!(err.message(), "error validating proposal: access denied: channel [mychannel] creator org [Org1MSP]");

    // Wrong channel.
    let other = create_proposal(&user, "otherchannel", "kv", &put);
    let r = h.send(0, &other.signed).await.unwrap();
    assert_eq!(r.response.as_ref().unwrap().status, 500);
    assert_eq!(r.response.as_ref().unwrap().message, "channel 'otherchannel' not found");
    assert!(r.endorsement.is_none() && r.payload.is_empty());

    // Unknown chaincode.
    let unknown = create_proposal(&user, CHANNEL, "nosuch", &put);
    let r = h.send(1, &unknown.signed).await.unwrap();
    assert_eq!(r.response.as_ref().unwrap().status, 500);
    assert_eq!(
        r.response.as_ref().unwrap().message,
        "make sure the chaincode nosuch has been successfully defined on channel mychannel and try again: chaincode nosuch not found"
    );
    assert!(r.endorsement.is_none());

    // Replayed: the proposal of a committed transaction.
    let err = h.send(0, &committed.signed).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert!(
        err.message().starts_with(&format!("duplicate transaction found [{}]. Creator [", committed.tx_id)),
        "{}",
        err.message()
    );

    // Replayed with a forged signature: the signature is checked first, as in Fabric.
    let mut forged_replay = committed.signed.clone();
    let mut sig = forged_replay.signature.to_vec();
    *sig.last_mut().unwrap() ^= 1;
    forged_replay.signature = Bytes::from(sig);
    let err = h.send(1, &forged_replay).await.unwrap_err();
    assert_eq!(err.message(), "error validating proposal: access denied: channel [mychannel] creator org [Org1MSP]");

    // A creator who is not a channel writer (the peer itself: Writers = admin or client).
    let peer_creator = h.peers[0].clone();
    let not_writer = create_proposal(&peer_creator, CHANNEL, "kv", &put);
    let err = h.send(0, &not_writer.signed).await.unwrap_err();
    assert!(
        err.message().starts_with("Failed evaluating policy on signed data during check policy on channel [mychannel] with policy [/Channel/Application/Writers]"),
        "{}",
        err.message()
    );

    // A member of another org cannot approve for this peer's org (local Admins).
    let admin2 = h.net.admin(1).clone();
    let approve = create_proposal(
        &admin2,
        CHANNEL,
        "_lifecycle",
        &[Bytes::from_static(b"ApproveChaincodeDefinitionForMyOrg"), Bytes::from(approve_args("other"))],
    );
    let r = h.send(0, &approve.signed).await.unwrap();
    let resp = r.response.as_ref().unwrap();
    assert_eq!(resp.status, 500);
    assert!(resp.message.starts_with("Failed to authorize invocation due to failed ACL check: Failed deserializing proposal creator during channelless check policy with policy [Admins]"), "{}", resp.message);

    // Not a proposal at all.
    let garbage =
        SignedProposal { proposal_bytes: Bytes::from_static(b"\xff\xff"), signature: Bytes::from_static(b"x") };
    let err = h.send(1, &garbage).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert!(err.message().contains("Proposal"), "{}", err.message());

    // A chaincode failure is answered but not endorsed.
    let bad_args = create_proposal(&user, CHANNEL, "kv", &[Bytes::from_static(b"put")]);
    let r = h.send(0, &bad_args.signed).await.unwrap();
    assert_eq!(r.response.as_ref().unwrap().status, 500);
    assert!(r.endorsement.is_none() && !r.payload.is_empty());

    // Nothing changed on either replica.
    for replica in &h.replicas {
        assert_eq!(replica.height(), height);
        assert_eq!(replica.view().entries(), entries);
    }
    h.stop();
}
