//! Key and certificate generation with cryptogen's profiles (Fabric `internal/cryptogen/ca/ca.go`,
//! `internal/cryptogen/msp/msp.go`, `internal/cryptogen/csp/csp.go`, driven as `cmd/cryptogen/main.go`
//! `generatePeerOrg` / `generateOrdererOrg` do).

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::msp::{FabricCryptoConfig, FabricMspConfig, FabricNodeOUs, FabricOuIdentifier, MspConfig};
use p256::ecdsa::signature::Signer;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::pkcs8::{EncodePrivateKey, LineEnding};
use prost::Message;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DistinguishedName, DnType, DnValue, ExtendedKeyUsagePurpose,
    IsCa, Issuer, KeyIdMethod, KeyUsagePurpose, PublicKeyData, SanType, SerialNumber, SignatureAlgorithm, SigningKey,
};
use sha2::{Digest, Sha256};

use crate::config::{render_org, NodeSpec, OrgSpec, RenderedNode};
use crate::{CryptoConfig, CryptogenError};

/// Start of the validity window used by [`GenerateOptions::deterministic`]: 2025-01-01T00:00:00Z, in Unix
/// seconds.
pub const DETERMINISTIC_NOT_BEFORE: u64 = 1_735_689_600;

/// cryptogen's certificate lifetime: 3650 days.
const VALIDITY: Duration = Duration::from_secs(3650 * 24 * 3600);

/// How to draw keys and date certificates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenerateOptions {
    /// Seed of the ChaCha-based `StdRng` that draws every key and serial number; `None` seeds from the
    /// operating system. Certificate signatures are RFC 6979, so a seed fixes every byte of output as long
    /// as `not_before` is fixed too.
    pub seed: Option<u64>,
    /// Start of every certificate's validity (which lasts 3650 days); `None` means now rounded to the
    /// minute, minus five minutes, as cryptogen does.
    pub not_before: Option<SystemTime>,
}

impl GenerateOptions {
    /// Byte-reproducible output: keys from `seed`, validity from [`DETERMINISTIC_NOT_BEFORE`].
    pub fn deterministic(seed: u64) -> GenerateOptions {
        GenerateOptions {
            seed: Some(seed),
            not_before: Some(UNIX_EPOCH + Duration::from_secs(DETERMINISTIC_NOT_BEFORE)),
        }
    }
}

/// Which tree an organisation lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrgKind {
    /// `peerOrganizations/`: nodes under `peers/`, template prefix `peer`, users `User1..N` and `Admin`.
    Peer,
    /// `ordererOrganizations/`: nodes under `orderers/`, template prefix `orderer`, only the `Admin` user.
    Orderer,
}

impl OrgKind {
    /// Top-level directory: `peerOrganizations` or `ordererOrganizations`.
    pub fn dir_name(self) -> &'static str {
        match self {
            OrgKind::Peer => "peerOrganizations",
            OrgKind::Orderer => "ordererOrganizations",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            OrgKind::Peer => "peer",
            OrgKind::Orderer => "orderer",
        }
    }
}

/// The role a member's certificate is issued for (cryptogen's `CLIENT`, `ORDERER`, `PEER`, `ADMIN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    /// A user (`User<N>@<domain>`).
    Client,
    /// A peer node.
    Peer,
    /// An orderer node.
    Orderer,
    /// The organisation's `Admin@<domain>`.
    Admin,
}

impl NodeRole {
    /// The NodeOU written into the certificate's subject when NodeOUs are enabled: `client`, `peer`,
    /// `orderer` or `admin`.
    pub fn ou(self) -> &'static str {
        match self {
            NodeRole::Client => "client",
            NodeRole::Peer => "peer",
            NodeRole::Orderer => "orderer",
            NodeRole::Admin => "admin",
        }
    }

    /// Peers and orderers are nodes (TLS files `server.*`, home under `peers/` or `orderers/`); clients and
    /// admins are users (`client.*`, under `users/`).
    pub fn is_node(self) -> bool {
        matches!(self, NodeRole::Peer | NodeRole::Orderer)
    }
}

