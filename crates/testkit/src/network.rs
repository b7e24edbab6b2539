//! A generated three-org network (Org1MSP, Org2MSP, OrdererMSP) whose
//! certificates follow cryptogen's profiles (fabric `internal/cryptogen/ca`
//! and `internal/cryptogen/msp`), so Fabric's MSP and NodeOU rules treat our
//! identities exactly like the fixture's, while we also hold every private key.

use std::path::Path;

use bytes::Bytes;
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

use crate::{SigningIdentity, TestkitError};

/// Index of the orderer organisation in [`Network::admin`] and
/// [`Network::mspid`]; peer organisations are `0` (Org1MSP) and `1` (Org2MSP).
pub const ORDERER_ORG: usize = 2;

/// Channel the network's genesis block defines.
pub const CHANNEL_ID: &str = "mychannel";

/// Number of peer organisations.
pub const PEER_ORGS: usize = 2;

/// A P-256 key usable both by rcgen (to sign certificates) and for PEM export.
struct Key {
    secret: p256::SecretKey,
    signing: p256::ecdsa::SigningKey,
    /// Uncompressed SEC1 point (65 bytes), which is what X.509 SPKI carries.
    point: Vec<u8>,
}

impl Key {
    fn generate(rng: &mut StdRng) -> Key {
        let secret = p256::SecretKey::random(rng);
        let point = secret.public_key().to_encoded_point(false).as_bytes().to_vec();
        Key { signing: p256::ecdsa::SigningKey::from(&secret), secret, point }
    }

    /// cryptogen's key identifier: SHA-256 of the uncompressed point
    /// (32 bytes, not RFC 5280's SHA-1).
    fn ski(&self) -> Vec<u8> {
        Sha256::digest(&self.point).to_vec()
    }

    /// PKCS#8 PEM with LF line endings, the shape of cryptogen's `priv_sk`.
    fn pkcs8_pem(&self) -> Result<String, TestkitError> {
        let pem = self
            .secret
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| TestkitError::Certificate(format!("PKCS#8 encoding: {e}")))?;
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
    // RFC 6979 signing keeps certificates byte-identical for a given seed.
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        let sig: p256::ecdsa::Signature = self.signing.sign(msg);
        Ok(sig.to_der().as_bytes().to_vec())
    }
}

/// The role a leaf certificate is issued for; it selects the NodeOU and
/// file names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Peer,
    Orderer,
    Client,
    Admin,
}

impl Role {
    fn ou(self) -> &'static str {
        match self {
            Role::Peer => "peer",
            Role::Orderer => "orderer",
            Role::Client => "client",
            Role::Admin => "admin",
        }
    }
    fn is_node(self) -> bool {
        matches!(self, Role::Peer | Role::Orderer)
    }
}

/// A self-signed CA (signing or TLS) of one organisation.
struct Ca {
    /// Common name, e.g. `ca.org1.example.com`.
    name: String,
    key: Key,
    params: CertificateParams,
    cert_pem: String,
}

/// One enrolled member: MSP signing cert + TLS cert, both with keys.
struct Member {
    /// Common name, e.g. `peer0.org1.example.com` or `User1@org1.example.com`.
    name: String,
    role: Role,
    cert_pem: String,
    key_pem: String,
    tls_cert_pem: String,
    tls_key_pem: String,
    identity: SigningIdentity,
}

/// One organisation: its two CAs and members.
struct Org {
    mspid: String,
    /// `org1.example.com`, or `example.com` for the orderer org.
    domain: String,
    is_orderer: bool,
    ca: Ca,
    tlsca: Ca,
    /// peer0 or orderer.
    node: Member,
    admin: Member,
    /// User1 (peer orgs only).
    user: Option<Member>,
}

/// A generated Fabric network: Org1MSP and Org2MSP (peer0, User1 and Admin
/// each) and OrdererMSP (orderer and Admin), every member with an ECDSA
/// P-256 key and a cryptogen-style certificate carrying its NodeOU
/// (`peer`, `client`, `admin`, `orderer`), plus TLS CAs and TLS certificates.
///
/// Organisation indices: `0` = Org1MSP, `1` = Org2MSP, [`ORDERER_ORG`] = OrdererMSP.
pub struct Network {
    orgs: Vec<Org>,
    genesis: Bytes,
}

