//! `ferrofabric node` in-process over real gRPC on loopback: a node started in a temporary directory writes
//! node.json and the connection profile, commits smallbank and transfer transactions endorsed at its peers and
//! ordered by its orderer, reports them on DeliverFiltered, keeps its state across a restart, and reports MVCC
//! conflicts and endorsement-policy failures with Fabric's codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use ferrofabric_msp::SigningIdentity;
use ferrofabric_node::{start, NetworkClient, NodeArgs, NodeInfo, RunningNode};
use ferrofabric_protos::peer::TxValidationCode as Code;

const WAIT: Duration = Duration::from_secs(60);

async fn start_node(dir: &std::path::Path) -> RunningNode {
    tokio::time::timeout(Duration::from_secs(120), start(&NodeArgs::ephemeral(dir))).await.unwrap().unwrap()
}

fn user(node: &RunningNode, org: usize) -> SigningIdentity {
    SigningIdentity::from_msp_dir(["Org1MSP", "Org2MSP"][org], &node.layout.user_msp(org, "User1")).unwrap()
}

/// `GET path` on the operations listener at `addr`: the status and the body.
async fn http_get(addr: &str, path: &str) -> (u16, String) {
    let url = format!("http://{addr}{path}");
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(20)))
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent.get(&url).call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
        (response.status().as_u16(), response.body_mut().read_to_string().unwrap())
    })
    .await
    .unwrap()
}

