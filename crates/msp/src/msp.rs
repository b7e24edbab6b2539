//! One Fabric X.509 MSP: setup from `FabricMSPConfig` (msp/mspimplsetup.go,
//! `setupV142`, the behaviour selected by channel capability V2_0 and
//! later), its deserialised identities (msp/identities.go), identity
//! validation (msp/mspimplvalidate.go) and principal checks (msp/mspimpl.go
//! `satisfiesPrincipalInternalV142`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use ferrofabric_protos::common::{
    msp_identity_anonymity::MspIdentityAnonymityType, msp_principal::Classification, msp_role::MspRoleType,
    CombinedPrincipal, MspIdentityAnonymity, MspPrincipal, MspRole, OrganizationUnit,
};
use ferrofabric_protos::msp::{FabricMspConfig, FabricOuIdentifier, MspConfig, SerializedIdentity};
use prost::Message;
use sha2::{Digest, Sha256};

use crate::cert::{Cert, CertKey};
use crate::chain::{self, Pool};
use crate::crl::Crl;
use crate::ecdsa::PublicKey;
use crate::error::MspError;
use crate::identifier::{IdentityIdentifier, OrganizationalUnit};
use crate::pem;

/// `MSPConfig.type` of an X.509 MSP (Fabric `msp.FABRIC`).
const MSP_TYPE_FABRIC: i32 = 0;
/// `MSPConfig.type` of an Idemix MSP (Fabric `msp.IDEMIX`).
const MSP_TYPE_IDEMIX: i32 = 1;
/// A certificate chain, leaf first.
type Chain = Vec<Arc<Cert>>;

/// Resolves IDENTITY principals to identities (the manager's cache).
pub(crate) type Deserializer<'a> = dyn Fn(&[u8]) -> Result<Arc<Identity>, MspError> + 'a;

/// Nesting bound for COMBINED principals (Fabric has none; we must not
/// overflow the stack on hostile input).
const MAX_PRINCIPAL_DEPTH: usize = 64;

/// A NodeOU classification (Fabric `OUIdentifier` in the MSP).
#[derive(Debug, Clone)]
struct NodeOu {
    ou: String,
    /// Empty when the config gives no certificate (any chain accepted).
    certifiers: Vec<u8>,
}

/// The immutable state of a set-up MSP, shared by its identities.
#[derive(Debug)]
pub(crate) struct MspInner {
    name: String,
    roots: Vec<Arc<Cert>>,
    intermediates: Vec<Arc<Cert>>,
    root_pool: Pool,
    intermediate_pool: Pool,
    /// DER of the CA certificates that issued an intermediate CA: leaves
    /// must not hang directly below them.
    internal_nodes: HashSet<Vec<u8>>,
    admins: Vec<Arc<Cert>>,
    crls: Vec<Crl>,
    ou_identifiers: HashMap<String, Vec<Vec<u8>>>,
    ou_enforcement: bool,
    client_ou: Option<NodeOu>,
    peer_ou: Option<NodeOu>,
    admin_ou: Option<NodeOu>,
    orderer_ou: Option<NodeOu>,
}

/// One FABRIC (X.509) MSP built from a channel's `MSPConfig`, with the
/// semantics of Fabric's MSP version 1.4.3 (used by every channel with the
/// V2_0 channel capability or later, i.e. all Fabric 2.5 channels).
#[derive(Debug, Clone)]
pub struct Msp {
    pub(crate) inner: Arc<MspInner>,
}

fn cfg(e: impl Into<String>) -> MspError {
    MspError::Config(e.into())
}

fn invalid(e: impl Into<String>) -> MspError {
    MspError::Validation(e.into())
}

fn principal_err(e: impl Into<String>) -> MspError {
    MspError::Principal(e.into())
}

/// Fabric's `getCertFromPem`: the first PEM block, whatever its type.
fn cert_from_pem(bytes: &[u8]) -> Result<Cert, MspError> {
    let block = pem::decode(bytes).ok_or_else(|| MspError::Pem("no PEM block found".into()))?;
    Cert::parse(&block.der)
}

/// What `bccsp` `KeyImport(X509PublicKeyImportOpts)` accepts.
fn check_importable_key(cert: &Cert) -> Result<(), MspError> {
    match cert.key {
        CertKey::P256(_) | CertKey::P384(_) | CertKey::Rsa(_) => Ok(()),
        CertKey::Other(name) if name.starts_with("ECDSA") => Ok(()),
        CertKey::Other(name) => Err(MspError::UnsupportedKey(format!(
            "certificate's public key type not recognized ({name}); supported keys: [ECDSA, RSA]"
        ))),
    }
}

/// SHA-256 over the concatenated DER of `chain`.
fn chain_identifier(chain: &[Arc<Cert>]) -> [u8; 32] {
    let mut h = Sha256::new();
    for c in chain {
        h.update(c.raw());
    }
    h.finalize().into()
}

