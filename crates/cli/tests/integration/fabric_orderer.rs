//! Real Fabric 2.5.16 tools against our orderer, and our committer against a real Fabric orderer. The channel is
//! made the way a Fabric operator makes it: the real `cryptogen` and `configtxgen` (from the Fabric 2.5 fixture's
//! `crypto-config.yaml` and `configtx.yaml`), TLS everywhere, mutual TLS on the admin endpoint.
//!
//! * `osnadmin channel list/join/remove` against `ferrofabric orderer`, answers as Fabric's;
//! * `peer channel fetch` of block 0 from our orderer: byte for byte the genesis block;
//! * `peer channel update` of an anchor-peer update built with `configtxlator` (fetch, decode, edit, compute the
//!   update, wrap) through our orderer: a new config block; and the deprecated `configtxgen
//!   -outputAnchorPeersUpdate` transaction, which does not apply to a channel made by the participation API, is
//!   refused with Fabric's very words;
//! * a real `orderer` serves the channel and `ferrofabric committer` follows it: it commits the real orderer's
//!   blocks (whose signatures it checks) and serves them on its peer Deliver.
//!
//! Needs `zstd` to unpack the binaries; fails, not skips, without it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferrofabric_protos::common::{Block, ConfigEnvelope, Envelope, Payload};
use prost::Message;
use serde_json::{json, Value};

use crate::fabric_peers::{fabric_dir, free_port, output, unpack};
use crate::sdk::{require_tool, Running};

/// How long a daemon may take to listen, and a block to arrive.
const WAIT: Duration = Duration::from_secs(60);
/// What Fabric 2.5.16's orderer answers to the deprecated anchor-peer update on a participation-API channel.
const FABRIC_STALE_UPDATE: &str = "error applying config update to existing channel 'mychannel': error authorizing \
    update: error validating ReadSet: proposed update requires that key [Group]  /Channel/Application be at version 1, \
    but it is currently at version 0";

/// The Fabric 2.5.16 tools and the channel artefacts they made.
struct Tools {
    bin: PathBuf,
    config: PathBuf,
    work: PathBuf,
}

impl Tools {
    fn cmd(&self, tool: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(tool));
        cmd.env("FABRIC_CFG_PATH", &self.config).env("FABRIC_LOGGING_SPEC", "warning").stdin(Stdio::null());
        cmd
    }

    fn orderer_dir(&self) -> PathBuf {
        self.work.join("organizations/ordererOrganizations/example.com/orderers/orderer.example.com")
    }

    fn tls(&self, file: &str) -> PathBuf {
        self.orderer_dir().join("tls").join(file)
    }

    /// `osnadmin channel ARGS` against the admin endpoint `admin` with the orderer's TLS identity: (status, JSON).
    fn osnadmin(&self, admin: &str, args: &[&str]) -> (u16, Value) {
        let mut cmd = self.cmd("osnadmin");
        cmd.arg("channel").args(args).args(["-o", admin, "--ca-file"]).arg(self.tls("ca.crt"));
        cmd.arg("--client-cert").arg(self.tls("server.crt")).arg("--client-key").arg(self.tls("server.key"));
        let out = output(&mut cmd).unwrap_or_else(|e| panic!("osnadmin channel {args:?}: {e}"));
        let (status, body) = out.split_once('\n').unwrap_or((&out, ""));
        let status = status.trim().strip_prefix("Status: ").unwrap_or_else(|| panic!("osnadmin said {out}"));
        let body = if body.trim().is_empty() { Value::Null } else { serde_json::from_str(body).unwrap() };
        (status.parse().unwrap(), body)
    }

    /// `peer channel <sub>` as Org1's admin on `mychannel`, TLS on, talking to the orderer at `orderer`; the
    /// caller adds the subcommand's own arguments.
    fn peer(&self, orderer: &str, sub: &str) -> Command {
        let admin = self.work.join("organizations/peerOrganizations/org1.example.com/users/Admin@org1.example.com/msp");
        let mut cmd = self.cmd("peer");
        cmd.env("CORE_PEER_LOCALMSPID", "Org1MSP").env("CORE_PEER_MSPCONFIGPATH", admin);
        cmd.env("CORE_PEER_TLS_ENABLED", "true").args(["channel", sub, "-c", "mychannel", "-o", orderer, "--tls"]);
        cmd.arg("--cafile").arg(self.tls("ca.crt"));
        cmd
    }

    /// Block `which` of the channel as the orderer at `orderer` serves it (`peer channel fetch`).
    fn fetch(&self, orderer: &str, which: &str) -> Block {
        let file = self.work.join(format!("fetched-{}-{which}.block", orderer.replace(':', "_")));
        output(self.peer(orderer, "fetch").arg(which).arg(&file)).unwrap();
        Block::decode(std::fs::read(&file).unwrap().as_slice()).unwrap()
    }

    /// `configtxlator proto_decode|proto_encode --type TYPE`, input and output as files.
    fn translate(&self, verb: &str, kind: &str, input: &Path, out: &Path) {
        let mut cmd = self.cmd("configtxlator");
        cmd.args([verb, "--type", kind, "--input"]).arg(input).arg("--output").arg(out);
        output(&mut cmd).unwrap_or_else(|e| panic!("configtxlator {verb} {kind}: {e}"));
    }
}

