//! `ferrofabric ledger replay`: the embeddable validator driven over a ledger file.
//!
//! The report lists every block of the file with its validation codes (Fabric's TxValidationCode names) and commit
//! hash; block 0, when the file starts with the genesis block (as the orderer or a peer stored it), is reported as committed at join (all VALID, no
//! commit hash), as a Fabric peer does. A malformed file or a refused block stops the replay with a message naming
//! the block and byte offset, after writing the report of what was committed so far.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use ferrofabric_protoutil::records;
use ferrofabric_validator::{Validator, ValidatorOptions};
use serde::Serialize;

/// Arguments of `ledger replay`.
pub(crate) struct Args {
    pub genesis: PathBuf,
    pub blocks: PathBuf,
    pub report: PathBuf,
    pub state: Option<PathBuf>,
    pub threads: usize,
    pub progress: bool,
}

#[derive(Serialize)]
struct BlockReport {
    number: u64,
    validation_codes: Vec<&'static str>,
    commit_hash: Option<String>,
}

#[derive(Serialize)]
struct Report {
    blocks: Vec<BlockReport>,
    transactions: u64,
    seconds: f64,
    tx_per_s: f64,
}

/// One row of the state file. A value that is UTF-8 text without control characters is written as `value`, any
/// other as `value_hex`, as the fixtures' state.json writes them.
#[derive(Serialize)]
struct StateEntry {
    namespace: String,
    key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_hex: Option<String>,
    version: String,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let genesis = ferrofabric_protoutil::read_ledger_file(&args.genesis)?;
    let blocks = ferrofabric_protoutil::read_ledger_file(&args.blocks)?;
    let mut validator = Validator::new(genesis.clone(), ValidatorOptions { threads: args.threads })
        .with_context(|| format!("genesis block {}", args.genesis.display()))?;

    // Split the file into records first: a malformed record stops the replay after the blocks before it.
    let total = blocks.len();
    let mut records_ok = Vec::new();
    let mut failure = None;
    for rec in records(blocks) {
        match rec {
            Ok(r) => records_ok.push(r),
            Err(e) => {
                failure = Some(anyhow!("{}: {e}", args.blocks.display()));
                break;
            }
        }
    }

    let started = Instant::now();
    let mut last_progress = Instant::now();
    let mut reports = Vec::new();
    let mut transactions = 0u64;
    let mut to_commit = &records_ok[..];
    if let Some(((_, first), rest)) = records_ok.split_first() {
        if is_genesis(first, &genesis) {
            // Block 0 was committed when the channel was joined: every transaction VALID, no commit hash.
            let n = ferrofabric_arena::BlockArena::decode(first.clone()).map(|a| a.txs().len()).unwrap_or(0);
            reports.push(BlockReport { number: 0, validation_codes: vec!["VALID"; n], commit_hash: None });
            to_commit = rest;
        }
    }
    let mut next = 0usize;
    let mut refused = None;
    validator.commit_blocks(to_commit.iter().map(|(_, raw)| raw.clone()), |result| {
        let offset = to_commit.get(next).map_or(0, |(o, _)| *o);
        next += 1;
        match result {
            Ok(r) => {
                transactions += r.codes.len() as u64;
                reports.push(BlockReport {
                    number: r.number,
                    validation_codes: r.codes.iter().map(|c| c.as_str_name()).collect(),
                    commit_hash: r.commit_hash.map(hex::encode),
                });
                if args.progress && last_progress.elapsed().as_secs_f64() >= 1.0 {
                    last_progress = Instant::now();
                    let secs = started.elapsed().as_secs_f64();
                    eprintln!(
                        "replay: block {} ({:.0}% of the file), {transactions} tx, {:.0} tx/s",
                        r.number,
                        100.0 * offset as f64 / total.max(1) as f64,
                        transactions as f64 / secs.max(1e-9)
                    );
                }
                true
            }
            Err(e) => {
                refused = Some(anyhow!("{}: block record at byte offset {offset}: {e}", args.blocks.display()));
                false
            }
        }
    });
    if refused.is_some() {
        failure = refused;
    }
    let seconds = started.elapsed().as_secs_f64();
    let tx_per_s = transactions as f64 / seconds.max(1e-9);
    if args.progress {
        eprintln!("replay: {} blocks, {transactions} tx in {seconds:.3} s: {tx_per_s:.0} tx/s", reports.len());
    }
    let report = Report { blocks: reports, transactions, seconds, tx_per_s };
    std::fs::write(&args.report, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", args.report.display()))?;
    if let Some(path) = &args.state {
        write_state(&validator, path)?;
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Whether `block` is the genesis block: the same bytes, or block 0 with the same header as a peer stores it (with
/// its TRANSACTIONS_FILTER added to the metadata).
fn is_genesis(block: &bytes::Bytes, genesis: &bytes::Bytes) -> bool {
    if block == genesis {
        return true;
    }
    let header =
        |raw: &bytes::Bytes| ferrofabric_arena::BlockArena::decode(raw.clone()).ok().map(|a| a.header().clone());
    matches!((header(block), header(genesis)), (Some(a), Some(b)) if a.number == 0 && a == b)
}

/// The public world state, every namespace but `_lifecycle` (namespace `""` holds the peer's copy of the channel
/// configuration), sorted by namespace then key bytes.
fn write_state(validator: &Validator, path: &PathBuf) -> Result<()> {
    let view = validator.state().view();
    let entries: Vec<StateEntry> = view
        .entries()
        .into_iter()
        .filter(|(k, _)| k.collection.is_empty() && k.namespace != "_lifecycle")
        .map(|(k, v)| {
            let text = std::str::from_utf8(&v.value).ok().filter(|t| !t.chars().any(char::is_control));
            StateEntry {
                namespace: k.namespace,
                key: String::from_utf8_lossy(&k.key).into_owned(),
                value: text.map(str::to_owned),
                value_hex: text.is_none().then(|| hex::encode(&v.value)),
                version: v.version.to_string(),
            }
        })
        .collect();
    std::fs::write(path, serde_json::to_vec_pretty(&entries)?).with_context(|| format!("writing {}", path.display()))
}
