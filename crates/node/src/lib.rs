//! Ferrofabric's whole network on one machine.
//!
//! * [`network`]: `ferrofabric node` — solo orderer, committer, two endorsers (Org1, Org2), block-store service, with
//!   crypto material and the channel generated on the first run ([`layout`]) and the built-in chaincodes defined
//!   through `_lifecycle`; writes `node.json` and a Fabric connection profile ([`profile`]).
//! * [`client`]: the client side of the network (endorse, assemble, broadcast, commit events), also used by
//!   `ferrofabric bench e2e` (in the CLI crate).

pub mod client;
pub mod layout;
pub mod network;
pub mod profile;

pub use network::{orderer_plugins, run, start, NodeArgs, RunningNode};
pub use profile::NodeInfo;
