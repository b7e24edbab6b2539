//! The BMac sender: turns a Fabric block into sections (hw/DESIGN.md §2). It manages the identity cache
//! (16-bit ids, `ID_SYNC` sections) and the namespace ids, and it writes `STATE_SYNC` sections for host-path
//! blocks.
//!
//! The annotations point into the original marshaled bytes. They are found with [`crate::pbscan`], which
//! walks Fabric's message layout (`common.Envelope` → … → `kvrwset.KVRWSet`, see `fabric-protos`
//! `common/common.proto`, `peer/transaction.proto`, `peer/proposal_response.proto`, `ledger/rwset`).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::{msp_principal::Classification, msp_role::MspRoleType, MspPrincipal, MspRole};
use ferrofabric_protoutil::block_header_bytes;
use ferrofabric_state::{Update, UpdateBatch};
use prost::Message as _;

use crate::host::TxPlan;
use crate::pbscan::{Message, ScanError};
use crate::policy::org_index;
use crate::wire::{
    AnnKind, Annotation, L7Header, Section, SectionType, TxInfo, FLAG_LAST_TX, ID_BYTES, ID_SLOTS, LOC_SIGNER, MAX_ANN,
    MAX_ENDS, MAX_FIELD_ANN, RD_HAS_VER, VER_FOLLOWS, WR_DELETE,
};

/// Why a block (or part of it) cannot be encoded: the block goes host-path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot encode for the hardware: {0}")]
pub struct EncodeError(pub String);

impl From<ScanError> for EncodeError {
    fn from(e: ScanError) -> Self {
        EncodeError(e.to_string())
    }
}

fn enc_err(s: impl Into<String>) -> EncodeError {
    EncodeError(s.into())
}

/// An identity held in the hardware cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedIdentity {
    /// 16-bit id: org (8) | role mask (4) | node (4).
    pub id: u16,
    /// Cache slot.
    pub slot: u8,
    /// Org index (rank of the MSP ID).
    pub org: u8,
    /// Role mask: bit 3 admin, 2 orderer, 1 peer, 0 client.
    pub roles: u8,
    /// Public key X (big-endian).
    pub qx: [u8; 32],
    /// Public key Y (big-endian).
    pub qy: [u8; 32],
    /// The marshaled `SerializedIdentity`.
    pub bytes: Bytes,
}

/// Sender-side state of the identity cache.
#[derive(Default)]
struct IdentityCache {
    by_bytes: HashMap<Bytes, Option<CachedIdentity>>,
    nodes: HashMap<(u8, u8), u8>,
    next_slot: usize,
    pending: Vec<Section>,
    flush_next: bool,
}

/// The BMac sender.
pub struct Encoder {
    config: Arc<ChannelConfig>,
    mspids: Vec<String>,
    ids: IdentityCache,
    namespaces: HashMap<String, u8>,
}

/// A tx's annotations and payload under construction.
struct TxBuild {
    locs: Vec<(usize, Range<usize>, CachedIdentity, Option<u8>)>,
    ann: Vec<Annotation>,
    extension: Vec<u8>,
}

fn u16_of(v: usize, what: &str) -> Result<u16, EncodeError> {
    u16::try_from(v).map_err(|_| enc_err(format!("{what} {v} does not fit 16 bits")))
}

fn ptr(kind: AnnKind, flags: u8, ns_or_slot: u8, seq: u8, r: &Range<usize>) -> Result<Annotation, EncodeError> {
    if r.is_empty() {
        return Err(enc_err(format!("zero-length {kind:?} region")));
    }
    Ok(Annotation {
        kind,
        flags,
        ns_or_slot,
        seq,
        offset: u16_of(r.start, "offset")?,
        len_or_id: u16_of(r.len(), "length")?,
    })
}

impl Encoder {
    /// A sender for a channel with this configuration.
    pub fn new(config: Arc<ChannelConfig>) -> Self {
        let mspids = config.msp_manager().mspids().map(str::to_owned).collect();
        Encoder { config, mspids, ids: IdentityCache::default(), namespaces: HashMap::new() }
    }

    /// Installs a new channel configuration: identities may have changed validity, so the hardware cache is
    /// flushed and refilled on use.
    pub fn set_config(&mut self, config: Arc<ChannelConfig>) {
        *self = Encoder { namespaces: std::mem::take(&mut self.namespaces), ..Encoder::new(config) };
        self.ids.flush_next = true;
    }

