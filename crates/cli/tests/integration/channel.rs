//! `ferrofabric channel genesis`: the block written is the library's, with configtxgen's file mode; unknown
//! profiles and bad channel IDs are reported. `ferrofabric channel bft-consenters`: the update it writes.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::Block;
use prost::Message;

use crate::configtxgen_support::{block_for, network};

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

/// `ferrofabric channel bft-consenters` on the genesis block configtxgen 3.1.5 made for the BFT fixture: removing
/// a consenter gives an unsigned CONFIG_UPDATE whose write set holds the new mapping and the `Q`-of-`n`
/// `BlockValidation` for it; an unknown id, an id added twice and a channel that is not BFT are refused.
#[test]
fn bft_consenters_update_rewrites_block_validation_and_refuses_bad_ids() {
    use ferrofabric_protos::common::{ConfigUpdate, ConfigUpdateEnvelope, Envelope, Orderers, Payload};
    let genesis = ferrofabric_testkit::fixture("fabric-3.1-bft/genesis.block");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("update.tx");
    let (g, o) = (genesis.to_str().unwrap(), out.to_str().unwrap());
    cli(&["channel", "bft-consenters", "--config-block", g, "--remove", "4", "--output", o]).unwrap();
    let env = Envelope::decode(std::fs::read(&out).unwrap().as_slice()).unwrap();
    assert!(env.signature.is_empty(), "the update is written unsigned");
    let payload = Payload::decode(env.payload).unwrap();
    let update = ConfigUpdate::decode(ConfigUpdateEnvelope::decode(payload.data).unwrap().config_update).unwrap();
    let orderer = &update.write_set.unwrap().groups["Orderer"];
    let mapping = Orderers::decode(orderer.values["Orderers"].value.clone()).unwrap().consenter_mapping;
    assert_eq!(mapping.iter().map(|c| c.id).collect::<Vec<_>>(), [1, 2, 3]);
    let policy = orderer.policies["BlockValidation"].policy.clone().unwrap();
    assert_eq!(policy, ferrofabric_channelconfig::bft_block_validation_policy(&mapping));

    let e = cli(&["channel", "bft-consenters", "--config-block", g, "--remove", "9", "--output", o]).unwrap_err();
    assert!(e.contains("consenter 9 is not a consenter of channel"), "{e}");
    let pem = ferrofabric_testkit::fixture(
        "fabric-3.1-bft/crypto/ordererOrganizations/example.com/orderers/orderer1.example.com/tls/server.crt",
    );
    let pem = pem.to_str().unwrap();
    let add = ["--add-id", "2", "--add-host", "h", "--add-port", "1", "--add-msp-id", "OrdererMSP"];
    let files = ["--add-identity", pem, "--add-client-tls-cert", pem, "--add-server-tls-cert", pem];
    let args: Vec<&str> =
        ["channel", "bft-consenters", "--config-block", g, "--output", o].into_iter().chain(add).chain(files).collect();
    let e = cli(&args).unwrap_err();
    assert!(e.contains("consenter 2 is a consenter of channel"), "{e}");
    let raft = ferrofabric_testkit::fixture("fabric-2.5/genesis.block");
    let e =
        cli(&["channel", "bft-consenters", "--config-block", raft.to_str().unwrap(), "--remove", "1", "--output", o])
            .unwrap_err();
    assert!(e.contains("is not a BFT channel"), "{e}");
}
