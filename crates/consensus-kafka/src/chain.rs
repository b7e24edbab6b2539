//! One channel's Kafka chain (Fabric 1.4 `orderer/consensus/kafka/chain.go`): posting (`order`,
//! `configure`) and the loop that consumes the channel's partition and cuts blocks. The rules are those of the
//! crate documentation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_orderer::{
    BlockCutter, ChainSupport, ChannelStatus, Consensus, ConsensusContext, ConsensusError, ConsensusRelation,
    Submission,
};
use ferrofabric_protos::common::{Block, BlockMetadataIndex, Envelope, Metadata, OrdererBlockMetadata};
use ferrofabric_protos::orderer::kafka_message::Type;
use ferrofabric_protos::orderer::kafka_message_regular::Class;
use ferrofabric_protos::orderer::{
    KafkaMessage, KafkaMessageConnect, KafkaMessageRegular, KafkaMessageTimeToCut, KafkaMetadata, PayloadReference,
};
use futures::future::BoxFuture;
use futures::FutureExt;
use prost::Message as _;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};
use tokio::sync::{oneshot, watch};

use crate::client::{ClientSettings, PRODUCE_TIMEOUT};
use crate::payloads::{PayloadStore, StreamTask};

/// How long the loop waits for a referenced payload record that is not written yet before dropping the message.
const PAYLOAD_WAIT: Duration = Duration::from_secs(5);

/// How long to wait between attempts to reach the cluster while starting.
const RETRY: Duration = Duration::from_secs(1);

/// A running Kafka chain for one channel.
pub struct KafkaChain {
    channel: String,
    shared: Arc<Shared>,
    queue_timeout: Duration,
    halt: watch::Sender<bool>,
    halted: AtomicBool,
    /// Payloads aside, pipelined: signalled when the message placed last has posted its reference (or given up),
    /// so references reach the partition in the order the messages were placed.
    last_placed: std::sync::Mutex<Option<oneshot::Receiver<()>>>,
}

/// What `order` and the consume loop share.
struct Shared {
    support: Arc<ChainSupport>,
    topic: String,
    payload_topic: String,
    producer: FutureProducer,
    aside: bool,
    /// The consume loop is running (Fabric: `startChan` closed).
    ready: watch::Sender<bool>,
    /// A re-validated CONFIG message is being ordered again: hold back new messages (Fabric's `WaitReady`).
    config_in_flight: watch::Sender<bool>,
}

impl std::fmt::Debug for KafkaChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaChain").field("channel", &self.channel).finish_non_exhaustive()
    }
}

fn err(msg: impl Into<String>) -> ConsensusError {
    ConsensusError(msg.into())
}

impl KafkaChain {
    /// Starts the chain of `support`'s channel: a task creates the topics if needed, posts a CONNECT record and
    /// consumes the partition from the record after the ledger's last block (retrying until the cluster
    /// answers). `aside` selects payloads aside (FastFabric Opt O-I) for the messages this orderer posts.
    ///
    /// Errors: the producer cannot be created from the settings (a malformed property).
    pub(crate) fn start(
        support: Arc<ChainSupport>,
        ctx: &ConsensusContext,
        client: ClientSettings,
        aside: bool,
    ) -> Result<Arc<KafkaChain>, ConsensusError> {
        let channel = support.channel_id().to_owned();
        let producer: FutureProducer =
            client.producer().create().map_err(|e| err(format!("creating the Kafka producer: {e}")))?;
        let (halt, halt_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            topic: channel.clone(),
            payload_topic: format!("{channel}_payloads"),
            support,
            producer,
            aside,
            ready: watch::channel(false).0,
            config_in_flight: watch::channel(false).0,
        });
        tokio::spawn(run(shared.clone(), client, halt_rx));
        Ok(Arc::new(KafkaChain {
            channel,
            shared,
            queue_timeout: ctx.queue_timeout,
            halt,
            halted: AtomicBool::new(false),
            last_placed: std::sync::Mutex::new(None),
        }))
    }

    /// Waits until the chain can take messages: running, and no re-validated CONFIG message in flight.
    async fn wait_ready(&self) -> Result<(), ConsensusError> {
        if self.halted.load(Ordering::Relaxed) {
            return Err(err("the chain is halted"));
        }
        if !*self.shared.ready.borrow() {
            return Err(err(format!(
                "the backing Kafka cluster of channel {} has not completed booting; try again later",
                self.channel
            )));
        }
        let mut in_flight = self.shared.config_in_flight.subscribe();
        let free = tokio::time::timeout(self.queue_timeout, async { in_flight.wait_for(|busy| !busy).await.is_ok() })
            .await
            .unwrap_or(false);
        if free {
            Ok(())
        } else {
            Err(err("a config message is being re-ordered; try again later"))
        }
    }

    async fn post_normal(&self, msg: Submission) -> Result<(), ConsensusError> {
        self.wait_ready().await?;
        let payload_at = if self.shared.aside {
            let record =
                FutureRecord::to(&self.shared.payload_topic).key(msg.tx_id.as_bytes()).payload(msg.envelope.as_ref());
            let delivery = self
                .shared
                .producer
                .send(record, PRODUCE_TIMEOUT)
                .await
                .map_err(|(e, _)| err(format!("cannot write the payload to Kafka: {e}")))?;
            Some((delivery.partition, delivery.offset))
        } else {
            None
        };
        let message = self.shared.normal_message(msg, payload_at);
        self.shared.post(message).await
    }
}

