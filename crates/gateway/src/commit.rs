//! `CommitStatus` (Fabric's `internal/pkg/gateway/commitstatus.go`, `commit/finder.go`): the validation code and
//! block number of a transaction once this peer has committed it, waiting for the commit if it has not yet; and the
//! access check of the signed requests (`gateway/CommitStatus`, `gateway/ChaincodeEvents`: the channel's Readers
//! unless its ACLs say otherwise, Fabric's `core/aclmgmt`).

use bytes::Bytes;
use ferrofabric_channelconfig::{SignatureSet, SignedData};
use ferrofabric_protos::common::{Block, BlockMetadataIndex};
use ferrofabric_protos::gateway::{CommitStatusRequest, CommitStatusResponse, SignedCommitStatusRequest};
use prost::Message;
use tonic::Status;

use crate::ledger::Ledger;
use crate::Inner;

/// The default policy of the gateway's signed requests.
const CHANNEL_READERS: &str = "/Channel/Application/Readers";

/// The validation code (a `TxValidationCode`) of transaction `index` of the marshaled block `block`.
///
/// Errors: the block does not decode or has no code for the transaction.
pub(crate) fn validation_code(block: Bytes, index: u32) -> Result<i32, String> {
    let block = Block::decode(block).map_err(|e| format!("committed block does not decode: {e}"))?;
    let filter = block
        .metadata
        .as_ref()
        .and_then(|m| m.metadata.get(BlockMetadataIndex::TransactionsFilter as usize))
        .ok_or("committed block has no TRANSACTIONS_FILTER")?;
    filter
        .get(index as usize)
        .map(|c| i32::from(*c))
        .ok_or_else(|| format!("no validation code for transaction {index}"))
}

impl<L: Ledger> Inner<L> {
    /// Checks that `signature` by `identity` over `data` satisfies the policy of `resource` on `channel`.
    ///
    /// Errors: PERMISSION_DENIED with Fabric's message.
    pub(crate) fn check_acl(
        &self,
        resource: &str,
        channel: &str,
        data: Bytes,
        identity: Bytes,
        signature: Bytes,
    ) -> Result<(), Status> {
        if channel != self.ledger.channel_id() {
            return Err(Status::permission_denied(format!("channel '{channel}' not found")));
        }
        let config = self.ledger.config();
        let path = config.application().and_then(|a| a.acl_policy(resource)).unwrap_or(CHANNEL_READERS).to_owned();
        let set = SignatureSet::new(vec![SignedData { data, identity, signature }], config.msp_manager());
        let result = match config.policy(&path) {
            Some(policy) => policy.evaluate(&set).map_err(|e| e.to_string()),
            None => Err(format!("no such policy: '{path}'")),
        };
        result.map_err(|e| {
            Status::permission_denied(format!(
                "failed evaluating policy on signed data during check policy on channel [{channel}] with policy [{path}]: [{e}]"
            ))
        })
    }

    pub(crate) async fn commit_status(
        &self,
        signed: SignedCommitStatusRequest,
    ) -> Result<CommitStatusResponse, Status> {
        if signed.request.is_empty() {
            return Err(Status::invalid_argument("a commit status request is required"));
        }
        let request = CommitStatusRequest::decode(signed.request.clone())
            .map_err(|e| Status::invalid_argument(format!("invalid status request: {e}")))?;
        self.check_acl(
            "gateway/CommitStatus",
            &request.channel_id,
            signed.request,
            request.identity,
            signed.signature,
        )?;
        let aborted = |e: String| Status::aborted(e);
        let mut heights = self.ledger.subscribe();
        let mut shutdown = self.shutdown.clone();
        loop {
            if let Some((number, index)) = self.ledger.tx_location(&request.transaction_id).await.map_err(aborted)? {
                let block = self.ledger.block(number).await.map_err(aborted)?.ok_or_else(|| {
                    aborted(format!("block {number} of transaction {} is not readable", request.transaction_id))
                })?;
                let result = validation_code(block, index).map_err(aborted)?;
                return Ok(CommitStatusResponse { result, block_number: number });
            }
            tokio::select! {
                changed = heights.changed() => {
                    if changed.is_err() {
                        return Err(Status::unavailable("the ledger is closed"));
                    }
                }
                _ = shutdown.recv() => return Err(Status::unavailable("the peer is shutting down")),
            }
        }
    }
}
