//! `ferrofabric`: the command line of Ferrofabric.
//!
//! * `ferrofabric ledger replay` — validate a ledger of orderer blocks from its genesis block, as a Fabric 2.5 peer
//!   would, and report the validation codes and commit hashes (see [`replay`]).
//! * `ferrofabric orderer` — the ordering node (Broadcast, Deliver, channel participation; solo, etcdraft,
//!   BFT and Kafka).
//! * `ferrofabric peer node start` — a Fabric peer on `core.yaml`: channels joined with `peer channel join`,
//!   chaincode installed with `peer lifecycle chaincode install`, Endorser, Deliver, Gateway and Discovery.
//! * `ferrofabric committer` — the committing peer (pulls, validates and commits blocks; serves peer Deliver).
//! * `ferrofabric endorser` — endorsement (ProcessProposal) against a replica of the committed state.
//! * `ferrofabric blockstore` — the block storage service (follows a committer; blocks by number, txs by txid).
//! * `ferrofabric crypto generate` / `ferrofabric channel genesis` — cryptogen and configtxgen.
//! * `ferrofabric node` — a whole network on one machine (orderer, committer, endorsers, block store), with
//!   generated crypto and channel, the built-in chaincodes defined through `_lifecycle`; `--processes` runs each
//!   component as a supervised child process in its own CPU cgroup.
//! * `ferrofabric qioi` — the QiOi CPU-share controller for a `--processes` node.
//! * `ferrofabric bench orderer` — whole-system ordering benchmark (the `bench` commands only in a build with the
//!   `bench` feature).
//! * `ferrofabric hw validate` — a ledger through the co-simulated BMac block processor (the RTL of `hw/rtl` under
//!   Verilator), with per-block cycles.
//! * `ferrofabric bench e2e` — end-to-end committed tx/s of a node (FastFabric IV-D), and the committer alone on
//!   Fabric 2.5.16's bench ledger.
//! * `ferrofabric bench isolation` — the same load alone, then beside CPU, memory-bandwidth and disk hogs without
//!   and with the QiOi controller.

mod blockstore;
mod channel;
mod committer;
mod crypto;
mod endorser;
mod hw;
mod orderer;
mod peer;
mod qioi;
mod replay;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Every daemon and bench of this binary allocates through jemalloc. Decoded blocks and gRPC messages are many small
/// pieces allocated on one thread and freed on another: `bench e2e` spent ~12% of its CPU in glibc's malloc and free
/// (arena locks, consolidation), ~7% in jemalloc's with the kernel's page zeroing (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Ferrofabric: Hyperledger Fabric's ordering and commit path, in Rust.
#[derive(Parser)]
#[command(name = "ferrofabric", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Ledger tools.
    Ledger {
        #[command(subcommand)]
        command: LedgerCommand,
    },
    /// Runs an ordering node (Fabric's AtomicBroadcast and channel participation API): solo, etcdraft, BFT and
    /// Kafka channels. For `kafka` channels the configuration file's `Kafka` section (Fabric 1.4's keys: TLS,
    /// SASLPlain, Topic.ReplicationFactor; and Payloads, Brokers, Properties) says how to reach the brokers; see
    /// docs/KAFKA.md.
    Orderer(orderer::OrdererArgs),
    /// A Fabric peer, as Fabric's `peer` command runs one.
    Peer {
        #[command(subcommand)]
        command: PeerCommand,
    },
    /// Runs a committing peer: pulls blocks from the orderers, validates, commits, serves peer Deliver.
    Committer(committer::CommitterArgs),
    /// Runs an endorser: simulates proposals against its replica of the state and signs the responses.
    Endorser(endorser::EndorserArgs),
    /// Runs the block storage service: follows a committer, serves blocks by number and transactions by txid.
    Blockstore(blockstore::BlockstoreArgs),
    /// Runs a whole network on this machine: orderer (etcdraft, one consenter), committer, endorsers of Org1 and
    /// Org2, block store.
    Node(ferrofabric_node::NodeArgs),
    /// The QiOi controller for a node run with `node --processes`: raises the CPU shares of the components short
    /// of CPU while the committed throughput is under a threshold and other work competes for the CPU.
    Qioi(qioi::QiOiArgs),
    /// Generates crypto material in cryptogen's layout (MSP and TLS certificates, NodeOUs).
    Crypto(crypto::CryptoArgs),
    /// Channel tools: a channel's genesis block from a configtx.yaml profile, as configtxgen makes it.
    Channel(channel::ChannelArgs),
    /// The BMac hardware block processor (co-simulated RTL).
    Hw {
        #[command(subcommand)]
        command: HwCommand,
    },
    /// Whole-system benchmarks (only in a build with the `bench` feature).
    #[cfg(feature = "bench")]
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

