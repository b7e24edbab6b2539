//! `ferrofabric crypto`: `generate --seed` is reproducible, the built-in template is the library's, bad
//! configs are reported.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::Path;

use ferrofabric_cryptogen::{Crypto, CryptoConfig, GenerateOptions, DEFAULT_CRYPTO_CONFIG};

/// A small organisation with two users; the CLI test needs only something other than the built-in template.
const SMALL: &str =
    "PeerOrgs:\n  - {Name: Ou, Domain: ou.test, EnableNodeOUs: true, Template: {Count: 1}, Users: {Count: 1}}\n";

fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else {
                out.insert(p.strip_prefix(root).unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Runs `ferrofabric ARGS`; the error carries its stderr.
fn cli(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrofabric")).args(args).output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `ferrofabric crypto generate --seed` is byte-reproducible, another seed changes every key, and no seed
/// gives fresh keys; without `--config` the built-in template is used.
#[test]
fn cli_generate_is_deterministic_with_seed() {
    let tmp = tempfile::tempdir().unwrap();
    let out = |name: &str| tmp.path().join(name);
    let cfg = out("crypto-config.yaml");
    std::fs::write(&cfg, SMALL).unwrap();
    let cfg = cfg.to_str().unwrap();
    for (name, seed) in [("a", Some("9")), ("b", Some("9")), ("c", Some("10")), ("d", None)] {
        let dir = out(name);
        let mut args = vec!["crypto", "generate", "--config", cfg, "--output", dir.to_str().unwrap()];
        if let Some(seed) = seed {
            args.extend(["--seed", seed]);
        }
        cli(&args).unwrap();
    }
    let (a, b, c, d) = (tree(&out("a")), tree(&out("b")), tree(&out("c")), tree(&out("d")));
    assert_eq!(a, b);
    assert_eq!(a.keys().collect::<Vec<_>>(), c.keys().collect::<Vec<_>>());
    let key = "peerOrganizations/ou.test/users/Admin@ou.test/msp/keystore/priv_sk";
    assert_ne!(a[key], c[key]);
    assert_ne!(a[key], d[key]);

    let default_dir = out("default");
    cli(&["crypto", "generate", "--output", default_dir.to_str().unwrap(), "--seed", "1"]).unwrap();
    let expected =
        Crypto::generate(&CryptoConfig::from_yaml(DEFAULT_CRYPTO_CONFIG).unwrap(), &GenerateOptions::deterministic(1))
            .unwrap();
    let check = out("check");
    expected.write(&check).unwrap();
    assert_eq!(tree(&default_dir), tree(&check));
    assert!(
        tree(&default_dir).contains_key("ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt")
    );

    cli(&["crypto", "showtemplate"]).unwrap();
    let err = cli(&[
        "crypto",
        "generate",
        "--config",
        out("missing.yaml").to_str().unwrap(),
        "--output",
        out("x").to_str().unwrap(),
    ]);
    assert!(err.unwrap_err().contains("missing.yaml"));
}
