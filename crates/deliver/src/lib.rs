//! Fabric's Deliver, one implementation for every daemon (Fabric's `common/deliver` and
//! `core/deliverservice/blocksprovider`):
//!
//! * [`server`]: the Deliver server — envelope and `SeekInfo` parsing, Fabric's status codes, session access
//!   control through a [`server::PolicyChecker`] the daemon supplies, streaming of stored block bytes — over a
//!   [`server::ChainManager`] the daemon supplies (the orderer's channels, a peer's ledger);
//! * [`peer`]: the peer's `protos.Deliver` service (Deliver, DeliverFiltered, DeliverWithPrivateData) over one
//!   ledger, with the peer's ACLs and Prometheus counters — served by the committer and the block store;
//! * [`filtered`]: Fabric's `FilteredBlock` of a committed block, and config-block detection;
//! * [`follower`]: the block-pulling client that follows a channel from a list of servers with fail-over and
//!   back-off — the committer's orderer client and the block store's committer client.

pub mod filtered;
pub mod follower;
pub mod peer;
pub mod server;

pub use server::{BlockSource, Chain, ChainManager, DeliverFrame, DeliverHandler, PolicyChecker, RequestKind};
