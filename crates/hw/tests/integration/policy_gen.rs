//! The committed policy circuit (`hw/rtl/ends_policy_evaluator.sv`, `hw/gen/policies.txt`) is what
//! `bmac-policy-gen` produces from the fixture channel's genesis block (plus the two extra policies the RTL tests
//! use), and the normalisation of the fixture's policies is the expected one.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support::*;
use ferrofabric_hw::{parse_expr, table_from_genesis, PolicyTable};

const EXTRA: [&str; 2] = ["OutOf(1,1.peer,2.peer)", "OutOf(2,0.member,1.peer,2.peer)"];

fn generated() -> PolicyTable {
    let mut t = table_from_genesis(&read_fixture("genesis.block")).unwrap();
    for e in EXTRA {
        t.insert(parse_expr(e).unwrap()).unwrap();
    }
    t
}

#[test]
fn committed_circuit_and_manifest_are_up_to_date() {
    let t = generated();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sv = std::fs::read_to_string(root.join("hw/rtl/ends_policy_evaluator.sv")).unwrap();
    let manifest = std::fs::read_to_string(root.join("hw/gen/policies.txt")).unwrap();
    assert_eq!(sv, t.to_systemverilog(), "regenerate with bmac-policy-gen (see hw/DESIGN.md section 6)");
    assert_eq!(manifest, t.to_manifest());
    assert_eq!(PolicyTable::builtin(), t);
}

#[test]
fn fixture_policies_normalise_as_fabric_evaluates_them() {
    let t = table_from_genesis(&read_fixture("genesis.block")).unwrap();
    // MAJORITY Endorsement over two orgs whose Endorsement is OR('OrgN.peer'); BlockValidation is ANY Writers of
    // the orderer org = OR('OrdererMSP.member'); then each org's own Endorsement.
    let want = ["OutOf(2,1.peer,2.peer)", "0.member", "1.peer", "2.peer"];
    let got: Vec<String> = (1..=t.len() as u8).map(|i| t.get(i).unwrap().to_string()).collect();
    assert_eq!(got, want);
    let peer = 1 << 1;
    assert!(t.evaluate(1, &[0, 0x10 | peer, 0x10 | peer]));
    assert!(!t.evaluate(1, &[0, 0x10 | peer, 0x10 | 1]));
}
