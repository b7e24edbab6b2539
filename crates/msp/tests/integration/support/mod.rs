//! Shared test helpers: fixture paths, fixture ledger decoding, and a tiny
//! DER/X.509 builder for synthetic PKIs (revocation, intermediates, EKU).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use ferrofabric_msp::{Msp, MspManager};
use ferrofabric_protos::common::{Block, ConfigEnvelope, Envelope, Payload};
use ferrofabric_protos::msp::{FabricMspConfig, FabricNodeOUs, FabricOuIdentifier, MspConfig, SerializedIdentity};
use ferrofabric_testkit::fabric_fixture;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use prost::Message;

pub(crate) fn crypto() -> PathBuf {
    fabric_fixture("crypto")
}

pub(crate) fn org1_dir() -> PathBuf {
    crypto().join("peerOrganizations/org1.example.com")
}

pub(crate) fn org2_dir() -> PathBuf {
    crypto().join("peerOrganizations/org2.example.com")
}

pub(crate) fn orderer_org_dir() -> PathBuf {
    crypto().join("ordererOrganizations/example.com")
}

/// The signcert PEM of an MSP directory.
pub(crate) fn signcert(msp_dir: &Path) -> Vec<u8> {
    let dir = msp_dir.join("signcerts");
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    std::fs::read(file).unwrap()
}

pub(crate) fn serialized(mspid: &str, pem: &[u8]) -> Vec<u8> {
    SerializedIdentity { mspid: mspid.into(), id_bytes: Bytes::copy_from_slice(pem) }.encode_to_vec()
}

/// All blocks of `orderer-blocks.bin`.
pub(crate) fn orderer_blocks() -> Vec<Block> {
    let data = std::fs::read(fabric_fixture("orderer-blocks.bin")).unwrap();
    let mut blocks = Vec::new();
    let mut off = 0;
    while off < data.len() {
        let len = u64::from_le_bytes(data[off..off + 8].try_into().unwrap()) as usize;
        off += 8;
        blocks.push(Block::decode(Bytes::copy_from_slice(&data[off..off + len])).unwrap());
        off += len;
    }
    blocks
}

/// The `MSP` values of every organisation in the genesis config block:
/// `(group path, MSPConfig)`.
pub(crate) fn genesis_msp_configs() -> Vec<(String, MspConfig)> {
    let raw = std::fs::read(fabric_fixture("genesis.block")).unwrap();
    let block = Block::decode(Bytes::from(raw)).unwrap();
    let env = Envelope::decode(block.data.unwrap().data[0].clone()).unwrap();
    let payload = Payload::decode(env.payload).unwrap();
    let cfg = ConfigEnvelope::decode(payload.data).unwrap();
    let channel = cfg.config.unwrap().channel_group.unwrap();
    let mut out = Vec::new();
    for section in ["Application", "Orderer"] {
        let group = &channel.groups[section];
        for (org, g) in &group.groups {
            let v = &g.values["MSP"];
            out.push((format!("{section}/{org}"), MspConfig::decode(v.value.clone()).unwrap()));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// An `MspManager` over the MSPs of the genesis block.
pub(crate) fn genesis_manager() -> MspManager {
    MspManager::new(genesis_msp_configs().iter().map(|(_, c)| Msp::from_config(c).unwrap()).collect())
}

/// An `MspManager` over the three fixture MSP folders.
pub(crate) fn dir_manager() -> MspManager {
    MspManager::new(vec![
        Msp::from_msp_dir("Org1MSP", &org1_dir().join("msp")).unwrap(),
        Msp::from_msp_dir("Org2MSP", &org2_dir().join("msp")).unwrap(),
        Msp::from_msp_dir("OrdererMSP", &orderer_org_dir().join("msp")).unwrap(),
    ])
}

// ---------------------------------------------------------------- DER ---

pub(crate) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else if len < 0x100 {
        out.extend_from_slice(&[0x81, len as u8]);
    } else {
        out.extend_from_slice(&[0x82, (len >> 8) as u8, len as u8]);
    }
    out.extend_from_slice(content);
    out
}

pub(crate) fn seq(parts: &[&[u8]]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

/// Reads one TLV: (tag, header length, content length).
pub(crate) fn read_tlv(b: &[u8]) -> (u8, usize, usize) {
    let tag = b[0];
    if b[1] < 0x80 {
        (tag, 2, b[1] as usize)
    } else {
        let n = (b[1] & 0x7f) as usize;
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | b[2 + i] as usize;
        }
        (tag, 2 + n, len)
    }
}

/// The elements inside a constructed TLV.
pub(crate) fn children(b: &[u8]) -> Vec<Vec<u8>> {
    let (_, h, l) = read_tlv(b);
    let mut rest = &b[h..h + l];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (_, h, l) = read_tlv(rest);
        out.push(rest[..h + l].to_vec());
        rest = &rest[h + l..];
    }
    out
}

fn unsigned_int(mag: &[u8]) -> Vec<u8> {
    let start = mag.iter().position(|&b| b != 0).unwrap_or(mag.len());
    let mut body = mag[start..].to_vec();
    if body.is_empty() || body[0] & 0x80 != 0 {
        body.insert(0, 0);
    }
    tlv(0x02, &body)
}

/// DER ECDSA signature from magnitudes.
pub(crate) fn ecdsa_der(r: &[u8], s: &[u8]) -> Vec<u8> {
    seq(&[&unsigned_int(r), &unsigned_int(s)])
}

/// (r, s) magnitudes of a DER ECDSA signature.
pub(crate) fn ecdsa_parts(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let parts = children(der);
    let strip = |t: &Vec<u8>| {
        let (_, h, _) = read_tlv(t);
        let v = &t[h..];
        v[v.iter().position(|&b| b != 0).unwrap_or(v.len())..].to_vec()
    };
    (strip(&parts[0]), strip(&parts[1]))
}

pub(crate) const P256_N: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbc, 0xe6, 0xfa,
    0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];