    /// The channel's MSP IDs (org numbering).
    pub fn mspids(&self) -> &[String] {
        &self.mspids
    }

    /// The id of namespace `ns`, assigned on first use.
    ///
    /// Errors: more than 255 namespaces.
    pub fn namespace_id(&mut self, ns: &str) -> Result<u8, EncodeError> {
        if let Some(id) = self.namespaces.get(ns) {
            return Ok(*id);
        }
        let id = u8::try_from(self.namespaces.len() + 1).map_err(|_| enc_err("more than 255 namespaces"))?;
        self.namespaces.insert(ns.to_owned(), id);
        Ok(id)
    }

    /// Looks up (or admits) an identity. `None`: not cacheable (does not validate, unknown MSP, cache full).
    pub fn identity(&mut self, bytes: &Bytes) -> Option<CachedIdentity> {
        if let Some(c) = self.ids.by_bytes.get(bytes) {
            return c.clone();
        }
        let c = self.admit(bytes);
        self.ids.by_bytes.insert(bytes.clone(), c.clone());
        c
    }

    fn admit(&mut self, bytes: &Bytes) -> Option<CachedIdentity> {
        if bytes.len() > ID_BYTES || self.ids.next_slot >= ID_SLOTS {
            return None;
        }
        let msps = self.config.msp_manager();
        let id = msps.deserialize_identity(bytes).ok()?;
        id.validate().ok()?;
        let org = org_index(&self.mspids, id.mspid())?;
        let mut roles = 0u8;
        for (bit, role) in
            [(3, MspRoleType::Admin), (2, MspRoleType::Orderer), (1, MspRoleType::Peer), (0, MspRoleType::Client)]
        {
            let p = MspPrincipal {
                principal_classification: Classification::Role as i32,
                principal: Bytes::from(
                    MspRole { msp_identifier: id.mspid().to_owned(), role: role as i32 }.encode_to_vec(),
                ),
            };
            if msps.satisfies_principal(&id, &p).is_ok() {
                roles |= 1 << bit;
            }
        }
        let node = self.ids.nodes.entry((org, roles)).or_insert(0);
        if *node >= 16 {
            return None;
        }
        let idv = (u16::from(org) << 8) | (u16::from(roles) << 4) | u16::from(*node);
        *node += 1;
        let point = id.public_key().sec1_bytes();
        let mut qx = [0u8; 32];
        let mut qy = [0u8; 32];
        qx.copy_from_slice(&point[1..33]);
        qy.copy_from_slice(&point[33..65]);
        let slot = self.ids.next_slot as u8;
        self.ids.next_slot += 1;
        let c = CachedIdentity { id: idv, slot, org, roles, qx, qy, bytes: bytes.clone() };
        let mut payload = Vec::with_capacity(64 + bytes.len());
        payload.extend_from_slice(&qx);
        payload.extend_from_slice(&qy);
        payload.extend_from_slice(bytes);
        let len = bytes.len() as u16;
        let flush = u8::from(std::mem::take(&mut self.ids.flush_next));
        let l = len.to_be_bytes();
        self.ids.pending.push(Section {
            header: L7Header {
                section_type: SectionType::IdSync,
                index: idv,
                block: 0,
                flags: 0,
                n_ann: 0,
                payload_size: payload.len() as u16,
            },
            info: [slot, flush, l[0], l[1], 0, 0, 0, 0],
            annotations: Vec::new(),
            payload: Bytes::from(payload),
        });
        Some(c)
    }

