//! `ferrofabric bench`: whole-system benchmarks driven through the public API of the orderer and the node.
//!
//! * [`orderer`]: `ferrofabric bench orderer`, ordering throughput and block latency (solo or etcdraft);
//! * [`e2e`]: `ferrofabric bench e2e`, end-to-end committed throughput of a node and the committer alone on
//!   Fabric 2.5.16's bench ledger.

pub(crate) mod e2e;
pub(crate) mod orderer;
