//! Test and benchmark kit: realistic, correctly signed Fabric 2.5
//! transactions and blocks over a generated network.
//!
//! The real fixture ledger (`fixtures/fabric-2.5`) kept only User1's and the
//! orderer's private keys, so new endorsements by `Org*MSP.peer` cannot be
//! made with it. [`Network::generate`] instead creates cryptogen-shaped
//! crypto for Org1MSP, Org2MSP and OrdererMSP (NodeOUs enabled) and
//! [`Network::genesis_block`] re-keys the fixture's configtxgen block 0 to it.
//! On top of that:
//!
//! - [`TxBuilder`]: one `ENDORSER_TRANSACTION` envelope, built the way
//!   `protoutil.CreateSignedTx` assembles a proposal and its endorsements,
//!   with knobs for every malformation the validator must catch;
//! - [`define_chaincode`] / [`commit_definition`]: `_lifecycle` definition
//!   commits with Fabric's state layout;
//! - [`BlockBuilder`] / [`Chain`]: orderer-signed blocks as an etcdraft
//!   orderer writes them (header hashing and the `[u64 LE length][Block]`
//!   ledger file format are `ferrofabric_arena`'s);
//! - [`Workload`]: deterministic transfer/smallbank transactions;
//! - [`fixture`], [`fabric_fixture`]: where the recorded Fabric fixtures are (`FERROFABRIC_FIXTURES`, else
//!   `../shared/fixtures`);
//! - [`kafka::KafkaCluster`]: a real Apache Kafka 4.x cluster (KRaft mode) on 127.0.0.1, from the Maven Central jars
//!   of `tests/kafka`, for the Kafka ordering tests.

mod block;
mod error;
mod fixtures;
mod genesis;
pub mod kafka;
mod lifecycle;
mod network;
mod tx;
mod workload;

pub use block::{BlockBuilder, Chain, LAST_CONFIG, SIGNATURES};
pub use error::TestkitError;
/// Signing identity type used throughout (key + marshaled SerializedIdentity).
pub use ferrofabric_msp::SigningIdentity;
pub use ferrofabric_protoutil::{block_data_hash, METADATA_SLOTS};
pub use fixtures::{
    dir as fixtures_dir, fabric as fabric_fixture, fabric_dir as fabric_fixtures_dir, fixture, vector as test_vector,
    ENV as FIXTURES_ENV, FABRIC as FABRIC_FIXTURES,
};
pub use lifecycle::{
    channel_policy_reference, commit_definition, define_chaincode, definition_writes, ChaincodeDefinition,
    DEFAULT_ENDORSEMENT_POLICY,
};
pub use network::{Network, CHANNEL_ID, MAX_PEER_ORGS, ORDERER_ORG, PEER_ORGS};
pub use tx::{Built, TxBuilder, LIFECYCLE_NAMESPACE};
pub use workload::{
    endorsement_ledger, smallbank_key, transfer_key, transfer_ledger, SmallbankAccount, Workload, SMALLBANK_CHAINCODE,
    SMALLBANK_PREFIX, TRANSFER_CHAINCODE, TRANSFER_KEYS_PER_INIT_TX,
};
