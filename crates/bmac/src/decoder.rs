//! The software decoder of the BMac protocol. It is the reference model of the protocol processor
//! (hw/DESIGN.md §3): it keeps the identity cache, puts identities back, hashes each slot's regions, extracts
//! signatures, reads, probes and writes, and parses the `Version` varints. Tests compare its output with the
//! Fabric block itself.

use std::collections::HashMap;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::pbscan::read_varint;
use crate::wire::{
    AnnKind, Section, SectionType, TxInfo, FLAG_LAST_TX, ID_SLOTS, LOC_SIGNER, RD_HAS_VER, SLOTS, VER_FOLLOWS,
    WR_DELETE,
};

/// A section that cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("BMac decode: {0}")]
pub struct DecodeError(pub String);

fn derr(s: impl Into<String>) -> DecodeError {
    DecodeError(s.into())
}

/// One cache entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheEntry {
    /// Identity id.
    pub id: u16,
    /// Public key X.
    pub qx: [u8; 32],
    /// Public key Y.
    pub qy: [u8; 32],
    /// Marshaled `SerializedIdentity`.
    pub bytes: Bytes,
}

/// What one signature slot carries after decoding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotData {
    /// SHA-256 of the slot's regions (none if the slot has no region).
    pub digest: Option<[u8; 32]>,
    /// The DER signature bytes.
    pub signature: Option<Bytes>,
    /// The signer's id (from a `LOC` with `SIGNER`).
    pub signer: Option<u16>,
}

/// A read (`RD_KEY` with its `RD_VER`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedRead {
    /// Namespace id.
    pub ns: u8,
    /// MVCC order.
    pub seq: u8,
    /// Key bytes.
    pub key: Bytes,
    /// Version read, `None` if the key was absent.
    pub version: Option<(u64, u64)>,
}

/// A range-query probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedProbe {
    /// Namespace id.
    pub ns: u8,
    /// MVCC order.
    pub seq: u8,
    /// Key bytes.
    pub key: Bytes,
    /// Required state (`PROBE_*`).
    pub require: u8,
}

/// A written key (or a state-sync entry, with its version).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedWrite {
    /// Namespace id.
    pub ns: u8,
    /// Key bytes.
    pub key: Bytes,
    /// Whether the key is deleted.
    pub delete: bool,
    /// Explicit version (state sync only).
    pub version: Option<(u64, u64)>,
}

/// A decoded `TX` or `METADATA` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedSection {
    /// Section type.
    pub section_type: SectionType,
    /// Block number.
    pub block: u64,
    /// Section index (tx index, tx count, identity id).
    pub index: u16,
    /// `LAST_TX` flag.
    pub last: bool,
    /// Raw section info.
    pub info: [u8; 8],
    /// The reconstructed payload (identities put back; probe keys and virtual header bytes included).
    pub payload: Bytes,
    /// Per signature slot.
    pub slots: Vec<SlotData>,
    /// Reads.
    pub reads: Vec<DecodedRead>,
    /// Probes.
    pub probes: Vec<DecodedProbe>,
    /// Writes (or state-sync entries).
    pub writes: Vec<DecodedWrite>,
}

impl DecodedSection {
    /// The `TX` section info.
    pub fn tx_info(&self) -> TxInfo {
        TxInfo::from_bytes(&self.info)
    }
}

/// The decoder state: the identity cache and the last block header.
#[derive(Default)]
pub struct Decoder {
    cache: HashMap<u16, CacheEntry>,
    slots: Vec<Option<u16>>,
    header: Option<Bytes>,
}

/// Parses a `kvrwset.Version` made of varint fields 1 and 2.
pub(crate) fn parse_version(v: &[u8]) -> Result<(u64, u64), DecodeError> {
    let (mut blk, mut txn) = (0, 0);
    let mut pos = 0;
    while pos < v.len() {
        let (key, p) = read_varint(v, pos).map_err(|e| derr(e.to_string()))?;
        let (val, p) = read_varint(v, p).map_err(|e| derr(e.to_string()))?;
        match key {
            0x08 => blk = val,
            0x10 => txn = val,
            _ => return Err(derr("Version field other than 1/2 varints")),
        }
        pos = p;
    }
    Ok((blk, txn))
}