/// A P-256 key usable by rcgen as a signer and exportable as PEM.
#[derive(Clone)]
pub(crate) struct Key {
    secret: p256::SecretKey,
    signing: p256::ecdsa::SigningKey,
    /// Uncompressed SEC1 point (65 bytes), what an X.509 SubjectPublicKeyInfo carries.
    point: Vec<u8>,
}

impl Key {
    fn generate(rng: &mut StdRng) -> Key {
        let secret = p256::SecretKey::random(rng);
        let point = secret.public_key().to_encoded_point(false).as_bytes().to_vec();
        Key { signing: p256::ecdsa::SigningKey::from(&secret), secret, point }
    }

    /// cryptogen's key identifier: SHA-256 of the uncompressed point (not RFC 5280's SHA-1).
    fn ski(&self) -> Vec<u8> {
        Sha256::digest(&self.point).to_vec()
    }

    /// PKCS#8 `PRIVATE KEY` PEM with LF line endings, the format of cryptogen's `priv_sk`.
    fn pkcs8_pem(&self) -> Result<String, CryptogenError> {
        let pem = self
            .secret
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| CryptogenError::Certificate(format!("PKCS#8 encoding: {e}")))?;
        Ok(pem.to_string())
    }
}

impl PublicKeyData for Key {
    fn der_bytes(&self) -> &[u8] {
        &self.point
    }
    fn algorithm(&self) -> &'static SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

impl SigningKey for Key {
    // RFC 6979 nonces keep output a function of the seed; S is lowered as cryptogen's ECDSASigner does,
    // because Fabric only accepts low-S signatures.
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        let sig: p256::ecdsa::Signature = self.signing.sign(msg);
        let sig = sig.normalize_s().unwrap_or(sig);
        Ok(sig.to_der().as_bytes().to_vec())
    }
}

/// Subject attributes a CA passes on to every certificate it issues (cryptogen's `CA` fields).
#[derive(Debug, Clone, Default)]
struct SubjectBase {
    country: String,
    province: String,
    locality: String,
    organizational_unit: String,
    street_address: String,
    postal_code: String,
}

/// Go's `encoding/asn1` writes a PrintableString when it can and a UTF8String otherwise (e.g. CNs with
/// `@`); doing the same keeps subjects byte-identical to cryptogen's.
fn dn_value(s: &str) -> DnValue {
    match rcgen::string::PrintableString::try_from(s) {
        Ok(p) => DnValue::PrintableString(p),
        Err(_) => DnValue::Utf8String(s.to_string()),
    }
}

const OID_OU: [u64; 4] = [2, 5, 4, 11];
const OID_STREET: [u64; 4] = [2, 5, 4, 9];
const OID_POSTAL_CODE: [u64; 4] = [2, 5, 4, 17];

impl SubjectBase {
    /// A subject in Go `pkix.Name` order: C, ST, L, street, postalCode, O, OU..., CN (defaults US /
    /// California / San Francisco).
    fn name(&self, organization: Option<&str>, extra_ous: &[&str], cn: &str) -> DistinguishedName {
        let or = |v: &str, d: &'static str| if v.is_empty() { d.to_string() } else { v.to_string() };
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CountryName, dn_value(&or(&self.country, "US")));
        dn.push(DnType::StateOrProvinceName, dn_value(&or(&self.province, "California")));
        dn.push(DnType::LocalityName, dn_value(&or(&self.locality, "San Francisco")));
        if !self.street_address.is_empty() {
            dn.push(DnType::CustomDnType(OID_STREET.to_vec()), dn_value(&self.street_address));
        }
        if !self.postal_code.is_empty() {
            dn.push(DnType::CustomDnType(OID_POSTAL_CODE.to_vec()), dn_value(&self.postal_code));
        }
        if let Some(o) = organization {
            dn.push(DnType::OrganizationName, dn_value(o));
        }
        let mut ous: Vec<&str> = Vec::new();
        if !self.organizational_unit.is_empty() {
            ous.push(&self.organizational_unit);
        }
        ous.extend_from_slice(extra_ous);
        for (i, ou) in ous.into_iter().enumerate() {
            // rcgen keeps one value per attribute type; a second OU goes in under the same OID as a
            // custom type, i.e. as its own RDN (Go would put both in one multi-valued RDN).
            let ty = if i == 0 { DnType::OrganizationalUnitName } else { DnType::CustomDnType(OID_OU.to_vec()) };
            dn.push(ty, dn_value(ou));
        }
        dn.push(DnType::CommonName, dn_value(cn));
        dn
    }
}