/// Unpacks Fabric 2.5.16 and makes the crypto material, the genesis block of `mychannel` and the deprecated
/// anchor-peer update transaction with its tools.
fn fabric_tools(tmp: &Path) -> Tools {
    let fabric = unpack("2.5.16", &tmp.join("fabric"), &tmp.join("unpack.log"));
    let tools = Tools { bin: fabric.join("bin"), config: fabric.join("config"), work: tmp.join("work") };
    let fixture = fabric_dir().join("../fixtures/fabric-2.5");
    std::fs::create_dir_all(tools.work.join("anchors")).unwrap();
    let mut cryptogen = tools.cmd("cryptogen");
    cryptogen.arg("generate").arg(format!("--config={}", fixture.join("crypto-config.yaml").display()));
    output(cryptogen.arg(format!("--output={}", tools.work.join("organizations").display()))).unwrap();
    let configtx = std::fs::read_to_string(fixture.join("configtx.yaml")).unwrap();
    std::fs::write(tools.work.join("configtx.yaml"), &configtx).unwrap();
    let mut genesis = tools.cmd("configtxgen");
    genesis.env("FABRIC_CFG_PATH", &tools.work).args(["-profile", "AppChannelEtcdRaft", "-channelID", "mychannel"]);
    output(genesis.arg("-outputBlock").arg(tools.work.join("genesis.block"))).unwrap();
    // The same organisations with an anchor peer for Org1, for configtxgen's deprecated update.
    let organizations = format!("{}/organizations/", tools.work.display());
    let anchored = configtx
        .replace("organizations/", &organizations)
        .replace("  ID: Org1MSP\n", "  ID: Org1MSP\n  AnchorPeers:\n  - Host: 127.0.0.1\n    Port: 7051\n");
    std::fs::write(tools.work.join("anchors/configtx.yaml"), anchored).unwrap();
    let mut anchors = tools.cmd("configtxgen");
    anchors.env("FABRIC_CFG_PATH", tools.work.join("anchors"));
    anchors.args(["-profile", "AppChannelEtcdRaft", "-channelID", "mychannel", "-asOrg", "Org1MSP"]);
    output(anchors.arg("-outputAnchorPeersUpdate").arg(tools.work.join("anchors.tx"))).unwrap();
    tools
}

/// The anchor-peer update of Org1 as an operator builds it against the channel's current config block
/// `config_block` (`peer channel fetch config`): decoded by configtxlator, edited, `compute_update`, wrapped in a
/// CONFIG_UPDATE envelope. Returns the envelope file.
fn anchor_update(tools: &Tools, config_block: &Path) -> PathBuf {
    let w = |name: &str| tools.work.join(name);
    tools.translate("proto_decode", "common.Block", config_block, &w("config_block.json"));
    let block: Value = serde_json::from_slice(&std::fs::read(w("config_block.json")).unwrap()).unwrap();
    let config = block["data"]["data"][0]["payload"]["data"]["config"].clone();
    let mut updated = config.clone();
    updated["channel_group"]["groups"]["Application"]["groups"]["Org1MSP"]["values"]["AnchorPeers"] = json!({
        "mod_policy": "Admins",
        "value": {"anchor_peers": [{"host": "127.0.0.1", "port": 7051}]},
        "version": "0"
    });
    for (name, value) in [("config", &config), ("updated", &updated)] {
        std::fs::write(w(&format!("{name}.json")), serde_json::to_vec(value).unwrap()).unwrap();
        tools.translate("proto_encode", "common.Config", &w(&format!("{name}.json")), &w(&format!("{name}.pb")));
    }
    let mut compute = tools.cmd("configtxlator");
    compute.args(["compute_update", "--channel_id", "mychannel", "--original"]).arg(w("config.pb"));
    compute.arg("--updated").arg(w("updated.pb")).arg("--output").arg(w("update.pb"));
    output(&mut compute).unwrap();
    tools.translate("proto_decode", "common.ConfigUpdate", &w("update.pb"), &w("update.json"));
    let update: Value = serde_json::from_slice(&std::fs::read(w("update.json")).unwrap()).unwrap();
    let envelope = json!({"payload": {
        "header": {"channel_header": {"channel_id": "mychannel", "type": 2}},
        "data": {"config_update": update}
    }});
    std::fs::write(w("update_envelope.json"), serde_json::to_vec(&envelope).unwrap()).unwrap();
    tools.translate("proto_encode", "common.Envelope", &w("update_envelope.json"), &w("update_envelope.pb"));
    w("update_envelope.pb")
}

