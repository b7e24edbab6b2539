//! What a Fabric peer checks of a block's metadata, written out so that a block of ours can be held against one a
//! real Fabric orderer and peer wrote (the ledgers of `../shared/fixtures`): the number of metadata slots, the
//! SIGNATURES slot's `OrdererBlockMetadata` (last config index, the consensus type's consenter metadata) and the form
//! of each signature (a `SignatureHeader` naming the signer, or a BFT `IdentifierHeader` naming the consenter), the
//! LAST_CONFIG slot, the TRANSACTIONS_FILTER's length and the COMMIT_HASH (Fabric `protoutil/blockutils.go`,
//! `orderer/common/multichannel/blockwriter.go`, `core/ledger/kvledger`).
//!
//! [`describe`] turns a block into lines of text with the values replaced by the rule they keep ("the last config
//! block", "the block's number"), so two blocks of the same kind describe alike exactly when they have the same
//! shape, and a difference reads as a sentence.

use bytes::Bytes;
use ferrofabric_protos::common::{
    Block, BlockMetadata, IdentifierHeader, LastConfig, Metadata, OrdererBlockMetadata, SignatureHeader,
};
use ferrofabric_protos::msp::SerializedIdentity;
use prost::Message;

/// Fabric's `BlockMetadataIndex`.
pub(crate) const SIGNATURES: usize = 0;
/// The deprecated LAST_CONFIG slot, which Fabric still fills.
pub(crate) const LAST_CONFIG: usize = 1;
/// One validation code per transaction, set by the peer.
pub(crate) const TRANSACTIONS_FILTER: usize = 2;
/// The peer's commit hash.
pub(crate) const COMMIT_HASH: usize = 4;

/// What [`describe`] needs to know of the block's place in its chain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    /// The number of the last config block at or before this block.
    pub(crate) last_config: u64,
    /// For a BFT channel, its number of consenters (signatures must reach the quorum); `None` for etcdraft.
    pub(crate) bft_consenters: Option<usize>,
}

/// The block's metadata entry `index` (empty when absent).
pub(crate) fn metadata(block: &Block, index: usize) -> Bytes {
    block.metadata.as_ref().and_then(|m| m.metadata.get(index)).cloned().unwrap_or_default()
}

/// The commit hash recorded in the block's COMMIT_HASH metadata (empty when none).
pub(crate) fn commit_hash(block: &Block) -> Bytes {
    Metadata::decode(metadata(block, COMMIT_HASH)).map(|m| m.value).unwrap_or_default()
}

/// The shape of `block`'s metadata as lines of text (see the module documentation).
pub(crate) fn describe(block: &Block, place: Place) -> Vec<String> {
    let number = block.header.as_ref().map_or(0, |h| h.number);
    let slots = block.metadata.clone().unwrap_or_default();
    let mut lines = vec![format!("{} metadata slots", slots.metadata.len())];
    lines.extend(signatures_slot(&slots, number, place));
    lines.push(format!("LAST_CONFIG: {}", last_config_slot(&metadata(block, LAST_CONFIG), place)));
    let txs = block.data.as_ref().map_or(0, |d| d.data.len());
    let filter = metadata(block, TRANSACTIONS_FILTER);
    lines.push(match filter.len() {
        0 => "TRANSACTIONS_FILTER: empty".to_owned(),
        n if n == txs => "TRANSACTIONS_FILTER: one code per transaction".to_owned(),
        n => format!("TRANSACTIONS_FILTER: {n} codes for {txs} transactions"),
    });
    lines.push(format!("ORDERER slot: {} bytes", metadata(block, 3).len()));
    let commit = metadata(block, COMMIT_HASH);
    lines.push(match Metadata::decode(commit.clone()) {
        _ if commit.is_empty() => "COMMIT_HASH: empty".to_owned(),
        Ok(m) if m.signatures.is_empty() => format!("COMMIT_HASH: Metadata{{value: {} bytes}}", m.value.len()),
        Ok(m) => format!("COMMIT_HASH: Metadata with {} signatures", m.signatures.len()),
        Err(e) => format!("COMMIT_HASH: not a Metadata ({e})"),
    });
    lines
}

