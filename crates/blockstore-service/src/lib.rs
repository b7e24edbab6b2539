//! Ferrofabric's block-store service (FastFabric III-F: block storage moved off the committer): it follows a
//! committer's peer Deliver service, stores the validated blocks (TRANSACTIONS_FILTER and COMMIT_HASH set) with
//! `ferrofabric-block-store`, and serves them:
//!
//! * `ferrofabric.blockstore.BlockStore` (gRPC, `proto/ferrofabric/blockstore.proto`): `GetChainInfo`,
//!   `GetBlockByNumber`, `GetTransactionByID` (envelope + validation code, like qscc), `GetBlockByTxID`;
//! * Fabric's peer `Deliver` (`protos.Deliver`) for historical and new blocks, with the channel's ACL policy, on the
//!   same listener ([`ferrofabric_deliver::PeerDeliverService`], the committer's Deliver service).
//!
//! Nothing is pushed to it: it asks the committer for the blocks from its own height, so after a crash (even
//! `kill -9`) it resumes where its store ends and loses no block, and a slow disk here never slows the committer.
//! It trusts its committer for validation (the blocks are already validated); the store still checks that each
//! block extends the chain (number, previous hash, data hash).
//!
//! [`start`] runs it ([`RunningBlockstore`]); [`BlockstoreConfig`] is the YAML file, which
//! `ferrofabric blockstore --config FILE` (the CLI crate) loads before calling [`start`].

mod config;
mod error;
mod service;

pub use config::BlockstoreConfig;
pub use error::BlockstoreError;
pub use service::{start, RunningBlockstore};
