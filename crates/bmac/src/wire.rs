//! The BMac wire format (hw/DESIGN.md §2): one UDP datagram per section, with the L7 header, the 8-byte section
//! info, annotations and the payload. Every multi-byte field is big-endian.

use bytes::Bytes;

/// UDP destination port of BMac datagrams (ours; hw/DESIGN.md §2.1).
pub const UDP_PORT: u16 = 7063;
/// Largest frame (jumbo frame, without FCS), in bytes.
pub const MAX_FRAME: usize = 9014;
/// Ethernet II + IPv4 (no options) + UDP header bytes.
pub const ETH_IP_UDP_LEN: usize = 42;
/// L7 header bytes.
pub const L7_LEN: usize = 16;
/// Section info bytes.
pub const INFO_LEN: usize = 8;
/// Bytes per annotation.
pub const ANN_LEN: usize = 8;
/// Protocol version carried in the L7 header.
pub const VERSION: u8 = 1;
/// Most annotations one section can carry (`n_ann` is a byte; the RTL's `MAX_ANN` is 64).
pub const MAX_ANN: usize = 64;
/// Most field annotations (reads, versions, writes, probes, signatures) per section (the RTL's field FIFO).
pub const MAX_FIELD_ANN: usize = 48;
/// Most endorsements per transaction the hardware handles (`MAX_ENDS`).
pub const MAX_ENDS: usize = 4;
/// Signature slots: the creator (or orderer) plus the endorsements.
pub const SLOTS: usize = 1 + MAX_ENDS;
/// Bytes of one identity in the hardware cache (`ID_BYTES`).
pub const ID_BYTES: usize = 2048;
/// Slots of the hardware identity cache (`ID_SLOTS`).
pub const ID_SLOTS: usize = 64;
/// Organisations the policy evaluators see (`ORGS`).
pub const ORGS: usize = 8;
/// Most transactions per block the hardware reports (`MAX_TX`).
pub const MAX_TX: usize = 1024;
/// Entries of the hardware policy table (`POL_IDS`); id 0 means "no policy", so ids run from 1 to 31.
pub const POLICY_IDS: usize = 32;
/// Leaves (org, role) of one policy program (`POL_LEAVES`).
pub const POLICY_LEAVES: usize = 8;
/// Threshold gates of one policy program (`POL_GATES`); the root is the last one.
pub const POLICY_GATES: usize = 8;
/// Payload bytes of a `POLICY_SYNC` section (`POL_BYTES`): 2 per leaf, then 3 per gate.
pub const POLICY_BYTES: usize = 2 * POLICY_LEAVES + 3 * POLICY_GATES;
/// `POLICY_SYNC` info byte 0: clear the whole policy table before writing this entry.
pub const POLICY_FLUSH: u8 = 1;

/// Section types (L7 header byte 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SectionType {
    /// Identity-cache fill: `Qx ‖ Qy ‖ SerializedIdentity`.
    IdSync = 0,
    /// `DER(block header)`.
    Header = 1,
    /// One transaction (stripped envelope + probe keys).
    Tx = 2,
    /// The SIGNATURES metadata (stripped); ends the block.
    Metadata = 3,
    /// KV-store versions written by a host-path block.
    StateSync = 4,
    /// Policy-table fill: one policy program under the id in the section index.
    PolicySync = 5,
}

impl SectionType {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => SectionType::IdSync,
            1 => SectionType::Header,
            2 => SectionType::Tx,
            3 => SectionType::Metadata,
            4 => SectionType::StateSync,
            5 => SectionType::PolicySync,
            _ => return None,
        })
    }
}

/// L7 header flag: this is the last `TX` section of the block.
pub const FLAG_LAST_TX: u8 = 1;

/// The 16-byte BMac L7 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L7Header {
    /// Section type.
    pub section_type: SectionType,
    /// Tx index (`TX`), tx count (`HEADER`), identity id (`ID_SYNC`), else 0.
    pub index: u16,
    /// Block number (0 for `ID_SYNC`).
    pub block: u64,
    /// Flags ([`FLAG_LAST_TX`]).
    pub flags: u8,
    /// Number of annotations.
    pub n_ann: u8,
    /// Payload bytes on the wire (stripped).
    pub payload_size: u16,
}

