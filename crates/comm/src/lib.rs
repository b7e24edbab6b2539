//! The gRPC and HTTP plumbing every Ferrofabric daemon shares (Fabric's `internal/pkg/comm` and
//! `core/operations`), so that each rule about connections has one home:
//!
//! * [`codec`]: tonic codecs that keep marshaled messages as bytes (requests arrive as the raw `Envelope`, blocks
//!   leave as the stored bytes), and the UNIMPLEMENTED answer of hand-wired services;
//! * [`client`]: the gRPC client — connections with TLS, `orderer.AtomicBroadcast` Broadcast/Deliver and the
//!   peer's `protos.Deliver` with blocks left as bytes, seek envelopes;
//! * [`tls`]: TLS settings of listeners and outgoing connections (Fabric's `localconfig.TLS`), tonic and rustls
//!   server configurations;
//! * [`listener`]: a gRPC listener bound, served and stopped by a [`Shutdown`];
//! * [`shutdown`]: the one [`Shutdown`] signal every task holds, and `SIGINT`/`SIGTERM` handling;
//! * [`parse`]: `host:port` and Go duration values of configuration files;
//! * [`operations`]: the operations HTTP server (`/healthz`, `/metrics`) and the HTTP(S) accept loop.

pub mod client;
pub mod codec;
pub mod listener;
pub mod operations;
pub mod parse;
pub mod shutdown;
pub mod tls;

pub use shutdown::{Shutdown, ShutdownTrigger};
