//! Fabric's Deliver, one implementation for every daemon (Fabric's `common/deliver` and
//! `core/deliverservice/blocksprovider`):
//!
//! * the Deliver server, [`DeliverHandler`] — envelope and `SeekInfo` parsing, Fabric's status codes, session
//!   access control through a [`PolicyChecker`] the daemon supplies, streaming of stored block bytes
//!   ([`DeliverFrame`], [`DeliverFrameEncoder`]) — over a [`ChainManager`] the daemon supplies (the orderer's
//!   channels, a peer's ledger);
//! * the peer's `protos.Deliver` service, [`PeerDeliverService`] (Deliver, DeliverFiltered, DeliverWithPrivateData)
//!   over one ledger ([`DeliverLedger`]), with the peer's ACLs ([`PeerAcl`]) and Prometheus counters
//!   ([`DeliverMetrics`]) — served by the committer and the block store;
//! * Fabric's `FilteredBlock` of a committed block, [`filtered_block`];
//! * the block-pulling client, [`Follower`], that follows a channel from a list of servers with fail-over and
//!   back-off ([`FollowConfig`], [`DeliveryConfig`] in configuration files) — the committer's orderer client and
//!   the block store's committer client — on BFT channels with Fabric 3's censorship monitor ([`BftFollow`],
//!   [`AttestationVerifier`]).
//!
//! One fault point, inert unless configured: `deliver-block` makes the server lie like a Byzantine orderer (altered
//! data, too few signatures), for the tests of the committer's refusal (see `faults.rs`).

mod censorship;
mod config;
mod connection;
mod error;
mod faults;
mod filtered;
mod follower;
mod peer;
mod server;

pub use censorship::headers_from;
pub use config::{AttestationVerifier, BftFollow, DeliveryConfig, FollowConfig};
pub use connection::{block_number, connect, seek_envelope};
pub use error::{AccessDenied, AttestationError, DeliverError};
pub use filtered::filtered_block;
pub use follower::{seek_from, Fetched, Follower};
pub use peer::{DeliverLedger, DeliverMetrics, PeerAcl, PeerDeliverService, DEFAULT_EVENT_POLICY};
pub use server::{
    BlockSource, Chain, ChainManager, DeliverFrame, DeliverFrameEncoder, DeliverHandler, DeliverObserver,
    PolicyChecker, RequestKind,
};
