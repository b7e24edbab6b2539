//! The reference model of the RTL: the protocol processor (through [`Decoder`]) and the block processor, in
//! plain Rust, with the same semantics as `hw/rtl` (hw/DESIGN.md §3). It checks the design (host plans, wire
//! protocol and hardware rules) against the software validator before any RTL runs, and it gives the cocotb
//! tests their expected values.
//!
//! ECDSA here is the `p256` crate's prehash verification plus the engine's range and low-S rules. DER decoding
//! is the hardware parser's subset of Go's `encoding/asn1` ([`der_signature`]).

use std::collections::{HashMap, HashSet};

use p256::ecdsa::signature::hazmat::PrehashVerifier;
use p256::ecdsa::{Signature, VerifyingKey};
use p256::EncodedPoint;
use sha2::{Digest, Sha256};

use ferrofabric_bmac::{DecodeError, DecodedSection, Decoder, PolicyProgram};
// The Fabric TxValidationCode values the hardware produces itself (hw/gen/regmap.toml).
use ferrofabric_bmac::regs::{
    CODE_BAD_CREATOR_SIGNATURE as BAD_CREATOR_SIGNATURE, CODE_DUPLICATE_TXID as DUPLICATE_TXID,
    CODE_ENDORSEMENT_POLICY_FAILURE as ENDORSEMENT_POLICY_FAILURE, CODE_MVCC_READ_CONFLICT as MVCC_READ_CONFLICT,
    CODE_PHANTOM_READ_CONFLICT as PHANTOM_READ_CONFLICT, CODE_VALID as VALID,
};
use ferrofabric_bmac::wire::{
    Section, SectionType, POLICY_BYTES, POLICY_FLUSH, POLICY_IDS, PROBE_DELETED, PROBE_NOT_PUT, PROBE_UNTOUCHED,
};

/// P-256 group order n, big-endian.
const N: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbc, 0xe6, 0xfa,
    0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];
/// floor(n / 2): the largest S Fabric accepts.
const HALF_N: [u8; 32] = [
    0x7f, 0xff, 0xff, 0xff, 0x80, 0x00, 0x00, 0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xde, 0x73, 0x7d,
    0x56, 0xd3, 0x8b, 0xcf, 0x42, 0x79, 0xdc, 0xe5, 0x61, 0x7e, 0x31, 0x92, 0xa8,
];

/// The DER parser of the protocol processor: `SEQUENCE { INTEGER r, INTEGER s, ... } ...` with Go's length and
/// integer rules, restricted to what can still verify. Returns `(r, s)` as 32-byte big-endian values, or `None`
/// when the signature cannot verify: malformed for Go, negative, or a magnitude above 32 bytes (then ≥ n).
pub(crate) fn der_signature(sig: &[u8]) -> Option<([u8; 32], [u8; 32])> {
    if sig.len() < 2 || sig[0] != 0x30 {
        return None;
    }
    let (len, hdr) = match sig[1] {
        l if l < 0x80 => (usize::from(l), 2),
        0x81 => {
            let l = usize::from(*sig.get(2)?);
            if l < 0x80 {
                return None;
            }
            (l, 3)
        }
        0x82 => {
            let (h, l) = (*sig.get(2)?, *sig.get(3)?);
            if h == 0 {
                return None;
            }
            ((usize::from(h) << 8) | usize::from(l), 4)
        }
        _ => return None,
    };
    if len > sig.len() - hdr {
        return None;
    }
    let body = &sig[hdr..hdr + len];
    let int = |b: &[u8]| -> Option<([u8; 32], usize)> {
        if b.len() < 2 || b[0] != 0x02 {
            return None;
        }
        let l = usize::from(b[1]);
        if l == 0 || l > 33 || l + 2 > b.len() {
            return None;
        }
        let c = &b[2..2 + l];
        if c.len() > 1 && ((c[0] == 0 && c[1] & 0x80 == 0) || (c[0] == 0xff && c[1] & 0x80 != 0)) {
            return None;
        }
        if c[0] & 0x80 != 0 || (l == 33 && c[0] != 0) {
            return None;
        }
        let mut v = [0u8; 32];
        let m = if l == 33 { &c[1..] } else { c };
        v[32 - m.len()..].copy_from_slice(m);
        Some((v, 2 + l))
    };
    let (r, used) = int(body)?;
    let (s, _) = int(&body[used..])?;
    Some((r, s))
}