/// Fabric's verification time for a certificate (`getValidityOptsForCert`).
fn validity_time(cert: &Cert) -> i64 {
    cert.not_before.saturating_add(1)
}

/// Fabric's `sanitizeCert`: the certificate with a low-S signature, found
/// by building its chain (a self-signed CA is its own parent). Also returns
/// the chain when one was built for a non-self-signed certificate, with the
/// sanitised certificate as element 0 (re-encoding the signature changes
/// nothing Go's verifier looks at, so it is the chain Fabric finds later).
fn sanitize_with_chain(
    cert: Arc<Cert>,
    roots: &Pool,
    intermediates: &Pool,
) -> Result<(Arc<Cert>, Option<Chain>), String> {
    if !cert.sig_alg.is_ecdsa() {
        return Ok((cert, None));
    }
    if cert.is_ca && cert.check_signature_from(&cert).is_ok() {
        let curve = cert.key.curve().ok_or("self-signed CA without an ECDSA key")?;
        let clean = match cert.sanitized(curve).map_err(|e| e.to_string())? {
            Some(c) => Arc::new(c),
            None => cert,
        };
        let mut own = Pool::default();
        own.add(clean.clone());
        chain::unique_chain(&clean, &own, intermediates, validity_time(&clean))?;
        return Ok((clean, None));
    }
    let mut chain = chain::unique_chain(&cert, roots, intermediates, validity_time(&cert))?;
    let parent =
        chain.get(1).ok_or("failed to traverse certificate verification chain for leaf or intermediate certificate")?;
    let curve = parent.key.curve().ok_or("issuer key is not ECDSA")?;
    let clean = match cert.sanitized(curve).map_err(|e| e.to_string())? {
        Some(c) => Arc::new(c),
        None => cert,
    };
    chain[0] = clean.clone();
    Ok((clean, Some(chain)))
}

/// [`sanitize_with_chain`] without the chain.
fn sanitize(cert: Arc<Cert>, roots: &Pool, intermediates: &Pool) -> Result<Arc<Cert>, String> {
    sanitize_with_chain(cert, roots, intermediates).map(|(c, _)| c)
}

impl Msp {
    /// Sets up an MSP from a channel config `MSPConfig` (Fabric
    /// `bccspmsp.Setup` with `setupV142`).
    ///
    /// Only `type` 0 (FABRIC) is handled: IDEMIX yields
    /// [`MspError::Unsupported`], other types [`MspError::Config`].
    /// Errors: undecodable `FabricMSPConfig` ([`MspError::Decode`]); no
    /// root CA; unparsable, non-CA, SKI-less or unchainable CA/TLS CA
    /// certificates; bad CRLs; OU or NodeOU certificates that are not one of
    /// the MSP's CAs; admins that do not chain or (NodeOUs on) carry neither
    /// the client nor the admin OU; no admins and no admin OU; a crypto
    /// config other than SHA2/SHA256 ([`MspError::Unsupported`]).
    pub fn from_config(config: &MspConfig) -> Result<Msp, MspError> {
        match config.r#type {
            MSP_TYPE_FABRIC => {}
            MSP_TYPE_IDEMIX => {
                return Err(MspError::Unsupported(
                    "IDEMIX MSPs are not supported by ferrofabric (only FABRIC X.509 MSPs)".into(),
                ))
            }
            other => return Err(cfg(format!("unknown MSP type {other}"))),
        }
        let conf = FabricMspConfig::decode(config.config.clone())
            .map_err(|e| MspError::Decode(format!("failed unmarshalling fabric msp config: {e}")))?;
        MspInner::setup(&conf).map(|inner| Msp { inner: Arc::new(inner) })
    }

    /// The MSP identifier (`FabricMSPConfig.name`), e.g. `Org1MSP`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Builds an identity from `SerializedIdentity.id_bytes` (Fabric
    /// `deserializeIdentityInternal`): PEM (Go rules, any block type), X.509,
    /// a P-256 key; then sanitisation, OUs and validation, whose failures
    /// are recorded in the identity rather than returned.
    pub(crate) fn identity_from_id_bytes(&self, id_bytes: &[u8]) -> Result<Identity, MspError> {
        let block = pem::decode(id_bytes).ok_or_else(|| MspError::Pem("no PEM block found".into()))?;
        let cert = Cert::parse(&block.der)?;
        let public_key = match &cert.key {
            CertKey::P256(k) => k.clone(),
            CertKey::P384(_) => {
                return Err(MspError::UnsupportedKey("identity key is ECDSA P-384, only P-256 is supported".into()))
            }
            CertKey::Rsa(_) => {
                return Err(MspError::UnsupportedKey("identity key is RSA, only ECDSA P-256 is supported".into()))
            }
            CertKey::Other(name) => {
                return Err(MspError::UnsupportedKey(format!("identity key is {name}, only ECDSA P-256 is supported")))
            }
        };
        Ok(MspInner::new_identity(&self.inner, Arc::new(cert), public_key))
    }
}

