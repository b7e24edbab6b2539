//! Ferrofabric's ordering service node: Hyperledger Fabric's `orderer.AtomicBroadcast` over gRPC, the channel
//! participation API, block cutting, parallel block signing and pluggable consensus.
//!
//! A Fabric client or peer talks to it as to a Fabric 2.5 orderer; the differences are performance-minded and
//! listed where they happen (a rejected Broadcast message does not close the stream; the messages of one
//! stream are checked in parallel — FastFabric's Opt O-II; blocks are signed by a thread pool and appended in
//! order; Deliver streams the stored block bytes).
//!
//! # Map
//! * Configuration: the orderer.yaml-shaped [`OrdererConfig`]; [`start`]: a node inside an existing Tokio runtime
//!   ([`RunningOrderer`]), with its consensus backends in [`Plugins`] (`ferrofabric orderer` in the CLI crate loads
//!   the configuration and calls it).
//! * The AtomicBroadcast service: Broadcast ([`BroadcastHandler`]) with Fabric's broadcast filters ([`inspect`],
//!   [`Rejection`]), CONFIG_UPDATE → CONFIG through `ferrofabric-configtx` ([`ConfigTxProcessor`]), and Deliver
//!   (the orderer's channels and access rule plugged into `ferrofabric-deliver`'s server).
//! * Fabric's block cutter, [`BlockCutter`] (block assembly and metadata are `ferrofabric-protoutil`'s);
//!   [`ChainSupport`]: the per-channel block pipeline given to consensus; the [`Consensus`] trait and the
//!   [`ConsensusRegistry`] the backends (`ferrofabric-consensus-solo`, `ferrofabric-consensus-etcdraft`) are plugged
//!   into through [`Plugins`].
//! * [`pull_blocks`]: a consenter catching up pulls the blocks it misses from the others (Fabric's cluster block
//!   puller).
//! * CONFIG_UPDATE: [`ConfigTxProcessor`] proposes the next configuration and the channel's consensus
//!   implementation validates its consensus metadata ([`ConsensusFactory::validate_consensus_metadata`], Fabric's
//!   `MetadataValidator`), e.g. etcdraft's one-consenter-at-a-time rule.
//! * [`Registrar`]: channels on disk; the osnadmin REST API (channel participation); health and metrics
//!   ([`Metrics`]) on the operations listener.
//!
//! The gRPC client, TLS and listeners are `ferrofabric-comm`'s; `ferrofabric bench orderer` lives in the CLI crate.

mod blockpuller;
mod broadcast;
mod config;
mod configupdate;
mod consensus;
mod cutter;
mod deliver;
mod error;
mod follower;
mod grpc;
mod metrics;
mod msgprocessor;
mod onboarding;
mod operations;
mod participation;
mod registrar;
mod server;
mod support;

pub use blockpuller::{check_pulled, pull_blocks, pull_blocks_until, PullSource};
pub use broadcast::{BroadcastHandler, Checked};
pub use config::{
    AuthenticationConfig, ChannelParticipationConfig, ClusterConfig, ConsensusDirs, FileLedgerConfig, GeneralConfig,
    HttpListenerConfig, KafkaConfig, KafkaSaslPlain, KafkaTopic, KeepaliveConfig, OrdererConfig, TuningConfig,
};
pub use configupdate::{ConfigTxProcessor, ConfigUpdateProcessor, MetadataValidator};
pub use consensus::{
    ChannelStatus, Consensus, ConsensusContext, ConsensusFactory, ConsensusRegistry, ConsensusRelation, Submission,
};
pub use cutter::{Batch, BlockCutter};
pub use error::OrdererError;
pub use metrics::Metrics;
pub use msgprocessor::{inspect, FilterOptions, Inspected, Rejection};
pub use registrar::{Channel, ChannelState, JoinError, Registrar, RegistrarParams, RemoveError};
pub use server::{start, Plugins, RunningOrderer};
pub use support::{ChainSupport, ConsensusError, NewBlock, SupportParams};
