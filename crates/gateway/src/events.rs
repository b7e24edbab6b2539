//! `ChaincodeEvents` (Fabric's `internal/pkg/gateway/chaincodeevents.go` and `event/`): from a start block, each
//! committed block's events of one chaincode, from VALID endorser transactions only, one response per block that
//! has any; the stream waits for new blocks until the client goes away. `after_transaction_id` starts at the
//! block of that transaction and skips events up to and including its own.

use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_protos::common::{BlockMetadataIndex, HeaderType};
use ferrofabric_protos::gateway::{ChaincodeEventsRequest, ChaincodeEventsResponse, SignedChaincodeEventsRequest};
use ferrofabric_protos::orderer::seek_position;
use ferrofabric_protos::peer::{ChaincodeEvent, TxValidationCode};
use prost::Message;
use tokio::sync::mpsc;
use tonic::Status;

use crate::ledger::Ledger;
use crate::Inner;

/// Responses buffered for a slow client before the stream waits for it.
const STREAM_BUFFER: usize = 16;

/// The chaincode events of the VALID endorser transactions of a committed block, in block order. Events without a
/// chaincode, a name or a transaction id are not events (Fabric's `validChaincodeEvent`).
///
/// Errors: the block does not decode.
pub(crate) fn block_events(block: Bytes) -> Result<(u64, Vec<ChaincodeEvent>), String> {
    let arena = BlockArena::decode(block).map_err(|e| format!("committed block does not decode: {e}"))?;
    let filter = arena.metadata().metadata.get(BlockMetadataIndex::TransactionsFilter as usize).cloned();
    let mut events = Vec::new();
    for (i, tx) in arena.txs().iter().enumerate() {
        let valid = filter.as_ref().and_then(|f| f.get(i)) == Some(&(TxValidationCode::Valid as u8));
        let endorser_tx = tx.channel_header().is_ok_and(|h| h.r#type == HeaderType::EndorserTransaction as i32);
        if !valid || !endorser_tx {
            continue;
        }
        let Ok(action) = tx.chaincode_action() else { continue };
        let Ok(event) = ChaincodeEvent::decode(action.events.clone()) else { continue };
        if !event.chaincode_id.is_empty() && !event.event_name.is_empty() && !event.tx_id.is_empty() {
            events.push(event);
        }
    }
    Ok((arena.number(), events))
}

/// Which events a stream passes on (Fabric's `chaincodeEventMatcher`).
struct Matcher {
    chaincode: String,
    /// Until this transaction's event has gone by, nothing matches.
    after: Option<String>,
}

impl Matcher {
    fn matches(&mut self, event: &ChaincodeEvent) -> bool {
        if let Some(after) = &self.after {
            if event.tx_id == *after {
                self.after = None;
            }
            return false;
        }
        event.chaincode_id == self.chaincode
    }
}

impl<L: Ledger> Inner<L> {
    /// The first block of a request.
    async fn start_block(&self, request: &ChaincodeEventsRequest) -> Result<u64, Status> {
        if !request.after_transaction_id.is_empty() {
            if let Ok(Some((number, _))) = self.ledger.tx_location(&request.after_transaction_id).await {
                return Ok(number);
            }
        }
        match request.start_position.as_ref().and_then(|p| p.r#type.as_ref()) {
            None | Some(seek_position::Type::NextCommit(_)) => Ok(self.ledger.height()),
            Some(seek_position::Type::Specified(s)) => Ok(s.number),
            Some(seek_position::Type::Oldest(_)) => {
                Err(Status::invalid_argument("invalid start position type: *orderer.SeekPosition_Oldest"))
            }
            Some(seek_position::Type::Newest(_)) => {
                Err(Status::invalid_argument("invalid start position type: *orderer.SeekPosition_Newest"))
            }
        }
    }

    /// Checks the request and returns the stream's receiving end; a task sends the responses.
    pub(crate) async fn chaincode_events(
        self: &std::sync::Arc<Self>,
        signed: SignedChaincodeEventsRequest,
    ) -> Result<mpsc::Receiver<Result<ChaincodeEventsResponse, Status>>, Status> {
        if signed.request.is_empty() {
            return Err(Status::invalid_argument("a chaincode events request is required"));
        }
        let request = ChaincodeEventsRequest::decode(signed.request.clone())
            .map_err(|e| Status::invalid_argument(format!("invalid chaincode events request: {e}")))?;
        self.check_acl(
            "gateway/ChaincodeEvents",
            &request.channel_id,
            signed.request,
            request.identity.clone(),
            signed.signature,
        )?;
        let start = self.start_block(&request).await?;
        let mut matcher = Matcher {
            chaincode: request.chaincode_id,
            after: Some(request.after_transaction_id).filter(|t| !t.is_empty()),
        };
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let inner = self.clone();
        tokio::spawn(async move {
            let mut heights = inner.ledger.subscribe();
            let mut shutdown = inner.shutdown.clone();
            let mut next = start;
            loop {
                while inner.ledger.height() <= next {
                    tokio::select! {
                        changed = heights.changed() => if changed.is_err() { return },
                        _ = shutdown.recv() => return,
                        _ = tx.closed() => return,
                    }
                }
                let read = inner
                    .ledger
                    .block(next)
                    .await
                    .and_then(|b| b.ok_or_else(|| format!("block {next} is not readable")));
                let events = match read.and_then(block_events) {
                    Ok((_, events)) => events,
                    Err(e) => {
                        let _ = tx.send(Err(Status::aborted(e))).await;
                        return;
                    }
                };
                let events: Vec<ChaincodeEvent> = events.into_iter().filter(|e| matcher.matches(e)).collect();
                if !events.is_empty()
                    && tx.send(Ok(ChaincodeEventsResponse { events, block_number: next })).await.is_err()
                {
                    return;
                }
                next += 1;
            }
        });
        Ok(rx)
    }
}
