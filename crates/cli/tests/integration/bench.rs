//! `ferrofabric bench e2e` on its own node (small N): every measured transaction is committed VALID and the
//! report carries the throughput and latency figures, whichever way the transactions reach the orderer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ferrofabric::{bench_e2e, E2eBenchArgs, Via, Workload};

#[test]
fn e2e_bench_commits_every_transfer_and_smallbank_transaction_valid() {
    for workload in [Workload::Transfer, Workload::Smallbank] {
        let args = E2eBenchArgs { txs: 150, workload, json: true, quiet: true, ..E2eBenchArgs::default() };
        let r = bench_e2e(args).unwrap();
        assert_eq!((r.txs, r.valid), (150, 150), "{workload:?}: {:?}", r.invalid);
        assert!(r.invalid.is_empty());
        assert!(r.committed_tx_per_s > 0.0 && r.end_to_end_tx_per_s > 0.0);
        assert!(r.blocks >= 2, "150 transactions fill at least two blocks of 100");
        assert!(r.block_latency_ms_p50.unwrap() > 0.0);
        assert_eq!(r.endorsements_per_tx, if workload == Workload::Smallbank { 2 } else { 1 });
        assert!(r.own_node);
    }
}

#[test]
fn e2e_bench_through_the_peers_and_through_the_gateway_commits_every_smallbank_transaction_valid() {
    for via in [Via::Peers, Via::Gateway] {
        let args = E2eBenchArgs {
            txs: 150,
            workload: Workload::Smallbank,
            via,
            clients: 16,
            json: true,
            quiet: true,
            ..E2eBenchArgs::default()
        };
        let r = bench_e2e(args).unwrap();
        assert_eq!((r.txs, r.valid), (150, 150), "{via:?}: {:?}", r.invalid);
        assert_eq!(r.via, via);
        assert!(r.committed_tx_per_s > 0.0 && r.block_latency_ms_p50.unwrap() > 0.0);
    }
}

#[test]
fn e2e_bench_on_a_users_nodejs_contract_behind_the_shim_commits_every_transfer_valid_in_five_round_trips() {
    crate::sdk::require_tool("node");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/serve-assets-contract");
    for via in [Via::Orderer, Via::Gateway] {
        let args = E2eBenchArgs {
            txs: 150,
            via,
            clients: 16,
            chaincode_service: Some(format!("{} node", script.display())),
            json: true,
            quiet: true,
            ..E2eBenchArgs::default()
        };
        let r = bench_e2e(args).unwrap();
        assert_eq!((r.txs, r.valid), (150, 150), "{via:?}: {:?}", r.invalid);
        assert!(r.chaincode_service && r.chaincode.starts_with("contract"), "{}", r.chaincode);
        // TRANSACTION/COMPLETED, GET_STATE of both accounts, PUT_STATE of both.
        assert_eq!(r.shim_round_trips_per_tx, Some(5.0), "{via:?}");
        assert_eq!(r.endorse_tx_per_s.is_some(), via == Via::Orderer);
    }
}