/// Shared state of one generation run.
struct Generator {
    rng: StdRng,
    not_before_time: SystemTime,
}

impl Generator {
    fn serial(&mut self) -> SerialNumber {
        // cryptogen draws a uniform 128-bit serial.
        let mut bytes = vec![0u8; 16];
        self.rng.fill_bytes(&mut bytes);
        SerialNumber::from(bytes)
    }

    fn validity(&self, params: &mut CertificateParams) -> Result<(), CryptogenError> {
        let secs = self
            .not_before_time
            .duration_since(UNIX_EPOCH)
            .map_err(|_| CryptogenError::Config("not_before is before 1970".into()))?;
        let epoch = rcgen::date_time_ymd(1970, 1, 1);
        params.not_before = epoch + Duration::from_secs(secs.as_secs());
        params.not_after = params.not_before + VALIDITY;
        Ok(())
    }
}

/// A self-signed CA of one organisation (signing or TLS).
#[derive(Clone)]
pub struct Ca {
    common_name: String,
    cert_pem: String,
    key_pem: String,
    key: Key,
    params: CertificateParams,
    subject: SubjectBase,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").field("common_name", &self.common_name).finish_non_exhaustive()
    }
}

fn cert_err(e: rcgen::Error) -> CryptogenError {
    CryptogenError::Certificate(e.to_string())
}

impl Ca {
    /// cryptogen's CA profile: KU digitalSignature|keyEncipherment|keyCertSign|cRLSign (critical), EKU
    /// clientAuth+serverAuth, BasicConstraints CA:TRUE (critical), SKI = SHA-256(point); subject
    /// C/ST/L[/street/postalCode]/O=domain[/OU]/CN.
    fn generate(g: &mut Generator, domain: &str, cn: &str, subject: SubjectBase) -> Result<Ca, CryptogenError> {
        let key = Key::generate(&mut g.rng);
        let mut params = CertificateParams::default();
        g.validity(&mut params)?;
        params.serial_number = Some(g.serial());
        params.distinguished_name = subject.name(Some(domain), &[], cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth, ExtendedKeyUsagePurpose::ServerAuth];
        params.key_identifier_method = KeyIdMethod::PreSpecified(key.ski());
        let cert = params.self_signed(&key).map_err(cert_err)?;
        Ok(Ca { common_name: cn.to_string(), cert_pem: cert.pem(), key_pem: key.pkcs8_pem()?, key, params, subject })
    }

