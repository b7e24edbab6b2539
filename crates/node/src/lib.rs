//! Ferrofabric's whole network on one machine: `ferrofabric node`, a whole Fabric network in one process, on one
//! tokio runtime ([`start`], or [`run`] with its own runtime, from [`NodeArgs`]).
//!
//! ```text
//!  SDK ──ProcessProposal──▶ peer port Org1 / Org2  (protos.Endorser: endorser Org1 / Org2, each on its own replica)
//!  SDK ──Broadcast────────▶ orderer port           (etcdraft, one consenter, DIR/orderer)
//!                            orderer ──Deliver──▶ committer (DIR/committer; validates, commits, internal listener)
//!  SDK ◀──DeliverFiltered── peer port Org1 / Org2  (protos.Deliver: the committer's PeerDeliverService)
//!                            committer ──Deliver──▶ endorser replicas (FastFabric III-G), block-store service
//! ```
//! A peer port serves `protos.Endorser`, `protos.Deliver`, `gateway.Gateway` (which endorses through both orgs'
//! peer ports by the chaincode's policy, submits to the orderer and answers commit status and chaincode events from
//! the committer's ledger) and `discovery.Discovery`, like a Fabric peer's address. The chaincodes
//! `smallbank` (AND of Org1 and Org2 members), `transfer` and `kv` (OR) are defined through `_lifecycle` with
//! transactions endorsed, ordered and validated like any other, as a Fabric admin defines them (approve per
//! organisation, then commit), so the committer reads each endorsement policy from `_lifecycle` state.
//!
//! * [`start`] runs the orderer (etcdraft with itself as the one consenter), committer, two endorsers (Org1, Org2)
//!   and block-store service ([`RunningNode`]), with crypto material and the channel generated on the first run
//!   (the node directory: [`Layout`]) and the built-in chaincodes defined through `_lifecycle`; it writes
//!   `node.json` ([`NodeInfo`]) and a Fabric connection profile. Its orderer runs
//!   `ferrofabric_consensus::backends`.
//! * [`start_processes`] (`--processes`) runs the same components as supervised child processes, each in its own
//!   CPU cgroup, optionally under the QiOi share controller ([`RunningProcesses`], `DIR/processes.json`:
//!   [`ProcessesInfo`]).
//! * [`NetworkClient`]: the client side of the network (endorse, assemble, broadcast, commit events), also used by
//!   `ferrofabric bench e2e` (in the CLI crate); [`deploy_chaincode`] deploys a user's chaincode package with it
//!   by Fabric's lifecycle flow.

mod address;
mod args;
mod chaincode_definitions;
mod client;
mod deploy;
mod layout;
mod network;
mod processes;
mod profile;
mod run;
mod running_node;

pub use args::NodeArgs;
pub use client::{require_valid, CommitEvents, NetworkClient};
pub use deploy::{deploy_chaincode, ChaincodeDefinition};
pub use layout::{Layout, PEER_MSPIDS};
pub use network::start;
pub use processes::{start_processes, ComponentInfo, ProcessesInfo, RunningProcesses};
pub use profile::NodeInfo;
pub use run::run;
pub use running_node::RunningNode;
