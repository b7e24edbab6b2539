//! Access control on a signed proposal (Fabric's `core/aclmgmt`: `defaultaclprovider.go`, `resourceprovider.go`,
//! and `core/policy/policy.go`).
//!
//! * Peer-scoped resources (`_lifecycle/ApproveChaincodeDefinitionForMyOrg`, the install and
//!   approved-definition queries, `cscc/JoinChain`) require an administrator of the peer's own organisation (the
//!   local MSP's `Admins`); `cscc/GetChannels` any member of it (`Members`).
//! * Channel-scoped resources (`peer/Propose`, `_lifecycle/CommitChaincodeDefinition`, `CheckCommitReadiness`,
//!   `QueryChaincodeDefinition(s)`) use the policy the channel's `ACLs` value names, else
//!   `/Channel/Application/Writers`; the ledger queries of `qscc` and `cscc/GetChannelConfig` likewise, else
//!   `/Channel/Application/Readers`.

use bytes::Bytes;
use ferrofabric_chaincode::{Acl, ChaincodeError};

use crate::proposal::UnpackedProposal;
use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_msp::MspManager;
use ferrofabric_protos::common::{msp_principal::Classification, msp_role::MspRoleType, MspPrincipal, MspRole};
use prost::Message;

const CHANNEL_WRITERS: &str = "/Channel/Application/Writers";
const CHANNEL_READERS: &str = "/Channel/Application/Readers";

const PEER_ADMIN_RESOURCES: &[&str] = &[
    "_lifecycle/InstallChaincode",
    "_lifecycle/QueryInstalledChaincode",
    "_lifecycle/GetInstalledChaincodePackage",
    "_lifecycle/QueryInstalledChaincodes",
    "_lifecycle/ApproveChaincodeDefinitionForMyOrg",
    "_lifecycle/QueryApprovedChaincodeDefinition",
    "cscc/JoinChain",
];

/// Peer-scoped resources any member of the peer's own organisation may use (the local MSP's `Members`).
const PEER_MEMBER_RESOURCES: &[&str] = &["cscc/GetChannels"];

/// Channel-scoped resources whose default policy is the channel's Readers (Fabric's `defaultaclprovider.go`).
const CHANNEL_READER_RESOURCES: &[&str] = &[
    "qscc/GetChainInfo",
    "qscc/GetBlockByNumber",
    "qscc/GetBlockByHash",
    "qscc/GetTransactionByID",
    "qscc/GetBlockByTxID",
    "cscc/GetConfigBlock",
    "cscc/GetChannelConfig",
];

const CHANNEL_WRITER_RESOURCES: &[&str] = &[
    "_lifecycle/CommitChaincodeDefinition",
    "_lifecycle/QueryChaincodeDefinition",
    "_lifecycle/QueryChaincodeDefinitions",
    "_lifecycle/CheckCommitReadiness",
    "peer/Propose",
    "peer/ChaincodeToChaincode",
];

/// The ACL of one signed proposal, for a peer of `org_mspid`: peer-scoped resources are checked against the peer's
/// local MSP (`local`), channel-scoped ones against the channel's configuration (`config`; `None` for a proposal
/// that names no channel, which may use peer-scoped resources only).
pub(crate) struct ProposalAcl<'a> {
    pub config: Option<&'a ChannelConfig>,
    pub local: &'a MspManager,
    pub org_mspid: &'a str,
    pub proposal_bytes: &'a Bytes,
    pub signature: &'a Bytes,
    pub creator: &'a Bytes,
}

impl<'a> ProposalAcl<'a> {
    /// The ACL of proposal `up` on `config`'s channel, for a peer of `org_mspid`.
    /// The channel's MSPs stand for the local MSP: they hold the peer's organisation with the same roots.
    pub(crate) fn of(config: &'a ChannelConfig, org_mspid: &'a str, up: &'a UnpackedProposal) -> Self {
        ProposalAcl {
            config: Some(config),
            local: config.msp_manager(),
            org_mspid,
            proposal_bytes: &up.proposal_bytes,
            signature: &up.signature,
            creator: &up.signature_header.creator,
        }
    }

    /// The ACL of proposal `up`, which names no channel, for a peer of `org_mspid` whose local MSP is `local`.
    pub(crate) fn channel_less(local: &'a MspManager, org_mspid: &'a str, up: &'a UnpackedProposal) -> Self {
        ProposalAcl {
            config: None,
            local,
            org_mspid,
            proposal_bytes: &up.proposal_bytes,
            signature: &up.signature,
            creator: &up.signature_header.creator,
        }
    }