    /// Encodes a hardware-path block: pending `ID_SYNC`s, `HEADER`, `METADATA`, one `TX` per transaction.
    /// `plans` are the host's plans of its transactions ([`crate::host::TxPlan`]); `block_policy` is the
    /// BlockValidation policy id.
    ///
    /// Errors: the block cannot take the hardware path (a limit of hw/DESIGN.md §2.7, a layout the annotations
    /// cannot express, an uncacheable creator). Identities admitted on the way stay admitted; their `ID_SYNC`s go
    /// out with the next block that is encoded.
    pub fn encode_block(
        &mut self,
        arena: &BlockArena,
        plans: &[TxPlan],
        block_policy: u8,
    ) -> Result<Vec<Section>, EncodeError> {
        let number = arena.number();
        let n = arena.txs().len();
        if n == 0 || n != plans.len() || n > crate::wire::MAX_TX {
            return Err(enc_err(format!("block with {n} transactions")));
        }
        let mut body = Vec::with_capacity(n + 2);
        let hdr = block_header_bytes(arena.header());
        body.push(Section {
            header: L7Header {
                section_type: SectionType::Header,
                index: n as u16,
                block: number,
                flags: 0,
                n_ann: 0,
                payload_size: hdr.len() as u16,
            },
            info: [0; 8],
            annotations: Vec::new(),
            payload: Bytes::from(hdr.clone()),
        });
        // METADATA goes right after HEADER (ours): block_verify then runs while the transactions are validated,
        // and the KV store can wait for its verdict before committing the block's first writes.
        body.push(self.encode_metadata(arena, hdr.len(), block_policy)?);
        for (i, (tx, plan)) in arena.txs().iter().zip(plans).enumerate() {
            let mut s = self.encode_tx(tx.envelope_bytes(), plan).map_err(|e| enc_err(format!("tx {i}: {}", e.0)))?;
            s.header.index = i as u16;
            s.header.block = number;
            s.header.flags = if i + 1 == n { FLAG_LAST_TX } else { 0 };
            body.push(s);
        }
        let mut out = std::mem::take(&mut self.ids.pending);
        out.extend(body);
        for s in &out {
            s.to_frame().map_err(|e| enc_err(e.to_string()))?;
        }
        Ok(out)
    }

    /// Pending `ID_SYNC` sections (identities admitted but not yet sent), drained.
    pub fn take_pending_syncs(&mut self) -> Vec<Section> {
        std::mem::take(&mut self.ids.pending)
    }