/// Sets the validity window of every certificate. Fabric's MSP ignores
/// expiry when validating (it checks chains as of the cert's NotBefore), so
/// a fixed window keeps the output a pure function of the seed.
fn set_validity(params: &mut CertificateParams) {
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2035, 1, 1);
}

/// Go's `encoding/asn1` writes a PrintableString when every byte is in that
/// set and a UTF8String otherwise (e.g. CNs containing `@`); mirror it so our
/// subjects encode like cryptogen's.
fn dn_value(s: &str) -> DnValue {
    match rcgen::string::PrintableString::try_from(s) {
        Ok(p) => DnValue::PrintableString(p),
        Err(_) => DnValue::Utf8String(s.to_string()),
    }
}

/// C/ST/L prefix shared by all cryptogen subjects.
fn base_dn() -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CountryName, dn_value("US"));
    dn.push(DnType::StateOrProvinceName, dn_value("California"));
    dn.push(DnType::LocalityName, dn_value("San Francisco"));
    dn
}

fn serial(rng: &mut StdRng) -> SerialNumber {
    // cryptogen draws a random 128-bit serial.
    let mut bytes = vec![0u8; 16];
    rng.fill_bytes(&mut bytes);
    SerialNumber::from(bytes)
}

fn cert_err(e: rcgen::Error) -> TestkitError {
    TestkitError::Certificate(e.to_string())
}

impl Ca {
    /// cryptogen's CA profile: KU digitalSignature|keyEncipherment|certSign|
    /// cRLSign (critical), EKU clientAuth+serverAuth, BasicConstraints CA:TRUE
    /// (critical), SKI = SHA-256(point); subject C/ST/L/O/CN.
    fn generate(rng: &mut StdRng, org_domain: &str, cn: &str) -> Result<Ca, TestkitError> {
        let key = Key::generate(rng);
        let mut params = CertificateParams::default();
        set_validity(&mut params);
        params.serial_number = Some(serial(rng));
        let mut dn = base_dn();
        dn.push(DnType::OrganizationName, dn_value(org_domain));
        dn.push(DnType::CommonName, dn_value(cn));
        params.distinguished_name = dn;
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
        Ok(Ca { name: cn.to_string(), key, params, cert_pem: cert.pem() })
    }

    /// Issues a leaf: KU (critical) as given, optional EKU, BasicConstraints
    /// CA:FALSE (critical), AKI = this CA's SKI, no SKI; subject C/ST/L[/OU]/CN.
    fn issue(
        &self,
        rng: &mut StdRng,
        cn: &str,
        ou: Option<&str>,
        tls_sans: Option<Vec<String>>,
    ) -> Result<(String, Key), TestkitError> {
        let key = Key::generate(rng);
        let mut params = CertificateParams::default();
        set_validity(&mut params);
        params.serial_number = Some(serial(rng));
        let mut dn = base_dn();
        if let Some(ou) = ou {
            dn.push(DnType::OrganizationalUnitName, dn_value(ou));
        }
        dn.push(DnType::CommonName, dn_value(cn));
        params.distinguished_name = dn;
        // rcgen's ExplicitNoCa would add an SKI cryptogen leaves do not have,
        // so BasicConstraints{} is written by hand: critical, empty SEQUENCE.
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
                    .into_iter()
                    .map(|s| match s.parse::<std::net::IpAddr>() {
                        Ok(ip) => Ok(SanType::IpAddress(ip)),
                        Err(_) => s.try_into().map(SanType::DnsName),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(cert_err)?;
            }
        }
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(cert_err)?;
        Ok((cert.pem(), key))
    }
}

