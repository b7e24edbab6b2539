//! `ferrofabric channel genesis`: the block written is the library's, with configtxgen's file mode; unknown
//! profiles and bad channel IDs are reported.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_configtxgen::{genesis_block, ConfigTx, ConfigtxgenError};
use ferrofabric_cryptogen::{Crypto, CryptoConfig, GenerateOptions, DEFAULT_CRYPTO_CONFIG};
use ferrofabric_protos::common::Block;
use prost::Message;

const CONFIGTX: &str = r#"
Organizations:
  - &Orderer
    Name: OrdererOrg
    ID: OrdererMSP
    MSPDir: crypto/ordererOrganizations/example.com/msp
    Policies: &OrdererPolicies
      Readers: {Type: Signature, Rule: "OR('OrdererMSP.member')"}
      Writers: {Type: Signature, Rule: "OR('OrdererMSP.member')"}
      Admins: {Type: Signature, Rule: "OR('OrdererMSP.admin')"}
    OrdererEndpoints: ["orderer.example.com:7050"]
  - &Org1
    Name: Org1MSP
    ID: Org1MSP
    MSPDir: crypto/peerOrganizations/org1.example.com/msp
    Policies:
      Readers: {Type: Signature, Rule: "OR('Org1MSP.admin', 'Org1MSP.peer', 'Org1MSP.client')"}
      Writers: {Type: Signature, Rule: "OR('Org1MSP.admin', 'Org1MSP.client')"}
      Admins: {Type: Signature, Rule: "OR('Org1MSP.admin')"}
      Endorsement: {Type: Signature, Rule: "OR('Org1MSP.peer')"}
    AnchorPeers:
      - {Host: peer0.org1.example.com, Port: 7051}
  - &Org2
    Name: Org2MSP
    ID: Org2MSP
    MSPDir: crypto/peerOrganizations/org2.example.com/msp
    Policies:
      Readers: {Type: Signature, Rule: "OR('Org2MSP.admin', 'Org2MSP.peer', 'Org2MSP.client')"}
      Writers: {Type: Signature, Rule: "OR('Org2MSP.admin', 'Org2MSP.client')"}
      Admins: {Type: Signature, Rule: "OR('Org2MSP.admin')"}
      Endorsement: {Type: Signature, Rule: "OR('Org2MSP.peer')"}
Capabilities:
  Channel: &ChannelCaps {V2_0: true}
  Orderer: &OrdererCaps {V2_0: true}
  Application: &AppCaps {V2_5: true, V2_0: false}
Application: &AppDefaults
  ACLs:
    peer/Propose: /Channel/Application/Writers
    event/Block: /Channel/Application/Readers
  Organizations:
  Policies:
    Readers: {Type: ImplicitMeta, Rule: "ANY Readers"}
    Writers: {Type: ImplicitMeta, Rule: "ANY Writers"}
    Admins: {Type: ImplicitMeta, Rule: "MAJORITY Admins"}
    LifecycleEndorsement: {Type: Signature, Rule: "AND('Org1MSP.peer', 'Org2MSP.peer')"}
    Endorsement: {Type: ImplicitMeta, Rule: "MAJORITY Endorsement"}
  Capabilities: *AppCaps
Orderer: &OrdererDefaults
  OrdererType: solo
  Addresses: [orderer.example.com:7050]
  BatchTimeout: 250ms
  BatchSize: {MaxMessageCount: 10, AbsoluteMaxBytes: 1 MB, PreferredMaxBytes: 512 KB}
  Organizations:
  Policies:
    Readers: {Type: ImplicitMeta, Rule: "ANY Readers"}
    Writers: {Type: ImplicitMeta, Rule: "ANY Writers"}
    Admins: {Type: ImplicitMeta, Rule: "MAJORITY Admins"}
    BlockValidation: {Type: ImplicitMeta, Rule: "ANY Writers"}
  Capabilities: *OrdererCaps
