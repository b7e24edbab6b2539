//! The node directory, [`Layout`]: what `ferrofabric node` generates on its first run and where every component
//! keeps its state.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use bytes::Bytes;
use ferrofabric_comm::{ClientTlsConfig, TlsConfig};
use ferrofabric_cryptogen::{Crypto, CryptoConfig, GenerateOptions, DEFAULT_CRYPTO_CONFIG};
use prost::Message;

/// The MSP IDs of the two peer organisations, in the order of the node's peers (Org1 first).
pub const PEER_MSPIDS: [&str; 2] = ["Org1MSP", "Org2MSP"];

/// Paths inside a node directory.
///
/// The node directory: what `ferrofabric node` generates on its first run and where every component keeps its
/// state.
///
/// ```text
/// DIR/crypto/                 cryptogen's layout (ferrofabric-cryptogen's default template: OrdererOrg example.com,
///                             Org1 and Org2 with peer0 and Admin@/User1@, NodeOUs on)
/// DIR/configtx.yaml           the configtxgen profile the channel was made from (kept for the user to read)
/// DIR/genesis.block           block 0 of the channel (ferrofabric-configtxgen)
/// DIR/orderer/                the orderer's ledger (FileLedger.Location), its Raft WAL and snapshots in etcdraft/
/// DIR/committer/              the committer's block store and state checkpoints
/// DIR/blockstore/             the block-store service's copy of the chain
/// DIR/tls-ca.pem              the TLS CA certificates of the three organisations (what a client trusts)
/// DIR/node.json, DIR/connection-profile.json   written when the node is ready (see NodeInfo)
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The node directory itself.
    pub dir: PathBuf,
}

impl Layout {
    /// The layout of `dir` (nothing is created).
    pub fn new(dir: impl Into<PathBuf>) -> Layout {
        Layout { dir: dir.into() }
    }

    /// `DIR/crypto`.
    pub fn crypto(&self) -> PathBuf {
        self.dir.join("crypto")
    }

    /// `DIR/genesis.block`.
    pub fn genesis(&self) -> PathBuf {
        self.dir.join("genesis.block")
    }

    /// `DIR/node.json`.
    pub fn node_json(&self) -> PathBuf {
        self.dir.join("node.json")
    }

    /// `DIR/connection-profile.json`.
    pub fn connection_profile(&self) -> PathBuf {
        self.dir.join("connection-profile.json")
    }

    /// `DIR/tls-ca.pem`: the TLS CA certificates of OrdererOrg, Org1 and Org2 in one PEM bundle, written when the
    /// node is ready; a client that trusts it can check every listener of the node.
    pub fn tls_ca_bundle(&self) -> PathBuf {
        self.dir.join("tls-ca.pem")
    }

    /// Writes [`Layout::tls_ca_bundle`] from each organisation's TLS CA certificate (each node's `tls/ca.crt`).
    ///
    /// Errors: file errors.
    pub(crate) fn write_tls_ca_bundle(&self) -> anyhow::Result<PathBuf> {
        let mut bundle = Vec::new();
        for node in [self.orderer_node(), self.peer_node(0), self.peer_node(1)] {
            let ca = node.join("tls/ca.crt");
            bundle.extend(std::fs::read(&ca).with_context(|| format!("reading {}", ca.display()))?);
        }
        let path = self.tls_ca_bundle();
        crate::profile::write_atomically(&path, &bundle)?;
        Ok(path)
    }

    /// The orderer node's directory (`.../orderers/orderer.example.com`).
    pub fn orderer_node(&self) -> PathBuf {
        self.crypto().join("ordererOrganizations/example.com/orderers/orderer.example.com")
    }

    /// The directory of peer0 of peer organisation `org` (0 = Org1, 1 = Org2).
    pub fn peer_node(&self, org: usize) -> PathBuf {
        let n = org + 1;
        self.crypto().join(format!("peerOrganizations/org{n}.example.com/peers/peer0.org{n}.example.com"))
    }

    /// The file system path of peer0 of peer organisation `org` (Fabric's `peer.fileSystemPath`): its installed
    /// chaincode packages live under `lifecycle/chaincodes`.
    pub fn peer_data(&self, org: usize) -> PathBuf {
        self.dir.join(format!("peers/peer0.org{}", org + 1))
    }

