//! Fabric's `protoutil` for Ferrofabric: the one home of the helpers that build and take apart blocks and
//! envelopes, shared by the orderer, the committer, the block store, the clients, the test kit and the tools.
//!
//! * blocks: metadata slots ([`init_block_metadata`]), data hash ([`block_data_hash`]), block assembly and orderer
//!   signing ([`next_header`], [`sign_and_encode`], [`block_signature`], [`orderer_metadata`]) —
//!   `protoutil/blockutils.go`, `orderer/common/multichannel/blockwriter.go`;
//! * headers: the DER bytes and hash of a block header ([`block_header_bytes`], [`block_header_hash`]);
//! * config blocks: detection and the last-config index ([`is_config_block`], [`last_config_index`]);
//! * `_lifecycle`'s state layout: its keys and implicit collection names ([`lifecycle`]);
//! * transactions: ids and nonces ([`compute_txid`], [`new_nonce`]);
//! * seeks: `SeekInfo` positions ([`seek_range`], [`seek_newest`], [`seek_specified`]) and the signed
//!   DELIVER_SEEK_INFO envelope ([`seek_envelope`]);
//! * ledger files: the `[8-byte LE length][marshaled Block]` record format, plain or `.zst` ([`records`],
//!   [`encode_records`], [`read_ledger_file`]).
//!
//! Everything here is pure or plain file reading: no threads, no network; signing is a closure.

mod block;
mod config;
mod error;
mod header;
pub mod lifecycle;
mod records;
mod seek;
mod tx;

pub use block::{
    bft_signature_value, block_data_hash, block_signature, encode_block, init_block_metadata, next_header,
    orderer_metadata, sign_and_encode, signature_value, signed_bytes, with_block_metadata, BlockBytesError,
    METADATA_SLOTS,
};
pub use config::{is_config_block, is_config_envelope, last_config_index, sole_config_envelope};
pub use error::MetadataError;
pub use header::{block_header_bytes, block_header_hash};
pub use records::{encode_records, read_ledger_file, records, LedgerFileError, RecordError, MAX_RECORD};
pub use seek::{seek_envelope, seek_newest, seek_range, seek_specified};
pub use tx::{compute_txid, endorsed_transaction_payload, new_nonce, NONCE_LEN};
