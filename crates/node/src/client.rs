//! A Fabric client of a node, as an SDK does it without a gateway: [`NetworkClient`].

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use ferrofabric_endorser::{assemble_transaction, create_proposal, ClientProposal};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::gateway::gateway_client::GatewayClient;
use ferrofabric_protos::gateway::{EndorseRequest, EndorseResponse, SubmitRequest};
use ferrofabric_protos::orderer::{seek_info, SeekInfo};
use ferrofabric_protos::peer::deliver_client::DeliverClient;
use ferrofabric_protos::peer::deliver_response::Type as DeliverType;
use ferrofabric_protos::peer::endorser_client::EndorserClient;
use ferrofabric_protos::peer::{FilteredBlock, ProposalResponse, TxValidationCode};
use ferrofabric_protoutil::{seek_envelope, seek_newest, seek_specified};
use futures::StreamExt;
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::profile::NodeInfo;

/// gRPC message size limit of the client (Fabric's 100 MiB default).
const MAX_MESSAGE: usize = 100 << 20;

/// Connections to a node's orderer and peers.
///
/// A Fabric client of a node, as an SDK does it without a gateway: proposals to the peers' `protos.Endorser`,
/// transactions assembled from the endorsements (`ferrofabric_endorser::create_proposal`,
/// `ferrofabric_endorser::assemble_transaction`), `Broadcast` to the orderer, and commit events from a peer's
/// `DeliverFiltered`. Used by the node to define its chaincodes, by `ferrofabric bench e2e` and by the tests.
#[derive(Debug, Clone)]
pub struct NetworkClient {
    /// Channel ID.
    pub channel: String,
    /// Peer addresses in the order of the client's peer connections (MSP ID, `host:port`), Org1 first.
    pub peer_addrs: Vec<(String, String)>,
    /// The committer's address when the peers do not serve commit events themselves (`NodeInfo::events`).
    pub events: Option<String>,
    peers: Vec<EndorserClient<Channel>>,
    gateways: Vec<GatewayClient<Channel>>,
    orderer: Channel,
    tls: Option<ferrofabric_comm::ClientTls>,
}

impl NetworkClient {
    /// Connects to every peer of `info` (sorted by MSP ID) and to its orderer.
    ///
    /// Errors: a connection fails.
    pub async fn connect(info: &NodeInfo) -> anyhow::Result<NetworkClient> {
        let tls = info.client_tls()?;
        let mut peers = Vec::new();
        let mut gateways = Vec::new();
        let mut peer_addrs = Vec::new();
        for (mspid, addr) in &info.peers {
            let ch = ferrofabric_comm::connect(addr, tls.as_ref())
                .await
                .with_context(|| format!("connecting to peer {addr}"))?;
            gateways.push(
                GatewayClient::new(ch.clone())
                    .max_decoding_message_size(MAX_MESSAGE)
                    .max_encoding_message_size(MAX_MESSAGE),
            );
            peers.push(
                EndorserClient::new(ch).max_decoding_message_size(MAX_MESSAGE).max_encoding_message_size(MAX_MESSAGE),
            );
            peer_addrs.push((mspid.clone(), addr.clone()));
        }
        let orderer = ferrofabric_comm::connect(&info.orderer, tls.as_ref())
            .await
            .with_context(|| format!("connecting to the orderer {}", info.orderer))?;
        Ok(NetworkClient {
            channel: info.channel.clone(),
            peer_addrs,
            events: info.events.clone(),
            peers,
            gateways,
            orderer,
            tls,
        })
    }

    /// Number of peers.
    pub fn peer_count(&self) -> usize {
        self.peers.len()
    }

    /// Sends `proposal` to peer `peer` and returns its response.
    ///
    /// Errors: an unknown peer index, or the gRPC call failed (e.g. the proposal was refused before simulation).
    pub async fn propose(&self, peer: usize, proposal: &ClientProposal) -> anyhow::Result<ProposalResponse> {
        let mut c = self.peers.get(peer).cloned().ok_or_else(|| anyhow!("no peer {peer}"))?;
        let r = c.process_proposal(proposal.signed.clone()).await.map_err(|s| anyhow!("{}", s.message()))?;
        Ok(r.into_inner())
    }

    /// A proposal by `creator` invoking `chaincode` with `args` (function name first) on this channel.
    pub fn proposal(&self, creator: &SigningIdentity, chaincode: &str, args: &[&[u8]]) -> ClientProposal {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        create_proposal(creator, &self.channel, chaincode, &args)
    }

    /// Sends `proposal` to each of `peers` and requires every response to be successful (status 200) and
    /// endorsed.
    ///
    /// Errors: a failed call, or a response with another status (its message is in the error).
    pub async fn endorse(&self, proposal: &ClientProposal, peers: &[usize]) -> anyhow::Result<Vec<ProposalResponse>> {
        let calls = peers.iter().map(|&p| self.propose(p, proposal));
        let responses = futures::future::try_join_all(calls).await?;
        for (r, p) in responses.iter().zip(peers) {
            let (status, message) = r.response.as_ref().map(|x| (x.status, x.message.as_str())).unwrap_or((0, ""));
            if status != 200 || r.endorsement.is_none() {
                bail!("peer {p} answered {status}: {message}");
            }
        }
        Ok(responses)
    }

