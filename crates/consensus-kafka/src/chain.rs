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
    KafkaMessage, KafkaMessageConnect, KafkaMessageRegular, KafkaMessageTimeToCut, KafkaMetadata, KafkaPayload,
    KafkaPayloadBatch, PayloadReference,
};
use futures::future::BoxFuture;
use futures::FutureExt;
use prost::Message as _;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};
use tokio::sync::{mpsc, oneshot, watch};

use crate::client::{ClientSettings, PRODUCE_TIMEOUT};
use crate::payloads::{PayloadStore, StreamTask};
use crate::records::{self, OrderedRecord, Posted, Regular};

/// How long the loop waits for a referenced payload record that is not written yet before dropping the message.
const PAYLOAD_WAIT: Duration = Duration::from_secs(5);

/// How long to wait between attempts to reach the cluster while starting.
const RETRY: Duration = Duration::from_secs(1);

/// Payloads aside: how long the first message of a batch waits for more to join it. Short against the batch
/// timeout and the brokers' round trip; long enough, under load, to put tens of messages in one record.
const BATCH_WINDOW: Duration = Duration::from_millis(2);

/// Payloads aside: the most messages one batch (one payload record, one reference record) carries.
const BATCH_MESSAGES: usize = 100;

/// Payloads aside: a batch closes once its envelopes reach this many bytes, well under the brokers' default
/// record limit (`message.max.bytes`, 1 MB).
const BATCH_BYTES: usize = 512 * 1024;

/// Payloads aside: how many placed messages may wait for the batcher before `order_pipelined` gives them back.
const PLACED_QUEUE: usize = 8192;

/// A running Kafka chain for one channel.
pub struct KafkaChain {
    channel: String,
    shared: Arc<Shared>,
    queue_timeout: Duration,
    halt: watch::Sender<bool>,
    halted: AtomicBool,
    /// Payloads aside: the batcher's queue, in the order messages were placed.
    placed: Option<mpsc::Sender<Placed>>,
}

/// Payloads aside: a message placed in the chain's order, and where its answer goes.
struct Placed {
    msg: Submission,
    done: oneshot::Sender<Result<(), ConsensusError>>,
}