#[derive(Subcommand)]
enum PeerCommand {
    /// The peer node.
    Node {
        #[command(subcommand)]
        command: PeerNodeCommand,
    },
}

#[derive(Subcommand)]
enum PeerNodeCommand {
    /// Starts the peer on Fabric's core.yaml (`$FABRIC_CFG_PATH/core.yaml`, `CORE_*` overrides): it serves
    /// Endorser, Deliver, Gateway and Discovery on `peer.listenAddress` for every channel it has joined.
    Start(peer::PeerStartArgs),
}

#[cfg(feature = "bench")]
#[derive(Subcommand)]
enum BenchCommand {
    /// Ordering throughput and block latency: N pre-signed envelopes from K clients, solo, etcdraft, BFT or Kafka.
    Orderer(ferrofabric::OrdererBenchArgs),
    /// End-to-end committed tx/s and block latency of a node (transfer, smallbank), or of the committer alone on
    /// Fabric 2.5.16's 10,735-transaction ledger (ledger).
    E2e(ferrofabric::E2eBenchArgs),
    /// Performance isolation (QiOi): the same end-to-end load alone, then beside CPU, memory-bandwidth and disk
    /// hogs without and with the share controller; needs a writable cgroup hierarchy.
    Isolation(ferrofabric::IsolationBenchArgs),
    /// A hog (the co-located work of `bench isolation`): works until killed, printing its count.
    #[command(hide = true)]
    Hog(ferrofabric::HogArgs),
}

#[derive(Subcommand)]
enum HwCommand {
    /// Runs a ledger through the co-simulated block processor; the report is `ledger replay`'s plus per-block
    /// `cycles` and `tx_per_s_at_250mhz`.
    Validate(hw::HwValidateArgs),
    /// Runs the co-simulated card behind a UDP socket, as a network-attached card: the host (`committer
    /// --accelerator udp:ADDR`, or `hw relay` beside the orderer) sends it each block's sections as datagrams and
    /// reads its results.
    Card(hw::HwCardArgs),
    /// Runs the relay beside the orderer: follows the channel and sends each block's sections to a card on the
    /// network, for a committer with `--accelerator relayed:ADDR` that only reads the card's results.
    Relay(hw::HwRelayArgs),
}

