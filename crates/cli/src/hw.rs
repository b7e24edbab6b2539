//! `ferrofabric hw validate` (the flags of `ferrofabric_bmac_sim::validate_ledger`), `ferrofabric hw card` (a
//! co-simulated card on the network, `ferrofabric_bmac_sim::serve_card`) and `ferrofabric hw relay` (the relay beside
//! the orderer that feeds such a card, [`ferrofabric_committer::start_relay`]). The first two need the co-simulated
//! card, built in by the `bmac-sim` feature; without it they fail with an error that says so.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::anyhow;

/// Arguments of `ferrofabric hw validate`.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct HwValidateArgs {
    /// The channel's genesis block (a marshaled common.Block).
    #[arg(long)]
    pub genesis: PathBuf,
    /// The blocks: repeated [8-byte little-endian length][marshaled common.Block]; `.zst` files are decompressed.
    #[arg(long)]
    pub blocks: PathBuf,
    /// Where to write the JSON report.
    #[arg(long)]
    pub report: PathBuf,
    /// Card configuration N x M: N transaction validators with M VSCC engines each.
    #[arg(long, default_value = "8x2")]
    pub config: String,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `ferrofabric hw validate`.
///
/// Errors: as `ferrofabric_bmac_sim::validate_ledger`, or the binary is built without the co-simulated card.
#[cfg(feature = "bmac-sim")]
pub(crate) fn run(args: HwValidateArgs) -> anyhow::Result<()> {
    let HwValidateArgs { genesis, blocks, report, config, quiet } = args;
    ferrofabric_bmac_sim::validate_ledger(&ferrofabric_bmac_sim::ValidateOptions {
        genesis,
        blocks,
        report,
        config,
        quiet,
    })
}

/// Runs `ferrofabric hw validate`: refused, as this binary has no co-simulated card.
///
/// Errors: always.
#[cfg(not(feature = "bmac-sim"))]
pub(crate) fn run(_args: HwValidateArgs) -> anyhow::Result<()> {
    Err(no_sim("hw validate"))
}

/// The error of a command that needs the co-simulated card in a binary built without it.
#[cfg(not(feature = "bmac-sim"))]
fn no_sim(command: &str) -> anyhow::Error {
    anyhow!("`{command}` needs the co-simulated BMac card, which this binary is built without (the `bmac-sim` feature)")
}

/// Arguments of `ferrofabric hw card`.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct HwCardArgs {
    /// Card configuration N x M: N transaction validators with M VSCC engines each (built into this binary:
    /// `FERROFABRIC_HW_CONFIGS`).
    #[arg(long, default_value = "8x2")]
    pub config: String,
    /// The UDP address the card receives its datagrams on (hw/DESIGN.md §7), e.g. `127.0.0.1:7063`.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Stop after this many seconds (default: run until SIGINT or SIGTERM).
    #[arg(long)]
    pub seconds: Option<u64>,
}