/// A deserialised X.509 identity of one MSP, with its validation verdict
/// computed once at creation (msp/mspimplvalidate.go `validateIdentity`).
pub struct Identity {
    pub(crate) identifier: IdentityIdentifier,
    pub(crate) cert: Arc<Cert>,
    pub(crate) public_key: PublicKey,
    pub(crate) ous: Vec<OrganizationalUnit>,
    pub(crate) validation: Result<(), MspError>,
    pub(crate) msp: Arc<MspInner>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("mspid", &self.identifier.mspid)
            .field("id", &format_args!("{}", Hex(&self.identifier.id)))
            .field("ous", &self.ous)
            .field("validation", &self.validation)
            .finish()
    }
}

struct Hex<'a>(&'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl Identity {
    /// The MSP this identity belongs to (Fabric `GetMSPIdentifier`).
    pub fn mspid(&self) -> &str {
        &self.identifier.mspid
    }

    /// Fabric's `GetIdentifier`.
    pub fn identifier(&self) -> &IdentityIdentifier {
        &self.identifier
    }

    /// The certificate's P-256 public key, pre-parsed.
    pub fn public_key(&self) -> &PublicKey {
        &self.public_key
    }

    /// Fabric's `identity.Verify`: ECDSA P-256 over SHA-256(`msg`) with the
    /// low-S rule; see [`PublicKey::verify`]. Does not consult
    /// [`Identity::validate`] (Fabric callers check both).
    pub fn verify(&self, msg: &[u8], der_signature: &[u8]) -> Result<(), MspError> {
        self.public_key.verify(msg, der_signature)
    }

    /// Result of the MSP's validation, computed once when the identity
    /// entered the cache: not a CA, a unique chain to one of the MSP's
    /// roots at the certificate's NotBefore + 1 s, not revoked, OU and
    /// NodeOU rules ([`MspError::Validation`] otherwise).
    pub fn validate(&self) -> Result<(), MspError> {
        self.validation.clone()
    }

    /// Fabric's `GetOrganizationalUnits`: the subject's OU values with the
    /// certifiers identifier; empty when no validation chain exists.
    pub fn organizational_units(&self) -> &[OrganizationalUnit] {
        &self.ous
    }

    /// The certificate DER as Fabric keeps it: when the certificate's ECDSA
    /// signature had a high S, the re-encoded low-S form (msp/cert.go).
    pub fn cert_der(&self) -> &[u8] {
        self.cert.raw()
    }

    /// The certificate's NotAfter as Unix seconds (Fabric `ExpiresAt`).
    pub fn expires_at(&self) -> i64 {
        self.cert.not_after
    }
}

impl MspInner {
    fn setup(conf: &FabricMspConfig) -> Result<MspInner, MspError> {
        // setupCrypto: only the defaults are implemented.
        if let Some(cc) = &conf.crypto_config {
            if !(cc.signature_hash_family.is_empty() || cc.signature_hash_family == "SHA2") {
                return Err(MspError::Unsupported(format!("signature hash family {}", cc.signature_hash_family)));
            }
            if !(cc.identity_identifier_hash_function.is_empty() || cc.identity_identifier_hash_function == "SHA256") {
                return Err(MspError::Unsupported(format!(
                    "identity identifier hash function {}",
                    cc.identity_identifier_hash_function
                )));
            }
        }

        // setupCAs
        if conf.root_certs.is_empty() {
            return Err(cfg("expected at least one CA certificate"));
        }
        let parse_all = |list: &[bytes::Bytes]| -> Result<Vec<Arc<Cert>>, MspError> {
            list.iter().map(|b| cert_from_pem(b).map(Arc::new)).collect()
        };
        let raw_roots = parse_all(&conf.root_certs)?;
        let raw_intermediates = parse_all(&conf.intermediate_certs)?;
        let mut pre_roots = Pool::default();
        raw_roots.iter().for_each(|c| pre_roots.add(c.clone()));
        let mut pre_intermediates = Pool::default();
        raw_intermediates.iter().for_each(|c| pre_intermediates.add(c.clone()));
        let sanitize_all = |certs: Vec<Arc<Cert>>| -> Result<Vec<Arc<Cert>>, MspError> {
            certs
                .into_iter()
                .map(|c| {
                    check_importable_key(&c)?;
                    sanitize(c, &pre_roots, &pre_intermediates).map_err(cfg)
                })
                .collect()
        };
        let roots = sanitize_all(raw_roots)?;
        let intermediates = sanitize_all(raw_intermediates)?;
        let mut root_pool = Pool::default();
        roots.iter().for_each(|c| root_pool.add(c.clone()));
        let mut intermediate_pool = Pool::default();
        intermediates.iter().for_each(|c| intermediate_pool.add(c.clone()));

        // setupCRLs
        let crls = conf.revocation_list.iter().map(|b| Crl::parse(b)).collect::<Result<Vec<_>, _>>()?;

        let mut msp = MspInner {
            name: conf.name.clone(),
            roots,
            intermediates,
            root_pool,
            intermediate_pool,
            internal_nodes: HashSet::new(),
            admins: Vec::new(),
            crls,
            ou_identifiers: HashMap::new(),
            ou_enforcement: false,
            client_ou: None,
            peer_ou: None,
            admin_ou: None,
            orderer_ou: None,
        };

        msp.finalize_setup_cas()?;
        // setupSigningIdentity: a verifying MSP has no signer; ignored.
        msp.setup_tls_cas(conf)?;
        msp.setup_ous(conf)?;
        msp.setup_node_ous(conf)?;
        msp.setup_admins(conf)?;
        msp.post_setup()?;
        Ok(msp)
    }