    /// Endorses at `peers` and assembles the signed transaction envelope; returns it with its txid.
    ///
    /// Errors: as [`NetworkClient::endorse`], or the responses do not assemble (differing payloads).
    pub async fn endorsed_tx(
        &self,
        creator: &SigningIdentity,
        chaincode: &str,
        args: &[&[u8]],
        peers: &[usize],
    ) -> anyhow::Result<(String, Bytes)> {
        let p = self.proposal(creator, chaincode, args);
        let responses = self.endorse(&p, peers).await?;
        let env = assemble_transaction(&p.proposal, &responses, creator).map_err(|e| anyhow!(e))?;
        Ok((p.tx_id, env))
    }

    /// Broadcasts `envelopes` in order on one stream and requires a SUCCESS answer for each.
    ///
    /// Errors: the stream failed or an envelope was refused (status and info in the error).
    pub async fn broadcast(&self, envelopes: Vec<Bytes>) -> anyhow::Result<()> {
        let n = envelopes.len();
        self.broadcast_stream(futures::stream::iter(envelopes), n).await
    }

    /// Broadcasts the `n` envelopes `envelopes` yields (at its own pace) on one stream and requires a SUCCESS
    /// answer for each.
    ///
    /// Errors: the stream failed, an envelope was refused (status and info in the error), or fewer than `n`
    /// answers came.
    pub async fn broadcast_stream(
        &self,
        envelopes: impl futures::Stream<Item = Bytes> + Send + 'static,
        n: usize,
    ) -> anyhow::Result<()> {
        let mut responses = ferrofabric_comm::broadcast(self.orderer.clone(), envelopes)
            .await
            .map_err(|s| anyhow!("broadcast: {}", s.message()))?;
        let mut ok = 0;
        while let Some(r) = responses.next().await {
            let r = r.map_err(|s| anyhow!("broadcast stream: {}", s.message()))?;
            if r.status != Status::Success as i32 {
                bail!("the orderer answered {} to envelope {ok}: {}", r.status, r.info);
            }
            ok += 1;
        }
        anyhow::ensure!(ok == n, "the orderer answered {ok} of {n} envelopes");
        Ok(())
    }

    /// Gateway `Endorse` of `proposal` at peer `peer`'s gateway (it picks the endorsers): the prepared transaction,
    /// or the gateway's status as it came (its `ErrorDetail`s in the details).
    ///
    /// Errors: an unknown peer index (`NOT_FOUND`), or the gateway's status.
    pub async fn endorse_through_gateway(
        &self,
        peer: usize,
        proposal: &ClientProposal,
    ) -> Result<EndorseResponse, tonic::Status> {
        let mut gateway =
            self.gateways.get(peer).cloned().ok_or_else(|| tonic::Status::not_found(format!("no peer {peer}")))?;
        let request = EndorseRequest {
            transaction_id: proposal.tx_id.clone(),
            channel_id: self.channel.clone(),
            proposed_transaction: Some(proposal.signed.clone()),
            endorsing_organizations: Vec::new(),
        };
        gateway.endorse(request).await.map(tonic::Response::into_inner)
    }

    /// Submits `proposal` the way Fabric's `fabric-gateway` SDKs do: the Gateway service of peer `peer` endorses it
    /// by the chaincode's policy and assembles the transaction, `creator` (the proposal's creator) signs it, and the
    /// same gateway submits it to the orderer. Returns once the orderer accepted it, before it is committed.
    ///
    /// Errors: the gateway's Endorse or Submit failed (its gRPC status message in the error).
    pub async fn submit_through_gateway(
        &self,
        peer: usize,
        creator: &SigningIdentity,
        proposal: &ClientProposal,
    ) -> anyhow::Result<()> {
        let mut gateway = self.gateways.get(peer).cloned().ok_or_else(|| anyhow!("no peer {peer}"))?;
        let endorsed = self
            .endorse_through_gateway(peer, proposal)
            .await
            .map_err(|s| anyhow!("gateway endorse: {}", s.message()))?;
        let mut envelope = endorsed.prepared_transaction.ok_or_else(|| anyhow!("gateway endorse: no transaction"))?;
        envelope.signature = Bytes::from(creator.sign(&envelope.payload));
        gateway
            .submit(SubmitRequest {
                transaction_id: proposal.tx_id.clone(),
                channel_id: self.channel.clone(),
                prepared_transaction: Some(envelope),
            })
            .await
            .map_err(|s| anyhow!("gateway submit: {}", s.message()))?;
        Ok(())
    }

