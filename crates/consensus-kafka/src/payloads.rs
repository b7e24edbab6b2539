//! The payload store of one channel (payloads held aside, FastFabric Opt O-I): the records of the channel's
//! payload topic, streamed into memory as they are written, and fetched by partition and offset when a
//! reference names one that was not streamed (written before this orderer started, or already pruned).
//!
//! A reference resolves to *the Kafka record at its partition and offset, if that record's key is the
//! reference's transaction ID*. The store only caches that log, so every orderer resolves every reference
//! alike, and the answer does not depend on when the record was streamed.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_protos::orderer::PayloadReference;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use tokio::sync::Notify;

/// How long a streamed record stays in memory when no block took it (a crashed orderer may have written the
/// payload but never its reference). Records a block took go at the same age: they are only needed again for
/// a re-posted message, which follows within moments.
const RETENTION: Duration = Duration::from_secs(120);

/// How many records one fetch reads ahead of the one asked for (a restarted orderer catching up resolves its
/// references in order, so reading ahead turns one round trip per transaction into one per chunk).
const FETCH_AHEAD: i64 = 2_000;

struct Record {
    key: Bytes,
    value: Bytes,
}

/// Per payload-topic partition: which offsets the streaming consumer covers.
#[derive(Clone, Copy, Default)]
struct Streamed {
    /// First offset streamed (the partition's end when streaming started).
    from: i64,
    /// One past the last offset streamed.
    through: i64,
    /// Offsets below this were pruned from memory (fetch them again).
    pruned_below: i64,
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
            streamed.push(Streamed { from: high, through: high, pruned_below: 0 });
        }
        consumer.assign(&tpl)?;
        self.lock().streamed = Some(streamed);
        let store = self.clone();
        Ok(StreamTask(tokio::spawn(async move {
            loop {
                match consumer.recv().await {
                    Ok(m) => {
                        let key = Bytes::copy_from_slice(m.key().unwrap_or_default());
                        let value = Bytes::copy_from_slice(m.payload().unwrap_or_default());
                        store.streamed(m.partition(), m.offset(), Record { key, value });
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

    /// The envelope `reference` names: the record at its partition and offset, whose key must be its
    /// transaction ID. Waits up to `wait` for a record not written yet.
    ///
    /// Errors ([`Missing`], the same on every orderer): no such partition, no record at that offset, the
    /// record belongs to another transaction, or nothing was written there within `wait`.
    pub(crate) async fn resolve(&self, reference: &PayloadReference, wait: Duration) -> Result<Bytes, Missing> {
        let (p, o) = (reference.partition, reference.offset);
        if p < 0 || p >= self.partitions || o < 0 {
            return Err(Missing(format!("the payload topic {} has no partition {p} offset {o}", self.topic)));
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.arrived.notified();
            let streamed = {
                let inner = self.lock();
                if let Some(r) = inner.records.get(&(p, o)) {
                    return check(reference, r);
                }
                inner.streamed.as_ref().map(|v| v[p as usize])
            };
            match streamed {
                Some(s) if o >= s.from.max(s.pruned_below) => {
                    if o < s.through {
                        return Err(Missing(format!("no payload record at {}/{p}/{o}", self.topic)));
                    }
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        return Err(Missing(format!(
                            "the payload record {}/{p}/{o} did not arrive within {wait:?}",
                            self.topic
                        )));
                    }
                }
                _ => return self.fetch(reference, deadline).await,
            }
        }
    }

    /// Reads the referenced record (and up to [`FETCH_AHEAD`] after it) straight from Kafka.
    async fn fetch(&self, reference: &PayloadReference, deadline: tokio::time::Instant) -> Result<Bytes, Missing> {
        let (p, o) = (reference.partition, reference.offset);
        let consumer = self.fetcher.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(consumer) = consumer else {
            // Another fetch is running: wait for it, then look again.
            tokio::time::sleep(Duration::from_millis(5)).await;
            if tokio::time::Instant::now() >= deadline {
                return Err(Missing(format!("fetching the payload record {}/{p}/{o} timed out", self.topic)));
            }
            return Box::pin(self.resolve(reference, deadline - tokio::time::Instant::now())).await;
        };
        let topic = self.topic.clone();
        let until = deadline.into_std();
        let joined = tokio::task::spawn_blocking(move || {
            let got = read_range(&consumer, &topic, p, o, until);
            (consumer, got)
        })
        .await;
        let (consumer, got) = joined.map_err(|e| Missing(format!("the payload fetch failed: {e}")))?;
        *self.fetcher.lock().unwrap_or_else(|e| e.into_inner()) = Some(consumer);
        let records = got.map_err(|e| Missing(format!("fetching the payload record {}/{p}/{o}: {e}", self.topic)))?;
        let mut found = None;
        let mut inner = self.lock();
        let now = Instant::now();
        for (offset, record) in records {
            if offset == o {
                found = Some(check(reference, &record));
            }
            inner.inserted.push_back((now, p, offset));
            inner.records.insert((p, offset), record);
        }
        found.unwrap_or_else(|| Err(Missing(format!("no payload record at {}/{p}/{o}", self.topic))))
    }
}

/// Reads partition `p` from offset `o` up to [`FETCH_AHEAD`] records or the partition's end, until `until`.
fn read_range(
    consumer: &BaseConsumer,
    topic: &str,
    p: i32,
    o: i64,
    until: Instant,
) -> anyhow::Result<Vec<(i64, Record)>> {
    let (_, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(10))?;
    if o >= high {
        return Ok(Vec::new());
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
                out.push((
                    offset,
                    Record {
                        key: Bytes::copy_from_slice(m.key().unwrap_or_default()),
                        value: Bytes::copy_from_slice(m.payload().unwrap_or_default()),
                    },
                ));
                if offset >= last {
                    break;
                }
            }
            Some(Ok(_)) | None => {}
            Some(Err(e)) => anyhow::bail!("{e}"),
        }
    }
    Ok(out)
}

fn check(reference: &PayloadReference, record: &Record) -> Result<Bytes, Missing> {
    if record.key.as_ref() != reference.tx_id.as_bytes() {
        return Err(Missing(format!(
            "the payload record {}/{} belongs to transaction {:?}, not {:?}",
            reference.partition,
            reference.offset,
            String::from_utf8_lossy(&record.key),
            reference.tx_id
        )));
    }
    Ok(record.value.clone())
}

fn prune(inner: &mut Inner, now: Instant) {
    while let Some(&(at, p, o)) = inner.inserted.front() {
        if now.duration_since(at) < RETENTION {
            break;
        }
        inner.inserted.pop_front();
        inner.records.remove(&(p, o));
        if let Some(s) = inner.streamed.as_mut().and_then(|v| v.get_mut(p as usize)) {
            s.pruned_below = s.pruned_below.max(o + 1);
        }
    }
}

/// The streaming task; aborted when dropped.
pub(crate) struct StreamTask(tokio::task::JoinHandle<()>);

impl Drop for StreamTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