    fn finalize_setup_cas(&mut self) -> Result<(), MspError> {
        for ca in self.roots.iter().chain(&self.intermediates) {
            let sn = hex_string(&ca.serial);
            if !ca.is_ca {
                return Err(cfg(format!("CA Certificate did not have the CA attribute, (SN: {sn})")));
            }
            if ca.subject_key_id.is_none() {
                return Err(cfg(format!("CA Certificate problem with Subject Key Identifier extension, (SN: {sn})")));
            }
            let chain = chain::unique_chain(ca, &self.root_pool, &self.intermediate_pool, validity_time(ca))
                .map_err(|e| cfg(format!("CA Certificate is not valid, (SN: {sn}): {e}")))?;
            if chain.len() > 1 {
                self.check_revocation(ca, &chain)
                    .map_err(|e| cfg(format!("CA Certificate is not valid, (SN: {sn}): {e}")))?;
            }
        }
        for ca in &self.intermediates {
            let chain = chain::unique_chain(ca, &self.root_pool, &self.intermediate_pool, validity_time(ca))
                .map_err(|e| cfg(format!("failed getting validation chain: {e}")))?;
            for parent in &chain[1..] {
                self.internal_nodes.insert(parent.raw().to_vec());
            }
        }
        Ok(())
    }

    fn setup_tls_cas(&self, conf: &FabricMspConfig) -> Result<(), MspError> {
        let mut roots = Pool::default();
        let mut intermediates = Pool::default();
        let mut all = Vec::new();
        for b in &conf.tls_root_certs {
            let c = Arc::new(cert_from_pem(b)?);
            roots.add(c.clone());
            all.push(c);
        }
        for b in &conf.tls_intermediate_certs {
            let c = Arc::new(cert_from_pem(b)?);
            intermediates.add(c.clone());
            all.push(c);
        }
        for c in &all {
            let sn = hex_string(&c.serial);
            if !c.is_ca {
                return Err(cfg(format!("TLS CA Certificate did not have the CA attribute, (SN: {sn})")));
            }
            if c.subject_key_id.is_none() {
                return Err(cfg(format!(
                    "TLS CA Certificate problem with Subject Key Identifier extension, (SN: {sn})"
                )));
            }
            let chain = chain::unique_chain(c, &roots, &intermediates, validity_time(c))
                .map_err(|e| cfg(format!("TLS CA Certificate is not valid, (SN: {sn}): {e}")))?;
            if chain.len() > 1 {
                self.check_revocation(c, &chain)
                    .map_err(|e| cfg(format!("TLS CA Certificate is not valid, (SN: {sn}): {e}")))?;
            }
        }
        Ok(())
    }

    /// Fabric's `getCertifiersIdentifier` for an OU configuration entry.
    fn certifiers_identifier(&self, pem_bytes: &[u8]) -> Result<Vec<u8>, MspError> {
        let cert = Arc::new(cert_from_pem(pem_bytes)?);
        let cert = sanitize(cert, &self.root_pool, &self.intermediate_pool)
            .map_err(|e| cfg(format!("sanitizeCert failed {e}")))?;
        if self.roots.iter().any(|r| r.same_as(&cert)) {
            return Ok(chain_identifier(&[cert]).to_vec());
        }
        if !self.intermediates.iter().any(|r| r.same_as(&cert)) {
            return Err(cfg("Failed adding OU. Certificate not in root or intermediate certs."));
        }
        let chain =
            self.validation_chain(&cert, true).map_err(|e| cfg(format!("Failed computing validation chain: {e}")))?;
        Ok(chain_identifier(&chain).to_vec())
    }

