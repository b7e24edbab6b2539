//! The register map and validation-code table have one source, `hw/gen/regmap.toml`: the committed
//! SystemVerilog, Rust and Python files are what `bmac-regmap-gen` writes from it, and every code the card
//! produces is Fabric's `TxValidationCode` value.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;

use ferrofabric_bmac::regs;
use ferrofabric_bmac_regmap as regmap;
use ferrofabric_protos::peer::TxValidationCode;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn source() -> regmap::RegMap {
    regmap::parse(&std::fs::read_to_string(root().join(regmap::SOURCE)).unwrap()).unwrap()
}

#[test]
fn committed_files_are_what_the_generator_writes() {
    for (rel, want) in source().outputs() {
        let got = std::fs::read_to_string(root().join(rel)).unwrap();
        assert!(got == want, "{rel} is out of date: run `cargo run -p ferrofabric-bmac-regmap --bin bmac-regmap-gen`");
    }
}

#[test]
fn codes_are_fabrics() {
    let map = source();
    assert_eq!(map.codes.len(), regs::CODES.len());
    for (name, value) in regs::CODES {
        let fabric = TxValidationCode::from_str_name(name).unwrap_or_else(|| panic!("{name} is not a Fabric code"));
        assert_eq!(fabric as i32, i32::from(*value), "{name}");
    }
    let pairs = [
        (regs::CODE_VALID, TxValidationCode::Valid),
        (regs::CODE_BAD_CREATOR_SIGNATURE, TxValidationCode::BadCreatorSignature),
        (regs::CODE_DUPLICATE_TXID, TxValidationCode::DuplicateTxid),
        (regs::CODE_ENDORSEMENT_POLICY_FAILURE, TxValidationCode::EndorsementPolicyFailure),
        (regs::CODE_MVCC_READ_CONFLICT, TxValidationCode::MvccReadConflict),
        (regs::CODE_PHANTOM_READ_CONFLICT, TxValidationCode::PhantomReadConflict),
    ];
    for (ours, fabric) in pairs {
        assert_eq!(i32::from(ours), fabric as i32, "{}", fabric.as_str_name());
    }
}

#[test]
fn the_rtl_and_the_tests_use_the_generated_names() {
    // The register map and the codes appear as numbers nowhere else: reg_map.sv decodes the generated
    // addresses, each named through the package (the RTL qualifies package names so that Yosys reads it too),
    // and the testbenches import bmac_regs.
    let rtl = std::fs::read_to_string(root().join("hw/rtl/reg_map.sv")).unwrap();
    for r in &source().registers {
        let name = format!("bmac_regs_pkg::REG_{}", r.name);
        assert!(rtl.contains(&name), "reg_map.sv does not use {name}");
    }
    let pkg = std::fs::read_to_string(root().join("hw/rtl/bmac_pkg.sv")).unwrap();
    assert!(!pkg.contains("C_VALID"), "bmac_pkg.sv must not define codes of its own");
}