impl Member {
    fn generate(
        rng: &mut StdRng,
        mspid: &str,
        ca: &Ca,
        tlsca: &Ca,
        name: &str,
        role: Role,
    ) -> Result<Member, TestkitError> {
        let (cert_pem, key) = ca.issue(rng, name, Some(role.ou()), None)?;
        // Nodes get server SANs like cryptogen's `SANS: [localhost, 127.0.0.1]`
        // template; users get a SAN-less client certificate.
        let sans = if role.is_node() {
            let short = name.split('.').next().unwrap_or(name).to_string();
            vec![name.to_string(), short, "localhost".to_string(), "127.0.0.1".to_string()]
        } else {
            Vec::new()
        };
        let (tls_cert_pem, tls_key) = tlsca.issue(rng, name, None, Some(sans))?;
        let key_pem = key.pkcs8_pem()?;
        let identity = SigningIdentity::from_pem(mspid, cert_pem.as_bytes(), key_pem.as_bytes())
            .map_err(|e| TestkitError::Identity(format!("{name}: {e}")))?;
        Ok(Member {
            name: name.to_string(),
            role,
            cert_pem,
            key_pem,
            tls_cert_pem,
            tls_key_pem: tls_key.pkcs8_pem()?,
            identity,
        })
    }
}

impl Org {
    fn generate(rng: &mut StdRng, mspid: &str, domain: &str, is_orderer: bool) -> Result<Org, TestkitError> {
        let ca = Ca::generate(rng, domain, &format!("ca.{domain}"))?;
        let tlsca = Ca::generate(rng, domain, &format!("tlsca.{domain}"))?;
        let (node_name, node_role) = if is_orderer {
            (format!("orderer.{domain}"), Role::Orderer)
        } else {
            (format!("peer0.{domain}"), Role::Peer)
        };
        let node = Member::generate(rng, mspid, &ca, &tlsca, &node_name, node_role)?;
        let admin = Member::generate(rng, mspid, &ca, &tlsca, &format!("Admin@{domain}"), Role::Admin)?;
        let user = if is_orderer {
            None
        } else {
            Some(Member::generate(rng, mspid, &ca, &tlsca, &format!("User1@{domain}"), Role::Client)?)
        };
        Ok(Org { mspid: mspid.to_string(), domain: domain.to_string(), is_orderer, ca, tlsca, node, admin, user })
    }

    /// The FabricMSPConfig configtxgen writes for a NodeOU-enabled
    /// cryptogen org (fabric `msp/configbuilder.go`): one root CA, one TLS
    /// root, no admin certs (admins are recognised by OU), NodeOU
    /// identifiers pointing at the root CA, SHA2/SHA256 crypto config.
    fn msp_config(&self) -> MspConfig {
        let ca = Bytes::from(self.ca.cert_pem.clone().into_bytes());
        let ou = |name: &str| {
            Some(FabricOuIdentifier { certificate: ca.clone(), organizational_unit_identifier: name.to_string() })
        };
        let fabric = FabricMspConfig {
            name: self.mspid.clone(),
            root_certs: vec![ca.clone()],
            crypto_config: Some(FabricCryptoConfig {
                signature_hash_family: "SHA2".to_string(),
                identity_identifier_hash_function: "SHA256".to_string(),
            }),
            tls_root_certs: vec![Bytes::from(self.tlsca.cert_pem.clone().into_bytes())],
            fabric_node_ous: Some(FabricNodeOUs {
                enable: true,
                client_ou_identifier: ou("client"),
                peer_ou_identifier: ou("peer"),
                admin_ou_identifier: ou("admin"),
                orderer_ou_identifier: ou("orderer"),
            }),
            ..Default::default()
        };
        MspConfig {
            r#type: 0, // FABRIC
            config: Bytes::from(fabric.encode_to_vec()),
        }
    }

    fn members(&self) -> impl Iterator<Item = &Member> {
        std::iter::once(&self.node).chain(std::iter::once(&self.admin)).chain(self.user.iter())
    }
}

