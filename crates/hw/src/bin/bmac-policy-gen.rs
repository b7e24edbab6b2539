//! `bmac-policy-gen`: writes `ends_policy_evaluator.sv` and its manifest from a channel's genesis block
//! (hw/DESIGN.md §5–6).
//!
//! `bmac-policy-gen --genesis genesis.block --sv hw/rtl/ends_policy_evaluator.sv --manifest hw/gen/policies.txt`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Generates the endorsement-policy circuit of a channel.
#[derive(Parser)]
#[command(name = "bmac-policy-gen")]
struct Args {
    /// The channel's genesis block (marshaled common.Block).
    #[arg(long)]
    genesis: PathBuf,
    /// Where to write the SystemVerilog module.
    #[arg(long)]
    sv: PathBuf,
    /// Where to write the manifest (id and normalised policy per line).
    #[arg(long)]
    manifest: PathBuf,
    /// Extra policies in the manifest's text form, e.g. `OutOf(2,1.peer,2.peer,3.peer)`.
    #[arg(long = "policy")]
    extra: Vec<String>,
}

fn run(args: &Args) -> Result<(), String> {
    let genesis = std::fs::read(&args.genesis).map_err(|e| format!("{}: {e}", args.genesis.display()))?;
    let mut table = ferrofabric_hw::table_from_genesis(&genesis).map_err(|e| e.to_string())?;
    for p in &args.extra {
        let e = ferrofabric_hw::parse_expr(p).map_err(|e| e.to_string())?;
        table.insert(e).map_err(|e| e.to_string())?;
    }
    std::fs::write(&args.sv, table.to_systemverilog()).map_err(|e| format!("{}: {e}", args.sv.display()))?;
    std::fs::write(&args.manifest, table.to_manifest()).map_err(|e| format!("{}: {e}", args.manifest.display()))?;
    eprintln!("bmac-policy-gen: {} policies", table.len());
    Ok(())
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bmac-policy-gen: {e}");
            ExitCode::FAILURE
        }
    }
}
