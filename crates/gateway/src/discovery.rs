//! The peer's discovery service, `discovery.Discovery` (Fabric's `discovery/service.go`, `discovery/endorsement`):
//! what a client SDK asks before it endorses and submits. Per query of a signed request:
//!
//! * config: every organisation's MSP (`FabricMSPConfig`, as the channel configuration holds it) and the orderers'
//!   endpoints by organisation;
//! * peer membership: the channel's peers by organisation, each with its identity, its endpoint in a gossip alive
//!   message and its ledger height and chaincodes in a gossip state-info message;
//! * chaincode: for each interest (a chaincode and those it calls), its endorsers grouped by organisation and the
//!   layouts that satisfy every one of their endorsement policies (the gateway's plan: one endorsement from each
//!   organisation of a layout). Collections named in an interest do not narrow the endorsers.
//!
//! The client must be a reader of the channel (its signature over the request verified) or every query answers
//! `access denied`, as Fabric's does. The gossip envelopes are unsigned: Ferrofabric does not gossip, and clients
//! read them without checking.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::ConfigGroup;
use ferrofabric_protos::discovery::discovery_server::{Discovery as DiscoveryApi, DiscoveryServer};
use ferrofabric_protos::discovery::{
    query, query_result, ConfigResult, EndorsementDescriptor, Endpoint, Endpoints, Error, Layout, Peer,
    PeerMembershipResult, Peers, Query, QueryResult, Request, Response, SignedRequest,
};
use ferrofabric_protos::gossip::{self, gossip_message, AliveMessage, GossipMessage, Member, PeerTime, Properties};
use ferrofabric_protos::msp::{FabricMspConfig, MspConfig};
use prost::Message;
use tonic::Status;

use crate::ledger::Ledger;
use crate::plan::{EndorserEndpoint, MAX_MESSAGE_SIZE};
use crate::{Gateway, Inner};

/// What a query answers when the client may not ask it (Fabric's words).
const ACCESS_DENIED: &str = "access denied";

/// The discovery service of a gateway's peer; cheap to clone.
pub struct DiscoveryService<L> {
    inner: std::sync::Arc<Inner<L>>,
}

impl<L> Clone for DiscoveryService<L> {
    fn clone(&self) -> Self {
        DiscoveryService { inner: self.inner.clone() }
    }
}

impl<L: Ledger> Gateway<L> {
    /// The `discovery.Discovery` service of the same peer, answering from the same ledger and endorsers.
    pub fn discovery_service(&self) -> DiscoveryServer<DiscoveryService<L>> {
        DiscoveryServer::new(DiscoveryService { inner: self.inner.clone() })
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE)
    }
}

/// A gossip envelope of `content`, unsigned.
fn gossip_envelope(channel: &[u8], content: gossip_message::Content) -> gossip::Envelope {
    let message = GossipMessage {
        nonce: 0,
        channel: Bytes::copy_from_slice(channel),
        tag: gossip_message::Tag::ChanOrOrg as i32,
        content: Some(content),
    };
    gossip::Envelope { payload: Bytes::from(message.encode_to_vec()), ..gossip::Envelope::default() }
}

/// The MSPs of the organisations of `group`'s subgroups, by MSP ID.
fn group_msps(group: Option<&ConfigGroup>, out: &mut HashMap<String, FabricMspConfig>) {
    for org in group.map(|g| g.groups.values()).into_iter().flatten() {
        let Some(value) = org.values.get("MSP") else { continue };
        let Ok(msp) = MspConfig::decode(value.value.clone()) else { continue };
        if let Ok(fabric) = FabricMspConfig::decode(msp.config) {
            out.insert(fabric.name.clone(), fabric);
        }
    }
}

/// `host:port` as a discovery endpoint; `None` when it does not parse.
fn endpoint(address: &str) -> Option<Endpoint> {
    let (host, port) = address.rsplit_once(':')?;
    Some(Endpoint { host: host.trim_matches(['[', ']']).to_owned(), port: port.parse().ok()? })
}

impl<L: Ledger> Inner<L> {
    fn config_result(&self, config: &ChannelConfig) -> ConfigResult {
        let mut msps = HashMap::new();
        let root = config.config().channel_group.as_ref();
        group_msps(root.and_then(|g| g.groups.get("Application")), &mut msps);
        group_msps(root.and_then(|g| g.groups.get("Orderer")), &mut msps);
        let mut orderers: HashMap<String, Endpoints> = HashMap::new();
        if let Some(orderer) = config.orderer() {
            for org in orderer.organizations().values() {
                let endpoint = org.endpoints().iter().filter_map(|a| endpoint(a)).collect();
                orderers.insert(org.mspid().to_owned(), Endpoints { endpoint });
            }
            // Without per-organisation endpoints the channel's global addresses serve every orderer organisation.
            if orderers.values().all(|e| e.endpoint.is_empty()) {
                let global: Vec<Endpoint> = config.orderer_addresses().iter().filter_map(|a| endpoint(a)).collect();
                orderers.values_mut().for_each(|e| e.endpoint = global.clone());
            }
        }
        ConfigResult { msps, orderers }
    }

