//! gRPC listeners (Fabric's `comm.GRPCServer`): bound before anything runs, so that a bad address fails the start
//! of a daemon, served by tonic with the daemons' flow-control windows and TLS, and stopped by a [`Shutdown`].

use std::net::SocketAddr;

use tokio::task::JoinHandle;
use tonic::transport::server::{Router, TcpIncoming};
use tonic::transport::Server;

use crate::error::CommError;
use crate::parse::parse_addr;
use crate::shutdown::Shutdown;
use crate::tls::{grpc_server_tls, TlsConfig};

/// HTTP/2 receive window of a daemon's server per connection: 1 MiB. What a client may push ahead of the server's
/// checks waits here, so the window is kept small: at saturation a larger one only queues Broadcast envelopes
/// (4 MiB per stream held ~4,000 envelopes, half a second of ordering) and back-pressure reaches the client
/// through HTTP/2 flow control instead, as with Fabric's gRPC servers. Messages larger than the window still pass.
pub(crate) const CONNECTION_WINDOW: u32 = 1 << 20;

/// HTTP/2 receive window of a daemon's server per stream: 256 KiB (about 60 smallbank-size envelopes).
pub(crate) const STREAM_WINDOW: u32 = 256 << 10;

/// A tonic server builder with the daemons' flow-control windows and, when `tls.enabled`, TLS.
///
/// Errors: unreadable TLS files, client authentication required without client root CAs.
pub fn server_builder(tls: &TlsConfig) -> Result<Server, CommError> {
    let mut builder = Server::builder()
        .initial_connection_window_size(Some(CONNECTION_WINDOW))
        .initial_stream_window_size(Some(STREAM_WINDOW));
    if tls.enabled {
        builder = builder
            .tls_config(grpc_server_tls(tls)?)
            .map_err(|source| CommError::Transport { what: "gRPC TLS".into(), source })?;
    }
    Ok(builder)
}

/// Binds `addr` for a gRPC server (TCP_NODELAY on); returns the listener and the bound address (port 0 picks one).
///
/// Errors: the address cannot be bound.
pub fn bind(addr: SocketAddr) -> Result<(TcpIncoming, SocketAddr), CommError> {
    let incoming = TcpIncoming::bind(addr).map_err(|source| CommError::Bind { addr, source })?.with_nodelay(Some(true));
    let bound = incoming.local_addr()?;
    Ok((incoming, bound))
}

/// Serves `router` on `incoming` in a task until `shutdown` fires (tonic's graceful shutdown).
pub fn spawn(router: Router, incoming: TcpIncoming, shutdown: Shutdown) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = router.serve_with_incoming_shutdown(incoming, shutdown.signalled()).await {
            tracing::error!(error = %e, "gRPC server failed");
        }
    })
}

/// Binds `listen` (see [`parse_addr`]) and serves the router made by `add` on it until `shutdown` fires; returns
/// the bound address and the server task.
///
/// Errors: bad address, unreadable TLS files, binding failure.
pub fn grpc_listener(
    listen: &str,
    tls: &TlsConfig,
    shutdown: Shutdown,
    add: impl FnOnce(&mut Server) -> Router,
) -> Result<(SocketAddr, JoinHandle<()>), CommError> {
    let (incoming, bound) = bind(parse_addr(listen)?)?;
    let mut builder = server_builder(tls)?;
    let router = add(&mut builder);
    Ok((bound, spawn(router, incoming, shutdown)))
}

/// Ports already handed out by [`unused_port`] in this process.
static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// A TCP port on `host` that nothing listens on, for a listener bound a moment later by another process (a
/// supervised child, a node of a test cluster whose address must be written into a genesis block first).
///
/// The port is drawn at random below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`; 32768 when
/// unreadable) and checked by binding it: an outgoing connection can then never take it between this call and the
/// bind, which is the race of binding port 0 and releasing it. No port is handed out twice in one process.
///
/// Errors: no bindable port found in 10,000 draws.
pub fn unused_port(host: &str) -> Result<u16, CommError> {
    use rand::Rng;
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768)
        .max(10_100);
    let mut rng = rand::thread_rng();
    for _ in 0..10_000 {
        let port = rng.gen_range(10_000..low);
        let mut taken = HANDED_OUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !taken.contains(&port) && std::net::TcpListener::bind((host, port)).is_ok() {
            taken.insert(port);
            return Ok(port);
        }
    }
    Err(CommError::NoUnusedPort(host.to_owned()))
}
