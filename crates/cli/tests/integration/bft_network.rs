//! A Fabric 3 BFT channel made the way an operator makes one, with our tools: `ferrofabric crypto generate` and
//! `ferrofabric channel genesis` from the BFT fixture's `crypto-config.yaml` and `configtx.yaml` (its `BFTChannel`
//! profile: V3_0 capabilities, SmartBFT options, a consenter mapping), fresh ports for every orderer; the
//! orderers joined over the participation API with mutual TLS, as `osnadmin channel join` does it; clients that
//! broadcast (`ferrofabric bench orderer`) and read blocks over Deliver as `peer channel fetch` does; our committer
//! following the orderers with the BFT deliverer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_comm::{connect, deliver_with, ClientTls, DeliverApi, DeliverItem};
use ferrofabric_protos::common::{Block, Status};
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_protos::orderer::SeekInfo;
use futures::StreamExt;
use prost::Message;

use crate::processes::{deliver_blocks, free_port, output};
use crate::sdk::Running;

/// The committer's censorship timeout in these tests (Fabric's default is 30 s).
const CENSORSHIP_TIMEOUT: &str = "3s";

/// The channel's crypto material, configtx.yaml and genesis block, in `work`.
pub(crate) struct BftNetwork {
    pub(crate) work: PathBuf,
}

/// Runs `future` to its end on a runtime of its own, in a thread of its own, so that it can be called from
/// synchronous code and from within another runtime alike.
pub(crate) fn block_on<F: Future>(future: impl FnOnce() -> F + Send) -> F::Output
where
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future()))
            .join()
            .unwrap()
    })
}

impl BftNetwork {
    /// Makes the crypto material and the genesis block of `bftchannel` in `tmp/work` from the BFT fixture's files:
    /// four orderers, or `n` > 4 with orderers 5..=n added as consenters; each orderer's cluster port is its client
    /// port (one gRPC listener per node, as ours). Returns the network and each orderer's port.
    pub(crate) fn generate(tmp: &Path, n: usize) -> (BftNetwork, Vec<u16>) {
        let net = BftNetwork { work: tmp.join("work") };
        let fixture = ferrofabric_testkit::fixture("fabric-3.1-bft");
        std::fs::create_dir_all(&net.work).unwrap();
        let mut crypto = std::fs::read_to_string(fixture.join("crypto-config.yaml")).unwrap();
        let mut configtx = std::fs::read_to_string(fixture.join("configtx.yaml")).unwrap();
        for i in 5..=n {
            let last = format!("  - Hostname: orderer{}\n    SANS: [localhost, 127.0.0.1]\n", i - 1);
            let spec = format!("  - Hostname: orderer{i}\n    SANS: [localhost, 127.0.0.1]\n");
            crypto = crypto.replacen(&last, &format!("{last}{spec}"), 1);
            let endpoint = format!("  - 127.0.0.1:{}\n", 7050 + 100 * (i - 2));
            configtx = configtx.replacen(&endpoint, &format!("{endpoint}  - 127.0.0.1:{}\n", 7050 + 100 * (i - 1)), 1);
            let dir = format!("organizations/ordererOrganizations/example.com/orderers/orderer{i}.example.com");
            let consenter = format!(
                "  - ID: {i}\n    Host: 127.0.0.1\n    Port: {}\n    MSPID: OrdererMSP\n    Identity: {dir}/msp/signcerts/\
                 orderer{i}.example.com-cert.pem\n    ClientTLSCert: {dir}/tls/server.crt\n    ServerTLSCert: {dir}/tls/server.crt\n",
                7060 + 100 * (i - 1)
            );
            let previous = format!("orderer{}.example.com/tls/server.crt\n", i - 1);
            let at = configtx.rfind(&previous).unwrap() + previous.len();
            configtx.insert_str(at, &consenter);
        }
        std::fs::write(net.work.join("crypto-config.yaml"), crypto).unwrap();
        let mut cryptogen = Command::new(env!("CARGO_BIN_EXE_ferrofabric"));
        cryptogen.args(["crypto", "generate", "--config"]).arg(net.work.join("crypto-config.yaml"));
        output(cryptogen.arg("--output").arg(net.work.join("organizations"))).unwrap();
        let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        for (i, port) in ports.iter().enumerate() {
            configtx = configtx
                .replace(&format!("127.0.0.1:{}", 7050 + 100 * i), &format!("127.0.0.1:{port}"))
                .replace(&format!("Port: {}\n", 7060 + 100 * i), &format!("Port: {port}\n"));
        }
        // Batches of up to 50 within half a second, so that the tests do not wait on SmartBFT's 2-s interval.
        let configtx = configtx.replace("RequestBatchMaxInterval: 2s", "RequestBatchMaxInterval: 500ms");
        std::fs::write(net.work.join("configtx.yaml"), configtx).unwrap();
        let mut genesis = Command::new(env!("CARGO_BIN_EXE_ferrofabric"));
        genesis.args(["channel", "genesis", "--config"]).arg(net.work.join("configtx.yaml"));
        genesis.args(["--profile", "BFTChannel", "--channel-id", "bftchannel", "--output"]);
        output(genesis.arg(net.genesis())).unwrap();
        (net, ports)
    }

