//! `Endorse` and `Evaluate` (Fabric's `internal/pkg/gateway/endorse.go`, `evaluate.go`).
//!
//! Endorse asks the local organisation's peers first (the proposal's result decides nothing yet, but the local
//! peer is the one trusted with it), then completes a layout of the policies its `ChaincodeInterest` names (the
//! chaincodes it called, the collections it used and the key-level policies of the keys it wrote) with one
//! endorsement from each of its other organisations, by peers that are members of the collections it read, trying the next peer of an organisation whose peer failed and
//! the next layout when an organisation cannot endorse. A client that names `endorsing_organizations` gets exactly
//! those. The endorsements are assembled into the transaction the client signs and submits.

use bytes::Bytes;
use ferrofabric_channelconfig::Policy;
use ferrofabric_protos::common::{ChannelHeader, Envelope, Header};
use ferrofabric_protos::gateway::{EndorseRequest, EndorseResponse, ErrorDetail, EvaluateRequest, EvaluateResponse};
use ferrofabric_protos::peer::{
    ChaincodeAction, ChaincodeCall, ChaincodeEndorsedAction, ChaincodeInvocationSpec, ChaincodeProposalPayload,
    Endorsement, Proposal, ProposalResponse, ProposalResponsePayload, SignedProposal,
};
use futures::future::join_all;
use prost::Message;
use tonic::{Code, Status};

use crate::error::{detail, rpc_error};
use crate::ledger::Ledger;
use crate::plan::{requirements, EndorserEndpoint, Failure};
use crate::Inner;

/// Admits every peer: before a proposal's interest is known, any peer of an organisation may endorse.
const ANY_PEER: fn(&EndorserEndpoint) -> bool = |_| true;

/// What the gateway needs of a proposal (Fabric's `getChannelAndChaincodeFromSignedProposal`).
struct Unpacked {
    header: Header,
    input: Bytes,
    channel: String,
    chaincode: String,
    has_transient_data: bool,
}

/// Decodes `signed` down to the chaincode name.
///
/// Errors: Fabric's messages for an absent or undecodable layer, and for a missing channel or chaincode.
fn unpack(signed: Option<&SignedProposal>) -> Result<Unpacked, String> {
    let signed = signed.filter(|s| !s.proposal_bytes.is_empty()).ok_or("a signed proposal is required")?;
    let proposal =
        Proposal::decode(signed.proposal_bytes.clone()).map_err(|e| format!("error unmarshalling Proposal: {e}"))?;
    let header = Header::decode(proposal.header.clone()).map_err(|e| format!("error unmarshalling Header: {e}"))?;
    let channel_header = ChannelHeader::decode(header.channel_header.clone())
        .map_err(|e| format!("error unmarshalling ChannelHeader: {e}"))?;
    let payload = ChaincodeProposalPayload::decode(proposal.payload.clone())
        .map_err(|e| format!("error unmarshalling ChaincodeProposalPayload: {e}"))?;
    let spec = ChaincodeInvocationSpec::decode(payload.input.clone())
        .map_err(|e| format!("error unmarshalling ChaincodeInvocationSpec: {e}"))?;
    let channel = channel_header.channel_id;
    if channel.is_empty() {
        return Err("no channel id provided".into());
    }
    let spec = spec.chaincode_spec.ok_or_else(|| format!("no chaincode spec is provided, channel id [{channel}]"))?;
    let id = spec.chaincode_id.ok_or_else(|| format!("no chaincode id is provided, channel id [{channel}]"))?;
    if id.name.is_empty() {
        return Err(format!("no chaincode name is provided, channel id [{channel}]"));
    }
    Ok(Unpacked {
        header,
        input: payload.input,
        channel,
        chaincode: id.name,
        has_transient_data: !payload.transient_map.is_empty(),
    })
}

/// The chaincode's own result in a successful response: the payload of the `ChaincodeAction`'s response.
fn chaincode_result(response: &ProposalResponse) -> Option<Bytes> {
    let prp = ProposalResponsePayload::decode(response.payload.clone()).ok()?;
    let action = ChaincodeAction::decode(prp.extension).ok()?;
    Some(action.response?.payload)
}

