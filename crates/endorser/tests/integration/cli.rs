//! `ferrofabric endorser` configuration: a YAML file with paths relative to it, flags overriding it, and a started
//! endorser answering over gRPC.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use clap::Parser;
use ferrofabric_endorser::cli::{start, EndorserArgs};
use ferrofabric_endorser::client::create_proposal;
use ferrofabric_protos::peer::endorser_client::EndorserClient;
use ferrofabric_testkit::Network;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: EndorserArgs,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_config_with_flag_overrides_starts_a_serving_endorser() {
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

    let cli = Cli::parse_from(["endorser", "--config", file.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let config = cli.args.to_config().unwrap();
    assert_eq!(config.listen, "127.0.0.1:0");
    assert_eq!(config.msp_id, "Org2MSP");
    assert_eq!(config.genesis, dir.path().join("mychannel.block"));
    assert_eq!(config.committer, None);

    let running = start(&config).await.unwrap();
    assert_eq!(running.endorser.identity(), net.peer(1).serialized());
    let mut client = EndorserClient::connect(format!("http://{}", running.addr)).await.unwrap();
    let p = create_proposal(net.client(1), "mychannel", "kv", &[Bytes::from_static(b"get"), Bytes::from_static(b"k")]);
    let r = client.process_proposal(p.signed).await.unwrap().into_inner();
    let response = r.response.unwrap();
    assert_eq!(response.status, 500);
    assert!(response.message.ends_with("chaincode kv not found"), "{}", response.message);
    running.shutdown().await;

    // Required settings are reported when missing.
    let err = Cli::parse_from(["endorser", "--msp-id", "Org1MSP"]).args.to_config().unwrap_err();
    assert!(err.to_string().contains("msp_dir is required"), "{err}");
    std::fs::write(&file, "listen: x\nunknown_key: 1\n").unwrap();
    assert!(Cli::parse_from(["endorser", "--config", file.to_str().unwrap()]).args.to_config().is_err());
}