    fn encode_metadata(&mut self, arena: &BlockArena, hdr_len: usize, policy: u8) -> Result<Section, EncodeError> {
        let raw =
            arena.metadata().metadata.first().cloned().ok_or_else(|| enc_err("block without SIGNATURES metadata"))?;
        let m = Message::new(&raw, 0)?;
        let sigs = m.repeated(2)?;
        if sigs.len() != 1 {
            return Err(enc_err(format!("{} block signatures (the hardware checks exactly one)", sigs.len())));
        }
        let value = m.bytes(1)?;
        let ms = m.sub(&sigs[0])?;
        if ms.has(3) {
            return Err(enc_err("BFT identifier header"));
        }
        let sh = ms.bytes(1)?.ok_or_else(|| enc_err("signature without a signature header"))?;
        let sig = ms.bytes(2)?.ok_or_else(|| enc_err("empty block signature"))?;
        let shm = ms.sub(&sh)?;
        let creator = shm.bytes(1)?;
        let mut b = TxBuild { locs: Vec::new(), ann: Vec::new(), extension: Vec::new() };
        if let Some(c) = &creator {
            self.locate(&mut b, &raw, c, Some(0))?;
        }
        let mut hash_regions = Vec::new();
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            hash_regions.push(v);
        }
        if !sh.is_empty() {
            hash_regions.push(sh);
        }
        hash_regions.push(raw.len()..raw.len() + hdr_len);
        for r in &hash_regions {
            b.ann.push(ptr(AnnKind::Hash, 0, 0, 0, r)?);
        }
        b.ann.push(ptr(AnnKind::Sig, 0, 0, 0, &sig)?);
        let mut s = finish(&raw, b)?;
        s.header.section_type = SectionType::Metadata;
        s.header.block = arena.number();
        s.info = [policy, 0, 0, 0, 0, 0, 0, 0];
        Ok(s)
    }

    /// Adds the locator of the identity at `r` (absolute range in `raw`) if it can be cached.
    fn locate(
        &mut self,
        b: &mut TxBuild,
        raw: &Bytes,
        r: &Range<usize>,
        signer_slot: Option<u8>,
    ) -> Result<Option<CachedIdentity>, EncodeError> {
        if r.is_empty() {
            return Ok(None);
        }
        let bytes = raw.slice(r.clone());
        let Some(c) = self.identity(&bytes) else { return Ok(None) };
        b.locs.push((r.start, r.clone(), c.clone(), signer_slot));
        Ok(Some(c))
    }

    /// One `TX` section (block number, index and flags are filled in by the caller).
    fn encode_tx(&mut self, env: &Bytes, plan: &TxPlan) -> Result<Section, EncodeError> {
        let mut b = TxBuild { locs: Vec::new(), ann: Vec::new(), extension: Vec::new() };
        let mut info = TxInfo { phantom_seq: 0xff, ..TxInfo::default() };
        info.pre_code = plan.pre_code;
        info.post_code = plan.post_code;
        info.policy_id = plan.policy_id;
        info.dup_tag = plan.dup_tag;
        if plan.needs_hardware() {
            self.annotate_endorser_tx(env, plan, &mut b, &mut info)?;
        } else if plan.pre_code == 0 {
            // The hardware still checks the creator signature before reporting the host's post_code.
            let w = walk(env)?;
            self.annotate_creator(env, &w, &mut b, true)?;
        } else {
            // The hardware only reports the host's code; identities are still compressed where the layout allows.
            let mut tmp = TxBuild { locs: Vec::new(), ann: Vec::new(), extension: Vec::new() };
            if self.locate_identities(env, &mut tmp).is_ok() {
                b.locs = tmp.locs;
            }
        }
        let mut s = finish(env, b)?;
        s.info = info.to_bytes();
        Ok(s)
    }

    /// Locators only (for transactions the hardware does not check).
    fn locate_identities(&mut self, env: &Bytes, b: &mut TxBuild) -> Result<(), EncodeError> {
        let w = walk(env)?;
        for r in [&w.creator, &w.action_creator].into_iter().flatten() {
            self.locate(b, env, r, None)?;
        }
        for e in &w.endorsements {
            if let Some(r) = &e.endorser {
                self.locate(b, env, r, None)?;
            }
        }
        Ok(())
    }

    /// The creator's locator, hash region (`Envelope.payload`) and signature: slot 0.
    /// `with_endorsers`: also compress the endorser identities (when no endorsement slot will point at them).
    fn annotate_creator(
        &mut self,
        env: &Bytes,
        w: &Walk,
        b: &mut TxBuild,
        with_endorsers: bool,
    ) -> Result<(), EncodeError> {
        let creator = w.creator.clone().ok_or_else(|| enc_err("no creator"))?;
        if self.locate(b, env, &creator, Some(0))?.is_none() {
            return Err(enc_err("the creator identity cannot be cached"));
        }
        if let Some(r) = &w.action_creator {
            self.locate(b, env, r, None)?;
        }
        for e in w.endorsements.iter().filter(|_| with_endorsers) {
            if let Some(r) = &e.endorser {
                self.locate(b, env, r, None)?;
            }
        }
        b.ann.push(ptr(AnnKind::Hash, 0, 0, 0, &w.payload)?);
        b.ann.push(ptr(AnnKind::Sig, 0, 0, 0, &w.signature)?);
        Ok(())
    }

    fn annotate_endorser_tx(
        &mut self,
        env: &Bytes,
        plan: &TxPlan,
        b: &mut TxBuild,
        info: &mut TxInfo,
    ) -> Result<(), EncodeError> {
        let w = walk(env)?;
        if !w.complete {
            return Err(enc_err("the transaction's layers cannot be annotated"));
        }
        if w.endorsements.len() > MAX_ENDS {
            return Err(enc_err(format!("{} endorsements (at most {MAX_ENDS})", w.endorsements.len())));
        }
        self.annotate_creator(env, &w, b, false)?;
        let prp = w.prp.clone().ok_or_else(|| enc_err("no proposal response payload"))?;
        for (j, e) in w.endorsements.iter().enumerate() {
            let slot = (j + 1) as u8;
            b.ann.push(ptr(AnnKind::Hash, 0, slot, 0, &prp)?);
            if let Some(r) = &e.endorser {
                b.ann.push(ptr(AnnKind::Hash, 0, slot, 0, r)?);
                self.locate(b, env, r, Some(slot))?;
            }
            if let Some(s) = e.signature.as_ref().filter(|s| !s.is_empty()) {
                b.ann.push(ptr(AnnKind::Sig, 0, slot, 0, s)?);
            }
        }
        // Read/write sets in Fabric's MVCC order: per namespace reads, then range queries.
        let mut seq: usize = 0;
        let mut next_seq = || -> Result<u8, EncodeError> {
            let s = u8::try_from(seq).ok().filter(|s| *s < 0xff).ok_or_else(|| enc_err("more than 254 MVCC checks"))?;
            seq += 1;
            Ok(s)
        };
        let base = env.len();
        for (i, ns) in w.namespaces.iter().enumerate() {
            let ns_id = self.namespace_id(&ns.name)?;
            for r in &ns.reads {
                let s = next_seq()?;
                let ver = r.version.as_ref().filter(|v| !v.is_empty());
                let flags = if r.has_version { RD_HAS_VER } else { 0 } | if ver.is_some() { VER_FOLLOWS } else { 0 };
                b.ann.push(ptr(AnnKind::RdKey, flags, ns_id, s, &r.key)?);
                if let Some(v) = ver {
                    b.ann.push(ptr(AnnKind::RdVer, 0, ns_id, s, v)?);
                }
            }
            let ranges = plan.ranges.get(i).map(Vec::as_slice).unwrap_or(&[]);
            if ranges.len() != ns.range_queries {
                return Err(enc_err("range plan does not match the read/write set"));
            }
            for rp in ranges {
                let s = next_seq()?;
                if !rp.static_ok && info.phantom_seq == 0xff {
                    info.phantom_seq = s;
                }
                for p in &rp.probes {
                    let start = base + b.extension.len();
                    b.extension.extend_from_slice(&p.key);
                    b.ann.push(ptr(AnnKind::Probe, p.require, ns_id, s, &(start..start + p.key.len()))?);
                }
            }
            // One annotation per distinct key; deleted if any write to it deletes (Fabric's keyOps).
            let mut keys: BTreeMap<&[u8], (Range<usize>, bool)> = BTreeMap::new();
            for wr in &ns.writes {
                let k = &env[wr.key.clone()];
                let e = keys.entry(k).or_insert((wr.key.clone(), false));
                e.1 |= wr.delete;
            }
            let mut writes: Vec<(Range<usize>, bool)> = keys.into_values().collect();
            writes.sort_by_key(|(r, _)| r.start);
            for (r, del) in writes {
                b.ann.push(ptr(AnnKind::WrKey, if del { WR_DELETE } else { 0 }, ns_id, 0, &r)?);
            }
        }
        Ok(())
    }

    /// `STATE_SYNC` sections carrying the public writes of a host-path block (versions and deletions).
    ///
    /// Errors: a namespace id cannot be assigned, or a key is empty or too long for one section.
    pub fn encode_state_sync(&mut self, block: u64, updates: &UpdateBatch) -> Result<Vec<Section>, EncodeError> {
        const PER_SECTION: usize = MAX_ANN / 2;
        let mut out = Vec::new();
        let mut payload: Vec<u8> = Vec::new();
        let mut ann = Vec::new();
        let budget = crate::wire::MAX_FRAME - crate::wire::ETH_IP_UDP_LEN - 24 - MAX_ANN * 8;
        let flush = |payload: &mut Vec<u8>, ann: &mut Vec<Annotation>, out: &mut Vec<Section>| {
            if ann.is_empty() {
                return;
            }
            out.push(Section {
                header: L7Header {
                    section_type: SectionType::StateSync,
                    index: 0,
                    block,
                    flags: 0,
                    n_ann: ann.len() as u8,
                    payload_size: payload.len() as u16,
                },
                info: [0; 8],
                annotations: std::mem::take(ann),
                payload: Bytes::from(std::mem::take(payload)),
            });
        };
        for (k, u) in updates.iter() {
            if !k.collection.is_empty() || k.namespace.is_empty() {
                continue;
            }
            let ns = self.namespace_id(&k.namespace)?;
            let h = u.version();
            let ver = ferrofabric_protos::kvrwset::Version { block_num: h.block_num, tx_num: h.tx_num }.encode_to_vec();
            if k.key.is_empty() || ver.is_empty() || k.key.len() + ver.len() > budget {
                return Err(enc_err("state-sync entry with an empty key, version (0,0) or a huge key"));
            }
            if ann.len() + 2 > PER_SECTION * 2 || payload.len() + k.key.len() + ver.len() > budget {
                flush(&mut payload, &mut ann, &mut out);
            }
            let del = matches!(u, Update::Delete(_));
            let ks = payload.len();
            payload.extend_from_slice(&k.key);
            let flags = VER_FOLLOWS | if del { WR_DELETE } else { 0 };
            ann.push(ptr(AnnKind::SyncKey, flags, ns, 0, &(ks..payload.len()))?);
            let vs = payload.len();
            payload.extend_from_slice(&ver);
            ann.push(ptr(AnnKind::SyncVer, 0, ns, 0, &(vs..payload.len()))?);
        }
        flush(&mut payload, &mut ann, &mut out);
        let mut all = std::mem::take(&mut self.ids.pending);
        all.extend(out);
        Ok(all)
    }
}

