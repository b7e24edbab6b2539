//! Where the recorded Fabric fixtures are: the one locator for every test suite and benchmark.
//!
//! The fixtures (a Fabric 2.5.16 network's crypto, configtx.yaml, genesis block and the ledgers its peers and
//! orderer wrote) are not in the repository: they sit beside it, at `<workspace>/../shared/fixtures`, unless
//! `FERROFABRIC_FIXTURES` names another root. Tests fail rather than skip when they are missing, so that a run
//! without them cannot pass while testing nothing.

use std::path::{Path, PathBuf};

/// The environment variable naming the fixtures root (or, as older setups do, its `fabric-2.5` directory).
pub const ENV: &str = "FERROFABRIC_FIXTURES";

/// The Fabric 2.5 network's directory under the root: crypto, configtx.yaml, genesis block, ledgers.
pub const FABRIC: &str = "fabric-2.5";

/// The fixtures root: `$FERROFABRIC_FIXTURES`, else `<workspace>/../shared/fixtures`.
///
/// When the variable names the `fabric-2.5` directory itself, its parent is the root. Nothing is checked: see
/// [`fixture`] for a path that must exist.
pub fn dir() -> PathBuf {
    match std::env::var_os(ENV) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            let is_fabric_dir = dir.file_name().is_some_and(|n| n == FABRIC) && !dir.join(FABRIC).is_dir();
            match dir.parent() {
                Some(parent) if is_fabric_dir => parent.to_path_buf(),
                _ => dir,
            }
        }
        None => workspace_root().join("../shared/fixtures"),
    }
}

/// `rel` under the fixtures root, which must exist.
///
/// # Panics
/// When the path does not exist, with a message naming it and [`ENV`]: this locator serves tests and
/// benchmarks, which must fail, not skip, without their fixtures.
pub fn fixture(rel: impl AsRef<Path>) -> PathBuf {
    let path = dir().join(rel);
    if !path.exists() {
        panic!("Fabric fixture missing: {} (place the fixtures at ../shared/fixtures or set {ENV})", path.display());
    }
    path
}

/// The Fabric 2.5 network's directory ([`FABRIC`] under the root), which must exist.
///
/// # Panics
/// As [`fixture`], when it is missing.
pub fn fabric_dir() -> PathBuf {
    fixture(FABRIC)
}

/// `rel` under the Fabric 2.5 network's directory, e.g. `fabric("orderer-blocks.bin")`, which must exist.
///
/// # Panics
/// As [`fixture`], when it is missing.
pub fn fabric(rel: impl AsRef<Path>) -> PathBuf {
    fixture(Path::new(FABRIC).join(rel))
}

/// `rel` under the public test vectors (`<workspace>/../shared/vectors`, e.g. `wycheproof/...`), which must exist.
///
/// # Panics
/// As [`fixture`], when it is missing.
pub fn vector(rel: impl AsRef<Path>) -> PathBuf {
    let path = workspace_root().join("../shared/vectors").join(rel);
    if !path.exists() {
        panic!("test vector missing: {} (place the vectors at ../shared/vectors)", path.display());
    }
    path
}

/// The workspace root: two levels above this crate's manifest (`crates/testkit`).
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).unwrap_or(manifest).to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_root_is_beside_the_workspace() {
        if std::env::var_os(ENV).is_none() {
            assert!(dir().ends_with("../shared/fixtures"));
            assert!(dir().starts_with(workspace_root()));
        }
    }
}
