//! `ferrofabric bench`: whole-system benchmarks driven through the public API of the orderer and the node.
//!
//! * [`orderer`]: `ferrofabric bench orderer`, ordering throughput and block latency (solo or etcdraft);
//! * [`e2e`]: `ferrofabric bench e2e`, end-to-end committed throughput of a node and the committer alone on
//!   Fabric 2.5.16's bench ledger, on the built-in chaincodes or a user's contract ([`contract`]);
//! * [`isolation`]: `ferrofabric bench isolation`, the same load alone and beside co-located work ([`hog`]: CPU,
//!   memory bandwidth, disk), without and with the QiOi controller.

mod contract;
pub(crate) mod e2e;
pub(crate) mod hog;
pub(crate) mod isolation;
pub(crate) mod orderer;
mod stats;