/// The SIGNATURES slot: its `OrdererBlockMetadata` and the forms of its signatures.
fn signatures_slot(slots: &BlockMetadata, number: u64, place: Place) -> Vec<String> {
    let raw = slots.metadata.get(SIGNATURES).cloned().unwrap_or_default();
    let md = match Metadata::decode(raw) {
        Ok(m) => m,
        Err(e) => return vec![format!("SIGNATURES: not a Metadata ({e})")],
    };
    let mut lines = Vec::new();
    match OrdererBlockMetadata::decode(md.value.clone()) {
        Ok(obm) => {
            let index = obm.last_config.map_or(0, |l| l.index);
            lines.push(format!("SIGNATURES value: last_config {}", index_rule(index, place.last_config)));
            lines.push(format!(
                "SIGNATURES value: consenter metadata {}",
                consenter_metadata(&obm.consenter_metadata, number, place)
            ));
        }
        Err(e) => lines.push(format!("SIGNATURES value: not an OrdererBlockMetadata ({e})")),
    }
    let count = md.signatures.len();
    lines.push(match place.bft_consenters {
        _ if count == 0 => "signatures: none".to_owned(),
        Some(n) if count >= ferrofabric_channelconfig::bft_quorum(n) && count <= n => {
            format!("signatures: a quorum of the {n} consenters")
        }
        Some(n) => format!("signatures: {count}, not a quorum of the {n} consenters"),
        None => format!("signatures: {count}"),
    });
    let mut forms: Vec<String> = md.signatures.iter().map(signature_form).collect();
    forms.sort();
    forms.dedup();
    lines.extend(forms.into_iter().map(|f| format!("signature: {f}")));
    lines
}

/// A last-config index as the rule it keeps.
fn index_rule(index: u64, last_config: u64) -> String {
    if index == last_config {
        "= the last config block".to_owned()
    } else {
        format!("= {index}, but the last config block is {last_config}")
    }
}

/// The consensus type's metadata in the SIGNATURES value: etcdraft's `BlockMetadata` wrapped in a `Metadata`, or
/// SmartBFT's `ViewMetadata` (view id 1, latest sequence 2, decisions in view 3).
fn consenter_metadata(raw: &Bytes, number: u64, place: Place) -> String {
    if number == 0 {
        return if raw.is_empty() { "empty".to_owned() } else { format!("{} bytes in the genesis block", raw.len()) };
    }
    match place.bft_consenters {
        None => {
            let Ok(wrapped) = Metadata::decode(raw.clone()) else { return "not a Metadata".to_owned() };
            match ferrofabric_protos::etcdraft::BlockMetadata::decode(wrapped.value) {
                Ok(m) if !m.consenter_ids.is_empty() && m.next_consenter_id > 0 && m.raft_index > 0 => {
                    "Metadata{value: etcdraft BlockMetadata{consenter_ids, next_consenter_id, raft_index}}".to_owned()
                }
                Ok(m) => format!("an etcdraft BlockMetadata with zero fields: {m:?}"),
                Err(e) => format!("not an etcdraft BlockMetadata ({e})"),
            }
        }
        Some(_) => match ferrofabric_protos::smartbftprotos::ViewMetadata::decode(raw.clone()) {
            Ok(v) if v.latest_sequence == number => "ViewMetadata{latest_sequence: the block's number}".to_owned(),
            Ok(v) => format!("ViewMetadata with latest_sequence {} in block {number}", v.latest_sequence),
            Err(e) => format!("not a ViewMetadata ({e})"),
        },
    }
}