/// Annotation kinds (byte 0 of an annotation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AnnKind {
    /// Locator: insert identity `id` at a stripped offset.
    Loc = 1,
    /// Region hashed into slot `ns_or_slot`.
    Hash = 2,
    /// DER signature of slot `ns_or_slot`.
    Sig = 3,
    /// Read key.
    RdKey = 4,
    /// Read version (`kvrwset.Version` bytes).
    RdVer = 5,
    /// Written key.
    WrKey = 6,
    /// Range-query probe key.
    Probe = 7,
    /// State-sync key.
    SyncKey = 8,
    /// State-sync version.
    SyncVer = 9,
}

impl AnnKind {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => AnnKind::Loc,
            2 => AnnKind::Hash,
            3 => AnnKind::Sig,
            4 => AnnKind::RdKey,
            5 => AnnKind::RdVer,
            6 => AnnKind::WrKey,
            7 => AnnKind::Probe,
            8 => AnnKind::SyncKey,
            9 => AnnKind::SyncVer,
            _ => return None,
        })
    }
}

/// `LOC` flag: the identity signs slot `ns_or_slot`.
pub const LOC_SIGNER: u8 = 1;
/// `RD_KEY` flag: the read carries a version.
pub const RD_HAS_VER: u8 = 1;
/// `RD_KEY` / `SYNC_KEY` flag: a `RD_VER` / `SYNC_VER` annotation follows (the version is not (0, 0)).
pub const VER_FOLLOWS: u8 = 2;
/// `WR_KEY` / `SYNC_KEY` flag: the key is deleted.
pub const WR_DELETE: u8 = 1;
/// `PROBE` requirement: not touched by the block.
pub const PROBE_UNTOUCHED: u8 = 1;
/// `PROBE` requirement: deleted by the block.
pub const PROBE_DELETED: u8 = 2;
/// `PROBE` requirement: not put by the block (untouched or deleted).
pub const PROBE_NOT_PUT: u8 = 3;

/// One 8-byte annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Annotation {
    /// Kind.
    pub kind: AnnKind,
    /// Kind-specific flags.
    pub flags: u8,
    /// Namespace id or signature slot.
    pub ns_or_slot: u8,
    /// Position in Fabric's MVCC check order (reads, probes).
    pub seq: u8,
    /// Offset: stripped for `LOC`, reconstructed for pointers.
    pub offset: u16,
    /// Length (pointers) or identity id (`LOC`).
    pub len_or_id: u16,
}

/// Section info of a `TX` section (hw/DESIGN.md §2.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxInfo {
    /// Code of the checks before the creator signature (0 = VALID).
    pub pre_code: u8,
    /// Code of the checks between the creator signature and VSCC (0 = VALID).
    pub post_code: u8,
    /// Endorsement-policy id in the card's policy table (0 = none).
    pub policy_id: u8,
    /// In-block duplicate-txid group (0 = unique).
    pub dup_tag: u16,
    /// `seq` of the first range query that fails statically (0xFF = none).
    pub phantom_seq: u8,
}

impl TxInfo {
    /// The 8 info bytes.
    pub fn to_bytes(&self) -> [u8; 8] {
        let d = self.dup_tag.to_be_bytes();
        [self.pre_code, self.post_code, self.policy_id, 0, d[0], d[1], self.phantom_seq, 0]
    }

    /// Parses the 8 info bytes.
    pub fn from_bytes(b: &[u8; 8]) -> Self {
        TxInfo {
            pre_code: b[0],
            post_code: b[1],
            policy_id: b[2],
            dup_tag: u16::from_be_bytes([b[4], b[5]]),
            phantom_seq: b[6],
        }
    }
}

/// One section: header, info, annotations and the (stripped) payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// L7 header (`n_ann` and `payload_size` are derived from the fields below when encoding).
    pub header: L7Header,
    /// Section info.
    pub info: [u8; 8],
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Stripped payload.
    pub payload: Bytes,
}

