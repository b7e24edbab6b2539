//! The `_lifecycle` system chaincode functions that define chaincodes on a channel, with Fabric's state layout and
//! read/write pattern (`core/chaincode/lifecycle/{scc.go, lifecycle.go, serializer.go, endorsement_info.go,
//! deployedcc_infoprovider.go}`).
//!
//! State layout (namespace `_lifecycle`): a structure named `<name>` is stored as one `StateMetadata{datatype,
//! fields}` under `<prefix>/metadata/<name>` and one `StateData` per field under `<prefix>/fields/<name>/<Field>`.
//! A committed definition is a `ChaincodeDefinition` (Sequence, EndorsementInfo, ValidationInfo, Collections) under
//! prefix `namespaces` in public state; an organisation's approval is a `ChaincodeParameters` (EndorsementInfo,
//! ValidationInfo, Collections) under `namespaces/.../<name>#<sequence>` plus a `ChaincodeLocalPackage` (PackageID)
//! under `chaincode-sources/...` in its implicit collection `_implicit_org_<MSPID>`.
//!
//! Private data: Ferrofabric keeps only the hashed state of collections (as every Fabric peer does for collections it
//! is not a member of). Approvals are therefore checked by comparing value hashes, exactly as Fabric's
//! `Serializer.IsSerialized` does; where Fabric would read an approval's private value (re-approving), the hash is
//! compared with the value the approval would have. `QueryApprovedChaincodeDefinition` and the install functions
//! need private values or packages and are refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_channelconfig::{compile_signature_policy, ChannelConfig};
use ferrofabric_protos::common::{msp_principal::Classification, signature_policy, MspRole, OrganizationUnit};
use ferrofabric_protos::lifecycle::{
    chaincode_source, query_chaincode_definitions_result, query_installed_chaincode_result,
    query_installed_chaincodes_result, state_data, ApproveChaincodeDefinitionForMyOrgArgs, ChaincodeEndorsementInfo,
    ChaincodeSource, ChaincodeValidationInfo, CheckCommitReadinessArgs, CommitChaincodeDefinitionArgs,
    GetInstalledChaincodePackageArgs, GetInstalledChaincodePackageResult, InstallChaincodeArgs, InstallChaincodeResult,
    QueryApprovedChaincodeDefinitionArgs, QueryApprovedChaincodeDefinitionResult, QueryChaincodeDefinitionArgs,
    QueryChaincodeDefinitionResult, QueryChaincodeDefinitionsArgs, QueryChaincodeDefinitionsResult,
    QueryInstalledChaincodeArgs, QueryInstalledChaincodeResult, QueryInstalledChaincodesArgs,
    QueryInstalledChaincodesResult, StateData, StateMetadata,
};
use ferrofabric_protos::peer::{application_policy, collection_config, ApplicationPolicy, CollectionConfigPackage};
use ferrofabric_protoutil::lifecycle::{
    field_key, implicit_collection, implicit_collection_org, metadata_key, CHAINCODE_SOURCES, NAMESPACES,
};
use prost::Message;

use crate::error::ChaincodeError;
use crate::rwset::sha256;
use crate::{error, success, Chaincode, Response, TxContext};

/// The namespace (and chaincode name) of the lifecycle system chaincode.
pub use ferrofabric_protoutil::lifecycle::LIFECYCLE_NAMESPACE as LIFECYCLE;

const DEFAULT_ENDORSEMENT_POLICY: &str = "/Channel/Application/Endorsement";
const DEFINITION_TYPE: &str = "ChaincodeDefinition";
const PARAMETERS_TYPE: &str = "ChaincodeParameters";
const LOCAL_PACKAGE_TYPE: &str = "ChaincodeLocalPackage";
/// The chaincode version Fabric reports for system chaincodes (`scc.SysCCVersion`).
const SYSCC_VERSION: &str = "syscc";

/// What the endorser needs of a chaincode's committed definition (Fabric's `lifecycle.ChaincodeEndorsementInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndorsementInfo {
    /// The definition's version label, written into `ChaincodeAction.chaincode_id.version` (`syscc` for
    /// `_lifecycle`).
    pub version: String,
    /// The endorsement plugin (only `escc` is built in).
    pub endorsement_plugin: String,
    /// Whether the definition requires `Init` first.
    pub init_required: bool,
    /// The installed package this org approved for the definition (`None` for built-in chaincodes and
    /// `_lifecycle`).
    pub package_id: Option<String>,
}

/// The key under which a chaincode's namespace records the definition version it was initialised for (Fabric's
/// `InitializedKeyName`: NUL, U+10FFFF, `initialized`), beyond any key a chaincode may write.
const INITIALIZED_KEY: &str = "\u{0}\u{10FFFF}initialized";

impl EndorsementInfo {
    /// Fabric's `ChaincodeSupport.CheckInvocation` (`core/chaincode/chaincode_support.go`) for an invocation of
    /// chaincode `name` inside `ctx` (its namespace current), the proposal's `ChaincodeInput.is_init` being
    /// `is_init`: whether it runs as INIT. A definition that requires initialisation is initialised for its version
    /// when the chaincode's namespace holds that version under Fabric's initialised key (the read is recorded); an
    /// INIT writes it there.
    ///
    /// Errors (Fabric's texts, which the caller prefixes with `invalid invocation: `): an init call of a chaincode
    /// that needs none, or a plain call of one not initialised for this version.
    pub fn check_invocation(&self, ctx: &mut TxContext<'_>, name: &str, is_init: bool) -> Result<bool, ChaincodeError> {
        let needs_init = self.init_required && {
            let initialized = ctx.get_state(INITIALIZED_KEY);
            initialized.as_deref() != Some(self.version.as_bytes())
        };
        match (needs_init, is_init) {
            (false, false) => Ok(false),
            (false, true) => Err(ChaincodeError::InitNotRequired(name.to_owned())),
            (true, false) => Err(ChaincodeError::NotInitialized(name.to_owned())),
            (true, true) => {
                let namespace = ctx.namespace().to_owned();
                ctx.put_state_in(&namespace, INITIALIZED_KEY, Bytes::from(self.version.clone().into_bytes()));
                Ok(true)
            }
        }
    }
}

/// Where the endorser would run a user chaincode from.
#[derive(Debug, Clone, Copy)]
pub enum Installed<'a> {
    /// Compiled into the peer (or not: `false`).
    Builtin(bool),
    /// From the installed packages with these IDs: the one this org approved for the definition runs.
    Packages(&'a [String]),
}

/// An installed chaincode package as `_lifecycle` reports it (Fabric's `chaincode.InstalledChaincode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledChaincode {
    /// `label:hex(SHA-256(package))`.
    pub package_id: String,
    /// The package's label.
    pub label: String,
}

/// A committed chaincode definition that runs an installed package: one of the package's references, which
/// `QueryInstalledChaincode(s)` lists by channel (Fabric's `lifecycle.Cache`: the definition is committed and this
/// peer's organisation approved the package for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageReference {
    /// The installed package.
    pub package_id: String,
    /// The channel of the definition.
    pub channel: String,
    /// The chaincode's name.
    pub name: String,
    /// The definition's version.
    pub version: String,
}

/// The peer's chaincode package store behind `_lifecycle`'s install functions (Fabric's `ChaincodeStore`,
/// `ChaincodeBuilder` and `InstalledChaincodesLister`). Errors are Fabric's texts, which `_lifecycle` prefixes
/// with `failed to invoke backing implementation of '<function>': `.
pub trait ChaincodeInstaller: Send + Sync {
    /// Parses, stores and prepares a package (`InstallChaincode`).
    fn install(&self, package: &[u8]) -> Result<InstalledChaincode, String>;
    /// Every installed package, by package ID (`QueryInstalledChaincodes`).
    fn installed(&self) -> Vec<InstalledChaincode>;
    /// The bytes of an installed package (`GetInstalledChaincodePackage`).
    fn package(&self, package_id: &str) -> Result<Bytes, String>;
}

