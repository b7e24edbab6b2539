//! The Endorser of a peer of many channels ([`PeerEndorser`]), as Fabric's one `Endorser` serves every channel
//! the peer has joined (`core/endorser/endorser.go`, `core/peer/peer.go`): a proposal that names a channel goes to
//! that channel's [`Endorser`]; a proposal that names none is the peer's own business — `cscc` JoinChain and
//! GetChannels (`core/scc/cscc/configure.go`), `_lifecycle`'s install functions — checked against the peer's local
//! MSP, or, for `qscc` and `cscc/GetChannelConfig`, which name their channel in an argument, that channel's.

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_chaincode::{invoke_local, ChaincodeInstaller, LIFECYCLE};
use ferrofabric_chaincode_support::ChaincodeSupport;
use ferrofabric_msp::{MspManager, SigningIdentity};
use ferrofabric_protos::common::Block;
use ferrofabric_protos::peer::{
    ChaincodeAction, ChaincodeId, ChannelInfo, ChannelQueryResponse, ProposalResponse, Response, SignedProposal,
};
use prost::Message;

use crate::acl::ProposalAcl;
use crate::endorser::{proposal_response_payload, Rejected};
use crate::proposal::{unpack, UnpackedProposal};
use crate::syscc::{error, join_request, success, CSCC, QSCC};
use crate::Endorser;

/// The channels of a peer, as its Endorser sees them.
#[tonic::async_trait]
pub trait PeerChannels: Send + Sync + 'static {
    /// The IDs of the channels the peer has joined, in name order.
    fn channel_ids(&self) -> Vec<String>;

    /// The endorser of `channel` (`None`: not joined). A peer answers a proposal from state that holds every block
    /// it has committed, so an implementation may wait, bounded, for the endorser's replica to catch up.
    async fn endorser(&self, channel: &str) -> Option<Endorser>;

    /// Creates `channel` from its genesis `block` and starts it (Fabric's `Peer.CreateChannel`); returns once the
    /// ledger is created, the blocks after it are pulled in the background.
    ///
    /// Errors: Fabric's message, e.g. `cannot create ledger from genesis block: ledger [mychannel] already exists
    /// with state [ACTIVE]`.
    async fn join(&self, channel: &str, block: Block) -> Result<(), String>;
}

/// The `protos.Endorser` of a peer of many channels (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct PeerEndorser {
    local: Arc<MspManager>,
    signer: Arc<SigningIdentity>,
    chaincodes: Option<Arc<ChaincodeSupport>>,
    channels: Arc<dyn PeerChannels>,
}

impl PeerEndorser {
    /// The Endorser of a peer whose local MSP is `local`, signing as `signer`, installing chaincode packages with
    /// `chaincodes` (`None`: `_lifecycle`'s install functions answer that nothing can be installed).
    pub fn new(
        local: Arc<MspManager>,
        signer: Arc<SigningIdentity>,
        chaincodes: Option<Arc<ChaincodeSupport>>,
        channels: Arc<dyn PeerChannels>,
    ) -> PeerEndorser {
        PeerEndorser { local, signer, chaincodes, channels }
    }

    /// Fabric's `ProcessProposal` on a peer: by the channel the proposal names, else by the peer itself.
    ///
    /// Errors: [`Rejected`] — an undecodable proposal, or one whose creator is not of the peer's local MSP or whose
    /// signature does not verify (`error validating proposal: access denied: ...`).
    pub async fn process(&self, signed: &SignedProposal) -> Result<ProposalResponse, Rejected> {
        let up = unpack(signed).map_err(Rejected)?;
        let channel = up.channel_header.channel_id.clone();
        let named = match up.chaincode_name.as_str() {
            _ if !channel.is_empty() => Some(channel.clone()),
            // `peer channel getinfo` and `fetch` name the channel in qscc's and cscc's arguments only.
            QSCC => up.args.get(1).map(|c| String::from_utf8_lossy(c).into_owned()),
            CSCC if up.args.first().is_some_and(|f| f.as_ref() == b"GetChannelConfig") => {
                up.args.get(1).map(|c| String::from_utf8_lossy(c).into_owned())
            }
            _ => None,
        };
        if let Some(named) = named {
            return match self.channels.endorser(&named).await {
                Some(endorser) => endorser.process(signed).await,
                None if !channel.is_empty() => Ok(failure(format!("channel '{channel}' not found"))),
                None => self.unknown_channel(&up, &named),
            };
        }
        self.channel_less(up).await
    }

    /// A `qscc` or `cscc/GetChannelConfig` proposal naming a channel this peer has not joined, answered as
    /// Fabric's system chaincodes answer when the channel's ledger is missing (after the same argument checks).
    fn unknown_channel(&self, up: &UnpackedProposal, named: &str) -> Result<ProposalResponse, Rejected> {
        self.verify(up)?;
        let function = up.args.first().map(|f| String::from_utf8_lossy(f).into_owned()).unwrap_or_default();
        let response = if up.chaincode_name == QSCC {
            if function != "GetChainInfo" && up.args.len() < 3 {
                error(format!("missing 3rd argument for {function}"))
            } else {
                error(format!("Invalid chain ID, {named}"))
            }
        } else if named.is_empty() {
            error("empty channel name provided".to_owned())
        } else {
            error(format!(
                "access denied for [{function}][{named}]: Failed to get policy manager for channel [{named}]"
            ))
        };
        Ok(self.unendorsed(up, response))
    }

