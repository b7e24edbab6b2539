//! `Submit` (Fabric's `internal/pkg/gateway/submit.go`): the signed transaction goes to the channel's orderers in
//! random order until one accepts it. A 4xx status from an orderer is the transaction's fault and ends the call;
//! other failures move on to the next orderer.

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
    /// (each orderer organisation's `OrdererEndpoints`, else the channel's `OrdererAddresses`).
    fn orderers(&self) -> Vec<(String, String)> {
        if !self.orderers.is_empty() {
            return self.orderers.iter().map(|a| (a.clone(), String::new())).collect();
        }
        let config = self.ledger.config();
        let mut out = Vec::new();
        if let Some(orderer) = config.orderer() {
            for org in orderer.organizations().values() {
                out.extend(org.endpoints().iter().map(|e| (e.clone(), org.mspid().to_owned())));
            }
        }
        if out.is_empty() {
            out.extend(config.orderer_addresses().iter().map(|a| (a.clone(), String::new())));
        }
        out
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
        let mut orderers = self.orderers();
        if orderers.is_empty() {
            return Err(Status::unavailable("no orderer nodes available"));
        }
        orderers.shuffle(&mut rand::thread_rng());
        let bytes = bytes::Bytes::from(envelope.encode_to_vec());
        let mut details = Vec::new();
        for (address, mspid) in orderers {
            match self.broadcast(&address, bytes.clone()).await {
                Ok((status, _)) if status == CommonStatus::Success as i32 => return Ok(SubmitResponse {}),
                Ok((status, info)) => {
                    tracing::warn!(endpoint = %address, status, info = %info, "unsuccessful response sending transaction to orderer");
                    if (400..500).contains(&status) {
                        let name = CommonStatus::try_from(status).map_or("UNKNOWN", |s| s.as_str_name());
                        return Err(Status::new(
                            Code::Aborted,
                            format!("received unsuccessful response from orderer: status={name}, info={info}"),
                        ));
                    }
                    details.push(detail(
                        &address,
                        &mspid,
                        format!("received unsuccessful response from orderer: status={status}, info={info}"),
                    ));
                }
                Err(e) => {
                    tracing::warn!(endpoint = %address, error = %e, "error sending transaction to orderer");
                    details.push(detail(&address, &mspid, e));
                }
            }
        }
        Err(rpc_error(Code::Unavailable, "no orderers could successfully process transaction", &details))
    }
}