/// Fabric's `ChaincodeEndorsementInfoSource.ChaincodeEndorsementInfo`, run inside the transaction's simulation: for
/// a user chaincode it reads (and records) `namespaces/fields/<name>/Sequence`, then checks against the committed
/// state that the definition exists, that `org_mspid`'s approval of it is committed (by hash, in the org's implicit
/// collection), and that the chaincode is `installed`.
///
/// Errors (Fabric's messages): not defined (`chaincode <name> not found`, after the recorded `lscc` read), not
/// approved by this org, not installed, unreadable definition, channel without the V2_0 lifecycle.
pub fn endorsement_info(
    ctx: &mut TxContext<'_>,
    config: &ChannelConfig,
    org_mspid: &str,
    name: &str,
    installed: Installed<'_>,
) -> Result<EndorsementInfo, ChaincodeError> {
    if name == LIFECYCLE {
        return Ok(EndorsementInfo {
            version: SYSCC_VERSION.into(),
            endorsement_plugin: "escc".into(),
            init_required: false,
            package_id: None,
        });
    }
    if crate::is_system_chaincode(name) {
        return Err(ChaincodeError::SystemChaincode(name.to_owned()));
    }
    if !lifecycle_v20(config) {
        return Err(ChaincodeError::NoV20Lifecycle(name.to_owned()));
    }
    let channel = ctx.channel_id().to_owned();
    let seq = read_int64(ctx, Src::Public { record: true }, NAMESPACES, name, "Sequence")
        .map_err(|detail| ChaincodeError::Sequence { name: name.to_owned(), channel: channel.clone(), detail })?;
    if seq == 0 {
        // Fabric then asks the legacy lifecycle, which reads lscc/<name> through the same simulator.
        return match ctx.get_state_in("lscc", name) {
            None => Err(ChaincodeError::NotFound(name.to_owned())),
            Some(_) => Err(ChaincodeError::LegacyChaincode(name.to_owned())),
        };
    }
    let def = match read_definition(ctx, false, name) {
        Ok(Some(d)) => d,
        Ok(None) => return Err(ChaincodeError::UnknownDefinition { name: name.to_owned(), channel }),
        Err(e) => return Err(ChaincodeError::Definition(e)),
    };
    if def.sequence != seq {
        return Err(ChaincodeError::SequenceChanged { cached: def.sequence, current: seq, name: name.to_owned() });
    }
    let coll = implicit_collection(org_mspid);
    if !is_serialized(ctx, &Src::Private { coll: &coll, record: false }, &format!("{name}#{seq}"), &def.params.fields())
    {
        return Err(ChaincodeError::NotApproved { name: name.to_owned(), sequence: seq, channel });
    }
    let package_id = match installed {
        Installed::Builtin(true) => None,
        Installed::Builtin(false) => return Err(ChaincodeError::NotInstalled(name.to_owned())),
        Installed::Packages(ids) => Some(
            approved_package(ctx, &coll, &format!("{name}#{seq}"), ids)
                .ok_or_else(|| ChaincodeError::NotInstalled(name.to_owned()))?,
        ),
    };
    Ok(EndorsementInfo {
        version: def.params.endorsement.version.clone(),
        endorsement_plugin: def.params.endorsement.endorsement_plugin.clone(),
        init_required: def.params.endorsement.init_required,
        package_id,
    })
}

/// Fabric's check that a chaincode's private-data call names a collection of its definition (`collNameValidator`
/// in `txmgr/collection_val.go`): the committed definition of `namespace` is read through the simulation (its reads
/// recorded, as Fabric's query executor records them), and `collection` must be one of its collections or an
/// organisation's implicit collection.
///
/// Errors: `collection <channel>/<namespace>/<collection> could not be found`, or why the definition is unreadable.
pub fn check_collection(ctx: &mut TxContext<'_>, namespace: &str, collection: &str) -> Result<(), ChaincodeError> {
    let def = read_definition(ctx, true, namespace).map_err(ChaincodeError::UnreadableDefinition)?;
    let explicit = def.as_ref().is_some_and(|d| {
        d.params.collections.config.iter().any(|c| match &c.payload {
            Some(collection_config::Payload::StaticCollectionConfig(s)) => s.name == collection,
            None => false,
        })
    });
    if explicit || (def.is_some() && implicit_collection_org(collection).is_some()) {
        return Ok(());
    }
    Err(ChaincodeError::CollectionNotFound {
        channel: ctx.channel_id().to_owned(),
        namespace: namespace.to_owned(),
        collection: collection.to_owned(),
    })
}

/// Whether a peer of `mspid` is eligible to keep the private data of `collection` of chaincode `namespace` (the
/// org's own implicit collection, or an explicit collection of the committed definition whose member-orgs policy
/// names the org; Fabric's `CollectionAccessPolicy.AccessFilter` applied to the peer, `gossip/privdata`). Reads the
/// committed state without recording.
pub fn is_collection_member(ctx: &mut TxContext<'_>, namespace: &str, collection: &str, mspid: &str) -> bool {
    if let Some(org) = implicit_collection_org(collection) {
        return org == mspid;
    }
    let Ok(Some(def)) = read_definition(ctx, false, namespace) else { return false };
    def.params.collections.config.iter().any(|c| match &c.payload {
        Some(collection_config::Payload::StaticCollectionConfig(s)) if s.name == collection => {
            match s.member_orgs_policy.as_ref().and_then(|p| p.payload.as_ref()) {
                Some(ferrofabric_protos::peer::collection_policy_config::Payload::SignaturePolicy(env)) => {
                    env.identities.iter().any(|p| match Classification::try_from(p.principal_classification) {
                        Ok(Classification::Role) => {
                            MspRole::decode(p.principal.clone()).is_ok_and(|r| r.msp_identifier == mspid)
                        }
                        Ok(Classification::OrganizationUnit) => {
                            OrganizationUnit::decode(p.principal.clone()).is_ok_and(|o| o.msp_identifier == mspid)
                        }
                        _ => false,
                    })
                }
                None => false,
            }
        }
        _ => false,
    })
}

/// Which of `candidates` the org approved as the package of `private_name` (`<name>#<sequence>`): the one whose
/// `ChaincodeLocalPackage` serialization the org's implicit collection holds (by hash, unrecorded, as the peer's
/// cache reads it).
fn approved_package(ctx: &mut TxContext<'_>, coll: &str, private_name: &str, candidates: &[String]) -> Option<String> {
    let src = Src::Private { coll, record: false };
    let stored = read(ctx, &src, &field_key(CHAINCODE_SOURCES, private_name, "PackageID"))?;
    candidates.iter().find(|id| !id.is_empty() && holds(&src, &stored, &state_string(id))).cloned()
}

/// The `_lifecycle` chaincode as run by a peer of organisation `org_mspid` on a channel with configuration `config`.
/// Implements `ApproveChaincodeDefinitionForMyOrg`, `CheckCommitReadiness`, `CommitChaincodeDefinition`,
/// `QueryChaincodeDefinition` and `QueryChaincodeDefinitions`; arguments are `[function, marshaled <Function>Args]`
/// and a success payload is the marshaled `<Function>Result` (map fields with keys in order).
#[derive(Clone)]
pub struct Lifecycle {
    org_mspid: String,
    config: Arc<ChannelConfig>,
    installer: Option<Arc<dyn ChaincodeInstaller>>,
}

impl Lifecycle {
    /// The lifecycle of a peer of `org_mspid` on the channel configured by `config`.
    pub fn new(org_mspid: &str, config: Arc<ChannelConfig>) -> Self {
        Lifecycle { org_mspid: org_mspid.to_owned(), config, installer: None }
    }

