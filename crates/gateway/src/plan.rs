//! The endorsers a gateway can ask and the endorsement plans it draws from a chaincode's policy (Fabric's
//! `internal/pkg/gateway/registry.go`, `endorsement.go`, and discovery's layouts, `discovery/endorsement`).
//!
//! A *layout* is a set of organisations one endorsement each of which satisfies the policy; the layouts of a
//! policy are its minimal such sets, smallest first. They are found by evaluating the policy itself on the
//! identities of one peer per organisation, signatures presumed, so every policy the validator understands
//! (signature policies, channel policy references, implicit meta policies) plans the same way it validates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_channelconfig::{compile_signature_policy, ChannelConfig, Policy, SignatureSet};
use ferrofabric_protos::common::msp_principal::Classification;
use ferrofabric_protos::common::msp_role::MspRoleType;
use ferrofabric_protos::common::{signature_policy, MspPrincipal, MspRole, SignaturePolicy, SignaturePolicyEnvelope};
use ferrofabric_protos::peer::endorser_client::EndorserClient;
use ferrofabric_protos::peer::{
    application_policy, collection_config, collection_policy_config, ApplicationPolicy, ChaincodeCall,
    ProposalResponse, SignedProposal,
};
use ferrofabric_protoutil::lifecycle::implicit_collection_org;
use prost::Message;
use tonic::Code;

use crate::conn::Connections;
use crate::error::go_error_text;
use crate::ledger::{ChaincodeInfo, Ledger};

/// Largest message exchanged with an endorser: 100 MiB, Fabric's default for its gRPC clients and servers.
pub(crate) const MAX_MESSAGE_SIZE: usize = 100 * 1024 * 1024;

/// Most organisations a plan is drawn over (the layouts are found among all subsets of them).
const MAX_PLANNED_ORGS: usize = 12;
/// How long an endorser that could not be reached is asked only after its organisation's other peers.
const UNREACHABLE_FOR: Duration = Duration::from_secs(30);

/// What an endorsement plan of a chaincode interest must satisfy (Fabric's discovery,
/// `discovery/endorsement/endorsement.go` `computePrincipalSets` and `loadMetadataAndFilters`, with the collection
/// policies of `core/chaincode/lifecycle/metadata_provider.go`).
pub(crate) struct Requirements {
    /// Every policy a layout must satisfy: per chaincode called, its endorsement policy, or, when the call names
    /// collections, each collection's own endorsement policy (the chaincode's for a collection without one);
    /// and every key-level policy.
    pub(crate) policies: Vec<Arc<dyn Policy>>,
    /// Per collection read privately: "one of the collection's member principals". Only peers that satisfy
    /// every one of them may endorse (they alone hold the private data).
    members: Vec<Arc<dyn Policy>>,
}

impl Requirements {
    /// Whether the peer of `identity` (a marshaled `SerializedIdentity`) may endorse under these requirements: a
    /// member of every collection read privately.
    pub(crate) fn admits(&self, identity: &Bytes, config: &ChannelConfig) -> bool {
        self.members
            .iter()
            .all(|m| m.evaluate(&SignatureSet::presumed_signed(vec![identity.clone()], config.msp_manager())).is_ok())
    }
}

