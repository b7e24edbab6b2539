//! One chaincode's stream and the transactions run over it (Fabric's `core/chaincode/handler.go`).
//!
//! A stream starts with the chaincode's REGISTER (its `ChaincodeID.name` is the package ID); the peer answers
//! REGISTERED and READY. Then each transaction is a TRANSACTION (or INIT) from the peer carrying the invocation's
//! `ChaincodeInput`, the client's `SignedProposal` and the channel, the chaincode's requests (GET_STATE, PUT_STATE,
//! ...) each answered with a RESPONSE or an ERROR, and finally the chaincode's COMPLETED (a marshaled `Response`
//! and the chaincode event) or ERROR. Many transactions share one stream; messages are routed by channel and
//! transaction ID.
//!
//! The transaction runs on the endorser's blocking thread against its [`TxContext`]; the stream's reader task only
//! routes messages, so a chaincode that hangs costs its transaction the execute timeout and nothing else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_chaincode::{RangeHandle, Response, TxContext, TOTAL_QUERY_LIMIT};
use ferrofabric_protos::peer::{
    chaincode_message::Type, ChaincodeEvent, ChaincodeId, ChaincodeInput, ChaincodeMessage, ChaincodeSpec, DelState,
    GetHistoryForKey, GetState, GetStateByRange, GetStateMetadata, PurgePrivateState, PutState, PutStateMetadata,
    QueryMetadata, QueryResponse, QueryResponseMetadata, QueryResultBytes, QueryStateClose, QueryStateNext,
    StateMetadata, StateMetadataResult,
};
use ferrofabric_protos::queryresult::Kv;
use prost::Message;
use tokio::sync::mpsc;

/// Results per QueryResponse of a non-paginated query (Fabric's `QueryResponseBuilder.maxResultLimit`).
pub const MAX_RESULT_LIMIT: usize = 100;

/// How a chaincode called by another (INVOKE_CHAINCODE on the same channel) is run: in the caller's simulation,
/// by name (`name` or `name:version`), answering its `Response` or why it could not run (Fabric's text).
pub trait ChaincodeInvoker {
    /// Runs chaincode `name` with `args` inside `ctx`.
    fn invoke(&self, ctx: &mut TxContext<'_>, name: &str, args: &[Bytes]) -> Result<Response, String>;
}

/// Why a transaction got no answer when its chaincode's stream ended (Fabric's `Handler.Execute`).
const STREAM_TERMINATED: &str = "chaincode stream terminated";

/// Fabric's text for a transaction the handler could not run to an answer: `ChaincodeSupport.execute` adds
/// `error sending`, `processChaincodeExecutionResult` the transaction.
fn not_executed(txid: &str, why: &str) -> String {
    format!("failed to execute transaction {txid}: error sending: {why}")
}

/// The chaincode's stream as the peer holds it.
pub(crate) struct Stream {
    pub(crate) package_id: String,
    to_chaincode: mpsc::UnboundedSender<ChaincodeMessage>,
    waiting: Mutex<HashMap<(String, String), std_mpsc::Sender<ChaincodeMessage>>>,
    alive: AtomicBool,
    /// Requests served (shared by the support's streams: [`crate::ShimStats::requests`]).
    requests: Arc<AtomicU64>,
}

fn message(kind: Type, payload: Bytes, txid: &str, channel: &str) -> ChaincodeMessage {
    ChaincodeMessage {
        r#type: kind as i32,
        payload,
        txid: txid.to_owned(),
        channel_id: channel.to_owned(),
        ..Default::default()
    }
}

impl Stream {
    pub(crate) fn new(
        package_id: String,
        to_chaincode: mpsc::UnboundedSender<ChaincodeMessage>,
        requests: Arc<AtomicU64>,
    ) -> Stream {
        Stream { package_id, to_chaincode, waiting: Mutex::new(HashMap::new()), alive: AtomicBool::new(true), requests }
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire) && !self.to_chaincode.is_closed()
    }

    /// Sends REGISTERED and READY (the answer to REGISTER).
    pub(crate) fn ready(&self) {
        let _ = self.to_chaincode.send(message(Type::Registered, Bytes::new(), "", ""));
        let _ = self.to_chaincode.send(message(Type::Ready, Bytes::new(), "", ""));
    }

