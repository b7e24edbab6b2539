//! The gRPC service names (and so the `/<package>.<Service>/<Method>` paths
//! tonic routes on) must equal Fabric's, or real Fabric clients and nodes
//! cannot talk to ours.

use ferrofabric_protos::{gateway, orderer, peer};
use tonic::server::NamedService;

fn name_of<S: NamedService>() -> &'static str {
    S::NAME
}

/// Dummy handler type parameter: the names are associated constants and do
/// not depend on it.
struct Nothing;

#[test]
fn service_names_match_fabric() {
    use gateway::gateway_server::GatewayServer;
    use orderer::atomic_broadcast_server::AtomicBroadcastServer;
    use orderer::cluster_server::ClusterServer;
    use peer::deliver_server::DeliverServer;
    use peer::endorser_server::EndorserServer;

    assert_eq!(name_of::<AtomicBroadcastServer<Nothing>>(), "orderer.AtomicBroadcast");
    assert_eq!(name_of::<ClusterServer<Nothing>>(), "orderer.Cluster");
    assert_eq!(name_of::<DeliverServer<Nothing>>(), "protos.Deliver");
    assert_eq!(name_of::<EndorserServer<Nothing>>(), "protos.Endorser");
    assert_eq!(name_of::<GatewayServer<Nothing>>(), "gateway.Gateway");
}
