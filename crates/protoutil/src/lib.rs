//! Fabric's `protoutil` for Ferrofabric: the one home of the helpers that build and take apart blocks and
//! envelopes, shared by the orderer, the committer, the block store, the clients, the test kit and the tools.
//!
//! * [`block`]: block metadata slots, data hash, block assembly and orderer signing (`protoutil/blockutils.go`,
//!   `orderer/common/multichannel/blockwriter.go`);
//! * [`header`]: the DER bytes and hash of a block header (`BlockHeaderBytes`, `BlockHeaderHash`);
//! * [`config`]: config-block detection and the last-config index (`IsConfigBlock`,
//!   `GetLastConfigIndexFromBlock`);
//! * [`tx`]: transaction ids and nonces (`ComputeTxID`, `CreateNonce`);
//! * [`seek`]: `SeekInfo` positions and the signed DELIVER_SEEK_INFO envelope;
//! * [`records`]: the ledger-file format (`[8-byte LE length][marshaled Block]` records), plain or `.zst`.
//!
//! Everything here is pure or plain file reading: no threads, no network; signing is a closure.

pub mod block;
pub mod config;
pub mod header;
pub mod records;
pub mod seek;
pub mod tx;

pub use block::{block_data_hash, init_block_metadata, METADATA_SLOTS};
pub use config::{is_config_block, last_config_index, sole_config_envelope};
pub use header::{block_header_bytes, block_header_hash};
pub use records::read_ledger_file;
pub use seek::{seek_envelope, seek_newest, seek_range};
pub use tx::{compute_txid, new_nonce, NONCE_LEN};
