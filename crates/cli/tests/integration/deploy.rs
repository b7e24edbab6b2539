//! `deploy/` as shipped, started on 127.0.0.1: `deploy/bootstrap` makes the crypto material, the channel's
//! genesis block (three etcdraft consenters) and every instance's configuration; each daemon is started with the
//! exact command line of its systemd unit (`deploy/systemd/*.service`, `%i` = the instance); `deploy/join-channel`
//! joins the three orderers over the channel participation API (mutual TLS, as osnadmin). Then a `_lifecycle`
//! approval by Org1's admin, endorsed by Org1's endorser and broadcast over TLS to an orderer, is ordered through
//! Raft and committed VALID by the committers of both organisations.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_comm::ClientTls;
use ferrofabric_endorser::{assemble_transaction, create_proposal};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::lifecycle::{chaincode_source, ApproveChaincodeDefinitionForMyOrgArgs, ChaincodeSource};
use ferrofabric_protos::peer::endorser_client::EndorserClient;
use futures::StreamExt;
use prost::Message;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The daemons started for the test; killed when dropped.
struct Daemons(Vec<(String, Child)>);

impl Drop for Daemons {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The command line of `deploy/systemd/<unit>` for instance `instance`, with the installed binary and
/// configuration directory replaced by the test's.
fn unit_command(unit: &str, instance: &str, bin: &Path, etc: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("deploy/systemd").join(unit)).unwrap();
    let line = text.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart in the unit");
    line.split_whitespace()
        .map(|w| {
            w.replace("/usr/local/bin/ferrofabric", &bin.display().to_string())
                .replace("/etc/ferrofabric", &etc.display().to_string())
                .replace("%i", instance)
        })
        .collect()
}

