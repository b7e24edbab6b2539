//! The library half of the `ferrofabric` command line: the `bench` commands, reachable from the binary and from
//! the integration tests.
//!
//! * `ferrofabric bench orderer`: ordering throughput and block latency, solo or etcdraft ([`bench_orderer`] with
//!   [`OrdererBenchArgs`], reporting an [`OrdererBenchReport`]);
//! * `ferrofabric bench e2e`: end-to-end committed throughput of a node and the committer alone on Fabric 2.5.16's
//!   bench ledger ([`bench_e2e`] with [`E2eBenchArgs`] and a [`Workload`], reporting an [`E2eReport`]).
//!
//! Only with the `bench` feature: the binary operators install is built without it and has no bench code.

#[cfg(feature = "bench")]
mod bench;

#[cfg(feature = "bench")]
pub use bench::e2e::{run as bench_e2e, E2eBenchArgs, E2eReport, Via, Workload};
#[cfg(feature = "bench")]
pub use bench::hog::{hog as bench_hog, HogArgs, HogKind};
#[cfg(feature = "bench")]
pub use bench::isolation::{
    run as bench_isolation, IsolationBenchArgs, IsolationReport, KindReport as IsolationKind,
    PhaseResult as IsolationPhase, RoundRatios as IsolationRound,
};
#[cfg(feature = "bench")]
pub use bench::orderer::{
    run as bench_orderer, BenchReport as OrdererBenchReport, OrdererBenchArgs, RunResult as OrdererBenchRun,
};
