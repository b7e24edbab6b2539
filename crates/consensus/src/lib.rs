//! The consensus backends of an ordering node, composed in one place (Fabric's `orderer/common/server/main.go`,
//! where the orderer builds its map of consenters by consensus type).
//!
//! The orderer core (`ferrofabric-orderer`) depends on no consensus engine; each backend crate registers itself in a
//! [`Plugins`]. [`backends`] is the one composition of them that `ferrofabric orderer`, `ferrofabric node` and the
//! orderer benches run.

mod error;

use std::sync::Arc;

use ferrofabric_consensus_solo::SingleRaftNodeFactory;
use ferrofabric_orderer::{OrdererConfig, Plugins};

pub use error::BackendError;

/// The consensus backends an ordering node configured by `config` runs:
/// * `solo`, and `etcdraft` channels with a single consenter on a node with no Raft WAL directory (the solo loop);
/// * `etcdraft`: Raft, with its `orderer.Cluster` service on the node's listener;
/// * `BFT`: Fabric 3's BFT channels, with its `orderer.ClusterNodeService` on the same listener;
/// * `kafka`: on the Kafka cluster the channel or the configuration's `Kafka` section names;
///
/// and the default CONFIG_UPDATE processor.
///
/// Errors: the cluster's TLS files cannot be read (`ferrofabric_consensus_etcdraft::register`,
/// `ferrofabric_consensus_bft::register`), or the `Kafka` section is bad (`ferrofabric_consensus_kafka::register`).
pub fn backends(config: &OrdererConfig) -> Result<Plugins, BackendError> {
    let mut plugins = Plugins::default();
    ferrofabric_consensus_solo::register(&mut plugins.registry);
    // Etcdraft keeps the solo loop for single-consenter channels on a node without Raft WAL directories.
    plugins.registry.register("etcdraft", Arc::new(SingleRaftNodeFactory));
    ferrofabric_consensus_etcdraft::register(&mut plugins, config)?;
    ferrofabric_consensus_bft::register(&mut plugins, config)?;
    ferrofabric_consensus_kafka::register(&mut plugins, config)?;
    Ok(plugins)
}
