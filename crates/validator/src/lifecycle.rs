//! Chaincode definitions as `_lifecycle` stores them in the public state (Fabric's
//! `core/chaincode/lifecycle/{lifecycle.go, serializer.go, deployedcc_infoprovider.go}`):
//! `namespaces/metadata/<name>` holds a `lifecycle.StateMetadata` whose datatype is `ChaincodeDefinition`, and
//! `namespaces/fields/<name>/<Field>` a `lifecycle.StateData` per field (`ValidationInfo`, `Collections`, ...).
//!
//! [`definition`] is public so that other validators of the same blocks (the BMac host, `ferrofabric-bmac`) read the
//! definitions exactly as this crate does.

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::{
    msp_principal::Classification, msp_role::MspRoleType, signature_policy, MspPrincipal, MspRole, SignaturePolicy,
    SignaturePolicyEnvelope,
};
use ferrofabric_protos::lifecycle::{
    state_data, ChaincodeEndorsementInfo, ChaincodeValidationInfo, StateData, StateMetadata,
};
use ferrofabric_protos::peer::{application_policy, collection_config, ApplicationPolicy, CollectionConfigPackage};
use ferrofabric_protoutil::lifecycle::{field_key, implicit_collection_org, metadata_key, NAMESPACES};
use ferrofabric_state::{StateKey, StateView};
use prost::Message;

/// The `_lifecycle` namespace.
pub use ferrofabric_protoutil::lifecycle::LIFECYCLE_NAMESPACE as LIFECYCLE;
const LIFECYCLE_ENDORSEMENT: &str = "/Channel/Application/LifecycleEndorsement";

/// What validation needs of a chaincode definition.
#[derive(Clone, Debug, PartialEq)]
pub struct Definition {
    /// Validation plugin name (only `vscc` is built in).
    pub plugin: String,
    /// Marshaled `ApplicationPolicy`: the chaincode endorsement policy.
    pub policy: Bytes,
    /// The collection configuration, if any.
    pub collections: Option<CollectionConfigPackage>,
}

/// Looks up the definition of `name` in the committed `_lifecycle` state `view` (Fabric's
/// `ValidatorCommitter.ValidationInfo`). `_lifecycle` itself is defined by the channel `config`: plugin `vscc`, the
/// channel's `LifecycleEndorsement` policy (or a majority of the application organisations). `Ok(None)`: not defined. `Err`: the state holds something that is not
/// a definition, or a field that does not decode (Fabric: an unexpected error that stops the commit).
pub fn definition(config: &ChannelConfig, view: &StateView<'_>, name: &str) -> Result<Option<Definition>, String> {
    if name == LIFECYCLE {
        return Ok(Some(Definition {
            plugin: "vscc".into(),
            policy: lifecycle_endorsement_policy(config),
            collections: None,
        }));
    }
    let Some(meta) = view.get(&StateKey::public(LIFECYCLE, metadata_key(NAMESPACES, name))) else {
        return Ok(None);
    };
    let meta = StateMetadata::decode(meta.value).map_err(|e| format!("metadata of chaincode {name}: {e}"))?;
    if meta.datatype != "ChaincodeDefinition" {
        return Err(format!("not a chaincode type: {}", meta.datatype));
    }
    let vinfo = field_bytes(view, name, "ValidationInfo")?.unwrap_or_default();
    let vinfo = ChaincodeValidationInfo::decode(vinfo).map_err(|e| format!("ValidationInfo of {name}: {e}"))?;
    let collections = match field_bytes(view, name, "Collections")? {
        Some(b) => Some(CollectionConfigPackage::decode(b).map_err(|e| format!("Collections of {name}: {e}"))?),
        None => None,
    };
    Ok(Some(Definition { plugin: vinfo.validation_plugin, policy: vinfo.validation_parameter, collections }))
}

/// The chaincodes defined in the committed `_lifecycle` state `view`, with the version of each definition, sorted by
/// name (what a peer announces as its chaincodes on the channel, e.g. to discovery). A definition whose
/// `EndorsementInfo` does not decode is listed with an empty version.
pub fn defined_chaincodes(view: &StateView<'_>) -> Vec<(String, String)> {
    let prefix = metadata_key(NAMESPACES, "");
    // Every key with the prefix, which ends in '/': '0' is the byte after '/'.
    let end = format!("{}0", &prefix[..prefix.len() - 1]);
    let mut out: Vec<(String, String)> = view
        .range(LIFECYCLE, prefix.as_bytes(), end.as_bytes())
        .into_iter()
        .filter_map(|(key, _)| {
            let name = std::str::from_utf8(key.key.as_ref()).ok()?.strip_prefix(prefix.as_str())?.to_owned();
            let version = field_bytes(view, &name, "EndorsementInfo")
                .ok()
                .flatten()
                .and_then(|b| ChaincodeEndorsementInfo::decode(b).ok())
                .map(|i| i.version)
                .unwrap_or_default();
            Some((name, version))
        })
        .collect();
    out.sort();
    out
}