fn start(daemons: &mut Daemons, unit: &str, instance: &str, bin: &Path, etc: &Path, logs: &Path) {
    let argv = unit_command(unit, instance, bin, etc);
    let log = std::fs::File::create(logs.join(format!("{instance}.log"))).unwrap();
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .env("FERROFABRIC_LOG", "info,raft=warn,h2=warn,hyper=warn,tower=warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    daemons.0.push((instance.to_owned(), child));
}

fn wait_for_port(port: u16, what: &str, logs: &Path) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {addr}\n{}", logs_of(logs));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of the Prometheus sample `name` (exact, labels included) at `port`'s `/metrics`, 0 if absent.
fn metric(port: u16, name: &str) -> f64 {
    let Some((_, body)) = crate::daemon::http_get(&format!("127.0.0.1:{port}"), "/metrics") else { return 0.0 };
    body.lines()
        .filter_map(|l| l.strip_prefix(name))
        .find_map(|rest| rest.strip_prefix(' ').and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

fn logs_of(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        out.push_str(&format!(
            "== {}\n{}\n",
            e.path().display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_layout_runs_on_one_host() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_ferrofabric"));
    let tmp = tempfile::tempdir().unwrap();
    let (etc, data, logs) = (tmp.path().join("etc"), tmp.path().join("data"), tmp.path().join("logs"));
    std::fs::create_dir_all(&logs).unwrap();

    // Every port of network.env, freshly picked so the test runs beside others.
    let names = [
        "ORDERER0_PORT",
        "ORDERER0_ADMIN_PORT",
        "ORDERER0_OPS_PORT",
        "ORDERER1_PORT",
        "ORDERER1_ADMIN_PORT",
        "ORDERER1_OPS_PORT",
        "ORDERER2_PORT",
        "ORDERER2_ADMIN_PORT",
        "ORDERER2_OPS_PORT",
        "ORG1_COMMITTER_PORT",
        "ORG1_ENDORSER_PORT",
        "ORG1_OPS_PORT",
        "ORG2_COMMITTER_PORT",
        "ORG2_ENDORSER_PORT",
        "ORG2_OPS_PORT",
    ];
    let ports: std::collections::HashMap<&str, u16> =
        names.iter().map(|n| (*n, ferrofabric_comm::unused_port("127.0.0.1").unwrap())).collect();
    let script = |name: &str, args: &[&str]| {
        let mut cmd = Command::new(repo().join("deploy").join(name));
        cmd.args(args).env("DATA_DIR", &data).env("BATCH_TIMEOUT", "200ms");
        for (k, v) in &ports {
            cmd.env(k, v.to_string());
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "deploy/{name} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    script("bootstrap", &["--out", etc.to_str().unwrap(), "--bin", bin.to_str().unwrap()]);

    let mut daemons = Daemons(Vec::new());
    for i in 0..3 {
        start(&mut daemons, "ferrofabric-orderer@.service", &format!("orderer{i}"), &bin, &etc, &logs);
    }
    for i in 0..3 {
        wait_for_port(ports[format!("ORDERER{i}_ADMIN_PORT").as_str()], "the orderer's admin endpoint", &logs);
    }
    script("join-channel", &["--out", etc.to_str().unwrap()]);
    for org in 1..=2 {
        start(&mut daemons, "ferrofabric-committer@.service", &format!("org{org}-committer"), &bin, &etc, &logs);
        start(&mut daemons, "ferrofabric-endorser@.service", &format!("org{org}-endorser"), &bin, &etc, &logs);
    }
    wait_for_port(ports["ORG1_ENDORSER_PORT"], "Org1's endorser", &logs);

    // Org1's admin approves a chaincode definition for Org1, endorsed by Org1's endorser.
    let crypto = etc.join("crypto");
    let admin = SigningIdentity::from_msp_dir(
        "Org1MSP",
        &crypto.join("peerOrganizations/org1.example.com/users/Admin@org1.example.com/msp"),
    )
    .unwrap();
    let approve = ApproveChaincodeDefinitionForMyOrgArgs {
        sequence: 1,
        name: "kv".into(),
        version: "1.0".into(),
        source: Some(ChaincodeSource {
            r#type: Some(chaincode_source::Type::LocalPackage(chaincode_source::Local {
                package_id: "kv_1.0:builtin".into(),
            })),
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let args = [Bytes::from_static(b"ApproveChaincodeDefinitionForMyOrg"), Bytes::from(approve)];
    let proposal = create_proposal(&admin, "mychannel", "_lifecycle", &args);
    let mut endorser =
        EndorserClient::connect(format!("http://127.0.0.1:{}", ports["ORG1_ENDORSER_PORT"])).await.unwrap();
    let response = endorser.process_proposal(proposal.signed.clone()).await.unwrap().into_inner();
    assert_eq!(response.response.as_ref().map(|r| r.status), Some(200), "endorsement: {response:?}");
    let envelope = assemble_transaction(&proposal.proposal, &[response], &admin).unwrap();

    // Broadcast over TLS to orderer1, retrying while the Raft cluster elects its leader.
    let tls = ClientTls {
        ca_pem: std::fs::read(crypto.join("ordererOrganizations/example.com/tlsca/tlsca.example.com-cert.pem"))
            .unwrap(),
        server_name: "orderer1.example.com".into(),
        identity: None,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let channel = ferrofabric_comm::connect(&format!("127.0.0.1:{}", ports["ORDERER1_PORT"]), Some(&tls)).await;
        let status = match channel {
            Ok(channel) => {
                match ferrofabric_comm::broadcast(channel, futures::stream::iter(vec![envelope.clone()])).await {
                    Ok(mut responses) => responses.next().await.and_then(Result::ok).map(|r| r.status),
                    Err(_) => None,
                }
            }
            Err(_) => None,
        };
        if status == Some(Status::Success as i32) {
            break;
        }
        assert!(Instant::now() < deadline, "no SUCCESS from the orderer (last: {status:?})\n{}", logs_of(&logs));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Both organisations' committers commit the transaction as VALID in block 1.
    let deadline = Instant::now() + Duration::from_secs(60);
    for org in 1..=2 {
        let ops = ports[format!("ORG{org}_OPS_PORT").as_str()];
        loop {
            let height = metric(ops, "ledger_blockchain_height{channel=\"mychannel\"}");
            let valid = metric(ops, "ledger_transaction_count{channel=\"mychannel\",validation_code=\"VALID\"}");
            if height >= 2.0 && valid >= 1.0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "Org{org}'s committer: height {height}, {valid} valid transactions\n{}",
                logs_of(&logs)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    for (name, child) in &mut daemons.0 {
        assert!(child.try_wait().unwrap().is_none(), "{name} exited\n{}", logs_of(&logs));
    }
}
