//! Connections between the consenters of a cluster (Fabric `orderer/common/cluster/comm.go`): the TLS material
//! a consenter dials the others with, and the endpoint of one of them with mutual TLS. Every cluster consensus
//! (etcdraft, BFT) dials its peers this way.

use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// How long a cluster connection may go without receiving anything before the dialer pings it: Fabric's
/// `General.Keepalive.ServerMinInterval` default (60 s). A Fabric server answers pings that come more often with
/// GOAWAY `too_many_pings`, and a Step stream receives no messages, so pinging sooner would cut every link
/// (Fabric `orderer/common/cluster/comm.go` dials with the same interval; the recording shows a ping about 60 s
/// after the dialer last received).
pub const CLUSTER_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);

/// How long the dialer waits for the answer to a keepalive ping before it drops the connection (Fabric's
/// `General.Keepalive.ServerTimeout` default, 20 s).
pub const CLUSTER_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// TLS material a consenter uses to dial the others (Fabric `General.Cluster.ClientCertificate` /
/// `ClientPrivateKey`, and root CAs to check the servers).
#[derive(Clone)]
pub struct ClusterTls {
    /// Client certificate (PEM); consenter lists name this node by it.
    pub certificate_pem: Vec<u8>,
    /// Its private key (PEM, PKCS#8 or SEC1).
    pub private_key_pem: Vec<u8>,
    /// CA certificates (PEM) trusted for the other consenters' server certificates, besides the TLS root
    /// CAs of the channel's orderer organizations.
    pub root_cas_pem: Vec<Vec<u8>>,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTls").field("root_cas", &self.root_cas_pem.len()).finish_non_exhaustive()
    }
}

/// A gRPC endpoint for `host:port` with mutual TLS: `tls`'s identity, the roots `tls.root_cas_pem` plus
/// `extra_roots`, the server name checked against `host`. Keepalive pings as Fabric's cluster client sends
/// them: [`CLUSTER_KEEPALIVE_INTERVAL`] after the last frame received, never on a connection without calls.
///
/// Errors: a malformed address or TLS material tonic refuses.
pub fn cluster_endpoint(
    host: &str,
    port: u16,
    tls: &ClusterTls,
    extra_roots: &[Vec<u8>],
) -> Result<Endpoint, tonic::transport::Error> {
    let roots = tls.root_cas_pem.iter().chain(extra_roots.iter()).map(Certificate::from_pem);
    let config = ClientTlsConfig::new()
        .ca_certificates(roots)
        .identity(Identity::from_pem(&tls.certificate_pem, &tls.private_key_pem))
        .domain_name(host.to_owned());
    let authority = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    Ok(Endpoint::from_shared(format!("https://{authority}"))?
        .tls_config(config)?
        .connect_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(CLUSTER_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(CLUSTER_KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(false)
        .initial_connection_window_size(Some(8 << 20))
        .initial_stream_window_size(Some(4 << 20)))
}

/// The TLS client certificate (DER) a cluster peer presented on `request`: how a cluster service tells which
/// consenter is calling (Fabric pins consenters by certificate).
///
/// Errors: UNAUTHENTICATED when there is none (the listener must request client certificates:
/// `General.TLS.ClientRootCAs`).
pub fn cluster_peer_certificate<T>(request: &tonic::Request<T>) -> Result<Vec<u8>, tonic::Status> {
    request.peer_certs().and_then(|c| c.first().map(|c| c.as_ref().to_vec())).ok_or_else(|| {
        tonic::Status::unauthenticated(
            "the cluster service needs a TLS client certificate (mutual TLS with General.TLS.ClientRootCAs)",
        )
    })
}