    /// Evaluates the policy at `path` on the proposal's signature. Also returns whether that signature verifies:
    /// the evaluation usually had to verify it already, so the endorser's own check of the creator's signature
    /// reuses the result instead of verifying a second time.
    fn evaluate_and_verify(&self, path: &str) -> (Result<(), String>, bool) {
        let Some(config) = self.config else {
            return (Err(format!("no channel to evaluate the policy '{path}' on")), false);
        };
        let item = SignedData {
            data: self.proposal_bytes.clone(),
            identity: self.creator.clone(),
            signature: self.signature.clone(),
        };
        let set = SignatureSet::new(vec![item], config.msp_manager());
        let result = match config.policy(path) {
            Some(policy) => policy.evaluate(&set).map_err(|e| e.to_string()),
            None => Err(format!("no such policy: '{path}'")),
        };
        // A single item of a deserialisable identity is accepted exactly when its signature verifies.
        (result, set.is_accepted(0))
    }

    fn evaluate(&self, path: &str) -> Result<(), String> {
        self.evaluate_and_verify(path).0
    }

    /// The `peer/Propose` check of a user-chaincode proposal, and whether the proposal's signature verifies.
    pub(crate) fn check_propose(&self) -> (Result<(), String>, bool) {
        let resource = "peer/Propose";
        if let Some(path) = self.config.and_then(|c| c.application()).and_then(|a| a.acl_policy(resource)) {
            let (r, ok) = self.evaluate_and_verify(path);
            return (
                r.map_err(|e| format!("failed evaluating policy on signed data during check policy [{path}]: [{e}]")),
                ok,
            );
        }
        let (r, ok) = self.evaluate_and_verify(CHANNEL_WRITERS);
        (r.map_err(|e| self.default_error(CHANNEL_WRITERS, &e)), ok)
    }

    fn default_error(&self, policy: &str, e: &str) -> String {
        format!(
            "Failed evaluating policy on signed data during check policy on channel [{}] with policy [{policy}]: [{e}]",
            self.config.map_or("", |c| c.channel_id())
        )
    }

    /// The local MSP's `Admins` (`MEMBER` false) or `Members` check (Fabric's `CheckPolicyNoChannel`): the creator
    /// must be of this peer's MSP, hold the ADMIN (or MEMBER) role, and have signed the proposal.
    fn local(&self, role: MspRoleType) -> Result<(), String> {
        let policy = if role == MspRoleType::Admin { "Admins" } else { "Members" };
        let what = format!("during channelless check policy with policy [{policy}]");
        let msps = self.local;
        let id = msps
            .deserialize_identity(self.creator)
            .map_err(|e| format!("Failed deserializing proposal creator {what}: [{e}]"))?;
        if id.mspid() != self.org_mspid {
            return Err(format!(
                "Failed deserializing proposal creator {what}: [expected MSP ID {}, received {}]",
                self.org_mspid,
                id.mspid()
            ));
        }
        let principal = MspPrincipal {
            principal_classification: Classification::Role as i32,
            principal: Bytes::from(
                MspRole { msp_identifier: self.org_mspid.to_owned(), role: role as i32 }.encode_to_vec(),
            ),
        };
        msps.satisfies_principal(&id, &principal).map_err(|e| {
            format!("Failed verifying that proposal's creator satisfies local MSP principal {what}: [{e}]")
        })?;
        id.verify(self.proposal_bytes, self.signature).map_err(|e| e.to_string())
    }
}

impl Acl for ProposalAcl<'_> {
    fn check(&self, resource: &str) -> Result<(), ChaincodeError> {
        self.check_resource(resource).map_err(ChaincodeError::AccessDenied)
    }
}

impl ProposalAcl<'_> {
    /// [`Acl::check`] with Fabric's reason as text.
    fn check_resource(&self, resource: &str) -> Result<(), String> {
        if PEER_ADMIN_RESOURCES.contains(&resource) {
            return self.local(MspRoleType::Admin);
        }
        if PEER_MEMBER_RESOURCES.contains(&resource) {
            return self.local(MspRoleType::Member);
        }
        if let Some(path) = self.config.and_then(|c| c.application()).and_then(|a| a.acl_policy(resource)) {
            return self
                .evaluate(path)
                .map_err(|e| format!("failed evaluating policy on signed data during check policy [{path}]: [{e}]"));
        }
        let policy = if CHANNEL_WRITER_RESOURCES.contains(&resource) {
            CHANNEL_WRITERS
        } else if CHANNEL_READER_RESOURCES.contains(&resource) {
            CHANNEL_READERS
        } else {
            return Err(format!("Unmapped policy for {resource}"));
        };
        self.evaluate(policy).map_err(|e| self.default_error(policy, &e))
    }
}