    /// The same lifecycle answering the install functions from `installer` (without one they are refused).
    pub fn with_installer(mut self, installer: Arc<dyn ChaincodeInstaller>) -> Self {
        self.installer = Some(installer);
        self
    }
}

/// `_lifecycle` invoked by a proposal that names no channel, as `peer lifecycle chaincode install`,
/// `queryinstalled` and `getinstalledpackage` send it: the peer-local functions only, with `acl` deciding access
/// (the local MSP's admins). Any other function fails as Fabric's does without a channel.
///
/// `references` are the committed definitions that run installed packages, on every channel of the peer.
pub fn invoke_local(
    installer: Option<&dyn ChaincodeInstaller>,
    acl: &dyn crate::Acl,
    args: &[Bytes],
    references: &[PackageReference],
) -> Response {
    if args.len() != 2 {
        return error(format!("lifecycle scc operations require exactly two arguments but received {}", args.len()));
    }
    let function = String::from_utf8_lossy(&args[0]).into_owned();
    if let Err(e) = acl.check(&format!("{LIFECYCLE}/{function}")) {
        return error(format!("Failed to authorize invocation due to failed ACL check: {e}"));
    }
    match local_function(installer, &function, args[1].clone(), references) {
        Some(result) => respond(&function, result),
        None => error(format!("failed to invoke backing implementation of '{function}': no channel given")),
    }
}

/// `InstallChaincode`, `QueryInstalledChaincode(s)` and `GetInstalledChaincodePackage`: peer-local functions that
/// need no channel (Fabric's `SCCFunctions` of the same names); `None` for any other function.
fn local_function(
    installer: Option<&dyn ChaincodeInstaller>,
    function: &str,
    input: Bytes,
    references: &[PackageReference],
) -> Option<LcResult<Bytes>> {
    // A package's references by channel, each channel's chaincodes once.
    let by_channel = |package_id: &str| {
        let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for r in references.iter().filter(|r| r.package_id == package_id) {
            let chaincodes = out.entry(r.channel.clone()).or_default();
            if !chaincodes.iter().any(|(n, _)| *n == r.name) {
                chaincodes.push((r.name.clone(), r.version.clone()));
            }
        }
        out
    };
    {
        let installer = || {
            installer.ok_or_else(|| {
                LcError::Failed("this peer has no chaincode package store (peer.fileSystemPath)".to_owned())
            })
        };
        let out = match function {
            "InstallChaincode" => decode::<InstallChaincodeArgs>(function, input).and_then(|a| {
                let i = installer()?.install(&a.chaincode_install_package)?;
                Ok(InstallChaincodeResult { package_id: i.package_id, label: i.label }.encode_to_vec())
            }),
            "QueryInstalledChaincode" => decode::<QueryInstalledChaincodeArgs>(function, input).and_then(|a| {
                let i = installer()?
                    .installed()
                    .into_iter()
                    .find(|i| i.package_id == a.package_id)
                    .ok_or_else(|| format!("could not find chaincode with package id '{}'", a.package_id))?;
                let references = by_channel(&i.package_id)
                    .into_iter()
                    .map(|(channel, chaincodes)| {
                        let chaincodes = chaincodes
                            .into_iter()
                            .map(|(name, version)| query_installed_chaincode_result::Chaincode { name, version })
                            .collect();
                        (channel, query_installed_chaincode_result::References { chaincodes })
                    })
                    .collect();
                Ok(QueryInstalledChaincodeResult { package_id: i.package_id, label: i.label, references }
                    .encode_to_vec())
            }),
            "QueryInstalledChaincodes" => decode::<QueryInstalledChaincodesArgs>(function, input).and_then(|_| {
                let installed_chaincodes = installer()?
                    .installed()
                    .into_iter()
                    .map(|i| {
                        let references = by_channel(&i.package_id)
                            .into_iter()
                            .map(|(channel, chaincodes)| {
                                let chaincodes = chaincodes
                                    .into_iter()
                                    .map(|(name, version)| query_installed_chaincodes_result::Chaincode {
                                        name,
                                        version,
                                    })
                                    .collect();
                                (channel, query_installed_chaincodes_result::References { chaincodes })
                            })
                            .collect();
                        query_installed_chaincodes_result::InstalledChaincode {
                            package_id: i.package_id,
                            label: i.label,
                            references,
                        }
                    })
                    .collect();
                Ok(QueryInstalledChaincodesResult { installed_chaincodes }.encode_to_vec())
            }),
            "GetInstalledChaincodePackage" => {
                decode::<GetInstalledChaincodePackageArgs>(function, input).and_then(|a| {
                    let pkg = installer()?
                        .package(&a.package_id)
                        .map_err(|e| format!("could not load cc install package: {e}"))?;
                    Ok(GetInstalledChaincodePackageResult { chaincode_install_package: pkg }.encode_to_vec())
                })
            }
            _ => return None,
        };
        Some(out.map(Bytes::from))
    }
}

/// Why a lifecycle function failed: Fabric answers 404 for an undefined namespace, 500 otherwise.
enum LcError {
    NotDefined(String),
    Failed(String),
}

impl From<String> for LcError {
    fn from(s: String) -> Self {
        LcError::Failed(s)
    }
}

type LcResult<T> = Result<T, LcError>;

fn with(context: impl std::fmt::Display) -> impl FnOnce(String) -> String {
    move |e| format!("{context}: {e}")
}

impl Chaincode for Lifecycle {
    fn invoke(&self, ctx: &mut TxContext<'_>, args: &[Bytes]) -> Response {
        if args.is_empty() {
            return error("lifecycle scc must be invoked with arguments");
        }
        if args.len() != 2 {
            return error(format!(
                "lifecycle scc operations require exactly two arguments but received {}",
                args.len()
            ));
        }
        let function = String::from_utf8_lossy(&args[0]).into_owned();
        if let Err(e) = ctx.check_acl(&format!("{LIFECYCLE}/{function}")) {
            return error(format!("Failed to authorize invocation due to failed ACL check: {e}"));
        }
        // Named on a channel, the peer-local functions list no references (the CLI names none for them).
        if let Some(result) = local_function(self.installer.as_deref(), &function, args[1].clone(), &[]) {
            return respond(&function, result);
        }
        let channel = ctx.channel_id().to_owned();
        let config = &self.config;
        if config.application().is_none() {
            return error(format!("could not get application config for channel '{channel}'"));
        }
        if !lifecycle_v20(config) {
            return error(format!(
                "cannot use new lifecycle for channel '{channel}' as it does not have the required capabilities enabled"
            ));
        }
        let input = args[1].clone();
        let result = match function.as_str() {
            "ApproveChaincodeDefinitionForMyOrg" => decode(&function, input).and_then(|a| self.approve(ctx, a)),
            "CheckCommitReadiness" => decode(&function, input).and_then(|a| self.check_commit_readiness(ctx, a)),
            "CommitChaincodeDefinition" => decode(&function, input).and_then(|a| self.commit(ctx, a)),
            "QueryChaincodeDefinition" => decode(&function, input).and_then(|a| self.query_definition(ctx, a)),
            "QueryChaincodeDefinitions" => decode(&function, input).and_then(|a| self.query_definitions(ctx, a)),
            "QueryApprovedChaincodeDefinition" => decode(&function, input).and_then(|a| self.query_approved(ctx, a)),
            _ => Err(LcError::Failed(format!("receiver *lifecycle.Invocation.{function} does not exist"))),
        };
        respond(&function, result)
    }
}

