//! Integration tests of `ferrofabric-blockstore-service`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

// The committer's test support (fixture ledgers, TLS material, running daemons) serves the block store too.
#[path = "../../../committer/tests/integration/support/mod.rs"]
mod support;

mod service;
