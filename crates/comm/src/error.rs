//! The error of this crate's functions: addresses, durations, TLS material, listeners and connections.

use std::net::SocketAddr;
use std::path::PathBuf;

/// What failed in parsing a configuration value, loading TLS material, binding a listener or connecting.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    /// A listen address that is not `host:port` (see [`crate::parse_addr`]).
    #[error("{input:?} is not an address of the form host:port")]
    BadAddress {
        /// The text given.
        input: String,
        /// The parser's error.
        #[source]
        source: std::net::AddrParseError,
    },
    /// A malformed or negative Go duration.
    #[error(transparent)]
    BadDuration(#[from] ferrofabric_channelconfig::PolicyError),
    /// A file that cannot be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A TLS file that cannot be read.
    #[error("reading TLS {what} {}", path.display())]
    ReadTls {
        /// What the file holds (`certificate`, `root CA`, ...).
        what: String,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// TLS enabled without one of its files configured.
    #[error("TLS is enabled but no {0} is configured")]
    TlsFileMissing(&'static str),
    /// Client authentication required without client root CAs.
    #[error("TLS client authentication is required but no ClientRootCAs are configured")]
    NoClientRootCas,
    /// A TLS client certificate without its key, or the reverse.
    #[error("a TLS client certificate needs its key and vice versa")]
    IncompleteClientIdentity,
    /// PEM that cannot be read (certificate, key or client root CA).
    #[error("bad {what} PEM{}: {source:?}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    BadPem {
        /// What the PEM should hold.
        what: &'static str,
        /// The file, where there is one.
        path: Option<PathBuf>,
        /// The PEM parser's error.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// A certificate file without a certificate.
    #[error("no certificate in {}", .0.display())]
    NoCertificate(PathBuf),
    /// rustls refused the configuration (protocol versions, a root CA, the certificate and key).
    #[error("{what}")]
    Rustls {
        /// The step that failed.
        what: &'static str,
        /// rustls's error.
        #[source]
        source: rustls::Error,
    },
    /// The client certificate verifier cannot be built from the client root CAs.
    #[error("client certificate verifier")]
    ClientVerifier(#[source] rustls::server::VerifierBuilderError),
    /// tonic refused a setting (TLS configuration, endpoint address) or a connection failed.
    #[error("{what}")]
    Transport {
        /// The step that failed (`gRPC TLS`, `connecting to host:port`, ...).
        what: String,
        /// tonic's error.
        #[source]
        source: tonic::transport::Error,
    },
    /// A listen address that cannot be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No free TCP port found by [`crate::unused_port`].
    #[error("no unused TCP port on {0} below the ephemeral range")]
    NoUnusedPort(String),
    /// Any other I/O error of a listener (its bound address).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
