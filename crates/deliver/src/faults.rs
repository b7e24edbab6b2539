//! Fault injection: a Deliver server that lies as a Byzantine orderer would, so that the tests can show that a
//! committer refuses what it serves. Inert unless the `deliver-block` fault point (TiKV's fail-rs) is configured,
//! which the `ferrofabric` executable does from `FERROFABRIC_FAILPOINTS`, e.g.
//! `deliver-block=return(alter-data:odd)`.
//!
//! The argument is `FAULT[:odd|:even]`: the fault applies to every block after the genesis block, or only to
//! those of odd or even number. Faults:
//! * `alter-data`: one byte of the first envelope changes, so the data no longer matches the header's data hash;
//! * `drop-signatures`: the SIGNATURES metadata keeps only its first signature, fewer than a BFT quorum.
//!
//! `HEADER_WITH_SIG` answers are made from the faulty block too, as a lying orderer would make them.

use bytes::Bytes;
use ferrofabric_protos::common::{Block, BlockMetadataIndex, Metadata};
use prost::Message;

/// Block `number` as the configured fault makes it (unchanged when no fault is configured, for block 0, or when
/// the block does not decode).
pub(crate) fn served_block(number: u64, bytes: Bytes) -> Bytes {
    match configured() {
        Some(spec) if number > 0 => apply(&spec, number, bytes),
        _ => bytes,
    }
}

/// The `deliver-block` fault point's argument, when it fires.
fn configured() -> Option<String> {
    fail::eval("deliver-block", Option::unwrap_or_default)
}

fn apply(spec: &str, number: u64, bytes: Bytes) -> Bytes {
    let (fault, parity) = spec.split_once(':').unwrap_or((spec, "all"));
    let applies = match parity {
        "odd" => number % 2 == 1,
        "even" => number.is_multiple_of(2),
        _ => true,
    };
    let Ok(mut block) = Block::decode(bytes.clone()) else { return bytes };
    if !applies {
        return bytes;
    }
    match fault {
        "alter-data" => {
            let Some(first) = block.data.as_mut().and_then(|d| d.data.first_mut()) else { return bytes };
            let mut altered = first.to_vec();
            if let Some(last) = altered.last_mut() {
                *last ^= 0x01;
            }
            *first = Bytes::from(altered);
        }
        "drop-signatures" => {
            let Some(slot) =
                block.metadata.as_mut().and_then(|m| m.metadata.get_mut(BlockMetadataIndex::Signatures as usize))
            else {
                return bytes;
            };
            let Ok(mut md) = Metadata::decode(slot.clone()) else { return bytes };
            md.signatures.truncate(1);
            *slot = Bytes::from(md.encode_to_vec());
        }
        _ => return bytes,
    }
    Bytes::from(block.encode_to_vec())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ferrofabric_protos::common::{BlockData, BlockHeader, BlockMetadata, MetadataSignature};

    fn block(number: u64) -> Bytes {
        let signature = MetadataSignature { signature: Bytes::from_static(b"sig"), ..Default::default() };
        let signatures = Metadata { value: Bytes::new(), signatures: vec![signature; 3] };
        let mut metadata = vec![Bytes::new(); 5];
        metadata[0] = Bytes::from(signatures.encode_to_vec());
        Bytes::from(
            Block {
                header: Some(BlockHeader { number, ..Default::default() }),
                data: Some(BlockData { data: vec![Bytes::from_static(b"envelope")] }),
                metadata: Some(BlockMetadata { metadata }),
            }
            .encode_to_vec(),
        )
    }

    #[test]
    fn faults_apply_to_the_blocks_their_parity_names() {
        let altered = Block::decode(apply("alter-data:odd", 3, block(3))).unwrap();
        assert_eq!(altered.data.unwrap().data[0].as_ref(), b"envelopd");
        assert_eq!(apply("alter-data:odd", 4, block(4)), block(4), "even blocks are served as stored");
        let stripped = Block::decode(apply("drop-signatures", 4, block(4))).unwrap();
        let md = Metadata::decode(stripped.metadata.unwrap().metadata[0].clone()).unwrap();
        assert_eq!(md.signatures.len(), 1);
        assert_eq!(apply("unknown", 4, block(4)), block(4));
        assert_eq!(apply("alter-data", 4, Bytes::from_static(b"\xff garbage")), Bytes::from_static(b"\xff garbage"));
    }

    #[test]
    fn without_a_configured_fault_blocks_are_served_as_stored() {
        assert_eq!(served_block(5, block(5)), block(5));
    }
}