    /// Starts listening to commit events on peer `peer`'s `DeliverFiltered` (or the committer's, when the node
    /// names one in `events`), from its newest block on, signed by `signer`. Start it before submitting the
    /// transactions to wait for.
    ///
    /// Errors: the stream could not be opened.
    pub async fn commit_events(&self, peer: usize, signer: &SigningIdentity) -> anyhow::Result<CommitEvents> {
        let (_, addr) = self.peer_addrs.get(peer).ok_or_else(|| anyhow!("no peer {peer}"))?;
        let addr = self.events.as_ref().unwrap_or(addr);
        let ch = ferrofabric_comm::connect(addr, self.tls.as_ref()).await?;
        let seek = SeekInfo {
            start: Some(seek_newest()),
            stop: Some(seek_specified(u64::MAX)),
            behavior: seek_info::SeekBehavior::BlockUntilReady as i32,
            ..SeekInfo::default()
        };
        let request = seek_envelope(&self.channel, &seek, signer.serialized(), None, |m| signer.sign(m));
        let mut client = DeliverClient::new(ch).max_decoding_message_size(MAX_MESSAGE);
        // The request stream stays open while the events are wanted and ends when the reader task ends, so that
        // the HTTP/2 stream is released (a request body that never ends would keep it open on both sides).
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let end = futures::stream::once(async move {
            let _ = stop_rx.await;
        })
        .filter_map(|()| async { None });
        let requests = futures::stream::iter([request]).chain(end);
        let mut stream =
            client.deliver_filtered(requests).await.map_err(|s| anyhow!("DeliverFiltered: {s}"))?.into_inner();
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(async move {
            let _stop = stop_tx;
            loop {
                // Ends with the receiver too, so that a dropped CommitEvents closes its stream.
                let message = tokio::select! {
                    m = stream.message() => m,
                    _ = tx.closed() => return,
                };
                let item = match message {
                    Ok(Some(msg)) => match msg.r#type {
                        Some(DeliverType::FilteredBlock(b)) => Ok((Instant::now(), b)),
                        Some(DeliverType::Status(s)) => Err(anyhow!("DeliverFiltered ended with status {s}")),
                        _ => continue,
                    },
                    Ok(None) => Err(anyhow!("the DeliverFiltered stream closed")),
                    Err(s) => Err(anyhow!("DeliverFiltered: {}", s.message())),
                };
                let end = item.is_err();
                if tx.send(item).await.is_err() || end {
                    return;
                }
            }
        });
        Ok(CommitEvents { rx, seen: HashMap::new() })
    }
}

/// Filtered blocks as they arrive (with their arrival time); [`CommitEvents::wait_for`] keeps the codes of the
/// transactions it has seen but not yet been asked for.
#[derive(Debug)]
pub struct CommitEvents {
    rx: mpsc::Receiver<anyhow::Result<(Instant, FilteredBlock)>>,
    seen: HashMap<String, TxValidationCode>,
}

impl CommitEvents {
    /// The next filtered block and when it arrived. Its codes are the caller's: they are not kept for
    /// [`CommitEvents::wait_for`], so that a reader of a long stream (a benchmark) holds no growing map, whose
    /// rehashing would cost the client CPU time at moments that then show as block latency.
    ///
    /// Errors: the stream ended or failed.
    pub async fn next_block(&mut self) -> anyhow::Result<(Instant, FilteredBlock)> {
        self.rx.recv().await.ok_or_else(|| anyhow!("the DeliverFiltered stream ended"))?
    }

    /// Waits until every txid of `txids` has been committed (or `timeout` passes) and returns their codes. Codes of
    /// other transactions read meanwhile are kept for a later call; the ones returned are forgotten.
    ///
    /// Errors: the stream failed or the timeout passed first.
    pub async fn wait_for(
        &mut self,
        txids: &[String],
        timeout: Duration,
    ) -> anyhow::Result<HashMap<String, TxValidationCode>> {
        let deadline = tokio::time::Instant::now() + timeout;
        // Counted down per block, so waiting for n transactions costs O(n), not a rescan of them per block.
        let mut pending: HashSet<&str> =
            txids.iter().filter(|t| !self.seen.contains_key(*t)).map(String::as_str).collect();
        while !pending.is_empty() {
            let (_, block) = tokio::time::timeout_at(deadline, self.next_block())
                .await
                .map_err(|_| anyhow!("transactions not committed within {timeout:?}"))??;
            for t in &block.filtered_transactions {
                let code =
                    TxValidationCode::try_from(t.tx_validation_code).unwrap_or(TxValidationCode::InvalidOtherReason);
                pending.remove(t.txid.as_str());
                self.seen.insert(t.txid.clone(), code);
            }
        }
        Ok(txids.iter().filter_map(|t| self.seen.remove(t).map(|c| (t.clone(), c))).collect())
    }
}

/// Fails unless every code is VALID.
///
/// Errors: names the first transaction that is not VALID and its code.
pub fn require_valid(codes: &HashMap<String, TxValidationCode>) -> anyhow::Result<()> {
    match codes.iter().find(|(_, c)| **c != TxValidationCode::Valid) {
        Some((txid, code)) => bail!("transaction {txid} was committed as {}", code.as_str_name()),
        None => Ok(()),
    }
}
