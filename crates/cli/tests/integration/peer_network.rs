//! Two `ferrofabric peer` daemons, one per organisation, as Fabric's test network runs `peer0.org1` and
//! `peer0.org2`: each started from Fabric's `core.yaml` with `CORE_*` overrides, joined by its organisation's admin
//! to the channel of a running `ferrofabric node` (cscc JoinChain with block 0), named as its organisation's anchor
//! peer by a config update (what the test network's `setAnchorPeer.sh` does). Each peer's gateway learns the other
//! from the anchor peers, so a contract deployed by Fabric's lifecycle flow with the channel's default policy
//! (MAJORITY Endorsement: both organisations) is endorsed by both peers through either gateway, as
//! `@hyperledger/fabric-gateway` uses it; and `queryinstalled` names each package's committed chaincode.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_chaincode_support::{ccaas_package, package_id};
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_node::{deploy_chaincode, ChaincodeDefinition, NetworkClient, NodeInfo};
use ferrofabric_protos::common::{Block, Envelope, Payload};
use ferrofabric_protos::lifecycle::{QueryInstalledChaincodesArgs, QueryInstalledChaincodesResult};
use ferrofabric_protos::peer::{ChaincodeActionPayload, Transaction};
use prost::Message;

use crate::processes::{free_port, wait_listening};
use crate::sdk::{install_sdk, require_tool, start_node, Running};

/// How long a peer may take to learn the channel's other peer.
const LEARN: Duration = Duration::from_secs(30);

/// A `ferrofabric peer node start` as an operator configures one.
pub(crate) struct PeerDaemon<'a> {
    /// `peer.id`.
    pub(crate) id: &'a str,
    /// `peer.localMspId`.
    pub(crate) mspid: &'a str,
    /// `peer.mspConfigPath`: the peer's local MSP.
    pub(crate) msp: PathBuf,
    /// `peer.listenAddress` and `peer.address`.
    pub(crate) listen: &'a str,
    /// `peer.deliveryclient.addressOverrides`: the channel's orderer endpoint `.0` reached at `.1`.
    pub(crate) orderer: (&'a str, &'a str),
    /// More `CORE_*` variables.
    pub(crate) env: &'a [(&'static str, PathBuf)],
}

impl PeerDaemon<'_> {
    /// Starts the daemon under `FABRIC_CFG_PATH=home` (Fabric's sample `core.yaml` with the address overrides),
    /// its data under `home/production`, its log in `home/peer.log`, and waits until it listens.
    pub(crate) fn start(&self, home: &Path) -> Running {
        std::fs::create_dir_all(home).unwrap();
        let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fabric/2.5.16/config/core.yaml");
        let mut doc: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(sample).unwrap()).unwrap();
        let (from, to) = self.orderer;
        doc["peer"]["deliveryclient"]["addressOverrides"] =
            serde_yaml::from_str(&format!("- from: {from}\n  to: {to}\n")).unwrap();
        std::fs::write(home.join("core.yaml"), serde_yaml::to_string(&doc).unwrap()).unwrap();
        let log = home.join("peer.log");
        let log_file = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let process = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
            .args(["peer", "node", "start"])
            .env("FABRIC_CFG_PATH", home)
            .env("CORE_PEER_ID", self.id)
            .env("CORE_PEER_LISTENADDRESS", self.listen)
            .env("CORE_PEER_ADDRESS", self.listen)
            .env("CORE_PEER_CHAINCODELISTENADDRESS", "127.0.0.1:0")
            .env("CORE_PEER_LOCALMSPID", self.mspid)
            .env("CORE_PEER_MSPCONFIGPATH", &self.msp)
            .env("CORE_PEER_FILESYSTEMPATH", home.join("production"))
            .env("CORE_OPERATIONS_LISTENADDRESS", "127.0.0.1:0")
            .env("FERROFABRIC_LOG", "info,h2=warn,hyper=warn,tower=warn")
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_os_str())))
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap();
        let process = Running(process);
        wait_listening(self.listen, "ferrofabric peer node start", &log);
        process
    }
}