    /// The MSP directory of user `user` (`Admin` or `User1`) of peer organisation `org` (0 = Org1, 1 = Org2).
    pub fn user_msp(&self, org: usize, user: &str) -> PathBuf {
        let n = org + 1;
        self.crypto().join(format!("peerOrganizations/org{n}.example.com/users/{user}@org{n}.example.com/msp"))
    }
}

/// How a node's components speak TLS: off (`--no-tls`), server TLS (the default, as Fabric's test network), or
/// mutual TLS (`--mutual-tls`: every listener also requires a client certificate of the organisations' TLS CAs,
/// and each component presents its node's TLS pair as a client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TlsMode {
    /// TLS on every listener.
    pub(crate) on: bool,
    /// Client certificates required too.
    pub(crate) mutual: bool,
}

impl TlsMode {
    /// The TLS of a listener of the node at `node_dir`.
    pub(crate) fn listener(&self, layout: &Layout, node_dir: &Path) -> TlsConfig {
        match (self.on, self.mutual) {
            (false, _) => TlsConfig::default(),
            (true, false) => server_tls(node_dir),
            (true, true) => TlsConfig {
                client_auth_required: true,
                client_root_cas: vec![layout.tls_ca_bundle()],
                ..server_tls(node_dir)
            },
        }
    }

    /// The TLS client pair node.json names for the node's clients (Org1's User1) under mutual TLS.
    pub(crate) fn user_pair(&self, layout: &Layout) -> Option<(PathBuf, PathBuf)> {
        let dir = layout.user_msp(0, "User1").with_file_name("tls");
        let absolute = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
        (self.on && self.mutual).then(|| (absolute(dir.join("client.crt")), absolute(dir.join("client.key"))))
    }

    /// What the node at `node_dir` presents as a TLS client: its TLS pair under mutual TLS.
    pub(crate) fn client_pair(&self, node_dir: &Path) -> Option<(PathBuf, PathBuf)> {
        (self.on && self.mutual).then(|| (node_dir.join("tls/server.crt"), node_dir.join("tls/server.key")))
    }

    /// The client TLS settings of a component of the node at `node_dir` that trusts `roots`.
    pub(crate) fn client(&self, roots: Vec<PathBuf>, node_dir: &Path) -> ClientTlsConfig {
        let pair = self.client_pair(node_dir);
        ClientTlsConfig {
            enabled: self.on,
            root_cas: if self.on { roots } else { Vec::new() },
            client_certificate: pair.as_ref().map(|p| p.0.clone()),
            client_key: pair.map(|p| p.1),
            ..ClientTlsConfig::default()
        }
    }
}

/// TLS settings of a listener that serves with the TLS certificate and key cryptogen made for the node at
/// `node_dir` (`tls/server.crt`, `tls/server.key`, its CA `tls/ca.crt`).
pub(crate) fn server_tls(node_dir: &Path) -> TlsConfig {
    TlsConfig {
        enabled: true,
        private_key: Some(node_dir.join("tls/server.key")),
        certificate: Some(node_dir.join("tls/server.crt")),
        root_cas: vec![node_dir.join("tls/ca.crt")],
        ..TlsConfig::default()
    }
}