/// n - s for P-256 (s given as a magnitude <= 32 bytes).
pub(crate) fn n_minus(s: &[u8]) -> Vec<u8> {
    let mut padded = [0u8; 32];
    padded[32 - s.len()..].copy_from_slice(s);
    let mut out = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let mut v = P256_N[i] as i16 - padded[i] as i16 - borrow;
        borrow = 0;
        if v < 0 {
            v += 256;
            borrow = 1;
        }
        out[i] = v as u8;
    }
    out.to_vec()
}

pub(crate) fn is_high_s(s: &[u8]) -> bool {
    let mut padded = [0u8; 32];
    padded[32 - s.len()..].copy_from_slice(s);
    // n/2 < s  <=>  2s > n
    let mut twice = [0u8; 33];
    let mut carry = 0u16;
    for i in (0..32).rev() {
        let v = padded[i] as u16 * 2 + carry;
        twice[i + 1] = v as u8;
        carry = v >> 8;
    }
    twice[0] = carry as u8;
    let mut n33 = [0u8; 33];
    n33[1..].copy_from_slice(&P256_N);
    twice > n33
}

/// Standard base64 PEM.
pub(crate) fn pem(label: &str, der: &[u8]) -> Vec<u8> {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = Vec::new();
    for c in der.chunks(3) {
        let v = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        b64.push(A[(v >> 18) as usize & 63]);
        b64.push(A[(v >> 12) as usize & 63]);
        b64.push(if c.len() > 1 { A[(v >> 6) as usize & 63] } else { b'=' });
        b64.push(if c.len() > 2 { A[v as usize & 63] } else { b'=' });
    }
    let mut out = format!("-----BEGIN {label}-----\n").into_bytes();
    for line in b64.chunks(64) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.extend_from_slice(format!("-----END {label}-----\n").as_bytes());
    out
}

/// Raw base64 body of the first PEM block (test-side decoder).
pub(crate) fn pem_der(pem_text: &[u8]) -> Vec<u8> {
    let text = std::str::from_utf8(pem_text).unwrap();
    let body: String = text
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    let mut out = Vec::new();
    let mut buf = 0u32;
    let mut bits = 0;
    for c in body.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue,
        };
        buf = buf << 6 | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    out
}

