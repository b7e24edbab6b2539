//! Writing generated material in cryptogen's directory layout (Fabric `cmd/cryptogen/main.go`
//! `generatePeerOrg` / `generateOrdererOrg`, `internal/cryptogen/msp/msp.go` `GenerateLocalMSP` /
//! `GenerateVerifyingMSP`).

use std::path::{Path, PathBuf};

use crate::generate::{Crypto, Member, NodeRole, Org, OrgKind};
use crate::CryptogenError;

/// The `config.yaml` cryptogen writes into every MSP folder of a NodeOU organisation: NodeOUs enabled, all
/// four OU identifiers certified by `cacerts/<ca_file>` (byte-identical to cryptogen's YAML).
pub(crate) fn node_ou_config_yaml(ca_file: &str) -> String {
    let mut s = String::from("NodeOUs:\n  Enable: true\n");
    for (key, role) in [
        ("ClientOUIdentifier", NodeRole::Client),
        ("PeerOUIdentifier", NodeRole::Peer),
        ("AdminOUIdentifier", NodeRole::Admin),
        ("OrdererOUIdentifier", NodeRole::Orderer),
    ] {
        s.push_str(&format!(
            "  {key}:\n    Certificate: cacerts/{ca_file}\n    OrganizationalUnitIdentifier: {}\n",
            role.ou()
        ));
    }
    s
}

fn mkdir(path: &Path) -> Result<(), CryptogenError> {
    std::fs::create_dir_all(path).map_err(|e| CryptogenError::io(path, e))
}

fn write(path: &Path, contents: &str) -> Result<(), CryptogenError> {
    if let Some(parent) = path.parent() {
        mkdir(parent)?;
    }
    std::fs::write(path, contents).map_err(|e| CryptogenError::io(path, e))
}

/// Private keys are written owner-only (0600), as cryptogen does.
fn write_key(path: &Path, pem: &str) -> Result<(), CryptogenError> {
    write(path, pem)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| CryptogenError::io(path, e))?;
    }
    Ok(())
}

fn cert_file(common_name: &str) -> String {
    format!("{common_name}-cert.pem")
}

impl Org {
    /// This organisation's directory under an output root: `<root>/peerOrganizations/<domain>` or
    /// `<root>/ordererOrganizations/<domain>`.
    pub fn dir(&self, root: &Path) -> PathBuf {
        root.join(self.kind().dir_name()).join(self.domain())
    }

    /// The home directory of one member: `<org dir>/{peers,orderers,users}/<common name>` (its `msp/` and
    /// `tls/` are below it).
    pub fn member_dir(&self, root: &Path, member: &Member) -> PathBuf {
        let sub = match (member.role().is_node(), self.kind()) {
            (true, OrgKind::Peer) => "peers",
            (true, OrgKind::Orderer) => "orderers",
            (false, _) => "users",
        };
        self.dir(root).join(sub).join(member.common_name())
    }

    /// The folders every MSP of this organisation shares: `admincerts/` (created even when empty), the CA
    /// in `cacerts/`, the TLS CA in `tlscacerts/`, and `config.yaml` with NodeOUs.
    fn write_msp_common(&self, msp: &Path) -> Result<(), CryptogenError> {
        let ca_file = cert_file(self.ca().common_name());
        mkdir(&msp.join("admincerts"))?;
        write(&msp.join("cacerts").join(&ca_file), self.ca().cert_pem())?;
        write(&msp.join("tlscacerts").join(cert_file(self.tlsca().common_name())), self.tlsca().cert_pem())?;
        if self.node_ous() {
            write(&msp.join("config.yaml"), &node_ou_config_yaml(&ca_file))?;
        }
        Ok(())
    }

    /// Writes this organisation's tree under `root` (see [`Crypto::write`]).
    ///
    /// Errors: [`CryptogenError::Io`] naming the path that failed.
    pub fn write(&self, root: &Path) -> Result<(), CryptogenError> {
        let base = self.dir(root);
        for (sub, ca) in [("ca", self.ca()), ("tlsca", self.tlsca())] {
            write(&base.join(sub).join(cert_file(ca.common_name())), ca.cert_pem())?;
            write_key(&base.join(sub).join("priv_sk"), ca.key_pem())?;
        }
        let admin = self.admin();
        let org_msp = base.join("msp");
        self.write_msp_common(&org_msp)?;
        if !self.node_ous() {
            write(&org_msp.join("admincerts").join(cert_file(admin.common_name())), admin.cert_pem())?;
        }
        for member in self.nodes().iter().chain(self.users()) {
            let home = self.member_dir(root, member);
            let msp = home.join("msp");
            self.write_msp_common(&msp)?;
            write(&msp.join("signcerts").join(cert_file(member.common_name())), member.cert_pem())?;
            write_key(&msp.join("keystore").join("priv_sk"), member.key_pem())?;
            if !self.node_ous() {
                // Nodes trust the organisation's admin; a user's MSP lists the user itself.
                let listed = if member.role().is_node() { admin } else { member };
                write(&msp.join("admincerts").join(cert_file(listed.common_name())), listed.cert_pem())?;
            }
            let tls = home.join("tls");
            let stem = if member.role().is_node() { "server" } else { "client" };
            write(&tls.join("ca.crt"), self.tlsca().cert_pem())?;
            write(&tls.join(format!("{stem}.crt")), member.tls_cert_pem())?;
            write_key(&tls.join(format!("{stem}.key")), member.tls_key_pem())?;
        }
        Ok(())
    }
}

impl Crypto {
    /// Writes cryptogen's layout under `root`, for each organisation `<root>/{peer,orderer}Organizations/
    /// <domain>/` with `ca/` and `tlsca/` (`<CN>-cert.pem`, `priv_sk`), the verifying `msp/` (`admincerts/`,
    /// `cacerts/`, `tlscacerts/`, NodeOU `config.yaml`), and per node or user `{peers,orderers,users}/<CN>/`
    /// holding `msp/` (the same plus `signcerts/<CN>-cert.pem`, `keystore/priv_sk`) and `tls/` (`ca.crt`,
    /// `server.{crt,key}` for nodes, `client.{crt,key}` for users). Existing files are overwritten.
    ///
    /// Errors: [`CryptogenError::Io`] naming the path that failed.
    pub fn write(&self, root: &Path) -> Result<(), CryptogenError> {
        self.orgs().iter().try_for_each(|org| org.write(root))
    }
}
