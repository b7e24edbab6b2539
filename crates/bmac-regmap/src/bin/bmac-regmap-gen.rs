//! `bmac-regmap-gen`: writes the BMac register map and validation-code table (`hw/rtl/bmac_regs_pkg.sv`,
//! `crates/bmac/src/regs.rs`, `hw/tests/bmac_regs.py`) from `hw/gen/regmap.toml` (hw/DESIGN.md §4, §6).
//!
//! `bmac-regmap-gen [--root DIR] [--check]`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ferrofabric_bmac_regmap as regmap;

/// Generates the register-map files of the BMac card from their one source.
#[derive(Parser)]
#[command(name = "bmac-regmap-gen")]
struct Args {
    /// The repository root (default: the one this binary was built from).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Write nothing; fail if a generated file differs from what would be written.
    #[arg(long)]
    check: bool,
}

fn run(args: &Args) -> Result<(), String> {
    let root = args.root.clone().unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."));
    let source = root.join(regmap::SOURCE);
    let text = std::fs::read_to_string(&source).map_err(|e| format!("{}: {e}", source.display()))?;
    let map = regmap::parse(&text).map_err(|e| e.to_string())?;
    let mut stale = Vec::new();
    for (rel, contents) in map.outputs() {
        let path = root.join(rel);
        if args.check {
            if std::fs::read_to_string(&path).ok().as_deref() != Some(contents.as_str()) {
                stale.push(rel);
            }
        } else {
            std::fs::write(&path, contents).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    if !stale.is_empty() {
        return Err(format!("out of date (run bmac-regmap-gen): {}", stale.join(", ")));
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bmac-regmap-gen: {e}");
            ExitCode::FAILURE
        }
    }
}