/// Strips the located identities and assembles the section (type `TX`; the caller adjusts the header).
fn finish(raw: &Bytes, mut b: TxBuild) -> Result<Section, EncodeError> {
    b.locs.sort_by_key(|l| l.0);
    let mut payload = Vec::with_capacity(raw.len());
    let mut cursor = 0;
    let mut ann = Vec::new();
    for (start, r, c, signer) in &b.locs {
        if *start < cursor {
            return Err(enc_err("overlapping identities"));
        }
        payload.extend_from_slice(&raw[cursor..*start]);
        ann.push(Annotation {
            kind: AnnKind::Loc,
            flags: if signer.is_some() { LOC_SIGNER } else { 0 },
            ns_or_slot: signer.unwrap_or(0),
            seq: 0,
            offset: u16_of(payload.len(), "locator offset")?,
            len_or_id: c.id,
        });
        cursor = r.end;
    }
    payload.extend_from_slice(&raw[cursor..]);
    payload.extend_from_slice(&b.extension);
    let fields = b.ann.iter().filter(|a| !matches!(a.kind, AnnKind::Hash | AnnKind::Loc)).count();
    if fields > MAX_FIELD_ANN {
        return Err(enc_err(format!("{fields} field annotations (at most {MAX_FIELD_ANN})")));
    }
    // A slot's regions are hashed in stream order, which must be the order of the signed message.
    for slot in 0..crate::wire::SLOTS as u8 {
        let mut end = 0usize;
        for a in b.ann.iter().filter(|a| a.kind == AnnKind::Hash && a.ns_or_slot == slot) {
            if usize::from(a.offset) < end {
                return Err(enc_err("hash regions out of message order"));
            }
            end = usize::from(a.offset) + usize::from(a.len_or_id);
        }
    }
    ann.extend(b.ann);
    if ann.len() > MAX_ANN {
        return Err(enc_err(format!("{} annotations (at most {MAX_ANN})", ann.len())));
    }
    // Each class sorted by offset (hw/DESIGN.md §2.4); the sort is stable so equal offsets keep their order.
    ann.sort_by_key(|a| (class_of(a), a.offset));
    Ok(Section {
        header: L7Header {
            section_type: SectionType::Tx,
            index: 0,
            block: 0,
            flags: 0,
            n_ann: ann.len() as u8,
            payload_size: u16_of(payload.len(), "payload size")?,
        },
        info: [0; 8],
        annotations: ann,
        payload: Bytes::from(payload),
    })
}

