//! Ferrofabric's ordering service node: Hyperledger Fabric's `orderer.AtomicBroadcast` over gRPC, the channel
//! participation API, block cutting, parallel block signing and pluggable consensus.
//!
//! A Fabric client or peer talks to it as to a Fabric 2.5 orderer; the differences are performance-minded and
//! listed where they happen (a rejected Broadcast message does not close the stream; the messages of one
//! stream are checked in parallel — FastFabric's Opt O-II; blocks are signed by a thread pool and appended in
//! order; Deliver streams the stored block bytes).
//!
//! # Map
//! * [`config`]: the orderer.yaml-shaped configuration ([`config::OrdererConfig`]); [`server::start`]: a node inside an
//!   existing Tokio runtime, with its consensus backends in [`server::Plugins`] (`ferrofabric orderer` in the CLI
//!   crate loads the configuration and calls it).
//! * [`broadcast`], [`deliver`] (the orderer's part of `ferrofabric-deliver`'s server), [`grpc`]: the
//!   AtomicBroadcast service; [`msgprocessor`]: Fabric's broadcast
//!   filters; [`configupdate`]: CONFIG_UPDATE → CONFIG through `ferrofabric-configtx`.
//! * [`cutter`]: Fabric's block cutter (block assembly and metadata are `ferrofabric-protoutil`'s); [`support`]: the per-channel
//!   block pipeline given to consensus; [`consensus`]: the [`consensus::Consensus`] trait and the registry the
//!   backends (`ferrofabric-consensus-solo`, `ferrofabric-consensus-etcdraft`) are plugged into through
//!   [`server::Plugins`].
//! * [`registrar`]: channels on disk; [`participation`]: the osnadmin REST API; [`operations`]: health and
//!   metrics.
//!
//! The gRPC client, TLS and listeners are `ferrofabric-comm`'s; `ferrofabric bench orderer` lives in the CLI crate.

pub mod broadcast;
pub mod config;
pub mod configupdate;
pub mod consensus;
pub mod cutter;
pub mod deliver;
pub mod grpc;
pub mod metrics;
pub mod msgprocessor;
pub mod operations;
pub mod participation;
pub mod registrar;
pub mod server;
pub mod support;
