//! Hyperledger Fabric wire types for Ferrofabric.
//!
//! The messages are generated at build time (see `build.rs`) from the
//! workspace's own `.proto` files under `/proto`, whose package names,
//! message names, field numbers and gRPC paths follow
//! `hyperledger/fabric-protos`, so the bytes are interchangeable with a
//! real Fabric 2.5 network.
//!
//! # Layout
//!
//! One Rust module per proto package, named exactly like the package so the
//! `super::<package>` paths prost emits for cross-package references resolve:
//!
//! | module | proto package | source files |
//! |---|---|---|
//! | [`common`] | `common` | `common/*.proto`, `msp/msp_principal.proto` |
//! | [`msp`] | `msp` | `msp/identities.proto`, `msp/msp_config.proto` |
//! | [`orderer`] | `orderer` | `orderer/{ab,cluster,configuration,kafka}.proto` |
//! | [`orderer::smartbft`] | `orderer.smartbft` | `orderer/smartbft/configuration.proto` |
//! | [`etcdraft`] | `etcdraft` | `orderer/etcdraft/*.proto` |
//! | [`protos`] (alias [`peer`]) | `protos` | `peer/*.proto` |
//! | [`lifecycle`] | `lifecycle` | `peer/lifecycle/*.proto` |
//! | [`rwset`] | `rwset` | `ledger/rwset/rwset.proto` |
//! | [`kvrwset`] | `kvrwset` | `ledger/rwset/kvrwset/kv_rwset.proto` |
//! | [`gateway`] | `gateway` | `gateway/gateway.proto` |
//! | [`discovery`] | `discovery` | `discovery/protocol.proto` |
//! | [`gossip`] | `gossip` | `gossip/message.proto` (what discovery carries) |
//!
//! Names are converted by prost: `KVRWSet` becomes [`kvrwset::KvrwSet`],
//! `MSPPrincipal` becomes [`common::MspPrincipal`], enums nested in a message
//! live in a snake-case module (e.g. [`common::policy::PolicyType`]), and
//! `oneof`s become enums in that module too.
//!
//! # Zero-copy
//!
//! Every proto `bytes` field is a [`bytes::Bytes`]. Decoding with
//! `prost::Message::decode(buf)` where `buf: Bytes` makes those fields
//! reference-counted slices of `buf` rather than copies, which matters because
//! Fabric nests marshaled messages inside `bytes` fields several levels deep
//! (Block → Envelope → Payload → Transaction → ... → KVRWSet).
//!
//! # gRPC
//!
//! Each service has a tonic client and server, e.g.
//! [`orderer::atomic_broadcast_client::AtomicBroadcastClient`] and
//! [`orderer::atomic_broadcast_server::AtomicBroadcastServer`] (paths
//! `/orderer.AtomicBroadcast/Broadcast` and `/orderer.AtomicBroadcast/Deliver`),
//! [`peer::endorser_server::EndorserServer`], [`peer::deliver_server`],
//! [`orderer::cluster_server`] and [`gateway::gateway_server`].

/// Generated code is exempt from the workspace's doc and clippy lints;
/// messages carry the comments from our `.proto` files where present.
macro_rules! generated {
    ($file:literal) => {
        include!(concat!(env!("OUT_DIR"), "/", $file));
    };
}

/// Package `common`: envelopes, headers, blocks, channel configuration and
/// policies (`proto/common/*.proto`, `proto/msp/msp_principal.proto`).
#[allow(missing_docs, clippy::all)]
pub mod common {
    generated!("common.rs");
}

/// Package `msp`: serialized identities and MSP configuration
/// (`proto/msp/identities.proto`, `proto/msp/msp_config.proto`).
#[allow(missing_docs, clippy::all)]
pub mod msp {
    generated!("msp.rs");
}

/// Package `orderer`: Broadcast/Deliver (`AtomicBroadcast`), the cluster
/// `Step` service and orderer config values (`proto/orderer/*.proto`).
#[allow(missing_docs, clippy::all)]
pub mod orderer {
    generated!("orderer.rs");

    /// Package `orderer.smartbft`: BFT consensus options
    /// (`proto/orderer/smartbft/configuration.proto`).
    #[allow(missing_docs, clippy::all)]
    pub mod smartbft {
        generated!("orderer.smartbft.rs");
    }
}

/// Package `smartbftprotos`: SmartBFT's `ViewMetadata`, the consenter metadata of Fabric 3 BFT blocks
/// (`proto/smartbft/messages.proto`).
#[allow(missing_docs, clippy::all)]
pub mod smartbftprotos {
    generated!("smartbftprotos.rs");
}

/// Package `etcdraft`: Raft consensus config and block metadata
/// (`proto/orderer/etcdraft/*.proto`).
#[allow(missing_docs, clippy::all)]
pub mod etcdraft {
    generated!("etcdraft.rs");
}

/// Package `protos` (Fabric's peer package): proposals, endorsements,
/// transactions, validation codes, chaincode specs and the Endorser/Deliver
/// services (`proto/peer/*.proto`). Also reachable as [`peer`].
#[allow(missing_docs, clippy::all)]
pub mod protos {
    generated!("protos.rs");
}

pub use protos as peer;

/// Package `lifecycle`: `_lifecycle` system chaincode arguments and state
/// (`proto/peer/lifecycle/*.proto`).
#[allow(missing_docs, clippy::all)]
pub mod lifecycle {
    generated!("lifecycle.rs");
}

/// Package `rwset`: per-namespace read/write sets
/// (`proto/ledger/rwset/rwset.proto`).
#[allow(missing_docs, clippy::all)]
pub mod rwset {
    generated!("rwset.rs");
}

/// Package `kvrwset`: key/value reads, writes and range queries
/// (`proto/ledger/rwset/kvrwset/kv_rwset.proto`).
#[allow(missing_docs, clippy::all)]
pub mod kvrwset {
    generated!("kvrwset.rs");
}

/// Package `queryresult`: the records of a chaincode's range, rich and history queries
/// (`proto/ledger/queryresult/kv_query_result.proto`).
#[allow(missing_docs, clippy::all)]
pub mod queryresult {
    generated!("queryresult.rs");
}

/// Package `gateway`: the Fabric Gateway service (`proto/gateway/gateway.proto`).
#[allow(missing_docs, clippy::all)]
pub mod gateway {
    generated!("gateway.rs");
}

/// Package `discovery`: the peer's discovery service (`proto/discovery/protocol.proto`).
#[allow(missing_docs, clippy::all)]
pub mod discovery {
    generated!("discovery.rs");
}

/// Package `gossip`: the alive and state-info messages discovery carries (`proto/gossip/message.proto`).
#[allow(missing_docs, clippy::all)]
pub mod gossip {
    generated!("gossip.rs");
}

/// Package `ferrofabric.blockstore`: Ferrofabric's own block-store query
/// service (`proto/ferrofabric/blockstore.proto`), not part of Fabric.
pub mod ferrofabric {
    /// Block and transaction lookups served by `ferrofabric blockstore`.
    #[allow(missing_docs, clippy::all)]
    pub mod blockstore {
        generated!("ferrofabric.blockstore.rs");
    }
}