impl Decoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Decoder { slots: vec![None; ID_SLOTS], ..Decoder::default() }
    }

    /// The cached identity `id`.
    pub fn cached(&self, id: u16) -> Option<&CacheEntry> {
        self.cache.get(&id)
    }

    /// Decodes one section. `ID_SYNC` and `HEADER` update the state and return `None`.
    ///
    /// Errors: unknown ids, regions outside the payload, unsorted classes, bad versions.
    pub fn decode(&mut self, s: &Section) -> Result<Option<DecodedSection>, DecodeError> {
        match s.header.section_type {
            SectionType::IdSync => {
                let slot = usize::from(s.info[0]);
                if slot >= ID_SLOTS || s.payload.len() < 64 {
                    return Err(derr("bad ID_SYNC"));
                }
                if s.info[1] & 1 != 0 {
                    self.cache.clear();
                    self.slots = vec![None; ID_SLOTS];
                }
                if let Some(old) = self.slots[slot].take() {
                    self.cache.remove(&old);
                }
                let mut qx = [0u8; 32];
                let mut qy = [0u8; 32];
                qx.copy_from_slice(&s.payload[..32]);
                qy.copy_from_slice(&s.payload[32..64]);
                let id = s.header.index;
                self.cache.insert(id, CacheEntry { id, qx, qy, bytes: s.payload.slice(64..) });
                self.slots[slot] = Some(id);
                Ok(None)
            }
            SectionType::Header => {
                self.header = Some(s.payload.clone());
                Ok(None)
            }
            // The policy table is the block processor's; the protocol processor only checks the framing.
            SectionType::PolicySync => {
                if s.payload.len() != crate::wire::POLICY_BYTES || !s.annotations.is_empty() {
                    return Err(derr("bad POLICY_SYNC"));
                }
                Ok(None)
            }
            SectionType::Tx | SectionType::Metadata | SectionType::StateSync => self.decode_body(s).map(Some),
        }
    }

    fn decode_body(&self, s: &Section) -> Result<DecodedSection, DecodeError> {
        // DataInserter: put identities back (locators are sorted by stripped offset).
        let mut payload = Vec::with_capacity(s.payload.len() + 4096);
        let mut cursor = 0usize;
        let mut slots = vec![SlotData::default(); SLOTS];
        for a in s.annotations.iter().filter(|a| a.kind == AnnKind::Loc) {
            let off = usize::from(a.offset);
            if off < cursor || off > s.payload.len() {
                return Err(derr("locators out of order or outside the payload"));
            }
            let id = self.cache.get(&a.len_or_id).ok_or_else(|| derr(format!("unknown identity {}", a.len_or_id)))?;
            payload.extend_from_slice(&s.payload[cursor..off]);
            payload.extend_from_slice(&id.bytes);
            cursor = off;
            if a.flags & LOC_SIGNER != 0 {
                let slot = slots.get_mut(usize::from(a.ns_or_slot)).ok_or_else(|| derr("signer slot"))?;
                slot.signer = Some(a.len_or_id);
            }
        }
        payload.extend_from_slice(&s.payload[cursor..]);
        if s.header.section_type == SectionType::Metadata {
            payload.extend_from_slice(self.header.as_deref().ok_or_else(|| derr("METADATA before HEADER"))?);
        }
        let payload = Bytes::from(payload);
        let region = |off: u16, len: u16| -> Result<Bytes, DecodeError> {
            let (o, l) = (usize::from(off), usize::from(len));
            if o + l > payload.len() || l == 0 {
                return Err(derr("region outside the payload"));
            }
            Ok(payload.slice(o..o + l))
        };
        // HashCalculator: per slot, its regions in stream order.
        let mut hashers: Vec<Option<Sha256>> = vec![None; SLOTS];
        let mut ends = [0usize; SLOTS];
        for a in s.annotations.iter().filter(|a| a.kind == AnnKind::Hash) {
            let slot = usize::from(a.ns_or_slot);
            if slot >= SLOTS || usize::from(a.offset) < ends[slot] {
                return Err(derr("hash regions unsorted or bad slot"));
            }
            ends[slot] = usize::from(a.offset) + usize::from(a.len_or_id);
            hashers[slot].get_or_insert_with(Sha256::new).update(region(a.offset, a.len_or_id)?);
        }
        for (slot, h) in slots.iter_mut().zip(hashers) {
            slot.digest = h.map(|h| h.finalize().into());
        }
        // DataExtractor / DataProcessor: the field class.
        let mut reads: Vec<DecodedRead> = Vec::new();
        let mut probes = Vec::new();
        let mut writes: Vec<DecodedWrite> = Vec::new();
        let mut last_end = 0usize;
        let mut fields: Vec<_> =
            s.annotations.iter().filter(|a| !matches!(a.kind, AnnKind::Hash | AnnKind::Loc)).collect();
        if fields.windows(2).any(|w| w[0].offset > w[1].offset) {
            return Err(derr("field annotations unsorted"));
        }
        // Whether the previous key announced a version annotation (VER_FOLLOWS) that has not come yet.
        let mut ver_expected = false;
        for a in fields.drain(..) {
            if ver_expected && !matches!(a.kind, AnnKind::RdVer | AnnKind::SyncVer) {
                return Err(derr("a version announced by VER_FOLLOWS is missing"));
            }
            if matches!(a.kind, AnnKind::RdKey | AnnKind::SyncKey) {
                ver_expected = a.flags & VER_FOLLOWS != 0;
            }
            if usize::from(a.offset) < last_end {
                return Err(derr("field regions overlap"));
            }
            last_end = usize::from(a.offset) + usize::from(a.len_or_id);
            let bytes = region(a.offset, a.len_or_id)?;
            match a.kind {
                AnnKind::Sig => {
                    let slot = slots.get_mut(usize::from(a.ns_or_slot)).ok_or_else(|| derr("sig slot"))?;
                    slot.signature = Some(bytes);
                }
                AnnKind::RdKey => reads.push(DecodedRead {
                    ns: a.ns_or_slot,
                    seq: a.seq,
                    key: bytes,
                    version: (a.flags & RD_HAS_VER != 0).then_some((0, 0)),
                }),
                AnnKind::RdVer => {
                    let r = reads.last_mut().ok_or_else(|| derr("RD_VER without RD_KEY"))?;
                    if !std::mem::take(&mut ver_expected) || r.seq != a.seq {
                        return Err(derr("RD_VER does not follow an RD_KEY flagged VER_FOLLOWS"));
                    }
                    r.version = Some(parse_version(&bytes)?);
                }
                AnnKind::WrKey | AnnKind::SyncKey => writes.push(DecodedWrite {
                    ns: a.ns_or_slot,
                    key: bytes,
                    delete: a.flags & WR_DELETE != 0,
                    version: None,
                }),
                AnnKind::SyncVer => {
                    if !std::mem::take(&mut ver_expected) {
                        return Err(derr("SYNC_VER not announced by VER_FOLLOWS"));
                    }
                    let w = writes.last_mut().ok_or_else(|| derr("SYNC_VER without SYNC_KEY"))?;
                    w.version = Some(parse_version(&bytes)?);
                }
                AnnKind::Probe => {
                    probes.push(DecodedProbe { ns: a.ns_or_slot, seq: a.seq, key: bytes, require: a.flags })
                }
                AnnKind::Hash | AnnKind::Loc => {}
            }
        }
        Ok(DecodedSection {
            section_type: s.header.section_type,
            block: s.header.block,
            index: s.header.index,
            last: s.header.flags & FLAG_LAST_TX != 0,
            info: s.info,
            payload,
            slots,
            reads,
            probes,
            writes,
        })
    }
}
