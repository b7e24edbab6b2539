//! `_lifecycle` CommitChaincodeDefinition transactions, with the state
//! layout of fabric `core/chaincode/lifecycle` (serializer.go: one
//! `namespaces/metadata/<name>` StateMetadata plus one
//! `namespaces/fields/<name>/<Field>` StateData per field; lifecycle.go:
//! which fields a definition has). Checked against the fixture ledger's
//! commits of `smallbank` (block 3) and `transfer` (block 6).

use bytes::Bytes;
use ferrofabric_protos::lifecycle::{
    state_data, ChaincodeEndorsementInfo, ChaincodeValidationInfo, CommitChaincodeDefinitionArgs, StateData,
    StateMetadata,
};
use ferrofabric_protos::peer::{application_policy, ApplicationPolicy, CollectionConfigPackage};
use prost::Message;

use crate::{Built, Network, SigningIdentity, TestkitError, TxBuilder};
use ferrofabric_protoutil::lifecycle::{field_key, implicit_collection, metadata_key, LIFECYCLE_NAMESPACE, NAMESPACES};

/// Default endorsement policy reference of a definition made by the peer
/// CLI without `--signature-policy`/`--channel-config-policy`.
pub const DEFAULT_ENDORSEMENT_POLICY: &str = "/Channel/Application/Endorsement";

/// Everything a committed chaincode definition records, plus the versions
/// the commit transaction read.
#[derive(Clone, Debug)]
pub struct ChaincodeDefinition {
    /// Chaincode name (the namespace it writes).
    pub name: String,
    /// Definition sequence, 1 for the first definition.
    pub sequence: i64,
    /// Chaincode version label (default `1.0`).
    pub version: String,
    /// Endorsement plugin (default `escc`).
    pub endorsement_plugin: String,
    /// Validation plugin (default `vscc`).
    pub validation_plugin: String,
    /// Whether `Init` must be invoked first.
    pub init_required: bool,
    /// Endorsement policy; stored marshaled as the validation parameter.
    pub policy: ApplicationPolicy,
    /// Private data collections (default: none).
    pub collections: CollectionConfigPackage,
    /// Version `(block, tx)` of the previous definition's commit, read back by
    /// the commit for `Sequence` and metadata; `None` for sequence 1.
    pub previous: Option<(u64, u64)>,
    /// Per approving org (MSP ID, version of its approval tx): hashed reads of
    /// the approval in `_implicit_org_<MSPID>`. Empty = no hashed reads, which
    /// keeps the commit valid on a ledger without approval transactions.
    pub approvals: Vec<(String, (u64, u64))>,
}

impl ChaincodeDefinition {
    /// A definition with the peer CLI's defaults (version `1.0`, `escc`,
    /// `vscc`, no collections, no init) and no previous definition/approvals.
    pub fn new(name: &str, sequence: i64, policy: ApplicationPolicy) -> Self {
        ChaincodeDefinition {
            name: name.to_string(),
            sequence,
            version: "1.0".to_string(),
            endorsement_plugin: "escc".to_string(),
            validation_plugin: "vscc".to_string(),
            init_required: false,
            policy,
            collections: CollectionConfigPackage::default(),
            previous: None,
            approvals: Vec::new(),
        }
    }
}

