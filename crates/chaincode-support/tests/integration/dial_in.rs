//! A chaincode that dials the peer (`protos.ChaincodeSupport/Register`), as Fabric's Node.js shim does in its
//! `start` mode (npm `fabric-shim` 2.5.8 from `tests/chaincode-node`, the contract of the `fabric-2.5-peer`
//! fixture): it registers under its installed package's ID, runs transactions against the simulation, and once
//! it is killed its transactions fail with an error instead of hanging.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use ferrofabric_chaincode::{AllowAll, ChaincodeInstaller, Response, TxContext};
use ferrofabric_chaincode_support::{ChaincodeInvoker, ChaincodeSupport, Timeouts};
use ferrofabric_protos::common::{ChannelHeader, Header};
use ferrofabric_protos::peer::{Proposal, SignedProposal};
use ferrofabric_protos::rwset::TxReadWriteSet;
use ferrofabric_state::WorldState;
use prost::Message;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct NoNested;

impl ChaincodeInvoker for NoNested {
    fn invoke(&self, _: &mut TxContext<'_>, name: &str, _: &[Bytes]) -> Result<Response, String> {
        Err(format!("no chaincode {name} here"))
    }
}

fn recorded() -> PathBuf {
    ferrofabric_testkit::fixture("fabric-2.5-peer")
}

/// A package of type `node` (not run by the peer: the chaincode dials in) labelled `label`.
fn node_package(label: &str) -> Vec<u8> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()));
    let mut add = |name: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, name, data).unwrap();
    };
    add("metadata.json", format!(r#"{{"type":"node","label":"{label}","path":""}}"#).as_bytes());
    add("code.tar.gz", b"");
    tar.into_inner().unwrap().finish().unwrap()
}

/// The signed proposal of the fixture's `invoke put k1 v1` step (a real Fabric client's), and its transaction ID.
fn recorded_put_proposal() -> (SignedProposal, String) {
    let text = std::fs::read_to_string(recorded().join("exchanges.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let step = json["steps"].as_array().unwrap().iter().find(|s| s["name"] == "invoke put k1 v1").unwrap();
    let b64 = step["request_b64"].as_str().unwrap();
    let raw = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    let signed = SignedProposal::decode(raw.as_slice()).unwrap();
    let proposal = Proposal::decode(signed.proposal_bytes.clone()).unwrap();
    let header = Header::decode(proposal.header).unwrap();
    let tx_id = ChannelHeader::decode(header.channel_header).unwrap().tx_id;
    (signed, tx_id)
}

fn start_shim(dir: &Path, peer: &str, package_id: &str) -> Killed {
    let modules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/chaincode-node/node_modules");
    assert!(modules.join(".bin/fabric-chaincode-node").exists(), "run `npm ci --prefix tests/chaincode-node` first");
    std::fs::copy(recorded().join("chaincode/node/index.js"), dir.join("index.js")).unwrap();
    std::fs::copy(recorded().join("chaincode/node/package.json"), dir.join("package.json")).unwrap();
    std::os::unix::fs::symlink(&modules, dir.join("node_modules")).unwrap();
    Killed(
        Command::new(modules.join(".bin/fabric-chaincode-node"))
            .args(["start", "--peer.address", peer, "--chaincode-id-name", package_id])
            .env("CORE_PEER_TLS_ENABLED", "false")
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("shim.log")).unwrap())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn a_chaincode_that_dials_the_peer_runs_transactions_and_once_killed_fails_them_promptly() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let timeouts = Timeouts { execute: Duration::from_secs(20), startup: Duration::from_secs(3) };
    let support = ChaincodeSupport::new(&tmp.path().join("chaincodes"), timeouts).unwrap();
    let installed = support.install(&node_package("dialin_1.0")).unwrap();
    assert_eq!(support.package_ids(), vec![installed.package_id.clone()]);

    // The peer's chaincode listener.
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let service = support.register_service();
    runtime.spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
    });
    let shim = start_shim(tmp.path(), &addr, &installed.package_id);

    let state = WorldState::new();
    let (proposal, tx_id) = recorded_put_proposal();
    let run = |tx_id: &str, args: &[&str]| {
        let view = state.view();
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let mut ctx =
            TxContext::new(&view, "mychannel", tx_id, "mycc", Bytes::new(), &AllowAll).with_proposal(proposal.clone());
        let started = Instant::now();
        let result = support.execute(&installed.package_id, &mut ctx, &args, false, &NoNested);
        (result, ctx.finish(), started.elapsed())
    };

    // The shim registers (the peer waits up to the startup timeout for it), then runs the transaction.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (response, sim) = loop {
        match run(&tx_id, &["put", "k1", "v1"]) {
            (Ok((response, _)), sim, _) => break (response, sim),
            (Err(e), _, _) if Instant::now() < deadline => {
                let _ = std::io::stderr().write_all(format!("waiting for the shim: {e}\n").as_bytes());
            }
            (Err(e), _, _) => panic!("the shim never ran the transaction: {e}\n{}", shim_log(tmp.path())),
        }
    };
    assert_eq!(response.status, 200, "{}", response.message);
    assert_eq!(response.payload.as_ref(), b"v1");
    let rwset = TxReadWriteSet::decode(sim.results).unwrap();
    let mycc = rwset.ns_rwset.iter().find(|n| n.namespace == "mycc").expect("a write set of mycc");
    let kv = ferrofabric_protos::kvrwset::KvrwSet::decode(mycc.rwset.clone()).unwrap();
    assert_eq!(kv.writes.len(), 1);
    assert_eq!((kv.writes[0].key.as_str(), kv.writes[0].value.as_ref()), ("k1", b"v1".as_ref()));

    // A chaincode error is the chaincode's response, not a peer error.
    let (result, _, _) = run(&format!("{tx_id}-fail"), &["fail", "boom"]);
    let (response, _) = result.unwrap();
    assert_eq!((response.status, response.message.as_str()), (500, "boom"));

    // Killed: the next transaction fails within the startup timeout, with no answer invented.
    drop(shim);
    std::thread::sleep(Duration::from_millis(300));
    let (result, _, took) = run(&format!("{tx_id}-after"), &["put", "k2", "v2"]);
    let e = result.expect_err("a transaction of a killed chaincode").to_string();
    assert!(e.contains("could not launch chaincode") || e.contains("terminated"), "{e}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

fn shim_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("shim.log")).unwrap_or_default()
}
