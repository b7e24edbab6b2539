//! `ProcessProposal` (Fabric's `core/endorser/endorser.go`).

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_chaincode::{
    endorsement_info, invoke_local, is_collection_member, is_system_chaincode, AllowAll, Chaincode, ChaincodeInstaller,
    Installed, Lifecycle, PackageReference, Registry, TxContext, LIFECYCLE,
};
use ferrofabric_chaincode_support::{ChaincodeInvoker, ChaincodeSupport};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::peer::{
    ChaincodeAction, ChaincodeEvent, ChaincodeId, ChaincodeInterest, Endorsement, ProposalResponse,
    ProposalResponsePayload, Response, SignedProposal,
};
use ferrofabric_protos::rwset::TxPvtReadWriteSet;
use prost::Message;

use crate::acl::ProposalAcl;
use crate::gateway::DaemonLedger;
use crate::proposal::{unpack, UnpackedProposal};
use crate::syscc::{LedgerQuery, CSCC, QSCC};
use crate::Replica;

/// A proposal refused before simulation (undecodable, invalid, forged, replayed or denied by the channel's ACL).
/// Fabric returns these as gRPC errors (status UNKNOWN) rather than as a `ProposalResponse`; the message is
/// Fabric's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Rejected(pub String);

/// An endorsing peer of one channel: checks proposals, simulates them against its [`Replica`] with the installed
/// chaincodes and signs the results with its identity. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Endorser {
    replica: Arc<Replica>,
    signer: Arc<SigningIdentity>,
    registry: Arc<Registry>,
    ledger: Option<Arc<DaemonLedger>>,
    chaincodes: Option<Arc<ChaincodeSupport>>,
}

fn failure(status: i32, message: String) -> ProposalResponse {
    ProposalResponse { response: Some(Response { status, message, payload: Bytes::new() }), ..Default::default() }
}

impl Endorser {
    /// An endorser signing as `signer` (its MSP ID is the peer's organisation), simulating against `replica`,
    /// running the chaincodes of `registry` (plus `_lifecycle`).
    pub fn new(replica: Arc<Replica>, signer: SigningIdentity, registry: Registry) -> Self {
        Endorser { replica, signer: Arc::new(signer), registry: Arc::new(registry), ledger: None, chaincodes: None }
    }

    /// The same endorser running installed chaincode packages through `chaincodes` (and answering `_lifecycle`'s
    /// install functions from its package store). A chaincode compiled into the registry keeps precedence.
    pub fn with_chaincode_support(mut self, chaincodes: Arc<ChaincodeSupport>) -> Self {
        self.chaincodes = Some(chaincodes);
        self
    }

    /// Whether `name` runs as an installed package over the shim protocol (blocking on the chaincode's answers).
    fn is_external(&self, name: &str) -> bool {
        self.chaincodes.is_some() && !is_system_chaincode(name) && self.registry.get(name).is_none()
    }