/// A query answered by peer `peer` (status 200 required): the response payload.
async fn query(client: &NetworkClient, creator: &SigningIdentity, cc: &str, args: &[&[u8]], peer: usize) -> Vec<u8> {
    let p = client.proposal(creator, cc, args);
    let r = client.endorse(&p, &[peer]).await.unwrap();
    r[0].response.as_ref().unwrap().payload.to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_writes_its_files_commits_smallbank_and_transfer_and_keeps_state_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;

    // node.json and the connection profile exist and parse.
    let info = NodeInfo::read(&dir.path().join("node.json")).unwrap();
    assert_eq!(info, node.info);
    assert_eq!(info.channel, "mychannel");
    assert_eq!(info.peers.len(), 2);
    assert!(info.crypto.join("peerOrganizations/org1.example.com/users/User1@org1.example.com/msp").is_dir());
    let profile: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("connection-profile.json")).unwrap()).unwrap();
    // TLS by default: grpcs URLs trusting the organisations' TLS CAs.
    let tls_ca = info.tls_ca.clone().unwrap();
    assert_eq!(std::fs::read_to_string(&tls_ca).unwrap().matches("BEGIN CERTIFICATE").count(), 3);
    assert_eq!(profile["peers"]["peer0.org1.example.com"]["url"], format!("grpcs://{}", info.peers["Org1MSP"]));
    assert_eq!(profile["orderers"]["orderer.example.com"]["url"], format!("grpcs://{}", info.orderer));
    assert_eq!(profile["orderers"]["orderer.example.com"]["tlsCACerts"]["path"], tls_ca.to_str().unwrap());
    assert_eq!(info.connection_profile, std::path::absolute(dir.path().join("connection-profile.json")).unwrap());

    // One smallbank transaction (both orgs endorse: AND policy) and one transfer transaction (Org2's peer alone:
    // OR policy), through the peers and the orderer; both VALID on DeliverFiltered.
    let client = NetworkClient::connect(&info).await.unwrap();
    let user1 = user(&node, 0);
    let mut events = client.commit_events(1, &user1).await.unwrap();
    let (sb, sb_env) = client
        .endorsed_tx(&user1, "smallbank", &[b"create_account", b"alice", b"Alice", b"100", b"1000"], &[0, 1])
        .await
        .unwrap();
    let (tr, tr_env) = client.endorsed_tx(&user1, "transfer", &[b"open", b"k1", b"250"], &[1]).await.unwrap();
    client.broadcast(vec![sb_env, tr_env]).await.unwrap();
    let codes = events.wait_for(&[sb.clone(), tr.clone()], WAIT).await.unwrap();
    assert_eq!(codes[&sb], Code::Valid);
    assert_eq!(codes[&tr], Code::Valid);
    let height = node.committer.store.height();

    // Operations endpoints of every component, with Fabric's metric names.
    let ops = |c: &str| info.operations.get(c).cloned().unwrap_or_else(|| panic!("no operations address of {c}"));
    for component in ["orderer", "committer", "blockstore"] {
        let (status, body) = http_get(&ops(component), "/healthz").await;
        assert!(status == 200 && body.contains(r#""status":"OK""#), "{component} /healthz: {status} {body}");
        let (status, body) = http_get(&ops(component), "/version").await;
        assert!(status == 200 && body.contains("Version"), "{component} /version: {status} {body}");
    }
    let (_, orderer_metrics) = http_get(&ops("orderer"), "/metrics").await;
    assert!(orderer_metrics
        .lines()
        .any(|l| l.starts_with(r#"broadcast_processed_count{status="SUCCESS"}"#) && !l.ends_with(" 0")));
    // The committer sets the height gauge just after the store publishes the block (which is what the events
    // follow), so on a busy machine the gauge may lag the events for a moment.
    let height_line = format!(r#"ledger_blockchain_height{{channel="mychannel"}} {height}"#);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let committer_metrics = loop {
        let (_, text) = http_get(&ops("committer"), "/metrics").await;
        if text.contains(&height_line) || tokio::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(committer_metrics.contains(&height_line), "{committer_metrics}");
    assert!(committer_metrics.contains("ledger_block_processing_time_count"), "{committer_metrics}");
    assert!(committer_metrics.contains(r#"ledger_transaction_count{channel="mychannel",validation_code="VALID"}"#));
    drop((events, client));
    node.shutdown().await.unwrap();

    // Restart on the same directory: same chain, same state, chaincodes still defined (no new definitions).
    let node = start_node(dir.path()).await;
    assert_eq!(node.committer.store.height(), height);
    node.wait_for_replicas(WAIT).await.unwrap();
    let client = NetworkClient::connect(&node.info).await.unwrap();
    let user1 = user(&node, 0);
    assert_eq!(query(&client, &user1, "transfer", &[b"query", b"k1"], 0).await, b"250");
    let alice = query(&client, &user1, "smallbank", &[b"query", b"alice"], 1).await;
    assert_eq!(
        String::from_utf8(alice).unwrap(),
        r#"{"CustomId":"alice","CustomName":"Alice","SavingsBalance":1000,"CheckingBalance":100}"#
    );
    // And it keeps committing.
    let mut events = client.commit_events(0, &user1).await.unwrap();
    let (tx, env) = client.endorsed_tx(&user1, "transfer", &[b"open", b"k2", b"1"], &[0]).await.unwrap();
    client.broadcast(vec![env]).await.unwrap();
    assert_eq!(events.wait_for(std::slice::from_ref(&tx), WAIT).await.unwrap()[&tx], Code::Valid);
    drop((events, client));
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mvcc_conflicts_and_endorsement_policy_failures_show_up_in_deliver_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let client = NetworkClient::connect(&node.info).await.unwrap();
    let user1 = user(&node, 0);
    let mut events = client.commit_events(0, &user1).await.unwrap();

    // Two accounts.
    let mut setup = Vec::new();
    let mut envs = Vec::new();
    for args in [[&b"open"[..], b"x", b"10"], [b"open", b"y", b"0"]] {
        let (id, env) = client.endorsed_tx(&user1, "transfer", &args, &[0]).await.unwrap();
        setup.push(id);
        envs.push(env);
    }
    client.broadcast(envs).await.unwrap();
    ferrofabric_node::require_valid(&events.wait_for(&setup, WAIT).await.unwrap()).unwrap();
    node.wait_for_replicas(WAIT).await.unwrap();

    // Two transfers endorsed on the same version of x and y, both submitted: the second is an MVCC conflict.
    let (t1, e1) = client.endorsed_tx(&user1, "transfer", &[b"transfer", b"x", b"y", b"3"], &[0]).await.unwrap();
    let (t2, e2) = client.endorsed_tx(&user1, "transfer", &[b"transfer", b"x", b"y", b"4"], &[1]).await.unwrap();
    // smallbank under AND(Org1, Org2) endorsed by Org1 only.
    let (t3, e3) =
        client.endorsed_tx(&user1, "smallbank", &[b"create_account", b"bob", b"Bob", b"1", b"1"], &[0]).await.unwrap();
    client.broadcast(vec![e1, e2, e3]).await.unwrap();
    let codes = events.wait_for(&[t1.clone(), t2.clone(), t3.clone()], WAIT).await.unwrap();
    assert_eq!(codes[&t1], Code::Valid);
    assert_eq!(codes[&t2], Code::MvccReadConflict);
    assert_eq!(codes[&t3], Code::EndorsementPolicyFailure);

    // Only the valid transfer changed the state.
    node.wait_for_replicas(WAIT).await.unwrap();
    assert_eq!(query(&client, &user1, "transfer", &[b"query", b"x"], 1).await, b"7");
    assert_eq!(query(&client, &user1, "transfer", &[b"query", b"y"], 0).await, b"3");
    assert_eq!(query(&client, &user1, "smallbank", &[b"query", b"bob"], 0).await, b"", "bob must not exist");
    drop((events, client));
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_serves_clients_with_a_certificate_and_refuses_those_without() {
    let dir = tempfile::tempdir().unwrap();
    let args = NodeArgs { mutual_tls: true, ..NodeArgs::ephemeral(dir.path()) };
    // Starting defines the chaincodes through our own client, which presents User1's TLS certificate.
    let node = tokio::time::timeout(Duration::from_secs(120), start(&args)).await.unwrap().unwrap();
    let (cert, _) = node.info.tls_client.clone().expect("node.json names the client's TLS pair");
    assert!(cert.ends_with("users/User1@org1.example.com/tls/client.crt"), "{}", cert.display());

    // A transaction endorsed at a peer, ordered, and seen committed: every hop under mutual TLS.
    let client = NetworkClient::connect(&node.info).await.unwrap();
    let user1 = user(&node, 0);
    let mut events = client.commit_events(0, &user1).await.unwrap();
    let (tx, env) = client.endorsed_tx(&user1, "transfer", &[b"open", b"m1", b"5"], &[0]).await.unwrap();
    client.broadcast(vec![env]).await.unwrap();
    assert_eq!(events.wait_for(std::slice::from_ref(&tx), WAIT).await.unwrap()[&tx], Code::Valid);
    // And through the gateway, which dials the endorsers and the orderer with its peer's TLS pair.
    let proposal = client.proposal(&user1, "transfer", &[b"open", b"m2", b"5"]);
    client.submit_through_gateway(0, &user1, &proposal).await.unwrap();
    let tx = proposal.tx_id.clone();
    assert_eq!(events.wait_for(std::slice::from_ref(&tx), WAIT).await.unwrap()[&tx], Code::Valid);

    // The same TLS without a client certificate: the handshake is refused, so no call gets through.
    let mut anonymous = node.info.clone();
    anonymous.tls_client = None;
    let refused = match NetworkClient::connect(&anonymous).await {
        Err(_) => true,
        Ok(c) => c.propose(0, &c.proposal(&user1, "transfer", &[b"query", b"m1"])).await.is_err(),
    };
    assert!(refused, "a client without a certificate was served");
    drop((events, client));
    node.shutdown().await.unwrap();
}
