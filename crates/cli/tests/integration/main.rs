//! Integration tests of `ferrofabric`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

// The committer's test support (a Fabric ledger served by a real orderer, signing identities), shared by the
// crash-consistency tests of the committer and block-store daemons, which run the `ferrofabric` binary.
#[path = "../../../committer/tests/integration/support/mod.rs"]
mod support;

// configtxgen's test network (a configtx.yaml over generated crypto), for the `ferrofabric channel` tests.
#[path = "../../../configtxgen/tests/integration/support/mod.rs"]
mod configtxgen_support;

// The bench library (`ferrofabric::bench_e2e`), built with the `bench` feature as the test builds are.
#[cfg(feature = "bench")]
mod bench;
mod bft_cluster;
mod bft_network;
mod block_shape;
mod blockstore_kill9;
mod caliper;
mod chaincode_service;
mod channel;
mod committer_kill9;
mod crypto;
mod daemon;
mod deploy;
mod fixture_replay;
mod hw_card;
mod isolation;
mod kafka_cluster;
mod peer_network;
mod processes;
mod recorded_fabric;
mod sdk;