/// The crypto-config of a node that listens on `host`: ferrofabric-cryptogen's default template, whose TLS
/// certificates name `localhost` and `127.0.0.1`, with `host` named too, so that clients check every listener by
/// the address they dial.
fn crypto_config(host: &str) -> String {
    if matches!(host, "127.0.0.1" | "localhost") {
        return DEFAULT_CRYPTO_CONFIG.to_owned();
    }
    let quoted = format!("\"{}\"", host.replace('"', ""));
    DEFAULT_CRYPTO_CONFIG
        .lines()
        .flat_map(|line| {
            let extra = (line.trim() == "- 127.0.0.1").then(|| line.replace("127.0.0.1", &quoted));
            std::iter::once(line.to_owned()).chain(extra)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Channel parameters used when the node directory is created (later runs keep the stored genesis block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChannelParams {
    /// Channel ID.
    pub channel: String,
    /// BatchSize.MaxMessageCount.
    pub batch_size: u32,
    /// BatchTimeout, a Go duration (`1s`, `250ms`).
    pub batch_timeout: String,
    /// The orderer's host and port, written into the channel config (`OrdererEndpoints` and the consenter).
    pub orderer_host: String,
    /// See `orderer_host`.
    pub orderer_port: u16,
}

/// The configtx.yaml of the node's channel: Org1MSP and Org2MSP (Readers/Writers/Admins/Endorsement as Fabric's
/// test network sets them), OrdererMSP, an etcdraft orderer whose one consenter is the node's orderer (as in
/// Fabric's test network; Fabric 3 removed solo, and its peers do not follow a solo channel), Fabric 2.5
/// capabilities (channel V2_0, orderer V2_0, application V2_5), `MAJORITY Endorsement` as the default and lifecycle
/// endorsement policy.
fn configtx_yaml(p: &ChannelParams) -> String {
    // The consenter is named by its host, port and TLS certificate, as etcdraft requires even of a single node.
    let endpoint = crate::address::addr(&p.orderer_host, p.orderer_port);
    let org = |n: u32| {
        format!(
            r#"  - &Org{n}
    Name: Org{n}MSP
    ID: Org{n}MSP
    MSPDir: crypto/peerOrganizations/org{n}.example.com/msp
    Policies:
      Readers: {{Type: Signature, Rule: "OR('Org{n}MSP.admin', 'Org{n}MSP.peer', 'Org{n}MSP.client')"}}
      Writers: {{Type: Signature, Rule: "OR('Org{n}MSP.admin', 'Org{n}MSP.client')"}}
      Admins: {{Type: Signature, Rule: "OR('Org{n}MSP.admin')"}}
      Endorsement: {{Type: Signature, Rule: "OR('Org{n}MSP.peer')"}}
"#
        )
    };
    format!(
        r#"# Written by `ferrofabric node` when it created this directory (configtxgen's format).
Organizations:
  - &Orderer
    Name: OrdererOrg
    ID: OrdererMSP
    MSPDir: crypto/ordererOrganizations/example.com/msp
    Policies:
      Readers: {{Type: Signature, Rule: "OR('OrdererMSP.member')"}}
      Writers: {{Type: Signature, Rule: "OR('OrdererMSP.member')"}}
      Admins: {{Type: Signature, Rule: "OR('OrdererMSP.admin')"}}
    OrdererEndpoints: ["{endpoint}"]
{org1}{org2}Capabilities:
  Channel: &ChannelCaps {{V2_0: true}}
  Orderer: &OrdererCaps {{V2_0: true}}
  Application: &AppCaps {{V2_5: true}}
Application: &AppDefaults
  ACLs:
    _lifecycle/CheckCommitReadiness: /Channel/Application/Writers
    _lifecycle/CommitChaincodeDefinition: /Channel/Application/Writers
    _lifecycle/QueryChaincodeDefinition: /Channel/Application/Writers
    _lifecycle/QueryChaincodeDefinitions: /Channel/Application/Writers
    peer/Propose: /Channel/Application/Writers
    event/Block: /Channel/Application/Readers
    event/FilteredBlock: /Channel/Application/Readers
  Organizations:
  Policies:
    Readers: {{Type: ImplicitMeta, Rule: "ANY Readers"}}
    Writers: {{Type: ImplicitMeta, Rule: "ANY Writers"}}
    Admins: {{Type: ImplicitMeta, Rule: "MAJORITY Admins"}}
    LifecycleEndorsement: {{Type: ImplicitMeta, Rule: "MAJORITY Endorsement"}}
    Endorsement: {{Type: ImplicitMeta, Rule: "MAJORITY Endorsement"}}
  Capabilities: *AppCaps
Orderer: &OrdererDefaults
  OrdererType: etcdraft
  EtcdRaft:
    Consenters:
      - Host: {host}
        Port: {port}
        ClientTLSCert: crypto/ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt
        ServerTLSCert: crypto/ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt
  Addresses: ["{endpoint}"]
  BatchTimeout: {timeout}
  BatchSize: {{MaxMessageCount: {count}, AbsoluteMaxBytes: 99 MB, PreferredMaxBytes: 2 MB}}
  Organizations:
  Policies:
    Readers: {{Type: ImplicitMeta, Rule: "ANY Readers"}}
    Writers: {{Type: ImplicitMeta, Rule: "ANY Writers"}}
    Admins: {{Type: ImplicitMeta, Rule: "MAJORITY Admins"}}
    BlockValidation: {{Type: ImplicitMeta, Rule: "ANY Writers"}}
  Capabilities: *OrdererCaps
Channel: &ChannelDefaults
  Policies:
    Readers: {{Type: ImplicitMeta, Rule: "ANY Readers"}}
    Writers: {{Type: ImplicitMeta, Rule: "ANY Writers"}}
    Admins: {{Type: ImplicitMeta, Rule: "MAJORITY Admins"}}
  Capabilities: *ChannelCaps
Profiles:
  FerrofabricNode:
    <<: *ChannelDefaults
    Orderer:
      <<: *OrdererDefaults
      Organizations: [*Orderer]
    Application:
      <<: *AppDefaults
      Organizations: [*Org1, *Org2]
"#,
        endpoint = endpoint,
        host = p.orderer_host,
        port = p.orderer_port,
        org1 = org(1),
        org2 = org(2),
        timeout = p.batch_timeout,
        count = p.batch_size,
    )
}

/// Makes sure `layout.dir` holds crypto material and a genesis block, generating them on the first run: crypto
/// with ferrofabric-cryptogen's default template (fresh random keys), then `configtx.yaml` and the channel's
/// genesis block with ferrofabric-configtxgen. Returns the genesis block (the stored one on later runs).
///
/// Errors: a genesis block without crypto material, generation or file errors.
pub(crate) fn ensure(layout: &Layout, params: &ChannelParams, progress: &dyn Fn(&str)) -> anyhow::Result<Bytes> {
    let genesis = layout.genesis();
    let crypto = layout.crypto();
    if genesis.is_file() {
        if !crypto.is_dir() {
            bail!("{} has a genesis.block but no crypto/; remove it or pick another --dir", layout.dir.display());
        }
        return Ok(Bytes::from(std::fs::read(&genesis).with_context(|| format!("reading {}", genesis.display()))?));
    }
    std::fs::create_dir_all(&layout.dir).with_context(|| format!("creating {}", layout.dir.display()))?;
    // A first run interrupted after the crypto material was written keeps it and only makes the genesis block.
    if !crypto.is_dir() {
        progress(&format!("generating crypto material in {}", crypto.display()));
        let config = CryptoConfig::from_yaml(&crypto_config(&params.orderer_host))?;
        let generated = Crypto::generate(&config, &GenerateOptions::default()).context("generating crypto material")?;
        // Written under a temporary name and renamed, so that an interrupted run leaves no half-made tree.
        let tmp = layout.dir.join("crypto.partial");
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).with_context(|| format!("removing {}", tmp.display()))?;
        }
        generated.write(&tmp)?;
        std::fs::rename(&tmp, &crypto)
            .with_context(|| format!("renaming {} to {}", tmp.display(), crypto.display()))?;
    }

    progress(&format!("creating channel {} (genesis block {})", params.channel, genesis.display()));
    let configtx_path = layout.dir.join("configtx.yaml");
    std::fs::write(&configtx_path, configtx_yaml(params))
        .with_context(|| format!("writing {}", configtx_path.display()))?;
    let configtx = ferrofabric_configtxgen::ConfigTx::load(&configtx_path)?;
    let profile = configtx.profile("FerrofabricNode")?;
    let block = ferrofabric_configtxgen::genesis_block(&profile, &params.channel)?;
    let bytes = Bytes::from(block.encode_to_vec());
    let tmp = layout.dir.join("genesis.block.partial");
    std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &genesis).with_context(|| format!("renaming to {}", genesis.display()))?;
    Ok(bytes)
}

/// `p` made absolute against the working directory (as given if that cannot be read): the paths the node writes
/// into other processes' configuration must not depend on their working directory.
pub(crate) fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tls_certificates_name_the_host_the_node_listens_on() {
        assert_eq!(crypto_config("127.0.0.1"), DEFAULT_CRYPTO_CONFIG);
        let config = crypto_config("10.1.2.3");
        // Every node (the orderer and both peer templates) names it beside localhost and 127.0.0.1.
        assert_eq!(config.matches("- \"10.1.2.3\"").count(), config.matches("- 127.0.0.1").count());
        assert_eq!(config.matches("- \"10.1.2.3\"").count(), 3);
        CryptoConfig::from_yaml(&config).unwrap();
    }
}
