//! `ferrofabric hw validate`: the flags of [`ferrofabric_hw::validate_ledger`].

use std::path::PathBuf;

use ferrofabric_hw::ValidateOptions;

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
/// Errors: as [`ferrofabric_hw::validate_ledger`].
pub(crate) fn run(args: HwValidateArgs) -> anyhow::Result<()> {
    let HwValidateArgs { genesis, blocks, report, config, quiet } = args;
    ferrofabric_hw::validate_ledger(&ValidateOptions { genesis, blocks, report, config, quiet })
}