fn field_bytes(view: &StateView<'_>, name: &str, field: &str) -> Result<Option<Bytes>, String> {
    let Some(v) = view.get(&StateKey::public(LIFECYCLE, field_key(NAMESPACES, name, field))) else {
        return Ok(None);
    };
    let data = StateData::decode(v.value).map_err(|e| format!("field {field} of {name}: {e}"))?;
    match data.r#type {
        Some(state_data::Type::Bytes(b)) => Ok(Some(b)),
        None => Ok(Some(Bytes::new())),
        Some(_) => Err(format!("field {field} of {name} is not bytes")),
    }
}

/// `_lifecycle`'s own endorsement policy: a reference to `/Channel/Application/LifecycleEndorsement` when the channel
/// defines it, otherwise a majority of the application organisations' members (Fabric's
/// `LifecycleEndorsementPolicyAsBytes`).
fn lifecycle_endorsement_policy(config: &ChannelConfig) -> Bytes {
    if config.policy(LIFECYCLE_ENDORSEMENT).is_some() {
        return policy_reference(LIFECYCLE_ENDORSEMENT);
    }
    let mspids: Vec<String> = config
        .application()
        .map(|a| a.organizations().values().map(|o| o.mspid().to_owned()).collect())
        .unwrap_or_default();
    let n = (mspids.len() / 2 + 1) as i32;
    signed_by_n_members(n, &mspids)
}

fn policy_reference(path: &str) -> Bytes {
    let p = ApplicationPolicy { r#type: Some(application_policy::Type::ChannelConfigPolicyReference(path.into())) };
    Bytes::from(p.encode_to_vec())
}

/// Fabric's `policydsl.SignedByNOutOfGivenRole(n, MEMBER, mspids)` wrapped in an `ApplicationPolicy`.
fn signed_by_n_members(n: i32, mspids: &[String]) -> Bytes {
    let identities = mspids
        .iter()
        .map(|id| MspPrincipal {
            principal_classification: Classification::Role as i32,
            principal: Bytes::from(
                MspRole { msp_identifier: id.clone(), role: MspRoleType::Member as i32 }.encode_to_vec(),
            ),
        })
        .collect();
    let rules = (0..mspids.len() as i32)
        .map(|i| SignaturePolicy { r#type: Some(signature_policy::Type::SignedBy(i)) })
        .collect();
    let env = SignaturePolicyEnvelope {
        version: 0,
        rule: Some(SignaturePolicy {
            r#type: Some(signature_policy::Type::NOutOf(signature_policy::NOutOf { n, rules })),
        }),
        identities,
    };
    let p = ApplicationPolicy { r#type: Some(application_policy::Type::SignaturePolicy(env)) };
    Bytes::from(p.encode_to_vec())
}

/// The endorsement policy of collection `coll` of chaincode `def` (Fabric's `CollectionValidationInfo`):
/// implicit org collections use the org's `Endorsement` policy; static collections their own policy or, without
/// one, the chaincode's. `Err`: no such collection (an endorsement-policy failure in Fabric).
pub(crate) fn collection_policy(config: &ChannelConfig, def: &Definition, coll: &str) -> Result<Bytes, String> {
    if let Some(mspid) = implicit_collection_org(coll) {
        let org = config
            .application()
            .and_then(|a| a.organizations().values().find(|o| o.mspid() == mspid).map(|o| o.name().to_owned()))
            .ok_or_else(|| format!("no org found in channel with MSPID '{mspid}'"))?;
        let path = format!("/Channel/Application/{org}/Endorsement");
        if config.policy(&path).is_some() {
            return Ok(policy_reference(&path));
        }
        return Ok(signed_by_n_members(1, &[mspid.to_owned()]));
    }
    if let Some(pkg) = &def.collections {
        for c in &pkg.config {
            if let Some(collection_config::Payload::StaticCollectionConfig(s)) = &c.payload {
                if s.name == coll {
                    return Ok(match &s.endorsement_policy {
                        Some(p) => Bytes::from(p.encode_to_vec()),
                        None => def.policy.clone(),
                    });
                }
            }
        }
    }
    Err(format!("no such collection '{coll}'"))
}