    fn setup_ous(&mut self, conf: &FabricMspConfig) -> Result<(), MspError> {
        for ou in &conf.organizational_unit_identifiers {
            let id = self.certifiers_identifier(&ou.certificate)?;
            let list = self.ou_identifiers.entry(ou.organizational_unit_identifier.clone()).or_default();
            if !list.contains(&id) {
                list.push(id);
            }
        }
        Ok(())
    }

    fn node_ou(&self, conf: &Option<FabricOuIdentifier>) -> Result<Option<NodeOu>, MspError> {
        let Some(c) = conf else {
            return Ok(None);
        };
        let certifiers =
            if c.certificate.is_empty() { Vec::new() } else { self.certifiers_identifier(&c.certificate)? };
        Ok(Some(NodeOu { ou: c.organizational_unit_identifier.clone(), certifiers }))
    }

    fn setup_node_ous(&mut self, conf: &FabricMspConfig) -> Result<(), MspError> {
        let Some(n) = &conf.fabric_node_ous else {
            self.ou_enforcement = false;
            return Ok(());
        };
        self.ou_enforcement = n.enable;
        self.client_ou = self.node_ou(&n.client_ou_identifier)?;
        self.peer_ou = self.node_ou(&n.peer_ou_identifier)?;
        self.admin_ou = self.node_ou(&n.admin_ou_identifier)?;
        self.orderer_ou = self.node_ou(&n.orderer_ou_identifier)?;
        if self.client_ou.is_none() && self.peer_ou.is_none() && self.admin_ou.is_none() && self.orderer_ou.is_none() {
            self.ou_enforcement = false;
        }
        Ok(())
    }

    fn setup_admins(&mut self, conf: &FabricMspConfig) -> Result<(), MspError> {
        let mut admins = Vec::with_capacity(conf.admins.len());
        for b in &conf.admins {
            let cert = Arc::new(cert_from_pem(b)?);
            check_importable_key(&cert)?;
            let cert = sanitize(cert, &self.root_pool, &self.intermediate_pool).map_err(cfg)?;
            admins.push(cert);
        }
        self.admins = admins;
        if self.admins.is_empty() && (!self.ou_enforcement || self.admin_ou.is_none()) {
            return Err(cfg("administrators must be declared when no admin ou classification is set"));
        }
        Ok(())
    }

    fn post_setup(&self) -> Result<(), MspError> {
        for (i, admin) in self.admins.iter().enumerate() {
            if !self.ou_enforcement {
                self.validate_cert(admin).map_err(|e| cfg(format!("admin {i} is invalid: {e}")))?;
            } else {
                let ous = self.organizational_units(admin);
                let e1 = self.has_ou_role(&ous, MspRoleType::Client);
                let e2 = self.has_ou_role(&ous, MspRoleType::Admin);
                if let (Err(e1), Err(e2)) = (e1, e2) {
                    return Err(cfg(format!("admin {i} is invalid [{e1},{e2}]")));
                }
            }
        }
        Ok(())
    }

    /// Fabric's `getValidationChain`: a unique chain of length >= 2 whose
    /// parent (of `cert`, or `cert` itself for an intermediate CA) is a leaf
    /// of the CA tree.
    fn validation_chain(&self, cert: &Arc<Cert>, intermediate: bool) -> Result<Vec<Arc<Cert>>, String> {
        let chain = chain::unique_chain(cert, &self.root_pool, &self.intermediate_pool, validity_time(cert))
            .map_err(|e| format!("failed getting validation chain: {e}"))?;
        self.check_validation_chain(chain, intermediate)
    }

    /// The checks `getValidationChain` applies to the unique chain.
    fn check_validation_chain(&self, chain: Vec<Arc<Cert>>, intermediate: bool) -> Result<Vec<Arc<Cert>>, String> {
        if chain.len() < 2 {
            return Err(format!("expected a chain of length at least 2, got {}", chain.len()));
        }
        let parent = if intermediate { &chain[0] } else { &chain[1] };
        if self.internal_nodes.contains(parent.raw()) {
            return Err(
                "invalid validation chain. Parent certificate should be a leaf of the certification tree".into()
            );
        }
        Ok(chain)
    }

    /// Fabric's `getCertificationChainForBCCSPIdentity`.
    fn certification_chain(&self, cert: &Arc<Cert>) -> Result<Vec<Arc<Cert>>, String> {
        if cert.is_ca {
            return Err("An X509 certificate with Basic Constraint: Certificate Authority equals true cannot be used as an identity".into());
        }
        self.validation_chain(cert, false)
    }

    /// Fabric's `GetOrganizationalUnits` (empty without a chain).
    fn organizational_units(&self, cert: &Arc<Cert>) -> Vec<OrganizationalUnit> {
        match self.certification_chain(cert) {
            Ok(chain) => self.ous_for_chain(cert, &chain),
            Err(_) => Vec::new(),
        }
    }

