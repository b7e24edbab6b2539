//! `Submit` (Fabric's `internal/pkg/gateway/submit.go`): the signed transaction goes to the channel's orderers in
//! random order until one accepts it. A 4xx status from an orderer is the transaction's fault and ends the call;
//! other failures move on to the next orderer. On a BFT channel it goes to every orderer at once and needs a
//! quorum of them to accept it.

use ferrofabric_channelconfig::bft_quorum;
use ferrofabric_protos::common::Status as CommonStatus;
use ferrofabric_protos::gateway::{SubmitRequest, SubmitResponse};
use futures::StreamExt;
use prost::Message;
use rand::seq::SliceRandom;
use tonic::{Code, Status};

use crate::error::{detail, go_error_text, rpc_error};
use crate::ledger::Ledger;
use crate::Inner;

impl<L: Ledger> Inner<L> {
    /// The orderers to submit to: those configured for the gateway, else the channel configuration's endpoints
    /// (each orderer organisation's `OrdererEndpoints`, else the channel's `OrdererAddresses`), each dialled at its
    /// override if it has one.
    fn orderers(&self) -> Vec<(String, String)> {
        if !self.orderers.is_empty() {
            return self.orderers.iter().map(|a| (a.clone(), String::new())).collect();
        }
        let mut endpoints = self.ledger.config().orderer_endpoints();
        for (address, _) in &mut endpoints {
            if let Some(to) = self.orderer_overrides.get(address.as_str()) {
                address.clone_from(to);
            }
        }
        endpoints
    }

    /// Broadcasts `envelope` to the orderer at `address` and returns its answer.
    async fn broadcast(&self, address: &str, envelope: bytes::Bytes) -> Result<(i32, String), String> {
        // The dial counts against the broadcast timeout, as the call does.
        let answer = async {
            let channel = self.connections.get(address).await?;
            let mut responses = ferrofabric_comm::broadcast(channel, futures::stream::iter([envelope]))
                .await
                .map_err(|s| go_error_text(&s))?;
            match responses.next().await {
                Some(Ok(r)) => Ok((r.status, r.info)),
                Some(Err(s)) => Err(go_error_text(&s)),
                None => Err("the orderer closed the stream without an answer".to_owned()),
            }
        };
        tokio::time::timeout(self.options.broadcast_timeout, answer)
            .await
            .unwrap_or_else(|_| Err("rpc error: code = DeadlineExceeded desc = context deadline exceeded".into()))
    }

    pub(crate) async fn submit(&self, request: SubmitRequest) -> Result<SubmitResponse, Status> {
        let envelope = request
            .prepared_transaction
            .ok_or_else(|| Status::invalid_argument("a prepared transaction is required"))?;
        if envelope.signature.is_empty() {
            return Err(Status::invalid_argument("prepared transaction must be signed"));
        }
        if request.channel_id != self.ledger.channel_id() {
            return Err(Status::failed_precondition(format!("channel '{}' not found", request.channel_id)));
        }
        let orderers = self.orderers();
        if orderers.is_empty() {
            return Err(Status::unavailable("no orderer nodes available"));
        }
        let bytes = bytes::Bytes::from(envelope.encode_to_vec());
        let bft = self.ledger.config().orderer().is_some_and(|o| o.consensus_type() == "BFT");
        if bft {
            self.submit_bft(orderers, bytes).await
        } else {
            self.submit_non_bft(orderers, bytes).await
        }
    }

    /// Crash-fault-tolerant ordering: one orderer accepting is enough. Orderers are tried in random order; a 4xx
    /// answer is the transaction's fault and ends the call, any other failure moves on to the next orderer (only
    /// failed calls, not unsuccessful answers, are reported as details, as Fabric does).
    async fn submit_non_bft(
        &self,
        mut orderers: Vec<(String, String)>,
        bytes: bytes::Bytes,
    ) -> Result<SubmitResponse, Status> {
        orderers.shuffle(&mut rand::thread_rng());
        let mut details = Vec::new();
        for (address, mspid) in orderers {
            match self.broadcast(&address, bytes.clone()).await {
                Ok((status, _)) if status == CommonStatus::Success as i32 => return Ok(SubmitResponse {}),
                Ok((status, info)) => {
                    tracing::warn!(endpoint = %address, status, info = %info, "unsuccessful response sending transaction to orderer");
                    if (400..500).contains(&status) {
                        return Err(Status::new(Code::Aborted, unsuccessful(status, &info)));
                    }
                }
                Err(e) => {
                    tracing::warn!(endpoint = %address, error = %e, "error sending transaction to orderer");
                    details.push(detail(&address, &mspid, e));
                }
            }
        }
        Err(rpc_error(Code::Unavailable, "no orderers could successfully process transaction", &details))
    }

    /// Byzantine-fault-tolerant ordering (Fabric 3's `submitBFT`): a single orderer could drop the transaction, so
    /// it goes to every orderer at once and the call succeeds when a quorum `Q = ⌈(n + f + 1) / 2⌉` of the `n`
    /// configured orderers (`f = ⌊(n − 1) / 3⌋`) accepted it; it fails as soon as more than `n − Q` did not. An
    /// orderer that already holds the request counts as accepting.
    async fn submit_bft(&self, orderers: Vec<(String, String)>, bytes: bytes::Bytes) -> Result<SubmitResponse, Status> {
        let total = orderers.len();
        let quorum = bft_quorum(total);
        let mut calls: futures::stream::FuturesUnordered<_> = orderers
            .into_iter()
            .map(|(address, mspid)| {
                let bytes = bytes.clone();
                async move {
                    let answer = self.broadcast(&address, bytes).await;
                    (address, mspid, answer)
                }
            })
            .collect();
        let (mut successes, mut failures, mut details) = (0usize, 0usize, Vec::new());
        while let Some((address, mspid, answer)) = calls.next().await {
            let failure = match answer {
                Ok((status, _)) if status == CommonStatus::Success as i32 => None,
                Ok((status, info))
                    if status == CommonStatus::ServiceUnavailable as i32
                        && info == "failed to submit request: request already exists" =>
                {
                    None
                }
                Ok((status, info)) => {
                    tracing::warn!(endpoint = %address, status, info = %info, "unsuccessful response sending transaction to orderer");
                    Some(unsuccessful(status, &info))
                }
                Err(e) => {
                    tracing::warn!(endpoint = %address, error = %e, "error sending transaction to orderer");
                    Some(e)
                }
            };
            match failure {
                None => {
                    successes += 1;
                    if successes >= quorum {
                        return Ok(SubmitResponse {});
                    }
                }
                Some(message) => {
                    details.push(detail(&address, &mspid, message));
                    failures += 1;
                    if failures > total - quorum {
                        break;
                    }
                }
            }
        }
        tracing::warn!(successes, quorum, "too few orderers accepted the transaction for a BFT quorum");
        Err(rpc_error(
            Code::Unavailable,
            "insufficient number of orderers could successfully process transaction to satisfy quorum requirement",
            &details,
        ))
    }
}

/// Fabric's words for an orderer's unsuccessful answer.
fn unsuccessful(status: i32, info: &str) -> String {
    let name = CommonStatus::try_from(status).map_or("UNKNOWN", |s| s.as_str_name());
    format!("received unsuccessful response from orderer: status={name}, info={info}")
}
