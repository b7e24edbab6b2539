//! Channel configuration updates: CONFIG_UPDATE over Broadcast, as `peer channel update` sends it (an Envelope of type CONFIG_UPDATE
//! holding a `ConfigUpdateEnvelope` with the signers' `ConfigSignature`s, signed by the submitter).
//!
//! * An anchor-peer update signed by Org1's admin is answered SUCCESS and ordered alone in its own block as a
//!   CONFIG transaction signed by the orderer: `ConfigEnvelope{config (sequence 1, with the anchor peer),
//!   last_update: the submitted envelope}`; LAST_CONFIG and `OrdererBlockMetadata.last_config` point at it from
//!   then on; the blocks pass the validator's checks and the config passes configtx's `Validate` (what a
//!   committing peer runs); the node's channel config is reloaded (a follow-up update computed against the
//!   new config is accepted, a stale one is refused).
//! * Updates without the admin's signature are refused with Fabric's status for a failed `mod_policy`,
//!   BAD_REQUEST (Fabric's `broadcast.ClassifyError` gives FORBIDDEN only to the `/Channel/Writers` filter on
//!   the envelope, which a forged envelope signature gets here too), and change nothing.
//!
//! The fixture keeps no admin keys (only User1 of each org and the orderer's signing key), so the accepted
//! update runs on a testkit network with the same shape; the refusals run on the fixture's own
//! `genesis.block` with the fixture's User1 keys.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::support::*;
use bytes::Bytes;
use ferrofabric_channelconfig::{AnchorPeer, ChannelConfig};
use ferrofabric_comm::{broadcast, connect};
use ferrofabric_configtx::{anchor_peer_update, config_update_envelope, ConfigTxValidator};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_orderer::RunningOrderer;
use ferrofabric_protos::common::{
    Block, BlockMetadataIndex, ChannelHeader, ConfigEnvelope, Envelope, HeaderType, LastConfig, Metadata, Payload,
    SignatureHeader, Status,
};
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_protos::orderer::BroadcastResponse;
use ferrofabric_protoutil::last_config_index;
use ferrofabric_testkit::fabric_fixture;
use ferrofabric_testkit::{Network, TxBuilder};
use ferrofabric_validator::{Validator, ValidatorOptions};
use futures::StreamExt;
use prost::Message;

const CHANNEL: &str = "mychannel";

/// Sends `envelopes` on one Broadcast stream and returns the responses (one per message, in order).
async fn broadcast_all(node: &RunningOrderer, envelopes: Vec<Bytes>) -> Vec<BroadcastResponse> {
    let n = envelopes.len();
    let ch = connect(&node.grpc_addr.to_string(), None).await.unwrap();
    let responses = broadcast(ch, futures::stream::iter(envelopes)).await.unwrap();
    let all: Vec<BroadcastResponse> =
        tokio::time::timeout(std::time::Duration::from_secs(30), responses.map(|r| r.unwrap()).collect())
            .await
            .expect("broadcast timed out");
    assert_eq!(all.len(), n, "one response per message");
    all
}

/// Blocks `0..=stop`, read over Deliver as `reader`.
async fn read_blocks(node: &RunningOrderer, reader: &SigningIdentity, stop: u64) -> Vec<Block> {
    let ch = connect(&node.grpc_addr.to_string(), None).await.unwrap();
    let (raw, status) =
        deliver_range(ch, CHANNEL, reader.serialized(), |m| reader.sign(m), 0, stop, SeekBehavior::BlockUntilReady)
            .await;
    assert_eq!(status, Some(Status::Success as i32));
    raw.into_iter().map(|b| Block::decode(b).unwrap()).collect()
}

/// A normal (endorser) transaction created by `creator`.
fn normal_tx(net: &Network, creator: &SigningIdentity, key: &str) -> (String, Bytes) {
    let b =
        TxBuilder::new(net).creator(creator).chaincode("transfer", "1.0").write("transfer", key, b"1").build().unwrap();
    (b.tx_id, b.envelope)
}

fn channel_header_of(env: &Envelope) -> (ChannelHeader, SignatureHeader, Payload) {
    let payload = Payload::decode(env.payload.clone()).unwrap();
    let header = payload.header.clone().unwrap();
    (
        ChannelHeader::decode(header.channel_header).unwrap(),
        SignatureHeader::decode(header.signature_header).unwrap(),
        payload,
    )
}

/// The LAST_CONFIG slot's index (an empty slot is index 0).
fn last_config_slot(block: &Block) -> u64 {
    let slots = &block.metadata.as_ref().unwrap().metadata;
    let raw = slots.get(BlockMetadataIndex::LastConfig as usize).cloned().unwrap_or_default();
    LastConfig::decode(Metadata::decode(raw).unwrap().value).unwrap().index
}

