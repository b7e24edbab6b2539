//! The error of the block-store service's configuration, start and storing.

use std::path::PathBuf;

use ferrofabric_block_store::StoreError;
use ferrofabric_channelconfig::PolicyError;
use ferrofabric_comm::CommError;
use ferrofabric_deliver::DeliverError;
use ferrofabric_msp::MspError;

/// What failed in loading the configuration, starting the service or storing the blocks received.
#[derive(Debug, thiserror::Error)]
pub enum BlockstoreError {
    /// The configuration file cannot be read.
    #[error("reading {}", path.display())]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration file does not match the layout.
    #[error("parsing {}", path.display())]
    ParseConfig {
        /// The file.
        path: PathBuf,
        /// serde's error, with its location.
        #[source]
        source: serde_yaml::Error,
    },
    /// A setting without a usable default is missing; the message names it.
    #[error("{0}")]
    MissingSetting(&'static str),
    /// A bad address or duration, unreadable TLS files, a listener that cannot bind (`ferrofabric-comm`'s error).
    #[error(transparent)]
    Comm(#[from] CommError),
    /// Bad delivery settings (`ferrofabric-deliver`'s error).
    #[error(transparent)]
    Deliver(#[from] DeliverError),
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
    /// The store cannot be opened.
    #[error("opening {}", dir.display())]
    OpenStore {
        /// The store's directory.
        dir: PathBuf,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A stored block cannot be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A block below the height is missing.
    #[error("block {0} missing below the height")]
    BlockMissing(u64),
    /// A stored block does not decode.
    #[error("block {number} does not decode: {source}")]
    BlockUndecodable {
        /// The block.
        number: u64,
        /// The decoder's error.
        #[source]
        source: prost::DecodeError,
    },
    /// A stored config block whose configuration does not load.
    #[error("config block {number}: {source}")]
    ConfigBlock {
        /// The block.
        number: u64,
        /// The configuration's error.
        #[source]
        source: PolicyError,
    },
    /// A non-empty store without a config block.
    #[error("no config block in the stored chain")]
    NoConfigBlock,
    /// The stored chain is of another channel.
    #[error("the stored chain is of channel {found:?}, not {expected:?}")]
    WrongChannel {
        /// The stored chain's channel.
        found: String,
        /// The configured channel.
        expected: String,
    },
    /// A metric cannot be registered.
    #[error(transparent)]
    Metrics(#[from] prometheus::Error),
    /// A received block cannot be stored (I/O, index or a broken store).
    #[error("storing block {number}: {source}")]
    StoreBlock {
        /// The block.
        number: u64,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The store cannot be synced at the end.
    #[error("syncing the block store: {0}")]
    Sync(#[source] StoreError),
    /// The store task panicked or was cancelled.
    #[error("store task: {0}")]
    StoreTask(#[source] tokio::task::JoinError),
}
