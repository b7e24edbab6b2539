//! Ferrofabric's committing peer (FastFabric's "fast peer"): it only validates and commits, with the world state in
//! memory and a deep pipeline, and serves Fabric's peer Deliver service so that Fabric SDKs, the block-store service
//! and endorser replicas follow the chain from it.
//!
//! * [`start`] runs one ([`RunningCommitter`]): recovery from the block store, then blocks pulled from the orderers
//!   ([`ferrofabric_deliver::Follower`], Fabric's `blocksprovider`), validated by the pipelined
//!   [`ferrofabric_validator::Validator`] (orderer signatures included), stored with TRANSACTIONS_FILTER and
//!   COMMIT_HASH exactly as a Fabric peer stores them ([`with_peer_metadata`], [`stored_peer_metadata`]), and served
//!   by [`ferrofabric_deliver::PeerDeliverService`]. See [`RunningCommitter`] for threads and durability.
//! * [`CommitterConfig`]: the YAML file, which `ferrofabric committer --config FILE` (the CLI crate) loads before
//!   calling [`start`]. With `Accelerator: sim:NxM`, `udp:HOST:PORT`, `relayed:HOST:PORT` or `alveo:DEVICE`
//!   ([`Accelerator`]) the blocks are validated by the BMac card (co-simulated in this process, on the network fed by
//!   the committer or by a relay beside the orderer, or on an Alveo board behind the XDMA driver) and its host
//!   ([`ferrofabric_bmac::CardProcessor::commit`]; the card's link from `ferrofabric-bmac-boards`, or for `sim:NxM`
//!   from `ferrofabric-bmac-sim`, which only the `bmac-sim` feature builds in) instead of the software validator:
//!   the card checks signatures, endorsement policies and MVCC; the host commits and keeps the ledger; a card that
//!   fails is switched off and the host validates in software from then on.
//! * [`start_relay`]: the BMac relay beside the orderer ([`RunningRelay`]), which follows the channel and feeds a
//!   card on the network its blocks' sections, for a committer with `Accelerator: relayed:HOST:PORT`.
//! * [`Checkpoint`]: the state checkpoint file; the commit pipeline's Prometheus metrics are served with `/healthz`
//!   by [`ferrofabric_comm::operations_router`].
//!
//! # How validated blocks reach other services (FastFabric III-F, III-G)
//! The block-store service and the endorser replicas are Deliver clients of the committer, like Fabric's own
//! event listeners: each asks for blocks from its own height and the committer serves them from its block store.
//! Nothing is pushed, so a slow or dead consumer cannot stall commits (each stream has a bounded buffer of four
//! frames and waits on its own socket) and none can miss a block (it resumes from its height after a restart).
//! [`ferrofabric_deliver::Follower`] with [`ferrofabric_comm::DeliverApi::Peer`] is the client
//! side.
//!
//! # Not done / differences from Fabric
//! * A restart resumes from the state checkpoint and re-validates only the blocks stored after it; the txid set is
//!   rebuilt by reading the stored blocks before it (decoding only, no signature checks), so start-up still reads
//!   the whole chain once. Fabric keeps that index on disk.
//! * Private data is not kept: `DeliverWithPrivateData` sends an empty private data map.
//! * No TLS binding (`tls_cert_hash`) check on Deliver requests; the operations listener has no TLS.

mod card;
mod checkpoint;
mod config;
mod metadata;
mod metrics;
mod pipeline;
mod recovery;
mod relay;
mod storing;
mod validating;

pub use checkpoint::{Checkpoint, CheckpointError};
pub use config::{Accelerator, CommitterConfig, PipelineConfig};
pub use metadata::{stored_peer_metadata, with_peer_metadata};
pub use pipeline::{start, RunningCommitter};
pub use recovery::{open_store, recover, Recovery};
pub use relay::{start_relay, RelayConfig, RelayStatus, RunningRelay};
pub use storing::Status as CommitterStatus;