    /// Issues a leaf (cryptogen's `SignCertificate`): BasicConstraints CA:FALSE (critical), AKI = this CA's
    /// SKI, no SKI, subject C/ST/L[/street/postalCode][/OU...]/CN. Without `tls_sans`: KU digitalSignature,
    /// no EKU (an MSP signing certificate). With them: KU digitalSignature|keyEncipherment, EKU
    /// serverAuth+clientAuth and the SANs (IP literals as IP addresses, the rest as DNS names).
    fn issue(
        &self,
        g: &mut Generator,
        cn: &str,
        ous: &[&str],
        tls_sans: Option<&[String]>,
    ) -> Result<(String, Key), CryptogenError> {
        let key = Key::generate(&mut g.rng);
        let mut params = CertificateParams::default();
        g.validity(&mut params)?;
        params.serial_number = Some(g.serial());
        params.distinguished_name = self.subject.name(None, ous, cn);
        // rcgen's ExplicitNoCa would add an SKI, which cryptogen leaves do not have, so BasicConstraints{}
        // is written by hand: critical, an empty SEQUENCE.
        params.is_ca = IsCa::NoCa;
        let mut bc = CustomExtension::from_oid_content(&[2, 5, 29, 19], vec![0x30, 0x00]);
        bc.set_criticality(true);
        params.custom_extensions = vec![bc];
        params.use_authority_key_identifier_extension = true;
        params.key_identifier_method = KeyIdMethod::PreSpecified(Vec::new());
        match tls_sans {
            None => params.key_usages = vec![KeyUsagePurpose::DigitalSignature],
            Some(sans) => {
                params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
                params.extended_key_usages =
                    vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
                params.subject_alt_names = sans
                    .iter()
                    .map(|s| match s.parse::<std::net::IpAddr>() {
                        Ok(ip) => Ok(SanType::IpAddress(ip)),
                        Err(_) => s.clone().try_into().map(SanType::DnsName),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| CryptogenError::Certificate(format!("{cn}: SAN: {e}")))?;
            }
        }
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(cert_err)?;
        Ok((cert.pem(), key))
    }

    /// The CA's common name, e.g. `ca.org1.example.com` or `tlsca.org1.example.com`; its files are
    /// `<common name>-cert.pem` and `priv_sk`.
    pub fn common_name(&self) -> &str {
        &self.common_name
    }

    /// The self-signed certificate, PEM (`CERTIFICATE`, LF line endings).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key, PKCS#8 PEM (`PRIVATE KEY`).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

/// One enrolled member (node or user): its MSP signing certificate and its TLS certificate, with keys.
#[derive(Debug, Clone)]
pub struct Member {
    common_name: String,
    role: NodeRole,
    cert_pem: String,
    key_pem: String,
    tls_cert_pem: String,
    tls_key_pem: String,
}

impl Member {
    /// cryptogen's `GenerateLocalMSP`: signing key and certificate (OU = the role's NodeOU when NodeOUs are
    /// on), then TLS key and certificate. Draw order (key, serial, TLS key, TLS serial) is cryptogen's.
    fn generate(
        g: &mut Generator,
        ca: &Ca,
        tlsca: &Ca,
        node: &RenderedNode,
        role: NodeRole,
        node_ous: bool,
    ) -> Result<Member, CryptogenError> {
        let ous: &[&str] = if node_ous { &[role.ou()] } else { &[] };
        let (cert_pem, key) = ca.issue(g, &node.common_name, ous, None)?;
        let (tls_cert_pem, tls_key) = tlsca.issue(g, &node.common_name, &[], Some(&node.sans))?;
        Ok(Member {
            common_name: node.common_name.clone(),
            role,
            cert_pem,
            key_pem: key.pkcs8_pem()?,
            tls_cert_pem,
            tls_key_pem: tls_key.pkcs8_pem()?,
        })
    }

    /// The certificate CN and directory name, e.g. `peer0.org1.example.com` or `User1@org1.example.com`.
    pub fn common_name(&self) -> &str {
        &self.common_name
    }

    /// The role the certificate was issued for.
    pub fn role(&self) -> NodeRole {
        self.role
    }

    /// MSP signing certificate (`msp/signcerts/<CN>-cert.pem`), PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// MSP signing key (`msp/keystore/priv_sk`), PKCS#8 PEM.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// TLS certificate (`tls/server.crt` or `tls/client.crt`), PEM.
    pub fn tls_cert_pem(&self) -> &str {
        &self.tls_cert_pem
    }

    /// TLS key (`tls/server.key` or `tls/client.key`), PKCS#8 PEM.
    pub fn tls_key_pem(&self) -> &str {
        &self.tls_key_pem
    }

    /// The member as a signing identity of MSP `mspid` (creator bytes carry the certificate PEM).
    ///
    /// Errors: [`CryptogenError::Identity`] if the MSP crate rejects the pair (a bug, not an input error).
    pub fn signing_identity(&self, mspid: &str) -> Result<SigningIdentity, CryptogenError> {
        SigningIdentity::from_pem(mspid, self.cert_pem.as_bytes(), self.key_pem.as_bytes())
            .map_err(|e| CryptogenError::Identity(format!("{}: {e}", self.common_name)))
    }
}

/// One generated organisation: its CAs, nodes and users.
#[derive(Debug, Clone)]
pub struct Org {
    kind: OrgKind,
    name: String,
    domain: String,
    node_ous: bool,
    ca: Ca,
    tlsca: Ca,
    nodes: Vec<Member>,
    users: Vec<Member>,
}

impl Org {
    fn generate(g: &mut Generator, spec: &OrgSpec, kind: OrgKind) -> Result<Org, CryptogenError> {
        check_component(&spec.domain, "Domain")?;
        let rendered = render_org(spec, kind.prefix())?;
        let NodeSpec { country, province, locality, organizational_unit, street_address, postal_code, .. } =
            rendered.ca.clone();
        let subject = SubjectBase { country, province, locality, organizational_unit, street_address, postal_code };
        let ca_cn = rendered.ca.common_name.clone();
        check_component(&ca_cn, "CA CommonName")?;
        let ca = Ca::generate(g, &spec.domain, &ca_cn, subject.clone())?;
        let tlsca = Ca::generate(g, &spec.domain, &format!("tls{ca_cn}"), subject)?;

        let node_role = match kind {
            OrgKind::Peer => NodeRole::Peer,
            OrgKind::Orderer => NodeRole::Orderer,
        };
        let mut seen = BTreeSet::new();
        let mut nodes = Vec::with_capacity(rendered.nodes.len());
        for node in &rendered.nodes {
            check_component(&node.common_name, "node CommonName")?;
            if !seen.insert(node.common_name.clone()) {
                return Err(CryptogenError::Config(format!("node {} is defined twice", node.common_name)));
            }
            nodes.push(Member::generate(g, &ca, &tlsca, node, node_role, spec.enable_node_ous)?);
        }
        // Users, then Admin, as cryptogen orders them; orderer organisations only get Admin.
        let user_count = if kind == OrgKind::Peer { spec.users.count } else { 0 };
        let mut users = Vec::with_capacity(user_count as usize + 1);
        for j in 1..=user_count {
            let user = RenderedNode { common_name: format!("User{j}@{}", spec.domain), sans: Vec::new() };
            users.push(Member::generate(g, &ca, &tlsca, &user, NodeRole::Client, spec.enable_node_ous)?);
        }
        // Without NodeOUs the admin's certificate carries no OU; admincerts folders name it instead.
        let admin = RenderedNode { common_name: format!("Admin@{}", spec.domain), sans: Vec::new() };
        users.push(Member::generate(g, &ca, &tlsca, &admin, NodeRole::Admin, spec.enable_node_ous)?);

        Ok(Org {
            kind,
            name: spec.name.clone(),
            domain: spec.domain.clone(),
            node_ous: spec.enable_node_ous,
            ca,
            tlsca,
            nodes,
            users,
        })
    }

    /// Peer or orderer organisation.
    pub fn kind(&self) -> OrgKind {
        self.kind
    }

    /// `Name` from the config.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `Domain` from the config (the organisation's directory name).
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// Whether NodeOUs are enabled (`EnableNodeOUs`).
    pub fn node_ous(&self) -> bool {
        self.node_ous
    }

    /// The signing CA (`ca/`, `msp/cacerts/`).
    pub fn ca(&self) -> &Ca {
        &self.ca
    }

    /// The TLS CA (`tlsca/`, `msp/tlscacerts/`).
    pub fn tlsca(&self) -> &Ca {
        &self.tlsca
    }

    /// Peers or orderers, explicit `Specs` first, then the `Template`'s.
    pub fn nodes(&self) -> &[Member] {
        &self.nodes
    }

    /// `User1@<domain>` ... `UserN@<domain>`, then `Admin@<domain>` (always last).
    pub fn users(&self) -> &[Member] {
        &self.users
    }

    /// `Admin@<domain>`.
    pub fn admin(&self) -> &Member {
        // `generate` always pushes the admin last.
        &self.users[self.users.len() - 1]
    }

    /// The node or user with this common name.
    pub fn member(&self, common_name: &str) -> Option<&Member> {
        self.nodes.iter().chain(&self.users).find(|m| m.common_name == common_name)
    }

    /// The verifying `MSPConfig` (type FABRIC) that Fabric's `GetVerifyingMspConfig` builds from this
    /// organisation's `msp/` folder, as configtxgen puts it in a channel config: root CA, TLS root CA,
    /// SHA2/SHA256 crypto config, and with NodeOUs the four OU identifiers certified by the root CA,
    /// otherwise `Admin@<domain>` in `admins`.
    pub fn msp_config(&self, mspid: &str) -> MspConfig {
        let ca = Bytes::from(self.ca.cert_pem.clone().into_bytes());
        let ou = |name: &str| {
            Some(FabricOuIdentifier { certificate: ca.clone(), organizational_unit_identifier: name.to_string() })
        };
        let mut fabric = FabricMspConfig {
            name: mspid.to_string(),
            root_certs: vec![ca.clone()],
            crypto_config: Some(FabricCryptoConfig {
                signature_hash_family: "SHA2".to_string(),
                identity_identifier_hash_function: "SHA256".to_string(),
            }),
            tls_root_certs: vec![Bytes::from(self.tlsca.cert_pem.clone().into_bytes())],
            ..Default::default()
        };
        if self.node_ous {
            fabric.fabric_node_ous = Some(FabricNodeOUs {
                enable: true,
                client_ou_identifier: ou(NodeRole::Client.ou()),
                peer_ou_identifier: ou(NodeRole::Peer.ou()),
                admin_ou_identifier: ou(NodeRole::Admin.ou()),
                orderer_ou_identifier: ou(NodeRole::Orderer.ou()),
            });
        } else {
            fabric.admins = vec![Bytes::from(self.admin().cert_pem.clone().into_bytes())];
        }
        MspConfig { r#type: 0, config: Bytes::from(fabric.encode_to_vec()) }
    }
}

/// Names that become directory names must be one plain path component.
fn check_component(name: &str, what: &str) -> Result<(), CryptogenError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
        return Err(CryptogenError::Config(format!("{what} {name:?} cannot be used as a directory name")));
    }
    Ok(())
}

/// All generated material of a crypto-config, in cryptogen's order: peer organisations, then orderer
/// organisations.
#[derive(Debug, Clone)]
pub struct Crypto {
    orgs: Vec<Org>,
}

/// cryptogen's default validity start: now rounded to the nearest minute, minus five minutes.
fn default_not_before() -> SystemTime {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let rounded = (now.as_secs() + 30) / 60 * 60;
    UNIX_EPOCH + Duration::from_secs(rounded.saturating_sub(300))
}

impl Crypto {
    /// Generates every CA, node and user of `config` (Fabric `cryptogen generate`), in memory.
    ///
    /// Errors: [`CryptogenError::Config`] (a name used twice or unusable as a directory name),
    /// [`CryptogenError::Template`], [`CryptogenError::Certificate`] (e.g. a non-ASCII DNS SAN).
    pub fn generate(config: &CryptoConfig, options: &GenerateOptions) -> Result<Crypto, CryptogenError> {
        let rng = match options.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_entropy(),
        };
        let not_before_time = options.not_before.unwrap_or_else(default_not_before);
        let mut g = Generator { rng, not_before_time };
        let mut orgs = Vec::with_capacity(config.peer_orgs.len() + config.orderer_orgs.len());
        let mut domains = BTreeSet::new();
        for (spec, kind) in config
            .peer_orgs
            .iter()
            .map(|s| (s, OrgKind::Peer))
            .chain(config.orderer_orgs.iter().map(|s| (s, OrgKind::Orderer)))
        {
            if !domains.insert((kind.dir_name(), spec.domain.clone())) {
                return Err(CryptogenError::Config(format!("organisation domain {} is defined twice", spec.domain)));
            }
            orgs.push(Org::generate(&mut g, spec, kind)?);
        }
        Ok(Crypto { orgs })
    }

    /// The organisations, peer organisations first.
    pub fn orgs(&self) -> &[Org] {
        &self.orgs
    }

    /// The organisation with this domain (peer organisations are searched first).
    pub fn org(&self, domain: &str) -> Option<&Org> {
        self.orgs.iter().find(|o| o.domain == domain)
    }
}
