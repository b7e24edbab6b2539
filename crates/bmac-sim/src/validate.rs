//! A ledger through the co-simulated BMac card (hw/DESIGN.md), the host doing what BMac leaves to the host: the
//! work of `ferrofabric hw validate` (the CLI crate parses its flags into [`ValidateOptions`] and calls [`run`]).
//!
//! The report has the schema of `ferrofabric ledger replay` (`blocks[{number, validation_codes, commit_hash}]`,
//! `transactions`, `seconds`, `tx_per_s`), plus:
//! - per block: `cycles` (card cycles from the block's first datagram to its result; null for host-path blocks)
//!   and `path` (`hardware`, `host: <reason>`, `genesis`);
//! - top level: `tx_per_s_at_250mhz` (hardware-path transactions over their cycles at 250 MHz, blocks fed one
//!   at a time), `config`, `hardware_blocks`, `host_blocks` and the card's statistics registers.
//!
//! The replay stops with an error when the card's codes differ from the host ledger's. The host's world state then
//! no longer matches the card's KV store.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use serde::Serialize;

use ferrofabric_bmac::{BlockPath, BlockProcessor};

use crate::card::{cosim_processor, Card};

/// What to validate and where to report (the flags of `ferrofabric hw validate`).
#[derive(Clone, Debug)]
pub struct ValidateOptions {
    /// The channel's genesis block (a marshaled common.Block).
    pub genesis: PathBuf,
    /// The blocks: repeated [8-byte little-endian length][marshaled common.Block]; `.zst` files are decompressed.
    pub blocks: PathBuf,
    /// Where to write the JSON report.
    pub report: PathBuf,
    /// Card configuration N x M: N transaction validators with M VSCC engines each (`8x2` on the command line
    /// by default; see [`parse_config`]).
    pub config: String,
    /// No progress lines on stderr.
    pub quiet: bool,
}

#[derive(Serialize)]
struct BlockReport {
    number: u64,
    validation_codes: Vec<&'static str>,
    commit_hash: Option<String>,
    cycles: Option<u64>,
    path: String,
}

#[derive(Serialize)]
struct Report {
    blocks: Vec<BlockReport>,
    transactions: u64,
    seconds: f64,
    tx_per_s: f64,
    tx_per_s_at_250mhz: f64,
    config: String,
    hardware_blocks: u64,
    host_blocks: u64,
    card: CardReport,
}

#[derive(Serialize, Default)]
struct CardReport {
    cycles: u64,
    ecdsa_verifications: u32,
    endorsements_skipped: u32,
    mvcc_failures: u32,
}

/// A card configuration that is not `NxM` with N and M positive integers.
#[derive(Debug, thiserror::Error)]
#[error("--config {0}: expected N x M, N transaction validators with M VSCC engines each (positive), e.g. 8x2")]
pub struct ConfigError(String);

/// Parses `NxM`: N transaction validators with M VSCC engines each.
///
/// Errors: [`ConfigError`] if `s` is not two positive integers separated by `x`.
pub fn parse_config(s: &str) -> Result<(u32, u32), ConfigError> {
    let bad = || ConfigError(s.to_owned());
    let (n, m) = s.split_once('x').ok_or_else(bad)?;
    let (n, m): (u32, u32) = (n.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if n == 0 || m == 0 {
        return Err(bad());
    }
    Ok((n, m))
}

/// Runs the ledger of `args` through the card and writes the report (`ferrofabric hw validate`).
///
/// Errors: unreadable files, a genesis block without a channel configuration, a model that is not built, a
/// block refused or a disagreement between the card and the host. The report of what was processed is written
/// first.
pub fn run(args: &ValidateOptions) -> Result<()> {
    let (n, m) = parse_config(&args.config)?;
    let genesis = ferrofabric_protoutil::read_ledger_file(&args.genesis)?;
    let blocks = ferrofabric_protoutil::read_ledger_file(&args.blocks)?;
    let mut proc = cosim_processor(genesis.clone(), n, m)
        .with_context(|| format!("card {n}x{m} from {}", args.genesis.display()))?;
    let started = Instant::now();
    let mut reports = Vec::new();
    let (mut transactions, mut hw_txs, mut hw_cycles, mut hw_blocks, mut host_blocks) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut failure = None;
    for rec in ferrofabric_protoutil::records(blocks) {
        let (offset, raw) = match rec {
            Ok(r) => r,
            Err(e) => {
                failure = Some(anyhow!("{}: {e}", args.blocks.display()));
                break;
            }
        };
        if reports.is_empty() && raw == genesis {
            let txs = ferrofabric_arena::BlockArena::decode(raw).map(|a| a.txs().len()).unwrap_or(0);
            reports.push(BlockReport {
                number: 0,
                validation_codes: vec!["VALID"; txs],
                commit_hash: None,
                cycles: None,
                path: "genesis".into(),
            });
            continue;
        }
        let p = match proc.process(raw) {
            Ok(p) => p,
            Err(e) => {
                failure = Some(anyhow!("{}: block record at byte offset {offset}: {e}", args.blocks.display()));
                break;
            }
        };
        transactions += p.codes.len() as u64;
        let path = match &p.path {
            BlockPath::Hardware => {
                hw_blocks += 1;
                hw_txs += p.codes.len() as u64;
                hw_cycles += p.cycles.unwrap_or(0);
                "hardware".to_string()
            }
            BlockPath::Host(why) => {
                host_blocks += 1;
                format!("host: {why}")
            }
            BlockPath::Software => "software".to_string(),
        };
        if args.progress() {
            eprintln!("hw validate: block {} ({path}), {} tx, {:?} cycles", p.number, p.codes.len(), p.cycles);
        }
        let diverged = p.host_codes.as_ref().is_some_and(|h| *h != p.codes);
        reports.push(BlockReport {
            number: p.number,
            validation_codes: p.codes.iter().map(|c| c.as_str_name()).collect(),
            commit_hash: p.commit_hash.map(hex::encode),
            cycles: p.cycles,
            path,
        });
        if diverged {
            failure = Some(anyhow!(
                "block {}: the card's codes differ from the host ledger's {:?}",
                p.number,
                p.host_codes.unwrap_or_default().iter().map(|c| c.as_str_name()).collect::<Vec<_>>()
            ));
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let card = proc.link_mut::<Card>().ok_or_else(|| anyhow!("the card is not in this process"))?;
    let stats = card.stats().unwrap_or_default();
    let report = Report {
        blocks: reports,
        transactions,
        seconds,
        tx_per_s: transactions as f64 / seconds.max(1e-9),
        tx_per_s_at_250mhz: if hw_cycles == 0 { 0.0 } else { hw_txs as f64 * 250e6 / hw_cycles as f64 },
        config: format!("{n}x{m}"),
        hardware_blocks: hw_blocks,
        host_blocks,
        card: CardReport {
            cycles: card.sim().cycles(),
            ecdsa_verifications: stats.ecdsa,
            endorsements_skipped: stats.ends_skipped,
            mvcc_failures: stats.mvcc_fail,
        },
    };
    std::fs::write(&args.report, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", args.report.display()))?;
    if args.progress() {
        eprintln!(
            "hw validate: {hw_blocks} hardware-path and {host_blocks} host-path blocks, {transactions} tx; \
             {:.0} tx/s at 250 MHz",
            report.tx_per_s_at_250mhz
        );
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

impl ValidateOptions {
    fn progress(&self) -> bool {
        !self.quiet
    }
}
