//! The peer's discovery service, `discovery.Discovery` (Fabric's `discovery/service.go`, `discovery/endorsement`):
//! what a client SDK asks before it endorses and submits. Per query of a signed request:
//!
//! * config: every organisation's MSP (`FabricMSPConfig`, as the channel configuration holds it) and the orderers'
//!   endpoints by organisation;
//! * peer membership: the channel's peers by organisation, each with its identity, its endpoint in a gossip alive
//!   message and its ledger height and chaincodes in a gossip state-info message;
//! * chaincode: for each interest (a chaincode and those it calls), its endorsers grouped by organisation and the
//!   layouts that satisfy every one of their endorsement policies (the gateway's plan: one endorsement from each
//!   organisation of a layout). Collections named in an interest narrow the endorsers to their members (unless
//!   the call reads no private data) and bring their own endorsement policies; key-level policies are added.
//!
//! Each query is authorised on its own, as Fabric's `processQuery` does: a query of the peer's channel needs the
//! client's signature over the request to satisfy the channel's `discovery` ACL (the channel's readers by
//! default); a query without a channel is a local one, for the peer's administrators, and the only local query is
//! local peers (every peer of the node by organisation, without channel state). Fabric checks the local MSP's admin
//! principal; here it is the local organisation's `Admins` policy of the channel configuration, which names the
//! same administrators in Fabric's generated networks. A query that fails authorisation answers `access denied`.
//! Each peer's gossip messages are signed with its key, as a Fabric peer signs its own, when this process holds
//! that key ([`crate::GatewayConfig::signers`]); its PKI-ID is Fabric's, derived from its identity.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_protos::common::ConfigGroup;
use ferrofabric_protos::discovery::discovery_server::{Discovery as DiscoveryApi, DiscoveryServer};
use ferrofabric_protos::discovery::{
    query, query_result, ConfigResult, EndorsementDescriptor, Endpoint, Endpoints, Error, Layout, Peer,
    PeerMembershipResult, Peers, Query, QueryResult, Request, Response, SignedRequest,
};
use ferrofabric_protos::gossip::{self, gossip_message, AliveMessage, GossipMessage, Member, PeerTime, Properties};
use ferrofabric_protos::msp::{FabricMspConfig, MspConfig};
use ferrofabric_protos::peer::ChaincodeCall;
use prost::Message;
use tonic::Status;

use crate::ledger::Ledger;
use crate::plan::{requirements, EndorserEndpoint, MAX_MESSAGE_SIZE};
use crate::{Gateway, GossipSigner, Inner};

/// What a query answers when the client may not ask it (Fabric's words).
const ACCESS_DENIED: &str = "access denied";
/// What a query of a kind not served on its channel (or without one) answers (Fabric's words).
const UNKNOWN_QUERY: &str = "unknown or missing request type";

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
    /// The discovery service of this gateway's channel, to be served by a service of several channels.
    pub fn discovery(&self) -> DiscoveryService<L> {
        DiscoveryService { inner: self.inner.clone() }
    }

    /// The `discovery.Discovery` service of the same peer, answering from the same ledger and endorsers.
    pub fn discovery_service(&self) -> DiscoveryServer<DiscoveryService<L>> {
        DiscoveryServer::new(self.discovery())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE)
    }
}

/// A gossip envelope of `content`, signed over its payload by `signer` (unsigned without one).
fn gossip_envelope(
    channel: &[u8],
    content: gossip_message::Content,
    signer: Option<&GossipSigner>,
) -> gossip::Envelope {
    let message = GossipMessage {
        nonce: 0,
        channel: Bytes::copy_from_slice(channel),
        tag: gossip_message::Tag::ChanOrOrg as i32,
        content: Some(content),
    };
    let payload = Bytes::from(message.encode_to_vec());
    let signature = signer.map(|s| Bytes::from((s.0)(&payload))).unwrap_or_default();
    gossip::Envelope { payload, signature, ..gossip::Envelope::default() }
}

