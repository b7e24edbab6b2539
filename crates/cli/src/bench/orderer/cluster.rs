//! A cluster of orderer processes (etcdraft, BFT or Kafka) under load.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use bytes::Bytes;

use ferrofabric_comm::{ClientTls, TlsConfig};
use ferrofabric_orderer::{start, OrdererConfig};

use super::admin::join_channel;
use super::genesis::{bft_genesis, raft_crypto, with_kafka, with_raft_consenters};
use super::load::{measure, wait_until_ordering};
use super::workset::{OrdererBenchArgs, RunResult, Workset};

/// Starts `args.nodes` etcdraft or BFT nodes in this process with O-II on or off, waits until they order, runs
/// one measurement, shuts them down.
pub(crate) async fn cluster_run(
    work: &Arc<Workset>,
    args: &OrdererBenchArgs,
    parallel: bool,
    warmup: &Bytes,
) -> anyhow::Result<RunResult> {
    let bft = args.consensus == "bft";
    let kafka = args.consensus == "kafka";
    let least = if bft {
        4
    } else if kafka {
        1
    } else {
        2
    };
    anyhow::ensure!(args.nodes >= least, "--consensus {} needs --nodes {least} or more", args.consensus);
    let dir = tempfile::tempdir().context("temporary directory")?;
    let crypto = dir.path().join("crypto");
    work.net.write_msp_dirs(&crypto).map_err(|e| anyhow!("writing MSP directories: {e}"))?;
    let shared_msp = crypto.join("ordererOrganizations/example.com/orderers/orderer.example.com/msp");
    let raft = raft_crypto(args.nodes)?;
    let org = raft.orgs().first().ok_or_else(|| anyhow!("cryptogen made no orderer organisation"))?;
    let ca = dir.path().join("tlsca.pem");
    std::fs::write(&ca, org.tlsca().cert_pem())?;
    let ports: Vec<u16> =
        (0..args.nodes).map(|_| ferrofabric_comm::unused_port("127.0.0.1")).collect::<Result<_, _>>()?;
    let consenters = org
        .nodes()
        .iter()
        .zip(&ports)
        .map(|(m, port)| ferrofabric_protos::etcdraft::Consenter {
            host: "127.0.0.1".into(),
            port: u32::from(*port),
            client_tls_cert: Bytes::from(m.tls_cert_pem().to_owned()),
            server_tls_cert: Bytes::from(m.tls_cert_pem().to_owned()),
        })
        .collect();
    let options = ferrofabric_protos::etcdraft::Options {
        tick_interval: "100ms".into(),
        election_tick: 10,
        heartbeat_tick: 1,
        max_inflight_blocks: 5,
        snapshot_interval_size: 16 << 20,
    };
    // Kafka: an existing cluster, or three brokers of our own for this run (a fresh log for every run).
    let mut brokers = None;
    let genesis = if bft {
        bft_genesis(work, org, &crypto, &ports)?
    } else if kafka {
        let bootstrap = match &args.kafka_brokers {
            Some(b) => b.clone(),
            None => {
                let cluster = ferrofabric_testkit::kafka::KafkaCluster::start(
                    &dir.path().join("kafka"),
                    3,
                    Duration::from_secs(3600),
                )
                .context("starting Kafka brokers (see docs/KAFKA.md)")?;
                brokers.insert(cluster).bootstrap()
            }
        };
        with_kafka(&work.net.genesis_block(), bootstrap.split(',').map(str::to_owned).collect())?
    } else {
        with_raft_consenters(&work.net.genesis_block(), consenters, options)?
    };
    let mut nodes = Vec::new();
    for (i, (member, port)) in org.nodes().iter().zip(&ports).enumerate() {
        let home = dir.path().join(format!("node{i}"));
        std::fs::create_dir_all(&home)?;
        let (cert, key) = (home.join("tls.crt"), home.join("tls.key"));
        std::fs::write(&cert, member.tls_cert_pem())?;
        std::fs::write(&key, member.tls_key_pem())?;
        let mut config = OrdererConfig::defaults();
        config.general.listen_address = "127.0.0.1".into();
        config.general.listen_port = *port;
        config.admin.listen_address = "127.0.0.1:0".into();
        config.operations.listen_address = String::new();
        // BFT consenters sign blocks each with its own identity, the one the consenter mapping names.
        let msp = if bft { org.member_dir(&crypto, member).join("msp") } else { shared_msp.clone() };
        config.general.local_msp_dir = Some(msp);
        config.general.local_msp_id = Some("OrdererMSP".into());
        config.file_ledger.location = Some(home.join("ledger"));
        config.consensus.wal_dir = Some(home.join("etcdraft/wal"));
        config.consensus.snap_dir = Some(home.join("etcdraft/snapshot"));
        config.ferrofabric.parallel_checks = parallel;
        config.ferrofabric.sync_every_block = !args.no_fsync;
        config.kafka.payloads = args.payloads.clone();
        // Node-to-node traffic is mutual TLS, so the gRPC listener always runs TLS here.
        config.general.tls = TlsConfig {
            enabled: true,
            certificate: Some(cert.clone()),
            private_key: Some(key.clone()),
            root_cas: vec![ca.clone()],
            client_root_cas: vec![ca.clone()],
            ..TlsConfig::default()
        };
        config.general.cluster.client_certificate = Some(cert);
        config.general.cluster.client_private_key = Some(key);
        let plugins = ferrofabric_consensus::backends(&config)?;
        nodes.push(start(config, plugins).await.with_context(|| format!("starting {} node {i}", args.consensus))?);
    }
    let result = async {
        for node in &nodes {
            let admin = node.admin_addr.ok_or_else(|| anyhow!("no admin listener"))?.to_string();
            join_channel(&admin, &genesis).await?;
        }
        let tls = ClientTls {
            ca_pem: org.tlsca().cert_pem().as_bytes().to_vec(),
            server_name: args.tls_server_name.clone(),
            identity: None,
        };
        let addrs: Vec<String> = nodes.iter().map(|n| n.grpc_addr.to_string()).collect();
        // Every node, for the clients are spread over all of them: a Kafka orderer answers SERVICE_UNAVAILABLE
        // until its own connection to the brokers is up, which may come after node 0's.
        for addr in &addrs {
            wait_until_ordering(addr, &tls, warmup).await?;
        }
        let egress = || nodes.iter().map(|n| n.registrar.metrics().cluster_egress_bytes()).sum::<u64>();
        let posted = || {
            nodes
                .iter()
                .map(|n| n.registrar.metrics().consensus_log_bytes_posted())
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        };
        let (before, posted_before) = (egress(), posted());
        let mut run = measure(work, &addrs, Some(&tls), args.clients).await?;
        let per_tx = |bytes: u64| bytes as f64 / work.envelopes.len().max(1) as f64;
        run.cluster_bytes_per_tx = Some(per_tx(egress().saturating_sub(before)));
        if kafka {
            let posted_after = posted();
            run.kafka_ordered_bytes_per_tx = Some(per_tx(posted_after.0.saturating_sub(posted_before.0)));
            run.kafka_payload_bytes_per_tx = Some(per_tx(posted_after.1.saturating_sub(posted_before.1)));
        }
        anyhow::Ok(run)
    }
    .await;
    for node in nodes {
        node.shutdown().await;
    }
    drop(brokers);
    result
}
