//! The payload store of one channel (payloads held aside, FastFabric Opt O-I): the records of the channel's
//! payload topic, streamed into memory as they are written, and fetched by partition and offset when a
//! reference names one that was not streamed (written before this orderer started, or already pruned).
//!
//! A reference resolves to *the Kafka record at its partition and offset, if that record's key is the
//! reference's transaction ID*. The store only caches that log (whatever it does not hold is read from Kafka),
//! so every orderer resolves every reference alike, and the answer does not depend on when the record was
//! streamed or whether it was dropped from memory.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_protos::orderer::{KafkaPayload, PayloadReference};
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use tokio::sync::Notify;

use crate::error::KafkaError;
use crate::records;

/// How long a streamed record stays in memory when no block took it (a crashed orderer may have written the
/// payload but never its reference). Records a written block holds are dropped at once ([`PayloadStore::drop_records`]).
const RETENTION: Duration = Duration::from_secs(120);

/// How long one fetch from Kafka may take.
const FETCH_TIME: Duration = Duration::from_secs(10);

/// How many records one fetch reads ahead of the one asked for (a restarted orderer catching up resolves its
/// references in order, so reading ahead turns one round trip per transaction into one per chunk).
const FETCH_AHEAD: i64 = 2_000;

struct Record {
    key: Bytes,
    value: Bytes,
    /// A batch record's entries, decoded when a reference first names one of them.
    batch: Option<Result<Arc<[KafkaPayload]>, KafkaError>>,
    /// How many of a batch record's entries written blocks hold (the record leaves memory when all do).
    taken: usize,
}

impl Record {
    fn new(key: &[u8], value: &[u8]) -> Self {
        Record { key: Bytes::copy_from_slice(key), value: Bytes::copy_from_slice(value), batch: None, taken: 0 }
    }
}

/// Per payload-topic partition: which offsets the streaming consumer covers.
#[derive(Clone, Copy, Default)]
struct Streamed {
    /// First offset streamed (the partition's end when streaming started).
    from: i64,
    /// One past the last offset streamed.
    through: i64,
}

#[derive(Default)]
struct Inner {
    records: HashMap<(i32, i64), Record>,
    /// Insertion order, for pruning by age.
    inserted: VecDeque<(Instant, i32, i64)>,
    /// `None` until streaming starts.
    streamed: Option<Vec<Streamed>>,
}

/// Why a reference has no payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missing(pub(crate) String);

/// The payload records of one channel; shared by the streaming task and the chain.
pub(crate) struct PayloadStore {
    topic: String,
    partitions: i32,
    inner: Mutex<Inner>,
    arrived: Notify,
    fetcher: Mutex<Option<BaseConsumer>>,
}

