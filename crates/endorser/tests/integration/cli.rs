//! The endorser's configuration file: a YAML file with paths relative to it, and an endorser started from it
//! answering over gRPC (the `ferrofabric endorser` flags are tested in the CLI crate).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use ferrofabric_endorser::{create_proposal, start, EndorserConfig, EndorserFile};
use ferrofabric_protos::peer::endorser_client::EndorserClient;
use ferrofabric_testkit::Network;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_config_starts_a_serving_endorser() {
    let net = Network::generate(99).unwrap();
    let dir = tempfile::tempdir().unwrap();
    net.write_msp_dirs(dir.path()).unwrap();
    std::fs::write(dir.path().join("mychannel.block"), net.genesis_block()).unwrap();
    let yaml = "listen: 127.0.0.1:1\n\
                msp_dir: peerOrganizations/org2.example.com/peers/peer0.org2.example.com/msp\n\
                msp_id: Org2MSP\n\
                genesis: mychannel.block\n";
    let file = dir.path().join("endorser.yaml");
    std::fs::write(&file, yaml).unwrap();

    let f = EndorserFile::load(&file).unwrap();
    assert_eq!(f.listen.as_deref(), Some("127.0.0.1:1"));
    assert_eq!(f.msp_id.as_deref(), Some("Org2MSP"));
    assert_eq!(f.genesis, Some(dir.path().join("mychannel.block")));
    assert_eq!(f.committer, None);
    let config = EndorserConfig {
        listen: "127.0.0.1:0".into(),
        msp_dir: f.msp_dir.unwrap(),
        msp_id: f.msp_id.unwrap(),
        genesis: f.genesis.unwrap(),
        committer: f.committer,
        ..EndorserConfig::default()
    };

    let running = start(&config).await.unwrap();
    assert_eq!(running.endorser.identity(), net.peer(1).serialized());
    let mut client = EndorserClient::connect(format!("http://{}", running.addr)).await.unwrap();
    let p = create_proposal(net.client(1), "mychannel", "kv", &[Bytes::from_static(b"get"), Bytes::from_static(b"k")]);
    let r = client.process_proposal(p.signed).await.unwrap().into_inner();
    let response = r.response.unwrap();
    assert_eq!(response.status, 500);
    assert!(response.message.ends_with("chaincode kv not found"), "{}", response.message);
    running.shutdown().await;

    // Unknown keys are errors.
    std::fs::write(&file, "listen: x\nunknown_key: 1\n").unwrap();
    assert!(EndorserFile::load(&file).is_err());
}