    fn ous_for_chain(&self, cert: &Cert, chain: &[Arc<Cert>]) -> Vec<OrganizationalUnit> {
        let id = chain_identifier(&chain[1..]);
        cert.subject_ous
            .iter()
            .map(|ou| OrganizationalUnit { organizational_unit_identifier: ou.clone(), certifiers_identifier: id })
            .collect()
    }

    /// Fabric's `validateCertAgainstChain`: revocation by a CRL of the
    /// issuing CA (matched by AKI = the CA's SKI, signature checked).
    fn check_revocation(&self, cert: &Cert, chain: &[Arc<Cert>]) -> Result<(), String> {
        let issuer = chain.get(1).ok_or("chain without issuer")?;
        let ski = issuer.subject_key_id.as_ref().ok_or("could not obtain Subject Key Identifier for signer cert")?;
        for crl in &self.crls {
            let aki = crl
                .authority_key_id()
                .map_err(|e| format!("could not obtain Authority Key Identifier for crl: {e}"))?;
            if &aki != ski {
                continue;
            }
            for serial in crl.revoked_serials() {
                if cert.serial_equals(serial) && crl.signed_by(issuer) {
                    return Err("The certificate has been revoked".into());
                }
            }
        }
        Ok(())
    }

    /// Fabric's `validateIdentityOUsV142`.
    fn validate_ous(&self, ous: &[OrganizationalUnit]) -> Result<(), String> {
        if !self.ou_identifiers.is_empty() {
            let found = ous.iter().any(|ou| {
                self.ou_identifiers
                    .get(&ou.organizational_unit_identifier)
                    .is_some_and(|ids| ids.iter().any(|id| id[..] == ou.certifiers_identifier[..]))
            });
            if !found {
                if ous.is_empty() {
                    return Err("the identity certificate does not contain an Organizational Unit (OU)".into());
                }
                return Err(format!(
                    "none of the identity's organizational units {:?} are in MSP {}",
                    ou_names(ous),
                    self.name
                ));
            }
        }
        if !self.ou_enforcement {
            return Ok(());
        }
        // Later kinds overwrite earlier ones carrying the same OU string,
        // as Fabric's map insertion does.
        let mut valid: HashMap<&str, &NodeOu> = HashMap::new();
        for n in [&self.client_ou, &self.peer_ou, &self.admin_ou, &self.orderer_ou].into_iter().flatten() {
            valid.insert(n.ou.as_str(), n);
        }
        let mut counter = 0;
        for ou in ous {
            let Some(node_ou) = valid.get(ou.organizational_unit_identifier.as_str()) else {
                continue;
            };
            if !node_ou.certifiers.is_empty() && node_ou.certifiers[..] != ou.certifiers_identifier[..] {
                return Err(format!("certifiersIdentifier does not match: {:?}, MSP: [{}]", ou_names(ous), self.name));
            }
            counter += 1;
            if counter > 1 {
                break;
            }
        }
        match counter {
            0 => Err(format!(
                "the identity does not have an OU that resolves to client, peer, orderer, or admin role. OUs: {:?}, MSP: [{}]",
                ou_names(ous),
                self.name
            )),
            1 => Ok(()),
            _ => Err(format!(
                "the identity must have a client, a peer, an orderer, or an admin OU role to be valid, not a combination of them. OUs: {:?}, MSP: [{}]",
                ou_names(ous),
                self.name
            )),
        }
    }

    /// Fabric's `validateIdentity` for a (sanitised) certificate.
    fn validate_cert(&self, cert: &Arc<Cert>) -> Result<(), MspError> {
        let chain = self
            .certification_chain(cert)
            .map_err(|e| invalid(format!("could not obtain certification chain: {e}")))?;
        self.validate_with_chain(cert, &chain)
    }

    fn validate_with_chain(&self, cert: &Arc<Cert>, chain: &[Arc<Cert>]) -> Result<(), MspError> {
        self.check_revocation(cert, chain)
            .map_err(|e| invalid(format!("could not validate identity against certification chain: {e}")))?;
        self.validate_ous(&self.ous_for_chain(cert, chain))
            .map_err(|e| invalid(format!("could not validate identity's OUs: {e}")))
    }

    /// Builds an identity: sanitise (Fabric's `newIdentity`), identifier,
    /// OUs, validation verdict. The chain is built once and reused.
    pub(crate) fn new_identity(me: &Arc<MspInner>, cert: Arc<Cert>, public_key: PublicKey) -> Identity {
        let (cert, chain) = match sanitize_with_chain(cert.clone(), &me.root_pool, &me.intermediate_pool) {
            Ok((clean, built)) => {
                let chain = if clean.is_ca {
                    me.certification_chain(&clean)
                } else {
                    match built {
                        Some(chain) => me.check_validation_chain(chain, false),
                        None => me.certification_chain(&clean),
                    }
                };
                (clean, chain)
            }
            // Fabric fails deserialisation here; we record it as invalid.
            Err(e) => (cert, Err(e)),
        };
        let (ous, validation) = match &chain {
            Ok(chain) => (me.ous_for_chain(&cert, chain), me.validate_with_chain(&cert, chain)),
            Err(e) => (Vec::new(), Err(invalid(format!("could not obtain certification chain: {e}")))),
        };
        Identity {
            identifier: IdentityIdentifier { mspid: me.name.clone(), id: cert.sha256() },
            cert,
            public_key,
            ous,
            validation,
            msp: me.clone(),
        }
    }