/// Whether the config of config block `block` lists an anchor peer for Org1MSP.
fn org1_has_anchor_peer(block: &Block) -> bool {
    let Some(data) = block.data.as_ref().and_then(|d| d.data.first()) else { return false };
    let payload = Envelope::decode(data.clone()).ok().and_then(|e| Payload::decode(e.payload).ok());
    let config = payload.and_then(|p| ConfigEnvelope::decode(p.data).ok()).and_then(|c| c.config);
    let org1 = config
        .and_then(|c| c.channel_group)
        .and_then(|g| g.groups.get("Application").cloned())
        .and_then(|a| a.groups.get("Org1MSP").cloned());
    org1.is_some_and(|o| o.values.contains_key("AnchorPeers"))
}

/// Waits until something listens on `addr`.
pub(crate) fn wait_listening(addr: &str, what: &str, log: &Path) {
    let deadline = Instant::now() + WAIT;
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on {addr}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sets up `cmd` (a real Fabric `orderer`) as the node whose cryptogen folder is `node` (`msp/`, `tls/`): TLS
/// everywhere, the channel participation API (mutual TLS) on `admin`, operations on `ops`, no system channel,
/// ledger, WAL and snapshots under `data`.
pub(crate) fn real_orderer_env(cmd: &mut Command, node: &Path, port: u16, admin: u16, ops: u16, data: &Path) {
    let tls = |f: &str| node.join("tls").join(f).display().to_string();
    cmd.env("FABRIC_LOGGING_SPEC", "info")
        .env("ORDERER_GENERAL_LISTENADDRESS", "127.0.0.1")
        .env("ORDERER_GENERAL_LISTENPORT", port.to_string())
        .env("ORDERER_GENERAL_LOCALMSPID", "OrdererMSP")
        .env("ORDERER_GENERAL_LOCALMSPDIR", node.join("msp"))
        .env("ORDERER_GENERAL_TLS_ENABLED", "true")
        .env("ORDERER_GENERAL_TLS_PRIVATEKEY", tls("server.key"))
        .env("ORDERER_GENERAL_TLS_CERTIFICATE", tls("server.crt"))
        .env("ORDERER_GENERAL_TLS_ROOTCAS", format!("[{}]", tls("ca.crt")))
        .env("ORDERER_GENERAL_CLUSTER_CLIENTCERTIFICATE", tls("server.crt"))
        .env("ORDERER_GENERAL_CLUSTER_CLIENTPRIVATEKEY", tls("server.key"))
        .env("ORDERER_GENERAL_CLUSTER_ROOTCAS", format!("[{}]", tls("ca.crt")))
        .env("ORDERER_GENERAL_BOOTSTRAPMETHOD", "none")
        .env("ORDERER_CHANNELPARTICIPATION_ENABLED", "true")
        .env("ORDERER_ADMIN_LISTENADDRESS", format!("127.0.0.1:{admin}"))
        .env("ORDERER_ADMIN_TLS_ENABLED", "true")
        .env("ORDERER_ADMIN_TLS_PRIVATEKEY", tls("server.key"))
        .env("ORDERER_ADMIN_TLS_CERTIFICATE", tls("server.crt"))
        .env("ORDERER_ADMIN_TLS_CLIENTAUTHREQUIRED", "true")
        .env("ORDERER_ADMIN_TLS_CLIENTROOTCAS", format!("[{}]", tls("ca.crt")))
        .env("ORDERER_OPERATIONS_LISTENADDRESS", format!("127.0.0.1:{ops}"))
        .env("ORDERER_METRICS_PROVIDER", "disabled")
        .env("ORDERER_FILELEDGER_LOCATION", data.join("ledger"))
        .env("ORDERER_CONSENSUS_WALDIR", data.join("wal"))
        .env("ORDERER_CONSENSUS_SNAPDIR", data.join("snap"));
}

/// The height of the channel on the orderer at `orderer`, as `peer channel getinfo` would give it: the number of
/// the newest block + 1.
fn height(tools: &Tools, orderer: &str) -> u64 {
    tools.fetch(orderer, "newest").header.map_or(0, |h| h.number + 1)
}

/// Starts a real Fabric 2.5.16 orderer with the channel participation API and TLS; returns it, its gRPC and admin
/// addresses.
fn real_orderer(tools: &Tools) -> (Running, String, String) {
    let (port, admin, ops) = (free_port(), free_port(), free_port());
    let log = tools.work.join("real-orderer.log");
    let mut cmd = tools.cmd("orderer");
    real_orderer_env(&mut cmd, &tools.orderer_dir(), port, admin, ops, &tools.work.join("real-orderer"));
    cmd.stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(tools.work.join("real-orderer.err")).unwrap());
    let process = Running(cmd.spawn().unwrap());
    let (grpc, admin) = (format!("127.0.0.1:{port}"), format!("127.0.0.1:{admin}"));
    wait_listening(&admin, "Fabric's orderer", &tools.work.join("real-orderer.err"));
    (process, grpc, admin)
}

