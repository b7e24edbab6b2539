//! One orderer node of this process under load (solo, or a one-consenter etcdraft channel).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Context};

use ferrofabric_comm::{ClientTls, TlsConfig};
use ferrofabric_orderer::{start, OrdererConfig};

use super::admin::join_channel;
use super::genesis::consenter_certificate;
use super::load::measure;
use super::workset::{OrdererBenchArgs, RunResult, Workset};

/// Starts an own node with O-II on or off, runs one measurement, shuts it down.
pub(crate) async fn own_node_run(
    work: &Arc<Workset>,
    args: &OrdererBenchArgs,
    parallel: bool,
) -> anyhow::Result<RunResult> {
    let dir = tempfile::tempdir().context("temporary directory")?;
    let crypto = dir.path().join("crypto");
    work.net.write_msp_dirs(&crypto).map_err(|e| anyhow!("writing MSP directories: {e}"))?;
    let node_dir = crypto.join("ordererOrganizations/example.com/orderers/orderer.example.com");
    let mut config = OrdererConfig::defaults();
    config.general.listen_port = 0;
    config.admin.listen_address = "127.0.0.1:0".into();
    config.operations.listen_address = String::new();
    config.general.local_msp_dir = Some(node_dir.join("msp"));
    config.general.local_msp_id = Some("OrdererMSP".into());
    config.file_ledger.location = Some(dir.path().join("ledger"));
    config.ferrofabric.parallel_checks = parallel;
    if let Some(t) = std::env::var("FERROFABRIC_BENCH_CRYPTO_THREADS").ok().and_then(|v| v.parse().ok()) {
        config.ferrofabric.crypto_threads = t;
    }
    config.ferrofabric.sync_every_block = !args.no_fsync;
    // The generated network's channel names the fixture's orderer as its single etcdraft consenter; tell the
    // node it is that consenter (by its certificate) so that it serves the channel.
    let consenter_cert = dir.path().join("consenter.crt");
    std::fs::write(&consenter_cert, consenter_certificate(&work.net.genesis_block())?)?;
    config.general.cluster.client_certificate = Some(consenter_cert);
    if args.tls {
        config.general.tls = TlsConfig {
            enabled: true,
            certificate: Some(node_dir.join("tls/server.crt")),
            private_key: Some(node_dir.join("tls/server.key")),
            ..TlsConfig::default()
        };
    }
    let plugins = ferrofabric_consensus::backends(&config)?;
    let node = start(config, plugins).await?;
    let admin = node.admin_addr.ok_or_else(|| anyhow!("no admin listener"))?.to_string();
    join_channel(&admin, &work.net.genesis_block()).await?;
    let tls = if args.tls {
        Some(ClientTls {
            ca_pem: std::fs::read(node_dir.join("tls/ca.crt"))?,
            server_name: args.tls_server_name.clone(),
            identity: None,
        })
    } else {
        None
    };
    if std::env::var_os("FERROFABRIC_BENCH_DEBUG").is_some() {
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(1).build()?);
        let handler = ferrofabric_orderer::BroadcastHandler::new(node.registrar.clone(), pool, 1, rx);
        let envs = work.envelopes.clone();
        let per = std::thread::Builder::new()
            .name("check-probe".into())
            .spawn(move || {
                let m = envs.len().min(10_000);
                let _ = handler.check(envs[0].clone());
                let t = Instant::now();
                let ok = envs[..m].iter().filter(|e| handler.check((*e).clone()).is_ok()).count();
                (t.elapsed().as_secs_f64() * 1e6 / m as f64, ok == m)
            })?
            .join()
            .map_err(|_| anyhow!("probe panicked"))?;
        eprintln!("check: {:.1} µs per envelope on one thread (all ok: {})", per.0, per.1);
    }
    let result = measure(work, &[node.grpc_addr.to_string()], tls.as_ref(), args.clients).await;
    node.shutdown().await;
    result
}
