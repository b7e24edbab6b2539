//! The error of the orderer's configuration, start-up, channel opening and block pulling.

use std::path::PathBuf;

use ferrofabric_block_store::StoreError;
use ferrofabric_channelconfig::PolicyError;
use ferrofabric_comm::CommError;
use ferrofabric_msp::MspError;

/// What failed in loading the configuration, starting the node, opening a channel or pulling blocks.
#[derive(Debug, thiserror::Error)]
pub enum OrdererError {
    /// A configuration file that cannot be read.
    #[error("reading {}", path.display())]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The orderer YAML does not parse (syntax or types, with serde's location).
    #[error("parsing the orderer YAML")]
    ParseConfig(#[source] serde_yaml::Error),
    /// The configuration with its environment overrides cannot be written back as YAML.
    #[error("writing the overridden orderer YAML")]
    WriteConfig(#[source] serde_yaml::Error),
    /// A malformed size (`MaxRequestBodySize`); the message names the value.
    #[error("{0}")]
    BadSize(String),
    /// A required setting is missing; names it.
    #[error("{0} is not set")]
    NotSet(&'static str),
    /// A file the node needs (TLS, cluster TLS) cannot be read.
    #[error("reading {what}{}", path.display())]
    ReadFile {
        /// What the file holds, with a trailing space (`the cluster client certificate `), or empty.
        what: String,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A certificate file without a certificate.
    #[error("no certificate in {}", .0.display())]
    NoCertificate(PathBuf),
    /// The local MSP cannot be loaded.
    #[error("loading the local MSP {msp_id} from {}", dir.display())]
    LocalMsp {
        /// The MSP ID.
        msp_id: String,
        /// The MSP directory.
        dir: PathBuf,
        /// The MSP's error.
        #[source]
        source: MspError,
    },
    /// The crypto thread pool cannot be built.
    #[error("building the crypto thread pool")]
    CryptoPool(#[source] rayon::ThreadPoolBuildError),
    /// The gRPC listener cannot be bound.
    #[error("binding the gRPC listener")]
    GrpcListener(#[source] CommError),
    /// An HTTP listener (admin, operations) cannot be bound.
    #[error("binding the {which} listener {addr}")]
    HttpListener {
        /// `admin` or `operations`.
        which: &'static str,
        /// The configured address.
        addr: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The admin listener's TLS cannot be set up.
    #[error("admin TLS")]
    AdminTls(#[source] CommError),
    /// Admin TLS without client authentication (Fabric requires it).
    #[error("Admin.TLS.ClientAuthRequired must be true when Admin.TLS.Enabled is true")]
    AdminClientAuth,
    /// An address, duration or TLS setting that `ferrofabric-comm` refused, or a listener it could not set up.
    #[error(transparent)]
    Comm(#[from] CommError),
    /// A directory of the ledger that cannot be created.
    #[error("creating {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A stored channel that cannot be served; the detail names the defect.
    #[error("channel {channel}: {detail}")]
    Channel {
        /// The channel.
        channel: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A channel ledger without blocks.
    #[error("channel {0}: ledger is empty")]
    EmptyLedger(String),
    /// The ledger's tip block is missing.
    #[error("tip block {0} missing")]
    TipMissing(u64),
    /// The tip block has no header.
    #[error("tip block has no header")]
    TipWithoutHeader,
    /// The tip block's LAST_CONFIG metadata cannot be read.
    #[error("block {number}: {detail}")]
    LastConfigIndex {
        /// The tip block.
        number: u64,
        /// What is wrong with its metadata.
        detail: String,
    },
    /// The last config block is missing.
    #[error("last config block {0} is missing")]
    LastConfigMissing(u64),
    /// The last config block holds no valid configuration.
    #[error("channel {channel}: config block {number}: {source}")]
    ChannelConfig {
        /// The channel.
        channel: String,
        /// The config block.
        number: u64,
        /// The configuration's error.
        #[source]
        source: PolicyError,
    },
    /// The last config block is another channel's.
    #[error("config block {number} is for channel {found:?}, not {expected:?}")]
    WrongChannel {
        /// The config block.
        number: u64,
        /// The channel it configures.
        found: String,
        /// The channel opened.
        expected: String,
    },
    /// The block store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored block does not decode.
    #[error(transparent)]
    Decode(#[from] prost::DecodeError),
    /// A pulled block does not decode.
    #[error("pulled block does not decode: {0}")]
    PulledUndecodable(#[source] prost::DecodeError),
    /// A pulled block has no header.
    #[error("pulled block has no header")]
    PulledWithoutHeader,
    /// A pulled block's data hash does not match its envelopes.
    #[error("pulled block {0} has a wrong data hash")]
    PulledDataHash(u64),
    /// A pull failed: every source failed (the last failure) or applying a block failed.
    #[error("{0}")]
    Pull(String),
    /// Any other I/O error (reading the ledger directory, a bound address).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