/// The `Response` of a lifecycle function: its marshaled result, 404 for an undefined namespace, else 500 with
/// Fabric's prefix.
fn respond(function: &str, result: LcResult<Bytes>) -> Response {
    match result {
        Ok(out) => success(out),
        Err(LcError::NotDefined(ns)) => {
            Response { status: 404, message: format!("namespace {ns} is not defined"), payload: Bytes::new() }
        }
        Err(LcError::Failed(e)) => error(format!("failed to invoke backing implementation of '{function}': {e}")),
    }
}

fn decode<M: Message + Default>(function: &str, input: Bytes) -> LcResult<M> {
    M::decode(input)
        .map_err(|e| LcError::Failed(format!("could not decode input arg for *lifecycle.Invocation.{function}: {e}")))
}

fn lifecycle_v20(config: &ChannelConfig) -> bool {
    let caps = config.capabilities();
    ["V2_0", "V2_5"].iter().any(|c| caps.application.contains(*c))
}

// ---- serialization ----------------------------------------------------------------------------------------------

/// Where a structure is stored: `_lifecycle`'s public state, or an organisation's implicit collection (hashes
/// only). `record`: whether reads go into the transaction's read set (reads through the simulator) or not (reads
/// by the peer's caches).
enum Src<'s> {
    Public {
        record: bool,
    },
    Private {
        coll: &'s str,
        record: bool,
    },
    /// The values of this peer's own organisation's implicit collection, which it holds when it endorsed the
    /// approvals (reads recorded as hashed reads).
    OwnPrivate {
        coll: &'s str,
    },
}

/// The stored bytes at `key`: the value for public state, the value hash for a collection.
fn read(ctx: &mut TxContext<'_>, src: &Src<'_>, key: &str) -> Option<Bytes> {
    match src {
        Src::Public { record: true } => ctx.get_state_in(LIFECYCLE, key),
        Src::Public { record: false } => ctx.committed(LIFECYCLE, key),
        Src::Private { coll, record: true } => ctx.read_private_in(LIFECYCLE, coll, key),
        Src::Private { coll, record: false } => ctx.committed_hashed(LIFECYCLE, coll, key),
        Src::OwnPrivate { coll } => ctx.get_private_data_in(LIFECYCLE, coll, key).ok().flatten(),
    }
}

/// Whether stored bytes (value or hash, see [`read`]) hold `value`.
fn holds(src: &Src<'_>, stored: &Bytes, value: &[u8]) -> bool {
    match src {
        Src::Public { .. } | Src::OwnPrivate { .. } => stored.as_ref() == value,
        Src::Private { .. } => stored.as_ref() == sha256(value).as_ref(),
    }
}

fn write(ctx: &mut TxContext<'_>, src: &Src<'_>, key: &str, value: Bytes) {
    match src {
        Src::Public { .. } => ctx.put_state_in(LIFECYCLE, key, value),
        Src::Private { coll, .. } | Src::OwnPrivate { coll } => ctx.put_private_data_in(LIFECYCLE, coll, key, value),
    }
}