impl Network {
    /// Generates all keys and certificates from `seed` (a ChaCha-based
    /// `StdRng`; certificate signatures are RFC 6979), so the same seed
    /// always yields byte-identical certificates, keys and genesis block.
    ///
    /// Errors: [`TestkitError::Certificate`] / [`TestkitError::Identity`] if
    /// rcgen or the MSP crate rejects the generated material, or
    /// [`TestkitError::Genesis`] if the embedded fixture block cannot be
    /// re-keyed (all bugs, not input errors).
    pub fn generate(seed: u64) -> Result<Network, TestkitError> {
        let mut rng = StdRng::seed_from_u64(seed);
        let orgs = vec![
            Org::generate(&mut rng, "Org1MSP", "org1.example.com", false)?,
            Org::generate(&mut rng, "Org2MSP", "org2.example.com", false)?,
            Org::generate(&mut rng, "OrdererMSP", "example.com", true)?,
        ];
        let mut net = Network { orgs, genesis: Bytes::new() };
        net.genesis = crate::genesis::patched_genesis(&net)?;
        Ok(net)
    }

    /// The fixture's configtxgen genesis block of `mychannel` (Fabric
    /// 2.5.16) with the three `MSP` values (root CA, TLS root CA, NodeOU
    /// certificates) replaced by this network's, everything else (policies,
    /// capabilities, batch size, etcdraft consenters and their TLS certs,
    /// channel header, unsigned envelope) byte-for-byte unchanged, and
    /// `header.data_hash` recomputed. Marshaled `common.Block` number 0.
    pub fn genesis_block(&self) -> Bytes {
        self.genesis.clone()
    }

    fn org(&self, org: usize) -> &Org {
        &self.orgs[org]
    }

    fn peer_org(&self, org: usize) -> &Org {
        assert!(org < PEER_ORGS, "peer org index {org} out of range 0..{PEER_ORGS}");
        &self.orgs[org]
    }

    /// The channel ID of [`Network::genesis_block`]: `mychannel`.
    pub fn channel_id(&self) -> &str {
        CHANNEL_ID
    }

    /// MSP ID of organisation `org` (`Org1MSP`, `Org2MSP`, `OrdererMSP`).
    ///
    /// # Panics
    /// If `org > ORDERER_ORG`.
    pub fn mspid(&self, org: usize) -> &str {
        &self.org(org).mspid
    }

    /// `peer0.org{org+1}.example.com` (OU `peer`) of peer org `org` (0 or 1).
    ///
    /// # Panics
    /// If `org >= PEER_ORGS`.
    pub fn peer(&self, org: usize) -> &SigningIdentity {
        &self.peer_org(org).node.identity
    }

    /// `User1@org{org+1}.example.com` (OU `client`) of peer org `org` (0 or 1).
    ///
    /// # Panics
    /// If `org >= PEER_ORGS`.
    pub fn client(&self, org: usize) -> &SigningIdentity {
        match &self.peer_org(org).user {
            Some(user) => &user.identity,
            // Peer orgs are always generated with User1.
            None => unreachable!("peer org without User1"),
        }
    }

    /// `Admin@<domain>` (OU `admin`) of organisation `org` (0, 1 or
    /// [`ORDERER_ORG`]).
    ///
    /// # Panics
    /// If `org > ORDERER_ORG`.
    pub fn admin(&self, org: usize) -> &SigningIdentity {
        &self.org(org).admin.identity
    }

    /// `orderer.example.com` (OU `orderer`), the block signer.
    pub fn orderer(&self) -> &SigningIdentity {
        &self.orgs[ORDERER_ORG].node.identity
    }

    /// The MSPConfig (type FABRIC) of organisation `org` as it appears in
    /// the genesis block's `MSP` config value: root CA, TLS root CA and the
    /// four NodeOU identifiers.
    ///
    /// # Panics
    /// If `org > ORDERER_ORG`.
    pub fn msp_config(&self, org: usize) -> MspConfig {
        self.org(org).msp_config()
    }

    /// PEM of organisation `org`'s signing root CA certificate.
    ///
    /// # Panics
    /// If `org > ORDERER_ORG`.
    pub fn ca_cert_pem(&self, org: usize) -> &str {
        &self.org(org).ca.cert_pem
    }