    /// The same endorser answering `qscc` and `cscc`'s ledger queries from `ledger`'s committed blocks (without
    /// one they answer that no block is readable).
    pub fn with_ledger(mut self, ledger: Arc<DaemonLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The replica this endorser simulates against.
    pub fn replica(&self) -> &Arc<Replica> {
        &self.replica
    }

    /// The committed chaincode definitions of this channel that run an installed package: those whose approval by
    /// this peer's organisation names one (the package an invocation would run; Fabric's `lifecycle.Cache`).
    pub fn package_references(&self) -> Vec<PackageReference> {
        let Some(chaincodes) = &self.chaincodes else { return Vec::new() };
        let ids = chaincodes.package_ids();
        let (config, view) = (self.replica.config(), self.replica.view());
        let channel = self.replica.channel_id();
        let mut out = Vec::new();
        for (name, version) in self.replica.defined_chaincodes() {
            let mut ctx = TxContext::new(&view, channel, "", &name, Bytes::new(), &AllowAll)
                .with_private_state(self.replica.private_state());
            let info = endorsement_info(&mut ctx, &config, self.signer.mspid(), &name, Installed::Packages(&ids));
            if let Ok(Some(package_id)) = info.map(|i| i.package_id) {
                out.push(PackageReference { package_id, channel: channel.to_owned(), name, version });
            }
        }
        out
    }

    /// The marshaled SerializedIdentity this endorser signs with (`Endorsement.endorser`).
    pub fn identity(&self) -> &Bytes {
        self.signer.serialized()
    }

    /// Fabric's `Endorser.ProcessProposal`:
    ///
    /// 1. the proposal decodes (header, chaincode header extension, invocation spec) — else [`Rejected`];
    /// 2. its channel is this endorser's — else a 500 response `channel '<id>' not found`;
    /// 3. header type, epoch, nonce, creator, txid = hex(SHA-256(nonce ‖ creator)), creator known to the channel's
    ///    MSPs, valid, and its signature over the proposal bytes — else [`Rejected`] (`error validating proposal:
    ///    access denied: ...` for identity failures);
    /// 4. the txid is not in a committed block — else [`Rejected`] (`duplicate transaction found ...`);
    /// 5. for user chaincodes the `peer/Propose` ACL (the channel's Writers) — else [`Rejected`];
    /// 6. the chaincode is defined, approved by this org and installed — else a 500 response (`make sure the
    ///    chaincode <name> has been successfully defined on channel <channel> and try again: ...`);
    /// 7. simulation; a chaincode status ≥ 500 gives an unendorsed response with the payload, 400–499 a bare
    ///    response, below 400 the endorsed `ProposalResponse{version 1, response, payload, endorsement, interest}`
    ///    where the payload is `ProposalResponsePayload{proposal_hash, ChaincodeAction}` and the endorsement signs
    ///    payload ‖ endorser identity.
    pub fn process_proposal(&self, signed: &SignedProposal) -> Result<ProposalResponse, Rejected> {
        self.process_unpacked(unpack(signed).map_err(Rejected)?)
    }

    /// [`Endorser::process_proposal`], with the system chaincodes that read the ledger: a proposal for `qscc` or
    /// `cscc` (which may name no channel, as `peer channel list`, `getinfo` and `join` send them) is checked as
    /// Fabric checks a proposal (its txid against the ledger only when it names a channel) and answered from the
    /// committed blocks (see the `syscc` module): unendorsed when it names no channel, as Fabric answers
    /// channel-less invocations, else endorsed, without read-write set or chaincode interest.
    pub async fn process(&self, signed: &SignedProposal) -> Result<ProposalResponse, Rejected> {
        let up = unpack(signed).map_err(Rejected)?;
        let channel_less_lifecycle = up.chaincode_name == LIFECYCLE && up.channel_header.channel_id.is_empty();
        if self.is_external(&up.chaincode_name) {
            let this = self.clone();
            return tokio::task::spawn_blocking(move || this.process_unpacked(up))
                .await
                .map_err(|e| Rejected(format!("chaincode execution failed: {e}")))?;
        }
        if !matches!(up.chaincode_name.as_str(), QSCC | CSCC) && !channel_less_lifecycle {
            return self.process_unpacked(up);
        }
        let channel = up.channel_header.channel_id.clone();
        if !channel.is_empty() && channel != self.replica.channel_id() {
            return Ok(failure(500, format!("channel '{channel}' not found")));
        }
        let config = self.replica.config();
        let invalid = |e: String| Rejected(format!("error validating proposal: {e}"));
        up.validate(config.msp_manager()).map_err(invalid)?;
        let creator = up.signature_header.creator.clone();
        {
            let id = config.msp_manager().deserialize_identity(&creator).map_err(|e| invalid(e.to_string()))?;
            if id.verify(&up.proposal_bytes, &up.signature).is_err() {
                return Err(invalid(up.signature_error(id.mspid())));
            }
        }
        if !channel.is_empty() {
            self.refuse_committed(&up)?;
        }
        let acl = ProposalAcl::of(&config, self.signer.mspid(), &up);
        let response = if channel_less_lifecycle {
            let installer = self.chaincodes.as_deref().map(|c| c as &dyn ChaincodeInstaller);
            let installer_args = up.args.clone();
            invoke_local(installer, &acl, &installer_args, &self.package_references())
        } else {
            let query = LedgerQuery { channel: self.replica.channel_id(), ledger: self.ledger.as_deref(), acl: &acl };
            query.invoke(&up.chaincode_name, &up.args).await
        };
        let chaincode_id =
            ChaincodeId { name: up.chaincode_name.clone(), version: "syscc".into(), path: String::new() };
        let action =
            ChaincodeAction { response: Some(response), chaincode_id: Some(chaincode_id), ..Default::default() };
        Ok(self.respond(&up, action, None, None, channel.is_empty()))
    }

    /// Fabric's check of a proposal's txid against the ledger: a transaction already committed is refused.
    fn refuse_committed(&self, up: &UnpackedProposal) -> Result<(), Rejected> {
        let tx_id = &up.channel_header.tx_id;
        if self.replica.contains_txid(tx_id) {
            return Err(Rejected(format!(
                "duplicate transaction found [{tx_id}]. Creator [{}]",
                hex::encode(&up.signature_header.creator)
            )));
        }
        Ok(())
    }

    fn process_unpacked(&self, up: UnpackedProposal) -> Result<ProposalResponse, Rejected> {
        let channel = up.channel_header.channel_id.clone();
        if channel != self.replica.channel_id() {
            return Ok(failure(500, format!("channel '{channel}' not found")));
        }
        // Configuration and txids first, the state view last: the replica's lock order (see `Replica`).
        let config = self.replica.config();
        let invalid = |e: String| Rejected(format!("error validating proposal: {e}"));
        up.validate(config.msp_manager()).map_err(invalid)?;
        let tx_id = up.channel_header.tx_id.clone();
        let creator = up.signature_header.creator.clone();
        let mspid = self.signer.mspid().to_owned();
        let acl = ProposalAcl::of(&config, &mspid, &up);
        let name = up.chaincode_name.as_str();
        // Fabric verifies the creator's signature, then looks for the txid in the ledger, then checks the channel's
        // `peer/Propose` ACL (user chaincodes only). The ACL evaluation verifies the same signature, so it runs
        // first and its verification is reused; the errors keep Fabric's precedence.
        let (propose_acl, signature_ok) = if is_system_chaincode(name) {
            let id = config.msp_manager().deserialize_identity(&creator).map_err(|e| invalid(e.to_string()))?;
            (Ok(()), id.verify(&up.proposal_bytes, &up.signature).is_ok())
        } else {
            acl.check_propose()
        };
        if !signature_ok {
            let id = config.msp_manager().deserialize_identity(&creator).map_err(|e| invalid(e.to_string()))?;
            return Err(invalid(up.signature_error(id.mspid())));
        }
        self.refuse_committed(&up)?;
        propose_acl.map_err(Rejected)?;

        let view = self.replica.view();
        let signed = SignedProposal { proposal_bytes: up.proposal_bytes.clone(), signature: up.signature.clone() };
        let mut ctx = TxContext::new(&view, &channel, &tx_id, name, creator.clone(), &acl).with_proposal(signed);
        if let Some(history) = self.replica.history() {
            ctx = ctx.with_history(history);
        }
        ctx = ctx.with_private_state(self.replica.private_state());
        let installed = self.registry.get(name).cloned();
        let package_ids = match (&installed, &self.chaincodes) {
            (None, Some(c)) => Some(c.package_ids()),
            _ => None,
        };
        let source = match &package_ids {
            Some(ids) => Installed::Packages(ids),
            None => Installed::Builtin(installed.is_some()),
        };
        let info = match endorsement_info(&mut ctx, &config, &mspid, name, source) {
            Ok(i) => i,
            Err(e) => {
                return Ok(failure(
                    500,
                    format!(
                        "make sure the chaincode {name} has been successfully defined on channel {channel} and try again: {e}"
                    ),
                ))
            }
        };
        // `_lifecycle` is a system chaincode: no definition of its own to initialise.
        let is_init = match name {
            LIFECYCLE => false,
            _ => match info.check_invocation(&mut ctx, name, up.is_init) {
                Ok(is_init) => is_init,
                Err(e) => {
                    return Ok(failure(500, format!("failed to execute transaction {tx_id}: invalid invocation: {e}")))
                }
            },
        };
        let mut shim_event = None;
        let response = match (name, installed, &info.package_id, &self.chaincodes) {
            (LIFECYCLE, _, _, _) => {
                let mut lifecycle = Lifecycle::new(&mspid, config.clone());
                if let Some(c) = &self.chaincodes {
                    lifecycle = lifecycle.with_installer(c.clone());
                }
                lifecycle.invoke(&mut ctx, &up.args)
            }
            (_, Some(cc), _, _) => cc.invoke(&mut ctx, &up.args),
            (_, None, Some(package_id), Some(chaincodes)) => {
                let invoker = Nested { endorser: self, outer: name, config: &config, mspid: &mspid };
                match chaincodes.execute(package_id, &mut ctx, &up.args, is_init, &invoker) {
                    Ok((response, event)) => {
                        shim_event =
                            event.map(|e| ChaincodeEvent { chaincode_id: name.to_owned(), tx_id: tx_id.clone(), ..e });
                        response
                    }
                    Err(e) => return Ok(failure(500, e.to_string())),
                }
            }
            // endorsement_info already refused chaincodes that are not installed.
            _ => return Ok(failure(500, format!("chaincode {name} is not installed"))),
        };
        let sim = ctx.finish();
        // The private write set of a response this peer endorses waits for its block (Fabric's transient store),
        // for the collections this peer's organisation may keep.
        if let (Some(private), true) = (&sim.private, response.status < ferrofabric_chaincode::ERROR_THRESHOLD) {
            let mut probe = TxContext::new(&view, &channel, &tx_id, name, creator.clone(), &acl);
            if let Some(eligible) =
                eligible_private_set(private, |ns, coll| is_collection_member(&mut probe, ns, coll, &mspid))
            {
                self.replica.persist_private(&tx_id, &eligible);
            }
        }
        drop(view);

        // A failed invocation carries no event (Fabric's callChaincode drops it).
        let event = shim_event.or(sim.event.clone());
        let events = match (&event, response.status < ferrofabric_chaincode::ERROR_THRESHOLD) {
            (Some(e), true) => Bytes::from(e.encode_to_vec()),
            _ => Bytes::new(),
        };
        let action = ChaincodeAction {
            results: sim.results,
            events,
            response: Some(response),
            chaincode_id: Some(ChaincodeId { name: name.to_owned(), version: info.version, path: String::new() }),
        };
        Ok(self.respond(&up, action, Some(sim.interest), Some(&info.endorsement_plugin), false))
    }

    /// The `ProposalResponse` of a simulated `action` (Fabric's `ProcessProposalSuccessfullyOrError`): a status
    /// ≥ 500 gives an unendorsed response with the payload (and `interest`), 400–499 a bare response, and so does a
    /// proposal that names no channel (`channel_less`); below 400 the response endorsed with the plugin `plugin`
    /// (only Fabric's built-in `escc` exists; `None`: a system chaincode, always `escc`), whose payload is
    /// `ProposalResponsePayload{proposal_hash, action}` and whose endorsement signs payload ‖ endorser identity.
    fn respond(
        &self,
        up: &UnpackedProposal,
        action: ChaincodeAction,
        interest: Option<ChaincodeInterest>,
        plugin: Option<&str>,
        channel_less: bool,
    ) -> ProposalResponse {
        let response = action.response.clone().unwrap_or_default();
        let payload = proposal_response_payload(up, &action);
        if response.status >= ferrofabric_chaincode::ERROR {
            return ProposalResponse { response: Some(response), payload, interest, ..Default::default() };
        }
        if response.status >= ferrofabric_chaincode::ERROR_THRESHOLD || channel_less {
            return ProposalResponse { response: Some(response), ..Default::default() };
        }
        if let Some(plugin) = plugin.filter(|p| *p != "escc") {
            return failure(500, format!("endorsing with plugin failed: plugin with name {plugin} wasn't found"));
        }
        let endorsement = endorse(&self.signer, &payload);
        ProposalResponse {
            version: 1,
            timestamp: None,
            response: Some(response),
            payload,
            endorsement: Some(endorsement),
            interest,
        }
    }
}

/// The marshaled `ProposalResponsePayload{proposal_hash, extension: action}` of a response to `up`.
pub(crate) fn proposal_response_payload(up: &UnpackedProposal, action: &ChaincodeAction) -> Bytes {
    let payload = ProposalResponsePayload {
        proposal_hash: up.proposal_hash.clone(),
        extension: Bytes::from(action.encode_to_vec()),
    };
    Bytes::from(payload.encode_to_vec())
}

/// The collections of a marshaled `TxPvtReadWriteSet` that `eligible(namespace, collection)` accepts, marshaled;
/// `None` when none is left (or the set does not decode).
fn eligible_private_set(private: &Bytes, mut eligible: impl FnMut(&str, &str) -> bool) -> Option<Bytes> {
    let mut set = TxPvtReadWriteSet::decode(private.clone()).ok()?;
    for ns in &mut set.ns_pvt_rwset {
        let namespace = ns.namespace.clone();
        ns.collection_pvt_rwset.retain(|c| eligible(&namespace, &c.collection_name));
    }
    set.ns_pvt_rwset.retain(|ns| !ns.collection_pvt_rwset.is_empty());
    (!set.ns_pvt_rwset.is_empty()).then(|| Bytes::from(set.encode_to_vec()))
}

/// Runs a chaincode called by another on the same channel (INVOKE_CHAINCODE) in the caller's simulation: the
/// callee must be defined, approved by this org and installed, as for a proposal (Fabric's
/// `handler.HandleInvokeChaincode`); system chaincodes cannot be called this way here.
struct Nested<'a> {
    endorser: &'a Endorser,
    /// The chaincode the proposal invoked.
    outer: &'a str,
    config: &'a Arc<ferrofabric_channelconfig::ChannelConfig>,
    mspid: &'a str,
}