    /// Fabric's `hasOURoleInternal` (OU string only, certifiers unchecked).
    fn has_ou_role(&self, ous: &[OrganizationalUnit], role: MspRoleType) -> Result<(), String> {
        if !self.ou_enforcement {
            return Err("NodeOUs not activated. Cannot tell apart identities.".into());
        }
        let node_ou = match role {
            MspRoleType::Client => &self.client_ou,
            MspRoleType::Peer => &self.peer_ou,
            MspRoleType::Admin => &self.admin_ou,
            MspRoleType::Orderer => &self.orderer_ou,
            MspRoleType::Member => return Err("Invalid MSPRoleType. It must be CLIENT, PEER, ADMIN or ORDERER".into()),
        };
        let Some(node_ou) = node_ou else {
            return Err(format!(
                "cannot test for classification, node ou for type [{}], not defined, msp: [{}]",
                role.as_str_name(),
                self.name
            ));
        };
        if ous.iter().any(|ou| ou.organizational_unit_identifier == node_ou.ou) {
            Ok(())
        } else {
            Err(format!("The identity does not contain OU [{}], MSP: [{}]", role.as_str_name(), self.name))
        }
    }

    fn is_in_admins(&self, id: &Identity) -> bool {
        self.admins.iter().any(|a| a.raw() == id.cert_der())
    }

    /// Fabric's `SatisfiesPrincipal` with MSP v1.4.3 semantics:
    /// COMBINED principals are flattened, then every component must hold.
    /// `deserialize` resolves IDENTITY principals (the manager's cache).
    pub(crate) fn satisfies_principal(
        &self,
        id: &Identity,
        principal: &MspPrincipal,
        deserialize: &Deserializer<'_>,
    ) -> Result<(), MspError> {
        let mut flat = Vec::new();
        collect_principals(principal, 0, &mut flat)?;
        for p in &flat {
            self.satisfies_v142(id, p, deserialize)?;
        }
        Ok(())
    }

    fn satisfies_v142(
        &self,
        id: &Identity,
        principal: &MspPrincipal,
        deserialize: &Deserializer<'_>,
    ) -> Result<(), MspError> {
        if principal.principal_classification == Classification::Role as i32 && self.ou_enforcement {
            let role = MspRole::decode(principal.principal.clone())
                .map_err(|e| MspError::Decode(format!("could not unmarshal MSPRole from principal: {e}")))?;
            if role.msp_identifier != self.name {
                return Err(principal_err(format!(
                    "the identity is a member of a different MSP (expected {}, got {})",
                    role.msp_identifier,
                    id.mspid()
                )));
            }
            if role.role == MspRoleType::Admin as i32 {
                if self.is_in_admins(id) {
                    return Ok(());
                }
                id.validate().map_err(|e| {
                    principal_err(format!("The identity is not valid under this MSP [{}]: {e}", self.name))
                })?;
                return self.has_ou_role(id.organizational_units(), MspRoleType::Admin).map_err(|e| {
                    principal_err(format!("The identity is not an admin under this MSP [{}]: {e}", self.name))
                });
            }
            if role.role == MspRoleType::Orderer as i32 {
                id.validate().map_err(|e| {
                    principal_err(format!("The identity is not valid under this MSP [{}]: {e}", self.name))
                })?;
                return self.has_ou_role(id.organizational_units(), MspRoleType::Orderer).map_err(|e| {
                    principal_err(format!("The identity is not a [ORDERER] under this MSP [{}]: {e}", self.name))
                });
            }
        }
        self.satisfies_v13(id, principal, deserialize)
    }

    fn satisfies_v13(
        &self,
        id: &Identity,
        principal: &MspPrincipal,
        deserialize: &Deserializer<'_>,
    ) -> Result<(), MspError> {
        match Classification::try_from(principal.principal_classification) {
            Ok(Classification::Combined) => {
                Err(principal_err("SatisfiesPrincipalInternal shall not be called with a CombinedPrincipal"))
            }
            Ok(Classification::Anonymity) => {
                let anon = MspIdentityAnonymity::decode(principal.principal.clone()).map_err(|e| {
                    MspError::Decode(format!("could not unmarshal MSPIdentityAnonymity from principal: {e}"))
                })?;
                match MspIdentityAnonymityType::try_from(anon.anonymity_type) {
                    Ok(MspIdentityAnonymityType::Nominal) => Ok(()),
                    Ok(MspIdentityAnonymityType::Anonymous) => Err(principal_err(
                        "Principal is anonymous, but X.509 MSP does not support anonymous identities",
                    )),
                    Err(_) => Err(principal_err(format!("Unknown principal anonymity type: {}", anon.anonymity_type))),
                }
            }
            _ => self.satisfies_pre_v13(id, principal, deserialize),
        }
    }

