//! Ferrofabric's whole network on one machine and its end-to-end benchmark.
//!
//! * [`node`]: `ferrofabric node` — solo orderer, committer, two endorsers (Org1, Org2), block-store service, with
//!   crypto material and the channel generated on the first run ([`layout`]) and the built-in chaincodes defined
//!   through `_lifecycle`; writes `node.json` and a Fabric connection profile ([`profile`]).
//! * [`bench`]: `ferrofabric bench e2e` — FastFabric §IV-D: pre-endorsed transactions broadcast to the orderer,
//!   committed tx/s and block latency seen on a peer's `DeliverFiltered`; and the committer alone on Fabric 2.5.16's
//!   10,735-transaction ledger.
//! * [`client`]: the client side both use (endorse, assemble, broadcast, commit events).

pub mod bench;
pub mod client;
pub mod layout;
pub mod node;
pub mod profile;

pub use node::{run, start, NodeArgs, RunningNode};
pub use profile::NodeInfo;