// --------------------------------------------------------------- X.509 ---

const OID_ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const OID_EC_PUBKEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

/// A deterministic test key.
pub(crate) fn key(seed: u8) -> SigningKey {
    let mut bytes = [0x11u8; 32];
    bytes[31] = seed;
    SigningKey::from_bytes(&bytes.into()).unwrap()
}

pub(crate) fn sign_der(key: &SigningKey, msg: &[u8]) -> Vec<u8> {
    let sig: Signature = key.sign(msg);
    let sig = sig.normalize_s().unwrap_or(sig);
    sig.to_der().as_bytes().to_vec()
}

pub(crate) fn name(cn: &str, ous: &[&str]) -> Vec<u8> {
    let mut rdns = Vec::new();
    rdns.extend(tlv(0x31, &seq(&[&tlv(0x06, &[0x55, 0x04, 0x0a]), &tlv(0x13, b"example.com")])));
    for ou in ous {
        rdns.extend(tlv(0x31, &seq(&[&tlv(0x06, &[0x55, 0x04, 0x0b]), &tlv(0x0c, ou.as_bytes())])));
    }
    rdns.extend(tlv(0x31, &seq(&[&tlv(0x06, &[0x55, 0x04, 0x03]), &tlv(0x0c, cn.as_bytes())])));
    tlv(0x30, &rdns)
}

fn ext(oid: &[u8], critical: bool, value: &[u8]) -> Vec<u8> {
    let mut parts = vec![tlv(0x06, oid)];
    if critical {
        parts.push(tlv(0x01, &[0xff]));
    }
    parts.push(tlv(0x04, value));
    tlv(0x30, &parts.concat())
}

pub(crate) fn ski_of(key: &SigningKey) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(key.verifying_key().to_encoded_point(false).as_bytes()).to_vec()
}

/// What a synthetic certificate looks like.
pub(crate) struct CertSpec<'a> {
    pub subject: Vec<u8>,
    pub issuer: Vec<u8>,
    pub serial: u64,
    pub not_before: &'a str,
    pub not_after: &'a str,
    pub key: &'a SigningKey,
    pub issuer_key: &'a SigningKey,
    pub is_ca: bool,
    /// EKU OIDs (DER contents), none = no extension.
    pub eku: Option<Vec<Vec<u8>>>,
}

pub(crate) const EKU_CLIENT_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02];
pub(crate) const EKU_SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];

/// A DER certificate signed (low-S) by `issuer_key`.
pub(crate) fn make_cert(spec: &CertSpec<'_>) -> Vec<u8> {
    let alg = seq(&[&tlv(0x06, OID_ECDSA_SHA256)]);
    let point = spec.key.verifying_key().to_encoded_point(false);
    let mut bits = vec![0u8];
    bits.extend_from_slice(point.as_bytes());
    let spki = seq(&[&seq(&[&tlv(0x06, OID_EC_PUBKEY), &tlv(0x06, OID_P256)]), &tlv(0x03, &bits)]);
    let mut exts = Vec::new();
    let ku: &[u8] = if spec.is_ca { &[0x03, 0x02, 0x01, 0x06] } else { &[0x03, 0x02, 0x07, 0x80] };
    exts.extend(ext(&[0x55, 0x1d, 0x0f], true, ku));
    let bc = if spec.is_ca { seq(&[&tlv(0x01, &[0xff])]) } else { seq(&[]) };
    exts.extend(ext(&[0x55, 0x1d, 0x13], true, &bc));
    if spec.is_ca {
        exts.extend(ext(&[0x55, 0x1d, 0x0e], false, &tlv(0x04, &ski_of(spec.key))));
    }
    exts.extend(ext(&[0x55, 0x1d, 0x23], false, &seq(&[&tlv(0x80, &ski_of(spec.issuer_key))])));
    if let Some(ekus) = &spec.eku {
        let list: Vec<u8> = ekus.iter().flat_map(|o| tlv(0x06, o)).collect();
        exts.extend(ext(&[0x55, 0x1d, 0x25], false, &tlv(0x30, &list)));
    }
    let tbs = seq(&[
        &tlv(0xa0, &tlv(0x02, &[2])),
        &unsigned_int(&spec.serial.to_be_bytes()),
        &alg,
        &spec.issuer,
        &seq(&[&tlv(0x17, spec.not_before.as_bytes()), &tlv(0x17, spec.not_after.as_bytes())]),
        &spec.subject,
        &spki,
        &tlv(0xa3, &tlv(0x30, &exts)),
    ]);
    let sig = sign_der(spec.issuer_key, &tbs);
    let mut sig_bits = vec![0u8];
    sig_bits.extend_from_slice(&sig);
    seq(&[&tbs, &alg, &tlv(0x03, &sig_bits)])
}