    fn satisfies_pre_v13(
        &self,
        id: &Identity,
        principal: &MspPrincipal,
        deserialize: &Deserializer<'_>,
    ) -> Result<(), MspError> {
        match Classification::try_from(principal.principal_classification) {
            Ok(Classification::Role) => {
                let role = MspRole::decode(principal.principal.clone())
                    .map_err(|e| MspError::Decode(format!("could not unmarshal MSPRole from principal: {e}")))?;
                if role.msp_identifier != self.name {
                    return Err(principal_err(format!(
                        "the identity is a member of a different MSP (expected {}, got {})",
                        role.msp_identifier,
                        id.mspid()
                    )));
                }
                match MspRoleType::try_from(role.role) {
                    Ok(MspRoleType::Member) => id.validate(),
                    Ok(MspRoleType::Admin) => {
                        if self.is_in_admins(id) {
                            Ok(())
                        } else {
                            Err(principal_err("This identity is not an admin"))
                        }
                    }
                    Ok(r @ (MspRoleType::Client | MspRoleType::Peer)) => {
                        id.validate().map_err(|e| {
                            principal_err(format!("The identity is not valid under this MSP [{}]: {e}", self.name))
                        })?;
                        self.has_ou_role(id.organizational_units(), r).map_err(|e| {
                            principal_err(format!(
                                "The identity is not a [{}] under this MSP [{}]: {e}",
                                r.as_str_name(),
                                self.name
                            ))
                        })
                    }
                    _ => Err(principal_err(format!("invalid MSP role type {}", role.role))),
                }
            }
            Ok(Classification::Identity) => {
                let sid = SerializedIdentity::decode(principal.principal.clone()).map_err(|e| {
                    principal_err(format!(
                        "invalid identity principal, not a certificate: could not deserialize a SerializedIdentity: {e}"
                    ))
                })?;
                if sid.mspid != self.name {
                    return Err(principal_err(format!(
                        "invalid identity principal, not a certificate: expected MSP ID {}, received {}",
                        self.name, sid.mspid
                    )));
                }
                let other = deserialize(&principal.principal)
                    .map_err(|e| principal_err(format!("invalid identity principal, not a certificate: {e}")))?;
                if other.cert_der() == id.cert_der() {
                    other.validate()
                } else {
                    Err(principal_err("The identities do not match"))
                }
            }
            Ok(Classification::OrganizationUnit) => {
                let ou = OrganizationUnit::decode(principal.principal.clone()).map_err(|e| {
                    MspError::Decode(format!("could not unmarshal OrganizationUnit from principal: {e}"))
                })?;
                if ou.msp_identifier != self.name {
                    return Err(principal_err(format!(
                        "the identity is a member of a different MSP (expected {}, got {})",
                        ou.msp_identifier,
                        id.mspid()
                    )));
                }
                id.validate()?;
                let matches = id.organizational_units().iter().any(|mine| {
                    mine.organizational_unit_identifier == ou.organizational_unit_identifier
                        && mine.certifiers_identifier[..] == ou.certifiers_identifier[..]
                });
                if matches {
                    Ok(())
                } else {
                    Err(principal_err("The identities do not match"))
                }
            }
            _ => Err(principal_err(format!("invalid principal type {}", principal.principal_classification))),
        }
    }
}

/// Fabric's `collectPrincipals`: COMBINED principals flattened depth-first.
fn collect_principals(principal: &MspPrincipal, depth: usize, out: &mut Vec<MspPrincipal>) -> Result<(), MspError> {
    if principal.principal_classification != Classification::Combined as i32 {
        out.push(principal.clone());
        return Ok(());
    }
    if depth >= MAX_PRINCIPAL_DEPTH {
        return Err(principal_err("CombinedPrincipal nested too deeply"));
    }
    let combined = CombinedPrincipal::decode(principal.principal.clone())
        .map_err(|e| MspError::Decode(format!("could not unmarshal CombinedPrincipal from principal: {e}")))?;
    if combined.principals.is_empty() {
        return Err(principal_err("No principals in CombinedPrincipal"));
    }
    for p in &combined.principals {
        collect_principals(p, depth + 1, out)?;
    }
    Ok(())
}

fn ou_names(ous: &[OrganizationalUnit]) -> Vec<&str> {
    ous.iter().map(|o| o.organizational_unit_identifier.as_str()).collect()
}

fn hex_string(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
