//! How many proposals per second one endorser processes in-process (no gRPC): the `transfer` chaincode is defined
//! through `_lifecycle`, accounts are opened, then `N` transfer proposals (creator User1@org1) are checked,
//! simulated and signed, on one thread and on all cores.
//!
//! `cargo run --release -p ferrofabric-endorser --example endorse_throughput [N]`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ferrofabric_chaincode::Registry;
use ferrofabric_endorser::{assemble_transaction, create_proposal, ClientProposal, Endorser, Replica};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{Block, BlockMetadataIndex};
use ferrofabric_protos::lifecycle::{
    chaincode_source, ApproveChaincodeDefinitionForMyOrgArgs, ChaincodeSource, CommitChaincodeDefinitionArgs,
};
use ferrofabric_testkit::{BlockBuilder, Network};
use ferrofabric_validator::{Validator, ValidatorOptions};
use prost::Message;

struct Net {
    net: Network,
    last: Block,
    validator: Validator,
    replica: Arc<Replica>,
    endorser: Endorser,
}

impl Net {
    fn commit(&mut self, envelopes: &[Bytes]) {
        let block = BlockBuilder::new(self.net.orderer(), self.last.header.as_ref()).build(envelopes);
        let result = self.validator.commit_block(Bytes::from(block.encode_to_vec())).unwrap();
        assert!(result.codes.iter().all(|c| *c as i32 == 0), "{:?}", result.codes);
        let mut validated = block.clone();
        validated.metadata.as_mut().unwrap().metadata[BlockMetadataIndex::TransactionsFilter as usize] =
            Bytes::from(result.transactions_filter());
        self.replica.apply_block(Bytes::from(validated.encode_to_vec())).unwrap();
        self.last = block;
    }

    fn tx(&self, creator: &SigningIdentity, cc: &str, args: &[&[u8]]) -> Bytes {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        let p = create_proposal(creator, "mychannel", cc, &args);
        let r = self.endorser.process_proposal(&p.signed).unwrap();
        assert_eq!(r.response.as_ref().unwrap().status, 200, "{:?}", r.response);
        assemble_transaction(&p.proposal, &[r], creator).unwrap()
    }
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let net = Network::generate(1).unwrap();
    let replica = Arc::new(Replica::from_genesis(net.genesis_block()).unwrap());
    // A single-org network view: Org1's peer endorses, and the definition's policy is Org1's Endorsement
    // policy, as in FastFabric's single-endorser benchmark.
    let endorser = Endorser::new(replica.clone(), net.peer(0).clone(), Registry::builtin());
    let validator = Validator::new(net.genesis_block(), ValidatorOptions::default()).unwrap();
    let last = Block::decode(net.genesis_block()).unwrap();
    let mut h = Net { net, last, validator, replica, endorser };
    let admin = h.net.admin(0).clone();
    let user = h.net.client(0).clone();

    let policy = ferrofabric_protos::peer::ApplicationPolicy {
        r#type: Some(ferrofabric_protos::peer::application_policy::Type::ChannelConfigPolicyReference(
            "/Channel/Application/Org1MSP/Endorsement".into(),
        )),
    }
    .encode_to_vec();
    let approve = ApproveChaincodeDefinitionForMyOrgArgs {
        sequence: 1,
        name: "transfer".into(),
        version: "1.0".into(),
        validation_parameter: Bytes::from(policy.clone()),
        source: Some(ChaincodeSource {
            r#type: Some(chaincode_source::Type::LocalPackage(chaincode_source::Local { package_id: "t".into() })),
        }),
        ..Default::default()
    };
    let env = h.tx(&admin, "_lifecycle", &[b"ApproveChaincodeDefinitionForMyOrg", &approve.encode_to_vec()]);
    h.commit(&[env]);
    // Commit needs MAJORITY LifecycleEndorsement (both orgs): endorse it at an Org2 endorser on the same replica.
    let org2 = Endorser::new(h.replica.clone(), h.net.peer(1).clone(), Registry::builtin());
    let approve2 = h.net.admin(1).clone();
    let p2 = create_proposal(
        &approve2,
        "mychannel",
        "_lifecycle",
        &[Bytes::from_static(b"ApproveChaincodeDefinitionForMyOrg"), Bytes::from(approve.encode_to_vec())],
    );
    let r2 = org2.process_proposal(&p2.signed).unwrap();
    h.commit(&[assemble_transaction(&p2.proposal, &[r2], &approve2).unwrap()]);
    let commit = CommitChaincodeDefinitionArgs {
        sequence: 1,
        name: "transfer".into(),
        version: "1.0".into(),
        validation_parameter: Bytes::from(policy),
        ..Default::default()
    };
    let args = [Bytes::from_static(b"CommitChaincodeDefinition"), Bytes::from(commit.encode_to_vec())];
    let p = create_proposal(&admin, "mychannel", "_lifecycle", &args);
    let r = vec![h.endorser.process_proposal(&p.signed).unwrap(), org2.process_proposal(&p.signed).unwrap()];
    h.commit(&[assemble_transaction(&p.proposal, &r, &admin).unwrap()]);

    let accounts = 2 * n.min(5_000);
    let t = Instant::now();
    for chunk in (0..accounts).collect::<Vec<_>>().chunks(500) {
        let envs: Vec<Bytes> = chunk
            .iter()
            .map(|i| h.tx(&user, "transfer", &[b"open", format!("k{i:08}").as_bytes(), b"1000000"]))
            .collect();
        h.commit(&envs);
    }
    eprintln!("opened {accounts} accounts in {:.2?}", t.elapsed());

    let proposals: Vec<ClientProposal> = (0..n)
        .map(|i| {
            let j = i % (accounts / 2);
            let args = [
                Bytes::from_static(b"transfer"),
                Bytes::from(format!("k{:08}", 2 * j)),
                Bytes::from(format!("k{:08}", 2 * j + 1)),
                Bytes::from_static(b"1"),
            ];
            create_proposal(&user, "mychannel", "transfer", &args)
        })
        .collect();
    let t = Instant::now();
    for p in &proposals {
        let r = h.endorser.process_proposal(&p.signed).unwrap();
        assert!(r.endorsement.is_some());
    }
    let single = t.elapsed();
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let t = Instant::now();
    std::thread::scope(|s| {
        for chunk in proposals.chunks(proposals.len().div_ceil(threads)) {
            let e = h.endorser.clone();
            s.spawn(move || {
                for p in chunk {
                    assert!(e.process_proposal(&p.signed).unwrap().endorsement.is_some());
                }
            });
        }
    });
    let multi = t.elapsed();
    println!(
        "{n} transfer proposals: 1 thread {:.0}/s ({:.1} µs each), {threads} threads {:.0}/s",
        n as f64 / single.as_secs_f64(),
        single.as_secs_f64() * 1e6 / n as f64,
        n as f64 / multi.as_secs_f64()
    );
}