/// Payloads aside: a batch whose payload record is queued, waiting for its acknowledgement.
struct Queued {
    delivery: DeliveryFuture,
    batch: Vec<Placed>,
    payload_bytes: usize,
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
        let placed = aside.then(|| {
            let (tx, rx) = mpsc::channel(PLACED_QUEUE);
            let (queued_tx, queued_rx) = mpsc::unbounded_channel();
            tokio::spawn(batch_payloads(shared.clone(), rx, queued_tx));
            tokio::spawn(post_references(shared.clone(), queued_rx));
            tx
        });
        Ok(Arc::new(KafkaChain {
            channel,
            shared,
            queue_timeout: ctx.queue_timeout,
            halt,
            halted: AtomicBool::new(false),
            placed,
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
        let Some(placed) = &self.placed else { return self.shared.post(inline_message(msg)).await };
        let (done, answer) = oneshot::channel();
        placed.send(Placed { msg, done }).await.map_err(|_| err("the chain is halted"))?;
        answer.await.unwrap_or_else(|_| Err(err("the chain is halted")))
    }
}

/// The regular record of a normal message posted inline (Fabric 1.4).
fn inline_message(msg: Submission) -> Type {
    Type::Regular(KafkaMessageRegular {
        payload: msg.envelope,
        config_seq: msg.config_seq,
        class: Class::Normal as i32,
        ..Default::default()
    })
}

/// Payloads aside: takes the placed messages in order and groups those that arrive within [`BATCH_WINDOW`] of
/// the first (up to [`BATCH_MESSAGES`] and [`BATCH_BYTES`], all checked at the same config sequence) into one
/// `KafkaPayloadBatch` record of the payload topic, queued at once; [`post_references`] posts their references.
/// One record pair per batch instead of per transaction: the ordered partition takes one small record per batch.
async fn batch_payloads(
    shared: Arc<Shared>,
    mut placed: mpsc::Receiver<Placed>,
    queued: mpsc::UnboundedSender<Queued>,
) {
    let mut carried: Option<Placed> = None;
    loop {
        let first = match carried.take() {
            Some(p) => p,
            None => match placed.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        let config_seq = first.msg.config_seq;
        let mut bytes = first.msg.envelope.len();
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + BATCH_WINDOW;
        while batch.len() < BATCH_MESSAGES && bytes < BATCH_BYTES {
            let next = tokio::select! {
                p = placed.recv() => p,
                _ = tokio::time::sleep_until(deadline) => None,
            };
            let Some(p) = next else { break };
            if p.msg.config_seq != config_seq {
                // One record is checked at one config sequence: the next batch starts with this message.
                carried = Some(p);
                break;
            }
            bytes += p.msg.envelope.len();
            batch.push(p);
        }
        let value = KafkaPayloadBatch {
            payloads: batch
                .iter()
                .map(|p| KafkaPayload { tx_id: p.msg.tx_id.clone(), envelope: p.msg.envelope.clone() })
                .collect(),
        }
        .encode_to_vec();
        let delivery = loop {
            match shared.producer.send_result(FutureRecord::<(), _>::to(&shared.payload_topic).payload(&value)) {
                Ok(d) => break Ok(d),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    // Wait for room rather than lose the batch's place in line.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err((e, _)) => break Err(e),
            }
        };
        let delivery = match delivery {
            Ok(d) => d,
            Err(e) => {
                answer(batch, Err(err(format!("cannot write the payloads to Kafka: {e}"))));
                continue;
            }
        };
        let payload_bytes = value.len();
        if let Err(lost) = queued.send(Queued { delivery, batch, payload_bytes }) {
            answer(lost.0.batch, Err(err("the chain is halted")));
        }
    }
}

/// Payloads aside: for each batch in turn, once its payload record is acknowledged, queues one regular record
/// with its references (in the batch's order) and answers its messages when that record is acknowledged too. In
/// turn, so references reach the partition in the order the messages were placed.
async fn post_references(shared: Arc<Shared>, mut queued: mpsc::UnboundedReceiver<Queued>) {
    while let Some(Queued { delivery, batch, payload_bytes }) = queued.recv().await {
        let (partition, offset) = match delivery.await {
            Ok(Ok(d)) => (d.partition, d.offset),
            Ok(Err((e, _))) => {
                answer(batch, Err(err(format!("cannot write the payloads to Kafka: {e}"))));
                continue;
            }
            Err(_) => {
                answer(batch, Err(err("the Kafka producer was closed")));
                continue;
            }
        };
        shared.support.metrics().consensus_log_bytes(payload_bytes, true);
        // Even a batch of one names its entry by index, so its reference travels in `references`.
        let references = (0u32..)
            .zip(&batch)
            .map(|(index, p)| PayloadReference {
                tx_id: p.msg.tx_id.clone(),
                size: p.msg.size,
                partition,
                offset,
                index: Some(index),
            })
            .collect();
        let message = Type::Regular(KafkaMessageRegular {
            config_seq: batch.first().map_or(0, |p| p.msg.config_seq),
            class: Class::Normal as i32,
            references,
            ..Default::default()
        });
        let accepted = loop {
            if let Some(accepted) = shared.post_now(message.clone()) {
                break accepted;
            }
            // librdkafka's queue is full: wait for room rather than lose the place in line.
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        tokio::spawn(async move { answer(batch, accepted.await) });
    }
}

/// Answers every message of `batch` with `result`.
fn answer(batch: Vec<Placed>, result: Result<(), ConsensusError>) {
    for p in batch {
        let _ = p.done.send(result.clone());
    }
}

impl Shared {
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

    /// Places the message in the chain's order at once. Inline, its record is queued with the producer; payloads
    /// aside, it joins the batcher's queue, whose batches post their payload record and then, in turn, their
    /// references (see [`batch_payloads`]), so references keep the placing order. Gives the message back to
    /// `order` (which waits or reports) when the chain is not ready, a CONFIG message is being re-ordered, or the
    /// queue is full.
    fn order_pipelined(&self, msg: Submission) -> Result<BoxFuture<'static, Result<(), ConsensusError>>, Submission> {
        let shared = &self.shared;
        if self.halted.load(Ordering::Relaxed) || !*shared.ready.borrow() || *shared.config_in_flight.borrow() {
            return Err(msg);
        }
        let Some(placed) = &self.placed else {
            return shared.post_now(inline_message(msg.clone())).ok_or(msg);
        };
        let (done, answer) = oneshot::channel();
        placed.try_send(Placed { msg, done }).map_err(|e| e.into_inner().msg)?;
        Ok(async move { answer.await.unwrap_or_else(|_| Err(err("the chain is halted"))) }.boxed())
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
    client.ensure_topic(&shared.topic, 1, None).await?;
    // Every orderer reads references whatever its own mode, so the payload topic always exists.
    client.ensure_topic(&shared.payload_topic, client.payload_partitions, Some(&shared.topic)).await?;
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

/// Where a message sits in the channel's partition: its record's offset, its index among the record's messages
/// and how many messages the record has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct At {
    offset: i64,
    index: u32,
    count: u32,
}

/// `(last_offset_persisted, next_record_messages_persisted)` of a block cut while the record at `offset` is
/// handled, whose last message sits at `last`: the record itself once the block holds its last message; else
/// the record before, and how many of this record's messages the block holds (a block ends inside a record of
/// several messages whenever the cutter's rules say so, as Fabric's block cutter would cut them one by one).
fn persisted_at(last: Option<At>, offset: i64) -> (i64, u32) {
    match last {
        Some(at) if at.offset == offset && at.index + 1 < at.count => (offset - 1, at.index + 1),
        Some(at) if at.offset == offset => (offset, 0),
        _ => (offset - 1, 0),
    }
}

/// A message in the block cutter: the envelope, and the original offset if it was re-posted.
struct Entry {
    envelope: Bytes,
    original_offset: i64,
    /// Where the envelope came from when it was held aside (partition, offset, batch index in the payload topic).
    payload: Option<(i32, i64, Option<u32>)>,
    at: At,
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
    /// After a restart inside a record of several messages: its offset and how many of its messages the ledger
    /// holds already.
    resume: Option<(i64, u32)>,
}

impl Loop {
    fn new(shared: Arc<Shared>, store: Arc<PayloadStore>) -> Self {
        let meta = tip_metadata(&shared.support);
        let last_cut_block = shared.support.next_queued_number().saturating_sub(1);
        let resume = (meta.next_record_messages_persisted > 0)
            .then_some((meta.last_offset_persisted + 1, meta.next_record_messages_persisted));
        Loop {
            original_offset_seen: meta.last_original_offset_processed,
            meta,
            shared,
            store,
            cutter: BlockCutter::new(),
            last_cut_block,
            ttc_posted: None,
            resume,
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
        match records::decode_ordered(raw) {
            Err(why) => {
                tracing::error!(channel = %self.shared.topic, offset, reason = %why, "discarding a record");
                Ok(())
            }
            Ok(OrderedRecord::Connect) => Ok(()),
            Ok(OrderedRecord::TimeToCut { block_number }) => self.time_to_cut(block_number, offset).await,
            Ok(OrderedRecord::Regular(regular)) => self.regular(regular, offset).await,
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
            self.write(batch, offset, 0).await
        } else {
            if number > next {
                tracing::error!(channel = %self.shared.topic, number, next, "discarding a time-to-cut for a block past the next one");
            }
            Ok(())
        }
    }

    /// The envelope of a posted message: inline, or the referenced payload record (entry).
    async fn envelope(&self, posted: &Posted) -> Result<Bytes, String> {
        match posted {
            Posted::Inline(payload) => Ok(payload.clone()),
            Posted::Aside(reference) => self.store.resolve(reference, PAYLOAD_WAIT).await.map_err(|m| m.0),
        }
    }

    async fn regular(&mut self, regular: Regular, offset: i64) -> Result<(), ConsensusError> {
        let channel = self.shared.topic.clone();
        // Restarted inside this record: its first messages are in the ledger, and its original offset (if a
        // re-posting) is the one already taken, not a duplicate's.
        let skip = match self.resume {
            Some((at, n)) if at == offset => n,
            _ => 0,
        };
        if self.resume.is_some_and(|(at, _)| offset >= at) {
            self.resume = None;
        }
        let original = regular.original_offset;
        if skip == 0 && original != 0 && original <= self.original_offset_seen {
            // Another orderer's re-posting of a message already taken.
            self.config_done(original);
            return Ok(());
        }
        let sequence = self.support().sequence();
        if regular.class == Class::Config {
            return self.config(regular, offset, sequence).await;
        }
        // Checked at an older config sequence: re-validate each message and re-post, in one record, those that
        // pass; they are ordered when the re-posting comes back.
        let revalidate = regular.class == Class::Normal && regular.config_seq < sequence;
        if !revalidate {
            self.original_offset_seen = self.original_offset_seen.max(original);
        }
        let count = u32::try_from(regular.messages.len()).unwrap_or(u32::MAX);
        let mut passed = Vec::new();
        let mut passed_seq = sequence;
        for (index, posted) in (0u32..).zip(regular.messages.iter()).skip(skip as usize) {
            let envelope = match self.envelope(posted).await {
                Ok(e) => e,
                Err(why) => {
                    tracing::error!(%channel, offset, index, reason = %why, "discarding a message whose payload is missing");
                    continue;
                }
            };
            let size = match Envelope::decode(envelope.clone()) {
                Ok(e) => (e.payload.len() + e.signature.len()) as u32,
                Err(e) => {
                    tracing::error!(%channel, offset, index, error = %e, "discarding a message that is no Envelope");
                    continue;
                }
            };
            if revalidate {
                match self.support().revalidate(&envelope) {
                    Ok(seq) => {
                        tracing::debug!(%channel, offset, index, "re-posting a message checked at an older config sequence");
                        passed_seq = seq;
                        passed.push(posted.clone());
                    }
                    Err(r) => {
                        tracing::warn!(%channel, offset, index, reason = %r, "discarding a message that is no longer valid");
                    }
                }
                continue;
            }
            let payload = match posted {
                Posted::Aside(r) => Some((r.partition, r.offset, r.index)),
                Posted::Inline(_) => None,
            };
            let at = At { offset, index, count };
            self.commit_normal(Entry { envelope, original_offset: original, payload, at }, size).await?;
        }
        if !passed.is_empty() {
            let first = if original != 0 { original } else { offset };
            let again = Regular { config_seq: passed_seq, original_offset: first, messages: passed, ..regular };
            self.shared.post_in_background(Type::Regular(again.to_message())).await;
        }
        Ok(())
    }

    /// A CONFIG record (one message, inline as posted by orderers): re-validated and re-posted when checked at an
    /// older config sequence than `sequence`, else written as a block of its own.
    async fn config(&mut self, regular: Regular, offset: i64, sequence: u64) -> Result<(), ConsensusError> {
        let channel = self.shared.topic.clone();
        let original = regular.original_offset;
        let envelope = match regular.messages.first() {
            Some(posted) => self.envelope(posted).await,
            None => Err("no message".into()),
        };
        let envelope = match envelope {
            Ok(e) => e,
            Err(why) => {
                tracing::error!(%channel, offset, reason = %why, "discarding a message whose payload is missing");
                return Ok(());
            }
        };
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
            let again = Regular {
                class: Class::Config,
                config_seq: seq,
                original_offset: first,
                messages: vec![Posted::Inline(envelope)],
            };
            self.shared.post_in_background(Type::Regular(again.to_message())).await;
            return Ok(());
        }
        self.commit_config(envelope, original, offset).await?;
        self.config_done(original);
        Ok(())
    }

    /// A re-posted CONFIG message with original offset `original` was ordered or dropped: new messages may
    /// flow again once it is the last one re-posted.
    fn config_done(&mut self, original: i64) {
        if original != 0 && original == self.meta.last_resubmitted_config_offset {
            self.shared.config_in_flight.send_replace(false);
        }
    }

    async fn commit_normal(&mut self, entry: Entry, size: u32) -> Result<(), ConsensusError> {
        let offset = entry.at.offset;
        let (limits, _) = self.support().batch_limits();
        let (batches, _) = self.cutter.ordered(entry, size, limits, Instant::now());
        for batch in batches {
            let (persisted, next) = persisted_at(batch.last().map(|e| e.at), offset);
            self.write(batch, persisted, next).await?;
        }
        Ok(())
    }

    async fn commit_config(&mut self, envelope: Bytes, original: i64, offset: i64) -> Result<(), ConsensusError> {
        let pending = self.cutter.cut();
        if !pending.is_empty() {
            self.write(pending, offset - 1, 0).await?;
        }
        self.original_offset_seen = self.original_offset_seen.max(original);
        self.meta.last_original_offset_processed = self.meta.last_original_offset_processed.max(original);
        self.meta.last_offset_persisted = offset;
        self.meta.next_record_messages_persisted = 0;
        let block = self.support().create_next_block(vec![envelope]);
        let metadata = Bytes::from(self.meta.encode_to_vec());
        self.shared.support.write_config_block(block, metadata).await?;
        self.last_cut_block += 1;
        Ok(())
    }

    /// Writes `batch` as the next block, recording `offset` as the last record it includes and `next_messages`
    /// as how many messages of the record after it it holds.
    async fn write(&mut self, batch: Vec<Entry>, offset: i64, next_messages: u32) -> Result<(), ConsensusError> {
        let mut envelopes = Vec::with_capacity(batch.len());
        let mut payloads = Vec::new();
        for entry in batch {
            self.meta.last_original_offset_processed =
                self.meta.last_original_offset_processed.max(entry.original_offset);
            envelopes.push(entry.envelope);
            payloads.extend(entry.payload);
        }
        self.meta.last_offset_persisted = offset;
        self.meta.next_record_messages_persisted = next_messages;
        let block = self.support().create_next_block(envelopes);
        let metadata = Bytes::from(self.meta.encode_to_vec());
        self.shared.support.write_block(block, metadata).await?;
        self.last_cut_block += 1;
        self.store.drop_records(payloads);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ferrofabric_channelconfig::BatchSize;

    /// A block as the loop writes it: its messages and `(last_offset_persisted, next_record_messages_persisted)`.
    type Written = (Vec<At>, (i64, u32));

    /// Cuts the records `(offset, messages)` as the consume loop does, starting after `resume` (a block's
    /// metadata), with blocks of at most `max` messages, each of `size` bytes against `preferred` bytes.
    fn cut(records: &[(i64, u32)], resume: (i64, u32), max: u32, sizes: &dyn Fn(At) -> u32) -> Vec<Written> {
        let limits = BatchSize { max_message_count: max, absolute_max_bytes: 1000, preferred_max_bytes: 100 };
        let mut cutter = BlockCutter::new();
        let mut blocks = Vec::new();
        for &(offset, count) in records.iter().filter(|(o, _)| *o > resume.0) {
            let skip = if offset == resume.0 + 1 { resume.1 } else { 0 };
            for index in skip..count {
                let at = At { offset, index, count };
                let (batches, _) = cutter.ordered(at, sizes(at), limits, Instant::now());
                for batch in batches {
                    let meta = persisted_at(batch.last().copied(), offset);
                    blocks.push((batch, meta));
                }
            }
        }
        blocks
    }

    /// Blocks end inside records of several messages (MaxMessageCount and PreferredMaxBytes, as Fabric's cutter
    /// cuts messages one by one), and an orderer restarted from any block's `KafkaMetadata` cuts exactly the
    /// blocks the others cut after it.
    #[test]
    fn restart_from_a_block_ending_inside_a_multi_message_record_cuts_the_same_blocks() {
        let records = [(10, 3), (11, 5), (12, 1), (13, 7), (14, 2), (15, 4)];
        // Message 13/2 is large: PreferredMaxBytes cuts before it, and it isolates itself at 13/5.
        let sizes = |at: At| match (at.offset, at.index) {
            (13, 2) => 60,
            (13, 5) => 150,
            _ => 10,
        };
        let all = cut(&records, (9, 0), 4, &sizes);
        assert!(all.iter().any(|(_, (_, next))| *next > 0), "some block ends inside a record");
        let first = &all[0];
        assert_eq!(first.0.len(), 4);
        assert_eq!(first.1, (10, 1), "3 messages of offset 10 and 1 of offset 11");
        for (k, (_, meta)) in all.iter().enumerate() {
            let restarted = cut(&records, *meta, 4, &sizes);
            assert_eq!(restarted, all[k + 1..], "restart after block {k} at {meta:?}");
        }
    }

    /// The metadata of a block names the record it ends with when it holds that record's last message, the
    /// record before otherwise (the record's messages are pending or dropped before being cut).
    #[test]
    fn persisted_offset_names_the_last_record_held_whole() {
        let at = |index, count| Some(At { offset: 7, index, count });
        assert_eq!(persisted_at(at(0, 1), 7), (7, 0));
        assert_eq!(persisted_at(at(4, 5), 7), (7, 0));
        assert_eq!(persisted_at(at(1, 5), 7), (6, 2));
        // The block ended before this record's first message (an earlier record's, or a size-isolated cut).
        assert_eq!(persisted_at(Some(At { offset: 5, index: 0, count: 3 }), 7), (6, 0));
        assert_eq!(persisted_at(None, 7), (6, 0));
    }
}
