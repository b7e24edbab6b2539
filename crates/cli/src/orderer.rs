//! `ferrofabric orderer`: the command-line entry of the node. A YAML file in the shape of Fabric's
//! `orderer.yaml` (see [`ferrofabric_orderer::OrdererConfig`]) with flags that override it, so that a script can start a
//! node without writing a file. The node runs the solo, etcdraft, BFT and Kafka consensus backends
//! (`ferrofabric_consensus::backends`); a `kafka` channel reaches its brokers as the file's `Kafka` section says
//! (TLS, SASL/PLAIN, librdkafka properties, payloads aside or inline; docs/KAFKA.md).

use std::path::PathBuf;

use ferrofabric_comm::{parse_addr, TlsConfig};
use ferrofabric_orderer::{start, OrdererConfig};

/// Arguments of `ferrofabric orderer`.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct OrdererArgs {
    /// Configuration file (Fabric orderer.yaml layout, with Fabric's `ORDERER_*` environment overrides); without
    /// it, `$FABRIC_CFG_PATH/orderer.yaml` if there is one, else built-in defaults.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// gRPC (Broadcast/Deliver) listen address `host:port` (General.ListenAddress/ListenPort).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Channel participation (admin) listen address `host:port` (Admin.ListenAddress); empty disables it.
    #[arg(long, value_name = "ADDR")]
    pub admin_listen: Option<String>,
    /// Operations (health, metrics) listen address `host:port` (Operations.ListenAddress); empty disables it.
    #[arg(long, value_name = "ADDR")]
    pub operations_listen: Option<String>,
    /// Local MSP directory in cryptogen's layout (General.LocalMSPDir).
    #[arg(long, value_name = "DIR")]
    pub msp_dir: Option<PathBuf>,
    /// Local MSP ID (General.LocalMSPID).
    #[arg(long, value_name = "ID")]
    pub msp_id: Option<String>,
    /// Ledger directory (FileLedger.Location; Raft WAL and snapshots go below it unless configured).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// TLS directory in cryptogen's layout (`server.crt`, `server.key`, `ca.crt`): enables TLS on the gRPC
    /// listener and mutual TLS on the admin listener, and names this node among consenters by `server.crt`.
    #[arg(long, value_name = "DIR")]
    pub tls_dir: Option<PathBuf>,
    /// A channel's genesis block to join at start unless the channel is already served, as `osnadmin channel
    /// join` would (a convenience for scripts and `ferrofabric node --processes`).
    #[arg(long, value_name = "FILE")]
    pub join: Option<PathBuf>,
}

impl OrdererArgs {
    /// The configuration: the file (or defaults) with the flags applied.
    ///
    /// Errors: unreadable or malformed file, malformed addresses.
    pub(crate) fn to_config(&self) -> anyhow::Result<OrdererConfig> {
        // Fabric's orderer reads $FABRIC_CFG_PATH/orderer.yaml when no file is named.
        let file = self.config.clone().or_else(|| ferrofabric_comm::fabric_cfg_file("orderer.yaml"));
        let mut c = match &file {
            Some(path) => OrdererConfig::load(path)?,
            None => OrdererConfig::defaults(),
        };
        if let Some(listen) = &self.listen {
            let addr = parse_addr(listen)?;
            c.general.listen_address = addr.ip().to_string();
            c.general.listen_port = addr.port();
        }
        if let Some(a) = &self.admin_listen {
            c.admin.listen_address = a.clone();
        }
        if let Some(a) = &self.operations_listen {
            c.operations.listen_address = a.clone();
        }
        if let Some(d) = &self.msp_dir {
            c.general.local_msp_dir = Some(d.clone());
        }
        if let Some(id) = &self.msp_id {
            c.general.local_msp_id = Some(id.clone());
        }
        if let Some(d) = &self.data_dir {
            c.file_ledger.location = Some(d.clone());
            c.consensus.wal_dir = Some(d.join("etcdraft/wal"));
            c.consensus.snap_dir = Some(d.join("etcdraft/snapshot"));
        }
        if let Some(d) = &self.tls_dir {
            let server = TlsConfig {
                enabled: true,
                certificate: Some(d.join("server.crt")),
                private_key: Some(d.join("server.key")),
                root_cas: vec![d.join("ca.crt")],
                client_auth_required: false,
                client_root_cas: Vec::new(),
            };
            c.admin.tls =
                TlsConfig { client_auth_required: true, client_root_cas: vec![d.join("ca.crt")], ..server.clone() };
            c.general.cluster.client_certificate = Some(d.join("server.crt"));
            c.general.cluster.client_private_key = Some(d.join("server.key"));
            c.general.tls = server;
        }
        Ok(c)
    }
}