impl<L: Ledger> Inner<L> {
    /// One organisation's endorsement: its peers that `admits` accepts in turn, until one endorses or a failure is
    /// the proposal's own.
    async fn endorse_by(
        &self,
        org: &str,
        signed: &SignedProposal,
        admits: &(dyn Fn(&EndorserEndpoint) -> bool + Sync),
    ) -> Result<ProposalResponse, Vec<ErrorDetail>> {
        let mut details = Vec::new();
        for peer in self.registry.eligible_peers_of(org, admits) {
            match self.registry.propose(&peer, signed).await {
                Ok(r) => return Ok(r),
                Err(f) => {
                    tracing::warn!(mspid = org, endpoint = %peer.address, error = %f.message, "endorse call to endorser failed");
                    details.push(detail(&peer.address, org, f.message.clone()));
                    if !f.retry {
                        break;
                    }
                }
            }
        }
        Err(details)
    }

    pub(crate) async fn endorse(&self, request: EndorseRequest) -> Result<EndorseResponse, Status> {
        let signed = request
            .proposed_transaction
            .as_ref()
            .filter(|s| !s.proposal_bytes.is_empty())
            .ok_or_else(|| Status::invalid_argument("the proposed transaction must contain a signed proposal"))?;
        let up = unpack(Some(signed)).map_err(Status::invalid_argument)?;
        if up.channel != self.ledger.channel_id() {
            return Err(Status::failed_precondition(format!("channel '{}' not found", up.channel)));
        }
        let mut details = Vec::new();
        let mut endorsed: Vec<(String, ProposalResponse)> = Vec::new();
        if !request.endorsing_organizations.is_empty() {
            let missing: Vec<&str> = request
                .endorsing_organizations
                .iter()
                .map(String::as_str)
                .filter(|o| self.registry.peers_of(o).is_empty())
                .collect();
            if !missing.is_empty() {
                return Err(Status::unavailable(format!(
                    "failed to find any endorsing peers for org(s): {}",
                    missing.join(", ")
                )));
            }
            let orgs = &request.endorsing_organizations;
            let answers = join_all(orgs.iter().map(|o| self.endorse_by(o, signed, &ANY_PEER))).await;
            for (org, answer) in orgs.iter().zip(answers) {
                match answer {
                    Ok(r) => endorsed.push((org.clone(), r)),
                    Err(d) => details.extend(d),
                }
            }
            if endorsed.len() < orgs.len() {
                return Err(rpc_error(
                    Code::Aborted,
                    "failed to collect enough transaction endorsements, see attached details for more info",
                    &details,
                ));
            }
        } else {
            let local = self.registry.local_mspid().to_owned();
            let first = if !self.registry.peers_of(&local).is_empty() {
                local
            } else if up.has_transient_data {
                return Err(Status::failed_precondition(
                    "no endorsers found in the gateway's organization; retry specifying endorsing organization(s) to protect transient data",
                ));
            } else {
                self.registry
                    .peers()
                    .first()
                    .map(|p| p.mspid.clone())
                    .ok_or_else(|| Status::failed_precondition("no endorsing peers found for the channel"))?
            };
            match self.endorse_by(&first, signed, &ANY_PEER).await {
                Ok(r) => endorsed.push((first.clone(), r)),
                Err(d) => {
                    return Err(rpc_error(
                        Code::Aborted,
                        "failed to endorse transaction, see attached details for more info",
                        &d,
                    ))
                }
            }
            let config = self.ledger.config();
            let invoked = [ChaincodeCall { name: up.chaincode.clone(), ..ChaincodeCall::default() }];
            // Fabric's gateway plans from the first endorser's ChaincodeInterest; without one (or with an empty
            // one), from the invoked chaincode.
            let calls = match endorsed.first().and_then(|(_, r)| r.interest.as_ref()) {
                Some(i) if !i.chaincodes.is_empty() => i.chaincodes.as_slice(),
                _ => &invoked,
            };
            let needs = requirements(self.ledger.as_ref(), &config, calls).map_err(|e| {
                Status::failed_precondition(format!("no endorsement plan for chaincode {}: {e}", up.chaincode))
            })?;
            // An endorsement by a peer outside a collection read privately does not count.
            endorsed.retain(|(_, r)| r.endorsement.as_ref().is_some_and(|e| needs.admits(&e.endorser, &config)));
            let admits = |p: &EndorserEndpoint| needs.admits(&p.identity, &config);
            let policies: Vec<&dyn Policy> = needs.policies.iter().map(|p| p.as_ref()).collect();
            let layouts = self.registry.layouts(&policies, &config, &first, &admits);
            if layouts.is_empty() {
                return Err(Status::failed_precondition(format!(
                    "no combination of peers can satisfy the endorsement policy of chaincode {}",
                    up.chaincode
                )));
            }
            let mut failed: Vec<String> = Vec::new();
            let mut complete = false;
            for layout in layouts {
                if layout.iter().any(|o| failed.contains(o)) {
                    continue;
                }
                let needed: Vec<&String> = layout.iter().filter(|o| !endorsed.iter().any(|(e, _)| e == *o)).collect();
                let answers = join_all(needed.iter().map(|o| self.endorse_by(o, signed, &admits))).await;
                for (org, answer) in needed.into_iter().zip(answers) {
                    match answer {
                        Ok(r) => endorsed.push((org.clone(), r)),
                        Err(d) => {
                            details.extend(d);
                            failed.push(org.clone());
                        }
                    }
                }
                if layout.iter().all(|o| endorsed.iter().any(|(e, _)| e == o)) {
                    endorsed.retain(|(e, _)| layout.contains(e));
                    complete = true;
                    break;
                }
            }
            if !complete {
                return Err(rpc_error(
                    Code::Aborted,
                    "failed to collect enough transaction endorsements, see attached details for more info",
                    &details,
                ));
            }
        }
        let prepared = self.prepare(up, &endorsed)?;
        Ok(EndorseResponse { prepared_transaction: Some(prepared) })
    }