/// Annotation class: 0 locators, 1 field pointers, 2 + slot for hash regions.
pub(crate) fn class_of(a: &Annotation) -> u16 {
    match a.kind {
        AnnKind::Loc => 0,
        AnnKind::Hash => 2 + u16::from(a.ns_or_slot),
        _ => 1,
    }
}

/// Positions found in an envelope.
#[derive(Default)]
struct Walk {
    payload: Range<usize>,
    signature: Range<usize>,
    creator: Option<Range<usize>>,
    action_creator: Option<Range<usize>>,
    prp: Option<Range<usize>>,
    endorsements: Vec<EndorsementPos>,
    namespaces: Vec<NsPos>,
    /// Whether every layer down to the read/write sets was walked.
    complete: bool,
}

struct EndorsementPos {
    endorser: Option<Range<usize>>,
    signature: Option<Range<usize>>,
}

struct ReadPos {
    key: Range<usize>,
    has_version: bool,
    version: Option<Range<usize>>,
}

struct WritePos {
    key: Range<usize>,
    delete: bool,
}

struct NsPos {
    name: String,
    reads: Vec<ReadPos>,
    range_queries: usize,
    writes: Vec<WritePos>,
}

/// Walks an endorser transaction envelope. Errors: the envelope, payload or header layers are missing or not in
/// a simple layout. Problems below them end the walk early with `complete` false.
fn walk(env: &Bytes) -> Result<Walk, EncodeError> {
    let need = |r: Option<Range<usize>>, what: &str| r.ok_or_else(|| enc_err(format!("missing {what}")));
    let e = Message::new(env, 0)?;
    let mut w = Walk {
        payload: need(e.bytes(1)?, "Envelope.payload")?,
        signature: e.bytes(2)?.unwrap_or(0..0),
        ..Walk::default()
    };
    let p = e.sub(&w.payload)?;
    let hdr = p.sub(&need(p.bytes(1)?, "Payload.header")?)?;
    if let Some(sh) = hdr.bytes(2)? {
        w.creator = hdr.sub(&sh)?.bytes(1)?;
    }
    w.complete = walk_transaction(env, &p, &mut w).is_ok();
    Ok(w)
}

