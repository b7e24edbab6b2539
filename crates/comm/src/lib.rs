//! The gRPC and HTTP plumbing every Ferrofabric daemon shares (Fabric's `internal/pkg/comm` and
//! `core/operations`), so that each rule about connections has one home:
//!
//! * codecs that keep marshaled messages as bytes (requests arrive as the raw `Envelope`, blocks leave as the
//!   stored bytes): [`PairCodec`] of [`RawEncoder`], [`RawDecoder`], [`ProstEncoder`], [`ProstDecoder`];
//! * the one shape of the hand-wired streaming services (Broadcast, Deliver, the cluster Step services): a
//!   service's [`StreamMethods`], served by [`StreamService`] through [`serve_stream`];
//! * the gRPC client: connections with TLS ([`connect`], [`connect_with`], [`ClientTls`]),
//!   `orderer.AtomicBroadcast` [`broadcast`] / [`deliver`] and the peer's `protos.Deliver` ([`open_deliver`] of a
//!   [`DeliverApi`]) with blocks left as bytes ([`DeliverItem`]), seek envelopes ([`seek_envelope`]);
//! * the mutual-TLS connections between consenters ([`ClusterTls`], [`cluster_endpoint`],
//!   [`cluster_peer_certificate`]);
//! * TLS settings of listeners ([`TlsConfig`], Fabric's `localconfig.TLS`) and of outgoing connections
//!   ([`ClientTlsConfig`]), rustls server configurations ([`http_server_tls`]);
//! * gRPC listeners bound, served and stopped by a [`Shutdown`] ([`grpc_listener`], or step by step
//!   [`bind_grpc`], [`grpc_server_builder`], [`spawn_grpc_server`]), and ports for listeners another process binds
//!   ([`unused_port`]);
//! * the one [`Shutdown`] signal every task holds, and `SIGINT`/`SIGTERM` handling ([`wait_for_signal`]);
//! * `host:port` and Go duration values of configuration files ([`parse_addr`], [`parse_duration`]), and Fabric's
//!   environment overrides of them (`ORDERER_*`, `CORE_*`: [`apply_env_overrides`], [`fabric_cfg_file`]);
//! * the operations HTTP server (`/healthz`, `/version`, `/metrics`: [`operations_router`], [`serve_operations`])
//!   and the HTTP(S) accept loop ([`serve_http`]).

mod client;
mod cluster;
mod codec;
mod envconfig;
mod error;
mod listener;
mod operations;
mod parse;
mod shutdown;
mod stream;
mod tls;

pub use client::{
    broadcast, connect, connect_with, deliver, deliver_with, open_deliver, seek_envelope, seek_range, ClientTls,
    ConnectOptions, DeliverApi, DeliverItem,
};
pub use cluster::{
    cluster_endpoint, cluster_peer_certificate, ClusterTls, CLUSTER_KEEPALIVE_INTERVAL, CLUSTER_KEEPALIVE_TIMEOUT,
};
pub use codec::{PairCodec, ProstDecoder, ProstEncoder, RawDecoder, RawEncoder};
pub use envconfig::{apply_env_overrides, fabric_cfg_file};
pub use error::CommError;
pub use listener::{
    bind as bind_grpc, grpc_listener, server_builder as grpc_server_builder, spawn as spawn_grpc_server, unused_port,
};
pub use operations::{
    health_response, router as operations_router, serve as serve_operations, serve_http, version_response, Health,
};
pub use parse::{parse_addr, parse_duration};
pub use shutdown::{wait_for_signal, Shutdown, ShutdownTrigger};
pub use stream::{serve_stream, CallFuture, StreamMethods, StreamService};
pub use tls::{http_server_tls, pem_cert_der, ClientTlsConfig, TlsConfig};
