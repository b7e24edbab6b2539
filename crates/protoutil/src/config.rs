//! Config blocks and the last-config index of a block (Fabric 2.5's `protoutil.IsConfigBlock` in
//! `protoutil/commonutils.go` and `protoutil.GetLastConfigIndexFromBlock` in `protoutil/blockutils.go`).

use ferrofabric_protos::common::{
    Block, BlockMetadataIndex, ChannelHeader, Envelope, HeaderType, LastConfig, Metadata, OrdererBlockMetadata, Payload,
};
use prost::Message;

use crate::error::MetadataError;

/// Whether `block` is a config block, with Fabric 2.5's rule (`protoutil.IsConfigBlock`): its FIRST envelope
/// decodes down to a channel header of type CONFIG. Anything that does not decode (no data, no envelope, no
/// payload header) is not a config block; no error, no panic.
///
/// Fabric 2.5 also answers true for the system channel's ORDERER_TRANSACTION type; there is no system channel
/// here (channels are joined through channel participation), so that type never reaches a block and is not
/// accepted. The rule does not look at the number of envelopes: the orderer's block cutter always cuts a config
/// transaction into a block of its own, and the orderer checks that shape where it relies on it (see
/// [`sole_config_envelope`]).
pub fn is_config_block(block: &Block) -> bool {
    let Some(first) = block.data.as_ref().and_then(|d| d.data.first()) else { return false };
    let Ok(env) = Envelope::decode(first.clone()) else { return false };
    is_config_envelope(&env)
}

/// Whether an envelope's channel header type is CONFIG (the per-envelope half of [`is_config_block`]).
pub fn is_config_envelope(env: &Envelope) -> bool {
    let Ok(payload) = Payload::decode(env.payload.clone()) else { return false };
    let Some(header) = payload.header else { return false };
    ChannelHeader::decode(header.channel_header).is_ok_and(|h| h.r#type == HeaderType::Config as i32)
}

/// The CONFIG envelope of a config block that holds exactly that one envelope, else `None`: the shape the orderer
/// writes (its block cutter isolates every config transaction) and requires of a block it takes its channel
/// configuration from (a join block, the last config block of a ledger it opens, a config block it commits). A
/// block [`is_config_block`] accepts that carries further envelopes is refused here.
pub fn sole_config_envelope(block: &Block) -> Option<Envelope> {
    let [raw] = block.data.as_ref()?.data.as_slice() else { return None };
    let env = Envelope::decode(raw.clone()).ok()?;
    is_config_envelope(&env).then_some(env)
}

/// The index of the last config block recorded in `block`'s metadata (Fabric's
/// `protoutil.GetLastConfigIndexFromBlock`): `OrdererBlockMetadata.last_config` in the value of the SIGNATURES
/// slot (Fabric ≥ 1.4.1), else, when that value is empty, the legacy `LastConfig` of the LAST_CONFIG slot. An
/// empty slot decodes as an empty message (index 0), as in Fabric.
///
/// Errors: no metadata, no slot at the index needed, or a slot, its `OrdererBlockMetadata` or its `LastConfig`
/// does not decode (the message names which).
pub fn last_config_index(block: &Block) -> Result<u64, MetadataError> {
    let md = block.metadata.as_ref().ok_or(MetadataError::NoMetadata)?;
    let slot = |index: BlockMetadataIndex, name: &'static str| -> Result<Metadata, MetadataError> {
        let raw = md.metadata.get(index as usize).ok_or(MetadataError::NoSlot(name))?;
        Metadata::decode(raw.clone()).map_err(|source| MetadataError::Slot { slot: name, source })
    };
    let signatures = slot(BlockMetadataIndex::Signatures, "SIGNATURES")?;
    if signatures.value.is_empty() {
        let last = slot(BlockMetadataIndex::LastConfig, "LAST_CONFIG")?;
        let lc = LastConfig::decode(last.value).map_err(MetadataError::LastConfig)?;
        return Ok(lc.index);
    }
    let obm = OrdererBlockMetadata::decode(signatures.value).map_err(MetadataError::OrdererBlockMetadata)?;
    Ok(obm.last_config.map_or(0, |l| l.index))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::block::{orderer_metadata, signature_value};
    use bytes::Bytes;
    use ferrofabric_protos::common::{BlockData, BlockMetadata, Header};

    fn envelope(kind: HeaderType) -> Bytes {
        let ch = ChannelHeader { r#type: kind as i32, ..ChannelHeader::default() };
        let payload = Payload {
            header: Some(Header { channel_header: Bytes::from(ch.encode_to_vec()), signature_header: Bytes::new() }),
            data: Bytes::new(),
        };
        Bytes::from(Envelope { payload: Bytes::from(payload.encode_to_vec()), signature: Bytes::new() }.encode_to_vec())
    }

    fn block(envs: Vec<Bytes>) -> Block {
        Block { header: None, data: Some(BlockData { data: envs }), metadata: None }
    }

    #[test]
    fn the_first_envelope_decides_and_the_orderer_shape_wants_exactly_one() {
        let config = block(vec![envelope(HeaderType::Config)]);
        assert!(is_config_block(&config));
        assert!(sole_config_envelope(&config).is_some());
        let two = block(vec![envelope(HeaderType::Config), envelope(HeaderType::EndorserTransaction)]);
        assert!(is_config_block(&two));
        assert!(sole_config_envelope(&two).is_none());
        let normal = block(vec![envelope(HeaderType::EndorserTransaction), envelope(HeaderType::Config)]);
        assert!(!is_config_block(&normal));
        assert!(!is_config_block(&block(Vec::new())));
        assert!(!is_config_block(&block(vec![Bytes::from_static(&[0xff, 0xff])])));
        assert!(!is_config_block(&Block::default()));
    }

    #[test]
    fn last_config_reads_signatures_then_legacy_slot() {
        let mut b =
            Block { metadata: Some(orderer_metadata(signature_value(7, b""), Vec::new(), 3)), ..Block::default() };
        assert_eq!(last_config_index(&b).unwrap(), 7);
        b.metadata.as_mut().unwrap().metadata[0] = Bytes::new();
        assert_eq!(last_config_index(&b).unwrap(), 3);
        assert!(last_config_index(&Block::default()).is_err());
        let short = BlockMetadata { metadata: vec![Bytes::new()] };
        assert!(last_config_index(&Block { metadata: Some(short), ..Block::default() }).is_err());
        let bad = BlockMetadata { metadata: vec![Bytes::from_static(&[0xff])] };
        assert!(last_config_index(&Block { metadata: Some(bad), ..Block::default() }).is_err());
    }
}
