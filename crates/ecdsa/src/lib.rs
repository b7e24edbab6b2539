//! ECDSA P-256 / SHA-256 verification for Fabric's signatures, faster than a general-purpose library because the
//! keys repeat.
//!
//! A verification computes `u1·G + u2·Q`. Libraries keep a precomputed table for the generator G only; here every
//! key the process keeps verifying (the peers that endorse, the orderer that signs blocks, the busy clients) gets
//! one too, in a bounded LRU [`TableCache`], so both products cost at most 37 mixed point additions and no
//! doublings. Keys seen once go to aws-lc. [`verify_batch`] also shares one scalar inversion among all signatures
//! of a block (Montgomery's trick), and no verification inverts a field element.
//!
//! * [`VerifyingKey`]: a key checked once (uncompressed SEC1, on the curve); [`VerifyingKey::verify`] checks one
//!   signature over SHA-256 of a message.
//! * [`Signature`]: `(r, s)` in `[1, n − 1]`. DER decoding and Fabric's low-S rule stay in the MSP.
//! * [`TableCache`]: the per-key tables, [`TABLE_BYTES`] each, [`DEFAULT_CAPACITY`] of them by default.
//!
//! Arithmetic is ours (four 64-bit limbs, Montgomery multiplication on `u128` products) and variable-time: every
//! input of a verification is public. Verdicts equal aws-lc's on every input (the Wycheproof suite and a
//! randomised comparison in the tests).

mod cache;
mod mont;
mod point;
mod table;
mod verify;

pub use cache::{TableCache, DEFAULT_CAPACITY};
pub use table::TABLE_BYTES;
pub use verify::{verify_batch, BatchItem, KeyError, Signature, VerifyingKey};