/// The ECDSA engine's verdict: range checks, low S, then the curve equation.
pub(crate) fn ecdsa_verify(qx: &[u8; 32], qy: &[u8; 32], e: &[u8; 32], r: &[u8; 32], s: &[u8; 32]) -> bool {
    let zero = [0u8; 32];
    if *r == zero || *s == zero || *r >= N || *s >= N || *s > HALF_N {
        return false;
    }
    let point = EncodedPoint::from_affine_coordinates(qx.into(), qy.into(), false);
    let Ok(key) = VerifyingKey::from_encoded_point(&point) else { return false };
    let Ok(sig) = Signature::from_scalars(*r, *s) else { return false };
    key.verify_prehash(e, &sig).is_ok()
}

#[derive(Clone, Copy)]
struct KvEntry {
    blk: u64,
    txn: u64,
    deleted: bool,
}

/// A block's result as the hardware reports it in `reg_map`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelBlock {
    /// Block number.
    pub number: u64,
    /// Whether the orderer signature satisfied BlockValidation.
    pub block_valid: bool,
    /// One TxValidationCode per transaction.
    pub codes: Vec<u8>,
    /// ECDSA verifications run (all engines).
    pub ecdsa_runs: u64,
}

/// The block-processor model.
pub struct Model {
    dec: Decoder,
    /// The policy table (`policy_table`): entry `id` once a `POLICY_SYNC` filled it.
    policies: Vec<Option<PolicyProgram>>,
    kv: HashMap<(u8, [u8; 32]), KvEntry>,
    current: Option<Building>,
}

impl Default for Model {
    fn default() -> Self {
        Model::new()
    }
}

struct Building {
    number: u64,
    block_valid: Option<bool>,
    codes: Vec<u8>,
    dup_seen: HashSet<u16>,
    ecdsa_runs: u64,
}

fn key_of(ns: u8, key: &[u8]) -> (u8, [u8; 32]) {
    (ns, Sha256::digest(key).into())
}

impl Model {
    /// A model after reset: empty identity cache, policy table and KV store.
    pub fn new() -> Self {
        Model { dec: Decoder::new(), policies: vec![None; POLICY_IDS], kv: HashMap::new(), current: None }
    }

    /// Policy `id` on the per-org bits `sat`, as `ends_policy_evaluator` runs it: an empty entry (or id 0) is never
    /// satisfied.
    fn evaluate(&self, id: u8, sat: &[u8]) -> bool {
        self.policies.get(usize::from(id)).and_then(Option::as_ref).is_some_and(|p| p.evaluate(sat))
    }

    /// Verifies slot `slot` of a decoded section: signer cached, signature parsed, ECDSA.
    fn verify_slot(&self, d: &DecodedSection, slot: usize, runs: &mut u64) -> Option<(u8, u8)> {
        let sd = d.slots.get(slot)?;
        let id = sd.signer?;
        let entry = self.dec.cached(id)?;
        let (r, s) = der_signature(sd.signature.as_ref()?)?;
        let e = sd.digest?;
        *runs += 1;
        ecdsa_verify(&entry.qx, &entry.qy, &e, &r, &s).then_some(((id >> 8) as u8, ((id >> 4) & 0xf) as u8))
    }

    /// Feeds one section; returns the block's result when its last transaction is done.
    ///
    /// Errors: the section does not decode, or arrives out of order (a `TX` before `HEADER`/`METADATA`).
    pub fn feed(&mut self, s: &Section) -> Result<Option<ModelBlock>, DecodeError> {
        if s.header.section_type == SectionType::Header {
            self.current = Some(Building {
                number: s.header.block,
                block_valid: None,
                codes: Vec::new(),
                dup_seen: HashSet::new(),
                ecdsa_runs: 0,
            });
        }
        let Some(d) = self.dec.decode(s)? else {
            if s.header.section_type == SectionType::PolicySync {
                if s.info[0] & POLICY_FLUSH != 0 {
                    self.policies.iter_mut().for_each(|p| *p = None);
                }
                let id = usize::from(s.header.index);
                if (1..POLICY_IDS).contains(&id) {
                    let mut program = [0u8; POLICY_BYTES];
                    program.copy_from_slice(&s.payload);
                    self.policies[id] = Some(PolicyProgram(program));
                }
            }
            return Ok(None);
        };
        match d.section_type {
            SectionType::StateSync => {
                for w in &d.writes {
                    let (blk, txn) = w.version.unwrap_or((0, 0));
                    self.kv.insert(key_of(w.ns, &w.key), KvEntry { blk, txn, deleted: w.delete });
                }
                Ok(None)
            }
            SectionType::Metadata => {
                let mut runs = 0;
                let ok = self.verify_slot(&d, 0, &mut runs).is_some_and(|(org, roles)| {
                    let mut sat = vec![0u8; usize::from(org) + 1];
                    sat[usize::from(org)] = 0x10 | roles;
                    self.evaluate(d.info[0], &sat)
                });
                let b = self.current.as_mut().ok_or_else(|| DecodeError("METADATA before HEADER".into()))?;
                b.block_valid = Some(ok);
                b.ecdsa_runs += runs;
                Ok(None)
            }
            SectionType::Tx => {
                let code = self.tx_code(&d)?;
                let b = self.current.as_mut().ok_or_else(|| DecodeError("TX before HEADER".into()))?;
                b.codes.push(code);
                if !d.last {
                    return Ok(None);
                }
                let b = self.current.take().ok_or_else(|| DecodeError("no block".into()))?;
                Ok(Some(ModelBlock {
                    number: b.number,
                    block_valid: b.block_valid.unwrap_or(false),
                    codes: b.codes,
                    ecdsa_runs: b.ecdsa_runs,
                }))
            }
            SectionType::Header | SectionType::IdSync | SectionType::PolicySync => Ok(None),
        }
    }

