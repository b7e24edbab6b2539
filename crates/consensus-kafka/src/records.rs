//! The records of Kafka-based ordering as the consume loop reads them: a record of the channel's partition
//! ([`decode_ordered`]) and an envelope out of a record of the payload topic ([`decode_payload_batch`],
//! [`payload_envelope`]). Pure functions of the record's bytes, so every orderer reads a record alike; no input
//! makes them panic (fuzz target `kafka_records`).

use bytes::Bytes;
use ferrofabric_protos::orderer::kafka_message::Type;
use ferrofabric_protos::orderer::kafka_message_regular::Class;
use ferrofabric_protos::orderer::{
    KafkaMessage, KafkaMessageRegular, KafkaPayload, KafkaPayloadBatch, PayloadReference,
};
use prost::Message as _;

use crate::error::KafkaError;

/// A record of the channel's partition (a `KafkaMessage`).
#[derive(Debug, Clone, PartialEq)]
pub enum OrderedRecord {
    /// `KafkaMessageConnect`: posted by an orderer when it starts; no effect.
    Connect,
    /// `KafkaMessageTimeToCut`: cut block `block_number` if it is the next one.
    TimeToCut {
        /// The number of the block to cut.
        block_number: u64,
    },
    /// `KafkaMessageRegular`: one or more messages to order.
    Regular(Regular),
}

/// A `KafkaMessageRegular`: its messages in the order they were placed.
#[derive(Debug, Clone, PartialEq)]
pub struct Regular {
    /// NORMAL or CONFIG; UNKNOWN for 0 or a value Fabric does not define.
    pub class: Class,
    /// The channel config sequence the messages were checked at.
    pub config_seq: u64,
    /// Non-zero for a re-posting: the partition offset of the first posting.
    pub original_offset: i64,
    /// One message for `payload` or `reference`; as many as `references` lists, each held aside.
    pub messages: Vec<Posted>,
}

/// One message of a regular record.
#[derive(Debug, Clone, PartialEq)]
pub enum Posted {
    /// The marshaled envelope itself (Fabric 1.4).
    Inline(Bytes),
    /// Where the envelope is held aside in the payload topic.
    Aside(PayloadReference),
}

/// Decodes a record of the channel's partition.
///
/// Errors (the record is skipped, by every orderer alike): not a `KafkaMessage`; no known type; a regular
/// record with both `reference` and `references`; a CONFIG record with `references` (config messages travel
/// alone).
pub fn decode_ordered(raw: Bytes) -> Result<OrderedRecord, KafkaError> {
    let message = KafkaMessage::decode(raw).map_err(KafkaError::NotKafkaMessage)?;
    match message.r#type {
        None => Err(KafkaError::UnknownType),
        Some(Type::Connect(_)) => Ok(OrderedRecord::Connect),
        Some(Type::TimeToCut(t)) => Ok(OrderedRecord::TimeToCut { block_number: t.block_number }),
        Some(Type::Regular(r)) => {
            let class = Class::try_from(r.class).unwrap_or(Class::Unknown);
            let messages = match (r.reference, r.references.is_empty()) {
                (Some(_), false) => return Err(KafkaError::ReferenceAndReferences),
                (Some(reference), true) => vec![Posted::Aside(reference)],
                (None, true) => vec![Posted::Inline(r.payload)],
                (None, false) if class == Class::Config => return Err(KafkaError::ConfigWithReferences),
                (None, false) => r.references.into_iter().map(Posted::Aside).collect(),
            };
            Ok(OrderedRecord::Regular(Regular {
                class,
                config_seq: r.config_seq,
                original_offset: r.original_offset,
                messages,
            }))
        }
    }
}

impl Regular {
    /// The record that posts these messages: a single one in `payload` or `reference` (as Fabric 1.4 and
    /// earlier Ferrofabric orderers post them), several in `references`. Several messages are all held aside
    /// (decoding yields an inline message only alone); an inline one among several is left out.
    pub fn to_message(&self) -> KafkaMessageRegular {
        let mut regular = KafkaMessageRegular {
            config_seq: self.config_seq,
            class: self.class as i32,
            original_offset: self.original_offset,
            ..Default::default()
        };
        match self.messages.as_slice() {
            [Posted::Inline(payload)] => regular.payload = payload.clone(),
            [Posted::Aside(reference)] => regular.reference = Some(reference.clone()),
            several => {
                regular.references = several
                    .iter()
                    .filter_map(|p| match p {
                        Posted::Aside(r) => Some(r.clone()),
                        Posted::Inline(_) => None,
                    })
                    .collect()
            }
        }
        regular
    }
}

/// Decodes the value of a payload record written by batching orderers (a `KafkaPayloadBatch`).
///
/// Errors: the value is no `KafkaPayloadBatch`.
pub fn decode_payload_batch(value: Bytes) -> Result<Vec<KafkaPayload>, KafkaError> {
    KafkaPayloadBatch::decode(value).map(|b| b.payloads).map_err(KafkaError::NotBatch)
}