/// Replaces the signature of a certificate DER.
pub(crate) fn with_signature(cert_der: &[u8], sig: &[u8]) -> Vec<u8> {
    let parts = children(cert_der);
    let mut bits = vec![0u8];
    bits.extend_from_slice(sig);
    seq(&[&parts[0], &parts[1], &tlv(0x03, &bits)])
}

/// The signature DER of a certificate.
pub(crate) fn signature_of(cert_der: &[u8]) -> Vec<u8> {
    let parts = children(cert_der);
    let (_, h, _) = read_tlv(&parts[2]);
    parts[2][h + 1..].to_vec()
}

/// A DER CRL issued by `key`, revoking `serials`, with an AKI of `aki`.
pub(crate) fn make_crl(issuer: &[u8], key: &SigningKey, aki: Option<&[u8]>, serials: &[u64]) -> Vec<u8> {
    let alg = seq(&[&tlv(0x06, OID_ECDSA_SHA256)]);
    let revoked: Vec<u8> =
        serials.iter().flat_map(|s| seq(&[&unsigned_int(&s.to_be_bytes()), &tlv(0x17, b"300101000000Z")])).collect();
    let mut parts: Vec<Vec<u8>> =
        vec![tlv(0x02, &[1]), alg.clone(), issuer.to_vec(), tlv(0x17, b"300101000000Z"), tlv(0x17, b"400101000000Z")];
    if !serials.is_empty() {
        parts.push(tlv(0x30, &revoked));
    }
    if let Some(aki) = aki {
        let e = ext(&[0x55, 0x1d, 0x23], false, &seq(&[&tlv(0x80, aki)]));
        parts.push(tlv(0xa0, &tlv(0x30, &e)));
    }
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let tbs = seq(&refs);
    let sig = sign_der(key, &tbs);
    let mut bits = vec![0u8];
    bits.extend_from_slice(&sig);
    seq(&[&tbs, &alg, &tlv(0x03, &bits)])
}

/// A FABRIC `MSPConfig` with NodeOUs (client/peer/admin/orderer, no
/// certifier restriction) unless `node_ous` is false.
pub(crate) fn msp_config(
    name: &str,
    roots: &[Vec<u8>],
    intermediates: &[Vec<u8>],
    admins: &[Vec<u8>],
    crls: &[Vec<u8>],
    node_ous: bool,
) -> MspConfig {
    let ou = |n: &str| Some(FabricOuIdentifier { certificate: Bytes::new(), organizational_unit_identifier: n.into() });
    let pems = |l: &[Vec<u8>]| l.iter().map(|d| Bytes::from(pem("CERTIFICATE", d))).collect();
    let conf = FabricMspConfig {
        name: name.into(),
        root_certs: pems(roots),
        intermediate_certs: pems(intermediates),
        admins: pems(admins),
        revocation_list: crls.iter().map(|c| Bytes::from(pem("X509 CRL", c))).collect(),
        fabric_node_ous: node_ous.then(|| FabricNodeOUs {
            enable: true,
            client_ou_identifier: ou("client"),
            peer_ou_identifier: ou("peer"),
            admin_ou_identifier: ou("admin"),
            orderer_ou_identifier: ou("orderer"),
        }),
        ..Default::default()
    };
    MspConfig { r#type: 0, config: Bytes::from(conf.encode_to_vec()) }
}