/// One signature's form: which header names the signer, and the signature's encoding.
fn signature_form(s: &ferrofabric_protos::common::MetadataSignature) -> String {
    let der = s.signature.len() > 8 && s.signature[0] == 0x30 && usize::from(s.signature[1]) == s.signature.len() - 2;
    let encoding = if der { "DER ECDSA" } else { "not DER" };
    let header = match (s.signature_header.is_empty(), s.identifier_header.is_empty()) {
        (false, true) => match SignatureHeader::decode(s.signature_header.clone()) {
            Ok(h) => {
                let creator = SerializedIdentity::decode(h.creator)
                    .map(|c| format!("{} certificate", c.mspid))
                    .unwrap_or_else(|e| format!("not a SerializedIdentity ({e})"));
                format!("SignatureHeader{{creator: {creator}, nonce: {} bytes}}", h.nonce.len())
            }
            Err(e) => format!("SignatureHeader that does not decode ({e})"),
        },
        (true, false) => match IdentifierHeader::decode(s.identifier_header.clone()) {
            Ok(h) => {
                let id = if h.identifier > 0 { "a consenter id" } else { "zero" };
                format!("IdentifierHeader{{identifier: {id}, nonce: {} bytes}}", h.nonce.len())
            }
            Err(e) => format!("IdentifierHeader that does not decode ({e})"),
        },
        (true, true) => "no header".to_owned(),
        (false, false) => "both headers".to_owned(),
    };
    format!("{header}, {encoding}")
}

/// The LAST_CONFIG slot: `Metadata{value: LastConfig{index}}` with no signatures.
fn last_config_slot(raw: &Bytes, place: Place) -> String {
    match Metadata::decode(raw.clone()) {
        Ok(m) if m.signatures.is_empty() => match LastConfig::decode(m.value) {
            Ok(l) => format!("Metadata{{value: LastConfig{{index {}}}}}", index_rule(l.index, place.last_config)),
            Err(e) => format!("value not a LastConfig ({e})"),
        },
        Ok(m) => format!("Metadata with {} signatures", m.signatures.len()),
        Err(e) => format!("not a Metadata ({e})"),
    }
}

/// The number of the last config block at or before each block of `chain` (by each block's content, not by what
/// its metadata claims).
pub(crate) fn last_configs(chain: &[Block]) -> Vec<u64> {
    let mut last = 0;
    chain
        .iter()
        .map(|b| {
            if ferrofabric_protoutil::sole_config_envelope(b).is_some() {
                last = b.header.as_ref().map_or(0, |h| h.number);
            }
            last
        })
        .collect()
}

/// Holds every block of `ours` against the block of the same kind (config or not, and with transactions or not)
/// of `theirs`, a chain a real Fabric network wrote: their [`describe`]s must be equal. `bft_consenters` as in
/// [`Place`], for each chain.
pub(crate) fn assert_same_shapes(ours: &[Block], theirs: &[Block], bft_consenters: (Option<usize>, Option<usize>)) {
    let (our_last, their_last) = (last_configs(ours), last_configs(theirs));
    let kind = |b: &Block| ferrofabric_protoutil::sole_config_envelope(b).is_some();
    for (n, block) in ours.iter().enumerate() {
        // Block 0 against block 0; later blocks against the first of Fabric's of the same kind after block 0.
        let reference = if n == 0 { Some(0) } else { (1..theirs.len()).find(|&i| kind(&theirs[i]) == kind(block)) };
        let Some(i) = reference else { continue };
        let mine = describe(block, Place { last_config: our_last[n], bft_consenters: bft_consenters.0 });
        let fabric = describe(&theirs[i], Place { last_config: their_last[i], bft_consenters: bft_consenters.1 });
        assert_eq!(mine, fabric, "block {n} against Fabric's block {i}: metadata shapes differ");
    }
}

/// The blocks of a real Fabric ledger of `../shared/fixtures` (`fixture` its folder, `file` a `*-blocks.bin`).
pub(crate) fn fixture_blocks(fixture: &str, file: &str) -> Vec<Block> {
    let data = Bytes::from(std::fs::read(ferrofabric_testkit::fixture(fixture).join(file)).expect("a fixture ledger"));
    ferrofabric_protoutil::records(data).map(|r| Block::decode(r.expect("a record").1).expect("a block")).collect()
}