impl ChaincodeInvoker for Nested<'_> {
    fn invoke(&self, ctx: &mut TxContext<'_>, name: &str, args: &[Bytes]) -> Result<Response, String> {
        let channel = ctx.channel_id().to_owned();
        let name = name.split_once(':').map_or(name, |(n, _)| n);
        if name.contains('/') {
            return Err(format!(
                "invalid invocation: chaincode {name} on another channel is not supported by this peer"
            ));
        }
        // Fabric's qscc and cscc refuse calls from a chaincode (they check the proposal's chaincode name).
        let outer = self.outer;
        match name {
            QSCC => {
                return Ok(ferrofabric_chaincode::error(format!(
                    "Rejecting invoke of QSCC from another chaincode because of potential for deadlocks, original invocation for '{outer}'"
                )))
            }
            CSCC => {
                return Ok(ferrofabric_chaincode::error(format!(
                    "Rejecting invoke of CSCC from another chaincode, original invocation for '{outer}'"
                )))
            }
            _ if is_system_chaincode(name) => {
                return Err(format!(
                    "invalid invocation: system chaincode {name} cannot be called from a chaincode on this peer"
                ))
            }
            _ => {}
        }
        let builtin = self.endorser.registry.get(name).cloned();
        let package_ids = match (&builtin, &self.endorser.chaincodes) {
            (None, Some(c)) => c.package_ids(),
            _ => Vec::new(),
        };
        let source = if builtin.is_some() { Installed::Builtin(true) } else { Installed::Packages(&package_ids) };
        let info = endorsement_info(ctx, self.config, self.mspid, name, source).map_err(|e| {
            format!("invalid invocation: [channel {channel}] failed to get chaincode container info for {name}: {e}")
        })?;
        ctx.in_namespace(name, |ctx| {
            // A chaincode calls another as a plain invocation (the shims send no `is_init`).
            let is_init = info.check_invocation(ctx, name, false).map_err(|e| format!("invalid invocation: {e}"))?;
            match (builtin, &info.package_id, &self.endorser.chaincodes) {
                (Some(cc), _, _) => Ok(cc.invoke(ctx, args)),
                (None, Some(package_id), Some(chaincodes)) => {
                    chaincodes.execute(package_id, ctx, args, is_init, self).map(|(r, _)| r).map_err(|e| e.to_string())
                }
                _ => Err(format!("chaincode {name} not found")),
            }
        })
    }
}

/// Fabric's built-in `escc`: the endorser's signature over `payload ‖ endorser identity`.
pub fn endorse(signer: &SigningIdentity, payload: &[u8]) -> Endorsement {
    let endorser = signer.serialized().clone();
    let mut msg = Vec::with_capacity(payload.len() + endorser.len());
    msg.extend_from_slice(payload);
    msg.extend_from_slice(&endorser);
    Endorsement { signature: Bytes::from(signer.sign(&msg)), endorser }
}