/// A signature policy satisfied by any one of `identities`.
fn any_of(identities: Vec<MspPrincipal>) -> SignaturePolicyEnvelope {
    let rules = (0..identities.len() as i32)
        .map(|i| SignaturePolicy { r#type: Some(signature_policy::Type::SignedBy(i)) })
        .collect();
    let rule = signature_policy::NOutOf { n: 1, rules };
    SignaturePolicyEnvelope {
        version: 0,
        rule: Some(SignaturePolicy { r#type: Some(signature_policy::Type::NOutOf(rule)) }),
        identities,
    }
}

/// Collection `name` of chaincode `cc`: its member principals and its own endorsement policy (marshaled
/// `ApplicationPolicy`), if it has one. An implicit collection `_implicit_org_<MSPID>` has that organisation's
/// members for both, as Fabric's metadata provider gives it.
///
/// Errors: Fabric's, for a collection the definition does not have or whose member policy is not a signature
/// policy.
fn collection(cc: &ChaincodeInfo, chaincode: &str, name: &str) -> Result<(Vec<MspPrincipal>, Option<Bytes>), String> {
    if let Some(mspid) = implicit_collection_org(name) {
        let role = MspRole { msp_identifier: mspid.to_owned(), role: MspRoleType::Member as i32 };
        let member = MspPrincipal {
            principal_classification: Classification::Role as i32,
            principal: Bytes::from(role.encode_to_vec()),
        };
        let own =
            ApplicationPolicy { r#type: Some(application_policy::Type::SignaturePolicy(any_of(vec![member.clone()]))) };
        return Ok((vec![member], Some(Bytes::from(own.encode_to_vec()))));
    }
    let statics = cc.collections.iter().flat_map(|p| p.config.iter()).filter_map(|c| {
        let Some(collection_config::Payload::StaticCollectionConfig(s)) = &c.payload else { return None };
        Some(s)
    });
    for s in statics {
        if s.name != name {
            continue;
        }
        let members = match s.member_orgs_policy.as_ref().and_then(|p| p.payload.as_ref()) {
            Some(collection_policy_config::Payload::SignaturePolicy(env)) => env.identities.clone(),
            None => return Err(format!("policy of {name} is nil")),
        };
        return Ok((members, s.endorsement_policy.as_ref().map(|p| Bytes::from(p.encode_to_vec()))));
    }
    Err(format!("collection {name} doesn't exist in collection config for chaincode {chaincode}"))
}

/// The [`Requirements`] of the chaincode calls of an interest, `calls`, on the channel of `ledger`.
///
/// Errors: a chaincode not defined, a collection it does not have, a policy that does not compile, or a call
/// that disregards its chaincode's policy without naming another (Fabric's messages).
pub(crate) fn requirements<L: Ledger>(
    ledger: &L,
    config: &ChannelConfig,
    calls: &[ChaincodeCall],
) -> Result<Requirements, String> {
    let mut policies = Vec::new();
    let mut members = Vec::new();
    for call in calls {
        let cc = ledger
            .chaincode(&call.name)?
            .ok_or_else(|| format!("chaincode {} is not defined on channel {}", call.name, ledger.channel_id()))?;
        // Fabric's `PoliciesByChaincode`: with collections named, their policies take the chaincode's place.
        let mut own: Vec<Bytes> = Vec::new();
        if call.collection_names.is_empty() {
            own.push(cc.policy.clone());
        }
        for name in &call.collection_names {
            let (principals, policy) = collection(&cc, &call.name, name)?;
            let policy = policy.unwrap_or_else(|| cc.policy.clone());
            if !own.contains(&policy) {
                own.push(policy);
            }
            if !call.no_private_reads {
                members.push(compile_signature_policy(&any_of(principals)).map_err(|e| e.to_string())?);
            }
        }
        if call.disregard_namespace_policy {
            if own.len() == 1 && call.key_policies.is_empty() {
                return Err(format!(
                    "requested to disregard chaincode {}'s policy but key and collection policies are missing, either disable DisregardNamespacePolicy or specify at least one key policy or at least one collection policy",
                    call.name
                ));
            }
            own.remove(0);
        }
        for p in own {
            policies.push(config.application_policy(&p).map_err(|e| e.to_string())?);
        }
        for key_policy in &call.key_policies {
            policies.push(compile_signature_policy(key_policy).map_err(|e| e.to_string())?);
        }
    }
    Ok(Requirements { policies, members })
}

/// One endorsing peer of the channel a gateway may ask. Fabric's gateway learns these through discovery's
/// membership; a Ferrofabric node knows its peers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndorserEndpoint {
    /// The peer's organisation (MSP ID).
    pub mspid: String,
    /// The peer's `host:port`.
    pub address: String,
    /// The peer's marshaled `SerializedIdentity` (what its endorsements carry).
    pub identity: Bytes,
}

/// Why an endorser did not endorse (Fabric's `responseStatus`).
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    /// The gRPC code the gateway answers with.
    pub(crate) code: Code,
    /// What went wrong, in Fabric's words.
    pub(crate) message: String,
    /// Whether another peer of the same organisation may succeed (the peer failed, not the proposal).
    pub(crate) retry: bool,
}

/// The endorsers of the channel, the local organisation's first: those the gateway was configured with, and those
/// it learned from the channel's anchor peers (see `membership`).
///
/// Fabric's gateway removes an endorser it could not reach from its registry until discovery sees the peer again.
/// Here an unreachable endorser is kept but asked after the other peers of its organisation for
/// [`UNREACHABLE_FOR`], or until it answers again; a learned one goes when its anchor peer stops naming it.
pub(crate) struct Registry {
    local_mspid: String,
    configured: Vec<EndorserEndpoint>,
    /// `configured` and the learned peers, the local organisation's first.
    endorsers: RwLock<Arc<[EndorserEndpoint]>>,
    pub(crate) connections: Connections,
    timeout: Duration,
    /// Endorsers that could not be reached, by address, and when.
    unreachable: Mutex<HashMap<String, Instant>>,
}

impl Registry {
    /// A registry of `endorsers` for a gateway of organisation `local_mspid`; each proposal waits at most `timeout`.
    pub(crate) fn new(
        local_mspid: String,
        endorsers: Vec<EndorserEndpoint>,
        connections: Connections,
        timeout: Duration,
    ) -> Registry {
        let registry = Registry {
            local_mspid,
            configured: endorsers,
            endorsers: RwLock::new(Arc::from(Vec::new())),
            connections,
            timeout,
            unreachable: Mutex::default(),
        };
        registry.learn(Vec::new());
        registry
    }

    /// Replaces the learned peers with `learned`; a peer the registry was configured with stays as configured.
    pub(crate) fn learn(&self, learned: Vec<EndorserEndpoint>) {
        let mut all = self.configured.clone();
        for peer in learned {
            if !all.iter().any(|e| e.address == peer.address) {
                all.push(peer);
            }
        }
        all.sort_by_key(|e| e.mspid != self.local_mspid);
        *self.endorsers.write().unwrap_or_else(|e| e.into_inner()) = Arc::from(all);
    }

    /// The peers the registry was configured with.
    pub(crate) fn configured(&self) -> &[EndorserEndpoint] {
        &self.configured
    }

    /// Whether `peer` could not be reached in the last [`UNREACHABLE_FOR`].
    fn is_unreachable(&self, peer: &EndorserEndpoint) -> bool {
        let unreachable = self.unreachable.lock().unwrap_or_else(|e| e.into_inner());
        unreachable.get(&peer.address).is_some_and(|at| at.elapsed() < UNREACHABLE_FOR)
    }

    /// `peers` in the order to ask them: reachable ones first, each group in its given order.
    pub(crate) fn by_reachability(&self, peers: impl Iterator<Item = EndorserEndpoint>) -> Vec<EndorserEndpoint> {
        let mut peers: Vec<EndorserEndpoint> = peers.collect();
        peers.sort_by_key(|p| self.is_unreachable(p));
        peers
    }

    /// The gateway's organisation.
    pub(crate) fn local_mspid(&self) -> &str {
        &self.local_mspid
    }

    /// The peers of organisation `mspid`, reachable ones first.
    pub(crate) fn peers_of(&self, mspid: &str) -> Vec<EndorserEndpoint> {
        self.by_reachability(self.peers().iter().filter(|e| e.mspid == mspid).cloned())
    }

    /// The peers of organisation `mspid` that `admits` accepts, reachable ones first.
    pub(crate) fn eligible_peers_of(
        &self,
        mspid: &str,
        admits: &dyn Fn(&EndorserEndpoint) -> bool,
    ) -> Vec<EndorserEndpoint> {
        self.by_reachability(self.peers().iter().filter(|e| e.mspid == mspid && admits(e)).cloned())
    }

    /// Every peer, the local organisation's first.
    pub(crate) fn peers(&self) -> Arc<[EndorserEndpoint]> {
        self.endorsers.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The organisations with peers, the local one first, each once.
    fn orgs(&self) -> Vec<String> {
        let mut orgs: Vec<String> = Vec::new();
        for e in self.peers().iter() {
            if !orgs.contains(&e.mspid) {
                orgs.push(e.mspid.clone());
            }
        }
        orgs
    }

    /// Sends `signed` to `peer` and classifies the answer: `Ok` for a successful response (status 200–399).
    pub(crate) async fn propose(
        &self,
        peer: &EndorserEndpoint,
        signed: &SignedProposal,
    ) -> Result<ProposalResponse, Failure> {
        let unavailable = |message: String| Failure { code: Code::Unavailable, message, retry: true };
        // The dial counts against the endorsement timeout: a peer that is down must not hold the request longer.
        let call = async {
            let channel = self.connections.get(&peer.address).await?;
            let mut client = EndorserClient::new(channel)
                .max_decoding_message_size(MAX_MESSAGE_SIZE)
                .max_encoding_message_size(MAX_MESSAGE_SIZE);
            client.process_proposal(signed.clone()).await.map(|r| r.into_inner()).map_err(|s| go_error_text(&s))
        };
        let response = tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or_else(|_| Err("rpc error: code = DeadlineExceeded desc = context deadline exceeded".into()));
        let mut unreachable = self.unreachable.lock().unwrap_or_else(|e| e.into_inner());
        match &response {
            Ok(_) => unreachable.remove(&peer.address),
            Err(_) => unreachable.insert(peer.address.clone(), Instant::now()),
        };
        drop(unreachable);
        let response = response.map_err(unavailable)?;
        let (status, message) = response.response.as_ref().map_or((0, ""), |r| (r.status, r.message.as_str()));
        if (200..400).contains(&status) {
            return Ok(response);
        }
        Err(if status == 500 && response.payload.is_empty() {
            Failure { code: Code::Aborted, message: message.to_owned(), retry: true }
        } else {
            Failure { code: Code::Unknown, message: format!("chaincode response {status}, {message}"), retry: false }
        })
    }

    /// The layouts of `policies` (see the module docs): the minimal sets of organisations that satisfy every one
    /// of them — one policy per chaincode of an interest, so that a chaincode calling another is endorsed for
    /// both (Fabric's discovery merges their principal sets the same way). Those that include `first` come first,
    /// then smallest first. Only peers that `admits` accepts count (members of the collections read); organisations
    /// without one, or whose peers' identities the channel does not know, never appear.
    pub(crate) fn layouts(
        &self,
        policies: &[&dyn Policy],
        config: &ChannelConfig,
        first: &str,
        admits: &dyn Fn(&EndorserEndpoint) -> bool,
    ) -> Vec<Vec<String>> {
        let orgs: Vec<(String, Bytes)> = self
            .orgs()
            .into_iter()
            .take(MAX_PLANNED_ORGS)
            .filter_map(|org| {
                let identity = self.eligible_peers_of(&org, admits).first().map(|p| p.identity.clone());
                identity.map(|id| (org, id))
            })
            .collect();
        let mut layouts: Vec<u32> = Vec::new();
        let mut subsets: Vec<u32> = (1..(1u32 << orgs.len())).collect();
        subsets.sort_by_key(|s| s.count_ones());
        for subset in subsets {
            if layouts.iter().any(|l| l & subset == *l) {
                continue;
            }
            let identities: Vec<Bytes> = orgs
                .iter()
                .enumerate()
                .filter(|(i, _)| subset & (1 << i) != 0)
                .map(|(_, (_, id))| id.clone())
                .collect();
            let satisfies = |policy: &&dyn Policy| {
                policy.evaluate(&SignatureSet::presumed_signed(identities.clone(), config.msp_manager())).is_ok()
            };
            if !policies.is_empty() && policies.iter().all(satisfies) {
                layouts.push(subset);
            }
        }
        let mut layouts: Vec<Vec<String>> = layouts
            .into_iter()
            .map(|l| orgs.iter().enumerate().filter(|(i, _)| l & (1 << i) != 0).map(|(_, (o, _))| o.clone()).collect())
            .collect();
        layouts.sort_by_key(|l: &Vec<String>| (!l.iter().any(|o| o == first), l.len()));
        layouts
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use std::sync::Arc;

    use ferrofabric_channelconfig::compile_signature_policy;
    use ferrofabric_protos::common::Block;
    use ferrofabric_testkit::Network;
    use prost::Message;

    use super::*;

    /// One endorser per organisation of `net`, at 127.0.0.1:7051 and 7052.
    pub(crate) fn endorsers(net: &Network) -> Vec<EndorserEndpoint> {
        (0..2)
            .map(|org| EndorserEndpoint {
                mspid: net.mspid(org).to_owned(),
                address: format!("127.0.0.1:{}", 7051 + org),
                identity: net.peer(org).serialized().clone(),
            })
            .collect()
    }

    fn registry(net: &Network) -> Registry {
        Registry::new(
            "Org1MSP".into(),
            endorsers(net),
            Connections::new(None, Duration::from_secs(1)),
            Duration::from_secs(1),
        )
    }

    /// Admits every peer.
    const ANY: fn(&EndorserEndpoint) -> bool = |_| true;

    fn dsl(rule: &str) -> Arc<dyn Policy> {
        compile_signature_policy(&ferrofabric_configtxgen::signature_policy(rule).unwrap()).unwrap()
    }

    #[tokio::test]
    async fn an_unreachable_endorser_is_asked_after_its_organisations_other_peers() {
        let net = Network::generate(7).unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let dead = EndorserEndpoint { address: closed.to_string(), ..endorsers(&net)[0].clone() };
        let mut all = endorsers(&net);
        all.insert(0, dead.clone());
        let reg = Registry::new(
            "Org1MSP".into(),
            all,
            Connections::new(None, Duration::from_secs(1)),
            Duration::from_secs(1),
        );
        assert_eq!(reg.peers_of("Org1MSP")[0], dead, "the given order while every peer is presumed reachable");
        let failure = reg.propose(&dead, &SignedProposal::default()).await.unwrap_err();
        assert_eq!(failure.code, Code::Unavailable);
        let org1 = reg.peers_of("Org1MSP");
        assert_eq!(org1.len(), 2, "an unreachable endorser is kept");
        assert_eq!(org1[1], dead, "and asked last");
        assert_eq!(reg.by_reachability(reg.peers().iter().cloned()).last(), Some(&dead));
    }

    #[test]
    fn learned_peers_join_the_configured_ones_until_learned_again_and_never_replace_one() {
        let net = Network::generate(7).unwrap();
        let all = endorsers(&net);
        let reg = Registry::new(
            "Org2MSP".into(),
            vec![all[1].clone()],
            Connections::new(None, Duration::from_secs(1)),
            Duration::from_secs(1),
        );
        assert!(reg.peers_of("Org1MSP").is_empty());
        // An anchor names Org1's peer, and Org2's own under another identity: the configured one stays.
        let impostor = EndorserEndpoint { identity: all[0].identity.clone(), ..all[1].clone() };
        reg.learn(vec![all[0].clone(), impostor]);
        assert_eq!(reg.peers().to_vec(), [all[1].clone(), all[0].clone()], "the local organisation's first");
        reg.learn(Vec::new());
        assert_eq!(reg.peers().to_vec(), [all[1].clone()], "a peer no anchor names any more leaves");
    }

    #[test]
    fn layouts_are_the_minimal_sets_of_organisations_that_satisfy_the_policy() {
        let net = Network::generate(7).unwrap();
        let config = ChannelConfig::from_config_block(&Block::decode(net.genesis_block()).unwrap()).unwrap();
        let reg = registry(&net);
        let both = vec![vec!["Org1MSP".to_owned(), "Org2MSP".to_owned()]];

        let and = dsl("AND('Org1MSP.member', 'Org2MSP.member')");
        assert_eq!(reg.layouts(&[and.as_ref()], &config, "Org1MSP", &ANY), both);

        // Either org alone; the first endorser's org comes first, and no superset of a layout is one.
        let or = dsl("OR('Org1MSP.peer', 'Org2MSP.peer')");
        assert_eq!(
            reg.layouts(&[or.as_ref()], &config, "Org2MSP", &ANY),
            vec![vec!["Org2MSP".to_owned()], vec!["Org1MSP".to_owned()]]
        );

        // The channel's default endorsement policy: MAJORITY of the orgs' Endorsement policies, i.e. both of two.
        let majority = config.policy("/Channel/Application/Endorsement").unwrap();
        assert_eq!(reg.layouts(&[majority.as_ref()], &config, "Org1MSP", &ANY), both);

        // A peer is no admin: no set of peers satisfies an admins' policy.
        let admins = dsl("OR('Org1MSP.admin', 'Org2MSP.admin')");
        assert!(reg.layouts(&[admins.as_ref()], &config, "Org1MSP", &ANY).is_empty());

        // A chaincode endorsed by Org2 alone calling one endorsed by either org: only Org2 satisfies both.
        let org2 = dsl("OR('Org2MSP.peer')");
        assert_eq!(
            reg.layouts(&[org2.as_ref(), or.as_ref()], &config, "Org1MSP", &ANY),
            vec![vec!["Org2MSP".to_owned()]]
        );
        // One calling another that needs both: both.
        assert_eq!(reg.layouts(&[or.as_ref(), and.as_ref()], &config, "Org1MSP", &ANY), both);
        assert!(reg.layouts(&[], &config, "Org1MSP", &ANY).is_empty());
    }
}