/// `ApplicationPolicy{channel_config_policy_reference: path}`, e.g. for
/// [`DEFAULT_ENDORSEMENT_POLICY`].
pub fn channel_policy_reference(path: &str) -> ApplicationPolicy {
    ApplicationPolicy { r#type: Some(application_policy::Type::ChannelConfigPolicyReference(path.to_string())) }
}

fn state_bytes(b: Vec<u8>) -> Vec<u8> {
    StateData { r#type: Some(state_data::Type::Bytes(Bytes::from(b))) }.encode_to_vec()
}

/// The five public `_lifecycle` writes of a committed definition, as
/// `(key, value)` in key order.
pub fn definition_writes(def: &ChaincodeDefinition) -> Vec<(String, Vec<u8>)> {
    let name = &def.name;
    let endorsement = ChaincodeEndorsementInfo {
        version: def.version.clone(),
        init_required: def.init_required,
        endorsement_plugin: def.endorsement_plugin.clone(),
    };
    let validation = ChaincodeValidationInfo {
        validation_plugin: def.validation_plugin.clone(),
        validation_parameter: Bytes::from(def.policy.encode_to_vec()),
    };
    let sequence = StateData { r#type: Some(state_data::Type::Int64(def.sequence)) };
    let metadata = StateMetadata {
        datatype: "ChaincodeDefinition".to_string(),
        fields: ["Sequence", "EndorsementInfo", "ValidationInfo", "Collections"].map(String::from).to_vec(),
    };
    vec![
        (field_key(NAMESPACES, name, "Collections"), state_bytes(def.collections.encode_to_vec())),
        (field_key(NAMESPACES, name, "EndorsementInfo"), state_bytes(endorsement.encode_to_vec())),
        (field_key(NAMESPACES, name, "Sequence"), sequence.encode_to_vec()),
        (field_key(NAMESPACES, name, "ValidationInfo"), state_bytes(validation.encode_to_vec())),
        (metadata_key(NAMESPACES, name), metadata.encode_to_vec()),
    ]
}

/// A `_lifecycle` CommitChaincodeDefinition transaction for `def`: creator
/// `Admin@org1`, endorsed by every peer org's peer (LifecycleEndorsement = MAJORITY
/// Endorsement), chaincode id `_lifecycle`/`syscc`. Read set: the
/// definition's `Sequence` and metadata keys at `def.previous`, the approval
/// hashed reads, and `lscc` key `<name>` (absent); write set:
/// [`definition_writes`].
///
/// Errors: as [`TxBuilder::build`].
pub fn commit_definition(net: &Network, def: &ChaincodeDefinition) -> Result<Built, TestkitError> {
    commit_definition_with(TxBuilder::new(net), net, def)
}

/// [`commit_definition`] starting from a preset builder (nonce, timestamp).
pub(crate) fn commit_definition_with<'a>(
    base: TxBuilder<'a>,
    net: &'a Network,
    def: &ChaincodeDefinition,
) -> Result<Built, TestkitError> {
    let name = &def.name;
    let args = CommitChaincodeDefinitionArgs {
        sequence: def.sequence,
        name: name.clone(),
        version: def.version.clone(),
        ..Default::default()
    };
    // Every peer org endorses, so the channel's `LifecycleEndorsement` (MAJORITY by default) holds whatever the size.
    let peers: Vec<&SigningIdentity> = (0..net.peer_orgs()).map(|o| net.peer(o)).collect();
    let mut b = base
        .chaincode(LIFECYCLE_NAMESPACE, "syscc")
        .creator(net.admin(0))
        .endorsers(&peers)
        .args([b"CommitChaincodeDefinition".to_vec(), args.encode_to_vec()])
        .read(LIFECYCLE_NAMESPACE, &field_key(NAMESPACES, name, "Sequence"), def.previous)
        .read(LIFECYCLE_NAMESPACE, &metadata_key(NAMESPACES, name), def.previous)
        .read("lscc", name, None);
    for (key, value) in definition_writes(def) {
        b = b.write(LIFECYCLE_NAMESPACE, &key, value);
    }
    // Each org's approval lives in its implicit collection under the
    // definition name suffixed with `#<sequence>`.
    let seq = def.sequence;
    for (mspid, v) in &def.approvals {
        let coll = implicit_collection(mspid);
        for field in ["Collections", "EndorsementInfo", "ValidationInfo"] {
            b = b.hashed_read(
                LIFECYCLE_NAMESPACE,
                &coll,
                &field_key(NAMESPACES, &format!("{name}#{seq}"), field),
                Some(*v),
            );
        }
        b = b.hashed_read(LIFECYCLE_NAMESPACE, &coll, &metadata_key(NAMESPACES, &format!("{name}#{seq}")), Some(*v));
    }
    b.build()
}

/// Shorthand for [`commit_definition`] of
/// [`ChaincodeDefinition::new`]`(name, sequence, policy)`.
///
/// Errors: as [`TxBuilder::build`].
pub fn define_chaincode(
    net: &Network,
    name: &str,
    sequence: i64,
    policy: ApplicationPolicy,
) -> Result<Built, TestkitError> {
    commit_definition(net, &ChaincodeDefinition::new(name, sequence, policy))
}