impl Shared {
    /// The regular record of a normal message: the envelope inline, or (`payload_at`: the acknowledged payload
    /// record's partition and offset) a reference to it, whose payload bytes are counted here.
    fn normal_message(&self, msg: Submission, payload_at: Option<(i32, i64)>) -> Type {
        let mut regular =
            KafkaMessageRegular { config_seq: msg.config_seq, class: Class::Normal as i32, ..Default::default() };
        match payload_at {
            Some((partition, offset)) => {
                self.support.metrics().consensus_log_bytes(msg.envelope.len() + msg.tx_id.len(), true);
                regular.reference = Some(PayloadReference { tx_id: msg.tx_id, size: msg.size, partition, offset });
            }
            None => regular.payload = msg.envelope,
        }
        Type::Regular(regular)
    }

    /// Queues `message` for the channel's partition now; the future completes when all in-sync replicas have it.
    /// `None` when librdkafka's queue is full.
    fn post_now(self: &Arc<Self>, message: Type) -> Option<BoxFuture<'static, Result<(), ConsensusError>>> {
        let bytes = KafkaMessage { r#type: Some(message) }.encode_to_vec();
        let delivery =
            self.producer.send_result(FutureRecord::<(), _>::to(&self.topic).partition(0).payload(&bytes)).ok()?;
        let shared = self.clone();
        Some(
            async move {
                match delivery.await {
                    Ok(Ok(_)) => {
                        shared.support.metrics().consensus_log_bytes(bytes.len(), false);
                        Ok(())
                    }
                    Ok(Err((e, _))) => Err(err(format!("cannot post to Kafka: {e}"))),
                    Err(_) => Err(err("the Kafka producer was closed")),
                }
            }
            .boxed(),
        )
    }