/// Runs `ferrofabric hw card`: the co-simulated card behind a UDP socket until a signal (or `--seconds`). Prints one
/// line `hw card ready: listen=ADDR config=NxM` once it receives.
///
/// Errors: a bad configuration, an address that cannot be bound, the model not built, the socket failing, or the
/// binary built without the co-simulated card.
#[cfg(feature = "bmac-sim")]
pub(crate) fn run_card(args: HwCardArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::net::UdpSocket;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let (n, m) = ferrofabric_bmac_sim::parse_card_config(&args.config)?;
    let socket = UdpSocket::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
    println!("hw card ready: listen={} config={n}x{m}", socket.local_addr()?);
    let stop = Arc::new(AtomicBool::new(false));
    let card = {
        let stop = stop.clone();
        // The simulation stays on the thread that made it; the socket is read there too.
        std::thread::Builder::new()
            .name("bmac-card".into())
            .spawn(move || ferrofabric_bmac_sim::serve_card(&socket, n, m, &stop))?
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let finished = {
        let stop = stop.clone();
        move || stop.load(Ordering::Relaxed)
    };
    runtime.block_on(async {
        let limit = args.seconds.map_or(Duration::MAX, Duration::from_secs);
        tokio::select! {
            () = ferrofabric_comm::wait_for_signal() => {}
            () = tokio::time::sleep(limit) => {}
            () = async { while !finished() && !card.is_finished() { tokio::time::sleep(Duration::from_millis(100)).await } } => {}
        }
    });
    stop.store(true, Ordering::Relaxed);
    card.join().map_err(|_| anyhow!("the card thread panicked"))??;
    Ok(())
}

/// Runs `ferrofabric hw card`: refused, as this binary has no co-simulated card.
///
/// Errors: always.
#[cfg(not(feature = "bmac-sim"))]
pub(crate) fn run_card(_args: HwCardArgs) -> anyhow::Result<()> {
    Err(no_sim("hw card"))
}

/// Arguments of `ferrofabric hw relay`.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct HwRelayArgs {
    /// The channel's genesis block (a marshaled common.Block).
    #[arg(long)]
    pub genesis: PathBuf,
    /// An orderer's Deliver endpoint, HOST:PORT (repeat for several).
    #[arg(long = "orderer", required = true)]
    pub orderers: Vec<String>,
    /// PEM file of the CA that signs the orderers' TLS certificates (repeat for several); TLS is on when given.
    #[arg(long = "orderer-ca")]
    pub orderer_cas: Vec<PathBuf>,
    /// The local MSP directory whose identity signs the Deliver requests.
    #[arg(long)]
    pub msp_dir: PathBuf,
    /// Its MSP ID.
    #[arg(long)]
    pub msp_id: String,
    /// The card's UDP address (`ferrofabric hw card --listen`).
    #[arg(long)]
    pub card: SocketAddr,
    /// Seconds to wait for the card's result for one block before resetting it.
    #[arg(long, default_value_t = 120)]
    pub deadline: u64,
    /// Drill: lose the first sending of every Nth datagram to the card (0: never).
    #[arg(long, default_value_t = 0)]
    pub drop_every: u32,
    /// Drill: send every Nth datagram after the one that follows it (0: never).
    #[arg(long, default_value_t = 0)]
    pub swap_every: u32,
    /// Stop after this many seconds (default: run until SIGINT or SIGTERM).
    #[arg(long)]
    pub seconds: Option<u64>,
}

/// Runs `ferrofabric hw relay`: follows the channel from the orderers and sends each block's sections to the card
/// until a signal (or `--seconds`). Prints `hw relay ready: card=ADDR` once started and, on stopping, what it did.
///
/// Errors: the MSP or the genesis block cannot be loaded, or the relay's sender failed.
pub(crate) fn run_relay(args: HwRelayArgs) -> anyhow::Result<()> {
    let config = ferrofabric_committer::RelayConfig {
        genesis_block: args.genesis,
        local_msp_dir: args.msp_dir,
        local_msp_id: args.msp_id,
        orderers: args.orderers,
        orderer_tls: ferrofabric_comm::ClientTlsConfig {
            enabled: !args.orderer_cas.is_empty(),
            root_cas: args.orderer_cas,
            ..Default::default()
        },
        delivery: Default::default(),
        card: args.card,
        deadline: Duration::from_secs(args.deadline),
        impairment: ferrofabric_bmac_boards::Impairment { drop_every: args.drop_every, swap_every: args.swap_every },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async {
        let relay = ferrofabric_committer::start_relay(config).await?;
        println!("hw relay ready: card={}", args.card);
        let limit = args.seconds.map_or(Duration::MAX, Duration::from_secs);
        tokio::select! {
            () = ferrofabric_comm::wait_for_signal() => {}
            () = tokio::time::sleep(limit) => {}
        }
        let status = relay.status.borrow().clone();
        println!(
            "hw relay stopped: height={} on_card={} on_host={} sessions={} datagrams={} resent={}",
            status.height,
            status.on_card,
            status.on_host,
            status.sessions,
            status.link.datagrams,
            status.link.retransmitted
        );
        relay.shutdown().await
    })
}