fn org1_anchors(config: &ChannelConfig) -> Vec<AnchorPeer> {
    config.application().unwrap().organizations()["Org1MSP"].anchor_peers().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn org1_admin_anchor_peer_update_is_ordered_alone_as_an_orderer_signed_config_block() {
    let net = tokio::task::spawn_blocking(|| Network::generate(31).unwrap()).await.unwrap();
    let genesis = net.genesis_block();
    let crypto = tempfile::tempdir().unwrap();
    net.write_msp_dirs(crypto.path()).unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut config = loopback_config(data.path(), &net_dirs(crypto.path()).orderer_msp, "OrdererMSP");
    // The testkit genesis keeps the fixture's consenter certificate: that is who this node is.
    config.general.cluster.client_certificate =
        Some(fabric_fixture("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt"));
    let node = start_node(config).await;
    let r = join(node.admin_addr.unwrap(), &genesis).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));

    let current = Arc::new(ChannelConfig::from_config_block(&Block::decode(genesis.clone()).unwrap()).unwrap());
    assert!(org1_anchors(&current).is_empty());
    let admin = net.admin(0);
    let update = anchor_peer_update(CHANNEL, current.config(), "Org1MSP", "peer0.org1.example.com", 7051).unwrap();
    let update_env = config_update_envelope(CHANNEL, &update, &[admin], admin);

    // A normal transaction before and after the update, on the same stream: the update must cut the first
    // one's batch and go alone into its own block.
    let (before_id, before) = normal_tx(&net, net.client(0), "a");
    let (after_id, after) = normal_tx(&net, net.client(1), "b");
    let responses = broadcast_all(&node, vec![before, Bytes::from(update_env.encode_to_vec()), after]).await;
    for r in &responses {
        assert_eq!(r.status, Status::Success as i32, "{}", r.info);
    }

    let blocks = read_blocks(&node, net.client(0), 3).await;
    assert_eq!(blocks.len(), 4);
    let ids = |b: &Block| block_tx_ids(&Bytes::from(b.encode_to_vec()));
    assert_eq!(ids(&blocks[1]), [before_id]);
    assert_eq!(ids(&blocks[3]), [after_id]);

    // Block 2: exactly one CONFIG envelope, created and signed by this orderer.
    let data2 = &blocks[2].data.as_ref().unwrap().data;
    assert_eq!(data2.len(), 1, "a config transaction is alone in its block");
    let config_tx = Envelope::decode(data2[0].clone()).unwrap();
    let (chdr, shdr, payload) = channel_header_of(&config_tx);
    assert_eq!(chdr.r#type, HeaderType::Config as i32);
    assert_eq!(chdr.channel_id, CHANNEL);
    assert_eq!(&shdr.creator, net.orderer().serialized());
    net.orderer().public_key().verify(&config_tx.payload, &config_tx.signature).unwrap();
    let ce = ConfigEnvelope::decode(payload.data).unwrap();
    assert_eq!(ce.config.as_ref().unwrap().sequence, 1);
    assert_eq!(ce.last_update.as_ref(), Some(&update_env), "last_update is the submitted envelope");
    let next = ChannelConfig::from_config_envelope(&ce).unwrap();
    assert_eq!(org1_anchors(&next), [AnchorPeer { host: "peer0.org1.example.com".into(), port: 7051 }]);
    // What a committing peer checks of a CONFIG transaction (Fabric configtx `Validate`).
    ConfigTxValidator::new(current.clone()).unwrap().validate(&ce).unwrap();

    // LAST_CONFIG: genesis before, the config block itself and then the blocks after it.
    let last: Vec<(u64, u64)> = blocks.iter().map(|b| (last_config_index(b).unwrap(), last_config_slot(b))).collect();
    assert_eq!(last, [(0, 0), (0, 0), (2, 2), (2, 2)]);

    // Every block passes the validator's block checks (hash chain, data hash, orderer signature under
    // BlockValidation); the validator takes the new config from block 2.
    let for_validator: Vec<Bytes> = blocks.iter().map(|b| Bytes::from(b.encode_to_vec())).collect();
    let expected = org1_anchors(&next);
    tokio::task::spawn_blocking(move || {
        let mut v = Validator::new(for_validator[0].clone(), ValidatorOptions::default()).unwrap();
        for (i, raw) in for_validator[1..].iter().enumerate() {
            let r = v.commit_block(raw.clone()).unwrap();
            assert_eq!(r.new_config.is_some(), i == 1, "block {}", i + 1);
        }
        assert_eq!(org1_anchors(v.channel_config()), expected);
        assert_eq!(v.channel_config().sequence(), 1);
    })
    .await
    .unwrap();

    // The node reloaded its config: an update computed against the new config (second anchor peer, value at
    // version + 1) is accepted; one computed against the old config (stale read set) is refused.
    let second = anchor_peer_update(CHANNEL, next.config(), "Org1MSP", "peer1.org1.example.com", 8051).unwrap();
    let stale = anchor_peer_update(CHANNEL, current.config(), "Org1MSP", "peer9.org1.example.com", 9051).unwrap();
    let responses = broadcast_all(
        &node,
        vec![
            Bytes::from(config_update_envelope(CHANNEL, &second, &[admin], admin).encode_to_vec()),
            Bytes::from(config_update_envelope(CHANNEL, &stale, &[admin], admin).encode_to_vec()),
        ],
    )
    .await;
    assert_eq!(responses[0].status, Status::Success as i32, "{}", responses[0].info);
    assert_eq!(responses[1].status, Status::BadRequest as i32);
    assert!(
        responses[1].info.contains("error applying config update to existing channel 'mychannel'"),
        "{}",
        responses[1].info
    );
    assert!(responses[1].info.contains("version"), "{}", responses[1].info);

    let blocks = read_blocks(&node, net.client(0), 4).await;
    let ce = ConfigEnvelope::decode(
        channel_header_of(&Envelope::decode(blocks[4].data.as_ref().unwrap().data[0].clone()).unwrap()).2.data,
    )
    .unwrap();
    let third = ChannelConfig::from_config_envelope(&ce).unwrap();
    assert_eq!(third.sequence(), 2);
    assert_eq!(org1_anchors(&third).len(), 2);
    assert_eq!(last_config_index(&blocks[4]).unwrap(), 4);
    let channel = node.registrar.channel(CHANNEL).unwrap();
    assert_eq!(channel.support.sequence(), 2);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_updates_without_org1_admin_signature_are_refused_and_change_nothing() {
    let genesis = std::fs::read(fabric_fixture("genesis.block")).unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut config = loopback_config(data.path(), &fixture_orderer_msp(), "OrdererMSP");
    config.general.cluster.client_certificate =
        Some(fabric_fixture("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt"));
    let node = start_node(config).await;
    let r = join(node.admin_addr.unwrap(), &genesis).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));

    let user1 = SigningIdentity::from_msp_dir("Org1MSP", &fixture_user1_msp()).unwrap();
    let org2_user1 = SigningIdentity::from_msp_dir(
        "Org2MSP",
        &fabric_fixture("crypto/peerOrganizations/org2.example.com/users/User1@org2.example.com/msp"),
    )
    .unwrap();
    let current = ChannelConfig::from_config_block(&Block::decode(Bytes::from(genesis.clone())).unwrap()).unwrap();
    let update = anchor_peer_update(CHANNEL, current.config(), "Org1MSP", "peer0.org1.example.com", 7051).unwrap();
    let env = |signers: &[&SigningIdentity], submitter: &SigningIdentity| {
        Bytes::from(config_update_envelope(CHANNEL, &update, signers, submitter).encode_to_vec())
    };
    // Org1's User1 (a client, not an admin) signs and submits it, as `peer channel update` run with User1's
    // MSP would; no signature at all; Org2's User1.
    let refused = [env(&[&user1], &user1), env(&[], &user1), env(&[&org2_user1], &org2_user1)];
    // An envelope whose own signature is forged: the /Channel/Writers filter refuses it (FORBIDDEN).
    let mut forged = config_update_envelope(CHANNEL, &update, &[&user1], &user1);
    let mut sig = forged.signature.to_vec();
    let last = sig.len() - 1;
    sig[last] ^= 1;
    forged.signature = Bytes::from(sig);

    let net = tokio::task::spawn_blocking(|| Network::generate(32).unwrap()).await.unwrap();
    let (tx_id, tx) = normal_tx(&net, &user1, "a");
    let mut msgs = refused.to_vec();
    msgs.push(Bytes::from(forged.encode_to_vec()));
    msgs.push(tx);
    let responses = broadcast_all(&node, msgs).await;

    for r in &responses[..3] {
        assert_eq!(r.status, Status::BadRequest as i32, "{}", r.info);
        assert!(r.info.starts_with("error applying config update to existing channel 'mychannel': "), "{}", r.info);
        // Fabric 2.5's words: `common/configtx/update.go` wrapped by `validator.go`.
        assert!(
            r.info.ends_with(
                "error authorizing update: error validating DeltaSet: policy for [Group]  /Channel/Application/Org1MSP \
                 not satisfied: signature set did not satisfy policy"
            ),
            "{}",
            r.info
        );
    }
    assert_eq!(responses[3].status, Status::Forbidden as i32, "{}", responses[3].info);
    assert!(
        responses[3].info.contains("config update for existing channel did not pass initial checks"),
        "{}",
        responses[3].info
    );
    assert!(responses[3].info.contains("/Channel/Writers"), "{}", responses[3].info);
    assert_eq!(responses[4].status, Status::Success as i32, "{}", responses[4].info);

    // Nothing changed: the next block holds only the normal transaction and still points at config block 0.
    let blocks = read_blocks(&node, &user1, 1).await;
    assert_eq!(block_tx_ids(&Bytes::from(blocks[1].encode_to_vec())), [tx_id]);
    assert_eq!(last_config_index(&blocks[1]).unwrap(), 0);
    assert_eq!(node.registrar.channel(CHANNEL).unwrap().support.sequence(), 0);
    assert!(org1_anchors(&node.registrar.channel(CHANNEL).unwrap().support.config()).is_empty());
    node.shutdown().await;
}
