//! The arguments of `ferrofabric node` ([`NodeArgs`]).

use std::path::PathBuf;

use crate::layout::TlsMode;

/// Arguments of `ferrofabric node`.
#[derive(Debug, Clone, clap::Args)]
pub struct NodeArgs {
    /// The node directory: crypto material, channel genesis block and every component's state. Created on the
    /// first run; later runs restart from it.
    #[arg(long, value_name = "DIR", default_value = "ferrofabric-node")]
    pub dir: PathBuf,
    /// Host (IP address) every listener binds and `node.json` names.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The orderer's gRPC port (AtomicBroadcast); 0 = any free port.
    #[arg(long, default_value_t = 7050)]
    pub orderer_port: u16,
    /// Org1's peer port (protos.Endorser and protos.Deliver); 0 = any free port.
    #[arg(long, default_value_t = 7051)]
    pub peer_port: u16,
    /// Org2's peer port; 0 = any free port.
    #[arg(long, default_value_t = 9051)]
    pub peer2_port: u16,
    /// The block-store service's port; 0 = any free port.
    #[arg(long, default_value_t = 7060)]
    pub blockstore_port: u16,
    /// Channel ID (used when the directory is created).
    #[arg(long, default_value = "mychannel")]
    pub channel: String,
    /// Transactions per block, the channel's BatchSize.MaxMessageCount (used when the directory is created).
    #[arg(long, default_value_t = 100)]
    pub batch_size: u32,
    /// The channel's BatchTimeout, a Go duration (used when the directory is created).
    #[arg(long, default_value = "1s")]
    pub batch_timeout: String,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// The orderer's operations port (`/metrics`, `/healthz`, `/version`, Fabric's orderer default 8443); 0 = any
    /// free port.
    #[arg(long, default_value_t = 8443)]
    pub orderer_operations_port: u16,
    /// The committing peer's operations port (Fabric's peer default 9443); 0 = any free port. The block-store
    /// service's operations listener always takes a free port; node.json's `operations` names all three.
    #[arg(long, default_value_t = 9443)]
    pub operations_port: u16,
    /// Plain-text gRPC on every listener. Without it the orderer, peer and block-store ports speak TLS, as in
    /// Fabric's test network: each serves the TLS certificate cryptogen made for its node, and clients trust the
    /// organisations' TLS CAs, bundled in `DIR/tls-ca.pem` (node.json's `tls_ca`).
    #[arg(long)]
    pub no_tls: bool,
    /// Mutual TLS: every listener also requires a client certificate issued by one of the organisations' TLS CAs
    /// (Fabric's `clientAuthRequired`); node.json names the certificate and key our own client presents (User1 of
    /// Org1's TLS pair).
    #[arg(long, conflicts_with = "no_tls")]
    pub mutual_tls: bool,
    /// Runs orderer, committer, each endorser and the block store as supervised child processes, each in its own
    /// CPU cgroup under a node cgroup when the host lets us write one (cgroup v2 `cpu.weight` or v1
    /// `cpu.shares`). The committer serves commit events on its own address (`events` in node.json).
    #[arg(long)]
    pub processes: bool,
    /// With --processes: runs the QiOi controller, which raises the CPU shares of the components short of CPU while
    /// the committed throughput is below this many tx/s and another workload competes for the CPU.
    #[arg(long, value_name = "TX_PER_S", requires = "processes")]
    pub isolation_threshold: Option<f64>,
}

impl Default for NodeArgs {
    fn default() -> Self {
        NodeArgs {
            dir: PathBuf::from("ferrofabric-node"),
            host: "127.0.0.1".into(),
            orderer_port: 7050,
            peer_port: 7051,
            peer2_port: 9051,
            blockstore_port: 7060,
            orderer_operations_port: 8443,
            operations_port: 9443,
            channel: "mychannel".into(),
            batch_size: 100,
            batch_timeout: "1s".into(),
            quiet: false,
            no_tls: false,
            mutual_tls: false,
            processes: false,
            isolation_threshold: None,
        }
    }
}

impl NodeArgs {
    /// How the node's components speak TLS.
    pub(crate) fn tls_mode(&self) -> TlsMode {
        TlsMode { on: !self.no_tls, mutual: !self.no_tls && self.mutual_tls }
    }

    /// Arguments for a node in `dir` with every port 0 (free ports), quiet: what tests and the bench use.
    pub fn ephemeral(dir: impl Into<PathBuf>) -> NodeArgs {
        NodeArgs {
            dir: dir.into(),
            orderer_port: 0,
            peer_port: 0,
            peer2_port: 0,
            blockstore_port: 0,
            orderer_operations_port: 0,
            operations_port: 0,
            quiet: true,
            ..NodeArgs::default()
        }
    }

    pub(crate) fn progress(&self, msg: &str) {
        if !self.quiet {
            eprintln!("ferrofabric node: {msg}");
        }
    }
}
