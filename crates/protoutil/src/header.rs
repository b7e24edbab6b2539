//! Block header bytes and hash: Fabric's `protoutil.BlockHeaderBytes` and `protoutil.BlockHeaderHash`
//! (`protoutil/blockutils.go`).

use ferrofabric_protos::common::BlockHeader;
use sha2::{Digest, Sha256};

/// Fabric's `protoutil.BlockHeaderBytes`: the ASN.1 DER encoding of
/// `SEQUENCE { INTEGER number, OCTET STRING previous_hash, OCTET STRING data_hash }`.
/// Its SHA-256 ([`block_header_hash`]) is the block hash that the next block's `previous_hash` carries, and these
/// bytes are the tail of what the orderer signs.
pub fn block_header_bytes(header: &BlockHeader) -> Vec<u8> {
    // INTEGER: minimal big-endian two's complement of a non-negative number.
    let be = header.number.to_be_bytes();
    let skip = be.iter().take_while(|b| **b == 0).count().min(7);
    let mut int = Vec::with_capacity(9);
    if be[skip] & 0x80 != 0 {
        int.push(0);
    }
    int.extend_from_slice(&be[skip..]);

    let mut body = Vec::with_capacity(int.len() + header.previous_hash.len() + header.data_hash.len() + 12);
    der_tlv(&mut body, 0x02, &int);
    der_tlv(&mut body, 0x04, &header.previous_hash);
    der_tlv(&mut body, 0x04, &header.data_hash);
    let mut out = Vec::with_capacity(body.len() + 4);
    der_tlv(&mut out, 0x30, &body);
    out
}

/// SHA-256 of [`block_header_bytes`]: Fabric's `protoutil.BlockHeaderHash`.
pub fn block_header_hash(header: &BlockHeader) -> [u8; 32] {
    Sha256::digest(block_header_bytes(header)).into()
}

fn der_tlv(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    let len = value.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let be = (len as u64).to_be_bytes();
        let skip = be.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (8 - skip) as u8);
        out.extend_from_slice(&be[skip..]);
    }
    out.extend_from_slice(value);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn header(number: u64) -> BlockHeader {
        BlockHeader { number, previous_hash: Bytes::from_static(&[1; 32]), data_hash: Bytes::from_static(&[2; 32]) }
    }

    #[test]
    fn header_der_encodes_small_and_high_bit_numbers_minimally() {
        let b = block_header_bytes(&header(5));
        assert_eq!(&b[..5], &[0x30, 71, 0x02, 1, 5]);
        let b = block_header_bytes(&header(128));
        assert_eq!(&b[2..6], &[0x02, 2, 0, 128]);
        let b = block_header_bytes(&header(0));
        assert_eq!(&b[2..5], &[0x02, 1, 0]);
    }

    #[test]
    fn header_der_uses_long_form_lengths_for_long_hashes() {
        let h = BlockHeader { number: 1, previous_hash: Bytes::from(vec![0; 200]), data_hash: Bytes::new() };
        let b = block_header_bytes(&h);
        assert_eq!(&b[..4], &[0x30, 0x81, 3 + 3 + 200 + 2, 0x02]);
        assert_eq!(&b[5..8], &[1, 0x04, 0x81]);
    }
}