    /// Routes a message of the chaincode to the transaction waiting for it (others are dropped: a late answer to a
    /// transaction that timed out).
    pub(crate) fn route(&self, msg: ChaincodeMessage) {
        if msg.r#type == Type::Keepalive as i32 {
            return;
        }
        let key = (msg.channel_id.clone(), msg.txid.clone());
        let waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        match waiting.get(&key) {
            Some(tx) => {
                let _ = tx.send(msg);
            }
            None => {
                tracing::debug!(txid = %msg.txid, kind = msg.r#type, "chaincode message for no running transaction")
            }
        }
    }

    /// The stream ended: every running transaction fails at once.
    pub(crate) fn closed(&self) {
        self.alive.store(false, Ordering::Release);
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Runs one transaction (Fabric's `Handler.Execute`): sends TRANSACTION (INIT when `is_init`) and serves the
    /// chaincode's requests against `ctx` until it completes, within `timeout`.
    ///
    /// Errors (Fabric's texts, as `processChaincodeExecutionResult` words them): `failed to execute transaction
    /// <txid>: error sending: ` and a transaction of that ID already running (`txid: <txid>(<channel>) exists`),
    /// the stream gone (`chaincode stream terminated`) or the timeout (`timeout expired while executing
    /// transaction`); an ERROR from the chaincode (`transaction returned with failure: ...`); an undecodable
    /// COMPLETED.
    pub(crate) fn execute(
        &self,
        ctx: &mut TxContext<'_>,
        args: &[Bytes],
        is_init: bool,
        timeout: Duration,
        invoker: &dyn ChaincodeInvoker,
    ) -> Result<(Response, Option<ChaincodeEvent>), String> {
        let channel = ctx.channel_id().to_owned();
        let txid = ctx.tx_id().to_owned();
        let key = (channel.clone(), txid.clone());
        let (tx, rx) = std_mpsc::channel();
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            if waiting.contains_key(&key) {
                return Err(not_executed(&txid, &format!("txid: {txid}({channel}) exists")));
            }
            waiting.insert(key.clone(), tx);
        }
        let result = self.run(ctx, args, is_init, timeout, invoker, &rx);
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
        result
    }

    fn run(
        &self,
        ctx: &mut TxContext<'_>,
        args: &[Bytes],
        is_init: bool,
        timeout: Duration,
        invoker: &dyn ChaincodeInvoker,
        rx: &std_mpsc::Receiver<ChaincodeMessage>,
    ) -> Result<(Response, Option<ChaincodeEvent>), String> {
        let channel = ctx.channel_id().to_owned();
        let txid = ctx.tx_id().to_owned();
        let input = ChaincodeInput { args: args.to_vec(), decorations: Default::default(), is_init };
        let kind = if is_init { Type::Init } else { Type::Transaction };
        let mut first = message(kind, Bytes::from(input.encode_to_vec()), &txid, &channel);
        first.proposal = ctx.proposal().cloned();
        if !self.is_alive() || self.to_chaincode.send(first).is_err() {
            return Err(not_executed(&txid, STREAM_TERMINATED));
        }
        let deadline = Instant::now() + timeout;
        let mut tx = Transaction::default();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = match rx.recv_timeout(left) {
                Ok(m) => m,
                Err(std_mpsc::RecvTimeoutError::Timeout) => {
                    return Err(not_executed(&txid, "timeout expired while executing transaction"))
                }
                Err(std_mpsc::RecvTimeoutError::Disconnected) => return Err(not_executed(&txid, STREAM_TERMINATED)),
            };
            let kind = Type::try_from(msg.r#type).unwrap_or(Type::Undefined);
            match kind {
                Type::Completed => {
                    let response = Response::decode(msg.payload)
                        .map_err(|e| format!("failed to unmarshal response for transaction {txid}: {e}"))?;
                    return Ok((response, msg.chaincode_event));
                }
                Type::Error => {
                    return Err(format!("transaction returned with failure: {}", String::from_utf8_lossy(&msg.payload)))
                }
                _ => {
                    self.requests.fetch_add(1, Ordering::Relaxed);
                    let answer = match tx.handle(ctx, kind, msg.payload, invoker) {
                        Ok(payload) => message(Type::Response, payload, &txid, &channel),
                        Err(e) => {
                            let text = format!("{} failed: transaction ID: {txid}: {e}", kind.as_str_name());
                            message(Type::Error, Bytes::from(text.into_bytes()), &txid, &channel)
                        }
                    };
                    if self.to_chaincode.send(answer).is_err() {
                        return Err(not_executed(&txid, STREAM_TERMINATED));
                    }
                }
            }
        }
    }
}

/// Where a query iterator's results come from.
enum Source {
    /// A range of the simulation's state (its results are recorded reads).
    Range(RangeHandle),
    /// Records computed at once (a history query's `KeyModification`s), not part of the read/write set.
    Records(std::collections::VecDeque<Bytes>),
}

/// An open query iterator of a transaction (Fabric's `PendingQueryResult` and total-return count).
struct Query {
    source: Source,
    namespace: String,
    paginated: bool,
    limit: usize,
    returned: usize,
    pending: Vec<QueryResultBytes>,
}

/// The chaincode-visible state of one running transaction (Fabric's `TransactionContext`).
#[derive(Default)]
struct Transaction {
    queries: HashMap<String, Query>,
    paginated: bool,
    /// A range query over private data was made (Fabric's `pvtdataQueriesPerformed`).
    private_queries: bool,
    /// A write was made (Fabric's `writePerformed`).
    wrote: bool,
}

fn decode<M: Message + Default>(payload: Bytes) -> Result<M, String> {
    M::decode(payload).map_err(|e| format!("unmarshal failed: {e}"))
}

/// A fresh iterator ID in the form Fabric's peer gives them (a random UUID).
fn iterator_id() -> String {
    let b: [u8; 16] = rand::random();
    let h = hex::encode(b);
    format!("{}-{}-4{}-{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[16..20], &h[20..32])
}

impl Transaction {
    /// Fabric's `checkWritePrecondition`: no writes after a paginated or private-data query.
    fn check_write(&mut self, ctx: &TxContext<'_>) -> Result<(), String> {
        let txid = ctx.tx_id();
        if self.paginated {
            return Err(format!(
                "txid [{txid}]: unsuppored transaction. Transaction has already performed a paginated query. Writes are not allowed"
            ));
        }
        if self.private_queries {
            return Err(format!(
                "txid [{txid}]: unsuppored transaction. Transaction has already performed queries on pvt data. Writes are not allowed"
            ));
        }
        self.wrote = true;
        Ok(())
    }

    /// One request of the chaincode: the RESPONSE payload, or the error an ERROR carries.
    fn handle(
        &mut self,
        ctx: &mut TxContext<'_>,
        kind: Type,
        payload: Bytes,
        invoker: &dyn ChaincodeInvoker,
    ) -> Result<Bytes, String> {
        match kind {
            Type::GetState => {
                let r: GetState = decode(payload)?;
                if r.collection.is_empty() {
                    return Ok(ctx.get_state(&r.key).unwrap_or_default());
                }
                private_collection(ctx, &r.collection)?;
                Ok(ctx.get_private_data(&r.collection, &r.key).map_err(|e| e.to_string())?.unwrap_or_default())
            }
            Type::GetPrivateDataHash => {
                let r: GetState = decode(payload)?;
                private_collection(ctx, &r.collection)?;
                Ok(ctx.get_private_data_hash(&r.collection, &r.key).unwrap_or_default())
            }
            Type::GetStateMetadata => {
                let r: GetStateMetadata = decode(payload)?;
                if !r.collection.is_empty() {
                    return Err("private data is not supported by this peer yet".to_owned());
                }
                let entries = ctx
                    .get_state_metadata(&r.key)
                    .into_iter()
                    .map(|(metakey, value)| StateMetadata { metakey, value })
                    .collect();
                Ok(Bytes::from(StateMetadataResult { entries }.encode_to_vec()))
            }
            Type::PutState => {
                let r: PutState = decode(payload)?;
                self.check_write(ctx)?;
                if r.collection.is_empty() {
                    ctx.put_state(&r.key, r.value).map_err(|e| e.to_string())?;
                } else {
                    private_collection(ctx, &r.collection)?;
                    ctx.put_private_data(&r.collection, &r.key, r.value).map_err(|e| e.to_string())?;
                }
                Ok(Bytes::new())
            }
            Type::DelState => {
                let r: DelState = decode(payload)?;
                self.check_write(ctx)?;
                if r.collection.is_empty() {
                    ctx.del_state(&r.key).map_err(|e| e.to_string())?;
                } else {
                    private_collection(ctx, &r.collection)?;
                    ctx.put_private_data(&r.collection, &r.key, Bytes::new()).map_err(|e| e.to_string())?;
                }
                Ok(Bytes::new())
            }
            Type::PutStateMetadata => {
                let r: PutStateMetadata = decode(payload)?;
                self.check_write(ctx)?;
                if !r.collection.is_empty() {
                    return Err("private data is not supported by this peer yet".to_owned());
                }
                let m = r.metadata.unwrap_or_default();
                let map = std::iter::once((m.metakey, m.value)).collect();
                ctx.set_state_metadata(&r.key, &map).map_err(|e| e.to_string())?;
                Ok(Bytes::new())
            }
            Type::GetStateByRange => {
                let r: GetStateByRange = decode(payload)?;
                if !r.collection.is_empty() {
                    return self.private_range(ctx, r);
                }
                let (start, limit, paginated) = if r.metadata.is_empty() {
                    (r.start_key, TOTAL_QUERY_LIMIT, false)
                } else {
                    let m: QueryMetadata = decode(r.metadata)?;
                    self.paginated = true;
                    let start = if m.bookmark.is_empty() { r.start_key } else { m.bookmark };
                    (start, usize::try_from(m.page_size).unwrap_or(0), true)
                };
                let handle = ctx.open_range(&start, &r.end_key, limit);
                let id = iterator_id();
                let query = Query {
                    source: Source::Range(handle),
                    namespace: ctx.namespace().to_owned(),
                    paginated,
                    limit,
                    returned: 0,
                    pending: Vec::new(),
                };
                self.queries.insert(id.clone(), query);
                Ok(self.next_batch(ctx, &id))
            }
            Type::QueryStateNext => {
                let r: QueryStateNext = decode(payload)?;
                if !self.queries.contains_key(&r.id) {
                    return Err("query iterator not found".to_owned());
                }
                Ok(self.next_batch(ctx, &r.id))
            }
            Type::QueryStateClose => {
                let r: QueryStateClose = decode(payload)?;
                self.queries.remove(&r.id);
                Ok(Bytes::from(QueryResponse { has_more: false, id: r.id, ..Default::default() }.encode_to_vec()))
            }
            Type::GetQueryResult => Err("ExecuteQuery not supported for leveldb".to_owned()),
            Type::GetHistoryForKey => {
                let r: GetHistoryForKey = decode(payload)?;
                let modifications = ctx.history(&r.key).ok_or("history database is not enabled")?;
                let records = modifications.into_iter().map(|m| Bytes::from(m.encode_to_vec())).collect();
                let id = iterator_id();
                let query = Query {
                    source: Source::Records(records),
                    namespace: ctx.namespace().to_owned(),
                    paginated: false,
                    limit: TOTAL_QUERY_LIMIT,
                    returned: 0,
                    pending: Vec::new(),
                };
                self.queries.insert(id.clone(), query);
                Ok(self.next_batch(ctx, &id))
            }
            Type::PurgePrivateData => {
                let r: PurgePrivateState = decode(payload)?;
                self.check_write(ctx)?;
                private_collection(ctx, &r.collection)?;
                ctx.purge_private_data(&r.collection, &r.key).map_err(|e| e.to_string())?;
                Ok(Bytes::new())
            }
            Type::InvokeChaincode => {
                let spec: ChaincodeSpec = decode(payload)?;
                let name = spec.chaincode_id.map(|c: ChaincodeId| c.name).unwrap_or_default();
                let args = spec.input.map(|i| i.args).unwrap_or_default();
                let response = invoker.invoke(ctx, &name, &args).map_err(|e| format!("execute failed: {e}"))?;
                let completed =
                    message(Type::Completed, Bytes::from(response.encode_to_vec()), ctx.tx_id(), ctx.channel_id());
                Ok(Bytes::from(completed.encode_to_vec()))
            }
            other => Err(format!(
                "[{}] Fabric side handler cannot handle message ({}) while in ready state",
                short(ctx.tx_id()),
                other.as_str_name()
            )),
        }
    }

    /// A range query over a private collection (Fabric's `GetPrivateDataRangeScanIterator`): the values this peer
    /// holds, nothing recorded; read-only transactions only.
    fn private_range(&mut self, ctx: &mut TxContext<'_>, r: GetStateByRange) -> Result<Bytes, String> {
        private_collection(ctx, &r.collection)?;
        if self.wrote {
            return Err(format!(
                "txid [{}]: unsuppored transaction. Queries on pvt data is supported only in a read-only transaction",
                ctx.tx_id()
            ));
        }
        self.private_queries = true;
        let namespace = ctx.namespace().to_owned();
        let records = ctx
            .get_private_data_by_range(&r.collection, &r.start_key, &r.end_key)
            .into_iter()
            .map(|(key, value)| Bytes::from(Kv { namespace: namespace.clone(), key, value }.encode_to_vec()))
            .collect();
        let id = iterator_id();
        let query = Query {
            source: Source::Records(records),
            namespace,
            paginated: false,
            limit: TOTAL_QUERY_LIMIT,
            returned: 0,
            pending: Vec::new(),
        };
        self.queries.insert(id.clone(), query);
        Ok(self.next_batch(ctx, &id))
    }

    /// Fabric's `QueryResponseBuilder.BuildQueryResponse`: up to [`MAX_RESULT_LIMIT`] results (all of a page for a
    /// paginated query), `has_more` while the iterator has more; at its end the iterator is closed and a paginated
    /// query's answer carries the fetched count and the bookmark.
    fn next_batch(&mut self, ctx: &mut TxContext<'_>, id: &str) -> Bytes {
        let Some(q) = self.queries.get_mut(id) else { return Bytes::new() };
        loop {
            let next = match &mut q.source {
                _ if q.returned >= q.limit => None,
                Source::Range(handle) => ctx
                    .range_next(*handle)
                    .map(|(key, value)| Bytes::from(Kv { namespace: q.namespace.clone(), key, value }.encode_to_vec())),
                Source::Records(records) => records.pop_front(),
            };
            match next {
                None => break,
                Some(result_bytes) => {
                    let result = QueryResultBytes { result_bytes };
                    if !q.paginated && q.pending.len() == MAX_RESULT_LIMIT {
                        let batch = std::mem::replace(&mut q.pending, vec![result]);
                        q.returned += 1;
                        let response =
                            QueryResponse { results: batch, has_more: true, id: id.to_owned(), metadata: Bytes::new() };
                        return Bytes::from(response.encode_to_vec());
                    }
                    q.pending.push(result);
                    q.returned += 1;
                }
            }
        }
        let Some(q) = self.queries.remove(id) else { return Bytes::new() };
        let metadata = if let (true, Source::Range(handle)) = (q.paginated, &q.source) {
            let m = QueryResponseMetadata {
                fetched_records_count: i32::try_from(q.returned).unwrap_or(i32::MAX),
                bookmark: ctx.range_bookmark(*handle),
            };
            Bytes::from(m.encode_to_vec())
        } else {
            Bytes::new()
        };
        Bytes::from(QueryResponse { results: q.pending, has_more: false, id: id.to_owned(), metadata }.encode_to_vec())
    }
}

/// Fabric's checks before a private-data call: the collection must be the chaincode's (its definition read through
/// the simulation, see [`ferrofabric_chaincode::check_collection`]).
fn private_collection(ctx: &mut TxContext<'_>, collection: &str) -> Result<(), String> {
    let ns = ctx.namespace().to_owned();
    ferrofabric_chaincode::check_collection(ctx, &ns, collection).map_err(|e| e.to_string())
}

/// The first 8 characters of a transaction ID, as Fabric's logs and some errors show it.
fn short(txid: &str) -> &str {
    txid.get(..8).unwrap_or(txid)
}
