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