    /// The genesis block's file.
    pub(crate) fn genesis(&self) -> PathBuf {
        self.work.join("genesis.block")
    }

    /// Orderer `i`'s cryptogen folder (`msp/`, `tls/`).
    pub(crate) fn orderer_dir(&self, i: usize) -> PathBuf {
        self.work.join(format!("organizations/ordererOrganizations/example.com/orderers/orderer{i}.example.com"))
    }

    /// The orderer organization's TLS CA.
    pub(crate) fn tls_ca(&self) -> PathBuf {
        self.orderer_dir(1).join("tls/ca.crt")
    }

    /// The MSP directory of `user` (`User1`, `Admin`) of peer organization `org` (1 or 2).
    pub(crate) fn user_msp(&self, org: u8, user: &str) -> PathBuf {
        self.work
            .join(format!("organizations/peerOrganizations/org{org}.example.com/users/{user}@org{org}.example.com/msp"))
    }

    /// The orderer organization's admin MSP directory.
    pub(crate) fn orderer_admin(&self) -> PathBuf {
        self.work.join("organizations/ordererOrganizations/example.com/users/Admin@example.com/msp")
    }

    /// Block `which` (`newest`, a number) of `bftchannel` from the orderer at `orderer` (TLS), as Org1's admin, as
    /// `peer channel fetch` asks for it (failing if the block is not there yet).
    pub(crate) fn fetch_from_orderer(&self, orderer: &str, which: &str) -> Result<Block, String> {
        let tls = ClientTls { ca_pem: std::fs::read(self.tls_ca()).unwrap(), ..ClientTls::default() };
        self.fetch(orderer, DeliverApi::Orderer, Some(tls), which)
    }

    /// Block `which` of `bftchannel` from our committer's peer Deliver at `peer` (plain text), as Org1's admin.
    pub(crate) fn fetch_from_peer(&self, peer: &str, which: &str) -> Result<Block, String> {
        self.fetch(peer, DeliverApi::Peer, None, which)
    }