/// A peer's PKI-ID as gossip derives it from its identity (Fabric's `GetPKIidOfCert`): SHA-256 of the MSP ID
/// followed by the certificate; the raw bytes when the identity does not decode.
fn pki_id(identity: &Bytes) -> Bytes {
    use sha2::Digest;
    match ferrofabric_protos::msp::SerializedIdentity::decode(identity.clone()) {
        Ok(sid) => {
            let mut h = sha2::Sha256::new();
            h.update(sid.mspid.as_bytes());
            h.update(&sid.id_bytes);
            Bytes::copy_from_slice(&h.finalize())
        }
        Err(_) => identity.clone(),
    }
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
        let pki_id = pki_id(&p.identity);
        let signer = self.signers.get(&p.address);
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
            state_info: Some(gossip_envelope(channel, gossip_message::Content::StateInfo(state), signer)),
            membership_info: Some(gossip_envelope(&[], gossip_message::Content::AliveMsg(alive), signer)),
            identity: p.identity.clone(),
        }
    }

    /// The node's peers by organisation as a local-peers query shows them: identity and membership, no channel
    /// state.
    fn local_peers(&self) -> HashMap<String, Peers> {
        let mut by_org = self.peers_by_org(&|_| true);
        for p in by_org.values_mut().flat_map(|peers| peers.peers.iter_mut()) {
            p.state_info = None;
        }
        by_org
    }

    /// Whether the signed request comes from an administrator of the peer's organisation.
    fn local_admin(&self, signed: &SignedRequest, identity: &Bytes) -> bool {
        let config = self.ledger.config();
        let path = format!("/Channel/Application/{}/Admins", self.registry.local_mspid());
        let data = SignedData {
            data: signed.payload.clone(),
            identity: identity.clone(),
            signature: signed.signature.clone(),
        };
        let set = SignatureSet::new(vec![data], config.msp_manager());
        config.policy(&path).is_some_and(|policy| policy.evaluate(&set).is_ok())
    }

    /// The channel's peers that `admits` accepts, by organisation.
    fn peers_by_org(&self, admits: &dyn Fn(&EndorserEndpoint) -> bool) -> HashMap<String, Peers> {
        let height = self.ledger.height();
        let chaincodes: Vec<gossip::Chaincode> = self
            .ledger
            .chaincodes()
            .into_iter()
            .map(|(name, version)| gossip::Chaincode { name, version, metadata: Bytes::new() })
            .collect();
        let mut by_org: HashMap<String, Peers> = HashMap::new();
        for p in self.registry.peers().iter().filter(|p| admits(p)) {
            by_org.entry(p.mspid.clone()).or_default().peers.push(self.peer(p, height, &chaincodes));
        }
        by_org
    }

    /// The endorsement descriptor of an interest, the chaincode calls `calls` (the first one invoked, the others
    /// called by it): a group per organisation (named by its MSP ID) of its peers that are members of every
    /// collection read privately, and the layouts that satisfy the interest's policies (see
    /// [`crate::plan::requirements`]). The descriptor is named after the first chaincode, as Fabric's is.
    fn endorsement_descriptor(
        &self,
        config: &ChannelConfig,
        calls: &[ChaincodeCall],
    ) -> Result<EndorsementDescriptor, String> {
        let needs = requirements(self.ledger.as_ref(), config, calls)?;
        let policies: Vec<&dyn ferrofabric_channelconfig::Policy> = needs.policies.iter().map(|p| p.as_ref()).collect();
        let admits = |p: &EndorserEndpoint| needs.admits(&p.identity, config);
        let layouts = self.registry.layouts(&policies, config, self.registry.local_mspid(), &admits);
        let name = calls.first().map(|c| c.name.as_str()).unwrap_or_default();
        if layouts.is_empty() {
            return Err(format!("no peer combination can satisfy the endorsement policy of chaincode {name}"));
        }
        let peers = self.peers_by_org(&admits);
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

    /// The answer to one query of the request `signed`, made by `identity` (authorised here, per query).
    fn answer(&self, query: &Query, signed: &SignedRequest, identity: &Bytes) -> query_result::Result {
        let error = |content: &str| query_result::Result::Error(Error { content: content.to_owned() });
        if query.channel.is_empty() {
            if !self.local_admin(signed, identity) {
                return error(ACCESS_DENIED);
            }
            return match &query.query {
                Some(query::Query::LocalPeers(_)) => {
                    query_result::Result::Members(PeerMembershipResult { peers_by_org: self.local_peers() })
                }
                _ => error(UNKNOWN_QUERY),
            };
        }
        let (data, signature) = (signed.payload.clone(), signed.signature.clone());
        if query.channel != self.ledger.channel_id()
            || self.check_acl("discovery", &query.channel, data, identity.clone(), signature).is_err()
        {
            return error(ACCESS_DENIED);
        }
        let config = self.ledger.config();
        match &query.query {
            Some(query::Query::ConfigQuery(_)) => query_result::Result::ConfigResult(self.config_result(&config)),
            // A filter keeps the peers that may endorse its interest: members of the collections it reads (every
            // peer of the node runs every defined chaincode), as Fabric's `PeersAuthorizedByCriteria`.
            Some(query::Query::PeerQuery(q)) => match q.filter.as_ref().filter(|f| !f.chaincodes.is_empty()) {
                None => {
                    query_result::Result::Members(PeerMembershipResult { peers_by_org: self.peers_by_org(&|_| true) })
                }
                Some(filter) => match requirements(self.ledger.as_ref(), &config, &filter.chaincodes) {
                    Ok(needs) => {
                        let admits = |p: &EndorserEndpoint| needs.admits(&p.identity, &config);
                        query_result::Result::Members(PeerMembershipResult { peers_by_org: self.peers_by_org(&admits) })
                    }
                    Err(e) => error(&e),
                },
            },
            Some(query::Query::CcQuery(q)) => {
                if q.interests.is_empty() {
                    return error("chaincode query must have at least one chaincode interest");
                }
                let mut content = Vec::new();
                for interest in &q.interests {
                    if interest.chaincodes.is_empty() {
                        return error("chaincode interest must contain at least one chaincode");
                    }
                    if interest.chaincodes.iter().any(|c| c.name.is_empty()) {
                        return error("chaincode name in interest cannot be empty");
                    }
                    match self.endorsement_descriptor(&config, &interest.chaincodes) {
                        Ok(d) => content.push(d),
                        Err(e) => return error(&e),
                    }
                }
                query_result::Result::CcQueryRes(ferrofabric_protos::discovery::ChaincodeQueryResult { content })
            }
            // Local peers are asked without a channel.
            Some(query::Query::LocalPeers(_)) | None => error(UNKNOWN_QUERY),
        }
    }

    fn discover(&self, signed: SignedRequest) -> Result<Response, Status> {
        let request = Request::decode(signed.payload.clone())
            .map_err(|e| Status::unknown(format!("failed parsing request: {e}")))?;
        // Fabric's `validateStructure`; its plain errors reach the client with gRPC code UNKNOWN.
        let Some(auth) = request.authentication.as_ref() else {
            return Err(Status::unknown("access denied, no authentication info in request"));
        };
        if auth.client_identity.is_empty() {
            return Err(Status::unknown("access denied, client identity wasn't supplied"));
        }
        let identity = auth.client_identity.clone();
        let results =
            request.queries.iter().map(|q| QueryResult { result: Some(self.answer(q, &signed, &identity)) }).collect();
        Ok(Response { results })
    }
}