    /// The unsigned transaction envelope of the endorsements (Fabric's `prepareTransaction`), each endorser once.
    ///
    /// Errors: the responses carry different results (ABORTED, with a detail per mismatching endorser).
    fn prepare(&self, up: Unpacked, endorsed: &[(String, ProposalResponse)]) -> Result<Envelope, Status> {
        let first = endorsed.first().map(|(_, r)| r.payload.clone()).unwrap_or_default();
        let mismatched: Vec<ErrorDetail> = endorsed
            .iter()
            .filter(|(_, r)| r.payload != first)
            .map(|(org, _)| detail("", org, "ProposalResponsePayloads do not match"))
            .collect();
        if !mismatched.is_empty() {
            return Err(rpc_error(
                Code::Aborted,
                "failed to collect enough transaction endorsements, see attached details for more info",
                &mismatched,
            ));
        }
        let mut endorsements: Vec<Endorsement> = Vec::new();
        for e in endorsed.iter().filter_map(|(_, r)| r.endorsement.as_ref()) {
            if !endorsements.iter().any(|x| x.endorser == e.endorser) {
                endorsements.push(e.clone());
            }
        }
        let action = ChaincodeEndorsedAction { proposal_response_payload: first, endorsements };
        let payload = ferrofabric_protoutil::endorsed_transaction_payload(up.header, up.input, action);
        Ok(Envelope { payload, signature: Bytes::new() })
    }

    pub(crate) async fn evaluate(&self, request: EvaluateRequest) -> Result<EvaluateResponse, Status> {
        let up = unpack(request.proposed_transaction.as_ref())
            .map_err(|e| Status::invalid_argument(format!("failed to unpack transaction proposal: {e}")))?;
        if up.channel != self.ledger.channel_id() {
            return Err(Status::unavailable(format!("channel '{}' not found", up.channel)));
        }
        let targets: Vec<EndorserEndpoint> = if !request.target_organizations.is_empty() {
            request.target_organizations.iter().flat_map(|o| self.registry.peers_of(o)).collect()
        } else if up.has_transient_data {
            self.registry.peers_of(self.registry.local_mspid())
        } else {
            self.registry.by_reachability(self.registry.peers().iter().cloned())
        };
        if targets.is_empty() {
            return Err(Status::failed_precondition(format!(
                "no peers available to evaluate chaincode {} in channel {}",
                up.chaincode, up.channel
            )));
        }
        let Some(signed) = request.proposed_transaction.as_ref() else {
            return Err(Status::invalid_argument("a signed proposal is required"));
        };
        let mut details = Vec::new();
        let mut last = Code::Unavailable;
        for peer in targets {
            match self.registry.propose(&peer, signed).await {
                Ok(r) => {
                    let mut result = r.response.clone().unwrap_or_default();
                    if let Some(payload) = chaincode_result(&r) {
                        result.payload = payload;
                    }
                    return Ok(EvaluateResponse { result: Some(result) });
                }
                Err(Failure { code, message, retry }) => {
                    details.push(detail(&peer.address, &peer.mspid, message.clone()));
                    if !retry {
                        return Err(rpc_error(
                            code,
                            format!("evaluate call to endorser returned error: {message}"),
                            &details,
                        ));
                    }
                    last = code;
                }
            }
        }
        Err(rpc_error(last, "failed to evaluate transaction, see attached details for more info", &details))
    }
}