    fn fetch(&self, addr: &str, api: DeliverApi, tls: Option<ClientTls>, which: &str) -> Result<Block, String> {
        let admin = ferrofabric_msp::SigningIdentity::from_msp_dir("Org1MSP", &self.user_msp(1, "Admin")).unwrap();
        let position = match which {
            "newest" => ferrofabric_protoutil::seek_newest(),
            n => ferrofabric_protoutil::seek_specified(n.parse().unwrap()),
        };
        let seek = SeekInfo {
            start: Some(position),
            stop: Some(position),
            behavior: SeekBehavior::FailIfNotReady as i32,
            ..SeekInfo::default()
        };
        let env = ferrofabric_comm::seek_envelope("bftchannel", admin.serialized(), |m| admin.sign(m), &seek);
        block_on(|| async move {
            let ch = connect(addr, tls.as_ref()).await.map_err(|e| format!("{e:#}"))?;
            let requests = futures::stream::iter([env]);
            let mut stream = deliver_with(ch, api, requests).await.map_err(|e| e.to_string())?;
            match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
                Ok(Some(Ok(DeliverItem::Block(b)))) => Block::decode(b).map_err(|e| e.to_string()),
                Ok(Some(Ok(DeliverItem::Status(s)))) => Err(format!("status {:?}", Status::try_from(s))),
                Ok(other) => Err(format!("Deliver from {addr} ended: {other:?}")),
                Err(_) => Err(format!("no answer from {addr} within 10 s")),
            }
        })
    }

    /// `curl` against orderer `i`'s participation API at `admin` with mutual TLS (its own TLS identity), as
    /// `osnadmin` with `--client-cert`; `args` before the URL, `path` after `/participation/v1/channels`. Returns
    /// the HTTP status and the body.
    fn participation(&self, i: usize, admin: &str, path: &str, args: &[&str]) -> (u16, String) {
        let tls = self.orderer_dir(i).join("tls");
        let mut curl = Command::new("curl");
        curl.args(["-sS", "-w", "\n%{http_code}", "--cacert"]).arg(tls.join("ca.crt"));
        curl.arg("--cert").arg(tls.join("server.crt")).arg("--key").arg(tls.join("server.key"));
        curl.args(args).arg(format!("https://{admin}/participation/v1/channels{path}"));
        let out = output(&mut curl).unwrap_or_else(|e| panic!("curl against orderer{i}'s participation API: {e}"));
        let (body, status) = out.rsplit_once('\n').unwrap();
        (status.trim().parse().unwrap(), body.to_owned())
    }

    /// Joins orderer `i` (admin endpoint `admin`) to `bftchannel` with the genesis block.
    pub(crate) fn join(&self, i: usize, admin: &str) {
        self.join_with(i, admin, &self.genesis());
    }

    /// [`Self::join`] with the config block in file `block`.
    pub(crate) fn join_with(&self, i: usize, admin: &str, block: &Path) {
        let form = format!("config-block=@{}", block.display());
        let (status, body) = self.participation(i, admin, "", &["-F", &form]);
        assert_eq!(status, 201, "joining orderer{i} to bftchannel: {body}");
    }

    /// Orderer `i`'s answer for `bftchannel` (`osnadmin channel list --channelID bftchannel`): its JSON.
    pub(crate) fn channel_info(&self, i: usize, admin: &str) -> serde_json::Value {
        let (status, body) = self.participation(i, admin, "/bftchannel", &[]);
        assert_eq!(status, 200, "orderer{i}'s bftchannel: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Broadcasts `txs` endorser transactions of User1 of `org` (1 or 2) to `orderer` with our bench client, which
    /// returns when all of them are in blocks. The bench's envelopes are the same on every run; a BFT orderer
    /// refuses a request it already ordered, so each run needs another creator.
    pub(crate) fn broadcast(&self, orderer: &str, org: u8, txs: u32) {
        self.broadcast_as(orderer, org, "User1", txs);
    }

    /// [`Self::broadcast`] as `user` (`User1`, `Admin`) of `org`.
    pub(crate) fn broadcast_as(&self, orderer: &str, org: u8, user: &str, txs: u32) {
        self.broadcast_with(orderer, &format!("Org{org}MSP"), &self.user_msp(org, user), txs);
    }

    /// [`Self::broadcast`] as the identity of MSP directory `msp` of `msp_id`.
    pub(crate) fn broadcast_with(&self, orderer: &str, msp_id: &str, msp: &Path, txs: u32) {
        let out = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
            .args(["bench", "orderer", "--address", orderer, "--channel", "bftchannel", "--msp-id", msp_id])
            .arg("--msp-dir")
            .arg(msp)
            .args(["--tls", "--tls-ca"])
            .arg(self.tls_ca())
            .args(["--txs", &txs.to_string(), "--clients", "1", "--skip-o2-off", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "bench orderer against {orderer}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.orderer_logs()
        );
    }

    /// The last lines of every orderer's log under the work directory, for a failure message.
    pub(crate) fn orderer_logs(&self) -> String {
        let mut logs: Vec<PathBuf> = std::fs::read_dir(&self.work)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path().join("orderer.log"))).filter(|p| p.is_file()).collect())
            .unwrap_or_default();
        logs.sort();
        let mut text = String::new();
        for log in logs {
            let content = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = content.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            text.push_str(&format!("--- {} (last {} lines)\n{tail}\n", log.display(), lines.len().min(40)));
        }
        text
    }

    /// The height of `bftchannel` at the orderer `orderer`.
    pub(crate) fn orderer_height(&self, orderer: &str) -> u64 {
        self.try_orderer_height(orderer).unwrap()
    }

    /// [`Self::orderer_height`], or why the orderer did not answer.
    pub(crate) fn try_orderer_height(&self, orderer: &str) -> Result<u64, String> {
        self.fetch_from_orderer(orderer, "newest").map(|b| b.header.map_or(0, |h| h.number + 1))
    }

    /// Waits until our committer at `peer` serves block `number`; returns it.
    pub(crate) fn committed(&self, peer: &str, number: u64, log: &Path, within: Duration) -> Block {
        let deadline = Instant::now() + within;
        loop {
            match self.fetch_from_peer(peer, &number.to_string()) {
                Ok(b) => return b,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
                Err(e) => panic!(
                    "our committer did not serve block {number} within {within:?}: {e}\ncommitter log:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                ),
            }
        }
    }

    /// Starts our committer as Org1's peer0, following the orderers `followed` of `bftchannel` over TLS with the
    /// BFT deliverer (censorship timeout [`CENSORSHIP_TIMEOUT`]); returns it, its peer address and its log.
    pub(crate) fn start_committer(&self, tmp: &Path, followed: &[String]) -> (Running, String, PathBuf) {
        let listen = format!("127.0.0.1:{}", free_port());
        let config = tmp.join("committer.yaml");
        let peer0 = self.work.join("organizations/peerOrganizations/org1.example.com/peers/peer0.org1.example.com");
        let followed: Vec<String> = followed.iter().map(|o| format!("\"{o}\"")).collect();
        std::fs::write(
            &config,
            format!(
                "Channel: bftchannel\nGenesisBlock: {genesis}\nDataDir: {data}\nLocalMSPDir: {msp}\nLocalMSPID: Org1MSP\n\
                 Orderers: [{followed}]\nOrdererTLS: {{Enabled: true, RootCAs: [\"{ca}\"]}}\nListenAddress: {listen}\n\
                 Delivery: {{BlockCensorshipTimeout: {CENSORSHIP_TIMEOUT}, KeepaliveInterval: 60s, KeepaliveTimeout: 60s}}\n",
                genesis = self.genesis().display(),
                data = tmp.join("committer").display(),
                msp = peer0.join("msp").display(),
                followed = followed.join(", "),
                ca = self.tls_ca().display(),
            ),
        )
        .unwrap();
        let log = tmp.join("committer.log");
        let committer = crate::processes::start_committer(&config, &log);
        (committer, listen, log)
    }
}

/// Blocks `0..height` of `bftchannel` from the orderer at `addr`, as Org1's admin over Deliver, as raw bytes.
pub(crate) async fn chain(net: &BftNetwork, addr: &str, height: u64) -> Vec<Bytes> {
    let admin = ferrofabric_msp::SigningIdentity::from_msp_dir("Org1MSP", &net.user_msp(1, "Admin")).unwrap();
    let tls = net.tls_ca();
    deliver_blocks(addr, DeliverApi::Orderer, Some(&tls), "bftchannel", &admin, Some(height - 1)).await
}