/// Org `org`'s (0 or 1) identity `user` (`Admin`, `User1`) of the node's crypto material.
fn identity(info: &NodeInfo, org: usize, user: &str) -> SigningIdentity {
    let n = org + 1;
    let msp = info.crypto.join(format!("peerOrganizations/org{n}.example.com/users/{user}@org{n}.example.com/msp"));
    SigningIdentity::from_msp_dir(&format!("Org{n}MSP"), &msp).unwrap()
}

/// How many endorsements the endorsed transaction of a gateway's prepared `envelope` carries.
fn endorsements(envelope: &Envelope) -> usize {
    let payload = Payload::decode(envelope.payload.clone()).unwrap();
    let tx = Transaction::decode(payload.data).unwrap();
    let action = ChaincodeActionPayload::decode(tx.actions[0].payload.clone()).unwrap();
    action.action.unwrap().endorsements.len()
}

#[test]
fn two_peer_daemons_learn_each_other_from_the_anchor_peers_and_endorse_a_majority_policy_through_either_gateway() {
    require_tool("node");
    require_tool("npm");
    let tmp = tempfile::tempdir().unwrap();
    install_sdk(&tmp.path().join("npm.log"));
    let (node, node_json) = start_node(&tmp.path().join("net"), &tmp.path().join("node.log"), 0);
    let info = NodeInfo::read(&node_json).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let genesis = std::fs::read(tmp.path().join("net/genesis.block")).unwrap();
    let config = ChannelConfig::from_config_block(&Block::decode(genesis.as_slice()).unwrap()).unwrap();
    let endpoint = config.orderer_endpoints()[0].0.clone();

    // peer0 of each organisation, on the node's crypto material, with nothing joined.
    let listens: Vec<String> = (0..2).map(|_| format!("127.0.0.1:{}", free_port())).collect();
    let peers: Vec<Running> = (0..2)
        .map(|org| {
            let n = org + 1;
            let id = format!("peer0.org{n}.example.com");
            // TLS as the node's own listeners speak it: the peer's TLS pair, the organisations' TLS CAs.
            let tls = info.crypto.join(format!("peerOrganizations/org{n}.example.com/peers/{id}/tls"));
            let mut env = Vec::new();
            if let Some(ca) = &info.tls_ca {
                env.extend([
                    ("CORE_PEER_TLS_ENABLED", PathBuf::from("true")),
                    ("CORE_PEER_TLS_CERT_FILE", tls.join("server.crt")),
                    ("CORE_PEER_TLS_KEY_FILE", tls.join("server.key")),
                    ("CORE_PEER_TLS_ROOTCERT_FILE", ca.clone()),
                    ("CORE_PEER_TLS_CLIENTROOTCAS_FILES", ca.clone()),
                ]);
                if info.tls_client.is_some() {
                    env.push(("CORE_PEER_TLS_CLIENTAUTHREQUIRED", PathBuf::from("true")));
                }
            }
            let daemon = PeerDaemon {
                id: &id,
                mspid: &format!("Org{n}MSP"),
                msp: info.crypto.join(format!("peerOrganizations/org{n}.example.com/peers/{id}/msp")),
                listen: &listens[org],
                orderer: (&endpoint, &info.orderer),
                env: &env,
            };
            daemon.start(&tmp.path().join(format!("peer{n}")))
        })
        .collect();
    let mut ours = info.clone();
    ours.peers = (0..2).map(|org| (format!("Org{}MSP", org + 1), listens[org].clone())).collect();
    ours.events = None;
    let ours_json = tmp.path().join("peers.json");
    std::fs::write(&ours_json, serde_json::to_vec(&ours).unwrap()).unwrap();
    let client = runtime.block_on(NetworkClient::connect(&ours)).unwrap();

    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // Each organisation's admin joins its peer, as `peer channel join -b genesis.block` does.
        for org in 0..2 {
            let args = [Bytes::from_static(b"JoinChain"), Bytes::from(genesis.clone())];
            let join = ferrofabric_endorser::create_proposal(&identity(&info, org, "Admin"), "", "cscc", &args);
            let joined = runtime.block_on(client.propose(org, &join)).unwrap().response.unwrap();
            assert_eq!((joined.status, joined.message.as_str()), (200, ""), "Org{}'s peer joins", org + 1);
        }
        // Each organisation names its peer its anchor peer, one config update after the other.
        for (org, listen) in listens.iter().enumerate() {
            let admin = identity(&info, org, "Admin");
            let (host, port) = listen.rsplit_once(':').unwrap();
            let mspid = format!("Org{}MSP", org + 1);
            let update = ferrofabric_configtx::anchor_peer_update(
                &info.channel,
                config.config(),
                &mspid,
                host,
                port.parse().unwrap(),
            )
            .unwrap();
            let envelope = ferrofabric_configtx::config_update_envelope(&info.channel, &update, &[&admin], &admin);
            runtime.block_on(client.broadcast(vec![Bytes::from(envelope.encode_to_vec())])).unwrap();
        }

        // The Node.js contract deployed with the channel's default policy, as the test network's deployCC does:
        // `assets`, and `assets2` for it to call.
        let mut services = Vec::new();
        for name in ["assets", "assets2"] {
            let address = format!("127.0.0.1:{}", free_port());
            let label = format!("{name}_1.0");
            let package = ccaas_package(&label, &address);
            let id = package_id(&label, &package);
            let (dir, log) = (tmp.path().join(name), tmp.path().join(format!("{name}.log")));
            services.push(crate::chaincode_service::serve_contract(&dir, &address, &id, &log));
            let definition = ChaincodeDefinition { name, policy: None, init_required: false };
            assert_eq!(runtime.block_on(deploy_chaincode(&client, &info.crypto, &definition, &package)).unwrap(), id);
        }

        // `peer lifecycle chaincode queryinstalled` names each package's committed chaincode among its references.
        for org in 0..2 {
            let args = [
                Bytes::from_static(b"QueryInstalledChaincodes"),
                Bytes::from(QueryInstalledChaincodesArgs {}.encode_to_vec()),
            ];
            let query = ferrofabric_endorser::create_proposal(&identity(&info, org, "Admin"), "", "_lifecycle", &args);
            let answer = runtime.block_on(client.propose(org, &query)).unwrap().response.unwrap();
            assert_eq!(answer.status, 200, "{}", answer.message);
            let installed = QueryInstalledChaincodesResult::decode(answer.payload).unwrap().installed_chaincodes;
            let mut referenced: Vec<(String, String, String)> = installed
                .iter()
                .flat_map(|i| {
                    i.references.iter().flat_map(move |(channel, r)| {
                        r.chaincodes.iter().map(move |c| (i.label.clone(), channel.clone(), c.name.clone()))
                    })
                })
                .collect();
            referenced.sort();
            // Sorted by label: `assets2_1.0` before `assets_1.0`.
            let expected: Vec<(String, String, String)> = ["assets2", "assets"]
                .iter()
                .map(|n| (format!("{n}_1.0"), info.channel.clone(), (*n).to_owned()))
                .collect();
            assert_eq!(referenced, expected, "Org{}'s peer", org + 1);
        }

        // Either peer's gateway asks both organisations: each learned the other from its anchor peer.
        let user = identity(&info, 0, "User1");
        for gateway in 0..2 {
            let deadline = Instant::now() + LEARN;
            let prepared = loop {
                let proposal = client.proposal(&user, "assets", &[b"put", b"k", b"v"]);
                match runtime.block_on(client.endorse_through_gateway(gateway, &proposal)) {
                    Ok(r) => break r.prepared_transaction.unwrap(),
                    Err(status) => assert!(Instant::now() < deadline, "gateway {gateway}: {status:?}"),
                }
                std::thread::sleep(Duration::from_millis(200));
            };
            assert_eq!(endorsements(&prepared), 2, "gateway {gateway} collects both organisations' endorsements");
        }

        // Fabric's gateway client through Org1's peer: every step of the contract, Org2's endorsement included.
        crate::chaincode_service::run_client(&ours_json, &["assets", "assets2"], &tmp.path().join("client.log"));
    }));
    drop((peers, node));
    if let Err(e) = run {
        for name in ["peer1/peer.log", "peer2/peer.log", "assets.log"] {
            let log = std::fs::read_to_string(tmp.path().join(name)).unwrap_or_default();
            eprintln!("{name}:\n{log}");
        }
        std::panic::resume_unwind(e);
    }
}