#[tonic::async_trait]
impl<L: Ledger> DiscoveryApi for DiscoveryService<L> {
    async fn discover(&self, request: tonic::Request<SignedRequest>) -> Result<tonic::Response<Response>, Status> {
        self.inner.discover(request.into_inner()).map(tonic::Response::new)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use ferrofabric_comm::Shutdown;
    use ferrofabric_msp::SigningIdentity;
    use ferrofabric_protos::common::Block;
    use ferrofabric_protos::discovery::{AuthInfo, ChaincodeQuery, ConfigQuery, LocalPeerQuery};
    use ferrofabric_testkit::Network;
    use tokio::sync::watch;

    use super::*;
    use crate::{GatewayConfig, GatewayOptions};

    /// A peer's ledger of the network's genesis block and, optionally, one chaincode definition `cc`.
    struct GenesisLedger {
        config: Arc<ChannelConfig>,
        height: watch::Sender<u64>,
        cc: Option<crate::ChaincodeInfo>,
    }

    impl Ledger for GenesisLedger {
        fn channel_id(&self) -> &str {
            self.config.channel_id()
        }
        fn config(&self) -> Arc<ChannelConfig> {
            self.config.clone()
        }
        fn chaincode(&self, name: &str) -> Result<Option<crate::ChaincodeInfo>, String> {
            Ok(self.cc.clone().filter(|_| name == "cc"))
        }
        fn chaincodes(&self) -> Vec<(String, String)> {
            Vec::new()
        }
        fn height(&self) -> u64 {
            1
        }
        fn subscribe(&self) -> watch::Receiver<u64> {
            self.height.subscribe()
        }
        async fn block(&self, _: u64) -> Result<Option<Bytes>, String> {
            Ok(None)
        }
        async fn tx_location(&self, _: &str) -> Result<Option<(u64, u32)>, String> {
            Ok(None)
        }
    }

    fn service(net: &Network) -> Arc<Inner<GenesisLedger>> {
        service_with(net, None)
    }

    fn service_with(net: &Network, cc: Option<crate::ChaincodeInfo>) -> Arc<Inner<GenesisLedger>> {
        let config = Arc::new(ChannelConfig::from_config_block(&Block::decode(net.genesis_block()).unwrap()).unwrap());
        let ledger = Arc::new(GenesisLedger { config, height: watch::channel(1).0, cc });
        let endorsers = crate::plan::tests::endorsers(net);
        // This process holds the first peer's key only.
        let peer = net.peer(0).clone();
        let signer = GossipSigner(Arc::new(move |m: &[u8]| peer.sign(m)));
        let config = GatewayConfig {
            local_mspid: net.mspid(0).to_owned(),
            signers: [(endorsers[0].address.clone(), signer)].into(),
            endorsers,
            tls: None,
            options: GatewayOptions::default(),
            ..GatewayConfig::default()
        };
        Gateway::new(config, ledger, Shutdown::never()).inner
    }

    fn ask(inner: &Inner<GenesisLedger>, who: &SigningIdentity, queries: Vec<Query>) -> Vec<query_result::Result> {
        let auth = AuthInfo { client_identity: who.serialized().clone(), client_tls_cert_hash: Bytes::new() };
        let payload = Bytes::from(Request { authentication: Some(auth), queries }.encode_to_vec());
        let signed = SignedRequest { signature: Bytes::from(who.sign(&payload)), payload };
        inner.discover(signed).unwrap().results.into_iter().map(|r| r.result.unwrap()).collect()
    }

    fn query(channel: &str, q: query::Query) -> Query {
        Query { channel: channel.to_owned(), query: Some(q) }
    }

    fn error_of(r: &query_result::Result) -> &str {
        match r {
            query_result::Result::Error(e) => &e.content,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn each_query_is_authorised_on_its_own_and_local_peers_are_for_local_admins() {
        let net = Network::generate(11).unwrap();
        let inner = service(&net);
        let channel = net.channel_id().to_owned();
        let local = query("", query::Query::LocalPeers(LocalPeerQuery {}));

        // A member of the channel: its channel query is answered, its local query refused, in one request.
        let member =
            ask(&inner, net.client(0), vec![query(&channel, query::Query::ConfigQuery(ConfigQuery {})), local.clone()]);
        assert!(matches!(member[0], query_result::Result::ConfigResult(_)), "{:?}", member[0]);
        assert_eq!(error_of(&member[1]), ACCESS_DENIED);

        // The peer's organisation's admin: local peers, without channel state; the other organisation's admin: no.
        let admin = ask(&inner, net.admin(0), vec![local.clone()]);
        let query_result::Result::Members(m) = &admin[0] else { panic!("{:?}", admin[0]) };
        assert_eq!(m.peers_by_org.values().map(|p| p.peers.len()).sum::<usize>(), 2);
        assert!(m.peers_by_org.values().flat_map(|p| &p.peers).all(|p| p.state_info.is_none()));
        assert_eq!(error_of(&ask(&inner, net.admin(1), vec![local])[0]), ACCESS_DENIED);

        // Peer membership: the peer whose key this process holds signs its gossip messages, as Fabric peers do;
        // PKI-IDs are Fabric's.
        let members = ask(&inner, net.client(0), vec![query(&channel, query::Query::PeerQuery(Default::default()))]);
        let query_result::Result::Members(m) = &members[0] else { panic!("{:?}", members[0]) };
        let config = inner.ledger.config();
        for p in m.peers_by_org.values().flat_map(|p| &p.peers) {
            let alive = p.membership_info.as_ref().unwrap();
            let state = p.state_info.as_ref().unwrap();
            let message = GossipMessage::decode(alive.payload.clone()).unwrap();
            let Some(gossip_message::Content::AliveMsg(a)) = message.content else { panic!("{message:?}") };
            assert_eq!(a.membership.unwrap().pki_id, pki_id(&p.identity));
            if p.identity == *net.peer(0).serialized() {
                let id = config.msp_manager().deserialize_identity(&p.identity).unwrap();
                id.verify(&alive.payload, &alive.signature).unwrap();
                id.verify(&state.payload, &state.signature).unwrap();
            } else {
                assert!(alive.signature.is_empty() && state.signature.is_empty());
            }
        }

        // Local peers on a channel, an unknown channel, an empty chaincode query.
        let results = ask(
            &inner,
            net.admin(0),
            vec![
                query(&channel, query::Query::LocalPeers(LocalPeerQuery {})),
                query("nosuchchannel", query::Query::ConfigQuery(ConfigQuery {})),
                query(&channel, query::Query::CcQuery(ChaincodeQuery { interests: Vec::new() })),
            ],
        );
        assert_eq!(error_of(&results[0]), UNKNOWN_QUERY);
        assert_eq!(error_of(&results[1]), ACCESS_DENIED);
        assert_eq!(error_of(&results[2]), "chaincode query must have at least one chaincode interest");

        // No authentication at all: the whole request fails, as Fabric's validateStructure.
        let payload = Bytes::from(Request { authentication: None, queries: Vec::new() }.encode_to_vec());
        let err = inner.discover(SignedRequest { payload, signature: Bytes::new() }).unwrap_err();
        assert_eq!(err.message(), "access denied, no authentication info in request");
    }

    /// A marshaled `ApplicationPolicy` of the signature policy `rule`.
    fn app_policy(rule: &str) -> ferrofabric_protos::peer::ApplicationPolicy {
        let env = ferrofabric_configtxgen::signature_policy(rule).unwrap();
        ferrofabric_protos::peer::ApplicationPolicy {
            r#type: Some(ferrofabric_protos::peer::application_policy::Type::SignaturePolicy(env)),
        }
    }

    /// A static collection whose members are `members` (a signature policy), with its own endorsement policy if
    /// `endorsement` is given.
    fn collection(name: &str, members: &str, endorsement: Option<&str>) -> ferrofabric_protos::peer::CollectionConfig {
        use ferrofabric_protos::peer::{collection_config, collection_policy_config, CollectionPolicyConfig};
        let members = ferrofabric_configtxgen::signature_policy(members).unwrap();
        ferrofabric_protos::peer::CollectionConfig {
            payload: Some(collection_config::Payload::StaticCollectionConfig(
                ferrofabric_protos::peer::StaticCollectionConfig {
                    name: name.into(),
                    member_orgs_policy: Some(CollectionPolicyConfig {
                        payload: Some(collection_policy_config::Payload::SignaturePolicy(members)),
                    }),
                    endorsement_policy: endorsement.map(app_policy),
                    ..Default::default()
                },
            )),
        }
    }

    /// The organisations of each layout of a chaincode query's only descriptor, and the groups' organisations.
    fn plan_of(result: &query_result::Result) -> (Vec<Vec<String>>, Vec<String>) {
        let query_result::Result::CcQueryRes(r) = result else { panic!("expected a chaincode result: {result:?}") };
        let d = &r.content[0];
        let mut layouts: Vec<Vec<String>> = d
            .layouts
            .iter()
            .map(|l| {
                let mut orgs: Vec<String> = l.quantities_by_group.keys().cloned().collect();
                orgs.sort();
                orgs
            })
            .collect();
        layouts.sort();
        let mut groups: Vec<String> = d.endorsers_by_groups.keys().cloned().collect();
        groups.sort();
        (layouts, groups)
    }

    #[tokio::test]
    async fn collections_narrow_the_endorsers_to_their_members_and_bring_their_own_policies() {
        let net = Network::generate(12).unwrap();
        let collections = ferrofabric_protos::peer::CollectionConfigPackage {
            config: vec![
                collection("org2only", "OR('Org2MSP.member')", None),
                collection(
                    "shared",
                    "OR('Org1MSP.member', 'Org2MSP.member')",
                    Some("AND('Org1MSP.peer', 'Org2MSP.peer')"),
                ),
            ],
        };
        let cc = crate::ChaincodeInfo {
            policy: Bytes::from(app_policy("OR('Org1MSP.peer', 'Org2MSP.peer')").encode_to_vec()),
            collections: Some(collections),
        };
        let inner = service_with(&net, Some(cc));
        let channel = net.channel_id().to_owned();
        let ask_plan = |call: ChaincodeCall| {
            let interest = ferrofabric_protos::peer::ChaincodeInterest { chaincodes: vec![call] };
            let q = query(&channel, query::Query::CcQuery(ChaincodeQuery { interests: vec![interest] }));
            ask(&inner, net.client(0), vec![q]).remove(0)
        };
        let call = |collections: &[&str], no_private_reads: bool| ChaincodeCall {
            name: "cc".into(),
            collection_names: collections.iter().map(|c| (*c).to_owned()).collect(),
            no_private_reads,
            ..ChaincodeCall::default()
        };
        let (org1, org2) = ("Org1MSP".to_owned(), "Org2MSP".to_owned());

        // No collection: either organisation alone.
        assert_eq!(
            plan_of(&ask_plan(call(&[], false))),
            (vec![vec![org1.clone()], vec![org2.clone()]], vec![org1.clone(), org2.clone()])
        );
        // Read privately from a collection of Org2 only: Org2's peers alone may endorse.
        assert_eq!(plan_of(&ask_plan(call(&["org2only"], false))), (vec![vec![org2.clone()]], vec![org2.clone()]));
        // Only written, not read: membership does not matter (the collection has no policy of its own).
        assert_eq!(plan_of(&ask_plan(call(&["org2only"], true))).0, vec![vec![org1.clone()], vec![org2.clone()]]);
        // A collection with its own endorsement policy: that policy takes the chaincode's place.
        assert_eq!(plan_of(&ask_plan(call(&["shared"], false))).0, vec![vec![org1.clone(), org2.clone()]]);
        // An organisation's implicit collection: its own peers.
        assert_eq!(
            plan_of(&ask_plan(call(&["_implicit_org_Org1MSP"], false))),
            (vec![vec![org1.clone()]], vec![org1.clone()])
        );
        // A peer query filtered by the same interest: the collection's members only.
        let interest = ferrofabric_protos::peer::ChaincodeInterest { chaincodes: vec![call(&["org2only"], false)] };
        let filtered = ferrofabric_protos::discovery::PeerMembershipQuery { filter: Some(interest) };
        let members = ask(&inner, net.client(0), vec![query(&channel, query::Query::PeerQuery(filtered))]).remove(0);
        let query_result::Result::Members(m) = members else { panic!("{members:?}") };
        assert_eq!(m.peers_by_org.keys().collect::<Vec<_>>(), [&org2]);
        // Fabric's refusals.
        assert_eq!(
            error_of(&ask_plan(call(&["nope"], false))),
            "collection nope doesn't exist in collection config for chaincode cc"
        );
        let disregard = ChaincodeCall { disregard_namespace_policy: true, ..call(&[], false) };
        assert!(error_of(&ask_plan(disregard)).starts_with("requested to disregard chaincode cc's policy"));
    }
}