/// The part of [`walk`] below `Payload.data`.
fn walk_transaction(env: &Bytes, p: &Message<'_>, w: &mut Walk) -> Result<(), EncodeError> {
    let Some(data) = p.bytes(2)? else { return Err(enc_err("no payload data")) };
    let t = p.sub(&data)?;
    let actions = t.repeated(1)?;
    let Some(a0) = actions.first() else { return Err(enc_err("incomplete transaction")) };
    let a = t.sub(a0)?;
    if let Some(ash) = a.bytes(1)? {
        w.action_creator = a.sub(&ash)?.bytes(1)?;
    }
    let Some(cap_r) = a.bytes(2)? else { return Err(enc_err("incomplete transaction")) };
    let cap = a.sub(&cap_r)?;
    let Some(cea_r) = cap.bytes(2)? else { return Err(enc_err("incomplete transaction")) };
    let cea = cap.sub(&cea_r)?;
    w.prp = cea.bytes(1)?;
    for er in cea.repeated(2)? {
        let em = cea.sub(&er)?;
        w.endorsements.push(EndorsementPos { endorser: em.bytes(1)?, signature: em.bytes(2)? });
    }
    let Some(prp) = w.prp.clone() else { return Err(enc_err("incomplete transaction")) };
    let prpm = cea.sub(&prp)?;
    let Some(ext) = prpm.bytes(2)? else { return Err(enc_err("incomplete transaction")) };
    let ca = prpm.sub(&ext)?;
    let Some(res) = ca.bytes(1)? else { return Err(enc_err("incomplete transaction")) };
    let txrw = ca.sub(&res)?;
    for nsr in txrw.repeated(2)? {
        let nsm = txrw.sub(&nsr)?;
        let name_r = nsm.bytes(1)?.unwrap_or(0..0);
        let name = std::str::from_utf8(&env[name_r]).map_err(|_| enc_err("namespace is not UTF-8"))?.to_owned();
        let mut ns = NsPos { name, reads: Vec::new(), range_queries: 0, writes: Vec::new() };
        if let Some(kvr) = nsm.bytes(2)? {
            let kv = nsm.sub(&kvr)?;
            for rr in kv.repeated(1)? {
                let rm = kv.sub(&rr)?;
                let key = rm.bytes(1)?.unwrap_or(rr.start..rr.start);
                let version = rm.bytes(2)?;
                if let Some(v) = &version {
                    check_version(&env[v.clone()])?;
                }
                ns.reads.push(ReadPos { key, has_version: version.is_some(), version });
            }
            ns.range_queries = kv.repeated(2)?.len();
            for wr in kv.repeated(3)? {
                let wm = kv.sub(&wr)?;
                let key = wm.bytes(1)?.unwrap_or(wr.start..wr.start);
                let mut delete = false;
                for f in wm.fields().iter().filter(|f| f.number == 2) {
                    if f.wire_type != 0 {
                        return Err(enc_err("KVWrite.is_delete is not a varint"));
                    }
                    delete = f.varint != 0;
                }
                ns.writes.push(WritePos { key, delete });
            }
        }
        w.namespaces.push(ns);
    }
    Ok(())
}

/// The hardware's varint decoder accepts a `Version` made of fields 1 and 2 (varints), each at most once, in
/// order.
fn check_version(v: &[u8]) -> Result<(), EncodeError> {
    let m = Message::new(v, 0)?;
    let mut last = 0;
    for f in m.fields() {
        if f.wire_type != 0 || f.number <= last || f.number > 2 {
            return Err(enc_err("a Version with an unusual layout"));
        }
        last = f.number;
    }
    Ok(())
}