#[derive(Subcommand)]
enum LedgerCommand {
    /// Replays a ledger of orderer blocks through the validator, from the channel's genesis (config) block.
    Replay {
        /// The channel's genesis block (a marshaled common.Block, as configtxgen writes it).
        #[arg(long)]
        genesis: PathBuf,
        /// The blocks: repeated [8-byte little-endian length][marshaled common.Block]; `.zst` files are decompressed.
        #[arg(long)]
        blocks: PathBuf,
        /// Where to write the JSON report: {"blocks":[{"number","validation_codes","commit_hash"}], ...}.
        #[arg(long)]
        report: PathBuf,
        /// Where to write the final public world state (the schema of the fixtures' state.json).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Validation threads (0 = one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// No progress lines on stderr.
        #[arg(long)]
        quiet: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Daemons log at info by default (the BFT engine's per-vote lines only from warnings up), tools only
    // warnings; FERROFABRIC_LOG (an EnvFilter) overrides.
    let default_level = match cli.command {
        Command::Orderer(_)
        | Command::Peer { .. }
        | Command::Committer(_)
        | Command::Blockstore(_)
        | Command::Endorser(_)
        | Command::Qioi(_) => "info,informalsystems_malachitebft=warn",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FERROFABRIC_LOG").unwrap_or_else(|_| default_level.into()),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: log files and pipes get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    configure_fault_points();
    let result = match cli.command {
        Command::Ledger { command: LedgerCommand::Replay { genesis, blocks, report, state, threads, quiet } } => {
            replay::run(&replay::Args { genesis, blocks, report, state, threads, progress: !quiet })
        }
        Command::Orderer(args) => orderer::run(args),
        Command::Peer { command: PeerCommand::Node { command: PeerNodeCommand::Start(args) } } => peer::run(args),
        Command::Committer(args) => committer::run(args),
        Command::Blockstore(args) => blockstore::run(args),
        Command::Endorser(args) => endorser::run(args),
        Command::Crypto(args) => crypto::run(args),
        Command::Channel(args) => channel::run(args),
        Command::Node(args) => ferrofabric_node::run(args),
        Command::Qioi(args) => qioi::run(args),
        Command::Hw { command: HwCommand::Validate(args) } => hw::run(args),
        Command::Hw { command: HwCommand::Card(args) } => hw::run_card(args),
        Command::Hw { command: HwCommand::Relay(args) } => hw::run_relay(args),
        #[cfg(feature = "bench")]
        Command::Bench { command } => bench(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferrofabric: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a `bench` command.
#[cfg(feature = "bench")]
fn bench(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Orderer(args) => ferrofabric::bench_orderer(args).map(|_| ()),
        BenchCommand::E2e(args) => ferrofabric::bench_e2e(args).map(|_| ()),
        BenchCommand::Isolation(args) => ferrofabric::bench_isolation(args).map(|_| ()),
        BenchCommand::Hog(args) => ferrofabric::bench_hog(&args),
    }
}

/// Turns on the fault points `FERROFABRIC_FAILPOINTS` names (`name=actions;...`, TiKV fail-rs's syntax, e.g.
/// `deliver-block=return(alter-data:odd)`); without it every fault point is inert. The tests make orderers
/// Byzantine with them; docs/BFT.md lists the points. A malformed entry is logged and skipped. Only in a build with
/// the `fault-points` feature, which the test builds turn on.
#[cfg(feature = "fault-points")]
fn configure_fault_points() {
    let Ok(spec) = std::env::var("FERROFABRIC_FAILPOINTS") else { return };
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, actions)) = entry.split_once('=') else {
            tracing::error!(entry, "FERROFABRIC_FAILPOINTS: expected name=actions");
            continue;
        };
        match fail::cfg(name.trim(), actions.trim()) {
            Ok(()) => tracing::warn!(fault_point = name.trim(), actions = actions.trim(), "fault injection is on"),
            Err(e) => tracing::error!(entry, error = %e, "FERROFABRIC_FAILPOINTS: bad actions"),
        }
    }
}

/// The binary operators install has no fault injection: `FERROFABRIC_FAILPOINTS` is ignored, and said so.
#[cfg(not(feature = "fault-points"))]
fn configure_fault_points() {
    if std::env::var_os("FERROFABRIC_FAILPOINTS").is_some() {
        tracing::warn!("FERROFABRIC_FAILPOINTS is ignored: this build has no fault injection (feature fault-points)");
    }
}

/// The multi-threaded Tokio runtime a daemon command runs in, its worker threads named `name`.
///
/// Errors: the runtime cannot be built (e.g. no threads can be spawned).
fn daemon_runtime(name: &str) -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .build()
        .context("starting the async runtime")
}