#[test]
fn real_fabric_tools_drive_our_orderer_and_our_committer_follows_a_real_orderer() {
    require_tool("zstd");
    let tmp = tempfile::tempdir().unwrap();
    let tools = fabric_tools(tmp.path());
    let genesis = tools.work.join("genesis.block");
    let genesis_str = genesis.to_str().unwrap();
    let exe = env!("CARGO_BIN_EXE_ferrofabric");

    // Our orderer, as an operator starts it: TLS from cryptogen's layout, mutual TLS on the admin endpoint.
    let (port, admin_port) = (free_port(), free_port());
    let (ours, admin) = (format!("127.0.0.1:{port}"), format!("127.0.0.1:{admin_port}"));
    let log = tmp.path().join("our-orderer.log");
    let orderer = Running(
        Command::new(exe)
            .args(["orderer", "--listen", &ours, "--admin-listen", &admin, "--operations-listen", "", "--msp-id"])
            .arg("OrdererMSP")
            .arg("--msp-dir")
            .arg(tools.orderer_dir().join("msp"))
            .arg("--data-dir")
            .arg(tmp.path().join("our-orderer"))
            .arg("--tls-dir")
            .arg(tools.orderer_dir().join("tls"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_listening(&admin, "ferrofabric orderer", &log);

    // osnadmin: list (nothing), join, list, list one, as Fabric answers them.
    assert_eq!(tools.osnadmin(&admin, &["list"]), (200, json!({"systemChannel": null, "channels": null})));
    let joined = json!({"name": "mychannel", "url": "/participation/v1/channels/mychannel",
        "consensusRelation": "consenter", "status": "active", "height": 1});
    assert_eq!(
        tools.osnadmin(&admin, &["join", "--channelID", "mychannel", "--config-block", genesis_str]),
        (201, joined.clone())
    );
    let listed = json!({"systemChannel": null, "channels": [{"name": "mychannel", "url": "/participation/v1/channels/mychannel"}]});
    assert_eq!(tools.osnadmin(&admin, &["list"]), (200, listed));
    assert_eq!(tools.osnadmin(&admin, &["list", "--channelID", "mychannel"]), (200, joined));

    // peer channel fetch: block 0 is the genesis block, byte for byte.
    let block0 = tools.fetch(&ours, "0");
    assert_eq!(block0.encode_to_vec(), std::fs::read(&genesis).unwrap(), "block 0 from our orderer");

    // The deprecated configtxgen anchor-peer update: refused with Fabric's words.
    let stale = output(tools.peer(&ours, "update").arg("-f").arg(tools.work.join("anchors.tx")));
    let stale = stale.expect_err("the stale anchor-peer update was accepted");
    assert!(stale.contains(&format!("got unexpected status: BAD_REQUEST -- {FABRIC_STALE_UPDATE}")), "{stale}");

    // The operator's anchor-peer update (configtxlator), signed by Org1's admin: a new config block.
    let config_block = tools.work.join("config.block");
    output(tools.peer(&ours, "fetch").arg("config").arg(&config_block)).unwrap();
    let update = anchor_update(&tools, &config_block);
    let updated = output(tools.peer(&ours, "update").arg("-f").arg(&update));
    updated.unwrap_or_else(|e| panic!("peer channel update through our orderer: {e}"));
    let deadline = Instant::now() + WAIT;
    while height(&tools, &ours) < 2 {
        assert!(Instant::now() < deadline, "no config block after the update");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(org1_has_anchor_peer(&tools.fetch(&ours, "config")), "the new config has no anchor peer for Org1");

    // osnadmin remove, then list: nothing again.
    assert_eq!(tools.osnadmin(&admin, &["remove", "--channelID", "mychannel"]).0, 204);
    assert_eq!(tools.osnadmin(&admin, &["list"]), (200, json!({"systemChannel": null, "channels": null})));
    drop(orderer);

    // A real Fabric orderer serves the channel, with the same update ordered into its block 1.
    let (real, real_grpc, real_admin) = real_orderer(&tools);
    assert_eq!(
        tools.osnadmin(&real_admin, &["join", "--channelID", "mychannel", "--config-block", genesis_str]).0,
        201
    );
    let deadline = Instant::now() + WAIT;
    loop {
        match output(tools.peer(&real_grpc, "update").arg("-f").arg(&update)) {
            Ok(_) => break,
            // The Raft leader of a just-joined channel takes a moment to be elected.
            Err(e) if Instant::now() < deadline => {
                println!("peer channel update through Fabric's orderer, retrying: {e}");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("peer channel update through Fabric's orderer: {e}"),
        }
    }
    while height(&tools, &real_grpc) < 2 {
        assert!(Instant::now() < deadline, "Fabric's orderer cut no block 1");
        std::thread::sleep(Duration::from_millis(200));
    }
    let theirs = tools.fetch(&real_grpc, "1");

    // Our committer follows it: block 1, signed by Fabric's orderer, committed VALID and served on our Deliver.
    let listen = format!("127.0.0.1:{}", free_port());
    let config = tmp.path().join("committer.yaml");
    let peer0 = tools.work.join("organizations/peerOrganizations/org1.example.com/peers/peer0.org1.example.com");
    std::fs::write(
        &config,
        format!(
            "Channel: mychannel\nGenesisBlock: {genesis}\nDataDir: {data}\nLocalMSPDir: {msp}\nLocalMSPID: Org1MSP\n\
             Orderers: [\"{real_grpc}\"]\nOrdererTLS: {{Enabled: true, RootCAs: [\"{ca}\"]}}\nListenAddress: {listen}\n",
            genesis = genesis.display(),
            data = tmp.path().join("committer").display(),
            msp = peer0.join("msp").display(),
            ca = tools.tls("ca.crt").display(),
        ),
    )
    .unwrap();
    let mut committer = Running(
        Command::new(exe)
            .args(["committer", "--config"])
            .arg(&config)
            .args(["--operations-listen", ""])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(tmp.path().join("committer.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let ready = BufReader::new(committer.0.stdout.take().unwrap()).lines().next();
    assert!(matches!(&ready, Some(Ok(l)) if l.starts_with("committer ready")), "committer: {ready:?}");
    let ours_cli = |which: &str| {
        let file = tmp.path().join(format!("committed-{which}.block"));
        let mut cmd = tools.cmd("peer");
        cmd.env("CORE_PEER_LOCALMSPID", "Org1MSP").env("CORE_PEER_ADDRESS", &listen);
        cmd.env(
            "CORE_PEER_MSPCONFIGPATH",
            tools.work.join("organizations/peerOrganizations/org1.example.com/users/Admin@org1.example.com/msp"),
        );
        cmd.args(["channel", "fetch", which]).arg(&file).args(["-c", "mychannel"]);
        output(&mut cmd).map(|_| Block::decode(std::fs::read(&file).unwrap().as_slice()).unwrap())
    };
    let ours = loop {
        match ours_cli("1") {
            Ok(b) => break b,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => panic!(
                "our committer did not serve block 1: {e}\ncommitter log:\n{}",
                std::fs::read_to_string(tmp.path().join("committer.log")).unwrap_or_default()
            ),
        }
    };
    assert_eq!(ours.header, theirs.header, "block 1 as our committer holds it: header");
    assert_eq!(ours.data, theirs.data, "block 1 as our committer holds it: data");
    let filter = ours.metadata.as_ref().and_then(|m| m.metadata.get(2)).cloned().unwrap_or_default();
    assert_eq!(filter.as_ref(), [0u8], "block 1 committed VALID");
    assert!(org1_has_anchor_peer(&ours), "our committer's block 1 carries the update");
    drop((committer, real));
}