Channel: &ChannelDefaults
  Policies:
    Readers: {Type: ImplicitMeta, Rule: "ANY Readers"}
    Writers: {Type: ImplicitMeta, Rule: "ANY Writers"}
    Admins: {Type: ImplicitMeta, Rule: "MAJORITY Admins"}
  Capabilities: *ChannelCaps
Profiles:
  Solo:
    <<: *ChannelDefaults
    Orderer:
      <<: *OrdererDefaults
      Organizations: [*Orderer]
    Application:
      <<: *AppDefaults
      Organizations: [*Org1, *Org2]
  Raft:
    <<: *ChannelDefaults
    Orderer:
      <<: *OrdererDefaults
      OrdererType: etcdraft
      EtcdRaft:
        Consenters:
          - Host: orderer.example.com
            Port: 7050
            ClientTLSCert: crypto/ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt
            ServerTLSCert: crypto/ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt
        Options: {TickInterval: 100ms, SnapshotIntervalSize: 1 MB}
      Organizations: [*Orderer]
    Application:
      <<: *AppDefaults
      Organizations: [*Org1, *Org2]
  System:
    <<: *ChannelDefaults
    Orderer:
      <<: *OrdererDefaults
      Organizations: [*Orderer]
    Consortiums:
      SampleConsortium:
        Organizations: [*Org1, *Org2]
  NoApplication:
    <<: *ChannelDefaults
    Orderer: *OrdererDefaults
"#;

/// A directory with generated crypto in `crypto/` and the configtx.yaml above.
fn network() -> (tempfile::TempDir, Crypto) {
    let tmp = tempfile::tempdir().unwrap();
    let crypto =
        Crypto::generate(&CryptoConfig::from_yaml(DEFAULT_CRYPTO_CONFIG).unwrap(), &GenerateOptions::deterministic(5))
            .unwrap();
    crypto.write(&tmp.path().join("crypto")).unwrap();
    std::fs::write(tmp.path().join("configtx.yaml"), CONFIGTX).unwrap();
    (tmp, crypto)
}

fn block_for(dir: &Path, profile: &str) -> Result<Block, ConfigtxgenError> {
    let config = ConfigTx::load(&dir.join("configtx.yaml"))?;
    genesis_block(&config.profile(profile)?, "testchannel")
}

/// Runs `ferrofabric ARGS`; the error carries its stderr.
fn cli(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrofabric")).args(args).output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `ferrofabric channel genesis` writes the block the library builds (same config tree) and reports
/// unknown profiles and bad channel IDs.
#[test]
fn cli_writes_the_genesis_block() {
    let (tmp, _) = network();
    let cfg = tmp.path().join("configtx.yaml");
    let out = tmp.path().join("testchannel.block");
    let (cfg_s, out_s) = (cfg.to_str().unwrap(), out.to_str().unwrap());
    cli(&[
        "channel",
        "genesis",
        "--config",
        cfg_s,
        "--profile",
        "Raft",
        "--channel-id",
        "testchannel",
        "--output",
        out_s,
    ])
    .unwrap();
    let written = Block::decode(Bytes::from(std::fs::read(&out).unwrap())).unwrap();
    let cfg_written = ChannelConfig::from_config_block(&written).unwrap();
    let lib = block_for(tmp.path(), "Raft").unwrap();
    let cfg_lib = ChannelConfig::from_config_block(&lib).unwrap();
    assert_eq!(cfg_written.config(), cfg_lib.config());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o640);
    }
    let e =
        cli(&["channel", "genesis", "--config", cfg_s, "--profile", "Missing", "--channel-id", "c", "--output", out_s]);
    assert!(e.unwrap_err().contains("Missing"));
    let e =
        cli(&["channel", "genesis", "--config", cfg_s, "--profile", "Raft", "--channel-id", "Bad", "--output", out_s]);
    assert!(e.unwrap_err().contains("invalid channel ID"));
    assert!(cli(&["channel", "genesis", "--profile", "Raft", "--channel-id", "c"]).is_err(), "--output is required");
}