    /// The creator is of the local MSP's organisation and signed the proposal (Fabric checks channel-less
    /// proposals against the local MSP).
    fn verify(&self, up: &UnpackedProposal) -> Result<(), Rejected> {
        let invalid = |e: String| Rejected(format!("error validating proposal: {e}"));
        up.validate(&self.local).map_err(invalid)?;
        let id = self.local.deserialize_identity(&up.signature_header.creator).map_err(|e| invalid(e.to_string()))?;
        if id.verify(&up.proposal_bytes, &up.signature).is_err() {
            return Err(invalid(up.signature_error(id.mspid())));
        }
        Ok(())
    }

    async fn channel_less(&self, up: UnpackedProposal) -> Result<ProposalResponse, Rejected> {
        let name = up.chaincode_name.as_str();
        if !matches!(name, CSCC | LIFECYCLE) {
            // A user chaincode needs a channel; so do the other system chaincodes.
            return Ok(failure("channel '' not found".to_owned()));
        }
        self.verify(&up)?;
        // What a package's references name: the committed definitions running it, on every joined channel.
        let mut references = Vec::new();
        if name == LIFECYCLE && up.args.first().is_some_and(|f| f.starts_with(b"QueryInstalledChaincode")) {
            for channel in self.channels.channel_ids() {
                if let Some(endorser) = self.channels.endorser(&channel).await {
                    references.extend(endorser.package_references());
                }
            }
        }
        let acl = ProposalAcl::channel_less(&self.local, self.signer.mspid(), &up);
        let response = if name == LIFECYCLE {
            let installer = self.chaincodes.as_deref().map(|c| c as &dyn ChaincodeInstaller);
            invoke_local(installer, &acl, &up.args, &references)
        } else {
            self.cscc(&acl, &up.args).await
        };
        Ok(self.unendorsed(&up, response))
    }

    /// `cscc`'s channel-less functions: JoinChain and GetChannels.
    async fn cscc(&self, acl: &ProposalAcl<'_>, args: &[Bytes]) -> Response {
        let Some(function) = args.first().map(|f| String::from_utf8_lossy(f).into_owned()) else {
            return error("Incorrect number of arguments, 0".to_owned());
        };
        if function != "GetChannels" && args.len() < 2 {
            return error(format!("Incorrect number of arguments, {}", args.len()));
        }
        match function.as_str() {
            "JoinChain" => {
                let (channel, block) = match join_request(&args[1], acl) {
                    Ok(r) => r,
                    Err(response) => return response,
                };
                match self.channels.join(&channel, block).await {
                    Ok(()) => success(Vec::new()),
                    Err(e) => error(e),
                }
            }
            "GetChannels" => {
                if let Err(e) = ferrofabric_chaincode::Acl::check(acl, "cscc/GetChannels") {
                    return error(format!("access denied for [{function}]: {e}"));
                }
                let channels =
                    self.channels.channel_ids().into_iter().map(|channel_id| ChannelInfo { channel_id }).collect();
                success(ChannelQueryResponse { channels }.encode_to_vec())
            }
            _ => error(format!("Requested function {function} not found.")),
        }
    }

    /// Fabric's answer to a channel-less invocation: below 500 the response alone, from 500 on with the
    /// `ProposalResponsePayload` too (of chaincode version `syscc`), never endorsed.
    fn unendorsed(&self, up: &UnpackedProposal, response: Response) -> ProposalResponse {
        if response.status < ferrofabric_chaincode::ERROR {
            return ProposalResponse { response: Some(response), ..Default::default() };
        }
        let chaincode_id =
            ChaincodeId { name: up.chaincode_name.clone(), version: "syscc".into(), path: String::new() };
        let action = ChaincodeAction {
            response: Some(response.clone()),
            chaincode_id: Some(chaincode_id),
            ..Default::default()
        };
        let payload = proposal_response_payload(up, &action);
        ProposalResponse { response: Some(response), payload, ..Default::default() }
    }
}

fn failure(message: String) -> ProposalResponse {
    ProposalResponse { response: Some(Response { status: 500, message, payload: Bytes::new() }), ..Default::default() }
}

#[tonic::async_trait]
impl ferrofabric_protos::peer::endorser_server::Endorser for PeerEndorser {
    async fn process_proposal(
        &self,
        request: tonic::Request<SignedProposal>,
    ) -> Result<tonic::Response<ProposalResponse>, tonic::Status> {
        self.process(request.get_ref()).await.map(tonic::Response::new).map_err(|r| tonic::Status::unknown(r.0))
    }
}