fn state_int64(v: i64) -> Vec<u8> {
    StateData { r#type: Some(state_data::Type::Int64(v)) }.encode_to_vec()
}

fn state_bytes(b: Vec<u8>) -> Vec<u8> {
    StateData { r#type: Some(state_data::Type::Bytes(Bytes::from(b))) }.encode_to_vec()
}

fn state_string(s: &str) -> Vec<u8> {
    StateData { r#type: Some(state_data::Type::String(s.to_owned())) }.encode_to_vec()
}

/// A structure as Fabric's serializer sees it: its Go type name and its fields (name, marshaled `StateData`) in
/// declaration order.
struct Fields {
    type_name: &'static str,
    fields: Vec<(&'static str, Vec<u8>)>,
}

impl Fields {
    fn metadata(&self) -> StateMetadata {
        StateMetadata {
            datatype: self.type_name.to_owned(),
            fields: self.fields.iter().map(|(f, _)| (*f).to_owned()).collect(),
        }
    }
}

/// `ChaincodeParameters` (an approval) and, with a sequence, `ChaincodeDefinition`.
#[derive(Clone, Debug, PartialEq)]
struct Params {
    endorsement: ChaincodeEndorsementInfo,
    validation: ChaincodeValidationInfo,
    collections: CollectionConfigPackage,
}

impl Params {
    fn fields(&self) -> Fields {
        Fields {
            type_name: PARAMETERS_TYPE,
            fields: vec![
                ("EndorsementInfo", state_bytes(self.endorsement.encode_to_vec())),
                ("ValidationInfo", state_bytes(self.validation.encode_to_vec())),
                ("Collections", state_bytes(self.collections.encode_to_vec())),
            ],
        }
    }

    /// Fabric's `ChaincodeParameters.Equal`, with its messages.
    fn equal(&self, other: &Params) -> Result<(), String> {
        let (a, b) = (self, other);
        if a.endorsement.version != b.endorsement.version {
            return Err(format!(
                "expected Version '{}' does not match passed Version '{}'",
                a.endorsement.version, b.endorsement.version
            ));
        }
        if a.endorsement.endorsement_plugin != b.endorsement.endorsement_plugin {
            return Err(format!(
                "expected EndorsementPlugin '{}' does not match passed EndorsementPlugin '{}'",
                a.endorsement.endorsement_plugin, b.endorsement.endorsement_plugin
            ));
        }
        if a.endorsement.init_required != b.endorsement.init_required {
            return Err(format!(
                "expected InitRequired '{}' does not match passed InitRequired '{}'",
                a.endorsement.init_required, b.endorsement.init_required
            ));
        }
        if a.validation.validation_plugin != b.validation.validation_plugin {
            return Err(format!(
                "expected ValidationPlugin '{}' does not match passed ValidationPlugin '{}'",
                a.validation.validation_plugin, b.validation.validation_plugin
            ));
        }
        if a.validation.validation_parameter != b.validation.validation_parameter {
            return Err(format!(
                "expected ValidationParameter '{}' does not match passed ValidationParameter '{}'",
                hex::encode(&a.validation.validation_parameter),
                hex::encode(&b.validation.validation_parameter)
            ));
        }
        if a.collections != b.collections {
            return Err("Collections do not match".into());
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Definition {
    sequence: i64,
    params: Params,
}

impl Definition {
    fn fields(&self) -> Fields {
        let mut f = self.params.fields();
        f.type_name = DEFINITION_TYPE;
        f.fields.insert(0, ("Sequence", state_int64(self.sequence)));
        f
    }
}

fn local_package_fields(package_id: &str) -> Fields {
    Fields { type_name: LOCAL_PACKAGE_TYPE, fields: vec![("PackageID", state_string(package_id))] }
}

/// Fabric's `DeserializeMetadata`. For a collection only the hash is known: the metadata is recognised if it is
/// `expected`'s, and reported as unreadable otherwise.
fn read_metadata(
    ctx: &mut TxContext<'_>,
    src: &Src<'_>,
    prefix: &str,
    name: &str,
    expected: &StateMetadata,
) -> Result<Option<StateMetadata>, String> {
    let Some(stored) = read(ctx, src, &metadata_key(prefix, name)) else { return Ok(None) };
    match src {
        Src::Public { .. } | Src::OwnPrivate { .. } => StateMetadata::decode(stored)
            .map(Some)
            .map_err(|e| format!("could not unmarshal metadata for namespace {prefix}/{name}: {e}")),
        Src::Private { .. } => {
            if holds(src, &stored, &expected.encode_to_vec()) {
                Ok(Some(expected.clone()))
            } else {
                Err(format!(
                    "metadata for namespace {prefix}/{name} is not a {} (only its hash is kept)",
                    expected.datatype
                ))
            }
        }
    }
}

/// Fabric's `DeserializeFieldAsInt64` (absent = 0) on public state.
fn read_int64(ctx: &mut TxContext<'_>, src: Src<'_>, prefix: &str, name: &str, field: &str) -> Result<i64, String> {
    let key = field_key(prefix, name, field);
    let stored = read(ctx, &src, &key).unwrap_or_default();
    let data = StateData::decode(stored).map_err(|e| format!("could not unmarshal state for key {key}: {e}"))?;
    match data.r#type {
        None => Ok(0),
        Some(state_data::Type::Int64(v)) => Ok(v),
        Some(other) => Err(format!(
            "expected key {prefix}/fields/{name}/{field} to encode a value of type Int64, but was {}",
            type_label(&other)
        )),
    }
}

fn type_label(t: &state_data::Type) -> &'static str {
    match t {
        state_data::Type::Int64(_) => "*lifecycle.StateData_Int64",
        state_data::Type::Bytes(_) => "*lifecycle.StateData_Bytes",
        state_data::Type::String(_) => "*lifecycle.StateData_String_",
    }
}

/// Fabric's `DeserializeFieldAsProto` on public state (absent = empty message).
fn read_proto<M: Message + Default>(
    ctx: &mut TxContext<'_>,
    src: &Src<'_>,
    name: &str,
    field: &str,
) -> Result<M, String> {
    read_proto_in(ctx, src, NAMESPACES, name, field)
}

/// [`read_proto`] under `prefix`.
fn read_proto_in<M: Message + Default>(
    ctx: &mut TxContext<'_>,
    src: &Src<'_>,
    prefix: &str,
    name: &str,
    field: &str,
) -> Result<M, String> {
    let key = field_key(prefix, name, field);
    let stored = read(ctx, src, &key).unwrap_or_default();
    let data = StateData::decode(stored).map_err(|e| format!("could not unmarshal state for key {key}: {e}"))?;
    let bytes = match data.r#type {
        None => Bytes::new(),
        Some(state_data::Type::Bytes(b)) => b,
        Some(other) => {
            return Err(format!("expected key {key} to encode a value of type []byte, but was {}", type_label(&other)))
        }
    };
    M::decode(bytes).map_err(|e| format!("could not unmarshal key {key}: {e}"))
}

/// Fabric's `Resources.ChaincodeDefinitionIfDefined` / `QueryChaincodeDefinition` on public state: the metadata,
/// then every field of a `ChaincodeDefinition`.
fn read_definition(ctx: &mut TxContext<'_>, record: bool, name: &str) -> Result<Option<Definition>, String> {
    let src = Src::Public { record };
    let expected = StateMetadata::default();
    let Some(meta) = read_metadata(ctx, &src, NAMESPACES, name, &expected)? else { return Ok(None) };
    if meta.datatype != DEFINITION_TYPE {
        return Err(format!("not a chaincode type: {}", meta.datatype));
    }
    let sequence = read_int64(ctx, Src::Public { record }, NAMESPACES, name, "Sequence")?;
    let endorsement = read_proto(ctx, &src, name, "EndorsementInfo")?;
    let validation = read_proto(ctx, &src, name, "ValidationInfo")?;
    let collections = read_proto(ctx, &src, name, "Collections")?;
    Ok(Some(Definition { sequence, params: Params { endorsement, validation, collections } }))
}

/// Fabric's `Serializer.Serialize`: reads the current metadata and the fields it lists, writes every field whose
/// stored value differs, rewrites the metadata if the type or field list changed, deletes fields no longer listed.
fn serialize(ctx: &mut TxContext<'_>, src: &Src<'_>, prefix: &str, name: &str, s: &Fields) -> Result<(), String> {
    let expected = s.metadata();
    let meta = read_metadata(ctx, src, prefix, name, &expected)
        .map_err(with(format!("could not deserialize metadata for namespace {prefix}/{name}")))?
        .unwrap_or_default();
    let mut existing: BTreeMap<String, Option<Bytes>> = BTreeMap::new();
    for f in &meta.fields {
        let key = field_key(prefix, name, f);
        let v = read(ctx, src, &key);
        existing.insert(key, v);
    }
    for (field, value) in &s.fields {
        let key = field_key(prefix, name, field);
        let same = matches!(existing.get(&key), Some(Some(stored)) if holds(src, stored, value));
        if !same {
            write(ctx, src, &key, Bytes::from(value.clone()));
        }
        existing.remove(&key);
    }
    if !existing.is_empty() || meta.datatype != s.type_name || meta.fields.len() != s.fields.len() {
        write(ctx, src, &metadata_key(prefix, name), Bytes::from(expected.encode_to_vec()));
    }
    for key in existing.keys() {
        write(ctx, src, key, Bytes::new());
    }
    Ok(())
}

/// Fabric's `Serializer.IsSerialized` against an opaque (hash-only) collection: reads the metadata and every field
/// hash, then compares them with the hashes `s` would have.
fn is_serialized(ctx: &mut TxContext<'_>, src: &Src<'_>, name: &str, s: &Fields) -> bool {
    let meta_key = metadata_key(NAMESPACES, name);
    let stored_meta = read(ctx, src, &meta_key);
    let stored: Vec<Option<Bytes>> =
        s.fields.iter().map(|(f, _)| read(ctx, src, &field_key(NAMESPACES, name, f))).collect();
    let meta_ok = matches!(&stored_meta, Some(h) if holds(src, h, &s.metadata().encode_to_vec()));
    meta_ok && s.fields.iter().zip(&stored).all(|((_, v), h)| matches!(h, Some(h) if holds(src, h, v)))
}

// ---- the functions ----------------------------------------------------------------------------------------------

fn is_name(s: &str) -> bool {
    // ^[a-zA-Z0-9]+([-_][a-zA-Z0-9]+)*$
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        && !b.windows(2).any(|w| !w[0].is_ascii_alphanumeric() && !w[1].is_ascii_alphanumeric())
}

fn is_version(s: &str) -> bool {
    // ^[A-Za-z0-9_.+-]+$
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"_.+-".contains(&c))
}

fn is_collection_name(s: &str) -> bool {
    // ^[A-Za-z0-9-]+([A-Za-z0-9_-]+)*$
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphanumeric() || b[0] == b'-')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
}

fn or_concatenation(rule: &ferrofabric_protos::common::SignaturePolicy) -> Result<(), String> {
    if let Some(signature_policy::Type::NOutOf(n)) = &rule.r#type {
        if n.n != 1 {
            return Err(format!("signature policy is not an OR concatenation, NOutOf {}", n.n));
        }
        for r in &n.rules {
            or_concatenation(r)?;
        }
    }
    Ok(())
}

impl Lifecycle {
    /// Fabric's `validateCollectionConfigs` for the static collections of a proposed definition.
    fn validate_collections(&self, pkg: &CollectionConfigPackage) -> Result<(), String> {
        let mut names = BTreeMap::new();
        for c in &pkg.config {
            let Some(collection_config::Payload::StaticCollectionConfig(c)) = &c.payload else {
                return Err("collection configuration is empty".into());
            };
            if !is_collection_name(&c.name) {
                return Err(format!("invalid collection name '{}'. Names can only consist of alphanumerics, '_', and '-' and cannot begin with '_'", c.name));
            }
            if names.insert(c.name.clone(), ()).is_some() {
                return Err(format!("collection-name: {} -- found duplicate in collection configuration", c.name));
            }
            if c.maximum_peer_count < c.required_peer_count {
                return Err(format!(
                    "collection-name: {} -- maximum peer count ({}) cannot be less than the required peer count ({})",
                    c.name, c.maximum_peer_count, c.required_peer_count
                ));
            }
            if c.required_peer_count < 0 {
                return Err(format!(
                    "collection-name: {} -- requiredPeerCount ({}) cannot be less than zero",
                    c.name, c.required_peer_count
                ));
            }
            let policy = c
                .member_orgs_policy
                .as_ref()
                .ok_or_else(|| format!("collection member policy is not set for collection '{}'", c.name))?;
            let Some(ferrofabric_protos::peer::collection_policy_config::Payload::SignaturePolicy(env)) =
                &policy.payload
            else {
                return Err(format!("collection member org policy is empty for collection '{}'", c.name));
            };
            compile_signature_policy(env)
                .map_err(|e| format!("invalid member org policy for collection '{}': {e}", c.name))?;
            if let Some(rule) = &env.rule {
                or_concatenation(rule)
                    .map_err(with(format!("collection-name: {} -- error in member org policy", c.name)))?;
            }
            let msps = self.config.msp_manager();
            for p in &env.identities {
                let member = match Classification::try_from(p.principal_classification) {
                    Ok(Classification::Role) => MspRole::decode(p.principal.clone()).ok().map(|r| r.msp_identifier),
                    Ok(Classification::OrganizationUnit) => {
                        OrganizationUnit::decode(p.principal.clone()).ok().map(|o| o.msp_identifier)
                    }
                    Ok(Classification::Identity) => {
                        if msps.deserialize_identity(&p.principal).is_err() {
                            return Err(format!(
                                "collection-name: {} -- contains an identity that is not part of the channel",
                                c.name
                            ));
                        }
                        continue;
                    }
                    _ => {
                        return Err(format!(
                            "collection-name: {} -- principal type {} is not supported",
                            c.name, p.principal_classification
                        ))
                    }
                };
                let Some(mspid) = member else {
                    return Err(format!("collection-name: {} -- cannot unmarshal the principal", c.name));
                };
                if msps.msp(&mspid).is_none() {
                    return Err(format!(
                        "collection-name: {} -- collection member '{mspid}' is not part of the channel",
                        c.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// Fabric's `Invocation.validateInput`: name and version syntax, collections, and (recorded reads) the committed
    /// definition — or, when there is none, the legacy `lscc` entry.
    fn validate_input(
        &self,
        ctx: &mut TxContext<'_>,
        name: &str,
        version: &str,
        collections: Option<&CollectionConfigPackage>,
    ) -> Result<(), String> {
        if !is_name(name) {
            return Err(format!("invalid chaincode name '{name}'. Names can only consist of alphanumerics, '_', and '-' and can only begin with alphanumerics"));
        }
        if matches!(name, "cscc" | "escc" | "lscc" | "qscc" | "vscc") {
            return Err(format!("chaincode name '{name}' is the name of a system chaincode"));
        }
        if !is_version(version) {
            return Err(format!("invalid chaincode version '{version}'. Versions can only consist of alphanumerics, '_', '-', '+', and '.'"));
        }
        let empty = CollectionConfigPackage::default();
        let proposed = collections.unwrap_or(&empty);
        self.validate_collections(proposed)?;
        let committed = read_definition(ctx, true, name)
            .map_err(|e| format!("could not retrieve committed definition for chaincode '{name}': could not get info about chaincode: {e}"))?;
        let Some(committed) = committed else {
            if ctx.get_state_in("lscc", name).is_some() {
                return Err(format!("legacy (lscc) chaincode {name} is not supported by Ferrofabric"));
            }
            return Ok(());
        };
        if committed.params.collections.config.is_empty() {
            return Ok(());
        }
        if proposed.config.is_empty() {
            return Err("the proposed collection config does not contain previously defined collections".into());
        }
        let statics = |p: &CollectionConfigPackage| -> BTreeMap<String, u64> {
            p.config
                .iter()
                .filter_map(|c| {
                    c.payload
                        .as_ref()
                        .map(|collection_config::Payload::StaticCollectionConfig(s)| (s.name.clone(), s.block_to_live))
                })
                .collect()
        };
        let new = statics(proposed);
        for (coll, btl) in statics(&committed.params.collections) {
            match new.get(&coll) {
                None => {
                    return Err(format!(
                        "existing collection [{coll}] missing in the proposed collection configuration"
                    ))
                }
                Some(b) if *b != btl => {
                    return Err(format!(
                        "the BlockToLive in an existing collection [{coll}] modified. Existing value [{btl}]"
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Fabric's `SetChaincodeDefinitionDefaults`.
    fn set_defaults(&self, ctx: &TxContext<'_>, p: &mut Params) -> Result<(), String> {
        if p.endorsement.endorsement_plugin.is_empty() {
            p.endorsement.endorsement_plugin = "escc".into();
        }
        if p.validation.validation_plugin.is_empty() {
            p.validation.validation_plugin = "vscc".into();
        }
        if p.validation.validation_parameter.is_empty() {
            if self.config.policy(DEFAULT_ENDORSEMENT_POLICY).is_none() {
                return Err(format!(
                    "could not set defaults for chaincode definition in channel {}: policy '{DEFAULT_ENDORSEMENT_POLICY}' must be defined for channel '{}' before chaincode operations can be attempted",
                    ctx.channel_id(),
                    ctx.channel_id()
                ));
            }
            let policy = ApplicationPolicy {
                r#type: Some(application_policy::Type::ChannelConfigPolicyReference(DEFAULT_ENDORSEMENT_POLICY.into())),
            };
            p.validation.validation_parameter = Bytes::from(policy.encode_to_vec());
        }
        Ok(())
    }

    /// The implicit collections of the channel's application organisations, in organisation order.
    fn org_collections(&self, ctx: &TxContext<'_>) -> Result<Vec<(String, String)>, String> {
        let app = self
            .config
            .application()
            .ok_or_else(|| format!("no application config for channel '{}'", ctx.channel_id()))?;
        Ok(app.organizations().values().map(|o| (o.mspid().to_owned(), implicit_collection(o.mspid()))).collect())
    }

    /// Fabric's `QueryOrgApprovals`: for each organisation, whether its implicit collection holds exactly these
    /// parameters for `<name>#<sequence>` (hashed reads recorded).
    fn org_approvals(
        &self,
        ctx: &mut TxContext<'_>,
        name: &str,
        def: &Definition,
        orgs: &[(String, String)],
    ) -> BTreeMap<String, bool> {
        let private_name = format!("{name}#{}", def.sequence);
        let fields = def.params.fields();
        orgs.iter()
            .map(|(mspid, coll)| {
                let ok = is_serialized(ctx, &Src::Private { coll, record: true }, &private_name, &fields);
                (mspid.clone(), ok)
            })
            .collect()
    }

    fn approve(&self, ctx: &mut TxContext<'_>, a: ApproveChaincodeDefinitionForMyOrgArgs) -> LcResult<Bytes> {
        self.validate_input(ctx, &a.name, &a.version, a.collections.as_ref())
            .map_err(with("error validating chaincode definition"))?;
        let coll = implicit_collection(&self.org_mspid);
        let package_id = match a.source.and_then(|s| s.r#type) {
            Some(chaincode_source::Type::LocalPackage(l)) => l.package_id,
            _ => String::new(),
        };
        let mut params = Params {
            endorsement: ChaincodeEndorsementInfo {
                version: a.version.clone(),
                endorsement_plugin: a.endorsement_plugin,
                init_required: a.init_required,
            },
            validation: ChaincodeValidationInfo {
                validation_plugin: a.validation_plugin,
                validation_parameter: a.validation_parameter,
            },
            collections: CollectionConfigPackage { config: a.collections.map(|c| c.config).unwrap_or_default() },
        };
        let name = a.name;
        let current = read_int64(ctx, Src::Public { record: true }, NAMESPACES, &name, "Sequence")
            .map_err(with("could not get current sequence"))?;
        let requested = a.sequence;
        if current == requested && requested == 0 {
            return Err("requested sequence is 0, but first definable sequence number is 1".to_owned().into());
        }
        if requested < current {
            return Err(
                format!("currently defined sequence {current} is larger than requested sequence {requested}").into()
            );
        }
        if requested > current + 1 {
            return Err(format!(
                "requested sequence {requested} is larger than the next available sequence number {}",
                current + 1
            )
            .into());
        }
        self.set_defaults(ctx, &mut params)?;
        if requested == current {
            let defined = read_definition(ctx, true, &name)
                .map_err(with(format!("could not deserialize namespace {name} as chaincode")))?
                .ok_or_else(|| format!("missing metadata for currently committed sequence number ({current})"))?;
            defined.params.equal(&params).map_err(with(format!(
                "attempted to redefine the current committed sequence ({current}) for namespace {name} with different parameters"
            )))?;
        }
        let private_name = format!("{name}#{requested}");
        let org = Src::Private { coll: &coll, record: true };
        if requested == current + 1 {
            let fields = params.fields();
            let existing = read_metadata(ctx, &org, NAMESPACES, &private_name, &fields.metadata())
                .map_err(with("could not fetch uncommitted definition"))?;
            if existing.is_some() {
                // Fabric deserialises the uncommitted parameters field by field; with hashes, "equal" means every
                // field hash matches.
                let stored: Vec<Option<Bytes>> = fields
                    .fields
                    .iter()
                    .map(|(f, _)| read(ctx, &org, &field_key(NAMESPACES, &private_name, f)))
                    .collect();
                let unchanged =
                    fields.fields.iter().zip(&stored).all(|((_, v), h)| matches!(h, Some(h) if holds(&org, h, v)));
                if unchanged {
                    let pkg = local_package_fields(&package_id);
                    let source = read_metadata(ctx, &org, CHAINCODE_SOURCES, &private_name, &pkg.metadata())
                        .map_err(with(format!("could not deserialize chaincode-source metadata for {private_name}")))?;
                    if source.is_some() {
                        let stored = read(ctx, &org, &field_key(CHAINCODE_SOURCES, &private_name, "PackageID"));
                        if matches!(&stored, Some(h) if holds(&org, h, &pkg.fields[0].1)) {
                            return Err(format!(
                                "attempted to redefine uncommitted sequence ({requested}) for namespace {name} with unchanged content"
                            )
                            .into());
                        }
                    }
                }
            }
        }
        serialize(ctx, &org, NAMESPACES, &private_name, &params.fields())
            .map_err(with("could not serialize chaincode parameters to state"))?;
        serialize(ctx, &org, CHAINCODE_SOURCES, &private_name, &local_package_fields(&package_id))
            .map_err(with("could not serialize chaincode package info to state"))?;
        Ok(Bytes::new())
    }

    /// The definition named by Check/Commit arguments (collections absent = empty, as Fabric serialises a nil
    /// package).
    fn definition_of(
        sequence: i64,
        version: String,
        endorsement_plugin: String,
        init_required: bool,
        validation_plugin: String,
        validation_parameter: Bytes,
        collections: Option<CollectionConfigPackage>,
    ) -> Definition {
        Definition {
            sequence,
            params: Params {
                endorsement: ChaincodeEndorsementInfo { version, endorsement_plugin, init_required },
                validation: ChaincodeValidationInfo { validation_plugin, validation_parameter },
                collections: collections.unwrap_or_default(),
            },
        }
    }

    /// Fabric's `ExternalFunctions.CheckCommitReadiness`.
    fn readiness(
        &self,
        ctx: &mut TxContext<'_>,
        name: &str,
        def: &mut Definition,
        orgs: &[(String, String)],
    ) -> Result<BTreeMap<String, bool>, String> {
        let current = read_int64(ctx, Src::Public { record: true }, NAMESPACES, name, "Sequence")
            .map_err(with("could not get current sequence"))?;
        if def.sequence != current + 1 {
            return Err(format!(
                "requested sequence is {}, but new definition must be sequence {}",
                def.sequence,
                current + 1
            ));
        }
        self.set_defaults(ctx, &mut def.params)?;
        Ok(self.org_approvals(ctx, name, def, orgs))
    }

    fn check_commit_readiness(&self, ctx: &mut TxContext<'_>, a: CheckCommitReadinessArgs) -> LcResult<Bytes> {
        let orgs = self.org_collections(ctx)?;
        let mut def = Self::definition_of(
            a.sequence,
            a.version,
            a.endorsement_plugin,
            a.init_required,
            a.validation_plugin,
            a.validation_parameter,
            a.collections,
        );
        let approvals = self.readiness(ctx, &a.name, &mut def, &orgs)?;
        // CheckCommitReadinessResult{approvals = 1}
        Ok(Bytes::from(encode_bool_map(1, &approvals)))
    }

    fn commit(&self, ctx: &mut TxContext<'_>, a: CommitChaincodeDefinitionArgs) -> LcResult<Bytes> {
        self.validate_input(ctx, &a.name, &a.version, a.collections.as_ref())
            .map_err(with("error validating chaincode definition"))?;
        let orgs = self.org_collections(ctx)?;
        if !orgs.iter().any(|(m, _)| *m == self.org_mspid) {
            return Err("impossibly, this peer's org is processing requests for a channel it is not a member of"
                .to_owned()
                .into());
        }
        let mut def = Self::definition_of(
            a.sequence,
            a.version,
            a.endorsement_plugin,
            a.init_required,
            a.validation_plugin,
            a.validation_parameter,
            a.collections,
        );
        let approvals = self.readiness(ctx, &a.name, &mut def, &orgs)?;
        serialize(ctx, &Src::Public { record: true }, NAMESPACES, &a.name, &def.fields())
            .map_err(with("could not serialize chaincode definition"))?;
        if !approvals.get(&self.org_mspid).copied().unwrap_or(false) {
            return Err(format!("chaincode definition not agreed to by this org ({})", self.org_mspid).into());
        }
        Ok(Bytes::new())
    }

    /// Fabric's `QueryApprovedChaincodeDefinition`: sequence 0 asks for the committed sequence, or the next one if
    /// this org approved it already; the approval's metadata must be in the org's implicit collection.
    fn query_approved(&self, ctx: &mut TxContext<'_>, a: QueryApprovedChaincodeDefinitionArgs) -> LcResult<Bytes> {
        let channel = ctx.channel_id().to_owned();
        let coll = implicit_collection(&self.org_mspid);
        let org = Src::Private { coll: &coll, record: true };
        let mut requested = a.sequence;
        if a.sequence == 0 {
            let current = read_int64(ctx, Src::Public { record: true }, NAMESPACES, &a.name, "Sequence")
                .map_err(with("could not get current sequence"))?;
            requested = current;
            if read(ctx, &org, &metadata_key(NAMESPACES, &format!("{}#{}", a.name, current + 1))).is_some() {
                requested = current + 1;
            }
        }
        let private_name = format!("{}#{requested}", a.name);
        let not_found = || {
            LcError::Failed(format!(
                "could not fetch approved chaincode definition (name: '{}', sequence: '{}') on channel '{channel}'",
                a.name, a.sequence
            ))
        };
        if read(ctx, &org, &metadata_key(NAMESPACES, &private_name)).is_none() {
            return Err(not_found());
        }
        // The values: this peer holds its organisation's approvals that it endorsed itself.
        let own = Src::OwnPrivate { coll: &coll };
        let params_meta = read_metadata(ctx, &own, NAMESPACES, &private_name, &StateMetadata::default())
            .map_err(|e| format!("could not deserialize namespace metadata for {private_name}: {e}"))?
            .ok_or_else(|| {
                format!("could not deserialize chaincode parameters for {private_name}: this peer does not hold its organisation's approval")
            })?;
        if params_meta.datatype != PARAMETERS_TYPE {
            return Err(LcError::Failed(format!("not a chaincode parameters type: {}", params_meta.datatype)));
        }
        let params_err = |e: String| format!("could not deserialize chaincode parameters for {private_name}: {e}");
        let endorsement: ChaincodeEndorsementInfo =
            read_proto(ctx, &own, &private_name, "EndorsementInfo").map_err(params_err)?;
        let validation: ChaincodeValidationInfo =
            read_proto(ctx, &own, &private_name, "ValidationInfo").map_err(params_err)?;
        let collections: CollectionConfigPackage =
            read_proto(ctx, &own, &private_name, "Collections").map_err(params_err)?;
        let source_meta = read_metadata(ctx, &own, CHAINCODE_SOURCES, &private_name, &StateMetadata::default())
            .map_err(|e| format!("could not deserialize chaincode-source metadata for {private_name}: {e}"))?
            .ok_or_else(not_found)?;
        if source_meta.datatype != LOCAL_PACKAGE_TYPE {
            return Err(LcError::Failed(format!("not a chaincode local package type: {}", source_meta.datatype)));
        }
        let key = field_key(CHAINCODE_SOURCES, &private_name, "PackageID");
        let package_id = match read(ctx, &own, &key).map(StateData::decode) {
            None => String::new(),
            Some(Ok(StateData { r#type: Some(state_data::Type::String(s)) })) => s,
            Some(Ok(StateData { r#type: None })) => String::new(),
            Some(_) => {
                return Err(LcError::Failed(format!(
                    "could not deserialize chaincode-source for {private_name}: could not unmarshal state for key {key}"
                )))
            }
        };
        let source = if package_id.is_empty() {
            chaincode_source::Type::Unavailable(chaincode_source::Unavailable {})
        } else {
            chaincode_source::Type::LocalPackage(chaincode_source::Local { package_id })
        };
        let result = QueryApprovedChaincodeDefinitionResult {
            sequence: requested,
            version: endorsement.version,
            endorsement_plugin: endorsement.endorsement_plugin,
            validation_plugin: validation.validation_plugin,
            validation_parameter: validation.validation_parameter,
            collections: Some(collections),
            init_required: endorsement.init_required,
            source: Some(ChaincodeSource { r#type: Some(source) }),
        };
        Ok(Bytes::from(result.encode_to_vec()))
    }

    fn query_definition(&self, ctx: &mut TxContext<'_>, a: QueryChaincodeDefinitionArgs) -> LcResult<Bytes> {
        let def = read_definition(ctx, true, &a.name)
            .map_err(with(format!("could not fetch metadata for namespace {}", a.name)))?
            .ok_or_else(|| LcError::NotDefined(a.name.clone()))?;
        let orgs = self.org_collections(ctx)?;
        let approvals = self.org_approvals(ctx, &a.name, &def, &orgs);
        let p = def.params;
        let result = QueryChaincodeDefinitionResult {
            sequence: def.sequence,
            version: p.endorsement.version,
            endorsement_plugin: p.endorsement.endorsement_plugin,
            validation_plugin: p.validation.validation_plugin,
            validation_parameter: p.validation.validation_parameter,
            collections: Some(p.collections),
            init_required: p.endorsement.init_required,
            approvals: Default::default(),
        };
        let mut out = result.encode_to_vec();
        out.extend_from_slice(&encode_bool_map(8, &approvals));
        Ok(Bytes::from(out))
    }

    fn query_definitions(&self, ctx: &mut TxContext<'_>, _a: QueryChaincodeDefinitionsArgs) -> LcResult<Bytes> {
        // Fabric ranges over "namespaces/metadata/" .. "namespaces/metadata/\x7f" through the shim.
        let prefix = metadata_key(NAMESPACES, "");
        let entries = ctx
            .get_state_by_range_in(LIFECYCLE, &prefix, &format!("{prefix}\u{7f}"))
            .map_err(|e| format!("could not query namespace metadata: {e}"))?;
        let mut defs = Vec::new();
        for (key, value) in entries {
            let name = key[prefix.len()..].to_owned();
            let meta = StateMetadata::decode(value)
                .map_err(|e| format!("could not query namespace metadata: could not unmarshal metadata for namespace {NAMESPACES}/{name}: {e}"))?;
            if meta.datatype != DEFINITION_TYPE {
                continue;
            }
            let def = read_definition(ctx, true, &name)
                .map_err(with(format!("could not deserialize namespace {name} as chaincode")))?
                .ok_or_else(|| LcError::NotDefined(name.clone()))?;
            let p = def.params;
            defs.push(query_chaincode_definitions_result::ChaincodeDefinition {
                name,
                sequence: def.sequence,
                version: p.endorsement.version,
                endorsement_plugin: p.endorsement.endorsement_plugin,
                validation_plugin: p.validation.validation_plugin,
                validation_parameter: p.validation.validation_parameter,
                collections: Some(p.collections),
                init_required: p.endorsement.init_required,
            });
        }
        Ok(Bytes::from(QueryChaincodeDefinitionsResult { chaincode_definitions: defs }.encode_to_vec()))
    }
}

/// A `map<string, bool>` field with entries in key order, both entry fields always written (as Go's marshaller
/// does; prost would skip `false` values and iterate its HashMap in random order).
fn encode_bool_map(tag: u32, map: &BTreeMap<String, bool>) -> Vec<u8> {
    use prost::encoding::{encode_key, encode_varint, WireType};
    let mut out = Vec::new();
    for (k, v) in map {
        let mut entry = Vec::with_capacity(k.len() + 6);
        encode_key(1, WireType::LengthDelimited, &mut entry);
        encode_varint(k.len() as u64, &mut entry);
        entry.extend_from_slice(k.as_bytes());
        encode_key(2, WireType::Varint, &mut entry);
        encode_varint(u64::from(*v), &mut entry);
        encode_key(tag, WireType::LengthDelimited, &mut out);
        encode_varint(entry.len() as u64, &mut out);
        out.extend_from_slice(&entry);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn name_and_version_syntax_follow_fabric() {
        for ok in ["smallbank", "a-b_c", "x1"] {
            assert!(is_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "a_-b", "a.b"] {
            assert!(!is_name(bad), "{bad}");
        }
        assert!(is_version("1.0+build_2-x"));
        assert!(!is_version("1 0"));
        assert!(!is_version(""));
        assert!(is_collection_name("-coll_1"));
        assert!(!is_collection_name("_coll"));
    }

    #[test]
    fn bool_maps_are_encoded_sorted_with_false_values() {
        let m: BTreeMap<String, bool> = [("b".to_string(), false), ("a".to_string(), true)].into_iter().collect();
        let bytes = encode_bool_map(1, &m);
        assert_eq!(bytes, [0x0a, 5, 0x0a, 1, b'a', 0x10, 1, 0x0a, 5, 0x0a, 1, b'b', 0x10, 0]);
        let decoded = ferrofabric_protos::lifecycle::CheckCommitReadinessResult::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded.approvals.get("a"), Some(&true));
        assert_eq!(decoded.approvals.get("b"), Some(&false));
    }

    #[test]
    fn definition_fields_match_the_fixture_layout() {
        let def = Definition {
            sequence: 1,
            params: Params {
                endorsement: ChaincodeEndorsementInfo {
                    version: "1.0".into(),
                    endorsement_plugin: "escc".into(),
                    init_required: false,
                },
                validation: ChaincodeValidationInfo {
                    validation_plugin: "vscc".into(),
                    validation_parameter: Bytes::new(),
                },
                collections: CollectionConfigPackage::default(),
            },
        };
        let f = def.fields();
        assert_eq!(f.fields[0], ("Sequence", vec![0x08, 0x01]));
        assert_eq!(f.fields[3], ("Collections", vec![0x12, 0x00]));
        assert_eq!(
            f.metadata().encode_to_vec(),
            b"\n\x13ChaincodeDefinition\x12\x08Sequence\x12\x0fEndorsementInfo\x12\x0eValidationInfo\x12\x0bCollections"
        );
    }
}