/// A malformed datagram.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The frame is shorter than its headers say.
    #[error("frame truncated: {0}")]
    Truncated(&'static str),
    /// Not an IPv4/UDP datagram for the BMac port.
    #[error("not a BMac datagram: {0}")]
    NotBmac(&'static str),
    /// A field has a value the protocol does not define.
    #[error("bad field: {0}")]
    BadField(&'static str),
    /// The section does not fit in one frame.
    #[error("section of {0} bytes does not fit in a {MAX_FRAME}-byte frame")]
    TooLarge(usize),
}

/// The MAC/IP addresses used in the datagrams (the sender's and the BMac card's; arbitrary but fixed).
const DST_MAC: [u8; 6] = [0x02, 0x42, 0x4d, 0x41, 0x43, 0x01];
const SRC_MAC: [u8; 6] = [0x02, 0x42, 0x4d, 0x41, 0x43, 0x02];
const SRC_IP: [u8; 4] = [10, 0, 0, 2];
const DST_IP: [u8; 4] = [10, 0, 0, 1];

fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in h.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Ethernet frame (without FCS) of a datagram whose UDP payload is `l7`: what the card's MAC hands its protocol
/// processor when the datagram arrives over a real network (§2.1).
///
/// Errors: [`WireError::TooLarge`] when the frame exceeds [`MAX_FRAME`].
pub fn frame_of_l7(l7: &[u8]) -> Result<Vec<u8>, WireError> {
    let total = ETH_IP_UDP_LEN + l7.len();
    if total > MAX_FRAME {
        return Err(WireError::TooLarge(total));
    }
    let mut f = Vec::with_capacity(total);
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (total - 14) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&SRC_IP);
    ip[16..20].copy_from_slice(&DST_IP);
    let csum = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&UDP_PORT.to_be_bytes());
    f.extend_from_slice(&UDP_PORT.to_be_bytes());
    f.extend_from_slice(&((l7.len() + 8) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(l7);
    Ok(f)
}

impl Section {
    /// The complete Ethernet frame (without FCS).
    ///
    /// Errors: [`WireError::TooLarge`] when the frame exceeds [`MAX_FRAME`], [`WireError::BadField`] when there
    /// are more than [`MAX_ANN`] annotations.
    pub fn to_frame(&self) -> Result<Vec<u8>, WireError> {
        frame_of_l7(&self.to_l7()?)
    }

    /// The UDP payload of the section's datagram: L7 header, info, annotations, payload (§2.2–2.5).
    ///
    /// Errors: as [`Section::to_frame`].
    pub fn to_l7(&self) -> Result<Vec<u8>, WireError> {
        if self.annotations.len() > MAX_ANN {
            return Err(WireError::BadField("too many annotations"));
        }
        let l7 = L7_LEN + INFO_LEN + ANN_LEN * self.annotations.len() + self.payload.len();
        if ETH_IP_UDP_LEN + l7 > MAX_FRAME || self.payload.len() > usize::from(u16::MAX) {
            return Err(WireError::TooLarge(ETH_IP_UDP_LEN + l7));
        }
        let mut f = Vec::with_capacity(l7);
        let h = &self.header;
        f.push(VERSION);
        f.push(h.section_type as u8);
        f.extend_from_slice(&h.index.to_be_bytes());
        f.extend_from_slice(&h.block.to_be_bytes());
        f.push(h.flags);
        f.push(self.annotations.len() as u8);
        f.extend_from_slice(&(self.payload.len() as u16).to_be_bytes());
        f.extend_from_slice(&self.info);
        for a in &self.annotations {
            f.push(a.kind as u8);
            f.push(a.flags);
            f.push(a.ns_or_slot);
            f.push(a.seq);
            f.extend_from_slice(&a.offset.to_be_bytes());
            f.extend_from_slice(&a.len_or_id.to_be_bytes());
        }
        f.extend_from_slice(&self.payload);
        Ok(f)
    }

    /// Parses a frame made by [`Section::to_frame`] (or any frame following hw/DESIGN.md §2).
    ///
    /// Errors: [`WireError`] for truncation, a non-BMac frame, an unknown version, section type or annotation kind.
    pub fn from_frame(f: &[u8]) -> Result<Section, WireError> {
        if f.len() < ETH_IP_UDP_LEN + L7_LEN + INFO_LEN {
            return Err(WireError::Truncated("headers"));
        }
        if f[12..14] != [0x08, 0x00] || f[14] != 0x45 || f[23] != 17 {
            return Err(WireError::NotBmac("not IPv4/UDP"));
        }
        if f[36..38] != UDP_PORT.to_be_bytes() {
            return Err(WireError::NotBmac("wrong UDP port"));
        }
        let l7 = &f[ETH_IP_UDP_LEN..];
        if l7[0] != VERSION {
            return Err(WireError::BadField("version"));
        }
        let section_type = SectionType::from_u8(l7[1]).ok_or(WireError::BadField("section type"))?;
        let n_ann = usize::from(l7[13]);
        let payload_size = u16::from_be_bytes([l7[14], l7[15]]);
        let header = L7Header {
            section_type,
            index: u16::from_be_bytes([l7[2], l7[3]]),
            block: u64::from_be_bytes([l7[4], l7[5], l7[6], l7[7], l7[8], l7[9], l7[10], l7[11]]),
            flags: l7[12],
            n_ann: l7[13],
            payload_size,
        };
        let mut info = [0u8; 8];
        info.copy_from_slice(&l7[L7_LEN..L7_LEN + INFO_LEN]);
        let ann_start = L7_LEN + INFO_LEN;
        let pay_start = ann_start + n_ann * ANN_LEN;
        let pay_end = pay_start + usize::from(payload_size);
        if l7.len() < pay_end {
            return Err(WireError::Truncated("annotations or payload"));
        }
        let annotations = l7[ann_start..pay_start]
            .chunks(ANN_LEN)
            .map(|a| {
                Ok(Annotation {
                    kind: AnnKind::from_u8(a[0]).ok_or(WireError::BadField("annotation kind"))?,
                    flags: a[1],
                    ns_or_slot: a[2],
                    seq: a[3],
                    offset: u16::from_be_bytes([a[4], a[5]]),
                    len_or_id: u16::from_be_bytes([a[6], a[7]]),
                })
            })
            .collect::<Result<Vec<_>, WireError>>()?;
        Ok(Section { header, info, annotations, payload: Bytes::copy_from_slice(&l7[pay_start..pay_end]) })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn frame_round_trip_and_ip_checksum() {
        let s = Section {
            header: L7Header {
                section_type: SectionType::Tx,
                index: 7,
                block: 0x0102_0304_0506_0708,
                flags: FLAG_LAST_TX,
                n_ann: 1,
                payload_size: 3,
            },
            info: TxInfo { pre_code: 0, post_code: 8, policy_id: 1, dup_tag: 300, phantom_seq: 0xff }.to_bytes(),
            annotations: vec![Annotation {
                kind: AnnKind::Hash,
                flags: 0,
                ns_or_slot: 2,
                seq: 0,
                offset: 1,
                len_or_id: 2,
            }],
            payload: Bytes::from_static(b"abc"),
        };
        let f = s.to_frame().unwrap();
        assert_eq!(f.len(), 42 + 16 + 8 + 8 + 3);
        assert_eq!(ipv4_checksum(&f[14..34]), 0, "a correct header sums to 0xffff");
        assert_eq!(Section::from_frame(&f).unwrap(), s);
        assert_eq!(TxInfo::from_bytes(&s.info).dup_tag, 300);
        assert!(Section::from_frame(&f[..f.len() - 1]).is_err());
        let mut other_port = f.clone();
        other_port[37] ^= 1;
        assert!(Section::from_frame(&other_port).is_err());
    }

    #[test]
    fn oversized_sections_are_refused() {
        let s = Section {
            header: L7Header { section_type: SectionType::Tx, index: 0, block: 1, flags: 0, n_ann: 0, payload_size: 0 },
            info: [0; 8],
            annotations: vec![],
            payload: Bytes::from(vec![0u8; MAX_FRAME]),
        };
        assert!(matches!(s.to_frame(), Err(WireError::TooLarge(_))));
    }
}
