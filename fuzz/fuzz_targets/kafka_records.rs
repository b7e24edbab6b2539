//! Kafka ordering's record decoders on arbitrary bytes, as the consume loop meets them: a record of the channel's
//! partition and a record of the payload topic. Each gives a record or an error, never a panic; a decoded regular
//! record re-encodes (as a re-posting does) to the same messages.
#![no_main]
use bytes::Bytes;
use ferrofabric_consensus_kafka::{self as kafka, OrderedRecord, Posted};
use ferrofabric_protos::orderer::kafka_message::Type;
use ferrofabric_protos::orderer::{KafkaMessage, PayloadReference};
use libfuzzer_sys::fuzz_target;
use prost::Message as _;

fuzz_target!(|data: &[u8]| {
    let raw = Bytes::copy_from_slice(data);
    if let Ok(OrderedRecord::Regular(regular)) = kafka::decode_ordered(raw.clone()) {
        let again = KafkaMessage { r#type: Some(Type::Regular(regular.to_message())) }.encode_to_vec();
        assert_eq!(kafka::decode_ordered(again.into()), Ok(OrderedRecord::Regular(regular.clone())));
        // Its references against the same bytes as their payload record.
        for posted in &regular.messages {
            if let Posted::Aside(reference) = posted {
                let _ = kafka::payload_envelope(data, raw.clone(), reference);
            }
        }
    }
    // The bytes as a payload record, under a batch reference and a keyed one.
    let indexed = PayloadReference {
        tx_id: "tx".into(),
        index: Some(data.first().copied().unwrap_or(0).into()),
        ..Default::default()
    };
    let _ = kafka::payload_envelope(b"", raw.clone(), &indexed);
    let keyed = PayloadReference { tx_id: "tx".into(), ..Default::default() };
    let _ = kafka::payload_envelope(b"tx", raw, &keyed);
});
