//! Kafka-based ordering (Fabric 1.4 `orderer/consensus/kafka`), with payloads held aside (FastFabric Opt O-I).
//!
//! # Fabric 1.4's scheme
//! Each channel is one Kafka topic (named after the channel) with one partition, partition 0. Every orderer
//! posts what it accepts to that partition and consumes the whole partition in order, so every orderer sees the
//! same sequence of records and cuts the same blocks from it:
//! * `KafkaMessageRegular` carries a message to order with the config sequence it was checked at. A message
//!   checked under an older sequence is re-validated and posted again with `original_offset` set; such
//!   re-postings are made by every orderer, and all but the first are dropped because their original offset
//!   is not newer than `last_original_offset_processed`. A re-validated CONFIG message holds back new messages
//!   at this orderer until its re-posting is ordered (Fabric's `WaitReady`).
//! * `KafkaMessageTimeToCut{block_number: N}` is posted by an orderer whose batch timer fired; the first one for
//!   `N` cuts block `N`, later ones are stale and ignored.
//! * `KafkaMessageConnect` is posted at start and ignored.
//! * Each block carries `KafkaMetadata` in its consenter metadata: the offset of the last record it includes
//!   (`last_offset_persisted`), so a restarted orderer resumes consuming right after its ledger's last block.
//!
//! # Payloads aside (FastFabric Opt O-I)
//! With `Kafka.Payloads: aside` (the default) an orderer first writes the envelope to the channel's *payload
//! topic* (`<channel>_payloads`, several partitions, keyed by transaction ID; `_` cannot occur in a channel
//! name, so no channel's topic can clash with it) and then posts to the ordered partition only a
//! `PayloadReference`: transaction ID, size, and the payload record's partition and offset (~100 bytes instead
//! of the envelope). Broadcast answers SUCCESS once both records are acknowledged by the in-sync replicas
//! (`acks=all`, `min.insync.replicas=2`), so no single orderer or broker crash loses an acknowledged
//! transaction. Every orderer streams the payload topic into an in-memory [`payloads::PayloadStore`] and swaps
//! each reference for its envelope when it consumes it; a reference whose record it has not streamed (it started
//! later, or pruned it) is fetched from Kafka by partition and offset.
//!
//! Why a Kafka topic rather than our cluster gRPC service for the payloads: Kafka already replicates and
//! persists them, so a payload survives the crash of the orderer that received it without a second
//! replication protocol, and a restarted or lagging orderer reads a reference's payload from the same log as
//! everyone else, which keeps every orderer's blocks identical.
//!
//! The value of a reference is a fact of the Kafka log (the record at that partition and offset, if its key is
//! the transaction ID), so every orderer resolves it the same way. A reference whose record does not exist is
//! dropped with an error log by every orderer alike, after a bounded wait when the offset is not written yet.
//! `Kafka.Payloads: inline` posts whole envelopes, as Fabric 1.4 did; every orderer reads both forms.
//!
//! CONFIG messages always travel inline.
//!
//! # Several messages per record (payloads aside)
//! An orderer groups the messages it accepts within a couple of milliseconds, so that the ordered partition (which
//! bounds a Kafka channel) and the payload topic take one record per group: one `KafkaPayloadBatch` record holds
//! their envelopes, then one regular record in the ordered partition lists their references (`references`, each
//! naming its entry of the batch by index), in the order they were placed. Each message is still cut on its own
//! by the block cutter, so a block may end inside such a record; its `KafkaMetadata` then says how many of that
//! record's messages it holds (`next_record_messages_persisted`), and a restarted orderer skips them.
//!
//! The record codecs ([`decode_ordered`], [`payload_envelope`]) build without the `chain` feature (no
//! librdkafka), for the fuzz target.

#[cfg(feature = "chain")]
mod chain;
#[cfg(feature = "chain")]
mod client;
mod error;
#[cfg(feature = "chain")]
mod payloads;
mod records;

#[cfg(feature = "chain")]
use std::sync::Arc;

#[cfg(feature = "chain")]
use ferrofabric_orderer::{
    ChainSupport, Consensus, ConsensusContext, ConsensusError, ConsensusFactory, KafkaConfig, OrdererConfig, Plugins,
};

#[cfg(feature = "chain")]
pub use chain::KafkaChain;
pub use error::KafkaError;
pub use records::{
    batch_entry, decode_ordered, decode_payload_batch, payload_envelope, OrderedRecord, Posted, Regular,
};

/// Registers [`KafkaFactory`] under consensus type `kafka`, with the `Kafka` section of the orderer's
/// configuration.
///
/// Errors: `Kafka.Payloads` is neither `aside` nor `inline`.
#[cfg(feature = "chain")]
pub fn register(plugins: &mut Plugins, config: &OrdererConfig) -> Result<(), KafkaError> {
    let factory = KafkaFactory::new(config.kafka.clone())?;
    plugins.registry.register("kafka", Arc::new(factory));
    Ok(())
}

/// Starts a [`KafkaChain`] for each `kafka` channel.
#[cfg(feature = "chain")]
#[derive(Debug, Clone)]
pub struct KafkaFactory {
    config: KafkaConfig,
    aside: bool,
}

#[cfg(feature = "chain")]
impl KafkaFactory {
    /// A factory using `config` (the orderer's `Kafka` section).
    ///
    /// Errors: `config.payloads` is neither `aside` nor `inline`.
    pub fn new(config: KafkaConfig) -> Result<Self, KafkaError> {
        let aside = match config.payloads.as_str() {
            "aside" | "" => true,
            "inline" => false,
            other => return Err(KafkaError::PayloadsMode(other.to_owned())),
        };
        Ok(KafkaFactory { config, aside })
    }
}

#[cfg(feature = "chain")]
impl ConsensusFactory for KafkaFactory {
    fn start(&self, support: Arc<ChainSupport>, ctx: &ConsensusContext) -> Result<Arc<dyn Consensus>, ConsensusError> {
        let brokers = if self.config.brokers.is_empty() {
            support.config().orderer().map(|o| o.kafka_brokers().to_vec()).unwrap_or_default()
        } else {
            self.config.brokers.clone()
        };
        if brokers.is_empty() {
            return Err(ConsensusError(format!(
                "kafka channel {} lists no brokers (KafkaBrokers) and Kafka.Brokers is empty",
                support.channel_id()
            )));
        }
        let client = client::ClientSettings::new(&self.config, brokers);
        Ok(KafkaChain::start(support, ctx, client, self.aside)?)
    }
}