    /// Marshaled MSPConfig of the org called `mspid`, if it is ours.
    pub(crate) fn msp_config_by_id(&self, mspid: &str) -> Option<MspConfig> {
        self.orgs.iter().find(|o| o.mspid == mspid).map(Org::msp_config)
    }

    /// Writes cryptogen's directory layout under `dir`:
    /// `peerOrganizations/org{1,2}.example.com/` and
    /// `ordererOrganizations/example.com/`, each with `ca/`, `tlsca/`
    /// (certificate + `priv_sk`), the org `msp/` (cacerts, tlscacerts,
    /// config.yaml with NodeOUs), and per member
    /// `{peers,orderers,users}/<name>/msp/{cacerts,signcerts,keystore/priv_sk,tlscacerts,config.yaml}`
    /// plus `tls/{ca.crt,server.crt|client.crt,server.key|client.key}`.
    ///
    /// Errors: [`TestkitError::Io`] naming the path that failed.
    pub fn write_msp_dirs(&self, dir: &Path) -> Result<(), TestkitError> {
        for org in &self.orgs {
            let base = if org.is_orderer {
                dir.join("ordererOrganizations").join(&org.domain)
            } else {
                dir.join("peerOrganizations").join(&org.domain)
            };
            let ca_file = format!("{}-cert.pem", org.ca.name);
            let tlsca_file = format!("{}-cert.pem", org.tlsca.name);
            write(&base.join("ca").join(&ca_file), &org.ca.cert_pem)?;
            write(&base.join("ca").join("priv_sk"), &org.ca.key.pkcs8_pem()?)?;
            write(&base.join("tlsca").join(&tlsca_file), &org.tlsca.cert_pem)?;
            write(&base.join("tlsca").join("priv_sk"), &org.tlsca.key.pkcs8_pem()?)?;
            let config_yaml = node_ou_yaml(&ca_file);
            let write_msp = |msp: &Path| -> Result<(), TestkitError> {
                write(&msp.join("cacerts").join(&ca_file), &org.ca.cert_pem)?;
                write(&msp.join("tlscacerts").join(&tlsca_file), &org.tlsca.cert_pem)?;
                write(&msp.join("config.yaml"), &config_yaml)
            };
            write_msp(&base.join("msp"))?;
            for m in org.members() {
                let home = match m.role {
                    Role::Peer => base.join("peers").join(&m.name),
                    Role::Orderer => base.join("orderers").join(&m.name),
                    Role::Client | Role::Admin => base.join("users").join(&m.name),
                };
                let msp = home.join("msp");
                write_msp(&msp)?;
                write(&msp.join("signcerts").join(format!("{}-cert.pem", m.name)), &m.cert_pem)?;
                write(&msp.join("keystore").join("priv_sk"), &m.key_pem)?;
                let tls = home.join("tls");
                let stem = if m.role.is_node() { "server" } else { "client" };
                write(&tls.join("ca.crt"), &org.tlsca.cert_pem)?;
                write(&tls.join(format!("{stem}.crt")), &m.tls_cert_pem)?;
                write(&tls.join(format!("{stem}.key")), &m.tls_key_pem)?;
            }
        }
        Ok(())
    }
}

/// `config.yaml` enabling NodeOUs with all four OU identifiers certified by
/// `cacerts/<ca_file>`, as cryptogen writes it.
fn node_ou_yaml(ca_file: &str) -> String {
    let mut s = String::from("NodeOUs:\n  Enable: true\n");
    for (key, ou) in [
        ("ClientOUIdentifier", "client"),
        ("PeerOUIdentifier", "peer"),
        ("AdminOUIdentifier", "admin"),
        ("OrdererOUIdentifier", "orderer"),
    ] {
        s.push_str(&format!("  {key}:\n    Certificate: cacerts/{ca_file}\n    OrganizationalUnitIdentifier: {ou}\n"));
    }
    s
}

fn write(path: &Path, contents: &str) -> Result<(), TestkitError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| TestkitError::io(parent, e))?;
    }
    std::fs::write(path, contents).map_err(|e| TestkitError::io(path, e))
}