/// Runs the node until Ctrl-C or SIGTERM. Builds its own multi-threaded Tokio runtime, so it must not be
/// called from within one.
///
/// Errors: configuration or start-up errors (see [`ferrofabric_orderer::start`]).
pub(crate) fn run(args: OrdererArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    let plugins = ferrofabric_consensus::backends(&config)?;
    let runtime = crate::daemon_runtime("orderer")?;
    runtime.block_on(async move {
        let node = start(config, plugins).await?;
        if let Some(path) = &args.join {
            join_unless_served(&node, path).await?;
        }
        println!(
            "orderer listening: grpc {} admin {} operations {}",
            node.grpc_addr,
            node.admin_addr.map(|a| a.to_string()).unwrap_or_else(|| "-".into()),
            node.operations_addr.map(|a| a.to_string()).unwrap_or_else(|| "-".into()),
        );
        ferrofabric_comm::wait_for_signal().await;
        tracing::info!("shutting down");
        node.shutdown().await;
        Ok(())
    })
}

/// Joins the channel of the genesis block at `path` unless `node` serves it already.
///
/// Errors: the file cannot be read or is not a channel's config block, or the join fails (Fabric's
/// `JoinChannel` reasons).
async fn join_unless_served(node: &ferrofabric_orderer::RunningOrderer, path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let block = bytes::Bytes::from(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?);
    let channel = ferrofabric_channelconfig::ChannelConfig::from_config_block(
        &<ferrofabric_protos::common::Block as prost::Message>::decode(block.clone())
            .with_context(|| format!("{} is not a block", path.display()))?,
    )
    .with_context(|| format!("{} is not a config block", path.display()))?
    .channel_id()
    .to_owned();
    if node.registrar.channel(&channel).is_some() {
        return Ok(());
    }
    let registrar = node.registrar.clone();
    let state =
        tokio::task::spawn_blocking(move || registrar.join(block)).await?.map_err(|e| anyhow::anyhow!("{e}"))?;
    tracing::info!(channel = %state.name, "joined the channel of {}", path.display());
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/fabric-2.5");
        let args = OrdererArgs {
            config: Some(fixture.join("orderer.yaml")),
            listen: Some("127.0.0.1:17050".into()),
            admin_listen: Some("127.0.0.1:17053".into()),
            operations_listen: Some(String::new()),
            msp_dir: Some("/tmp/msp".into()),
            msp_id: Some("OtherMSP".into()),
            data_dir: Some("/tmp/data".into()),
            tls_dir: Some("/tmp/tls".into()),
            join: None,
        };
        let c = args.to_config().unwrap();
        assert_eq!(c.listen_addr().unwrap(), "127.0.0.1:17050".parse().unwrap());
        assert_eq!(c.admin.listen_address, "127.0.0.1:17053");
        assert!(c.operations.listen_address.is_empty());
        assert_eq!(c.general.local_msp_dir.as_deref(), Some(std::path::Path::new("/tmp/msp")));
        assert_eq!(c.general.local_msp_id.as_deref(), Some("OtherMSP"));
        assert_eq!(c.file_ledger.location.as_deref(), Some(std::path::Path::new("/tmp/data")));
        assert_eq!(c.consensus.wal_dir.as_deref(), Some(std::path::Path::new("/tmp/data/etcdraft/wal")));
        assert!(c.general.tls.enabled && !c.general.tls.client_auth_required);
        assert_eq!(c.general.tls.private_key.as_deref(), Some(std::path::Path::new("/tmp/tls/server.key")));
        assert!(c.admin.tls.enabled && c.admin.tls.client_auth_required);
        assert_eq!(c.admin.tls.client_root_cas, vec![std::path::PathBuf::from("/tmp/tls/ca.crt")]);
        // Untouched values come from the file.
        assert!(c.channel_participation.enabled);

        let defaults = OrdererArgs::default().to_config().unwrap();
        assert_eq!(defaults.listen_addr().unwrap(), "127.0.0.1:7050".parse().unwrap());
        assert_eq!(defaults.admin.listen_address, "127.0.0.1:7053");
    }
}