    /// Posts `message` to the channel's partition and waits for all in-sync replicas to have it.
    async fn post(&self, message: Type) -> Result<(), ConsensusError> {
        let bytes = KafkaMessage { r#type: Some(message) }.encode_to_vec();
        let record = FutureRecord::<(), _>::to(&self.topic).partition(0).payload(&bytes);
        self.producer
            .send(record, PRODUCE_TIMEOUT)
            .await
            .map_err(|(e, _)| err(format!("cannot post to Kafka: {e}")))?;
        self.support.metrics().consensus_log_bytes(bytes.len(), false);
        Ok(())
    }

    /// Queues `message` for the partition behind everything queued before it and returns without waiting for
    /// the brokers (time-to-cut and re-postings: the loop must not stall on them; a lost one is made up by another
    /// orderer's or by the next timer). Queuing in the loop's order matters: each orderer's re-postings must
    /// reach the partition in the order of their original offsets, for the first posting of each original offset
    /// to come after the first of every earlier one (that is what dropping re-postings whose original offset is
    /// not newer than the last one taken relies on).
    async fn post_in_background(self: &Arc<Self>, message: Type) {
        loop {
            if let Some(accepted) = self.post_now(message.clone()) {
                let channel = self.topic.clone();
                tokio::spawn(async move {
                    if let Err(e) = accepted.await {
                        tracing::warn!(%channel, error = %e, "posting to Kafka");
                    }
                });
                return;
            }
            // librdkafka's queue is full: wait for room rather than lose the place in line.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Consensus for KafkaChain {
    fn order(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        self.post_normal(msg).boxed()
    }

    /// Queues the message's record(s) with the producer at once. Payloads aside, the payload record is queued
    /// now and the reference once the payload is acknowledged *and* the message placed before it has queued its
    /// reference, so references keep the placing order. Gives the message back to `order` (which waits or
    /// reports) when the chain is not ready, a CONFIG message is being re-ordered, or the producer's queue is full.
    fn order_pipelined(&self, msg: Submission) -> Result<BoxFuture<'static, Result<(), ConsensusError>>, Submission> {
        let shared = &self.shared;
        if self.halted.load(Ordering::Relaxed) || !*shared.ready.borrow() || *shared.config_in_flight.borrow() {
            return Err(msg);
        }
        if !shared.aside {
            return shared.post_now(shared.normal_message(msg.clone(), None)).ok_or(msg);
        }
        let record = FutureRecord::to(&shared.payload_topic).key(msg.tx_id.as_bytes()).payload(msg.envelope.as_ref());
        let Ok(payload) = shared.producer.send_result(record) else { return Err(msg) };
        let (placed, next) = oneshot::channel::<()>();
        let previous = self.last_placed.lock().unwrap_or_else(|e| e.into_inner()).replace(next);
        let shared = shared.clone();
        Ok(async move {
            let delivered = payload.await;
            if let Some(previous) = previous {
                // Its sender goes when the message before has queued its reference or given up.
                let _ = previous.await;
            }
            let delivery = match delivered {
                Ok(Ok(d)) => d,
                Ok(Err((e, _))) => return Err(err(format!("cannot write the payload to Kafka: {e}"))),
                Err(_) => return Err(err("the Kafka producer was closed")),
            };
            let message = shared.normal_message(msg, Some((delivery.partition, delivery.offset)));
            let queued = shared.post_now(message.clone());
            drop(placed);
            match queued {
                Some(accepted) => accepted.await,
                None => shared.post(message).await,
            }
        }
        .boxed())
    }

    fn configure(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        async move {
            self.wait_ready().await?;
            let regular = KafkaMessageRegular {
                payload: msg.envelope,
                config_seq: msg.config_seq,
                class: Class::Config as i32,
                ..Default::default()
            };
            self.shared.post(Type::Regular(regular)).await
        }
        .boxed()
    }

    fn relation(&self) -> (ConsensusRelation, ChannelStatus) {
        let status = if self.halted.load(Ordering::Relaxed) { ChannelStatus::Inactive } else { ChannelStatus::Active };
        (ConsensusRelation::Other, status)
    }

    fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
        self.halt.send_replace(true);
    }
}

/// `KafkaMetadata` of the ledger's last block (`last_offset_persisted` -1 when it has none, e.g. the genesis
/// block): where Fabric 2 keeps consenter metadata (`OrdererBlockMetadata.consenter_metadata` in the SIGNATURES
/// slot, where this chain writes it), else where Fabric 1.4's Kafka orderer wrote it (the ORDERER slot), so a
/// ledger written by Fabric 1.4 resumes too.
fn tip_metadata(support: &ChainSupport) -> KafkaMetadata {
    let none = KafkaMetadata { last_offset_persisted: -1, ..Default::default() };
    let height = support.store().height();
    let Ok(Some(raw)) = support.store().block(height.saturating_sub(1)) else { return none };
    let Ok(block) = Block::decode(raw) else { return none };
    let slot = |index: BlockMetadataIndex| -> Option<Bytes> {
        let raw = block.metadata.as_ref()?.metadata.get(index as usize)?.clone();
        Some(Metadata::decode(raw).ok()?.value)
    };
    let fabric2 = || -> Option<KafkaMetadata> {
        let consenter = OrdererBlockMetadata::decode(slot(BlockMetadataIndex::Signatures)?).ok()?.consenter_metadata;
        let inner = Metadata::decode(consenter).ok()?.value;
        if inner.is_empty() {
            return None;
        }
        KafkaMetadata::decode(inner).ok()
    };
    let fabric14 = || -> Option<KafkaMetadata> {
        let inner = slot(BlockMetadataIndex::Orderer).filter(|v| !v.is_empty())?;
        KafkaMetadata::decode(inner).ok()
    };
    fabric2().or_else(fabric14).unwrap_or(none)
}

/// Connects (retrying until the cluster answers or the chain is halted), then runs the consume loop.
async fn run(shared: Arc<Shared>, client: ClientSettings, mut halt: watch::Receiver<bool>) {
    let channel = shared.topic.clone();
    let connected = loop {
        tokio::select! {
            biased;
            _ = halt.changed() => return,
            r = connect(&shared, &client) => match r {
                Ok(c) => break c,
                Err(e) => {
                    tracing::warn!(%channel, error = %e, "cannot reach the Kafka cluster yet; retrying");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    };
    let (consumer, store, _stream) = connected;
    shared.ready.send_replace(true);
    let mut chain = Loop::new(shared.clone(), store);
    tracing::info!(%channel, resume_after = chain.meta.last_offset_persisted, aside = shared.aside, "kafka chain started");
    loop {
        let (_, timeout) = shared.support.batch_limits();
        let timer = chain.timer(timeout);
        let result = tokio::select! {
            biased;
            _ = halt.changed() => break,
            m = consumer.recv() => match m {
                Ok(m) => {
                    let offset = m.offset();
                    let payload = Bytes::copy_from_slice(m.payload().unwrap_or_default());
                    chain.record(offset, payload).await
                }
                Err(e) => {
                    tracing::warn!(%channel, error = %e, "consuming the channel's partition");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok(())
                }
            },
            _ = tokio::time::sleep_until(timer.unwrap_or_else(far_future)), if timer.is_some() => {
                chain.time_to_cut_timer_fired().await;
                Ok(())
            }
        };
        if let Err(e) = result {
            tracing::error!(%channel, error = %e, "kafka chain stops");
            break;
        }
    }
    shared.ready.send_replace(false);
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(3600)
}

type Connected = (StreamConsumer, Arc<PayloadStore>, StreamTask);

/// Creates the topics, posts CONNECT and assigns the channel's partition from the record after the last one
/// the ledger includes; starts streaming the payload topic.
async fn connect(shared: &Arc<Shared>, client: &ClientSettings) -> anyhow::Result<Connected> {
    client.ensure_topic(&shared.topic, 1).await?;
    // Every orderer reads references whatever its own mode, so the payload topic always exists.
    client.ensure_topic(&shared.payload_topic, client.payload_partitions).await?;
    shared.post(Type::Connect(KafkaMessageConnect::default())).await?;
    let group = format!("ferrofabric-{}-{}", shared.topic, std::process::id());
    let consumer: StreamConsumer = client.consumer(&group).create()?;
    let meta = tip_metadata(&shared.support);
    let start = if meta.last_offset_persisted >= 0 {
        Offset::Offset(meta.last_offset_persisted + 1)
    } else {
        Offset::Beginning
    };
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&shared.topic, 0, start)?;
    consumer.assign(&tpl)?;
    let streamer: StreamConsumer = client.consumer(&format!("{group}-payloads")).create()?;
    let partitions = streamer
        .fetch_metadata(Some(&shared.payload_topic), Duration::from_secs(10))?
        .topics()
        .first()
        .map(|t| t.partitions().len() as i32)
        .unwrap_or(0);
    anyhow::ensure!(partitions > 0, "the payload topic {} has no partitions", shared.payload_topic);
    let fetcher: BaseConsumer = client.consumer(&format!("{group}-fetch")).create()?;
    let store = PayloadStore::new(shared.payload_topic.clone(), partitions, fetcher);
    let task = store.start_streaming(streamer)?;
    Ok((consumer, store, task))
}

/// A message in the block cutter: the envelope, and the original offset if it was re-posted.
struct Entry {
    envelope: Bytes,
    original_offset: i64,
    /// Where the envelope came from when it was held aside (partition, offset of the payload topic).
    payload: Option<(i32, i64)>,
}

/// The consume loop's state.
struct Loop {
    shared: Arc<Shared>,
    store: Arc<PayloadStore>,
    cutter: BlockCutter<Entry>,
    /// State as of the last block cut.
    meta: KafkaMetadata,
    /// Newest original offset of a re-posted message taken (in a block or pending).
    original_offset_seen: i64,
    last_cut_block: u64,
    /// The block a time-to-cut was posted for, and when.
    ttc_posted: Option<(u64, Instant)>,
}

impl Loop {
    fn new(shared: Arc<Shared>, store: Arc<PayloadStore>) -> Self {
        let meta = tip_metadata(&shared.support);
        let last_cut_block = shared.support.next_queued_number().saturating_sub(1);
        Loop {
            original_offset_seen: meta.last_original_offset_processed,
            meta,
            shared,
            store,
            cutter: BlockCutter::new(),
            last_cut_block,
            ttc_posted: None,
        }
    }

    fn support(&self) -> &ChainSupport {
        &self.shared.support
    }

    /// When the batch timer of the pending batch fires (`None`: nothing pending). After a time-to-cut was
    /// posted, the timer fires again one batch timeout later in case that record was lost.
    fn timer(&self, timeout: Duration) -> Option<tokio::time::Instant> {
        let first = self.cutter.deadline(timeout)?;
        let at = match self.ttc_posted {
            Some((n, at)) if n == self.last_cut_block + 1 => at + timeout,
            _ => first,
        };
        Some(tokio::time::Instant::from_std(at))
    }

    async fn time_to_cut_timer_fired(&mut self) {
        let next = self.last_cut_block + 1;
        self.ttc_posted = Some((next, Instant::now()));
        self.shared.post_in_background(Type::TimeToCut(KafkaMessageTimeToCut { block_number: next })).await;
    }

    /// Handles the record at `offset` of the channel's partition.
    async fn record(&mut self, offset: i64, raw: Bytes) -> Result<(), ConsensusError> {
        let channel = self.shared.topic.clone();
        let message = match KafkaMessage::decode(raw) {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(%channel, offset, error = %e, "discarding a record that is no KafkaMessage");
                return Ok(());
            }
        };
        match message.r#type {
            None => {
                tracing::error!(%channel, offset, "discarding a KafkaMessage of unknown type");
                Ok(())
            }
            Some(Type::Connect(_)) => Ok(()),
            Some(Type::TimeToCut(ttc)) => self.time_to_cut(ttc.block_number, offset).await,
            Some(Type::Regular(regular)) => self.regular(regular, offset).await,
        }
    }

    async fn time_to_cut(&mut self, number: u64, offset: i64) -> Result<(), ConsensusError> {
        let next = self.last_cut_block + 1;
        if number == next {
            let batch = self.cutter.cut();
            if batch.is_empty() {
                tracing::warn!(channel = %self.shared.topic, number, "time-to-cut for the next block but nothing is pending");
                return Ok(());
            }
            self.write(batch, offset).await
        } else {
            if number > next {
                tracing::error!(channel = %self.shared.topic, number, next, "discarding a time-to-cut for a block past the next one");
            }
            Ok(())
        }
    }

    /// The envelope of `regular`: inline, or the referenced payload record.
    async fn envelope(&self, regular: &KafkaMessageRegular) -> Result<Bytes, String> {
        match &regular.reference {
            None => Ok(regular.payload.clone()),
            Some(reference) => self.store.resolve(reference, PAYLOAD_WAIT).await.map_err(|m| m.0),
        }
    }

    async fn regular(&mut self, regular: KafkaMessageRegular, offset: i64) -> Result<(), ConsensusError> {
        let channel = self.shared.topic.clone();
        let original = regular.original_offset;
        if original != 0 && original <= self.original_offset_seen {
            // Another orderer's re-posting of a message already taken.
            self.config_done(original);
            return Ok(());
        }
        let envelope = match self.envelope(&regular).await {
            Ok(e) => e,
            Err(why) => {
                tracing::error!(%channel, offset, reason = %why, "discarding a message whose payload is missing");
                return Ok(());
            }
        };
        let sequence = self.support().sequence();
        let class = Class::try_from(regular.class).unwrap_or(Class::Unknown);
        match class {
            Class::Config => {
                if regular.config_seq < sequence {
                    let (envelope, seq) = match self.support().reprocess_config(&envelope) {
                        Ok(checked) => checked,
                        Err(r) => {
                            tracing::warn!(%channel, offset, reason = %r, "discarding a config message that is no longer valid");
                            self.config_done(original);
                            return Ok(());
                        }
                    };
                    // Fabric re-posts it and orders it when it comes back, holding new messages meanwhile.
                    let first = if original != 0 { original } else { offset };
                    tracing::info!(%channel, offset, original = first, "re-posting a config message checked at an older config sequence");
                    self.meta.last_resubmitted_config_offset = first;
                    self.shared.config_in_flight.send_replace(true);
                    self.shared
                        .post_in_background(Type::Regular(KafkaMessageRegular {
                            payload: envelope,
                            config_seq: seq,
                            class: Class::Config as i32,
                            original_offset: first,
                            reference: None,
                        }))
                        .await;
                    return Ok(());
                }
                self.commit_config(envelope, original, offset).await?;
                self.config_done(original);
                Ok(())
            }
            Class::Normal | Class::Unknown => {
                let size = match Envelope::decode(envelope.clone()) {
                    Ok(e) => (e.payload.len() + e.signature.len()) as u32,
                    Err(e) => {
                        tracing::error!(%channel, offset, error = %e, "discarding a message that is no Envelope");
                        return Ok(());
                    }
                };
                if class == Class::Normal && regular.config_seq < sequence {
                    match self.support().revalidate(&envelope) {
                        Ok(seq) => {
                            let first = if original != 0 { original } else { offset };
                            tracing::debug!(%channel, offset, original = first, "re-posting a message checked at an older config sequence");
                            self.shared
                                .post_in_background(Type::Regular(KafkaMessageRegular {
                                    config_seq: seq,
                                    original_offset: first,
                                    ..regular
                                }))
                                .await;
                        }
                        Err(r) => {
                            tracing::warn!(%channel, offset, reason = %r, "discarding a message that is no longer valid");
                        }
                    }
                    return Ok(());
                }
                self.original_offset_seen = self.original_offset_seen.max(original);
                let payload = regular.reference.as_ref().map(|r| (r.partition, r.offset));
                self.commit_normal(Entry { envelope, original_offset: original, payload }, size, offset).await
            }
        }
    }

    /// A re-posted CONFIG message with original offset `original` was ordered or dropped: new messages may
    /// flow again once it is the last one re-posted.
    fn config_done(&mut self, original: i64) {
        if original != 0 && original == self.meta.last_resubmitted_config_offset {
            self.shared.config_in_flight.send_replace(false);
        }
    }

    async fn commit_normal(&mut self, entry: Entry, size: u32, offset: i64) -> Result<(), ConsensusError> {
        let (limits, _) = self.support().batch_limits();
        let (batches, pending) = self.cutter.ordered(entry, size, limits, Instant::now());
        let n = batches.len();
        for (i, batch) in batches.into_iter().enumerate() {
            // The block holds the newest record only if it is the last batch and the record is not pending.
            let holds_newest = i + 1 == n && !pending;
            self.write(batch, if holds_newest { offset } else { offset - 1 }).await?;
        }
        Ok(())
    }

    async fn commit_config(&mut self, envelope: Bytes, original: i64, offset: i64) -> Result<(), ConsensusError> {
        let pending = self.cutter.cut();
        if !pending.is_empty() {
            self.write(pending, offset - 1).await?;
        }
        self.original_offset_seen = self.original_offset_seen.max(original);
        self.meta.last_original_offset_processed = self.meta.last_original_offset_processed.max(original);
        self.meta.last_offset_persisted = offset;
        let block = self.support().create_next_block(vec![envelope]);
        let metadata = Bytes::from(self.meta.encode_to_vec());
        self.shared.support.write_config_block(block, metadata).await?;
        self.last_cut_block += 1;
        Ok(())
    }

    /// Writes `batch` as the next block, recording `offset` as the last record it includes.
    async fn write(&mut self, batch: Vec<Entry>, offset: i64) -> Result<(), ConsensusError> {
        let mut envelopes = Vec::with_capacity(batch.len());
        let mut payloads = Vec::new();
        for entry in batch {
            self.meta.last_original_offset_processed =
                self.meta.last_original_offset_processed.max(entry.original_offset);
            envelopes.push(entry.envelope);
            payloads.extend(entry.payload);
        }
        self.meta.last_offset_persisted = offset;
        let block = self.support().create_next_block(envelopes);
        let metadata = Bytes::from(self.meta.encode_to_vec());
        self.shared.support.write_block(block, metadata).await?;
        self.last_cut_block += 1;
        self.store.drop_records(payloads);
        Ok(())
    }
}