impl PayloadStore {
    /// An empty store for `topic` with `partitions` partitions; `fetcher` reads records by offset.
    pub(crate) fn new(topic: String, partitions: i32, fetcher: BaseConsumer) -> Arc<Self> {
        Arc::new(PayloadStore {
            topic,
            partitions,
            inner: Mutex::new(Inner::default()),
            arrived: Notify::new(),
            fetcher: Mutex::new(Some(fetcher)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts streaming: `consumer` is assigned every partition from its current end, which becomes the first
    /// streamed offset; records are added until the consumer fails for good or the task is dropped.
    ///
    /// Errors: the partitions' ends cannot be read or the assignment fails.
    pub(crate) fn start_streaming(self: &Arc<Self>, consumer: StreamConsumer) -> anyhow::Result<StreamTask> {
        let mut tpl = TopicPartitionList::new();
        let mut streamed = Vec::with_capacity(self.partitions as usize);
        for p in 0..self.partitions {
            let (_, high) = consumer.fetch_watermarks(&self.topic, p, Duration::from_secs(10))?;
            tpl.add_partition_offset(&self.topic, p, Offset::Offset(high))?;
            streamed.push(Streamed { from: high, through: high });
        }
        consumer.assign(&tpl)?;
        self.lock().streamed = Some(streamed);
        let store = self.clone();
        Ok(StreamTask(tokio::spawn(async move {
            loop {
                match consumer.recv().await {
                    Ok(m) => {
                        let record = Record::new(m.key().unwrap_or_default(), m.payload().unwrap_or_default());
                        store.streamed(m.partition(), m.offset(), record);
                    }
                    Err(e) => {
                        tracing::warn!(topic = %store.topic, error = %e, "reading the payload topic");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        })))
    }

    fn streamed(&self, partition: i32, offset: i64, record: Record) {
        let mut inner = self.lock();
        let now = Instant::now();
        if let Some(s) = inner.streamed.as_mut().and_then(|v| v.get_mut(partition as usize)) {
            s.through = s.through.max(offset + 1);
        }
        inner.records.insert((partition, offset), record);
        inner.inserted.push_back((now, partition, offset));
        prune(&mut inner, now);
        drop(inner);
        self.arrived.notify_waiters();
    }

    /// Drops the records at `keys` (partition, offset, index of a batch entry) from memory: their block is
    /// written. A batch record goes once blocks hold as many of its entries as it has. A later reference to a
    /// dropped record (a duplicate) reads it from Kafka again.
    pub(crate) fn drop_records(&self, keys: impl IntoIterator<Item = (i32, i64, Option<u32>)>) {
        let mut inner = self.lock();
        for (p, o, index) in keys {
            let done = match (index, inner.records.get_mut(&(p, o))) {
                (None, _) => true,
                (Some(_), Some(record)) => {
                    record.taken += 1;
                    matches!(&record.batch, Some(Ok(b)) if record.taken >= b.len())
                }
                (Some(_), None) => false,
            };
            if done {
                inner.records.remove(&(p, o));
            }
        }
    }

    /// The envelope `reference` names: the record at its partition and offset (its entry at the reference's
    /// index for a batch record), which must belong to the reference's transaction. Waits up to `wait` for a
    /// record not streamed yet, then reads it from Kafka.
    ///
    /// Errors ([`Missing`], the same on every orderer): no such partition, no record at that offset, the
    /// record (or batch entry) belongs to another transaction or does not exist, or nothing was written there
    /// within `wait`.
    pub(crate) async fn resolve(&self, reference: &PayloadReference, wait: Duration) -> Result<Bytes, Missing> {
        let (p, o) = (reference.partition, reference.offset);
        if p < 0 || p >= self.partitions || o < 0 {
            return Err(Missing(format!("the payload topic {} has no partition {p} offset {o}", self.topic)));
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.arrived.notified();
            let ahead_of_stream = {
                let mut inner = self.lock();
                if let Some(r) = inner.records.get_mut(&(p, o)) {
                    return check(reference, r);
                }
                inner.streamed.as_ref().is_some_and(|v| o >= v[p as usize].from && o >= v[p as usize].through)
            };
            // Not streamed yet: it normally is within moments (the payload is acknowledged before its
            // reference is posted). Anything else, and whatever did not come in time, is read from Kafka.
            if !ahead_of_stream || tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.fetch(reference).await;
            }
        }
    }

    /// Reads the referenced record (and up to [`FETCH_AHEAD`] after it) straight from Kafka. Only what the log
    /// says makes a reference [`Missing`] (no record at that offset, or the offset not written): a fetch that
    /// fails or reads nothing is retried, for dropping a message on a passing error would make this orderer's
    /// blocks differ from the others'.
    async fn fetch(&self, reference: &PayloadReference) -> Result<Bytes, Missing> {
        let (p, o) = (reference.partition, reference.offset);
        loop {
            let Some(consumer) = self.fetcher.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                return Err(Missing("the payload store is closed".into()));
            };
            let topic = self.topic.clone();
            let joined = tokio::task::spawn_blocking(move || {
                let got = read_range(&consumer, &topic, p, o, Instant::now() + FETCH_TIME);
                (consumer, got)
            })
            .await;
            let Ok((consumer, got)) = joined else {
                return Err(Missing("the payload fetch was abandoned".into()));
            };
            *self.fetcher.lock().unwrap_or_else(|e| e.into_inner()) = Some(consumer);
            let records = match got {
                Ok(Fetched::NotWritten) => {
                    return Err(Missing(format!("the payload record {}/{p}/{o} was never written", self.topic)))
                }
                Ok(Fetched::Records(records)) if !records.is_empty() => records,
                Ok(Fetched::Records(_)) => {
                    tracing::warn!(topic = %self.topic, partition = p, offset = o, "reading a payload record gave nothing; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(topic = %self.topic, partition = p, offset = o, error = %e, "reading a payload record; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let mut found = None;
            let mut inner = self.lock();
            let now = Instant::now();
            for (offset, mut record) in records {
                if offset == o {
                    found = Some(check(reference, &mut record));
                }
                inner.inserted.push_back((now, p, offset));
                inner.records.insert((p, offset), record);
            }
            // The log went past `o` without it (deleted, or a control record): no payload there.
            return found.unwrap_or_else(|| Err(Missing(format!("no payload record at {}/{p}/{o}", self.topic))));
        }
    }
}

/// What a read of the payload log found.
enum Fetched {
    /// The partition ends at or before the offset.
    NotWritten,
    /// The records read from the offset on (from a later offset if it no longer exists); empty if none came in
    /// time.
    Records(Vec<(i64, Record)>),
}

/// Reads partition `p` from offset `o` up to [`FETCH_AHEAD`] records or the partition's end, until `until`.
fn read_range(consumer: &BaseConsumer, topic: &str, p: i32, o: i64, until: Instant) -> anyhow::Result<Fetched> {
    let (_, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(10))?;
    if o >= high {
        return Ok(Fetched::NotWritten);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, p, Offset::Offset(o))?;
    consumer.assign(&tpl)?;
    let last = high.min(o + FETCH_AHEAD) - 1;
    let mut out = Vec::new();
    while Instant::now() < until {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) if m.partition() == p => {
                let offset = m.offset();
                out.push((offset, Record::new(m.key().unwrap_or_default(), m.payload().unwrap_or_default())));
                if offset >= last {
                    break;
                }
            }
            Some(Ok(_)) | None => {}
            Some(Err(e)) => anyhow::bail!("{e}"),
        }
    }
    Ok(Fetched::Records(out))
}

/// The envelope `reference` names in `record` (the record at its partition and offset): as
/// [`records::payload_envelope`], decoding a batch record once for all its references.
fn check(reference: &PayloadReference, record: &mut Record) -> Result<Bytes, Missing> {
    let at = |why: KafkaError| Missing(format!("payload record {}/{}: {why}", reference.partition, reference.offset));
    if reference.index.is_none() {
        return records::payload_envelope(&record.key, record.value.clone(), reference).map_err(at);
    }
    let value = record.value.clone();
    match record.batch.get_or_insert_with(|| records::decode_payload_batch(value).map(Arc::from)) {
        Ok(batch) => records::batch_entry(batch, reference).map_err(at),
        Err(why) => Err(at(why.clone())),
    }
}

fn prune(inner: &mut Inner, now: Instant) {
    while let Some(&(at, p, o)) = inner.inserted.front() {
        if now.duration_since(at) < RETENTION {
            break;
        }
        inner.inserted.pop_front();
        inner.records.remove(&(p, o));
    }
}

/// The streaming task; aborted when dropped.
pub(crate) struct StreamTask(tokio::task::JoinHandle<()>);

impl Drop for StreamTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
