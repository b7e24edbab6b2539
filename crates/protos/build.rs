//! Compiles `/proto` (the workspace's own Fabric-compatible .proto files)
//! with `protox` — a pure-Rust protobuf compiler, because neither this
//! machine nor CI has `protoc` — and generates prost messages plus tonic
//! clients/servers into `OUT_DIR`, one `<package>.rs` per proto package.

use std::path::PathBuf;

/// Every file we generate code for. Imports are pulled in by protox
/// automatically; listing them all keeps each package's output complete.
const PROTO_FILES: &[&str] = &[
    "common/common.proto",
    "common/configtx.proto",
    "common/configuration.proto",
    "common/policies.proto",
    "common/collection.proto",
    "common/ledger.proto",
    "msp/identities.proto",
    "msp/msp_config.proto",
    "msp/msp_principal.proto",
    "orderer/ab.proto",
    "orderer/cluster.proto",
    "orderer/configuration.proto",
    "orderer/kafka.proto",
    "orderer/etcdraft/configuration.proto",
    "orderer/etcdraft/metadata.proto",
    "orderer/smartbft/configuration.proto",
    "smartbft/messages.proto",
    "peer/proposal.proto",
    "peer/proposal_response.proto",
    "peer/transaction.proto",
    "peer/chaincode.proto",
    "peer/chaincode_event.proto",
    "peer/events.proto",
    "peer/configuration.proto",
    "peer/peer.proto",
    "peer/collection.proto",
    "peer/policy.proto",
    "peer/query.proto",
    "peer/chaincode_shim.proto",
    "peer/lifecycle/lifecycle.proto",
    "peer/lifecycle/db.proto",
    "peer/lifecycle/chaincode_definition.proto",
    "ledger/rwset/rwset.proto",
    "ledger/rwset/kvrwset/kv_rwset.proto",
    "ledger/queryresult/kv_query_result.proto",
    "gateway/gateway.proto",
    "gossip/message.proto",
    "discovery/protocol.proto",
    "ferrofabric/blockstore.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_root: PathBuf = manifest_dir.join("../../proto");
    let proto_root =
        proto_root.canonicalize().map_err(|e| format!("proto root {} not found: {e}", proto_root.display()))?;

    println!("cargo:rerun-if-changed={}", proto_root.display());
    for file in PROTO_FILES {
        println!("cargo:rerun-if-changed={}", proto_root.join(file).display());
    }

    // protox resolves google/protobuf/*.proto from its bundled copies.
    let fds = protox::compile(PROTO_FILES, [&proto_root])?;

    tonic_prost_build::configure()
        // Every `bytes` field becomes `bytes::Bytes`, so decoding from a
        // `Bytes` buffer slices instead of copying (nested envelopes are
        // bytes-in-bytes all the way down).
        .bytes(".")
        .build_client(true)
        .build_server(true)
        .emit_rerun_if_changed(false)
        .compile_fds(fds)?;
    Ok(())
}