    fn tx_code(&mut self, d: &DecodedSection) -> Result<u8, DecodeError> {
        let info = d.tx_info();
        let mut runs = 0;
        let mut code = VALID;
        if info.pre_code != VALID {
            code = info.pre_code;
        } else if self.verify_slot(d, 0, &mut runs).is_none() {
            code = BAD_CREATOR_SIGNATURE;
        } else if info.post_code != VALID {
            code = info.post_code;
        } else if info.policy_id != 0 {
            // ends_scheduler: verify in order, stop as soon as the policy holds.
            let mut sat = vec![0u8; 256];
            let mut ok = self.evaluate(info.policy_id, &sat);
            for slot in 1..d.slots.len() {
                if ok {
                    break;
                }
                if d.slots[slot].digest.is_none() {
                    continue;
                }
                if let Some((org, roles)) = self.verify_slot(d, slot, &mut runs) {
                    sat[usize::from(org)] |= 0x10 | roles;
                }
                ok = self.evaluate(info.policy_id, &sat);
            }
            if !ok {
                code = ENDORSEMENT_POLICY_FAILURE;
            }
        }
        let b = self.current.as_mut().ok_or_else(|| DecodeError("TX before HEADER".into()))?;
        b.ecdsa_runs += runs;
        let blk = b.number;
        let block_valid = b.block_valid.unwrap_or(false);
        if code == VALID && info.dup_tag != 0 && !b.dup_seen.insert(info.dup_tag) {
            code = DUPLICATE_TXID;
        }
        if code == VALID {
            // MVCC: the failing check with the lowest seq decides the code.
            let mut fail: Option<(u8, u8)> = None;
            let mut note = |seq: u8, c: u8| {
                if fail.is_none_or(|(s, _)| seq < s) {
                    fail = Some((seq, c));
                }
            };
            if info.phantom_seq != 0xff {
                note(info.phantom_seq, PHANTOM_READ_CONFLICT);
            }
            for r in &d.reads {
                let e = self.kv.get(&key_of(r.ns, &r.key)).copied();
                let conflict = match e {
                    Some(e) if e.blk == blk => true,
                    Some(e) if !e.deleted => r.version != Some((e.blk, e.txn)),
                    _ => r.version.is_some(),
                };
                if conflict {
                    note(r.seq, MVCC_READ_CONFLICT);
                }
            }
            for p in &d.probes {
                let e = self.kv.get(&key_of(p.ns, &p.key)).copied();
                let state = match e {
                    Some(e) if e.blk == blk => {
                        if e.deleted {
                            PROBE_DELETED
                        } else {
                            0
                        }
                    }
                    _ => PROBE_UNTOUCHED,
                };
                let ok = match p.require {
                    PROBE_UNTOUCHED => state == PROBE_UNTOUCHED,
                    PROBE_DELETED => state == PROBE_DELETED,
                    PROBE_NOT_PUT => state != 0,
                    _ => false,
                };
                if !ok {
                    note(p.seq, PHANTOM_READ_CONFLICT);
                }
            }
            if let Some((_, c)) = fail {
                code = c;
            }
        }
        if code == VALID && block_valid {
            let txn = u64::from(d.index);
            for w in &d.writes {
                self.kv.insert(key_of(w.ns, &w.key), KvEntry { blk, txn, deleted: w.delete });
            }
        }
        Ok(code)
    }
}
