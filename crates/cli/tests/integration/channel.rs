//! `ferrofabric channel genesis`: the block written is the library's, with configtxgen's file mode; unknown
//! profiles and bad channel IDs are reported.

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
