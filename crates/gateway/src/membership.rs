//! How a peer's gateway learns the channel's other peers. A Fabric peer learns them by gossip, starting from every
//! organisation's anchor peers in the channel configuration (`AnchorPeers`, Fabric's `gossip/service`), and its
//! gateway's registry follows gossip's membership (`internal/pkg/gateway/registry.go`). This peer speaks no
//! gossip; it asks each anchor peer's discovery service for the channel's peers instead — a peer membership query
//! signed by this peer, which a Fabric peer answers from its gossip view, and a Ferrofabric peer from its registry —
//! and endorses with the peers named there: their identity, and the endpoint of their gossip alive message.
//!
//! The query runs again every [`Membership::refresh`], every second while an anchor peer cannot be asked; the
//! anchors are read from the channel configuration each time, so an anchor-peer update takes effect without a
//! restart. A peer an anchor no longer names leaves the registry; an anchor that cannot be asked keeps the peers of
//! its organisation it named before.

use std::time::Duration;

use bytes::Bytes;
use ferrofabric_protos::discovery::discovery_client::DiscoveryClient;
use ferrofabric_protos::discovery::{
    query, query_result, AuthInfo, PeerMembershipQuery, Query, Request, SignedRequest,
};
use ferrofabric_protos::gossip::{gossip_message, GossipMessage};
use ferrofabric_protos::msp::SerializedIdentity;
use prost::Message;

use crate::ledger::Ledger;
use crate::plan::{EndorserEndpoint, MAX_MESSAGE_SIZE};
use crate::{Gateway, GossipSigner};

/// How often the anchor peers are asked again while one of them could not be asked.
const RETRY: Duration = Duration::from_secs(1);
/// How long asking one anchor peer may take, its dial included.
const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// Who asks the anchor peers, and how often.
#[derive(Debug, Clone)]
pub struct Membership {
    /// This peer's marshaled `SerializedIdentity`: the client identity of the discovery requests.
    pub identity: Bytes,
    /// Signs the requests with this peer's key.
    pub signer: GossipSigner,
    /// How often the anchor peers are asked once all answered (Fabric's gossip alive expiration is 25 s).
    pub refresh: Duration,
}

impl<L: Ledger> Gateway<L> {
    /// Learns the channel's peers from its anchor peers until the gateway's shutdown fires (see the module docs).
    pub async fn follow_membership(self, membership: Membership) {
        let inner = self.inner;
        let mut shutdown = inner.shutdown.clone();
        let mut learned: Vec<EndorserEndpoint> = Vec::new();
        loop {
            let config = inner.ledger.config();
            let own: Vec<&str> = inner.registry.configured().iter().map(|e| e.address.as_str()).collect();
            let anchors: Vec<(String, String)> = config
                .application()
                .map(|app| {
                    app.organizations()
                        .values()
                        .flat_map(|org| {
                            org.anchor_peers()
                                .iter()
                                .map(|a| (org.mspid().to_owned(), format!("{}:{}", a.host, a.port)))
                        })
                        .filter(|(_, address)| !own.contains(&address.as_str()))
                        .collect()
                })
                .unwrap_or_default();
            let mut complete = true;
            let mut now: Vec<EndorserEndpoint> = Vec::new();
            for (mspid, anchor) in &anchors {
                match ask_anchor(&inner.registry.connections, anchor, inner.ledger.channel_id(), &membership).await {
                    Ok(peers) => {
                        let fresh = peers
                            .into_iter()
                            .filter(|p| p.identity != membership.identity && !own.contains(&p.address.as_str()));
                        for peer in fresh {
                            if !now.iter().any(|e| e.address == peer.address) {
                                now.push(peer);
                            }
                        }
                    }
                    Err(e) => {
                        tracing::debug!(anchor = %anchor, error = %e, "anchor peer not asked");
                        complete = false;
                        // What the anchor named before stands until it answers again.
                        for peer in learned.iter().filter(|p| &p.mspid == mspid) {
                            if !now.iter().any(|e| e.address == peer.address) {
                                now.push(peer.clone());
                            }
                        }
                    }
                }
            }
            if now != learned {
                let names: Vec<&str> = now.iter().map(|p| p.address.as_str()).collect();
                tracing::info!(channel = inner.ledger.channel_id(), peers = ?names, "learned the channel's peers from its anchor peers");
                inner.registry.learn(now.clone());
                learned = now;
            }
            let wait = if complete { membership.refresh } else { RETRY };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = shutdown.recv() => return,
            }
        }
    }
}

/// The channel's peers as the discovery service at `anchor` names them, asked as `membership` says.
///
/// Errors: the anchor cannot be reached, refuses the request, or answers something else than a membership.
async fn ask_anchor(
    connections: &crate::conn::Connections,
    anchor: &str,
    channel: &str,
    membership: &Membership,
) -> Result<Vec<EndorserEndpoint>, String> {
    let request = Request {
        authentication: Some(AuthInfo {
            client_identity: membership.identity.clone(),
            // A discovery service under mutual TLS compares it with the connection's certificate.
            client_tls_cert_hash: connections.client_cert_hash(),
        }),
        queries: vec![Query {
            channel: channel.to_owned(),
            query: Some(query::Query::PeerQuery(PeerMembershipQuery { filter: None })),
        }],
    };
    let payload = Bytes::from(request.encode_to_vec());
    let signature = Bytes::from((membership.signer.0)(&payload));
    // The dial counts against the limit: an anchor that is down must not hold up the others.
    let call = async {
        let mut client =
            DiscoveryClient::new(connections.get(anchor).await?).max_decoding_message_size(MAX_MESSAGE_SIZE);
        let signed = SignedRequest { payload, signature };
        client.discover(signed).await.map_err(|s| format!("{}: {}", s.code(), s.message()))
    };
    let response = tokio::time::timeout(ASK_TIMEOUT, call)
        .await
        .map_err(|_| "the discovery request timed out".to_owned())??
        .into_inner();
    let result = response.results.into_iter().next().and_then(|r| r.result);
    let by_org = match result {
        Some(query_result::Result::Members(m)) => m.peers_by_org,
        Some(query_result::Result::Error(e)) => return Err(e.content),
        _ => return Err("the answer is not a peer membership".into()),
    };
    let mut peers = Vec::new();
    for (mspid, group) in by_org {
        for peer in group.peers {
            // A peer's organisation is its identity's; an entry filed under another is not taken.
            let Ok(sid) = SerializedIdentity::decode(peer.identity.clone()) else { continue };
            if sid.mspid != mspid {
                continue;
            }
            let Some(endpoint) = alive_endpoint(peer.membership_info.as_ref()) else { continue };
            peers.push(EndorserEndpoint { mspid: mspid.clone(), address: endpoint, identity: peer.identity });
        }
    }
    Ok(peers)
}

/// The endpoint of the gossip alive message in `envelope`; `None` when there is none.
fn alive_endpoint(envelope: Option<&ferrofabric_protos::gossip::Envelope>) -> Option<String> {
    let message = GossipMessage::decode(envelope?.payload.clone()).ok()?;
    let Some(gossip_message::Content::AliveMsg(alive)) = message.content else { return None };
    Some(alive.membership?.endpoint).filter(|e| !e.is_empty())
}