    /// A peer as discovery describes it.
    fn peer(&self, p: &EndorserEndpoint, height: u64, chaincodes: &[gossip::Chaincode]) -> Peer {
        let channel = self.ledger.channel_id().as_bytes();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let timestamp = Some(PeerTime { inc_num: now, seq_num: 1 });
        let pki_id = Bytes::copy_from_slice(p.address.as_bytes());
        let alive = AliveMessage {
            membership: Some(Member { endpoint: p.address.clone(), pki_id: pki_id.clone(), ..Member::default() }),
            timestamp,
            identity: Bytes::new(),
        };
        let state = gossip::StateInfo {
            timestamp,
            pki_id,
            properties: Some(Properties {
                ledger_height: height,
                chaincodes: chaincodes.to_vec(),
                left_channel: false,
            }),
            ..gossip::StateInfo::default()
        };
        Peer {
            state_info: Some(gossip_envelope(channel, gossip_message::Content::StateInfo(state))),
            membership_info: Some(gossip_envelope(&[], gossip_message::Content::AliveMsg(alive))),
            identity: p.identity.clone(),
        }
    }

    /// The channel's peers by organisation.
    fn peers_by_org(&self) -> HashMap<String, Peers> {
        let height = self.ledger.height();
        let chaincodes: Vec<gossip::Chaincode> = self
            .ledger
            .chaincodes()
            .into_iter()
            .map(|(name, version)| gossip::Chaincode { name, version, metadata: Bytes::new() })
            .collect();
        let mut by_org: HashMap<String, Peers> = HashMap::new();
        for p in self.registry.peers() {
            by_org.entry(p.mspid.clone()).or_default().peers.push(self.peer(p, height, &chaincodes));
        }
        by_org
    }

    /// The endorsement descriptor of an interest, the chaincodes `names` (the first one invoked, the others called
    /// by it): a group per organisation (named by its MSP ID), and the layouts that satisfy every chaincode's
    /// endorsement policy. The descriptor is named after the first chaincode, as Fabric's is.
    fn endorsement_descriptor(&self, config: &ChannelConfig, names: &[&str]) -> Result<EndorsementDescriptor, String> {
        let mut policies = Vec::with_capacity(names.len());
        for name in names {
            match self.ledger.endorsement_policy(name)? {
                Some(p) => policies.push(config.application_policy(&p)?),
                None => return Err(format!("chaincode {name} is not defined on channel {}", self.ledger.channel_id())),
            }
        }
        let policies: Vec<&dyn ferrofabric_channelconfig::Policy> = policies.iter().map(|p| p.as_ref()).collect();
        let layouts = self.registry.layouts(&policies, config, self.registry.local_mspid());
        let name = names.first().copied().unwrap_or_default();
        if layouts.is_empty() {
            return Err(format!("no peer combination can satisfy the endorsement policy of chaincode {name}"));
        }
        let peers = self.peers_by_org();
        let mut endorsers_by_groups = HashMap::new();
        for org in layouts.iter().flatten() {
            endorsers_by_groups.insert(org.clone(), peers.get(org).cloned().unwrap_or_default());
        }
        let layouts = layouts
            .into_iter()
            .map(|orgs| Layout { quantities_by_group: orgs.into_iter().map(|o| (o, 1)).collect() })
            .collect();
        Ok(EndorsementDescriptor { chaincode: name.to_owned(), endorsers_by_groups, layouts })
    }

    /// The answer to one query of an authenticated client.
    fn answer(&self, query: &Query, authorized: bool) -> query_result::Result {
        let error = |content: &str| query_result::Result::Error(Error { content: content.to_owned() });
        if !authorized || query.channel != self.ledger.channel_id() {
            return error(ACCESS_DENIED);
        }
        let config = self.ledger.config();
        match &query.query {
            Some(query::Query::ConfigQuery(_)) => query_result::Result::ConfigResult(self.config_result(&config)),
            Some(query::Query::PeerQuery(_)) => {
                query_result::Result::Members(PeerMembershipResult { peers_by_org: self.peers_by_org() })
            }
            Some(query::Query::CcQuery(q)) => {
                let mut content = Vec::new();
                for interest in &q.interests {
                    let names: Vec<&str> = interest.chaincodes.iter().map(|c| c.name.as_str()).collect();
                    if names.is_empty() {
                        return error("chaincode interest is empty");
                    }
                    match self.endorsement_descriptor(&config, &names) {
                        Ok(d) => content.push(d),
                        Err(e) => return error(&e),
                    }
                }
                query_result::Result::CcQueryRes(ferrofabric_protos::discovery::ChaincodeQueryResult { content })
            }
            // Local peers are for the peer's own administrators, which this peer does not serve here.
            Some(query::Query::LocalPeers(_)) | None => error(ACCESS_DENIED),
        }
    }

    fn discover(&self, signed: SignedRequest) -> Result<Response, Status> {
        let request = Request::decode(signed.payload.clone())
            .map_err(|e| Status::invalid_argument(format!("failed parsing request: {e}")))?;
        let identity = request.authentication.as_ref().map(|a| a.client_identity.clone()).unwrap_or_default();
        let authorized = request.queries.first().is_some_and(|q| {
            self.check_acl("discovery", &q.channel, signed.payload.clone(), identity.clone(), signed.signature.clone())
                .is_ok()
        });
        let results =
            request.queries.iter().map(|q| QueryResult { result: Some(self.answer(q, authorized)) }).collect();
        Ok(Response { results })
    }
}

#[tonic::async_trait]
impl<L: Ledger> DiscoveryApi for DiscoveryService<L> {
    async fn discover(&self, request: tonic::Request<SignedRequest>) -> Result<tonic::Response<Response>, Status> {
        self.inner.discover(request.into_inner()).map(tonic::Response::new)
    }
}