/// The envelope `reference` names in the batch `payloads` (decoded from its record by [`decode_payload_batch`]).
///
/// Errors: the reference has no index, the batch has no entry at its index, or that entry belongs to another
/// transaction.
pub fn batch_entry(payloads: &[KafkaPayload], reference: &PayloadReference) -> Result<Bytes, KafkaError> {
    let index = reference.index.ok_or(KafkaError::NoBatchIndex)?;
    let entry = usize::try_from(index)
        .ok()
        .and_then(|i| payloads.get(i))
        .ok_or(KafkaError::NoBatchEntry { len: payloads.len(), index })?;
    if entry.tx_id != reference.tx_id {
        return Err(KafkaError::WrongBatchEntry {
            index,
            found: entry.tx_id.clone(),
            expected: reference.tx_id.clone(),
        });
    }
    Ok(entry.envelope.clone())
}

/// The envelope `reference` names in the payload record whose key is `key` and value `value` (the record at the
/// reference's partition and offset): with an index, that entry of the batch the value holds; without, the value
/// itself, if the key is the transaction ID.
///
/// Errors: as [`decode_payload_batch`] and [`batch_entry`]; without an index, a key other than the
/// reference's transaction ID.
pub fn payload_envelope(key: &[u8], value: Bytes, reference: &PayloadReference) -> Result<Bytes, KafkaError> {
    if reference.index.is_some() {
        return batch_entry(&decode_payload_batch(value)?, reference);
    }
    if key != reference.tx_id.as_bytes() {
        return Err(KafkaError::WrongRecordKey {
            found: String::from_utf8_lossy(key).into_owned(),
            expected: reference.tx_id.clone(),
        });
    }
    Ok(value)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ferrofabric_protos::orderer::KafkaMessageTimeToCut;

    fn reference(tx_id: &str, index: Option<u32>) -> PayloadReference {
        PayloadReference { tx_id: tx_id.into(), size: 7, partition: 0, offset: 42, index }
    }

    fn encode(regular: KafkaMessageRegular) -> Bytes {
        KafkaMessage { r#type: Some(Type::Regular(regular)) }.encode_to_vec().into()
    }

    #[test]
    fn several_references_round_trip_through_one_record_in_order() {
        let regular = Regular {
            class: Class::Normal,
            config_seq: 3,
            original_offset: 0,
            messages: vec![Posted::Aside(reference("a", Some(0))), Posted::Aside(reference("b", Some(1)))],
        };
        let raw = encode(regular.to_message());
        assert_eq!(decode_ordered(raw).unwrap(), OrderedRecord::Regular(regular));
    }

    #[test]
    fn single_messages_keep_fabric_and_single_reference_encodings() {
        let inline = Regular {
            class: Class::Normal,
            config_seq: 1,
            original_offset: 9,
            messages: vec![Posted::Inline(Bytes::from_static(b"env"))],
        };
        let m = inline.to_message();
        assert_eq!((m.payload.as_ref(), m.reference.is_none(), m.references.is_empty()), (&b"env"[..], true, true));
        assert_eq!(decode_ordered(encode(m)).unwrap(), OrderedRecord::Regular(inline));

        let aside = Regular { messages: vec![Posted::Aside(reference("a", None))], ..regular_normal() };
        let m = aside.to_message();
        assert!(m.reference.is_some() && m.references.is_empty());
        assert_eq!(decode_ordered(encode(m)).unwrap(), OrderedRecord::Regular(aside));
    }

    fn regular_normal() -> Regular {
        Regular { class: Class::Normal, config_seq: 0, original_offset: 0, messages: Vec::new() }
    }

    #[test]
    fn malformed_ordered_records_are_errors_not_panics() {
        assert!(decode_ordered(Bytes::from_static(b"\x00\xffgarbage")).is_err());
        assert!(decode_ordered(KafkaMessage { r#type: None }.encode_to_vec().into()).is_err());
        let both = KafkaMessageRegular {
            reference: Some(reference("a", None)),
            references: vec![reference("b", Some(0))],
            ..Default::default()
        };
        assert!(decode_ordered(encode(both)).is_err());
        let config = KafkaMessageRegular {
            class: Class::Config as i32,
            references: vec![reference("b", Some(0))],
            ..Default::default()
        };
        assert!(decode_ordered(encode(config)).is_err());
        let ttc = KafkaMessage { r#type: Some(Type::TimeToCut(KafkaMessageTimeToCut { block_number: 5 })) };
        assert_eq!(decode_ordered(ttc.encode_to_vec().into()).unwrap(), OrderedRecord::TimeToCut { block_number: 5 });
    }

    #[test]
    fn payload_batch_entry_resolves_only_for_its_transaction_and_index() {
        let batch = KafkaPayloadBatch {
            payloads: vec![
                KafkaPayload { tx_id: "a".into(), envelope: Bytes::from_static(b"A") },
                KafkaPayload { tx_id: "b".into(), envelope: Bytes::from_static(b"B") },
            ],
        };
        let value = Bytes::from(batch.encode_to_vec());
        assert_eq!(payload_envelope(b"", value.clone(), &reference("b", Some(1))).unwrap(), "B");
        assert!(payload_envelope(b"", value.clone(), &reference("a", Some(1))).is_err(), "another transaction's");
        assert!(payload_envelope(b"", value.clone(), &reference("a", Some(2))).is_err(), "past the end");
        assert!(payload_envelope(b"", value.clone(), &reference("a", None)).is_err(), "the key is no tx_id");
        assert!(payload_envelope(b"", Bytes::from_static(b"\xff\xff"), &reference("a", Some(0))).is_err());
        // A record written by a single-payload orderer: the key names the transaction.
        assert_eq!(payload_envelope(b"a", Bytes::from_static(b"A"), &reference("a", None)).unwrap(), "A");
    }
}
