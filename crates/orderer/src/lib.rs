//! Ferrofabric's ordering service node: Hyperledger Fabric's `orderer.AtomicBroadcast` over gRPC, the channel
//! participation API, block cutting, parallel block signing and pluggable consensus.
//!
//! A Fabric client or peer talks to it as to a Fabric 2.5 orderer; the differences are performance-minded and
//! listed where they happen (a rejected Broadcast message does not close the stream; the messages of one
//! stream are checked in parallel — FastFabric's Opt O-II; blocks are signed by a thread pool and appended in
//! order; Deliver streams the stored block bytes).
//!
//! # Map
//! * [`cli`]: `ferrofabric orderer` ([`cli::OrdererArgs`], [`cli::run`]); [`config`]: the orderer.yaml-shaped
//!   configuration; [`node::start`]: a node inside an existing Tokio runtime.
//! * [`broadcast`], [`deliver`] (the orderer's part of `ferrofabric-deliver`'s server), [`grpc`]: the
//!   AtomicBroadcast service; [`msgprocessor`]: Fabric's broadcast
//!   filters; [`configupdate`]: CONFIG_UPDATE → CONFIG through `ferrofabric-configtx`.
//! * [`cutter`]: Fabric's block cutter (block assembly and metadata are `ferrofabric-protoutil`'s); [`support`]: the per-channel
//!   block pipeline given to consensus; [`consensus`]: the [`consensus::Consensus`] trait and solo.
//! * [`registrar`]: channels on disk; [`participation`]: the osnadmin REST API; [`operations`]: health and
//!   metrics.
//! * [`client`]: a raw-bytes AtomicBroadcast client (`ferrofabric bench orderer` lives in the CLI crate).

pub mod broadcast;
pub mod cli;
pub mod config;
pub mod configupdate;
pub mod consensus;
pub mod cutter;
pub mod deliver;
pub mod grpc;
pub mod metrics;
pub mod msgprocessor;
pub mod node;
pub mod operations;
pub mod participation;
pub mod registrar;
pub mod support;

/// The gRPC client (`ferrofabric-comm`'s, re-exported for the tools and consensus backends that use it).
pub use ferrofabric_comm::client;
/// TLS of the listeners (`ferrofabric-comm`'s, re-exported for the consensus backends).
pub use ferrofabric_comm::tls;
